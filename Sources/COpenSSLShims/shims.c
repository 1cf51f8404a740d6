#include "COpenSSLShims.h"

static int salvo_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                             const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl;
    const unsigned char *server = (const unsigned char *)arg;
    unsigned int serverLength = server[0] | (server[1] << 8);
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, outlen, server + 2, serverLength, in, inlen) != OPENSSL_NPN_NEGOTIATED) {
        // RFC 7301 §3.2: a client offering none of our protocols gets no_application_protocol.
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
}

void salvo_SSL_CTX_set_alpn_server_protocols(SSL_CTX *ctx, const unsigned char *prefixed) {
    SSL_CTX_set_alpn_select_cb(ctx, salvo_alpn_select, (void *)prefixed);
}
