/* reducer.c — DDP gradient buckets overlapped with backward (see reducer.h).
 *
 * PyTorch 1.13 builds its steady-state buckets (after the first iteration's rebuild) in
 * gradient-ready order with limits {1 MiB, bucket_cap}; for our models gradient-ready
 * order is reverse parameter order, which is what we assign from the start.  One
 * deliberate difference: the first bucket's cap is min(1 MiB, bucket_cap), so a small cap
 * such as --bucket-cap-mb 0.05 really splits a small model (PyTorch would keep the whole
 * ConvNet inside its 1 MiB first bucket). */
#include "ddp/reducer.h"

#include "backend/backend.h"
#include "comm/comm.h"
#include "comm/flight.h"
#include "common/ddp_buckets.h"
#include "common/error.h"

#include <stdlib.h>

struct bucket {
    float *buf;          /* device, numel floats */
    size_t numel;
    int nparams, pending;
    struct comm_work *work;
    int launched;
};

struct reducer {
    struct param_table *params;
    struct comm *comm;
    struct backend *be;
    struct bucket *buckets;
    int nbuckets, next_launch;
    int *bucket_of;      /* trainable index -> bucket */
    size_t *offset_of;   /* trainable index -> element offset in its bucket */
    struct reducer_observer obs;
};

static int reducer_launch_ready(struct reducer *r)
{
    while (r->next_launch < r->nbuckets && r->buckets[r->next_launch].pending == 0) {
        int b = r->next_launch;
        struct bucket *bk = &r->buckets[b];
        size_t bytes = bk->numel * sizeof(float);
        /* the comm's stream waits for backward first, so the probes' start event (queued
         * on that stream by launching) marks when the all-reduce can run, not when it was
         * queued behind the rest of backward */
        if (r->comm->order && r->comm->order(r->comm))
            return error_wrap("DDP bucket %d all-reduce (%zu bytes): ordering after backward",
                              b, bytes);
        if (r->obs.launching)
            r->obs.launching(r->obs.ctx, b, bytes);
        flight_next_bucket(b); /* the flight recorder's bucket column */
        bk->work = r->comm->allreduce_async(r->comm, bk->buf, bk->numel, COMM_F32);
        flight_next_bucket(-1);
        if (r->obs.issued)
            r->obs.issued(r->obs.ctx, b);
        if (!bk->work)
            return error_wrap("DDP bucket %d all-reduce (%zu bytes)", b, bytes);
        bk->launched = 1;
        r->next_launch++;
    }
    return 0;
}

static int reducer_grad_ready(void *ctx, struct param *p)
{
    struct reducer *r = ctx;
    int b = r->bucket_of[p->index];
    struct bucket *bk = &r->buckets[b];
    if (bk->pending <= 0)
        return error_set("DDP: gradient of %s reported twice in one backward", p->name);
    r->be->scale(r->be, p->numel, 1.0f / (float)r->comm->world, p->grad,
                 bk->buf + r->offset_of[p->index]);
    bk->pending--;
    if (reducer_launch_ready(r))
        return -1;
    /* an all-reduce of this backward may be under way: its threads get the core between
     * layers (comm.h: progress) */
    if (r->next_launch > 0 && r->comm->progress)
        r->comm->progress(r->comm);
    return 0;
}

struct grad_hook reducer_hook(struct reducer *r)
{
    return (struct grad_hook){.ready = reducer_grad_ready, .ctx = r};
}

void reducer_set_observer(struct reducer *r, struct reducer_observer obs) { r->obs = obs; }

struct reducer *reducer_create(struct param_table *params, struct comm *comm,
                               size_t first_cap_bytes, size_t cap_bytes)
{
    struct reducer *r = calloc(1, sizeof *r);
    int n = params->trainable;
    if (!r || !(r->bucket_of = calloc((size_t)n + 1, sizeof(int))) ||
        !(r->offset_of = calloc((size_t)n + 1, sizeof(size_t))) ||
        !(r->buckets = calloc((size_t)n + 1, sizeof(struct bucket)))) {
        reducer_destroy(r);
        return error_set("DDP reducer: out of memory"), NULL;
    }
    r->params = params;
    r->comm = comm;
    r->be = params->be;
    /* reverse parameter order, PyTorch's caps: the one rule (common/ddp_buckets.h) that
     * the predictor forms buckets with too */
    size_t *bytes = calloc((size_t)n + 1, sizeof *bytes);
    if (!bytes) {
        reducer_destroy(r);
        return error_set("DDP reducer: out of memory"), NULL;
    }
    for (int i = 0; i < n; i++)
        bytes[i] = params_trainable(params, i)->numel * sizeof(float);
    r->nbuckets = ddp_buckets_assign(bytes, n, first_cap_bytes, cap_bytes, r->bucket_of);
    free(bytes);
    for (int i = n - 1; i >= 0; i--) { /* offsets in the order the bucket fills */
        struct bucket *bk = &r->buckets[r->bucket_of[i]];
        r->offset_of[i] = bk->numel;
        bk->numel += params_trainable(params, i)->numel;
        bk->nparams++;
    }
    for (int b = 0; b < r->nbuckets; b++) {
        struct bucket *bk = &r->buckets[b];
        bk->pending = bk->nparams;
        if (!(bk->buf = r->be->alloc(r->be, bk->numel * sizeof(float)))) {
            error_wrap("DDP bucket %d", b);
            reducer_destroy(r);
            return NULL;
        }
    }
    return r;
}

int reducer_finish(struct reducer *r)
{
    int rc = 0;
    if (r->next_launch != r->nbuckets)
        rc = error_set("DDP: backward finished with bucket %d of %d not ready (a parameter "
                       "received no gradient)", r->next_launch, r->nbuckets);
    for (int b = 0; b < r->nbuckets; b++) {
        struct bucket *bk = &r->buckets[b];
        if (bk->launched) {
            /* stream-ordered where the comm can (nccl: the optimizer's stream waits on the
             * device, the host runs on, as PyTorch's Reducer); else the blocking wait, which
             * also says when the transport ran the collective */
            struct comm_span span = {0, 0};
            const int failed = r->comm->join ? r->comm->join(r->comm, bk->work)
                                             : r->comm->wait(r->comm, bk->work, &span);
            if (failed && rc == 0)
                rc = error_wrap("DDP bucket %d all-reduce", b);
            else if (r->obs.finished)
                r->obs.finished(r->obs.ctx, b, bk->numel * sizeof(float), &span);
        }
        bk->work = NULL;
        bk->launched = 0;
        bk->pending = bk->nparams;
    }
    r->next_launch = 0;
    if (rc)
        return rc;
    for (int i = 0; i < r->params->trainable; i++) {
        struct param *p = params_trainable(r->params, i);
        struct bucket *bk = &r->buckets[r->bucket_of[i]];
        r->be->copy(r->be, p->grad, bk->buf + r->offset_of[i], p->numel * sizeof(float));
    }
    return 0;
}

int reducer_bucket_count(const struct reducer *r) { return r->nbuckets; }

void reducer_bucket_info(const struct reducer *r, int b, int *params, size_t *bytes)
{
    *params = r->buckets[b].nparams;
    *bytes = r->buckets[b].numel * sizeof(float);
}

void reducer_destroy(struct reducer *r)
{
    if (!r)
        return;
    if (r->buckets)
        for (int b = 0; b < r->nbuckets; b++)
            r->be->free(r->be, r->buckets[b].buf);
    free(r->buckets);
    free(r->bucket_of);
    free(r->offset_of);
    free(r);
}

int ddp_broadcast_state(struct param_table *params, struct comm *comm)
{
    struct backend *be = params->be;
    float *counter = be->alloc(be, sizeof(int64_t)); /* an int64 carried as 2 f32 words */
    if (!counter)
        return error_wrap("DDP: broadcast scratch");
    int rc = 0;
    for (int i = 0; i < params->count && rc == 0; i++) {
        struct param *p = params->items[i];
        if (p->kind == PARAM_COUNTER) {
            be->upload(be, counter, &p->counter, sizeof p->counter);
            rc = comm->broadcast(comm, counter, 2, COMM_F32, 0);
            be->download(be, &p->counter, counter, sizeof p->counter);
        } else {
            rc = comm->broadcast(comm, p->data, p->numel, COMM_F32, 0);
        }
        if (rc)
            error_wrap("DDP: broadcasting %s from rank 0", p->name);
    }
    be->free(be, counter);
    return rc;
}
