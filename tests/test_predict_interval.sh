#!/usr/bin/env bash
# test_predict_interval.sh — the 80 % interval of `ddpprof predict` (report/FORMULAS.md "The
# 80 % interval") on a calibration run fabricated so that every term is worked out by hand:
# 2 ranks, shm, 10 steps, two parameters of 200000 bytes in one bucket (cap 25):
#   step spread  rank 0's steps 9, 10 x 6, 11, 12, 13 ms: p10 9, p50 10, p90 12 (nearest
#                rank): -10 %, +20 %
#   comm fit     the setup's all-reduces of 1, 2, 3 x 10^5 bytes (3 each) take 1.3, 1.9,
#                2.9 ms, the bucket's 4 x 10^5 bytes 4.3 ms: the line 0.1 ms + 1 ms per 10^5
#                bytes (0.8 Gbit/s, 50 us a hop at 2 ranks) plus residuals +0.2, -0.2, -0.2,
#                +0.2, which least squares leaves as they are (they sum to 0 and to 0
#                weighted by the sizes): p10 -0.2, p90 +0.2 ms an all-reduce
#   skew         rank 1's backward 2 ms + d, d = 0, .5, .5, 1, 1, 1, 1, 2, 2, 3 over the steps:
#                stragglers.csv's wait is d, its median (the lower middle) 1 ms
# The model: data 0.5, forward 2, backward 2.5 ms (the ranks' p50s 2 and 3, their mean),
# backward 2.5-5 ms into the step; the bucket (4 x 10^5 bytes) after backward, 4.1 ms.
#  1. measured row: 10 -/+ sqrt((10 x 0.1)^2 + 1), sqrt((10 x 0.2)^2 + 1): 8.586-12.236, and
#     the predicted row of the run's own configuration the same;
#  2. --bandwidth-gbps 0.4 (half the fit's): the one bucket takes 8.1 ms, the step 14 ms;
#     every all-reduce's offset moves both replays alike, so no comm term: 14 -/+
#     sqrt(1.4^2 + 1), sqrt(2.8^2 + 1): 12.280-16.973 (the spread is the predicted step's);
#  3. --bucket-cap-mb 0.1: each parameter its own bucket; the gradients are ready by bytes
#     over backward (3.75 and 5 ms), the first 2.1 ms from 3.75 to 5.85, the second after
#     it to 7.95: exposed 2.95 against 4.1, the step 8.85 ms; with 0.2 ms more an
#     all-reduce, 3.35 against 4.3 (+0.2), with 0.2 less 2.55 against 3.9 (-0.2):
#     8.85 -/+ sqrt(0.885^2 + 0.2^2 + 1), sqrt(1.77^2 + 0.2^2 + 1): 7.500-10.893;
#  4. the footer states the three terms; the terminal table has the two columns;
#  5. the fit is what was designed (0.8 Gbit/s, 50 us), so the figures above are not
#     another line's by chance.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

run=$tmp/calib
mkdir -p "$run"
printf '%s\n' key,value mode,ddp world_size,2 local_world_size,2 epochs,1 device,cpu amp,off \
  batch_size,32 host_cores,2 wall_s,1 steps,10 comm,shm comm_link,shm bucket_cap_mb,25 buckets,1 \
  bucket.0.params,2 bucket.0.bytes,400000 param.0.name,a.weight param.0.bytes,200000 \
  param.1.name,b.weight param.1.bytes,200000 >"$run/meta.csv"
{ echo "step,epoch,loss,loss_scale,lr,images,found_inf"
  for s in $(seq 10); do echo "$s,1,2.3,1,0.01,64,0"; done; } >"$run/metrics.csv"
awk -v dir="$run" '
  function ns(ms) { return sprintf("%d", ms * 1000000 + 0.5) }
  function row(r, s, phase, bucket, a, b, bytes, name) {
    printf "%d,%d,1,%s,%d,host,%s,%s,%d,%s,range,0\n", r, s, phase, bucket, ns(a), ns(b), bytes, name > (dir "/rank" r ".trace.csv")
  }
  BEGIN {
    for (r = 0; r < 2; r++)
      print "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream" > (dir "/rank" r ".trace.csv")
    # the setup: 3 x (10^5, 2 x 10^5, 3 x 10^5 bytes) on both ranks, step -1
    split("1.3 1.9 2.9", cms, " ")
    t = 1
    for (k = 1; k <= 3; k++)
      for (i = 1; i <= 3; i++) {
        for (r = 0; r < 2; r++) row(r, -1, "comm.allreduce", -1, t, t + cms[i], i * 100000, "calib.allreduce")
        t += cms[i] + 0.5
      }
    # the steps: rank 1 late by d; rank 0 steps 9, 10 x 6, 11, 12, 13 through the optimizer
    split("0 .5 .5 1 1 1 1 2 2 3", d, " ")
    split(".2 .7 .7 .2 .2 .2 .2 .2 1.2 1.2", opt, " ")
    t = 100
    for (s = 1; s <= 10; s++) {
      for (r = 0; r < 2; r++) {
        ready[r] = t + 0.5 + 2 + 2 + (r == 1 ? d[s] : 0)
      }
      end = (ready[0] > ready[1] ? ready[0] : ready[1]) + 4.3
      for (r = 0; r < 2; r++) {
        row(r, s, "data", -1, t, t + 0.5, 0, "data")
        row(r, s, "forward", -1, t + 0.5, t + 2.5, 0, "forward")
        row(r, s, "backward", -1, t + 2.5, ready[r], 0, "backward")
        row(r, s, "allreduce", 0, ready[r], end, 400000, "allreduce")
        row(r, s, "optimizer", -1, end, end + opt[s], 0, "optimizer")
        row(r, s, "step", -1, t, end + opt[s], 0, "step")
      }
      t = end + opt[s] + 1
    }
  }'

# --warmup-steps 0: every step counts (the spread and skew above are over all 10)
p() { "$bin" predict "$run" --warmup-steps 0 "$@"; }
col() { csv_col "$1/predict.csv" "$2" "${@:3}"; }
if ! p --out "$tmp/own" >"$tmp/own.out" 2>&1; then
  echo "FAIL predict on the fabricated run: $(tail -n 3 "$tmp/own.out")"
  exit 1
fi

# 5. the fit as designed
bw=$(col "$tmp/own" bandwidth_gbps config=measured) lat=$(col "$tmp/own" latency_us config=measured)
check_eval '[ "$bw" = 0.8 ] && [ "$lat" = 50 ]' "the fit: $bw Gbit/s, $lat us (want 0.8, 50): the run is not as designed"

# 1. the measured row and the run's own configuration
for c in measured predicted; do
  got="$(col "$tmp/own" step_ms config=$c) $(col "$tmp/own" step_lo_ms config=$c) $(col "$tmp/own" step_hi_ms config=$c)"
  check_eval '[ "$got" = "10.000 8.586 12.236" ]' "$c row: step, 80 % interval '$got', want '10.000 8.586 12.236'"
done

# 2. half the bandwidth: no comm term, the spread of the predicted step
p --bandwidth-gbps 0.4 --out "$tmp/bw" >"$tmp/bw.out" 2>&1 || bad "predict --bandwidth-gbps 0.4: $(tail -n 1 "$tmp/bw.out")"
got="$(col "$tmp/bw" step_ms config=predicted) $(col "$tmp/bw" step_lo_ms config=predicted) $(col "$tmp/bw" step_hi_ms config=predicted)"
check_eval '[ "$got" = "14.000 12.280 16.973" ]' "--bandwidth-gbps 0.4: '$got', want '14.000 12.280 16.973'"

# 3. two buckets: the comm term
p --bucket-cap-mb 0.1 --out "$tmp/cap" >"$tmp/cap.out" 2>&1 || bad "predict --bucket-cap-mb 0.1: $(tail -n 1 "$tmp/cap.out")"
got="$(col "$tmp/cap" buckets config=predicted) $(col "$tmp/cap" step_ms config=predicted) $(col "$tmp/cap" step_lo_ms config=predicted) $(col "$tmp/cap" step_hi_ms config=predicted)"
check_eval '[ "$got" = "2 8.850 7.500 10.893" ]' "--bucket-cap-mb 0.1: buckets, step, interval '$got', want '2 8.850 7.500 10.893'"

# 4. said: the three terms under the table, the columns in it
check_eval 'grep -q "80 % interval (step_lo_ms to step_hi_ms; .*step times p10 -10.0 %, p90 +20.0 % of the median (10 step(s)); the comm fit.s residuals p10 -0.200 ms, p90 +0.200 ms an all-reduce (4 size(s)); rank-arrival skew 1.000 ms a step per waiting rank (the median over 10 step(s) of stragglers.csv); each side.s terms added in quadrature" "$tmp/cap.out"' \
  "the footer does not state the terms: $(grep '80 %' "$tmp/cap.out")"
check_eval 'grep -q "80% from .* to " "$tmp/cap.out"' "the terminal table has no interval columns: $(head -n 4 "$tmp/cap.out")"

check_done
