#!/usr/bin/env bash
# test_resnet_ddp.sh — ResNet18 under DDP on 2 CPU ranks, end to end, at a tiny width:
#   ddpprof train --cpu 2 --model resnet18 --resnet-width 4 --dataset synthetic --optimizer adam
#     --bucket-cap-mb 0.01 --save-every-epoch --epochs 2 (8 steps of 2 x 8 images an epoch,
#     DDP's default fp16 autocast with its GradScaler)
# 1. the loss falls (the last 4 steps' mean below 85% of the first 4's);
# 2. more than one gradient bucket, and in every rank's trace exactly one all-reduce row per
#    bucket per step (each bucket id once);
# 3. the report's bucket table agrees: one row per bucket with meta.csv's params and bytes,
#    and steps x ranks calls;
# 4. resuming from epoch_1.safetensors gives an epoch_2.safetensors identical byte for byte
#    to the uninterrupted run's, and the same epoch-2 metrics;
# 5. where PyTorch is installed, epoch_2.safetensors loads into the example's module (strict
#    load_state_dict at width 4) and holds Adam's state under PyTorch's names, its step the
#    number of steps the GradScaler did not skip;
# 6. the main job with --model resnet18 and no CIFAR-10 files trains on synthetic data, says
#    so (accuracy meaningless), and its report lists all 20+ buckets of a small cap, in
#    buckets.csv and in report.html;
# 7. --dataset cifar where there is none: one error line naming the missing batch.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
meta() { awk -F, -v k="$2" '$1==k{print $2}' "$1/meta.csv"; }

common=(--cpu 2 --model resnet18 --resnet-width 4 --dataset synthetic --batch-size 8 --limit 128
        --test-limit 64 --optimizer adam --lr 0.003 --bucket-cap-mb 0.01 --save-every-epoch
        --epochs 2)
"$bin" train "${common[@]}" --out "$tmp/a" >"$tmp/a.log" 2>&1 </dev/null
rc=$?
check run "$rc" "exit $rc: $(tail -5 "$tmp/a.log")"
check example-lines "$(grep -q 'train | epoch: 2 | loss: ' "$tmp/a.log" &&
  grep -q 'val | epoch: 2 | loss: .* | accuracy: ' "$tmp/a.log"; echo $?)" \
  "the example's train/val lines are missing: $(tail -5 "$tmp/a.log")"
check synthetic-note "$(grep -c 'meaningless' "$tmp/a.log" | grep -qx 1; echo $?)" \
  "the synthetic data set is not announced exactly once"

# 1. the loss falls
fall=$(csv_awk 'NR>1 {l[NR-1]=col("loss"); n=NR-1} END {
  for (i = 1; i <= 4; i++) { a += l[i]; b += l[n-4+i] }
  printf "%.4f %.4f %d", a/4, b/4, (n == 16 && b < 0.85 * a) ? 0 : 1 }' "$tmp/a/metrics.csv")
check loss-falls "${fall##* }" "steps 1-4 vs the last 4 (mean loss): ${fall% *}, want 16 steps"

# 2. buckets and their all-reduce rows
nb=$(meta "$tmp/a" buckets)
check buckets "$([ "${nb:-0}" -gt 1 ]; echo $?)" "--bucket-cap-mb 0.01 gave ${nb:-no} bucket(s)"
for t in "$tmp"/a/rank0.trace.csv "$tmp"/a/rank1.trace.csv; do
  bad=$(csv_awk -v nb="$nb" '
    NR>1 && col("phase")=="step" {steps[col("step")]=1}
    NR>1 && col("phase")=="allreduce" {n[col("step")]++; seen[col("step") "," col("bucket")]++}
    END {
      for (s in steps) {
        if (n[s] != nb) { print "step " s ": " n[s]+0 " all-reduce rows, want " nb; exit }
        for (b = 0; b < nb; b++)
          if (seen[s "," b] != 1) { print "step " s ": bucket " b " " seen[s "," b]+0 " times"; exit }
        k++
      }
      if (k != 16) print k+0 " steps, want 16"
    }' "$t")
  check "allreduce-rows-$(basename "$t")" "$([ -z "$bad" ]; echo $?)" "$t: $bad"
done

# 3. the report's bucket table
# every step's calls: --warmup-steps 0 keeps the warm-up steps (report/FORMULAS.md)
"$bin" report "$tmp/a" --out "$tmp/rep" --warmup-steps 0 >"$tmp/rep.log" 2>&1
check report "$?" "report failed: $(tail -3 "$tmp/rep.log")"
bad=$(csv_awk -v nb="$nb" -v steps=16 -v world=2 'NR==FNR {m[col("key")]=col("value"); next}
  FNR>1 {rows++
    if (col("params") != m["bucket." col("bucket") ".params"] || col("bytes") != m["bucket." col("bucket") ".bytes"])
      { print "bucket " col("bucket") ": params " col("params") " bytes " col("bytes") " in the table, " m["bucket." col("bucket") ".params"] " and " m["bucket." col("bucket") ".bytes"] " in meta.csv"; exit }
    if (col("count") != steps * world) { print "bucket " col("bucket") ": " col("count") " calls, want " steps * world; exit } }
  END { if (rows != nb) print rows+0 " rows for " nb " buckets" }' "$tmp/a/meta.csv" "$tmp/rep/buckets.csv")
check report-buckets "$([ -z "$bad" ]; echo $?)" "$bad"

# 4. resume from epoch 1
"$bin" train "${common[@]}" --out "$tmp/b" --resume "$tmp/a/epoch_1.safetensors" >"$tmp/b.log" 2>&1 </dev/null
rc=$?
check resume-run "$rc" "exit $rc: $(tail -5 "$tmp/b.log")"
check resume-identical "$(cmp -s "$tmp/a/epoch_2.safetensors" "$tmp/b/epoch_2.safetensors"; echo $?)" \
  "epoch_2.safetensors of the resumed run differs from the uninterrupted run's"
check resume-metrics "$(diff <(csv_awk 'col("epoch")==2' "$tmp/a/metrics.csv") <(csv_awk 'NR>1' "$tmp/b/metrics.csv") >/dev/null; echo $?)" \
  "the resumed run's epoch-2 metrics differ"
check resume-no-epoch1 "$([ ! -e "$tmp/b/epoch_1.safetensors" ]; echo $?)" "the resumed run wrote epoch 1 again"

# 5. the checkpoint in the example's PyTorch module
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  taken=$(csv_awk 'NR>1 && col("found_inf")==0' "$tmp/a/metrics.csv" | wc -l) # steps the GradScaler kept
  out=$(/usr/bin/python3 - "$src/tests/golden" "$tmp/a/epoch_2.safetensors" "$taken" <<'EOF' 2>&1
import json, struct, sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
from make_golden_resnet18 import Block, ResNet
with open(sys.argv[2], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
types = {"F32": np.float32, "I64": np.int64}
tensors = {}
for k, v in header.items():
    if k == "__metadata__":
        continue
    a, b = v["data_offsets"]
    tensors[k] = torch.from_numpy(np.frombuffer(data[a:b], types[v["dtype"]]).reshape(v["shape"]).copy())
model = ResNet(Block, width=4)
model.load_state_dict({k: v for k, v in tensors.items() if not k.startswith("optimizer.")})
p = dict(model.named_parameters())
for name, t in p.items():
    for leaf in ("exp_avg", "exp_avg_sq"):
        assert tensors["optimizer.%s.%s" % (name, leaf)].shape == t.shape, (name, leaf)
    assert float(tensors["optimizer.%s.step" % name]) == float(sys.argv[3]), name
print("ok", len(p))
EOF
)
  check pytorch-load "$([ "${out%% *}" = ok ]; echo $?)" "$out"
else
  echo "note: no python3-torch: the checkpoint is not loaded into PyTorch"
fi

# 6. the main job: synthetic data announced, 20+ buckets in the report
"$bin" --cpu 2 --model resnet18 --resnet-width 4 --epochs 1 --batch-size 8 --limit 32 \
  --test-limit 16 --bucket-cap-mb 0.0002 --data "$tmp/no-cifar-here" --out "$tmp/main" \
  >"$tmp/main.log" 2>&1 </dev/null
rc=$?
check main-job "$rc" "exit $rc: $(tail -5 "$tmp/main.log")"
check main-synthetic "$(grep -q 'no CIFAR-10 batches.*synthetic.*meaningless' "$tmp/main.log"; echo $?)" \
  "the main job did not say it trains on synthetic data"
nb=$(meta "$tmp/main/ddp" buckets)
rows=$(csv_awk 'NR>1 && col("run") ~ /ddp/' "$tmp/main/buckets.csv" | wc -l)
check main-buckets "$([ "${nb:-0}" -ge 20 ] && [ "$rows" -eq "$nb" ]; echo $?)" \
  "${nb:-no} buckets in meta.csv, $rows rows in buckets.csv (want 20 or more, one each)"
html=$(grep -c '<tr><td class="l">ddp</td><td>2</td>' "$tmp/main/report.html")
check main-html-buckets "$([ "$html" -ge "$nb" ]; echo $?)" \
  "report.html shows $html ddp rows of the bucket table's $nb"

# 7. --dataset cifar without the files: one line, no training
mkdir -p "$tmp/empty"
"$bin" train --model resnet18 --dataset cifar --data "$tmp/empty" --out "$tmp/bad" >"$tmp/bad.log" 2>&1 </dev/null
rc=$?
check cifar-missing "$([ $rc -ne 0 ] && [ "$(grep -c . "$tmp/bad.log")" -eq 1 ] &&
  grep -q '^ddpprof: .*data_batch_1.bin: missing' "$tmp/bad.log"; echo $?)" \
  "exit $rc, want one error line naming data_batch_1.bin: $(head -3 "$tmp/bad.log")"

check_done
