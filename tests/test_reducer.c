/* test_reducer.c — the DDP reducer's calls into the comm and the probes, in order, with a
 * fake comm that logs every call (no GPU, no peers).
 *
 * What it guards: a bucket's all-reduce is timed on the GPU by a CUDA event pair that the
 * probes record on the comm's stream when the reducer reports `launching`.  That start
 * event must come after the comm's stream was made to wait for the compute stream (the
 * comm's order slot); recorded before, it completes as soon as the comm stream is idle
 * and the bucket's device row spans the rest of backward (issue 11, defect 2).  The fake
 * comm keeps "ordered since the last collective" and the observer asserts it at every
 * launch.  Also: the full call sequence per bucket, the averaged gradients written back,
 * a comm without an order slot (shm), and an order slot that fails.  And DDP's initial
 * broadcast (ddp_broadcast_state): every parameter, buffer and counter in one coalesced
 * broadcast (it was one per tensor: 11 for the ConvNet), after which a rank that started
 * from other values holds rank 0's, bit for bit. */
#include "backend/backend.h"
#include "comm/comm.h"
#include "common/error.h"
#include "ddp/reducer.h"
#include "nn/layer.h"
#include "nn/params.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPARAMS 3
#define PARAM_NUMEL 16 /* 64 bytes: with 64-byte caps every parameter is its own bucket */
#define LOG_MAX 64

struct fake_comm {
    struct comm ops;
    char log[LOG_MAX][32];
    int n;
    int ordered;     /* order() called since the last collective was issued */
    int fail_order;  /* order() fails */
    int launch_seen_unordered; /* observer: a launch was observed before order() */
};

struct comm_work {
    int bucket;
};

static void fc_log(struct fake_comm *fc, const char *fmt, int v)
{
    if (fc->n < LOG_MAX)
        snprintf(fc->log[fc->n++], sizeof fc->log[0], fmt, v);
}

static int fc_order(struct comm *c)
{
    struct fake_comm *fc = (struct fake_comm *)c;
    fc_log(fc, "order", 0);
    if (fc->fail_order)
        return error_set("fake comm: stream ordering failed");
    fc->ordered = 1;
    return 0;
}

/* world 2 where the other rank holds the same values: the sum doubles the buffer */
static struct comm_work *fc_allreduce_async(struct comm *c, void *buf, size_t count,
                                            enum comm_dtype dt)
{
    struct fake_comm *fc = (struct fake_comm *)c;
    fc_log(fc, "allreduce %d", (int)count);
    fc->ordered = 0; /* the collective consumed the ordering */
    if (dt == COMM_F32)
        for (size_t i = 0; i < count; i++)
            ((float *)buf)[i] *= 2.0f;
    return calloc(1, sizeof(struct comm_work));
}

static int fc_wait(struct comm *c, struct comm_work *w, struct comm_span *span)
{
    struct fake_comm *fc = (struct fake_comm *)c;
    fc_log(fc, "wait", 0);
    if (span)
        span->start_ns = span->end_ns = 0;
    free(w);
    return 0;
}

static void fc_progress(struct comm *c) { fc_log((struct fake_comm *)c, "progress", 0); }

static void *fc_stream(struct comm *c)
{
    (void)c;
    return NULL;
}

static void fake_comm_init(struct fake_comm *fc, int with_order)
{
    memset(fc, 0, sizeof *fc);
    fc->ops.name = "fake";
    fc->ops.rank = 0;
    fc->ops.world = 2;
    fc->ops.allreduce_async = fc_allreduce_async;
    fc->ops.wait = fc_wait;
    fc->ops.stream = fc_stream;
    fc->ops.order = with_order ? fc_order : NULL;
}

/* the probes' side of the observer, logging into the comm's log */
static void obs_launching(void *ctx, int bucket, size_t bytes)
{
    struct fake_comm *fc = ctx;
    (void)bytes;
    if (fc->ops.order && !fc->ordered)
        fc->launch_seen_unordered++;
    fc_log(fc, "launching %d", bucket);
}

static void obs_issued(void *ctx, int bucket) { fc_log(ctx, "issued %d", bucket); }

static void obs_finished(void *ctx, int bucket, size_t bytes, const struct comm_span *span)
{
    (void)bytes, (void)span;
    fc_log(ctx, "finished %d", bucket);
}

static int log_is(const struct fake_comm *fc, const char *const *want, int n)
{
    if (fc->n != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(fc->log[i], want[i]) != 0)
            return 0;
    return 1;
}

static void log_print(const struct fake_comm *fc)
{
    for (int i = 0; i < fc->n; i++)
        printf("  %2d %s\n", i, fc->log[i]);
}

/* 3 parameters of 16 floats, gradients p*100 + i */
static int make_params(struct param_table *t, struct backend *be)
{
    params_init(t, be);
    for (int p = 0; p < NPARAMS; p++) {
        char leaf[16];
        snprintf(leaf, sizeof leaf, "w%d", p);
        int shape[1] = {PARAM_NUMEL};
        struct param *q = params_add(t, "", leaf, PARAM_TRAINABLE, 1, shape);
        if (!q)
            return -1;
        float g[PARAM_NUMEL];
        for (int i = 0; i < PARAM_NUMEL; i++)
            g[i] = (float)(p * 100 + i);
        be->upload(be, q->grad, g, sizeof g);
    }
    return 0;
}

/* backward reports gradients in reverse parameter order */
static int run_backward(struct reducer *r, struct param_table *t)
{
    struct grad_hook h = reducer_hook(r);
    for (int p = NPARAMS - 1; p >= 0; p--)
        if (h.ready(h.ctx, params_trainable(t, p)))
            return -1;
    return 0;
}

static void test_order_before_launch(int with_order)
{
    struct backend *be = backend_cpu_create(1);
    CHECK(be != NULL, "cpu backend: %s", error_get());
    if (!be)
        return;
    struct param_table t;
    CHECK(make_params(&t, be) == 0, "params: %s", error_get());
    struct fake_comm fc;
    fake_comm_init(&fc, with_order);
    struct reducer *r = reducer_create(&t, &fc.ops, 64, 64);
    CHECK(r != NULL, "reducer: %s", error_get());
    if (!r) {
        params_free(&t);
        be->destroy(be);
        return;
    }
    CHECK(reducer_bucket_count(r) == NPARAMS, "%d buckets, want %d", reducer_bucket_count(r),
          NPARAMS);
    reducer_set_observer(r, (struct reducer_observer){obs_launching, obs_issued, obs_finished,
                                                      &fc});
    for (int step = 0; step < 2; step++) {
        fc.n = 0;
        CHECK(run_backward(r, &t) == 0, "backward: %s", error_get());
        CHECK(reducer_finish(r) == 0, "finish: %s", error_get());
        static const char *const with[] = {
            "order",       "launching 0", "allreduce 16", "issued 0",
            "order",       "launching 1", "allreduce 16", "issued 1",
            "order",       "launching 2", "allreduce 16", "issued 2",
            "wait",        "finished 0",  "wait",         "finished 1",
            "wait",        "finished 2"};
        static const char *const without[] = {
            "launching 0", "allreduce 16", "issued 0",   "launching 1", "allreduce 16",
            "issued 1",    "launching 2",  "allreduce 16", "issued 2",  "wait",
            "finished 0",  "wait",         "finished 1", "wait",        "finished 2"};
        int ok = with_order ? log_is(&fc, with, sizeof with / sizeof with[0])
                            : log_is(&fc, without, sizeof without / sizeof without[0]);
        CHECK(ok, "step %d, comm %s order slot: unexpected call sequence", step,
              with_order ? "with" : "without");
        if (!ok)
            log_print(&fc);
    }
    CHECK(fc.launch_seen_unordered == 0,
          "%d launch(es) observed before the comm stream waited for backward: the device "
          "row would span the rest of backward",
          fc.launch_seen_unordered);
    /* averaged: grad / world, summed over 2 equal ranks: the gradient itself */
    int bad = 0;
    for (int p = 0; p < NPARAMS; p++) {
        float g[PARAM_NUMEL];
        be->download(be, g, params_trainable(&t, p)->grad, sizeof g);
        for (int i = 0; i < PARAM_NUMEL; i++)
            bad += g[i] != (float)(p * 100 + i);
    }
    CHECK(bad == 0, "%d averaged gradients wrong", bad);
    reducer_destroy(r);
    params_free(&t);
    be->destroy(be);
}

static void test_order_fails(void)
{
    struct backend *be = backend_cpu_create(1);
    if (!be)
        return;
    struct param_table t;
    CHECK(make_params(&t, be) == 0, "params: %s", error_get());
    struct fake_comm fc;
    fake_comm_init(&fc, 1);
    fc.fail_order = 1;
    struct reducer *r = reducer_create(&t, &fc.ops, 64, 64);
    if (r) {
        reducer_set_observer(r, (struct reducer_observer){obs_launching, obs_issued,
                                                          obs_finished, &fc});
        CHECK(run_backward(r, &t) == -1, "a failed ordering launched anyway");
        CHECK(strstr(error_get(), "bucket 0") && strstr(error_get(), "ordering failed"),
              "error names the bucket and the cause: '%s'", error_get());
        static const char *const want[] = {"order"};
        CHECK(log_is(&fc, want, 1), "nothing after the failed order (%d calls)", fc.n);
        reducer_destroy(r);
    }
    params_free(&t);
    be->destroy(be);
}

/* comm->progress, where the comm has it, after each gradient once a bucket of this backward
 * was issued, and not before: one bucket of the 3 parameters (cap 256 bytes), then one
 * bucket each (cap 64) */
static void test_progress(void)
{
    struct backend *be = backend_cpu_create(1);
    if (!be)
        return;
    static const char *const one[] = {"launching 0", "allreduce 48", "issued 0", "progress",
                                      "wait",        "finished 0"};
    static const char *const three[] = {
        "launching 0", "allreduce 16", "issued 0", "progress",   "launching 1",
        "allreduce 16", "issued 1",    "progress", "launching 2", "allreduce 16",
        "issued 2",     "progress",    "wait",     "finished 0", "wait",
        "finished 1",   "wait",        "finished 2"};
    for (int k = 0; k < 2; k++) {
        struct param_table t;
        CHECK(make_params(&t, be) == 0, "params: %s", error_get());
        struct fake_comm fc;
        fake_comm_init(&fc, 0);
        fc.ops.progress = fc_progress;
        const size_t cap = k == 0 ? 256 : 64;
        struct reducer *r = reducer_create(&t, &fc.ops, cap, cap);
        CHECK(r != NULL, "reducer: %s", error_get());
        if (r) {
            reducer_set_observer(r, (struct reducer_observer){obs_launching, obs_issued,
                                                              obs_finished, &fc});
            for (int step = 0; step < 2; step++) {
                fc.n = 0;
                CHECK(run_backward(r, &t) == 0, "backward: %s", error_get());
                CHECK(reducer_finish(r) == 0, "finish: %s", error_get());
                const int ok = k == 0 ? log_is(&fc, one, sizeof one / sizeof one[0])
                                      : log_is(&fc, three, sizeof three / sizeof three[0]);
                CHECK(ok, "cap %zu, step %d: progress not after each gradient once a bucket "
                          "was issued",
                      cap, step);
                if (!ok)
                    log_print(&fc);
            }
            reducer_destroy(r);
        }
        params_free(&t);
    }
    be->destroy(be);
}

/* ---- the initial broadcast ---- */

struct bcast_comm {
    struct comm ops;
    int calls;
    size_t words;
    float stash[4 * PARAM_NUMEL + 8]; /* what rank 0 sent */
};

/* rank 0: keeps what it sends; rank 1: receives it */
static int bc_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    struct bcast_comm *bc = (struct bcast_comm *)c;
    if (dt != COMM_F32 || root != 0 || count > sizeof bc->stash / sizeof *bc->stash)
        return error_set("bcast_comm: count %zu, dtype %d, root %d", count, (int)dt, root);
    bc->calls++;
    bc->words = count;
    if (c->rank == 0)
        memcpy(bc->stash, buf, count * sizeof(float));
    else
        memcpy(buf, bc->stash, count * sizeof(float));
    return 0;
}

/* A table of two weights, a buffer and a counter, its values from seed. */
static int make_state(struct param_table *t, struct backend *be, float seed)
{
    params_init(t, be);
    int shape[1] = {PARAM_NUMEL};
    struct param *w0 = params_add(t, "fc", "weight", PARAM_TRAINABLE, 1, shape);
    struct param *w1 = params_add(t, "fc", "bias", PARAM_TRAINABLE, 1, shape);
    struct param *rm = params_add(t, "bn", "running_mean", PARAM_BUFFER, 1, shape);
    struct param *nb = params_add(t, "bn", "num_batches_tracked", PARAM_COUNTER, 0, shape);
    if (!w0 || !w1 || !rm || !nb)
        return -1;
    struct param *f[3] = {w0, w1, rm};
    for (int k = 0; k < 3; k++) {
        float v[PARAM_NUMEL];
        for (int i = 0; i < PARAM_NUMEL; i++)
            v[i] = seed * (float)(k + 1) + (float)i / 7.0f;
        be->upload(be, f[k]->data, v, sizeof v);
    }
    nb->counter = (int64_t)seed * 1000003 + ((int64_t)1 << 40);
    return 0;
}

static void test_broadcast_state(void)
{
    struct backend *be = backend_cpu_create(1);
    CHECK(be != NULL, "cpu backend: %s", error_get());
    if (!be)
        return;
    struct param_table t0, t1;
    CHECK(make_state(&t0, be, 3.0f) == 0 && make_state(&t1, be, -11.0f) == 0, "params: %s",
          error_get());
    struct bcast_comm bc = {.ops = {.name = "fake", .rank = 0, .world = 2,
                                    .broadcast = bc_broadcast}};
    CHECK(ddp_broadcast_state(&t0, &bc.ops) == 0, "rank 0: %s", error_get());
    CHECK(bc.calls == 1 && bc.words == 3 * PARAM_NUMEL + 2,
          "rank 0: %d broadcast(s) of %zu words, want 1 of %d (coalesced)", bc.calls, bc.words,
          3 * PARAM_NUMEL + 2);
    bc.ops.rank = 1;
    bc.calls = 0;
    CHECK(ddp_broadcast_state(&t1, &bc.ops) == 0, "rank 1: %s", error_get());
    CHECK(bc.calls == 1, "rank 1: %d broadcasts, want 1", bc.calls);
    for (int i = 0; i < t0.count; i++) {
        const struct param *a = t0.items[i], *b = t1.items[i];
        if (a->kind == PARAM_COUNTER) {
            CHECK(a->counter == b->counter, "%s: rank 1 holds %lld, rank 0 %lld", a->name,
                  (long long)b->counter, (long long)a->counter);
            continue;
        }
        float x[PARAM_NUMEL], y[PARAM_NUMEL];
        be->download(be, x, a->data, sizeof x);
        be->download(be, y, b->data, sizeof y);
        CHECK(memcmp(x, y, sizeof x) == 0, "%s: rank 1's values are not rank 0's", a->name);
    }
    params_free(&t0);
    params_free(&t1);
    be->destroy(be);
}

int main(void)
{
    test_broadcast_state();
    test_progress();
    test_order_before_launch(1);
    test_order_before_launch(0);
    test_order_fails();
    return test_finish();
}
