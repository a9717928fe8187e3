#!/bin/sh
# isa_twin.sh CMD [ARGS...] — run a test held to AVX2 (the ctests named *_avx2,
# tests/CMakeLists.txt ddpprof_isa_twin): every CPU kernel on the path of a machine without
# AVX-512 -- the backend's own loops and, through them, oneDNN's (DDPPROF_MAX_CPU_ISA,
# trainer/backend/cpu_isa.h) and OpenBLAS's (OPENBLAS_CORETYPE) -- so that a difference
# of either path shows on a machine that has both.  Where the machine has no AVX-512, the
# test itself already ran the AVX2 path: skipped (77), saying so.
set -u
if ! "${DDPPROF:?DDPPROF must point at the ddpprof binary}" --version |
    grep -q 'this machine: avx512'; then
  echo "skipped: this machine has no AVX-512 ($("$DDPPROF" --version | grep '^cpu loops')):" \
       "the test without _avx2 ran its AVX2 path"
  exit 77
fi
export DDPPROF_MAX_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell
exec "$@"
