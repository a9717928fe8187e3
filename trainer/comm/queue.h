/* queue.h — the asynchronous collective engine that the host transports (shm, gloo) share:
 * one comm thread per communicator, a FIFO of work items run one at a time in issue order,
 * sequence numbers (1, 2, ... over every collective issued on the comm), the first-error
 * latch (after a failure every later collective fails at once, repeating it), the flight
 * recorder's entries and its dump, the spans, and join/wait.  A transport supplies only
 * "run this collective now, on the calling thread" (struct comm_queue_ops) and builds its
 * struct comm slots from comm_queue_issue / comm_queue_wait / comm_queue_call.
 *
 * Where a collective runs: an asynchronous one (comm_queue_issue) on the comm thread, so it
 * overlaps the caller's work, unless the caller's wait finds it still first in the queue
 * and nothing running (then the waiter runs it: no hand-off).  A blocking one
 * (comm_queue_call) on the caller's thread when nothing is queued or running, else queued
 * behind what is and waited for.  Either way collectives run in issue order, one at a time.
 *
 * NCCL does not use it: its collectives are ordered by a CUDA stream, on the GPU. */
#ifndef DDPPROF_COMM_QUEUE_H
#define DDPPROF_COMM_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

enum comm_op {
    COMM_OP_BROADCAST,
    COMM_OP_ALLREDUCE,
    COMM_OP_REDUCE,
    COMM_OP_ALLGATHER,
    COMM_OP_BARRIER,
};

/* "all-reduce", ... (the flight recorder's kinds); "f32", "f16", "bf16"; "?" otherwise */
const char *comm_op_name(int op);
const char *comm_dtype_name(int dt);

/* One collective, as the transport's run sees it.  Arguments were checked (dtype, root,
 * overflow, NULL buffers). */
struct comm_item {
    enum comm_op op;
    void *buf;        /* in place; all-gather: recv (world * count) */
    const void *send; /* all-gather: this rank's count elements; else NULL */
    size_t count;
    enum comm_dtype dt;
    int root; /* broadcast, reduce; else -1 */
    uint64_t seq;
};

struct comm_queue_ops {
    /* Run it now on the calling thread (the comm thread or a caller), never two at once.
     * 0, or -1 + error_set: the first failure is latched and repeated by every later call. */
    int (*run)(void *ctx, const struct comm_item *it);
    /* Optional: the first failure (message msg), on the thread that saw it, before the
     * flight recorder is dumped; not called once destroy has begun (shm: tell the peers). */
    void (*failed)(void *ctx, const char *msg);
    /* Optional: destroy has begun (comm_queue_cancelled is 1 from now on); make a running
     * collective end soon (shm: tell the peers this rank left; gloo: close the connections).
     * running: whether a collective is running now.  Called without the queue's lock. */
    void (*interrupt)(void *ctx, int running);
    /* 1: comm_queue_call runs a blocking collective on the caller's thread whenever the
     * queue is idle (shm: no hand-off, which on small collectives cost more than the
     * exchange).  0: it is queued (the comm thread woken) and waited for, run by the
     * caller only if the comm thread has not taken it yet (gloo: with inline calls, DDP
     * epochs on 2 CPU ranks were ~25% slower, Gloo's own transport thread sharing the
     * rank's core). */
    int call_inline;
};

struct comm_queue;

/* A queue for rank of world of transport `name` ("shm": its messages say "comm shm"), which
 * calls ops (not copied: static) with ctx.  No thread yet (comm_queue_start).  NULL +
 * error_set. */
struct comm_queue *comm_queue_create(const char *name, int rank, int world,
                                     const struct comm_queue_ops *ops, void *ctx);
/* Start the comm thread (it takes no signals: they stay with the caller's threads).
 * 0, or -1 + error_set. */
int comm_queue_start(struct comm_queue *q);

/* Asynchronous: a handle to pass to comm_queue_wait exactly once, or NULL + error_set. */
struct comm_work *comm_queue_issue(struct comm_queue *q, enum comm_op op, void *buf,
                                   const void *send, size_t count, enum comm_dtype dt,
                                   int root);
/* Waits for w and frees it; span (may be NULL) receives when it ran.  0 or -1 + error_set.
 * Bounded as long as the transport's run is.  The first 200 ms it spins, yielding the core
 * (queue.c QUEUE_SPIN_NS), then sleeps. */
int comm_queue_wait(struct comm_queue *q, struct comm_work *w, struct comm_span *span);
/* Blocking: issue + wait; with ops->call_inline, run on this thread when nothing is
 * queued or running. */
int comm_queue_call(struct comm_queue *q, enum comm_op op, void *buf, const void *send,
                    size_t count, enum comm_dtype dt, int root);

/* 1 once comm_queue_stop has begun: a running collective should give up at once. */
int comm_queue_cancelled(const struct comm_queue *q);

/* Stop: what is queued is dropped, ops->interrupt is called, and the running collective,
 * if any, is waited for (abandon_ms <= 0: however long it takes; else up to abandon_ms,
 * after which it is abandoned to the process's exit).  Then the thread is joined and the
 * queue freed with every handle nobody waited for: 0.  -1 when it was abandoned: the
 * thread still uses q and ctx, so neither may be freed.  NULL: 0. */
int comm_queue_stop(struct comm_queue *q, int abandon_ms);

#ifdef __cplusplus
}
#endif
#endif
