#!/usr/bin/env bash
# test_bad_input.sh — every kind of bad input is one clear line on stderr and a non-zero
# exit, and nothing is left half-written: missing data directory, wrong IDX magic,
# truncated file, image/label count mismatch, corrupt gzip, unknown model, bad numbers
# on the command line, unwritable output directory, malformed safetensors header.  And
# --help / -h after any command is the usage on stdout with exit 0.
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# expect_error NAME PATTERN ARGS... : exit != 0, exactly one stderr line, matching PATTERN
expect_error() {
  local name=$1 pattern=$2; shift 2
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -qiE -- "$pattern" "$tmp/err"; then
    ok
  else
    bad "$name: exit $rc, $lines stderr line(s), wanted /$pattern/:"
    sed 's/^/  | /' "$tmp/err"
  fi
}

be32() { printf "\\x$(printf %02x $(($1 >> 24 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 & 255)))"; }

# idx_images FILE N ROWS COLS BYTES: header for N images, then BYTES pixel bytes
idx_images() { { be32 2051; be32 "$2"; be32 "$3"; be32 "$4"; head -c "$5" /dev/zero; } >"$1"; }
idx_labels() { { be32 2049; be32 "$2"; head -c "$3" /dev/zero; } >"$1"; }

# a valid tiny data set: 4 train and 2 test images of 28x28
make_set() {
  mkdir -p "$1"
  idx_images "$1/train-images-idx3-ubyte" 4 28 28 $((4 * 784))
  idx_labels "$1/train-labels-idx1-ubyte" 4 4
  idx_images "$1/t10k-images-idx3-ubyte" 2 28 28 $((2 * 784))
  idx_labels "$1/t10k-labels-idx1-ubyte" 2 2
}

common=(train --cpu 1 --epochs 1 --quiet)

expect_error missing-dir "/nonexistent-ddpprof" "${common[@]}" --data /nonexistent-ddpprof --out "$tmp/run0"

make_set "$tmp/magic"
{ be32 2049; be32 4; be32 28; be32 28; head -c $((4 * 784)) /dev/zero; } >"$tmp/magic/train-images-idx3-ubyte"
expect_error wrong-magic "magic.*train-images|train-images.*magic" "${common[@]}" --data "$tmp/magic" --out "$tmp/run1"

make_set "$tmp/trunc"
idx_images "$tmp/trunc/train-images-idx3-ubyte" 4 28 28 1000
expect_error truncated "truncated.*train-images|train-images.*truncated" "${common[@]}" --data "$tmp/trunc" --out "$tmp/run2"

make_set "$tmp/count"
idx_labels "$tmp/count/train-labels-idx1-ubyte" 3 3
expect_error count-mismatch "mismatch|4 images.*3 labels|3 labels.*4 images" "${common[@]}" --data "$tmp/count" --out "$tmp/run3"

make_set "$tmp/gz"
rm "$tmp/gz/train-images-idx3-ubyte"
gzip -c "$tmp/gz/train-labels-idx1-ubyte" | head -c 20 >"$tmp/gz/train-images-idx3-ubyte.gz"
printf 'garbage that is not gzip at all' >>"$tmp/gz/train-images-idx3-ubyte.gz"
expect_error corrupt-gzip "gzip|corrupt" "${common[@]}" --data "$tmp/gz" --out "$tmp/run4"

make_set "$tmp/ok"
expect_error unknown-model "unknown model 'resnet99'" "${common[@]}" --data "$tmp/ok" --model resnet99 --out "$tmp/run5"
expect_error bad-batch "--batch-size: 'abc'" "${common[@]}" --batch-size abc
expect_error bad-batch-zero "--batch-size: '0'" "${common[@]}" --batch-size 0
expect_error bad-lr "--lr: '-1'" "${common[@]}" --lr -1
expect_error bad-epochs "--epochs: '3x'" "${common[@]}" --epochs 3x
expect_error bad-normalize "--normalize" "${common[@]}" --normalize 0.5
expect_error unknown-option "unknown option '--bogus'" "${common[@]}" --bogus 1
expect_error missing-value "--lr needs a value" "${common[@]}" --lr
expect_error unknown-command "unknown command 'trian'" trian
expect_error main-mode "--mode: 'bogus' is not both, baseline or ddp" --mode bogus
expect_error train-mode "--mode: 'both' is not baseline or ddp" train --mode both

# a bad --model or --data is refused before the run directory is made, by train (one rank
# or several) and by the main job alike
no_dir() { # no_dir NAME DIR
  if [ -e "$2" ]; then bad "$1: $2 was made: $(ls "$2")"; else ok; fi
}
for how in "train --cpu 1" "train --cpu 2" "--cpu 1"; do
  expect_error "model-first ($how)" "unknown model 'resnet99'" $how --epochs 1 --quiet \
    --data "$tmp/ok" --model resnet99 --out "$tmp/run-model"
  no_dir "model-first ($how)" "$tmp/run-model"
  expect_error "data-first ($how)" "/nonexistent-ddpprof: missing data directory" $how \
    --epochs 1 --quiet --data /nonexistent-ddpprof --out "$tmp/run-data"
  no_dir "data-first ($how)" "$tmp/run-data"
  expect_error "data-truncated-first ($how)" "truncated.*train-images|train-images.*truncated" \
    $how --epochs 1 --quiet --data "$tmp/trunc" --out "$tmp/run-data"
  no_dir "data-truncated-first ($how)" "$tmp/run-data"
done

# --threads beyond this machine's cores (ranks x threads) is refused like --cpu beyond them,
# before anything is written; --oversubscribe runs it anyway
cores=$(nproc)
tiny=(--dataset synthetic --limit 8 --test-limit 8 --epochs 1 --quiet)
expect_error threads-over "--threads $((cores + 1)): 1 rank x $((cores + 1)) threads on $cores core.*--oversubscribe" \
  train --cpu 1 --threads $((cores + 1)) "${tiny[@]}" --out "$tmp/run-threads"
[ "$cores" -lt 2 ] || expect_error threads-over-ranks "--threads $cores: 2 ranks x $cores threads" \
  train --cpu 2 --threads "$cores" "${tiny[@]}" --out "$tmp/run-threads"
expect_error threads-over-main "--threads $((cores + 1)): 1 rank x" \
  --cpu 1 --threads $((cores + 1)) "${tiny[@]}" --out "$tmp/run-threads"
[ ! -e "$tmp/run-threads" ] || bad "threads-over: $tmp/run-threads made"
if "$bin" train --cpu 1 --threads $((cores + 1)) --oversubscribe "${tiny[@]}" --out "$tmp/run-over" >/dev/null 2>"$tmp/err" </dev/null; then
  ok
else
  bad "threads-oversubscribe: $(cat "$tmp/err")"
fi

# expect_usage NAME ARGS... : exit 0, the usage on stdout, nothing on stderr
# expect_usage NAME ARGS...: the command's usage (with MARK, default the training options'
# --resume) on stdout, nothing on stderr, exit 0
expect_usage() {
  local name=$1; shift
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ $rc -eq 0 ] && grep -q '^usage: ddpprof' "$tmp/out" && grep -q -- "${MARK:---resume CKPT}" "$tmp/out" &&
     [ ! -s "$tmp/err" ]; then
    ok
  else
    bad "$name: exit $rc, wanted the usage on stdout and exit 0:"
    sed 's/^/  | /' "$tmp/err"
  fi
}
expect_usage help --help
expect_usage h -h
expect_usage train-help train --help
expect_usage train-h train --epochs 2 -h
expect_usage worker-help worker --help
MARK=--kineto expect_usage report-help report --help
MARK=--kineto expect_usage report-h report -h
expect_usage main-help --cpu 2 --help

touch "$tmp/file"
expect_error unwritable-out "cannot create|not a directory" "${common[@]}" --data "$tmp/ok" --out "$tmp/file/run"
mkdir -p "$tmp/ro" && chmod 500 "$tmp/ro"
if [ "$(id -u)" != 0 ]; then
  expect_error readonly-out "cannot create|cannot write" "${common[@]}" --data "$tmp/ok" --out "$tmp/ro/run"
fi

# a malformed safetensors header: length prefix larger than the file
{ printf '\xff\x00\x00\x00\x00\x00\x00\x00{"a":'; } >"$tmp/bad.safetensors"
expect_error bad-safetensors "bad.safetensors" "${common[@]}" --data "$tmp/ok" --init "$tmp/bad.safetensors" --out "$tmp/run6"
# valid JSON, wrong model: a tensor of the wrong shape / missing tensors
printf '\x40\x00\x00\x00\x00\x00\x00\x00{"fc.bias":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}   ' >"$tmp/wrong.safetensors"
head -c 12 /dev/zero >>"$tmp/wrong.safetensors"
expect_error wrong-init "wrong.safetensors.*(layer1.0.weight|fc.bias)" "${common[@]}" --data "$tmp/ok" --init "$tmp/wrong.safetensors" --out "$tmp/run7"

check_done
