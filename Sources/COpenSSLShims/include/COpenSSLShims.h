#ifndef SALVO_COPENSSLSHIMS_H
#define SALVO_COPENSSLSHIMS_H

// OpenSSL exposes several settings as function-like macros, which Swift cannot call.
// These static inline wrappers give them a callable form; nothing else lives here.

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

static inline long salvo_SSL_set_partial_write_modes(SSL *ssl) {
    return SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

static inline long salvo_SSL_CTX_set_min_tls12(SSL_CTX *ctx) {
    return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}

static inline long salvo_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_max_proto_version(ctx, version);
}

static inline int salvo_TLS1_2_VERSION(void) { return TLS1_2_VERSION; }
static inline int salvo_TLS1_3_VERSION(void) { return TLS1_3_VERSION; }

/// Resumes `session` offering no newer TLS version than it was made with. A TLS 1.2 session
/// then needs no TLS 1.3 key share in the ClientHello: no key to generate for a handshake
/// that resumes without a key exchange.
static inline int salvo_SSL_resume_session(SSL *ssl, SSL_SESSION *session) {
    if (SSL_SESSION_get_protocol_version(session) == TLS1_2_VERSION)
        SSL_set_max_proto_version(ssl, TLS1_2_VERSION);
    return SSL_set_session(ssl, session);
}

/// Reads as much as the socket holds, up to `buffer` bytes, instead of one record header
/// and then its body: one read call brings several records.
static inline void salvo_SSL_CTX_set_read_ahead(SSL_CTX *ctx, size_t buffer) {
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, buffer);
}

static inline long salvo_SSL_CTX_set_release_buffers(SSL_CTX *ctx) {
    return SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
}

static inline uint64_t salvo_SSL_CTX_set_options(SSL_CTX *ctx, uint64_t options) {
    return SSL_CTX_set_options(ctx, options);
}

static inline uint64_t salvo_SSL_OP_ENABLE_KTLS(void) { return SSL_OP_ENABLE_KTLS; }
static inline uint64_t salvo_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }

static inline long salvo_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

static inline int salvo_BIO_get_ktls_send(SSL *ssl) {
    return BIO_get_ktls_send(SSL_get_wbio(ssl));
}

static inline int salvo_BIO_get_ktls_recv(SSL *ssl) {
    return BIO_get_ktls_recv(SSL_get_rbio(ssl));
}

static inline void salvo_SSL_CTX_set_default_passwd(SSL_CTX *ctx, void *userdata) {
    SSL_CTX_set_default_passwd_cb_userdata(ctx, userdata);
}

static inline long salvo_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *certificate) {
    return SSL_CTX_add1_chain_cert(ctx, certificate);
}

static inline long salvo_SSL_CTX_set_client_session_cache(SSL_CTX *ctx) {
    // Sessions are kept by the caller (one per connection slot), not in a context-wide store.
    return SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
}

static inline void salvo_SSL_CTX_set_server_session_cache(SSL_CTX *ctx, long size, int tls12_only) {
    // Up to TLS 1.2, sessions stay in the server's memory and are found by id: a ticket
    // would be decrypted and deserialized on every resumption, the client certificate in it
    // included, and in OpenSSL 3 that decoding is most of the cost of a resumed handshake.
    // At TLS 1.3 tickets stay stateless: OpenSSL makes a stateful one single-use, and a
    // client that offers one twice (a standby opened before the next ticket arrived) would
    // get a full handshake. A client's close without close_notify is just a close: as a
    // fatal error it would evict its session.
    SSL_CTX_set_options(ctx, (tls12_only ? SSL_OP_NO_TICKET : 0) | SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, size);
}

/// Marks the connection shut down without sending anything, so that freeing it keeps its
/// session resumable (OpenSSL evicts the session of a connection freed otherwise).
static inline void salvo_SSL_keep_session(SSL *ssl) {
    SSL_set_quiet_shutdown(ssl, 1);
    SSL_shutdown(ssl);
    ERR_clear_error();
}

/// A fresh P-256 key (EVP_EC_gen is a variadic macro).
static inline EVP_PKEY *salvo_EVP_EC_gen_P256(void) {
    return EVP_EC_gen("P-256");
}

/// The bytes a memory BIO holds (BIO_get_mem_data is a macro).
static inline long salvo_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

/// Sets the ALPN list a server selects from (the callback needs a C function pointer).
/// `prefixed` is a little-endian u16 length followed by the ALPN wire list; the caller
/// keeps it alive as long as the context.
void salvo_SSL_CTX_set_alpn_server_protocols(SSL_CTX *ctx, const unsigned char *prefixed);

#endif
