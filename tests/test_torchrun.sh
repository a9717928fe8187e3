#!/usr/bin/env bash
# test_torchrun.sh — torchrun (Debian's python3-torch: python3 -m torch.distributed.run) as
# the launcher of `ddpprof worker`, 2 nodes x 2 processes on this host, in torchrun's default
# mode: its static rendezvous serves a TCPStore on MASTER_PORT and tells the workers so
# (TORCHELASTIC_USE_AGENT_STORE=True); rank 0 hosts ddpprof's store beside it and publishes
# the port there.  The job must be the one ddpprof's own launcher starts (2 nodes x 2 ranks,
# --comm gloo): world 4, every rank's trace in the one shared run directory, rank 0's
# meta.csv and metrics.csv (not a node leader's), and the same loss at every step.  Also:
# `ddpprof worker --master-port` wins over MASTER_PORT.  Skips (77) without torch.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
"$bin" --version | grep -q '^comms:.* gloo' ||
  { echo "skipped: this build has no gloo comm (libgloo-dev not found at configure time)"; exit 77; }
py=/usr/bin/python3
[ -x "$py" ] && "$py" -c 'import torch.distributed.run' 2>/dev/null ||
  { echo "skipped: torchrun (python3 -m torch.distributed.run, Debian's python3-torch) is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
args="--comm gloo --quiet --limit 240 --test-limit 48 --epochs 1 --threads 1 --timeout 60 --amp off --batch-size 6 --seed 3"
# the same loss at every step: loss column of two metrics.csv, within 1e-6 relative
same_losses() {
  paste -d, <(csv_col "$1" loss) <(csv_col "$2" loss) | awk -F, '{ n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * ($1 < 0 ? -$1 : $1)) bad++ }
    END { exit !(n == 10 && bad == 0) }'
}

# ddpprof's own launcher, 2 nodes on this host
port=$(free_port)
for r in 0 1; do
  timeout 120 "$bin" train --nnodes 2 --node-rank $r --nproc-per-node 2 --master-port "$port" \
    $args --out "$tmp/own$r" >"$tmp/own$r.log" 2>&1 &
done
wait
check own "$([ -f "$tmp/own0/metrics.csv" ] && [ -f "$tmp/own1/rank3.trace.csv" ]; echo $?)" \
  "ddpprof's own 2-node run failed: $(tail -n 3 "$tmp/own0.log" "$tmp/own1.log")"

# torchrun: 2 nodes x 2 processes, default (static) rendezvous on MASTER_PORT
port=$(free_port)
pids=""
for r in 0 1; do
  # Debian's torch 1.13 on Python 3.11 needs -r 2 -t 2 (its output redirection)
  timeout 180 "$py" -m torch.distributed.run --nnodes 2 --nproc_per_node 2 --node_rank $r \
    --master_addr 127.0.0.1 --master_port "$port" -r 2 -t 2 --no_python \
    "$bin" worker $args --out "$tmp/torchrun" >"$tmp/torchrun$r.log" 2>&1 &
  pids="$pids $!"
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
check torchrun-exit "$rc" "torchrun failed: $(grep -h ddpprof "$tmp"/torchrun*.log | tail -5)"
out="$tmp/torchrun"
check torchrun-world "$(grep -qx 'world_size,4' "$out/meta.csv" 2>/dev/null; echo $?)" "meta.csv world_size is not 4"
check torchrun-traces "$(ls "$out"/rank[0-3].trace.csv 2>/dev/null | wc -l | grep -qx 4; echo $?)" \
  "not 4 rank traces: $(ls "$out")"
check torchrun-shared-dir "$(grep -qx 'node_rank,0' "$out/meta.csv" && [ "$(wc -l <"$out/metrics.csv")" -eq 11 ]; echo $?)" \
  "the shared run directory's meta.csv/metrics.csv are not rank 0's alone"
check torchrun-hosts "$(grep -c '^host\.rank[0-3],' "$out/meta.csv" | grep -qx 4; echo $?)" "no host of every rank"
check torchrun-same-job "$(same_losses "$tmp/own0/metrics.csv" "$out/metrics.csv"; echo $?)" \
  "losses differ from ddpprof's own launch of the same job"

# worker: --master-port and --master-addr on the command line win over the environment
port=$(free_port)
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=192.0.2.1 MASTER_PORT=9 \
    timeout 60 "$bin" worker --master-addr 127.0.0.1 --master-port "$port" --quiet --limit 96 \
    --test-limit 16 --epochs 1 --threads 1 --timeout 20 --out "$tmp/override" >"$tmp/override$r.log" 2>&1 &
done
rc=0
for j in $(jobs -p); do wait "$j" || rc=1; done
check worker-master-override "$rc" "worker ignored --master-addr/--master-port: $(tail -n 2 "$tmp"/override*.log)"

check_done
