#!/usr/bin/env bash
# CPU A/B of two built `salvo` binaries over HTTP/2: alternating runs of scripts/h2-rates.sh
# (salvo send at its defaults against `salvo mock --protocol h2` in its own process), per
# case the sender's CPU per notification, its rate and peak RSS, and the median ratio B/A
# over the rounds. Run both sides in one sitting: the machine's load moves both alike.
#
#   scripts/h2-cpu-ab.sh A_BINARY B_BINARY [--rounds N=3] [--count N=1000000]
#                        [--cases loopback,late] [--late-ms 100] [--input tokens|jsonl]
#                        [--send-flags "FLAGS"] [--mock-salvo BIN]
#
# --mock-salvo BIN runs every mock from BIN: an A/B of the sender alone, which a change to
# the mock (in B's build) cannot move. --send-flags: more salvo send flags for both sides.
#
# Example (A: the commit before a change, built in a worktree; B: this tree):
#   scripts/h2-cpu-ab.sh ../base/.build/release/salvo .build/release/salvo
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
a=$(realpath "$1") b=$(realpath "$2"); shift 2
rounds=3 count=1000000 cases=loopback,late late=100 input=tokens send_flags="" mock=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --late-ms) late=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    --send-flags) send_flags=$2; shift 2 ;;
    --mock-salvo) mock=(--mock-salvo "$(realpath "$2")"); shift 2 ;;
    *) echo "h2-cpu-ab.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d /tmp/salvo-h2-cpu-ab-XXXXXX)
trap 'rm -rf "$work"' EXIT
for round in $(seq 1 "$rounds"); do
  for side in A B; do
    bin=$a; [ "$side" = B ] && bin=$b
    "$(dirname "$0")/h2-rates.sh" --salvo "$bin" "${mock[@]}" --cases "$cases" --late-ms "$late" --runs 1 --count "$count" \
      --input "$input" --send-flags "$send_flags" --out "$work/$side" | sed "s/^/$side $round /" | tee -a "$work/runs.txt"
  done
done
python3 - "$work/runs.txt" <<'PY'
import collections, re, statistics, sys
runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m = re.match(r'(\w) (\d+) (\S+) run \d+: ([\d,]+) /s .* sender CPU ([\d.]+) us/notif, peak RSS (\d+) MiB.*accounting (\w+)', line)
    if m:
        side, rnd, case, rate, cpu, rss, exact = m.groups()
        runs[(case, rnd)][side] = (float(cpu), float(rate.replace(",", "")), int(rss), exact == "exact")
for case in sorted({k[0] for k in runs}):
    keys = [k for k in runs if k[0] == case and len(runs[k]) == 2]
    cpu = [runs[k]["B"][0] / runs[k]["A"][0] for k in keys]
    rate = [runs[k]["B"][1] / runs[k]["A"][1] for k in keys]
    med = lambda side, i: statistics.median(runs[k][side][i] for k in keys)
    exact = all(runs[k][s][3] for k in keys for s in "AB")
    print(f"{case}: B/A over {len(keys)} rounds: CPU per notification {statistics.median(cpu):.3f} "
          f"({min(cpu):.2f}-{max(cpu):.2f}), rate {statistics.median(rate):.3f} ({min(rate):.2f}-{max(rate):.2f}); "
          f"medians A {med('A', 0):.2f} us {med('A', 1):,.0f}/s {med('A', 2):.0f} MiB, "
          f"B {med('B', 0):.2f} us {med('B', 1):,.0f}/s {med('B', 2):.0f} MiB; accounting {'exact' if exact else 'NOT EXACT'}")
PY
