#!/usr/bin/env bash
# one_bucket_calib.sh BIN CFG — each grid of the trainer with the progress calls predicted,
# with the ring at the gradients (`comm_progress,gradient` put into every run), from its run
# CFG (calib, or a grid run such as r100-c25: a one-bucket calibration) in place of the
# calibration run; the point CFG itself is left out of the figures (grid_lib.sh)
set -eu
bin=${1:?usage: one_bucket_calib.sh BIN CFG}
cfg=${2:?usage: one_bucket_calib.sh BIN CFG}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/grid_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for g in r6a r6b gp3a gp3b p80c ci1_1 ci1_2; do
  d=$tmp/$g
  unpack_grid "results/shaped_grid_20261202/$g" "$d"
  progress_key "$d" on
  if [ "$cfg" != calib ]; then rm -rf "$d/runs/calib"; cp -r "$d/runs/$cfg" "$d/runs/calib"; fi
  printf -v label '%-6s %-14s' "$g" "$cfg"
  predict_line "$bin" "$d" "$label" "$([ "$cfg" != calib ] && echo "$cfg" || true)"
done
