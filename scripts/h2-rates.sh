#!/usr/bin/env bash
# HTTP/2 headline rates at salvo send's defaults (token authentication, default shards,
# connections and streams), against `salvo mock --protocol h2` as a separate process:
#   loopback                 the mock answers at once
#   late-MS                  the mock holds every answer MS ms (--response-delay-ms), for
#                            each MS of --late-ms
#   path-RTT                 the mock in a network namespace behind `salvo delay-line`
#                            (RTT_MS round trip, MTU 1500), answering at once; first, what
#                            one bulk TCP stream carries on that path (the reference)
# Each run checks the accounting exactly: submitted = accepted + rejected + failed, nothing
# failed, and the rejections are the mock's token rules (a token ending in dead: 410
# Unregistered; in fade: 410 ExpiredToken, a few dozen of a million random tokens), and
# prints one line per run: rate, connections, sender CPU per notification and peak RSS (getrusage),
# the bytes the mock read per notification (/proc/PID/io: TLS records on the wire) and so
# the wire rate; the reports land in OUT.
#
#   scripts/h2-rates.sh [--count N=1000000] [--late-ms 100,300] [--rtt-ms 50] [--runs 2]
#                       [--cases loopback,late,path] [--salvo BIN] [--out DIR]
#                       [--send-flags "FLAGS"]   (more salvo send flags, e.g. "--max-connections 48")
#                       [--input tokens|jsonl]   (the campaign as a token list with one payload, the
#                                                default, or as JSONL: a line per notification)
#                       [--payload FILE]         (the payload, in place of the 84-byte alert)
#                       [--mock-salvo BIN]       (the mock's build, when it is not --salvo's: an
#                                                A/B of the sender alone keeps one mock)
#
# Needs a release build (`swift build -c release`), root (namespaces), openssl, python3.
set -euo pipefail
count=1000000 late=100,300 rtt=50 runs=2 out=results/h2-rates cases=loopback,late,path send_flags="" input=tokens payload=""
salvo=$(pwd)/.build/release/salvo mock_salvo=""
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --late-ms) late=$2; shift 2 ;;
    --rtt-ms) rtt=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --salvo) salvo=$(realpath "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --send-flags) send_flags=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    --payload) payload=$(realpath "$2"); shift 2 ;;
    --mock-salvo) mock_salvo=$(realpath "$2"); shift 2 ;;
    *) sed -n '2,26p' "$0" >&2; exit 2 ;;
  esac
done
[ -x "$salvo" ] || { echo "h2-rates.sh: build first: swift build -c release" >&2; exit 2; }
mock_salvo=${mock_salvo:-$salvo}
work=$(mktemp -d /tmp/salvo-h2-rates-XXXXXX)
mkdir -p "$out"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# A CA, a server certificate for loopback and the delay line's far end, a signing key.
. "$(dirname "$0")/h2-fixtures.sh"
h2_fixtures "$work" IP:10.78.0.2
h2_tokens "$work/tokens.txt" "$count"
if [ -n "$payload" ]; then cp "$payload" "$work/payload.json"; fi
auth=(--auth-key "$work/AuthKey.p8" --key-id RATESKEY01 --team-id RATESTEAM1)
campaign=(--tokens "$work/tokens.txt" --payload "$work/payload.json")
if [ "$input" = jsonl ]; then
  python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
payload = open(f"{work}/payload.json").read()
with open(f"{work}/campaign.jsonl", "w") as f:
    for token in open(f"{work}/tokens.txt"):
        f.write('{"token":"%s","payload":%s}\n' % (token.strip(), payload))
PY
  campaign=(--input "$work/campaign.jsonl")
fi

# Starts the mock (optionally inside a namespace); sets $port.
start_mock() {
  rm -f "$work/mock.out"
  local prefix=("$@")
  "${prefix[@]}" "$mock_salvo" mock --protocol h2 --host "$host" --port 0 --cert "$work/server.pem" --key "$work/server.key" \
    "${auth[@]}" $mock_flags > "$work/mock.out" 2> "$work/mock.err" &
  pids+=($!)
  for _ in $(seq 1 200); do grep -q listening "$work/mock.out" 2>/dev/null && break; sleep 0.05; done
  port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' "$work/mock.out")
  [ -n "$port" ] || { echo "h2-rates.sh: the mock did not start: $(cat "$work/mock.err")" >&2; exit 1; }
}

# One fresh mock per run: a mock takes one provider token per team, and refuses a newer
# one signed within 20 minutes (429 TooManyProviderTokenUpdates), as APNs does.
run_case() {
  local name=$1
  for run in $(seq 1 "$runs"); do
    start_mock "${mock_prefix[@]}"
    local report="$out/$name-run$run.json"
    local mock=${pids[-1]}
    /usr/bin/time -f "%U %S %M" -o "$work/time" "$salvo" send --protocol h2 --gateway "$host:$port" --ca "$work/ca.pem" \
      --topic com.example.rates "${auth[@]}" "${campaign[@]}" \
      --report "$report" $send_flags > "$work/send.out" 2> "$work/send.err" || true
    # What the mock read: the requests as TLS records, as they crossed the wire.
    local read_bytes; read_bytes=$(sed -n 's/^rchar: //p' "/proc/$mock/io")
    python3 - "$report" "$count" "$name" "$run" "$work/time" "$work/tokens.txt" "$read_bytes" "$bulk" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); count = int(sys.argv[2])
wire = int(sys.argv[7]) / count
bulk = float(sys.argv[8])
user, system, rss_kib = map(float, open(sys.argv[5]).read().split())
tokens = [line.strip() for line in open(sys.argv[6])]
expected = {"Unregistered": sum(t.endswith("dead") for t in tokens), "ExpiredToken": sum(t.endswith("fade") for t in tokens)}
expected = {k: v for k, v in expected.items() if v}
exact = (r["submitted"] == count and r["accepted"] + r["rejected"] + r["failed"] == r["submitted"]
         and r["failed"] == 0 and r["rejected_by_reason"] == expected)
print(f'{sys.argv[3]} run {sys.argv[4]}: {r["rate_per_s"]:,.0f} /s over {r["seconds"]:.2f} s, connections {r["connections"]}, '
      f'sender CPU {(user + system) / count * 1e6:.2f} us/notif, peak RSS {rss_kib / 1024:.0f} MiB, {wire:.0f} B/notif on the wire '
      f'({r["rate_per_s"] * wire / 1e6:.1f} MB/s' + (f', {r["rate_per_s"] * wire / bulk:.0%} of bulk TCP' if bulk else '') + '), '
      f'accounting {"exact" if exact else "NOT EXACT"} '
      f'(accepted {r["accepted"]}, rejected {r["rejected"]}, failed {r["failed"]}, resent {r["resent"]}; '
      f'connections: {r.get("connections_reason", "")})')
PY
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
  done
}

has_case() { [[ ",$cases," == *",$1,"* ]]; }
bulk=0
host=127.0.0.1 mock_flags="" mock_prefix=(env)
if has_case loopback; then run_case loopback; fi

if has_case late; then
  for delay in ${late//,/ }; do
    mock_flags="--response-delay-ms $delay"
    run_case "late-${delay}ms"
  done
fi

if has_case path; then
  "$salvo" delay-line --delay-ms $((rtt / 2)) --bulk-probe-seconds 5 > "$work/line.out" 2> "$work/line.err" &
  pids+=($!)
  for _ in $(seq 1 400); do grep -q ready "$work/line.out" 2>/dev/null && break; sleep 0.05; done
  ns=$(sed -n 's/.*namespace=\([^ ]*\).*/\1/p' "$work/line.out")
  [ -n "$ns" ] || { echo "h2-rates.sh: no delay line: $(cat "$work/line.err")" >&2; exit 1; }
  bulk=$(sed -n 's/.*bulk_tcp_bytes_per_s=\([0-9.]*\).*/\1/p' "$work/line.out")
  echo "path-${rtt}ms: one bulk TCP stream carries $(python3 -c "print(f'{$bulk / 1e6:.1f}')") MB/s"
  host=10.78.0.2 mock_flags="" mock_prefix=(ip netns exec "$ns")
  run_case "path-${rtt}ms"
fi
