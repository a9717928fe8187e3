#!/bin/bash
# flips.sh BIN SEED LIMIT STEPS... — where two runs that should be equal part: for each step K,
# the 1-rank (x 24) and 2-rank (x 12) runs are stopped after step K-1 (--checkpoint-every K-1,
# then DDPPROF_FAULT_KILL_STEP kills rank 0 as step K begins), and analyse.py redoes step K
# from both checkpoints in float64 (PyTorch): the weights' difference before it, the ReLU
# and max-pool decisions that differ, the smallest margins, the gradients' difference.
# Output: results/rounding_20261207/README.md, "Where the runs part".
set -u
B=$1; S=$2; L=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
for K in "$@"; do
  c="train --quiet --data /usr/share/datasets/fashion-mnist --limit $L --test-limit 48 --epochs 1
     --lr 0.01 --momentum 0.9 --weight-decay 1e-4 --seed $S --threads 1 --timeout 60 --amp off
     --init $root/tests/golden/convnet_init.safetensors --checkpoint-every $((K - 1))"
  rm -rf "$w/ref" "$w/ddp"
  (DDPPROF_FAULT_KILL_STEP=0:$K $B $c --cpu 1 --mode baseline --batch-size 24 --out "$w/ref" >/dev/null 2>&1) 2>/dev/null
  DDPPROF_FAULT_KILL_STEP=0:$K $B $c --cpu 2 --mode ddp --batch-size 12 --out "$w/ddp" >/dev/null 2>&1
  /usr/bin/python3 "$here/analyse.py" "$w/ref/checkpoint.safetensors" "$w/ddp/checkpoint.safetensors" \
    --seed "$S" --limit "$L" --batch 24 --step "$K" --compact | grep '^step'
done
