#!/usr/bin/env bash
# The rate of `salvo send --protocol h2` through a local proxy against the rate direct: one
# mock, one campaign, and in each round a direct run, a run through tinyproxy (HTTP CONNECT
# with Basic credentials) and one through microsocks (SOCKS5 with a user and password),
# alternating. Per run: the rate (accepted ÷ the report's seconds), the sender's CPU per
# notification and the proxy's CPU per notification (from /proc, user + system), so that
# what the proxy's own copying costs is seen beside the rate.
#
#   scripts/proxy-rates.sh [--salvo BIN=.build/release/salvo] [--count N=300000] [--rounds N=3]
set -euo pipefail
salvo=.build/release/salvo count=300000 rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --salvo) salvo=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "proxy-rates.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for tool in tinyproxy microsocks python3; do
  command -v "$tool" >/dev/null || { echo "proxy-rates.sh: $tool is not installed" >&2; exit 2; }
done
salvo=$(realpath "$salvo")
work=$(mktemp -d /tmp/salvo-proxy-rates-XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

python3 - "$work/c.jsonl" "$count" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for n in range(1, int(sys.argv[2]) + 1):
        f.write('{"token":"%s%016x","payload":{"aps":{"alert":"campaign"},"n":%d}}\n' % ("a5" * 24, n, n))
PY

"$salvo" mock --protocol h2 --port 0 >"$work/mock.out" 2>"$work/mock.err" &
pids+=($!)
for _ in $(seq 1 100); do grep -q '^listening' "$work/mock.out" 2>/dev/null && break; sleep 0.1; done
gateway=$(sed -n 's/^listening gateway=\([0-9]*\).*/\1/p' "$work/mock.out")
certs=$(sed -n 's/.*throwaway certificates in \([^ ]*\) .*/\1/p' "$work/mock.err")
[ -n "$gateway" ] && [ -n "$certs" ] || { echo "proxy-rates.sh: the mock did not start: $(cat "$work/mock.err")" >&2; exit 1; }

http_port=$(free_port) socks_port=$(free_port)
printf 'Port %s\nListen 127.0.0.1\nTimeout 60\nMaxClients 512\nLogLevel Warning\nBasicAuth salvo pw\nConnectPort %s\n' \
  "$http_port" "$gateway" >"$work/tinyproxy.conf"
tinyproxy -d -c "$work/tinyproxy.conf" >"$work/tinyproxy.log" 2>&1 &
tinyproxy_pid=$!
pids+=($tinyproxy_pid)
microsocks -i 127.0.0.1 -p "$socks_port" -u salvo -P pw >"$work/microsocks.log" 2>&1 &
microsocks_pid=$!
pids+=($microsocks_pid)
sleep 1

hz=$(getconf CLK_TCK)
run() {  # run NAME PROXY_PID [send flags…]
  local name=$1 proxy_pid=$2; shift 2
  local before=0
  [ "$proxy_pid" = - ] || before=$(cpu_ticks "$proxy_pid")
  /usr/bin/time -f '%U %S' -o "$work/time" \
    "$salvo" send --protocol h2 --gateway "127.0.0.1:$gateway" --input "$work/c.jsonl" --topic com.example.app \
      --cert "$certs/client.pem" --key "$certs/client.key" --ca "$certs/ca.pem" \
      --report "$work/report.json" "$@" >/dev/null 2>"$work/send.err" || { cat "$work/send.err" >&2; exit 1; }
  local proxy_ticks=0
  [ "$proxy_pid" = - ] || proxy_ticks=$(( $(cpu_ticks "$proxy_pid") - before ))
  python3 - "$work/report.json" "$work/time" "$name" "$proxy_ticks" "$hz" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
user, system = map(float, open(sys.argv[2]).read().split())
accepted, seconds = report["accepted"], report["seconds"]
proxy = int(sys.argv[4]) / int(sys.argv[5])
print(f"{sys.argv[3]}: {accepted / seconds:,.0f} /s, sender CPU {(user + system) / accepted * 1e6:.2f} us/notif, "
      f"proxy CPU {proxy / accepted * 1e6:.2f} us/notif, accepted {accepted}, failed {report['failed']}, "
      f"connections {report['connections']}")
PY
}

for round in $(seq 1 "$rounds"); do
  run "round $round direct" -
  run "round $round tinyproxy" "$tinyproxy_pid" --proxy "http://salvo:pw@127.0.0.1:$http_port"
  run "round $round microsocks" "$microsocks_pid" --proxy "socks5://salvo:pw@127.0.0.1:$socks_port"
done
