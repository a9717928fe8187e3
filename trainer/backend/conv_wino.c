/* conv_wino.c — Winograd F(2x2,3x3) convolutions on the CPU backend's threads (see
 * conv_wino.h).
 *
 * Layouts (T = tiles of a block of images, e = 4 i + j the element of a 4x4 tile):
 *   U   [16][K][C]   the filters' transforms G g G^T, one per call, shared by the threads
 *   V   [16][ch][T]  a block's input tiles' transforms B^T d B (ch: C, or K for dx)
 *   M   [16][ch][T]  the GEMMs' outputs, transformed back to 2x2 outputs A^T M A
 *   Ady [16][K][T]   dy's tiles' transforms A dy A^T (dw)
 *   dU  [16][K][C]   per thread: the sum over its tiles of Ady V^T (dw), then G^T dU G
 * so every GEMM is row-major with the tiles as the long dimension and the transforms
 * read and write runs of consecutive tiles. */
#include "backend/conv_wino.h"

#include "backend/conv_dnnl.h"
#include "common/error.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

/* A block of images is sized so that its V and M (16 x (C + K) x tiles floats) take at
 * most this much: 4 MiB, a few times a core's L2, so each of the 16 GEMMs' operands
 * (1/16 of it, plus U's element) stay cached between the transforms and the GEMM. */
#define WINO_BLOCK_FLOATS ((size_t)1 << 20)
#define WINO_ALIGN_FLOATS 16 /* 64 bytes */

struct conv_wino {
    struct conv_pool pool;
    float *ws;
    size_t ws_floats;
};

/* Which shapes (conv_wino_takes).  Measured on ResNet18's layers (CIFAR, batch 32 on 2
 * threads, wall time per call, AMD EPYC Zen 5, results/cpu-speed-notes.md):
 * - with AVX-512, at 512 channels and 4x4 pixels: forward 6.83 ms with oneDNN's direct
 *   kernels against 5.14-5.41 ms here (1.3x), backward (dx and dw) 16.9-17.8 ms against
 *   11.2-11.4 ms (1.5x); oneDNN's own Winograd is slower than its direct kernels there (one
 *   4x4 tile per image).  From 8x8 pixels up oneDNN runs its F(4x4,3x3): at 256 channels
 *   and 8x8 this module measured 3.48-3.77 ms against 3.90-4.16 (forward) and 7.48-8.31
 *   against 6.80-7.84 (backward): no clear gain, so those stay with oneDNN;
 * - with oneDNN held to AVX2 (DNNL_MAX_CPU_ISA=AVX2: direct kernels only), against them,
 *   forward / backward: 64 channels at 32x32 1.1x / 1.2x, 128 at 16x16 1.5x / 1.5x, 256 at
 *   8x8 1.7x / 1.6x; so where oneDNN has no Winograd this module takes every size. */
#define WINO_MAX_PIXELS 16
int conv_wino_takes(const struct conv2d_shape *cs, int other_winograd)
{
    return cs->r == 3 && cs->s == 3 && cs->stride == 1 && cs->pad == 1 && cs->c >= 16 &&
           cs->k >= 16 && (!other_winograd || (long)cs->h * cs->w <= WINO_MAX_PIXELS);
}

struct conv_wino *conv_wino_create(const struct conv_pool *pool)
{
    struct conv_wino *cw = calloc(1, sizeof *cw);
    if (!cw)
        return error_set("conv_wino: out of memory"), NULL;
    cw->pool = *pool;
    return cw;
}

void conv_wino_destroy(struct conv_wino *cw)
{
    if (!cw)
        return;
    free(cw->ws);
    free(cw);
}

static size_t round_floats(size_t n)
{
    return (n + WINO_ALIGN_FLOATS - 1) & ~(size_t)(WINO_ALIGN_FLOATS - 1);
}

/* The distance between the 16 elements' matrices of n floats each: n rounded to a cache
 * line, plus one.  Matrices of a power-of-two size (512 x 512, 512 x 64 tiles) would put
 * the 16 runs a transform reads or writes at once on the same cache sets, 16 lines for
 * 12 ways: every access a conflict miss (measured: the filter transforms ran at ~1.5 GB/s). */
static size_t el_stride(size_t n) { return round_floats(n) + WINO_ALIGN_FLOATS; }

static int ws_reserve(struct conv_wino *cw, size_t floats)
{
    if (cw->ws_floats >= floats)
        return 0;
    free(cw->ws);
    cw->ws = NULL;
    cw->ws_floats = 0;
    void *p = NULL;
    if (posix_memalign(&p, 64, floats * sizeof(float)) != 0)
        return error_set("conv_wino: out of memory for a %zu MiB workspace",
                         floats * sizeof(float) >> 20);
    cw->ws = p;
    cw->ws_floats = floats;
    return 0;
}

/* c = op(a) op(b) + beta c, row-major: oneDNN's GEMM where the build has it (conv_dnnl.h
 * says why), else OpenBLAS's */
static void gemm(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc)
{
    if (conv_dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc) == 0)
        return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

/* ------------------------------------------------------------------ transforms */

/* V[e][c][i th tw + ty tw + tx] = (B^T d B)[e] for the 4x4 tile d of plane c of image i
 * of x (nimg images of ch planes of h x w) at rows 2 ty - 1.., columns 2 tx - 1.. (zeros
 * outside).  Channel by channel, each image in turn: the tiles of a channel are written
 * in one run per element. */
static void input_tiles(const float *x, int nimg, int ch, int h, int w, float *V, size_t T,
                        size_t es)
{
    const int th = (h + 1) / 2, tw = (w + 1) / 2;
    for (int ci = 0; ci < ch * nimg; ci++) {
        const int c = ci / nimg, im = ci % nimg;
        const float *plane = x + ((size_t)im * ch + c) * h * w;
        float *vc = V + (size_t)c * T + (size_t)im * th * tw;
        for (int ty = 0; ty < th; ty++)
            for (int tx = 0; tx < tw; tx++) {
                float d[4][4], t[4][4];
                for (int i = 0; i < 4; i++) {
                    const int r = 2 * ty - 1 + i;
                    for (int j = 0; j < 4; j++) {
                        const int s = 2 * tx - 1 + j;
                        d[i][j] = r >= 0 && r < h && s >= 0 && s < w ? plane[r * w + s] : 0.0f;
                    }
                }
                for (int j = 0; j < 4; j++) {
                    t[0][j] = d[0][j] - d[2][j];
                    t[1][j] = d[1][j] + d[2][j];
                    t[2][j] = d[2][j] - d[1][j];
                    t[3][j] = d[1][j] - d[3][j];
                }
                float *v = vc + (size_t)ty * tw + tx;
                for (int i = 0; i < 4; i++) {
                    v[(4 * i + 0) * es] = t[i][0] - t[i][2];
                    v[(4 * i + 1) * es] = t[i][1] + t[i][2];
                    v[(4 * i + 2) * es] = t[i][2] - t[i][1];
                    v[(4 * i + 3) * es] = t[i][1] - t[i][3];
                }
            }
    }
}

/* plane k of image i of y (nimg images of ch planes of h x w) at tile (ty, tx) =
 * (A^T M A) + b[k] (b may be NULL), the outputs inside the plane; channel by channel */
static void output_tiles(const float *M, int nimg, int ch, int h, int w, size_t T, size_t es,
                         const float *b, float *y)
{
    const int th = (h + 1) / 2, tw = (w + 1) / 2;
    for (int ki = 0; ki < ch * nimg; ki++) {
        const int k = ki / nimg, im = ki % nimg;
        const float *mk = M + (size_t)k * T + (size_t)im * th * tw;
        float *plane = y + ((size_t)im * ch + k) * h * w;
        const float bias = b ? b[k] : 0.0f;
        for (int ty = 0; ty < th; ty++)
            for (int tx = 0; tx < tw; tx++) {
                const float *m = mk + (size_t)ty * tw + tx;
                float t[2][4];
                for (int j = 0; j < 4; j++) {
                    const float m0 = m[(0 + j) * es], m1 = m[(4 + j) * es];
                    const float m2 = m[(8 + j) * es], m3 = m[(12 + j) * es];
                    t[0][j] = m0 + m1 + m2;
                    t[1][j] = m1 - m2 - m3;
                }
                for (int i = 0; i < 2; i++) {
                    const int r = 2 * ty + i;
                    if (r >= h)
                        break;
                    const float o0 = t[i][0] + t[i][1] + t[i][2];
                    const float o1 = t[i][1] - t[i][2] - t[i][3];
                    plane[r * w + 2 * tx] = o0 + bias;
                    if (2 * tx + 1 < w)
                        plane[r * w + 2 * tx + 1] = o1 + bias;
                }
            }
    }
}

/* Ady[e][k][i th tw + ty tw + tx] = (A dy A^T)[e] for the 2x2 tile of plane k of image i
 * of dy at (2 ty, 2 tx) (zeros outside); channel by channel */
static void grad_tiles(const float *dy, int nimg, int ch, int h, int w, float *Ady, size_t T,
                       size_t es)
{
    const int th = (h + 1) / 2, tw = (w + 1) / 2;
    for (int ki = 0; ki < ch * nimg; ki++) {
        const int k = ki / nimg, im = ki % nimg;
        const float *plane = dy + ((size_t)im * ch + k) * h * w;
        float *ak = Ady + (size_t)k * T + (size_t)im * th * tw;
        for (int ty = 0; ty < th; ty++)
            for (int tx = 0; tx < tw; tx++) {
                float a[2][2], t[4][2];
                for (int i = 0; i < 2; i++)
                    for (int j = 0; j < 2; j++) {
                        const int r = 2 * ty + i, s = 2 * tx + j;
                        a[i][j] = r < h && s < w ? plane[r * w + s] : 0.0f;
                    }
                for (int j = 0; j < 2; j++) {
                    t[0][j] = a[0][j];
                    t[1][j] = a[0][j] + a[1][j];
                    t[2][j] = a[0][j] - a[1][j];
                    t[3][j] = -a[1][j];
                }
                float *v = ak + (size_t)ty * tw + tx;
                for (int i = 0; i < 4; i++) {
                    v[(4 * i + 0) * es] = t[i][0];
                    v[(4 * i + 1) * es] = t[i][0] + t[i][1];
                    v[(4 * i + 2) * es] = t[i][0] - t[i][1];
                    v[(4 * i + 3) * es] = -t[i][1];
                }
            }
    }
}

/* Filters are transformed a run of FILTER_RUN input channels at a time: their 9 taps are
 * first gathered tap-major into a small buffer, so the transform's loop runs over
 * consecutive channels, reading 9 and writing 16 contiguous runs (vectorised), instead of
 * one filter at a time (16 scattered stores each), and the outputs go out through local
 * runs as well (stores into 16 runs of U at run-time distances were not vectorised). */
#define FILTER_RUN 64

/* U[e][k][c] = (G g G^T)[e] for the filters k in [k0, k1) of w (K x C x 3 x 3) */
static void filter_tiles(const float *w, int K, int C, int k0, int k1, float *U)
{
    const size_t es = el_stride((size_t)K * C);
    float g[9][FILTER_RUN], u[16][FILTER_RUN]; /* through local runs: the compiler vectorises */
    for (int k = k0; k < k1; k++)
        for (int c0 = 0; c0 < C; c0 += FILTER_RUN) {
            const int nc = C - c0 < FILTER_RUN ? C - c0 : FILTER_RUN;
            const float *src = w + ((size_t)k * C + c0) * 9;
            for (int c = 0; c < nc; c++)
                for (int i = 0; i < 9; i++)
                    g[i][c] = src[c * 9 + i];
            for (int c = 0; c < nc; c++) {
                float t[4][3];
                for (int j = 0; j < 3; j++) {
                    t[0][j] = g[j][c];
                    t[1][j] = 0.5f * (g[j][c] + g[3 + j][c] + g[6 + j][c]);
                    t[2][j] = 0.5f * (g[j][c] - g[3 + j][c] + g[6 + j][c]);
                    t[3][j] = g[6 + j][c];
                }
                for (int i = 0; i < 4; i++) {
                    u[4 * i + 0][c] = t[i][0];
                    u[4 * i + 1][c] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
                    u[4 * i + 2][c] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
                    u[4 * i + 3][c] = t[i][2];
                }
            }
            for (int e = 0; e < 16; e++)
                memcpy(U + e * es + (size_t)k * C + c0, u[e], (size_t)nc * sizeof(float));
        }
}

/* dw (K x C x 3 x 3) for the filters k in [k0, k1) = G^T D G, D = the sum of the parts
 * dU[0..parts) (each 16 x K x C, part p at dU + p * stride), added in part order */
static void filter_grads(const float *dU, size_t stride, int parts, int K, int C, int k0, int k1,
                         float *dw)
{
    const size_t es = el_stride((size_t)K * C);
    float g[9][FILTER_RUN], D[16][FILTER_RUN];
    for (int k = k0; k < k1; k++)
        for (int c0 = 0; c0 < C; c0 += FILTER_RUN) {
            const int nc = C - c0 < FILTER_RUN ? C - c0 : FILTER_RUN;
            const size_t at = (size_t)k * C + c0;
            for (int e = 0; e < 16; e++) {
                const float *d = dU + e * es + at;
                for (int c = 0; c < nc; c++)
                    D[e][c] = d[c];
                for (int p = 1; p < parts; p++) {
                    const float *dp = d + p * stride;
                    for (int c = 0; c < nc; c++)
                        D[e][c] += dp[c];
                }
            }
            for (int c = 0; c < nc; c++) {
                float t[3][4];
                for (int j = 0; j < 4; j++) {
                    const float d0 = D[j][c], d1 = D[4 + j][c], d2 = D[8 + j][c];
                    const float d3 = D[12 + j][c];
                    t[0][j] = d0 + 0.5f * (d1 + d2);
                    t[1][j] = 0.5f * (d1 - d2);
                    t[2][j] = 0.5f * (d1 + d2) + d3;
                }
                for (int i = 0; i < 3; i++) {
                    g[3 * i + 0][c] = t[i][0] + 0.5f * (t[i][1] + t[i][2]);
                    g[3 * i + 1][c] = 0.5f * (t[i][1] - t[i][2]);
                    g[3 * i + 2][c] = 0.5f * (t[i][1] + t[i][2]) + t[i][3];
                }
            }
            float *dst = dw + at * 9;
            for (int c = 0; c < nc; c++)
                for (int i = 0; i < 9; i++)
                    dst[c * 9 + i] = g[i][c];
        }
}

/* ------------------------------------------------------------------ calls */

enum wino_kind { WINO_FORWARD, WINO_DX, WINO_DW };

struct wino_job {
    enum wino_kind kind;
    int n, C, K, h, w, tiles; /* tiles per image */
    int nb, per_thread, threads, ib; /* slices of nb images, per_thread of them a thread,
                                        blocks of ib images */
    const float *in, *dy, *b;
    float *out;
    float *U;               /* [16][K][C]: U (forward, dx) */
    float *ws;              /* per thread: ws + t * stride */
    size_t stride;
    size_t part;            /* dw: offset of a thread's dU in its part of ws */
};

/* the images [lo, hi) of thread t */
static void job_images(const struct wino_job *j, int t, int *lo, int *hi)
{
    const long span = (long)j->per_thread * j->nb;
    *lo = (int)(t * span < j->n ? t * span : j->n);
    *hi = (int)((t + 1) * span < j->n ? (t + 1) * span : j->n);
}

static void wino_task(void *arg, int t)
{
    const struct wino_job *j = arg;
    const int C = j->C, K = j->K, h = j->h, w = j->w;
    const size_t plane = (size_t)h * w, ukc = el_stride((size_t)K * C);
    /* forward: C planes in, K out; dx: K in (dy), C out; dw: C in (x), K (dy) */
    const int cin = j->kind == WINO_DX ? K : C, cout = j->kind == WINO_DX ? C : K;
    float *V = j->ws + t * j->stride;
    float *M = V + 16 * el_stride((size_t)cin * j->ib * j->tiles);
    float *dU = j->ws + t * j->stride + j->part;
    int lo, hi;
    job_images(j, t, &lo, &hi);
    int first = 1;
    for (int i0 = lo; i0 < hi; i0 += j->ib) {
        const int i1 = i0 + j->ib < hi ? i0 + j->ib : hi;
        const size_t T = (size_t)(i1 - i0) * j->tiles;
        const size_t vin = el_stride((size_t)cin * T), vout = el_stride((size_t)cout * T);
        input_tiles(j->in + (size_t)i0 * cin * plane, i1 - i0, cin, h, w, V, T, vin);
        if (j->kind == WINO_DW) {
            grad_tiles(j->dy + (size_t)i0 * K * plane, i1 - i0, K, h, w, M, T, vout);
            for (int e = 0; e < 16; e++)
                gemm(0, 1, K, C, (int)T, M + e * vout, (int)T, V + e * vin, (int)T,
                     first ? 0.0f : 1.0f, dU + e * ukc, C);
            first = 0;
            continue;
        }
        for (int e = 0; e < 16; e++) {
            if (j->kind == WINO_FORWARD) {
                gemm(0, 0, K, (int)T, C, j->U + e * ukc, C, V + e * vin, (int)T, 0.0f,
                     M + e * vout, (int)T);
            } else {
                /* the rotated filters' transform: rows and columns 0 and 3 swapped */
                static const int swap[4] = {3, 1, 2, 0};
                const size_t pe = 4 * swap[e / 4] + swap[e % 4];
                gemm(1, 0, C, (int)T, K, j->U + pe * ukc, C, V + e * vin, (int)T, 0.0f,
                     M + e * vout, (int)T);
            }
        }
        output_tiles(M, i1 - i0, cout, h, w, T, vout, j->kind == WINO_FORWARD ? j->b : NULL,
                     j->out + (size_t)i0 * cout * plane);
    }
}

/* the filters' work of a call, split by filter over the threads */
struct filter_job {
    const struct wino_job *j;
    int threads;
    const float *w;
    float *dw;
};

static void filter_task(void *arg, int t)
{
    const struct filter_job *f = arg;
    const struct wino_job *j = f->j;
    const int k0 = (int)((long)j->K * t / f->threads);
    const int k1 = (int)((long)j->K * (t + 1) / f->threads);
    if (f->dw)
        filter_grads(j->ws + j->part, j->stride, j->threads, j->K, j->C, k0, k1, f->dw);
    else
        filter_tiles(f->w, j->K, j->C, k0, k1, j->U);
}

/* the split and the workspace of a call of kind; -1 + error_set when out of memory */
static int job_plan(struct conv_wino *cw, const struct conv2d_shape *cs, enum wino_kind kind,
                    struct wino_job *j)
{
    const int nt = cw->pool.threads;
    *j = (struct wino_job){.kind = kind, .n = cs->n, .C = cs->c, .K = cs->k, .h = cs->h,
                           .w = cs->w, .tiles = ((cs->h + 1) / 2) * ((cs->w + 1) / 2)};
    int nb = (cs->n + nt - 1) / nt;
    if (cw->pool.chunk > 0 && nb > cw->pool.chunk)
        nb = cw->pool.chunk;
    if (nb < 1)
        nb = 1;
    const int slices = (cs->n + nb - 1) / nb;
    j->nb = nb;
    j->per_thread = (slices + nt - 1) / nt;
    j->threads = (slices + j->per_thread - 1) / j->per_thread;
    const size_t per_image = (size_t)16 * (cs->c + cs->k) * j->tiles;
    size_t ib = WINO_BLOCK_FLOATS / per_image;
    if (ib < 1)
        ib = 1;
    if (ib > (size_t)nb)
        ib = (size_t)nb;
    j->ib = (int)ib;
    const size_t kc = 16 * el_stride((size_t)cs->k * cs->c);
    j->stride = 16 * el_stride((size_t)cs->c * ib * j->tiles) +
                16 * el_stride((size_t)cs->k * ib * j->tiles);
    size_t shared = 0;
    if (kind == WINO_DW) {
        j->part = j->stride;
        j->stride += kc;
    } else {
        shared = kc;
    }
    if (ws_reserve(cw, shared + (size_t)j->threads * j->stride))
        return -1;
    j->U = cw->ws;
    j->ws = cw->ws + shared;
    return 0;
}

int conv_wino_forward(struct conv_wino *cw, const struct conv2d_shape *cs, const float *x,
                      const float *w, const float *b, float *y)
{
    struct wino_job j;
    if (job_plan(cw, cs, WINO_FORWARD, &j))
        return -1;
    j.in = x;
    j.b = b;
    j.out = y;
    struct filter_job f = {.j = &j, .threads = cw->pool.threads, .w = w};
    cw->pool.run(cw->pool.ctx, f.threads, filter_task, &f);
    cw->pool.run(cw->pool.ctx, j.threads, wino_task, &j);
    return 0;
}

int conv_wino_backward(struct conv_wino *cw, const struct conv2d_shape *cs, const float *x,
                       const float *w, const float *dy, float *dx, float *dw)
{
    struct wino_job j;
    if (dx) {
        if (job_plan(cw, cs, WINO_DX, &j))
            return -1;
        j.in = dy;
        j.out = dx;
        struct filter_job f = {.j = &j, .threads = cw->pool.threads, .w = w};
        cw->pool.run(cw->pool.ctx, f.threads, filter_task, &f);
        cw->pool.run(cw->pool.ctx, j.threads, wino_task, &j);
    }
    if (dw) {
        if (job_plan(cw, cs, WINO_DW, &j))
            return -1;
        j.in = x;
        j.dy = dy;
        cw->pool.run(cw->pool.ctx, j.threads, wino_task, &j);
        struct filter_job f = {.j = &j, .threads = cw->pool.threads, .dw = dw};
        cw->pool.run(cw->pool.ctx, f.threads, filter_task, &f);
    }
    return 0;
}
