#!/usr/bin/env bash
# test_report_export.sh — `ddpprof report RUN --kineto` writes traces that read back the same
# (issue 35, "Exports that read back the same"), by this report and by the tools' rules:
#   1. round trip: the report of the export equals the report of the run, per rank and phase
#      (phases.csv: count, total, mean, p50, p95, max, share of the step) and per rank
#      (overlap.csv: step, compute, comm, exposed comm, overlap, idle), exactly: the export
#      writes nanoseconds (µs with three decimals), so nothing is rounded.  Layer rows
#      (--trace full's layer.forward/backward) have no Kineto form the import reads and are
#      left out of the comparison.  Two runs: a fresh 2-CPU-rank DDP run of the ConvNet
#      (SyncBatchNorm's, AMP-less loss and eval all-reduces: ddpprof.comm.allreduce; they
#      were not read back: comm 65.1 -> 21.4 ms on rank 0), and a slice of a real H200 run
#      of two ranks sharing a GPU (tests/fixtures/ddpprof/gpu-shared-h200: its buckets'
#      device rows are host-staged, under the comm "shm-staged", which no import read:
#      all-reduce 7.2 -> 0.45 ms; its device rows start before their host ranges);
#   2. Perfetto's rule (scripts/check-timeline) holds in every exported file: one lane per
#      bucket in flight, no partially overlapping slices on a lane (the GPU export had 50 per
#      rank on its comm stream);
#   3. memcpy and memset rows carry Kineto's names (HTA tells copies from kernels by
#      ^Memcpy|^Memset: "memcpy DtoD" was counted as compute);
#   4. no fixed cap on names: a 3000-byte kernel name of a Kineto trace is whole in ops.csv
#      (cut at 1024 bytes), a 5000-byte one of a ddpprof trace in timeline.json (at 4096).
set -u
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${DDPPROF_BUILD_DIR:-$src/build}
bin=${DDPPROF:-$build/ddpprof}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# same WHAT A B: phases.csv and overlap.csv of report directories A and B agree
same() {
  local diff
  diff=$(python3 - "$2" "$3" <<'PY'
import csv, sys
a, b = sys.argv[1], sys.argv[2]
out = []
def rows(d, f, key):
    return {key(r): r for r in csv.DictReader(open(f"{d}/{f}"))}
cols = {"phases.csv": ["count", "total_ms", "mean_ms", "p50_ms", "p95_ms", "max_ms", "pct_of_step"],
        "overlap.csv": ["step_ms", "compute_ms", "comm_ms", "exposed_comm_ms", "overlap_pct", "idle_ms"]}
keys = {"phases.csv": lambda r: (r["rank"], r["phase"]), "overlap.csv": lambda r: r["rank"]}
for f in cols:
    x, y = rows(a, f, keys[f]), rows(b, f, keys[f])
    for k, r in x.items():
        if f == "phases.csv" and r["phase"].startswith("layer."):
            continue
        if k not in y:
            out.append(f"{f} {k}: not in the export's report")
            continue
        for c in cols[f]:
            if r[c] != y[k][c]:
                out.append(f"{f} {k} {c}: {r[c]} -> {y[k][c]}")
    out += [f"{f} {k}: only in the export's report" for k in y if k not in x]
print("; ".join(out[:8]))
PY
)
  if [ -z "$diff" ]; then ok; else bad "$1: the export's report differs: $diff"; fi
}

# round_trip WHAT RUN_DIR: report RUN_DIR with --kineto into $tmp/WHAT, then the export into
# $tmp/WHAT-back; both the same, the export drawn as Perfetto draws
round_trip() {
  local what=$1 run=$2 label
  label=$(basename "$run")
  "$bin" report "$run" --kineto --out "$tmp/$what" >/dev/null 2>"$tmp/$what.err" </dev/null
  check "$what: report --kineto" $? "$(tail -n 2 "$tmp/$what.err")"
  "$bin" report "$tmp/$what/kineto/$label" --out "$tmp/$what-back" >/dev/null 2>"$tmp/$what-back.err" </dev/null
  check "$what: report of the export" $? "$(tail -n 2 "$tmp/$what-back.err")"
  same "$what" "$tmp/$what" "$tmp/$what-back"
  "$src/scripts/check-timeline" "$tmp/$what/kineto/$label"/*.json >"$tmp/$what.lanes" 2>&1
  check "$what: the export draws in Perfetto as written" $? "$(head -n 4 "$tmp/$what.lanes")"
}

# 1, 2. a CPU run and the GPU slice
tiny=(train --cpu 2 --model convnet --dataset synthetic --limit 256 --test-limit 32
      --batch-size 32 --epochs 1 --quiet)
if ! "$bin" "${tiny[@]}" --out "$tmp/cpu" >"$tmp/out" 2>"$tmp/err" </dev/null; then
  echo "FAIL the 2-rank run:"; cat "$tmp/err"; exit 1
fi
check_eval 'grep -q ",comm.allreduce," "$tmp/cpu/rank0.trace.csv"' "the CPU run has no comm.allreduce rows to read back"
round_trip cpu "$tmp/cpu"
cp -r "$src/tests/fixtures/ddpprof/gpu-shared-h200" "$tmp/gpu"
round_trip gpu "$tmp/gpu"

# 3. Kineto's names for copies
python3 - "$tmp/gpu/kineto/gpu" >"$tmp/names" <<'PY'
import glob, json, re, sys
n = {"gpu_memcpy": 0, "gpu_memset": 0}
for f in glob.glob(sys.argv[1] + "/*.json"):
    for e in json.load(open(f))["traceEvents"]:
        if e.get("cat") in n:
            n[e["cat"]] += 1
            if not re.match(r"^Memcpy|^Memset", e["name"]):
                print("not Kineto's name:", e["cat"], e["name"])
print("copies", n["gpu_memcpy"], n["gpu_memset"])
PY
check_eval '! grep -q "not Kineto" "$tmp/names" && grep -qE "^copies [1-9][0-9]* [1-9]" "$tmp/names"' \
  "memcpy/memset names: $(head -n 3 "$tmp/names")"

# 4. names whole
long=$(python3 -c "print('ampere_sgemm_128x64_tn' + 'x' * 3000)")
mkdir -p "$tmp/long"
k0=hostA_1001.1700000000123.pt.trace.json
sed "s/\"ampere_sgemm_128x64_tn\"/\"$long\"/" "$src/tests/fixtures/pytorch/kineto-2hosts/$k0" >"$tmp/long/$k0"
"$bin" report "$tmp/long/$k0" --out "$tmp/long-out" >/dev/null 2>"$tmp/long.err" </dev/null
check "a 3022-byte kernel name" $? "$(tail -n 2 "$tmp/long.err")"
check_eq "the name whole in ops.csv" "$(python3 -c "
import csv, sys
print(max((len(r['name']) for r in csv.DictReader(open(sys.argv[1])) if r['name'].startswith('ampere_sgemm')), default=0))" "$tmp/long-out/ops.csv")" 3022
# a ddpprof trace's kernel row of a 5000-byte name: whole in timeline.json (cut at 4096)
cp -r "$src/tests/fixtures/ddpprof/gpu-shared-h200" "$tmp/longrun"
long5=$(python3 -c "print('k' * 5000)")
awk -F, -v OFS=, -v n="$long5" '$11 == "kernel" && !done { $10 = n; done = 1 } { print }' \
  "$src/tests/fixtures/ddpprof/gpu-shared-h200/rank0.trace.csv" >"$tmp/longrun/rank0.trace.csv"
"$bin" report "$tmp/longrun" --out "$tmp/longrun-out" >/dev/null 2>"$tmp/longrun.err" </dev/null
check "a 5000-byte name in a ddpprof trace" $? "$(tail -n 2 "$tmp/longrun.err")"
check_eq "the name whole in timeline.json" "$(python3 -c "
import json, sys
print(max((len(e['name']) for e in json.load(open(sys.argv[1]))['traceEvents'] if e.get('name', '').startswith('kkk')), default=0))" "$tmp/longrun-out/timeline.json")" 5000

check_done
