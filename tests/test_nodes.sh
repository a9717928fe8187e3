#!/usr/bin/env bash
# test_nodes.sh — the node agent on this host alone (no namespaces, no root needed; the
# two-host version is test_multinode):
#  1. two nodes on loopback: each writes its own run directory, `ddpprof report` merges them
#     into one run of 4 ranks;
#  2. node 0 alone, node 1 never started: the rendezvous times out naming node 1;
#  3. one node, --max-restarts 1, rank 1 killed at step 5 (--checkpoint-every 2): the run
#     completes from step 4's checkpoint (or step 2's, when rank 0 was stopped while writing
#     step 4's), the failed attempt's files are in attempt-0/, meta.csv says why it restarted,
#     and the final checkpoint is the one an uninterrupted run from the same checkpoint
#     writes, byte for byte;
#  4. the same without restarts left: the run ends non-zero naming the node, rank and cause;
#  5. two nodes, node 0's agent SIGKILLed mid-run: node 1 ends at once (not after 3x
#     --timeout) and names the lost rendezvous, not "rank 0 did not arrive";
#  meta.csv's comm_progress: gradient beside gloo (1), none beside shared memory (3).
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
gloo=1
"$bin" --version | grep -q '^comms:.* gloo' || gloo=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
args="--quiet --limit 240 --test-limit 48 --epochs 1 --threads 1 --timeout 60 --amp off --batch-size 6 --seed 3"

# --- 1. two nodes on loopback, merged (their ranks talk over gloo) ---
if [ $gloo -eq 1 ]; then
port=$(free_port)
for r in 0 1; do
  timeout 120 "$bin" train --nnodes 2 --node-rank $r --nproc-per-node 2 --master-port "$port" \
    $args --out "$tmp/n$r" >"$tmp/n$r.log" 2>&1 &
done
rc=0
for j in $(jobs -p); do wait "$j" || rc=1; done
check two-nodes "$rc" "$(tail -n 3 "$tmp/n0.log" "$tmp/n1.log")"
check node1-own-dir "$(grep -qx 'node_rank,1' "$tmp/n1/meta.csv" && [ -f "$tmp/n1/rank2.trace.csv" ] &&
  [ ! -f "$tmp/n0/rank2.trace.csv" ]; echo $?)" "node 1 did not write its own run directory"
check auto-comm "$(grep -qx 'comm,gloo' "$tmp/n0/meta.csv"; echo $?)" "--comm auto did not pick gloo across nodes"
# gloo's threads share the ranks' cores: the reducer gives them the core at each gradient,
# which meta.csv says for `ddpprof predict` (report/FORMULAS.md "Predictions")
check comm-progress "$(grep -qx 'comm_progress,gradient' "$tmp/n0/meta.csv"; echo $?)" \
  "meta.csv: $(grep '^comm' "$tmp/n0/meta.csv" | tr '\n' ' ') (want comm_progress,gradient beside gloo)"
"$bin" report "$tmp/n0" "$tmp/n1" --out "$tmp/merged" >"$tmp/merged.log" 2>&1
check merged "$?" "report failed: $(tail -n 3 "$tmp/merged.log")"
check merged-ranks "$(awk -F, 'NR > 1 { n++ } END { exit n != 4 }' "$tmp/merged/overlap.csv"; echo $?)" \
  "merged overlap.csv has not 4 ranks: $(cat "$tmp/merged/overlap.csv")"
"$bin" report "$tmp/n1" --out "$tmp/alone" >"$tmp/alone.log" 2>&1
check node-alone-warns "$(grep -q 'only 2 rank trace(s) found: give every node' "$tmp/alone.log"; echo $?)" \
  "one node's directory alone: no warning naming the missing nodes: $(cat "$tmp/alone.log" | head -3)"
else
  echo "part 1 skipped: this build has no gloo comm (libgloo-dev not found at configure time)"
fi

# --- 2. a node that never comes ---
port=$(free_port)
timeout 60 "$bin" train --nnodes 2 --node-rank 0 --nproc-per-node 1 --master-port "$port" $args \
  --timeout 1.5 --out "$tmp/alone0" >"$tmp/alone0.log" 2>&1
rc=$?
check missing-node "$([ $rc -ne 0 ] && grep -q 'node 1 has not joined attempt 0 within 1.5 s' "$tmp/alone0.log"; echo $?)" \
  "no timeout naming node 1 (exit $rc): $(tail -n 2 "$tmp/alone0.log")"

# --- 3. one node, restarted from the latest checkpoint ---
DDPPROF_FAULT_KILL_STEP=1:5 timeout 120 "$bin" train --cpu 2 $args --checkpoint-every 2 --max-restarts 1 \
  --out "$tmp/r" >"$tmp/r.log" 2>&1
check restart-exit "$?" "the restarted run failed: $(tail -n 3 "$tmp/r.log")"
# one node's ranks talk through shared memory, no comm threads to give the core to
check comm-progress-none "$(grep -qx 'comm_progress,none' "$tmp/r/meta.csv" && ! grep -qx 'comm,gloo' "$tmp/r/meta.csv"; echo $?)" \
  "meta.csv: $(grep '^comm' "$tmp/r/meta.csv" | tr '\n' ' ') (want comm_progress,none beside a comm other than gloo)"
check restart-said "$(grep -q 'node 0 (host .*): rank 1 failed (killed by signal 9: Killed); restarting' "$tmp/r.log"; echo $?)" \
  "no restart line: $(tail -n 3 "$tmp/r.log")"
check restart-kept "$([ -f "$tmp/r/attempt-0/rank1.trace.csv" ] && [ -f "$tmp/r/attempt-0/metrics.csv" ] &&
  [ -f "$tmp/r/attempt-0/checkpoint.safetensors" ] && [ -f "$tmp/r/rank1.trace.csv" ]; echo $?)" \
  "the failed attempt's files are not beside the new ones: $(ls -R "$tmp/r")"
# rank 1 dies as step 5 begins: every rank finished step 4's collectives, so rank 0 wrote
# step 2's checkpoint for sure and step 4's unless it was stopped while writing it
resumed=$(awk -F, '$1 == "resumed_step" { print $2 }' "$tmp/r/meta.csv")
check restart-meta "$(grep -qx 'restarts,1' "$tmp/r/meta.csv" && [ "$resumed" = 4 -o "$resumed" = 2 ] &&
  grep -q '^restart.1.cause,node 0 (host .*): rank 1 failed (killed by signal 9' "$tmp/r/meta.csv"; echo $?)" \
  "meta.csv does not tell the restart: $(grep -E 'restart|resumed' "$tmp/r/meta.csv" | tr '\n' ' ')"
check restart-steps "$(csv_awk -v r="$resumed" 'NR == 2 { first = col("step") } END { exit !(first == r + 1 && col("step") == 20) }' "$tmp/r/metrics.csv"; echo $?)" \
  "the restarted attempt did not run steps $((resumed + 1))..20 (240 samples, global batch 12)"
timeout 120 "$bin" train --cpu 2 $args --checkpoint-every 2 --resume "$tmp/r/attempt-0/checkpoint.safetensors" \
  --out "$tmp/u" >"$tmp/u.log" 2>&1
check resumed-exit "$?" "the uninterrupted resumed run failed: $(tail -n 3 "$tmp/u.log")"
check restart-same-weights "$(cmp -s "$tmp/r/checkpoint.safetensors" "$tmp/u/checkpoint.safetensors"; echo $?)" \
  "the final checkpoint differs from an uninterrupted run from the same checkpoint"
"$bin" report "$tmp/r" --out "$tmp/rr" >"$tmp/rr.log" 2>&1
check restart-report "$(grep -q 'restart 1 of the job after: node 0' "$tmp/rr.log"; echo $?)" \
  "the report does not show the restart"

# --- 4. no restarts left ---
DDPPROF_FAULT_KILL_STEP=1:3 timeout 120 "$bin" train --cpu 2 $args --max-restarts 0 --nnodes 1 \
  --out "$tmp/x" >"$tmp/x.log" 2>&1
rc=$?
check no-restarts-exit "$([ $rc -eq 1 ]; echo $?)" "exit $rc, want 1"
# (rank 0 may fail on its own, its peer gone, before the launcher stops it: then nothing
# was "stopped", and the line says only the cause)
check no-restarts-says "$(grep -Eq 'ddpprof: rank 1 failed \(killed by signal 9: Killed\)(; stopped the other 1 rank\(s\))?$' "$tmp/x.log"; echo $?)" \
  "the failing rank and cause are not named: $(tail -n 3 "$tmp/x.log")"
DDPPROF_FAULT_KILL_STEP=1:3 timeout 120 "$bin" train --cpu 2 $args --max-restarts 1 --checkpoint-every 100 \
  --out "$tmp/y" >"$tmp/y.log" 2>&1 # first attempt killed, the restart runs from scratch and succeeds
check from-scratch "$?" "a restart without any checkpoint failed: $(tail -n 3 "$tmp/y.log")"
check from-scratch-said "$(grep -q 'start again from scratch' "$tmp/y.log"; echo $?)" "$(tail -n 3 "$tmp/y.log")"

# --- 5. node 0's agent killed: node 1 names the lost rendezvous, at once ---
if [ $gloo -eq 1 ]; then
port=$(free_port)
for r in 0 1; do
  timeout 120 "$bin" train --nnodes 2 --node-rank $r --nproc-per-node 1 --master-port "$port" \
    $args --limit 4000 --timeout 10 --out "$tmp/g$r" >"$tmp/g$r.log" 2>&1 &
  eval "pid$r=\$!"
done
for i in $(seq 600); do # training under way: 5 steps on disk
  [ -f "$tmp/g0/metrics.csv" ] && [ "$(wc -l <"$tmp/g0/metrics.csv")" -gt 5 ] && break
  sleep 0.1
done
agent0=$(pgrep -P "$pid0" | head -n 1) # node 0's ddpprof, under timeout(1)
t0=$(date +%s%N)
kill -KILL "${agent0:-$pid0}" # the agent; its rank dies with it (PR_SET_PDEATHSIG)
wait "$pid1"
rc=$?
dt_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
wait "$pid0" 2>/dev/null
# the old bound: three store calls that each waited out the 10 s --timeout (30 s)
check node0-killed "$([ $rc -eq 1 ] && [ $dt_ms -lt 5000 ] &&
  grep -q "the job failed: lost node 0's rendezvous at 127.0.0.1:$port" "$tmp/g1.log" &&
  ! grep -q "the job failed: rank 0 .*did not arrive" "$tmp/g1.log"; echo $?)" \
  "node 1 exited $rc after $dt_ms ms: $(tail -n 2 "$tmp/g1.log")"
echo "node 0's agent killed: node 1 ended in $dt_ms ms"
fi

check_done
