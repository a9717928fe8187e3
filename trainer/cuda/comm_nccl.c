/* comm_nccl.c — the `nccl` implementation of struct comm (comm.h) for GPU ranks.
 *
 * One NCCL communicator per process, created from a unique id that rank 0 publishes in
 * the rendezvous store.  Collectives run on the comm's own high-priority stream, ordered
 * after everything already queued on the backend's compute stream by an event, so a
 * bucket's all-reduce overlaps the rest of backward.  wait() makes the compute stream wait
 * for the collective (device side) and also polls it from the host: a collective that
 * fails (ncclCommGetAsyncError) or outlives the timeout aborts the communicator and
 * becomes an error naming the rank, the collective and its sequence number, instead of a
 * hang.  After an abort every call fails at once.
 *
 * The host cannot time a collective, so wait() reports a zero comm_span; the probes time
 * NCCL work with CUDA events on the comm stream. */
#include "comm/comm.h"

#include "backend/backend.h"
#include "cuda/backend_cuda.h"
#include "cuda/cuda_api.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "comm/store.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(NCCL_UNIQUE_ID_BYTES == 128, "cuda_api.h passes the NCCL unique id as 128 bytes");

/* Host polling of a collective: spin this long, then sleep POLL_SLEEP_NS between queries. */
#define POLL_SPIN_NS 2000000LL
#define POLL_SLEEP_NS 100000L

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
    ncclComm_t nccl;
    int timeout_ms;
    uint64_t seq;
    cudaEvent_t ready; /* recorded on the compute stream before each collective */
    struct comm_work *free_list;
    float *barrier_buf; /* one device float */
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

/* An NCCL call that failed while enqueuing: an error naming the rank and the collective. */
static int nc_call_failed(struct nccl_comm *nc, const char *what)
{
    error_wrap("rank %d: nccl %s #%" PRIu64, nc->ops.rank, what, nc->seq + 1);
    ncclResult_t st = ncclSuccess;
    if (nc->nccl && ncclCommGetAsyncError(nc->nccl, &st) == ncclSuccess && st != ncclSuccess &&
        st != ncclInProgress)
        nc_break(nc);
    return -1;
}

/* Compute stream waits for w on the device; the host polls w with the timeout. */
static int nc_wait(struct nccl_comm *nc, struct comm_work *w)
{
    const int rank = nc->ops.rank;
    if (nc->broken)
        return error_set("rank %d: nccl %s #%" PRIu64 ": the communicator was aborted (%s)", rank,
                         w->what, w->seq, nc->broken_msg);
    if (backend_cuda_bind(nc->be) || CHECK_CUDA(cudaStreamWaitEvent(nc->compute, w->done, 0)))
        return error_wrap("rank %d: nccl %s #%" PRIu64, rank, w->what, w->seq);
    const int64_t start = now_ns(), limit = (int64_t)nc->timeout_ms * 1000000LL;
    for (unsigned i = 0;; i++) {
        cudaError_t e = cudaEventQuery(w->done);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady) {
            cuda_check_cuda(e, "cudaEventQuery(done)", __FILE__, __LINE__);
            error_wrap("rank %d: nccl %s #%" PRIu64 " (%zu elements) failed on the device", rank,
                       w->what, w->seq, w->count);
            return nc_break(nc);
        }
        if (i % 64 == 0) {
            ncclResult_t st = ncclSuccess;
            if (ncclCommGetAsyncError(nc->nccl, &st) != ncclSuccess)
                st = ncclInternalError;
            if (st != ncclSuccess && st != ncclInProgress) {
                const char *last = ncclGetLastError(nc->nccl);
                error_set("rank %d: nccl %s #%" PRIu64 " (%zu elements) failed: %s%s%s; "
                          "communicator aborted (did another rank fail?)",
                          rank, w->what, w->seq, w->count, ncclGetErrorString(st),
                          last && last[0] ? ": " : "", last ? last : "");
                return nc_break(nc);
            }
        }
        const int64_t elapsed = now_ns() - start;
        if (elapsed > limit) {
            error_set("rank %d: nccl %s #%" PRIu64 " (%zu elements) did not complete within %d "
                      "ms: another rank is stuck, slow or gone (or issued different "
                      "collectives); communicator aborted",
                      rank, w->what, w->seq, w->count, nc->timeout_ms);
            return nc_break(nc);
        }
        if (elapsed < POLL_SPIN_NS) {
            sched_yield();
        } else {
            struct timespec ts = {0, POLL_SLEEP_NS};
            nanosleep(&ts, NULL);
        }
    }
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

/* ------------------------------------------------------------------ collectives */

static int nccl_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    const char *what = "broadcast";
    ncclDataType_t t = ncclFloat32;
    if (nccl_dtype(dt, &t) || nc_begin(nc, what))
        return -1;
    if (CHECK_NCCL(ncclBroadcast(buf, buf, count, t, root, nc->nccl, nc->stream)))
        return nc_call_failed(nc, what);
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
    if (CHECK_NCCL(ncclAllReduce(buf, buf, count, t, ncclSum, nc->nccl, nc->stream))) {
        nc_call_failed(nc, what);
        return NULL;
    }
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

static int nccl_reduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    const char *what = "reduce";
    ncclDataType_t t = ncclFloat32;
    if (nccl_dtype(dt, &t) || nc_begin(nc, what))
        return -1;
    /* in place: only root's buffer is written */
    if (CHECK_NCCL(ncclReduce(buf, buf, count, t, ncclSum, root, nc->nccl, nc->stream)))
        return nc_call_failed(nc, what);
    return nc_complete(nc, nc_finish(nc, what, count));
}

static int nccl_allgather(struct comm *c, const void *send, void *recv, size_t count,
                          enum comm_dtype dt)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    const char *what = "allgather";
    ncclDataType_t t = ncclFloat32;
    if (nccl_dtype(dt, &t) || nc_begin(nc, what))
        return -1;
    if (CHECK_NCCL(ncclAllGather(send, recv, count, t, nc->nccl, nc->stream)))
        return nc_call_failed(nc, what);
    return nc_complete(nc, nc_finish(nc, what, count));
}

/* every rank's one-float all-reduce has completed only once all ranks reached it */
static int nccl_barrier(struct comm *c)
{
    struct nccl_comm *nc = (struct nccl_comm *)c;
    const char *what = "barrier";
    if (nc_begin(nc, what))
        return -1;
    if (CHECK_NCCL(ncclAllReduce(nc->barrier_buf, nc->barrier_buf, 1, ncclFloat32, ncclSum,
                                 nc->nccl, nc->stream)))
        return nc_call_failed(nc, what);
    return nc_complete(nc, nc_finish(nc, what, 1));
}

/* Waits for nothing: a communicator with work still queued or an error is aborted, an
 * idle healthy one destroyed (a local operation without ncclCommFinalize). */
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
        if (idle && st == ncclSuccess)
            ncclCommDestroy(nc->nccl);
        else
            ncclCommAbort(nc->nccl);
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
        CHECK_CUDA(cudaEventCreateWithFlags(&nc->ready, cudaEventDisableTiming)) ||
        CHECK_CUDA(cudaMalloc((void **)&nc->barrier_buf, sizeof(float))) ||
        CHECK_CUDA(cudaMemsetAsync(nc->barrier_buf, 0, sizeof(float), nc->compute)))
        goto fail;
    /* ncclCommInitRank blocks until every rank has joined: meet at the store first, where
     * waiting is bounded, so a missing rank is a timeout and not a hang */
    if (store && world > 1 && store_barrier(store, key))
        goto fail;
    if (CHECK_NCCL(ncclCommInitRank(&nc->nccl, world, uid, rank))) {
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
