#!/bin/bash
# sweep.sh BIN SEEDS... — test_ddp_equivalence's 10-step setup (240 samples, the committed
# convnet_init) per seed: the 1-rank run (x 24) against 2 ranks (x 12, several buckets), 3
# ranks (x 8) and 1 rank with 2 threads (no DDP at all: another summation order).  Each
# column: max relative loss difference, the first step over 1e-6 (0: none), the weights'
# max |a-b| / max |a| after 10 steps, the last step's loss difference (compare_runs.py).
# Output: results/rounding_20261207/sweep_30_seeds.txt.
set -u
B=$1; shift
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
for s in "$@"; do
  rm -rf "${w:?}"/*
  c="train --quiet --data /usr/share/datasets/fashion-mnist --limit 240 --test-limit 48 --epochs 1
     --momentum 0.9 --weight-decay 1e-4 --seed $s --timeout 60 --amp off --lr 0.01
     --init $root/tests/golden/convnet_init.safetensors"
  $B $c --threads 1 --cpu 1 --mode baseline --batch-size 24 --out "$w/ref" >/dev/null 2>&1
  $B $c --threads 1 --cpu 2 --mode ddp --batch-size 12 --bucket-cap-mb 0.01 --out "$w/ddp2" >/dev/null 2>&1
  $B $c --threads 1 --cpu 3 --oversubscribe --mode ddp --batch-size 8 --out "$w/ddp3" >/dev/null 2>&1
  $B $c --threads 2 --cpu 1 --mode baseline --batch-size 24 --out "$w/t2" >/dev/null 2>&1
  printf "seed %2d" "$s"
  for v in ddp2 ddp3 t2; do printf " | %s %s" $v "$(/usr/bin/python3 "$here/compare_runs.py" "$w/ref" "$w/$v")"; done
  echo
done
