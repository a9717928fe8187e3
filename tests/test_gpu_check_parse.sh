#!/usr/bin/env bash
# test_gpu_check_parse.sh — scripts/gpu-check's readings of tool output it does not write:
# compute-sanitizer's summaries (memcheck's "ERROR SUMMARY", racecheck's "RACECHECK
# SUMMARY", as the real tool printed them on an H200: tests/fixtures/compute-sanitizer) and
# the version codes of CUDA, cuDNN, cuBLAS and NCCL.  The first GPU run FAILed a clean
# racecheck because the harness looked for memcheck's line only.  And --prepare's sum of
# what travels to the GPU machine (git ls-files -co --exclude-standard, and build-gpu-deps/)
# on a scratch git checkout: ignored files left out, the pack counted, over 60 MiB refused
# with the largest folders named (sparse files: the 161 MiB take no disk).  And the
# cold-start row's reading of DDPPROF_CUDNN_LOG and its verdict against issue 34's 1.2x;
# the launches-per-step row's count of CUPTI rows and the PyTorch target row's verdict
# (issue 34 item 5: 300 operations a ResNet18 step, 1.3x PyTorch); the PyTorch DDP job row's
# reading of ddpprof's report of a Kineto trace, and the resume row's (issue 34 item 7).
set -u
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
python3 - "$src" <<'PY'
import importlib.machinery, importlib.util, os, sys
src = sys.argv[1]
loader = importlib.machinery.SourceFileLoader("gpu_check", os.path.join(src, "scripts", "gpu-check"))
spec = importlib.util.spec_from_loader("gpu_check", loader)
gc = importlib.util.module_from_spec(spec)
loader.exec_module(gc)
fix = os.path.join(src, "tests", "fixtures", "compute-sanitizer")
def text(name):
    with open(os.path.join(fix, name)) as f:
        return f.read()
failed = passed = 0
def expect(what, got, want):
    global failed, passed
    if got == want:
        passed += 1
    else:
        failed += 1
        print("FAIL %s: %r, expected %r" % (what, got, want))
expect("memcheck clean", gc.sanitizer_verdict(0, text("memcheck-clean-h200.log")),
       ("PASS", "0 errors (ERROR SUMMARY: 0 errors)"))
expect("racecheck clean", gc.sanitizer_verdict(0, text("racecheck-clean-h200.log")),
       ("PASS", "0 errors (RACECHECK SUMMARY: 0 hazards displayed)"))
expect("memcheck error", gc.sanitizer_verdict(99, text("memcheck-error.log")),
       ("FAIL", "exit 99: ERROR SUMMARY: 1 error"))
expect("racecheck, exit 99 with a clean summary", gc.sanitizer_verdict(99, text("racecheck-clean-h200.log"))[0], "FAIL")
expect("timed out", gc.sanitizer_verdict(124, text("memcheck-clean-h200.log")), (None, None))
expect("no summary", gc.sanitizer_verdict(1, "ddpprof: no usable CUDA GPU\n"), ("FAIL", None))
expect("versions", gc.version_legend("versions: runtime 13000, driver 12080, cuDNN 91400, cuBLAS 130100, NCCL 22803"),
       "runtime 13.0; driver 12.8; cuDNN 9.14.0; cuBLAS 13.1.0; NCCL 2.28.3")
# the cold-start row: DDPPROF_CUDNN_LOG's lines as trainer/cuda/conv_plan.c writes them
# (test_conv_plan checks the C side's words), and the row's verdict
log = ("ddpprof: cuDNN conv forward fp32 x (32,1,28,28) w (16,1,5,5) pad 2 stride 1: algorithm 1, "
       "math FMA, workspace 8192 bytes (candidate 1 of 1, from the cache /tmp/c/cudnn-algos.tsv); "
       "chosen in 0.0 ms, first call 0.2 ms\n"
       "ddpprof: cuDNN conv backward filter fp16 x (32,16,14,14) w (32,16,5,5) pad 2 stride 1: algorithm "
       "1, math tensor-op, workspace 0 bytes (candidate 2 of 3, from cuDNN's heuristics' ranking); "
       "chosen in 1400.5 ms, first call 3.1 ms\n"
       "ddpprof: cuDNN conv forward fp16 x (32,1,28,28) w (16,1,5,5) pad 2 stride 1: algorithm 1, math "
       "tensor-op, workspace 8192 bytes (candidate 1 of 1, from cuDNN's heuristics' first); chosen in "
       "2.5 ms, first call 9.0 ms\n"
       "epoch 1: loss 2.3\n")
expect("cuDNN choices", gc.cudnn_choices(log), (1, 2, 1403.0))
expect("cold start within the target",
       gc.cold_start_verdict({"fp32": 0.40, "fp16": 0.46}, {"fp32": 0.38, "fp16": 0.30}, 0, 18)[0], "PASS")
v, d = gc.cold_start_verdict({"fp32": 0.40, "fp16": 4.50}, {"fp32": 0.38, "fp16": 0.30}, 0, 18)
expect("cold start over the target", (v, "(11.25x)" in d, "(0.79x)" in d), ("FAIL", True, True))
expect("warm runs that asked cuDNN",
       gc.cold_start_verdict({"fp32": 0.40, "fp16": 0.44}, {"fp32": 0.38, "fp16": 0.30}, 2, 16)[0], "FAIL")
expect("warm runs that logged nothing",
       gc.cold_start_verdict({"fp32": 0.40, "fp16": 0.44}, {"fp32": 0.38, "fp16": 0.30}, 0, 0)[0], "FAIL")
expect("a failed run", gc.cold_start_verdict({"fp32": None, "fp16": 0.44}, {"fp32": 0.38, "fp16": 0.30}, 0, 18),
       ("FAIL", "a run gave no first-epoch time"))
import shutil, subprocess, tempfile
if shutil.which("git"):
    with tempfile.TemporaryDirectory() as t:
        os.environ["GIT_CEILING_DIRECTORIES"] = os.path.dirname(t)  # t alone is the checkout, or none
        expect("not a git checkout", gc.travel_sizes(t, os.path.join(t, "build-gpu-deps")), None)
        def put(rel, size, text=b""):
            path = os.path.join(t, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(text)
                f.truncate(size or len(text))
        subprocess.run(["git", "init", "-q", t], check=True)
        put(".gitignore", 0, b"/build*/\n/ignored/\n")
        put("src/a.c", 1000)
        subprocess.run(["git", "-C", t, "add", ".gitignore", "src/a.c"], check=True)
        put("ignored/huge.bin", 100 * 2**20)  # ignored: does not travel
        put("build-gpu-deps/deps.tar.gz", 41 * 2**20)  # ignored, but carried
        sizes = gc.travel_sizes(t, os.path.join(t, "build-gpu-deps"))
        expect("travel sizes", sizes, {".gitignore": 19, "src": 1000, "build-gpu-deps": 41 * 2**20})
        expect("travel within 60 MiB", gc.travel_verdict(sizes)[0], True)
        put("results/run/runs.tar.gz", 20 * 2**20)  # untracked, not ignored: travels
        ok, line = gc.travel_verdict(gc.travel_sizes(t, os.path.join(t, "build-gpu-deps")))
        expect("travel over 60 MiB", (ok, line.startswith("61.0 MiB would travel"),
               "the largest: build-gpu-deps 41.0 MiB, results 20.0 MiB, src 0.0 MiB, .gitignore 0.0 MiB" in line),
               (False, True, True))
else:
    print("what travels not checked: no git")
# the launches-per-step row: CUPTI rows of a --trace full run counted per step (rank0's
# rows as csv.DictReader gives them), warm-up steps and setup rows left out, medians
def rows_of(step, kernels, memcpys=0, memsets=0, phase="forward", clock="cupti"):
    return ([{"step": str(step), "phase": phase, "clock": clock, "kind": "kernel"}] * kernels +
            [{"step": str(step), "phase": phase, "clock": clock, "kind": "memcpy"}] * memcpys +
            [{"step": str(step), "phase": phase, "clock": clock, "kind": "memset"}] * memsets)
rows = (rows_of(0, 50, phase="setup") + rows_of(0, 70, phase="eval") + rows_of(1, 900, 40) +
        rows_of(2, 500, 20) + rows_of(3, 250, 3, 1) + rows_of(4, 260, 3, 1) + rows_of(5, 240, 3, 1) +
        rows_of(4, 30, clock="device") + [{"step": "4", "phase": "backward", "clock": "host",
                                            "kind": "range"}])
total, kinds, steps = gc.launches_per_step(rows)
expect("launches per step", (total, kinds, steps),
       (254, {"kernel": 250, "memcpy": 3, "memset": 1}, 3))
expect("launches within the budget", gc.launches_verdict(total, kinds, steps)[0], "PASS")
v, d = gc.launches_verdict(420, {"kernel": 416, "memcpy": 3, "memset": 1}, 8)
expect("launches over the budget", (v, "420 GPU operations" in d, "budget 300" in d), ("FAIL", True, True))
expect("no steps after the warm-up", gc.launches_verdict(*gc.launches_per_step(rows_of(1, 10) + rows_of(2, 10)))[0],
       "FAIL")
# the PyTorch target row, from bench-gpu's figures
figs = [{"model": "convnet", "precision": "fp16", "ratio": 2.5},
        {"model": "resnet18", "precision": "fp16", "ratio": 1.31, "ddpprof_images_per_s": 6550,
         "pytorch_images_per_s": 5000, "torch": "2.11.0"}]
v, d = gc.pytorch_target_verdict(figs)
expect("pytorch target met", (v, "1.31x" in d, "target >= 1.3x" in d), ("PASS", True, True))
figs[1]["ratio"] = 0.92
expect("pytorch target missed", gc.pytorch_target_verdict(figs)[0], "FAIL")
expect("no resnet18 fp16 figure", gc.pytorch_target_verdict(figs[:1])[0], "FAIL")
# the PyTorch DDP job row: `ddpprof report`'s phases.csv and ops.csv rows of the Kineto trace
def ph(phase, count, mean="1.0"):
    return {"run": "pytorch-ddp", "rank": "0", "phase": phase, "count": str(count), "mean_ms": mean}
phases = [ph("step", 8, "2.5"), ph("forward", 8), ph("backward", 8), ph("allreduce", 16), ph("optimizer", 8)]
ops = [{"kind": "cpu_op", "name": "aten::conv2d", "calls": "16"},
       {"kind": "kernel", "name": "void cudnn::conv_fwd", "calls": "16"},
       {"kind": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "calls": "16"}]
v, d = gc.pytorch_job_verdict(phases, ops, 8, "cuda")
expect("pytorch job read", (v, "8 profiled steps read (of 8)" in d, "32 kernel launches of 2 kernels (16 NCCL)" in d),
       ("PASS", True, True))
expect("pytorch job: a step missing", gc.pytorch_job_verdict([ph("step", 7)] + phases[1:], ops, 8, "cuda")[0], "FAIL")
expect("pytorch job: no backward", gc.pytorch_job_verdict(phases[:2] + phases[3:], ops, 8, "cuda")[0], "FAIL")
expect("pytorch job: no kernels on cuda", gc.pytorch_job_verdict(phases, ops[:1], 8, "cuda")[0], "FAIL")
expect("pytorch job: no kernels needed on cpu", gc.pytorch_job_verdict(phases, ops[:1], 8, "cpu")[0], "PASS")
expect("pytorch job: no all-reduce", gc.pytorch_job_verdict(phases[:3], ops, 8, "cuda")[0], "FAIL")
# the resume row: three checkpoints' bytes
expect("resume bit-identical", gc.resume_verdict(b"AB", b"A0", b"AB")[0], "PASS")
expect("resume differs", gc.resume_verdict(b"AB", b"A0", b"AC")[0], "FAIL")
expect("resume: epoch 1 equal to 2 epochs", gc.resume_verdict(b"AB", b"AB", b"AB")[0], "FAIL")
expect("resume: missing", gc.resume_verdict(b"AB", None, b"AB")[0], "FAIL")
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY
