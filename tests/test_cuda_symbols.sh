#!/usr/bin/env bash
# test_cuda_symbols.sh — link-level facts the GPU tests rely on, checked here without a GPU
# (issue 21 §2; CUDA builds only, skips otherwise):
#   - tests/test_gpu_nccl exports its counting cudaEventQuery (nm -D --defined-only), so
#     libddpprof_cuda.so, loaded RTLD_LOCAL and bound to libcudart, calls the counter;
#   - libddpprof_cuda.so creates its communicator non-blocking: it imports
#     ncclCommInitRankConfig and comm_poll_until (the bounded poll of ncclInProgress) and
#     not the blocking ncclCommInitRank;
#   - every function a module takes from the program (not from a library it links) is in
#     its IMPORTS (cmake/layers.cmake), and every import is one it takes (the list is the
#     module's undefined symbols, exactly): a program exports exactly those, so one missing is a
#     module that loads in one program and fails in another (clock_now_ns in the CUDA
#     module resolved in ddpprof, which also loads the probes module, but not in
#     test_backend_ops).
set -u
build=${DDPPROF_BUILD_DIR:?DDPPROF_BUILD_DIR must point at the build directory}
module=$build/libddpprof_cuda.so
exe=$build/tests/test_gpu_nccl
if [ ! -f "$module" ]; then
  echo "SKIP: no $module (a build without CUDA)"
  exit 77
fi
command -v nm >/dev/null || { echo "FAIL: nm (binutils) is needed"; exit 1; }
. "$(dirname "$0")/check.sh"

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

# imports_complete MODULE: its undefined symbols that none of its libraries defines, all in
# build/modules/<name>.imports
imports_complete() {
  local mod=$1 name imports libs missing sym
  name=$(basename "$mod" .so)
  name=${name#lib}
  imports=$build/modules/$name.imports
  if [ ! -f "$imports" ]; then
    check "$name-imports" 1 "no $imports"
    return
  fi
  libs=$(ldd "$mod" | awk '/=>/ && $3 ~ /^\// {print $3}')
  defined=$(for l in $libs; do nm -D --defined-only "$l" 2>/dev/null | awk '{print $NF}' | sed 's/@.*//'; done | sort -u)
  missing=""
  for sym in $(nm -D --undefined-only "$mod" | awk '{print $NF}' | sed 's/@.*//' | sort -u); do
    case $sym in __*|_ITM_*|_Jv_*) continue ;; esac
    grep -qx "$sym" <<<"$defined" && continue
    grep -qw "$sym" "$imports" || missing="$missing $sym"
  done
  check "$name-imports" "$([ -z "$missing" ] && echo 0 || echo 1)" \
    "$mod takes$missing from the program but its IMPORTS (trainer/ or probes/CMakeLists.txt) do not list it"
  # and no more: an import the module no longer calls is a function every program keeps
  # and exports for nothing
  local stale="" undef_mod
  undef_mod=$(nm -D --undefined-only "$mod" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
  for sym in $(tr -d '{};' <"$imports"); do
    grep -qx "$sym" <<<"$undef_mod" || stale="$stale $sym"
  done
  check "$name-imports-used" "$([ -z "$stale" ] && echo 0 || echo 1)" \
    "$mod does not call$stale, which its IMPORTS (trainer/ or probes/CMakeLists.txt) list"
}
if ldd "$module" | grep -q 'not found'; then
  check imports-ldd 1 "ldd cannot resolve every library of $module here"
else
  imports_complete "$module"
  [ -f "$build/libddpprof_probes_cuda.so" ] && imports_complete "$build/libddpprof_probes_cuda.so"
fi

check_done
