#!/usr/bin/env bash
# test_bad_checkpoint.sh — a checkpoint is input too: given to --resume (or --init) with
# any metadata field out of range, or a NaN weight, training does not start: exit != 0,
# one stderr line naming the field and its value, no step in metrics.csv and no new
# checkpoint.  The checkpoint of a real 1-epoch run is edited by python3 for each case
# (epoch 10^20 used to loop for ever from epoch -2147483562, epoch -5 trained 7 epochs,
# scale nan skipped every step and exited 0).  The unedited one resumes and trains.
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
command -v python3 >/dev/null || { echo "skip: python3 edits the checkpoints"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(train --cpu 1 --dataset synthetic --limit 64 --test-limit 32 --batch-size 32 --quiet)

. "$(dirname "$0")/check.sh"

"$bin" "${common[@]}" --epochs 1 --out "$tmp/first" >/dev/null 2>"$tmp/first.err" </dev/null ||
  { echo "FAIL the first run: $(cat "$tmp/first.err")"; exit 1; }
ck=$tmp/first/checkpoint.safetensors

# edit OUT KEY=VALUE...: a copy of the checkpoint with metadata KEY set to VALUE (VALUE
# "-" removes it), or with TENSOR:nan / TENSOR:-3 written into the first element of TENSOR
# (TENSOR:all=V: into every element)
edit() {
  python3 - "$ck" "$@" <<'PY'
import json, math, struct, sys
src, out, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
data = bytearray(raw[8 + n:])
for e in edits:
    if ":" in e:
        name, value = e.split(":", 1)
        t = head[name]
        at = t["data_offsets"][0]
        if value.startswith("all="):
            end = t["data_offsets"][1]
            data[at:end] = struct.pack("<f", float(value[4:])) * ((end - at) // 4)
        elif t["dtype"] == "I64":
            data[at:at + 8] = struct.pack("<q", int(value))
        else:
            data[at:at + 4] = struct.pack("<f", float(value))
    else:
        key, value = e.split("=", 1)
        if value == "-":
            del head["__metadata__"][key]
        else:
            head["__metadata__"][key] = value
h = json.dumps(head, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(out, "wb").write(struct.pack("<Q", len(h)) + h + bytes(data))
PY
}

# refused NAME PATTERN OPTION EDIT...: the edited checkpoint given to OPTION (--resume or
# --init) for a 2-epoch run: refused in one line matching PATTERN, nothing trained
refused() {
  local name=$1 pattern=$2 option=$3
  shift 3
  local file=$tmp/$name.safetensors out=$tmp/run-$name
  edit "$file" "$@"
  "$bin" "${common[@]}" --epochs 2 "$option" "$file" --out "$out" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$? lines steps
  lines=$(wc -l <"$tmp/err")
  steps=$(($(cat "$out/metrics.csv" 2>/dev/null | wc -l) - 1))
  if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -qE -- "$pattern" "$tmp/err" &&
    [ "$steps" -le 0 ] && [ ! -e "$out/checkpoint.safetensors" ]; then
    ok
  else
    bad "$name: exit $rc, $lines stderr line(s), $steps step(s) trained, wanted /$pattern/:"
    sed 's/^/  | /' "$tmp/err"
  fi
}

refused epoch-huge "'epoch' = '99999999999999999999' is not a whole number" --resume epoch=99999999999999999999
refused epoch-negative "'epoch' = '-5' is not a whole number in \[0, " --resume epoch=-5
refused epoch-fraction "'epoch' = '1.5'" --resume epoch=1.5
refused epoch-missing "'epoch' is missing" --resume epoch=-
refused epoch-spaces "'epoch' = ' 1'" --resume "epoch= 1"
refused step-negative "'step' = '-1'" --resume step=-1
# a step the trace's 32-bit step column cannot hold (the run used to train and write rows
# the report refuses): refused at resume, as is one whose run would pass it
refused step-beyond-trace "is at step 3000000000 and this run takes up to 2 more: past step 2147483647" \
  --resume step=3000000000
refused step-near-trace-max "is at step 2147483646 and this run takes up to 2 more" --resume step=2147483646
refused scale-nan "'scaler.scale' = 'nan' is not a finite number above 0" --resume scaler.scale=nan
refused scale-negative "'scaler.scale' = '-1'" --resume scaler.scale=-1
refused scale-zero "'scaler.scale' = '0'" --resume scaler.scale=0
refused scale-inf "'scaler.scale' = 'inf'" --resume scaler.scale=inf
refused scale-underflow "'scaler.scale' = 1e-50 is 0 as a float" --resume scaler.scale=1e-50
refused enabled-two "'scaler.enabled' = '2'" --resume scaler.enabled=2
refused growth-below-1 "'scaler.growth_factor' = '0.5'" --resume scaler.growth_factor=0.5
refused backoff-zero "'scaler.backoff_factor' = '0'" --resume scaler.backoff_factor=0
refused backoff-above-1 "'scaler.backoff_factor' = '1.5'" --resume scaler.backoff_factor=1.5
refused interval-zero "'scaler.growth_interval' = '0'" --resume scaler.growth_interval=0
refused tracker-negative "'scaler.growth_tracker' = '-1'" --resume scaler.growth_tracker=-1
refused tracker-at-interval "'scaler.growth_tracker' = '2000' is not a whole number in \[0, 1999\]" \
  --resume scaler.growth_tracker=2000
refused format-unknown "format 'ddpprof-checkpoint-9' is not ddpprof-checkpoint-1" --resume \
  format=ddpprof-checkpoint-9
refused format-missing "'format' is missing" --resume format=-
refused model-other "a checkpoint of model 'resnet18', not 'convnet'" --resume model=resnet18
refused optimizer-unknown "'optimizer' = 'rmsprop' is not sgd or adam" --resume optimizer=rmsprop
refused newline-in-value "model 'a\\\\nb', not 'convnet'" --resume "model=a
b"
refused weight-nan "tensor 'fc.bias' holds nan at element 0" --resume fc.bias:nan
refused weight-inf-init "tensor 'fc.weight' holds inf at element 0" --init fc.weight:inf
refused counter-negative "'layer1.1.num_batches_tracked' = -3" --init layer1.1.num_batches_tracked:-3
refused all-done "has 2 epoch\(s\) done and --epochs is 2: nothing left to train" --resume \
  epoch=2
# a mid-epoch checkpoint (one 32-sample step of epoch 1 done) records the world and batch
# size it was taken with: another of either would skip other samples, so it is refused
# naming what changed (it used to re-train silently from the wrong sample)
refused mid-epoch-batch "taken mid-epoch .* with batch size 16 per rank, now 32" --resume \
  epoch=0 step=2 sampler_position=32 batch_size=16
refused mid-epoch-world "taken mid-epoch .* with world size 2, now 1" --resume \
  epoch=0 step=1 sampler_position=32 world_size=2
refused mid-epoch-both "world size 4, now 1 and batch size 8 per rank, now 32" --resume \
  epoch=0 step=1 sampler_position=32 world_size=4 batch_size=8
refused position-negative "'sampler_position' = '-1' is not a whole number" --resume \
  sampler_position=-1
# the same shapes resume mid-epoch: the rest of epoch 1 (one step), then epoch 2 (two)
edit "$tmp/mid.safetensors" epoch=0 step=1 sampler_position=32
"$bin" "${common[@]}" --epochs 2 --resume "$tmp/mid.safetensors" --out "$tmp/mid" >/dev/null \
  2>"$tmp/err" </dev/null
rc=$?
steps=$(($(wc -l <"$tmp/mid/metrics.csv") - 1))
if [ $rc -eq 0 ] && [ "$steps" -eq 3 ]; then ok; else
  bad "mid-epoch resume, same shapes: exit $rc, $steps step(s) (want 3): $(cat "$tmp/err")"
fi

# weights beyond fp16's range: under --amp fp16 the GradScaler skips every training step
# and evaluation's forward overflows; the val loss (nan) comes with one warning naming why
edit "$tmp/huge.safetensors" fc.weight:all=30000
"$bin" "${common[@]}" --epochs 1 --amp fp16 --init "$tmp/huge.safetensors" --out "$tmp/huge" \
  >/dev/null 2>"$tmp/err" </dev/null
rc=$?
val=$(sed -n 's/^epoch\.1\.val_loss,//p' "$tmp/huge/meta.csv" 2>/dev/null)
if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && case $val in *nan*) true ;; *) false ;; esac &&
  grep -q "warning: epoch 1's val loss is nan under --amp fp16: the evaluation's fp16 forward overflowed.*skipped 2 of this epoch's 2" "$tmp/err"; then
  ok
else
  bad "huge weights under fp16: exit $rc, val loss '$val', stderr: $(cat "$tmp/err")"
fi

# the checkpoint as it was resumes and trains epoch 2
"$bin" "${common[@]}" --epochs 2 --resume "$ck" --out "$tmp/resumed" >/dev/null 2>"$tmp/err" </dev/null
rc=$?
steps=$(($(wc -l <"$tmp/resumed/metrics.csv") - 1))
if [ $rc -eq 0 ] && [ "$steps" -eq 2 ] && [ -s "$tmp/resumed/checkpoint.safetensors" ]; then ok; else
  bad "the unedited checkpoint: exit $rc, $steps step(s): $(cat "$tmp/err")"
fi

check_done
