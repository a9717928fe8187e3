#!/usr/bin/env bash
# ring_grads.sh BIN — the ring at the gradients (report/FORMULAS.md "The replay", 3.) against
# the model before it, on the grids of results/shaped_grid_20261202 whose trainer had the
# reducer's progress calls: each grid's runs (unpacked by grid_lib.sh) predicted again
# (scripts/shaped-grid --reuse: no root, no runs) twice, with meta.csv's
# `comm_progress,gradient` in every run (added where the trainer predates the key: r6a, r6b,
# p80c, cpu_acct) and without it (removed where the trainer wrote it); a line per grid and
# model: the |error| median and worst, then each point's error.
set -eu
bin=${1:?usage: ring_grads.sh BIN}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/grid_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for g in r6a r6b ci1_1 ci1_2 gp3a gp3b p80c cpu_acct; do
  for model in before gradients; do
    d=$tmp/$g-$model
    unpack_grid "results/shaped_grid_20261202/$g" "$d"
    progress_key "$d" "$([ $model = gradients ] && echo on || echo off)"
    printf -v label '%-9s %-9s' "$g" "$model"
    predict_line "$bin" "$d" "$label"
  done
done
