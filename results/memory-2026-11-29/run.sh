#!/usr/bin/env bash
# run.sh BIN [salvo send flags]: issue #39's memory run. 1.5 M device tokens, a 21-byte
# payload, the mock holding every answer 300 ms, salvo send at its defaults (token
# authentication). Prints the rate, connections, sender CPU per notification and peak RSS,
# and an smaps breakdown near the peak. Fixtures go to /tmp/mem (made on the first run).
set -u
bin=$(realpath "$1"); shift
scripts=$(cd "$(dirname "$0")/../../scripts" && pwd)
mkdir -p /tmp/mem && cd /tmp/mem
if [ ! -f tokens.txt ]; then
  . "$scripts/h2-fixtures.sh"
  h2_fixtures /tmp/mem
  h2_tokens /tmp/mem/tokens.txt 1500000
  printf '{"aps":{"badge":123}}' > small.json
fi
$bin mock --protocol h2 --host 127.0.0.1 --port 0 --cert server.pem --key server.key --auth-key AuthKey.p8 --key-id RATESKEY01 --team-id RATESTEAM1 --response-delay-ms 300 > mock.out 2> mock.err &
mock=$!
for _ in $(seq 1 200); do grep -q listening mock.out 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' mock.out)
/usr/bin/time -f "%U %S %M" -o time.out $bin send --protocol h2 --gateway 127.0.0.1:$port --ca ca.pem --topic com.example.rates --auth-key AuthKey.p8 --key-id RATESKEY01 --team-id RATESTEAM1 --tokens tokens.txt --payload small.json --report report.json "$@" > send.out 2> send.err &
tpid=$!
sleep 1
send=$(pgrep -P $tpid)
peak=0
while kill -0 $send 2>/dev/null; do
  r=$(awk '/VmRSS/{print $2}' /proc/$send/status 2>/dev/null)
  if [ -n "$r" ] && [ "$r" -gt "$peak" ]; then peak=$r; cp /proc/$send/smaps smaps.peak 2>/dev/null; fi
  sleep 0.2
done
wait $tpid
kill $mock; wait $mock 2>/dev/null
python3 - <<'PY'
import json, re
r = json.load(open('report.json')); u, s, m = map(float, open('time.out').read().split())
print("reason:", r.get("connections_reason", ""))
print(f"rate {r['rate_per_s']:,.0f}/s connections {r['connections']} cpu {(u+s)/r['submitted']*1e6:.2f} us/notif peakRSS {m/1024:.0f} MiB accepted {r['accepted']} rejected {r['rejected']} failed {r['failed']}")
cur = None; agg = {}
for line in open('smaps.peak'):
    if re.match(r'^[0-9a-f]+-[0-9a-f]+ ', line):
        parts = line.split(); cur = parts[5] if len(parts) > 5 else '[anon]'
    elif line.startswith('Rss:'):
        agg[cur] = agg.get(cur, 0) + int(line.split()[1])
for k, v in sorted(agg.items(), key=lambda x: -x[1])[:6]: print(f'  {v/1024:8.1f} MiB  {k}')
PY
