#!/usr/bin/env bash
# one_bucket_calib.sh BIN CFG — each grid of the trainer with the progress calls predicted, with the ring
# at the gradients (`comm_progress,gradient` put into every run), from its run CFG (calib, or a
# grid run such as r100-c25: a one-bucket calibration) in place of the calibration run; the
# point CFG itself is left out of the figures
set -eu
bin=$1; cfg=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for g in r6a r6b gp3a gp3b p80c ci1_1 ci1_2; do
  d=$tmp/$g; mkdir -p $d; tar -xzf $here/$g/runs.tar.gz -C $d; cp $here/$g/summary.csv $d/
  for m in $d/runs/*/meta.csv; do sed -i '/^comm_progress,/d; s/^comm,gloo$/comm,gloo\ncomm_progress,gradient/' $m; done
  if [ "$cfg" != calib ]; then rm -rf $d/runs/calib; cp -r $d/runs/$cfg $d/runs/calib; fi
  $here/../../scripts/shaped-grid --bin $bin --reuse $d --out $d/out >/dev/null 2>&1 || true
  python3 - $d/out/errors.csv $g $cfg <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cfg = sys.argv[3]
keep = [r for r in rows if not (r["kind"] == "grid" and cfg.startswith("r") and "r%s-c%s" % (r["bandwidth_mbit"], r["bucket_cap_mb"]) == cfg)]
e = [float(r["error_pct"]) for r in keep]
print("%-6s %-14s median %5.1f worst %5.1f | %s" % (sys.argv[2], cfg, st.median(abs(x) for x in e), max(abs(x) for x in e), " ".join("%+5.1f" % x for x in e)))
PY
done
