# med.py FILE...: per build, the medians of the device and broadcast cells' CPU per notification
# (ab.sh lines) and of the per-round ratios, and the ratio of the medians.
import sys,re,statistics as st
rows={}
for f in sys.argv[1:]:
  for l in open(f):
    m=re.match(r'(\S+) round (\d+) device ([\d.]+) broadcast ([\d.]+) ratio ([\d.]+)',l)
    if m: rows.setdefault(m[1],[]).append((float(m[3]),float(m[4]),float(m[5])))
for b,r in rows.items():
  print(b,len(r),'device med %.3f'%st.median(x[0] for x in r),'broadcast med %.3f'%st.median(x[1] for x in r),'ratio med %.3f'%st.median(x[2] for x in r), 'ratio of medians %.3f'%(st.median(x[1] for x in r)/st.median(x[0] for x in r)))
