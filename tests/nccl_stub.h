/* nccl_stub.h — the test doubles that let the NCCL comm (trainer/comm/cuda/comm_nccl.c) run
 * with world >= 2 on a host without GPUs, for tests/test_cuda_nccl_world.c:
 *
 *   nccl_stub.c       the NCCL calls the comm makes, over a shared-memory segment between
 *                     the ranks' processes on one host (what it does and does not fake:
 *                     its top);
 *   nccl_stub_cuda.c  the CUDA runtime calls the comm makes (streams as host threads,
 *                     events, host functions, host memory as device memory) and a CUDA
 *                     backend that holds only a compute stream.
 *
 * The test links the comm's own object (the one built into libddpprof_cuda.so) against
 * these instead of libnccl and libcudart.  Test hooks: the fault a rank injects
 * (NCCL_STUB_FAULT_ENV, read at each ncclCommInitRankConfig) and the calls it counted. */
#ifndef DDPPROF_TESTS_NCCL_STUB_H
#define DDPPROF_TESTS_NCCL_STUB_H

struct backend;

/* "KIND:RANK[:N]", read by every ncclCommInitRankConfig of the process.  Only rank RANK of
 * the communicator acts on it:
 *   die:R:N            R is killed (SIGKILL) inside its N-th collective, once every rank
 *                      has entered it (the others are then waiting for R's data)
 *   fail:R:N           R's N-th collective call returns ncclSystemError, enqueuing nothing
 *   init-die:R         R is killed inside ncclCommInitRankConfig, after it joined and before
 *                      every rank had
 *   init-hang:R        R's ncclCommInitRankConfig never joins (until ncclCommAbort)
 *   finalize-hang:R    R's ncclCommFinalize never completes (until ncclCommAbort) */
#define NCCL_STUB_FAULT_ENV "DDPPROF_NCCL_STUB_FAULT"

/* What this process's communicators did, for the test's checks. */
struct nccl_stub_counts {
    int inits;             /* ncclCommInitRankConfig calls */
    int inits_in_progress; /* of them, returned ncclInProgress (non-blocking) */
    int calls_in_progress; /* collective calls that returned ncclInProgress (connection) */
    int finalizes, destroys, aborts;
    int misuses; /* calls a non-blocking communicator must not get: a collective or
                    finalize while it is still in progress, anything after finalize or
                    abort, a destroy while in progress */
};
void nccl_stub_counts_get(struct nccl_stub_counts *out);

/* The last misuse's message ("" when none), for the test's failure message. */
const char *nccl_stub_last_misuse(void);

/* The CUDA backend of this process (nccl_stub_cuda.c): its compute stream, nothing else.
 * NULL when the stream's thread cannot be started. */
struct backend *cuda_host_backend(void);

#endif
