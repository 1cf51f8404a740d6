# pool.py BUILDS FILE...: the per-round ratios (broadcast CPU / device CPU) of the builds named in
# BUILDS (comma-separated, as the files name them), per sitting and pooled over all the files.
import math, re, statistics as st, sys
builds = set(sys.argv[1].split(","))
rows = []
for path in sys.argv[2:]:
    for line in open(path):
        m = re.match(r'(\S+) round \d+ device ([\d.]+) broadcast ([\d.]+)', line)
        if m and m[1] in builds:
            rows.append((path.split("/")[-1], m[1], float(m[2]), float(m[3])))

def summary(selected, label):
    ratios = [b / d for *_, d, b in selected]
    medians = st.median([b for *_, b in selected]) / st.median([d for *_, d, _ in selected])
    geomean = math.exp(st.mean(math.log(r) for r in ratios))
    print(f"{label:36} {len(selected):4} rounds  median of ratios {st.median(ratios):.3f}  "
          f"ratio of medians {medians:.3f}  geometric mean {geomean:.3f}")

for sitting in dict.fromkeys((f, b) for f, b, *_ in rows):
    summary([r for r in rows if (r[0], r[1]) == sitting], " ".join(sitting))
summary(rows, "pooled")
