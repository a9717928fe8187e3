#!/usr/bin/env bash
# test_cuda_symbols.sh — link-level facts the GPU tests rely on, checked here without a GPU
# (issue 21 §2; CUDA builds only, skips otherwise):
#   - tests/test_gpu_nccl exports its counting cudaEventQuery (nm -D --defined-only), so
#     libddpprof_cuda.so, loaded RTLD_LOCAL and bound to libcudart, calls the counter;
#   - libddpprof_cuda.so creates its communicator non-blocking: it imports
#     ncclCommInitRankConfig and comm_poll_until (the bounded poll of ncclInProgress) and
#     not the blocking ncclCommInitRank.
set -u
build=${DDPPROF_BUILD_DIR:?DDPPROF_BUILD_DIR must point at the build directory}
module=$build/libddpprof_cuda.so
exe=$build/tests/test_gpu_nccl
if [ ! -f "$module" ]; then
  echo "SKIP: no $module (a build without CUDA)"
  exit 77
fi
command -v nm >/dev/null || { echo "FAIL: nm (binutils) is needed"; exit 1; }
passed=0 failed=0
check() { if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1: $3"; fi; }

if [ -f "$exe" ]; then
  nm -D --defined-only "$exe" | awk '{print $NF}' | grep -qx 'cudaEventQuery'
  check exe-exports-interposer $? "$exe does not export cudaEventQuery: the module would bind to libcudart's and the test's counts stay 0 (ENABLE_EXPORTS)"
else
  check exe-built 1 "$exe was not built"
fi

undef=$(nm -D --undefined-only "$module" | awk '{print $NF}' | sed 's/@.*//')
echo "$undef" | grep -qx ncclCommInitRankConfig
check nccl-config-init $? "$module does not call ncclCommInitRankConfig (the non-blocking communicator)"
echo "$undef" | grep -qx ncclCommInitRank
check nccl-no-blocking-init "$((1 - $?))" "$module still calls the blocking ncclCommInitRank"
echo "$undef" | grep -qx comm_poll_until
check nccl-polls "$?" "$module does not use comm_poll_until (bounded polling of ncclInProgress)"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
