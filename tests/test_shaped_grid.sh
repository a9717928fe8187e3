#!/usr/bin/env bash
# test_shaped_grid.sh — issue 25's validation of `ddpprof predict` (scripts/shaped-grid): two
# network namespaces joined by a tbf-shaped veth, one CPU rank each, gloo; 2 bandwidths (40x
# apart) x 2 bucket caps (1 and 7 buckets), each the median of 3 interleaved rounds (the
# script's default --repeat), measured against the predictions from one calibration run
# (out of sample: not a grid point) and from a 1-rank baseline alone.  The script's default
# grid (3 x 3 points x 3 rounds) takes about 2.4 times as long: CI runs these 4 points, 16
# runs with the calibration, its warm-up and repeat and the baseline (13 before the rounds,
# 9 points x 1).  Skips (77) where namespaces, veth or tbf cannot be had
# (not root, no CAP_NET_ADMIN, no sch_tbf) or the build has no gloo.  Runs alone (RUN_SERIAL
# in tests/CMakeLists.txt): other tests beside it would be what it measures.
#  1. SIGTERM while a run is under way: the script exits 143 within 15 s, its namespaces
#     are gone and none of its ddpprof processes is left;
#  2. the grid: every point ran, with the buckets the reducer forms for each cap (1, 7);
#     the shaping works (the 25 Mbit/s link passes 20-26.5 Mbit/s of bulk TCP, and the
#     training's 116 KB all-reduce takes >= 30 ms there (37 ms on the wire) and at most half
#     that at 1000 Mbit/s); the namespaces are gone;
#     errors.csv and errors.md hold every point, from the calibration run and from the
#     1-rank run, each with its 80 % interval; summary.csv's coverage and mean width are the
#     rows' (the share of in_interval, the mean of interval_width_pct);
#  3. the accuracy.  Issue 25's goal is median |error| <= 5 % and worst <= 10 %; the model
#     meets it on some grids, not on every one (results/shaped_grid_20261201, 3 runs a
#     point, 80 steps a run, ranks pinned, quiet machine: median 2.8-9.8 %, worst 6.5-18.7 %
#     over seven grids, the goal met on two; two runs of one configuration differ by 0.7-6 %
#     there), so the test prints the goal's
#     verdict and asserts what the model does reach, to catch it getting worse: in a build
#     without sanitizers on a quiet machine (other programs kept <= 0.25 cores busy during
#     the runs, and the calibration's compute measured again within 20 %: a slow
#     calibration run moves every prediction) the calibration's rows' median |error| <= 20 %
#     and worst <= 75 % (the 3 x 3 grid, one run a point: 7.3 % and 18.4 % in one quiet
#     run; before the trainer's gloo and wait fixes, 13.8 % and 21.3 %; before the pinning
#     and the floor, 18 % and 47 %); on a busy one, where two runs of one
#     configuration differ by more than the goal itself (14-37 % here with 1.5 of 2 cores
#     taken by others), only that no prediction is off by a factor (median |error| <= 40 %:
#     a model ignoring the bandwidth misses by more), and where those two runs differ by
#     more than 40 % themselves (89 % once, under 4-6 other jobs), nothing: no model could.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
src=${DDPPROF_SOURCE_DIR:?DDPPROF_SOURCE_DIR must point at the source tree}
grid=("$src/scripts/shaped-grid" --bin "$bin")
if [ "$(id -u)" != 0 ]; then
  echo "skipped: network namespaces and tc need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
  exit 77
fi
command -v python3 >/dev/null || { echo "skipped: scripts/shaped-grid needs python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
# namespaces named for the script's pid ($1) that still exist
left_ns() { ip netns list 2>/dev/null | awk -v p="sg$1" '$1 == p "a" || $1 == p "b" { print $1 }'; }

# --- 1. stopped mid-run ---
"${grid[@]}" --out "$tmp/stop" >"$tmp/stop.log" 2>&1 &
pid=$!
for _ in $(seq 300); do # up to 30 s for the calibration run's nodes to start
  [ -s "$tmp/stop/runs/calib/node1.log" ] || [ -f "$tmp/stop/runs/calib/rank0.trace.csv" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
if ! kill -0 $pid 2>/dev/null; then
  wait $pid
  rc=$?
  if [ $rc -eq 4 ]; then
    echo "skipped: $(tail -n 1 "$tmp/stop.log")"
    exit 77
  fi
  echo "FAIL stop: shaped-grid ended (exit $rc) before its first run: $(tail -n 2 "$tmp/stop.log")"
  exit 1
fi
sleep 1
kill -TERM $pid
rc=124
for _ in $(seq 150); do
  if ! kill -0 $pid 2>/dev/null; then wait $pid; rc=$?; break; fi
  sleep 0.1
done
[ $rc -eq 124 ] && kill -KILL $pid
check stop-exit "$([ $rc -eq 143 ]; echo $?)" "exit $rc after SIGTERM, want 143: $(tail -n 2 "$tmp/stop.log")"
check stop-said "$(grep -q 'stopped by signal 15' "$tmp/stop.log"; echo $?)" "$(tail -n 2 "$tmp/stop.log")"
check stop-netns "$([ -z "$(left_ns $pid)" ]; echo $?)" "namespaces left after SIGTERM: $(left_ns $pid)"
sleep 0.5 # (the agents' ranks die by PR_SET_PDEATHSIG as the agents go)
check stop-procs "$(! pgrep -f -- "--out $tmp/stop/" >/dev/null; echo $?)" \
  "processes left after SIGTERM: $(pgrep -af -- "--out $tmp/stop/")"

# --- 2. the grid ---
"${grid[@]}" --out "$tmp/g" --time-limit 400 --rates 1000,25 --caps 25,0.0001 >"$tmp/g.log" 2>&1 &
pid=$!
wait $pid
rc=$?
cat "$tmp/g.log"
if [ $rc -eq 4 ]; then echo "skipped: $(tail -n 1 "$tmp/g.log")"; exit 77; fi
check grid-exit "$([ $rc -eq 0 ] || [ $rc -eq 3 ]; echo $?)" \
  "shaped-grid failed (exit $rc, not 0 or 3 = goal missed): $(tail -n 1 "$tmp/g.log")"
check grid-netns "$([ -z "$(left_ns $pid)" ]; echo $?)" "namespaces left: $(left_ns $pid)"
e=$tmp/g/errors.csv
check grid-rows "$(csv_awk 'FNR > 1 && col("kind") == "grid" { g++ } FNR > 1 && col("kind") == "baseline" { b++ }
  END { exit !(g == 4 && b == 4) }' "$e"; echo $?)" "errors.csv has not 4 grid rows and 4 baseline rows: $(cat "$e")"
check grid-runs "$(csv_awk 'FNR > 1 && col("runs") != 3 { bad = 1 } END { exit bad }' "$e"; echo $?)" \
  "a point not measured in 3 rounds: $(cat "$e")"
check grid-buckets "$(csv_awk 'FNR > 1 { want = col("bucket_cap_mb") == "25" ? 1 : 7
  if (col("buckets") != want) bad = 1 } END { exit bad }' "$e"; echo $?)" \
  "caps 25, 0.0001 MiB did not give 1, 7 buckets: $(cat "$e")"
# the all-reduce's transfer time (buckets.csv: the shortest duration over the ranks, without
# the wait for a late one) rather than the step, which another program's burst moves by more
for r in 25 1000; do
  "$bin" report "$tmp/g/runs/r$r-c25" --out "$tmp/rep$r" >"$tmp/rep$r.log" 2>&1 ||
    echo "FAIL report of r$r-c25: $(tail -n 1 "$tmp/rep$r.log")"
done
slow=$(csv_col "$tmp/rep25/buckets.csv" transfer_ms bucket=0)
fast=$(csv_col "$tmp/rep1000/buckets.csv" transfer_ms bucket=0)
check grid-shaped "$(awk -v s="$slow" -v f="$fast" 'BEGIN { exit !(s >= 30 && f <= s / 2) }'; echo $?)" \
  "the 116 KB all-reduce took $slow ms at 25 Mbit/s (want >= 30: 37 ms on the wire) and $fast ms at 1000 Mbit/s (want <= half that): is the veth shaped?"
link=$(csv_col "$e" link_measured_mbit kind=grid bandwidth_mbit=25 bucket_cap_mb=25)
check grid-link "$(awk -v l="$link" 'BEGIN { exit !(l >= 20 && l <= 26.5) }'; echo $?)" \
  "the 25 Mbit/s link passed '$link' Mbit/s of bulk TCP (want 20-26.5: tbf paces to the rate)"
check grid-predicted "$(csv_awk 'FNR > 1 && (col("predicted_step_ms") == "" || col("error_pct") == "") { bad = 1 }
  END { exit bad }' "$e"; echo $?)" "a point without a prediction: $(cat "$e")"
check grid-md "$(grep -q '^|error|: median .* out of sample' "$tmp/g/errors.md" && [ "$(grep -c '^| calibration run |' "$tmp/g/errors.md")" -eq 4 ] &&
  grep -q '^80 % intervals: ' "$tmp/g/errors.md"; echo $?)" "errors.md lacks the table or its summary: $(cat "$tmp/g/errors.md")"
# the intervals: on every row, around its prediction; coverage and width are the rows'
check grid-intervals "$(csv_awk 'FNR > 1 { lo = col("predicted_lo_ms"); hi = col("predicted_hi_ms"); p = col("predicted_step_ms")
  if (lo == "" || hi == "" || !(lo + 0 <= p + 0 && p + 0 <= hi + 0)) bad = 1 } END { exit bad }' "$e"; echo $?)" \
  "a row without an interval around its prediction: $(cat "$e")"
cov=$(csv_col "$tmp/g/summary.csv" value key=interval_coverage_pct)
want=$(csv_awk 'FNR > 1 { n++; k += col("in_interval") } END { printf "%.1f", 100 * k / n }' "$e")
check grid-coverage "$([ -n "$cov" ] && [ "$cov" = "$want" ]; echo $?)" "interval_coverage_pct '$cov', the rows give '$want'"

# --- 3. the accuracy ---
s=$tmp/g/summary.csv
val() { csv_col "$s" value key="$1"; }
# the bounds below are the calibration's rows' (the 1-rank rows are printed, not bounded)
med=$(val calib_median_abs_error_pct) worst=$(val calib_worst_abs_error_pct)
echo "from the 1-rank run alone: median |error| $(val baseline_median_abs_error_pct) %, worst $(val baseline_worst_abs_error_pct) %"
echo "80 % intervals: $(val interval_coverage_pct) % of the measured steps inside, mean width $(val interval_mean_width_pct) %"
others=$(val others_busy_cores) rep=$(val repeat_diff_pct) crep=$(val repeat_compute_diff_pct)
# issue 25's cap criterion, printed (one run a point: two caps 5 % apart can swap by noise)
echo "recommended cap within 5 % of the best measured: $(val recommended_cap_within_goal) bandwidths (worst $(val recommended_cap_worst_pct) % off)"
# a sanitizer's build times its own instrumentation, not the program's
san=$(ldd "$bin" 2>/dev/null | grep -oE 'lib(asan|tsan|ubsan)' | head -n 1)
# quiet: others on <= 0.25 cores, and the calibration's compute, which every prediction
# carries, measured again at the end within 20 % (one grid here: 23.8 ms a step where the
# grid's runs took 14.5-16.9, others on 0.03 cores; median |error| 22.8 %)
if [ -z "$san" ] && awk -v o="$others" -v c="${crep:-0}" 'BEGIN { exit !(o <= 0.25 && c <= 20) }'; then
  if [ $rc -eq 0 ]; then
    echo "goal met on a quiet machine: median |error| $med %, worst $worst % (goal 5 %, 10 %)"
  else
    echo "goal MISSED on a quiet machine (others kept $others cores busy; two runs of one configuration $rep % apart): median |error| $med %, worst $worst % (goal 5 %, 10 %)"
  fi
  check quiet-bound "$(awk -v m="$med" -v w="$worst" 'BEGIN { exit !(m <= 20 && w <= 75) }'; echo $?)" \
    "on a quiet machine median |error| $med % (want <= 20) and worst $worst % (want <= 75): worse than the model reached: $(cat "$tmp/g/errors.md")"
else
  if [ -n "$san" ]; then
    echo "goal not judged: a sanitizer's build ($san); median |error| $med %, worst $worst %"
  else
    echo "goal not judged: other programs kept $others cores busy (the goal is judged at <= 0.25), or the calibration's compute and its repeat's were $crep % apart (judged at <= 20); two runs of one configuration were $rep % apart; median |error| $med %, worst $worst %"
  fi
  # the bound 40 % holds where two runs of one configuration agree within it; where the
  # machine alone moved one configuration by more (89 % once, with 4-6 other jobs on the 2
  # cores), the calibration the predictions carry is itself that far off: not judged
  if awk -v r="${rep:-0}" 'BEGIN { exit !(r <= 40) }'; then
    check gross "$(awk -v m="$med" 'BEGIN { exit !(m <= 40) }'; echo $?)" \
      "median |error| $med % > 40 % even for a busy machine: $(cat "$tmp/g/errors.md")"
  else
    echo "gross bound not judged either: two runs of one configuration were $rep % apart (> 40 %)"
  fi
fi

check_done
