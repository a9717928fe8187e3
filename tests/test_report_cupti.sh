#!/usr/bin/env bash
# test_report_cupti.sh — device time per phase from CUPTI rows (report/FORMULAS.md "Device
# time from CUPTI rows"): a fabricated 1-rank GPU run at --trace kernels, 3 steps alike,
# with host ranges and the cupti rows attributed to them (times in ms from the step's start):
#   data       host 1-2     memcpy 1.5-2.5                       -> 1.0
#   forward    host 3-10    kernels 4-6 and 7-9, and its two SyncBatchNorm all-gathers'
#                           (host 5-5.5 and 8-8.5, one NCCL kernel 9.2-9.6)   -> 5.6
#   backward   host 11-30   kernel 12-28                         -> 16.0
#   allreduce  host 25-35   NCCL kernel 29-33 (not inside backward's host range) -> 4.0
#   optimizer  host 36-45   kernel 37-40                         -> 3.0
#   step       host 0-50    every kernel of the step: 1.5-40     -> 38.5
#   comm.allgather: two a step share a key: their host rows, 0.5 each
# phases.csv must say exactly those.  A rank with device rows (CUDA events, --trace full;
# here of forward only) is timed by them: forward from its events, the rest from the host
# rows.  Without cupti rows (--trace nvtx), or in a CPU run (meta.csv device cpu), every
# phase is its host time.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# make_run DIR CUPTI(0|1) DEVICE_FORWARD(0|1) [DEVICE]
make_run() {
  python3 - "$@" <<'PY'
import os, sys
run, cupti, devfwd = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
device = sys.argv[4] if len(sys.argv) > 4 else "cuda"
os.makedirs(run, exist_ok=True)
with open(os.path.join(run, "meta.csv"), "w") as f:
    f.write(f"key,value\nmode,baseline\nworld_size,1\nepochs,1\ndevice,{device}\nwall_s,2\n")
    f.write("trace,%s\n" % ("full" if devfwd else "kernels" if cupti else "nvtx"))
with open(os.path.join(run, "metrics.csv"), "w") as f:
    f.write("step,epoch,loss,loss_scale,lr,images,found_inf\n")
    for s in (1, 2, 3):
        f.write(f"{s},1,2.3,1,0.01,32,0\n")
ms = 1000000
rows = ["rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream"]
def row(step, phase, bucket, clock, a, b, name, kind, stream, nbytes=0):
    if clock == "cupti" and not cupti:
        return
    rows.append(f"0,{step},1,{phase},{bucket},{clock},{int(a * ms)},{int(b * ms)},{nbytes},"
                f"{name},{kind},{stream}")
for s in (1, 2, 3):
    t = 1000 + (s - 1) * 100
    row(s, "data", -1, "host", t + 1, t + 2, "data", "range", 2)
    row(s, "data", -1, "cupti", t + 1.5, t + 2.5, "memcpy HtoD", "memcpy", 7, 4096)
    row(s, "comm.allgather", -1, "host", t + 5, t + 5.5, "comm.allgather", "range", 1, 64)
    row(s, "comm.allgather", -1, "host", t + 8, t + 8.5, "comm.allgather", "range", 1, 64)
    row(s, "comm.allgather", -1, "cupti", t + 9.2, t + 9.6, "ncclDevKernel_AllGather", "kernel", 9)
    row(s, "forward", -1, "cupti", t + 4, t + 6, "conv_fwd", "kernel", 7)
    row(s, "forward", -1, "cupti", t + 7, t + 9, "relu_fwd", "kernel", 7)
    row(s, "forward", -1, "host", t + 3, t + 10, "forward", "range", 0)
    if devfwd:
        row(s, "forward", -1, "device", t + 3.5, t + 9.5, "forward", "range", 0)
    row(s, "backward", -1, "cupti", t + 12, t + 28, "conv_bwd", "kernel", 7)
    row(s, "backward", -1, "host", t + 11, t + 30, "backward", "range", 0)
    row(s, "allreduce", 0, "cupti", t + 29, t + 33, "ncclDevKernel_AllReduce", "kernel", 9)
    row(s, "allreduce", 0, "host", t + 25, t + 35, "allreduce.b0", "range", 1, 4096)
    row(s, "optimizer", -1, "cupti", t + 37, t + 40, "sgd", "kernel", 7)
    row(s, "optimizer", -1, "host", t + 36, t + 45, "optimizer", "range", 0)
    row(s, "step", -1, "host", t, t + 50, "step", "range", 0)
with open(os.path.join(run, "rank0.trace.csv"), "w") as f:
    f.write("\n".join(rows) + "\n")
PY
}

p50() { csv_col "$1/phases.csv" p50_ms "phase=$2"; }
count() { csv_col "$1/phases.csv" count "phase=$2"; }

make_run "$tmp/k" 1 0
if "$bin" report "$tmp/k" --warmup-steps 0 --out "$tmp/ok" >"$tmp/ok.log" 2>&1; then
  check_eq "kernels: data from its memcpy" "$(p50 "$tmp/ok" data)" 1.000
  check_eq "kernels: forward from its kernels and its all-gathers'" "$(p50 "$tmp/ok" forward)" 5.600
  check_eq "kernels: backward, without the bucket's NCCL kernel" "$(p50 "$tmp/ok" backward)" 16.000
  check_eq "kernels: the bucket's all-reduce from its NCCL kernel" "$(p50 "$tmp/ok" allreduce)" 4.000
  check_eq "kernels: optimizer" "$(p50 "$tmp/ok" optimizer)" 3.000
  check_eq "kernels: step spans every kernel of the step" "$(p50 "$tmp/ok" step)" 38.500
  check_eq "kernels: steps counted once" "$(count "$tmp/ok" step)" 3
  check_eq "kernels: shared-key collectives keep their host rows" "$(p50 "$tmp/ok" comm.allgather)" 0.500
  check_eq "kernels: ... all of them" "$(count "$tmp/ok" comm.allgather)" 6
  check_eq "kernels: the page is written" "$(test -s "$tmp/ok/report.html" && echo yes)" yes
else
  cat "$tmp/ok.log"
  bad "report of a --trace kernels run"
fi

make_run "$tmp/f" 1 1
if "$bin" report "$tmp/f" --warmup-steps 0 --out "$tmp/of" >"$tmp/of.log" 2>&1; then
  check_eq "device rows preferred: forward from its CUDA events" "$(p50 "$tmp/of" forward)" 6.000
  check_eq "device rows preferred: forward counted once per step" "$(count "$tmp/of" forward)" 3
  check_eq "a rank with device rows: backward's host time" "$(p50 "$tmp/of" backward)" 19.000
  check_eq "a rank with device rows: step's host time" "$(p50 "$tmp/of" step)" 50.000
else
  cat "$tmp/of.log"
  bad "report of a run with device rows of forward"
fi

make_run "$tmp/n" 0 0
if "$bin" report "$tmp/n" --warmup-steps 0 --out "$tmp/on" >"$tmp/on.log" 2>&1; then
  check_eq "no cupti rows: forward's host time" "$(p50 "$tmp/on" forward)" 7.000
  check_eq "no cupti rows: step's host time" "$(p50 "$tmp/on" step)" 50.000
else
  cat "$tmp/on.log"
  bad "report of a run without cupti rows"
fi

make_run "$tmp/c" 1 0 cpu
if "$bin" report "$tmp/c" --warmup-steps 0 --out "$tmp/oc" >"$tmp/oc.log" 2>&1; then
  check_eq "a CPU run: forward's host time" "$(p50 "$tmp/oc" forward)" 7.000
else
  cat "$tmp/oc.log"
  bad "report of a CPU run with cupti rows"
fi

check_done
