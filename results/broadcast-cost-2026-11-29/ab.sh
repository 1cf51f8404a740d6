#!/usr/bin/env bash
# ab.sh OUT ROUNDS BIN...: salvo bench's broadcast cell at DELAY ms (default 0) for each build, alternating; prints device and broadcast CPU per million, their ratio, the median run's rates and the connections used.
# RUNS: measured runs per cell (default 5). PREFIX: a command to run each bench under (e.g. "taskset -c 0").
set -u
out=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do
  for bin in "$@"; do
    d=$(mktemp -d)
    ${PREFIX:-} $bin bench --protocol h2 --error-rates 0 --response-delays ${DELAY:-0} --payload-sizes 100 --broadcast-channels 1000 --count 500000 --runs ${RUNS:-5} --output $d --json-only >/dev/null 2>&1
    python3 - "$bin" "$r" $d/h2-*.json <<'PY' | tee -a $out
import json,sys
d=json.load(open(sys.argv[3]))
dev=[c for c in d['cells'] if not c.get('broadcast_channels')][0]; bc=[c for c in d['cells'] if c.get('broadcast_channels')][0]
rate=lambda c: sorted(r['rate'] for r in c['runs'])[len(c['runs']) // 2]
print(f"{sys.argv[1]} round {sys.argv[2]} device {dev['cpu_seconds_per_million']:.3f} broadcast {bc['cpu_seconds_per_million']:.3f} ratio {bc['cpu_seconds_per_million']/dev['cpu_seconds_per_million']:.3f} rates {rate(dev):.0f} {rate(bc):.0f} conns {dev['connections_used']} {bc['connections_used']}")
PY
    rm -rf $d
  done
done
