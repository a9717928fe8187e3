/* test_probe_cost.c — what each --trace level adds to a training step, counted without a GPU
 * (issue 34 §2, DESIGN.md "Probes that cost what Kineto's cost").
 *
 * The trainer's own epoch loop (rank_train_epoch: train_step.c's rank_step, the per-layer
 * ranges of train_layers.c, the DDP reducer's bucket ranges, comm_probe's collective
 * ranges) runs on the CPU backend with a probe that believes its rank computes on a GPU
 * (probe_opts.gpu, a compute and a comm stream), so the probes run their GPU code: the
 * probes' CUDA objects, loaded as the program loads them, but linked against a counting
 * stand-in of the CUDA runtime and CUPTI (tests/probe_cost_cuda.c, in
 * build/tests/probe-cost/).  Per step of a steady epoch (the second; the first is the
 * warm-up) it counts, per level and per model:
 *   - CUDA runtime calls the probes make, and of them the events recorded and the host
 *     syncs (cudaStreamSynchronize, cudaEventSynchronize);
 *   - CUPTI calls on the training thread, and on every other thread;
 *   - NVTX ranges (pushes and starts, this process being its own NVTX tool);
 *   - trace rows written by the training thread (CUPTI's, from the tracer's thread, apart);
 *   - host syncs of the backend (test_host_syncs' counting slots: download, synchronize,
 *     softmax_xent, count_correct, free), which no level may change;
 *   - the collectives the step issues (a fake 2-rank comm, as test_host_syncs'), the one
 *     thing besides the step's fixed phases that a level's ranges may scale with.
 * Models: ConvNet (9 layers), ResNet18 at width 4 and at width 8 (the same 67 layers,
 * 4x the parameters), each as a baseline (1 rank) and as DDP rank 0 of
 * 2 with SyncBatchNorm and PyTorch's bucket caps.
 *
 * Asserted for every level: off adds nothing; no level adds a host sync (CUDA's or the
 * backend's) per step, nor a CUDA runtime call under nvtx; pops never outnumber pushes
 * in CUPTI's correlation stack; full records one CUDA event pair per range.
 * Where CUPTI traces, the stand-in turns each correlation push into one kernel (its
 * records wait for a flush, as CUPTI's): the trace must hold one cupti kernel row per
 * kernel, each attributed to a range; and for the default level's first model, with the
 * steps done and no flush made on the training thread, the tracer's own thread must
 * deliver every record within 3 s.
 *
 * Asserted for the default level (train_opts_default's: kernels) -- the budget,
 * check_budget: per step over off, 5 ranges (step, data, forward, backward, optimizer)
 * plus one per collective, each an NVTX range, a host row and at most 2 CUPTI calls (a
 * correlation push and pop) on the training thread; no CUDA runtime call, no event, no
 * host sync, no layer range, no CUPTI flush on the training thread.  What is left with the
 * collectives counted out is the same for every model: nothing grows with the layers or
 * the parameters.  full may grow with the layers, by a forward and a backward range per
 * layer, each with an event pair (asserted as such).
 *
 * The default after issue 34 §2 (kernels), per steady step over off: 0 CUDA calls, 0
 * events, 0 host syncs; CUPTI calls 10 (B, every model), 22 (ConvNet D), 94 (ResNet18/4
 * and /8 D) = 10 + 2 per collective; NVTX ranges and rows 5, 5, 11, 47 = 5 + 1 per
 * collective; its records delivered by the tracer's thread.
 *
 * Measured before the default was made cheap (issue 34 §2; default = full), per steady
 * step, additions over --trace off; B: baseline (1 rank), D: DDP rank 0 of 2, whose step
 * issues 6 (ConvNet) or 42 (ResNet18) collectives: a bucket, the loss, and SyncBatchNorm's
 * 2 per BN layer.  Every level: 0 host syncs (CUDA's or the backend's), 0 CUPTI calls off
 * the training thread.
 *                      CUDA calls  events  CUPTI  NVTX ranges (of layers)  rows
 *   nvtx  ConvNet B         0         0       0       5                       5
 *   nvtx  ResNet18/4,/8 B   0         0       0       5                       5
 *   nvtx  ConvNet D         0         0       0      11                      11
 *   nvtx  ResNet18/4,/8 D   0         0       0      47                      47
 *   full  ConvNet B       161        46      10      23 (18)                 46
 *   full  ResNet18/4,/8 B 973       278      10     139 (134)               278
 *   full  ConvNet D       203        58      22      29 (18)                 58
 *   full  ResNet18/4,/8 D 1239      362      94     181 (134)               362
 * full: per range (layers' included) an event pair (2 cudaEventRecord), at the next step's
 * poll 1 cudaEventQuery and 2 cudaEventElapsedTime, and 2 cudaEventCreate until each of
 * the event ring's 1024 slots has been used once (the first ~44 ConvNet steps, ~6
 * ResNet18 steps; then 5 calls a range); a CUPTI correlation push and pop per range but the
 * layers'.  So full grows with the layers (ConvNet 9, ResNet18 67, each a forward and a
 * backward range), not with the parameters (ResNet18 at width 4 and 8 alike).
 */
#include "probe_cost_cuda.h"
#include "testutil.h"
#include "train_rank.h"

#include "backend/backend.h"
#include "comm/comm.h"
#include "comm_probe.h"
#include "common/error.h"
#include "data/synthetic.h"
#include "ddp/reducer.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/scaler.h"
#include "probes/probe.h"
#include "probes/tools/nvtx_capture.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

NVTX_CAPTURE_STATIC_INJECTION;

#define BATCH 4
#define WARM_STEPS 2   /* epoch 1: the warm-up (first allocations, the event ring's fill) */
#define STEPS 4        /* epoch 2: counted */

/* ------------------------------------------------------------------ the counting module */

static probe_cost_read_fn cost_read;
static probe_cost_mark_thread_fn cost_mark;
static probe_cost_call_name_fn cost_name;

/* the stand-in module, once the probes loaded it (their first GPU probe) */
static int cost_bind(void)
{
    if (cost_read)
        return 0;
    void *h = dlopen(PROBE_COST_MODULE_DIR "/libddpprof_probes_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return -1;
    *(void **)&cost_read = dlsym(h, "probe_cost_read");
    *(void **)&cost_mark = dlsym(h, "probe_cost_mark_thread");
    *(void **)&cost_name = dlsym(h, "probe_cost_call_name");
    return cost_read && cost_mark && cost_name ? 0 : -1;
}

/* ------------------------------------------------------------------ backend host syncs */

static struct backend real_be;
static long backend_syncs;

static void count_download(struct backend *be, void *dst, const void *src, size_t bytes)
{
    backend_syncs++;
    real_be.download(be, dst, src, bytes);
}

static void count_synchronize(struct backend *be)
{
    backend_syncs++;
    real_be.synchronize(be);
}

static float count_softmax_xent(struct backend *be, int n, int c, const float *logits,
                                const int32_t *labels, float *dlogits)
{
    backend_syncs++;
    return real_be.softmax_xent(be, n, c, logits, labels, dlogits);
}

static int count_count_correct(struct backend *be, int n, int c, const float *logits,
                               const int32_t *labels)
{
    backend_syncs++;
    return real_be.count_correct(be, n, c, logits, labels);
}

static void count_free(struct backend *be, void *p)
{
    if (p)
        backend_syncs++;
    real_be.free(be, p);
}

/* ------------------------------------------------------------------ a 2-rank fake comm */

struct comm_work {
    int unused;
};

struct fake_comm {
    struct comm ops;
    struct backend *be;
    struct comm_work work;
};

static long collectives; /* issued: what the step's ranges may scale with */

/* the other rank contributed what this one did: a sum is twice this rank's buffer */
static struct comm_work *fake_allreduce_async(struct comm *c, void *buf, size_t count,
                                              enum comm_dtype dt)
{
    struct fake_comm *f = (struct fake_comm *)c;
    collectives++;
    if (dt != COMM_F32) {
        error_set("fake comm: fp32 only");
        return NULL;
    }
    f->be->scale(f->be, count, 2.0f, buf, buf);
    return &f->work;
}

static int fake_wait(struct comm *c, struct comm_work *w, struct comm_span *span)
{
    (void)c, (void)w;
    if (span)
        span->start_ns = span->end_ns = 0;
    return 0;
}

static int fake_allgather(struct comm *c, const void *send, void *recv, size_t count,
                          enum comm_dtype dt)
{
    (void)dt;
    struct fake_comm *f = (struct fake_comm *)c;
    collectives++;
    for (int r = 0; r < c->world; r++)
        f->be->copy(f->be, (float *)recv + (size_t)r * count, send, count * sizeof(float));
    return 0;
}

static int fake_join(struct comm *c, struct comm_work *w)
{
    (void)c, (void)w;
    return 0;
}

static int fake_settle(struct comm *c)
{
    (void)c;
    return 0;
}

static int fake_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    (void)c, (void)buf, (void)count, (void)dt, (void)root;
    collectives++;
    return 0;
}

static int fake_reduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    (void)dt, (void)root;
    collectives++;
    struct fake_comm *f = (struct fake_comm *)c;
    f->be->scale(f->be, count, 2.0f, buf, buf);
    return 0;
}

static int fake_barrier(struct comm *c)
{
    (void)c;
    collectives++;
    return 0;
}

static void *fake_stream(struct comm *c)
{
    (void)c;
    return NULL;
}

static void fake_destroy(struct comm *c) { free(c); }

/* stream-ordered, as nccl: joins and settle, no host wait per collective */
static struct comm *fake_comm_create(struct backend *be)
{
    struct fake_comm *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->ops = (struct comm){.name = "fake", .rank = 0, .world = 2,
                           .broadcast = fake_broadcast, .allreduce_async = fake_allreduce_async,
                           .wait = fake_wait, .reduce = fake_reduce,
                           .allgather = fake_allgather, .barrier = fake_barrier,
                           .stream = fake_stream, .destroy = fake_destroy,
                           .join = fake_join, .allgather_join = fake_allgather,
                           .settle = fake_settle};
    f->be = be;
    return &f->ops;
}

/* ------------------------------------------------------------------ one configuration */

struct model_case {
    const char *label, *model;
    int width; /* resnet18's */
    int world; /* 1: baseline; 2: DDP rank 0 of 2 */
};

/* additions per steady step (counts over the counted epoch / STEPS) */
struct cost {
    double cuda, events, cuda_syncs, cupti_train, cupti_other, cupti_flush_train, nvtx,
        rows, backend_syncs, collectives;
    double layer_ranges; /* NVTX ranges named by a layer (full only) */
    int layers;          /* the model's layers */
    uint64_t misuse;
    double calls[2][PROBE_COST_CALLS]; /* per entry point: training thread, others */
};

struct snap {
    struct probe_cost_counts c;
    size_t nvtx, nvtx_layers;
    uint64_t rows; /* the training thread's: CUPTI's rows (the tracer's thread) left out */
    long backend_syncs, collectives;
};

/* NVTX ranges in domain ddpprof since the last reset, and those named by a layer */
static void nvtx_count(size_t *ranges, size_t *layers)
{
    const struct nvtx_capture_event *ev;
    size_t n = nvtx_capture_events(&ev);
    *ranges = *layers = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ev[i].domain, "ddpprof") != 0 ||
            (ev[i].op != NVTX_CAPTURE_PUSH && ev[i].op != NVTX_CAPTURE_START))
            continue;
        (*ranges)++;
        /* layer ranges carry their layer's name; phases are registered phase names */
        if (!ev[i].registered)
            (*layers)++;
    }
}

static void snap_take(struct snap *s, struct probe *p)
{
    memset(s, 0, sizeof *s);
    if (cost_read)
        cost_read(&s->c);
    nvtx_count(&s->nvtx, &s->nvtx_layers);
    struct probe_stats st;
    probe_stats(p, &st);
    s->rows = st.rows - st.cupti_rows;
    s->backend_syncs = backend_syncs;
    s->collectives = collectives;
}

static double per_step(uint64_t a, uint64_t b) { return (double)(b - a) / STEPS; }

static void cost_diff(const struct snap *a, const struct snap *b, struct cost *out)
{
    memset(out, 0, sizeof *out);
    for (int k = 0; k < PROBE_COST_CALLS; k++) {
        const double train = per_step(a->c.calls[0][k], b->c.calls[0][k]);
        const double other = per_step(a->c.calls[1][k], b->c.calls[1][k]);
        out->calls[0][k] = train;
        out->calls[1][k] = other;
        if (k < PC_FIRST_CUPTI) {
            out->cuda += train + other;
        } else {
            out->cupti_train += train;
            out->cupti_other += other;
        }
    }
    out->events = per_step(a->c.calls[0][PC_cudaEventRecord] + a->c.calls[1][PC_cudaEventRecord],
                           b->c.calls[0][PC_cudaEventRecord] + b->c.calls[1][PC_cudaEventRecord]);
    for (int k = PC_cudaEventSynchronize; k <= PC_cudaStreamSynchronize; k++)
        if (k == PC_cudaEventSynchronize || k == PC_cudaStreamSynchronize)
            out->cuda_syncs += per_step(a->c.calls[0][k] + a->c.calls[1][k],
                                        b->c.calls[0][k] + b->c.calls[1][k]);
    out->cupti_flush_train = per_step(a->c.calls[0][PC_cuptiActivityFlushAll] +
                                          a->c.calls[0][PC_cuptiActivityFlushAllForced],
                                      b->c.calls[0][PC_cuptiActivityFlushAll] +
                                          b->c.calls[0][PC_cuptiActivityFlushAllForced]);
    out->nvtx = (double)(b->nvtx - a->nvtx) / STEPS;
    out->layer_ranges = (double)(b->nvtx_layers - a->nvtx_layers) / STEPS;
    out->rows = per_step(a->rows, b->rows);
    out->backend_syncs = (double)(b->backend_syncs - a->backend_syncs) / STEPS;
    out->collectives = (double)(b->collectives - a->collectives) / STEPS;
    out->misuse = b->c.misuse - a->c.misuse;
}

/* The CUPTI records reach the trace off the training thread: with the steps done and
 * nothing flushed on the training thread, the tracer's flusher thread delivers every
 * record within its interval (500 ms; 3 s allowed on a loaded machine). */
static void check_flusher(struct probe *p, const struct model_case *mc, enum probe_mode level,
                          const struct probe_cost_counts *c0)
{
    struct probe_cost_counts c;
    cost_read(&c);
    /* an external correlation and a kernel each, this probe's */
    const uint64_t want = 2 * (c.kernels - c0->kernels);
    for (int i = 0; i < 300 && c.delivered - c0->delivered < want; i++) {
        usleep(10000);
        cost_read(&c);
    }
    struct probe_stats st;
    probe_stats(p, &st);
    const uint64_t bg = c.calls[1][PC_cuptiActivityFlushAll] - c0->calls[1][PC_cuptiActivityFlushAll],
                   fg = c.calls[0][PC_cuptiActivityFlushAll] +
                        c.calls[0][PC_cuptiActivityFlushAllForced] -
                        c0->calls[0][PC_cuptiActivityFlushAll] -
                        c0->calls[0][PC_cuptiActivityFlushAllForced];
    printf("%s %s: %llu of %llu CUPTI records delivered, by %llu flushes on the tracer's "
           "thread and %llu on the training thread; %llu processed\n", probe_mode_name(level),
           mc->label, (unsigned long long)(c.delivered - c0->delivered),
           (unsigned long long)want, (unsigned long long)bg, (unsigned long long)fg,
           (unsigned long long)st.cupti_records);
    CHECK(c.delivered - c0->delivered == want && bg > 0 && fg == 0,
          "%s %s: %llu of %llu CUPTI records delivered within 3 s, by %llu flushes off the "
          "training thread and %llu on it", probe_mode_name(level), mc->label,
          (unsigned long long)(c.delivered - c0->delivered), (unsigned long long)want,
          (unsigned long long)bg, (unsigned long long)fg);
    CHECK(st.cupti_records == want, "%s %s: %llu records processed, %llu delivered",
          probe_mode_name(level), mc->label, (unsigned long long)st.cupti_records,
          (unsigned long long)want);
}

/* The trace holds one cupti kernel row per kernel the stand-in launched (one per
 * correlation push), each attributed to a range of the run (none to setup). */
static void check_cupti_rows(const char *dir, const struct model_case *mc,
                             enum probe_mode level, uint64_t kernels)
{
    struct test_csv *t = test_csv_read(dir, "rank0.trace.csv");
    CHECK(t != NULL, "%s %s: no trace", probe_mode_name(level), mc->label);
    if (!t)
        return;
    const int name = test_csv_col(t, "name"), clock = test_csv_col(t, "clock"),
              phase = test_csv_col(t, "phase"), kind = test_csv_col(t, "kind");
    uint64_t rows = 0, setup = 0;
    for (int i = 0; i < t->nrows; i++) {
        if (strcmp(test_csv_get(t, i, name), "probe_cost_kernel") != 0)
            continue;
        rows++;
        setup += strcmp(test_csv_get(t, i, phase), "setup") == 0;
        CHECK(strcmp(test_csv_get(t, i, clock), "cupti") == 0 &&
                  strcmp(test_csv_get(t, i, kind), "kernel") == 0,
              "%s %s: a kernel row of clock %s, kind %s", probe_mode_name(level), mc->label,
              test_csv_get(t, i, clock), test_csv_get(t, i, kind));
    }
    test_csv_free(t);
    CHECK(rows == kernels && kernels > 0 && setup == 0,
          "%s %s: %llu cupti kernel rows (%llu unattributed) for %llu kernels launched",
          probe_mode_name(level), mc->label, (unsigned long long)rows,
          (unsigned long long)setup, (unsigned long long)kernels);
}

/* One configuration at one level: set up a rank as train.c does (with a fake comm for
 * DDP), train a warm-up epoch, count the next.  0, or -1 (CHECK failed). */
static int measure(const struct model_case *mc, enum probe_mode level, int watch_flusher,
                   struct cost *out)
{
    struct train_opts o;
    train_opts_default(&o);
    o.model = mc->model;
    o.model_opts.width = mc->width;
    o.data.batch_size = BATCH;
    o.data.shuffle = 0;
    o.run.quiet = 1;
    o.run.trace = level;
    char *dir = test_tmpdir();
    o.run.out_dir = dir;

    struct rank r = {0};
    r.o = &o;
    r.world = mc->world;
    r.local_world = 1;
    r.lr = 0.01f;
    int rc = -1;
    struct probe *p = NULL;
    struct comm *fake = NULL;
    r.dev.gpu = -1;
    r.dev.be = backend_cpu_create(1);
    CHECK(r.dev.be != NULL, "cpu backend: %s", error_get());
    if (!r.dev.be)
        goto out;
    struct backend *be = r.dev.be;
    int c, h, w, classes;
    CHECK(model_input(mc->model, &c, &h, &w, &classes) == 0, "%s", error_get());
    struct dataset test_set = {0};
    CHECK(synthetic_generate(c, h, w, 3, &r.train, &test_set) == 0, "%s", error_get());
    dataset_free(&test_set);
    /* each rank's share is n / world (the sampler's); WARM_STEPS <= STEPS: the warm-up
     * epoch is cut shorter below */
    r.train.n = BATCH * STEPS * mc->world;
    for (int k = 0; k < c; k++)
        r.train.mean[k] = 0.5f, r.train.std[k] = 0.25f;
    r.m = model_create_opts(mc->model, be, 7, &o.model_opts);
    CHECK(r.m != NULL, "%s: %s", mc->label, error_get());
    if (!r.m)
        goto out;
    struct optim_config oc = {.kind = OPTIM_SGD, .lr = 0.01, .momentum = 0.9};
    CHECK(optim_init(&r.opt, &r.m->params, &oc) == 0, "optim: %s", error_get());
    scaler_init(&r.scaler, 0);

    /* the probe, as rank_open_probe and device_probe_opts make it for a GPU rank */
    struct probe_opts po;
    probe_opts_default(&po);
    po.rank = 0;
    po.world_size = mc->world;
    po.run_dir = dir;
    po.mode = level;
    po.gpu = 1;
    po.compute_stream = (void *)&r;  /* any non-NULL cudaStream_t: the stand-in's */
    po.comm_stream = mc->world > 1 ? (void *)&o : NULL;
    po.quiet = 1;
    p = probe_create(&po);
    CHECK(p != NULL, "probe_create(%s): %s", probe_mode_name(level), error_get());
    if (!p)
        goto out;
    r.probe = p;
    if (level > PROBE_NVTX) /* CUPTI's start on the stand-in must succeed */
        CHECK(strcmp(probe_gpu_note(p), "") == 0, "%s: CUPTI did not start: %s",
              probe_mode_name(level), probe_gpu_note(p));
    struct probe_cost_counts c0;
    memset(&c0, 0, sizeof c0);
    if (cost_bind() == 0) {
        cost_mark();
        cost_read(&c0);
    }

    if (mc->world > 1) {
        fake = fake_comm_create(be);
        r.coll = fake ? comm_probe_wrap(fake, p) : NULL;
        r.red = fake ? reducer_create(&r.m->params, fake, 1u << 20, 25u << 20) : NULL;
        CHECK(r.coll && r.red, "DDP setup: %s", error_get());
        if (!r.coll || !r.red)
            goto out;
        r.m->set_sync_bn(r.m, r.coll);
        rank_session_observe(&r);
    }
    const struct rank_batch zero = {0};
    r.batch = zero;
    const size_t img = (size_t)c * h * w;
    r.batch.x_host = malloc((size_t)BATCH * img * sizeof(float));
    r.batch.y_host = malloc(BATCH * sizeof(int32_t));
    r.batch.indices = malloc(((size_t)r.train.n + 1) * sizeof(int64_t));
    r.batch.x_dev = be->alloc(be, (size_t)BATCH * img * sizeof(float));
    r.batch.y_dev = be->alloc(be, BATCH * sizeof(int32_t));
    r.batch.dlogits = be->alloc(be, (size_t)BATCH * classes * sizeof(float));
    r.batch.scalars = be->alloc(be, 3 * sizeof(float));
    CHECK(r.batch.x_host && r.batch.y_host && r.batch.indices && r.batch.x_dev &&
              r.batch.y_dev && r.batch.dlogits && r.batch.scalars,
          "out of memory");

    real_be = *be;
    be->download = count_download;
    be->synchronize = count_synchronize;
    be->softmax_xent = count_softmax_xent;
    be->count_correct = count_count_correct;
    be->free = count_free;

    double loss = 0;
    const int all_n = r.train.n;
    r.train.n = BATCH * WARM_STEPS * mc->world;
    int erc = rank_train_epoch(&r, 0, &loss);
    r.train.n = all_n;
    CHECK(erc == 0, "%s %s warm-up epoch: %s", mc->label, probe_mode_name(level), error_get());
    struct snap a, b;
    nvtx_capture_reset();
    snap_take(&a, p);
    erc = erc ? erc : rank_train_epoch(&r, 1, &loss);
    CHECK(erc == 0, "%s %s counted epoch: %s", mc->label, probe_mode_name(level), error_get());
    snap_take(&b, p);
    nvtx_capture_reset();
    CHECK(r.step == WARM_STEPS + STEPS || erc, "%s: %lld steps, not %d", mc->label, r.step,
          WARM_STEPS + STEPS);
    cost_diff(&a, &b, out);
    out->layers = r.m->layers.count;
    rc = erc ? -1 : 0;
    if (rc == 0 && level > PROBE_NVTX && watch_flusher)
        check_flusher(p, mc, level, &c0);

    *be = real_be;
out:
    if (p && probe_destroy(p))
        CHECK(0, "probe_destroy(%s): %s", probe_mode_name(level), error_get());
    p = NULL;
    if (rc == 0 && level > PROBE_NVTX && cost_read) {
        struct probe_cost_counts end;
        cost_read(&end);
        check_cupti_rows(dir, mc, level, end.kernels - c0.kernels);
    }
    if (r.dev.be) {
        struct backend *bk = r.dev.be;
        bk->free(bk, r.batch.x_dev);
        bk->free(bk, r.batch.y_dev);
        bk->free(bk, r.batch.dlogits);
        bk->free(bk, r.batch.scalars);
    }
    free(r.batch.x_host);
    free(r.batch.y_host);
    free(r.batch.indices);
    reducer_destroy(r.red);
    optim_free(&r.opt);
    if (r.m)
        r.m->destroy(r.m);
    if (r.coll)
        r.coll->destroy(r.coll);
    if (fake)
        fake->destroy(fake);
    dataset_free(&r.train);
    if (r.dev.be)
        r.dev.be->destroy(r.dev.be);
    test_tmpdir_done(dir);
    return rc;
}

/* ------------------------------------------------------------------ the table and the budget */

/* The default level's budget per training step, over --trace off: BUDGET_RANGES ranges (step,
 * data, forward, backward, optimizer) plus one per collective the step issues (a bucket's
 * all-reduce, comm_probe's for the others), each at most BUDGET_CUPTI_PER_RANGE CUPTI calls
 * (a correlation push and pop) on the training thread, an NVTX range and a host row; no
 * CUDA runtime call, event or host sync, no CUPTI flush on the training thread -- and so
 * nothing per layer or per parameter: the part left when the collectives are counted out is
 * the same for every model (ref: the first, ConvNet's baseline). */
#define BUDGET_RANGES 5
#define BUDGET_CUPTI_PER_RANGE 2
static void check_budget(const char *lv, const char *m, const struct cost *x,
                         const struct cost *ref)
{
    CHECK(x->cuda == 0 && x->events == 0 && x->cuda_syncs == 0,
          "default %s %s: %.1f CUDA runtime calls, %.1f events, %.1f host syncs per step "
          "(budget: none)", lv, m, x->cuda, x->events, x->cuda_syncs);
    CHECK(x->cupti_flush_train == 0, "default %s %s: %.1f CUPTI flushes per step on the "
          "training thread (budget: none; the tracer's thread flushes)", lv, m,
          x->cupti_flush_train);
    CHECK(x->layer_ranges == 0, "default %s %s: %.1f layer ranges per step (budget: none)", lv,
          m, x->layer_ranges);
    const double ranges = x->nvtx - x->collectives, ref_ranges = ref->nvtx - ref->collectives;
    CHECK(ranges <= BUDGET_RANGES && ranges == ref_ranges,
          "default %s %s: %.1f ranges per step beside its %.1f collectives (budget %d, %s: %.1f)",
          lv, m, ranges, x->collectives, BUDGET_RANGES, "ConvNet B", ref_ranges);
    CHECK(x->rows == x->nvtx, "default %s %s: %.1f rows for %.1f ranges", lv, m, x->rows,
          x->nvtx);
    const double fixed = x->cupti_train - BUDGET_CUPTI_PER_RANGE * x->collectives,
                 ref_fixed = ref->cupti_train - BUDGET_CUPTI_PER_RANGE * ref->collectives;
    CHECK(x->cupti_train <= BUDGET_CUPTI_PER_RANGE * x->nvtx && fixed == ref_fixed,
          "default %s %s: %.1f CUPTI calls per step for %.1f ranges, %.1f beside its "
          "collectives' (budget %d a range; ConvNet B: %.1f)", lv, m, x->cupti_train, x->nvtx,
          fixed, BUDGET_CUPTI_PER_RANGE, ref_fixed);
}

static const struct model_case cases[] = {
    {"ConvNet B", "convnet", 64, 1},     {"ResNet18/4 B", "resnet18", 4, 1},
    {"ResNet18/8 B", "resnet18", 8, 1},  {"ConvNet D", "convnet", 64, 2},
    {"ResNet18/4 D", "resnet18", 4, 2},  {"ResNet18/8 D", "resnet18", 8, 2},
};
#define NCASES (sizeof cases / sizeof cases[0])
#define DETAIL_CASE 4 /* ResNet18/4 D: its calls by name */

/* the levels this build knows, in order of cost ("kernels" where it exists) */
static const char *const level_names[] = {"off", "nvtx", "kernels", "full"};
#define NLEVELS (sizeof level_names / sizeof level_names[0])

static void print_row(const char *level, const struct model_case *mc, const struct cost *x)
{
    printf("  %-8s %-13s %6.1f %7.1f %6.1f %9.1f %9.1f %7.1f %7.1f %6.1f %8.1f %8.1f\n", level,
           mc->label, x->cuda, x->events, x->cuda_syncs, x->cupti_train, x->cupti_other,
           x->nvtx, x->layer_ranges, x->rows, x->backend_syncs, x->collectives);
}

int main(void)
{
    /* the stand-in module instead of the real one: before the probes' first load */
    setenv("DDPPROF_LIB_DIR", PROBE_COST_MODULE_DIR, 1);
    enum probe_mode def;
    {
        struct train_opts d;
        train_opts_default(&d);
        def = d.run.trace;
    }
    printf("per steady step, additions over --trace off (training thread unless said); "
           "default level: %s\n", probe_mode_name(def));
    printf("  %-8s %-13s %6s %7s %6s %9s %9s %7s %7s %6s %8s %8s\n", "level", "model",
           "CUDA", "events", "syncs", "CUPTI", "CUPTI-bg", "NVTX", "layers", "rows",
           "be-syncs", "collect.");
    struct cost off[NCASES], got[NLEVELS][NCASES];
    int have[NLEVELS] = {0};
    memset(got, 0, sizeof got);
    for (size_t li = 0; li < NLEVELS; li++) {
        enum probe_mode level;
        if (probe_mode_parse(level_names[li], &level) != 0) {
            printf("  (no level %s in this build)\n", level_names[li]);
            error_clear();
            continue;
        }
        have[li] = 1;
        for (size_t k = 0; k < NCASES; k++) {
            if (measure(&cases[k], level, level == def && k == 0, &got[li][k]) != 0)
                return test_finish();
            if (li == 0)
                off[k] = got[li][k];
            /* additions over off; backend syncs and collectives are the step's own */
            got[li][k].backend_syncs -= off[k].backend_syncs;
            print_row(level_names[li], &cases[k], &got[li][k]);
        }
    }
    /* which calls, for one model (ResNet18 at width 4, DDP) */
    for (size_t li = 0; li < NLEVELS && cost_name; li++) {
        const struct cost *x = &got[li][DETAIL_CASE];
        if (!have[li] || x->cuda + x->cupti_train + x->cupti_other == 0)
            continue;
        printf("%s, %s, per step:", level_names[li], cases[DETAIL_CASE].label);
        for (int k = 0; k < PROBE_COST_CALLS; k++)
            for (int t = 0; t < 2; t++)
                if (x->calls[t][k] > 0)
                    printf(" %s %.1f%s", cost_name(k), x->calls[t][k],
                           t ? " (another thread)" : "");
        printf("\n");
    }
    CHECK(cost_read != NULL, "the counting module was never loaded from %s",
          PROBE_COST_MODULE_DIR);

    for (size_t li = 0; li < NLEVELS; li++) {
        if (!have[li])
            continue;
        enum probe_mode level;
        probe_mode_parse(level_names[li], &level);
        for (size_t k = 0; k < NCASES; k++) {
            const struct cost *x = &got[li][k];
            const char *lv = level_names[li], *m = cases[k].label;
            CHECK(x->cuda_syncs == 0 && x->backend_syncs == 0,
                  "%s %s: %.1f CUDA host syncs and %+.1f backend host syncs per step", lv, m,
                  x->cuda_syncs, x->backend_syncs);
            CHECK(x->misuse == 0, "%s %s: %llu CUPTI correlation pops without a push", lv, m,
                  (unsigned long long)x->misuse);
            CHECK(x->collectives == off[k].collectives,
                  "%s %s: %.1f collectives per step, %.1f with --trace off", lv, m,
                  x->collectives, off[k].collectives);
            if (level == PROBE_OFF)
                CHECK(x->cuda == 0 && x->cupti_train + x->cupti_other == 0 && x->nvtx == 0 &&
                          x->rows == 0,
                      "off %s adds %.1f CUDA calls, %.1f CUPTI calls, %.1f NVTX ranges, "
                      "%.1f rows", m, x->cuda, x->cupti_train + x->cupti_other, x->nvtx,
                      x->rows);
            if (level == PROBE_NVTX)
                CHECK(x->cuda == 0 && x->cupti_train + x->cupti_other == 0,
                      "nvtx %s: %.1f CUDA and %.1f CUPTI calls per step (nvtx uses neither)",
                      m, x->cuda, x->cupti_train + x->cupti_other);
            if (level == PROBE_FULL) /* it may grow with the layers: by this much */
                /* >=: a re-anchor (about once a second) records one more */
                CHECK(x->events >= 2 * x->nvtx && x->layer_ranges == 2 * x->layers,
                      "full %s: %.1f events for %.1f ranges, %.1f of them of its %d layers: "
                      "not an event pair a range and a forward and a backward range a layer",
                      m, x->events, x->nvtx, x->layer_ranges, x->layers);
            if (level == def)
                check_budget(lv, m, x, &got[li][0]);
        }
    }
    return test_finish();
}
