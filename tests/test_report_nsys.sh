#!/usr/bin/env bash
# test_report_nsys.sh — `ddpprof report` reads Nsight Systems reports (report/import_nsys.c):
#   1. tests/fixtures/nsys/ddp-2022.4: a real nsys 2022.4 (Debian's, CPU-only) SQLite export
#      of a 2-rank CPU ddpprof run (4 steps, made by make_nsys_fixture.sh): ranks 0 and 1
#      from the file names, format nsys, host from TARGET_INFO_SYSTEM_ENV, the ddpprof
#      domain's phases (3 steps after the warm-up: step, data, forward, backward, optimizer,
#      allreduce 3 each), one bucket with 6 calls (3 steps x 2 ranks); the rank from a
#      name NAME.N as well;
#   2. the current documented schema (make_current_schema.py, generated here: a PyTorch DDP
#      job of two processes in one file beside its launcher's, with kernels, memcpy/memset,
#      runtime launches and NCCL's domain): one rank per training process, PyTorch's range names as phases, the all-reduce
#      bucket's bytes from NCCL's payload (4096), device cuda, kernels attributed to phases;
#   3. bad input, one clear line and a non-zero exit each: an SQLite database without
#      NVTX_EVENTS, one whose NVTX_EVENTS lacks a column (named), a file that is not SQLite,
#      a .nsys-rep without nsys ($NSYS unset, none on PATH: how to export).
# Skips (77) when this ddpprof was built without SQLite (libsqlite3-dev), after checking it
# says so.
set -u
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${DDPPROF_BUILD_DIR:-$src/build}
bin=${DDPPROF:-$build/ddpprof}
. "$src/tests/csvcol.sh"
fix=$src/tests/fixtures/nsys
work=$(mktemp -d "${TMPDIR:-/tmp}/ddpprof-test-report-nsys.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
expect() { # WHAT GOT WANT
  if [ "$2" = "$3" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1: '$2', want '$3'"; fi
}
contains() { # WHAT FILE TEXT
  if grep -qF -- "$3" "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1: no '$3' in: $(head -c 400 "$2")"; fi
}

"$bin" report "$fix/ddp-2022.4/rank0.sqlite" --out "$work/r0" >"$work/probe.log" 2>&1
if grep -q "built without SQLite" "$work/probe.log"; then
  contains no-sqlite-line "$work/probe.log" "install libsqlite3-dev and rebuild"
  echo "skipped: this ddpprof was built without SQLite (libsqlite3-dev): $(tail -n 1 "$work/probe.log")"
  exit 77
fi

# 1. nsys 2022.4's export of a ddpprof run
out=$work/fx
"$bin" report "$fix/ddp-2022.4" --out "$out" >"$work/fx.log" 2>&1
expect "2022.4 report exit" "$?" 0
expect "2022.4 ranks" "$(csv_col "$out/ranks.csv" rank | tr '\n' ' ')" "0 1 "
expect "2022.4 format" "$(csv_col "$out/ranks.csv" format | sort -u)" nsys
expect "2022.4 host" "$(csv_col "$out/ranks.csv" host | sort -u)" fixturehost
expect "2022.4 steps" "$(csv_col "$out/ranks.csv" steps | tr '\n' ' ')" "3 3 "
for r in 0 1; do
  for ph in step data forward backward optimizer allreduce; do
    expect "2022.4 rank $r $ph count" "$(csv_col "$out/phases.csv" count rank=$r phase=$ph)" 3
  done
done
expect "2022.4 buckets" "$(csv_col "$out/buckets.csv" bucket | tr '\n' ' ')" "0 "
expect "2022.4 bucket calls" "$(csv_col "$out/buckets.csv" count)" 6
expect "2022.4 device" "$(csv_col "$out/speedup.csv" device)" cpu

# the rank from nsys -o NAME.%q{RANK}'s names: the file's, not its place in the list
mkdir -p "$work/named"
cp "$fix/ddp-2022.4/rank0.sqlite" "$work/named/prof.1.sqlite"
cp "$fix/ddp-2022.4/rank1.sqlite" "$work/named/prof.0.sqlite"
"$bin" report "$work/named/prof.1.sqlite" "$work/named/prof.0.sqlite" --out "$work/named/out" \
  >"$work/named.log" 2>&1
expect "NAME.N report exit" "$?" 0
expect "NAME.N rank 1's file" "$(csv_col "$work/named/out/ranks.csv" source rank=1)" "$work/named/prof.1.sqlite"

# 2. the current schema: two processes in one file, kernels, NCCL's payload
db=$work/torchrun.sqlite
python3 "$fix/make_current_schema.py" "$db"
out=$work/cur
"$bin" report "$db" --out "$out" >"$work/cur.log" 2>&1
expect "current report exit" "$?" 0
contains "current one rank per process" "$work/cur.log" "2 training processes"
expect "current ranks" "$(csv_col "$out/ranks.csv" rank | tr '\n' ' ')" "0 1 "
expect "current host" "$(csv_col "$out/ranks.csv" host | sort -u)" gpuhost
expect "current steps" "$(csv_col "$out/ranks.csv" steps | tr '\n' ' ')" "4 4 "
for ph in step data forward backward optimizer allreduce; do
  expect "current rank 1 $ph count" "$(csv_col "$out/phases.csv" count rank=1 phase=$ph)" 4
done
expect "current all-reduce bytes" "$(csv_col "$out/buckets.csv" bytes)" 4096
expect "current bucket calls" "$(csv_col "$out/buckets.csv" count)" 8
expect "current device" "$(csv_col "$out/speedup.csv" device)" cuda
# kernels by phase: forward 2 ms + backward 1.8 ms per step, 4 steps; NCCL 0.8 ms per step
expect "current kernel compute" "$(csv_col "$out/overlap.csv" k_compute_ms rank=0)" 14.800
expect "current kernel comm" "$(csv_col "$out/overlap.csv" k_comm_ms rank=0)" 3.200

# 3. bad input
bad() { # WHAT WANT-TEXT FILE [env...]
  local what=$1 want=$2 file=$3
  shift 3
  env "$@" "$bin" report "$file" --out "$work/bad" >"$work/bad.log" 2>&1
  local rc=$?
  expect "$what exit" "$([ $rc -ne 0 ] && echo nonzero || echo 0)" nonzero
  expect "$what one line" "$(grep -c . "$work/bad.log")" 1
  contains "$what says" "$work/bad.log" "$want"
}
python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('CREATE TABLE StringIds (id INTEGER, value TEXT)')" "$work/no-nvtx.sqlite"
bad "no NVTX_EVENTS" "no table NVTX_EVENTS" "$work/no-nvtx.sqlite"
python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('CREATE TABLE NVTX_EVENTS (start INTEGER, \"end\" INTEGER, eventType INTEGER, text TEXT)')" "$work/old.sqlite"
bad "missing column" "table NVTX_EVENTS has no column 'globalTid'" "$work/old.sqlite"
echo "not a database, but long enough to be read" >"$work/junk.sqlite"
bad "not SQLite" "not an SQLite database" "$work/junk.sqlite"
cp "$fix/ddp-2022.4/rank0.sqlite" "$work/ddp.rank0.nsys-rep" # a report: only its name matters here
bad "nsys-rep without nsys" "nsys export --type sqlite -o $work/ddp.rank0.sqlite $work/ddp.rank0.nsys-rep" \
  "$work/ddp.rank0.nsys-rep" -u NSYS PATH=/nonexistent

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
