#!/usr/bin/env python3
"""Per run of a grid made with cpu_accounting.patch (DDPPROF's ranks print a DBGCPU line a
step: backward's wall ms, the training thread's CPU ms, the other threads' of the process,
and the rest): the medians over steps >= 5, rank 0 || rank 1, runs in the order they ran.
usage: cpu_acct.py RUNS_DIR (results/shaped_grid_20261202/cpu_acct/node_logs.tar.gz unpacked:
RUNS_DIR/RUN/node*.log; in git history: `git show 7bb424bf2fa7c493c1a79fbea309e503c0444ec9:\
results/shaped_grid_20261202/cpu_acct/node_logs.tar.gz | tar xz`)"""
import os, statistics as st, sys

d = sys.argv[1]
runs = sorted(os.listdir(d))
for r in runs:
    out = []
    for n in (0, 1):
        rows = [l.split()[2:] for l in open(os.path.join(d, r, f"node{n}.log")) if "DBGCPU" in l]
        rows = [x for x in rows if int(x[2]) >= 5]
        med = lambda i: st.median(float(x[i]) for x in rows)
        out.append("wall %6.2f thread %6.2f others %5.2f rest %5.2f" % (med(4), med(6), med(8), med(10)))
    print("%-16s" % r, " || ".join(out))
