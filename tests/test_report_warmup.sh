#!/usr/bin/env bash
# test_report_warmup.sh — per-step statistics skip the warm-up (report/FORMULAS.md "Warm-up
# steps") and an oversubscribed run gets a caution ("Figures measured under load").  The
# runs are fabricated: a DDP run of 2 ranks and 8 steps whose step 1 takes 600 ms on every
# rank (steps 2-8: 100 ms, step 5: 150 ms on rank 1, the true straggler), and its baseline.
#   default          step 1 is detected as warm-up: phases.csv counts 7 steps, max 150 ms
#                    on rank 1,
#                    warmup_steps 1; stragglers.csv has no step 1; the terminal says
#                    "step 1: 600.0 ms, warm-up, not counted" once per run
#   --warmup-steps 0 keeps all 8 steps (max 600 ms, step 1 in stragglers.csv)
#   --warmup-steps 2 leaves 2 out
#   4 CPU ranks on 2 cores: "run ddp was oversubscribed: 4 CPU ranks on 2 cores", and the
#   speedup that compares it is cautioned; 2 ranks on 2 cores get neither
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# run DIR MODE WORLD META...: 8 steps on every rank; step 1 600 ms, the rest 100 ms
# (rank 1's step 5: 150 ms); backward ends 10 ms before each step ends
run() {
  local dir=$1 mode=$2 world=$3
  shift 3
  mkdir -p "$dir"
  printf 'key,value\nmode,%s\nworld_size,%s\nepochs,1\ndevice,cpu\nwall_s,2\n' "$mode" "$world" >"$dir/meta.csv"
  printf '%s\n' "$@" >>"$dir/meta.csv"
  {
    echo "step,epoch,loss,loss_scale,lr,images,found_inf"
    for s in 1 2 3 4 5 6 7 8; do echo "$s,1,2.3,1,0.01,64,0"; done
  } >"$dir/metrics.csv"
  for ((r = 0; r < world; r++)); do
    {
      echo "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream"
      t=0
      for s in 1 2 3 4 5 6 7 8; do
        d=100000000
        [ "$s" -eq 1 ] && d=600000000
        [ "$s" -eq 5 ] && [ "$r" -eq 1 ] && d=150000000
        echo "$r,$s,1,backward,-1,host,$((t + 1000000)),$((t + d - 10000000)),0,backward,range,0"
        echo "$r,$s,1,step,-1,host,$t,$((t + d)),0,step,range,0"
        t=$((t + d + 1000000))
      done
    } >"$dir/rank$r.trace.csv"
  done
}

run "$tmp/a/baseline" baseline 1 host_cores,2
run "$tmp/a/ddp" ddp 2 host_cores,2 local_world_size,2

# field COL of the phases.csv row of run RUN, rank RANK (default 0), phase step
step_field() { csv_col "$1/phases.csv" "$3" run="$2" rank="${4:-0}" phase=step; }
# 1. the default: step 1 detected as warm-up
"$bin" report "$tmp/a" >"$tmp/out" 2>"$tmp/err" </dev/null || bad "report: $(cat "$tmp/err")"
check_eq "default count" "$(step_field "$tmp/a" ddp count)" 7
check_eq "default max" "$(step_field "$tmp/a" ddp max_ms 1)" 150.000
check_eq "default warmup_steps" "$(step_field "$tmp/a" ddp warmup_steps)" 1
check_eq "default baseline count" "$(step_field "$tmp/a" baseline count)" 7
check_eq "stragglers without step 1" "$(csv_col "$tmp/a/stragglers.csv" step run=ddp step=1 | wc -l)" 0
check_eq "stragglers from step 2" "$(csv_col "$tmp/a/stragglers.csv" step run=ddp | wc -l)" 7
check_eq "terminal warm-up line" "$(grep -c 'run ddp: step 1: 600.0 ms, warm-up, not counted' "$tmp/out")" 1
check_eq "page warm-up line" "$(grep -c 'run ddp: step 1: 600.0 ms, warm-up, not counted' "$tmp/a/report.html")" 1
# the worst straggler shown is step 5 (rank 1), not the warm-up
worst=$(awk '/^# stragglers: the steps/ {s = 1; next} s && $1=="ddp" {print $2; exit}' "$tmp/out")
check_eq "worst straggler" "$worst" 5
# train_s (rank 0's steps) still counts every step: 0.6 + 7 x 0.1 s
check_eq "train_s counts the warm-up" "$(csv_col "$tmp/a/speedup.csv" train_s run=ddp)" 1.300

# 2. --warmup-steps 0 keeps them, 2 leaves two out
"$bin" report "$tmp/a" --warmup-steps 0 >"$tmp/out0" 2>"$tmp/err" </dev/null || bad "report 0: $(cat "$tmp/err")"
check_eq "0: count" "$(step_field "$tmp/a" ddp count)" 8
check_eq "0: max" "$(step_field "$tmp/a" ddp max_ms)" 600.000
check_eq "0: warmup_steps" "$(step_field "$tmp/a" ddp warmup_steps)" 0
check_eq "0: stragglers step 1" "$(csv_col "$tmp/a/stragglers.csv" step run=ddp step=1 | wc -l)" 1
check_eq "0: no warm-up line" "$(grep -c 'warm-up, not counted' "$tmp/out0")" 0
"$bin" report "$tmp/a" --warmup-steps 2 >/dev/null 2>"$tmp/err" </dev/null || bad "report 2: $(cat "$tmp/err")"
check_eq "2: count" "$(step_field "$tmp/a" ddp count)" 6
if "$bin" report "$tmp/a" --warmup-steps -1 >/dev/null 2>&1 </dev/null; then bad "--warmup-steps -1 accepted"; else ok; fi

# 3. oversubscribed: 4 CPU ranks on 2 cores
check_eq "2 on 2: no caution" "$(grep -c 'oversubscribed' "$tmp/out")" 0
run "$tmp/o/baseline" baseline 1 host_cores,2
run "$tmp/o/ddp" ddp 2 host_cores,2 local_world_size,4
"$bin" report "$tmp/o" >"$tmp/outo" 2>"$tmp/err" </dev/null || bad "report o: $(cat "$tmp/err")"
check_eq "oversubscribed caution" \
  "$(grep -c '#  caution: run ddp was oversubscribed: 4 CPU ranks on 2 cores (--oversubscribe)' "$tmp/outo")" 1
check_eq "oversubscribed speedup caution" \
  "$(grep -c '#  caution: the speedup of ddp (.*) compares runs measured under load (ddp)' "$tmp/outo")" 1
check_eq "oversubscribed on the page" "$(grep -c 'caution: run ddp was oversubscribed' "$tmp/o/report.html")" 1

check_done
