#!/usr/bin/env bash
# fixed.sh BIN CONNS_PER_SHARD: peak RSS of salvo send with a fixed connection count and few notifications
bin=$1; n=$2; shift 2
cd /tmp/mem
$bin mock --protocol h2 --host 127.0.0.1 --port 0 --cert server.pem --key server.key --auth-key AuthKey.p8 --key-id RATESKEY01 --team-id RATESTEAM1 --response-delay-ms 300 > mockf.out 2> mockf.err &
mock=$!
for _ in $(seq 1 200); do grep -q listening mockf.out 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' mockf.out)
/usr/bin/time -f "%M" -o timef.out $bin send --protocol h2 --gateway 127.0.0.1:$port --ca ca.pem --topic com.example.rates --auth-key AuthKey.p8 --key-id RATESKEY01 --team-id RATESTEAM1 --tokens tokens20k.txt --payload small.json --report reportf.json --connections $n --max-connections $n "$@" > /dev/null 2> sendf.err
kill $mock; wait $mock 2>/dev/null
echo "conns/shard $n peakRSS $(($(cat timef.out)/1024)) MiB $(python3 -c "import json;r=json.load(open('reportf.json'));print(r['connections'],r['accepted'])")"
