#!/usr/bin/env bash
# test_check_gpu_trace.sh — scripts/check-gpu-trace, the judge scripts/gpu-check applies to
# the GPU traces of the main job, tested on synthetic run directories (no GPU needed, so
# that its first GPU run does not find a bug in the judge): a well-formed 2-rank DDP trace
# passes every check, and each defect the checks exist for fails its own check — a kernel
# outside its step, a bucket without its device row, a kernel launched outside every range,
# an NCCL kernel without its bucket, an all-reduce device row that starts during backward
# (long before its NCCL kernel), no GPU rows at all.  A 1-rank run skips the NCCL checks.
# A shm-staged run (2 ranks on one GPU, all-reduces on the host: meta.csv comm=shm-staged)
# passes with host-staged all-reduce rows (device rows named allreduce.bN.host-staged that
# hold their host row) and no NCCL kernels; it fails without them, with unmarked ones, or
# with ones that do not hold their host row; a NCCL run with marked rows fails.  A --trace
# full run's device layer rows pass when every step has one per layer inside its device
# forward/backward, and fail with a row outside or a row missing; without layers: SKIP.
# A --trace kernels run (meta.csv trace=kernels: cupti rows, no device rows) passes the
# checks that apply (all-reduce device rows SKIP) and fails gpu-rows when it has device rows
# (CUDA events at the cheap level).
# Skips (77) without python3.
set -u
src=${DDPPROF_SOURCE_DIR:-$(dirname "$0")/..}
checker=$src/scripts/check-gpu-trace
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# make_run DIR WORLD DEFECT: a DDP run of 2 steps and 2 buckets per rank (times in us on
# each rank's clock), with one defect injected (none, kernel-outside, no-device-bucket,
# setup-kernel, nccl-no-bucket, early-device-row, no-gpu; and the shm-staged ones: staged,
# staged-missing, staged-unmarked, staged-short, nccl-marked; --trace kernels: kernels,
# kernels-events)
make_run() {
  python3 - "$@" <<'EOF'
import os, sys
run, world, defect = sys.argv[1], int(sys.argv[2]), sys.argv[3]
staged = defect.startswith("staged")
os.makedirs(run, exist_ok=True)
with open(os.path.join(run, "meta.csv"), "w") as f:
    comm = "shm-staged" if staged else "nccl"
    f.write(f"key,value\nmode,ddp\nworld_size,{world}\nbuckets,2\ncomm,{comm}\n")
    if defect.startswith("layers"):  # --trace full's layers: two of them
        f.write("layers,2\nlayer.0.name,conv\nlayer.1.name,fc\n")
    if defect.startswith("kernels"):  # the default level: CUPTI, no CUDA events
        f.write("trace,kernels\n")
for rank in range(world):
    rows = []
    def row(step, phase, bucket, clock, a, b, name, kind="range", stream=0):
        rows.append(f"{rank},{step},1,{phase},{bucket},{clock},{int(a*1000)},{int(b*1000)},0,{name},{kind},{stream}")
    for s in (1, 2):
        t = 10000 * s
        row(s, "step", -1, "host", t, t + 9000, "step")
        row(s, "forward", -1, "host", t + 100, t + 3000, "forward")
        row(s, "backward", -1, "host", t + 3000, t + 6000, "backward")
        row(s, "optimizer", -1, "host", t + 8000, t + 8900, "optimizer")
        row(s, "forward", -1, "device", t + 150, t + 3100, "forward")
        row(s, "backward", -1, "device", t + 3100, t + 6200, "backward")
        row(s, "optimizer", -1, "device", t + 8050, t + 9400, "optimizer")  # trails the host step
        if defect.startswith("layers"):  # device layer rows inside forward / backward
            row(s, "layer.forward", -1, "device", t + 200, t + 1000, "conv")
            fc_end = t + 3500 if (defect == "layers-outside" and s == 2) else t + 3000
            row(s, "layer.forward", -1, "device", t + 1000, fc_end, "fc")
            if not (defect == "layers-missing" and s == 1):
                row(s, "layer.backward", -1, "device", t + 3200, t + 4000, "fc")
            row(s, "layer.backward", -1, "device", t + 4000, t + 6000, "conv")
        kt = t + 20000 if (defect == "kernel-outside" and s == 1) else t + 200
        row(s, "forward", -1, "cupti", kt, kt + 50, "conv_fwd_kernel", "kernel", 7)
        row(s, "setup" if (defect == "setup-kernel" and s == 2) else "backward", -1, "cupti",
            t + 3200, t + 3300, "sm90_xmma_wgrad", "kernel", 7)
        for b in (0, 1):
            la = t + 4000 + 1000 * b               # launched during backward
            if staged:
                # the host collective ran after the download, the wait returned after the
                # upload: the host row is the collective, the host-staged row the round trip
                row(s, "allreduce", b, "host", la + 300, t + 7000 + 100 * b, f"allreduce.b{b}",
                    stream=1)
                end = t + 6900 if defect == "staged-short" else t + 7400 + 100 * b
                name = f"allreduce.b{b}" + ("" if defect == "staged-unmarked" else ".host-staged")
                if defect != "staged-missing":
                    row(s, "allreduce", b, "device", la, end, name, stream=1)
                continue
            row(s, "allreduce", b, "host", la, t + 7500 + 100 * b, f"allreduce.b{b}", stream=1)
            ds = t + 4500 + 1000 * b               # when the comm stream had the gradients
            if defect == "early-device-row":
                ds = la + 1
            mark = ".host-staged" if defect == "nccl-marked" else ""
            if not (defect == "no-device-bucket" and s == 2 and b == 1):
                row(s, "allreduce", b, "device", ds, t + 7000 + 100 * b, f"allreduce.b{b}{mark}",
                    stream=1)
            if world > 1:
                nb = -1 if (defect == "nccl-no-bucket" and b == 0) else b
                row(s, "allreduce", nb, "cupti", t + 4510 + 1000 * b, t + 6900 + 100 * b,
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kernel", 21)
    row(2, "eval", -1, "host", 29500, 31000, "eval")  # the host waits for the device here
    if defect == "no-gpu":
        rows = [r for r in rows if ",host," in r]
    if defect == "kernels":
        rows = [r for r in rows if ",device," not in r]
    with open(os.path.join(run, f"rank{rank}.trace.csv"), "w") as f:
        f.write("rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream\n")
        f.write("\n".join(rows) + "\n")
EOF
}

# expect DEFECT WORLD CHECK STATUS: the run with DEFECT gives STATUS on CHECK
expect() {
  local defect=$1 world=$2 name=$3 want=$4 dir=$tmp/$1-$2 out
  [ -d "$dir" ] || make_run "$dir" "$world" "$defect"
  out=$(python3 "$checker" "$dir" 2>&1)
  check "$defect-$world-$name" "$(echo "$out" | grep -q "^$want $name:"; echo $?)" \
    "want $want $name; got: $(echo "$out" | grep -E "^[A-Z]+ $name:" || echo "$out")"
}

for c in gpu-rows in-steps buckets attribution nccl-kernels allreduce-rows; do
  expect none 2 "$c" PASS
done
make_run "$tmp/clean" 2 none
python3 "$checker" "$tmp/clean" >/dev/null 2>&1
check clean-exit "$?" "a clean run directory does not exit 0"

expect kernel-outside 2 in-steps FAIL
expect no-device-bucket 2 buckets FAIL
expect setup-kernel 2 attribution FAIL
expect nccl-no-bucket 2 nccl-kernels FAIL
expect early-device-row 2 allreduce-rows FAIL
expect no-gpu 2 gpu-rows FAIL
expect none 2 layers SKIP
expect layers 2 layers PASS
expect layers-outside 2 layers FAIL
expect layers-missing 2 layers FAIL
expect none 1 nccl-kernels SKIP
expect none 1 allreduce-rows PASS
for c in gpu-rows in-steps buckets attribution allreduce-rows; do
  expect staged 2 "$c" PASS
done
expect staged 2 nccl-kernels SKIP
make_run "$tmp/staged-clean" 2 staged
python3 "$checker" "$tmp/staged-clean" >/dev/null 2>&1
check staged-exit "$?" "a clean shm-staged run directory does not exit 0"
expect staged-missing 2 buckets FAIL
expect staged-missing 2 allreduce-rows FAIL
expect staged-unmarked 2 buckets FAIL
expect staged-short 2 allreduce-rows FAIL
expect nccl-marked 2 buckets FAIL
for c in gpu-rows in-steps buckets attribution nccl-kernels; do
  expect kernels 2 "$c" PASS
done
expect kernels 2 allreduce-rows SKIP
expect kernels 2 layers SKIP
make_run "$tmp/kernels-clean" 2 kernels
python3 "$checker" "$tmp/kernels-clean" >/dev/null 2>&1
check kernels-exit "$?" "a clean --trace kernels run directory does not exit 0"
expect kernels-events 2 gpu-rows FAIL
make_run "$tmp/bad" 2 setup-kernel
python3 "$checker" "$tmp/bad" >/dev/null 2>&1
rc=$?
check bad-exit "$([ "$rc" -eq 1 ]; echo $?)" "a failing run gave exit $rc"
python3 "$checker" "$tmp/nowhere" >/dev/null 2>&1
rc=$?
check missing-exit "$([ "$rc" -eq 2 ]; echo $?)" "a missing run directory gave exit $rc"

check_done
