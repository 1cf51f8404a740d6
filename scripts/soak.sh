#!/usr/bin/env bash
# A soak run: one long campaign through the real sender against salvo's mock gateway with
# every kind of failure mixed in, watching the process's memory and descriptors.
#
#   scripts/soak.sh MINUTES [OUTPUT_DIR=/tmp/salvo-soak]
#
# Three `salvo demo` processes run side by side, each sending a synthetic campaign (made on
# the fly, re-readable, no file) through the real sender to salvo's mock gateway in its own
# process: 2 shards × 4 connections (8), the default 1 s error wait, records kept 20 s (a
# gateway that stalls while kernel buffers of several MiB fill answers seconds after a
# write). Every mock rejects every 20,000th notification and stalls reading for 200 ms after
# every 10,000 on a connection. Mock "late" also sends every error response 1.5 s late (later
# than the error wait: late errors); mock "shutdowns" answers status 10 after 5,000
# notifications on a connection; mock "drops" closes a connection silently at its 6,000th.
# (A connection's counters decide which of shutdown and drop comes first, hence separate
# processes.) A calibration run of 2,000,000 sizes each campaign to last about MINUTES.
#
# Every 5 s each process's resident memory and open descriptors go to samples-NAME.csv.
# Pass: each run's accounting agrees (the demo checks the mock's counts against the
# sender's: exit 0; and its JSON report says submitted = accepted + rejected + failed), and after a warm-up (the first fifth) neither grows: the second half's
# highest sample is at most 10 % (memory, plus 4 MiB) or 4 descriptors above the first
# half's. Writes the samples, soak.svg (all over time), summary.txt and each demo's output
# and report into OUTPUT_DIR.
set -euo pipefail
minutes=${1:?usage: scripts/soak.sh MINUTES [OUTPUT_DIR]}
out=${2:-/tmp/salvo-soak}
root=$(cd "$(dirname "$0")/.." && pwd)
salvo="$root/.build/release/salvo"
[ -x "$salvo" ] || (cd "$root" && swift build -c release >&2)
mkdir -p "$out"
declare -A count=()

common=(--shards 2 --connections 4 --max-connections 4 --retention-ms 20000 --reject-every 20000 --stall-every 10000 --stall-ms 200)
declare -A plans=(
  [late]="--error-delay-ms 1500"
  [shutdowns]="--shutdown-every 5000"
  [drops]="--drop-every 6000"
)
# SOAK_PLANS="late drops" runs only those.
selected=(${SOAK_PLANS:-${!plans[@]}})
for name in "${selected[@]}"; do
  [ -n "${plans[$name]+set}" ] || { echo "soak: no plan named $name (plans: ${!plans[*]})" >&2; exit 2; }
done
declare -A pids=()
for name in "${selected[@]}"; do
  # shellcheck disable=SC2206
  plan=("${common[@]}" ${plans[$name]})
  echo "$name: calibrating with 2,000,000 notifications..." >&2
  timeout 300 "$salvo" demo --count 2000000 "${plan[@]}" --report "$out/calibration-$name.json" \
    >"$out/calibration-$name.out" 2>&1
  # The rate from the JSON report (send_rate_per_s), not from the summary's wording.
  rate=$(python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["send_rate_per_s"]))' \
    "$out/calibration-$name.json" 2>/dev/null || true)
  [ -n "$rate" ] && [ "$rate" -gt 0 ] || { echo "soak: the calibration run wrote no rate:" >&2; cat "$out/calibration-$name.out" >&2; exit 1; }
  # The processes share the machine during the soak: each gets about its share of its rate.
  count[$name]=$((rate * minutes * 60 / ${#selected[@]}))
done
for name in "${selected[@]}"; do
  # shellcheck disable=SC2206
  plan=("${common[@]}" ${plans[$name]})
  echo "soak $name: ${count[$name]} notifications, samples every 5 s into $out/samples-$name.csv" >&2
  "$salvo" demo --count "${count[$name]}" "${plan[@]}" --report "$out/report-$name.json" >"$out/demo-$name.out" 2>"$out/demo-$name.err" &
  pids[$name]=$!
  echo "seconds,rss_kib,descriptors" >"$out/samples-$name.csv"
done
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
deadline=$((SECONDS + minutes * 60 * 3))
start=$SECONDS
running=1
while [ "$running" = 1 ]; do
  running=0
  for name in "${!pids[@]}"; do
    pid=${pids[$name]}
    kill -0 "$pid" 2>/dev/null || continue
    running=1
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
    [ -n "$rss" ] && echo "$((SECONDS - start)),$rss,$fds" >>"$out/samples-$name.csv"
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "soak: $name still running after three times the planned time: stopping it" >&2
      kill -INT "$pid"
    fi
  done
  [ "$running" = 1 ] && sleep 5
done
statuses=""
for name in "${!pids[@]}"; do
  status=0
  wait "${pids[$name]}" || status=$?
  statuses="$statuses $name=$status"
done
trap - EXIT

python3 - "$out" "$minutes" $statuses <<'PY'
import csv, json, sys
out, minutes = sys.argv[1], sys.argv[2]
statuses = dict(item.split("=") for item in sys.argv[3:])
def peak(rows, i): return max(r[i] for r in rows) if rows else 0
lines, passed, runs = [f"soak: {minutes} min planned"], True, {}
for name, status in sorted(statuses.items()):
    rows = [(int(r["seconds"]), int(r["rss_kib"]) / 1024, int(r["descriptors"]))
            for r in csv.DictReader(open(f"{out}/samples-{name}.csv"))]
    runs[name] = rows
    steady = rows[len(rows) // 5:]
    first, second = steady[:len(steady) // 2], steady[len(steady) // 2:]
    rss_ok = bool(first) and peak(second, 1) <= peak(first, 1) * 1.10 + 4
    fds_ok = bool(first) and peak(second, 2) <= peak(first, 2) + 4
    try:
        report = json.load(open(f"{out}/report-{name}.json"))
        complete = report["submitted"] == report["accepted"] + report["rejected"] + report["failed"]
        totals = (f"submitted {report['submitted']}, accepted {report['accepted']}, rejected {report['rejected']}, "
                  f"failed {report['failed']}, resent {report['resent']}, reconnects {report['reconnects']}")
    except (OSError, ValueError, KeyError) as error:
        complete, totals = False, f"no report: {error}"
    passed = passed and status == "0" and complete and rss_ok and fds_ok
    lines += [
        f"{name}: {rows[-1][0] if rows else 0} s sampled ({len(rows)} samples); accounting "
        + ("exact" if status == "0" and complete else f"FAILED (exit {status})") + f" ({totals})",
        f"  memory after warm-up: first half peak {peak(first, 1):.1f} MiB, second half peak {peak(second, 1):.1f} MiB: "
        + ("flat" if rss_ok else "GROWING"),
        f"  descriptors after warm-up: first half peak {peak(first, 2)}, second half peak {peak(second, 2)}: "
        + ("flat" if fds_ok else "GROWING"),
    ]
demos = "".join(f"\n== {name}\n" + open(f"{out}/demo-{name}.out").read() for name in sorted(statuses))
open(f"{out}/summary.txt", "w").write("\n".join(lines) + "\n" + demos)
print("\n".join(lines))

# The plot: memory (MiB, left scale) and descriptors (right scale) of each run over time.
w, h, pad = 760, 320, 60
rows = [r for run in runs.values() for r in run]
end = max((r[0] for r in rows), default=1) or 1
rss_top, fds_top = max(peak(rows, 1) * 1.2, 1), max(peak(rows, 2) * 1.2, 1)
def series(run, i, top, colour, dash):
    points = " ".join(f"{pad + (w - 2 * pad) * r[0] / end:.1f},{h - pad - (h - 2 * pad) * r[i] / top:.1f}" for r in run)
    return f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" stroke-dasharray="{dash}" points="{points}"/>'
dashes = dict(zip(sorted(runs), ["none", "6,3", "2,2"]))
parts = [series(run, 1, rss_top, "#1f77b4", dashes[name]) + series(run, 2, fds_top, "#d62728", dashes[name])
         for name, run in runs.items()]
legend = ", ".join(f"{name}: " + {"none": "solid", "6,3": "dashed", "2,2": "dotted"}[dashes[name]] for name in sorted(runs))
svg = f'''<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>
<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#1f77b4"/>
<line x1="{w - pad}" y1="{pad}" x2="{w - pad}" y2="{h - pad}" stroke="#d62728"/>
<text x="{w / 2}" y="{h - 20}" text-anchor="middle">seconds (0 to {end}); {legend}</text>
<text x="{pad}" y="{pad - 12}" fill="#1f77b4">resident memory, MiB (0 to {rss_top:.0f})</text>
<text x="{w - pad}" y="{pad - 12}" text-anchor="end" fill="#d62728">open descriptors (0 to {fds_top:.0f})</text>
{"".join(parts)}
</svg>
'''
open(f"{out}/soak.svg", "w").write(svg)
sys.exit(0 if passed else 1)
PY
