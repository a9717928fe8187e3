/* test_host_syncs.c — how often one DDP + AMP training step blocks the host (issue 21 §2.4).
 *
 * PyTorch's DDP on GPUs never blocks the host on a bucket's all-reduce (work.wait() makes
 * the compute stream wait on the device), SyncBatchNorm keeps the gathered counts on the
 * device, and a step's only host reads are GradScaler's found_inf and the logged loss.
 * This test runs ConvNet steps (SyncBatchNorm, several buckets, fp16 autocast with
 * GradScaler) on the CPU backend, rank 0 of a world of 2, and counts every call that
 * blocks the host on a GPU rank:
 *   - backend: download, synchronize, softmax_xent and count_correct (they return device
 *     results to the host), free (the CUDA backend waits for the stream before freeing);
 *   - comm: every blocking collective or wait (wait, allgather, the blocking allreduce,
 *     broadcast, reduce, barrier) and settle; join and allgather_join are stream-ordered
 *     (the compute stream waits on the device) and do not block the host.
 * The comm is a fake of a 2-rank world whose other rank contributes what this one does
 * (a sum doubles, an all-gather repeats this rank's row), in two modes: "stream" has
 * join, allgather_join and settle, as nccl; "blocking" has none (every wait blocks, as the
 * nccl comm did before issue 21, and as shm does on CPU ranks).  Asserts, per step:
 * stream mode at most 2 host syncs (found_inf and the loss) and at most 2 settles, each
 * right before a download; blocking mode more (a check that the counting sees the waits).
 *
 * The step is train_step.c's rank_step in the same order (forward, loss, scaled backward with
 * the reducer's hook, reducer_finish, the loss's global mean, unscale + found_inf, SGD). */
#include "backend/backend.h"
#include "comm/comm.h"
#include "common/error.h"
#include "ddp/reducer.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/scaler.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 3
#define BATCH 8

/* ------------------------------------------------------------------ counting */

static struct backend real_be; /* the CPU backend's slots, called by the counting ones */
static long host_syncs, settles, settles_then_download;
static int last_was_settle;
static char last_sync[64];

/* one host sync point; a settle and the download right after it are one (the host waits
 * for the collectives, then for the compute stream behind them: one stall) */
static void note(const char *what)
{
    if (last_was_settle && strcmp(what, "download") == 0)
        settles_then_download++;
    else
        host_syncs++;
    last_was_settle = 0;
    snprintf(last_sync, sizeof last_sync, "%s", what);
}

static void count_download(struct backend *be, void *dst, const void *src, size_t bytes)
{
    note("download");
    real_be.download(be, dst, src, bytes);
}

static void count_synchronize(struct backend *be)
{
    note("synchronize");
    real_be.synchronize(be);
}

static float count_softmax_xent(struct backend *be, int n, int c, const float *logits,
                                const int32_t *labels, float *dlogits)
{
    note("softmax_xent"); /* returns the loss to the host */
    return real_be.softmax_xent(be, n, c, logits, labels, dlogits);
}

static int count_count_correct(struct backend *be, int n, int c, const float *logits,
                               const int32_t *labels)
{
    note("count_correct");
    return real_be.count_correct(be, n, c, logits, labels);
}

static void count_free(struct backend *be, void *p)
{
    if (p)
        note("free");
    real_be.free(be, p);
}

static void backend_count(struct backend *be)
{
    real_be = *be;
    be->download = count_download;
    be->synchronize = count_synchronize;
    be->softmax_xent = count_softmax_xent;
    be->count_correct = count_count_correct;
    be->free = count_free;
}

/* ------------------------------------------------------------------ the fake comm */

struct comm_work {
    int unused;
};

struct fake_comm {
    struct comm ops;
    struct backend *be;
    struct comm_work work; /* one handle is enough: the fake completes at once */
    long joins;
};

/* the other rank contributed what this one did: a sum is twice this rank's buffer */
static struct comm_work *fake_allreduce_async(struct comm *c, void *buf, size_t count,
                                              enum comm_dtype dt)
{
    struct fake_comm *f = (struct fake_comm *)c;
    if (dt != COMM_F32) {
        error_set("fake comm: fp32 only");
        return NULL;
    }
    f->be->scale(f->be, count, 2.0f, buf, buf);
    return &f->work;
}

static int fake_wait(struct comm *c, struct comm_work *w, struct comm_span *span)
{
    (void)c;
    (void)w;
    note("comm wait");
    if (span)
        span->start_ns = span->end_ns = 0;
    return 0;
}

static int fake_allgather_rows(struct comm *c, const void *send, void *recv, size_t count)
{
    struct fake_comm *f = (struct fake_comm *)c;
    for (int r = 0; r < c->world; r++)
        f->be->copy(f->be, (float *)recv + (size_t)r * count, send, count * sizeof(float));
    return 0;
}

static int fake_allgather(struct comm *c, const void *send, void *recv, size_t count,
                          enum comm_dtype dt)
{
    (void)dt;
    note("comm allgather");
    return fake_allgather_rows(c, send, recv, count);
}

static int fake_allgather_join(struct comm *c, const void *send, void *recv, size_t count,
                               enum comm_dtype dt)
{
    (void)dt;
    ((struct fake_comm *)c)->joins++;
    return fake_allgather_rows(c, send, recv, count);
}

static int fake_join(struct comm *c, struct comm_work *w)
{
    (void)w;
    ((struct fake_comm *)c)->joins++;
    return 0;
}

static int fake_settle(struct comm *c)
{
    (void)c;
    note("settle");
    settles++;
    last_was_settle = 1; /* after note: a download next joins this sync point */
    return 0;
}

static int fake_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    (void)c, (void)buf, (void)count, (void)dt, (void)root;
    note("comm broadcast");
    return 0;
}

static int fake_reduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    (void)dt, (void)root;
    note("comm reduce");
    struct fake_comm *f = (struct fake_comm *)c;
    f->be->scale(f->be, count, 2.0f, buf, buf);
    return 0;
}

static int fake_barrier(struct comm *c)
{
    (void)c;
    note("comm barrier");
    return 0;
}

static void *fake_stream(struct comm *c)
{
    (void)c;
    return NULL;
}

static void fake_destroy(struct comm *c) { free(c); }

static struct comm *fake_comm_create(struct backend *be, int stream_ordered)
{
    struct fake_comm *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->ops = (struct comm){.name = "fake", .rank = 0, .world = 2,
                           .broadcast = fake_broadcast, .allreduce_async = fake_allreduce_async,
                           .wait = fake_wait, .reduce = fake_reduce,
                           .allgather = fake_allgather, .barrier = fake_barrier,
                           .stream = fake_stream, .destroy = fake_destroy};
    if (stream_ordered) {
        f->ops.join = fake_join;
        f->ops.allgather_join = fake_allgather_join;
        f->ops.settle = fake_settle;
    }
    f->be = be;
    return &f->ops;
}

/* ------------------------------------------------------------------ the step */

struct setup {
    struct backend *be;
    struct comm *comm;
    struct model *m;
    struct reducer *red;
    struct optim opt;
    struct grad_scaler scaler;
    float *x, *dlogits, *scalars;
    int32_t *y;
};

/* train_step.c's rank_step, in its order, without the probes */
static int step(struct setup *s, float *loss)
{
    struct backend *be = s->be;
    struct model *m = s->m;
    const float *logits;
    if (m->forward(m, s->x, BATCH, 1, &logits))
        return -1;
    be->softmax_xent_dev(be, BATCH, m->classes, logits, s->y, s->dlogits, s->scalars);
    if (be->status(be))
        return -1;
    if (s->scaler.enabled)
        be->scale(be, (size_t)BATCH * m->classes, s->scaler.scale, s->dlogits, s->dlogits);
    struct grad_hook hook = reducer_hook(s->red);
    if (m->backward(m, s->dlogits, &hook) || reducer_finish(s->red))
        return -1;
    be->scale(be, 1, 1.0f / (float)s->comm->world, s->scalars, s->scalars);
    if (comm_allreduce_join(s->comm, s->scalars, 1, COMM_F32) || comm_settle(s->comm))
        return -1;
    float l = 0.0f;
    be->download(be, &l, s->scalars, sizeof l);
    if (be->status(be))
        return -1;
    *loss = l;
    int found_inf = 0;
    if (scaler_unscale(&s->scaler, &m->params, s->comm, s->scalars, &found_inf))
        return -1;
    if (!found_inf && optim_step(&s->opt))
        return -1;
    scaler_update(&s->scaler, found_inf);
    return 0;
}

/* host syncs per step (the largest over STEPS steps after a first one) in one mode;
 * -1 on failure */
static long run(int stream_ordered, long *settles_per_step, long *settled_reads)
{
    struct setup s = {0};
    long worst = -1;
    s.be = backend_cpu_create(1);
    CHECK(s.be != NULL, "cpu backend: %s", error_get());
    if (!s.be)
        return -1;
    s.comm = fake_comm_create(s.be, stream_ordered);
    s.m = model_create("convnet", s.be, 7);
    CHECK(s.comm && s.m, "setup: %s", error_get());
    if (!s.comm || !s.m)
        return -1;
    s.m->set_sync_bn(s.m, s.comm);
    CHECK(s.m->set_amp(s.m, AMP_F16) == 0, "autocast: %s", error_get());
    /* a small cap: several buckets, so several all-reduces to join */
    s.red = reducer_create(&s.m->params, s.comm, 4096, 16384);
    struct optim_config oc = {.kind = OPTIM_SGD, .lr = 0.01, .momentum = 0.9};
    CHECK(s.red && optim_init(&s.opt, &s.m->params, &oc) == 0, "reducer/optim: %s",
          error_get());
    scaler_init(&s.scaler, 1);
    const size_t nx = (size_t)BATCH * s.m->in_c * s.m->in_h * s.m->in_w;
    s.x = s.be->alloc(s.be, nx * sizeof(float));
    s.dlogits = s.be->alloc(s.be, (size_t)BATCH * s.m->classes * sizeof(float));
    s.scalars = s.be->alloc(s.be, 3 * sizeof(float));
    s.y = s.be->alloc(s.be, BATCH * sizeof(int32_t));
    float *xh = malloc(nx * sizeof *xh);
    int32_t yh[BATCH];
    uint64_t seed = 5;
    test_fill_uniform(xh, nx, -1.0f, 1.0f, &seed);
    for (int i = 0; i < BATCH; i++)
        yh[i] = i % s.m->classes;
    if (s.red && s.x && s.dlogits && s.scalars && s.y && xh) {
        printf("%s comm: %d buckets\n", stream_ordered ? "stream" : "blocking",
               reducer_bucket_count(s.red));
        s.be->upload(s.be, s.x, xh, nx * sizeof *xh);
        s.be->upload(s.be, s.y, yh, sizeof yh);
        backend_count(s.be);
        for (int k = 0; k <= STEPS; k++) {
            host_syncs = settles = settles_then_download = 0;
            last_was_settle = 0;
            float loss = 0.0f;
            const int rc = step(&s, &loss);
            CHECK(rc == 0, "step %d: %s", k, error_get());
            if (rc)
                break;
            printf("  step %d: loss %.4f, %ld host syncs (%ld settles, %ld of them right "
                   "before a download)\n", k, loss, host_syncs, settles, settles_then_download);
            if (k == 0)
                continue; /* the first step may allocate (autocast copies and the like) */
            if (host_syncs > worst) {
                worst = host_syncs;
                *settles_per_step = settles;
                *settled_reads = settles_then_download;
            }
        }
        s.be->free = real_be.free;
    }
    free(xh);
    s.be->free(s.be, s.x);
    s.be->free(s.be, s.dlogits);
    s.be->free(s.be, s.scalars);
    s.be->free(s.be, s.y);
    optim_free(&s.opt);
    reducer_destroy(s.red);
    s.m->destroy(s.m);
    s.comm->destroy(s.comm);
    s.be->destroy(s.be);
    return worst;
}

int main(void)
{
    long settles_s = 0, reads_s = 0, settles_b = 0, reads_b = 0;
    const long blocking = run(0, &settles_b, &reads_b);
    const long stream = run(1, &settles_s, &reads_s);
    printf("host syncs per DDP+AMP step: %ld with a blocking comm, %ld with a stream-ordered "
           "one (PyTorch: 2, found_inf and the logged loss)\n", blocking, stream);
    CHECK(stream >= 0 && stream <= 2,
          "a stream-ordered DDP+AMP step blocks the host %ld times (at most 2: found_inf and "
          "the loss)", stream);
    CHECK(settles_s <= 2 && reads_s == settles_s,
          "%ld settles per step, %ld of them right before a download (each must guard a "
          "host read)", settles_s, reads_s);
    CHECK(blocking > stream, "a blocking comm's step counted %ld host syncs, not more than "
          "the stream-ordered one's %ld: the counting misses the waits", blocking, stream);
    return test_finish();
}
