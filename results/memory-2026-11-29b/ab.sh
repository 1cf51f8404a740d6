#!/usr/bin/env bash
# ab.sh ROUNDS BIN...: the memory run (answers held 300 ms, 1.5 M, defaults) for each build,
# alternating, in reverse order every other round (so no build always runs first).
rounds=$1; shift
for r in $(seq 1 $rounds); do
  bins=("$@"); [ $((r % 2)) = 0 ] && bins=($(printf '%s\n' "$@" | tac))
  for b in "${bins[@]}"; do
    echo "$b round $r load $(cut -d' ' -f1 /proc/loadavg) $(bash /work/main/results/memory-2026-11-29/run.sh $b 2>&1 | sed -n 2p)"
  done
done
