#!/usr/bin/env python3
# pool.py FILE...: pools alternating rounds of scripts/h2-cpu-ab.sh output (several
# sittings of the same two builds): per case, the median over every round of B/A for the
# sender's CPU per notification and its rate.
import re, statistics, sys
rounds = {}
for n, path in enumerate(sys.argv[1:]):
    for line in open(path):
        m = re.match(r'([AB]) (\d+) (\S+) run \d+: ([\d,]+) /s .*sender CPU ([\d.]+) us/notif', line)
        if m:
            side, r, case, rate, cpu = m.groups()
            rounds.setdefault((case, n, r), {})[side] = (float(cpu), float(rate.replace(',', '')))
for case in sorted({k[0] for k in rounds}):
    pairs = [v for k, v in rounds.items() if k[0] == case and len(v) == 2]
    cpu = sorted(p['B'][0] / p['A'][0] for p in pairs)
    rate = sorted(p['B'][1] / p['A'][1] for p in pairs)
    print(f"{case}: {len(pairs)} rounds, CPU B/A median {statistics.median(cpu):.3f} "
          f"(range {cpu[0]:.2f}-{cpu[-1]:.2f}), rate B/A median {statistics.median(rate):.3f}")
