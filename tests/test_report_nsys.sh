#!/usr/bin/env bash
# test_report_nsys.sh — `ddpprof report` reads Nsight Systems reports
# (report/input/import_nsys.c):
#   1. tests/fixtures/nsys/ddp-2022.4: real nsys 2022.4 (Debian's, CPU-only) SQLite exports
#      of a ddpprof main job on 2 CPU ranks (make_nsys_fixture.sh; NVTX contract 2,
#      probes/nvtx.h), named as scripts/nsys-profile names them: the directory is two runs,
#      baseline (8 steps) and ddp (3 steps after the warm-up each of step, data, forward,
#      backward, optimizer, allreduce; eval, comm.allreduce and the other collectives with
#      their bytes; one bucket of 116136 B, 6 calls), with images from forward's payloads and
#      the speedup; ranks and world sizes from ddpprof's rank marks, over the file names;
#      ddp-2022.4-nvtx1, made before contract 2: ranks from the file names (rankN, NAME.N),
#      no bucket bytes; cloverleaf-2024.5 (trim_cloverleaf.sh): a real export of nsys 2024.5
#      (schema 3.13.2) without NVTX: kernels, the rank from the recorded SLURM_PROCID;
#   2. the current documented schema (make_current_schema.py, generated here: a PyTorch DDP
#      job of two processes in one file beside its launcher's, with kernels, memcpy/memset,
#      runtime launches and NCCL's domain): one rank per training process, PyTorch's range names as phases, the all-reduce
#      bucket's bytes from NCCL's payload (4096), device cuda, kernels attributed to phases;
#   3. bad input, one clear line and a non-zero exit each: an SQLite database without
#      NVTX_EVENTS, one whose NVTX_EVENTS lacks a column (named), a file that is not SQLite,
#      a .nsys-rep without nsys ($NSYS unset, none on PATH: how to export);
#   4. an export is only read: StringIds a recursive VIEW (the report spun forever) is
#      refused, naming it, within seconds; an export in WAL journal mode is read with no
#      -wal or -shm file appearing beside it (opened read-only and immutable), to the same
#      tables as the same export in its own mode.
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
. "$(dirname "$0")/check.sh"
contains() { # WHAT FILE TEXT
  if grep -qF -- "$3" "$2"; then ok; else bad "$1: no '$3' in: $(head -c 400 "$2")"; fi
}

"$bin" report "$fix/ddp-2022.4/ddp.rank0.sqlite" --out "$work/r0" >"$work/probe.log" 2>&1
if grep -q "built without SQLite" "$work/probe.log"; then
  contains no-sqlite-line "$work/probe.log" "install libsqlite3-dev and rebuild"
  echo "skipped: this ddpprof was built without SQLite (libsqlite3-dev): $(tail -n 1 "$work/probe.log")"
  exit 77
fi

# 1. nsys 2022.4's exports of a ddpprof main job (NVTX contract 2), as scripts/nsys-profile
# names them: the directory is two runs, baseline and ddp, with the speedup between them
out=$work/fx
"$bin" report "$fix/ddp-2022.4" --out "$out" >"$work/fx.log" 2>&1
check_eq "2022.4 report exit" "$?" 0
check_eq "2022.4 runs" "$(csv_col "$out/ranks.csv" run | tr '\n' ' ')" "baseline ddp ddp "
check_eq "2022.4 ranks" "$(csv_col "$out/ranks.csv" rank run=ddp | tr '\n' ' ')" "0 1 "
check_eq "2022.4 format" "$(csv_col "$out/ranks.csv" format | sort -u)" nsys
check_eq "2022.4 host" "$(csv_col "$out/ranks.csv" host | sort -u)" fixturehost
check_eq "2022.4 steps" "$(csv_col "$out/ranks.csv" steps | tr '\n' ' ')" "8 3 3 "
for r in 0 1; do
  for ph in step data forward backward optimizer allreduce; do
    check_eq "2022.4 rank $r $ph count" "$(csv_col "$out/phases.csv" count run=ddp rank=$r phase=$ph)" 3
  done
  # what the NVTX contract 1 left out: eval, the collectives that are not buckets, bytes
  check_eq "2022.4 rank $r eval count" "$(csv_col "$out/phases.csv" count run=ddp rank=$r phase=eval)" 1
  check_eq "2022.4 rank $r comm.allreduce count" "$(csv_col "$out/phases.csv" count run=ddp rank=$r phase=comm.allreduce)" 12
  check_eq "2022.4 rank $r comm.allreduce bytes" "$(csv_col "$out/phases.csv" bytes run=ddp rank=$r phase=comm.allreduce)" 1200
  check_eq "2022.4 rank $r comm.broadcast bytes" "$(csv_col "$out/phases.csv" bytes run=ddp rank=$r phase=comm.broadcast)" 116536
  check_eq "2022.4 rank $r comm.allgather bytes" "$(csv_col "$out/phases.csv" bytes run=ddp rank=$r phase=comm.allgather)" 2352
done
check_eq "2022.4 buckets" "$(csv_col "$out/buckets.csv" bucket | tr '\n' ' ')" "0 "
check_eq "2022.4 bucket calls" "$(csv_col "$out/buckets.csv" count)" 6
check_eq "2022.4 bucket bytes (ConvNet: 29034 fp32 gradients)" "$(csv_col "$out/buckets.csv" bytes)" 116136
check_eq "2022.4 device" "$(csv_col "$out/speedup.csv" device | sort -u)" cpu
check_eq "2022.4 world sizes (rank marks)" "$(csv_col "$out/speedup.csv" world_size | tr '\n' ' ')" "1 2 "
check_eq "2022.4 images (forward's payloads)" "$(csv_col "$out/speedup.csv" images | tr '\n' ' ')" "256 256 "
check_eq "2022.4 baseline speedup" "$(csv_col "$out/speedup.csv" speedup run=baseline)" 1.000
check_eq "2022.4 ddp has a speedup" "$(csv_col "$out/speedup.csv" speedup run=ddp | grep -cE '^[0-9]+\.[0-9]{3}$')" 1

# the DDP run's files by name: one run
"$bin" report "$fix/ddp-2022.4/ddp.rank0.sqlite" "$fix/ddp-2022.4/ddp.rank1.sqlite" --out "$work/fxd" \
  >"$work/fxd.log" 2>&1
check_eq "2022.4 ddp files exit" "$?" 0
check_eq "2022.4 ddp files ranks" "$(csv_col "$work/fxd/ranks.csv" rank | tr '\n' ' ')" "0 1 "

# the rank from ddpprof's rank mark, not the file name (nsys -o NAME.%q{RANK}'s names lie here)
mkdir -p "$work/named"
cp "$fix/ddp-2022.4/ddp.rank1.sqlite" "$work/named/prof.0.sqlite"
cp "$fix/ddp-2022.4/ddp.rank0.sqlite" "$work/named/prof.1.sqlite"
"$bin" report "$work/named/prof.0.sqlite" "$work/named/prof.1.sqlite" --out "$work/named/out" \
  >"$work/named.log" 2>&1
check_eq "rank mark exit" "$?" 0
check_eq "rank mark: rank 1's file" "$(csv_col "$work/named/out/ranks.csv" source rank=1)" "$work/named/prof.0.sqlite"

# 1b. the same made before NVTX contract 2 (every payload a step, no rank mark): the rank
# from the file name (rankN, NAME.N), bucket bytes unknown, no eval or comm.allreduce
out=$work/fx1
"$bin" report "$fix/ddp-2022.4-nvtx1" --out "$out" >"$work/fx1.log" 2>&1
check_eq "nvtx1 report exit" "$?" 0
check_eq "nvtx1 ranks" "$(csv_col "$out/ranks.csv" rank | tr '\n' ' ')" "0 1 "
check_eq "nvtx1 rank 0 step count" "$(csv_col "$out/phases.csv" count rank=0 phase=step)" 3
check_eq "nvtx1 bucket calls" "$(csv_col "$out/buckets.csv" count)" 6
check_eq "nvtx1 bucket bytes unknown" "$(csv_col "$out/buckets.csv" bytes)" ""
cp "$fix/ddp-2022.4-nvtx1/rank0.sqlite" "$work/named/old.1.sqlite"
cp "$fix/ddp-2022.4-nvtx1/rank1.sqlite" "$work/named/old.0.sqlite"
"$bin" report "$work/named/old.1.sqlite" "$work/named/old.0.sqlite" --out "$work/named/out1" \
  >"$work/named1.log" 2>&1
check_eq "NAME.N report exit" "$?" 0
check_eq "NAME.N rank 1's file" "$(csv_col "$work/named/out1/ranks.csv" source rank=1)" "$work/named/old.1.sqlite"

# 1c. a real export of a recent schema (nsys 2024.5, schema 3.13.2; trim_cloverleaf.sh): no
# NVTX, CUPTI kernels/memcpys/runtime; the rank from the recorded environment (SLURM_PROCID=0),
# over the file name's
cp "$fix/cloverleaf-2024.5/cloverleaf.sqlite" "$work/cloverleaf.rank5.sqlite"
out=$work/clover
"$bin" report "$work/cloverleaf.rank5.sqlite" --out "$out" >"$work/clover.log" 2>&1
check_eq "2024.5 report exit" "$?" 0
contains "2024.5 says it has no NVTX" "$work/clover.log" "no NVTX ranges (no table NVTX_EVENTS)"
check_eq "2024.5 rank from SLURM_PROCID" "$(csv_col "$out/ranks.csv" rank)" 0
check_eq "2024.5 host" "$(csv_col "$out/ranks.csv" host)" nid008553
check_eq "2024.5 device" "$(csv_col "$out/speedup.csv" device)" cuda
# the kernels' union and the step from the first to the last activity (values of this file:
# sqlite3 cloverleaf.sqlite 'SELECT ...' gives the same 1312 kernels)
check_eq "2024.5 kernel compute" "$(csv_col "$out/overlap.csv" k_compute_ms)" 294.405
check_eq "2024.5 step" "$(csv_col "$out/phases.csv" total_ms phase=step)" 342.408

# 2. the current schema: two processes in one file, kernels, NCCL's payload
db=$work/torchrun.sqlite
python3 "$fix/make_current_schema.py" "$db"
out=$work/cur
"$bin" report "$db" --out "$out" >"$work/cur.log" 2>&1
check_eq "current report exit" "$?" 0
contains "current one rank per process" "$work/cur.log" "2 training processes"
check_eq "current ranks" "$(csv_col "$out/ranks.csv" rank | tr '\n' ' ')" "0 1 "
check_eq "current host" "$(csv_col "$out/ranks.csv" host | sort -u)" gpuhost
check_eq "current steps" "$(csv_col "$out/ranks.csv" steps | tr '\n' ' ')" "4 4 "
for ph in step data forward backward optimizer allreduce; do
  check_eq "current rank 1 $ph count" "$(csv_col "$out/phases.csv" count rank=1 phase=$ph)" 4
done
check_eq "current all-reduce bytes" "$(csv_col "$out/buckets.csv" bytes)" 4096
check_eq "current bucket calls" "$(csv_col "$out/buckets.csv" count)" 8
check_eq "current device" "$(csv_col "$out/speedup.csv" device)" cuda
# kernels by phase: forward 2 ms + backward 1.8 ms per step, 4 steps; NCCL 0.8 ms per step
check_eq "current kernel compute" "$(csv_col "$out/overlap.csv" k_compute_ms rank=0)" 14.800
check_eq "current kernel comm" "$(csv_col "$out/overlap.csv" k_comm_ms rank=0)" 3.200

# 3. bad input
bad_input() { # WHAT WANT-TEXT FILE [env...]
  local what=$1 want=$2 file=$3
  shift 3
  env "$@" "$bin" report "$file" --out "$work/bad" >"$work/bad.log" 2>&1
  local rc=$?
  check_eq "$what exit" "$([ $rc -ne 0 ] && echo nonzero || echo 0)" nonzero
  check_eq "$what one line" "$(grep -c . "$work/bad.log")" 1
  contains "$what says" "$work/bad.log" "$want"
}
python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('CREATE TABLE StringIds (id INTEGER, value TEXT)')" "$work/no-nvtx.sqlite"
bad_input "no NVTX_EVENTS" "no table NVTX_EVENTS" "$work/no-nvtx.sqlite"
python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('CREATE TABLE NVTX_EVENTS (start INTEGER, \"end\" INTEGER, eventType INTEGER, text TEXT)')" "$work/old.sqlite"
bad_input "missing column" "table NVTX_EVENTS has no column 'globalTid'" "$work/old.sqlite"
echo "not a database, but long enough to be read" >"$work/junk.sqlite"
bad_input "not SQLite" "not an SQLite database" "$work/junk.sqlite"
cp "$fix/ddp-2022.4/ddp.rank0.sqlite" "$work/ddp.rank0.nsys-rep" # a report: only its name matters here
bad_input "nsys-rep without nsys" "nsys export --type sqlite -o $work/ddp.rank0.sqlite $work/ddp.rank0.nsys-rep" \
  "$work/ddp.rank0.nsys-rep" -u NSYS PATH=/nonexistent

# 4. only tables, only read
cp "$fix/ddp-2022.4/ddp.rank0.sqlite" "$work/view.sqlite"
python3 - "$work/view.sqlite" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.executescript("""ALTER TABLE StringIds RENAME TO StringIds0;
CREATE VIEW StringIds AS WITH RECURSIVE r(id, value) AS (SELECT 0, 'x' UNION ALL
  SELECT id + 1, value FROM r) SELECT id, value FROM r;""")
c.close()
PY
bad_input "recursive view" "StringIds is a view, not a table" "$work/view.sqlite" timeout 30
mkdir -p "$work/wal"
cp "$fix/ddp-2022.4/ddp.rank0.sqlite" "$work/wal/ddp.rank0.sqlite"
python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode=wal'); c.close()" "$work/wal/ddp.rank0.sqlite"
check_eq "WAL mode set" "$(python3 -c "import sys; print(open(sys.argv[1], 'rb').read(20)[18:20].hex())" "$work/wal/ddp.rank0.sqlite")" 0202
"$bin" report "$work/wal/ddp.rank0.sqlite" --out "$work/wal-out" >/dev/null 2>"$work/wal.log"
check "WAL export read" $? "$(tail -n 2 "$work/wal.log")"
check_eq "no -wal/-shm beside the export" "$(ls "$work/wal")" ddp.rank0.sqlite
"$bin" report "$fix/ddp-2022.4/ddp.rank0.sqlite" --out "$work/plain-out" >/dev/null 2>&1
check_run "WAL export: the same phases.csv as the export itself" cmp -s "$work/wal-out/phases.csv" "$work/plain-out/phases.csv"

check_done
