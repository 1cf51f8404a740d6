#!/usr/bin/env bash
# CPU A/B of two built `salvo` binaries: alternating single-run benches of the same cells
# (1 connection, no errors and 1 in 1000 rejected, 100-byte payloads), the sender's user
# and system CPU from getrusage per run, and per cell the median ratio B/A over the rounds.
# CPU per notification is steadier than the rate on a shared machine, but not immune:
# read the spread, not one round.
#
#   scripts/cpu-ab.sh A_BINARY B_BINARY [--rounds N=6] [--count N=1000000]
#
# Example (A: a build of 9fc5c7f by scripts/compare.sh; B: this tree):
#   scripts/cpu-ab.sh .build-compare/build-rev/release/salvo .build/release/salvo
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
a=$1 b=$2; shift 2
rounds=6 count=1000000
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    *) echo "cpu-ab.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d /tmp/salvo-cpu-ab-XXXXXX)
trap 'rm -rf "$work"' EXIT
for round in $(seq 1 "$rounds"); do
  for side in A B; do
    bin=$a; [ "$side" = B ] && bin=$b
    rm -rf "$work/out"
    "$bin" bench --connections 1 --error-rates 0,0.001 --payload-sizes 100 --count "$count" --runs 1 --no-warmup \
      --json-only --output "$work/out" > "$work/bench.log" 2>&1 || { cat "$work/bench.log" >&2; exit 1; }
    python3 - "$side" "$round" "$work"/out/*.json >> "$work/runs.txt" <<'PY'
import json, sys
for cell in json.load(open(sys.argv[3]))["cells"]:
    run = cell["runs"][0]
    print(sys.argv[1], sys.argv[2], cell["error_rate"], run["cpu_user_seconds"], run["cpu_system_seconds"], run["rate"])
PY
  done
done
cat "$work/runs.txt"
python3 - "$work/runs.txt" <<'PY'
import collections, statistics, sys
rounds = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    side, rnd, rate, user, system, r = line.split()
    rounds[(rnd, rate)][side] = (float(user), float(system), float(r))
for rate in sorted({k[1] for k in rounds}, key=float):
    keys = [k for k in rounds if k[1] == rate]
    user = [rounds[k]["B"][0] / rounds[k]["A"][0] for k in keys]
    total = [sum(rounds[k]["B"][:2]) / sum(rounds[k]["A"][:2]) for k in keys]
    speed = [rounds[k]["B"][2] / rounds[k]["A"][2] for k in keys]
    errors = "none" if float(rate) == 0 else f"1/{round(1 / float(rate)):,}"
    print(f"errors {errors}: B/A over {len(keys)} rounds: user CPU {statistics.median(user):.3f} "
          f"({min(user):.2f}-{max(user):.2f}), user+system {statistics.median(total):.3f} "
          f"({min(total):.2f}-{max(total):.2f}), rate {statistics.median(speed):.3f}")
PY
