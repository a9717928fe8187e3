/* test_kernels_emu.c — every kernel of trainer/cuda/kernels.cu, executed on the CPU
 * through tests/cuda_emu (kernels.cu compiled by the host C++ compiler, each block's
 * threads run as coroutines that meet at __syncthreads and at warp shuffles and votes),
 * against the CPU backend on the same inputs, in fp32, fp16 and bf16.
 *
 * This checks the kernels' indexing, bounds, grid-stride loops, chunked per-channel
 * reductions, barriers and warp exchanges, and the launchers' dtype dispatch and launch
 * configurations -- NOT GPU numerics: the arithmetic is the host's (libm, the compiler's
 * float), so where this test asks for equality the real GPU may differ in the last bits;
 * tests/test_backend_ops.c (pair cpu-vs-cuda) and scripts/gpu-check judge that on a GPU.
 *
 * It is built twice (tests/CMakeLists.txt): test_kernels_emu with kernels.cu's own grid
 * limits, and test_kernels_emu_tiny with at most KERN_MAX_BLOCKS = 3 blocks a grid and
 * per-channel chunks of 64 elements (at most 5 chunks), so every grid-stride loop and
 * every chunk of a reduction makes several passes; the tiny build checks that it did.
 *
 * Tolerances: elementwise kernels compute the CPU backend's formula in the same order
 * (kernel_math.h, no contraction on either side) and round once: equal.  Reductions sum
 * in double on the kernel side and in 16 float lanes then double on the CPU side: 1e-5
 * relative plus 1e-6 of the values' scale covers the CPU's float lanes with ~100x room,
 * while a dropped or doubled element or chunk moves a sum by O(1e-3) or more. */
#include "backend/backend.h"
#include "backend/kernel_math.h"
#include "common/error.h"
#include "common/half.h"
#include "cuda/kernels.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KERN_MAX_BLOCKS
#define KERN_MAX_BLOCKS 0 /* the kernels' own limit (16384 blocks) */
#endif

static struct backend *cpu;
static uint64_t seed = 0x5851f42d4c957f2dULL;

static const char *dt_name(enum dtype dt)
{
    return dt == DT_F16 ? "fp16" : dt == DT_BF16 ? "bf16" : "fp32";
}

/* ------------------------------------------------------------------ tensors */

/* n values of dt: the CPU backend's copy (floats holding dt's values) and the kernels'
 * (floats, or 2-byte halves as on a GPU) */
struct ten {
    size_t n;
    enum dtype dt;
    float *ref;
    void *dev;
};

static size_t dt_bytes(enum dtype dt) { return dt == DT_F32 ? 4 : 2; }

/* the kernels' copy set from the CPU's */
static void ten_sync(struct ten *t)
{
    if (t->dt == DT_F32) {
        memcpy(t->dev, t->ref, t->n * 4);
        return;
    }
    uint16_t *u = t->dev;
    for (size_t i = 0; i < t->n; i++)
        u[i] = t->dt == DT_BF16 ? half_f32_to_bf16(t->ref[i]) : half_f32_to_f16(t->ref[i]);
}

static struct ten ten_of(size_t n, enum dtype dt, const float *v)
{
    struct ten t = {.n = n, .dt = dt, .ref = calloc(n ? n : 1, 4),
                    .dev = calloc(n ? n : 1, dt_bytes(dt))};
    if (!t.ref || !t.dev) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    if (v) {
        for (size_t i = 0; i < n; i++)
            t.ref[i] = km_round_amp(v[i], (int)dt);
        ten_sync(&t);
    }
    return t;
}

static struct ten ten_rand(size_t n, enum dtype dt, float lo, float hi)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    test_fill_uniform(h, n, lo, hi, &seed);
    struct ten t = ten_of(n, dt, h);
    free(h);
    return t;
}

static struct ten ten_zero(size_t n, enum dtype dt) { return ten_of(n, dt, NULL); }

/* the kernels' values as floats (caller frees) */
static float *ten_dev(const struct ten *t)
{
    float *h = malloc((t->n ? t->n : 1) * sizeof *h);
    if (t->dt == DT_F32) {
        memcpy(h, t->dev, t->n * 4);
        return h;
    }
    const uint16_t *u = t->dev;
    for (size_t i = 0; i < t->n; i++)
        h[i] = t->dt == DT_BF16 ? half_bf16_to_f32(u[i]) : half_f16_to_f32(u[i]);
    return h;
}

static void ten_free(struct ten *t)
{
    free(t->ref);
    free(t->dev);
    t->ref = t->dev = NULL;
}

/* ------------------------------------------------------------------ comparison */

/* got against want: |got - want| <= atol + rtol |want|; NaN must meet NaN, inf the same
 * inf; atol = rtol = 0 asks for equality (== : +0 and -0 are equal) */
static void close_to(const char *op, enum dtype dt, const float *got, const float *want,
                     size_t n, double atol, double rtol)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        const double g = got[i], w = want[i];
        int ok;
        if (isnan(w) || isnan(g) || isinf(w) || isinf(g))
            ok = (isnan(w) && isnan(g)) || g == w;
        else
            ok = fabs(g - w) <= atol + rtol * fabs(w);
        if (!ok && bad++ == 0)
            first = i;
    }
    CHECK(bad == 0, "%s %s: %zu of %zu differ, first at %zu: kernel %.9g, cpu %.9g (atol %.3g rtol "
          "%.3g)",
          op, dt_name(dt), bad, n, first, n ? (double)got[first] : 0.0,
          n ? (double)want[first] : 0.0, atol, rtol);
}

static void same(const char *op, enum dtype dt, const struct ten *t)
{
    float *g = ten_dev(t);
    close_to(op, dt, g, t->ref, t->n, 0.0, 0.0);
    free(g);
}

#define LAUNCH(call) CHECK((call) == cudaSuccess, "%s: launch failed", #call)

/* a grid-stride kernel over n elements ran as one pass per thread (own grid) or, in the
 * tiny build, as several */
static void passes_check(const char *op, unsigned long long threads_before, size_t n)
{
    const unsigned long long threads = emu_threads_run() - threads_before;
    CHECK(threads > 0, "%s: no kernel thread ran", op);
    if (KERN_MAX_BLOCKS > 0)
        CHECK(threads < n, "%s: %llu threads for %zu elements: the tiny grid made one pass",
              op, threads, n);
    else
        CHECK(threads >= n, "%s: %llu threads for %zu elements with the kernels' own grid", op,
              threads, n);
}

/* ------------------------------------------------------------------ batch norm */

static void test_batchnorm(enum dtype dt)
{
    /* 3000 elements per channel: several chunks, each longer than a block, in the tiny
     * build; one chunk of 12 passes with the kernels' own sizes */
    const int n = 3, c = 4, hw = 1000;
    const size_t m = (size_t)n * c * hw;
    float *hx = malloc(m * sizeof *hx);
    for (size_t i = 0; i < m; i++)
        hx[i] = (float)((i / hw) % c) - 1.5f + 2.0f * (float)test_uniform(&seed);
    struct ten x = ten_of(m, dt, hx), dy = ten_rand(m, dt, -1.0f, 1.0f);
    free(hx);
    const float eps = 1e-5f;
    float mean_k[4], invstd_k[4], mean_c[4], invstd_c[4];
    double *ws = calloc(kern_channel_ws_doubles(n, c, hw), sizeof *ws);
    unsigned done[4] = {0}; /* each reduction's count of finished blocks: left zero */
    LAUNCH(kern_bn_stats(NULL, n, c, hw, dt, LAYOUT_NCHW, x.dev, eps, mean_k, invstd_k, ws, done));
    CHECK(!done[0] && !done[1] && !done[2] && !done[3], "bn_stats left its counts non-zero");
    cpu->batchnorm_stats(cpu, n, c, hw, dt, x.ref, eps, mean_c, invstd_c);
    close_to("bn_stats mean", dt, mean_k, mean_c, 4, 1e-6 * 4.0, 1e-5);
    close_to("bn_stats invstd", dt, invstd_k, invstd_c, 4, 0.0, 1e-5);

    /* the elementwise kernels on the CPU's statistics: equal */
    const float wt[4] = {1.5f, -0.5f, 0.25f, 2.0f}, bi[4] = {0.1f, 0.2f, -0.3f, 0.0f};
    const float rv[4] = {0.5f, 2.0f, 1.0f, 3.0f};
    struct ten y = ten_zero(m, dt);
    LAUNCH(kern_bn_elemt(NULL, n, c, hw, dt, LAYOUT_NCHW, x.dev, mean_c, invstd_c, wt, bi, y.dev));
    cpu->batchnorm_elemt(cpu, n, c, hw, dt, x.ref, mean_c, invstd_c, wt, bi, y.ref);
    same("bn_elemt", dt, &y);
    LAUNCH(kern_bn_forward_eval(NULL, n, c, hw, dt, LAYOUT_NCHW, x.dev, mean_c, rv, eps, NULL, bi, y.dev));
    cpu->batchnorm_forward_eval(cpu, n, c, hw, dt, x.ref, mean_c, rv, eps, NULL, bi, y.ref);
    same("bn_forward_eval (no weight)", dt, &y);

    float sums_k[8], sums_c[8], dw_k[4], dw_c[4], db_k[4], db_c[4];
    LAUNCH(kern_bn_backward_reduce(NULL, n, c, hw, dt, LAYOUT_NCHW, dy.dev, x.dev, mean_c, invstd_c, sums_k,
                                   sums_k + 4, dw_k, db_k, ws, done));
    CHECK(!done[0] && !done[1] && !done[2] && !done[3],
          "bn_backward_reduce left its counts non-zero");
    cpu->batchnorm_backward_reduce(cpu, n, c, hw, dt, dy.ref, x.ref, mean_c, invstd_c, sums_c,
                                   sums_c + 4, dw_c, db_c);
    const double l1 = 4.0 * n * hw; /* a bound on the sums of |terms| */
    close_to("bn_backward_reduce sums", dt, sums_k, sums_c, 8, 1e-6 * l1, 1e-5);
    close_to("bn_backward_reduce dweight", dt, dw_k, dw_c, 4, 4e-6 * l1, 1e-5);
    close_to("bn_backward_reduce dbias", dt, db_k, db_c, 4, 1e-6 * l1, 1e-5);

    struct ten dx = ten_zero(m, dt);
    const float count = (float)(n * hw);
    LAUNCH(kern_bn_backward_elemt(NULL, n, c, hw, dt, LAYOUT_NCHW, dy.dev, x.dev, mean_c, invstd_c, wt,
                                  sums_c, sums_c + 4, &count, dx.dev));
    cpu->batchnorm_backward_elemt(cpu, n, c, hw, dt, dy.ref, x.ref, mean_c, invstd_c, wt, sums_c,
                                  sums_c + 4, &count, dx.ref);
    same("bn_backward_elemt", dt, &dx);

    /* the bias gradient of a 1x1 convolution: the per-channel sum of dy (n,k,p,q) */
    struct conv2d_shape cs = {.n = n, .c = 1, .h = 25, .w = 40, .k = c, .r = 1, .s = 1,
                              .pad = 0, .stride = 1};
    CHECK(conv2d_shape_init(&cs) == 0, "shape: %s", error_get());
    struct ten db = ten_zero((size_t)c, dt);
    LAUNCH(kern_channel_sum(NULL, n, c, hw, dt, LAYOUT_NCHW, dy.dev, db.dev, ws, done));
    CHECK(!done[0] && !done[1] && !done[2] && !done[3], "channel_sum left its counts non-zero");
    cpu->conv2d_backward(cpu, &cs, dt, NULL, NULL, dy.ref, NULL, NULL, db.ref);
    float *g = ten_dev(&db);
    const double hu = dt == DT_F16 ? 0x1p-10 : dt == DT_BF16 ? 0x1p-7 : 0.0;
    close_to("channel_sum", dt, g, db.ref, (size_t)c, 1e-6 * l1, 1e-5 + hu);
    free(g);

    struct ten *all[] = {&x, &dy, &y, &dx, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ten_free(all[i]);
    free(ws);
}

static void test_gather_stats(void)
{
    enum { WORLD = 3, C = 37 };
    float means[WORLD * C], invstds[WORLD * C], rm_k[C], rv_k[C], rm_c[C], rv_c[C];
    float mean_k[C], invstd_k[C], mean_c[C], invstd_c[C];
    const float counts[WORLD] = {6272.0f, 0.0f, 1568.0f}; /* a rank with no samples */
    test_fill_uniform(means, WORLD * C, -2.0f, 2.0f, &seed);
    test_fill_uniform(invstds, WORLD * C, 0.3f, 3.0f, &seed);
    test_fill_uniform(rm_k, C, -1.0f, 1.0f, &seed);
    test_fill_uniform(rv_k, C, 0.5f, 2.0f, &seed);
    memcpy(rm_c, rm_k, sizeof rm_c);
    memcpy(rv_c, rv_k, sizeof rv_c);
    LAUNCH(kern_bn_gather_stats(NULL, WORLD, C, means, invstds, counts, 0.1f, 1e-5f, rm_k, rv_k,
                                mean_k, invstd_k));
    cpu->batchnorm_gather_stats(cpu, WORLD, C, means, invstds, counts, 0.1f, 1e-5f, rm_c, rv_c,
                                mean_c, invstd_c);
    /* km_bn_gather_channel on both sides */
    close_to("bn_gather_stats mean", DT_F32, mean_k, mean_c, C, 0.0, 0.0);
    close_to("bn_gather_stats invstd", DT_F32, invstd_k, invstd_c, C, 0.0, 0.0);
    close_to("bn_gather_stats running_mean", DT_F32, rm_k, rm_c, C, 0.0, 0.0);
    close_to("bn_gather_stats running_var", DT_F32, rv_k, rv_c, C, 0.0, 0.0);
}

/* ------------------------------------------------------------------ ReLU, pooling */

static void test_relu(enum dtype dt)
{
    const size_t n = 10007;
    float *h = malloc(n * sizeof *h);
    test_fill_uniform(h, n, -1.0f, 1.0f, &seed);
    h[0] = NAN;
    h[1] = -0.0f;
    h[2] = INFINITY;
    h[3] = -INFINITY;
    struct ten x = ten_of(n, dt, h), y = ten_zero(n, dt), dy = ten_rand(n, dt, -1.0f, 1.0f);
    free(h);
    const unsigned long long before = emu_threads_run();
    LAUNCH(kern_relu_forward(NULL, n, dt, x.dev, y.dev));
    passes_check("relu_forward", before, n);
    cpu->relu_forward(cpu, n, dt, x.ref, y.ref);
    same("relu_forward", dt, &y);
    LAUNCH(kern_relu_backward(NULL, n, dt, y.dev, dy.dev, dy.dev));
    cpu->relu_backward(cpu, n, dt, y.ref, dy.ref, dy.ref);
    same("relu_backward (in place)", dt, &dy);
    ten_free(&x);
    ten_free(&y);
    ten_free(&dy);
}

static void pool_case(int n, int c, int h, int kernel, int stride, enum dtype dt)
{
    struct pool2d_shape ps = {.n = n, .c = c, .h = h, .w = h, .kernel = kernel, .stride = stride};
    CHECK(pool2d_shape_init(&ps) == 0, "pool: %s", error_get());
    const size_t nx = (size_t)n * c * h * h, ny = (size_t)n * c * ps.p * ps.q;
    float *hx = malloc(nx * sizeof *hx);
    test_fill_uniform(hx, nx, -1.0f, 1.0f, &seed);
    for (size_t i = 0; i < nx; i++) /* ties: the first maximum wins; some NaN windows */
        hx[i] = i % 97 == 7 ? NAN : floorf(hx[i] * 2.0f);
    struct ten x = ten_of(nx, dt, hx), y = ten_zero(ny, dt), dy = ten_rand(ny, dt, -1.0f, 1.0f);
    struct ten dx = ten_rand(nx, dt, 5.0f, 6.0f); /* garbage: backward overwrites it */
    free(hx);
    int32_t *am_k = calloc(ny, sizeof *am_k), *am_c = calloc(ny, sizeof *am_c);
    LAUNCH(kern_maxpool_forward(NULL, n, c, h, h, kernel, stride, ps.p, ps.q, dt, LAYOUT_NCHW,
                                x.dev, y.dev, am_k));
    cpu->maxpool2d_forward(cpu, &ps, dt, x.ref, y.ref, am_c);
    same("maxpool_forward", dt, &y);
    CHECK(memcmp(am_k, am_c, ny * sizeof *am_k) == 0, "maxpool_forward %s k%d s%d: argmax differ",
          dt_name(dt), kernel, stride);
    LAUNCH(kern_maxpool_backward(NULL, n, c, h, h, kernel, stride, ps.p, ps.q, dt, LAYOUT_NCHW,
                                 dy.dev, am_c, dx.dev));
    cpu->maxpool2d_backward(cpu, &ps, dt, dy.ref, am_c, dx.ref);
    same("maxpool_backward", dt, &dx);
    free(am_k);
    free(am_c);
    ten_free(&x);
    ten_free(&y);
    ten_free(&dy);
    ten_free(&dx);
}

/* ------------------------------------------------------------------ bias, linear sums */

static void test_bias(enum dtype dt)
{
    /* conv2d_forward with a bias = the same without, then the bias kernel */
    struct conv2d_shape cs = {.n = 3, .c = 2, .h = 9, .w = 9, .k = 5, .r = 3, .s = 3, .pad = 1,
                              .stride = 1};
    CHECK(conv2d_shape_init(&cs) == 0, "shape: %s", error_get());
    const size_t nx = (size_t)cs.n * cs.c * 81, nw = (size_t)cs.k * cs.c * 9;
    const size_t pq = (size_t)cs.p * cs.q, ny = (size_t)cs.n * cs.k * pq;
    struct ten x = ten_rand(nx, dt, -1.0f, 1.0f), w = ten_rand(nw, dt, -1.0f, 1.0f);
    struct ten b = ten_rand((size_t)cs.k, dt, -1.0f, 1.0f), y = ten_zero(ny, dt);
    cpu->conv2d_forward(cpu, &cs, dt, x.ref, w.ref, NULL, y.ref);
    ten_sync(&y);
    const unsigned long long before = emu_threads_run();
    LAUNCH(kern_bias_add_channels(NULL, cs.n, cs.k, pq, dt, LAYOUT_NCHW, b.dev, y.dev));
    passes_check("bias_add_channels", before, ny);
    cpu->conv2d_forward(cpu, &cs, dt, x.ref, w.ref, b.ref, y.ref);
    same("bias_add_channels (conv2d_forward's bias)", dt, &y);

    /* linear_forward with zero weights is its bias in every row */
    const int n = 37, in = 3, out = 29;
    struct ten lx = ten_rand((size_t)n * in, dt, -1.0f, 1.0f), lw = ten_zero((size_t)out * in, dt);
    struct ten lb = ten_rand((size_t)out, dt, 0.01f, 1.0f), ly = ten_zero((size_t)n * out, dt);
    LAUNCH(kern_bias_fill_rows(NULL, n, out, dt, lb.dev, ly.dev));
    cpu->linear_forward(cpu, n, in, out, dt, lx.ref, lw.ref, lb.ref, ly.ref);
    same("bias_fill_rows (linear_forward's bias)", dt, &ly);

    /* the linear bias gradient: column sums over more rows and columns than a block */
    const int rows = 300, cols = 300;
    struct ten dy = ten_rand((size_t)rows * cols, dt, -1.0f, 1.0f), db = ten_zero(cols, dt);
    LAUNCH(kern_column_sum(NULL, rows, cols, dt, dy.dev, db.dev));
    cpu->linear_backward(cpu, rows, 1, cols, dt, NULL, NULL, dy.ref, NULL, NULL, db.ref);
    same("column_sum (linear_backward db)", dt, &db); /* double sums in row order on both */
    struct ten *all[] = {&x, &w, &b, &y, &lx, &lw, &lb, &ly, &dy, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ten_free(all[i]);
}

/* ------------------------------------------------------------------ ResNet18's ops */

/* the residual add (in place too) and adaptive average pooling: the same float operations
 * in the same order as the CPU backend, one rounding: equal */
static void test_resnet_ops(enum dtype dt)
{
    const size_t n = 10007;
    struct ten a = ten_rand(n, dt, -4.0f, 4.0f), b = ten_rand(n, dt, -4.0f, 4.0f);
    struct ten y = ten_zero(n, dt);
    const unsigned long long before = emu_threads_run();
    LAUNCH(kern_add(NULL, n, dt, a.dev, b.dev, y.dev));
    passes_check("add", before, n);
    cpu->add(cpu, n, dt, a.ref, b.ref, y.ref);
    same("add", dt, &y);
    LAUNCH(kern_add(NULL, n, dt, a.dev, b.dev, a.dev));
    cpu->add(cpu, n, dt, a.ref, b.ref, a.ref);
    same("add (in place)", dt, &a);

    /* (planes, h, w, p, q): ResNet18's 4x4 to 1x1, overlapping uneven windows, more
     * outputs than inputs; enough planes for several grid passes in the tiny build */
    static const int shapes[][5] = {{300, 4, 4, 1, 1}, {40, 7, 9, 3, 4}, {30, 5, 6, 10, 12}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int planes = shapes[k][0], h = shapes[k][1], w = shapes[k][2];
        const int p = shapes[k][3], q = shapes[k][4];
        const size_t nx = (size_t)planes * h * w, ny = (size_t)planes * p * q;
        struct ten x = ten_rand(nx, dt, -2.0f, 2.0f), py = ten_zero(ny, dt);
        struct ten dy = ten_rand(ny, dt, -1.0f, 1.0f), dx = ten_rand(nx, dt, 5.0f, 6.0f);
        LAUNCH(kern_adaptive_avgpool_forward(NULL, planes, 1, h, w, p, q, dt, LAYOUT_NCHW, x.dev,
                                             py.dev));
        cpu->adaptive_avgpool2d_forward(cpu, planes, 1, h, w, p, q, dt, x.ref, py.ref);
        same("adaptive_avgpool_forward", dt, &py);
        LAUNCH(kern_adaptive_avgpool_backward(NULL, planes, 1, h, w, p, q, dt, LAYOUT_NCHW,
                                              dy.dev, dx.dev));
        cpu->adaptive_avgpool2d_backward(cpu, planes, 1, h, w, p, q, dt, dy.ref, dx.ref);
        same("adaptive_avgpool_backward", dt, &dx);
        ten_free(&x), ten_free(&py), ten_free(&dy), ten_free(&dx);
    }
    ten_free(&a), ten_free(&b), ten_free(&y);
}

/* ------------------------------------------------------------------ loss, metric */

static void test_loss(void)
{
    /* more rows than a block has threads (the mean's loop), more classes than a warp has
     * lanes (each lane several), a bad label and a NaN row */
    const int n = 300, c = 40;
    float *logits = malloc((size_t)n * c * sizeof *logits);
    float *dk = malloc((size_t)n * c * sizeof *dk), *dc = malloc((size_t)n * c * sizeof *dc);
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    test_fill_uniform(logits, (size_t)n * c, -4.0f, 4.0f, &seed);
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)(test_uniform(&seed) * c);
    labels[17] = c; /* out of range: NaN loss, plain softmax row */
    const float kept = logits[33 * c + 5];
    logits[33 * c + 5] = NAN; /* a NaN row: NaN loss (the warp's vote), NaN gradients */
    double *row_loss = calloc((size_t)n, sizeof *row_loss);
    float loss_k = 0.0f;
    LAUNCH(kern_softmax_xent(NULL, n, c, logits, labels, dk, row_loss, &loss_k));
    const float loss_c = cpu->softmax_xent(cpu, n, c, logits, labels, dc);
    CHECK(isnan(loss_k) && isnan(loss_c), "a bad label: losses %g, %g, want NaN", (double)loss_k,
          (double)loss_c);
    close_to("softmax_xent dlogits (bad label, NaN row)", DT_F32, dk, dc, (size_t)n * c,
             8e-7 / n, 8e-7);
    labels[17] = 3;
    logits[33 * c + 5] = kept;
    LAUNCH(kern_softmax_xent(NULL, n, c, logits, labels, dk, row_loss, &loss_k));
    const float lc = cpu->softmax_xent(cpu, n, c, logits, labels, dc);
    /* the row sums of exp in a warp's tree against in order: a few ulp */
    close_to("softmax_xent loss", DT_F32, &loss_k, &lc, 1, 0.0, 1e-6);
    close_to("softmax_xent dlogits", DT_F32, dk, dc, (size_t)n * c, 8e-7 / n, 8e-7);

    /* count_correct over more rows than a block: ties (first maximum) and NaN */
    const int rows = 600, classes = 10;
    float *h = malloc((size_t)rows * classes * sizeof *h);
    test_fill_uniform(h, (size_t)rows * classes, -2.0f, 2.0f, &seed);
    for (int i = 0; i < rows * classes; i++)
        h[i] = floorf(h[i]);
    h[3 * classes] = NAN;
    h[5 * classes + 4] = NAN;
    int32_t *lab = malloc((size_t)rows * sizeof *lab);
    for (int i = 0; i < rows; i++)
        lab[i] = (int32_t)(test_uniform(&seed) * classes);
    int count_k = -1;
    LAUNCH(kern_count_correct(NULL, rows, classes, h, lab, &count_k));
    const int count_c = cpu->count_correct(cpu, rows, classes, h, lab);
    CHECK(count_k == count_c, "count_correct: kernel %d, cpu %d", count_k, count_c);
    free(logits), free(dk), free(dc), free(labels), free(row_loss), free(h), free(lab);
}

/* ------------------------------------------------------------------ elementwise, AMP */

static void test_elementwise(void)
{
    const size_t n = 10007;
    struct ten x = ten_rand(n, DT_F32, -3.0f, 3.0f), y = ten_zero(n, DT_F32);
    const unsigned long long before = emu_threads_run();
    LAUNCH(kern_scale(NULL, n, 0.37f, x.dev, y.dev));
    passes_check("scale", before, n);
    cpu->scale(cpu, n, 0.37f, x.ref, y.ref);
    same("scale", DT_F32, &y);

    /* SGD with momentum, weight decay and nesterov, three steps (the first fills buf) */
    struct ten p = ten_rand(n, DT_F32, -1.0f, 1.0f), g = ten_rand(n, DT_F32, -1.0f, 1.0f);
    struct ten buf = ten_zero(n, DT_F32);
    for (int step = 0; step < 3; step++) {
        LAUNCH(kern_sgd_step(NULL, n, p.dev, g.dev, buf.dev, 0.01f, 0.9f, 0.0f, 1e-4f, 1,
                             step == 0));
        cpu->sgd_step(cpu, n, p.ref, g.ref, buf.ref, 0.01f, 0.9f, 0.0f, 1e-4f, 1, step == 0);
    }
    same("sgd_step param", DT_F32, &p);
    same("sgd_step momentum", DT_F32, &buf);
    LAUNCH(kern_sgd_step(NULL, n, p.dev, g.dev, NULL, 0.05f, 0.0f, 0.0f, 0.0f, 0, 0));
    cpu->sgd_step(cpu, n, p.ref, g.ref, NULL, 0.05f, 0.0f, 0.0f, 0.0f, 0, 0);
    same("sgd_step without momentum", DT_F32, &p);

    /* Adam, three steps with weight decay (bias corrections of steps 1 to 3) */
    struct ten m = ten_zero(n, DT_F32), v = ten_zero(n, DT_F32);
    for (long long step = 1; step <= 3; step++) {
        LAUNCH(kern_adam_step(NULL, n, p.dev, g.dev, m.dev, v.dev, 1e-3, 0.9, 0.999, 1e-8, 1e-2,
                              step));
        cpu->adam_step(cpu, n, p.ref, g.ref, m.ref, v.ref, 1e-3, 0.9, 0.999, 1e-8, 1e-2, step);
    }
    same("adam_step param", DT_F32, &p);
    same("adam_step exp_avg", DT_F32, &m);
    same("adam_step exp_avg_sq", DT_F32, &v);
    ten_free(&m), ten_free(&v);

    /* rounding and casts over every magnitude from fp16 subnormals to overflow */
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)(pow(2.0, -30.0 + 50.0 * test_uniform(&seed)) *
                       (test_uniform(&seed) < 0.5 ? -1.0 : 1.0));
    h[0] = NAN;
    h[1] = 65520.0f; /* the fp16 tie that rounds to inf */
    for (int d = DT_F16; d <= DT_BF16; d++) {
        memcpy(x.dev, h, n * 4);
        LAUNCH(kern_round_amp(NULL, n, d, x.dev, y.dev));
        cpu->round_amp(cpu, n, (enum amp_dtype)d, h, y.ref);
        same("round_amp", (enum dtype)d, &y);
    }
    for (int f = DT_F32; f <= DT_BF16; f++)
        for (int t = DT_F32; t <= DT_BF16; t++) {
            struct ten src = ten_of(n, (enum dtype)f, h), dst = ten_zero(n, (enum dtype)t);
            LAUNCH(kern_cast(NULL, n, (enum dtype)f, src.dev, (enum dtype)t, dst.dev));
            cpu->cast(cpu, n, (enum dtype)f, src.ref, (enum dtype)t, dst.ref);
            char op[32];
            snprintf(op, sizeof op, "cast from %s to", dt_name((enum dtype)f));
            same(op, (enum dtype)t, &dst);
            ten_free(&src);
            ten_free(&dst);
        }
    free(h);
    ten_free(&x), ten_free(&y), ten_free(&p), ten_free(&g), ten_free(&buf);
}

/* 41 gradients: two launches' lists, an empty tensor, one longer than a grid pass */
static void test_unscale(void)
{
    enum { COUNT = 41 };
    for (int bad = 0; bad < 3; bad++) {
        struct ten g[COUNT];
        float *gk[COUNT], *gc[COUNT];
        size_t numels[COUNT];
        for (int i = 0; i < COUNT; i++) {
            numels[i] = i == 5 ? 0 : i == 7 ? 20011 : (size_t)(i * 997 % 3001) + 1;
            g[i] = ten_rand(numels[i], DT_F32, -1e4f, 1e4f);
            gk[i] = g[i].dev;
            gc[i] = g[i].ref;
        }
        if (bad == 1) /* the last tensor of the second list */
            gk[COUNT - 1][numels[COUNT - 1] - 1] = gc[COUNT - 1][numels[COUNT - 1] - 1] = INFINITY;
        if (bad == 2) /* the long tensor's last element */
            gk[7][numels[7] - 1] = gc[7][numels[7] - 1] = NAN;
        float found_k = -1.0f, found_c = -1.0f;
        LAUNCH(kern_unscale(NULL, COUNT, gk, numels, 1.0f / 1024.0f, &found_k));
        cpu->unscale(cpu, COUNT, gc, numels, 1.0f / 1024.0f, &found_c);
        CHECK(found_k == (bad ? 1.0f : 0.0f) && found_k == found_c,
              "unscale case %d: found_inf kernel %g, cpu %g", bad, (double)found_k,
              (double)found_c);
        for (int i = 0; i < COUNT; i++) {
            same("unscale", DT_F32, &g[i]);
            ten_free(&g[i]);
        }
    }
}

/* cast over 37 tensors (more than one launch's list, an empty one, one beyond a grid
 * pass), every type to every other: equal to the CPU's cast */
static void test_cast_list(void)
{
    enum { COUNT = 37 };
    for (int f = DT_F32; f <= DT_BF16; f++)
        for (int t = DT_F32; t <= DT_BF16; t++) {
            if (f == t)
                continue;
            const enum dtype from = (enum dtype)f, to = (enum dtype)t;
            struct ten src[COUNT], dst[COUNT];
            const void *sk[COUNT], *sc[COUNT];
            void *dk[COUNT], *dc[COUNT];
            size_t numels[COUNT];
            for (int i = 0; i < COUNT; i++) {
                numels[i] = i == 3 ? 0 : i == 30 ? 20011 : (size_t)(i * 1543 % 4001) + 1;
                src[i] = ten_rand(numels[i], from, -7e4f, 7e4f);
                dst[i] = ten_zero(numels[i], to);
                sk[i] = src[i].dev, sc[i] = src[i].ref;
                dk[i] = dst[i].dev, dc[i] = dst[i].ref;
            }
            LAUNCH(kern_cast_list(NULL, COUNT, from, LAYOUT_NCHW, sk, to, LAYOUT_NCHW, dk, numels,
                                  NULL));
            cpu->cast_list(cpu, COUNT, from, sc, to, dc, numels, NULL);
            for (int i = 0; i < COUNT; i++) {
                same("cast_list", to, &dst[i]);
                ten_free(&src[i]);
                ten_free(&dst[i]);
            }
        }
}

int main(void)
{
    cpu = backend_cpu_create(1);
    CHECK(cpu != NULL, "cpu backend: %s", error_get());
    if (!cpu)
        return test_finish();
    printf("kernels.cu on the CPU, grid limit %s\n",
           KERN_MAX_BLOCKS > 0 ? "tiny (3 blocks, reduction chunks of 64)" : "the kernels' own");
    int probe = 0;
    LAUNCH(kern_probe(NULL, &probe));
    CHECK(probe == 1, "kern_probe wrote %d", probe);
    for (int d = DT_F32; d <= DT_BF16; d++) {
        const enum dtype dt = (enum dtype)d;
        test_batchnorm(dt);
        test_relu(dt);
        pool_case(3, 5, 28, 2, 2, dt); /* the ConvNet's: 5880 outputs */
        pool_case(2, 4, 9, 3, 2, dt);  /* overlapping windows, floor mode */
        test_bias(dt);
        test_resnet_ops(dt);
    }
    test_gather_stats();
    test_loss();
    test_elementwise();
    test_cast_list();
    test_unscale();
    printf("%llu blocks, %llu threads run\n", emu_blocks_run(), emu_threads_run());
    cpu->destroy(cpu);
    return test_finish();
}
