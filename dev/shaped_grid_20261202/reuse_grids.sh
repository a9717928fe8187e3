#!/usr/bin/env bash
# reuse_grids.sh BIN — predict the 8 committed grids that keep their runs again with BIN
# (scripts/shaped-grid --reuse: no root, no runs) and print a line per grid: the |error|
# median and worst, then each point's error (the grid's rates x caps, then the 1-rank
# baseline row).  The environment passes through to BIN, for the experiments' patches
# (tax_oracle.patch: K1, K2, CW; burst_replay.patch: DBG_BURST_MS, DBG_EFF).
set -eu
bin=${1:?usage: reuse_grids.sh BIN}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/grid_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for g in shaped_grid_20261202/g80a shaped_grid_20261202/p80c shaped_grid_20261202/cpu_acct \
         shaped_grid_20261201/grid_a shaped_grid_20261201/grid_b shaped_grid_20261201/grid_c \
         shaped_grid_20261201/warmup_a shaped_grid_20261201/warmup_b; do
  n=$(basename "$g")
  unpack_grid "results/$g" "$tmp/$n"
  printf -v label '%-9s' "$n"
  predict_line "$bin" "$tmp/$n" "$label"
done
