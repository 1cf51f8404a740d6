#!/usr/bin/env bash
# Regression run: builds REV (in a separate git worktree) and the current tree, both in
# release mode, runs `salvo bench` with each alternately (A B A B ...) on the same cells,
# and prints per cell the ratio current/REV of the median rates with its spread over the
# rounds. Exits 1 when the median ratio over all cells is worse than the threshold, or when
# either build's bench reports an accounting mismatch; 2 for usage errors.
#
#   scripts/compare.sh REV [--rounds N=3] [--threshold PCT=5] [-- salvo bench flags (default: --quick)]
#
# Examples:
#   scripts/compare.sh HEAD~1
#   scripts/compare.sh origin/main --rounds 5 -- --connections 1,4 --error-rates 0 --payload-sizes 100 --count 2000000
#
# Builds and runs live under .build-compare/ (git-ignored; kept between runs so that
# rebuilding is incremental). Each bench uses its own build's mock, so a change to the mock
# shows up too. Needs git, swift and python3.
set -euo pipefail

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
rev=$1; shift
rounds=3
threshold=5
bench_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --threshold) threshold=${2:?--threshold needs a percentage}; shift 2 ;;
    --) shift; bench_flags=("$@"); break ;;
    *) echo "compare.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[ ${#bench_flags[@]} -gt 0 ] || bench_flags=(--quick)
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --rounds must be a positive integer" >&2; exit 2; }

root=$(git rev-parse --show-toplevel)
sha=$(git -C "$root" rev-parse --verify --short "$rev^{commit}") || { echo "compare.sh: unknown revision '$rev'" >&2; exit 2; }
work="$root/.build-compare"
worktree="$work/worktree"
mkdir -p "$work"

echo "== building $rev ($sha) in $worktree" >&2
if [ -d "$worktree" ]; then
  git -C "$worktree" checkout -q --detach "$sha"
else
  git -C "$root" worktree add -q --detach "$worktree" "$sha"
fi
(cd "$worktree" && swift build -c release --scratch-path "$work/build-rev" >&2)
echo "== building the current tree" >&2
(cd "$root" && swift build -c release --scratch-path "$work/build-current" >&2)
rev_bin="$work/build-rev/release/salvo"
cur_bin="$work/build-current/release/salvo"
"$rev_bin" bench --help >/dev/null 2>&1 || { echo "compare.sh: $rev has no 'salvo bench' to compare with" >&2; exit 2; }

runs="$work/runs"
rm -rf "$runs"
mismatch=0
for round in $(seq 1 "$rounds"); do
  for side in rev cur; do
    bin=$rev_bin; [ "$side" = cur ] && bin=$cur_bin
    echo "== round $round/$rounds: $side" >&2
    status=0
    (cd "$root" && "$bin" bench "${bench_flags[@]}" --json-only --output "$runs/$round-$side" >"$runs-$round-$side.log" 2>&1) || status=$?
    tail -n 1 "$runs-$round-$side.log" >&2
    if [ "$status" -eq 1 ] && ls "$runs/$round-$side"/*.json >/dev/null 2>&1; then
      echo "compare.sh: accounting mismatch in the $side run of round $round (see $runs-$round-$side.log)" >&2
      mismatch=1
    elif [ "$status" -ne 0 ]; then
      echo "compare.sh: salvo bench failed (status $status):" >&2; tail -n 20 "$runs-$round-$side.log" >&2; exit 1
    fi
  done
done

status=0
python3 - "$runs" "$rounds" "$threshold" "$rev ($sha)" <<'PY' || status=$?
import glob, json, statistics, sys
runs, rounds, threshold, label = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]

def load(round_, side):
    [path] = glob.glob(f"{runs}/{round_}-{side}/*.json")
    results = json.load(open(path))
    # Older builds record one error wait for the run, in the settings; newer ones one per cell.
    wait = results["settings"].get("error_wait_milliseconds")
    return {(c["connections"], c["error_rate"], c["payload_bytes"], c.get("error_wait_milliseconds", wait)): c["rate"]["median"]
            for c in results["cells"]}

ratios, medians = {}, {}
for r in range(1, rounds + 1):
    a, b = load(r, "rev"), load(r, "cur")
    for key in sorted(set(a) & set(b)):
        ratios.setdefault(key, []).append(b[key] / a[key])
        medians.setdefault(key, ([], []))
        medians[key][0].append(a[key]); medians[key][1].append(b[key])
if not ratios:
    print("compare.sh: the two builds measured no common cells (the same connections, error rate, payload size "
          "and error wait; give an older REV --error-wait-ms, which both builds know)"); sys.exit(1)

print(f"current vs {label}: ratio of median notifications/s (current / REV), {rounds} alternating rounds")
print(f"{'conns':>5}  {'errors':>8}  {'wait ms':>7}  {'payload':>7}  {'REV /s':>12}  {'current /s':>12}  {'ratio':>6}  {'spread':>15}")
cell_medians = []
for key, values in ratios.items():
    conns, rate, payload, wait = key
    m = statistics.median(values)
    cell_medians.append(m)
    errors = "none" if rate == 0 else f"1/{round(1 / rate):,}" if abs(1 / rate - round(1 / rate)) < 1e-6 else f"{rate:g}"
    print(f"{conns:>5}  {errors:>8}  {wait:>7}  {payload:>7}  {statistics.median(medians[key][0]):>12,.0f}  "
          f"{statistics.median(medians[key][1]):>12,.0f}  {m:>6.3f}  {min(values):>6.3f} – {max(values):<6.3f}")
overall = statistics.median(cell_medians)
limit = 1 - threshold / 100
verdict = "OK" if overall >= limit else "REGRESSION"
print(f"median ratio over {len(cell_medians)} cells: {overall:.3f} (threshold {limit:.3f}): {verdict}")
sys.exit(0 if overall >= limit else 1)
PY
[ "$mismatch" -eq 0 ] || { echo "compare.sh: failing because of an accounting mismatch" >&2; exit 1; }
exit "$status"
