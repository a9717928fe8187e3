#!/usr/bin/env python3
"""rerun_rule.py THRESHOLD_PCT GRID_DIR... -- would re-making a disturbed run help a grid of
one run a point (what test_shaped_grid runs)?  For each committed grid of 3 runs a point
(GRID_DIR with errors.csv, e.g. results/shaped_grid_20261201/grid_a; its runs.tar.gz from
GRID_DIR, else from git history at RAW_SHA), each round k of runs is taken as a one-run grid
against the grid's predictions: 'plain' as measured, 'rule' with a run whose compute is more
than THRESHOLD_PCT off the median compute of all the grid's runs replaced by the next
round's run of its point (a re-made run).  Prints median / worst |error| % per round."""
import csv, io, os, statistics as st, subprocess, sys, tarfile, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("DDPPROF", os.path.join(ROOT, "build", "ddpprof"))
RAW_SHA = "7bb424bf2fa7c493c1a79fbea309e503c0444ec9"  # the last commit with results/'s runs.tar.gz


def runs_tar(g):
    """GRID_DIR's runs.tar.gz, opened: from the tree where it is there, else from git history"""
    path = os.path.join(g, "runs.tar.gz")
    if os.path.isfile(path):
        return tarfile.open(path)
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    blob = subprocess.run(["git", "-C", ROOT, "show", f"{RAW_SHA}:{rel}"], capture_output=True,
                          check=True).stdout
    return tarfile.open(fileobj=io.BytesIO(blob))


def measured(d):
    """(step, compute) ms of `ddpprof predict RUN`'s measured row"""
    out = subprocess.run([BIN, "predict", d], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "measured":
            return float(f[9]), float(f[10])
    raise SystemExit(f"{d}: no measured row")


thr = float(sys.argv[1])
for g in sys.argv[2:]:
    with tempfile.TemporaryDirectory() as tmp:
        with runs_tar(g) as t:
            t.extractall(tmp)
        pred = {(r["bandwidth_mbit"], r["bucket_cap_mb"]): float(r["predicted_step_ms"])
                for r in csv.DictReader(open(os.path.join(g, "errors.csv")))
                if r["kind"] == "grid"}
        runs = {}
        for (rate, cap) in pred:
            base = os.path.join(tmp, "runs", f"r{rate}-c{cap}")
            runs[(rate, cap)] = [measured(d) for d in (base, base + ".2", base + ".3")]
        mid = st.median(c for v in runs.values() for _, c in v)
        cells = []
        for k in range(3):
            plain, rule, redone = [], [], 0
            for key, v in runs.items():
                plain.append(100 * abs(pred[key] - v[k][0]) / v[k][0])
                j = next((i % 3 for i in range(k, k + 3)
                          if abs(v[i % 3][1] - mid) / mid <= thr / 100), k)
                redone += j != k
                rule.append(100 * abs(pred[key] - v[j][0]) / v[j][0])
            cells.append("round %d: plain %.1f / %.1f, rule %.1f / %.1f (%d re-made)" % (
                k + 1, st.median(plain), max(plain), st.median(rule), max(rule), redone))
        print(os.path.basename(os.path.normpath(g)), "|", " | ".join(cells))
