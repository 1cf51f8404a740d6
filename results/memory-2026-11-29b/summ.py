import sys,statistics as st
rows=[l.split() for l in open(sys.argv[1]) if ' round ' in l]
by={}
for r in rows:
    b=r[0]; rd=int(r[2]); cpu=float(r[r.index('cpu')+1]); rate=float(r[r.index('rate')+1].replace(',','').rstrip('/s')); rss=int(r[r.index('peakRSS')+1])
    by.setdefault(b,{})[rd]=(cpu,rate,rss)
base=by[sys.argv[2]]
for b,d in by.items():
    ks=[k for k in d if k in base]
    ratios=sorted(d[k][0]/base[k][0] for k in ks); rr=sorted(d[k][1]/base[k][1] for k in ks)
    print(f"{b}: rounds {len(ks)} CPU B/A median {st.median(ratios):.3f} (range {ratios[0]:.2f}-{ratios[-1]:.2f}), rate B/A median {st.median(rr):.3f}, CPU median {st.median(v[0] for v in d.values()):.2f} us, rate median {st.median(v[1] for v in d.values()):,.0f}/s, peak RSS {sorted(set(v[2] for v in d.values()))} MiB")
