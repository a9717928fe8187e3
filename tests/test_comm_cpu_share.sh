#!/usr/bin/env bash
# test_comm_cpu_share.sh — the CPU the comm's threads take beside compute on CPU ranks
# (probes/TRACE.md kind cpu rows; report/FORMULAS.md comm_cpu_ms, comm_cpu_bwd_ms):
#   - a 2-rank CPU run of 1 compute thread per rank over gloo (shm where this build has no
#     gloo), several buckets: every rank writes a step and a backward cpu row per step, and
#     its other threads took CPU inside backward (> 0 summed over the steps; overlap.csv's
#     comm_cpu_bwd_ms is set on both ranks), and `ddpprof predict` says so in its comm line;
#   - a 1-rank run (no comm): the median others' CPU a step is ~0 (below 0.05 ms);
#   - a run of 2 compute threads writes no cpu rows (the backend's worker would count as the
#     others: the rule of trainer/train_step.c), and overlap.csv leaves the columns empty.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

comm=shm
"$bin" --version | grep -q '^comms:.* gloo' && comm=gloo
common=(--model convnet --epochs 1 --limit 640 --test-limit 64 --batch-size 32 --quiet)

# the others' CPU ns of a trace's kind cpu rows of PHASE: "rows sum"
cpu_rows() {
  csv_awk -v ph="$2" 'FNR > 1 && col("kind") == "cpu" && col("phase") == ph {
    n++; s += col("bytes") } END { print n + 0, s + 0 }' "$1"
}

# --- 2 ranks, several buckets ---
d2=$tmp/ddp
if ! timeout 300 "$bin" train --cpu 2 --comm "$comm" --threads 1 --bucket-cap-mb 0.02 \
     "${common[@]}" --out "$d2" >"$tmp/ddp.log" 2>&1 </dev/null; then
  bad "2-rank $comm run failed: $(tail -3 "$tmp/ddp.log")"
  check_done
  exit
fi
steps=$(awk -F, '$1 == "steps" { print $2 }' "$d2/meta.csv")
for r in 0 1; do
  read -r n sum <<<"$(cpu_rows "$d2/rank$r.trace.csv" backward)"
  check_eq "rank $r: backward cpu rows" "$n" "$steps"
  check "rank $r: others' CPU in backward" "$([ "$sum" -gt 0 ]; echo $?)" \
    "the other threads took $sum ns inside backward over $n steps ($comm, 2 ranks)"
  read -r n sum <<<"$(cpu_rows "$d2/rank$r.trace.csv" step)"
  check_eq "rank $r: step cpu rows" "$n" "$steps"
done
"$bin" report "$d2" --out "$tmp/rep2" >/dev/null 2>&1
for r in 0 1; do
  v=$(csv_col "$tmp/rep2/overlap.csv" comm_cpu_bwd_ms rank=$r)
  check "rank $r: overlap.csv comm_cpu_bwd_ms" \
    "$(awk -v v="$v" 'BEGIN { exit !(v != "" && v + 0 > 0) }'; echo $?)" "'$v'"
done
"$bin" predict "$d2" >"$tmp/p.out" 2>&1
check predict-line "$(grep -q '^#  comm: its threads took .* ms of CPU a step, .* ms of it inside backward (.* % of backward)$' "$tmp/p.out"; echo $?)" \
  "no comm CPU line: $(grep 'comm:' "$tmp/p.out")"
# the model's term (report/FORMULAS.md "The comm's CPU beside backward"): the rate line, and
# a 1-rank what-if, which moves no bytes, computes the own configuration's cpu_bwd less (to
# predict.csv's 3 decimals and the printed figure's: 0.002 ms)
"$bin" predict "$d2" --world 1 >"$tmp/p1.out" 2>&1
own=$(sed -n "s/^#  comm: its threads take .* ms of CPU per MB a rank moves;.*(this run's configuration: \([0-9.]*\) ms).*/\1/p" "$tmp/p1.out")
mc=$(csv_col "$d2/predict.csv" compute_ms config=measured)
pc=$(csv_col "$d2/predict.csv" compute_ms config=predicted)
check "predict: 1 rank saves the comm's CPU beside backward" \
  "$(awk -v o="$own" -v m="$mc" -v p="$pc" 'BEGIN { d = m - p - o; exit !(o > 0 && d < 0.002 && d > -0.002) }'; echo $?)" \
  "own cpu_bwd '$own', measured compute '$mc', 1-rank compute '$pc': $(grep 'CPU' "$tmp/p1.out")"

# --- 1 rank: no comm, so the other threads are the trace's flusher alone (about once a
# second, a write of the buffered rows: at most one step in a second's steps has it), so
# the median step's others' CPU is the clocks' read-order error (well under 1 us); 0.05 ms
# leaves room for a flush in a run of few steps ---
d1=$tmp/one
timeout 300 "$bin" train --cpu 1 --threads 1 "${common[@]}" --out "$d1" >"$tmp/one.log" 2>&1 </dev/null
check one-rank-run $? "$(tail -3 "$tmp/one.log")"
"$bin" report "$d1" --out "$tmp/rep1" >/dev/null 2>&1
v=$(csv_col "$tmp/rep1/overlap.csv" comm_cpu_ms rank=0)
check "1 rank: comm_cpu_ms ~0" "$(awk -v v="$v" 'BEGIN { exit !(v != "" && v + 0 < 0.05) }'; echo $?)" "'$v'"

# --- 2 compute threads: no cpu rows, empty columns ---
dt=$tmp/two-threads
timeout 300 "$bin" train --cpu 1 --threads 2 "${common[@]}" --limit 128 --out "$dt" >"$tmp/t.log" 2>&1 </dev/null
check two-threads-run $? "$(tail -3 "$tmp/t.log")"
read -r n sum <<<"$(cpu_rows "$dt/rank0.trace.csv" step)"
check_eq "2 threads: cpu rows" "$n" 0
"$bin" report "$dt" --out "$tmp/rept" >/dev/null 2>&1
check_eq "2 threads: comm_cpu_ms" "$(csv_col "$tmp/rept/overlap.csv" comm_cpu_ms rank=0)" ""
check_done
