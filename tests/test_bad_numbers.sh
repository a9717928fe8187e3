#!/usr/bin/env bash
# test_bad_numbers.sh — bad numbers stop a run with one clear line instead of training on:
# a label the model has no class for (a label of 200 used to train with "mean loss nan"
# and exit 0), in the training or the test split, is refused before any step, naming the
# record; a loss that becomes NaN in fp32 (no GradScaler to skip the step) stops the run at
# that step, naming it, on one rank and on every rank of a DDP run.  Under fp16 AMP the same
# inf gradient is the GradScaler's to skip: the run goes on.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
bad_err() { bad "$@"; sed 's/^/  | /' "$tmp/err"; } # a failure, with the command's stderr

be32() { printf "\\x$(printf %02x $(($1 >> 24 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 & 255)))"; }
# labels FILE LABEL... : an IDX labels file
labels() { local f=$1; shift; { be32 2049; be32 $#; for l in "$@"; do printf "\\x$(printf %02x "$l")"; done; } >"$f"; }
images() { { be32 2051; be32 "$2"; be32 28; be32 28; head -c $(($2 * 784)) /dev/urandom; } >"$1"; }
set_dir() { # DIR TRAIN_LABELS TEST_LABELS (comma-separated)
  mkdir -p "$1"
  local tr te
  IFS=, read -ra tr <<<"$2"
  IFS=, read -ra te <<<"$3"
  images "$1/train-images-idx3-ubyte" ${#tr[@]}
  labels "$1/train-labels-idx1-ubyte" "${tr[@]}"
  images "$1/t10k-images-idx3-ubyte" ${#te[@]}
  labels "$1/t10k-labels-idx1-ubyte" "${te[@]}"
}
steps() { echo $(($(cat "$1/metrics.csv" 2>/dev/null | wc -l) - 1)); }

# 1. labels out of range: refused before training, the record named
set_dir "$tmp/label200" 1,2,200,3 1,2
"$bin" train --cpu 1 --epochs 1 --quiet --data "$tmp/label200" --out "$tmp/r1" >/dev/null 2>"$tmp/err" </dev/null
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -q "idx training set: record 2 (counting from 0) has label 200, but the model has 10 classes" "$tmp/err" &&
  [ "$(steps "$tmp/r1")" -le 0 ]; then ok; else bad_err "label 200: exit $rc, $(steps "$tmp/r1") step(s)"; fi

set_dir "$tmp/label10" 1,2,3,4 9,10
"$bin" train --cpu 1 --epochs 1 --quiet --data "$tmp/label10" --out "$tmp/r2" >/dev/null 2>"$tmp/err" </dev/null
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -q "idx test set: record 1 (counting from 0) has label 10" "$tmp/err" &&
  [ "$(steps "$tmp/r2")" -le 0 ]; then ok; else bad_err "test label 10: exit $rc"; fi

# 2. a NaN loss in fp32: an inf gradient at step 2 (test fault injection) makes the weights
# inf, so step 3's loss is NaN: the run stops there, steps 1-2 recorded
common=(--epochs 1 --dataset synthetic --limit 320 --test-limit 32 --batch-size 32 --quiet)
DDPPROF_FAULT_INF_STEP=0:2 "$bin" train --cpu 1 "${common[@]}" --out "$tmp/r3" >/dev/null 2>"$tmp/err" </dev/null
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -q "^ddpprof: epoch 1 step 3: the loss is nan: training has diverged (fp32 has no GradScaler" "$tmp/err" &&
  [ "$(steps "$tmp/r3")" -eq 2 ] && [ ! -e "$tmp/r3/checkpoint.safetensors" ]; then ok; else
  bad_err "fp32 nan: exit $rc, $(steps "$tmp/r3") step(s)"
fi

# the same on rank 1 of a 2-rank fp32 DDP run: the loss is the mean over the ranks, so
# both ranks stop at step 3 (no rank is left waiting in a collective)
start=$(date +%s)
DDPPROF_FAULT_INF_STEP=1:2 timeout 120 "$bin" train --cpu 2 --mode ddp --amp off "${common[@]}" --timeout 60 \
  --out "$tmp/r4" >/dev/null 2>"$tmp/err" </dev/null
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -c "epoch 1 step 3: the loss is nan (the mean over the ranks)" "$tmp/err")" -ge 1 ] &&
  [ "$(steps "$tmp/r4")" -eq 2 ] && [ $took -lt 60 ]; then ok; else
  bad_err "ddp fp32 nan: exit $rc after $took s, $(steps "$tmp/r4") step(s)"
fi

# under fp16 AMP the GradScaler skips the step with the inf gradient and trains on
DDPPROF_FAULT_INF_STEP=0:2 "$bin" train --cpu 1 --amp fp16 "${common[@]}" --out "$tmp/r5" >/dev/null 2>"$tmp/err" </dev/null
rc=$?
if [ $rc -eq 0 ] && [ "$(steps "$tmp/r5")" -eq 10 ] &&
  [ "$(csv_awk 'NR == 3 {print col("found_inf")}' "$tmp/r5/metrics.csv")" = 1 ]; then ok; else
  bad_err "fp16 inf gradient: exit $rc, $(steps "$tmp/r5") step(s)"
fi

check_done
