#!/usr/bin/env bash
# test_tune_combo.sh — `ddpprof tune` combines the faster candidates that set nothing in
# common (trainer/tune.h), 2 CPU ranks of the ConvNet on synthetic data:
#   the given configuration has two planted stragglers, rank 1 sleeping 100 ms a step
#   twice over (DDPPROF_FAULT_DELAY_MS and DDPPROF_FAULT_DELAY2_MS, tune's environment);
#   fixa removes the first, fixb the second, and halfa cuts the first to 40 ms: all three
#   "faster".  fixa and halfa set one variable, so they never combine; the combination is
#   fixa and fixb (either first: they remove the same), measured in rounds of its own
#   against the better of them and the given configuration, faster than either alone by
#   the 100 ms a step the other removes, and it is the pick: tune.csv's row, the printed
#   best measured command line with both changes, combo-round-N/ with its three trials.
# 3 rounds of 5 steps: 15 trials, then 9; a step is 200-350 ms with the sleeps: about a
# minute on 2 cores (every run bounded by timeout).
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
cfg=(--cpu 2 --threads 1 --dataset synthetic --batch-size 16)

DDPPROF_FAULT_DELAY_MS=1:100 DDPPROF_FAULT_DELAY2_MS=1:100 timeout 300 "$bin" tune "${cfg[@]}" \
  --rounds 3 --tune-steps 5 \
  --candidates "fixa=DDPPROF_FAULT_DELAY_MS=1:0;fixb=DDPPROF_FAULT_DELAY2_MS=1:0;\
halfa=DDPPROF_FAULT_DELAY_MS=1:40" \
  --out "$tmp/t" >"$tmp/t.log" 2>&1 </dev/null
check_eq "tune exit" "$?" 0
t=$tmp/t/tune.csv
for k in fixa fixb halfa; do
  check_eq "$k: faster" "$(csv_col "$t" verdict candidate=$k)" faster
done
# the combination's row: its name and args are its parts', best first
combo=$(csv_awk 'FNR > 1 && index(col("candidate"), "+") { print col("candidate") "|" col("args") }' "$t")
case $combo in
  "fixa+fixb|DDPPROF_FAULT_DELAY_MS=1:0 DDPPROF_FAULT_DELAY2_MS=1:0" | \
  "fixb+fixa|DDPPROF_FAULT_DELAY2_MS=1:0 DDPPROF_FAULT_DELAY_MS=1:0") ok=0 ;;
  *) ok=1 ;;
esac
check "one combination, fixa and fixb" "$ok" "tune.csv's combination rows: '$combo'"
check_eq "the combination: faster than the given configuration" \
  "$(csv_awk 'FNR > 1 && index(col("candidate"), "+") { print col("verdict") }' "$t")" faster
check_run "halfa not combined: it sets what fixa sets" \
  grep -q '^# not combined: halfa sets what fixa sets$' "$tmp/t.log"
check_eq "no combination holds halfa's change" \
  "$(csv_awk 'FNR > 1 && index(col("candidate"), "+") && index(col("args"), "=1:40")' "$t" | wc -l)" 0
check_run "against the best alone: faster" grep -q '^#  against fix[ab] alone: .*: faster$' "$tmp/t.log"
check_run "the pick is the combination" grep -q '^# best measured: fix[ab]+fix[ab], ' "$tmp/t.log"
check_run "its command line" grep -qx \
  'DDPPROF_FAULT_DELAY2\?_MS=1:0 DDPPROF_FAULT_DELAY2\?_MS=1:0 ddpprof --cpu 2 --threads 1 --dataset synthetic --batch-size 16' "$tmp/t.log"
check_eq "combination trials" "$(ls -d "$tmp"/t/combo-round-*/* | wc -l)" 9 # 3 rounds x 3
check_eq "tune's own trials" "$(ls -d "$tmp"/t/round-*/* | wc -l)" 15 # 3 rounds x 5
check_done
