#!/usr/bin/env bash
# alt_calib.sh [BIN] -- the committed grids predicted from another calibration: each grid's
# second run of RATE Mbit/s, cap 0.02 MiB (3 buckets, as the 50 Mbit/s calibration) in the
# place of runs/calib, for RATE 25, 100 and 1000 (that point's own median then includes its
# calibration: a small bias in its favour).  No root: `scripts/shaped-grid --reuse`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/grid_lib.sh"
root=$lib_root
bin=${1:-$root/build/ddpprof}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "grid | calibration 50 Mbit/s (committed) | 25 | 100 | 1000  (median / worst |error| %)"
for g in grid_a grid_b grid_c warmup_a warmup_b; do
  src=$root/results/shaped_grid_20261201/$g
  val() { awk -F, -v k="$1" '$1 == k { print $2 }' "$2/summary.csv"; }
  line="$g | $(val median_abs_error_pct "$src") / $(val worst_abs_error_pct "$src")"
  for rate in 25 100 1000; do
    d=$tmp/$g-$rate
    mkdir -p "$d"
    runs_tar "results/shaped_grid_20261201/$g" | tar xz -C "$d"
    sed "s/^calib,.*/calib,\"$rate,0.02\"/" "$src/summary.csv" >"$d/summary.csv"
    rm -rf "$d/runs/calib"
    cp -r "$d/runs/r$rate-c0.02.2" "$d/runs/calib"
    rc=0
    "$root/scripts/shaped-grid" --bin "$bin" --reuse "$d" >/dev/null 2>&1 || rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 3 ] || { echo "$g $rate: shaped-grid --reuse exit $rc" >&2; exit 1; }
    line="$line | $(val median_abs_error_pct "$d") / $(val worst_abs_error_pct "$d")"
  done
  echo "$line"
done
