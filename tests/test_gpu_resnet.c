/* test_gpu_resnet.c — the example's ResNet18 on the CUDA backend.
 *
 * (1) PyTorch's golden batch at width 2 (tests/golden/resnet18_w2_*.safetensors, as
 *     test_resnet18 on the CPU): train-mode logits and loss, every gradient, the running
 *     statistics and the eval logits, on the GPU.
 * (2) GPU against CPU at width 8 from the same parameters and batch (16 CIFAR-shaped
 *     images): logits and the whole gradient in fp32, and under autocast in fp16 and bf16
 *     (the GPU computes on half tensors, the CPU emulates the same rounding points); then
 *     three Adam steps on each, losses step by step.
 * Prints the GPU's ResNet18 (width 64) training images/s at batch 128 in fp32 and fp16
 * (informational, never asserted).  Skips (77) without CUDA or a GPU.
 *
 * Tolerances.  fp32: cuDNN's algorithms (possibly FFT or Winograd, ~1e-4 of a tensor's
 * range) against im2col GEMMs, through 18 BatchNorms: 1e-3 of each tensor's largest
 * value, as test_gpu_train's ConvNet (an indexing error is O(1)); the whole gradient's
 * cosine with the CPU's at least 0.999.  Autocast: both sides round every activation, but
 * where their fp32 sums differ in the last bits a rounding lands one half spacing apart,
 * and BatchNorm's backward over 64-value channels and flipping ReLU masks amplify that
 * (test_resnet18 measures the half types against fp32 on the CPU: cosine 0.991 fp16, 0.92
 * bf16); so logits within 2% (fp16) / 10% (bf16) of their range and gradient cosines of at
 * least 0.95 / 0.75: a half tensor read as fp32 or a missing cast gives garbage.  Adam
 * steps: losses within 1e-3 relative in fp32 and 5% under autocast. */
#include "backend/backend.h"
#include "common/clock.h"
#include "common/error.h"
#include "cuda/cuda_api.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANGE_TOL 1e-3

static struct st_file *expect;

static float *download(struct backend *be, const float *dev, size_t n)
{
    float *h = malloc(n * sizeof *h);
    be->download(be, h, dev, n * sizeof *h);
    return h;
}

static void check_close(const char *what, const float *got, const float *want, size_t n,
                        double rel_range, double rtol)
{
    double *w = malloc(n * sizeof *w), scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        w[i] = want[i];
        scale = fmax(scale, fabs(w[i]));
    }
    const double err = test_max_err(got, w, n, rel_range * scale + 1e-12, rtol);
    CHECK(err <= 1.0, "%s: worst error %.3g of the tolerance (largest |value| %.3g)", what, err,
          scale);
    free(w);
}

static void check_golden(struct backend *be, const char *name, const float *dev, size_t n,
                         double rel_range, double rtol)
{
    const struct st_tensor *t = st_find(expect, name);
    CHECK(t && (size_t)t->numel == n, "golden tensor %s missing or of another size", name);
    if (!t || (size_t)t->numel != n)
        return;
    float *got = download(be, dev, n);
    check_close(name, got, t->data, n, rel_range, rtol);
    free(got);
}

/* (1) */
static void test_golden(struct backend *be)
{
    char init_path[4096], expect_path[4096];
    snprintf(init_path, sizeof init_path, "%s/tests/golden/resnet18_w2_init.safetensors",
             test_source_dir());
    snprintf(expect_path, sizeof expect_path, "%s/tests/golden/resnet18_w2_expect.safetensors",
             test_source_dir());
    expect = st_open(expect_path);
    CHECK(expect != NULL, "open %s: %s", expect_path, error_get());
    struct model *m = expect ? resnet18_create(be, 123, 2) : NULL;
    CHECK(m != NULL, "model: %s", error_get());
    if (!m)
        return;
    CHECK(checkpoint_load_model(init_path, &m->params) == 0, "load init: %s", error_get());
    const struct st_tensor *x = st_find(expect, "input"), *y = st_find(expect, "labels");
    const int n = (int)x->shape[0];
    float *xd = be->alloc(be, x->nbytes), *dlogits = be->alloc(be, (size_t)n * 10 * 4);
    int32_t labels[16], *yd = be->alloc(be, (size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)((const int64_t *)y->data)[i];
    be->upload(be, xd, x->data, x->nbytes);
    be->upload(be, yd, labels, (size_t)n * sizeof(int32_t));
    const float *logits;
    CHECK(m->forward(m, xd, n, 1, &logits) == 0, "forward: %s", error_get());
    check_golden(be, "logits", logits, (size_t)n * 10, RANGE_TOL, 0.0);
    const float loss = be->softmax_xent(be, n, 10, logits, yd, dlogits);
    const float want = *(const float *)st_find(expect, "loss")->data;
    CHECK(fabsf(loss - want) <= 1e-4f * fabsf(want), "loss %.8f, PyTorch %.8f", (double)loss,
          (double)want);
    CHECK(m->backward(m, dlogits, NULL) == 0, "backward: %s", error_get());
    char name[256];
    for (int i = 0; i < m->params.count; i++) {
        struct param *p = m->params.items[i];
        if (p->kind == PARAM_TRAINABLE) {
            snprintf(name, sizeof name, "grad.%s", p->name);
            check_golden(be, name, p->grad, p->numel, RANGE_TOL, 0.0);
        } else if (p->kind == PARAM_BUFFER) {
            snprintf(name, sizeof name, "running.%s", p->name);
            check_golden(be, name, p->data, p->numel, 1e-6, 1e-5);
        }
    }
    CHECK(m->forward(m, xd, n, 0, &logits) == 0, "eval forward: %s", error_get());
    check_golden(be, "eval_logits", logits, (size_t)n * 10, RANGE_TOL, 0.0);
    CHECK(be->status(be) == 0, "backend: %s", error_get());
    be->free(be, xd), be->free(be, dlogits), be->free(be, yd);
    m->destroy(m);
    st_close(expect);
}

/* one model on one backend, for (2) */
struct side {
    struct backend *be;
    struct model *m;
    struct optim opt;
    float *x, *dlogits;
    int32_t *y;
};

static int side_open(struct side *s, struct backend *be, int width, int n, const float *x,
                     const int32_t *y)
{
    s->be = be;
    s->m = resnet18_create(be, 11, width);
    const struct optim_config cfg = {.kind = OPTIM_ADAM, .lr = 1e-3, .beta1 = 0.9,
                                     .beta2 = 0.999, .eps = 1e-8};
    if (!s->m || optim_init(&s->opt, &s->m->params, &cfg))
        return -1;
    s->x = be->alloc(be, (size_t)n * 3072 * sizeof(float));
    s->y = be->alloc(be, (size_t)n * sizeof(int32_t));
    s->dlogits = be->alloc(be, (size_t)n * 10 * sizeof(float));
    if (!s->x || !s->y || !s->dlogits)
        return -1;
    be->upload(be, s->x, x, (size_t)n * 3072 * sizeof(float));
    be->upload(be, s->y, y, (size_t)n * sizeof(int32_t));
    return 0;
}

static void side_close(struct side *s)
{
    if (s->m) {
        optim_free(&s->opt);
        s->m->destroy(s->m);
    }
    s->be->free(s->be, s->x), s->be->free(s->be, s->y), s->be->free(s->be, s->dlogits);
}

/* forward, loss, backward; the logits (n*10) and the whole gradient (caller frees) */
static float side_pass(struct side *s, int n, float **logits_out, float **grad_out)
{
    const float *logits;
    if (s->m->forward(s->m, s->x, n, 1, &logits))
        return NAN;
    *logits_out = download(s->be, logits, (size_t)n * 10);
    const float loss = s->be->softmax_xent(s->be, n, 10, logits, s->y, s->dlogits);
    if (s->m->backward(s->m, s->dlogits, NULL))
        return NAN;
    const size_t total = params_trainable_numel(&s->m->params);
    float *g = malloc(total * sizeof *g);
    for (int i = 0, at = 0; i < s->m->params.count; i++) {
        const struct param *p = s->m->params.items[i];
        if (p->kind == PARAM_TRAINABLE) {
            s->be->download(s->be, g + at, p->grad, p->numel * sizeof(float));
            at += (int)p->numel;
        }
    }
    *grad_out = g;
    return loss;
}

static double cosine(const float *a, const float *b, size_t n)
{
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        dot += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
    }
    return dot / sqrt(na * nb);
}

/* (2) */
static void test_against_cpu(struct backend *gpu)
{
    const int n = 16;
    float *x = malloc((size_t)n * 3072 * sizeof *x);
    int32_t y[16];
    uint64_t seed = 3;
    test_fill_uniform(x, (size_t)n * 3072, -2.0f, 2.0f, &seed);
    for (int i = 0; i < n; i++)
        y[i] = i % 10;
    struct backend *cpu = backend_cpu_create(0);
    CHECK(cpu != NULL, "cpu backend: %s", error_get());
    for (int amp = AMP_OFF; amp <= AMP_BF16 && cpu; amp++) {
        const char *what = amp == AMP_OFF ? "fp32" : amp == AMP_F16 ? "fp16" : "bf16";
        struct side c = {0}, g = {0};
        const int ok = side_open(&c, cpu, 8, n, x, y) == 0 &&
                       side_open(&g, gpu, 8, n, x, y) == 0 &&
                       c.m->set_amp(c.m, (enum amp_dtype)amp) == 0 &&
                       g.m->set_amp(g.m, (enum amp_dtype)amp) == 0;
        CHECK(ok, "%s: models: %s", what, error_get());
        if (!ok) {
            side_close(&c), side_close(&g);
            continue;
        }
        float *lc, *lg, *gc, *gg;
        const float loss_c = side_pass(&c, n, &lc, &gc), loss_g = side_pass(&g, n, &lg, &gg);
        CHECK(!isnan(loss_c) && !isnan(loss_g), "%s: pass failed: %s", what, error_get());
        if (isnan(loss_c) || isnan(loss_g)) {
            side_close(&c), side_close(&g);
            continue;
        }
        const size_t total = params_trainable_numel(&c.m->params);
        const double range_tol = amp == AMP_OFF ? RANGE_TOL : amp == AMP_F16 ? 0.02 : 0.1;
        const double cos_min = amp == AMP_OFF ? 0.999 : amp == AMP_F16 ? 0.95 : 0.75;
        char label[64];
        snprintf(label, sizeof label, "%s logits, GPU vs CPU", what);
        check_close(label, lg, lc, (size_t)n * 10, range_tol, 0.0);
        const double cs = cosine(gg, gc, total);
        CHECK(cs >= cos_min, "%s: gradient cosine GPU vs CPU %.5f, want at least %.3f", what, cs,
              cos_min);
        printf("%s: loss GPU %.6f CPU %.6f, gradient cosine %.5f\n", what, (double)loss_g,
               (double)loss_c, cs);
        free(lc), free(lg), free(gc), free(gg);
        /* three Adam steps on each, the loss after each */
        const double loss_tol = amp == AMP_OFF ? 1e-3 : 0.05;
        for (int step = 1; step <= 3; step++) {
            CHECK(optim_step(&c.opt) == 0 && optim_step(&g.opt) == 0, "%s step %d", what, step);
            const float a = side_pass(&c, n, &lc, &gc), b = side_pass(&g, n, &lg, &gg);
            CHECK(fabsf(a - b) <= loss_tol * fabsf(a), "%s after Adam step %d: loss GPU %.6f, "
                  "CPU %.6f", what, step, (double)b, (double)a);
            free(lc), free(lg), free(gc), free(gg);
        }
        CHECK(gpu->status(gpu) == 0, "%s: backend: %s", what, error_get());
        side_close(&c), side_close(&g);
    }
    if (cpu)
        cpu->destroy(cpu);
    free(x);
}

/* informational: width 64 (the example's network), batch 128, 5 timed steps */
static void report_speed(struct backend *gpu)
{
    const int n = 128, steps = 5;
    float *x = malloc((size_t)n * 3072 * sizeof *x);
    int32_t y[128];
    uint64_t seed = 5;
    test_fill_uniform(x, (size_t)n * 3072, -2.0f, 2.0f, &seed);
    for (int i = 0; i < n; i++)
        y[i] = i % 10;
    for (int amp = AMP_OFF; amp <= AMP_F16; amp++) {
        struct side s = {0};
        if (side_open(&s, gpu, 64, n, x, y) || s.m->set_amp(s.m, (enum amp_dtype)amp)) {
            printf("speed: %s\n", error_get());
            side_close(&s);
            break;
        }
        double t0 = 0;
        for (int k = 0; k <= steps; k++) {
            if (k == 1) {
                gpu->synchronize(gpu);
                t0 = clock_now_s();
            }
            const float *logits;
            if (s.m->forward(s.m, s.x, n, 1, &logits))
                break;
            gpu->softmax_xent(gpu, n, 10, logits, s.y, s.dlogits);
            if (s.m->backward(s.m, s.dlogits, NULL) || optim_step(&s.opt))
                break;
        }
        gpu->synchronize(gpu);
        printf("resnet18 width 64 batch %d on the GPU, %s: %.0f images/s (informational)\n", n,
               amp == AMP_OFF ? "fp32" : "fp16 autocast", steps * n / (clock_now_s() - t0));
        side_close(&s);
    }
    free(x);
}

int main(void)
{
    if (!cuda_build_enabled())
        test_skip("this build has no CUDA (toolkit not found or -DDDPPROF_CUDA=OFF)");
    if (cuda_device_count() == 0)
        test_skip("no CUDA device (no GPU or no driver): GPU training tests need one");
    struct backend *gpu = backend_cuda_create(0);
    CHECK(gpu != NULL, "cuda backend: %s", error_get());
    if (!gpu)
        return test_finish();
    test_golden(gpu);
    test_against_cpu(gpu);
    report_speed(gpu);
    gpu->destroy(gpu);
    return test_finish();
}
