#!/usr/bin/env bash
# Who allocates while `salvo send --protocol h2` runs, per notification: the sender runs
# under jemalloc's allocation profiler (every allocation sampled, counts accumulated) over
# two campaign sizes, against `salvo mock --protocol h2` answering at once; the allocations
# are grouped by the function that called the allocator:
#   swift     Swift code: ours, the standard library, Foundation, ArgumentParser
#   openssl   libssl and libcrypto (handshakes, and inside SSL_write/SSL_read)
#   dispatch  libdispatch (a task resumed on Swift's global executor)
#   other     the rest (the C library, the Swift runtime's metadata)
# Setup costs the same at both sizes; the difference divided by the difference in
# notifications is what each group allocates per notification once running.
#
#   scripts/h2-allocations.sh [--counts 1000000,3000000] [--salvo BIN] [-- SEND_FLAGS...]
#
# SEND_FLAGS go to `salvo send` as they are, e.g. `-- --connections 32` for 64 connections.
# Needs a release build (`swift build -c release`) linked with Debian's jemalloc (its
# profiler is compiled in) and jeprof (libjemalloc-dev).
set -euo pipefail
counts=1000000,3000000
salvo=$(pwd)/.build/release/salvo
while [ $# -gt 0 ]; do
  case "$1" in
    --counts) counts=$2; shift 2 ;;
    --salvo) salvo=$(realpath "$2"); shift 2 ;;
    --) shift; break ;;
    *) sed -n '2,19p' "$0" >&2; exit 2 ;;
  esac
done
[ -x "$salvo" ] || { echo "h2-allocations.sh: build first: swift build -c release" >&2; exit 2; }
command -v jeprof > /dev/null || { echo "h2-allocations.sh: needs jeprof (apt-get install libjemalloc-dev)" >&2; exit 2; }
work=$(mktemp -d /tmp/salvo-h2-allocations-XXXXXX)
mock=""
cleanup() { [ -n "$mock" ] && kill "$mock" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

. "$(dirname "$0")/h2-fixtures.sh"
h2_fixtures "$work"
auth=(--auth-key "$work/AuthKey.p8" --key-id ALLOCKEY01 --team-id ALLOCTEAM1)

# Prints "swift openssl dispatch other total" for one profiled run of COUNT notifications.
profile() {
  local count=$1
  shift
  h2_tokens "$work/tokens.txt" "$count"
  "$salvo" mock --protocol h2 --host 127.0.0.1 --port 0 --cert "$work/server.pem" --key "$work/server.key" \
    "${auth[@]}" > "$work/mock.out" 2> "$work/mock.err" &
  mock=$!
  for _ in $(seq 1 200); do grep -q listening "$work/mock.out" 2>/dev/null && break; sleep 0.05; done
  local port; port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' "$work/mock.out")
  [ -n "$port" ] || { echo "h2-allocations.sh: the mock did not start: $(cat "$work/mock.err")" >&2; exit 1; }
  rm -f "$work"/prof.*.heap
  MALLOC_CONF="prof:true,prof_accum:true,lg_prof_sample:0,prof_final:true,prof_prefix:$work/prof" \
    "$salvo" send --protocol h2 --gateway "127.0.0.1:$port" --ca "$work/ca.pem" --topic com.example.allocations \
    "${auth[@]}" --tokens "$work/tokens.txt" --payload "$work/payload.json" --report "$work/report.json" "$@" \
    > /dev/null 2> "$work/send.err" || true
  kill "$mock"; wait "$mock" 2>/dev/null || true; mock=""
  python3 - "$work/report.json" "$count" <<'PY' >&2
import json, sys
r = json.load(open(sys.argv[1]))
assert r["submitted"] == int(sys.argv[2]) and r["accepted"] + r["rejected"] == r["submitted"] and r["failed"] == 0, r
PY
  jeprof --text --alloc_objects "$salvo" "$work"/prof.*.heap 2> /dev/null | awk '
    NR > 1 && $1 ~ /^[0-9]+$/ {
      symbol = $6
      if (symbol ~ /^(swift_slowAlloc|swift_allocObject)/) swift += $1
      else if (symbol ~ /(CRYPTO_|OPENSSL_|BUF_|ASN1_|BN_|EVP_|X509|PKCS|OBJ_|SSL|OSSL_|ERR_|EC_|RSA_|BIO_|SRP_|COMP_|BF_)/) openssl += $1
      else if (symbol ~ /^_dispatch/) dispatch += $1
      else other += $1
      total += $1
    }
    END { printf "%d %d %d %d %d\n", swift, openssl, dispatch, other, total }'
}

IFS=, read -r small large <<< "$counts"
read -r s1 o1 d1 x1 t1 <<< "$(profile "$small" "$@")"
read -r s2 o2 d2 x2 t2 <<< "$(profile "$large" "$@")"
python3 - "$small" "$large" "$s1 $o1 $d1 $x1 $t1" "$s2 $o2 $d2 $x2 $t2" <<'PY'
import sys
small, large = int(sys.argv[1]), int(sys.argv[2])
a = list(map(int, sys.argv[3].split())); b = list(map(int, sys.argv[4].split()))
print(f"| allocated by | {small:,} notifications | {large:,} notifications | per notification once running |")
print("|---|---|---|---|")
for name, x, y in zip(["Swift code (ours, stdlib, Foundation)", "OpenSSL", "libdispatch", "other", "all"], a, b):
    print(f"| {name} | {x:,} | {y:,} | {(y - x) / (large - small):.4f} |")
PY
