import re, sys, statistics
def cells(path):
    out = []
    for line in open(path):
        m = re.match(r'\[(\d+)/\d+\] (.*?): median ([\d,]+) /s .*CPU (\d+) ns/notif, accounting (\w+)', line)
        if m: out.append((m.group(2), int(m.group(3).replace(',', '')), int(m.group(4)), m.group(5)))
    return out
old, new = cells(sys.argv[1]), cells(sys.argv[2])
print('| cell | A rate | B rate | A CPU ns | B CPU ns | CPU B/A | accounting |')
print('|---|---:|---:|---:|---:|---:|---|')
ratios = []
for (c, ra, ca, ea), (_, rb, cb, eb) in zip(old, new):
    ratios.append(cb / ca)
    print(f'| {c} | {ra:,} | {rb:,} | {ca} | {cb} | {cb / ca:.2f} | {ea}, {eb} |')
print(f'\nCPU per notification B/A: median {statistics.median(ratios):.3f} over {len(ratios)} cells (range {min(ratios):.2f}–{max(ratios):.2f}); '
      f'exact in {sum(e == "exact" for *_, e in old) + sum(e == "exact" for *_, e in new)} of {2 * len(ratios)} cell runs')
