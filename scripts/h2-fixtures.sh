# Sourced by the HTTP/2 measuring scripts (h2-rates.sh, h2-codec-ab.sh, h2-peers.sh): the
# throwaway files a run against `salvo mock --protocol h2` needs.
#
#   h2_fixtures DIR [SAN]      a CA (DIR/ca.pem), a server certificate for localhost and
#                              127.0.0.1 plus SAN (e.g. IP:10.78.0.2; DIR/server.pem, .key),
#                              a provider-token signing key (DIR/AuthKey.p8) and the 84-byte
#                              alert payload (DIR/payload.json)
#   h2_tokens FILE COUNT [--accepted-only]
#                              COUNT random device tokens, the same for every run (seeded);
#                              --accepted-only leaves out those ending in dead or fade, which
#                              the mock rejects (410)

h2_fixtures() {
  local dir=$1 san="DNS:localhost,IP:127.0.0.1${2:+,$2}"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=h2-fixtures-ca \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  printf 'subjectAltName=%s\n' "$san" > "$dir/san.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
    -extfile "$dir/san.ext" -out "$dir/server.pem" 2>/dev/null
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/AuthKey.p8" 2>/dev/null
  chmod 600 "$dir/AuthKey.p8" "$dir/server.key"
  printf '{"aps":{"alert":{"title":"Salvo","body":"Your weekly summary is ready."},"badge":1}}' > "$dir/payload.json"
}

h2_tokens() {
  python3 - "$1" "$2" "${3:-}" <<'PY'
import sys, random
random.seed(7)
path, count, accepted_only = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "--accepted-only"
with open(path, "w") as f:
    n = 0
    while n < count:
        t = "%064x" % random.getrandbits(256)
        if accepted_only and t.endswith(("dead", "fade")):
            continue
        f.write(t + "\n")
        n += 1
PY
}
