#!/usr/bin/env bash
# test_predict_cli.sh — `ddpprof predict` on real 2-rank CPU runs (report/FORMULAS.md
# "Predictions"), three short runs at bucket caps 0.01, 0.05 and 25 MB (ConvNet: 3, 2 and
# 1 buckets), the first with its baseline:
#   - no what-if: predict.csv's measured row is the run's median step, phases.csv's rank 0
#     step p50_ms, and the predicted row of the run's own configuration equals it
#   - bucket formation: predicting run A at run B's cap gives B's bucket count (meta.csv
#     buckets, the reducer's), for every pair
#   - the comm's floor (the setup's near-empty all-reduces) and busy term (bucket
#     all-reduces that started beside backward: none with one bucket) are said and written
#   - the calibration rows (calib.allreduce, step -1) are in both ranks' traces, and no
#     table counts them: phases.csv's comm.allreduce count is the rows with step >= 0, and
#     phases, overlap, buckets and stragglers.csv are the same without them
#   - the baseline predicts 2 ranks with the DDP run's calibration; alone it needs
#     --bandwidth-gbps, which it then uses, or --comm-from a DDP run
#   - --amp off from the DDP+AMP run takes the fp32 baseline's conv and linear layers
#   - `ddpprof report` prints the "what if" section
#   - a run measured under load (meta.csv's host figures) says so under the table; the
#     same run with an idle host's figures does not
#   - bad command lines: a non-zero exit and one line on stderr naming the problem
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
badline() { # WANT ARGS...: fails, one line on stderr holding WANT
  local want=$1
  shift
  if "$bin" predict "$@" >/dev/null 2>"$tmp/e"; then
    bad "predict $* succeeded"
  elif [ "$(wc -l <"$tmp/e")" != 1 ] || ! grep -q -- "$want" "$tmp/e"; then
    bad "predict $*: want one line with '$want', got: $(cat "$tmp/e")"
  else
    ok
  fi
}

# --trace full: the per-layer rows predict replays (the default level records none)
common=(--cpu 2 --model convnet --epochs 1 --limit 640 --test-limit 64 --quiet --trace full)
for cap in 0.01 0.05 25; do
  mode=ddp
  [ "$cap" = 25 ] && mode=both
  if ! timeout 300 "$bin" "${common[@]}" --mode "$mode" --bucket-cap-mb "$cap" \
      --out "$tmp/cap$cap" >"$tmp/cap$cap.log" 2>&1; then
    echo "FAIL the run at cap $cap failed:"; tail -5 "$tmp/cap$cap.log"; exit 1
  fi
done

caps=(0.01 0.05 25)
for a in "${caps[@]}"; do
  run=$tmp/cap$a/ddp
  # no what-if: the measured step, twice
  if ! "$bin" predict "$run" >"$tmp/p.out" 2>"$tmp/p.err"; then
    bad "predict $run: $(cat "$tmp/p.err")"; continue
  fi
  m=$(csv_col "$run/predict.csv" step_ms config=measured)
  p=$(csv_col "$run/predict.csv" step_ms config=predicted)
  ph=$(csv_col "$tmp/cap$a/phases.csv" p50_ms run=ddp rank=0 phase=step)
  [ -z "$ph" ] && ph=$(csv_col "$run/phases.csv" p50_ms rank=0 phase=step)
  check_eval '[ -n "$m" ] && [ "$m" = "$ph" ]' "cap $a: measured step_ms '$m' != phases.csv step p50_ms '$ph'"
  check_eval '[ -n "$p" ] && [ "$p" = "$m" ]' "cap $a: predicted step_ms '$p' of the run's own config != measured '$m'"
  # the floor: the setup's 128-byte all-reduces' median, said and written
  fl=$(csv_col "$run/predict.csv" floor_ms config=measured)
  check_eval 'awk -v f="$fl" "BEGIN { exit !(f + 0 > 0) }" && grep -q "an all-reduce takes at least .* (the median of the setup.s 9 near-empty ones)" "$tmp/p.out"' "cap $a: floor_ms '$fl', or no floor line: $(grep 'comm:' "$tmp/p.out")"
  # the busy term: from the bucket all-reduces that started before backward ended, the
  # last bucket aside (ready when backward ends): none with one bucket
  busy=$(csv_col "$run/predict.csv" busy_ms config=measured)
  nbk=$(csv_col "$run/meta.csv" value key=buckets)
  if [ "$nbk" = 1 ]; then
    check_eval '[ "$busy" = 0 ] && ! grep -q "starts before backward ends" "$tmp/p.out"' "cap $a, one bucket: busy_ms '$busy' (want 0), or a busy line: $(grep 'comm:' "$tmp/p.out")"
  else
    nbusy=$(sed -n 's/.*the median excess of the run.s \([0-9]*\) such.*/\1/p' "$tmp/p.out")
    check_eval 'awk -v f="$busy" -v n="$nbusy" "BEGIN { exit !(f + 0 >= 0 && n + 0 >= 1) }"' "cap $a, $nbk buckets: busy_ms '$busy' from '$nbusy' all-reduces: $(grep 'comm:' "$tmp/p.out")"
  fi
  # bucket formation for every cap, against the runs' reducers
  for b in "${caps[@]}"; do
    want=$(csv_col "$tmp/cap$b/ddp/meta.csv" value key=buckets)
    "$bin" predict "$run" --bucket-cap-mb "$b" --out "$tmp/pb" >/dev/null 2>&1
    got=$(csv_col "$tmp/pb/predict.csv" buckets config=predicted)
    check_eval '[ -n "$want" ] && [ "$got" = "$want" ]' "run at cap $a predicted at cap $b: $got buckets, the reducer made $want"
  done
done
# the caps gave different bucket counts (else the comparison above proves little)
n1=$(csv_col "$tmp/cap0.01/ddp/meta.csv" value key=buckets)
n3=$(csv_col "$tmp/cap25/ddp/meta.csv" value key=buckets)
check_eval '[ "$n1" -gt "$n3" ]' "cap 0.01 made $n1 buckets, cap 25 $n3: no split to compare"

# calibration rows: on both ranks, ignored by the tables
run=$tmp/cap25/ddp
for r in 0 1; do
  n=$(csv_awk 'FNR > 1 && col("name") == "calib.allreduce" && col("step") == -1 { n++ } END { print n + 0 }' "$run/rank$r.trace.csv")
  check_eval '[ "$n" -ge 3 ]' "rank $r: $n calibration rows, want at least 3"
  # the small all-reduce first, 9 times (the ring's fixed cost, trainer/train_calib.c)
  first=$(csv_awk 'FNR > 1 && col("name") == "calib.allreduce" { printf "%s ", col("bytes"); if (++n == 10) exit }' "$run/rank$r.trace.csv")
  check_eval '[ "$first" = "128 128 128 128 128 128 128 128 128 4096 " ]' "rank $r: calibration sizes begin '$first', want 128 x 9, then 4096"
done
# (phases.csv leaves the warm-up steps out: those rows are at steps 1..warmup_steps)
w=$(csv_col "$tmp/cap25/phases.csv" warmup_steps run=ddp rank=0 phase=comm.allreduce)
rows=$(csv_awk -v w="$w" 'FNR > 1 && col("phase") == "comm.allreduce" && col("clock") == "host" && (col("step") == 0 || col("step") > w + 0) { n++ } END { print n + 0 }' "$run/rank0.trace.csv")
counted=$(csv_col "$tmp/cap25/phases.csv" count run=ddp rank=0 phase=comm.allreduce)
check_eval '[ -n "$w" ] && [ "$counted" = "$rows" ]' "phases.csv counts $counted comm.allreduce rows, the trace has $rows at step 0 or after the $w warm-up step(s)"

# --amp off from the DDP+AMP run: conv and linear take the fp32 baseline's per-layer times
"$bin" predict "$run" --amp off,fp16 --out "$tmp/pa" >"$tmp/pa.out" 2>&1
check_eval 'grep -q "amp off: conv and linear layers. times from run baseline" "$tmp/pa.out"' "--amp off: no word of the baseline's layers: $(grep amp "$tmp/pa.out")"
off=$(csv_col "$tmp/pa/predict.csv" step_ms config=predicted amp=off)
on=$(csv_col "$tmp/pa/predict.csv" step_ms config=predicted amp=fp16)
m=$(csv_col "$tmp/pa/predict.csv" step_ms config=measured)
check_eval '[ -n "$off" ] && [ "$on" = "$m" ] && [ "$off" != "$m" ]' "--amp off,fp16: off '$off', fp16 '$on' (want the measured '$m'), measured '$m'"

# the same run without its calibration rows: the same tables, byte for byte
mkdir -p "$tmp/strip" && cp -r "$run" "$tmp/strip/ddp"
for r in 0 1; do
  grep -v ',calib\.allreduce,' "$run/rank$r.trace.csv" >"$tmp/strip/ddp/rank$r.trace.csv"
done
"$bin" report "$run" --out "$tmp/with" >/dev/null 2>&1
"$bin" report "$tmp/strip/ddp" --out "$tmp/without" >/dev/null 2>&1
for t in phases overlap buckets stragglers; do
  check_eval 'cmp -s "$tmp/with/$t.csv" "$tmp/without/$t.csv"' "$t.csv changes with the calibration rows"
done

# from the baseline: the sibling DDP run's calibration; alone, --bandwidth-gbps
base=$tmp/cap25/baseline
check_eval '"$bin" predict "$base" --world 2 >"$tmp/b.out" 2>&1' "predict baseline --world 2: $(tail -1 "$tmp/b.out")"
check_eval 'grep -q "calibrated on run ddp" "$tmp/b.out"' "baseline: no word of the DDP run's calibration"
w=$(csv_col "$base/predict.csv" world config=predicted)
check_eval '[ "$w" = 2 ]' "baseline prediction at world '$w', want 2"
mkdir -p "$tmp/alone" && cp -r "$base" "$tmp/alone/"
if "$bin" predict "$tmp/alone/baseline" --world 2 >/dev/null 2>"$tmp/e"; then
  bad "a lone baseline predicted 2 ranks without a bandwidth"
else
  check_eval '[ "$(wc -l <"$tmp/e")" = 1 ] && grep -q -- "--bandwidth-gbps" "$tmp/e"' "lone baseline: $(cat "$tmp/e")"
fi
check_eval '"$bin" predict "$tmp/alone/baseline" --world 2 --bandwidth-gbps 10 --latency-us 5 >/dev/null 2>&1' "lone baseline with a bandwidth failed"
bw=$(csv_col "$tmp/alone/baseline/predict.csv" bandwidth_gbps config=predicted)
check_eval '[ "$bw" = 10 ]' "lone baseline: bandwidth_gbps '$bw', want 10"

# --comm-from: another run's fitted comm for the lone baseline; a run without all-reduces
# has none to give
check_eval '"$bin" predict "$tmp/alone/baseline" --world 2 --comm-from "$run" >"$tmp/cf.out" 2>&1 && grep -q "calibrated on run" "$tmp/cf.out"' "lone baseline --comm-from: $(tail -2 "$tmp/cf.out")"
bw=$(csv_col "$tmp/alone/baseline/predict.csv" bandwidth_gbps config=predicted)
want=$(sed -n 's/.*calibrated on run [^:]*: \([0-9.e+-]*\) Gbit\/s.*/\1/p' "$tmp/cf.out")
check_eval '[ -n "$want" ] && [ "$bw" = "$want" ]' "--comm-from: bandwidth_gbps '$bw', the fit said '$want'"
badline "no all-reduce there" "$tmp/alone/baseline" --world 2 --comm-from "$base"
badline "not a run directory" "$tmp/alone/baseline" --world 2 --comm-from "$tmp/nowhere"

# the report's what if
"$bin" report "$tmp/cap25" --out "$tmp/rep" >"$tmp/rep.out" 2>&1
check_eval 'grep -q "what if" "$tmp/rep.out" && grep -q "best bucket cap" "$tmp/rep.out" && grep -q "world 4 (2x)" "$tmp/rep.out" && grep -q "world 8 (4x)" "$tmp/rep.out"' "report: no what-if section: $(grep -i "what if" "$tmp/rep.out")"
check_eval 'grep -q "what if" "$tmp/rep/report.html"' "report.html has no what-if section"

# the rank-arrival wait and SyncBatchNorm off (report/FORMULAS.md "Predictions", "SyncBatchNorm
# off") on the cap-25 run (SyncBatchNorm on, the trainer's default): its own configuration
# is the measured step with the measured wait_ms (the wait once); at 1 rank no wait; off,
# the step is no longer (the calls' transfer leaves it) and wait_ms no smaller (the wait
# they absorbed moves into it); the exact figures are test_predict's test_sync_bn_off
run=$tmp/cap25/ddp
if [ "$(csv_col "$run/meta.csv" value key=sync_bn)" = 1 ] &&
    "$bin" predict "$run" --world 1,2 --sync-bn on,off --out "$tmp/ps" >"$tmp/ps.out" 2>&1; then
  f=$tmp/ps/predict.csv
  m=$(csv_col "$f" step_ms config=measured); mw=$(csv_col "$f" wait_ms config=measured)
  on=$(csv_col "$f" step_ms config=predicted world=2 sync_bn=on)
  onw=$(csv_col "$f" wait_ms config=predicted world=2 sync_bn=on)
  off=$(csv_col "$f" step_ms config=predicted world=2 sync_bn=off)
  offw=$(csv_col "$f" wait_ms config=predicted world=2 sync_bn=off)
  w1=$(csv_col "$f" wait_ms config=predicted world=1 sync_bn=on)
  check_eval '[ -n "$m" ] && [ "$on" = "$m" ] && [ -n "$mw" ] && [ "$onw" = "$mw" ] && [ -z "$w1" ]' \
    "sync-bn on: step '$on' wait '$onw' != measured '$m' '$mw', or a wait at 1 rank '$w1'"
  check_eval 'awk -v on="$on" -v off="$off" -v w="$onw" -v ow="$offw" "BEGIN { exit !(off + 0 > 0 && off <= on + 0.001 && ow >= w - 0.001) }"' \
    "sync-bn off: step $off (on $on), wait $offw (on $onw)"
else
  bad "predict --sync-bn on,off: $(tail -n 2 "$tmp/ps.out" 2>/dev/null)"
fi

# bad command lines
badline "--sync-bn" "$run" --sync-bn maybe
badline "no run directory"
badline "no such run directory" "$tmp/nowhere"
badline "not a run directory" "$tmp"
badline "--world" "$run" --world 0
badline "whole rank count" "$run" --world 2.5
badline "--bucket-cap-mb" "$run" --bucket-cap-mb 1,,4
badline "--bucket-cap-mb" "$run" --bucket-cap-mb abc
badline "--bandwidth-gbps" "$run" --bandwidth-gbps -1
badline "--amp" "$run" --amp fp32
# a run measured under load says so (report/FORMULAS.md "Figures measured under load"):
# the same run with meta.csv's host figures set to an idle host (no other program, no
# steal) and to a busy one (host_busy_s 100 s above the ranks' own)
for load in idle busy; do
  rm -rf "$tmp/load-$load"
  cp -r "$tmp/cap0.05/ddp" "$tmp/load-$load"
  rc=$(awk -F, '$1 == "ranks_cpu_s" { print $2 }' "$tmp/load-$load/meta.csv")
  busy=$rc
  [ $load = busy ] && busy=$(awk -v r="$rc" 'BEGIN { print r + 100 }')
  sed -i -e "s/^host_busy_s,.*/host_busy_s,$busy/" -e "s/^host_steal_s,.*/host_steal_s,0/" \
    "$tmp/load-$load/meta.csv"
  "$bin" predict "$tmp/load-$load" --bucket-cap-mb 25 >"$tmp/load-$load.out" 2>&1
  n=$(grep -c "^#  run .* was measured under load (other programs kept .* cores busy): every prediction carries" "$tmp/load-$load.out")
  want=0
  [ $load = busy ] && want=1
  check_eq "predict of a $load run: the load line" "$n" "$want"
done

badline "unknown option" "$run" --frobnicate
badline "needs a value" "$run" --world
badline "one run directory at a time" "$run" "$run"

check_done
