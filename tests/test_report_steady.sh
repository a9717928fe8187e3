#!/usr/bin/env bash
# test_report_steady.sh — the speedup, throughput and verdict come from the steady state
# (the steps after the warm-up), the whole run's figures and the first step beside them
# (report/FORMULAS.md "speedup.csv").  Fabricated runs of 20 steps of 100 ms:
#   baseline   1 rank, 32 images a step; step 20 16 images in 50 ms
#   ddp        2 ranks, 64 images a step; step 20 32 images in 50 ms; step 1 takes
#              1000 ms on both ranks (a cold start, 10x a step): the only difference
# Steady: baseline 19 x 32 + 16 = 624 images in 1.95 s = 320 img/s; ddp (steps 2-20)
# 18 x 64 + 32 = 1184 in 1.85 s = 640 img/s: speedup 2.000, efficiency 1.000.  Counted
# from metrics.csv's rows, not pro rata (1248 x 19/20 = 1186 images would give 641.1).
# Whole run: ddp 1248 images in 2.85 s = 437.9 img/s: 1.368x, efficiency 0.684.
# Then: --warmup-steps 0 (the steady state is every step: the whole run's figures); a
# baseline without step ranges (both on wall_s, basis wall, said on stderr).
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# run DIR MODE WORLD IMAGES FIRST_MS [steps]: 20 steps (or none with steps=0) of 100 ms
# (step 1 FIRST_MS, step 20 50 ms with half the images), IMAGES a step over all ranks
run() {
  local dir=$1 mode=$2 world=$3 images=$4 first=$5 steps=${6:-1}
  mkdir -p "$dir"
  printf 'key,value\nmode,%s\nworld_size,%s\nepochs,1\ndevice,cpu\nwall_s,4\nhost_cores,%s\n' \
    "$mode" "$world" "$world" >"$dir/meta.csv"
  {
    echo "step,epoch,loss,loss_scale,lr,images,found_inf"
    for ((s = 1; s <= 20; s++)); do
      echo "$s,1,2.3,1,0.01,$([ "$s" -eq 20 ] && echo $((images / 2)) || echo "$images"),0"
    done
  } >"$dir/metrics.csv"
  for ((r = 0; r < world; r++)); do
    {
      echo "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream"
      t=0
      for ((s = 1; s <= 20; s++)); do
        d=100000000
        [ "$s" -eq 1 ] && d=$((first * 1000000))
        [ "$s" -eq 20 ] && d=50000000
        echo "$r,$s,1,forward,-1,host,$((t + 1000000)),$((t + d / 2)),0,forward,range,0"
        echo "$r,$s,1,backward,-1,host,$((t + d / 2)),$((t + d - 1000000)),0,backward,range,0"
        [ "$steps" -eq 1 ] && echo "$r,$s,1,step,-1,host,$t,$((t + d)),0,step,range,0"
        t=$((t + d + 1000000))
      done
    } >"$dir/rank$r.trace.csv"
  done
}

run "$tmp/a/baseline" baseline 1 32 100
run "$tmp/a/ddp" ddp 2 64 1000
sp=$tmp/a/speedup.csv
f() { csv_col "$sp" "$2" run="$1"; }

# 1. the default: the ddp run's step 1 is its warm-up
"$bin" report "$tmp/a" >"$tmp/out" 2>"$tmp/err" </dev/null || bad "report: $(cat "$tmp/err")"
check_eq "steady speedup" "$(f ddp speedup)" 2.000
check_eq "steady efficiency" "$(f ddp efficiency)" 1.000
check_eq "steady throughput" "$(f ddp images_per_s)" 640.0
check_eq "baseline steady throughput" "$(f baseline images_per_s)" 320.0
check_eq "basis" "$(f ddp basis)" steady
check_eq "steady steps" "$(f ddp steady_steps)" 19
check_eq "steady images, from metrics.csv's rows" "$(f ddp steady_images)" 1184
check_eq "steady time" "$(f ddp steady_s)" 1.850
check_eq "baseline: no warm-up, every step" "$(f baseline steady_steps)" 20
check_eq "first step (the cold start)" "$(f ddp first_step_ms)" 1000.000
check_eq "baseline's first step" "$(f baseline first_step_ms)" 100.000
check_eq "whole-run throughput" "$(f ddp images_per_s_whole_run)" 437.9
check_eq "whole-run speedup shows the cold start" "$(f ddp speedup_whole_run)" 1.368
check_eq "whole-run efficiency" "$(f ddp efficiency_whole_run)" 0.684
check_eq "train_s still counts every step" "$(f ddp train_s)" 2.850
check_eq "images: the whole run's" "$(f ddp images)" 1248
check_eq "repeats' median: the steady speedup" "$(f ddp speedup_median)" 2.000
# the verdict judges the steady state: 2.00x on 2 ranks scales well (1.37x would be poor)
check_eq "verdict on the steady state" \
  "$(grep -c "^# verdict: DDP on 2 CPU ranks (run ddp) scales well: 2.00x the baseline's throughput, efficiency 1.00;" "$tmp/out")" 1
check_eq "advice.csv's verdict the same" \
  "$(csv_col "$tmp/a/advice.csv" text rule=verdict | grep -c 'scales well: 2.00x')" 1
check_eq "the terminal table has the whole-run columns" \
  "$(grep -c '^#  run .*speedup whole run' "$tmp/out")" 1

# 2. --warmup-steps 0: every step is counted, the steady figures are the whole run's
"$bin" report "$tmp/a" --warmup-steps 0 >/dev/null 2>"$tmp/err" </dev/null || bad "report 0: $(cat "$tmp/err")"
check_eq "0: speedup" "$(f ddp speedup)" 1.368
check_eq "0: speedup = whole run" "$(f ddp speedup_whole_run)" 1.368
check_eq "0: steady steps" "$(f ddp steady_steps)" 20

# 3. a baseline without step ranges: both speedups on wall_s (images / wall_s), said so
run "$tmp/w/baseline" baseline 1 32 100 0
run "$tmp/w/ddp" ddp 2 64 1000
"$bin" report "$tmp/w" >/dev/null 2>"$tmp/errw" </dev/null || bad "report w: $(cat "$tmp/errw")"
sp=$tmp/w/speedup.csv
check_eq "wall: basis" "$(f ddp basis)" wall
check_eq "wall: baseline basis" "$(f baseline basis)" wall
# 1248 / 4 s over 624 / 4 s
check_eq "wall: speedup" "$(f ddp speedup)" 2.000
check_eq "wall: the same as the whole run's" "$(f ddp speedup_whole_run)" 2.000
check_eq "wall: the ddp run keeps its own steady throughput" "$(f ddp steady_steps)" 19
check_eq "wall: said on stderr" \
  "$(grep -c 'the baseline baseline has no steady-state steps: the speedup of ddp is the whole run' "$tmp/errw")" 1

check_done
