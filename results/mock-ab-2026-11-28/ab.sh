#!/usr/bin/env bash
# ab.sh OLD NEW SENDER ROUNDS: the mock of OLD and of NEW, alternated, each fed by the same
# SENDER binary (1 M tokens, 84-byte payload, loopback, defaults); prints the mock's and the
# sender's CPU per notification (µs) and the rate.
set -u
old=$1 new=$2 sender=$3 rounds=$4
cd /tmp/mockab
tck=$(getconf CLK_TCK)
for r in $(seq 1 $rounds); do
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    $bin mock --protocol h2 --host 127.0.0.1 --port 0 --cert server.pem --key server.key --auth-key AuthKey.p8 --key-id RATESKEY01 --team-id RATESTEAM1 > mock.out 2> mock.err &
    mock=$!
    for _ in $(seq 1 200); do grep -q listening mock.out 2>/dev/null && break; sleep 0.05; done
    port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' mock.out)
    /usr/bin/time -f "%U %S" -o time.out $sender send --protocol h2 --gateway 127.0.0.1:$port --ca ca.pem --topic com.example.rates --auth-key AuthKey.p8 --key-id RATESKEY01 --team-id RATESTEAM1 --tokens tokens.txt --payload payload.json --report report.json > /dev/null 2> send.err
    ticks=$(awk '{print $14 + $15}' /proc/$mock/stat)
    kill $mock; wait $mock 2>/dev/null
    python3 - "$r" "$side" "$ticks" "$tck" <<'PY'
import json, sys
r = json.load(open('report.json')); u, s = map(float, open('time.out').read().split())
n = r['submitted']; ticks = int(sys.argv[3]); tck = int(sys.argv[4])
exact = r['accepted'] + r['rejected'] + r['failed'] == n and r['failed'] == 0
print(f"{sys.argv[1]} {sys.argv[2]} mock {ticks / tck / n * 1e6:.2f} us/notif sender {(u + s) / n * 1e6:.2f} us/notif rate {r['rate_per_s']:,.0f}/s {'exact' if exact else 'NOT EXACT'}")
PY
  done
done
