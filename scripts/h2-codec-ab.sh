#!/usr/bin/env bash
# A/B of salvo builds' HTTP/2 sender CPU per notification, in one run, alternating: rounds
# of (A, B, ...), each a `salvo send --protocol h2` of COUNT random tokens with token
# authentication against a fresh `salvo mock --protocol h2` (the mock of build A for all,
# so the server is the same), loopback, as scripts/h2-rates.sh's loopback case. Each run
# prints its rate, connections, sender CPU per notification (user + system, /usr/bin/time),
# the bytes the mock read per notification (TLS records) and whether the accounting is exact (submitted = accepted + rejected, nothing failed,
# the rejections are the mock's token rules); the end prints medians per build.
#
#   scripts/h2-codec-ab.sh A_BIN B_BIN [C_BIN...] [--count N=1000000] [--rounds R=3]
#                          [-- SEND_FLAGS...]
#
# SEND_FLAGS go to every `salvo send` (e.g. `--connections 4 --max-connections 4`).
set -euo pipefail
builds=()
while [ $# -gt 0 ] && [[ "$1" != -* ]]; do builds+=("$(realpath "$1")"); shift; done
count=1000000 rounds=3 send_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --) shift; send_flags=("$@"); break ;;
    *) sed -n '2,14p' "$0" >&2; exit 2 ;;
  esac
done
[ ${#builds[@]} -ge 2 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
a=${builds[0]}
labels=(A B C D E F)
work=$(mktemp -d /tmp/salvo-h2-ab-XXXXXX)
mock_pid=""
cleanup() { [ -z "$mock_pid" ] || kill "$mock_pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

. "$(dirname "$0")/h2-fixtures.sh"
h2_fixtures "$work"
h2_tokens "$work/tokens.txt" "$count"
auth=(--auth-key "$work/AuthKey.p8" --key-id RATESKEY01 --team-id RATESTEAM1)

# One run of build $2 labelled $1, against a fresh mock (a mock takes one provider token per team).
run() {
  local label=$1 salvo=$2
  rm -f "$work/mock.out"
  "$a" mock --protocol h2 --host 127.0.0.1 --port 0 --cert "$work/server.pem" --key "$work/server.key" "${auth[@]}" \
    > "$work/mock.out" 2> "$work/mock.err" &
  mock_pid=$!
  for _ in $(seq 1 200); do grep -q listening "$work/mock.out" 2>/dev/null && break; sleep 0.05; done
  local port; port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' "$work/mock.out")
  [ -n "$port" ] || { echo "h2-codec-ab.sh: the mock did not start: $(cat "$work/mock.err")" >&2; exit 1; }
  /usr/bin/time -f "%U %S" -o "$work/time" "$salvo" send --protocol h2 --gateway "127.0.0.1:$port" --ca "$work/ca.pem" \
    --topic com.example.rates "${auth[@]}" --tokens "$work/tokens.txt" --payload "$work/payload.json" \
    --report "$work/report.json" "${send_flags[@]}" > "$work/send.out" 2> "$work/send.err" || true
  # What the mock read: the requests as TLS records, as they crossed the wire.
  local read_bytes; read_bytes=$(sed -n 's/^rchar: //p' "/proc/$mock_pid/io")
  kill "$mock_pid"; wait "$mock_pid" 2>/dev/null || true; mock_pid=""
  python3 - "$label" "$work/report.json" "$count" "$work/time" "$work/tokens.txt" "$read_bytes" <<'PY' | tee -a "$work/runs"
import json, sys
label, report, count, timing, tokens = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3]), sys.argv[4], sys.argv[5]
wire = int(sys.argv[6]) / count
user, system = map(float, open(timing).read().split())
tokens = [line.strip() for line in open(tokens)]
expected = {"Unregistered": sum(t.endswith("dead") for t in tokens), "ExpiredToken": sum(t.endswith("fade") for t in tokens)}
expected = {k: v for k, v in expected.items() if v}
r = report
exact = (r["submitted"] == count and r["accepted"] + r["rejected"] + r["failed"] == r["submitted"]
         and r["failed"] == 0 and r["rejected_by_reason"] == expected)
print(f'{label} {(user + system) / count * 1e6:.2f} us/notif {r["rate_per_s"]:.0f}/s connections {r["connections"]} '
      f'user {user:.2f} s system {system:.2f} s {wire:.0f} B/notif on the wire accounting {"exact" if exact else "NOT EXACT"} '
      f'(accepted {r["accepted"]}, rejected {r["rejected"]}, failed {r["failed"]})')
PY
}

for label in "${!builds[@]}"; do echo "${labels[$label]}: ${builds[$label]}"; done
for round in $(seq 1 "$rounds"); do
  for build in "${!builds[@]}"; do run "${labels[$build]}" "${builds[$build]}"; done
done
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
for label in sorted({r[0] for r in runs}):
    cpu = [float(r[1]) for r in runs if r[0] == label]
    rate = [float(r[3].rstrip("/s")) for r in runs if r[0] == label]
    exact = all("exact" in " ".join(r) and "NOT" not in " ".join(r) for r in runs if r[0] == label)
    print(f"median {label}: {statistics.median(cpu):.2f} us/notif, {statistics.median(rate):,.0f}/s "
          f"over {len(cpu)} runs, accounting {'exact in all' if exact else 'NOT EXACT in some'}")
PY
