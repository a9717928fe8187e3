#!/usr/bin/env bash
# test_run_line.sh — `ddpprof train` (one process or a launcher of ranks) and `ddpprof
# worker` (rank 0, started by hand as torchrun would) end a run that succeeded with one
# line saying where it was written and the `ddpprof report` command for it; that command,
# run as printed (a directory with a space is quoted), makes the tables.  --quiet omits it.
# `ddpprof report` whose stdout fails (/dev/full) exits non-zero with one line; it removes
# the temp files of an earlier report that was killed.
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
tiny=(--dataset synthetic --limit 16 --test-limit 8 --epochs 1 --batch-size 8 --trace full)

# check_line NAME DIR: the last stdout line names DIR and a report command that works
check_line() {
  local line cmd
  line=$(grep '^ddpprof: run written to ' "$tmp/out" | tail -n 1)
  cmd=${line#*its tables: ddpprof }
  if [ -n "$line" ] && [ "$line" != "$cmd" ] && (cd "$tmp" && eval "\"\$bin\" $cmd" >"$tmp/rep" 2>&1) &&
    [ -s "$2/phases.csv" ]; then
    ok
  else
    bad "$1: line '$line'; report: $(tail -n 2 "$tmp/rep" 2>/dev/null)"
  fi
}

"$bin" train --cpu 1 "${tiny[@]}" --out "$tmp/one rank" >"$tmp/out" 2>"$tmp/err" </dev/null ||
  echo "train --cpu 1: $(cat "$tmp/err")"
check_line train-one "$tmp/one rank"
"$bin" train --cpu 2 "${tiny[@]}" --out "$tmp/two" >"$tmp/out" 2>"$tmp/err" </dev/null ||
  echo "train --cpu 2: $(cat "$tmp/err")"
check_line train-two "$tmp/two"
[ "$(grep -c '^ddpprof: run written to ' "$tmp/out")" -eq 1 ] && ok ||
  bad "train-two: not one line: $(cat "$tmp/out")"
port=$((20000 + RANDOM % 20000))
MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 \
  timeout 60 "$bin" worker "${tiny[@]}" --out "$tmp/worker" >"$tmp/out" 2>"$tmp/err" </dev/null ||
  echo "worker: $(cat "$tmp/err")"
check_line worker "$tmp/worker"
"$bin" train --cpu 1 "${tiny[@]}" --quiet --out "$tmp/quiet" >"$tmp/out" 2>"$tmp/err" </dev/null
if [ -s "$tmp/out" ]; then bad "quiet: $(cat "$tmp/out")"; else ok; fi

# the report to a stdout that takes nothing (/dev/full): one line and a failed exit, not 0;
# the tables in the directory stay whole
if [ -w /dev/full ]; then
  "$bin" report "$tmp/two" >/dev/full 2>"$tmp/err"
  rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "writing the report to stdout failed" "$tmp/err" &&
    [ -s "$tmp/two/phases.csv" ]; then
    ok
  else
    bad "report >/dev/full: exit $rc: $(cat "$tmp/err")"
  fi
fi

# an interrupted report's temp files (NAME.tmp.PID of a process that is gone) go with the
# next report that writes NAME; a live process's temp file stays
sleep 0 &
gone=$!
wait "$gone"
if ! kill -0 "$gone" 2>/dev/null; then
  echo partial >"$tmp/two/phases.csv.tmp.$gone"
  echo partial >"$tmp/two/timeline.json.tmp.$gone"
  echo mine >"$tmp/two/phases.csv.tmp.$$"
  "$bin" report "$tmp/two" >/dev/null 2>"$tmp/err"
  if [ ! -e "$tmp/two/phases.csv.tmp.$gone" ] && [ ! -e "$tmp/two/timeline.json.tmp.$gone" ] &&
    [ -e "$tmp/two/phases.csv.tmp.$$" ]; then
    ok
  else
    bad "stale temp files: $(ls "$tmp/two" | grep '\.tmp\.')"
  fi
  rm -f "$tmp/two/phases.csv.tmp.$$"
fi

check_done
