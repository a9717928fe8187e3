/* test_conv_nmse.c — the convolutions' accuracy per op, as ggml's test-backend-ops measures
 * it: for every distinct convolution shape of the ConvNet and the CIFAR ResNet18 (a small
 * batch), the forward (y), input gradient (dx) and weight gradient (dw) of each CPU
 * convolution path against float64, as a normalised mean squared error
 *
 *     NMSE = sum((got - ref)^2) / sum(ref^2),   ref = the op in float64 (computed here),
 *
 * beside PyTorch float32's NMSE on the same inputs (tests/golden/conv_nmse.txt, written by
 * tests/golden/make_golden_conv_nmse.py with torch 1.13: the inputs are drawn from
 * torch.Generator().manual_seed(i) with uniform_, which common/rng.h reproduces bit for
 * bit; each line also holds torch's float64 sum(ref^2), checked against ours, so both
 * sides saw the same inputs and the same exact result).
 *
 * The claim asserted (docs/USAGE.md, "Convolution algorithms"; backend.h, enum conv_algo):
 * the paths of PyTorch's numerical class, --conv-algo auto (the default) and direct, and
 * the reference im2col + sgemm, stay within NMSE_CLASS times PyTorch float32's NMSE for
 * every op.  --conv-algo winograd is measured and printed, not bounded by that: it is the
 * less exact choice (on AVX-512, oneDNN's F(4x4,3x3)); it must still be a convolution
 * (NMSE below WINO_SANE).  Prints one table row per shape and op. */
#include "backend/backend.h"
#include "backend/backend_cpu.h"
#include "common/error.h"
#include "common/rng.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bound: within 4x of PyTorch float32's error on the same op and inputs.  NMSE
 * is a mean of squares, so 4x is twice the rms error. */
#define NMSE_CLASS 4.0
/* A Winograd convolution with float32 transforms loses a few bits, not most of them: an
 * NMSE of 1e-8 is a relative rms error of 1e-4, ~800 float ulps. */
#define WINO_SANE 1e-8
/* the float64 sums of squares: the same inputs summed in another order by torch */
#define SUMSQ_RTOL 1e-9
#define THREADS 2

enum { OP_Y, OP_DX, OP_DW, NOPS };
static const char *const op_names[NOPS] = {"y", "dx", "dw"};

struct golden {
    char name[64];
    struct conv2d_shape cs;
    unsigned seed;
    double sumsq[NOPS], torch_nmse[NOPS];
};

/* the paths compared; in_class: asserted within NMSE_CLASS of PyTorch */
struct path {
    const char *name;
    enum cpu_path path;
    enum conv_algo algo;
    int in_class;
    struct backend *be;
};

/* float64 convolution: y (n,k,p,q) from x (n,c,h,w), w (k,c,r,s) */
static void ref_forward(const struct conv2d_shape *cs, const double *x, const double *w,
                        double *y)
{
    const int P = cs->p, Q = cs->q;
    memset(y, 0, sizeof *y * (size_t)cs->n * cs->k * P * Q);
    for (int n = 0; n < cs->n; n++)
        for (int k = 0; k < cs->k; k++) {
            double *yp = y + ((size_t)n * cs->k + k) * P * Q;
            for (int c = 0; c < cs->c; c++) {
                const double *xp = x + ((size_t)n * cs->c + c) * cs->h * cs->w;
                for (int r = 0; r < cs->r; r++)
                    for (int s = 0; s < cs->s; s++) {
                        const double wv = w[(((size_t)k * cs->c + c) * cs->r + r) * cs->s + s];
                        for (int p = 0; p < P; p++) {
                            const int ih = p * cs->stride - cs->pad + r;
                            if (ih < 0 || ih >= cs->h)
                                continue;
                            for (int q = 0; q < Q; q++) {
                                const int iw = q * cs->stride - cs->pad + s;
                                if (iw >= 0 && iw < cs->w)
                                    yp[p * Q + q] += wv * xp[ih * cs->w + iw];
                            }
                        }
                    }
            }
        }
}

/* float64 gradients from dy (n,k,p,q): dx (n,c,h,w), dw (k,c,r,s) */
static void ref_backward(const struct conv2d_shape *cs, const double *x, const double *w,
                         const double *dy, double *dx, double *dw)
{
    const int P = cs->p, Q = cs->q;
    memset(dx, 0, sizeof *dx * (size_t)cs->n * cs->c * cs->h * cs->w);
    memset(dw, 0, sizeof *dw * (size_t)cs->k * cs->c * cs->r * cs->s);
    for (int n = 0; n < cs->n; n++)
        for (int k = 0; k < cs->k; k++) {
            const double *gp = dy + ((size_t)n * cs->k + k) * P * Q;
            for (int c = 0; c < cs->c; c++) {
                const double *xp = x + ((size_t)n * cs->c + c) * cs->h * cs->w;
                double *dxp = dx + ((size_t)n * cs->c + c) * cs->h * cs->w;
                for (int r = 0; r < cs->r; r++)
                    for (int s = 0; s < cs->s; s++) {
                        const size_t wi = (((size_t)k * cs->c + c) * cs->r + r) * cs->s + s;
                        const double wv = w[wi];
                        double acc = 0;
                        for (int p = 0; p < P; p++) {
                            const int ih = p * cs->stride - cs->pad + r;
                            if (ih < 0 || ih >= cs->h)
                                continue;
                            for (int q = 0; q < Q; q++) {
                                const int iw = q * cs->stride - cs->pad + s;
                                if (iw < 0 || iw >= cs->w)
                                    continue;
                                const double g = gp[p * Q + q];
                                acc += g * xp[ih * cs->w + iw];
                                dxp[ih * cs->w + iw] += g * wv;
                            }
                        }
                        dw[wi] += acc;
                    }
            }
        }
}

static double sumsq(const double *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * a[i];
    return s;
}

static double nmse(const float *got, const double *ref, size_t n, double ref_sumsq)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - ref[i];
        e += d * d;
    }
    return e / ref_sumsq;
}

static double *to_double(const float *a, size_t n)
{
    double *d = malloc(sizeof *d * n);
    if (!d)
        abort();
    for (size_t i = 0; i < n; i++)
        d[i] = a[i];
    return d;
}

/* the shapes of tests/golden/conv_nmse.txt into g (at most cap); their count, -1 when
 * the file cannot be read */
static int golden_read(struct golden *g, int cap)
{
    char *dir = test_path(test_source_dir(), "tests/golden");
    char *text = test_read_file(dir, "conv_nmse.txt");
    free(dir);
    if (!text)
        return -1;
    int count = 0;
    for (char *line = strtok(text, "\n"); line && count < cap; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        struct golden *o = &g[count];
        struct conv2d_shape *cs = &o->cs;
        int got = sscanf(line, "%63s %d %d %d %d %d %d %d %d %u %lf %lf %lf %lf %lf %lf",
                         o->name, &cs->n, &cs->c, &cs->h, &cs->w, &cs->k, &cs->r, &cs->pad,
                         &cs->stride, &o->seed, &o->sumsq[0], &o->sumsq[1], &o->sumsq[2],
                         &o->torch_nmse[0], &o->torch_nmse[1], &o->torch_nmse[2]);
        cs->s = cs->r;
        CHECK(got == 16 && conv2d_shape_init(cs) == 0, "conv_nmse.txt: bad line '%s'", line);
        if (got == 16)
            count++;
    }
    free(text);
    return count;
}

/* run one shape on be: y, dx, dw into host buffers */
static void run_path(struct backend *be, const struct conv2d_shape *cs, const float *x,
                     const float *w, const float *dy, float *y, float *dx, float *dw)
{
    const size_t nx = (size_t)cs->n * cs->c * cs->h * cs->w,
                 nw = (size_t)cs->k * cs->c * cs->r * cs->s,
                 ny = (size_t)cs->n * cs->k * cs->p * cs->q;
    float *bx = be->alloc(be, nx * 4), *bw = be->alloc(be, nw * 4), *by = be->alloc(be, ny * 4),
          *bdy = be->alloc(be, ny * 4), *bdx = be->alloc(be, nx * 4),
          *bdw = be->alloc(be, nw * 4);
    if (!bx || !bw || !by || !bdy || !bdx || !bdw)
        abort();
    be->upload(be, bx, x, nx * 4);
    be->upload(be, bw, w, nw * 4);
    be->upload(be, bdy, dy, ny * 4);
    be->conv2d_forward(be, cs, DT_F32, bx, bw, NULL, by);
    be->conv2d_backward(be, cs, DT_F32, bx, bw, bdy, bdx, bdw, NULL);
    be->download(be, y, by, ny * 4);
    be->download(be, dx, bdx, nx * 4);
    be->download(be, dw, bdw, nw * 4);
    be->free(be, bx);
    be->free(be, bw);
    be->free(be, by);
    be->free(be, bdy);
    be->free(be, bdx);
    be->free(be, bdw);
}

int main(void)
{
    static struct golden g[32];
    const int count = golden_read(g, 32);
    CHECK(count >= 13, "tests/golden/conv_nmse.txt: %d shapes (13 expected; source dir %s)",
          count, test_source_dir());
    if (count <= 0)
        return test_finish();

    struct path paths[] = {
        {"reference", CPU_PATH_REFERENCE, CONV_ALGO_AUTO, 1, NULL},
        {"direct", CPU_PATH_FAST, CONV_ALGO_DIRECT, 1, NULL},
        {"auto", CPU_PATH_FAST, CONV_ALGO_AUTO, 1, NULL},
        {"winograd", CPU_PATH_FAST, CONV_ALGO_WINOGRAD, 0, NULL},
    };
    const int npaths = (int)(sizeof paths / sizeof paths[0]);
    for (int i = 0; i < npaths; i++) {
        paths[i].be = backend_cpu_create_conv(THREADS, 0, paths[i].path, paths[i].algo);
        CHECK(paths[i].be != NULL, "backend %s: %s", paths[i].name, error_get());
        if (!paths[i].be)
            return test_finish();
        printf("%-9s %s\n", paths[i].name, backend_cpu_describe(paths[i].be));
    }
    printf("\nNMSE against float64 (sum((a-ref)^2)/sum(ref^2)); ratio: auto / torch; "
           "bound: %s and direct within %gx of torch float32\n",
           paths[2].name, NMSE_CLASS);
    printf("%-30s %-3s %11s %11s %11s %11s %11s %7s\n", "shape", "op", "torch_f32", "reference",
           "direct", "auto", "winograd", "ratio");

    double worst_ratio[NOPS] = {0};
    for (int gi = 0; gi < count; gi++) {
        const struct golden *o = &g[gi];
        const struct conv2d_shape *cs = &o->cs;
        const size_t nx = (size_t)cs->n * cs->c * cs->h * cs->w,
                     nw = (size_t)cs->k * cs->c * cs->r * cs->s,
                     ny = (size_t)cs->n * cs->k * cs->p * cs->q;
        const size_t nout[NOPS] = {ny, nx, nw};
        float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4);
        float *out[NOPS] = {malloc(ny * 4), malloc(nx * 4), malloc(nw * 4)};
        double *ref[NOPS] = {malloc(ny * 8), malloc(nx * 8), malloc(nw * 8)};
        if (!x || !w || !dy || !out[0] || !out[1] || !out[2] || !ref[0] || !ref[1] || !ref[2])
            abort();
        /* the script's draws, in its order */
        struct rng r;
        rng_seed(&r, o->seed);
        const float bound = (float)(1.0 / sqrt((double)cs->c * cs->r * cs->s));
        rng_fill_uniform(&r, x, nx, -1.0f, 1.0f);
        rng_fill_uniform(&r, w, nw, -bound, bound);
        rng_fill_uniform(&r, dy, ny, -1.0f, 1.0f);
        double *xd = to_double(x, nx), *wd = to_double(w, nw), *dyd = to_double(dy, ny);
        ref_forward(cs, xd, wd, ref[OP_Y]);
        ref_backward(cs, xd, wd, dyd, ref[OP_DX], ref[OP_DW]);
        double ss[NOPS];
        for (int op = 0; op < NOPS; op++) {
            ss[op] = sumsq(ref[op], nout[op]);
            CHECK(fabs(ss[op] - o->sumsq[op]) <= SUMSQ_RTOL * o->sumsq[op],
                  "%s %s: float64 sum of squares %.17g here, %.17g in torch: not the same "
                  "inputs or not the same convolution",
                  o->name, op_names[op], ss[op], o->sumsq[op]);
        }
        double e[4][NOPS];
        for (int pi = 0; pi < npaths; pi++) {
            run_path(paths[pi].be, cs, x, w, dy, out[OP_Y], out[OP_DX], out[OP_DW]);
            for (int op = 0; op < NOPS; op++) {
                e[pi][op] = nmse(out[op], ref[op], nout[op], ss[op]);
                if (paths[pi].in_class)
                    CHECK(e[pi][op] <= NMSE_CLASS * o->torch_nmse[op],
                          "%s %s, --conv-algo %s: NMSE %.3e, %.2fx PyTorch float32's %.3e "
                          "(bound %gx)",
                          o->name, op_names[op], paths[pi].name, e[pi][op],
                          e[pi][op] / o->torch_nmse[op], o->torch_nmse[op], NMSE_CLASS);
                else
                    CHECK(e[pi][op] <= WINO_SANE, "%s %s, --conv-algo %s: NMSE %.3e > %g",
                          o->name, op_names[op], paths[pi].name, e[pi][op], WINO_SANE);
            }
        }
        for (int op = 0; op < NOPS; op++) {
            const double ratio = e[2][op] / o->torch_nmse[op];
            if (ratio > worst_ratio[op])
                worst_ratio[op] = ratio;
            printf("%-30s %-3s %11.3e %11.3e %11.3e %11.3e %11.3e %7.2f\n", o->name,
                   op_names[op], o->torch_nmse[op], e[0][op], e[1][op], e[2][op], e[3][op],
                   ratio);
        }
        free(x);
        free(w);
        free(dy);
        free(xd);
        free(wd);
        free(dyd);
        for (int op = 0; op < NOPS; op++) {
            free(out[op]);
            free(ref[op]);
        }
    }
    printf("worst auto / torch NMSE ratio: y %.2f, dx %.2f, dw %.2f (bound %g)\n",
           worst_ratio[OP_Y], worst_ratio[OP_DX], worst_ratio[OP_DW], NMSE_CLASS);
    for (int i = 0; i < npaths; i++)
        paths[i].be->destroy(paths[i].be);
    return test_finish();
}
