#!/usr/bin/env bash
# test_mpirun.sh — mpirun (Debian's openmpi-bin) as the launcher of `ddpprof worker`: 4 ranks
# from OMPI_COMM_WORLD_*, MASTER_ADDR/MASTER_PORT passed with -x, --comm gloo; the job must be
# the one ddpprof's own launcher starts (4 ranks, --comm gloo): world 4, every rank's trace,
# the same loss at every step.  As root mpirun needs --allow-run-as-root, and on 2 cores
# --oversubscribe.  Skips (77) without mpirun.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
"$bin" --version | grep -q '^comms:.* gloo' ||
  { echo "skipped: this build has no gloo comm (libgloo-dev not found at configure time)"; exit 77; }
command -v mpirun >/dev/null || { echo "skipped: mpirun (Debian's openmpi-bin) is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
args="--comm gloo --quiet --limit 240 --test-limit 48 --epochs 1 --threads 1 --timeout 60 --amp off --batch-size 6 --seed 3"
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)

timeout 120 "$bin" train --cpu 4 --oversubscribe $args --out "$tmp/own" >"$tmp/own.log" 2>&1
check own "$?" "ddpprof's own 4-rank run failed: $(tail -n 3 "$tmp/own.log")"

port=$(free_port)
timeout 180 mpirun "${root[@]}" --oversubscribe -np 4 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
  "$bin" worker $args --out "$tmp/mpirun" >"$tmp/mpirun.log" 2>&1
check mpirun-exit "$?" "mpirun failed: $(tail -n 5 "$tmp/mpirun.log")"
out="$tmp/mpirun"
check mpirun-world "$(grep -qx 'world_size,4' "$out/meta.csv" 2>/dev/null; echo $?)" "meta.csv world_size is not 4"
check mpirun-traces "$(ls "$out"/rank[0-3].trace.csv 2>/dev/null | wc -l | grep -qx 4; echo $?)" \
  "not 4 rank traces: $(ls "$out" 2>&1)"
check mpirun-same-job "$(paste -d, <(csv_col "$tmp/own/metrics.csv" loss) <(csv_col "$out/metrics.csv" loss) | awk -F, '{ n++;
    d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * ($1 < 0 ? -$1 : $1)) bad++ } END { exit !(n == 10 && bad == 0) }'; echo $?)" \
  "losses differ from ddpprof's own launch of the same job"

check_done
