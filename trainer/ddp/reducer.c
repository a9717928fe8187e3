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

/* A bucket is a view of the table's flat gradient buffer (params.h): its parameters are
 * consecutive (reverse parameter order assigns consecutive ranges), so their gradients are
 * one range there, gaps between entries included, as PyTorch's gradient_as_bucket_view. */
struct bucket {
    float *buf;          /* device, numel floats: a range of params->flat_grad */
    size_t numel;
    int first, last;     /* its parameters (parameters() indices) */
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
        /* autocast's weight gradients of the bucket to fp32, in one operation; then the
         * average: the bucket divided by the world size before its sum (PyTorch's allreduce
         * hook, on the bucket as one tensor; a world of 1 has nothing to divide) */
        if (params_grads_to_f32(r->params, bk->first, bk->last))
            return error_wrap("DDP bucket %d", b);
        if (r->comm->world > 1)
            r->be->scale(r->be, bk->numel, 1.0f / (float)r->comm->world, bk->buf, bk->buf);
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
    if (params_pack(params))
        return error_wrap("DDP reducer"), NULL;
    struct reducer *r = calloc(1, sizeof *r);
    int n = params->trainable;
    if (!r || !(r->bucket_of = calloc((size_t)n + 1, sizeof(int))) ||
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
    /* bucket b: parameters lo..hi, the range of the flat gradients from lo's to hi's end */
    for (int i = n - 1; i >= 0; i--) {
        const struct param *p = params_trainable(params, i);
        struct bucket *bk = &r->buckets[r->bucket_of[i]];
        if (i < n - 1 && r->bucket_of[i] != r->bucket_of[i + 1] &&
            r->bucket_of[i] != r->bucket_of[i + 1] + 1) {
            error_set("DDP reducer: bucket %d does not follow bucket %d (parameter %s): "
                      "buckets must be consecutive ranges of parameters",
                      r->bucket_of[i], r->bucket_of[i + 1], p->name);
            reducer_destroy(r);
            return NULL;
        }
        if (!bk->nparams) { /* its last parameter: where the range ends */
            bk->numel = p->offset + p->numel;
            bk->last = i;
        }
        bk->buf = params->flat_grad + p->offset; /* down to its first parameter */
        bk->first = i;
        bk->nparams++;
    }
    for (int b = 0; b < r->nbuckets; b++) {
        struct bucket *bk = &r->buckets[b];
        bk->numel -= (size_t)(bk->buf - params->flat_grad);
        bk->pending = bk->nparams;
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
    return rc; /* the averaged gradients are where the parameters' grads are: no copy */
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
    free(r->buckets); /* views: the table owns the gradients */
    free(r->bucket_of);
    free(r);
}

/* The f32 words entry p takes in a broadcast bucket: its data, or an int64 counter's bits
 * as 2 words. */
static size_t bcast_words(const struct param *p)
{
    return p->kind == PARAM_COUNTER ? 2 : p->numel;
}

/* Copy entry p between its storage and buf + at (to_buf: into the bucket). */
static void bcast_move(struct backend *be, struct param *p, float *buf, size_t at, int to_buf)
{
    if (p->kind == PARAM_COUNTER) {
        if (to_buf)
            be->upload(be, buf + at, &p->counter, sizeof p->counter);
        else
            be->download(be, &p->counter, buf + at, sizeof p->counter);
    } else if (p->numel) {
        if (to_buf)
            be->copy(be, buf + at, p->data, p->numel * sizeof(float));
        else
            be->copy(be, p->data, buf + at, p->numel * sizeof(float));
    }
}

int ddp_broadcast_state(struct param_table *params, struct comm *comm)
{
    struct backend *be = params->be;
    const size_t cap = DDP_BROADCAST_BUCKET_BYTES / sizeof(float);
    /* the buckets: entries in state_dict order, a new bucket where the next would pass the
     * cap (an entry larger than it is a bucket alone); the scratch holds the largest */
    size_t most = 0, fill = 0;
    for (int i = 0; i < params->count; i++) {
        const size_t n = bcast_words(params->items[i]);
        if (fill > 0 && fill + n > cap)
            fill = 0;
        fill += n;
        most = fill > most ? fill : most;
    }
    if (most == 0)
        return 0;
    float *buf = be->alloc(be, most * sizeof(float));
    if (!buf)
        return error_wrap("DDP: the broadcast bucket (%zu bytes)", most * sizeof(float));
    int rc = 0;
    for (int first = 0; first < params->count && rc == 0;) {
        int last = first;
        size_t words = 0;
        while (last < params->count &&
               (words == 0 || words + bcast_words(params->items[last]) <= cap))
            words += bcast_words(params->items[last++]);
        for (size_t i = (size_t)first, at = 0; i < (size_t)last;
             at += bcast_words(params->items[i]), i++)
            bcast_move(be, params->items[i], buf, at, 1);
        rc = comm->broadcast(comm, buf, words, COMM_F32, 0);
        if (rc) {
            error_wrap("DDP: broadcasting %s .. %s (%zu bytes) from rank 0",
                       params->items[first]->name, params->items[last - 1]->name,
                       words * sizeof(float));
            break;
        }
        for (size_t i = (size_t)first, at = 0; i < (size_t)last;
             at += bcast_words(params->items[i]), i++)
            bcast_move(be, params->items[i], buf, at, 0);
        first = last;
    }
    be->free(be, buf);
    return rc;
}
