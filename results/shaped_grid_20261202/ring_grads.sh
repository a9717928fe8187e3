#!/usr/bin/env bash
# ring_grads.sh BIN — the ring at the gradients (report/FORMULAS.md "The replay", 3.) against
# the model before it, on the grids of this folder whose trainer had the reducer's progress
# calls: each grid's runs predicted again
# (scripts/shaped-grid --reuse: no root, no runs) twice, with meta.csv's
# `comm_progress,gradient` in every run (added where the trainer predates the key: r6a, r6b,
# p80c, cpu_acct) and without it (removed where the trainer wrote it); a line per grid and
# model: the |error| median and worst, then each point's error.
set -eu
bin=${1:?usage: ring_grads.sh BIN}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for g in r6a r6b ci1_1 ci1_2 gp3a gp3b p80c cpu_acct; do
  [ -f "$here/$g/runs.tar.gz" ] || continue
  for model in before gradients; do
    d=$tmp/$g-$model
    mkdir -p "$d"
    tar -xzf "$here/$g/runs.tar.gz" -C "$d"
    cp "$here/$g/summary.csv" "$d/"
    for m in "$d"/runs/*/meta.csv; do
      sed -i '/^comm_progress,/d' "$m"
      [ $model = gradients ] && sed -i 's/^comm,gloo$/comm,gloo\ncomm_progress,gradient/' "$m"
    done
    "$here/../../scripts/shaped-grid" --bin "$bin" --reuse "$d" --out "$d/out" >/dev/null 2>&1 || true
    python3 - "$d/out/errors.csv" "$g" "$model" <<'PY'
import csv, statistics as st, sys
e = [float(r["error_pct"]) for r in csv.DictReader(open(sys.argv[1]))]
print("%-9s %-9s median %5.1f worst %5.1f | %s" % (sys.argv[2], sys.argv[3], st.median(abs(x) for x in e),
      max(abs(x) for x in e), " ".join("%+5.1f" % x for x in e)))
PY
  done
done
