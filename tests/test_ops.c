/* test_ops.c — the CPU backend's ops against naive double-precision references.
 *
 * (1) Every backward slot against central finite differences of a double reference forward:
 *     L = sum(forward(inputs) * r) for a random r, so dL/d(output) = r is what the float
 *     backward slot is given.  (2) conv2d, maxpool and linear forwards against the same
 *     double loops, conv2d also on a batch big enough to be cut into several chunks over
 *     two threads.  (3) batchnorm_gather_stats over three ranks against the statistics of
 *     the concatenated data, running statistics included.  (4) sgd_step against values
 *     worked out by hand.  (5) softmax_xent and count_correct on a small known case.
 * Also the memory slots, the shape helpers, the mixed-precision slots on a size that
 * runs on both threads, and (6) the CPU's emulation of half tensors: each op of a half
 * type against its fp32 op with the outputs rounded, exactly.  Last, an informational
 * timing of the ConvNet's second convolution (never asserted).
 *
 * Tolerances for fp32 ops against double references: the float slots accumulate at most
 * ~10^4 products, so their rounding error stays below ~1e-6 of the largest value involved
 * (we see up to 2e-7); the central difference (h = 1e-6, in double) is off by O(h^2) from
 * truncation plus ~1e-16*|L|/h ~ 1e-9 from rounding.  We allow 2e-5 of the largest
 * reference value plus 2e-4 relative: ~100x what we see, and ~10^4x below the O(1) errors
 * of a wrong index, sign or missing term. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "common/clock.h"
#include "common/error.h"
#include "backend/kernel_math.h"
#include "testutil.h"

static uint64_t seed = 0x9e3779b97f4a7c15ULL;
static struct backend *be;

#define FD_H 1e-6

/* ------------------------------------------------------------------ helpers */

static int rnd_int(int m) { return (int)(test_uniform(&seed) * m); }

static double *dvec(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static float *fvec(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* the same uniform values in [lo, hi) as float and as double (so both sides of a
 * comparison see exactly the same inputs) */
static void fill_pair(double *d, float *f, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(lo + (hi - lo) * test_uniform(&seed));
        d[i] = f[i];
    }
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static double max_abs(const double *a, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

/* bitwise-equal results (selections and max(x, 0) involve no rounding) */
static int exact_equal(const float *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((double)a[i] != b[i])
            return 0;
    return 1;
}

/* float result a against double reference b, tolerance as in the file comment */
static void check_close(const char *what, const char *shape, const float *a, const double *b,
                        size_t n)
{
    const double scale = max_abs(b, n);
    const double err = test_max_err(a, b, n, 2e-5 * scale + 1e-9, 2e-4);
    CHECK(err <= 1.0, "%s [%s]: worst error %.3g of the tolerance (largest |ref| %.3g)", what,
          shape, err, scale);
}

/* ------------------------------------------------------------------ double references */

static void ref_conv2d(const struct conv2d_shape *cs, const double *x, const double *w,
                       const double *b, double *y)
{
    for (int i = 0; i < cs->n; i++)
        for (int k = 0; k < cs->k; k++)
            for (int p = 0; p < cs->p; p++)
                for (int q = 0; q < cs->q; q++) {
                    double acc = b ? b[k] : 0.0;
                    for (int c = 0; c < cs->c; c++)
                        for (int r = 0; r < cs->r; r++)
                            for (int s = 0; s < cs->s; s++) {
                                const int ih = p * cs->stride - cs->pad + r;
                                const int iw = q * cs->stride - cs->pad + s;
                                if (ih < 0 || ih >= cs->h || iw < 0 || iw >= cs->w)
                                    continue;
                                acc += x[(((size_t)i * cs->c + c) * cs->h + ih) * cs->w + iw] *
                                       w[(((size_t)k * cs->c + c) * cs->r + r) * cs->s + s];
                            }
                    y[(((size_t)i * cs->k + k) * cs->p + p) * cs->q + q] = acc;
                }
}

/* the exact gradients of sum(conv(x, w) * dy), for shapes too big for finite differences */
static void ref_conv2d_backward(const struct conv2d_shape *cs, const double *x, const double *w,
                                const double *dy, double *dx, double *dw)
{
    memset(dx, 0, (size_t)cs->n * cs->c * cs->h * cs->w * sizeof(double));
    memset(dw, 0, (size_t)cs->k * cs->c * cs->r * cs->s * sizeof(double));
    for (int i = 0; i < cs->n; i++)
        for (int k = 0; k < cs->k; k++)
            for (int p = 0; p < cs->p; p++)
                for (int q = 0; q < cs->q; q++) {
                    const double g = dy[(((size_t)i * cs->k + k) * cs->p + p) * cs->q + q];
                    for (int c = 0; c < cs->c; c++)
                        for (int r = 0; r < cs->r; r++)
                            for (int s = 0; s < cs->s; s++) {
                                const int ih = p * cs->stride - cs->pad + r;
                                const int iw = q * cs->stride - cs->pad + s;
                                if (ih < 0 || ih >= cs->h || iw < 0 || iw >= cs->w)
                                    continue;
                                const size_t xi =
                                    (((size_t)i * cs->c + c) * cs->h + ih) * cs->w + iw;
                                const size_t wi =
                                    (((size_t)k * cs->c + c) * cs->r + r) * cs->s + s;
                                dx[xi] += g * w[wi];
                                dw[wi] += g * x[xi];
                            }
                }
}

/* training-mode batch norm, world 1: biased batch variance */
static void ref_batchnorm(int n, int c, int hw, const double *x, const double *weight,
                          const double *bias, double eps, double *y)
{
    const double count = (double)n * hw;
    for (int ch = 0; ch < c; ch++) {
        double s = 0.0, ss = 0.0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++)
                s += x[((size_t)i * c + ch) * hw + j];
        const double mean = s / count;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                const double d = x[((size_t)i * c + ch) * hw + j] - mean;
                ss += d * d;
            }
        const double invstd = 1.0 / sqrt(ss / count + eps);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                const size_t k = ((size_t)i * c + ch) * hw + j;
                y[k] = (x[k] - mean) * invstd * weight[ch] + bias[ch];
            }
    }
}

/* max pooling; argmax (may be NULL) is the flat index within the plane of the first max */
static void ref_maxpool(const struct pool2d_shape *ps, const double *x, double *y,
                        int32_t *argmax)
{
    for (int pl = 0; pl < ps->n * ps->c; pl++)
        for (int p = 0; p < ps->p; p++)
            for (int q = 0; q < ps->q; q++) {
                int best = -1;
                double bv = -INFINITY;
                for (int i = 0; i < ps->kernel; i++)
                    for (int j = 0; j < ps->kernel; j++) {
                        const int idx = (p * ps->stride + i) * ps->w + q * ps->stride + j;
                        const double v = x[(size_t)pl * ps->h * ps->w + idx];
                        if (best < 0 || v > bv) {
                            bv = v;
                            best = idx;
                        }
                    }
                y[((size_t)pl * ps->p + p) * ps->q + q] = bv;
                if (argmax)
                    argmax[((size_t)pl * ps->p + p) * ps->q + q] = best;
            }
}

static void ref_linear(int n, int in, int out, const double *x, const double *w,
                       const double *b, double *y)
{
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int j = 0; j < in; j++)
                acc += x[(size_t)i * in + j] * w[(size_t)o * in + j];
            y[(size_t)i * out + o] = acc;
        }
}

static double ref_xent(int n, int c, const double *logits, const int32_t *labels)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        const double *row = logits + (size_t)i * c;
        double mx = row[0], s = 0.0;
        for (int j = 1; j < c; j++)
            mx = row[j] > mx ? row[j] : mx;
        for (int j = 0; j < c; j++)
            s += exp(row[j] - mx);
        total += mx + log(s) - row[labels[i]];
    }
    return total / n;
}

/* ------------------------------------------------------------------ shapes, memory */

static void test_shapes(void)
{
    struct conv2d_shape cs = {.n = 2, .c = 3, .h = 28, .w = 20, .k = 4, .r = 5, .s = 3,
                              .pad = 2, .stride = 2};
    CHECK(conv2d_shape_init(&cs) == 0, "valid conv shape rejected: %s", error_get());
    CHECK(cs.p == 14 && cs.q == 11, "conv p,q = %d,%d, want 14,11", cs.p, cs.q);
    struct conv2d_shape bad = {.n = 1, .c = 1, .h = 3, .w = 3, .k = 1, .r = 5, .s = 5,
                               .pad = 0, .stride = 1};
    error_clear();
    CHECK(conv2d_shape_init(&bad) == -1 && error_get()[0] != '\0',
          "5x5 kernel on an unpadded 3x3 input must fail with a message");
    bad = cs;
    bad.stride = 0;
    CHECK(conv2d_shape_init(&bad) == -1, "stride 0 must fail");
    bad = cs;
    bad.c = 0;
    CHECK(conv2d_shape_init(&bad) == -1, "c = 0 must fail");

    struct pool2d_shape ps = {.n = 1, .c = 2, .h = 7, .w = 5, .kernel = 2, .stride = 2};
    CHECK(pool2d_shape_init(&ps) == 0, "valid pool shape rejected: %s", error_get());
    CHECK(ps.p == 3 && ps.q == 2, "pool p,q = %d,%d, want 3,2 (floor mode)", ps.p, ps.q);
    struct pool2d_shape pbad = {.n = 1, .c = 1, .h = 1, .w = 4, .kernel = 2, .stride = 2};
    error_clear();
    CHECK(pool2d_shape_init(&pbad) == -1 && error_get()[0] != '\0',
          "2x2 window on a 1x4 input must fail with a message");
}

static void test_memory(void)
{
    const size_t n = 1000;
    float *a = be->alloc(be, n * sizeof(float));
    float *b = be->alloc(be, n * sizeof(float));
    float host[1000], back[1000];
    CHECK(a && b, "alloc failed: %s", error_get());
    if (!a || !b)
        return;
    int zero = 1;
    for (size_t i = 0; i < n; i++)
        zero &= a[i] == 0.0f;
    CHECK(zero, "alloc must return zero-filled memory");
    for (size_t i = 0; i < n; i++)
        host[i] = (float)i - 500.0f;
    be->upload(be, a, host, n * sizeof(float));
    be->copy(be, b, a, n * sizeof(float));
    be->scale(be, n, -0.5f, b, b); /* in place */
    be->synchronize(be);
    be->download(be, back, b, n * sizeof(float));
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= back[i] == -0.5f * host[i];
    CHECK(ok, "upload/copy/scale in place/download round trip");
    be->zero(be, a, n * sizeof(float));
    be->download(be, back, a, n * sizeof(float));
    zero = 1;
    for (size_t i = 0; i < n; i++)
        zero &= back[i] == 0.0f;
    CHECK(zero, "zero must clear the buffer");
    be->free(be, a);
    be->free(be, b);
    be->free(be, NULL);
}

/* ------------------------------------------------------------------ conv2d */

struct conv_ctx {
    const struct conv2d_shape *cs;
    double *x, *w, *b, *r, *y;
};

static double conv_loss(const void *p)
{
    const struct conv_ctx *c = p;
    ref_conv2d(c->cs, c->x, c->w, c->b, c->y);
    return dot(c->y, c->r, (size_t)c->cs->n * c->cs->k * c->cs->p * c->cs->q);
}

static void conv_check(struct conv2d_shape cs)
{
    char shape[160];
    snprintf(shape, sizeof shape, "n%d c%d %dx%d k%d %dx%d pad%d stride%d", cs.n, cs.c, cs.h,
             cs.w, cs.k, cs.r, cs.s, cs.pad, cs.stride);
    if (conv2d_shape_init(&cs) != 0) {
        CHECK(0, "test shape %s invalid: %s", shape, error_get());
        return;
    }
    const size_t nx = (size_t)cs.n * cs.c * cs.h * cs.w, nw = (size_t)cs.k * cs.c * cs.r * cs.s;
    const size_t ny = (size_t)cs.n * cs.k * cs.p * cs.q;
    double *x = dvec(nx), *w = dvec(nw), *b = dvec(cs.k), *r = dvec(ny), *y = dvec(ny);
    double *gx = dvec(nx), *gw = dvec(nw), *gb = dvec(cs.k);
    float *fx = fvec(nx), *fw = fvec(nw), *fb = fvec(cs.k), *fr = fvec(ny), *fy = fvec(ny);
    float *fdx = fvec(nx), *fdw = fvec(nw), *fdb = fvec(cs.k);
    fill_pair(x, fx, nx, -1, 1);
    fill_pair(w, fw, nw, -1, 1);
    fill_pair(b, fb, cs.k, -1, 1);
    fill_pair(r, fr, ny, -1, 1);

    /* forward, with and without bias */
    be->conv2d_forward(be, &cs, DT_F32, fx, fw, fb, fy);
    ref_conv2d(&cs, x, w, b, y);
    check_close("conv2d forward", shape, fy, y, ny);
    be->conv2d_forward(be, &cs, DT_F32, fx, fw, NULL, fy);
    ref_conv2d(&cs, x, w, NULL, y);
    check_close("conv2d forward, no bias", shape, fy, y, ny);

    /* backward against finite differences */
    struct conv_ctx ctx = {.cs = &cs, .x = x, .w = w, .b = b, .r = r, .y = y};
    test_fd_gradient(conv_loss, &ctx, x, nx, FD_H, gx);
    test_fd_gradient(conv_loss, &ctx, w, nw, FD_H, gw);
    test_fd_gradient(conv_loss, &ctx, b, cs.k, FD_H, gb);
    be->conv2d_backward(be, &cs, DT_F32, fx, fw, fr, fdx, fdw, fdb);
    check_close("conv2d dx", shape, fdx, gx, nx);
    check_close("conv2d dw", shape, fdw, gw, nw);
    check_close("conv2d db", shape, fdb, gb, cs.k);

    /* NULL outputs are skipped and the others unchanged */
    float *fdw2 = fvec(nw);
    be->conv2d_backward(be, &cs, DT_F32, fx, fw, fr, NULL, fdw2, NULL);
    CHECK(memcmp(fdw, fdw2, nw * sizeof(float)) == 0, "conv2d dw alone differs [%s]", shape);
    free(fdw2);

    free(x), free(w), free(b), free(r), free(y), free(gx), free(gw), free(gb);
    free(fx), free(fw), free(fb), free(fr), free(fy), free(fdx), free(fdw), free(fdb);
}

static void test_conv2d(void)
{
    static const struct conv2d_shape cases[] = {
        /* n  c  h  w  k  r  s pad stride */
        {1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0}, /* n = 1, c = 1, "same" */
        {2, 3, 7, 6, 4, 3, 2, 0, 1, 0, 0}, /* non-square kernel and input, pad 0 */
        {2, 2, 8, 7, 3, 3, 3, 1, 2, 0, 0}, /* stride 2, pad 1 */
        {3, 3, 9, 9, 2, 5, 5, 2, 1, 0, 0}, /* the ConvNet's 5x5 pad 2 */
        {3, 2, 6, 9, 2, 1, 1, 0, 2, 0, 0}, /* 1x1 stride 2 (ResNet downsample) */
        {2, 1, 5, 8, 2, 4, 3, 2, 2, 0, 0}, /* even kernel, pad 2, stride 2 */
        {1, 2, 2, 3, 2, 5, 5, 2, 1, 0, 0}, /* taps that never touch the image */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        conv_check(cases[i]);
    for (int i = 0; i < 6; i++) {
        struct conv2d_shape cs;
        do {
            cs = (struct conv2d_shape){.n = 1 + rnd_int(3), .c = 1 + rnd_int(3),
                                       .h = 1 + rnd_int(8), .w = 1 + rnd_int(8),
                                       .k = 1 + rnd_int(3), .r = 1 + rnd_int(5),
                                       .s = 1 + rnd_int(5), .pad = rnd_int(3),
                                       .stride = 1 + rnd_int(2)};
        } while (conv2d_shape_init(&cs) != 0);
        conv_check(cs);
    }
}

/* A batch the backend cuts into several chunks (about three 40x40 images per 1.5 MiB
 * chunk) spread over two threads, against the exact double gradients. */
static void test_conv2d_chunked(struct backend *bk)
{
    const struct conv2d_shape shapes[] = {
        {7, 8, 40, 40, 4, 3, 3, 1, 1, 0, 0},  /* shifted im2col path */
        {5, 6, 41, 38, 3, 3, 3, 1, 2, 0, 0},  /* strided path */
    };
    for (int t = 0; t < 2; t++) {
        struct conv2d_shape cs = shapes[t];
        conv2d_shape_init(&cs);
        char shape[64];
        snprintf(shape, sizeof shape, "chunked n%d c%d %dx%d stride%d", cs.n, cs.c, cs.h, cs.w,
                 cs.stride);
        const size_t nx = (size_t)cs.n * cs.c * cs.h * cs.w,
                     nw = (size_t)cs.k * cs.c * cs.r * cs.s,
                     ny = (size_t)cs.n * cs.k * cs.p * cs.q;
        double *x = dvec(nx), *w = dvec(nw), *b = dvec(cs.k), *dy = dvec(ny), *y = dvec(ny);
        double *dx = dvec(nx), *dw = dvec(nw), *db = dvec(cs.k);
        float *fx = fvec(nx), *fw = fvec(nw), *fb = fvec(cs.k), *fdy = fvec(ny), *fy = fvec(ny);
        float *fdx = fvec(nx), *fdw = fvec(nw), *fdb = fvec(cs.k);
        float *fdx2 = fvec(nx), *fdw2 = fvec(nw);
        fill_pair(x, fx, nx, -1, 1);
        fill_pair(w, fw, nw, -1, 1);
        fill_pair(b, fb, cs.k, -1, 1);
        fill_pair(dy, fdy, ny, -1, 1);
        bk->conv2d_forward(bk, &cs, DT_F32, fx, fw, fb, fy);
        ref_conv2d(&cs, x, w, b, y);
        check_close("conv2d forward", shape, fy, y, ny);
        bk->conv2d_backward(bk, &cs, DT_F32, fx, fw, fdy, fdx, fdw, fdb);
        ref_conv2d_backward(&cs, x, w, dy, dx, dw);
        for (int k = 0; k < cs.k; k++) {
            db[k] = 0.0;
            for (int i = 0; i < cs.n; i++)
                for (int j = 0; j < cs.p * cs.q; j++)
                    db[k] += dy[((size_t)i * cs.k + k) * cs.p * cs.q + j];
        }
        check_close("conv2d dx", shape, fdx, dx, nx);
        check_close("conv2d dw", shape, fdw, dw, nw);
        check_close("conv2d db", shape, fdb, db, cs.k);
        /* the DDP tests compare runs: the same inputs must give the same bits */
        bk->conv2d_backward(bk, &cs, DT_F32, fx, fw, fdy, fdx2, fdw2, NULL);
        CHECK(memcmp(fdx, fdx2, nx * sizeof(float)) == 0 &&
                  memcmp(fdw, fdw2, nw * sizeof(float)) == 0,
              "conv2d backward not deterministic [%s]", shape);
        free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
        free(fx), free(fw), free(fb), free(fdy), free(fy), free(fdx), free(fdw), free(fdb);
        free(fdx2), free(fdw2);
    }
}

/* ------------------------------------------------------------------ batch norm */

struct bn_ctx {
    int n, c, hw;
    double *x, *weight, *bias, *r, *y;
};

#define BN_EPS 1e-5

static double bn_loss(const void *p)
{
    const struct bn_ctx *b = p;
    ref_batchnorm(b->n, b->c, b->hw, b->x, b->weight, b->bias, BN_EPS, b->y);
    return dot(b->y, b->r, (size_t)b->n * b->c * b->hw);
}

static void bn_check(int n, int c, int hw)
{
    char shape[64];
    snprintf(shape, sizeof shape, "n%d c%d hw%d", n, c, hw);
    const size_t m = (size_t)n * c * hw;
    double *x = dvec(m), *wt = dvec(c), *bi = dvec(c), *r = dvec(m), *y = dvec(m);
    double *gx = dvec(m), *gw = dvec(c), *gb = dvec(c);
    float *fx = fvec(m), *fwt = fvec(c), *fbi = fvec(c), *fr = fvec(m), *fy = fvec(m);
    float *mean = fvec(c), *invstd = fvec(c), *gmean = fvec(c), *ginvstd = fvec(c);
    float *sum_dy = fvec(c), *sum_dy_xmu = fvec(c), *dwt = fvec(c), *dbi = fvec(c);
    float *fdx = fvec(m), *inplace = fvec(m);
    fill_pair(x, fx, m, -2, 3);
    fill_pair(wt, fwt, c, 0.5, 1.5);
    fill_pair(bi, fbi, c, -1, 1);
    fill_pair(r, fr, m, -1, 1);

    /* training forward as SyncBatchNorm composes it, with world = 1 */
    const float count = (float)m / c;
    be->batchnorm_stats(be, n, c, hw, DT_F32, fx, (float)BN_EPS, mean, invstd);
    be->batchnorm_gather_stats(be, 1, c, mean, invstd, &count, 0.1f, (float)BN_EPS, NULL,
                               NULL, gmean, ginvstd);
    be->batchnorm_elemt(be, n, c, hw, DT_F32, fx, gmean, ginvstd, fwt, fbi, fy);
    ref_batchnorm(n, c, hw, x, wt, bi, BN_EPS, y);
    check_close("batchnorm forward", shape, fy, y, m);

    struct bn_ctx ctx = {.n = n, .c = c, .hw = hw, .x = x, .weight = wt, .bias = bi, .r = r,
                         .y = y};
    test_fd_gradient(bn_loss, &ctx, x, m, FD_H, gx);
    test_fd_gradient(bn_loss, &ctx, wt, c, FD_H, gw);
    test_fd_gradient(bn_loss, &ctx, bi, c, FD_H, gb);
    be->batchnorm_backward_reduce(be, n, c, hw, DT_F32, fr, fx, gmean, ginvstd, sum_dy,
                                  sum_dy_xmu, dwt, dbi);
    be->batchnorm_backward_elemt(be, n, c, hw, DT_F32, fr, fx, gmean, ginvstd, fwt, sum_dy,
                                 sum_dy_xmu, &count, fdx);
    check_close("batchnorm dx", shape, fdx, gx, m);
    check_close("batchnorm dweight", shape, dwt, gw, c);
    check_close("batchnorm dbias", shape, dbi, gb, c);

    /* dx may alias dy */
    memcpy(inplace, fr, m * sizeof(float));
    be->batchnorm_backward_elemt(be, n, c, hw, DT_F32, inplace, fx, gmean, ginvstd, fwt, sum_dy,
                                 sum_dy_xmu, &count, inplace);
    CHECK(memcmp(inplace, fdx, m * sizeof(float)) == 0,
          "batchnorm backward elemt in place differs [%s]", shape);

    free(x), free(wt), free(bi), free(r), free(y), free(gx), free(gw), free(gb);
    free(fx), free(fwt), free(fbi), free(fr), free(fy), free(mean), free(invstd), free(gmean);
    free(ginvstd), free(sum_dy), free(sum_dy_xmu), free(dwt), free(dbi), free(fdx),
        free(inplace);
}

static void test_batchnorm(void)
{
    bn_check(2, 3, 5);
    bn_check(1, 2, 7); /* n = 1 */
    bn_check(4, 1, 3); /* c = 1 */
    bn_check(3, 4, 1); /* hw = 1 (BatchNorm1d-like) */
    bn_check(2, 2, 40); /* longer rows: the 16-lane partial sums */
    for (int i = 0; i < 3; i++)
        bn_check(1 + rnd_int(4), 1 + rnd_int(4), 2 + rnd_int(20));
}

/* world = 3 ranks with different batch sizes and means against the concatenation */
static void test_batchnorm_gather(void)
{
    enum { C = 4, HW = 5, WORLD = 3 };
    const int ns[WORLD] = {2, 3, 1};
    const float momentum = 0.1f, eps = 1e-5f;
    float means[WORLD * C], invstds[WORLD * C], counts[WORLD];
    double sum[C] = {0}, total = 0;
    float *xs[WORLD];
    for (int r = 0; r < WORLD; r++) {
        const size_t m = (size_t)ns[r] * C * HW;
        xs[r] = fvec(m);
        test_fill_uniform(xs[r], m, -1.0f + r, 1.5f + 2 * r, &seed); /* rank-dependent mean */
        be->batchnorm_stats(be, ns[r], C, HW, DT_F32, xs[r], eps, means + r * C, invstds + r * C);
        counts[r] = (float)(ns[r] * HW);
        total += counts[r];
        for (int i = 0; i < ns[r]; i++)
            for (int ch = 0; ch < C; ch++)
                for (int j = 0; j < HW; j++)
                    sum[ch] += xs[r][((size_t)i * C + ch) * HW + j];
    }
    double want_mean[C], want_invstd[C], want_rm[C], want_rv[C];
    float rm[C], rv[C], mean[C], invstd[C];
    for (int ch = 0; ch < C; ch++) {
        const double mu = sum[ch] / total;
        double ss = 0.0;
        for (int r = 0; r < WORLD; r++)
            for (int i = 0; i < ns[r]; i++)
                for (int j = 0; j < HW; j++) {
                    const double d = xs[r][((size_t)i * C + ch) * HW + j] - mu;
                    ss += d * d;
                }
        rm[ch] = 0.25f * ch - 0.3f;
        rv[ch] = 0.5f + 0.2f * ch;
        want_mean[ch] = mu;
        want_invstd[ch] = 1.0 / sqrt(ss / total + eps);
        want_rm[ch] = (1.0 - momentum) * rm[ch] + momentum * mu;
        want_rv[ch] = (1.0 - momentum) * rv[ch] + momentum * ss / (total - 1.0); /* unbiased */
    }
    be->batchnorm_gather_stats(be, WORLD, C, means, invstds, counts, momentum, eps, rm, rv,
                               mean, invstd);
    /* fp32 statistics of 30 values each and one invstd -> var round trip: ~1e-6 relative */
    CHECK(test_max_err(mean, want_mean, C, 1e-6, 1e-5) <= 1.0, "gathered mean");
    CHECK(test_max_err(invstd, want_invstd, C, 1e-6, 1e-5) <= 1.0, "gathered invstd");
    CHECK(test_max_err(rm, want_rm, C, 1e-6, 1e-5) <= 1.0, "running mean (momentum 0.1)");
    CHECK(test_max_err(rv, want_rv, C, 1e-6, 1e-5) <= 1.0, "running var (unbiased)");

    /* a rank with no samples contributes nothing; running stats may be NULL */
    float means2[WORLD * C], invstds2[WORLD * C], counts2[WORLD] = {counts[0], 0, counts[2]};
    float mean2[C], invstd2[C], mean3[C], invstd3[C];
    memcpy(means2, means, sizeof means);
    memcpy(invstds2, invstds, sizeof invstds);
    for (int ch = 0; ch < C; ch++)
        means2[C + ch] = invstds2[C + ch] = 12345.0f; /* garbage from the empty rank */
    be->batchnorm_gather_stats(be, WORLD, C, means2, invstds2, counts2, momentum, eps, NULL,
                               NULL, mean2, invstd2);
    const float two_means[2 * C] = {means[0], means[1], means[2], means[3],
                                    means[8], means[9], means[10], means[11]};
    const float two_invstds[2 * C] = {invstds[0], invstds[1], invstds[2], invstds[3],
                                      invstds[8], invstds[9], invstds[10], invstds[11]};
    const float two_counts[2] = {counts[0], counts[2]};
    be->batchnorm_gather_stats(be, 2, C, two_means, two_invstds, two_counts, momentum, eps,
                               NULL, NULL, mean3, invstd3);
    CHECK(memcmp(mean2, mean3, sizeof mean2) == 0 && memcmp(invstd2, invstd3, sizeof invstd2) == 0,
          "a zero-count rank must not change the gathered statistics");
    for (int r = 0; r < WORLD; r++)
        free(xs[r]);

    /* no samples anywhere: the running statistics keep their values */
    const float none[WORLD] = {0, 0, 0};
    float rm_keep[C], rv_keep[C];
    memcpy(rm_keep, rm, sizeof rm);
    memcpy(rv_keep, rv, sizeof rv);
    be->batchnorm_gather_stats(be, WORLD, C, means, invstds, none, momentum, eps, rm, rv, mean2,
                               invstd2);
    CHECK(memcmp(rm, rm_keep, sizeof rm) == 0 && memcmp(rv, rv_keep, sizeof rv) == 0,
          "an empty global batch must leave the running statistics alone");

    /* eval forward: y = (x - running_mean) / sqrt(running_var + eps) * weight + bias */
    const int n = 2, hw = 3;
    float x[2 * C * 3], y[2 * C * 3], wt[C] = {1.0f, -2.0f, 0.5f, 3.0f},
                                     bi[C] = {0.0f, 1.0f, -1.0f, 0.25f};
    double want[2 * C * 3];
    test_fill_uniform(x, sizeof x / sizeof x[0], -2.0f, 2.0f, &seed);
    be->batchnorm_forward_eval(be, n, C, hw, DT_F32, x, rm, rv, eps, wt, bi, y);
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < C; ch++)
            for (int j = 0; j < hw; j++) {
                const size_t k = ((size_t)i * C + ch) * hw + j;
                want[k] = ((double)x[k] - rm[ch]) / sqrt((double)rv[ch] + eps) * wt[ch] + bi[ch];
            }
    /* a handful of fp32 operations per element */
    CHECK(test_max_err(y, want, sizeof y / sizeof y[0], 1e-6, 1e-5) <= 1.0,
          "batchnorm eval forward");
}

/* ------------------------------------------------------------------ relu */

struct relu_ctx {
    size_t n;
    double *x, *r;
};

static double relu_loss(const void *p)
{
    const struct relu_ctx *c = p;
    double s = 0.0;
    for (size_t i = 0; i < c->n; i++)
        s += (c->x[i] > 0.0 ? c->x[i] : 0.0) * c->r[i];
    return s;
}

static void test_relu(void)
{
    const size_t sizes[] = {1, 17, 1000, 100000}; /* the last one runs on both threads */
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        const size_t n = sizes[t];
        char shape[32];
        snprintf(shape, sizeof shape, "n%zu", n);
        double *x = dvec(n), *r = dvec(n), *g = dvec(n), *y = dvec(n);
        float *fx = fvec(n), *fr = fvec(n), *fy = fvec(n), *fdx = fvec(n);
        fill_pair(x, fx, n, -1, 1);
        fill_pair(r, fr, n, -1, 1);
        for (size_t i = 0; i < n; i++) /* keep away from the kink at 0 */
            if (fabs(x[i]) < 0.05) {
                fx[i] = x[i] < 0 ? -0.5f : 0.5f;
                x[i] = fx[i];
            }
        be->relu_forward(be, n, DT_F32, fx, fy);
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] > 0 ? x[i] : 0;
        CHECK(exact_equal(fy, y, n), "relu forward is exact [%s]", shape);
        struct relu_ctx ctx = {.n = n, .x = x, .r = r};
        if (n <= 1000) {
            test_fd_gradient(relu_loss, &ctx, x, n, FD_H, g);
        } else { /* L is a sum of per-element terms: difference each term alone, O(n) */
            for (size_t i = 0; i < n; i++) {
                const double hi = x[i] + FD_H, lo = x[i] - FD_H;
                g[i] = ((hi > 0 ? hi : 0) - (lo > 0 ? lo : 0)) * r[i] / (2 * FD_H);
            }
        }
        be->relu_backward(be, n, DT_F32, fy, fr, fdx);
        check_close("relu dx", shape, fdx, g, n);
        be->relu_backward(be, n, DT_F32, fy, fr, fr); /* dx may alias dy */
        CHECK(memcmp(fr, fdx, n * sizeof(float)) == 0, "relu backward in place [%s]", shape);
        free(x), free(r), free(g), free(y), free(fx), free(fr), free(fy), free(fdx);
    }
}

/* ------------------------------------------------------------------ maxpool */

struct pool_ctx {
    const struct pool2d_shape *ps;
    double *x, *r, *y;
};

static double pool_loss(const void *p)
{
    const struct pool_ctx *c = p;
    ref_maxpool(c->ps, c->x, c->y, NULL);
    return dot(c->y, c->r, (size_t)c->ps->n * c->ps->c * c->ps->p * c->ps->q);
}

static void pool_check(struct pool2d_shape ps)
{
    char shape[96];
    snprintf(shape, sizeof shape, "n%d c%d %dx%d k%d stride%d", ps.n, ps.c, ps.h, ps.w,
             ps.kernel, ps.stride);
    if (pool2d_shape_init(&ps) != 0) {
        CHECK(0, "test shape %s invalid: %s", shape, error_get());
        return;
    }
    const size_t nx = (size_t)ps.n * ps.c * ps.h * ps.w, ny = (size_t)ps.n * ps.c * ps.p * ps.q;
    double *x = dvec(nx), *r = dvec(ny), *y = dvec(ny), *g = dvec(nx);
    float *fx = fvec(nx), *fr = fvec(ny), *fy = fvec(ny), *fdx = fvec(nx);
    int32_t *am = calloc(ny, sizeof *am), *want_am = calloc(ny, sizeof *want_am);
    /* distinct values 0.01 apart (a shuffled ramp): no ties, no max within h of another */
    for (size_t i = 0; i < nx; i++)
        fx[i] = (float)(0.01 * ((double)i - (double)nx / 2));
    for (size_t i = nx; i > 1; i--) {
        const size_t j = (size_t)rnd_int((int)i);
        const float t = fx[i - 1];
        fx[i - 1] = fx[j];
        fx[j] = t;
    }
    for (size_t i = 0; i < nx; i++)
        x[i] = fx[i];
    fill_pair(r, fr, ny, -1, 1);

    be->maxpool2d_forward(be, &ps, DT_F32, fx, fy, am);
    ref_maxpool(&ps, x, y, want_am);
    CHECK(exact_equal(fy, y, ny), "maxpool forward is exact [%s]", shape);
    CHECK(memcmp(am, want_am, ny * sizeof *am) == 0, "maxpool argmax [%s]", shape);
    memset(fdx, 0xff, nx * sizeof(float)); /* NaN: the slot must overwrite everything */
    be->maxpool2d_backward(be, &ps, DT_F32, fr, am, fdx);
    if (nx <= 4096) {
        struct pool_ctx ctx = {.ps = &ps, .x = x, .r = r, .y = y};
        test_fd_gradient(pool_loss, &ctx, x, nx, FD_H, g);
        check_close("maxpool dx", shape, fdx, g, nx);
    } else if (ps.stride >= ps.kernel) {
        /* too big for O(n^2) differences: windows do not overlap, so dx is exactly r at
         * the reference argmax and zero elsewhere (the rule itself is checked above) */
        for (size_t pl = 0; pl < (size_t)ps.n * ps.c; pl++)
            for (size_t j = 0; j < (size_t)ps.p * ps.q; j++)
                g[pl * ps.h * ps.w + want_am[pl * ps.p * ps.q + j]] = r[pl * ps.p * ps.q + j];
        CHECK(exact_equal(fdx, g, nx), "maxpool dx is r at the argmax [%s]", shape);
    } else {
        CHECK(0, "test shape %s too big for finite differences", shape);
    }
    free(x), free(r), free(y), free(g), free(fx), free(fr), free(fy), free(fdx), free(am),
        free(want_am);
}

static void test_maxpool(void)
{
    static const struct pool2d_shape cases[] = {
        /* n  c  h  w  kernel stride */
        {1, 1, 4, 4, 2, 2, 0, 0},
        {2, 3, 7, 5, 2, 2, 0, 0},  /* odd sizes: floor mode drops the last row/column */
        {1, 2, 6, 6, 3, 2, 0, 0},  /* overlapping windows: dx accumulates */
        {2, 1, 5, 7, 3, 1, 0, 0},
        {1, 1, 5, 5, 1, 1, 0, 0},  /* kernel 1 */
        {4, 16, 28, 28, 2, 2, 0, 0}, /* the ConvNet's first pool: runs on both threads */
        {4, 16, 24, 24, 3, 3, 0, 0}, /* the generic window on both threads */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        pool_check(cases[i]);
    for (int i = 0; i < 3; i++) {
        struct pool2d_shape ps;
        do {
            ps = (struct pool2d_shape){.n = 1 + rnd_int(2), .c = 1 + rnd_int(3),
                                       .h = 1 + rnd_int(9), .w = 1 + rnd_int(9),
                                       .kernel = 1 + rnd_int(3), .stride = 1 + rnd_int(3)};
        } while (pool2d_shape_init(&ps) != 0);
        pool_check(ps);
    }

    /* ties take the first maximum in window order; a NaN is taken (PyTorch's CPU rule) */
    struct pool2d_shape ps = {.n = 1, .c = 3, .h = 2, .w = 2, .kernel = 2, .stride = 2};
    pool2d_shape_init(&ps);
    const float x[12] = {1, 1, 1, 1, /**/ 0, 2, 2, 1, /**/ 1, NAN, 3, 2};
    float y[3];
    int32_t am[3];
    be->maxpool2d_forward(be, &ps, DT_F32, x, y, am);
    CHECK(y[0] == 1 && am[0] == 0, "all-equal window: argmax %d, want 0", am[0]);
    CHECK(y[1] == 2 && am[1] == 1, "tie between 1 and 2: argmax %d, want 1", am[1]);
    CHECK(isnan(y[2]) && am[2] == 1, "NaN window: y %g argmax %d, want NaN at 1", y[2], am[2]);
}

/* ------------------------------------------------------------------ linear */

struct linear_ctx {
    int n, in, out;
    double *x, *w, *b, *r, *y;
};

static double linear_loss(const void *p)
{
    const struct linear_ctx *c = p;
    ref_linear(c->n, c->in, c->out, c->x, c->w, c->b, c->y);
    return dot(c->y, c->r, (size_t)c->n * c->out);
}

static void linear_check(int n, int in, int out)
{
    char shape[64];
    snprintf(shape, sizeof shape, "n%d in%d out%d", n, in, out);
    const size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
    double *x = dvec(nx), *w = dvec(nw), *b = dvec(out), *r = dvec(ny), *y = dvec(ny);
    double *gx = dvec(nx), *gw = dvec(nw), *gb = dvec(out);
    float *fx = fvec(nx), *fw = fvec(nw), *fb = fvec(out), *fr = fvec(ny), *fy = fvec(ny);
    float *fdx = fvec(nx), *fdw = fvec(nw), *fdb = fvec(out);
    fill_pair(x, fx, nx, -1, 1);
    fill_pair(w, fw, nw, -1, 1);
    fill_pair(b, fb, out, -1, 1);
    fill_pair(r, fr, ny, -1, 1);
    be->linear_forward(be, n, in, out, DT_F32, fx, fw, fb, fy);
    ref_linear(n, in, out, x, w, b, y);
    check_close("linear forward", shape, fy, y, ny);
    be->linear_forward(be, n, in, out, DT_F32, fx, fw, NULL, fy);
    ref_linear(n, in, out, x, w, NULL, y);
    check_close("linear forward, no bias", shape, fy, y, ny);
    struct linear_ctx ctx = {.n = n, .in = in, .out = out, .x = x, .w = w, .b = b, .r = r,
                             .y = y};
    test_fd_gradient(linear_loss, &ctx, x, nx, FD_H, gx);
    test_fd_gradient(linear_loss, &ctx, w, nw, FD_H, gw);
    test_fd_gradient(linear_loss, &ctx, b, out, FD_H, gb);
    be->linear_backward(be, n, in, out, DT_F32, fx, fw, fr, fdx, fdw, fdb);
    check_close("linear dx", shape, fdx, gx, nx);
    check_close("linear dw", shape, fdw, gw, nw);
    check_close("linear db", shape, fdb, gb, out);
    free(x), free(w), free(b), free(r), free(y), free(gx), free(gw), free(gb);
    free(fx), free(fw), free(fb), free(fr), free(fy), free(fdx), free(fdw), free(fdb);
}

static void test_linear(void)
{
    linear_check(1, 1, 1);
    linear_check(3, 5, 4);
    linear_check(7, 13, 3);
    linear_check(32, 49, 10);
    for (int i = 0; i < 3; i++)
        linear_check(1 + rnd_int(8), 1 + rnd_int(30), 1 + rnd_int(12));
}

/* ------------------------------------------------------------------ softmax cross-entropy */

struct xent_ctx {
    int n, c;
    double *logits;
    const int32_t *labels;
};

static double xent_loss(const void *p)
{
    const struct xent_ctx *x = p;
    return ref_xent(x->n, x->c, x->logits, x->labels);
}

static void test_softmax_xent(void)
{
    const int shapes[][2] = {{1, 2}, {4, 5}, {3, 10}, {32, 10}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const int n = shapes[t][0], c = shapes[t][1];
        char shape[32];
        snprintf(shape, sizeof shape, "n%d c%d", n, c);
        const size_t m = (size_t)n * c;
        double *lg = dvec(m), *g = dvec(m);
        float *flg = fvec(m), *fd = fvec(m);
        int32_t *lab = calloc((size_t)n, sizeof *lab);
        fill_pair(lg, flg, m, -3, 3);
        for (int i = 0; i < n; i++)
            lab[i] = rnd_int(c);
        struct xent_ctx ctx = {.n = n, .c = c, .logits = lg, .labels = lab};
        const double want = ref_xent(n, c, lg, lab);
        test_fd_gradient(xent_loss, &ctx, lg, m, FD_H, g);
        const float loss = be->softmax_xent(be, n, c, flg, lab, fd);
        /* fp32 exp/log of O(1) values */
        CHECK(fabs(loss - want) <= 1e-5 * (1.0 + fabs(want)), "xent loss %.9g, want %.9g [%s]",
              loss, want, shape);
        check_close("xent dlogits", shape, fd, g, m);
        CHECK(be->softmax_xent(be, n, c, flg, lab, NULL) == loss,
              "xent loss without dlogits differs [%s]", shape);
        free(lg), free(g), free(flg), free(fd), free(lab);
    }

    /* known case: rows [1,2,3] label 2, [1000,0,-1000] label 1 (naive exp overflows),
     * [5,5,1] label 1 (tie in the logits) */
    const float logits[9] = {1, 2, 3, 1000, 0, -1000, 5, 5, 1};
    const int32_t labels[3] = {2, 1, 1};
    float d[9];
    const double l0 = log(1.0 + exp(-1.0) + exp(-2.0)); /* log(e+e^2+e^3) - 3 */
    const double l1 = 1000.0;                           /* 1000 + log(1 + e^-1000 + ...) - 0 */
    const double l2 = log(2.0 + exp(-4.0));             /* log(2e^5 + e) - 5 */
    const double want_loss = (l0 + l1 + l2) / 3.0;
    const float loss = be->softmax_xent(be, 3, 3, logits, labels, d);
    /* a mean of order 300 in fp32: a few ulps */
    CHECK(fabs(loss - want_loss) <= 1e-4, "known loss %.9g, want %.9g", loss, want_loss);
    const double s0 = exp(1.0) + exp(2.0) + exp(3.0), s2 = 2.0 + exp(-4.0);
    const double want_d[9] = {exp(1.0) / s0 / 3, exp(2.0) / s0 / 3, (exp(3.0) / s0 - 1) / 3,
                              1.0 / 3, -1.0 / 3, 0.0,
                              1.0 / s2 / 3, (1.0 / s2 - 1) / 3, exp(-4.0) / s2 / 3};
    /* softmax values in [0,1] divided by 3: fp32 rounding ~1e-7 */
    CHECK(test_max_err(d, want_d, 9, 1e-6, 0.0) <= 1.0, "known dlogits");

    CHECK(be->count_correct(be, 3, 3, logits, labels) == 1,
          "count_correct: only row 0 is right (row 2's tie goes to the first maximum, 0)");
    const int32_t first[3] = {2, 0, 0};
    CHECK(be->count_correct(be, 3, 3, logits, first) == 3,
          "count_correct with the first maximum as label for the tie");

    const int32_t bad[3] = {2, 3, 1}; /* 3 is out of range for c = 3 */
    CHECK(isnan(be->softmax_xent(be, 3, 3, logits, bad, NULL)),
          "an out-of-range label must make the loss NaN");
}

/* ------------------------------------------------------------------ sgd */

/* every element of a vector long enough to run on both threads gets the same case */
static void sgd_case(const char *what, float p0, float g, float buf0, float lr, float mom,
                     float damp, float wd, int nesterov, int first, double want_p,
                     double want_buf)
{
    enum { N = 50000 };
    float *p = fvec(N), *gr = fvec(N), *buf = mom != 0.0f ? fvec(N) : NULL;
    for (int i = 0; i < N; i++) {
        p[i] = p0;
        gr[i] = g;
        if (buf)
            buf[i] = buf0;
    }
    be->sgd_step(be, N, p, gr, buf, lr, mom, damp, wd, nesterov, first);
    int ok = 1;
    for (int i = 0; i < N; i++) {
        /* three or four fp32 operations on values of order 1 */
        ok &= fabs(p[i] - want_p) <= 1e-6;
        if (buf)
            ok &= fabs(buf[i] - want_buf) <= 1e-6;
    }
    CHECK(ok, "sgd %s: p %.9g (want %.9g), buf %.9g (want %.9g)", what, p[0], want_p,
          buf ? buf[0] : 0.0, want_buf);
    free(p), free(gr), free(buf);
}

static void test_sgd(void)
{
    /* p -= lr * g */
    sgd_case("plain", 1.0f, 0.5f, 0, 0.1f, 0, 0, 0, 0, 0, 0.95, 0);
    /* d_p = 0.5 + 0.1 * 2 = 0.7; p = 2 - 0.07 */
    sgd_case("weight decay", 2.0f, 0.5f, 0, 0.1f, 0, 0, 0.1f, 0, 0, 1.93, 0);
    /* first step: buf = d_p = 0.5 (no dampening on the first step); p = 1 - 0.05 */
    sgd_case("momentum first", 1.0f, 0.5f, 7.0f, 0.1f, 0.9f, 0.5f, 0, 0, 1, 0.95, 0.5);
    /* buf = 0.9 * 0.5 + (1 - 0.5) * 0.25 = 0.575; p = 0.95 - 0.0575 */
    sgd_case("momentum dampening", 0.95f, 0.25f, 0.5f, 0.1f, 0.9f, 0.5f, 0, 0, 0, 0.8925, 0.575);
    /* first: buf = 0.5, d_p = 0.5 + 0.9 * 0.5 = 0.95; p = 1 - 0.095 */
    sgd_case("nesterov first", 1.0f, 0.5f, 0, 0.1f, 0.9f, 0, 0, 1, 1, 0.905, 0.5);
    /* buf = 0.9 * 0.5 + 0.25 = 0.7, d_p = 0.25 + 0.63 = 0.88; p = 0.905 - 0.088 */
    sgd_case("nesterov", 0.905f, 0.25f, 0.5f, 0.1f, 0.9f, 0, 0, 1, 0, 0.817, 0.7);
    /* d_p = 0.5 + 0.01 * 1 = 0.51; buf = 0.9 * 0.2 + 0.51 = 0.69; p = 1 - 0.069 */
    sgd_case("momentum weight decay", 1.0f, 0.5f, 0.2f, 0.1f, 0.9f, 0, 0.01f, 0, 0, 0.931, 0.69);
}

/* ------------------------------------------------------------------ mixed precision */

/* the slots on an array long enough to run on both threads; the per-element math itself
 * (kernel_math.h) is checked on known values by test_amp */
static void test_amp_slots(void)
{
    enum { N = 100000 };
    float *x = fvec(N), *y = fvec(N), *z = fvec(N);
    test_fill_uniform(x, N, -70000.0f, 70000.0f, &seed); /* some overflow fp16 */
    for (int dt = AMP_OFF; dt <= AMP_BF16; dt++) {
        be->round_amp(be, N, (enum amp_dtype)dt, x, y);
        int same = 1;
        for (int i = 0; i < N; i++) {
            const float want = km_round_amp(x[i], dt);
            same &= memcmp(&y[i], &want, sizeof want) == 0;
        }
        CHECK(same, "round_amp dtype %d differs from km_round_amp", dt);
        /* cast to dt is the same rounding (the CPU stores a half type as fp32); back to
         * fp32 it copies the values */
        be->cast(be, N, DT_F32, x, (enum dtype)dt, z);
        CHECK(memcmp(y, z, N * sizeof(float)) == 0, "cast fp32 -> dtype %d is not round_amp", dt);
        be->cast(be, N, (enum dtype)dt, y, DT_F32, z);
        CHECK(memcmp(y, z, N * sizeof(float)) == 0, "cast dtype %d -> fp32 is not a copy", dt);
    }
    /* fp16 -> bf16 rounds the fp16 values to bf16 */
    be->round_amp(be, N, AMP_F16, x, y);
    be->cast(be, N, DT_F16, y, DT_BF16, z);
    int same = 1;
    for (int i = 0; i < N; i++)
        same &= memcmp(&z[i], &(float){km_round_amp(y[i], AMP_BF16)}, sizeof(float)) == 0;
    CHECK(same, "cast fp16 -> bf16 differs from rounding the fp16 values to bf16");
    CHECK(be->dtype_size(be, DT_F32) == 4 && be->dtype_size(be, DT_F16) == 4 &&
              be->dtype_size(be, DT_BF16) == 4,
          "the CPU backend stores every type as fp32");

    /* unscale: three tensors in one call, the flag over all of them */
    float *t2 = fvec(7), *t3 = fvec(N / 2), flag = -1.0f;
    float *grads[3] = {x, t2, t3};
    const size_t numels[3] = {N, 7, N / 2};
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 1000) - 500.0f;
    for (int i = 0; i < 7; i++)
        t2[i] = (float)i;
    for (int i = 0; i < N / 2; i++)
        t3[i] = -(float)(i % 77);
    be->unscale(be, 3, grads, numels, 0.5f, &flag);
    CHECK(flag == 0.0f, "finite gradients flagged: %g", (double)flag);
    int halved = 1;
    for (int i = 0; i < N; i++)
        halved &= x[i] == 0.5f * ((float)(i % 1000) - 500.0f);
    for (int i = 0; i < 7; i++)
        halved &= t2[i] == 0.5f * (float)i;
    for (int i = 0; i < N / 2; i++)
        halved &= t3[i] == -0.5f * (float)(i % 77);
    CHECK(halved, "unscale must multiply every tensor by inv_scale");
    t3[N / 2 - 1] = INFINITY; /* the last tensor, in the second thread's range */
    be->unscale(be, 3, grads, numels, 0.5f, &flag);
    CHECK(flag == 1.0f, "inf in the last tensor's last element not flagged: %g", (double)flag);
    t3[N / 2 - 1] = 0.0f;
    t2[3] = NAN;
    be->unscale(be, 3, grads, numels, 1.0f, &flag);
    CHECK(flag == 1.0f, "nan in a short middle tensor not flagged: %g", (double)flag);
    be->unscale(be, 0, grads, numels, 1.0f, &flag);
    CHECK(flag == 0.0f, "no tensors: flag %g, want 0", (double)flag);
    free(x), free(y), free(z), free(t2), free(t3);
}

/* ------------------------------------------------------------------ half types */

/* a (n) equals b (n) rounded to dt, element by element (== : the sign of a zero may differ
 * where the fp32 path added a zero bias) */
static int equals_rounded(const float *a, const float *b, size_t n, enum dtype dt)
{
    for (size_t i = 0; i < n; i++)
        if (!(a[i] == km_round_amp(b[i], dt)))
            return 0;
    return 1;
}

static void fill_half(float *x, size_t n, float lo, float hi, enum dtype dt)
{
    test_fill_uniform(x, n, lo, hi, &seed);
    for (size_t i = 0; i < n; i++)
        x[i] = km_round_amp(x[i], dt);
}

/* The CPU's emulation of half tensors: on inputs of dt's values, every op computes in fp32
 * (the same code as the fp32 op) and rounds its outputs once to dt -- except the
 * convolution's bias, added to the already rounded convolution and rounded again (as
 * PyTorch's cuDNN path).  Exact comparisons against the fp32 ops. */
static void test_half_ops(void)
{
    for (int d = DT_F16; d <= DT_BF16; d++) {
        const enum dtype dt = (enum dtype)d;
        const char *name = dt == DT_F16 ? "fp16" : "bf16";
        /* convolution, with a batch the backend cuts into chunks over both threads */
        struct conv2d_shape cs = {.n = 9, .c = 3, .h = 11, .w = 11, .k = 5, .r = 3, .s = 3,
                                  .pad = 1, .stride = 1};
        CHECK(conv2d_shape_init(&cs) == 0, "shape: %s", error_get());
        const size_t nx = (size_t)cs.n * cs.c * cs.h * cs.w, nw = (size_t)cs.k * cs.c * 9;
        const size_t pq = (size_t)cs.p * cs.q, ny = (size_t)cs.n * cs.k * pq;
        float *x = fvec(nx), *w = fvec(nw), *b = fvec(cs.k), *dy = fvec(ny);
        float *y = fvec(ny), *y32 = fvec(ny), *dx = fvec(nx), *dx32 = fvec(nx);
        float *dw = fvec(nw), *dw32 = fvec(nw), *db = fvec(cs.k), *db32 = fvec(cs.k);
        fill_half(x, nx, -1, 1, dt);
        fill_half(w, nw, -1, 1, dt);
        fill_half(b, cs.k, -1, 1, dt);
        fill_half(dy, ny, -1, 1, dt);
        be->conv2d_forward(be, &cs, dt, x, w, NULL, y);
        be->conv2d_forward(be, &cs, DT_F32, x, w, NULL, y32);
        CHECK(equals_rounded(y, y32, ny, dt), "conv2d_forward %s without bias", name);
        be->conv2d_forward(be, &cs, dt, x, w, b, y);
        for (size_t i = 0; i < ny; i++) /* round(round(conv) + b) */
            y32[i] = km_round_amp(y32[i], dt) + b[(i / pq) % (size_t)cs.k];
        CHECK(equals_rounded(y, y32, ny, dt), "conv2d_forward %s with bias", name);
        be->conv2d_backward(be, &cs, dt, x, w, dy, dx, dw, db);
        be->conv2d_backward(be, &cs, DT_F32, x, w, dy, dx32, dw32, db32);
        CHECK(equals_rounded(dx, dx32, nx, dt) && equals_rounded(dw, dw32, nw, dt) &&
                  equals_rounded(db, db32, cs.k, dt),
              "conv2d_backward %s", name);

        /* batch norm: statistics and sums from the same values; elementwise outputs rounded */
        const int n = 6, c = 4, hw = 1500; /* above the size that splits over the threads */
        const size_t nb = (size_t)n * c * hw;
        const float count_f = (float)(n * hw);
        float *bx = fvec(nb), *bdy = fvec(nb), *by = fvec(nb), *by32 = fvec(nb);
        float stats[8][4], wt[4] = {1.5f, -0.5f, 0.25f, 2.0f}, bi[4] = {0.1f, 0.2f, -0.3f, 0};
        fill_half(bx, nb, -3, 5, dt);
        fill_half(bdy, nb, -1, 1, dt);
        be->batchnorm_stats(be, n, c, hw, dt, bx, 1e-5f, stats[0], stats[1]);
        be->batchnorm_stats(be, n, c, hw, DT_F32, bx, 1e-5f, stats[2], stats[3]);
        CHECK(memcmp(stats[0], stats[2], sizeof stats[0]) == 0 &&
                  memcmp(stats[1], stats[3], sizeof stats[1]) == 0,
              "batchnorm_stats %s: fp32 statistics of the same values", name);
        be->batchnorm_elemt(be, n, c, hw, dt, bx, stats[0], stats[1], wt, bi, by);
        be->batchnorm_elemt(be, n, c, hw, DT_F32, bx, stats[0], stats[1], wt, bi, by32);
        CHECK(equals_rounded(by, by32, nb, dt), "batchnorm_elemt %s", name);
        const float rv[4] = {0.5f, 2.0f, 1.0f, 3.0f};
        be->batchnorm_forward_eval(be, n, c, hw, dt, bx, stats[0], rv, 1e-5f, wt, bi, by);
        be->batchnorm_forward_eval(be, n, c, hw, DT_F32, bx, stats[0], rv, 1e-5f, wt, bi, by32);
        CHECK(equals_rounded(by, by32, nb, dt), "batchnorm_forward_eval %s", name);
        be->batchnorm_backward_reduce(be, n, c, hw, dt, bdy, bx, stats[0], stats[1], stats[4],
                                      stats[5], NULL, NULL);
        be->batchnorm_backward_reduce(be, n, c, hw, DT_F32, bdy, bx, stats[0], stats[1],
                                      stats[6], stats[7], NULL, NULL);
        CHECK(memcmp(stats[4], stats[6], sizeof stats[4]) == 0 &&
                  memcmp(stats[5], stats[7], sizeof stats[5]) == 0,
              "batchnorm_backward_reduce %s: fp32 sums of the same values", name);
        be->batchnorm_backward_elemt(be, n, c, hw, dt, bdy, bx, stats[0], stats[1], wt,
                                     stats[4], stats[5], &count_f, by);
        be->batchnorm_backward_elemt(be, n, c, hw, DT_F32, bdy, bx, stats[0], stats[1], wt,
                                     stats[4], stats[5], &count_f, by32);
        CHECK(equals_rounded(by, by32, nb, dt), "batchnorm_backward_elemt %s", name);

        /* ReLU selects: no rounding; max pooling with overlapping windows sums in fp32 */
        be->relu_forward(be, nb, dt, bx, by);
        be->relu_forward(be, nb, DT_F32, bx, by32);
        CHECK(memcmp(by, by32, nb * sizeof(float)) == 0, "relu_forward %s", name);
        struct pool2d_shape ps = {.n = 3, .c = 5, .h = 9, .w = 9, .kernel = 3, .stride = 2};
        CHECK(pool2d_shape_init(&ps) == 0, "pool shape: %s", error_get());
        const size_t np = (size_t)ps.n * ps.c * ps.h * ps.w, nq = (size_t)ps.n * ps.c * ps.p * ps.q;
        int32_t *am = calloc(nq, sizeof *am);
        be->maxpool2d_forward(be, &ps, dt, bx, by, am);
        be->maxpool2d_backward(be, &ps, dt, bdy, am, bx);
        be->maxpool2d_backward(be, &ps, DT_F32, bdy, am, by32);
        CHECK(equals_rounded(bx, by32, np, dt), "maxpool2d_backward %s (overlapping windows)",
              name);
        free(am);

        /* linear: one rounding of the fp32 GEMM with its bias, and of each gradient */
        const int ln = 9, in = 300, out = 7;
        float *lx = fvec((size_t)ln * in), *lw = fvec((size_t)out * in), *lb = fvec(out);
        float *ly = fvec((size_t)ln * out), *ly32 = fvec((size_t)ln * out);
        float *ldx = fvec((size_t)ln * in), *ldx32 = fvec((size_t)ln * in);
        float *ldw = fvec((size_t)out * in), *ldw32 = fvec((size_t)out * in);
        float *ldb = fvec(out), *ldb32 = fvec(out);
        fill_half(lx, (size_t)ln * in, -1, 1, dt);
        fill_half(lw, (size_t)out * in, -1, 1, dt);
        fill_half(lb, out, -1, 1, dt);
        be->linear_forward(be, ln, in, out, dt, lx, lw, lb, ly);
        be->linear_forward(be, ln, in, out, DT_F32, lx, lw, lb, ly32);
        CHECK(equals_rounded(ly, ly32, (size_t)ln * out, dt), "linear_forward %s", name);
        be->linear_backward(be, ln, in, out, dt, lx, lw, ly, ldx, ldw, ldb);
        be->linear_backward(be, ln, in, out, DT_F32, lx, lw, ly, ldx32, ldw32, ldb32);
        CHECK(equals_rounded(ldx, ldx32, (size_t)ln * in, dt) &&
                  equals_rounded(ldw, ldw32, (size_t)out * in, dt) &&
                  equals_rounded(ldb, ldb32, out, dt),
              "linear_backward %s", name);

        free(x), free(w), free(b), free(dy), free(y), free(y32), free(dx), free(dx32);
        free(dw), free(dw32), free(db), free(db32), free(bx), free(bdy), free(by), free(by32);
        free(lx), free(lw), free(lb), free(ly), free(ly32), free(ldx), free(ldx32);
        free(ldw), free(ldw32), free(ldb), free(ldb32);
    }
}

/* ------------------------------------------------------------------ timing */

/* The ConvNet's second convolution at batch 32: informational only (shared machines and
 * sanitizer builds make any time meaningless as an assertion). */
static void time_conv2(void)
{
    struct conv2d_shape cs = {.n = 32, .c = 16, .h = 14, .w = 14, .k = 32, .r = 5, .s = 5,
                              .pad = 2, .stride = 1};
    conv2d_shape_init(&cs);
    const size_t nx = (size_t)cs.n * cs.c * cs.h * cs.w, nw = (size_t)cs.k * cs.c * 25,
                 ny = (size_t)cs.n * cs.k * cs.p * cs.q;
    float *x = fvec(nx), *w = fvec(nw), *b = fvec(cs.k), *y = fvec(ny), *dx = fvec(nx),
          *dw = fvec(nw), *db = fvec(cs.k);
    test_fill_uniform(x, nx, -1, 1, &seed);
    test_fill_uniform(w, nw, -0.05f, 0.05f, &seed);
    be->conv2d_forward(be, &cs, DT_F32, x, w, b, y); /* warm-up: grows the workspace */
    be->conv2d_backward(be, &cs, DT_F32, x, w, y, dx, dw, db);
    const int iters = 100;
    const double t0 = clock_now_s();
    for (int i = 0; i < iters; i++) {
        be->conv2d_forward(be, &cs, DT_F32, x, w, b, y);
        be->conv2d_backward(be, &cs, DT_F32, x, w, y, dx, dw, db);
    }
    const double per = (clock_now_s() - t0) / iters;
    const double flop = 3.0 * 2.0 * cs.n * cs.k * cs.p * cs.q * cs.c * cs.r * cs.s;
    printf("note: conv 16->32 5x5 pad 2 on 14x14, n=32, forward+backward (dx,dw,db), 2 threads: "
           "%.3f ms/iter, %.0f images/s, %.1f GFLOP/s (informational, not asserted)\n",
           per * 1e3, cs.n / per, flop / per * 1e-9);
    free(x), free(w), free(b), free(y), free(dx), free(dw), free(db);
}

int main(void)
{
    be = backend_cpu_create(2); /* two threads: the parallel paths run even here */
    CHECK(be != NULL, "backend_cpu_create: %s", error_get());
    if (!be)
        return test_finish();
    CHECK(strcmp(be->name, "cpu") == 0, "name %s", be->name);
    CHECK(backend_cpu_create(-1) == NULL && error_get()[0] != '\0',
          "negative thread count must fail with a message");

    test_shapes();
    test_memory();
    test_conv2d();
    test_conv2d_chunked(be);
    struct backend *one = backend_cpu_create(1), *dflt = backend_cpu_create(0);
    CHECK(one && dflt, "backend_cpu_create(1), (0): %s", error_get());
    if (one) {
        test_conv2d_chunked(one); /* the same chunks on the caller's thread alone */
        one->destroy(one);
    }
    if (dflt)
        dflt->destroy(dflt);
    test_batchnorm();
    test_batchnorm_gather();
    test_relu();
    test_maxpool();
    test_linear();
    test_softmax_xent();
    test_sgd();
    test_amp_slots();
    test_half_ops();
    time_conv2();
    be->destroy(be);
    return test_finish();
}
