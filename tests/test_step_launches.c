/* test_step_launches.c — the GPU operations one training step queues, per model, precision
 * and optimizer (issue 34 item 5: a step that is not launch-bound): ResNet18's within its
 * budget of 300, and no optimizer or bucket work per parameter tensor.
 *
 * The CUDA backend itself (trainer/cuda/backend_cuda.c and kernels.cu) runs here on the
 * CPU, through tests/cuda_emu: its runtime, cuDNN, cuBLAS and NCCL calls go to stand-ins
 * that compute on the host and count every operation a GPU would run (cuda_emu.h
 * emu_ops): each kernel launch, memset and memcpy, each cuDNN convolution and each cuBLAS
 * GEMM as one, and each layout transform a real cuDNN would run around a convolution as
 * one more (cudnn_emu.c emu_conv_transforms: one per NCHW operand of a half-type call, its
 * source in cuDNN's documentation).  So a count here is a lower bound of what Nsight
 * Systems shows on a GPU: cuDNN and cuBLAS may launch more than one kernel per call.
 *
 * Channels-last (issue 34 item 5: "convolutions run channels-last where cuDNN supports
 * it, so the layout transposes go"): the default backend keeps half tensors NHWC, and its
 * half steps must count no transform.  Each half configuration runs again on a backend
 * with DDPPROF_CHANNELS_LAST=0 (every tensor NCHW, the layout before): that step counts
 * the transforms the default removed, and its losses must be the default's exactly.  Collectives are counted too, one each (NCCL launches
 * one kernel per collective), through a fake comm of world 1: every all-reduce the trainer
 * queues on a single GPU (DDP's buckets, the logged loss) and none of the host-side work.
 *
 * The step is train_step.c's rank_step in its order -- the batch's two uploads, forward,
 * loss, backward scaled by the GradScaler with the DDP reducer's hook, reducer_finish, the
 * loss's global mean and its read, unscale and found_inf, the optimizer -- without the
 * probes (they queue events, not operations).  Step 1 warms up (the optimizer's
 * state and the autocast copies are allocated there); steps 2 and 3 are counted and must
 * queue the same operations.  The GradScaler starts at 2^4, not 2^16, so that no step
 * finds an inf (a skipped step queues no optimizer update).  ResNet18 runs at its full width (64: 11.2M parameters, 62
 * trainable tensors) on 8x8 images instead of 32x32 (no operation depends on the image
 * size; the emulated convolutions are 16x faster), the ConvNet on its 28x28; batch 2. */
#include "backend/backend.h"
#include "comm/comm.h"
#include "common/error.h"
#include "cuda/cuda_api.h"
#include "ddp/reducer.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/scaler.h"
#include "testutil.h"

#include <cuda_runtime.h> /* tests/cuda_emu: emu_ops */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 2
#define RESNET_SIDE 8

/* issue 34 item 5: ResNet18's step at most 300 operations (issue 34 saw about 776 on an
 * H200, cuDNN's own kernels included; 584 counted here before the fused optimizer, flat
 * gradient buckets, one-launch reductions and one-operation autocast casts) */
#define RESNET18_BUDGET 300
/* the optimizer phase may not grow with the number of parameter tensors: the GradScaler's
 * flag reset, its unscale and the flag's read, and one update over the flat buffers; the
 * reduce phase (world 1) the loss's mean, its all-reduce and its read, no per-parameter
 * copy out of a bucket */
#define OPTIMIZER_MOST 4
#define REDUCE_MOST 3

/* ------------------------------------------------------------------ the fake comm */

struct comm_work {
    int unused;
};

/* world 1, as a single GPU's run: a collective leaves the data as it is and counts as one
 * operation (a GPU's NCCL kernel) */
struct fake_comm {
    struct comm ops;
    struct comm_work work;
    unsigned long long collectives;
};

static struct comm_work *fake_allreduce_async(struct comm *c, void *buf, size_t count,
                                              enum comm_dtype dt)
{
    (void)buf, (void)count, (void)dt;
    struct fake_comm *f = (struct fake_comm *)c;
    f->collectives++;
    return &f->work;
}

static int fake_wait(struct comm *c, struct comm_work *w, struct comm_span *span)
{
    (void)c, (void)w;
    if (span)
        span->start_ns = span->end_ns = 0;
    return 0;
}

static int fake_join(struct comm *c, struct comm_work *w)
{
    (void)c, (void)w;
    return 0;
}

static int fake_allgather(struct comm *c, const void *send, void *recv, size_t count,
                          enum comm_dtype dt)
{
    ((struct fake_comm *)c)->collectives++;
    memcpy(recv, send, count * comm_dtype_size(dt));
    return 0;
}

static int fake_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    (void)buf, (void)count, (void)dt, (void)root;
    ((struct fake_comm *)c)->collectives++;
    return 0;
}

static int fake_reduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    return fake_broadcast(c, buf, count, dt, root);
}

static int fake_barrier(struct comm *c)
{
    (void)c;
    return 0;
}

static int fake_settle(struct comm *c)
{
    (void)c;
    return 0;
}

static void *fake_stream(struct comm *c)
{
    (void)c;
    return NULL;
}

static void fake_destroy(struct comm *c) { (void)c; }

static struct fake_comm fake_comm_make(void)
{
    return (struct fake_comm){
        .ops = {.name = "fake", .rank = 0, .world = 1, .broadcast = fake_broadcast,
                .allreduce_async = fake_allreduce_async, .wait = fake_wait, .join = fake_join,
                .reduce = fake_reduce, .allgather = fake_allgather,
                .allgather_join = fake_allgather, .barrier = fake_barrier,
                .settle = fake_settle, .stream = fake_stream, .destroy = fake_destroy}};
}

/* ------------------------------------------------------------------ counting */

enum phase { PH_DATA, PH_FORWARD, PH_BACKWARD, PH_REDUCE, PH_OPTIMIZER, PH_COUNT };
static const char *const phase_name[PH_COUNT] = {"data", "forward", "backward", "reduce",
                                                 "optimizer"};

/* one step's operations: per phase, and in all by kind */
struct step_count {
    unsigned long long phase[PH_COUNT];
    struct emu_ops ops;
    unsigned long long collectives;
    unsigned long long total;
    float loss[2]; /* the counted steps' losses */
};

static struct fake_comm *counted_comm;
static struct step_count *counting;
static unsigned long long phase_start;
static struct emu_ops kind_start;

/* everything queued since the last mark goes to phase ph */
static void mark(enum phase ph)
{
    struct emu_ops now;
    emu_ops_get(&now);
    const unsigned long long t = emu_ops_total(&now) + counted_comm->collectives;
    if (counting)
        counting->phase[ph] += t - phase_start;
    phase_start = t;
}

static void count_begin(struct step_count *c)
{
    memset(c, 0, sizeof *c);
    counting = NULL;
    mark(PH_DATA);
    counting = c;
    emu_ops_get(&kind_start);
    c->collectives = counted_comm->collectives;
}

static void count_end(struct step_count *c)
{
    struct emu_ops now;
    emu_ops_get(&now);
    c->ops.kernels = now.kernels - kind_start.kernels;
    c->ops.memsets = now.memsets - kind_start.memsets;
    for (int k = 0; k < 5; k++)
        c->ops.memcpys[k] = now.memcpys[k] - kind_start.memcpys[k];
    c->ops.cudnn_convs = now.cudnn_convs - kind_start.cudnn_convs;
    c->ops.cublas_gemms = now.cublas_gemms - kind_start.cublas_gemms;
    c->ops.cudnn_transforms = now.cudnn_transforms - kind_start.cudnn_transforms;
    c->collectives = counted_comm->collectives - c->collectives;
    c->total = emu_ops_total(&c->ops) + c->collectives;
    counting = NULL;
}

/* ------------------------------------------------------------------ the step */

struct setup {
    struct backend *be;
    struct fake_comm comm;
    struct model *m;
    struct reducer *red;
    struct optim opt;
    struct grad_scaler scaler;
    float *x, *dlogits, *scalars, *x_host;
    int32_t *y, y_host[BATCH];
    size_t nx;
};

/* train_step.c's rank_load_batch and rank_step, in their order, without the probes */
static int step(struct setup *s, float *loss, int *found_inf)
{
    struct backend *be = s->be;
    struct model *m = s->m;
    struct comm *comm = &s->comm.ops;
    be->upload(be, s->x, s->x_host, s->nx * sizeof(float));
    be->upload(be, s->y, s->y_host, sizeof s->y_host);
    mark(PH_DATA);
    const float *logits;
    if (m->forward(m, s->x, BATCH, 1, &logits))
        return -1;
    be->softmax_xent_dev(be, BATCH, m->classes, logits, s->y, s->dlogits, s->scalars);
    if (be->status(be))
        return -1;
    mark(PH_FORWARD);
    if (s->scaler.enabled)
        be->scale(be, (size_t)BATCH * m->classes, s->scaler.scale, s->dlogits, s->dlogits);
    struct grad_hook hook = reducer_hook(s->red);
    if (m->backward(m, s->dlogits, &hook))
        return -1;
    mark(PH_BACKWARD);
    if (reducer_finish(s->red))
        return -1;
    be->scale(be, 1, 1.0f / (float)comm->world, s->scalars, s->scalars);
    if (comm_allreduce_join(comm, s->scalars, 1, COMM_F32) || comm_settle(comm))
        return -1;
    be->download(be, loss, s->scalars, sizeof *loss);
    if (be->status(be))
        return -1;
    mark(PH_REDUCE);
    if (scaler_unscale(&s->scaler, &m->params, comm, s->scalars, found_inf))
        return -1;
    if (!*found_inf && optim_step(&s->opt))
        return -1;
    scaler_update(&s->scaler, *found_inf);
    mark(PH_OPTIMIZER);
    return 0;
}

struct config {
    const char *model;
    enum amp_dtype amp;
    enum optim_kind optim;
};

static const char *amp_name(enum amp_dtype a)
{
    return a == AMP_F16 ? "fp16" : a == AMP_BF16 ? "bf16" : "fp32";
}

/* the counted step of one configuration; 0, or -1 (failed: already reported) */
static int measure(struct backend *be, const struct config *cfg, struct step_count *out)
{
    struct setup s = {.be = be, .comm = fake_comm_make()};
    int rc = -1;
    counted_comm = &s.comm;
    s.m = model_create(cfg->model, be, 11);
    CHECK(s.m != NULL, "%s: %s", cfg->model, error_get());
    if (!s.m)
        return -1;
    if (strcmp(cfg->model, "resnet18") == 0)
        s.m->in_h = s.m->in_w = RESNET_SIDE; /* see the top of the file */
    const struct optim_config oc = {.kind = cfg->optim, .lr = 0.01, .momentum = 0.9,
                                    .weight_decay = 5e-4, .beta1 = 0.9, .beta2 = 0.999,
                                    .eps = 1e-8};
    if ((cfg->amp != AMP_OFF && s.m->set_amp(s.m, cfg->amp)) ||
        !(s.red = reducer_create(&s.m->params, &s.comm.ops, (size_t)1 << 20,
                                 (size_t)25 << 20)) ||
        optim_init(&s.opt, &s.m->params, &oc)) {
        CHECK(0, "%s setup: %s", cfg->model, error_get());
        goto out;
    }
    scaler_init(&s.scaler, cfg->amp == AMP_F16);
    s.scaler.scale = 16.0f; /* no inf on these inputs: every counted step steps */
    s.nx = (size_t)BATCH * s.m->in_c * s.m->in_h * s.m->in_w;
    s.x = be->alloc(be, s.nx * sizeof(float));
    s.y = be->alloc(be, sizeof s.y_host);
    s.dlogits = be->alloc(be, (size_t)BATCH * s.m->classes * sizeof(float));
    s.scalars = be->alloc(be, 4 * sizeof(float));
    s.x_host = malloc(s.nx * sizeof(float));
    if (!s.x || !s.y || !s.dlogits || !s.scalars || !s.x_host) {
        CHECK(0, "buffers: %s", error_get());
        goto out;
    }
    uint64_t seed = 3;
    test_fill_uniform(s.x_host, s.nx, -1.0f, 1.0f, &seed);
    for (int i = 0; i < BATCH; i++)
        s.y_host[i] = i % s.m->classes;
    struct step_count c[2];
    for (int k = 0; k < 3; k++) {
        float loss = NAN;
        int found = 0;
        if (k >= 1)
            count_begin(&c[k - 1]);
        const int failed = step(&s, &loss, &found);
        if (k >= 1) {
            count_end(&c[k - 1]);
            c[k - 1].loss[0] = loss;
        }
        CHECK(!failed && isfinite(loss) && !found, "%s %s %s step %d: %s (loss %g, found_inf %d)",
              cfg->model, amp_name(cfg->amp), optim_name(cfg->optim), k + 1,
              failed ? error_get() : "ok", (double)loss, found);
        if (failed || !isfinite(loss) || found)
            goto out;
    }
    const float step3_loss = c[1].loss[0];
    c[1].loss[0] = c[0].loss[0]; /* the losses differ; everything else may not */
    CHECK(memcmp(&c[0], &c[1], sizeof c[0]) == 0,
          "%s %s %s: steps 2 and 3 queue different operations (%llu, %llu)", cfg->model,
          amp_name(cfg->amp), optim_name(cfg->optim), c[0].total, c[1].total);
    *out = c[0];
    out->loss[1] = step3_loss;
    rc = 0;
out:
    be->free(be, s.x);
    be->free(be, s.y);
    be->free(be, s.dlogits);
    be->free(be, s.scalars);
    free(s.x_host);
    optim_free(&s.opt);
    reducer_destroy(s.red);
    if (s.m)
        s.m->destroy(s.m);
    return rc;
}

static void print_row(const struct config *cfg, const char *layout, const struct step_count *c)
{
    unsigned long long memcpys = 0;
    for (int k = 0; k < 5; k++)
        memcpys += c->ops.memcpys[k];
    printf("%-9s %-5s %-5s %-6s %6llu | %5llu %5llu %5llu %5llu %5llu | %7llu %6llu %6llu %6llu "
           "%5llu %5llu %6llu\n",
           cfg->model, amp_name(cfg->amp), optim_name(cfg->optim), layout, c->total,
           c->phase[PH_DATA], c->phase[PH_FORWARD], c->phase[PH_BACKWARD], c->phase[PH_REDUCE],
           c->phase[PH_OPTIMIZER], c->ops.kernels, c->ops.memsets, memcpys, c->ops.cudnn_convs,
           c->ops.cublas_gemms, c->collectives, c->ops.cudnn_transforms);
}

/* The CUDA backend with every tensor NCHW: DDPPROF_CHANNELS_LAST=0 at its creation */
static struct backend *backend_nchw(void)
{
    setenv("DDPPROF_CHANNELS_LAST", "0", 1);
    struct backend *be = backend_cuda_create(0);
    unsetenv("DDPPROF_CHANNELS_LAST");
    return be;
}

int main(void)
{
    unsetenv("DDPPROF_CHANNELS_LAST"); /* the default: channels-last */
    struct backend *be = backend_cuda_create(0);
    struct backend *nchw = backend_nchw();
    CHECK(be != NULL && nchw != NULL, "the emulated CUDA backend: %s", error_get());
    if (!be || !nchw)
        return test_finish();
    CHECK(be->layout(be, DT_F16) == LAYOUT_NHWC && be->layout(be, DT_BF16) == LAYOUT_NHWC &&
              be->layout(be, DT_F32) == LAYOUT_NCHW && nchw->layout(nchw, DT_F16) == LAYOUT_NCHW,
          "layouts: the default backend's half types must be NHWC, fp32 NCHW; with "
          "DDPPROF_CHANNELS_LAST=0 all NCHW");
    static const struct config configs[] = {
        {"convnet", AMP_OFF, OPTIM_SGD},  {"convnet", AMP_OFF, OPTIM_ADAM},
        {"convnet", AMP_F16, OPTIM_SGD},  {"convnet", AMP_F16, OPTIM_ADAM},
        {"resnet18", AMP_OFF, OPTIM_SGD}, {"resnet18", AMP_OFF, OPTIM_ADAM},
        {"resnet18", AMP_F16, OPTIM_SGD}, {"resnet18", AMP_F16, OPTIM_ADAM},
        {"convnet", AMP_BF16, OPTIM_SGD}, {"resnet18", AMP_BF16, OPTIM_SGD},
    };
    printf("GPU operations per training step (batch %d, world 1; cuDNN and cuBLAS calls "
           "count one each)\n", BATCH);
    printf("%-9s %-5s %-5s %-6s %6s | %5s %5s %5s %5s %5s | %7s %6s %6s %6s %5s %5s %6s\n",
           "model", "prec", "optim", "layout", "total", phase_name[0], "fwd", "bwd", "reduc",
           "optim", "kernels", "memset", "memcpy", "cudnn", "gemm", "coll", "transp");
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        const struct config *cfg = &configs[i];
        struct step_count c;
        if (measure(be, cfg, &c))
            continue;
        print_row(cfg, cfg->amp == AMP_OFF ? "nchw" : "nhwc", &c);
        /* the default's convolutions need no layout transform: fp32 runs none, and half
         * data is NHWC throughout */
        CHECK(c.ops.cudnn_transforms == 0,
              "%s %s %s: %llu cuDNN layout transforms a step (channels-last must leave none)",
              cfg->model, amp_name(cfg->amp), optim_name(cfg->optim), c.ops.cudnn_transforms);
        struct step_count before;
        if (cfg->amp != AMP_OFF && measure(nchw, cfg, &before) == 0) {
            print_row(cfg, "nchw", &before);
            /* every tensor NCHW, as before channels-last: cuDNN transforms x, w and y of
             * every half convolution call */
            CHECK(before.ops.cudnn_transforms == 3 * before.ops.cudnn_convs &&
                      before.total == c.total + before.ops.cudnn_transforms +
                                          (before.ops.kernels - c.ops.kernels),
                  "%s %s %s NCHW: %llu transforms for %llu convolutions, %llu operations "
                  "(channels-last: %llu)",
                  cfg->model, amp_name(cfg->amp), optim_name(cfg->optim),
                  before.ops.cudnn_transforms, before.ops.cudnn_convs, before.total, c.total);
            /* the same training in another layout: the emulated cuDNN computes each
             * direction from the same NCHW float copies whatever the descriptors' format,
             * and the kernels sum each channel in the same order in both layouts, so the
             * losses are the same bits */
            CHECK(before.loss[0] == c.loss[0] && before.loss[1] == c.loss[1],
                  "%s %s %s: losses %.9g %.9g channels-last, %.9g %.9g NCHW (must be equal)",
                  cfg->model, amp_name(cfg->amp), optim_name(cfg->optim), (double)c.loss[0],
                  (double)c.loss[1], (double)before.loss[0], (double)before.loss[1]);
        }
        unsigned long long sum = 0;
        for (int p = 0; p < PH_COUNT; p++)
            sum += c.phase[p];
        CHECK(sum == c.total && c.ops.kernels > 0 && c.ops.cudnn_convs > 0 &&
                  c.ops.cublas_gemms > 0,
              "%s %s %s: phases sum to %llu of %llu; kernels %llu, convolutions %llu, GEMMs "
              "%llu (all must run)",
              cfg->model, amp_name(cfg->amp), optim_name(cfg->optim), sum, c.total,
              c.ops.kernels, c.ops.cudnn_convs, c.ops.cublas_gemms);
        CHECK(strcmp(cfg->model, "resnet18") != 0 || c.total <= RESNET18_BUDGET,
              "resnet18 %s %s: %llu operations a step, over the budget of %d",
              amp_name(cfg->amp), optim_name(cfg->optim), c.total, RESNET18_BUDGET);
        CHECK(c.phase[PH_OPTIMIZER] <= OPTIMIZER_MOST && c.phase[PH_REDUCE] <= REDUCE_MOST,
              "%s %s %s: optimizer %llu operations (at most %d), reduce %llu (at most %d): "
              "per-tensor work is back",
              cfg->model, amp_name(cfg->amp), optim_name(cfg->optim), c.phase[PH_OPTIMIZER],
              OPTIMIZER_MOST, c.phase[PH_REDUCE], REDUCE_MOST);
    }
    be->destroy(be);
    nchw->destroy(nchw);
    printf("%llu blocks, %llu threads\n", emu_blocks_run(), emu_threads_run());
    return test_finish();
}
