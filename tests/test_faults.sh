#!/usr/bin/env bash
# test_faults.sh — faults injected into real DDP runs (2 CPU ranks, shm), as NCCL's and
# PyTorch's fault tests do.  After each: the exit status, the one-line summary, no process
# of the run left, no shm segment, no listening store port, every CSV left behind parses,
# and the checkpoint written before the fault still resumes.
#  1. --cpu 1000 on this machine: refused in under a second, nothing started;
#  2. SIGSTOP of rank 1: stopped within --timeout + 5 s, the summary names rank 1, the
#     collective and SIGSTOP (the time from the stop to the clean exit is printed); the
#     same for rank 3 of two nodes (each node's summary names it and its node);
#  3. SIGTERM, then SIGINT, to the launcher: 143 / 130, every rank stopped;
#  4. kill -9 of rank 0 while it writes a checkpoint (DDPPROF_FAULT_SAVE_PAUSE holds it
#     between the temp file and the rename): the previous checkpoint is intact;
#  5. a full disk during a checkpoint (a small tmpfs as root, else RLIMIT_FSIZE): one line
#     saying so, the previous checkpoint intact, no temp file left;
#  6. garbage, huge-length and silent clients on the store's port during the rendezvous:
#     the job trains;
#  7. SIGTERM, then kill -9, of the main job's process (DDP phase), and kill -9 during its
#     baseline: no process of the run left;
#  8. the job's progress bar on a terminal (script(1)'s pty).
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
mounted=""
cleanup() {
  [ -n "$mounted" ] && umount "$mounted" 2>/dev/null
  for p in $(pids_of "$tmp"); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
. "$(dirname "$0")/check.sh"
now() { date +%s.%N; }
elapsed() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.2f", a - b }'; }
less() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; } # float a < b
# pids of ddpprof processes whose command line mentions the marker (a run directory)
pids_of() {
  local f p
  for f in $(grep -l -a -F -- "$1" /proc/[0-9]*/cmdline 2>/dev/null); do
    p=${f#/proc/}; p=${p%/cmdline}
    case "$(tr '\0' '\n' <"$f" 2>/dev/null | head -1)" in */ddpprof) echo "$p" ;; esac
  done
}
rank_pid() { # rank_pid MARKER RANK
  for p in $(pids_of "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2"; then echo "$p"; return; fi
  done
}
env_of() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n "s/^$2=//p"; }
wait_for() { # wait_for SECONDS COMMAND...: until COMMAND succeeds; 0, or 1 on timeout
  local end; end=$(awk -v a="$(now)" -v s="$1" 'BEGIN { printf "%.3f", a + s }'); shift
  until "$@"; do less "$(now)" "$end" || return 1; sleep 0.05; done
}
steps_done() { [ -f "$1/metrics.csv" ] && [ "$(wc -l <"$1/metrics.csv")" -gt "$2" ]; }
listening() { # listening PORT: 0 when something listens on TCP port PORT
  local hex; hex=$(printf ':%04X' "$1")
  awk -v p="$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
gone() { [ -z "$(pids_of "$1")" ]; }
# no process, shm segment or listening port of the run is left (waits up to 3 s for them)
check_clean() { # check_clean NAME MARKER RANK0_PID PORT
  wait_for 3 gone "$2"
  check "$1-no-process" "$(gone "$2"; echo $?)" "processes left: $(pids_of "$2")"
  check "$1-no-shm" "$(! ls /dev/shm 2>/dev/null | grep -q "ddpprof-$3-"; echo $?)" \
    "shm segment of rank 0 (pid $3) left: $(ls /dev/shm | grep ddpprof)"
  check "$1-no-port" "$(! listening "$4"; echo $?)" "the store's port $4 still listens"
}
# every CSV in the directory parses: meta.csv 2 fields a row, metrics.csv the header's
# count of numeric fields, rank traces the header (its columns by name) and as many fields
# a row
check_csvs() { # check_csvs NAME DIR
  python3 - "$2" >"$tmp/csv.log" 2>&1 <<'PY'
import csv, glob, os, sys
bad = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.csv"))):
    rows = list(csv.reader(open(path, newline="")))
    name = os.path.basename(path)
    if name == "meta.csv":
        bad += [f"{name}:{i + 1}" for i, r in enumerate(rows) if len(r) != 2]
    elif name == "metrics.csv":
        bad += [f"{name}:{i + 1}" for i, r in enumerate(rows[1:]) if len(r) != len(rows[0]) or
                not all(x.replace(".", "").replace("-", "").replace("e", "").replace("+", "")
                        .replace("nan", "0").replace("inf", "0").isdigit() for x in r)]
    elif name.endswith(".trace.csv"):
        cols = ("rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream"
                .split(","))
        if not rows or not set(cols) <= set(rows[0]):
            bad.append(f"{name}: header")
            continue
        s, e = rows[0].index("start_ns"), rows[0].index("end_ns")
        bad += [f"{name}:{i + 2}" for i, r in enumerate(rows[1:]) if len(r) != len(rows[0]) or
                not r[s].isdigit() or not r[e].isdigit()]
print(" ".join(bad))
sys.exit(1 if bad else 0)
PY
  check "$1-csv" "$?" "malformed CSV rows in $2: $(head -c 300 "$tmp/csv.log")"
}
# the checkpoint resumes (a 1-epoch run from a checkpoint of epoch >= 1 loads it, trains
# at most the rest of epoch 1 on 64 images).  A checkpoint the 2-rank run took mid-epoch is
# refused by this 1-rank run only after every tensor and field of it was read and checked
# (the world size it records differs): that refusal, and nothing else, also counts as loaded.
check_loadable() { # check_loadable NAME CHECKPOINT
  local out="$tmp/load-$1" rc
  timeout 60 "$bin" train --cpu 1 --amp fp16 --resume "$2" --epochs 1 --limit 64 --test-limit 32 \
    --quiet --trace off --out "$out" >"$out.log" 2>&1 </dev/null
  rc=$?
  [ $rc -ne 0 ] && [ "$(wc -l <"$out.log")" -eq 1 ] &&
    grep -q "was taken mid-epoch .* with world size 2, now 1:" "$out.log" && rc=0
  check "$1-checkpoint-loads" "$rc" "$2 does not resume: $(tail -n 2 "$out.log")"
}
# a 2-rank run in the background: long enough to be stopped mid-training
start_run() { # start_run DIR LOG [options...]; sets run_pid
  local dir=$1 log=$2; shift 2
  "$bin" train --cpu 2 --epochs 20 --limit 20000 --test-limit 64 --threads 1 --quiet \
    --out "$dir" "$@" >"$log" 2>&1 </dev/null &
  run_pid=$!
}
# wait for the run's ranks and note rank 0's pid and the store port
find_ranks() { # find_ranks DIR; sets r0 r1 port
  local i
  r0="" r1="" port=""
  for i in $(seq 400); do
    r0=$(rank_pid "$1" 0) r1=$(rank_pid "$1" 1)
    [ -n "$r0" ] && port=$(env_of "$r0" MASTER_PORT)
    [ -n "$r0" ] && [ -n "$r1" ] && [ -n "$port" ] && return
    sleep 0.05
  done
  check "ranks-of-$(basename "$1")" 1 "the ranks of $1 did not appear within 20 s"
  port=${port:-0}
}
wait_bounded() { # wait_bounded PID SECONDS: its exit status, or 124 after killing it
  local end; end=$(awk -v a="$(now)" -v s="$2" 'BEGIN { printf "%.3f", a + s }')
  while kill -0 "$1" 2>/dev/null; do
    if ! less "$(now)" "$end"; then kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null; return 124; fi
    sleep 0.05
  done
  wait "$1" 2>/dev/null
}

# --- 1. more ranks than cores ---
t0=$(now)
"$bin" train --cpu 1000 --mode ddp --out "$tmp/absurd" >"$tmp/absurd.log" 2>&1 </dev/null
rc=$?
dt=$(elapsed "$t0")
check absurd-refused "$([ $rc -ne 0 ] && grep -q "1000 CPU ranks on $(nproc) core.*--oversubscribe" "$tmp/absurd.log"; echo $?)" \
  "exit $rc: $(cat "$tmp/absurd.log")"
check absurd-fast "$(less "$dt" 1; echo $?)" "the refusal took ${dt}s"
check absurd-nothing-started "$([ ! -e "$tmp/absurd" ] && ! grep -q '^\[rank' "$tmp/absurd.log"; echo $?)" \
  "something started: $(ls "$tmp/absurd" 2>&1 | head -3)"
"$bin" --cpu 1000 --out "$tmp/absurd-main" >"$tmp/absurd-main.log" 2>&1 </dev/null
rc=$?
check absurd-main-refused "$([ $rc -ne 0 ] && grep -q -- '--oversubscribe' "$tmp/absurd-main.log" &&
  [ ! -e "$tmp/absurd-main/baseline" ]; echo $?)" "main job: exit $rc: $(cat "$tmp/absurd-main.log")"

# --- 2. SIGSTOP of rank 1 ---
run="$tmp/stop"
start_run "$run" "$tmp/stop.log" --timeout 3 --checkpoint-every 20
launcher=$run_pid
find_ranks "$run"
wait_for 30 steps_done "$run" 45 # two checkpoints written
cp "$run/checkpoint.safetensors" "$tmp/stop-before.safetensors" 2>/dev/null
t0=$(now)
kill -STOP "$r1"
wait_bounded "$launcher" 30
rc=$?
dt=$(elapsed "$t0")
echo "SIGSTOP of rank 1 to a clean stop: ${dt} s (--timeout 3)"
check stop-exit "$([ $rc -eq 1 ]; echo $?)" "exit $rc (want 1)"
check stop-time "$(less "$dt" 8; echo $?)" "${dt}s from SIGSTOP to exit (limit --timeout 3 + 5 s)"
check stop-names "$(grep -qE '^ddpprof: rank 1 did not arrive in [a-z-]+ #[0-9]+ \(stopped by SIGSTOP\); rank 0 failed waiting for it' "$tmp/stop.log"; echo $?)" \
  "summary does not name rank 1, the collective and SIGSTOP: $(grep -v '^\[rank' "$tmp/stop.log" | tail -n 3)"
check_clean stop "$run" "$r0" "$port"
check_csvs stop "$run"
check_loadable stop "$run/checkpoint.safetensors"

# --- 2b. the same on two nodes (this host, gloo between them): rank 3 on node 1 stopped ---
if "$bin" --version | grep -q '^comms:.* gloo'; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  for r in 0 1; do
    "$bin" train --nnodes 2 --node-rank $r --nproc-per-node 2 --master-port "$port" --epochs 20 \
      --limit 20000 --test-limit 64 --threads 1 --quiet --timeout 3 --out "$tmp/node$r" \
      >"$tmp/node$r.log" 2>&1 </dev/null &
    node_pid[$r]=$!
  done
  victim=""
  for _ in $(seq 400); do victim=$(rank_pid "$tmp/node1" 3); [ -n "$victim" ] && break; sleep 0.05; done
  wait_for 30 steps_done "$tmp/node0" 5
  t0=$(now)
  kill -STOP "$victim"
  wait_bounded "${node_pid[0]}" 30
  rc0=$?
  wait_bounded "${node_pid[1]}" 30
  rc1=$?
  dt=$(elapsed "$t0")
  echo "SIGSTOP of rank 3 (node 1) to a clean stop of both nodes: ${dt} s (--timeout 3)"
  check nodes-exit "$([ $rc0 -eq 1 ] && [ $rc1 -eq 1 ]; echo $?)" "exit $rc0 and $rc1 (want 1 and 1)"
  check nodes-time "$(less "$dt" 8; echo $?)" "${dt}s from SIGSTOP to exit (limit --timeout 3 + 5 s)"
  for r in 0 1; do
    check "nodes-names-$r" "$(grep -qE '^ddpprof: the job failed: rank 3 \(node 1, host [^)]*\) did not arrive in [a-z-]+ #[0-9]+ \(stopped by SIGSTOP\); rank [0-2] \(node [01],' "$tmp/node$r.log"; echo $?)" \
      "node $r's summary does not name rank 3 on node 1: $(grep -v '^\[rank' "$tmp/node$r.log" | tail -n 3)"
  done
  wait_for 3 gone "$tmp/node"
  check nodes-no-process "$(gone "$tmp/node"; echo $?)" "processes left: $(pids_of "$tmp/node")"
  check nodes-no-port "$(! listening "$port"; echo $?)" "the agents' port $port still listens"
  check_csvs nodes0 "$tmp/node0"
  check_csvs nodes1 "$tmp/node1"
else
  echo "part 2b skipped: this build has no gloo comm"
fi

# --- 3. SIGTERM and SIGINT to the launcher ---
for sig in TERM INT; do
  run="$tmp/sig$sig"
  start_run "$run" "$tmp/sig$sig.log" --timeout 30 --checkpoint-every 10
  launcher=$run_pid
  find_ranks "$run"
  wait_for 30 steps_done "$run" 12
  t0=$(now)
  kill -$sig "$launcher"
  wait_bounded "$launcher" 15
  rc=$?
  echo "SIG$sig to the launcher to a clean stop: $(elapsed "$t0") s"
  want=$([ $sig = TERM ] && echo 143 || echo 130)
  check "sig$sig-exit" "$([ $rc -eq "$want" ]; echo $?)" "exit $rc (want $want)"
  check "sig$sig-message" "$(grep -q "^ddpprof: interrupted by SIG$sig; stopped 2 rank(s)" "$tmp/sig$sig.log"; echo $?)" \
    "$(tail -n 2 "$tmp/sig$sig.log")"
  check_clean "sig$sig" "$run" "$r0" "$port"
  check_csvs "sig$sig" "$run"
  check_loadable "sig$sig" "$run/checkpoint.safetensors"
done

# --- 4. kill -9 of rank 0 in the middle of a checkpoint write ---
run="$tmp/ckill"
DDPPROF_FAULT_SAVE_PAUSE=2:20000 start_run "$run" "$tmp/ckill.log" --timeout 30 --checkpoint-every 5
launcher=$run_pid
find_ranks "$run"
in_save() { [ -f "$run/checkpoint.safetensors" ] && ls -A "$run" | grep -q '^\.checkpoint\.safetensors\.tmp-'; }
wait_for 30 in_save
check ckill-in-save "$(in_save; echo $?)" "rank 0 never paused in its second checkpoint write"
sum_before=$(cksum <"$run/checkpoint.safetensors")
kill -9 "$r0"
wait_bounded "$launcher" 15
rc=$?
check ckill-exit "$([ $rc -eq 1 ] && grep -q '^ddpprof: rank 0 failed (killed by signal 9' "$tmp/ckill.log"; echo $?)" \
  "exit $rc: $(grep -v '^\[rank' "$tmp/ckill.log" | tail -n 2)"
check ckill-old-intact "$([ "$(cksum <"$run/checkpoint.safetensors")" = "$sum_before" ]; echo $?)" \
  "the previous checkpoint changed"
check_clean ckill "$run" "$r0" "$port"
check_csvs ckill "$run"
check_loadable ckill "$run/checkpoint.safetensors"

# --- 5. a full disk during a checkpoint ---
run="$tmp/full/run"
mkdir -p "$tmp/full"
size=$(stat -c %s "$tmp/stop-before.safetensors" 2>/dev/null || echo 118064)
kib=$(( size * 3 / 2 / 1024 + 16 ))
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=${kib}k tmpfs "$tmp/full" 2>/dev/null; then
  mounted="$tmp/full"
  how="tmpfs of $kib KiB"
  # room for one checkpoint and the CSVs, not for a second one beside it (temp + rename)
  start_run "$run" "$tmp/full.log" --timeout 30 --checkpoint-every 10 --trace off
  launcher=$run_pid
  find_ranks "$run"
  wait_bounded "$launcher" 60
  rc=$?
  check full-old-intact "$([ -s "$run/checkpoint.safetensors" ]; echo $?)" "no checkpoint survived"
  check_loadable full "$run/checkpoint.safetensors"
elif "$bin" --version | grep -q '^comms:.* gloo'; then
  # not root: every file larger than half a checkpoint is too large (the shm comm's segment
  # would be too, hence gloo; and so would a checkpoint to resume from, hence none)
  how="RLIMIT_FSIZE of $(( size / 2048 )) KiB"
  mkdir -p "$run"
  (trap '' XFSZ; ulimit -f $(( size / 2048 )); exec "$bin" train --cpu 2 --epochs 20 --limit 20000 \
    --test-limit 64 --threads 1 --quiet --timeout 30 --checkpoint-every 10 --trace off --comm gloo \
    --out "$run" >"$tmp/full.log" 2>&1 </dev/null) &
  launcher=$!
  find_ranks "$run"
  wait_bounded "$launcher" 60
  rc=$?
  check_loadable full "$tmp/stop-before.safetensors"
else
  how="skipped: neither root (a tmpfs) nor gloo (RLIMIT_FSIZE would refuse the shm segment)"
  run=""
fi
echo "full disk: $how"
if [ -n "$run" ]; then
check full-exit "$([ $rc -eq 1 ] && grep -qE 'write to temp file .*(No space left on device|File too large)' "$tmp/full.log"; echo $?)" \
  "exit $rc: $(grep -v '^\[rank' "$tmp/full.log" | tail -n 2)"
check full-no-temp "$(! ls -A "$run" | grep -q '\.tmp-'; echo $?)" "a temp file was left: $(ls -A "$run")"
check_clean full "$run" "$r0" "$port"
check_csvs full "$run"
fi
[ -n "$mounted" ] && umount "$mounted" && mounted=""

# --- 6. hostile clients on the store's port during the rendezvous ---
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 - "$port" "$tmp/hostile.done" >"$tmp/hostile.log" 2>&1 <<'PY' &
import os, socket, sys, time
port, done = int(sys.argv[1]), sys.argv[2]
junk = b"x" * 65536
kinds = [b"GET / HTTP/1.1\r\n\r\n", b"\x02\x00\x00\x00\x00\x10\x00",       # a 1 MiB SET
         b"\x01\x00\x00\xff\xff\xff\xff", b""]                               # 4 GiB hello, silence
socks, sent, end = [], 0, time.time() + 20
while time.time() < end and not os.path.exists(done):
    for k in kinds:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=0.2)
            s.setblocking(False)
            if k:
                s.send(k)
                s.send(junk)
            socks.append(s)
            sent += 1
        except OSError:
            pass
    socks = socks[-200:]
    time.sleep(0.01)
print(sent)
PY
hostile=$!
run="$tmp/hostile"
"$bin" train --cpu 2 --epochs 1 --limit 640 --test-limit 64 --threads 1 --timeout 20 \
  --master-port "$port" --out "$run" >"$tmp/hostile-run.log" 2>&1 </dev/null &
launcher=$!
find_ranks "$run"
wait_bounded "$launcher" 60
rc=$?
touch "$tmp/hostile.done"
wait "$hostile"
check hostile-trains "$([ $rc -eq 0 ] && grep -q 'Accuracy is' "$tmp/hostile-run.log"; echo $?)" \
  "exit $rc with hostile clients on the store's port: $(grep -v '^\[rank 0\] *$' "$tmp/hostile-run.log" | tail -n 3)"
check hostile-clients-ran "$([ "$(tail -n 1 "$tmp/hostile.log")" -gt 8 ] 2>/dev/null; echo $?)" \
  "the hostile clients did not run: $(tail -n 2 "$tmp/hostile.log")"
check_clean hostile "$run" "$r0" "$port"
check_csvs hostile "$run"

# --- 7. the main job's process alone: SIGTERM, kill -9 (DDP run), kill -9 (baseline) ---
# (bash's "Killed" notices of the killed main jobs go to /dev/null)
exec 3>&1
for how in TERM KILL BASE; do
  run="$tmp/main$how"
  mode=$([ $how = BASE ] && echo baseline || echo ddp)
  "$bin" --cpu 2 --mode "$mode" --epochs 20 --limit 20000 --test-limit 64 --threads 1 --quiet \
    --out "$run" >"$tmp/main$how.log" 2>&1 </dev/null &
  main=$!
  wait_for 30 steps_done "$run/$mode" 5
  check "main$how-started" "$(steps_done "$run/$mode" 5; echo $?)" "the $mode run did not start"
  t0=$(now)
  kill -$([ $how = TERM ] && echo TERM || echo KILL) "$main"
  wait_bounded "$main" 15
  rc=$?
  if [ $how = TERM ]; then
    check mainTERM-exit "$([ $rc -eq 143 ]; echo $?)" "exit $rc (want 143): $(tail -n 2 "$tmp/mainTERM.log")"
  fi
  wait_for 10 gone "$run"
  echo "main job ($how, $mode run): every process gone $(elapsed "$t0") s after the signal" >&3
  check "main$how-no-orphans" "$(gone "$run"; echo $?)" "left running after the main job: $(pids_of "$run")"
  check_csvs "main$how" "$run/$mode"
done 2>/dev/null

# --- 8. the job's progress bar on a terminal ---
if command -v script >/dev/null; then
  run="$tmp/bar"
  timeout 60 script -qec "'$bin' train --cpu 2 --epochs 1 --limit 1280 --test-limit 64 --threads 1 --out '$run'" \
    /dev/null >"$tmp/bar.log" 2>&1 </dev/null
  check bar-drawn "$(grep -aq 'epoch 1/1 \[#*\] 100% 1280/1280 images, loss' "$tmp/bar.log"; echo $?)" \
    "no progress bar on the terminal: $(tr '\r' '\n' <"$tmp/bar.log" | tail -n 4)"
  check bar-lines-kept "$(grep -aq '\[rank 0\] Accuracy is' "$tmp/bar.log"; echo $?)" "the ranks' lines were lost"
else
  echo "part 8 skipped: no script(1)"
fi

check_done
