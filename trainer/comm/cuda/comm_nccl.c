/* comm_nccl.c — the `nccl` implementation of struct comm (comm.h) for GPU ranks.
 *
 * One NCCL communicator per process, created from a unique id that rank 0 publishes in
 * the rendezvous store.  Collectives run on the comm's own high-priority stream, ordered
 * after everything already queued on the backend's compute stream by an event, so a
 * bucket's all-reduce overlaps the rest of backward (the order slot does that ordering
 * ahead of time, for the probes' start event).
 *
 * join() (the DDP step's waits: buckets, SyncBatchNorm, the loss and found_inf) only makes
 * the compute stream wait for the collective (device side), as PyTorch's work.wait() on a
 * CUDA collective; the host runs ahead and settle(), called before each host read of a
 * result, waits on the host for everything issued so far, with the timeout below.
 *
 * wait() makes the compute stream wait for the collective (device side) and also waits
 * for it on the host, without spinning: a host function queued on a private watch stream
 * behind the collective's event signals a condition variable, which the host waits on in
 * 20 ms slices, checking ncclCommGetAsyncError and the event's status between slices (so
 * CUPTI sees a handful of calls per wait, not a query loop).  A collective that fails (as
 * it is enqueued or later) or outlives the timeout aborts the communicator (ncclCommAbort)
 * and becomes an error naming the rank, the collective and its sequence number, instead of
 * a hang.  After an abort every call fails at once, waits for collectives issued before it
 * included.
 *
 * The communicator is non-blocking (ncclConfig_t blocking = 0): no NCCL call blocks inside
 * NCCL.  Init, finalize and any collective enqueue that returns ncclInProgress are polled
 * through ncclCommGetAsyncError against the comm's timeout (comm_poll.h), so a rank that
 * never joins is a timeout naming the call, not a hang; one that fails says NCCL's error
 * string and its last error (ncclGetLastError: which peer, which connection).
 *
 * destroy: an idle, healthy communicator is finalized (ncclCommFinalize, polled until NCCL
 * has flushed its work, up to the timeout) and then destroyed; one with work queued, an
 * error or a finalize that does not settle is aborted.
 *
 * The host cannot time a collective, so wait() reports a zero comm_span; the probes time
 * NCCL work with CUDA events on the comm stream. */
#include "comm/comm.h"

#include "backend/backend.h"
#include "comm/comm_poll.h"
#include "cuda/backend_cuda.h"
#include "cuda/cuda_api.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "comm/store.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(NCCL_UNIQUE_ID_BYTES == 128, "cuda_api.h passes the NCCL unique id as 128 bytes");

/* A host wait sleeps at most this long between looks at NCCL's and the event's status. */
#define WAIT_SLICE_NS 20000000LL

struct comm_work {
    cudaEvent_t done; /* recorded on the comm stream after the collective */
    uint64_t seq;
    const char *what;
    size_t count;
    struct comm_work *next; /* free list */
};

struct nccl_comm {
    struct comm ops; /* first: a struct comm * is a struct nccl_comm * */
    struct backend *be;
    cudaStream_t compute, stream;
    cudaStream_t watch; /* host functions that wake waiters, behind each waited event */
    ncclComm_t nccl;
    int timeout_ms;
    uint64_t seq;
    cudaEvent_t ready; /* recorded on the compute stream before each collective */
    struct comm_work *free_list;
    float *barrier_buf; /* one device float */
    uint64_t settled_seq;  /* every collective up to this one is known complete */
    const char *last_what; /* the last collective issued, for settle's message */
    size_t last_count;
    int broken;
    char broken_msg[768];
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int nccl_dtype(enum comm_dtype dt, ncclDataType_t *out)
{
    switch (dt) {
    case COMM_F32:
        *out = ncclFloat32;
        return 0;
    case COMM_F16:
        *out = ncclFloat16;
        return 0;
    case COMM_BF16:
        *out = ncclBfloat16;
        return 0;
    }
    return error_set("nccl comm: unknown dtype %d", (int)dt);
}

/* Abort the communicator (nothing of it is used again) and keep why, already in
 * error_get(), for every later call. */
static int nc_break(struct nccl_comm *nc)
{
    if (nc->nccl) {
        ncclCommAbort(nc->nccl);
        nc->nccl = NULL;
    }
    if (!nc->broken) {
        nc->broken = 1;
        snprintf(nc->broken_msg, sizeof nc->broken_msg, "%s", error_get());
    }
    return -1;
}

/* Order the next collective after the compute stream's queued work. */
static int nc_begin(struct nccl_comm *nc, const char *what)
{
    if (nc->broken)
        return error_set("rank %d: nccl %s #%" PRIu64 ": the communicator was aborted earlier "
                         "(%s)",
                         nc->ops.rank, what, nc->seq + 1, nc->broken_msg);
    if (backend_cuda_bind(nc->be) || CHECK_CUDA(cudaEventRecord(nc->ready, nc->compute)) ||
        CHECK_CUDA(cudaStreamWaitEvent(nc->stream, nc->ready, 0)))
        return error_wrap("rank %d: nccl %s #%" PRIu64, nc->ops.rank, what, nc->seq + 1);
    return 0;
}

/* The order slot: the same wait, ahead of the collective, so that the probes' start event
 * recorded next on nc->stream follows it (the collective then waits again on an event
 * that is already complete by the time the stream reaches it). */
static int nccl_order(struct comm *c)
{
    return nc_begin((struct nccl_comm *)c, "stream ordering");
}

/* The handle of the collective just enqueued (NULL + error_set). */
static struct comm_work *nc_finish(struct nccl_comm *nc, const char *what, size_t count)
{
    struct comm_work *w = nc->free_list;
    if (w) {
        nc->free_list = w->next;
    } else {
        w = calloc(1, sizeof *w);
        if (!w) {
            error_set("rank %d: nccl %s: out of memory", nc->ops.rank, what);
            return NULL;
        }
        if (CHECK_CUDA(cudaEventCreateWithFlags(&w->done, cudaEventDisableTiming))) {
            free(w);
            error_wrap("rank %d: nccl %s", nc->ops.rank, what);
            return NULL;
        }
    }
    w->seq = ++nc->seq;
    w->what = what;
    w->count = count;
    nc->last_what = what;
    nc->last_count = count;
    w->next = NULL;
    if (CHECK_CUDA(cudaEventRecord(w->done, nc->stream))) {
        error_wrap("rank %d: nccl %s #%" PRIu64, nc->ops.rank, what, w->seq);
        w->next = nc->free_list;
        nc->free_list = w;
        return NULL;
    }
    return w;
}

static void nc_release(struct nccl_comm *nc, struct comm_work *w)
{
    w->next = nc->free_list;
    nc->free_list = w;
}

/* An NCCL call that failed while enqueuing: an error naming the rank and the collective,
 * and the communicator aborted even where NCCL still calls it healthy.  This rank has not
 * issued a collective the others have, so whatever it issued next would be paired with
 * the wrong collective on the other ranks: a hang, or data summed into the wrong buffers.
 * Aborted, every later call fails at once, and the other ranks fail (or time out) in the
 * collective this one is missing. */
static int nc_call_failed(struct nccl_comm *nc, const char *what)
{
    error_wrap("rank %d: nccl %s #%" PRIu64, nc->ops.rank, what, nc->seq + 1);
    return nc_break(nc);
}

/* NCCL's asynchronous state as comm_poll_until asks it (ctx: the ncclComm_t). */
static enum comm_poll_state nc_async_state(void *ctx)
{
    ncclResult_t st = ncclSuccess;
    if (ncclCommGetAsyncError((ncclComm_t)ctx, &st) != ncclSuccess)
        return COMM_POLL_FAILED;
    return st == ncclSuccess ? COMM_POLL_DONE
           : st == ncclInProgress ? COMM_POLL_IN_PROGRESS
                                  : COMM_POLL_FAILED;
}

/* The communicator is non-blocking (blocking = 0), so a call may return ncclInProgress
 * while NCCL is still enqueuing it: poll ncclCommGetAsyncError until it is done, failed
 * or the timeout has passed, before any other NCCL call on the communicator (NCCL's rule
 * for non-blocking communicators).  r is what the call returned.  0, or -1 (error_set
 * naming rank, call and sequence number; communicator aborted where it is broken). */
static int nc_call_done(struct nccl_comm *nc, ncclResult_t r, const char *call, const char *what)
{
    if (r == ncclSuccess)
        return 0;
    if (r != ncclInProgress) {
        cuda_check_nccl(r, call, __FILE__, __LINE__);
        return nc_call_failed(nc, what);
    }
    const enum comm_poll_state st = comm_poll_until(nc_async_state, nc->nccl, nc->timeout_ms,
                                                    NULL);
    if (st == COMM_POLL_DONE)
        return 0;
    ncclResult_t err = ncclSuccess;
    ncclCommGetAsyncError(nc->nccl, &err);
    const char *last = st == COMM_POLL_IN_PROGRESS ? "" : ncclGetLastError(nc->nccl);
    error_set("rank %d: nccl %s #%" PRIu64 ": %s %s (%s%s%s); communicator aborted", nc->ops.rank,
              what, nc->seq + 1, call,
              st == COMM_POLL_IN_PROGRESS ? "was still in progress after the timeout"
                                          : "failed",
              st == COMM_POLL_IN_PROGRESS ? "did another rank stop?" : ncclGetErrorString(err),
              last && last[0] ? ": " : "", last ? last : "");
    return nc_break(nc);
}

/* The wake-up of one host wait: a host function queued behind the collective sets done.
 * Shared by the waiter and CUDA's callback thread, freed by whichever lets go last: after
 * a timeout the host function runs when the aborted collective drains (or never, on a
 * hung device: then this small struct is leaked, once per failed wait). */
struct nc_signal {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    int done, refs;
};

static struct nc_signal *nc_signal_create(void)
{
    struct nc_signal *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    s->refs = 2; /* the waiter and the host function */
    return s;
}

/* Let go of s (under its lock the last one out frees it). */
static void nc_signal_release(struct nc_signal *s)
{
    pthread_mutex_lock(&s->mu);
    const int left = --s->refs;
    pthread_mutex_unlock(&s->mu);
    if (left == 0) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
    }
}

/* The host function (CUDA's callback thread; no CUDA calls allowed here). */
static void CUDART_CB nc_signal_fire(void *arg)
{
    struct nc_signal *s = arg;
    pthread_mutex_lock(&s->mu);
    s->done = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    nc_signal_release(s);
}

/* NCCL's view between slices: 0, or -1 after error_set + abort. */
static int nc_check_async(struct nccl_comm *nc, const struct comm_work *w)
{
    ncclResult_t st = ncclSuccess;
    if (ncclCommGetAsyncError(nc->nccl, &st) != ncclSuccess)
        st = ncclInternalError;
    if (st == ncclSuccess || st == ncclInProgress)
        return 0;
    const char *last = ncclGetLastError(nc->nccl);
    error_set("rank %d: nccl %s #%" PRIu64 " (%zu elements) failed: %s%s%s; communicator "
              "aborted (did another rank fail?)",
              nc->ops.rank, w->what, w->seq, w->count, ncclGetErrorString(st),
              last && last[0] ? ": " : "", last ? last : "");
    return nc_break(nc);
}

/* The event's status: 1 complete, 0 not yet, -1 after error_set + abort (a device error). */
static int nc_query(struct nccl_comm *nc, const struct comm_work *w)
{
    cudaError_t e = cudaEventQuery(w->done);
    if (e == cudaSuccess)
        return 1;
    if (e == cudaErrorNotReady)
        return 0;
    cuda_check_cuda(e, "cudaEventQuery(done)", __FILE__, __LINE__);
    error_wrap("rank %d: nccl %s #%" PRIu64 " (%zu elements) failed on the device", nc->ops.rank,
               w->what, w->seq, w->count);
    return nc_break(nc);
}

/* The compute stream waits for w on the device (the host does not). */
static int nc_stream_wait(struct nccl_comm *nc, const struct comm_work *w)
{
    if (nc->broken)
        return error_set("rank %d: nccl %s #%" PRIu64 ": the communicator was aborted (%s)",
                         nc->ops.rank, w->what, w->seq, nc->broken_msg);
    if (backend_cuda_bind(nc->be) || CHECK_CUDA(cudaStreamWaitEvent(nc->compute, w->done, 0)))
        return error_wrap("rank %d: nccl %s #%" PRIu64, nc->ops.rank, w->what, w->seq);
    return 0;
}

/* The host sleeps until w completes, an error shows, or the timeout. */
static int nc_host_wait(struct nccl_comm *nc, struct comm_work *w)
{
    const int rank = nc->ops.rank;
    int q = nc_query(nc, w); /* already done (often, for all but the last bucket) */
    if (q != 0)
        return q > 0 ? 0 : -1;
    struct nc_signal *sig = nc_signal_create();
    if (!sig) {
        error_set("rank %d: nccl %s #%" PRIu64 ": out of memory", rank, w->what, w->seq);
        return nc_break(nc);
    }
    if (CHECK_CUDA(cudaStreamWaitEvent(nc->watch, w->done, 0)) ||
        CHECK_CUDA(cudaLaunchHostFunc(nc->watch, nc_signal_fire, sig))) {
        free(sig); /* the host function was not queued: nobody else holds it */
        error_wrap("rank %d: nccl %s #%" PRIu64, rank, w->what, w->seq);
        return nc_break(nc);
    }
    const int64_t deadline = now_ns() + (int64_t)nc->timeout_ms * 1000000LL;
    int rc = 0;
    for (;;) {
        int64_t until = now_ns() + WAIT_SLICE_NS;
        if (until > deadline)
            until = deadline;
        pthread_mutex_lock(&sig->mu);
        if (!sig->done) {
            struct timespec ts = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};
            pthread_cond_timedwait(&sig->cv, &sig->mu, &ts); /* spurious wake-ups: loop */
        }
        const int done = sig->done;
        pthread_mutex_unlock(&sig->mu);
        if (done)
            break;
        if (nc_check_async(nc, w) || (q = nc_query(nc, w)) < 0) {
            rc = -1;
            break;
        }
        if (q > 0) /* complete; the host function is on its way */
            break;
        if (now_ns() >= deadline) {
            error_set("rank %d: nccl %s #%" PRIu64 " (%zu elements) did not complete within %d "
                      "ms: another rank is stuck, slow or gone (or issued different "
                      "collectives); communicator aborted",
                      rank, w->what, w->seq, w->count, nc->timeout_ms);
            rc = nc_break(nc);
            break;
        }
    }
    nc_signal_release(sig);
    return rc;
}

/* Compute stream waits for w on the device; the host sleeps until w completes, an error
 * shows, or the timeout. */
static int nc_wait(struct nccl_comm *nc, struct comm_work *w)
{
    if (nc_stream_wait(nc, w) || nc_host_wait(nc, w))
        return -1;
    if (w->seq > nc->settled_seq) /* collectives complete in issue order */
        nc->settled_seq = w->seq;
    return 0;
}

/* enqueue + wait, for the blocking collectives */
static int nc_complete(struct nccl_comm *nc, struct comm_work *w)
{
    if (!w)
        return -1;
    int rc = nc_wait(nc, w);
    nc_release(nc, w);
    return rc;
}

/* join: the compute stream waits for w on the device; the host only looks (without
 * waiting) for an error NCCL or the device already reports.  Frees w. */
static int nc_join(struct nccl_comm *nc, struct comm_work *w)
{
    if (!w)
        return -1;
    int rc = nc_stream_wait(nc, w);
    if (rc == 0 && (nc_check_async(nc, w) || nc_query(nc, w) < 0))
        rc = -1;
    nc_release(nc, w);
    return rc;
}

/* ------------------------------------------------------------------ collectives */

static int nccl_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    const char *what = "broadcast";
    ncclDataType_t t = ncclFloat32;
    if (nccl_dtype(dt, &t) || nc_begin(nc, what))
        return -1;
    if (nc_call_done(nc, ncclBroadcast(buf, buf, count, t, root, nc->nccl, nc->stream),
                     "ncclBroadcast", what))
        return -1;
    return nc_complete(nc, nc_finish(nc, what, count));
}

static struct comm_work *nccl_allreduce_async(struct comm *c, void *buf, size_t count,
                                              enum comm_dtype dt)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    const char *what = "allreduce";
    ncclDataType_t t = ncclFloat32;
    if (nccl_dtype(dt, &t) || nc_begin(nc, what))
        return NULL;
    if (nc_call_done(nc, ncclAllReduce(buf, buf, count, t, ncclSum, nc->nccl, nc->stream),
                     "ncclAllReduce", what))
        return NULL;
    return nc_finish(nc, what, count);
}

static int nccl_wait(struct comm *c, struct comm_work *work, struct comm_span *span)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    if (span)
        span->start_ns = span->end_ns = 0; /* timed on the device by the probes */
    if (!work)
        return error_set("rank %d: nccl wait: no collective (NULL handle)", c->rank);
    return nc_complete(nc, work);
}

static int nccl_join(struct comm *c, struct comm_work *work)
{
    if (!work)
        return error_set("rank %d: nccl join: no collective (NULL handle)", c->rank);
    return nc_join((struct nccl_comm *)c, work);
}

/* Every collective issued so far is on nc->stream, in issue order: an event recorded
 * there now completes after all of them.  The host waits for it as for a collective (20 ms
 * slices, async errors, the timeout); the message names the last collective issued. */
static int nccl_settle(struct comm *c)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    if (nc->broken)
        return error_set("rank %d: nccl %s #%" PRIu64 ": the communicator was aborted earlier "
                         "(%s)",
                         c->rank, nc->last_what ? nc->last_what : "collective", nc->seq,
                         nc->broken_msg);
    if (nc->settled_seq == nc->seq)
        return 0;
    const uint64_t upto = nc->seq;
    struct comm_work *w = nc->free_list;
    if (w) {
        nc->free_list = w->next;
    } else {
        w = calloc(1, sizeof *w);
        if (!w || CHECK_CUDA(cudaEventCreateWithFlags(&w->done, cudaEventDisableTiming))) {
            free(w);
            return error_set("rank %d: nccl settle: cannot create an event (%s)", c->rank,
                             error_get());
        }
    }
    w->seq = upto;
    w->what = nc->last_what ? nc->last_what : "collective";
    w->count = nc->last_count;
    w->next = NULL;
    int rc = backend_cuda_bind(nc->be) || CHECK_CUDA(cudaEventRecord(w->done, nc->stream))
                 ? error_wrap("rank %d: nccl settle after %s #%" PRIu64, c->rank, w->what, upto)
                 : nc_host_wait(nc, w);
    if (rc == 0)
        nc->settled_seq = upto;
    nc_release(nc, w);
    return rc;
}

static int nccl_reduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    const char *what = "reduce";
    ncclDataType_t t = ncclFloat32;
    if (nccl_dtype(dt, &t) || nc_begin(nc, what))
        return -1;
    /* in place: only root's buffer is written */
    if (nc_call_done(nc, ncclReduce(buf, buf, count, t, ncclSum, root, nc->nccl, nc->stream),
                     "ncclReduce", what))
        return -1;
    return nc_complete(nc, nc_finish(nc, what, count));
}

/* an all-gather enqueued on the comm stream: its handle, or NULL (error_set) */
static struct comm_work *nc_allgather(struct nccl_comm *nc, const void *send, void *recv,
                                      size_t count, enum comm_dtype dt)
{
    const char *what = "allgather";
    ncclDataType_t t = ncclFloat32;
    if (nccl_dtype(dt, &t) || nc_begin(nc, what))
        return NULL;
    if (nc_call_done(nc, ncclAllGather(send, recv, count, t, nc->nccl, nc->stream),
                     "ncclAllGather", what))
        return NULL;
    return nc_finish(nc, what, count);
}

static int nccl_allgather(struct comm *c, const void *send, void *recv, size_t count,
                          enum comm_dtype dt)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    return nc_complete(nc, nc_allgather(nc, send, recv, count, dt));
}

static int nccl_allgather_join(struct comm *c, const void *send, void *recv, size_t count,
                               enum comm_dtype dt)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    return nc_join(nc, nc_allgather(nc, send, recv, count, dt));
}

/* every rank's one-float all-reduce has completed only once all ranks reached it */
static int nccl_barrier(struct comm *c)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    const char *what = "barrier";
    if (nc_begin(nc, what))
        return -1;
    if (nc_call_done(nc, ncclAllReduce(nc->barrier_buf, nc->barrier_buf, 1, ncclFloat32,
                                       ncclSum, nc->nccl, nc->stream),
                     "ncclAllReduce", what))
        return -1;
    return nc_complete(nc, nc_finish(nc, what, 1));
}

/* ncclCommFinalize on the non-blocking communicator returns at once (ncclInProgress) while
 * NCCL flushes its work: poll ncclCommGetAsyncError (up to the timeout) until it leaves
 * ncclInProgress.  1 when it is quiescent and healthy, else 0. */
static int nc_finalized(struct nccl_comm *nc)
{
    const ncclResult_t r = ncclCommFinalize(nc->nccl);
    if (r != ncclSuccess && r != ncclInProgress)
        return 0;
    return comm_poll_until(nc_async_state, nc->nccl, nc->timeout_ms, NULL) == COMM_POLL_DONE;
}

/* Waits for nothing of the device: a communicator with work queued or an error is
 * aborted; an idle healthy one is finalized (NCCL flushes its own work, polled against
 * the timeout), then destroyed, or aborted if finalizing fails or does not settle within
 * the timeout.  ncclCommAbort frees the communicator, so nothing is polled after it. */
static void nccl_destroy(struct comm *c)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    if (!nc)
        return;
    backend_cuda_bind(nc->be);
    if (nc->nccl) {
        ncclResult_t st = ncclSuccess;
        const int idle = nc->stream && cudaStreamQuery(nc->stream) == cudaSuccess;
        if (ncclCommGetAsyncError(nc->nccl, &st) != ncclSuccess)
            st = ncclInternalError;
        if (idle && st == ncclSuccess && nc_finalized(nc))
            ncclCommDestroy(nc->nccl);
        else
            ncclCommAbort(nc->nccl);
        nc->nccl = NULL;
    }
    while (nc->free_list) {
        struct comm_work *w = nc->free_list;
        nc->free_list = w->next;
        cudaEventDestroy(w->done);
        free(w);
    }
    if (nc->ready)
        cudaEventDestroy(nc->ready);
    cudaFree(nc->barrier_buf);
    if (nc->stream)
        cudaStreamDestroy(nc->stream);
    if (nc->watch) /* host functions still queued run when their events complete */
        cudaStreamDestroy(nc->watch);
    (void)cudaGetLastError();
    free(nc);
}

static void *nccl_stream(struct comm *c) { return ((struct nccl_comm *)c)->stream; }

/* ------------------------------------------------------------------ creation */

int comm_nccl_exchange_id(struct store *store, int rank, const char *key,
                          unsigned char id[128])
{
    if (!store || !key)
        return error_set("comm_nccl_exchange_id: need a store and a key");
    if (rank == 0) {
        ncclUniqueId u;
        if (CHECK_NCCL(ncclGetUniqueId(&u)))
            return error_wrap("rank 0: creating the NCCL unique id");
        memcpy(id, u.internal, NCCL_UNIQUE_ID_BYTES);
        if (store_set(store, key, id, NCCL_UNIQUE_ID_BYTES))
            return error_wrap("rank 0: publishing the NCCL unique id");
        return 0;
    }
    size_t len = 0;
    if (store_get(store, key, id, NCCL_UNIQUE_ID_BYTES, &len))
        return error_wrap("rank %d: waiting for rank 0's NCCL unique id", rank);
    if (len != NCCL_UNIQUE_ID_BYTES)
        return error_set("rank %d: store key '%s' holds %zu bytes, not a %d-byte NCCL unique "
                         "id: are all ranks running the same ddpprof?",
                         rank, key, len, NCCL_UNIQUE_ID_BYTES);
    return 0;
}

static const struct comm nccl_comm_ops = {
    .name = "nccl",
    .broadcast = nccl_broadcast,
    .allreduce_async = nccl_allreduce_async,
    .wait = nccl_wait,
    .reduce = nccl_reduce,
    .allgather = nccl_allgather,
    .barrier = nccl_barrier,
    .stream = nccl_stream,
    .order = nccl_order,
    .destroy = nccl_destroy,
    .join = nccl_join,
    .allgather_join = nccl_allgather_join,
    .settle = nccl_settle,
};

struct comm *comm_nccl_create(struct backend *be, struct store *store, int rank, int world,
                              int timeout_ms)
{
    static int generation; /* the n-th communicator of this process: same on every rank */
    if (!backend_cuda_is(be)) {
        error_set("comm_nccl_create: rank %d needs a CUDA backend (got '%s'): NCCL runs on "
                  "GPUs only; use --cpu N for shared-memory collectives",
                  rank, be ? be->name : "none");
        return NULL;
    }
    if (world < 1 || rank < 0 || rank >= world || timeout_ms < 1 || (!store && world > 1)) {
        error_set("comm_nccl_create: rank %d of world %d, timeout %d ms%s: need 0 <= rank < "
                  "world, a positive timeout and a store for more than one rank",
                  rank, world, timeout_ms, store ? "" : ", no store");
        return NULL;
    }
    char key[32];
    if (generation == 0)
        snprintf(key, sizeof key, "nccl_id");
    else
        snprintf(key, sizeof key, "nccl_id.%d", generation);
    generation++;

    unsigned char id[NCCL_UNIQUE_ID_BYTES];
    ncclUniqueId uid;
    if (store) {
        if (comm_nccl_exchange_id(store, rank, key, id))
            return NULL;
        memcpy(uid.internal, id, sizeof id);
    } else if (CHECK_NCCL(ncclGetUniqueId(&uid))) {
        error_wrap("rank 0: creating the NCCL unique id");
        return NULL;
    }

    struct nccl_comm *nc = calloc(1, sizeof *nc);
    if (!nc) {
        error_set("rank %d: comm_nccl_create: out of memory", rank);
        return NULL;
    }
    nc->ops = nccl_comm_ops;
    nc->ops.rank = rank;
    nc->ops.world = world;
    nc->be = be;
    nc->compute = backend_cuda_stream(be);
    nc->timeout_ms = timeout_ms;
    int least = 0, greatest = 0;
    if (backend_cuda_bind(be) ||
        CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest)) ||
        CHECK_CUDA(cudaStreamCreateWithPriority(&nc->stream, cudaStreamNonBlocking, greatest)) ||
        CHECK_CUDA(cudaStreamCreateWithFlags(&nc->watch, cudaStreamNonBlocking)) ||
        CHECK_CUDA(cudaEventCreateWithFlags(&nc->ready, cudaEventDisableTiming)) ||
        CHECK_CUDA(cudaMalloc((void **)&nc->barrier_buf, sizeof(float))) ||
        CHECK_CUDA(cudaMemsetAsync(nc->barrier_buf, 0, sizeof(float), nc->compute)))
        goto fail;
    /* meet at the store first, where waiting is bounded, so a missing rank is named there */
    if (store && world > 1 && store_barrier(store, key))
        goto fail;
    /* non-blocking (blocking = 0): init, finalize and any call may return ncclInProgress,
     * and every wait for NCCL is our bounded poll of ncclCommGetAsyncError, never a call
     * that blocks inside NCCL */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&nc->nccl, world, uid, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        cuda_check_nccl(r, "ncclCommInitRankConfig(blocking = 0)", __FILE__, __LINE__);
        if (nc->nccl)
            ncclCommAbort(nc->nccl);
        nc->nccl = NULL;
        goto fail;
    }
    const enum comm_poll_state st = comm_poll_until(nc_async_state, nc->nccl, timeout_ms, NULL);
    if (st != COMM_POLL_DONE) {
        ncclResult_t err = ncclSuccess;
        ncclCommGetAsyncError(nc->nccl, &err);
        const char *last = st == COMM_POLL_IN_PROGRESS ? "" : ncclGetLastError(nc->nccl);
        error_set("ncclCommInitRankConfig %s (%s%s%s)",
                  st == COMM_POLL_IN_PROGRESS ? "did not complete within the timeout"
                                              : "failed",
                  st == COMM_POLL_IN_PROGRESS ? "did every rank start?" : ncclGetErrorString(err),
                  last && last[0] ? ": " : "", last ? last : "");
        ncclCommAbort(nc->nccl);
        nc->nccl = NULL;
        goto fail;
    }
    return &nc->ops;
fail:
    error_wrap("rank %d: creating the NCCL communicator (world %d, device %d)", rank, world,
               backend_cuda_device(be));
    nccl_destroy(&nc->ops);
    return NULL;
}
