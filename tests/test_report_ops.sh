#!/usr/bin/env bash
# test_report_ops.sh — ops.csv (report/input/ops.c; report/FORMULAS.md "ops.csv")
# against what other tools say of the same traces:
#   1. torch.profiler's own key_averages() (Debian's torch 1.13, written beside the traces
#      by tests/fixtures/pytorch/make_keyavg_traces.py from the same profiler object): for
#      every op of each rank of keyavg-gloo-2ranks, calls, self CPU time and CPU total, and
#      no op more or less.  Tolerance 0.001 µs: the trace's times are the integer µs
#      key_averages adds up, so any nesting that differs from torch's shows as whole µs;
#      and of each rank of kineto-2hosts, as torch's own EventList computes it from the
#      trace's host events (tests/fixtures/pytorch/keyavg_of_kineto.py; torch 1.13 cannot
#      profile a GPU here): the same, to 0.001 µs (the times have 3 decimals of µs);
#   2. Holistic Trace Analysis' kernel breakdown (get_gpu_kernel_breakdown, memory kernels
#      included, nothing folded into "others"; tests/fixtures/pytorch/hta_kernels.py) of
#      kineto-2hosts, with HTA_DISABLE_NS_ROUNDING and the last step (ddpprof report) and
#      with HTA's defaults (--hta-defaults): per rank and kernel name its type, calls, sum,
#      mean, min, max (0.001 µs: the same ns, printed to 3 decimals of µs) and its share of
#      its type's time on the rank (0.01 %: ops.csv prints 2 decimals);
#   3. Nsight Systems' own `nsys stats` (2022.4; tests/fixtures/nsys/make_nsys_stats.sh):
#      nvtxsum of each rank of ddp-2022.4-nvtx1 (a real nsys report of a ddpprof CPU run: every
#      NVTX range's calls, total, min, max, exact to the ns), and of the current-schema
#      report (make_current_schema.py, generated here: PyTorch's ranges, emit_nvtx's
#      ", seq = ..." cut and ProfilerStep#N counted as ProfilerStep*, as key_averages does;
#      the launcher's range left out: it is no rank), its cudaapisum (CUDA API calls, ops
#      too), gpukernsum:base (kernels) and gpumemtimesum (memcpy, memset), summed over the
#      ranks as nsys sums the file; self times of ranges holding API calls by hand;
#   4. a ddpprof run of its own (fabricated, one rank) has no op data: no ops.csv, and the
#      terminal does not name one.
set -u
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
bin=${DDPPROF:-$src/build/ddpprof}
. "$src/tests/csvcol.sh"
fix=$src/tests/fixtures
work=$(mktemp -d "${TMPDIR:-/tmp}/ddpprof-test-report-ops.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/check.sh"

# 1. key_averages
# keyavg OPS_CSV GOLDEN RANK: for every golden row of RANK that ops.csv does not match, what
# differs; then the ops.csv rows the golden lacks (nothing, and exit 0: all agree; every
# comparison below also checks the exit status: a file awk cannot read fails it)
keyavg() {
  csv_awk -v R="$3" '
    FNR == 1 { f++; next }
    f == 1 && col("kind") == "cpu_op" && col("rank") == R {
      calls[col("name")] = col("calls"); self[col("name")] = col("self_us")
      total[col("name")] = col("total_us"); seen[col("name")] = 0 }
    f == 2 && col("rank") == R {
      n = col("name"); want++
      d = (n in calls) ? "" : " missing"
      if (n in calls) {
        seen[n] = 1
        if (calls[n] != col("calls")) d = d " calls " calls[n] " want " col("calls")
        if ((self[n] - col("self_cpu_us"))^2 > 1e-6) d = d " self " self[n] " want " col("self_cpu_us")
        if ((total[n] - col("cpu_total_us"))^2 > 1e-6) d = d " total " total[n] " want " col("cpu_total_us")
      }
      if (d != "") print n ":" d
    }
    END { for (n in seen) if (!seen[n]) print n ": not in key_averages"
          if (want < 15) print "golden has only " want " ops" }' "$1" "$2"
}
out=$work/keyavg
"$bin" report "$fix/pytorch/keyavg-gloo-2ranks" --out "$out" >"$work/keyavg.log" 2>&1
check_eq "keyavg report exit" "$?" 0
check_eq "ops.csv header" "$(csv_header "$out/ops.csv" run rank kind kernel_type name calls total_us self_us mean_us min_us max_us share_pct && echo ok)" ok
for r in 0 1; do
  check_eq "rank $r ops against key_averages" \
    "$(keyavg "$out/ops.csv" "$fix/pytorch/keyavg-gloo-2ranks/keyavg.rank$r.csv" $r 2>&1; echo "exit $?")" "exit 0"
done
check_eq "keyavg top ops on the terminal" "$(grep -c '^# ops: the CPU ops with the most self time' "$work/keyavg.log")" 1
check_eq "keyavg page shows the top ops" "$(grep -c 'the CPU ops with the most self time' "$out/report.html")" 1
check_eq "keyavg no kernels" "$(csv_col "$out/ops.csv" kind kind=kernel | wc -l)" 0

# 2. HTA's kernel breakdown
hta=$fix/pytorch/kineto-2hosts.hta-kernels.csv
for setting in exact default; do
  out=$work/hta-$setting
  if [ $setting = exact ]; then
    "$bin" report "$fix/pytorch/kineto-2hosts" --out "$out" >"$work/hta.log" 2>&1
  else
    "$bin" report "$fix/pytorch/kineto-2hosts" --hta-defaults --out "$out" >"$work/hta.log" 2>&1
  fi
  check_eq "kineto $setting report exit" "$?" 0
  diffs=$(csv_awk -v S=$setting '
    function far(a, b, tol) { return (a - b)^2 > tol * tol }
    FNR == 1 { f++; next }
    f == 1 && col("kind") == "kernel" {
      k = col("rank") SUBSEP col("name"); seen[k] = 0
      v[k, "type"] = col("kernel_type"); v[k, "calls"] = col("calls")
      v[k, "sum"] = col("total_us"); v[k, "mean"] = col("mean_us"); v[k, "min"] = col("min_us")
      v[k, "max"] = col("max_us"); v[k, "share"] = col("share_pct") }
    f == 2 && col("setting") == S {
      k = col("rank") SUBSEP col("name"); want++
      if (!(k in seen)) { print col("rank") " " col("name") ": missing"; next }
      seen[k] = 1; d = ""
      if (v[k, "type"] != col("kernel_type")) d = d " type " v[k, "type"]
      if (v[k, "calls"] != col("calls")) d = d " calls " v[k, "calls"]
      for (c = 1; c <= 4; c++) {
        split("sum mean min max", m, " ")
        if (far(v[k, m[c]], col(m[c] "_us"), 0.001)) d = d " " m[c] " " v[k, m[c]] " want " col(m[c] "_us")
      }
      if (far(v[k, "share"], col("share_pct"), 0.01)) d = d " share " v[k, "share"] " want " col("share_pct")
      if (d != "") print col("rank") " " col("name") ":" d
    }
    END { for (k in seen) if (!seen[k]) { split(k, p, SUBSEP); print p[1] " " p[2] ": not in HTA" }
          if (want < 40) print "golden has only " want " rows" }' "$out/ops.csv" "$hta" 2>&1
    echo "exit $?")
  check_eq "kineto $setting kernels against HTA" "$diffs" "exit 0"
done
check_eq "kineto kernels on the terminal" "$(grep -c '^# kernels: the kernels with the most time' "$work/hta.log")" 1
# the Kineto trace's CPU ops (cpu_op, user_annotation, cuda_runtime) against key_averages as
# torch's own EventList computes it from the same events (keyavg_of_kineto.py)
for r in 0 1 2 3; do
  check_eq "kineto rank $r ops against torch's EventList" \
    "$(keyavg "$work/hta-exact/ops.csv" "$fix/pytorch/kineto-2hosts.keyavg.csv" $r 2>&1; echo "exit $?")" "exit 0"
done

# 3. nsys stats
"$bin" report "$fix/nsys/ddp-2022.4-nvtx1/rank0.sqlite" --out "$work/probe" >"$work/probe.log" 2>&1
if grep -q "built without SQLite" "$work/probe.log"; then
  echo "note: part 3 (Nsight Systems) not run: this ddpprof was built without SQLite"
else
  # nsys's rows, by ddpprof's op name: the domain prefix off, emit_nvtx's suffix cut,
  # ProfilerStep#N as ProfilerStep*; summed (min, max kept) over rows of one name
  nsys_norm='
    function opname(n) {
      sub(/^(ddpprof|NCCL):/, "", n); sub(/, (seq|op_id|sizes) =.*$/, "", n)
      if (n ~ /^ProfilerStep#/) n = "ProfilerStep*"
      return n }
    function fold(n, calls, total, mn, mx) {
      if (!(n in W)) { W[n] = 1; wc[n] = 0; wt[n] = 0; wmin[n] = mn; wmax[n] = mx }
      wc[n] += calls; wt[n] += total
      if (mn + 0 < wmin[n] + 0) wmin[n] = mn
      if (mx + 0 > wmax[n] + 0) wmax[n] = mx }
    function got(n, calls, total, mn, mx) {
      if (!(n in G)) { G[n] = 1; gc[n] = 0; gt[n] = 0; gmin[n] = mn; gmax[n] = mx }
      gc[n] += calls; gt[n] += total
      if (mn + 0 < gmin[n] + 0) gmin[n] = mn
      if (mx + 0 > gmax[n] + 0) gmax[n] = mx }
    function compare(   n, d) {
      for (n in W) {
        if (!(n in G)) { print n ": missing"; continue }
        d = ""
        if (gc[n] != wc[n]) d = d " calls " gc[n] " want " wc[n]
        if ((gt[n] - wt[n] / 1000)^2 > 1e-6) d = d " total " gt[n] " want " wt[n] / 1000
        if ((gmin[n] - wmin[n] / 1000)^2 > 1e-6) d = d " min " gmin[n] " want " wmin[n] / 1000
        if ((gmax[n] - wmax[n] / 1000)^2 > 1e-6) d = d " max " gmax[n] " want " wmax[n] / 1000
        if (d != "") print n ":" d }
      for (n in G) if (!(n in W)) print n ": not in nsys stats" }'
  out=$work/nsys2022
  "$bin" report "$fix/nsys/ddp-2022.4-nvtx1" --out "$out" >"$work/nsys.log" 2>&1
  check_eq "nsys 2022.4 report exit" "$?" 0
  for r in 0 1; do
    diffs=$(csv_awk -v R=$r "$nsys_norm"'
      FNR == 1 { f++; next }
      f == 1 && col("kind") == "cpu_op" && col("rank") == R {
        got(col("name"), col("calls"), col("total_us"), col("min_us"), col("max_us")) }
      f == 2 { fold(opname(col("Range")), col("Instances"), col("Total Time (ns)"),
                    col("Min (ns)"), col("Max (ns)")) }
      END { compare() }' "$out/ops.csv" "$fix/nsys/ddp-2022.4.rank$r.nvtxsum.csv" 2>&1
      echo "exit $?")
    check_eq "nsys 2022.4 rank $r ranges against nvtxsum" "$diffs" "exit 0"
  done
  # start/end ranges (allreduce.bN) nest nothing and have no self time; push/pop ones do
  check_eq "nsys start/end range self" "$(csv_col "$out/ops.csv" self_us rank=0 name=allreduce.b0)" 0.000
  check_eq "nsys step self below total" "$(csv_awk 'FNR > 1 && col("rank") == 0 && col("name") == "step" { print (col("self_us") + 0 < col("total_us") + 0) }' "$out/ops.csv")" 1

  python3 "$fix/nsys/make_current_schema.py" "$work/current.sqlite"
  out=$work/nsyscur
  "$bin" report "$work/current.sqlite" --out "$out" >"$work/nsyscur.log" 2>&1
  check_eq "nsys current-schema report exit" "$?" 0
  diffs=$(csv_awk "$nsys_norm"'
    FNR == 1 { f++; next }
    f == 1 && col("kind") == "cpu_op" {
      got(col("name"), col("calls"), col("total_us"), col("min_us"), col("max_us")) }
    f == 2 && col("Range") != "torchrun.launch" {
      fold(opname(col("Range")), col("Instances"), col("Total Time (ns)"), col("Min (ns)"),
           col("Max (ns)")) }
    f == 3 { fold(col("Name"), col("Num Calls"), col("Total Time (ns)"), col("Min (ns)"),
                  col("Max (ns)")) }
    END { compare() }' "$out/ops.csv" "$fix/nsys/current-schema.nvtxsum.csv" \
    "$fix/nsys/current-schema.cudaapisum.csv" 2>&1
    echo "exit $?")
  check_eq "nsys current-schema ranges and CUDA API calls against nvtxsum and cudaapisum" "$diffs" "exit 0"
  # the API calls nest in the ranges that made them (after them in the file: as late ops):
  # DistributedDataParallel.forward less its 2 launches of 5 µs, 4 steps; the backward op
  # less ncclAllReduce (300 µs) and its own launch; ncclAllReduce less the NCCL launch
  check_eq "nsys forward self" "$(csv_col "$out/ops.csv" self_us rank=1 name=DistributedDataParallel.forward)" 11960.000
  check_eq "nsys backward self" "$(csv_col "$out/ops.csv" self_us rank=1 'name=autograd::engine::evaluate_function: ConvolutionBackward0')" 10780.000
  check_eq "nsys ncclAllReduce self" "$(csv_col "$out/ops.csv" self_us rank=1 name=ncclAllReduce)" 1180.000
  diffs=$(csv_awk "$nsys_norm"'
    FNR == 1 { f++; next }
    f == 1 && col("kind") == "kernel" {
      got(col("name"), col("calls"), col("total_us"), col("min_us"), col("max_us")) }
    f == 2 && FILENAME ~ /gpukernsum/ {
      fold(col("Name"), col("Instances"), col("Total Time (ns)"), col("Min (ns)"), col("Max (ns)")) }
    f == 3 { fold(col("Operation"), col("Count"), col("Total Time (ns)"), col("Min (ns)"), col("Max (ns)")) }
    END { compare() }' "$out/ops.csv" "$fix/nsys/current-schema.gpukernsum.csv" \
    "$fix/nsys/current-schema.gpumemtimesum.csv" 2>&1
    echo "exit $?")
  check_eq "nsys current-schema kernels against gpukernsum and gpumemtimesum" "$diffs" "exit 0"
  # self time of a PyTorch range under nsys: the step less its data, forward, backward and
  # optimizer ranges (490 + 3000 + 3000 + 1500 µs of 10000), 4 steps
  check_eq "nsys ProfilerStep* self rank 0" "$(csv_col "$out/ops.csv" self_us rank=0 name='ProfilerStep*')" 8040.000
  check_eq "nsys kernel types" "$(csv_col "$out/ops.csv" kernel_type rank=0 kind=kernel | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')" "communication:1 computation:3 memory:2 "
fi

# 4. a ddpprof run: no op data, no ops.csv
run=$work/own
mkdir -p "$run"
printf 'key,value\nmode,baseline\nworld_size,1\nepochs,1\ndevice,cpu\nwall_s,1\n' >"$run/meta.csv"
printf 'step,epoch,loss,loss_scale,lr,images,found_inf\n1,1,2.3,1,0.01,32,0\n2,1,2.2,1,0.01,32,0\n' >"$run/metrics.csv"
{
  echo "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream"
  echo "0,1,1,step,-1,host,0,100000000,0,,range,0"
  echo "0,1,1,forward,-1,host,1000000,40000000,0,,range,0"
  echo "0,2,1,step,-1,host,100000000,200000000,0,,range,0"
  echo "0,2,1,forward,-1,host,101000000,140000000,0,,range,0"
} >"$run/rank0.trace.csv"
# (into a directory that holds an earlier report's ops.csv: it goes)
mkdir -p "$work/own-out"
cp "$work/keyavg/ops.csv" "$work/own-out/ops.csv"
"$bin" report "$run" --out "$work/own-out" >"$work/own.log" 2>&1
check_eq "own run report exit" "$?" 0
check_eq "own run: no ops.csv" "$([ -e "$work/own-out/ops.csv" ] && echo present || echo absent)" absent
check_eq "own run: terminal names no ops.csv" "$(grep -c 'ops.csv' "$work/own.log")" 0
check_eq "own run: phases.csv written" "$([ -s "$work/own-out/phases.csv" ] && echo yes)" yes

check_done
