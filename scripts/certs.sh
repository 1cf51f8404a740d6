#!/bin/sh
# Development certificates for Salvo: a CA, a server certificate for localhost, 127.0.0.1
# and ::1, and a client certificate whose subject looks like Apple's push certificates.
# P-256 keys, SHA-256 signatures, the same set DevelopmentPKI makes in-process (and the
# same file names: ca.pem, server.pem/.key, client.pem/.key, plus ca.key).
#
#   scripts/certs.sh [DIR]        (default: ./certs)
#
# Idempotent: certificates that exist and still verify against the CA are kept; missing or
# invalid ones are made again (all of them when the CA itself is new). Keys are mode 600.
# Never for production.
set -eu

dir=${1:-certs}
days=825
topic=com.example.salvo
client_subject="/UID=$topic/CN=Apple Push Services: $topic/OU=SALVO00000/O=Salvo Development/C=US"

command -v openssl >/dev/null 2>&1 || { echo "certs.sh: the openssl command is needed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

made=""
kept=""

new_key() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
    chmod 600 "$1"
}

# valid NAME: the certificate exists, matches its key and verifies against the CA.
valid() {
    [ -f "$dir/$1.pem" ] && [ -f "$dir/$1.key" ] || return 1
    openssl verify -CAfile "$dir/ca.pem" "$dir/$1.pem" >/dev/null 2>&1 || return 1
    [ "$(openssl x509 -in "$dir/$1.pem" -noout -pubkey)" = "$(openssl pkey -in "$dir/$1.key" -pubout)" ]
}

# issue NAME SUBJECT EXTENSIONS: a key and a certificate signed by the CA.
issue() {
    new_key "$dir/$1.key"
    printf '%s\n' "$3" > "$work/$1.ext"
    openssl req -new -key "$dir/$1.key" -subj "$2" -out "$work/$1.csr"
    openssl x509 -req -in "$work/$1.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
        -CAserial "$work/ca.srl" -days "$days" -sha256 -extfile "$work/$1.ext" -out "$dir/$1.pem" 2>/dev/null
    chmod 644 "$dir/$1.pem"
    made="$made $dir/$1.pem"
}

ca_is_new=no
if [ -f "$dir/ca.pem" ] && [ -f "$dir/ca.key" ] && openssl x509 -in "$dir/ca.pem" -noout -checkend 86400 >/dev/null 2>&1; then
    kept="$kept $dir/ca.pem"
else
    new_key "$dir/ca.key"
    openssl req -x509 -new -key "$dir/ca.key" -subj "/CN=Salvo Development CA/O=Salvo development" \
        -days 3650 -sha256 -out "$dir/ca.pem" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -addext "subjectKeyIdentifier=hash"
    chmod 644 "$dir/ca.pem"
    made="$made $dir/ca.pem"
    ca_is_new=yes
fi

# The server certificate also names 10.78.0.2, the far end of `salvo delay-line`.
if [ $ca_is_new = no ] && valid server; then kept="$kept $dir/server.pem"; else
    issue server "/CN=localhost" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid:always
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1,IP:10.78.0.2"
fi

if [ $ca_is_new = no ] && valid client; then kept="$kept $dir/client.pem"; else
    issue client "$client_subject" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid:always"
fi

for file in $made; do
    echo "made $file: $(openssl x509 -in "$file" -noout -subject -nameopt RFC2253 | sed 's/^subject=//')"
done
for file in $kept; do
    echo "kept $file (still valid)"
done
echo "keys (mode 600): $dir/ca.key $dir/server.key $dir/client.key"
echo "mock:   salvo mock --cert $dir/server.pem --key $dir/server.key --ca $dir/ca.pem --require-client-cert"
echo "sender: salvo send --cert $dir/client.pem --key $dir/client.key --ca $dir/ca.pem ..."
