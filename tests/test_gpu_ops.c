/* test_gpu_ops.c — every slot of the CUDA backend against the CPU backend (the oracle) on
 * random inputs, ggml test-backend-ops style: same inputs on both, GPU result compared
 * with the CPU's under a per-op tolerance whose reason is written next to it.  Shapes are
 * the ConvNet's and ResNet18's (CIFAR) plus odd ones (odd sizes, overlapping and gapped
 * pooling windows, NULL optional arguments, in-place calls, NaN, ties, bad labels).
 * Convolutions run twice: with cuDNN's heuristics and with DDPPROF_CUDNN_BENCHMARK=1
 * (cudnnFind*).  A deliberately failing op must show up in the backend's status slot.
 *
 * Prints a table of the worst error per op; with DDPPROF_GPU_OPS_REPORT=FILE also writes
 * it there (scripts/gpu-check puts it in results/).  Skips (77) without CUDA or a GPU.
 *
 * Tolerance vocabulary: "exact" ops do the same IEEE operations in the same order on both
 * sides (selections, one multiply, or the kernel_math.h formula compiled without
 * contraction on both: the CUDA build uses --fmad=false); ULP-level tolerances cover
 * libm differences (expf, sqrt in double is exact on both).  Reductions differ in
 * summation order (CPU: 16 float lanes then double; GPU: double throughout), GEMMs and
 * convolutions in algorithm. */
#include "backend/backend.h"
#include "cuda/cuda_api.h"
#include "common/error.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ULP 1.1920929e-7 /* 2^-23: one float ulp relative to the value */

static struct backend *cpu, *gpu;
static uint64_t seed = 0x2545f4914f6cdd1dULL;

/* ------------------------------------------------------------------ the table */

struct op_row {
    char op[64];
    double max_abs;   /* largest |gpu - cpu| */
    double ref;       /* largest |cpu| */
    double worst;     /* largest error / tolerance (<= 1 passes) */
    int failed;
};
static struct op_row rows[400];
static int nrows;

static void record(const char *op, double max_abs, double ref, double worst)
{
    struct op_row *r = NULL;
    for (int i = 0; i < nrows && !r; i++)
        if (strcmp(rows[i].op, op) == 0)
            r = &rows[i];
    if (!r && nrows < (int)(sizeof rows / sizeof rows[0])) {
        r = &rows[nrows++];
        snprintf(r->op, sizeof r->op, "%s", op);
    }
    if (!r)
        return;
    r->max_abs = fmax(r->max_abs, max_abs);
    r->ref = fmax(r->ref, ref);
    r->worst = isnan(worst) || worst > r->worst ? worst : r->worst;
    r->failed |= !(worst <= 1.0);
}

/* GPU result got against CPU result want: worst of |got - want| / (atol + rtol |want|);
 * atol = rtol = 0 asks for equality.  NaN must meet NaN and inf the same inf. */
static void compare(const char *op, const char *what, const float *got, const float *want,
                    size_t n, double atol, double rtol)
{
    double worst = 0.0, max_abs = 0.0, ref = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const double g = got[i], w = want[i];
        double r;
        if (isnan(w) || isnan(g) || isinf(w) || isinf(g)) {
            r = (isnan(w) && isnan(g)) || g == w ? 0.0 : INFINITY;
        } else {
            const double d = fabs(g - w), tol = atol + rtol * fabs(w);
            max_abs = fmax(max_abs, d);
            ref = fmax(ref, fabs(w));
            r = d == 0.0 ? 0.0 : tol > 0.0 ? d / tol : INFINITY;
        }
        if (r > worst) {
            worst = r;
            at = i;
        }
    }
    CHECK(worst <= 1.0,
          "%s %s: element %zu of %zu: gpu %.9g, cpu %.9g (%.3g of the tolerance atol %.3g "
          "rtol %.3g)",
          op, what, at, n, n ? (double)got[at] : 0.0, n ? (double)want[at] : 0.0, worst, atol,
          rtol);
    char name[64];
    snprintf(name, sizeof name, "%s", op);
    record(name, max_abs, ref, worst);
}

static double max_abs_of(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]))
            m = fmax(m, fabs(x[i]));
    return m;
}

static void status_ok(const char *after)
{
    CHECK(gpu->status(gpu) == 0, "after %s: %s", after, error_get());
}

/* ------------------------------------------------------------------ paired buffers */

/* the same data in CPU-backend memory (c) and on the GPU (g) */
struct buf {
    size_t bytes;
    void *c, *g;
};

static struct buf buf_new(size_t bytes, const void *init)
{
    struct buf b = {.bytes = bytes, .c = cpu->alloc(cpu, bytes), .g = gpu->alloc(gpu, bytes)};
    if (!b.c || !b.g) {
        fprintf(stderr, "out of memory for %zu bytes: %s\n", bytes, error_get());
        exit(1);
    }
    if (init) {
        memcpy(b.c, init, bytes);
        gpu->upload(gpu, b.g, init, bytes);
    }
    return b;
}

static struct buf buf_rand(size_t n, float lo, float hi)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    test_fill_uniform(h, n, lo, hi, &seed);
    struct buf b = buf_new(n * sizeof(float), h);
    free(h);
    return b;
}

/* the GPU copy, downloaded (caller frees) */
static void *buf_gpu(const struct buf *b)
{
    void *h = malloc(b->bytes ? b->bytes : 1);
    gpu->download(gpu, h, b->g, b->bytes);
    return h;
}

static void buf_free(struct buf *b)
{
    cpu->free(cpu, b->c);
    gpu->free(gpu, b->g);
    b->c = b->g = NULL;
}

/* compare a float buffer's two copies */
static void compare_buf(const char *op, const char *what, const struct buf *b, double atol,
                        double rtol)
{
    float *g = buf_gpu(b);
    compare(op, what, g, b->c, b->bytes / sizeof(float), atol, rtol);
    free(g);
}

#define F(b) ((float *)(b).c)
#define G(b) ((float *)(b).g)
#define NF(b) ((b).bytes / sizeof(float))

/* ------------------------------------------------------------------ memory */

static void test_memory(void)
{
    /* alloc is zero-filled */
    const size_t n = 300000;
    float *d = gpu->alloc(gpu, n * sizeof(float));
    float *h = malloc(n * sizeof(float));
    CHECK(d != NULL, "alloc: %s", error_get());
    gpu->download(gpu, h, d, n * sizeof(float));
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++)
        nonzero += h[i] != 0.0f;
    CHECK(nonzero == 0, "alloc: %zu of %zu floats not zero", nonzero, n);
    void *empty = gpu->alloc(gpu, 0);
    CHECK(empty != NULL, "alloc(0) returned NULL: %s", error_get());
    gpu->free(gpu, empty);
    gpu->free(gpu, NULL);

    /* many small uploads through the staging halves, each host buffer overwritten right
     * after its upload returns (the contract: the source may be reused at once) */
    const size_t chunk = 4096, chunks = n / chunk; /* 16 KiB each, 1.1 MiB a round */
    float *src = malloc(chunk * sizeof(float));
    float *want = malloc(n * sizeof(float));
    for (int round = 0; round < 10; round++) /* 11.4 MiB: both 4 MiB halves reused */
        for (size_t k = 0; k < chunks; k++) {
            test_fill_uniform(src, chunk, -1.0f, 1.0f, &seed);
            memcpy(want + k * chunk, src, chunk * sizeof(float));
            gpu->upload(gpu, d + k * chunk, src, chunk * sizeof(float));
            memset(src, 0xff, chunk * sizeof(float)); /* NaN if the copy read it late */
        }
    gpu->download(gpu, h, d, chunks * chunk * sizeof(float));
    compare("upload/download", "staged 16 KiB uploads", h, want, chunks * chunk, 0.0, 0.0);

    /* one upload bigger than a staging half, then copy and zero */
    const size_t big = (size_t)3 << 20; /* 12 MiB */
    float *hb = malloc(big * sizeof(float)), *back = malloc(big * sizeof(float));
    test_fill_uniform(hb, big, -5.0f, 5.0f, &seed);
    float *db = gpu->alloc(gpu, big * sizeof(float)), *dc = gpu->alloc(gpu, big * sizeof(float));
    gpu->upload(gpu, db, hb, big * sizeof(float));
    gpu->copy(gpu, dc, db, big * sizeof(float));
    gpu->zero(gpu, dc + 100, 1000 * sizeof(float));
    gpu->synchronize(gpu);
    gpu->download(gpu, back, dc, big * sizeof(float));
    memset(hb + 100, 0, 1000 * sizeof(float));
    compare("upload/download", "12 MiB upload, copy, zero", back, hb, big, 0.0, 0.0);
    gpu->free(gpu, db);
    gpu->free(gpu, dc);
    gpu->free(gpu, d);
    free(h);
    free(src);
    free(want);
    free(hb);
    free(back);
    status_ok("memory");
}

/* ------------------------------------------------------------------ convolution */

struct conv_case {
    const char *name;
    int n, c, h, k, r, pad, stride, bias;
};

static const struct conv_case conv_cases[] = {
    {"convnet layer1.0", 16, 1, 28, 16, 5, 2, 1, 1},
    {"convnet layer2.0", 16, 16, 14, 32, 5, 2, 1, 1},
    {"resnet conv1 (CIFAR)", 4, 3, 32, 64, 3, 1, 1, 0},
    {"resnet layer2.0.conv1", 4, 64, 32, 128, 3, 1, 2, 0},
    {"resnet layer2.0.downsample", 4, 64, 32, 128, 1, 0, 2, 0},
    {"resnet layer4.0.conv1", 2, 256, 8, 512, 3, 1, 2, 0},
    {"resnet layer4.x.conv2", 2, 512, 4, 512, 3, 1, 1, 0},
    {"odd 15x15 stride 2", 3, 16, 15, 8, 3, 1, 2, 1},
    {"7x7 stride 2 stem", 2, 3, 32, 64, 7, 3, 2, 1},
};

static void conv_check(const struct conv_case *k, const char *mode)
{
    struct conv2d_shape cs = {.n = k->n, .c = k->c, .h = k->h, .w = k->h, .k = k->k, .r = k->r,
                              .s = k->r, .pad = k->pad, .stride = k->stride};
    CHECK(conv2d_shape_init(&cs) == 0, "%s: %s", k->name, error_get());
    const size_t nx = (size_t)cs.n * cs.c * cs.h * cs.w, nw = (size_t)cs.k * cs.c * cs.r * cs.s;
    const size_t ny = (size_t)cs.n * cs.k * cs.p * cs.q;
    struct buf x = buf_rand(nx, -1.0f, 1.0f), w = buf_rand(nw, -0.5f, 0.5f);
    struct buf b = buf_rand((size_t)cs.k, -0.5f, 0.5f), dy = buf_rand(ny, -1.0f, 1.0f);
    struct buf y = buf_new(ny * sizeof(float), NULL), dx = buf_new(nx * sizeof(float), NULL);
    struct buf dw = buf_new(nw * sizeof(float), NULL), db = buf_new((size_t)cs.k * 4, NULL);
    cpu->conv2d_forward(cpu, &cs, F(x), F(w), k->bias ? F(b) : NULL, F(y));
    gpu->conv2d_forward(gpu, &cs, G(x), G(w), k->bias ? G(b) : NULL, G(y));
    cpu->conv2d_backward(cpu, &cs, F(x), F(w), F(dy), F(dx), F(dw), k->bias ? F(db) : NULL);
    gpu->conv2d_backward(gpu, &cs, G(x), G(w), G(dy), G(dx), G(dw), k->bias ? G(db) : NULL);
    char op[64];
    /* cuDNN may choose FFT or Winograd algorithms, whose rounding error reaches ~1e-4 of
     * the output's range (and direct sums over up to 4608 products ~1e-5); a wrong index,
     * sign or missing term is an O(1) error.  So 1e-3 of the largest |output|. */
    snprintf(op, sizeof op, "conv2d_forward%s", mode);
    compare_buf(op, k->name, &y, 1e-3 * max_abs_of(F(y), ny), 0.0);
    snprintf(op, sizeof op, "conv2d_backward dx%s", mode);
    compare_buf(op, k->name, &dx, 1e-3 * max_abs_of(F(dx), nx), 0.0);
    snprintf(op, sizeof op, "conv2d_backward dw%s", mode);
    compare_buf(op, k->name, &dw, 1e-3 * max_abs_of(F(dw), nw), 0.0);
    if (k->bias) {
        /* sums of n*p*q values in double on both sides (CPU: float lanes first): ~1e-6 */
        snprintf(op, sizeof op, "conv2d_backward db%s", mode);
        compare_buf(op, k->name, &db, 1e-5 * max_abs_of(F(db), (size_t)cs.k), 1e-5);
    }
    /* dx only, then dw only (the first layer passes dx NULL) */
    gpu->zero(gpu, G(dw), dw.bytes);
    gpu->conv2d_backward(gpu, &cs, G(x), G(w), G(dy), NULL, G(dw), NULL);
    snprintf(op, sizeof op, "conv2d_backward dw%s", mode);
    compare_buf(op, "dx NULL", &dw, 1e-3 * max_abs_of(F(dw), nw), 0.0);
    gpu->conv2d_backward(gpu, &cs, G(x), G(w), G(dy), G(dx), NULL, NULL);
    snprintf(op, sizeof op, "conv2d_backward dx%s", mode);
    compare_buf(op, "dw NULL", &dx, 1e-3 * max_abs_of(F(dx), nx), 0.0);
    struct buf *all[] = {&x, &w, &b, &dy, &y, &dx, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok(k->name);
}

static void test_conv(const char *mode)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        conv_check(&conv_cases[i], mode);
}

/* ------------------------------------------------------------------ batch norm */

static void bn_check(int n, int c, int hw, int affine)
{
    const size_t m = (size_t)n * c * hw;
    char shape[64];
    snprintf(shape, sizeof shape, "(%d,%d,%d)%s", n, c, hw, affine ? "" : " no affine");
    /* an offset per channel, so mean and variance differ between channels */
    float *hx = malloc(m * sizeof(float));
    for (size_t i = 0; i < m; i++) {
        const int ch = (int)((i / (size_t)hw) % (size_t)c);
        hx[i] = (float)(ch % 7) - 3.0f + 2.0f * (float)test_uniform(&seed);
    }
    struct buf x = buf_new(m * sizeof(float), hx);
    free(hx);
    struct buf dy = buf_rand(m, -1.0f, 1.0f), wt = buf_rand((size_t)c, 0.5f, 1.5f);
    struct buf bias = buf_rand((size_t)c, -0.5f, 0.5f);
    struct buf mean = buf_new((size_t)c * 4, NULL), invstd = buf_new((size_t)c * 4, NULL);
    struct buf y = buf_new(m * 4, NULL), dx = buf_new(m * 4, NULL);
    struct buf sums = buf_new((size_t)c * 8, NULL), dwt = buf_new((size_t)c * 4, NULL);
    struct buf dbias = buf_new((size_t)c * 4, NULL);
    const float eps = 1e-5f;

    cpu->batchnorm_stats(cpu, n, c, hw, F(x), eps, F(mean), F(invstd));
    gpu->batchnorm_stats(gpu, n, c, hw, G(x), eps, G(mean), G(invstd));
    /* means of up to 78400 values: the CPU's float lanes lose ~1e-6 relative to the
     * values' size (|x| <= 4); invstd from a two-pass variance, ~1e-6 relative */
    compare_buf("batchnorm_stats mean", shape, &mean, 4e-6 * 4.0, 1e-6);
    compare_buf("batchnorm_stats invstd", shape, &invstd, 0.0, 1e-5);
    /* the rest of the chain runs on identical statistics: copy the CPU's to the GPU */
    gpu->upload(gpu, mean.g, mean.c, mean.bytes);
    gpu->upload(gpu, invstd.g, invstd.c, invstd.bytes);

    const float *w_c = affine ? F(wt) : NULL, *w_g = affine ? G(wt) : NULL;
    const float *b_c = affine ? F(bias) : NULL, *b_g = affine ? G(bias) : NULL;
    cpu->batchnorm_elemt(cpu, n, c, hw, F(x), F(mean), F(invstd), w_c, b_c, F(y));
    gpu->batchnorm_elemt(gpu, n, c, hw, G(x), G(mean), G(invstd), w_g, b_g, G(y));
    /* (x - mean) * (invstd * w) + b in the same order and rounding on both: exact; 2 ulp of
     * the output range allowed for a compiler's different (but legal) evaluation */
    compare_buf("batchnorm_elemt", shape, &y, 2 * ULP * max_abs_of(F(y), m), 0.0);

    /* eval: the running statistics as (mean, var); invstd in double on both sides */
    struct buf rvar = buf_rand((size_t)c, 0.2f, 3.0f);
    cpu->batchnorm_forward_eval(cpu, n, c, hw, F(x), F(mean), F(rvar), eps, w_c, b_c, F(y));
    gpu->batchnorm_forward_eval(gpu, n, c, hw, G(x), G(mean), G(rvar), eps, w_g, b_g, G(y));
    compare_buf("batchnorm_forward_eval", shape, &y, 2 * ULP * max_abs_of(F(y), m), 0.0);

    cpu->batchnorm_backward_reduce(cpu, n, c, hw, F(dy), F(x), F(mean), F(invstd), F(sums),
                                   F(sums) + c, affine ? F(dwt) : NULL, affine ? F(dbias) : NULL);
    gpu->batchnorm_backward_reduce(gpu, n, c, hw, G(dy), G(x), G(mean), G(invstd), G(sums),
                                   G(sums) + c, affine ? G(dwt) : NULL, affine ? G(dbias) : NULL);
    /* sums of n*hw terms of size <= 4: the CPU's float lanes (hw/16 terms each) lose
     * ~hw/16 ulp of the sum of |terms| <= 4*n*hw; 1e-6 of that bound is ~10x that */
    const double l1 = 4.0 * n * hw;
    compare_buf("batchnorm_backward_reduce", shape, &sums, 1e-6 * l1, 1e-6);
    if (affine) {
        compare_buf("batchnorm_backward_reduce dweight", shape, &dwt, 4e-6 * l1, 1e-6);
        compare_buf("batchnorm_backward_reduce dbias", shape, &dbias, 1e-6 * l1, 1e-6);
    }
    gpu->upload(gpu, sums.g, sums.c, sums.bytes);

    const float count = (float)n * (float)hw;
    cpu->batchnorm_backward_elemt(cpu, n, c, hw, F(dy), F(x), F(mean), F(invstd), w_c, F(sums),
                                  F(sums) + c, count, F(dx));
    gpu->batchnorm_backward_elemt(gpu, n, c, hw, G(dy), G(x), G(mean), G(invstd), w_g, G(sums),
                                  G(sums) + c, count, G(dx));
    /* km_bn_backward_elemt on both, no contraction: exact up to 4 ulp of the range */
    compare_buf("batchnorm_backward_elemt", shape, &dx, 4 * ULP * max_abs_of(F(dx), m), 0.0);
    /* in place: dx aliases dy */
    cpu->batchnorm_backward_elemt(cpu, n, c, hw, F(dy), F(x), F(mean), F(invstd), w_c, F(sums),
                                  F(sums) + c, count, F(dy));
    gpu->batchnorm_backward_elemt(gpu, n, c, hw, G(dy), G(x), G(mean), G(invstd), w_g, G(sums),
                                  G(sums) + c, count, G(dy));
    compare_buf("batchnorm_backward_elemt", "in place", &dy, 4 * ULP * max_abs_of(F(dy), m),
                0.0);
    struct buf *all[] = {&x, &dy, &wt, &bias, &mean, &invstd, &y, &dx, &sums, &dwt, &dbias, &rvar};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok("batch norm");
}

static void test_batchnorm_gather(void)
{
    const int world = 3, c = 37;
    float *h = malloc((size_t)world * c * sizeof(float));
    test_fill_uniform(h, (size_t)world * c, -2.0f, 2.0f, &seed);
    struct buf means = buf_new((size_t)world * c * 4, h);
    test_fill_uniform(h, (size_t)world * c, 0.3f, 3.0f, &seed);
    struct buf invstds = buf_new((size_t)world * c * 4, h);
    free(h);
    const float counts_h[3] = {6272.0f, 0.0f, 1568.0f}; /* a rank with no samples */
    struct buf counts = buf_new(sizeof counts_h, counts_h);
    struct buf rmean = buf_rand((size_t)c, -1.0f, 1.0f), rvar = buf_rand((size_t)c, 0.5f, 2.0f);
    struct buf mean = buf_new((size_t)c * 4, NULL), invstd = buf_new((size_t)c * 4, NULL);
    cpu->batchnorm_gather_stats(cpu, world, c, F(means), F(invstds), F(counts), 0.1f, 1e-5f,
                                F(rmean), F(rvar), F(mean), F(invstd));
    gpu->batchnorm_gather_stats(gpu, world, c, G(means), G(invstds), G(counts), 0.1f, 1e-5f,
                                G(rmean), G(rvar), G(mean), G(invstd));
    /* the same IEEE double arithmetic on both sides (no contraction), rounded once to
     * float: equal; 1 ulp relative, 2 ulp of the range near zero, for safety */
#define GATHER_TOL(b) 2 * ULP * max_abs_of(F(b), (size_t)c), ULP
    compare_buf("batchnorm_gather_stats", "mean", &mean, GATHER_TOL(mean));
    compare_buf("batchnorm_gather_stats", "invstd", &invstd, GATHER_TOL(invstd));
    compare_buf("batchnorm_gather_stats", "running_mean", &rmean, GATHER_TOL(rmean));
    compare_buf("batchnorm_gather_stats", "running_var", &rvar, GATHER_TOL(rvar));
    /* running statistics may be NULL */
    gpu->batchnorm_gather_stats(gpu, world, c, G(means), G(invstds), G(counts), 0.1f, 1e-5f,
                                NULL, NULL, G(mean), G(invstd));
    compare_buf("batchnorm_gather_stats", "no running stats", &invstd, GATHER_TOL(invstd));
#undef GATHER_TOL
    struct buf *all[] = {&means, &invstds, &counts, &rmean, &rvar, &mean, &invstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok("batchnorm_gather_stats");
}

static void test_batchnorm(void)
{
    bn_check(16, 16, 784, 1); /* ConvNet bn1 at batch 16 */
    bn_check(16, 32, 196, 1); /* ConvNet bn2 */
    bn_check(4, 512, 16, 1);  /* ResNet layer4: many channels, tiny planes */
    bn_check(3, 5, 7, 0);     /* odd sizes, no weight and bias */
    test_batchnorm_gather();
}

/* ------------------------------------------------------------------ ReLU, pooling */

static void test_relu(void)
{
    const size_t n = 1000003; /* not a multiple of any block size */
    float *h = malloc(n * sizeof(float));
    test_fill_uniform(h, n, -1.0f, 1.0f, &seed);
    h[0] = NAN;
    h[1] = -0.0f;
    h[2] = 0.0f;
    h[3] = INFINITY;
    h[4] = -INFINITY;
    struct buf x = buf_new(n * 4, h), y = buf_new(n * 4, NULL), dy = buf_rand(n, -1.0f, 1.0f);
    free(h);
    /* selections: exact */
    cpu->relu_forward(cpu, n, F(x), F(y));
    gpu->relu_forward(gpu, n, G(x), G(y));
    compare_buf("relu_forward", "1000003 with nan/inf/-0", &y, 0.0, 0.0);
    cpu->relu_backward(cpu, n, F(y), F(dy), F(dy)); /* in place, as the ConvNet calls it */
    gpu->relu_backward(gpu, n, G(y), G(dy), G(dy));
    compare_buf("relu_backward", "in place", &dy, 0.0, 0.0);
    cpu->relu_forward(cpu, n, F(x), F(x));
    gpu->relu_forward(gpu, n, G(x), G(x));
    compare_buf("relu_forward", "in place", &x, 0.0, 0.0);
    buf_free(&x);
    buf_free(&y);
    buf_free(&dy);
    status_ok("relu");
}

static void pool_check(int n, int c, int h, int kernel, int stride, int ties)
{
    struct pool2d_shape ps = {.n = n, .c = c, .h = h, .w = h, .kernel = kernel, .stride = stride};
    CHECK(pool2d_shape_init(&ps) == 0, "pool: %s", error_get());
    char shape[80];
    snprintf(shape, sizeof shape, "(%d,%d,%d,%d) k%d s%d%s", n, c, h, h, kernel, stride,
             ties ? " ties+nan" : "");
    const size_t nx = (size_t)n * c * h * h, ny = (size_t)n * c * ps.p * ps.q;
    float *hx = malloc(nx * sizeof(float));
    test_fill_uniform(hx, nx, -1.0f, 1.0f, &seed);
    if (ties) { /* few distinct values: the first maximum must win; some NaN windows */
        for (size_t i = 0; i < nx; i++)
            hx[i] = floorf(hx[i] * 2.0f);
        for (size_t i = 7; i < nx; i += 97)
            hx[i] = NAN;
    }
    struct buf x = buf_new(nx * 4, hx), y = buf_new(ny * 4, NULL);
    free(hx);
    struct buf am = buf_new(ny * 4, NULL), dy = buf_rand(ny, -1.0f, 1.0f);
    struct buf dx = buf_rand(nx, 5.0f, 6.0f); /* garbage: backward must overwrite it */
    cpu->maxpool2d_forward(cpu, &ps, F(x), F(y), am.c);
    gpu->maxpool2d_forward(gpu, &ps, G(x), G(y), am.g);
    /* selection of one input: exact, argmax identical */
    compare_buf("maxpool2d_forward", shape, &y, 0.0, 0.0);
    int32_t *ag = buf_gpu(&am);
    size_t diff = 0;
    for (size_t i = 0; i < ny; i++)
        diff += ag[i] != ((int32_t *)am.c)[i];
    CHECK(diff == 0, "maxpool2d_forward %s: %zu of %zu argmax differ", shape, diff, ny);
    record("maxpool2d_forward argmax", (double)diff, 0.0, diff ? INFINITY : 0.0);
    free(ag);
    cpu->maxpool2d_backward(cpu, &ps, F(dy), am.c, F(dx));
    gpu->maxpool2d_backward(gpu, &ps, G(dy), am.g, G(dx));
    /* the same float additions in the same (output) order: exact */
    compare_buf("maxpool2d_backward", shape, &dx, 0.0, 0.0);
    struct buf *all[] = {&x, &y, &am, &dy, &dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok("maxpool");
}

static void test_pool(void)
{
    pool_check(16, 16, 28, 2, 2, 0); /* ConvNet */
    pool_check(16, 32, 14, 2, 2, 1);
    pool_check(4, 8, 9, 3, 2, 1); /* overlapping windows, floor mode */
    pool_check(2, 3, 8, 2, 3, 0); /* gaps between windows */
    pool_check(3, 5, 7, 2, 2, 1); /* odd input: the last row and column are dropped */
}

/* ------------------------------------------------------------------ linear */

static void linear_check(int n, int in, int out, int bias)
{
    char shape[64];
    snprintf(shape, sizeof shape, "n%d in%d out%d%s", n, in, out, bias ? "" : " no bias");
    struct buf x = buf_rand((size_t)n * in, -1.0f, 1.0f), w = buf_rand((size_t)out * in, -0.1f, 0.1f);
    struct buf b = buf_rand((size_t)out, -0.5f, 0.5f), dy = buf_rand((size_t)n * out, -1.0f, 1.0f);
    struct buf y = buf_new((size_t)n * out * 4, NULL), dx = buf_new((size_t)n * in * 4, NULL);
    struct buf dw = buf_new((size_t)out * in * 4, NULL), db = buf_new((size_t)out * 4, NULL);
    cpu->linear_forward(cpu, n, in, out, F(x), F(w), bias ? F(b) : NULL, F(y));
    gpu->linear_forward(gpu, n, in, out, G(x), G(w), bias ? G(b) : NULL, G(y));
    cpu->linear_backward(cpu, n, in, out, F(x), F(w), F(dy), F(dx), F(dw), bias ? F(db) : NULL);
    gpu->linear_backward(gpu, n, in, out, G(x), G(w), G(dy), G(dx), G(dw), bias ? G(db) : NULL);
    /* fp32 GEMMs (no TF32 on either side) summing up to 1568 products in different
     * orders: ~sqrt(K) ulp of the range, 1e-5 of the largest |output| is >10x that */
    compare_buf("linear_forward", shape, &y, 1e-5 * max_abs_of(F(y), NF(y)) + 1e-7, 0.0);
    compare_buf("linear_backward dx", shape, &dx, 1e-5 * max_abs_of(F(dx), NF(dx)) + 1e-7, 0.0);
    compare_buf("linear_backward dw", shape, &dw, 1e-5 * max_abs_of(F(dw), NF(dw)) + 1e-7, 0.0);
    if (bias) /* column sums in double on both sides, in row order: 1 ulp */
        compare_buf("linear_backward db", shape, &db, 0.0, ULP);
    gpu->linear_backward(gpu, n, in, out, G(x), G(w), G(dy), NULL, G(dw), NULL);
    compare_buf("linear_backward dw", "dx NULL", &dw, 1e-5 * max_abs_of(F(dw), NF(dw)) + 1e-7, 0.0);
    struct buf *all[] = {&x, &w, &b, &dy, &y, &dx, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok("linear");
}

static void test_linear(void)
{
    linear_check(100, 1568, 10, 1); /* ConvNet fc */
    linear_check(128, 512, 10, 1);  /* ResNet fc */
    linear_check(3, 7, 5, 0);
}

/* ------------------------------------------------------------------ loss, metric */

static void xent_check(int n, int c, int bad_label)
{
    char shape[64];
    snprintf(shape, sizeof shape, "n%d c%d%s", n, c, bad_label ? " bad label" : "");
    struct buf logits = buf_rand((size_t)n * c, -4.0f, 4.0f);
    int32_t *lab = malloc((size_t)n * sizeof *lab);
    for (int i = 0; i < n; i++)
        lab[i] = (int32_t)(test_uniform(&seed) * c);
    if (bad_label)
        lab[n / 2] = c; /* out of range: NaN loss, plain softmax row */
    struct buf labels = buf_new((size_t)n * 4, lab);
    free(lab);
    struct buf d = buf_new((size_t)n * c * 4, NULL);
    const float lc = cpu->softmax_xent(cpu, n, c, F(logits), labels.c, F(d));
    const float lg = gpu->softmax_xent(gpu, n, c, G(logits), labels.g, G(d));
    /* per-row terms in double from expf (glibc < 1 ulp, CUDA <= 2 ulp): ~3 ulp of the
     * exp sum, ~4e-7 absolute in log(sum); 1e-6 of the loss (~2.3) */
    compare("softmax_xent loss", shape, &lg, &lc, 1, 0.0, 1e-6);
    CHECK(!bad_label || isnan(lg), "softmax_xent %s: loss %g, want NaN", shape, (double)lg);
    /* dlogits = expf(..) / (sum * n): the expf ulps again (~3.5 ulp relative), and at the
     * label minus 1/n, where that error is up to 3.5 ulp of 1/n absolute: 8 ulp of both */
    compare_buf("softmax_xent dlogits", shape, &d, 8 * ULP / n, 8 * ULP);
    const float lg2 = gpu->softmax_xent(gpu, n, c, G(logits), labels.g, NULL);
    CHECK(lg2 == lg || (isnan(lg2) && isnan(lg)), "softmax_xent without dlogits: %g vs %g",
          (double)lg2, (double)lg);
    buf_free(&logits);
    buf_free(&labels);
    buf_free(&d);
    status_ok("softmax_xent");
}

static void test_count_correct(void)
{
    const int n = 257, c = 10;
    float *h = malloc((size_t)n * c * sizeof(float));
    test_fill_uniform(h, (size_t)n * c, -2.0f, 2.0f, &seed);
    for (int i = 0; i < n * c; i++)
        h[i] = floorf(h[i]); /* ties: the first maximum counts */
    h[3 * c] = NAN;          /* a NaN first element, and one later */
    h[5 * c + 4] = NAN;
    int32_t *lab = malloc((size_t)n * sizeof *lab);
    for (int i = 0; i < n; i++)
        lab[i] = (int32_t)(test_uniform(&seed) * c);
    struct buf logits = buf_new((size_t)n * c * 4, h), labels = buf_new((size_t)n * 4, lab);
    const int cc = cpu->count_correct(cpu, n, c, F(logits), labels.c);
    const int cg = gpu->count_correct(gpu, n, c, G(logits), labels.g);
    CHECK(cc == cg, "count_correct: gpu %d, cpu %d", cg, cc);
    record("count_correct", fabs((double)cg - cc), cc, cg == cc ? 0.0 : INFINITY);
    free(h);
    free(lab);
    buf_free(&logits);
    buf_free(&labels);
    status_ok("count_correct");
}

/* ------------------------------------------------------------------ elementwise, optimizer */

static void test_scale(void)
{
    const size_t n = 500001;
    struct buf x = buf_rand(n, -3.0f, 3.0f), y = buf_new(n * 4, NULL);
    cpu->scale(cpu, n, 0.37f, F(x), F(y));
    gpu->scale(gpu, n, 0.37f, G(x), G(y));
    compare_buf("scale", "out of place", &y, 0.0, 0.0); /* one multiply: exact */
    cpu->scale(cpu, n, -1.0f / 3.0f, F(x), F(x));
    gpu->scale(gpu, n, -1.0f / 3.0f, G(x), G(x));
    compare_buf("scale", "in place", &x, 0.0, 0.0);
    buf_free(&x);
    buf_free(&y);
    status_ok("scale");
}

static void test_sgd(void)
{
    const size_t n = 100003;
    struct sgd_case {
        const char *name;
        float lr, momentum, dampening, wd;
        int nesterov;
    } cases[] = {
        {"plain", 0.05f, 0.0f, 0.0f, 0.0f, 0},
        {"momentum, weight decay", 0.05f, 0.9f, 0.0f, 1e-3f, 0},
        {"nesterov", 0.01f, 0.9f, 0.0f, 1e-4f, 1},
        {"dampening", 0.1f, 0.8f, 0.25f, 0.0f, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const struct sgd_case *s = &cases[k];
        struct buf p = buf_rand(n, -1.0f, 1.0f), g = buf_rand(n, -1.0f, 1.0f);
        struct buf m = buf_new(n * 4, NULL);
        for (int step = 0; step < 3; step++) {
            float *buf_c = s->momentum != 0.0f ? F(m) : NULL, *buf_g = s->momentum != 0.0f ? G(m) : NULL;
            cpu->sgd_step(cpu, n, F(p), F(g), buf_c, s->lr, s->momentum, s->dampening, s->wd,
                          s->nesterov, step == 0);
            gpu->sgd_step(gpu, n, G(p), G(g), buf_g, s->lr, s->momentum, s->dampening, s->wd,
                          s->nesterov, step == 0);
        }
        /* km_sgd_update on both without contraction: exact; 2 ulp of |p| allowed */
        compare_buf("sgd_step param", s->name, &p, 2 * ULP * max_abs_of(F(p), n), 0.0);
        if (s->momentum != 0.0f)
            compare_buf("sgd_step momentum", s->name, &m, 2 * ULP * max_abs_of(F(m), n), 0.0);
        buf_free(&p);
        buf_free(&g);
        buf_free(&m);
    }
    status_ok("sgd_step");
}

static void test_amp(void)
{
    const size_t n = 200000;
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { /* magnitudes from 2^-30 to 2^20: subnormal fp16 to inf */
        const double e = -30.0 + 50.0 * test_uniform(&seed);
        h[i] = (float)(pow(2.0, e) * (test_uniform(&seed) < 0.5 ? -1.0 : 1.0));
    }
    h[0] = NAN;
    h[1] = INFINITY;
    h[2] = 65504.0f;
    h[3] = 65520.0f; /* the fp16 tie that rounds to inf */
    struct buf x = buf_new(n * 4, h), y = buf_new(n * 4, NULL);
    for (int dt = AMP_F16; dt <= AMP_BF16; dt++) {
        cpu->round_amp(cpu, n, (enum amp_dtype)dt, F(x), F(y));
        gpu->round_amp(gpu, n, (enum amp_dtype)dt, G(x), G(y));
        /* pure bit manipulation in kernel_math.h: exact, bit for bit */
        float *g = buf_gpu(&y);
        CHECK(memcmp(g, y.c, n * 4) == 0, "round_amp %s: bits differ",
              dt == AMP_F16 ? "fp16" : "bf16");
        compare(dt == AMP_F16 ? "round_amp fp16" : "round_amp bf16", "2^-30..2^20", g, F(y), n,
                0.0, 0.0);
        free(g);
    }
    /* unscale: one multiply per element, and the flag */
    test_fill_uniform(h, n, -1e4f, 1e4f, &seed);
    for (int bad = 0; bad < 3; bad++) {
        if (bad == 1)
            h[n / 3] = INFINITY;
        if (bad == 2) {
            h[n / 3] = 1.0f;
            h[n - 1] = NAN;
        }
        struct buf gr = buf_new(n * 4, h);
        const int fc = cpu->unscale_check(cpu, n, F(gr), 1.0f / 65536.0f);
        const int fg = gpu->unscale_check(gpu, n, G(gr), 1.0f / 65536.0f);
        CHECK(fc == (bad != 0) && fg == fc, "unscale_check case %d: gpu %d, cpu %d", bad, fg, fc);
        record("unscale_check found_inf", fabs((double)fg - fc), 1.0, fg == fc ? 0.0 : INFINITY);
        compare_buf("unscale_check", "values", &gr, 0.0, 0.0);
        buf_free(&gr);
    }
    free(h);
    buf_free(&x);
    buf_free(&y);
    status_ok("amp");
}

/* ------------------------------------------------------------------ failure reporting */

static void test_failure_is_reported(void)
{
    struct backend *bad = backend_cuda_create(0);
    CHECK(bad != NULL, "second backend: %s", error_get());
    if (!bad)
        return;
    CHECK(bad->status(bad) == 0, "fresh backend: %s", error_get());
    /* a stride cuDNN refuses (documented BAD_PARAM): the slot cannot return an error, the
     * status must */
    struct conv2d_shape cs = {.n = 1, .c = 1, .h = 8, .w = 8, .k = 1, .r = 3, .s = 3,
                              .pad = 0, .stride = 0, .p = 6, .q = 6};
    float *x = bad->alloc(bad, 64 * 4), *w = bad->alloc(bad, 9 * 4), *y = bad->alloc(bad, 64 * 4);
    int32_t *lab = bad->alloc(bad, 4);
    bad->conv2d_forward(bad, &cs, x, w, NULL, y);
    CHECK(bad->status(bad) == -1, "a refused convolution left the status clean");
    const char *msg = error_get();
    CHECK(strstr(msg, "conv2d_forward") && !strchr(msg, '\n'),
          "status message does not name the op on one line: '%s'", msg);
    printf("deliberate failure reported as: %s\n", msg);
    const float loss = bad->softmax_xent(bad, 1, 2, y, lab, NULL);
    CHECK(isnan(loss), "a failed backend's loss is %g, want NaN", (double)loss);
    bad->free(bad, x);
    bad->free(bad, w);
    bad->free(bad, y);
    bad->free(bad, lab);
    bad->destroy(bad);
    status_ok("another backend's failure"); /* failures stay with their backend */
}

/* ------------------------------------------------------------------ main */

static void print_table(FILE *f)
{
    fprintf(f, "%-40s %12s %12s %10s %s\n", "op", "max|gpu-cpu|", "max|cpu|", "err/tol",
            "result");
    for (int i = 0; i < nrows; i++)
        fprintf(f, "%-40s %12.3g %12.3g %10.3g %s\n", rows[i].op, rows[i].max_abs, rows[i].ref,
                rows[i].worst, rows[i].failed ? "FAILED" : "ok");
}

int main(void)
{
    if (!cuda_build_enabled())
        test_skip("this build has no CUDA (toolkit not found or -DDDPPROF_CUDA=OFF)");
    if (cuda_device_count() == 0)
        test_skip("no CUDA device (no GPU or no driver): GPU op tests need one");
    struct cuda_info info;
    if (cuda_info_get(0, &info) == 0)
        printf("device 0: %s, compute capability %d.%d, %d SMs, %.1f GiB; driver %d, runtime "
               "%d, cuDNN %zu, cuBLAS %d\n",
               info.device_name, info.cc_major, info.cc_minor, info.sm_count,
               (double)info.memory_bytes / (1 << 30), info.driver_version, info.runtime_version,
               info.cudnn_version, info.cublas_version);
    cpu = backend_cpu_create(0);
    gpu = backend_cuda_create(0);
    CHECK(cpu && gpu, "backends: %s", error_get());
    if (!cpu || !gpu)
        return test_finish();

    test_memory();
    test_conv("");
    test_batchnorm();
    test_relu();
    test_pool();
    test_linear();
    xent_check(100, 10, 0);
    xent_check(7, 1000, 0);
    xent_check(33, 10, 1);
    test_count_correct();
    test_scale();
    test_sgd();
    test_amp();
    test_failure_is_reported();

    /* convolutions again, algorithms chosen by timing them */
    setenv("DDPPROF_CUDNN_BENCHMARK", "1", 1);
    struct backend *heur = gpu;
    gpu = backend_cuda_create(0);
    CHECK(gpu != NULL, "benchmark-mode backend: %s", error_get());
    if (gpu) {
        test_conv(" (find)");
        gpu->destroy(gpu);
    }
    gpu = heur;
    unsetenv("DDPPROF_CUDNN_BENCHMARK");

    print_table(stdout);
    const char *path = getenv("DDPPROF_GPU_OPS_REPORT");
    if (path && *path) {
        FILE *f = fopen(path, "w");
        CHECK(f != NULL, "cannot write %s", path);
        if (f) {
            print_table(f);
            fclose(f);
        }
    }
    gpu->destroy(gpu);
    cpu->destroy(cpu);
    return test_finish();
}
