#!/usr/bin/env bash
# test_main_job_repeat.sh — `ddpprof --repeat 2` on 2 CPU ranks, tiny synthetic data: the
# baseline and DDP run twice, alternately (repeat 1 in baseline/ and ddp/, repeat 2 in
# repeat-2/), and speedup.csv gives the median and min/max over the repeats
# (report/FORMULAS.md "Repeats"): each run's repeats = 2; the DDP run's speedup_median is
# the mean of repeat 1's speedup and repeat 2's (repeat 2 reported alone), min and max are
# the smaller and larger; throughput and wall time likewise; the terminal and report.html
# show the spread; `ddpprof report DIR` alone reads the same back.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

run="$tmp/run"
"$bin" --cpu 2 --model convnet --dataset synthetic --epochs 1 --limit 256 --test-limit 64 \
  --repeat 2 --out "$run" >"$tmp/out.log" 2>&1 </dev/null || bad "main job: $(tail -5 "$tmp/out.log")"
for f in baseline/meta.csv ddp/meta.csv repeat-2/baseline/meta.csv repeat-2/ddp/meta.csv \
  speedup.csv report.html; do
  if [ -s "$run/$f" ]; then ok; else bad "$f missing"; fi
done
# alternately: baseline, ddp, baseline, ddp
order=$(grep -o 'repeat [12] of 2: [a-z]* run' "$tmp/out.log" | tr '\n' ';')
if [ "$order" = "repeat 1 of 2: baseline run;repeat 1 of 2: ddp run;repeat 2 of 2: baseline run;repeat 2 of 2: ddp run;" ]; then
  ok; else bad "run order: $order"; fi

# col FILE RUN NAME: the field NAME of run RUN in speedup.csv FILE
col() { csv_col "$1" "$3" run="$2"; }
"$bin" report "$run/repeat-2" --out "$tmp/r2" >/dev/null 2>"$tmp/r2.err" </dev/null || bad "report of repeat 2: $(cat "$tmp/r2.err")"
sp="$run/speedup.csv"
for r in baseline ddp; do
  if [ "$(col "$sp" $r repeats)" = 2 ]; then ok; else bad "$r: repeats '$(col "$sp" $r repeats)', want 2"; fi
done
# median = mean of the two, min/max = the smaller/larger (3 decimals as written: 0.0015 slack)
check_spread() { # NAME1 (repeat 1's column) NAME_median NAME_min NAME_max
  local a b med lo hi
  a=$(col "$sp" ddp "$1"); b=$(col "$tmp/r2/speedup.csv" ddp "$1")
  med=$(col "$sp" ddp "$2"); lo=$(col "$sp" ddp "$3"); hi=$(col "$sp" ddp "$4")
  if awk -v a="$a" -v b="$b" -v m="$med" -v l="$lo" -v h="$hi" 'function abs(x) {return x < 0 ? -x : x}
     BEGIN { lo = a < b ? a : b; hi = a < b ? b : a; tol = 0.0015 * (1 + hi)
             exit !(a != "" && b != "" && abs(m - (a + b) / 2) <= tol && abs(l - lo) <= tol && abs(h - hi) <= tol && l <= m && m <= h) }'; then
    ok; else bad "$2/$3/$4 = $med/$lo/$hi from repeats $a and $b"; fi
}
check_spread speedup speedup_median speedup_min speedup_max
check_spread images_per_s images_per_s_median images_per_s_min images_per_s_max
check_spread wall_s wall_s_median wall_s_min wall_s_max
# the baseline's speedup is 1 in every repeat
if [ "$(col "$sp" baseline speedup_median)" = 1.000 ]; then ok; else bad "baseline speedup_median $(col "$sp" baseline speedup_median)"; fi

# the spread beside the median, in the terminal and on the page
if grep -q '#  run ddp over 2 repeats, median (min-max): speedup ' "$tmp/out.log"; then ok; else bad "no spread line in the terminal"; fi
if grep -q 'run ddp over 2 repeats, median (min-max): speedup ' "$run/report.html"; then ok; else bad "no spread line in report.html"; fi

# `ddpprof report DIR` alone reads the repeats back: the same speedup.csv
"$bin" report "$run" --out "$tmp/again" >/dev/null 2>"$tmp/again.err" </dev/null || bad "report again: $(cat "$tmp/again.err")"
if cmp -s "$sp" "$tmp/again/speedup.csv"; then ok; else bad "speedup.csv differs when remade: $(diff "$sp" "$tmp/again/speedup.csv")"; fi

# a stale repeat-3 from an earlier --repeat is refused, not counted
mkdir -p "$tmp/stale/repeat-3"
if "$bin" --cpu 1 --model convnet --dataset synthetic --epochs 1 --limit 64 --repeat 2 \
  --out "$tmp/stale" >"$tmp/stale.log" 2>&1 </dev/null; then bad "a stale repeat-3 was accepted"
elif grep -q 'repeat-3 is from an earlier --repeat' "$tmp/stale.log"; then ok; else bad "stale: $(tail -2 "$tmp/stale.log")"; fi

check_done
