#!/usr/bin/env bash
# test_tune.sh — `ddpprof tune` measures candidate changes against the given configuration
# in interleaved A/B rounds (trainer/tune.h), 2 CPU ranks of the ConvNet on synthetic data:
#  1. a planted slow configuration is found: rank 1 sleeping 300 ms in every step
#     (DDPPROF_FAULT_DELAY_MS; a step here takes 10-60 ms, up to 150 on a loaded machine)
#     is "slower" in tune.csv, every round; a planted no-op change (--lr, which moves no time) is "noise"; the best
#     measured configuration is the given one, printed as a command line; each trial's
#     run directory is there, one per round and candidate;
#  2. the other way round: a straggler in the given configuration (in tune's environment)
#     and a candidate that removes it: "faster", and the printed command is the candidate's;
#  3. bad input: a candidate that is not NAME=ARGS, --rounds 1, and one named "same": one
#     line each, exit non-zero.
# In 1 and 2 the output ends with the advice on the given configuration, from `ddpprof
# report` of its last trial with --tune tune.csv: what the trials measured is there as
# "measured (A/B)" with tune's verdict (report/FORMULAS.md "Advice").
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
# 10 measured steps a trial (15 with the warm-up), 5 rounds: under a minute on 2 cores
cfg=(--cpu 2 --threads 1 --dataset synthetic --batch-size 16)

timeout 600 "$bin" tune "${cfg[@]}" --rounds 5 --tune-steps 10 \
  --candidates "noop=--lr 0.0002;slow=DDPPROF_FAULT_DELAY_MS=1:300" \
  --out "$tmp/t1" >"$tmp/t1.log" 2>&1 </dev/null
rc=$?
check_eq "tune exit" "$rc" 0
t=$tmp/t1/tune.csv
check_run "tune.csv columns" csv_header "$t" candidate args rounds step_ms_given step_ms change_pct \
  low_pct high_pct noise_pct verdict
check_eq "slow: slower" "$(csv_col "$t" verdict candidate=slow)" slower
# every round slower: the range's low end above zero, by more than a loaded machine moves
# a step (the straggler's 300 ms on steps of 10-150 ms)
check "slow: every round" "$(csv_col "$t" low_pct candidate=slow | awk '{ exit !($1 > 50) }'; echo $?)" \
  "slow's range starts at $(csv_col "$t" low_pct candidate=slow) %"
check_eq "noop: noise" "$(csv_col "$t" verdict candidate=noop)" noise
check_eq "same: noise" "$(csv_col "$t" verdict candidate=same)" noise
check_run "best is the given configuration" grep -q '^# best measured: the configuration as given' "$tmp/t1.log"
check_run "its command line" grep -qx 'ddpprof --cpu 2 --threads 1 --dataset synthetic --batch-size 16' "$tmp/t1.log"
check_eq "trial directories" "$(ls -d "$tmp"/t1/round-*/* | wc -l)" 20 # 5 rounds x 4
check_run "a trial's trace" test -s "$tmp/t1/round-5/slow/rank1.trace.csv"
# the output ends with the advice: a heading, the verdict, then 1-3 lines
advice_tail() { awk '/^# the advice on the given configuration with what tune measured/ {n = NR} {l[NR] = $0}
  END { if (n) for (i = n + 1; i <= NR; i++) print l[i] }' "$1"; }
n=$(advice_tail "$tmp/t1.log" | wc -l)
check "the advice ends the output" "$([ "$n" -ge 2 ] && [ "$n" -le 4 ] &&
  advice_tail "$tmp/t1.log" | head -n 1 | grep -q '^# verdict: '; echo $?)" "$(tail -n 5 "$tmp/t1.log")"
a=$tmp/t1/report/advice.csv
ab() { csv_awk -v c="$2" 'FNR > 1 && index(col("text"), c " (") == 1 { print col("source") "/" col("ab_verdict") "/" col("status") }' "$1"; }
check_eq "advice: slow measured (A/B), slower" "$(ab "$a" slow)" "measured (A/B)/slower/slower"
check_eq "advice: noop measured (A/B), noise" "$(ab "$a" noop)" "measured (A/B)/noise/inside the noise"
check_eq "advice: same (tune's noise, no change) is no candidate" "$(ab "$a" same | wc -l)" 0

# 2. the straggler in the given configuration, removed by a candidate (3 rounds of 5 steps:
# the change is 3-30x)
DDPPROF_FAULT_DELAY_MS=1:300 timeout 600 "$bin" tune "${cfg[@]}" --rounds 3 --tune-steps 5 \
  --candidates "fix=DDPPROF_FAULT_DELAY_MS=1:0" --out "$tmp/t2" >"$tmp/t2.log" 2>&1 </dev/null
check_eq "tune exit (2)" "$?" 0
check_eq "fix: faster" "$(csv_col "$tmp/t2/tune.csv" verdict candidate=fix)" faster
check_run "best: fix" grep -q '^# best measured: fix, ' "$tmp/t2.log"
check_run "fix's command line" grep -qx \
  'DDPPROF_FAULT_DELAY_MS=1:0 ddpprof --cpu 2 --threads 1 --dataset synthetic --batch-size 16' "$tmp/t2.log"
check_eq "advice: fix measured (A/B), faster, recommended" "$(ab "$tmp/t2/report/advice.csv" fix)" \
  "measured (A/B)/faster/recommended"
check_eq "advice: fix shown" "$(advice_tail "$tmp/t2.log" |
  grep -c '^# [123]\. fix (DDPPROF_FAULT_DELAY_MS=1:0): ddpprof tune measured .*: faster \[-[0-9.]* ms per step (-[0-9.]* to -[0-9.]*), measured (A/B)\]$')" 1

# 3. bad input
bad_line() { # bad_line NAME PATTERN ARGS...: exit non-zero, one line matching PATTERN
  local name=$1 pat=$2
  shift 2
  "$bin" tune "$@" >"$tmp/bad.out" 2>"$tmp/bad.err" </dev/null
  local rc=$?
  check "$name" "$([ $rc -ne 0 ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] &&
    grep -q -- "$pat" "$tmp/bad.err"; echo $?)" "exit $rc: $(cat "$tmp/bad.err")"
}
bad_line "not NAME=ARGS" "is not NAME=ARGS" --cpu 2 --candidates "oops" --out "$tmp/b1"
bad_line "--rounds 1" "--rounds" --cpu 2 --rounds 1 --out "$tmp/b2"
bad_line "a candidate named same" "always runs" --cpu 2 --candidates "same=--lr 1" --out "$tmp/b3"

check_done
