#!/usr/bin/env bash
# prof4.sh BIN TAG: perf of the 0 ms device and broadcast cells at 4 connections; mock and sender samples per cell.
bin=$1; tag=$2; out=/tmp/prof4-$tag; rm -rf $out; mkdir -p $out
LD_LIBRARY_PATH=/tmp/salvo-profile-known/nghttp2 perf record -F 1999 -g -a -o $out/perf.data -- $bin bench --protocol h2 --error-rates 0 --response-delays 0 --payload-sizes 100 --broadcast-channels 1000 --count 500000 --runs 3 --connections 4 --output $out/bench --json-only > /dev/null 2>&1
perf script -F comm,tid,time,ip,sym -i $out/perf.data 2>/dev/null | python3 /work/main/results/hpack-runs-2026-11-29/split.py ${3:-12} mock-h2-0,salvo-shard-0,oot.default-qos | cut -c1-140
python3 -c "
import json,glob
d=json.load(open(glob.glob('$out/bench/h2-*.json')[0]))
for c in d['cells']:
  print(c.get('broadcast_channels'), round(c['cpu_seconds_per_million'],3), [round(r['rate']) for r in c['runs']], c['connections_used'])
"
