#!/usr/bin/env bash
# test_report_collectives.sh — every collective is communication (issue 22 §2,
# report/FORMULAS.md "Every collective is communication"): a 2-CPU-rank DDP run of the
# ConvNet (two BatchNorm layers, SyncBatchNorm on: the default) records
#   - DDP's initial broadcast of the parameters and buffers: one comm.broadcast row at step
#     0 (coalesced, as PyTorch's), its bytes the model's parameters and buffers;
#   - SyncBatchNorm's all-gather in forward, one per BN layer and step: comm.allgather rows
#     of 2 x (2C + 1) floats (C = 16 and 32 channels: 264 and 520 bytes), and its
#     all-reduce in backward (comm.allreduce, 2C + 1 floats), nested in forward / backward,
#     on the comm lane;
# and the report counts them: phases.csv has their rows with the collective kind and bytes,
# overlap.csv's comm_ms holds them and compute_ms no longer does (forward + backward +
# optimizer less the training thread's collectives), buckets.csv only gradient all-reduces.
# --no-sync-bn: no comm.allgather rows.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
tiny=(train --cpu 2 --model convnet --dataset synthetic --limit 128 --test-limit 32
      --batch-size 16 --epochs 1 --quiet)
if ! "$bin" "${tiny[@]}" --out "$tmp/run" >"$tmp/out" 2>"$tmp/err" </dev/null; then
  echo "FAIL the 2-rank run:"; cat "$tmp/err"; exit 1
fi
trace=$tmp/run/rank0.trace.csv
steps=$(csv_awk 'FNR>1 && col("phase")=="step" && col("clock")=="host" && col("kind")=="range"' "$trace" | wc -l)
[ "$steps" -ge 1 ] && ok || bad "no step rows in $trace"

# rows of PHASE on the host clock: "step bytes stream" per line (columns by name: csvcol.sh)
rows() { csv_awk -v ph="$1" 'FNR>1 && col("phase")==ph && col("clock")=="host" {
  print col("step"), col("bytes"), col("stream") }' "$trace"; }

# 1. the trace: the initial broadcast, the all-gathers, SyncBatchNorm's all-reduces
bcast=$(rows comm.broadcast | awk '$1==0 {n++; b+=$2} END {print n+0, b+0}')
params_bytes=$(csv_awk 'FNR>1 && col("key") ~ /^bucket\.[0-9]+\.bytes$/ {b+=col("value")}
  END {print b+0}' "$tmp/run/meta.csv")
read -r nb bb <<<"$bcast"
# coalesced into one broadcast, as PyTorch's _sync_module_states (it was one per tensor: 16
# for the ConvNet's parameters, buffers and counters)
check_eq "comm.broadcast rows at step 0 (one coalesced broadcast)" "$nb" 1
# the broadcast carries every parameter (the buckets' bytes) and the buffers besides
[ "$bb" -gt "$params_bytes" ] && ok || bad "broadcast bytes $bb not above the parameters' $params_bytes"
check_eq "all-gathers per step (two BN layers)" \
  "$(rows comm.allgather | awk '$1>=1 {n++} END {print n+0}')" "$((2 * steps))"
check_eq "all-gather bytes" "$(rows comm.allgather | awk '{print $2}' | sort -un | tr '\n' ' ')" "264 520 "
check_eq "all-gathers on the comm lane" "$(rows comm.allgather | awk '{print $3}' | sort -u)" "1"
# (step -1: the comm's calibration all-reduces at setup, probes/TRACE.md: not SyncBatchNorm's)
check_eq "SyncBatchNorm backward all-reduce bytes" \
  "$(rows comm.allreduce | awk '$1>=0 && $2!=4 {print $2}' | sort -un | tr '\n' ' ')" "132 260 "
# each all-gather lies inside a forward range of its step
inside=$(csv_awk 'FNR>1 && col("clock")=="host" && col("phase")=="forward" {
    fs[col("step")]=col("start_ns"); fe[col("step")]=col("end_ns") }
  FNR>1 && col("clock")=="host" && col("phase")=="comm.allgather" && col("step")>=1 {
    g[++n]=col("step")" "col("start_ns")" "col("end_ns") }
  END {bad=0; for (i=1;i<=n;i++) {split(g[i],a," "); if (a[2]<fs[a[1]] || a[3]>fe[a[1]]) bad++}; print n, bad}' "$trace")
check_eq "all-gathers inside forward (count, outside)" "$inside" "$((2 * steps)) 0"

# 2. the report
if ! "$bin" report "$tmp/run" --out "$tmp/rep" >"$tmp/rep.out" 2>"$tmp/rep.err" </dev/null; then
  echo "FAIL report:"; cat "$tmp/rep.err"; exit 1
fi
# field COL of phases.csv's row of rank 0 and PHASE; of overlap.csv's row of rank 0
phase_field() { csv_col "$tmp/rep/phases.csv" "$2" rank=0 phase="$1"; }
overlap_field() { csv_col "$tmp/rep/overlap.csv" "$1" rank=0; }
check_eq "phases.csv comm.allgather collective" "$(phase_field comm.allgather collective)" allgather
check_eq "phases.csv comm.broadcast collective" "$(phase_field comm.broadcast collective)" broadcast
check_eq "phases.csv allreduce collective" "$(phase_field allreduce collective)" allreduce
check_eq "phases.csv forward: no collective" "$(phase_field forward collective)" ""
warm=$(phase_field step warmup_steps)
counted=$((steps - warm))
check_eq "phases.csv comm.allgather count" "$(phase_field comm.allgather count)" "$((2 * counted))"
ag_bytes=$(csv_awk -v w="$warm" 'FNR>1 && col("phase")=="comm.allgather" && col("clock")=="host" &&
  col("step")>w {b+=col("bytes")} END {print b+0}' "$trace")
check_eq "phases.csv comm.allgather bytes" "$(phase_field comm.allgather bytes)" "$ag_bytes"
check_eq "phases.csv comm.broadcast bytes" "$(phase_field comm.broadcast bytes)" "$bb"
# compute = forward + backward + optimizer less the collectives they hold; comm holds them
# (every figure has 3 decimals: a tolerance of 0.005 ms per term)
awk -v F="$(phase_field forward total_ms)" -v B="$(phase_field backward total_ms)" \
    -v O="$(phase_field optimizer total_ms)" -v G="$(phase_field comm.allgather total_ms)" \
    -v A="$(phase_field comm.allreduce total_ms)" -v C="$(overlap_field compute_ms)" \
    -v M="$(overlap_field comm_ms)" -v R="$(phase_field allreduce total_ms)" 'BEGIN {
  want = F + B + O - G - A; d = C - want; if (d < 0) d = -d
  if (d > 0.03) { print "compute_ms " C " != forward+backward+optimizer-collectives " want; exit 1 }
  if (M + 0.02 < G + A) { print "comm_ms " M " below the all-gathers and all-reduces " G + A; exit 1 }
  if (M + 0.02 < R) { print "comm_ms " M " below the buckets " R; exit 1 } }' && ok ||
  bad "overlap.csv compute/comm"
# buckets.csv: gradient buckets only (as many as meta.csv's buckets)
check_eq "buckets.csv rows" "$(($(wc -l <"$tmp/rep/buckets.csv") - 1))" \
  "$(csv_col "$tmp/run/meta.csv" value key=buckets)"
# the timeline has them (on the comm lane, stream 1: checked in the trace above), and the
# step drawing in report.html on the first comm lane
grep -q '"comm.allgather"' "$tmp/rep/timeline.json" && ok || bad "timeline.json lacks comm.allgather"
grep -q 'comm.allgather (allgather): ' "$tmp/rep/report.html" && ok ||
  bad "report.html's step drawing lacks the all-gathers"

# 3. --no-sync-bn: plain BatchNorm, no all-gather
if "$bin" "${tiny[@]}" --no-sync-bn --out "$tmp/nosync" >/dev/null 2>"$tmp/err2" </dev/null; then
  check_eq "--no-sync-bn all-gathers" \
    "$(csv_awk 'FNR>1 && col("phase")=="comm.allgather"' "$tmp/nosync/rank0.trace.csv" | wc -l)" 0
else
  bad "--no-sync-bn run: $(cat "$tmp/err2")"
fi

check_done
