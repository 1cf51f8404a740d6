# split.py N COMMS < perf script output (-F comm,tid,time,ip,sym): samples per thread before and after the first broadcast sample (the bench's device cell, then its broadcast cell), and the N functions whose self samples grew most, for each comma-separated thread name.
import sys,collections,re
samples=[]; cur=None
for line in sys.stdin:
    if not line.strip(): continue
    if not line.startswith("\t") and not line.startswith(" "):
        parts=line.split()
        t=[p for p in parts if p.endswith(":")][0]
        cur=[parts[0], float(t.rstrip(":")), []]; samples.append(cur)
    else:
        cur[2].append(line.strip())
hits=[s[1] for s in samples if any(("ChannelID" in x) or ("lookUpChannel" in x) or ("broadcastProblem" in x) for x in s[2])]
bstart=min(hits)
def short(x):
    s=x.split(None,1)[1] if " " in x else x
    return s.split("+0x")[0][:90]
tot=collections.Counter()
for s in samples: tot[(s[0], s[1]>=bstart)]+=1
print({k:v for k,v in tot.items() if v>500})
for comm in sys.argv[2].split(","):
    d=collections.Counter(); b=collections.Counter()
    for s in samples:
        if s[0]!=comm or not s[2]: continue
        (b if s[1]>=bstart else d)[short(s[2][0])]+=1
    keys=set(d)|set(b)
    diff=sorted(keys,key=lambda k:-(b[k]-d[k]))
    print("==",comm,"device",sum(d.values()),"broadcast",sum(b.values()))
    for k in diff[:int(sys.argv[1])]: print(f"{d[k]:6d} {b[k]:6d} {b[k]-d[k]:+5d} {k}")
