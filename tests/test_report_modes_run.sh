#!/usr/bin/env bash
# test_report_modes_run.sh — the report names step times that fall in two groups
# (report/analysis/modes.h, notes.c; FORMULAS.md "Two groups of step times"): fabricated
# 2-rank runs of 40 steps, ~6 ms each, where
#   straggler  rank 1's backward is 10 ms longer on 16 steps (step mod 5 = 2 or 3): ~16 ms steps
#              whose wait is rank 1's -- the note says two groups and names rank 1
#   together   both ranks' backward 10 ms longer on the same 16 steps: two groups, not waits
#              for one rank
#   one        every step within 0.4 ms of 6: no such note
#   fewsteps   as straggler on 9 steps (under MODES_MIN_STEPS): no such note
#   late       rank 1 arrives 10 ms late to a comm.allreduce in forward on those 16 steps
#              (40 %): rank 0 waits there, then both go on together, so stragglers.csv
#              sees nothing; the note names rank 1, and phases.csv splits the collective
# and a 1-rank run with the straggler's pattern: two groups, nothing said of ranks.
# Every 2-rank run has that comm.allreduce in forward: 0.1 ms once the last rank is there;
# but in late, the ranks arrive by turns (0.05 ms apart, the later by step parity), so
# neither is the last to arrive in most calls.
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
. "$(dirname "$0")/csvcol.sh"

# mkrun DIR WORLD STEPS PATTERN: PATTERN straggler|together|one|late
mkrun() {
  local dir=$1 world=$2 steps=$3 pattern=$4
  mkdir -p "$dir"
  printf 'key,value\nmode,%s\nworld_size,%s\nepochs,1\ndevice,cpu\namp,off\nbatch_size,32\nhost_cores,2\nlocal_world_size,%s\nwall_s,2\nsteps,%s\n' \
    "$([ "$world" -gt 1 ] && echo ddp || echo baseline)" "$world" "$world" "$steps" >"$dir/meta.csv"
  { echo "step,epoch,loss,loss_scale,lr,images,found_inf"
    for ((s = 1; s <= steps; s++)); do echo "$s,1,2.3,1,0.01,$((32 * world)),0"; done; } >"$dir/metrics.csv"
  awk -v dir="$dir" -v world="$world" -v steps="$steps" -v pattern="$pattern" '
    function ns(ms) { return sprintf("%d", ms * 1000000) }
    function row(r, s, phase, bucket, a, b, bytes) {
      printf "%d,%d,1,%s,%d,host,%s,%s,%d,%s,range,0\n", r, s, phase, bucket, ns(a), ns(b), bytes, phase > (dir "/rank" r ".trace.csv")
    }
    BEGIN {
      for (r = 0; r < world; r++)
        print "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream" > (dir "/rank" r ".trace.csv")
      t = 10
      for (s = 1; s <= steps; s++) {
        hit = s % 5 == 2 || s % 5 == 3
        last = 0
        for (r = 0; r < world; r++) {
          wobble = ((s * 7 + r * 3) % 5) * 0.05           # 0-0.2 ms of noise
          extra = 0
          if (hit && pattern == "straggler" && (r == 1 || world == 1)) extra = 10
          if (hit && pattern == "together") extra = 10
          b1[r] = t + 0.2 + 2 + (hit && pattern == "late" ? 10 : 0) + 3 + wobble + extra
          if (b1[r] > last) last = b1[r]
        }
        shift = hit && pattern == "late" ? 10 : 0   # forward waits for the late rank
        f0 = t + 0.2; ce = 0
        for (r = 0; r < world; r++) {                   # arrival at the comm.allreduce
          arr[r] = f0 + 1 + (pattern == "late" ? (r == 1 ? shift : 0) : ((s + r) % 2) * 0.05)
          if (arr[r] > ce) ce = arr[r]
        }
        ce += 0.1
        end = 0
        for (r = 0; r < world; r++) {
          b0 = f0 + 2 + shift
          row(r, s, "data", -1, t, f0, 0)
          row(r, s, "forward", -1, f0, b0, 0)
          if (world > 1) {   # integer ns: equal arrivals give equal durations
            e_ns = ns(ce); d_ns = sprintf("%.0f", (ce - arr[r]) * 1000000)
            printf "%d,%d,1,comm.allreduce,-1,host,%s,%s,4,comm.allreduce,range,0\n", r, s, e_ns - d_ns, e_ns > (dir "/rank" r ".trace.csv")
          }
          row(r, s, "backward", -1, b0, b1[r], 0)
          ae = b1[r]
          if (world > 1) { ae = last + 0.3; row(r, s, "allreduce", 0, b1[r] - 0.5, ae, 400000) }
          row(r, s, "optimizer", -1, ae, ae + 0.5, 0)
          row(r, s, "step", -1, t, ae + 0.5, 0)
          if (ae + 0.5 > end) end = ae + 0.5
        }
        t = end + 0.1
      }
    }'
}

note() { grep -o 'run [a-z]*: its step times fall in two groups.*' "$tmp/$1.out" | head -1; }

for p in straggler together one late; do
  mkrun "$tmp/$p/ddp" 2 40 "$p"
  "$bin" report "$tmp/$p" --out "$tmp/$p/out" >"$tmp/$p.out" 2>"$tmp/$p.err" </dev/null ||
    bad "$p: report failed: $(cat "$tmp/$p.err")"
done
mkrun "$tmp/fewsteps/ddp" 2 9 straggler
"$bin" report "$tmp/fewsteps" --out "$tmp/fewsteps/out" >"$tmp/fewsteps.out" 2>&1 </dev/null || bad "fewsteps: report failed"
mkrun "$tmp/single/base" 1 40 straggler
"$bin" report "$tmp/single" --out "$tmp/single/out" >"$tmp/single.out" 2>&1 </dev/null || bad "single: report failed"

n=$(note straggler)
check_eval '[[ "$n" == *"its step times fall in two groups"* ]]' "straggler: two groups named"
check_eval '[[ "$n" == *"60 % near 6."*"40 % near 16."* ]]' "straggler: 60 % fast, 40 % slow"
check_eval '[[ "$n" == *"rank 1'"'"'s in 100 % of them"* ]]' "straggler: the waits are rank 1's"
n=$(note together)
check_eval '[[ "$n" == *"its step times fall in two groups"* ]]' "together: two groups named"
check_eval '[[ "$n" == *"not waits for one rank"* && "$n" != *"rank 1'"'"'s in"* ]]' "together: not waits for one rank"
# late: the wait is in forward's comm.allreduce, not at the gradients.  By hand: every call
# lasts 0.1 ms once rank 1 is there; on the 16 hit steps rank 0 came 10 ms earlier: rank 0's
# wait 16 x 10 = 160 ms, each rank's transfer 40 x 0.1 = 4 ms, rank 1's wait 0; rank 1 has
# the least time in the 16 calls with a wait (the other 24 are ties: no one late), 16/40
n=$(note late)
check_eval '[[ "$n" == *"its step times fall in two groups"* ]]' "late: two groups named"
check_eval '[[ "$n" == *"to arrive in the collectives"*"rank 1'"'"'s in 100 % of them"* ]]' "late: the note names rank 1, late to the collectives: $n"
ph="$tmp/late/out/phases.csv"
check_eq "late: rank 0's comm.allreduce wait_ms" "$(csv_col "$ph" wait_ms rank=0 phase=comm.allreduce)" 160.000
check_eq "late: rank 1's comm.allreduce wait_ms" "$(csv_col "$ph" wait_ms rank=1 phase=comm.allreduce)" 0.000
check_eq "late: rank 0's comm.allreduce transfer_ms" "$(csv_col "$ph" transfer_ms rank=0 phase=comm.allreduce)" 4.000
check_eq "late: comm.allreduce late_rank" "$(csv_col "$ph" late_rank rank=0 phase=comm.allreduce)" 1
check_eq "late: comm.allreduce late_share_pct" "$(csv_col "$ph" late_share_pct rank=0 phase=comm.allreduce)" 40.00
check_eq "late: forward has no transfer (not a collective)" "$(csv_col "$ph" transfer_ms rank=0 phase=forward)" ""
check_eval 'grep -q "late" "$tmp/late.out" && grep -q "transfer" "$tmp/late.out"' "late: the terminal phases table shows the split"
# together: both ranks slow, and the comm.allreduce's last rank alternates: no rank was the
# last to arrive in over 60 % of any collective's calls, and nothing is named
ph="$tmp/together/out/phases.csv"
top=$(csv_awk 'FNR > 1 && col("late_share_pct") != "" { print col("late_share_pct") }' "$ph" | sort -g | tail -1)
check_eval '[ -n "$top" ] && awk -v x="$top" "BEGIN { exit !(x <= 60) }"' "together: the most often late rank's share '$top' <= 60 %"
check_eq "together: comm.allreduce late_share_pct" "$(csv_col "$ph" late_share_pct rank=0 phase=comm.allreduce)" 50.00
check_eq "one group: no note" "$(note one)" ""
check_eq "9 steps: no note" "$(note fewsteps)" ""
n=$(note single)
check_eval '[[ "$n" == *"two groups"* && "$n" != *"waited"* && "$n" != *"not waits"* ]]' "1 rank: two groups, nothing of ranks"
# the page shows the same caution
check_eval 'grep -q "its step times fall in two groups" "$tmp/straggler/out/report.html"' "straggler: report.html says it"
check_done
