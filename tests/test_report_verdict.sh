#!/usr/bin/env bash
# test_report_verdict.sh — the verdict names the cause of a speedup gap (report/FORMULAS.md
# "Advice": the verdict): where DDP is slower than the baseline or scales poorly, the
# part of the step that grew most in the diff of the two (diff.csv), its ms per step and
# share of the change, and what would change it; when no rule fires, the line after the
# verdict points at that cause instead of a bare "no recommendation".  Fabricated runs
# (mkrun as test_report_advice.sh's), a baseline of 1 rank on 2 threads (data 1, forward
# 40, backward 50, optimizer 2 ms: a 93 ms step, 32 images) against a DDP run of 2 ranks
# (64 images a step) where
#   compute    each rank's forward and backward take twice the baseline's (80, 100 ms) on
#              1 thread each of 2 cores: compute per rank +90 ms (100 %), 2.00x, threads
#   perimage   8 images per rank (16 a step), forward and backward 60 and 75 ms: 1.5x
#              the baseline's a step, 3.00x per image
#   comm       a 100 ms gradient all-reduce, 2 ms of it under backward: exposed
#              communication +98 ms, in bucket b0
#   straggler  rank 1's backward 100 ms longer: rank 0 waits for it in the all-reduce:
#              waiting for a slower rank, rank 1 in 100 % of steps
#   batch      8 images per rank, the same step: not the step time, the images per step
#   well       the same step and batch: scales well, no cause named
# KEEP=1 keeps the temporary directory.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# mkrun DIR MODE WORLD [key=value...]: tests/mkrun.sh says what each key lays out
. "$(dirname "$0")/mkrun.sh"

# pair NAME [key=value...]: NAME/baseline (1 rank on 2 threads, no all-reduce) and NAME/ddp
# (2 ranks, 1 thread each unless meta says, as given), then the report; its terminal
# output in NAME.out
pair() {
  local name=$1
  shift
  mkrun "$tmp/$name/baseline" baseline 1 meta="threads_per_rank,2"
  mkrun "$tmp/$name/ddp" ddp 2 "$@"
  "$bin" report "$tmp/$name" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null ||
    bad "$name: report failed: $(cat "$tmp/$name.err")"
}
verdict() { grep '^# verdict: ' "$tmp/$1.out"; }
# has NAME TEXT: the verdict of NAME holds TEXT (fixed string), once
has() { check_eq "$1: verdict has '$2'" "$(verdict "$1" | grep -cF -- "$2")" 1; }
hasnt() { check_eq "$1: verdict lacks '$2'" "$(verdict "$1" | grep -cF -- "$2")" 0; }
# the line after the verdict
next_line() { awk '/^# verdict: / {getline; print; exit}' "$tmp/$1.out"; }
# the terminal's advice lines are the page's, and advice.csv's verdict is the terminal's
same() {
  local name=$1
  check_eq "$name: page = terminal" "$(grep -o '<p class="\(verdict\|advice\)">[^<]*</p>' "$tmp/$name/report.html" |
    sed -e 's/<[^>]*>//g' -e 's/&lt;/</g' -e 's/&gt;/>/g' -e 's/&quot;/"/g' -e 's/&amp;/\&/g' |
    cmp -s - <(awk '/^# verdict: / {on = 1} on {sub(/^# /, ""); print}' "$tmp/$name.out"); echo $?)" 0
  check_eq "$name: advice.csv's verdict = the terminal's" \
    "$(csv_col "$tmp/$name/advice.csv" text rule=verdict)" "$(verdict "$name" | sed 's/^# //')"
}

# 1. compute per rank: forward and backward twice the baseline's, 1 thread against 2
pair compute fwd=80 bwd=100 meta="threads_per_rank,1"
has compute "DDP on 2 CPU ranks (run ddp) is no faster than the baseline: 1.02x"
has compute "; cause: compute per rank, +90.0 ms per step (100 % of the step's +90.0 ms over the baseline's 93.0 ms, diff.csv)"
has compute ": each rank's forward+backward takes 2.00x the baseline's: the baseline ran 2 threads, each rank 1 (2 ranks on 2 cores)"
has compute "; more cores per rank, or GPUs, would change it"
hasnt compute "exposed communication, +"
# no rule fires: the next line says what to do from the cause, not "no recommendation"
check_eq "compute: no candidate" "$(csv_col "$tmp/compute/advice.csv" rule | tail -n +2 | wc -l)" 0
check_eq "compute: no bare 'no recommendation'" "$(grep -c 'no recommendation' "$tmp/compute.out")" 0
check_eq "compute: the next line acts on the cause" \
  "$(next_line compute | grep -c "^# what to do, from the verdict's cause (compute per rank): more cores per rank, or GPUs, would change it")" 1
# the what-if's figure, when the report predicts one, is the one its "what if" lines print
w=$(awk '/^#   world 4 \(2x\): / {for (i = 1; i <= NF; i++) if ($i == "speedup") print $(i + 1)}' "$tmp/compute.out")
if [ -n "$w" ]; then has compute "(what if: 4 such ranks, each on its own cores: ${w} the baseline, predicted)"; else ok; fi
same compute

# 2. a smaller batch per rank: the compute ratio is per image (135 / 90 ms x 32 / 16)
pair perimage batch=16 fwd=60 bwd=75 meta="threads_per_rank,1"
has perimage "is slower than the baseline: 0.67x"
has perimage "; cause: compute per rank, +45.0 ms per step (100 % of the step's +45.0 ms over the baseline's 93.0 ms, diff.csv)"
has perimage ": each rank's forward+backward takes 3.00x the baseline's per image: the baseline ran 2 threads, each rank 1"

# 3. exposed communication: a 100 ms all-reduce, 2 ms hidden
pair comm ar=100 arh=2 meta="threads_per_rank,2"
has comm "is no faster than the baseline: 0.97x"
has comm "; cause: exposed communication, +98.0 ms per step (100 % of the step's +98.0 ms over the baseline's 93.0 ms, diff.csv), most of it in b0 (+98.0 ms)"
has comm "; the gradient all-reduce: a faster interconnect, fewer gradient bytes, or more compute per step to hide it under"
hasnt comm "cause: compute per rank"
hasnt comm "waiting for a slower rank"
hasnt comm "threads"
# a rule fires here (grad_exposed): the recommendations follow as before
check_eq "comm: recommendation 1" "$(next_line comm | grep -c '^# 1\. gradient all-reduce: ')" 1
same comm

# 4. a straggler: rank 1's backward 100 ms longer; rank 0 waits in the all-reduce
pair straggler slow=100 meta="threads_per_rank,2"
has straggler "; cause: waiting for a slower rank, in exposed communication, +"
has straggler ": the other ranks wait 100.0 ms per step for the slowest (rank 1 in 100 % of 10 steps)"
has straggler "; rank 1's compute: what else runs on its cores, its CPU binding and clocks, its share of the data"
hasnt straggler "cause: compute per rank"
same straggler

# 5. a batch of 8 per rank, the step as the baseline's: the images per step, not the time
pair batch batch=8 meta="threads_per_rank,2"
has batch "is slower than the baseline: 0.50x"
check_eq "batch: the next line" \
  "$(next_line batch | grep -c "^# what to do, from the verdict's cause (images per step): a larger batch per rank would change it; no rule's")" 1
has batch "; cause: not the step time (the baseline's 93.0 ms, this run's 93.0 ms): the images per step (8 per rank x 2 ranks against the baseline's 32); a larger batch per rank would change it"

# 6. scales well: no cause, and no rule: "no recommendation" as before
pair well meta="threads_per_rank,2"
has well "scales well: 2.00x"
hasnt well "cause:"
check_eq "well: no recommendation" "$(next_line well | grep -c '^# no recommendation: ')" 1

check_done
