#!/usr/bin/env bash
# test_main_job.sh — the user's command end to end on CPU ranks:
#   ddpprof --cpu 2 --model convnet --epochs 1 --limit 2000
# writes the baseline and DDP run directories and every report file, the tables agree with
# the traces (phase totals never exceed wall time), and in a multi-bucket DDP run the first
# bucket's all-reduce starts before backward has finished on every step (overlap, shown
# from the recorded timestamps: bucket 0 starts before backward ends and before the last
# bucket's all-reduce, which can only start once backward produced the last gradient).
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

run="$tmp/run"
"$bin" --cpu 2 --model convnet --epochs 1 --limit 2000 --test-limit 500 --bucket-cap-mb 0.02 \
  --out "$run" >"$tmp/out.log" 2>&1 </dev/null
rc=$?
check main-exit "$rc" "exit $rc: $(tail -5 "$tmp/out.log")"

for f in baseline/meta.csv baseline/metrics.csv baseline/rank0.trace.csv baseline/checkpoint.safetensors \
         ddp/meta.csv ddp/metrics.csv ddp/rank0.trace.csv ddp/rank1.trace.csv ddp/checkpoint.safetensors \
         phases.csv buckets.csv overlap.csv stragglers.csv speedup.csv timeline.json report.html; do
  check "file-$f" "$([ -s "$run/$f" ]; echo $?)" "$run/$f missing or empty"
done
check printed-speedup "$(grep -q 'speedup' "$tmp/out.log"; echo $?)" "no speedup table printed"
check timeline-json "$(python3 -m json.tool "$run/timeline.json" >/dev/null 2>&1; echo $?)" "timeline.json is not valid JSON"

# every trace row is whole and well-formed: the header's fields, end >= start
for t in "$run"/baseline/rank0.trace.csv "$run"/ddp/rank*.trace.csv; do
  check "rows-$(basename "$(dirname "$t")")-$(basename "$t")" \
    "$(csv_awk 'NR>1 && (NF!=ncols || col("end_ns")+0 < col("start_ns")+0) {bad=1} END{exit bad}' "$t"; echo $?)" "malformed row in $t"
done

# clocks are monotonic: on every rank, step N+1 starts after step N ended
for t in "$run"/baseline/rank0.trace.csv "$run"/ddp/rank*.trace.csv; do
  bad=$(csv_awk 'NR>1 && col("phase")=="step" && col("kind")=="range" {s[col("step")]=col("start_ns"); e[col("step")]=col("end_ns"); if (col("step")>max) max=col("step")}
    END {for (k = 2; k <= max; k++) if (!(s[k] >= e[k-1])) {print "step " k " starts before step " k-1 " ended"; exit}}' "$t")
  check "monotonic-$(basename "$(dirname "$t")")-$(basename "$t")" "$([ -z "$bad" ]; echo $?)" "$t: $bad"
done

# phase totals never exceed wall time: per rank, the sum of step ranges <= wall_s
for d in baseline ddp; do
  wall=$(awk -F, '$1=="wall_s"{print $2}' "$run/$d/meta.csv")
  for t in "$run/$d"/rank*.trace.csv; do
    steps=$(csv_awk 'col("phase")=="step" && col("kind")=="range" {s+=(col("end_ns")-col("start_ns"))/1e9} END{printf "%.6f", s}' "$t")
    check "steps-within-wall-$d" "$(awk -v a="$steps" -v b="$wall" 'BEGIN { exit !(a <= b) }'; echo $?)" \
      "$t: steps total ${steps}s > wall ${wall}s"
  done
done

# every step of the DDP run: one all-reduce per bucket per rank, nested in the step
buckets=$(awk -F, '$1=="buckets"{print $2}' "$run/ddp/meta.csv")
check several-buckets "$([ "${buckets:-0}" -ge 2 ]; echo $?)" "--bucket-cap-mb 0.02 gave $buckets bucket(s)"
for t in "$run"/ddp/rank*.trace.csv; do
  bad=$(csv_awk -v nb="$buckets" '
    NR>1 && col("phase")=="step" && col("kind")=="range" {s0[col("step")]=col("start_ns"); s1[col("step")]=col("end_ns"); steps++}
    NR>1 && col("phase")=="backward" && col("kind")=="range" {be[col("step")]=col("end_ns")}
    NR>1 && col("phase")=="allreduce" {n[col("step")]++; if (col("bucket")==0) b0[col("step")]=col("start_ns"); ar_s[col("step") "," col("bucket")]=col("start_ns"); ar_e[col("step") "," col("bucket")]=col("end_ns")}
    END {
      bad = 0
      for (k in s0) {
        if (n[k] != nb) { print "step " k ": " n[k]+0 " all-reduces, want " nb; bad++ }
        # overlap: bucket 0 (gradients of the last layers) runs while backward still computes
        # the earlier layers, i.e. before backward ends and before the last bucket exists
        if (!(b0[k] < be[k])) { print "step " k ": bucket 0 started at " b0[k] " after backward ended at " be[k]; bad++ }
        if (!(b0[k] < ar_s[k "," nb-1])) { print "step " k ": bucket 0 did not start before the last bucket"; bad++ }
        for (b = 0; b < nb; b++)
          if (ar_s[k "," b] < s0[k] || ar_e[k "," b] > s1[k]) { print "step " k " bucket " b " outside its step"; bad++ }
      }
      if (steps == 0) { print "no steps"; bad++ }
      exit bad > 0
    }' "$t")
  check "overlap-$(basename "$t")" "$([ -z "$bad" ]; echo $?)" "$(echo "$bad" | head -3)"
done

# the report remade from the traces alone gives the same tables
mkdir -p "$tmp/again"
"$bin" report "$run" --out "$tmp/again" >/dev/null 2>"$tmp/again.err"
check report-again "$?" "ddpprof report failed: $(cat "$tmp/again.err")"
for f in phases.csv buckets.csv overlap.csv stragglers.csv speedup.csv; do
  check "same-$f" "$(cmp -s "$run/$f" "$tmp/again/$f"; echo $?)" "$f differs when remade"
done

check_done
