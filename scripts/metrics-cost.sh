#!/usr/bin/env bash
# The hot-path cost of metrics: CPU per notification of `salvo send` without and with
# --metrics-port (scraped every second, as Prometheus would), over the binary protocol and
# HTTP/2, each against `salvo mock` in its own process on loopback (one loop thread,
# certificate authentication). Runs alternate (off, on, then on, off in the next round) so
# that a busy neighbour hits both sides alike; the sender's user + system CPU comes from
# /usr/bin/time; the result is the median per side and the difference of the medians.
#
#   scripts/metrics-cost.sh [--rounds N=5] [--binary-count N=5000000] [--h2-count N=1000000]
#
# Prints one line per run and a markdown table (for results/metrics-cost-DATE.md).
# Needs /usr/bin/time (Debian's `time`), curl and python3; builds the release binary if missing.
set -euo pipefail
rounds=5 binary_count=5000000 h2_count=1000000
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --binary-count) binary_count=$2; shift 2 ;;
    --h2-count) h2_count=$2; shift 2 ;;
    *) echo "metrics-cost.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
salvo="$root/.build/release/salvo"
[ -x "$salvo" ] || (cd "$root" && swift build -c release >&2)
work=$(mktemp -d /tmp/salvo-metrics-cost-XXXXXX)
mocks=() scraper=""
trap 'kill ${mocks[@]+"${mocks[@]}"} $scraper 2>/dev/null || true; rm -rf "$work"' EXIT

"$root/scripts/certs.sh" "$work/certs" >/dev/null
certs=(--cert "$work/certs/client.pem" --key "$work/certs/client.key" --ca "$work/certs/ca.pem")
printf '%s' '{"aps":{"alert":{"title":"Salvo","body":"Your weekly summary is ready."},"badge":1}}' > "$work/payload.json"
python3 - "$work/tokens" "$(( binary_count > h2_count ? binary_count : h2_count ))" <<'PY'
import sys
with open(sys.argv[1], "w") as out:
    out.writelines("5a" * 24 + format(n, "016x") + "\n" for n in range(1, int(sys.argv[2]) + 1))
PY
head -n "$binary_count" "$work/tokens" > "$work/tokens-binary"
head -n "$h2_count" "$work/tokens" > "$work/tokens-h2"

# One mock per protocol for the whole measurement: $port_binary, $port_h2.
for proto in binary h2; do
  extra=(--feedback-port 0); [ "$proto" = h2 ] && extra=()
  exec {mock_out}< <(exec "$salvo" mock --protocol "$proto" --port 0 "${extra[@]}" --loops 1 --cert "$work/certs/server.pem" \
    --key "$work/certs/server.key" --ca "$work/certs/ca.pem" --require-client-cert --report /dev/null)
  mocks+=($!)
  read -r -t 60 line <&"$mock_out"
  declare "port_$proto=$(sed -n 's/^listening gateway=\([0-9]*\).*/\1/p' <<<"$line")"
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

run() {  # run PROTO SIDE ROUND
  local proto=$1 side=$2 round=$3 port metrics=() topic=()
  port=port_$proto
  [ "$proto" = h2 ] && topic=(--topic com.example.salvo)  # the client certificate's bundle id
  if [ "$side" = on ]; then
    local metrics_port; metrics_port=$(free_port)
    metrics=(--metrics-port "$metrics_port")
    (while sleep 1; do curl -s -o /dev/null "http://127.0.0.1:$metrics_port/metrics" || true; done) &
    scraper=$!
  fi
  /usr/bin/time -f "%U %S %e" -o "$work/time" "$salvo" send --protocol "$proto" --gateway "127.0.0.1:${!port}" "${certs[@]}" \
    --tokens "$work/tokens-$proto" --payload "$work/payload.json" --report "$work/report.json" ${topic[@]+"${topic[@]}"} ${metrics[@]+"${metrics[@]}"} \
    >"$work/send.out" 2>"$work/send.err" || { cat "$work/send.out" "$work/send.err" >&2; exit 1; }
  if [ -n "$scraper" ]; then kill "$scraper"; wait "$scraper" 2>/dev/null || true; scraper=""; fi
  read -r user system elapsed < "$work/time"
  python3 - "$proto" "$side" "$round" "$user" "$system" "$elapsed" "$work/report.json" <<'PY' | tee -a "$work/runs.txt"
import json, sys
proto, side, round_, user, system, elapsed, path = sys.argv[1:]
r = json.load(open(path))
assert r["submitted"] == r["accepted"] + r["rejected"] + r["failed"], "incomplete accounting"
assert r["accepted"] >= 0.99 * r["submitted"], f"mostly not accepted: {r['rejected_by_reason']} {r['failed_by_reason']}"
print(proto, side, round_, r["submitted"], user, system, elapsed, "%.1f" % ((float(user) + float(system)) * 1e9 / r["submitted"]))
PY
}

for round in $(seq 1 "$rounds"); do
  order=(off on); [ $((round % 2)) = 0 ] && order=(on off)
  for proto in binary h2; do
    for side in "${order[@]}"; do run "$proto" "$side" "$round"; done
  done
done

python3 - "$work/runs.txt" "$rounds" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
print()
print("| protocol | notifications per run | rounds | CPU per notification, metrics off: median (range) "
      "| metrics on: median (range) | difference of the medians | median of the rounds' on/off ratios |")
print("|---|---|---|---|---|---|---|")
for proto in ("binary", "h2"):
    cost = {(r[1], r[2]): float(r[7]) for r in runs if r[0] == proto}
    off = [v for (side, _), v in cost.items() if side == "off"]
    on = [v for (side, _), v in cost.items() if side == "on"]
    ratios = [cost[("on", n)] / cost[("off", n)] for (side, n) in cost if side == "on" and ("off", n) in cost]
    count = next(r[3] for r in runs if r[0] == proto)
    m_off, m_on = statistics.median(off), statistics.median(on)
    print(f"| {proto} | {int(count):,} | {sys.argv[2]} | {m_off:.0f} ns ({min(off):.0f}–{max(off):.0f}) "
          f"| {m_on:.0f} ns ({min(on):.0f}–{max(on):.0f}) | {100 * (m_on - m_off) / m_off:+.1f} % "
          f"| {100 * (statistics.median(ratios) - 1):+.1f} % |")
PY
