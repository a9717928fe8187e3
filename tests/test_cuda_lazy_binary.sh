#!/usr/bin/env bash
# test_cuda_lazy_binary.sh — the ddpprof binary maps no CUDA library unless a GPU is used
# (trainer/cuda/cuda_loader.c, probes/cuda/gpu_loader.c; issue 16: a CPU run's memory):
#   - ldd: it links none of cudart, cuBLAS, cuDNN, NCCL, CUPTI (CUDA build or not);
#   - LD_DEBUG=files (every object the dynamic loader opens, dlopen included, in every
#     process): `--version`, `train --cpu 1 --trace full` and the main job on 2 CPU ranks
#     open none of them nor the modules (libddpprof_*cuda.so), while they do open
#     OpenBLAS (the trace works);
#   - CUDA builds: with a stand-in driver reporting one GPU (tests/fake_driver),
#     `train --gpu 0` opens libddpprof_cuda.so from the binary's own directory (no
#     DDPPROF_LIB_DIR) and fails in one line from inside the module (no usable GPU here).
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
build=${DDPPROF_BUILD_DIR:?DDPPROF_BUILD_DIR must point at the build directory}
unset DDPPROF_LIB_DIR # the binary finds its modules beside itself
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
cuda_libs='libddpprof_cuda\.so|libddpprof_probes_cuda\.so|libcudart|libcublas|libcudnn|libnccl|libcupti'

if command -v ldd >/dev/null; then
  ldd "$bin" >"$tmp/ldd" 2>&1
  check ldd-no-cuda "$(! grep -qE "$cuda_libs" "$tmp/ldd"; echo $?)" \
    "ddpprof links $(grep -oE "$cuda_libs" "$tmp/ldd" | sort -u | tr '\n' ' ')"
fi

# traced NAME ARGS...: run the binary with the loader's file trace in $tmp/NAME.<pid>
traced() {
  local name=$1
  shift
  LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/trace-$name" timeout 300 "$bin" "$@" \
    >"$tmp/$name.log" 2>&1 </dev/null
}
# opened NAME: the files the trace of NAME shows opened, one per line
opened() { cat "$tmp/trace-$1".* 2>/dev/null | grep -oE 'file=[^ ]+' | sort -u; }

no_cuda_run() {
  local name=$1
  shift
  traced "$name" "$@"
  local rc=$?
  check "$name-exit" "$rc" "ddpprof $* exited $rc: $(tail -3 "$tmp/$name.log")"
  check "$name-traced" "$(opened "$name" | grep -q libopenblas; echo $?)" \
    "LD_DEBUG shows no libopenblas: the trace did not work"
  check "$name-no-cuda" "$(! opened "$name" | grep -qE "$cuda_libs"; echo $?)" \
    "ddpprof $* opened $(opened "$name" | grep -E "$cuda_libs" | tr '\n' ' ')"
}
no_cuda_run version --version
no_cuda_run cpu1 train --cpu 1 --epochs 1 --limit 256 --test-limit 64 --trace full --quiet \
  --out "$tmp/cpu1"
no_cuda_run main --cpu 2 --epochs 1 --limit 256 --test-limit 64 --out "$tmp/main"
check main-ranks "$(ls "$tmp"/trace-main.* 2>/dev/null | wc -l | awk '{exit !($1 >= 3)}'; echo $?)" \
  "the main job on 2 CPU ranks traced $(ls "$tmp"/trace-main.* 2>/dev/null | wc -l) processes, expected the job and its 2 ranks at least"

fake=$build/tests/fake-driver
if [ -f "$fake/libcuda.so.1" ]; then
  module=$(dirname "$(readlink -f "$bin")")/libddpprof_cuda.so
  LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} traced gpu train --gpu 0 \
    --epochs 1 --limit 64 --test-limit 64 --out "$tmp/gpu"
  rc=$?
  check gpu-fails "$([ "$rc" -ne 0 ] && [ "$rc" -lt 128 ]; echo $?)" "exit $rc without a GPU"
  check gpu-module-beside-binary "$(opened gpu | grep -qxF "file=$module"; echo $?)" \
    "$module not opened: $(opened gpu | grep -E "$cuda_libs|libcuda" | tr '\n' ' ')"
  check gpu-one-line "$([ "$(wc -l <"$tmp/gpu.log")" -eq 1 ] && grep -q 'GPU' "$tmp/gpu.log"; echo $?)" \
    "not one line naming the GPU: $(head -5 "$tmp/gpu.log")"
  check gpu-from-module "$(! grep -q 'could not be loaded' "$tmp/gpu.log"; echo $?)" \
    "the module did not load: $(cat "$tmp/gpu.log")"
  echo "train --gpu 0 with a stand-in driver: $(cat "$tmp/gpu.log")"
else
  echo "no stand-in driver (CPU build): the module's loading from beside the binary is not checked"
fi

check_done
