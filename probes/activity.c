/* activity.c — turn mirrored CUPTI activity records into attributed trace rows. */
#include "probes/activity.h"

#include "probes/correlation.h"
#include "common/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct activity_waiting {
    struct activity_record r; /* r.name points at name below */
    int batches;              /* end_batch calls survived */
    char name[ACTIVITY_NAME_MAX];
};

struct activity_proc {
    pthread_mutex_t mu;
    int rank;
    trace_emit_fn emit;
    void *ctx;
    struct corr_map *map;
    struct activity_waiting *waiting; /* FIFO ring of ACTIVITY_MAX_WAITING */
    size_t head, count;
    struct activity_stats st;
};

const char *activity_memcpy_name(int k)
{
    static const char *const names[] = {
        "memcpy", "memcpy HtoD", "memcpy DtoH", "memcpy HtoA", "memcpy AtoH", "memcpy AtoA",
        "memcpy AtoD", "memcpy DtoA", "memcpy DtoD", "memcpy HtoH", "memcpy PtoP"};
    return k >= 0 && k < (int)(sizeof names / sizeof names[0]) ? names[k] : "memcpy";
}

const char *activity_sync_name(int t)
{
    static const char *const names[] = {"sync", "cudaEventSynchronize", "cudaStreamWaitEvent",
                                        "cudaStreamSynchronize", "cudaDeviceSynchronize"};
    return t >= 0 && t < (int)(sizeof names / sizeof names[0]) ? names[t] : "sync";
}

struct activity_proc *activity_proc_create(int rank, trace_emit_fn emit, void *ctx)
{
    struct activity_proc *ap = calloc(1, sizeof *ap);
    if (!ap) {
        error_set("activity processing: out of memory");
        return NULL;
    }
    ap->waiting = calloc(ACTIVITY_MAX_WAITING, sizeof *ap->waiting);
    ap->map = corr_map_create(0);
    if (!ap->waiting || !ap->map) {
        free(ap->waiting);
        corr_map_destroy(ap->map);
        free(ap);
        error_set("activity processing: out of memory");
        return NULL;
    }
    pthread_mutex_init(&ap->mu, NULL);
    ap->rank = rank;
    ap->emit = emit;
    ap->ctx = ctx;
    return ap;
}

/* external_id 0: unattributed */
static void activity_emit(struct activity_proc *ap, const struct activity_record *r,
                          uint64_t external_id)
{
    struct trace_row row = {
        .rank = ap->rank,
        .step = 0,
        .epoch = 0,
        .phase = PROBE_SETUP,
        .bucket = -1,
        .clock = TRACE_CLOCK_CUPTI,
        .start_ns = (int64_t)r->start_ns,
        .end_ns = (int64_t)r->end_ns,
        .bytes = 0,
        .stream = r->stream_id == ACTIVITY_NO_STREAM ? -1 : (int64_t)r->stream_id,
    };
    if (external_id && corr_decode(external_id, &row.phase, &row.step, &row.epoch,
                                   &row.bucket) == 0) {
        ap->st.attributed++;
    } else {
        row.phase = PROBE_SETUP, row.step = 0, row.epoch = 0, row.bucket = -1;
        ap->st.unattributed++;
    }
    switch (r->kind) {
    case ACTIVITY_KERNEL:
        row.kind = TRACE_KIND_KERNEL;
        row.name = r->name && r->name[0] ? r->name : "kernel";
        break;
    case ACTIVITY_MEMCPY:
        row.kind = TRACE_KIND_MEMCPY;
        row.name = activity_memcpy_name(r->subkind);
        row.bytes = r->bytes;
        break;
    case ACTIVITY_MEMSET:
        row.kind = TRACE_KIND_MEMSET;
        row.name = "memset";
        row.bytes = r->bytes;
        break;
    default:
        row.kind = TRACE_KIND_SYNC;
        row.name = activity_sync_name(r->subkind);
        break;
    }
    ap->st.rows++;
    ap->emit(ap->ctx, &row);
}

static struct activity_waiting *activity_waiting_at(struct activity_proc *ap, size_t i)
{
    return &ap->waiting[(ap->head + i) % ACTIVITY_MAX_WAITING];
}

/* Write the oldest waiting record (resolved if its correlation has come since). */
static void activity_pop_oldest(struct activity_proc *ap)
{
    struct activity_waiting *w = activity_waiting_at(ap, 0);
    uint64_t ext = 0;
    corr_map_get(ap->map, w->r.correlation_id, &ext);
    activity_emit(ap, &w->r, ext);
    ap->head = (ap->head + 1) % ACTIVITY_MAX_WAITING;
    ap->count--;
}

static void activity_wait(struct activity_proc *ap, const struct activity_record *r)
{
    if (ap->count == ACTIVITY_MAX_WAITING)
        activity_pop_oldest(ap);
    struct activity_waiting *w = activity_waiting_at(ap, ap->count);
    w->r = *r;
    w->batches = 0;
    size_t n = r->name ? strnlen(r->name, ACTIVITY_NAME_MAX - 1) : 0;
    if (n)
        memcpy(w->name, r->name, n);
    w->name[n] = '\0';
    w->r.name = w->name;
    ap->count++;
}

void activity_proc_add(struct activity_proc *ap, const struct activity_record *r)
{
    pthread_mutex_lock(&ap->mu);
    ap->st.records++;
    switch (r->kind) {
    case ACTIVITY_EXTERNAL_CORRELATION:
        corr_map_put(ap->map, r->correlation_id, r->external_id);
        break;
    case ACTIVITY_KERNEL:
    case ACTIVITY_MEMCPY:
    case ACTIVITY_MEMSET:
    case ACTIVITY_SYNC: {
        uint64_t ext;
        if (r->correlation_id == 0)
            activity_emit(ap, r, 0); /* launched by nothing we can correlate */
        else if (corr_map_get(ap->map, r->correlation_id, &ext))
            activity_emit(ap, r, ext);
        else
            activity_wait(ap, r);
        break;
    }
    case ACTIVITY_API:
        if (r->subkind == ACTIVITY_API_DRIVER)
            ap->st.api_driver++;
        else
            ap->st.api_runtime++;
        break;
    default:
        ap->st.other++;
        break;
    }
    pthread_mutex_unlock(&ap->mu);
}

/* Keep the waiting records in arrival order: resolved or expired ones are written, the
 * rest are compacted to the front. */
static void activity_retry(struct activity_proc *ap, int expire_all)
{
    size_t kept = 0, n = ap->count;
    for (size_t i = 0; i < n; i++) {
        struct activity_waiting *w = activity_waiting_at(ap, i);
        uint64_t ext;
        if (corr_map_get(ap->map, w->r.correlation_id, &ext)) {
            activity_emit(ap, &w->r, ext);
        } else if (expire_all || ++w->batches >= ACTIVITY_MAX_WAIT_BATCHES) {
            activity_emit(ap, &w->r, 0);
        } else {
            struct activity_waiting *dst = activity_waiting_at(ap, kept++);
            if (dst != w) {
                *dst = *w;
                dst->r.name = dst->name;
            }
        }
    }
    ap->count = kept;
}

void activity_proc_end_batch(struct activity_proc *ap)
{
    pthread_mutex_lock(&ap->mu);
    activity_retry(ap, 0);
    pthread_mutex_unlock(&ap->mu);
}

void activity_proc_flush(struct activity_proc *ap)
{
    pthread_mutex_lock(&ap->mu);
    activity_retry(ap, 1);
    pthread_mutex_unlock(&ap->mu);
}

void activity_proc_stats(struct activity_proc *ap, struct activity_stats *out)
{
    pthread_mutex_lock(&ap->mu);
    *out = ap->st;
    pthread_mutex_unlock(&ap->mu);
}

void activity_proc_destroy(struct activity_proc *ap)
{
    if (!ap)
        return;
    pthread_mutex_destroy(&ap->mu);
    corr_map_destroy(ap->map);
    free(ap->waiting);
    free(ap);
}
