#!/usr/bin/env bash
# test_gpu_check_parse.sh — scripts/gpu-check's readings of tool output it does not write:
# compute-sanitizer's summaries (memcheck's "ERROR SUMMARY", racecheck's "RACECHECK
# SUMMARY", as the real tool printed them on an H200: tests/fixtures/compute-sanitizer) and
# the version codes of CUDA, cuDNN, cuBLAS and NCCL.  The first GPU run FAILed a clean
# racecheck because the harness looked for memcheck's line only.
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
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY
