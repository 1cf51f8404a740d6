#!/usr/bin/env bash
# pairs.sh OUT N BIN: N benches of one measured run per cell (device, then broadcast); prints each pair's CPU and ratio.
out=$1; n=$2; bin=$3
for r in $(seq 1 $n); do
  d=$(mktemp -d)
  $bin bench --protocol h2 --error-rates 0 --response-delays 0 --payload-sizes 100 --broadcast-channels 1000 --count 500000 --runs 1 --output $d --json-only >/dev/null 2>&1
  python3 - "$bin" "$r" $d/h2-*.json <<'PY' | tee -a $out
import json,sys
d=json.load(open(sys.argv[3]))
dev=[c for c in d['cells'] if not c.get('broadcast_channels')][0]; bc=[c for c in d['cells'] if c.get('broadcast_channels')][0]
print(f"{sys.argv[1]} round {sys.argv[2]} device {dev['cpu_seconds_per_million']:.3f} broadcast {bc['cpu_seconds_per_million']:.3f} ratio {bc['cpu_seconds_per_million']/dev['cpu_seconds_per_million']:.3f} rates {dev['rate']['median']:.0f} {bc['rate']['median']:.0f} conns {dev['connections_used']} {bc['connections_used']}")
PY
  rm -rf $d
done
