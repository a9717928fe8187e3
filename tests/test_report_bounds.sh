#!/usr/bin/env bash
# test_report_bounds.sh — the report's inputs are bounded by what they hold, not by the
# values they name (issue 35, "Bounded parsing"): a trace row of step 2,000,000,000 and a
# meta.csv that says 100,000,000 buckets are reported in the memory of a few rows (they
# took 15.6 GB and 8.6 GB, allocated by the highest step and bucket number).
set -u
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${DDPPROF_BUILD_DIR:-$src/build}
bin=${DDPPROF:-$build/ddpprof}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
# a sanitizer's runtime reserves terabytes of address space: no ulimit -v there (the run
# itself is still checked, and a sanitized build would take minutes at 15 GB)
sanitized=0
if grep -qE '^DDPPROF_SANITIZE:[A-Z]*=.+' "$build/CMakeCache.txt" 2>/dev/null; then sanitized=1; fi

# report DIR OUT [ARGS...]: the report of DIR into OUT, stderr in OUT.err, under 1 GiB of
# address space (the report of a few rows needs tens of MB) and 60 s
report() {
  local dir=$1 out=$2
  shift 2
  mkdir -p "$out"
  (
    if [ $sanitized = 0 ]; then ulimit -v 1048576; fi
    exec timeout 60 "$bin" report "$dir" --out "$out" "$@"
  ) >"$out.out" 2>"$out.err" </dev/null
}

# run DIR WORLD META_LINES: a fabricated run of WORLD ranks, 2 steps each; rankN's rows from
# the function rows (rank as $1)
run() {
  local dir=$1 world=$2 meta=$3
  mkdir -p "$dir"
  printf 'key,value\nmode,ddp\nworld_size,%s\nsteps,2\n%s' "$world" "$meta" >"$dir/meta.csv"
  for ((r = 0; r < world; r++)); do
    {
      echo "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream"
      rows "$r"
    } >"$dir/rank$r.trace.csv"
  done
}

# ---- 1. memory follows the rows: step 2e9, buckets 1e8 ----
rows() {
  local r=$1 s t
  for s in 1 2; do
    t=$((s * 100000))
    echo "$r,$s,1,step,-1,host,$t,$((t + 90000)),0,step,range,0"
    echo "$r,$s,1,forward,-1,host,$t,$((t + 30000)),0,forward,range,0"
    echo "$r,$s,1,backward,-1,host,$((t + 30000)),$((t + 60000)),0,backward,range,0"
    echo "$r,$s,1,allreduce,0,host,$((t + 60000)),$((t + 70000)),4096,allreduce.b0,range,1"
  done
  echo "$r,2000000000,1,step,-1,host,900000,950000,0,step,range,0"
  echo "$r,2000000000,1,backward,-1,host,900000,920000,0,backward,range,0"
  echo "$r,2000000000,1,allreduce,0,host,920000,930000,4096,allreduce.b0,range,1"
}
run "$tmp/step2e9" 2 $'buckets,1\nbucket.0.bytes,4096\n'
report "$tmp/step2e9" "$tmp/o1" --warmup-steps 0
check "step 2e9" $? "the report of a step 2,000,000,000 row failed (or ran out of 1 GiB): $(tail -n 3 "$tmp/o1.err")"
check_eval '[ -s "$tmp/o1/phases.csv" ] && grep -q "what if (run step2e9, predicted" "$tmp/o1.out"' \
  "step 2e9: no phases.csv, or no prediction (the what-if reads every step)"

run "$tmp/buckets1e8" 2 $'buckets,100000000\nbucket.0.bytes,4096\nparam.0.name,fc.weight\nparam.0.bytes,4096\n'
report "$tmp/buckets1e8" "$tmp/o2" --warmup-steps 0
check "buckets 1e8" $? "the report of meta.csv buckets,100000000 failed (or ran out of 1 GiB): $(tail -n 3 "$tmp/o2.err")"
check_eval 'grep -q "what if (run buckets1e8, predicted" "$tmp/o2.out"' \
  "buckets 1e8: no prediction (out of memory for a cell per step and bucket?)"

run "$tmp/buckets1e8-nokeys" 2 $'buckets,100000000\nbucket.0.bytes,4096\n'
report "$tmp/buckets1e8-nokeys" "$tmp/o3" --warmup-steps 0
check "buckets 1e8, no param keys" $? "failed (or ran out of 1 GiB): $(tail -n 3 "$tmp/o3.err")"
check_eval 'grep -q "buckets is 100000000 but the file has" "$tmp/o3.out"' \
  "buckets 1e8 with no param keys: the what-if does not say meta.csv is damaged"

check_done
