#!/usr/bin/env bash
# test_data_loss.sh — every loss of data is a failure, said in one line:
# 1. a full disk (RLIMIT_FSIZE: ulimit -f, SIGXFSZ ignored so writes fail with EFBIG)
#    while a trace is written: the run exits 1 naming the rank's trace and how many rows
#    were lost (it used to exit 0); the trace left behind ends in a whole row and parses;
#    on a 2-rank run each rank says so for its own file (or, when the traces' once-a-second
#    writes filled the disk first, the epoch's checkpoint says the disk is full); a disk that
#    fills at a metrics.csv row (16 KiB free on a tmpfs) says that row and also the trace
#    rows still buffered, which are lost with it (it used to count the metrics row alone);
# 2. the report of such a run warns that the rank's trace is truncated (it used to show
#    the rank as zeros without a word), as for a trace cut by hand;
# 3. a full disk while the report writes: one line, exit 1, and every output file is
#    whole or absent (temp file + rename), no temp file left;
# 4. --out reused: a non-empty run directory is refused (nothing touched); --overwrite
#    clears the old run's files (a stale rank1.trace.csv of a 2-rank run, the temporary of
#    a checkpoint writer killed before its rename) and keeps the checkpoint;
# 5. --out claimed: a second job given the --out of one that runs is refused at once,
#    naming the first, even while the first has written nothing yet (it is stopped as soon
#    as it has claimed the directory), and the first's run is its own (it used to be mixed
#    from both, 1 time in 8); two jobs with the default --out started in the same second
#    get a directory each (one used to be told to choose an --out it never gave).
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
command -v python3 >/dev/null || { echo "skip: python3 checks the files left behind"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
bad_err() { bad "$@"; sed 's/^/  | /' "$tmp/err" | head -20; } # a failure, with the command's stderr

# whole DIR: every *.csv parses with the same field count on every row and ends in a
# newline, every *.json loads; no temp file
whole() {
  python3 - "$1" <<'PY'
import csv, glob, json, os, sys
d = sys.argv[1]
bad = [f for f in os.listdir(d) if ".tmp." in f]
for f in glob.glob(os.path.join(d, "*.csv")):
    raw = open(f, "rb").read()
    rows = list(csv.reader(raw.decode().splitlines()))
    if not raw.endswith(b"\n") or not rows or any(len(r) != len(rows[0]) for r in rows):
        bad.append(f)
for f in glob.glob(os.path.join(d, "*.json")):
    try:
        json.load(open(f))
    except ValueError:
        bad.append(f)
print(" ".join(bad))
sys.exit(1 if bad else 0)
PY
}

common=(train --dataset synthetic --test-limit 16 --epochs 1 --quiet)

# 1. the trace outgrows a 160 KiB file limit (the checkpoint, 118 KB, fits): 500 steps
(
  ulimit -f 160
  trap '' XFSZ
  exec "$bin" "${common[@]}" --cpu 1 --limit 1000 --batch-size 2 --out "$tmp/full1"
) >/dev/null 2>"$tmp/err" </dev/null
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -qE "^ddpprof: $tmp/full1/rank0.trace.csv: [1-9][0-9]* trace row\(s\) lost \(first cause: write failed: File too large\)" "$tmp/err" &&
  whole "$tmp/full1" >/dev/null; then ok; else bad_err "1-rank trace on a full disk: exit $rc"; fi

# on 2 ranks (a file size limit would also stop the shm segment: a 320 KiB tmpfs, where
# root may mount one): the checkpoint fits, the traces written at the end do not
mkdir -p "$tmp/small"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=320k ddpprof-test "$tmp/small" 2>/dev/null; then
  trap 'umount "$tmp/small"; rm -rf "$tmp"' EXIT
  "$bin" "${common[@]}" --cpu 2 --mode ddp --limit 1200 --batch-size 2 --out "$tmp/small/run" \
    >/dev/null 2>"$tmp/err" </dev/null
  rc=$?
  if [ $rc -ne 0 ] && grep -qE "rank ([01]): (.*/run/rank\1.trace.csv: [1-9][0-9]* trace row\(s\) lost \(first cause: write failed: No space left on device\)|saving checkpoint: .*No space left on device)" "$tmp/err" &&
    whole "$tmp/small/run" >/dev/null; then ok; else bad_err "2-rank traces on a full disk: exit $rc"; fi
  # 1 rank, 16 KiB left (a page each for the --out claim's lock, meta.csv and the trace's
  # header): metrics.csv's rows fill it long before the trace's first flush
  mkdir -p "$tmp/tiny"
  if mount -t tmpfs -o size=128k ddpprof-test "$tmp/tiny" 2>/dev/null; then
    trap 'umount "$tmp/tiny"; umount "$tmp/small"; rm -rf "$tmp"' EXIT
    avail=$(df -B1 --output=avail "$tmp/tiny" | tail -n 1)
    head -c $((avail - 16384)) /dev/zero >"$tmp/tiny/filler"
    "$bin" "${common[@]}" --cpu 1 --limit 2000 --batch-size 2 --out "$tmp/tiny/run" \
      >/dev/null 2>"$tmp/err" </dev/null
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
      grep -qE "^ddpprof: $tmp/tiny/run: 1 row\(s\) of the run's files did not reach the disk \(first: metrics.csv: No space left on device\).*; $tmp/tiny/run/rank0.trace.csv: [1-9][0-9]* trace row\(s\) lost" "$tmp/err"; then
      ok
    else bad_err "a full disk at a metrics row: exit $rc"; fi
  fi
else
  echo "skip: 2 ranks on a full disk (not root, or no tmpfs mount here)"
fi

# 2. the report of that run says the trace is truncated
"$bin" report "$tmp/full1" --out "$tmp/rep1" >/dev/null 2>"$tmp/err" </dev/null
rc=$?
if [ $rc -eq 0 ] && grep -qE "rank 0's trace (ends at step [0-9]+ of 500|has no training step but the run took 500)" "$tmp/err"; then
  ok
else bad_err "report of a truncated trace: exit $rc"; fi

"$bin" "${common[@]}" --cpu 2 --mode ddp --limit 256 --batch-size 32 --out "$tmp/good" >/dev/null 2>"$tmp/err" </dev/null ||
  bad_err "a 2-rank run"
"$bin" report "$tmp/good" --out "$tmp/rep-good" >/dev/null 2>"$tmp/err" </dev/null
if [ $? -eq 0 ] && ! grep -q "truncated\|lost" "$tmp/err"; then ok; else bad_err "report of a whole run warns"; fi
# cut after step 1's first three rows (setup's step-0 rows, the initial broadcast, kept)
awk -F, 'NR == 1 || $2 == 0 || ($2 == 1 && ++n <= 3)' "$tmp/good/rank1.trace.csv" >"$tmp/cut" &&
  cp "$tmp/cut" "$tmp/good/rank1.trace.csv"
"$bin" report "$tmp/good" --out "$tmp/rep-cut" >/dev/null 2>"$tmp/err" </dev/null
if [ $? -eq 0 ] && grep -q "rank 1's trace ends at step 1 of 4: it stopped there" "$tmp/err" &&
  ! grep -q "rank 0's trace" "$tmp/err"; then ok; else bad_err "report of a trace cut by hand"; fi

# 3. the report on a full disk: 4 KiB is too small for report.html and the timeline
(
  ulimit -f 4
  trap '' XFSZ
  exec "$bin" report "$tmp/good" --out "$tmp/rep-full"
) >/dev/null 2>"$tmp/err" </dev/null
rc=$?
left=$(whole "$tmp/rep-full")
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -ge 1 ] &&
  grep -qE "^ddpprof: $tmp/rep-full/[a-z_.]+: write failed \(File too large\): check the disk$" "$tmp/err" &&
  [ -z "$left" ]; then ok; else bad_err "report on a full disk: exit $rc, not whole: $left"; fi

# 4. --out reused
mkdir -p "$tmp/reuse"
"$bin" "${common[@]}" --cpu 2 --mode ddp --amp off --limit 128 --batch-size 32 --out "$tmp/reuse" >/dev/null 2>"$tmp/err" </dev/null ||
  bad_err "first run into reuse/"
before=$(ls "$tmp/reuse" | sort | tr '\n' ' ')
"$bin" "${common[@]}" --cpu 1 --limit 64 --out "$tmp/reuse" >/dev/null 2>"$tmp/err" </dev/null
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -q "^ddpprof: --out $tmp/reuse is not empty (it holds [a-z0-9.]*): pass --overwrite" "$tmp/err" &&
  [ "$(ls "$tmp/reuse" | sort | tr '\n' ' ')" = "$before" ] &&
  grep -q '^world_size,2$' "$tmp/reuse/meta.csv"; then ok; else bad_err "reused --out: exit $rc"; fi
: >"$tmp/reuse/.checkpoint.safetensors.tmp-Ab12Cd" # a writer killed before its rename
"$bin" "${common[@]}" --cpu 1 --limit 64 --out "$tmp/reuse" --overwrite --resume "$tmp/reuse/checkpoint.safetensors" \
  --epochs 2 >/dev/null 2>"$tmp/err" </dev/null
rc=$?
"$bin" report "$tmp/reuse" >/dev/null 2>"$tmp/err2" </dev/null
if [ $rc -eq 0 ] && [ ! -e "$tmp/reuse/rank1.trace.csv" ] && grep -q '^world_size,1$' "$tmp/reuse/meta.csv" &&
  [ -s "$tmp/reuse/checkpoint.safetensors" ] && [ ! -e "$tmp/reuse/.checkpoint.safetensors.tmp-Ab12Cd" ] &&
  ! grep -q "rank" "$tmp/err2"; then ok; else
  bad_err "--overwrite: exit $rc, $(ls "$tmp/reuse" | tr '\n' ' ')"
fi

# 5. one --out, two jobs
main=(--cpu 1 --dataset synthetic --test-limit 16 --epochs 1 --batch-size 16 --quiet)
setsid "$bin" "${main[@]}" --limit 256 --out "$tmp/claim" >"$tmp/a.log" 2>&1 </dev/null &
a=$!
for i in $(seq 20000); do [ -d "$tmp/claim" ] && break; done
for i in $(seq 2000); do # the claim's lock holds its pid once taken (none before this fix)
  [ -s "$tmp/claim/.ddpprof-node0.lock" ] && break
done
kill -STOP -- -$a
t0=$(date +%s%N)
timeout 60 "$bin" "${main[@]}" --limit 128 --out "$tmp/claim" >/dev/null 2>"$tmp/err" </dev/null
rc=$?
dt_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
kill -CONT -- -$a
wait $a
rc_a=$?
if [ $rc -ne 0 ] && [ $dt_ms -lt 5000 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -q "^ddpprof: --out $tmp/claim is in use by another ddpprof job (pid $a): wait for it" "$tmp/err"; then
  ok
else bad_err "a second job on the --out of a running one: exit $rc after $dt_ms ms"; fi
steps() { awk -F, 'NR > 1 { s = s $1 " " } END { print s }' "$1"; }
want=$(seq -s ' ' 1 16)
if [ $rc_a -eq 0 ] && [ "$(steps "$tmp/claim/baseline/metrics.csv")" = "$want " ] &&
  [ "$(steps "$tmp/claim/ddp/metrics.csv")" = "$want " ] &&
  grep -qx 'train_samples,256' "$tmp/claim/baseline/meta.csv" &&
  grep -qx 'train_samples,256' "$tmp/claim/ddp/meta.csv"; then ok; else
  bad "the first job's run (exit $rc_a) is not its own alone: baseline steps '$(steps "$tmp/claim/baseline/metrics.csv")', $(grep train_samples "$tmp/claim/baseline/meta.csv"); $(tail -n 2 "$tmp/a.log")"
fi

# two default --outs in one second: started together at the start of a second
mkdir -p "$tmp/dflt"
while [ "$(date +%N | cut -c1)" -gt 1 ]; do sleep 0.01; done
for k in 1 2; do
  (cd "$tmp/dflt" && exec "$bin" train "${main[@]}" --limit 128) >"$tmp/d$k.log" 2>&1 </dev/null &
done
rc=0
for j in $(jobs -p); do wait "$j" || rc=1; done
dirs=$(ls "$tmp/dflt/results" 2>/dev/null | wc -l)
whole_runs=0
for d in "$tmp/dflt/results"/*; do
  [ "$(steps "$d/metrics.csv" 2>/dev/null)" = "$(seq -s ' ' 1 8) " ] && whole_runs=$((whole_runs + 1))
done
if [ $rc -eq 0 ] && [ "$dirs" -eq 2 ] && [ $whole_runs -eq 2 ]; then ok; else
  bad "two jobs with the default --out in one second: exits $rc, $dirs directories ($(ls "$tmp/dflt/results" | tr '\n' ' ')), $whole_runs whole: $(cat "$tmp/d1.log" "$tmp/d2.log" | head -3)"
fi

check_done
