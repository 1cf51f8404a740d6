#!/usr/bin/env bash
# A screenshot of scripts/grafana-dashboard.json over a real run, with a stand-in for
# Grafana (packaged neither by Debian nor by PyPI): the real Prometheus from Debian scrapes
# two real `salvo send` runs and their `salvo mock` gateways every second, then
# scripts/grafana-standin.py runs every panel's queries against Prometheus's HTTP API and
# draws them in Grafana's layout, and headless Chromium screenshots the page.
#
#   scripts/grafana-standin.sh [OUT.png=results/grafana-dashboard-$(date +%F).png]
#
# The runs: HTTP/2, 600,000 notifications over 2 connections to a mock that answers in
# 20±5 ms with 100 streams, rejects every 500th and drops a connection every 150,000
# requests (resent, reconnects); binary, 3,000,000 notifications over one connection to a
# mock that stalls 30 ms every 1,000 notifications on a connection and rejects every
# 5,000th (error latency; the connection closes after each, so about four stalls per
# rejection hold it near 40,000/s). Installs prometheus and chromium (apt-get) when missing. Prints, per run, the
# report's totals next to Prometheus's last values: they must agree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/grafana-dashboard-$(date -u +%F).png}
salvo="$root/.build/release/salvo"
[ -x "$salvo" ] || (cd "$root" && swift build -c release >&2)
for tool in prometheus chromium; do
  command -v "$tool" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$tool" >&2
done
work=$(mktemp -d /tmp/salvo-grafana-XXXXXX)
pids=()
trap 'kill ${pids[@]+"${pids[@]}"} 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

"$root/scripts/certs.sh" "$work/certs" >/dev/null
server=(--cert "$work/certs/server.pem" --key "$work/certs/server.key" --ca "$work/certs/ca.pem" --require-client-cert)
client=(--cert "$work/certs/client.pem" --key "$work/certs/client.key" --ca "$work/certs/ca.pem")
printf '%s' '{"aps":{"alert":{"title":"Salvo","body":"Your weekly summary is ready."},"badge":1}}' > "$work/payload.json"
python3 - "$work" <<'PY'
import sys
for name, count in (("h2", 600_000), ("binary", 3_000_000)):
    with open(f"{sys.argv[1]}/tokens-{name}", "w") as out:
        out.writelines("5a" * 24 + format(n, "016x") + "\n" for n in range(1, count + 1))
PY
declare -A port=()
for job in send-h2 send-binary mock-h2 mock-binary prometheus; do port[$job]=$(free_port); done

start_mock() {  # start_mock PROTOCOL FLAGS...: the gateway port on stdout
  local proto=$1; shift
  exec {line}< <(exec "$salvo" mock --protocol "$proto" --port 0 --loops 1 "${server[@]}" --report /dev/null "$@" 2>/dev/null)
  pids+=($!)
  read -r -t 60 listening <&"$line"
  sed -n 's/^listening gateway=\([0-9]*\).*/\1/p' <<<"$listening"
}
gateway_h2=$(start_mock h2 --max-streams 100 --response-delay-ms 20:5 --reject-every 500 --drop-every 150000 \
  --metrics-port "${port[mock-h2]}")
gateway_binary=$(start_mock binary --feedback-port 0 --stall-every 1000 --stall-ms 30 --reject-every 5000 \
  --metrics-port "${port[mock-binary]}")

{
  echo "global: {scrape_interval: 1s, scrape_timeout: 1s}"
  echo "scrape_configs:"
  for job in send-h2 send-binary mock-h2 mock-binary; do
    echo "  - {job_name: salvo-$job, static_configs: [{targets: ['127.0.0.1:${port[$job]}']}]}"
  done
} > "$work/prometheus.yml"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:${port[prometheus]}" >"$work/prometheus.log" 2>&1 &
pids+=($!)
prom="http://127.0.0.1:${port[prometheus]}"
for _ in $(seq 1 60); do curl -sf "$prom/-/ready" >/dev/null && break; sleep 0.5; done

began=$(date +%s)
sleep 3  # a few empty scrapes first, as a dashboard shows before a run
# Each sender holds its endpoint 5 s after its run, so the last scrapes see the final counts.
"$salvo" send --protocol h2 --gateway "127.0.0.1:$gateway_h2" "${client[@]}" --tokens "$work/tokens-h2" \
  --payload "$work/payload.json" --topic com.example.salvo --shards 1 --connections 2 --max-connections 2 \
  --report "$work/report-h2.json" \
  --metrics-port "${port[send-h2]}" --metrics-hold 5 >"$work/send-h2.out" 2>&1 &
sender_h2=$!
"$salvo" send --gateway "127.0.0.1:$gateway_binary" "${client[@]}" --tokens "$work/tokens-binary" \
  --payload "$work/payload.json" --shards 1 --connections 1 --max-connections 1 --report "$work/report-binary.json" \
  --metrics-port "${port[send-binary]}" --metrics-hold 5 >"$work/send-binary.out" 2>&1 &
sender_binary=$!
wait "$sender_h2" "$sender_binary"
sleep 2
ended=$(date +%s)

for name in h2 binary; do
  python3 - "$work/report-$name.json" "$prom" "salvo-send-$name" <<'PY'
import json, sys, urllib.parse, urllib.request
report, prom, job = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
def last(metric):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": f'sum(last_over_time({metric}{{job="{job}"}}[1h]))'})
    result = json.load(urllib.request.urlopen(url))["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0
pairs = [(key, report[key], last(f"salvo_sender_{key}_total")) for key in ("submitted", "accepted", "rejected", "failed", "resent", "reconnects")]
print(f"{job}: " + ", ".join(f"{key} report {a} / prometheus {b}" for key, a, b in pairs)
      + ("  (agree)" if all(a == b for _, a, b in pairs) else "  (DIFFER)"))
PY
done

python3 "$root/scripts/grafana-standin.py" "$root/scripts/grafana-dashboard.json" "$prom" "$began" "$ended" 1 "$work/dashboard.html"
height=$(python3 -c "import json; d=json.load(open('$root/scripts/grafana-dashboard.json')); print(max(p['gridPos']['y']+p['gridPos']['h'] for p in d['panels'])*30+70)")
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1600,"$height" \
  --screenshot="$out" "file://$work/dashboard.html" >/dev/null 2>&1
echo "screenshot: $out"
