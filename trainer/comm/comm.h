/* comm.h — the collectives ops table (struct comm).
 *
 * One implementation per transport: `shm` (comm_shm.c) for CPU ranks on one node, driven
 * by a comm thread so all-reduce overlaps backward; `nccl` (trainer/comm/cuda/comm_nccl.c) for
 * GPUs.  Buffers are device pointers of the rank's backend (host memory for shm).  Every wait has the
 * timeout given at creation; a timeout is an error (error_set) naming the rank, the
 * collective and its sequence number, never a hang.
 *
 * All ranks must issue the same collectives in the same order (as NCCL and gloo).
 *
 * The host transports (shm, gloo) share one asynchronous engine, comm/queue.h (the comm
 * thread, issue order, sequence numbers, the first error, the flight record); each only
 * runs a collective.  trainer/device.c's registry lists every transport for --comm. */
#ifndef DDPPROF_COMM_H
#define DDPPROF_COMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum comm_dtype { COMM_F32 = 0, COMM_F16 = 1, COMM_BF16 = 2 };

struct comm_work; /* an in-flight asynchronous collective */

/* When a transport executed a collective, on CLOCK_MONOTONIC nanoseconds; both 0 where
 * the transport cannot tell from the host (nccl: the probes time it with CUDA events). */
struct comm_span {
    int64_t start_ns, end_ns;
};

struct comm {
    const char *name; /* "shm", "nccl" */
    int rank, world;

    /* in place; root's buffer is copied to all ranks. 0 or -1 (error_set). */
    int (*broadcast)(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root);
    /* asynchronous in-place sum.  Returns a handle (NULL + error_set on failure) to pass to
     * wait exactly once; collectives complete in issue order.  buf must stay untouched
     * until wait returns.  fp16/bf16 buffers are summed in fp32 and rounded once. */
    struct comm_work *(*allreduce_async)(struct comm *c, void *buf, size_t count,
                                         enum comm_dtype dt);
    /* waits (up to the timeout) and frees the handle; span (may be NULL) receives when
     * the collective ran.  0 or -1 (error_set) */
    int (*wait)(struct comm *c, struct comm_work *work, struct comm_span *span);
    /* sum into root's buffer (other ranks' buffers are unchanged) */
    int (*reduce)(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root);
    /* recv (world*count) = concatenation of every rank's send (count), rank order */
    int (*allgather)(struct comm *c, const void *send, void *recv, size_t count,
                     enum comm_dtype dt);
    int (*barrier)(struct comm *c);
    /* The stream the collectives run on (a cudaStream_t as void *, owned by the comm), for
     * the probes' all-reduce timing; NULL for shm. */
    void *(*stream)(struct comm *c);
    /* Optional (NULL where the comm has no stream of its own).  Makes stream() wait for the
     * work queued so far on the backend's compute stream, so that what is queued on
     * stream() from now on, the probes' start event first, runs when the next collective
     * can start rather than while backward is still computing its input.  The DDP reducer
     * calls it right before a bucket's launch is observed; collectives order themselves
     * anyway (a second wait on the same point costs nothing).  0 or -1 (error_set). */
    int (*order)(struct comm *c);
    void (*destroy)(struct comm *c); /* waits for nothing; releases everything */
    /* Optional (NULL: comm_allreduce is allreduce_async + wait).  A blocking all-reduce
     * with allreduce_async's contract, for a transport that can run it more cheaply on the
     * caller's thread (shm, when nothing else is queued).  Last, so that every transport's
     * initialisation leaves it NULL unless it sets it. */
    int (*allreduce)(struct comm *c, void *buf, size_t count, enum comm_dtype dt);

    /* --- stream-ordered completion (nccl; NULL where every wait blocks the host anyway:
     * shm, gloo, staged).  As PyTorch's work.wait() on a CUDA collective: the backend's
     * compute stream waits for the collective on the device and the host runs ahead.  A
     * collective that fails or never completes after a join is found by the next settle,
     * which every host read of a result (be->download) must follow. --- */
    /* as wait, without blocking the host: work queued on the backend's compute stream from
     * now on runs after the collective; frees the handle.  0, or -1 (error_set) for an
     * error already known (an earlier failure, a device error seen without waiting). */
    int (*join)(struct comm *c, struct comm_work *work);
    /* allgather's contract, joined instead of waited for (host not blocked) */
    int (*allgather_join)(struct comm *c, const void *send, void *recv, size_t count,
                          enum comm_dtype dt);
    /* blocks the host until every collective issued so far has completed, up to the
     * timeout: then an error naming the rank, the last collective issued and its sequence
     * number (communicator aborted).  Cheap when nothing was issued since the last one. */
    int (*settle)(struct comm *c);
    /* Optional (NULL: comm_allreduce_join is allreduce_async + join, or comm_allreduce).
     * comm_allreduce_join's contract in one call, for a wrapper that sees the whole
     * collective (trainer/comm_probe.c); no transport sets it. */
    int (*allreduce_join)(struct comm *c, void *buf, size_t count, enum comm_dtype dt);
    /* Optional (NULL: nothing to do).  For a transport whose own threads run on the cores
     * of the rank's compute (gloo's: its event loop and the comm thread): lets them have
     * the core now if they can run.  The DDP reducer calls it after each gradient while an
     * all-reduce it issued may be under way, so that a collective progresses between the
     * layers of backward rather than when the scheduler next takes the core from the
     * compute: gloo's loop thread, SCHED_BATCH, never preempts it (comm_gloo.cc), and a
     * ConvNet bucket of 62 KB issued 10 ms before backward's end took 7.5-9.6 ms at
     * 1000 Mbit/s (0.5 ms on the wire) and ended ~1 ms before backward did
     * (results/shaped_grid_20261202). */
    void (*progress)(struct comm *c);
};

/* Blocking all-reduce: c->allreduce where the transport has one, else allreduce_async +
 * wait. */
int comm_allreduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt);

/* Stream-ordered forms (see join): the result is there for work queued on the backend's
 * compute stream afterwards; the host reads it only after comm_settle.  Where the
 * transport has no join they are the blocking forms (wait, comm_allreduce, allgather). */
int comm_join(struct comm *c, struct comm_work *work);
int comm_allreduce_join(struct comm *c, void *buf, size_t count, enum comm_dtype dt);
int comm_allgather_join(struct comm *c, const void *send, void *recv, size_t count,
                        enum comm_dtype dt);
/* c->settle where the transport has one, else 0 (its waits already blocked); c may be
 * NULL (no comm: nothing to settle) */
int comm_settle(struct comm *c);

size_t comm_dtype_size(enum comm_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
