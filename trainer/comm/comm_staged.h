/* comm_staged.h — collectives on device memory through a comm that works on host memory.
 *
 * PyTorch's gloo does this with CUDA tensors: each collective's device buffer is copied to
 * host memory, the host comm (here shm) runs the collective there, and the result is
 * copied back.  It lets several ranks share one GPU (NCCL refuses two ranks on one
 * device), so the multi-rank reducer and SyncBatchNorm run on the CUDA backend on a 1-GPU
 * machine (trainer/device.c picks it for --gpu 0,0).
 *
 * The copies go through struct comm_stage (the backend's download and upload, adapted by
 * device.c: this layer knows no backend) and are made only on the thread that calls the
 * collective — never on the inner comm's thread, since a backend's slots must not run
 * concurrently.  An async all-reduce downloads when issued (after the work that produced
 * the buffer: the download waits for the device) and uploads in wait(), so the host
 * collective still overlaps the caller's work in between.  Which copies each collective
 * makes: broadcast downloads on root and uploads elsewhere; reduce downloads everywhere
 * and uploads on root; all-gather downloads send and uploads recv; barrier copies nothing.
 *
 * The inner comm's timeouts, failure reports, span (when the host collective ran) and
 * progress (comm.h; only where it has one) pass through unchanged; the staged comm has no
 * stream and no order slot. */
#ifndef DDPPROF_COMM_STAGED_H
#define DDPPROF_COMM_STAGED_H

#include "comm/comm.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How to reach device memory from the host.  Each returns 0, or -1 with error_set. */
struct comm_stage {
    /* host_dst (bytes) = device src; returns once host_dst holds the data */
    int (*download)(void *ctx, void *host_dst, const void *dev_src, size_t bytes);
    /* device dst = host_src (bytes); host_src may be reused as soon as it returns */
    int (*upload)(void *ctx, void *dev_dst, const void *host_src, size_t bytes);
    void *ctx;
};

/* its name (struct comm.name, meta.csv's comm) */
#define COMM_STAGED_NAME "shm-staged"

/* A comm named "shm-staged" with inner's rank and world, owning inner from now on (also
 * on failure, when inner is destroyed).  stage is copied.  NULL + error_set. */
struct comm *comm_staged_create(struct comm *inner, const struct comm_stage *stage);

#ifdef __cplusplus
}
#endif
#endif
