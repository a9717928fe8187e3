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
# and a 1-rank run with the straggler's pattern: two groups, nothing said of ranks.
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# mkrun DIR WORLD STEPS PATTERN: PATTERN straggler|together|one
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
          b1[r] = t + 0.2 + 2 + 3 + wobble + extra
          if (b1[r] > last) last = b1[r]
        }
        end = 0
        for (r = 0; r < world; r++) {
          f0 = t + 0.2; b0 = f0 + 2
          row(r, s, "data", -1, t, f0, 0)
          row(r, s, "forward", -1, f0, b0, 0)
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

for p in straggler together one; do
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
check_eq "one group: no note" "$(note one)" ""
check_eq "9 steps: no note" "$(note fewsteps)" ""
n=$(note single)
check_eval '[[ "$n" == *"two groups"* && "$n" != *"waited"* && "$n" != *"not waits"* ]]' "1 rank: two groups, nothing of ranks"
# the page shows the same caution
check_eval 'grep -q "its step times fall in two groups" "$tmp/straggler/out/report.html"' "straggler: report.html says it"
check_done
