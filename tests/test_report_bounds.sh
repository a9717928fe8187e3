#!/usr/bin/env bash
# test_report_bounds.sh — the report's inputs are bounded by what they hold, not by the
# values they name (issue 35, "Bounded parsing"):
#   1. a trace row of step 2,000,000,000 and a meta.csv that says 100,000,000 buckets are
#      reported in the memory of a few rows (they took 15.6 GB and 8.6 GB, allocated by the
#      highest step and bucket number);
#   2. what the tables used to leave out or miscount without a word gets a warning with a
#      count: a row ending at INT64_MAX (a p95 of 9.2e12 ms) is left out, a repeated row
#      counted once, a phase the format lacks, an allreduce row of bucket -5, a rank file
#      above meta.csv's world_size; in PyTorch traces a ProfilerStep#-5 and a rank above
#      distributedInfo's world size; a UTF-8 byte order mark before a CSV header or the JSON
#      is read as the file without it;
#   3. timeline.json is bounded by default (TIMELINE_MAX_BYTES, 64 MiB: 256 ranks of a
#      ConvNet epoch wrote 286 MB, more than Perfetto's UI opens comfortably): 64 synthetic
#      ranks of 1000 steps (512,000 rows, 77 MB in full) give every rank's rows of the steps
#      around the median and the slowest step, and otherData.rows says so; --timeline full
#      writes every row.
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
  printf 'key,value\nmode,ddp\nworld_size,%s\nsteps,%s\n%s' "$world" "${steps:-2}" "$meta" >"$dir/meta.csv"
  printf 'step,epoch,loss,lr,images\n1,1,2.3,0.01,64\n2,1,2.2,0.01,64\n' >"$dir/metrics.csv"
  for ((r = 0; r < world; r++)); do
    echo "clock_offset_ns.rank$r,0" >>"$dir/meta.csv"
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

# ---- 2. warnings with a count ----
rows() {
  local r=$1 s t
  for s in 1 2 3; do
    t=$((s * 100000))
    echo "$r,$s,1,step,-1,host,$t,$((t + 90000)),0,step,range,0"
    echo "$r,$s,1,forward,-1,host,$t,$((t + 30000)),0,forward,range,0"
    echo "$r,$s,1,backward,-1,host,$((t + 30000)),$((t + 60000)),0,backward,range,0"
    echo "$r,$s,1,allreduce,0,host,$((t + 60000)),$((t + 70000)),4096,allreduce.b0,range,1"
  done
}
steps=3 run "$tmp/good" 2 $'buckets,1\nbucket.0.bytes,4096\n'
# case NAME SED-SCRIPT: a copy of the good run with rank0.trace.csv edited by SED-SCRIPT
case_of() {
  cp -r "$tmp/good" "$tmp/$1"
  sed -i "$2" "$tmp/$1/rank0.trace.csv"
}
# warns NAME TEXT: the report of run NAME succeeds and warns TEXT on stderr
warns() {
  report "$tmp/$1" "$tmp/o-$1" --warmup-steps 0
  check "$1: report" $? "$(tail -n 2 "$tmp/o-$1.err")"
  if grep -qF -- "$2" "$tmp/o-$1.err"; then ok; else bad "$1: no warning '$2' in: $(cat "$tmp/o-$1.err")"; fi
}
# col RUN PHASE COLUMN: rank 0's COLUMN of PHASE in phases.csv
col() {
  python3 - "$tmp/o-$1/phases.csv" "$2" "$3" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["rank"] == "0" and r["phase"] == sys.argv[2]:
        print(r[sys.argv[3]])
PY
}
report "$tmp/good" "$tmp/o-good" --warmup-steps 0
check "good run" $? "$(cat "$tmp/o-good.err")"
check_eq "good run: no warning" "$(grep -c warning "$tmp/o-good.err")" 0

case_of huge '0,/^0,2,1,forward/s/,130000,0,forward/,9223372036854775807,0,forward/'
warns huge "rank0.trace.csv: 1 row(s) with a time no run has"
check_eq "huge: forward's p95 from the other rows" "$(col huge forward p95_ms)" 0.030
check_eq "huge: forward's count" "$(col huge forward count)" 2

case_of dup '/^0,2,1,forward/p'
warns dup "rank0.trace.csv: 1 row(s) repeat an earlier row field for field"
check_eq "dup: forward counted once a step" "$(col dup forward count)" 3

case_of unknown 's/^0,2,1,forward,/0,2,1,forwrad,/'
warns unknown "rank0.trace.csv: 1 row(s) of a phase the trace format does not have (e.g. 'forwrad'"

case_of bucket '/^0,2,1,allreduce/s/,allreduce,0,/,allreduce,-5,/'
warns bucket "rank0.trace.csv: 1 allreduce row(s) with a negative bucket"

cp -r "$tmp/good" "$tmp/above"
sed 's/^1,/5,/' "$tmp/good/rank1.trace.csv" >"$tmp/above/rank5.trace.csv"
warns above "1 trace file(s) of a rank not below meta.csv's world_size 2 (e.g. rank5.trace.csv): not read"

cp -r "$tmp/good" "$tmp/bom"
cp -r "$tmp/good" "$tmp/nobom"
for f in meta.csv metrics.csv rank0.trace.csv; do
  { printf '\357\273\277'; cat "$tmp/nobom/$f"; } >"$tmp/bom/$f"
done
report "$tmp/nobom" "$tmp/o-nobom" --warmup-steps 0
report "$tmp/bom" "$tmp/o-bom" --warmup-steps 0
check "CSV files with a byte order mark" $? "$(cat "$tmp/o-bom.err")"
check_run "a byte order mark: the same phases.csv" cmp -s <(cut -d, -f2- "$tmp/o-bom/phases.csv") <(cut -d, -f2- "$tmp/o-nobom/phases.csv")

# PyTorch traces: the fixture's ranks 0 and 1 with one of them edited
kin=$src/tests/fixtures/pytorch/kineto-2hosts
k0=hostA_1001.1700000000123.pt.trace.json k1=hostA_1002.1700000000123.pt.trace.json
kineto_case() { # NAME SED-SCRIPT-FOR-RANK-1
  mkdir -p "$tmp/$1"
  cp "$kin/$k0" "$tmp/$1/"
  sed "$2" "$kin/$k1" >"$tmp/$1/$k1"
}
kineto_case kstep 's/"ProfilerStep#12"/"ProfilerStep#-5"/'
warns kstep "$k1: 1 step span(s) whose number is not in 0..1e9 (e.g. 'ProfilerStep#-5')"
kineto_case krank 's/"rank": 1, "world_size": 4/"rank": 5, "world_size": 4/'
warns krank "1 trace(s) of a rank not below the world size 4 their distributedInfo says"
check_eq "krank: world_size" "$(python3 -c "import csv,sys; print(sum(1 for r in csv.DictReader(open(sys.argv[1]))))" "$tmp/o-krank/ranks.csv")" 2
mkdir -p "$tmp/kbom"
{ printf '\357\273\277'; cat "$kin/$k0"; } >"$tmp/kbom/$k0"
report "$tmp/kbom/$k0" "$tmp/o-kbom"
check "Kineto JSON with a byte order mark" $? "$(cat "$tmp/o-kbom.err")"
report "$kin/$k0" "$tmp/o-knobom"
check_run "Kineto JSON with a byte order mark: the same phases.csv" cmp -s <(cut -d, -f2- "$tmp/o-kbom/phases.csv") <(cut -d, -f2- "$tmp/o-knobom/phases.csv")

# ---- 3. the timeline's bound ----
python3 - "$tmp/wide" 64 1000 <<'PY'
import os, random, sys
d, world, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(d)
with open(f"{d}/meta.csv", "w") as f:
    f.write(f"key,value\nmode,ddp\nworld_size,{world}\nsteps,{steps}\nbuckets,2\n"
            "bucket.0.bytes,1048576\nbucket.1.bytes,4096\n")
    f.writelines(f"clock_offset_ns.rank{r},0\n" for r in range(world))
with open(f"{d}/metrics.csv", "w") as f:
    f.write("step,epoch,loss,lr,images\n")
    f.writelines(f"{s},1,2.0,0.01,{32 * world}\n" for s in range(1, steps + 1))
rng = random.Random(1)
for r in range(world):
    rows, t = ["rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream"], 10**6
    for s in range(1, steps + 1):
        dur = 10**6 + rng.randrange(50000) + (3 * 10**6 if s == 666 else 0)  # 666: the slowest
        for ph, b, a, z, by, st in (("step", -1, 0, dur, 0, 0), ("data", -1, 0, 50000, 0, 2),
                                    ("forward", -1, 50000, 350000, 0, 0),
                                    ("backward", -1, 350000, 850000, 0, 0),
                                    ("allreduce", 0, 600000, 800000, 1048576, 1),
                                    ("allreduce", 1, 850000, 900000, 4096, 1),
                                    ("optimizer", -1, 900000, 950000, 0, 0),
                                    ("comm.allreduce", -1, 950000, 960000, 4, 1)):
            name = f"allreduce.b{b}" if ph == "allreduce" else ph
            rows.append(f"{r},{s},1,{ph},{b},host,{t + a},{t + z},{by},{name},range,{st}")
        t += dur + 10000
    with open(f"{d}/rank{r}.trace.csv", "w") as f:
        f.write("\n".join(rows) + "\n")
PY
report "$tmp/wide" "$tmp/o-wide"
check "64 ranks x 1000 steps" $? "$(tail -n 2 "$tmp/o-wide.err")"
python3 - "$tmp/o-wide/timeline.json" >"$tmp/wide.check" <<'PY'
import json, os, sys
size = os.path.getsize(sys.argv[1])
doc = json.load(open(sys.argv[1]))
rows = doc["otherData"]["rows"]
x = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
steps = sorted({e["args"]["step"] for e in x})
ranks = {e["pid"] for e in x}
print(f"size {size <= 64 << 20} ranks {len(ranks)} events {len(x)}")
print(f"steps {len(steps)} slowest {all(s in steps for s in range(663, 670))}", steps)
print("rows", rows)
PY
check_eval 'grep -q "^size True ranks 64 events 7168$" "$tmp/wide.check"' \
  "the bounded timeline: $(head -n 1 "$tmp/wide.check") (want at most 64 MiB, 64 ranks, 7 steps x 2 x 8 rows x 64 ranks)"
check_eval 'grep -q "^steps 14 slowest True " "$tmp/wide.check"' \
  "the bounded timeline's steps: $(sed -n 2p "$tmp/wide.check") (want 663-669 around the slowest, and 7 around the median)"
check_eval 'grep -qF "7168 of 512000 rows, bounded to 64 MiB (ddpprof report --timeline full writes every row)" "$tmp/wide.check" && grep -qF "(the slowest step 666, 3 either side)" "$tmp/wide.check"' \
  "otherData.rows: $(sed -n 3p "$tmp/wide.check")"
# every row (not copied for test_timelines_valid: 77 MB)
mkdir -p "$tmp/o-wide-full"
env -u DDPPROF_TIMELINE_COLLECT "$bin" report "$tmp/wide" --out "$tmp/o-wide-full" --timeline full \
  >/dev/null 2>"$tmp/o-wide-full.err" </dev/null
check "--timeline full" $? "$(tail -n 2 "$tmp/o-wide-full.err")"
check_eq "--timeline full: every row" "$(grep -c '"ph":"X"' "$tmp/o-wide-full/timeline.json")" 512000
check_eval 'grep -qF "\"rows\":\"every row (512000): --timeline full\"" "$tmp/o-wide-full/timeline.json"' \
  "--timeline full: otherData.rows"
rm -rf "$tmp/wide" "$tmp/o-wide-full"

check_done
