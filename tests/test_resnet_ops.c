/* test_resnet_ops.c — ResNet18's pieces on the CPU backend against finite differences.
 *
 * (1) The residual block (trainer/nn/resblock.c), with a 1x1 stride-2 projection shortcut
 *     and with the identity: its input gradient and every parameter's gradient against
 *     central differences of a double-precision reference of the block in training mode
 *     (conv, batch norm with batch statistics, ReLU, conv, batch norm, + shortcut, ReLU).
 * (2) The 1x1 stride-2 convolution (the projection shortcut, an even and an odd input):
 *     dx and dw against central differences.
 * (3) Adaptive average pooling: forward against a double reference, backward against
 *     central differences, for (1,1) of 4x4 (ResNet18's), uneven overlapping windows and
 *     more outputs than inputs.
 * (4) The half types: the residual add and adaptive average pooling in fp16/bf16 are the
 *     fp32 op with its output rounded once, exactly (the CPU's emulation of autocast).
 *
 * L = sum(out * r) for a random r, so dL/d(out) = r is what the float backward gets; the
 * central difference (h = 1e-6, in double) is off by O(h^2) plus ~1e-16 |L| / h.  The
 * float backward's own rounding is what the tolerance covers: 2e-5 of the largest
 * reference gradient plus 2e-4 relative (tests/test_ops.c's limits), for the block too
 * (its two batch norms over 18 values per channel cost less than that here): ~10^4x below
 * the O(1) error of a wrong index, sign or missing term. */
#include "backend/backend.h"
#include "common/error.h"
#include "common/rng.h"
#include "backend/kernel_math.h"
#include "nn/params.h"
#include "nn/resblock.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H 1e-6

static uint64_t seed = 0x7f4a7c159e3779b9ULL;
static struct backend *be;

static double *dvec(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static float *fvec(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static void fill_pair(double *d, float *f, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(lo + (hi - lo) * test_uniform(&seed));
        d[i] = f[i];
    }
}

static double max_abs(const double *a, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

static void check_close(const char *what, const float *a, const double *b, size_t n,
                        double frac, double rtol)
{
    const double scale = max_abs(b, n);
    const double err = test_max_err(a, b, n, frac * scale + 1e-9, rtol);
    CHECK(err <= 1.0, "%s: worst error %.3g of the tolerance (largest |ref| %.3g)", what, err,
          scale);
}

/* ------------------------------------------------------------------ double references */

struct dshape {
    int n, c, h, w, k, r, pad, stride, p, q;
};

static void ref_conv(const struct dshape *s, const double *x, const double *wt, double *y)
{
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < s->k; k++)
            for (int p = 0; p < s->p; p++)
                for (int q = 0; q < s->q; q++) {
                    double acc = 0.0;
                    for (int c = 0; c < s->c; c++)
                        for (int a = 0; a < s->r; a++)
                            for (int b = 0; b < s->r; b++) {
                                const int ih = p * s->stride - s->pad + a;
                                const int iw = q * s->stride - s->pad + b;
                                if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w)
                                    continue;
                                acc += x[(((size_t)i * s->c + c) * s->h + ih) * s->w + iw] *
                                       wt[(((size_t)k * s->c + c) * s->r + a) * s->r + b];
                            }
                    y[(((size_t)i * s->k + k) * s->p + p) * s->q + q] = acc;
                }
}

/* training-mode batch norm of x (n,c,hw) in place: batch mean, biased variance, eps 1e-5 */
static void ref_bn(int n, int c, int hw, double *x, const double *wt, const double *bias)
{
    for (int ch = 0; ch < c; ch++) {
        double s = 0.0, ss = 0.0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++)
                s += x[((size_t)i * c + ch) * hw + j];
        const double mean = s / ((double)n * hw);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                const double d = x[((size_t)i * c + ch) * hw + j] - mean;
                ss += d * d;
            }
        const double invstd = 1.0 / sqrt(ss / ((double)n * hw) + 1e-5);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                double *v = &x[((size_t)i * c + ch) * hw + j];
                *v = (*v - mean) * invstd * wt[ch] + bias[ch];
            }
    }
}

static void ref_relu(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] > 0.0 ? x[i] : 0.0;
}

/* ------------------------------------------------------------------ (1) residual block */

/* the block's parameters in resblock order: conv1 w, bn1 w, b, conv2 w, bn2 w, b,
 * [shortcut conv w, bn w, b] */
#define BLOCK_TENSORS 9

struct block_ref {
    int n, in, out, stride, h, w, p, q, projection;
    double *x, *r;
    double *t[BLOCK_TENSORS];
    size_t len[BLOCK_TENSORS];
};

static double block_loss(const void *ctx)
{
    const struct block_ref *b = ctx;
    const struct dshape s1 = {b->n, b->in, b->h, b->w, b->out, 3, 1, b->stride, b->p, b->q};
    const struct dshape s2 = {b->n, b->out, b->p, b->q, b->out, 3, 1, 1, b->p, b->q};
    const struct dshape ss = {b->n, b->in, b->h, b->w, b->out, 1, 0, b->stride, b->p, b->q};
    const int pq = b->p * b->q;
    const size_t m = (size_t)b->n * b->out * pq;
    double *a = dvec(m), *y = dvec(m), *sc = dvec(m);
    ref_conv(&s1, b->x, b->t[0], a);
    ref_bn(b->n, b->out, pq, a, b->t[1], b->t[2]);
    ref_relu(a, m);
    ref_conv(&s2, a, b->t[3], y);
    ref_bn(b->n, b->out, pq, y, b->t[4], b->t[5]);
    if (b->projection) {
        ref_conv(&ss, b->x, b->t[6], sc);
        ref_bn(b->n, b->out, pq, sc, b->t[7], b->t[8]);
    } else {
        memcpy(sc, b->x, m * sizeof *sc);
    }
    double loss = 0.0;
    for (size_t i = 0; i < m; i++) {
        const double v = y[i] + sc[i];
        loss += (v > 0.0 ? v : 0.0) * b->r[i];
    }
    free(a);
    free(y);
    free(sc);
    return loss;
}

static void block_check(int n, int in, int out, int stride, int hw)
{
    char shape[96];
    snprintf(shape, sizeof shape, "block %d->%d stride %d on (%d,%d,%d,%d)", in, out, stride, n,
             in, hw, hw);
    struct param_table t;
    params_init(&t, be);
    struct rng rng;
    rng_seed(&rng, 5);
    struct resblock blk;
    CHECK(resblock_init(&blk, &t, "conv3.0", in, out, stride, &rng) == 0, "%s: %s", shape,
          error_get());
    struct block_ref b = {.n = n, .in = in, .out = out, .stride = stride, .h = hw, .w = hw,
                          .projection = blk.projection};
    b.p = b.q = (hw + 2 - 3) / stride + 1;
    CHECK(blk.projection == (stride != 1 || in != out), "%s: projection %d", shape,
          blk.projection);
    /* the block's trainable tensors in parameter order, random values (batch-norm weights
     * away from 0 so every channel matters) */
    int k = 0;
    for (int i = 0; i < t.count; i++) {
        struct param *p = t.items[i];
        if (p->kind != PARAM_TRAINABLE)
            continue;
        const int is_bn = p->ndim == 1;
        float *f = fvec(p->numel);
        b.len[k] = p->numel;
        b.t[k] = dvec(p->numel);
        fill_pair(b.t[k], f, p->numel, is_bn ? 0.5 : -0.5, is_bn ? 1.5 : 0.5);
        if (is_bn && strstr(p->name, ".bias"))
            for (size_t j = 0; j < p->numel; j++)
                b.t[k][j] = f[j] = f[j] - 1.0f; /* biases in [-0.5, 0.5) */
        be->upload(be, p->data, f, p->numel * sizeof *f);
        free(f);
        k++;
    }
    CHECK(k == (blk.projection ? 9 : 6), "%s: %d trainable tensors", shape, k);
    const size_t nx = (size_t)n * in * hw * hw, ny = (size_t)n * out * b.p * b.q;
    float *x = fvec(nx), *r = fvec(ny), *dy = fvec(ny), *dx = fvec(nx);
    const size_t most = nx > ny ? nx : ny;
    float *s0 = fvec(most), *s1 = fvec(most);
    b.x = dvec(nx);
    b.r = dvec(ny);
    fill_pair(b.x, x, nx, -1.0, 1.0);
    fill_pair(b.r, r, ny, -1.0, 1.0);
    const void *y;
    CHECK(resblock_forward(be, &blk, x, n, hw, hw, 1, &y) == 0, "%s forward: %s", shape,
          error_get());
    /* the forward against the reference: sum(y * r) = L */
    double l_float = 0.0;
    for (size_t i = 0; i < ny; i++)
        l_float += (double)((const float *)y)[i] * b.r[i];
    const double l_ref = block_loss(&b);
    CHECK(fabs(l_float - l_ref) <= 1e-4 * fabs(l_ref) + 1e-4, "%s: forward loss %.9g vs %.9g",
          shape, l_float, l_ref);
    memcpy(dy, r, ny * sizeof *dy);
    CHECK(resblock_backward(be, &blk, dy, dx, s0, s1, NULL) == 0, "%s backward: %s", shape,
          error_get());
    char what[256];
    double *g = dvec(nx);
    test_fd_gradient(block_loss, &b, b.x, nx, FD_H, g);
    snprintf(what, sizeof what, "%s dx", shape);
    check_close(what, dx, g, nx, 2e-5, 2e-4);
    free(g);
    k = 0;
    for (int i = 0; i < t.count; i++) {
        struct param *p = t.items[i];
        if (p->kind != PARAM_TRAINABLE)
            continue;
        g = dvec(p->numel);
        test_fd_gradient(block_loss, &b, b.t[k], p->numel, FD_H, g);
        snprintf(what, sizeof what, "%s d %s", shape, p->name);
        check_close(what, p->grad, g, p->numel, 2e-5, 2e-4);
        free(g);
        k++;
    }
    for (int i = 0; i < k; i++)
        free(b.t[i]);
    resblock_free(be, &blk);
    params_free(&t);
    free(x), free(r), free(dy), free(dx), free(s0), free(s1), free(b.x), free(b.r);
}

/* ------------------------------------------------------------------ (2) 1x1 stride 2 */

struct conv_ref {
    struct dshape s;
    double *x, *w, *r;
};

static double conv_loss(const void *ctx)
{
    const struct conv_ref *c = ctx;
    const size_t ny = (size_t)c->s.n * c->s.k * c->s.p * c->s.q;
    double *y = dvec(ny);
    ref_conv(&c->s, c->x, c->w, y);
    double l = 0.0;
    for (size_t i = 0; i < ny; i++)
        l += y[i] * c->r[i];
    free(y);
    return l;
}

static void conv1x1_check(int n, int c, int hw, int k)
{
    struct conv2d_shape cs = {.n = n, .c = c, .h = hw, .w = hw, .k = k, .r = 1, .s = 1,
                              .pad = 0, .stride = 2};
    CHECK(conv2d_shape_init(&cs) == 0, "shape: %s", error_get());
    CHECK(cs.p == (hw - 1) / 2 + 1, "1x1 stride 2 on %d: p %d", hw, cs.p);
    struct conv_ref ref = {.s = {n, c, hw, hw, k, 1, 0, 2, cs.p, cs.q}};
    const size_t nx = (size_t)n * c * hw * hw, nw = (size_t)k * c;
    const size_t ny = (size_t)n * k * cs.p * cs.q;
    float *x = fvec(nx), *w = fvec(nw), *r = fvec(ny), *y = fvec(ny);
    float *dx = fvec(nx), *dw = fvec(nw);
    ref.x = dvec(nx), ref.w = dvec(nw), ref.r = dvec(ny);
    fill_pair(ref.x, x, nx, -1.0, 1.0);
    fill_pair(ref.w, w, nw, -1.0, 1.0);
    fill_pair(ref.r, r, ny, -1.0, 1.0);
    be->conv2d_forward(be, &cs, DT_F32, x, w, NULL, y);
    double *yd = dvec(ny);
    ref_conv(&ref.s, ref.x, ref.w, yd);
    char what[96];
    snprintf(what, sizeof what, "1x1 stride 2 (%d,%d,%d,%d)->%d forward", n, c, hw, hw, k);
    check_close(what, y, yd, ny, 2e-5, 2e-4);
    be->conv2d_backward(be, &cs, DT_F32, x, w, r, dx, dw, NULL);
    double *g = dvec(nx);
    test_fd_gradient(conv_loss, &ref, ref.x, nx, FD_H, g);
    snprintf(what, sizeof what, "1x1 stride 2 (%d,%d,%d,%d)->%d dx", n, c, hw, hw, k);
    check_close(what, dx, g, nx, 2e-5, 2e-4);
    /* positions the stride skips get no gradient at all */
    int skipped_nonzero = 0;
    for (size_t i = 0; i < nx; i++) {
        const int col = (int)(i % hw), row = (int)(i / hw % hw);
        skipped_nonzero += (row % 2 || col % 2) && dx[i] != 0.0f;
    }
    CHECK(skipped_nonzero == 0, "%s: %d skipped inputs have a gradient", what, skipped_nonzero);
    free(g);
    g = dvec(nw);
    test_fd_gradient(conv_loss, &ref, ref.w, nw, FD_H, g);
    snprintf(what, sizeof what, "1x1 stride 2 (%d,%d,%d,%d)->%d dw", n, c, hw, hw, k);
    check_close(what, dw, g, nw, 2e-5, 2e-4);
    free(g), free(yd), free(x), free(w), free(r), free(y), free(dx), free(dw);
    free(ref.x), free(ref.w), free(ref.r);
}

/* ------------------------------------------------------------------ (3) adaptive pool */

struct pool_ref {
    size_t planes;
    int h, w, p, q;
    double *x, *r;
};

static void ref_adaptive(const struct pool_ref *a, const double *x, double *y)
{
    for (size_t pl = 0; pl < a->planes; pl++)
        for (int i = 0; i < a->p; i++)
            for (int j = 0; j < a->q; j++) {
                const int r0 = i * a->h / a->p, r1 = ((i + 1) * a->h + a->p - 1) / a->p;
                const int c0 = j * a->w / a->q, c1 = ((j + 1) * a->w + a->q - 1) / a->q;
                double s = 0.0;
                for (int r = r0; r < r1; r++)
                    for (int c = c0; c < c1; c++)
                        s += x[(pl * a->h + r) * a->w + c];
                y[(pl * a->p + i) * a->q + j] = s / ((r1 - r0) * (c1 - c0));
            }
}

static double pool_loss(const void *ctx)
{
    const struct pool_ref *a = ctx;
    const size_t ny = a->planes * a->p * a->q;
    double *y = dvec(ny), l = 0.0;
    ref_adaptive(a, a->x, y);
    for (size_t i = 0; i < ny; i++)
        l += y[i] * a->r[i];
    free(y);
    return l;
}

static void pool_check(int planes, int h, int w, int p, int q)
{
    struct pool_ref a = {.planes = (size_t)planes, .h = h, .w = w, .p = p, .q = q};
    const size_t nx = (size_t)planes * h * w, ny = (size_t)planes * p * q;
    float *x = fvec(nx), *r = fvec(ny), *y = fvec(ny), *dx = fvec(nx);
    a.x = dvec(nx), a.r = dvec(ny);
    fill_pair(a.x, x, nx, -1.0, 1.0);
    fill_pair(a.r, r, ny, -1.0, 1.0);
    char what[96];
    snprintf(what, sizeof what, "adaptive avg pool %dx(%dx%d) to %dx%d", planes, h, w, p, q);
    be->adaptive_avgpool2d_forward(be, planes, 1, h, w, p, q, DT_F32, x, y);
    double *yd = dvec(ny);
    ref_adaptive(&a, a.x, yd);
    check_close(what, y, yd, ny, 2e-5, 2e-4);
    for (size_t i = 0; i < nx; i++)
        dx[i] = 7.0f; /* backward overwrites */
    be->adaptive_avgpool2d_backward(be, planes, 1, h, w, p, q, DT_F32, r, dx);
    double *g = dvec(nx);
    test_fd_gradient(pool_loss, &a, a.x, nx, FD_H, g);
    check_close(what, dx, g, nx, 2e-5, 2e-4);
    free(g), free(yd), free(x), free(r), free(y), free(dx), free(a.x), free(a.r);
}

/* ------------------------------------------------------------------ (4) half types */

static int equals_rounded(const float *half, const float *f32, size_t n, enum dtype dt)
{
    for (size_t i = 0; i < n; i++) {
        const float want = km_round_amp(f32[i], (int)dt);
        if (memcmp(&half[i], &want, sizeof want) != 0)
            return 0;
    }
    return 1;
}

static void test_half(void)
{
    const size_t n = 70001; /* several threads' worth */
    float *a = fvec(n), *b = fvec(n), *y32 = fvec(n), *yh = fvec(n);
    for (int d = DT_F16; d <= DT_BF16; d++) {
        const enum dtype dt = (enum dtype)d;
        const char *name = dt == DT_F16 ? "fp16" : "bf16";
        test_fill_uniform(a, n, -3.0f, 3.0f, &seed);
        test_fill_uniform(b, n, -3.0f, 3.0f, &seed);
        be->round_amp(be, n, (enum amp_dtype)dt, a, a); /* inputs of the type */
        be->round_amp(be, n, (enum amp_dtype)dt, b, b);
        be->add(be, n, DT_F32, a, b, y32);
        be->add(be, n, dt, a, b, yh);
        CHECK(equals_rounded(yh, y32, n, dt), "add %s is not the fp32 sum rounded once", name);
        const int planes = 4000, h = 4, w = 4; /* 64000 inputs, ResNet18's 4x4 to 1x1 */
        be->adaptive_avgpool2d_forward(be, planes, 1, h, w, 1, 1, DT_F32, a, y32);
        be->adaptive_avgpool2d_forward(be, planes, 1, h, w, 1, 1, dt, a, yh);
        CHECK(equals_rounded(yh, y32, (size_t)planes, dt),
              "adaptive_avgpool2d_forward %s is not the fp32 mean rounded once", name);
        be->adaptive_avgpool2d_backward(be, planes, 1, h, w, 1, 1, DT_F32, b, y32);
        be->adaptive_avgpool2d_backward(be, planes, 1, h, w, 1, 1, dt, b, yh);
        CHECK(equals_rounded(yh, y32, (size_t)planes * h * w, dt),
              "adaptive_avgpool2d_backward %s is not the fp32 gradient rounded once", name);
    }
    free(a), free(b), free(y32), free(yh);
}

int main(void)
{
    be = backend_cpu_create(2);
    CHECK(be != NULL, "cpu backend: %s", error_get());
    if (!be)
        return test_finish();
    block_check(2, 3, 4, 2, 6); /* projection: 1x1 stride-2 conv + BN shortcut */
    block_check(2, 3, 3, 1, 5); /* identity shortcut */
    block_check(2, 3, 5, 1, 4); /* projection for a change of channels at stride 1 */
    conv1x1_check(2, 3, 6, 4);
    conv1x1_check(3, 2, 7, 5); /* odd input: the last row and column are read */
    pool_check(6, 4, 4, 1, 1);
    pool_check(4, 7, 9, 3, 4);
    pool_check(3, 5, 6, 10, 12);
    test_half();
    be->destroy(be);
    return test_finish();
}
