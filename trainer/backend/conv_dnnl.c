/* conv_dnnl.c — the CPU backend's fast convolutions on oneDNN (see conv_dnnl.h).
 *
 * Per call: plan the slices (one per thread, or chunk-sized with the test knob), find or
 * create the primitives for each slice size (a "plan": the convolution primitive, which
 * picks its own blocked layouts, and the reorders between the backend's plain layouts and
 * those), reorder the weights once on the calling thread, then run every slice on its
 * thread: reorder in, convolve, reorder out, each into that thread's part of the
 * workspace.  Weight gradients: each thread's slices are summed in slice order into its
 * part, the parts in thread order into thread 0's, then reordered into dw.
 *
 * Every primitive runs with a user-provided scratchpad (so two threads can run one
 * primitive at once) on its thread's own stream and memory objects. */
#include "backend/conv_dnnl.h"

#include "common/error.h"
#include "common/vec.h"

#include <dnnl.h>
#include <dnnl_debug.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the workspace's parts start on cache lines */
#define DNNL_ALIGN 64

enum plan_kind { PLAN_FORWARD, PLAN_BACKWARD_DATA, PLAN_BACKWARD_WEIGHTS };

/* a primitive with its scratchpad size and, per thread, a memory object for it */
struct prim {
    dnnl_primitive_t p;
    dnnl_memory_desc_t scratch_md;
    size_t scratch_bytes;
    dnnl_memory_t *scratch_mem; /* [threads], NULL when scratch_bytes == 0 */
};

/* One tensor argument of the convolution: its plain layout (NCHW / KCRS), the layout the
 * convolution wants, and the reorder from one to the other (plain -> want for inputs,
 * want -> plain for outputs; no primitive when the two are the same).  Per thread, a
 * memory object for each side. */
struct arg {
    dnnl_memory_desc_t plain, want;
    int same;
    size_t want_bytes;
    struct prim reorder;
    dnnl_memory_t *mem_plain, *mem_want; /* [threads] */
};

/* Arguments by kind:      0                1              2
 *   PLAN_FORWARD           src (in)         weights (in)   dst (out)
 *   PLAN_BACKWARD_DATA     diff_dst (in)    weights (in)   diff_src (out)
 *   PLAN_BACKWARD_WEIGHTS  src (in)         diff_dst (in)  diff_weights (out)
 * Weights and diff_weights are reordered on the calling thread (once per call), the rest
 * per slice. */
enum { ARGS = 3 };

struct plan {
    enum plan_kind kind;
    struct conv2d_shape cs; /* n = the slice's images */
    int bias;               /* forward: y = conv + b, b added by a binary post-op */
    char *refused;          /* why oneDNN could not build it (kept: not retried), or NULL */
    struct prim conv;
    struct arg arg[ARGS];
    dnnl_memory_t *mem_bias; /* [threads], forward with bias: b as (1, k, 1, 1) */
};

struct conv_dnnl {
    struct conv_pool pool;
    dnnl_engine_t engine;
    dnnl_stream_t *streams;  /* [threads] */
    dnnl_primitive_attr_t attr; /* user scratchpad */
    struct plan **plans;
    size_t nplans, plans_cap;
    char *ws;                /* per-thread parts, ws_stride bytes each */
    size_t ws_stride, ws_threads;
    char *wbuf;              /* the weights in the layout the convolution wants */
    size_t wbuf_bytes;
    int allow_winograd;      /* conv_dnnl_create's: Winograd may run where it is faster */
    int winograd;            /* conv_dnnl_winograd */
    char describe[200];
};

/* ------------------------------------------------------------------ helpers */

static int dnnl_fail(dnnl_status_t st, const char *what)
{
    return error_set("oneDNN: %s: %s", what, dnnl_status2str(st));
}

#define DNNL_TRY(call, what)                                                                  \
    do {                                                                                      \
        const dnnl_status_t st_ = (call);                                                     \
        if (st_ != dnnl_success)                                                              \
            return dnnl_fail(st_, what);                                                      \
    } while (0)

/* oneDNN's OpenMP runtime takes one thread per calling thread: the backend's pool already
 * runs one slice per core (omp_set_num_threads sets the calling thread's own value). */
static void dnnl_single_thread(void)
{
    if (omp_get_max_threads() != 1)
        omp_set_num_threads(1);
}

static size_t round_up(size_t bytes) { return (bytes + DNNL_ALIGN - 1) & ~(size_t)(DNNL_ALIGN - 1); }

/* memory objects without a buffer, one per thread, on md */
static int mem_create(struct conv_dnnl *cd, const dnnl_memory_desc_t *md, dnnl_memory_t **out)
{
    dnnl_memory_t *m = calloc((size_t)cd->pool.threads, sizeof *m);
    if (!m)
        return error_set("oneDNN: out of memory for memory objects");
    *out = m;
    for (int t = 0; t < cd->pool.threads; t++)
        DNNL_TRY(dnnl_memory_create(&m[t], md, cd->engine, DNNL_MEMORY_NONE), "memory object");
    return 0;
}

static void mem_free(struct conv_dnnl *cd, dnnl_memory_t *m)
{
    if (!m)
        return;
    for (int t = 0; t < cd->pool.threads; t++)
        if (m[t])
            dnnl_memory_destroy(m[t]);
    free(m);
}

/* the primitive of pd (which it takes over) with its scratchpad */
static int prim_init(struct conv_dnnl *cd, dnnl_primitive_desc_t pd, struct prim *pr)
{
    dnnl_status_t st = dnnl_primitive_create(&pr->p, pd);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (st == dnnl_success && smd) {
        pr->scratch_md = *smd;
        pr->scratch_bytes = dnnl_memory_desc_get_size(smd);
    }
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success)
        return dnnl_fail(st, "creating a primitive");
    if (pr->scratch_bytes && mem_create(cd, &pr->scratch_md, &pr->scratch_mem))
        return -1;
    return 0;
}

static void prim_free(struct conv_dnnl *cd, struct prim *pr)
{
    if (pr->p)
        dnnl_primitive_destroy(pr->p);
    mem_free(cd, pr->scratch_mem);
}

/* an argument between plain and want; out: the reorder goes want -> plain */
static int arg_init(struct conv_dnnl *cd, struct arg *a, const dnnl_memory_desc_t *plain,
                    const dnnl_memory_desc_t *want, int out)
{
    a->plain = *plain;
    a->want = *want;
    a->same = dnnl_memory_desc_equal(plain, want);
    a->want_bytes = dnnl_memory_desc_get_size(want);
    if (mem_create(cd, plain, &a->mem_plain) || mem_create(cd, want, &a->mem_want))
        return -1;
    if (a->same)
        return 0;
    dnnl_primitive_desc_t pd;
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&pd, out ? want : plain, cd->engine,
                                                out ? plain : want, cd->engine, cd->attr),
             "reorder");
    return prim_init(cd, pd, &a->reorder);
}

static void plan_free(struct conv_dnnl *cd, struct plan *pl)
{
    if (!pl)
        return;
    prim_free(cd, &pl->conv);
    for (int i = 0; i < ARGS; i++) {
        prim_free(cd, &pl->arg[i].reorder);
        mem_free(cd, pl->arg[i].mem_plain);
        mem_free(cd, pl->arg[i].mem_want);
    }
    mem_free(cd, pl->mem_bias);
    free(pl->refused);
    free(pl);
}

/* execute pr on thread t's stream with args (+ its scratchpad at scratch) */
static int prim_exec(struct conv_dnnl *cd, const struct prim *pr, int t, dnnl_exec_arg_t *args,
                     int nargs, void *scratch)
{
    if (pr->scratch_bytes) {
        DNNL_TRY(dnnl_memory_set_data_handle(pr->scratch_mem[t], scratch), "scratchpad");
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, pr->scratch_mem[t]};
    }
    DNNL_TRY(dnnl_primitive_execute(pr->p, cd->streams[t], nargs, args), "execute");
    return 0;
}

/* thread t's memory object for the plain side of a at p, and for the wanted side at want
 * (ignored when a->same: then both are p); the reorder is not run */
static int arg_bind(struct arg *a, int t, const void *p, void *want)
{
    DNNL_TRY(dnnl_memory_set_data_handle(a->mem_plain[t], (void *)(uintptr_t)p), "bind");
    DNNL_TRY(dnnl_memory_set_data_handle(a->mem_want[t], a->same ? (void *)(uintptr_t)p : want),
             "bind");
    return 0;
}

/* thread t's memory object for the wanted side of a at p (the weights, reordered once) */
static int arg_bind_want(struct arg *a, int t, const void *p)
{
    DNNL_TRY(dnnl_memory_set_data_handle(a->mem_want[t], (void *)(uintptr_t)p), "bind");
    return 0;
}

/* run a's reorder on thread t (in: plain -> want; out: want -> plain), nothing if same */
static int arg_reorder(struct conv_dnnl *cd, const struct arg *a, int t, int out, void *scratch)
{
    if (a->same)
        return 0;
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_FROM, out ? a->mem_want[t] : a->mem_plain[t]},
        {DNNL_ARG_TO, out ? a->mem_plain[t] : a->mem_want[t]},
    };
    return prim_exec(cd, &a->reorder, t, args, 2, scratch);
}

/* ------------------------------------------------------------------ plans */

static void dims4(dnnl_dims_t d, int a, int b, int c, int e)
{
    d[0] = a, d[1] = b, d[2] = c, d[3] = e;
}

static int plan_same_key(const struct plan *pl, enum plan_kind kind,
                         const struct conv2d_shape *cs, int bias)
{
    const struct conv2d_shape *a = &pl->cs;
    return pl->kind == kind && pl->bias == bias && a->n == cs->n && a->c == cs->c &&
           a->h == cs->h && a->w == cs->w && a->k == cs->k && a->r == cs->r && a->s == cs->s &&
           a->pad == cs->pad && a->stride == cs->stride;
}

/* Which algorithm to ask oneDNN for.  Winograd (oneDNN's F(4x4,3x3), jit_wino_4x3, AVX-512
 * only: elsewhere oneDNN refuses it and the plan falls back to direct) for 3x3, stride-1
 * convolutions between at least 16 channels whose output has at least WINO_MIN_PIXELS
 * pixels; direct for the rest.  Measured per shape (ONEDNN_VERBOSE, ResNet18 on CIFAR,
 * slices of 16 images, AMD EPYC Zen 5, results/cpu-speed-notes.md), Winograd against
 * direct: 64 channels at 32x32 1.79x / 1.88x / 1.37x (forward / dx / dw), 128 at 16x16
 * 1.77x / 1.69x / 1.88x, 256 at 8x8 1.30x / 1.29x / 1.80x, but 512 at 4x4 0.53x / 0.39x /
 * 0.89x (one 4x4 tile per image: the tile transforms dominate) and 3 input channels
 * 0.15x / - / 0.23x.  Winograd rounds differently from direct (its transforms add and
 * subtract scaled inputs): tests/test_backend_ops.c bounds the difference. */
#define WINO_MIN_PIXELS 64
static dnnl_alg_kind_t conv_alg(const struct conv_dnnl *cd, const struct conv2d_shape *cs)
{
    if (cd->allow_winograd && cs->r == 3 && cs->s == 3 && cs->stride == 1 && cs->c >= 16 && cs->k >= 16 &&
        (long)cs->p * cs->q >= WINO_MIN_PIXELS)
        return dnnl_convolution_winograd;
    return dnnl_convolution_direct;
}

/* the convolution descriptor of kind for cs with alg, every layout "any" */
static int conv_desc(enum plan_kind kind, const struct conv2d_shape *cs,
                     dnnl_alg_kind_t alg, dnnl_convolution_desc_t *d)
{
    dnnl_dims_t xd, wd, yd;
    dims4(xd, cs->n, cs->c, cs->h, cs->w);
    dims4(wd, cs->k, cs->c, cs->r, cs->s);
    dims4(yd, cs->n, cs->k, cs->p, cs->q);
    dnnl_memory_desc_t x, w, y;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&x, 4, xd, dnnl_f32, dnnl_format_tag_any), "src desc");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any), "wei desc");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&y, 4, yd, dnnl_f32, dnnl_format_tag_any), "dst desc");
    const dnnl_dims_t strides = {cs->stride, cs->stride}, pad = {cs->pad, cs->pad};
    switch (kind) {
    case PLAN_FORWARD:
        DNNL_TRY(dnnl_convolution_forward_desc_init(d, dnnl_forward_training,
                                                    alg, &x, &w, NULL, &y, strides, pad, pad),
                 "forward desc");
        break;
    case PLAN_BACKWARD_DATA:
        DNNL_TRY(dnnl_convolution_backward_data_desc_init(d, alg, &x, &w, &y,
                                                          strides, pad, pad),
                 "backward data desc");
        break;
    case PLAN_BACKWARD_WEIGHTS:
        DNNL_TRY(dnnl_convolution_backward_weights_desc_init(d, alg, &x, &w,
                                                             NULL, &y, strides, pad, pad),
                 "backward weights desc");
        break;
    }
    return 0;
}

/* the bias as the forward's binary post-op takes it: (1, k, 1, 1) */
static dnnl_status_t bias_md(const struct conv2d_shape *cs, dnnl_memory_desc_t *b)
{
    dnnl_dims_t bd;
    dims4(bd, 1, cs->k, 1, 1);
    return dnnl_memory_desc_init_by_tag(b, 4, bd, dnnl_f32, dnnl_nchw);
}

/* the primitive descriptor of pl's convolution with alg (backward ones take the forward's
 * as a hint), or -1 + error_set */
static int conv_pd(struct conv_dnnl *cd, const struct plan *pl, dnnl_alg_kind_t alg,
                   dnnl_primitive_desc_t *pd)
{
    const struct conv2d_shape *cs = &pl->cs;
    dnnl_convolution_desc_t d, fd;
    dnnl_primitive_desc_t hint = NULL;
    if (conv_desc(pl->kind, cs, alg, &d))
        return -1;
    if (pl->kind != PLAN_FORWARD) {
        if (conv_desc(PLAN_FORWARD, cs, alg, &fd))
            return -1;
        DNNL_TRY(dnnl_primitive_desc_create(&hint, &fd, cd->attr, cd->engine, NULL),
                 "forward primitive (hint)");
    }
    /* The bias as a binary post-op (an add after the sums), not as oneDNN's bias argument:
     * its AVX2 kernels start the sums from the bias, which rounds differently from the
     * reference path and the CUDA backend, both of which add it to the finished
     * convolution (tests/test_kernels_emu.c checks that exactly; it failed under
     * DNNL_MAX_CPU_ISA=AVX2 with the bias argument). */
    dnnl_primitive_attr_t attr = cd->attr, own = NULL;
    dnnl_status_t st = dnnl_success;
    if (pl->kind == PLAN_FORWARD && pl->bias) {
        dnnl_memory_desc_t b;
        dnnl_post_ops_t po = NULL;
        st = bias_md(cs, &b);
        if (st == dnnl_success)
            st = dnnl_primitive_attr_clone(&own, cd->attr);
        if (st == dnnl_success)
            st = dnnl_post_ops_create(&po);
        if (st == dnnl_success)
            st = dnnl_post_ops_append_binary(po, dnnl_binary_add, &b);
        if (st == dnnl_success)
            st = dnnl_primitive_attr_set_post_ops(own, po);
        if (po)
            dnnl_post_ops_destroy(po);
        attr = own;
    }
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(pd, &d, attr, cd->engine, hint);
    if (own)
        dnnl_primitive_attr_destroy(own);
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    if (st != dnnl_success)
        return dnnl_fail(st, "convolution primitive");
    return 0;
}

static int plan_build(struct conv_dnnl *cd, struct plan *pl)
{
    const struct conv2d_shape *cs = &pl->cs;
    dnnl_primitive_desc_t pd;
    const dnnl_alg_kind_t alg = conv_alg(cd, cs);
    /* where oneDNN has no Winograd kernel for this machine or shape: direct */
    if (conv_pd(cd, pl, alg, &pd) &&
        (alg == dnnl_convolution_direct || conv_pd(cd, pl, dnnl_convolution_direct, &pd)))
        return -1;
    /* Where oneDNN is slower than the backend's im2col + sgemm, the backend runs it:
     * oneDNN's own reference loops ("ref:any"), and (measured, bench_convnet_ops with
     * DNNL_MAX_CPU_ISA=AVX2) its pre-AVX-512 weight gradient of a first layer (fewer input
     * channels than a vector: the ConvNet's conv1 took 1.43 ms there against 0.46 ms). */
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
        !impl)
        impl = "?";
    if (strncmp(impl, "ref", 3) == 0 ||
        (pl->kind == PLAN_BACKWARD_WEIGHTS && cs->c < 8 && !strstr(impl, "avx512"))) {
        dnnl_primitive_desc_destroy(pd);
        return error_set("oneDNN's %s is slower here than the backend's im2col + sgemm, which "
                         "runs this convolution",
                         impl);
    }
    static const dnnl_query_t queries[3][ARGS] = {
        {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
        {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md},
        {dnnl_query_src_md, dnnl_query_diff_dst_md, dnnl_query_diff_weights_md},
    };
    dnnl_memory_desc_t want[ARGS];
    for (int i = 0; i < ARGS; i++)
        want[i] = *dnnl_primitive_desc_query_md(pd, queries[pl->kind][i], 0);
    if (prim_init(cd, pd, &pl->conv))
        return -1;
    dnnl_dims_t xd, wd, yd;
    dims4(xd, cs->n, cs->c, cs->h, cs->w);
    dims4(wd, cs->k, cs->c, cs->r, cs->s);
    dims4(yd, cs->n, cs->k, cs->p, cs->q);
    dnnl_memory_desc_t x, w, y;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&x, 4, xd, dnnl_f32, dnnl_nchw), "nchw desc");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_oihw), "oihw desc");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&y, 4, yd, dnnl_f32, dnnl_nchw), "nchw desc");
    const dnnl_memory_desc_t *plain[3][ARGS] = {{&x, &w, &y}, {&y, &w, &x}, {&x, &y, &w}};
    for (int i = 0; i < ARGS; i++)
        if (arg_init(cd, &pl->arg[i], plain[pl->kind][i], &want[i], i == ARGS - 1))
            return -1;
    if (pl->bias) {
        dnnl_memory_desc_t b;
        DNNL_TRY(bias_md(cs, &b), "bias desc");
        if (mem_create(cd, &b, &pl->mem_bias))
            return -1;
    }
    return 0;
}

/* the plan of kind for cs (cs->n images per slice), created on first use; a shape oneDNN
 * refused stays refused (NULL + error_set with its reason), without building it again */
static struct plan *plan_get(struct conv_dnnl *cd, enum plan_kind kind,
                             const struct conv2d_shape *cs, int bias)
{
    for (size_t i = 0; i < cd->nplans; i++) {
        const struct plan *pl = cd->plans[i];
        if (plan_same_key(pl, kind, cs, bias)) {
            if (pl->refused)
                return error_set("%s", pl->refused), NULL;
            return cd->plans[i];
        }
    }
    if (VEC_RESERVE(cd->plans, cd->plans_cap, cd->nplans + 1))
        return error_set("oneDNN: out of memory for plans"), NULL;
    struct plan *pl = calloc(1, sizeof *pl);
    if (!pl)
        return error_set("oneDNN: out of memory for a plan"), NULL;
    *pl = (struct plan){.kind = kind, .cs = *cs, .bias = bias};
    if (plan_build(cd, pl) == 0) {
        cd->plans[cd->nplans++] = pl;
        return pl;
    }
    char *why = strdup(error_get());
    plan_free(cd, pl);
    pl = calloc(1, sizeof *pl);
    if (why && pl) {
        *pl = (struct plan){.kind = kind, .cs = *cs, .bias = bias, .refused = why};
        cd->plans[cd->nplans++] = pl;
    } else {
        free(why);
        free(pl);
    }
    return NULL;
}

/* ------------------------------------------------------------------ slices */

/* A call's split of the batch: slices of nb images (the last one shorter), per_thread
 * consecutive slices per thread, on `threads` threads; plans for a full and the last
 * slice of each kind used. */
struct split {
    int n, nb, slices, per_thread, threads;
};

static void split_plan(const struct conv_dnnl *cd, int n, struct split *sp)
{
    const int T = cd->pool.threads;
    int nb = (n + T - 1) / T;
    if (cd->pool.chunk > 0 && nb > cd->pool.chunk)
        nb = cd->pool.chunk;
    if (nb < 1)
        nb = 1;
    sp->n = n;
    sp->nb = nb;
    sp->slices = (n + nb - 1) / nb;
    sp->per_thread = (sp->slices + T - 1) / T;
    sp->threads = (sp->slices + sp->per_thread - 1) / sp->per_thread;
}

/* images of slice i */
static int split_images(const struct split *sp, int i)
{
    return sp->n - i * sp->nb < sp->nb ? sp->n - i * sp->nb : sp->nb;
}

/* the plans of kind for a full slice [0] and the last slice [1] (the same when equal) */
static int plans_for(struct conv_dnnl *cd, const struct split *sp, enum plan_kind kind,
                     const struct conv2d_shape *cs, int bias, struct plan *out[2])
{
    struct conv2d_shape s = *cs;
    s.n = sp->nb;
    if (!(out[0] = plan_get(cd, kind, &s, bias)))
        return -1;
    s.n = split_images(sp, sp->slices - 1);
    if (!(out[1] = plan_get(cd, kind, &s, bias)))
        return -1;
    return 0;
}

/* at least `bytes` per thread for `threads` threads; -1 + error_set when it cannot grow */
static int ws_reserve(struct conv_dnnl *cd, size_t bytes, int threads)
{
    bytes = round_up(bytes);
    if (bytes <= cd->ws_stride && (size_t)threads <= cd->ws_threads)
        return 0;
    if (bytes < cd->ws_stride)
        bytes = cd->ws_stride;
    if ((size_t)threads < cd->ws_threads)
        threads = (int)cd->ws_threads;
    char *ws = aligned_alloc(DNNL_ALIGN, bytes * (size_t)threads);
    if (!ws)
        return error_set("oneDNN: cannot allocate a %zu-byte convolution workspace",
                         bytes * (size_t)threads);
    free(cd->ws);
    cd->ws = ws;
    cd->ws_stride = bytes;
    cd->ws_threads = (size_t)threads;
    return 0;
}

static int wbuf_reserve(struct conv_dnnl *cd, size_t bytes)
{
    if (bytes <= cd->wbuf_bytes)
        return 0;
    char *b = aligned_alloc(DNNL_ALIGN, round_up(bytes));
    if (!b)
        return error_set("oneDNN: cannot allocate %zu bytes for the weights", bytes);
    free(cd->wbuf);
    cd->wbuf = b;
    cd->wbuf_bytes = round_up(bytes);
    return 0;
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* the largest scratchpad of a plan's primitives */
static size_t plan_scratch(const struct plan *pl)
{
    size_t s = pl->conv.scratch_bytes;
    for (int i = 0; i < ARGS; i++)
        s = max_size(s, pl->arg[i].reorder.scratch_bytes);
    return s;
}

/* ------------------------------------------------------------------ forward */

/* A call's state shared by its threads.  Thread t's workspace part: in (the wanted input
 * layout), out (the wanted output), then (backward) a second input and the weight
 * gradient's part and slice, then the scratchpad. */
struct job {
    struct conv_dnnl *cd;
    struct split sp;
    struct plan *fwd[2], *bd[2], *bw[2];
    const struct conv2d_shape *cs;
    const float *x, *b, *dy;
    const void *wei; /* the weights as the convolution wants them */
    float *y, *dx;
    int want_dw;
    size_t off_in, off_out, off_in2, off_dw, off_dw_slice, off_scratch;
    int failed; /* a thread's oneDNN call failed (its message is on that thread) */
    char err[256];
};

static void job_fail(struct job *job)
{
    if (!__atomic_exchange_n(&job->failed, 1, __ATOMIC_ACQ_REL))
        snprintf(job->err, sizeof job->err, "%s", error_get());
}

static int forward_slice(struct job *job, int t, int i)
{
    struct conv_dnnl *cd = job->cd;
    const struct conv2d_shape *cs = job->cs;
    const int m = split_images(&job->sp, i);
    struct plan *pl = job->fwd[m == job->sp.nb ? 0 : 1];
    const size_t i0 = (size_t)i * job->sp.nb;
    char *ws = cd->ws + (size_t)t * cd->ws_stride;
    struct arg *src = &pl->arg[0], *wei = &pl->arg[1], *dst = &pl->arg[2];
    if (arg_bind(src, t, job->x + i0 * cs->c * cs->h * cs->w, ws + job->off_in) ||
        arg_bind_want(wei, t, job->wei) ||
        arg_bind(dst, t, job->y + i0 * cs->k * cs->p * cs->q, ws + job->off_out) ||
        arg_reorder(cd, src, t, 0, ws + job->off_scratch))
        return -1;
    dnnl_exec_arg_t args[5] = {
        {DNNL_ARG_SRC, src->mem_want[t]},
        {DNNL_ARG_WEIGHTS, wei->mem_want[t]},
        {DNNL_ARG_DST, dst->mem_want[t]},
    };
    int nargs = 3;
    if (pl->bias) {
        DNNL_TRY(dnnl_memory_set_data_handle(pl->mem_bias[t], (void *)(uintptr_t)job->b),
                 "bind bias");
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                                          pl->mem_bias[t]};
    }
    if (prim_exec(cd, &pl->conv, t, args, nargs, ws + job->off_scratch))
        return -1;
    return arg_reorder(cd, dst, t, 1, ws + job->off_scratch);
}

static void forward_task(void *arg, int t)
{
    struct job *job = arg;
    dnnl_single_thread();
    const int end = (t + 1) * job->sp.per_thread < job->sp.slices
                        ? (t + 1) * job->sp.per_thread
                        : job->sp.slices;
    for (int i = t * job->sp.per_thread; i < end; i++)
        if (forward_slice(job, t, i)) {
            job_fail(job);
            return;
        }
    if (dnnl_stream_wait(job->cd->streams[t]) != dnnl_success)
        job_fail(job);
}

/* The weights w (plain) as arg a of plans[0] and plans[1] wants them: w itself, or
 * reordered into cd->wbuf on the calling thread (scratch: its scratchpad).  -1 when the
 * two plans want different layouts (never seen; the caller falls back). */
static const void *weights_in(struct conv_dnnl *cd, struct plan *const plans[2], int a,
                              const float *w, void *scratch)
{
    struct arg *wa = &plans[0]->arg[a];
    if (!dnnl_memory_desc_equal(&wa->want, &plans[1]->arg[a].want))
        return error_set("oneDNN: slices of two sizes want different weight layouts"), NULL;
    if (wa->same)
        return w;
    if (wbuf_reserve(cd, wa->want_bytes) || arg_bind(wa, 0, w, cd->wbuf) ||
        arg_reorder(cd, wa, 0, 0, scratch))
        return NULL;
    if (dnnl_stream_wait(cd->streams[0]) != dnnl_success)
        return error_set("oneDNN: waiting for the weights' reorder"), NULL;
    return cd->wbuf;
}

static int job_run(struct job *job, void (*task)(void *arg, int t))
{
    struct conv_dnnl *cd = job->cd;
    cd->pool.run(cd->pool.ctx, job->sp.threads, task, job);
    if (job->failed)
        return error_set("%s", job->err);
    return 0;
}

int conv_dnnl_forward(struct conv_dnnl *cd, const struct conv2d_shape *cs, const float *x,
                      const float *w, const float *b, float *y)
{
    dnnl_single_thread();
    struct job job = {.cd = cd, .cs = cs, .x = x, .b = b, .y = y};
    split_plan(cd, cs->n, &job.sp);
    if (plans_for(cd, &job.sp, PLAN_FORWARD, cs, b != NULL, job.fwd))
        return -1;
    size_t in = 0, out = 0, scratch = 0;
    for (int j = 0; j < 2; j++) {
        const struct plan *pl = job.fwd[j];
        in = max_size(in, pl->arg[0].same ? 0 : round_up(pl->arg[0].want_bytes));
        out = max_size(out, pl->arg[2].same ? 0 : round_up(pl->arg[2].want_bytes));
        scratch = max_size(scratch, round_up(plan_scratch(pl)));
    }
    job.off_in = 0;
    job.off_out = in;
    job.off_scratch = in + out;
    if (ws_reserve(cd, in + out + scratch, job.sp.threads))
        return -1;
    if (!(job.wei = weights_in(cd, job.fwd, 1, w, cd->ws + job.off_scratch)))
        return -1;
    return job_run(&job, forward_task);
}

/* ------------------------------------------------------------------ backward */

/* f += g, n floats */
static void add_floats(float *f, const float *g, size_t n)
{
    for (size_t j = 0; j < n; j++)
        f[j] += g[j];
}

static int backward_slice(struct job *job, int t, int i, int first)
{
    struct conv_dnnl *cd = job->cd;
    const struct conv2d_shape *cs = job->cs;
    const int m = split_images(&job->sp, i), which = m == job->sp.nb ? 0 : 1;
    const size_t i0 = (size_t)i * job->sp.nb;
    char *ws = cd->ws + (size_t)t * cd->ws_stride, *scratch = ws + job->off_scratch;
    const float *dy = job->dy + i0 * cs->k * cs->p * cs->q;
    const float *x = job->x + i0 * cs->c * cs->h * cs->w;
    const struct arg *dd_done = NULL; /* the diff_dst reordered for backward data */
    if (job->dx) {
        struct plan *pl = job->bd[which];
        struct arg *ddst = &pl->arg[0], *wei = &pl->arg[1], *dsrc = &pl->arg[2];
        if (arg_bind(ddst, t, dy, ws + job->off_in) || arg_bind_want(wei, t, job->wei) ||
            arg_bind(dsrc, t, job->dx + i0 * cs->c * cs->h * cs->w, ws + job->off_out) ||
            arg_reorder(cd, ddst, t, 0, scratch))
            return -1;
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_DIFF_DST, ddst->mem_want[t]},
            {DNNL_ARG_WEIGHTS, wei->mem_want[t]},
            {DNNL_ARG_DIFF_SRC, dsrc->mem_want[t]},
        };
        if (prim_exec(cd, &pl->conv, t, args, 3, scratch) ||
            arg_reorder(cd, dsrc, t, 1, scratch))
            return -1;
        dd_done = ddst;
    }
    if (job->want_dw) {
        struct plan *pl = job->bw[which];
        struct arg *src = &pl->arg[0], *ddst = &pl->arg[1], *dwei = &pl->arg[2];
        /* diff_dst in the layout backward data already reordered it to, when the same */
        const int reuse = dd_done && !ddst->same && !dd_done->same &&
                          dnnl_memory_desc_equal(&dd_done->want, &ddst->want);
        char *dd_want = reuse ? ws + job->off_in : ws + job->off_in2;
        char *dw_out = ws + (first ? job->off_dw : job->off_dw_slice);
        if (arg_bind(src, t, x, ws + job->off_out) || arg_bind(ddst, t, dy, dd_want) ||
            arg_reorder(cd, src, t, 0, scratch) || (!reuse && arg_reorder(cd, ddst, t, 0, scratch)))
            return -1;
        DNNL_TRY(dnnl_memory_set_data_handle(dwei->mem_want[t], dw_out), "bind");
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_SRC, src->mem_want[t]},
            {DNNL_ARG_DIFF_DST, ddst->mem_want[t]},
            {DNNL_ARG_DIFF_WEIGHTS, dwei->mem_want[t]},
        };
        if (prim_exec(cd, &pl->conv, t, args, 3, scratch))
            return -1;
        if (!first) {
            DNNL_TRY(dnnl_stream_wait(cd->streams[t]), "wait");
            add_floats((float *)(ws + job->off_dw), (const float *)dw_out,
                       dwei->want_bytes / sizeof(float));
        }
    }
    return 0;
}

static void backward_task(void *arg, int t)
{
    struct job *job = arg;
    dnnl_single_thread();
    const int begin = t * job->sp.per_thread;
    const int end = begin + job->sp.per_thread < job->sp.slices ? begin + job->sp.per_thread
                                                                : job->sp.slices;
    for (int i = begin; i < end; i++)
        if (backward_slice(job, t, i, i == begin)) {
            job_fail(job);
            return;
        }
    if (dnnl_stream_wait(job->cd->streams[t]) != dnnl_success)
        job_fail(job);
}

int conv_dnnl_backward(struct conv_dnnl *cd, const struct conv2d_shape *cs, const float *x,
                       const float *w, const float *dy, float *dx, float *dw)
{
    if (!dx && !dw)
        return 0;
    dnnl_single_thread();
    struct job job = {.cd = cd, .cs = cs, .x = x, .dy = dy, .dx = dx, .want_dw = dw != NULL};
    split_plan(cd, cs->n, &job.sp);
    /* both kinds' plans, even for one output: where oneDNN refuses either, the caller
     * computes both, so how dx is computed never depends on whether dw is asked for */
    if (plans_for(cd, &job.sp, PLAN_BACKWARD_DATA, cs, 0, job.bd) ||
        plans_for(cd, &job.sp, PLAN_BACKWARD_WEIGHTS, cs, 0, job.bw))
        return -1;
    /* thread parts: in (diff_dst for backward data), out (diff_src, then src for backward
     * weights), in2 (diff_dst for backward weights), dw, dw_slice, scratch */
    size_t in = 0, out = 0, in2 = 0, dwb = 0, scratch = 0;
    for (int j = 0; j < 2; j++) {
        if (dx) {
            const struct plan *pl = job.bd[j];
            in = max_size(in, pl->arg[0].same ? 0 : round_up(pl->arg[0].want_bytes));
            out = max_size(out, pl->arg[2].same ? 0 : round_up(pl->arg[2].want_bytes));
            scratch = max_size(scratch, round_up(plan_scratch(pl)));
        }
        if (dw) {
            const struct plan *pl = job.bw[j];
            out = max_size(out, pl->arg[0].same ? 0 : round_up(pl->arg[0].want_bytes));
            in2 = max_size(in2, pl->arg[1].same ? 0 : round_up(pl->arg[1].want_bytes));
            dwb = max_size(dwb, round_up(pl->arg[2].want_bytes));
            scratch = max_size(scratch, round_up(plan_scratch(pl)));
        }
    }
    job.off_in = 0;
    job.off_out = in;
    job.off_in2 = in + out;
    job.off_dw = in + out + in2;
    job.off_dw_slice = job.off_dw + dwb;
    job.off_scratch = job.off_dw_slice + (job.sp.per_thread > 1 ? dwb : 0);
    if (ws_reserve(cd, job.off_scratch + scratch, job.sp.threads))
        return -1;
    if (dx && !(job.wei = weights_in(cd, job.bd, 1, w, cd->ws + job.off_scratch)))
        return -1;
    if (job_run(&job, backward_task))
        return -1;
    if (!dw)
        return 0;
    /* the threads' parts, in thread order, into thread 0's; then into dw's layout */
    struct arg *dwei = &job.bw[0]->arg[2];
    float *sum = (float *)(cd->ws + job.off_dw);
    for (int t = 1; t < job.sp.threads; t++)
        add_floats(sum, (const float *)(cd->ws + (size_t)t * cd->ws_stride + job.off_dw),
                   dwei->want_bytes / sizeof(float));
    if (dwei->same) {
        memcpy(dw, sum, dwei->want_bytes);
        return 0;
    }
    if (arg_bind(dwei, 0, dw, sum) ||
        arg_reorder(cd, dwei, 0, 1, cd->ws + job.off_scratch))
        return -1;
    DNNL_TRY(dnnl_stream_wait(cd->streams[0]), "wait");
    return 0;
}

/* ------------------------------------------------------------------ create, destroy */

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

/* whether this oneDNN has Winograd kernels on this machine: a forward primitive for a
 * shape conv_alg gives Winograd (64 channels, 8x8) can be created */
static int winograd_here(struct conv_dnnl *cd)
{
    struct plan pl = {.kind = PLAN_FORWARD,
                      .cs = {.n = 1, .c = 64, .h = 8, .w = 8, .k = 64, .r = 3, .s = 3,
                             .pad = 1, .stride = 1, .p = 8, .q = 8}};
    dnnl_primitive_desc_t pd;
    if (conv_alg(cd, &pl.cs) != dnnl_convolution_winograd ||
        conv_pd(cd, &pl, dnnl_convolution_winograd, &pd)) {
        error_clear();
        return 0;
    }
    dnnl_primitive_desc_destroy(pd);
    return 1;
}

/* the backend's cap below the machine's ISA (cpu_isa.h) holds oneDNN's kernels to it too,
 * unless oneDNN's own variables say otherwise; oneDNN takes it before its first kernel
 * only, and the cap is one process-wide variable, so the first call decides */
static void dnnl_cap_isa(enum cpu_isa cap)
{
    if (cap >= cpu_isa_machine() || getenv("ONEDNN_MAX_CPU_ISA") || getenv("DNNL_MAX_CPU_ISA"))
        return;
    (void)dnnl_set_max_cpu_isa(cap == CPU_ISA_AVX2 ? dnnl_cpu_isa_avx2 : dnnl_cpu_isa_sse41);
}

struct conv_dnnl *conv_dnnl_create(const struct conv_pool *pool, int allow_winograd,
                                   enum cpu_isa cap)
{
    if (pool->threads < 1)
        return error_set("conv_dnnl_create: %d threads", pool->threads), NULL;
    struct conv_dnnl *cd = calloc(1, sizeof *cd);
    if (!cd)
        return error_set("oneDNN: out of memory"), NULL;
    cd->pool = *pool;
    cd->allow_winograd = allow_winograd;
    dnnl_cap_isa(cap);
    dnnl_single_thread();
    dnnl_status_t st = dnnl_engine_create(&cd->engine, dnnl_cpu, 0);
    if (st == dnnl_success)
        st = dnnl_primitive_attr_create(&cd->attr);
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_scratchpad_mode(cd->attr, dnnl_scratchpad_mode_user);
    cd->streams = calloc((size_t)pool->threads, sizeof *cd->streams);
    if (st == dnnl_success && !cd->streams)
        st = dnnl_out_of_memory;
    for (int t = 0; st == dnnl_success && t < pool->threads; t++)
        st = dnnl_stream_create(&cd->streams[t], cd->engine, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        dnnl_fail(st, "starting the CPU engine");
        conv_dnnl_destroy(cd);
        return NULL;
    }
    cd->winograd = winograd_here(cd);
    const dnnl_version_t *v = dnnl_version();
    snprintf(cd->describe, sizeof cd->describe, "oneDNN %d.%d.%d (cpu isa %s, %s runtime%s)",
             v->major, v->minor, v->patch, isa_name(dnnl_get_effective_cpu_isa()),
             v->cpu_runtime == DNNL_RUNTIME_OMP ? "omp" : "other",
             cd->winograd ? ", Winograd for 3x3 layers from 8x8 pixels" : "");
    return cd;
}

int conv_dnnl_winograd(const struct conv_dnnl *cd) { return cd->winograd; }

void conv_dnnl_destroy(struct conv_dnnl *cd)
{
    if (!cd)
        return;
    for (size_t i = 0; i < cd->nplans; i++)
        plan_free(cd, cd->plans[i]);
    free(cd->plans);
    for (int t = 0; cd->streams && t < cd->pool.threads; t++)
        if (cd->streams[t])
            dnnl_stream_destroy(cd->streams[t]);
    free(cd->streams);
    if (cd->attr)
        dnnl_primitive_attr_destroy(cd->attr);
    if (cd->engine)
        dnnl_engine_destroy(cd->engine);
    free(cd->ws);
    free(cd->wbuf);
    free(cd);
}

const char *conv_dnnl_describe(const struct conv_dnnl *cd) { return cd->describe; }

int conv_dnnl_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    dnnl_single_thread();
    return dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                      beta, c, ldc) == dnnl_success
               ? 0
               : -1;
}
