#!/usr/bin/env bash
# `salvo serve` against `salvo send`, in one sitting, against one `salvo mock --protocol h2`
# (its own process, answering at once, token authentication):
#   send      salvo send of a JSONL file of COUNT notifications: the reference rate
#   batches   salvo serve taking batches of 1,000 from wrk over keep-alive (4 connections,
#             DURATION s): notifications taken per second (what the mock accepted), and
#             the share of salvo send's rate
#   singles   salvo serve taking one notification per request from 64 keep-alive wrk
#             connections (DURATION s): requests per second, latency p50/p99; and the same
#             load on GET /health, which sends nothing: the HTTP server's own ceiling here
#   flood     salvo serve with answers held 300 ms, --queue-limit 20000 and --status-limit
#             100000, flooded with batches faster than they are answered (most requests
#             get 429): its RSS each second, to show memory stays flat (it follows those two
#             limits, never the callers' speed)
# Rounds alternate send and batches; medians and the ratio per round are printed and
# written to OUT/serve-rates.json, the wrk outputs beside it.
#
#   scripts/serve-rates.sh [--salvo BIN] [--count N=1000000] [--duration S=10] [--rounds N=3]
#                          [--out DIR=results/serve]
#
# Needs a release build (`swift build -c release`), wrk, openssl, python3.
set -euo pipefail
salvo=$(pwd)/.build/release/salvo count=1000000 duration=10 rounds=3 out=results/serve
while [ $# -gt 0 ]; do
  case "$1" in
    --salvo) salvo=$(realpath "$2"); shift 2 ;;
    --count) count=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '2,19p' "$0" >&2; exit 2 ;;
  esac
done
[ -x "$salvo" ] || { echo "serve-rates.sh: build first: swift build -c release" >&2; exit 2; }
command -v wrk > /dev/null || { echo "serve-rates.sh: needs wrk (apt-get install wrk)" >&2; exit 2; }
work=$(mktemp -d /tmp/salvo-serve-rates-XXXXXX)
mkdir -p "$out"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

. "$(dirname "$0")/h2-fixtures.sh"
h2_fixtures "$work"
auth=(--auth-key "$work/AuthKey.p8" --key-id RATESKEY01 --team-id RATESTEAM1)
# Tokens the mock accepts (none ending in dead or fade), as JSONL for send and as the
# bodies wrk posts: one batch of 1,000, one notification.
h2_tokens "$work/tokens.txt" "$count" --accepted-only
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
payload = json.load(open(f"{work}/payload.json"))
tokens = [t.strip() for t in open(f"{work}/tokens.txt")]
with open(f"{work}/campaign.jsonl", "w") as f:
    for t in tokens:
        f.write(json.dumps({"token": t, "payload": payload}, separators=(",", ":")) + "\n")
batch = json.dumps([{"token": t, "payload": payload} for t in tokens[:1000]], separators=(",", ":"))
single = json.dumps({"token": tokens[0], "payload": payload}, separators=(",", ":"))
for name, body in (("batch", batch), ("single", single)):
    with open(f"{work}/{name}.lua", "w") as f:
        f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n')
        f.write("wrk.body = " + json.dumps(body) + "\n")
PY

# Starts a process in the background, waits for PATTERN in its FILE, prints its pid.
start() {
  local file=$1 pattern=$2; shift 2
  "$@" > "$file" 2>&1 &
  local pid=$!
  for _ in $(seq 1 400); do grep -q "$pattern" "$file" 2>/dev/null && break; sleep 0.05; done
  grep -q "$pattern" "$file" || { echo "serve-rates.sh: $* did not start: $(cat "$file")" >&2; exit 1; }
  echo "$pid"
}

# One fresh mock per run (a mock takes one provider token per team in 20 minutes); sets $port, $mock.
start_mock() {
  mock=$(start "$work/mock.out" listening "$salvo" mock --protocol h2 --port 0 --cert "$work/server.pem" \
    --key "$work/server.key" "${auth[@]}" "$@")
  pids+=("$mock")
  port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' "$work/mock.out")
}
# SIGTERM, then waits (bounded) until the process is gone: also from a subshell, where wait cannot.
stop() {
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 1 600); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
  echo "serve-rates.sh: process $1 did not stop" >&2; exit 1
}

# salvo serve against the mock; sets $serve, $url.
start_serve() {
  serve=$(start "$work/serve.out" "listening on" "$salvo" serve --listen 127.0.0.1:0 --gateway "127.0.0.1:$port" \
    --protocol h2 --ca "$work/ca.pem" --topic com.example.rates "${auth[@]}" "$@")
  pids+=("$serve")
  url=$(sed -n 's/.*listening on \(http:[^ ]*\)/\1/p' "$work/serve.out")
}

# Stops the mock and prints what it accepted (its report, written on SIGTERM).
accepted_by_mock() {
  stop "$mock"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["accepted"])' "$work/mock-report.json"
}

results="$work/results.txt"
for round in $(seq 1 "$rounds"); do
  # send: the reference.
  start_mock --report "$work/mock-report.json"
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$salvo" send --protocol h2 --gateway "127.0.0.1:$port" \
    --ca "$work/ca.pem" --topic com.example.rates "${auth[@]}" --input "$work/campaign.jsonl" \
    --report "$work/send.json" > /dev/null 2> "$work/send.err"
  python3 - "$work/send.json" "$round" >> "$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"send {sys.argv[2]} rate {r['submitted'] / r['seconds']:.0f} accepted {r['accepted']}")
PY
  stop "$mock"

  # batches of 1,000 over keep-alive.
  start_mock --report "$work/mock-report.json"
  start_serve --queue-limit 100000
  wrk -t2 -c4 -d"${duration}s" -s "$work/batch.lua" "$url" > "$out/wrk-batches-round$round.txt"
  stop "$serve"
  accepted=$(accepted_by_mock)
  echo "batches $round rate $(python3 -c "print(round($accepted / $duration))") accepted $accepted" >> "$results"
done

# singles from 64 keep-alive connections.
start_mock --report "$work/mock-report.json"
start_serve
wrk -t2 -c64 -d"${duration}s" --latency -s "$work/single.lua" "$url" > "$out/wrk-singles.txt"
wrk -t2 -c64 -d"${duration}s" --latency "${url%/v1/notifications}/health" > "$out/wrk-health.txt"
stop "$serve"
echo "singles accepted $(accepted_by_mock)" >> "$results"

# flood: answers held 300 ms, a queue of 20,000, batches as fast as wrk can post them.
start_mock --report "$work/mock-report.json" --response-delay-ms 300
start_serve --queue-limit 20000 --status-limit 100000
wrk -t2 -c8 -d"$((duration * 2))s" -s "$work/batch.lua" "$url" > "$out/wrk-flood.txt" &
flood=$!
for _ in $(seq 1 $((duration * 2))); do
  sleep 1
  echo "rss $(awk '/VmRSS/ {print $2}' "/proc/$serve/status")" >> "$results"
done
wait "$flood"
stop "$serve"
echo "flood accepted $(accepted_by_mock)" >> "$results"

python3 - "$results" "$out" "$duration" <<'PY'
import json, re, statistics, sys
results, out, duration = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(results).read().splitlines()
send = {int(m[1]): float(m[2]) for m in (re.match(r"send (\d+) rate (\S+)", l) for l in lines) if m}
batches = {int(m[1]): float(m[2]) for m in (re.match(r"batches (\d+) rate (\S+)", l) for l in lines) if m}
ratios = [batches[r] / send[r] for r in sorted(send) if r in batches]
rss = [int(l.split()[1]) // 1024 for l in lines if l.startswith("rss ")]
singles = open(f"{out}/wrk-singles.txt").read()
requests = float(re.search(r"Requests/sec:\s+([\d.]+)", singles)[1])
health = float(re.search(r"Requests/sec:\s+([\d.]+)", open(f"{out}/wrk-health.txt").read())[1])
latency = dict(re.findall(r"^\s+(\d+)%\s+(\S+)$", singles, re.M))
flood = open(f"{out}/wrk-flood.txt").read()
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", flood)
summary = {
    "send_rate_median": statistics.median(send.values()),
    "batches_rate_median": statistics.median(batches.values()),
    "batches_share_of_send": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
    "singles_requests_per_second": requests,
    "singles_latency": latency,
    "health_requests_per_second": health,
    "flood_rss_mib": rss,
    "flood_requests_refused_429": int(non2xx[1]) if non2xx else 0,
    "rounds": {"send": send, "batches": batches},
}
json.dump(summary, open(f"{out}/serve-rates.json", "w"), indent=2)
print(f"send (JSONL file): {summary['send_rate_median']:,.0f}/s median; serve batches of 1,000: "
      f"{summary['batches_rate_median']:,.0f}/s median, {summary['batches_share_of_send']['median']:.0%} of send "
      f"({min(ratios):.0%}-{max(ratios):.0%} over {len(ratios)} rounds)")
print(f"serve singles, 64 keep-alive connections: {requests:,.0f} requests/s, latency p50 {latency.get('50')} "
      f"p99 {latency.get('99')}; GET /health (sends nothing) {health:,.0f} requests/s")
half = rss[len(rss) // 2:]
print(f"flood (answers held 300 ms, queue 20,000, statuses 100,000, {summary['flood_requests_refused_429']:,} requests answered 429): "
      f"RSS {min(rss)}-{max(rss)} MiB over {len(rss)} s, {min(half)}-{max(half)} MiB in the second half")
PY
