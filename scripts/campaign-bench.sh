#!/usr/bin/env bash
# A campaign of N notifications from a token file through `salvo send` to `salvo mock`
# running as a separate process on loopback. Prints the sender's rate, its CPU time, its
# peak RSS, its heap allocations (jemalloc's request counter) and the mock's accepted count.
# Needs /usr/bin/time (Debian's `time` package) and python3.
#
#   scripts/campaign-bench.sh [N=10000000] [extra salvo send flags...]
#
# Allocations per notification in steady state: run it for two sizes and divide the
# difference of the "allocations" lines by the difference of N.
set -euo pipefail
count=${1:-10000000}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
salvo="$root/.build/release/salvo"
[ -x "$salvo" ] || (cd "$root" && swift build -c release >&2)
work=$(mktemp -d)
trap 'kill "$mock" 2>/dev/null || true; rm -rf "$work"' EXIT

"$root/scripts/certs.sh" "$work/certs" >/dev/null
python3 - "$count" "$work/tokens.txt" <<'PY'
import sys
count, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as out:
    for n in range(1, count + 1):
        out.write("5a" * 24 + format(n, "016x") + "\n")
PY
printf '{"aps":{"alert":{"title":"Salvo","body":"Your weekly summary is ready."},"badge":1,"sound":"default"}}' > "$work/payload.json"

coproc MOCK { exec "$salvo" mock --port 0 --feedback-port 0 --loops 1 --cert "$work/certs/server.pem" \
  --key "$work/certs/server.key" --ca "$work/certs/ca.pem" --require-client-cert --report "$work/mock.json"; }
mock=$MOCK_PID
read -r line <&"${MOCK[0]}"
port=$(sed -n 's/^listening gateway=\([0-9]*\).*/\1/p' <<<"$line")

MALLOC_CONF=stats_print:true /usr/bin/time -v "$salvo" send --gateway "127.0.0.1:$port" \
  --cert "$work/certs/client.pem" --key "$work/certs/client.key" --ca "$work/certs/ca.pem" \
  --tokens "$work/tokens.txt" --payload "$work/payload.json" --error-wait-ms 50 --ring-mib 8 \
  --report "$work/report.json" "$@" >"$work/send.out" 2>"$work/send.err"
kill -INT "$mock"; wait "$mock" || true

grep -E "^sent |accounting" "$work/send.out"
awk '/Maximum resident set size/ {printf "peak RSS: %.1f MiB\n", $6/1024}' "$work/send.err"
awk -v n="$count" '/User time \(seconds\)/ {u=$4} /System time \(seconds\)/ {s=$4} END {printf "sender CPU: %.2f s user + %.2f s system = %.0f ns per notification (reading and parsing the file included)\n", u, s, (u+s)*1e9/n}' "$work/send.err"
awk '/^Merged arenas stats/{m=1} m && /^total:/{print "allocations:", $7; exit}' "$work/send.err"
python3 -c "import json;r=json.load(open('$work/report.json'));m=json.load(open('$work/mock.json'));print('sender accepted', r['accepted'], 'rate_per_s', round(r['rate_per_s']), '| mock accepted', m['accepted'])"
