# fit.py FILE...: per build, CPU per notification against 1/rate over both cells, with a broadcast term:
# the broadcast's extra CPU at equal rate, as a ratio to the device cell's median.
import re, sys
import numpy as np
rows = {}
for f in sys.argv[1:]:
    for l in open(f):
        m = re.match(r'(\S+) round (\d+) device ([\d.]+) broadcast ([\d.]+) ratio ([\d.]+) rates (\d+) (\d+)', l)
        if m:
            r = rows.setdefault(m[1], [])
            r.append((1e5 / float(m[6]), 0, float(m[3])))
            r.append((1e5 / float(m[7]), 1, float(m[4])))
for build, r in rows.items():
    a = np.array([[1, x, b] for x, b, _ in r]); y = np.array([c for *_, c in r])
    (k, slope, extra), *_ = np.linalg.lstsq(a, y, rcond=None)
    device = np.median([c for _, b, c in r if b == 0])
    print(f"{build}: {len(r)//2} rounds, CPU = {k:.3f} + {slope:.3f} x (100,000/rate) + {extra:.3f} for a broadcast; at equal rate {1 + extra/device:.3f}")
