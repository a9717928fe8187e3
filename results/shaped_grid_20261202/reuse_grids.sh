#!/usr/bin/env bash
# reuse_grids.sh BIN — predict the 8 committed grids that keep their runs again with BIN
# (scripts/shaped-grid --reuse: no root, no runs) and print a line per grid: the |error|
# median and worst, then each point's error (the grid's rates x caps, then the 1-rank
# baseline row).  The environment passes through to BIN, for the experiments' patches
# (tax_oracle.patch: K1, K2, CW; burst_replay.patch: DBG_BURST_MS, DBG_EFF).
set -eu
bin=${1:?usage: reuse_grids.sh BIN}
here=$(cd "$(dirname "$0")" && pwd)
res=$(dirname "$here")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for g in shaped_grid_20261202/g80a shaped_grid_20261202/p80c shaped_grid_20261202/cpu_acct \
         shaped_grid_20261201/grid_a shaped_grid_20261201/grid_b shaped_grid_20261201/grid_c \
         shaped_grid_20261201/warmup_a shaped_grid_20261201/warmup_b; do
  n=$(basename "$g")
  mkdir -p "$tmp/in/$n"
  tar -xzf "$res/$g/runs.tar.gz" -C "$tmp/in/$n"
  cp "$res/$g/summary.csv" "$tmp/in/$n/"
  rm -rf "$tmp/out"
  "$res/../scripts/shaped-grid" --bin "$bin" --reuse "$tmp/in/$n" --out "$tmp/out" >/dev/null 2>&1 || true
  python3 - "$tmp/out/errors.csv" "$n" <<'PY'
import csv, statistics as st, sys
e = [float(r["error_pct"]) for r in csv.DictReader(open(sys.argv[1]))]
print("%-9s median %5.1f worst %5.1f | %s" % (sys.argv[2], st.median(abs(x) for x in e),
      max(abs(x) for x in e), " ".join("%+5.1f" % x for x in e)))
PY
done
