#!/usr/bin/env bash
# test_report_diff_runs.sh — `ddpprof diff` on real runs (report/FORMULAS.md "diff.csv"):
#   1. the main job (2 CPU ranks, --trace full) writes diff.csv, its baseline against its
#      ddp run: the phases' parts add up to the step and their shares to 100.00 exactly as
#      printed, every finer group (layers of forward and backward, buckets) to its parent;
#      the baseline's step equals phases.csv's mean step (one rank: the critical rank is
#      rank 0) and its forward time phases.csv's forward mean; the ddp step is at least
#      every rank's mean step; layer rows name the ConvNet's modules (layer1.0, fc);
#      `ddpprof diff OUT` writes the same diff.csv again
#   2. before/after an option change: the same DDP run with --bucket-cap-mb 0.05 and
#      --batch-size 64 against the main job's ddp run: B has more buckets, every group
#      still adds up, the terminal shows the short table and the summary
#   3. two PyTorch trace directories (legacy exporter, gloo; the second with SyncBatchNorm):
#      the phases add up, the all-gather is exposed communication, operators (self time per
#      step, ops.csv's) are rows of their own without a share
#   4. bad input: one run, three runs -- one stderr line, a non-zero exit
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpprof-test-diff.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

common=(--cpu 2 --model convnet --epochs 1 --limit 384 --test-limit 64 --quiet)

# adds_up DIFF_CSV: every group's a_ms, b_ms and share_pct add up to its parent's exactly
# (in thousandths and hundredths: the printed digits), the phases' shares to 100.00 (rows
# without a parent, imports' operators and kernels, are no partition)
adds_up() {
  csv_awk '
    function milli(s) { return s == "" ? 0 : int(s * 1000 + (s < 0 ? -0.5 : 0.5)) }
    function centi(s) { return s == "" ? 0 : int(s * 100 + (s < 0 ? -0.5 : 0.5)) }
    FNR > 1 {
      k = col("parent")
      if (col("level") == "step") { pa["step"] = milli(col("a_ms")); pb["step"] = milli(col("b_ms")); ps["step"] = centi(col("share_pct")); hs["step"] = col("share_pct") != "" }
      else if (k != "") { sa[k] += milli(col("a_ms")); sb[k] += milli(col("b_ms")); ss[k] += centi(col("share_pct")); kids[k] = 1 }
      if (col("level") == "phase") { pa[col("name")] = milli(col("a_ms")); pb[col("name")] = milli(col("b_ms")); ps[col("name")] = centi(col("share_pct")) }
    }
    END {
      bad = 0
      for (k in kids) {
        if (sa[k] != pa[k] || sb[k] != pb[k]) { printf "%s: children a %d b %d, parent a %d b %d\n", k, sa[k], sb[k], pa[k], pb[k]; bad = 1 }
        if (hs["step"] && ss[k] != ps[k]) { printf "%s: children shares %d, parent %d\n", k, ss[k], ps[k]; bad = 1 }
      }
      if (hs["step"] && ps["step"] != 10000) { print "step share not 100.00"; bad = 1 }
      if (!("step" in kids)) { print "no phase rows"; bad = 1 }
      exit bad
    }' "$1"
}

# 1. the main job's diff.csv
if ! "$bin" "${common[@]}" --trace full --out "$tmp/j1" >"$tmp/j1.out" 2>&1; then
  bad "main job failed"; sed 's/^/  | /' "$tmp/j1.out"
  check_done; exit 1
fi
d1=$tmp/j1/diff.csv
check_run "main job wrote diff.csv" test -s "$d1"
check_run "diff.csv: baseline -> ddp" test "$(csv_col "$d1" run_a level=step)/$(csv_col "$d1" run_b level=step)" = baseline/ddp
check_run "main job: every group adds up" adds_up "$d1"
base_step=$(csv_col "$tmp/j1/phases.csv" mean_ms run=baseline rank=0 phase=step)
check_run "baseline step = phases.csv mean step ($base_step)" test "$(csv_col "$d1" a_ms level=step)" = "$base_step"
base_fwd=$(csv_col "$tmp/j1/phases.csv" mean_ms run=baseline rank=0 phase=forward)
check_run "baseline forward time = phases.csv forward mean ($base_fwd)" test "$(csv_col "$d1" a_time_ms level=phase name=forward)" = "$base_fwd"
ddp_step=$(csv_col "$d1" b_ms level=step)
for r in 0 1; do
  m=$(csv_col "$tmp/j1/phases.csv" mean_ms run=ddp rank=$r phase=step)
  check_run "ddp step $ddp_step >= rank $r's mean $m" awk -v a="$ddp_step" -v b="$m" 'BEGIN { exit !(a + 0.0005 >= b) }'
done
check_run "layer rows under forward (layer1.0, fc)" test -n "$(csv_col "$d1" a_ms level=layer parent=forward name=layer1.0)" -a -n "$(csv_col "$d1" b_ms level=layer parent=forward name=fc)"
check_run "layer rows under backward" test -n "$(csv_col "$d1" a_ms level=layer parent=backward name=fc)"
check_run "the ddp run's bucket b0 under exposed_comm" test -n "$(csv_col "$d1" b_time_ms level=comm parent=exposed_comm name=b0)"
check_run "the main job printed the diff" grep -q "share of change" "$tmp/j1.out"
cp "$d1" "$tmp/d1.csv"
"$bin" diff "$tmp/j1" >"$tmp/again.out" 2>&1
check_run "ddpprof diff OUT: the main job's diff.csv again" cmp -s "$tmp/d1.csv" "$d1"

# 2. before/after: smaller buckets and a bigger batch
if ! "$bin" train --mode ddp "${common[@]}" --trace full --bucket-cap-mb 0.05 --batch-size 64 \
    --out "$tmp/j2" >"$tmp/j2.out" 2>&1; then
  bad "second run failed"; sed 's/^/  | /' "$tmp/j2.out"
else
  "$bin" diff "$tmp/j1/ddp" "$tmp/j2" --out "$tmp/d2" >"$tmp/d2.out" 2>&1
  check_run "ddpprof diff A B: exit 0" test $? -eq 0
  d2=$tmp/d2/diff.csv
  check_run "diff A B wrote diff.csv" test -s "$d2"
  check_run "diff A B: every group adds up" adds_up "$d2"
  na=$(csv_awk 'FNR > 1 && col("level") == "comm" && col("name") ~ /^b[0-9]+$/ && col("a_time_ms") + 0 > 0 { n++ } END { print n + 0 }' "$d2")
  nb=$(csv_awk 'FNR > 1 && col("level") == "comm" && col("name") ~ /^b[0-9]+$/ && col("b_time_ms") + 0 > 0 { n++ } END { print n + 0 }' "$d2")
  check_run "--bucket-cap-mb 0.05 has more buckets ($nb) than the default ($na)" test "$nb" -gt "$na"
  check_run "the terminal: the table and the summary" grep -q "share of change" "$tmp/d2.out"
  check_run "the summary line" grep -qE "^#  diff ddp -> .*: step [0-9.]+ -> [0-9.]+ ms" "$tmp/d2.out"
  check_run "ddpprof diff prints no other table" test "$(grep -c "phases: time per phase" "$tmp/d2.out")" -eq 0
  check_run "report.html has the diff section" grep -q "Diff: where the step-time change comes from" "$tmp/d2/report.html"
  "$bin" report "$tmp/j1/ddp" "$tmp/j2" --diff --out "$tmp/d3" >"$tmp/d3.out" 2>&1
  check_run "report A B --diff: the same diff.csv" cmp -s "$d2" "$tmp/d3/diff.csv"
  check_run "report --diff prints the report too" grep -q "phases: time per phase" "$tmp/d3.out"
fi

# 3. PyTorch traces (the legacy exporter's, 2 gloo ranks): without and with SyncBatchNorm
fix=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}/tests/fixtures/pytorch
"$bin" diff "$fix/legacy-gloo-2ranks" "$fix/legacy-gloo-bn-2ranks" --out "$tmp/pt" >"$tmp/pt.out" 2>&1
check_run "diff of two PyTorch trace directories: exit 0" test $? -eq 0
check_run "PyTorch traces: every group adds up" adds_up "$tmp/pt/diff.csv"
check_run "PyTorch traces: the SyncBatchNorm run's all-gather under exposed_comm" test -n "$(csv_col "$tmp/pt/diff.csv" b_ms level=comm name=comm.allgather)"
mm_a=$(csv_col "$tmp/pt/diff.csv" a_ms level=op name=aten::mm)
mm_b=$(csv_col "$tmp/pt/diff.csv" b_ms level=op name=aten::mm)
check_run "PyTorch traces: operator rows (aten::mm self time per step: $mm_a -> $mm_b ms)" awk -v a="$mm_a" -v b="$mm_b" 'BEGIN { exit !(a > 0 && b > 0) }'
check_run "PyTorch traces: operator rows have no share (not a partition of the step)" test -z "$(csv_col "$tmp/pt/diff.csv" share_pct level=op name=aten::mm)"
check_run "PyTorch traces: the terminal's operators" grep -qE "^   op +aten::" "$tmp/pt.out"

# 4. bad input
expect_error() { # NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  "$bin" diff "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qE -- "$pattern" "$tmp/err"; then
    ok
  else
    bad "$name: exit $rc, wanted one stderr line /$pattern/"; sed 's/^/  | /' "$tmp/err"
  fi
}
expect_error "one run" "holds 1 run: give one directory holding two" "$tmp/j1/ddp"
expect_error "three runs" "3 inputs given" "$tmp/j1/ddp" "$tmp/j1/baseline" "$tmp/j1/ddp"
expect_error "the same run twice" "do not make two runs \\(1 read\\): give two different runs" "$tmp/j1/ddp" "$tmp/j1/ddp/"

check_done
