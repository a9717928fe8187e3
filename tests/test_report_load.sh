#!/usr/bin/env bash
# test_report_load.sh — figures you can trust: every run records in meta.csv what tells a
# busy host (host_cores, the load average at the start and the end, the CPU time of every
# process on the host and the time stolen by the hypervisor over the run, each rank's CPU
# and wall seconds), and the report prints a caution beside figures measured under load
# and beside an efficiency above 1 (report/FORMULAS.md "Figures measured under load"), in
# the terminal and in report.html; runs on an idle host get none.  The runs reported here
# are fabricated: a baseline during which other programs kept 2.3 of 2 cores busy and
# the hypervisor took 10%, and a DDP run 4x faster on 2 ranks (efficiency 2).
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# 1. a real 2-rank run records the fields
"$bin" train --cpu 2 --mode ddp --dataset synthetic --limit 128 --test-limit 16 --epochs 1 --quiet \
  --out "$tmp/real" >/dev/null 2>&1 </dev/null || bad "the 2-rank run failed"
for key in host_cores host_load_start host_load_end host_busy_s host_steal_s ranks_cpu_s \
  cpu_s.rank0 cpu_s.rank1 wall_s.rank0 wall_s.rank1; do
  if grep -qE "^$key,[0-9]+(\.[0-9]+)?$" "$tmp/real/meta.csv"; then ok; else bad "meta.csv has no $key"; fi
done

# run DIR MODE WORLD STEP_S META...: a fabricated run, 2 steps of STEP_S seconds on every
# rank, 64 images a step; META lines appended to meta.csv
run() {
  local dir=$1 mode=$2 world=$3 step_ns=$4
  shift 4
  mkdir -p "$dir"
  printf 'key,value\nmode,%s\nworld_size,%s\nepochs,1\n' "$mode" "$world" >"$dir/meta.csv"
  printf '%s\n' "$@" >>"$dir/meta.csv"
  printf 'step,epoch,loss,loss_scale,lr,images,found_inf\n1,1,2.3,1,0.01,64,0\n2,1,2.2,1,0.01,64,0\n' >"$dir/metrics.csv"
  for ((r = 0; r < world; r++)); do
    {
      echo "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream"
      echo "$r,1,1,step,-1,host,1000000000,$((1000000000 + step_ns)),0,step,range,0"
      echo "$r,2,1,step,-1,host,3000000000,$((3000000000 + step_ns)),0,step,range,0"
    } >"$dir/rank$r.trace.csv"
  done
}

# 2. the baseline under load, the DDP run 4x faster on 2 ranks
run "$tmp/loaded/baseline" baseline 1 1000000000 wall_s,10 host_cores,2 host_load_start,3.10 \
  host_load_end,4.00 host_busy_s,33 ranks_cpu_s,10 host_steal_s,2
run "$tmp/loaded/ddp" ddp 2 250000000 wall_s,4 host_cores,2 host_load_start,0.10 \
  host_load_end,0.20 host_busy_s,8.1 ranks_cpu_s,8.0 host_steal_s,0
"$bin" report "$tmp/loaded" >"$tmp/out" 2>"$tmp/err" </dev/null || bad "report of the loaded runs: $(cat "$tmp/err")"
for want in \
  "#  caution: run baseline was measured under load: other programs kept 2.30 of 2 cores busy on average (load average 3.10 at the start, 4.00 at the end); the hypervisor took 10% of the CPU time: its times are slower than this machine's" \
  "#  caution: the speedup of ddp (4.00x) compares runs measured under load (the baseline): it is not this machine's scaling" \
  "#  caution: the efficiency of ddp is 2.00, above 1 (faster than linear)"; do
  if grep -qF -- "$want" "$tmp/out"; then ok; else bad "no '$want' in:"; sed 's/^/  | /' "$tmp/out" | grep -i "caution\|speedup" ; fi
done
if [ "$(grep -c 'caution' "$tmp/out")" -eq 3 ]; then ok; else bad "$(grep -c caution "$tmp/out") cautions, want 3"; fi
if [ "$(grep -c '<p class="caution">caution: ' "$tmp/loaded/report.html")" -eq 3 ]; then ok; else
  bad "report.html does not show the 3 cautions"
fi
# the cautions sit right below the speedup table in the terminal
if awk '/^# speedup:/ {s = 1} s && /caution/ {print; exit}' "$tmp/out" | grep -q caution; then ok; else
  bad "the cautions are not below the speedup table"
fi

# 3. an idle host and a speedup below linear: no caution
run "$tmp/idle/baseline" baseline 1 1000000000 wall_s,10 host_cores,2 host_load_start,0.30 \
  host_load_end,0.90 host_busy_s,10.5 ranks_cpu_s,10 host_steal_s,0
run "$tmp/idle/ddp" ddp 2 800000000 wall_s,9 host_cores,2 host_load_start,0.90 \
  host_load_end,1.80 host_busy_s,18.2 ranks_cpu_s,18.0 host_steal_s,0.1
"$bin" report "$tmp/idle" >"$tmp/out" 2>"$tmp/err" </dev/null || bad "report of the idle runs: $(cat "$tmp/err")"
if ! grep -q caution "$tmp/out" && ! grep -q 'class="caution"' "$tmp/idle/report.html"; then ok; else
  bad "a caution on an idle host:"; grep caution "$tmp/out"
fi

# 4. without the CPU times (a run from before they were recorded): the load average alone
run "$tmp/old/baseline" baseline 1 1000000000 wall_s,10 host_cores,2 host_load_start,5.5
run "$tmp/old/ddp" ddp 2 800000000 wall_s,9
"$bin" report "$tmp/old" >"$tmp/out" 2>"$tmp/err" </dev/null
if grep -qF "caution: run baseline was measured under load (load average 5.50 at the start" "$tmp/out"; then ok; else
  bad "load average alone:"; grep caution "$tmp/out"
fi

check_done
