/* conv_plan.c — cuDNN convolution plans and algorithm choice (see conv_plan.h). */
#include "cuda/conv_plan.h"

#include "cuda/conv_algos.h"
#include "cuda/conv_cache.h"

#include "common/clock.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "common/vec.h"
#include "cuda/backend_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most workspace one convolution algorithm may ask for. */
#define CONV_WS_LIMIT ((size_t)1 << 30)

static const char *const conv_dir_name[] = {"forward", "backward data", "backward filter"};
static const char *const conv_dtype_name[] = {"fp32", "fp16", "bf16"}; /* enum dtype */

/* How far a direction's candidate list has been filled (struct conv_algos.stage): each
 * stage asks cuDNN more, and only when every candidate so far has failed. */
enum conv_stage {
    CONV_UNASKED = 0, /* nothing yet */
    CONV_CACHED,      /* the choice of an earlier run, from the cache: no query */
    CONV_TOP,         /* the first of cuDNN's heuristics (the v7 query asked for 1 result) */
    CONV_RANKED,      /* cuDNN's whole ranking: heuristics, or timed with find_algos */
};
static const char *const conv_stage_name[] = {"none", "the cache", "cuDNN's heuristics' first",
                                              "cuDNN's heuristics' ranking"};

struct conv_plan {
    struct conv2d_shape cs; /* key (with dt and lay) */
    enum dtype dt;
    enum layout lay;
    struct cudnn_conv_desc d;
    struct conv_algos dir[3];
    struct conv_cache_value stored[3]; /* what the cache holds for each direction */
    int has_stored[3];
    int logged[3];      /* the algorithm that ran was said (DDPPROF_CUDNN_LOG) */
    int64_t choose_ns[3]; /* host time cuDNN took to choose (0 from the cache) */
};

struct conv_plans {
    cudnnHandle_t cudnn;   /* the backend's */
    cudaStream_t stream;   /* cudnn's stream */
    int device;
    int find_algos;        /* DDPPROF_CUDNN_BENCHMARK=1 */
    int tf32;              /* fp32 convolutions may use TF32 (--tf32 on) */
    int log;               /* DDPPROF_CUDNN_LOG=1: say each plan's algorithm once */
    struct conv_cache *cache; /* NULL: none */
    char gpu[CONV_CACHE_GPU_LEN]; /* the GPU in the cache's keys */
    long cudnn_version;
    struct cuda_buffer ws; /* the workspace every algorithm runs with */
    struct conv_plan **plans;
    size_t nplans, cap_plans;
};

struct conv_plans *conv_plans_create(cudnnHandle_t cudnn, cudaStream_t stream, int device,
                                     const struct conv_plans_opts *o)
{
    struct conv_plans *cp = calloc(1, sizeof *cp);
    if (!cp) {
        error_set("CUDA backend: out of memory for convolution plans");
        return NULL;
    }
    cp->cudnn = cudnn;
    cp->stream = stream;
    cp->device = device;
    cp->find_algos = o->find_algos;
    cp->tf32 = o->tf32;
    cp->cudnn_version = (long)cudnnGetVersion();
    const char *log = getenv("DDPPROF_CUDNN_LOG");
    cp->log = log && *log && strcmp(log, "0") != 0;
    if (o->cache_path && o->gpu && o->gpu[0]) {
        snprintf(cp->gpu, sizeof cp->gpu, "%s", o->gpu);
        if (!(cp->cache = conv_cache_open(o->cache_path))) {
            free(cp);
            return NULL;
        }
    }
    return cp;
}

void conv_plans_free(struct conv_plans *cp)
{
    if (!cp)
        return;
    for (size_t i = 0; i < cp->nplans; i++) {
        cudnn_conv_desc_free(&cp->plans[i]->d);
        free(cp->plans[i]);
    }
    free(cp->plans);
    cuda_buffer_free(&cp->ws);
    conv_cache_free(cp->cache);
    free(cp);
}

/* fp32 data held to strict FP32: --tf32 off, the CPU oracle's precision */
static int conv_strict(const struct conv_plans *cp, enum dtype dt)
{
    return dt == DT_F32 && !cp->tf32;
}

/* The math type cuDNN ranks a direction under, as PyTorch sets the descriptor
 * (aten/src/ATen/cudnn/Descriptors.h): half data CUDNN_TENSOR_OP_MATH; fp32 data
 * CUDNN_DEFAULT_MATH where TF32 is allowed (torch.backends.cudnn.allow_tf32, True by
 * default: TF32 tensor cores on Ampere and later), else CUDNN_FMA_MATH. */
static cudnnMathType_t conv_query_math(const struct conv_plans *cp, enum dtype dt)
{
    return dt != DT_F32 ? CUDNN_TENSOR_OP_MATH : cp->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

/* the cache's name for that math */
static int conv_cache_math(const struct conv_plans *cp, enum dtype dt)
{
    return dt != DT_F32 ? CONV_CACHE_TENSOR_OP : cp->tf32 ? CONV_CACHE_TF32 : CONV_CACHE_FMA;
}

/* The math type a candidate runs with: strict fp32 always FMA (no TF32, whatever cuDNN
 * reported); otherwise the math type cuDNN ranked the algorithm with, since cuDNN picks an
 * algorithm's tensor-core variant by the pair (algorithm, math type), as PyTorch sets the
 * descriptor from the chosen perf result.  Set on the descriptor before the workspace
 * query and before each run. */
static cudnnMathType_t conv_math(const struct conv_plans *cp, enum dtype dt,
                                 cudnnMathType_t reported)
{
    return conv_strict(cp, dt) ? CUDNN_FMA_MATH : reported;
}

/* the descriptor's math type for cuDNN's ranking of a direction (an earlier direction's
 * candidates may have left another one set) */
static int conv_math_reset(const struct conv_plans *cp, struct conv_plan *pl)
{
    return CHECK_CUDNN(cudnnSetConvolutionMathType(pl->d.conv, conv_query_math(cp, pl->dt)));
}

/* fp32 convolutions sum their products directly (implicit or explicit GEMM, direct, and
 * the small fused Winograd): FFT, FFT_TILING and WINOGRAD_NONFUSED transform the data and
 * round in the transformed domain.  On an H200 (cuDNN 9.14, DDPPROF_CUDNN_BENCHMARK=1)
 * fp32 backward results of the ConvNet's 5x5 layers were 3.9e-3 of their range off the CPU
 * oracle (dx 0.050 at a range of 43); without these candidates find mode chose ALGO_1
 * there, 2.8e-5 off as the heuristics' choices (and for the same shapes in fp16 cuDNN
 * chose WINOGRAD_NONFUSED, 4.7 fp16 spacings of the range off).  Strict fp32 is the
 * precision that matches the oracle, so these are not candidates for it; half types keep
 * them (tests/test_backend_ops.c allows their rounding), and so does fp32 with TF32
 * allowed, which TF32's 10-bit mantissa already takes off the oracle (PyTorch's default
 * fp32, for speed beside it; not compared with the oracle). */
static int conv_transform_algo(enum conv_dir dir, int algo)
{
    switch (dir) {
    case CONV_FWD:
        return algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    case CONV_BWD_DATA:
        return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    default:
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
    }
}

/* one result of cuDNN's ranking, whichever direction's perf struct it came in */
struct conv_perf {
    int algo;
    cudnnStatus_t status;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
};

/* cuDNN's result p of direction dir may be a candidate of plan pl */
static int conv_candidate(const struct conv_plans *cp, const struct conv_plan *pl,
                          enum conv_dir dir, const struct conv_perf *p)
{
    return p->status == CUDNN_STATUS_SUCCESS &&
           !(conv_strict(cp, pl->dt) && conv_transform_algo(dir, p->algo));
}

/* Preference class of a cuDNN result: 0 best.  Deterministic algorithms come first (runs
 * repeat bit for bit); strict fp32 results that report tensor-core math (TF32) come last,
 * kept only as a fallback: the descriptor's FMA math type still applies when they run. */
static int conv_class(const struct conv_plans *cp, enum dtype dt, const struct conv_perf *p)
{
    const int tf32 = conv_strict(cp, dt) && (p->math == CUDNN_TENSOR_OP_MATH ||
                                             p->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
    return 2 * tf32 + (p->det != CUDNN_DETERMINISTIC);
}

/* How many results cuDNN's ranking of dir can give (at most CONV_MAX_CANDIDATES). */
static int conv_max_count(struct conv_plans *cp, enum conv_dir dir, int *max)
{
    *max = 0;
    if (dir == CONV_FWD ? CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(cp->cudnn, max))
        : dir == CONV_BWD_DATA
            ? CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cp->cudnn, max))
            : CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cp->cudnn, max)))
        return -1;
    if (*max > CONV_MAX_CANDIDATES)
        *max = CONV_MAX_CANDIDATES;
    return 0;
}

#define CONV_PERF_COPY(perf, out, got)                                                     \
    for (int i_ = 0; i_ < (got); i_++)                                                     \
        (out)[i_] = (struct conv_perf){(int)(perf)[i_].algo, (perf)[i_].status,             \
                                       (perf)[i_].determinism, (perf)[i_].mathType}

/* cuDNN's ranking of direction dir of pl, best first: up to max results of its heuristics
 * (cudnnGet*Algorithm_v7), or with find every algorithm timed (cudnnFind*).  0 or -1. */
static int conv_query(struct conv_plans *cp, const struct conv_plan *pl, enum conv_dir dir,
                      int max, int find, struct conv_perf *out, int *got)
{
    const struct cudnn_conv_desc *d = &pl->d;
    *got = 0;
    if (dir == CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CONV_MAX_CANDIDATES];
        if (find ? CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithm(
                       cp->cudnn, d->x, d->w, d->conv, d->y, max, got, perf))
                 : CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(
                       cp->cudnn, d->x, d->w, d->conv, d->y, max, got, perf)))
            return -1;
        CONV_PERF_COPY(perf, out, *got);
    } else if (dir == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CONV_MAX_CANDIDATES];
        if (find ? CHECK_CUDNN(cudnnFindConvolutionBackwardDataAlgorithm(
                       cp->cudnn, d->w, d->y, d->conv, d->x, max, got, perf))
                 : CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                       cp->cudnn, d->w, d->y, d->conv, d->x, max, got, perf)))
            return -1;
        CONV_PERF_COPY(perf, out, *got);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CONV_MAX_CANDIDATES];
        if (find ? CHECK_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithm(
                       cp->cudnn, d->x, d->y, d->conv, d->w, max, got, perf))
                 : CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                       cp->cudnn, d->x, d->y, d->conv, d->w, max, got, perf)))
            return -1;
        CONV_PERF_COPY(perf, out, *got);
    }
    if (*got > max)
        *got = max;
    return 0;
}

/* The cache's key of direction dir of pl */
static void conv_cache_key_of(const struct conv_plans *cp, const struct conv_plan *pl,
                              enum conv_dir dir, struct conv_cache_key *k)
{
    memset(k, 0, sizeof *k);
    snprintf(k->gpu, sizeof k->gpu, "%s", cp->gpu);
    k->cudnn = cp->cudnn_version;
    k->find = cp->find_algos != 0;
    k->dir = (int)dir;
    k->dtype = (int)pl->dt;
    k->layout = (int)pl->lay;
    k->math = conv_cache_math(cp, pl->dt);
    const struct conv2d_shape *cs = &pl->cs;
    k->n = cs->n, k->c = cs->c, k->h = cs->h, k->w = cs->w, k->k = cs->k, k->r = cs->r;
    k->s = cs->s, k->pad = cs->pad, k->stride = cs->stride;
    k->dilation = 1, k->groups = 1; /* cudnn_desc.c: no dilation, one group */
}

/* Fill the candidates of direction dir one stage further (enum conv_stage), asking cuDNN
 * only what that stage needs: from nothing, the cache's choice (no query); then the first
 * of cuDNN's heuristics, kept only when it is the candidate the whole ranking would put
 * first (conv_candidate, preference class 0), so the choice is the same, made with one
 * small query; then the whole ranking, within each preference class in cuDNN's order (or
 * timed, with find_algos: straight there).  0, or -1 (error_set) when cuDNN's query
 * failed. */
static int conv_expand(struct conv_plans *cp, struct conv_plan *pl, enum conv_dir dir)
{
    struct conv_algos *a = &pl->dir[dir];
    struct conv_perf perf[CONV_MAX_CANDIDATES];
    int got = 0, max = 0;
    if (a->stage == CONV_UNASKED && cp->cache) {
        a->stage = CONV_CACHED;
        struct conv_cache_key k;
        conv_cache_key_of(cp, pl, dir, &k);
        struct conv_cache_value v;
        if (conv_cache_find(cp->cache, &k, &v)) {
            pl->stored[dir] = v;
            pl->has_stored[dir] = 1;
            /* a line the rules would not have chosen (an edited file) is not taken */
            if (v.ws <= CONV_WS_LIMIT &&
                !(conv_strict(cp, pl->dt) && conv_transform_algo(dir, v.algo)) &&
                conv_algos_add(a, v.algo, (int)conv_math(cp, pl->dt, (cudnnMathType_t)v.math),
                               v.ws, CONV_WS_LIMIT))
                return 0;
        }
    }
    const int64_t t0 = clock_now_ns();
    int rc = -1;
    if (conv_math_reset(cp, pl))
        goto out;
    if (a->stage < CONV_TOP && !cp->find_algos) {
        a->stage = CONV_TOP;
        if (conv_query(cp, pl, dir, 1, 0, perf, &got))
            goto out;
        if (got == 1 && conv_candidate(cp, pl, dir, &perf[0]) &&
            conv_class(cp, pl->dt, &perf[0]) == 0 &&
            conv_algos_add(a, perf[0].algo, (int)conv_math(cp, pl->dt, perf[0].math),
                           CONV_WS_UNKNOWN, CONV_WS_LIMIT)) {
            rc = 0;
            goto out;
        }
    }
    a->stage = CONV_RANKED;
    if (conv_max_count(cp, dir, &max) || conv_query(cp, pl, dir, max, cp->find_algos, perf, &got))
        goto out;
    for (int pass = 0; pass < 4; pass++)
        for (int i = 0; i < got; i++)
            if (conv_candidate(cp, pl, dir, &perf[i]) && conv_class(cp, pl->dt, &perf[i]) == pass)
                conv_algos_add(a, perf[i].algo, (int)conv_math(cp, pl->dt, perf[i].math),
                               CONV_WS_UNKNOWN, CONV_WS_LIMIT);
    rc = 0;
out:
    pl->choose_ns[dir] += clock_now_ns() - t0;
    return rc;
}

/* Remember in the cache the choice that ran: candidate i of direction dir, when it is the
 * first live one (a better one skipped for want of memory this time is not a choice). */
static void conv_store(struct conv_plans *cp, struct conv_plan *pl, enum conv_dir dir, int i)
{
    const struct conv_algos *a = &pl->dir[dir];
    if (!cp->cache || i != conv_algos_next(a, 0))
        return;
    const struct conv_cache_value v = {.algo = a->algo[i], .math = a->math[i], .ws = a->ws[i]};
    const struct conv_cache_value *s = &pl->stored[dir];
    if (pl->has_stored[dir] && s->algo == v.algo && s->math == v.math && s->ws == v.ws)
        return;
    struct conv_cache_key k;
    conv_cache_key_of(cp, pl, dir, &k);
    conv_cache_put(cp->cache, &k, &v); /* a failure warns once and costs the next run a query */
    pl->stored[dir] = v;
    pl->has_stored[dir] = 1;
}

static void conv_shape_text(const struct conv2d_shape *cs, char *buf, size_t cap)
{
    snprintf(buf, cap, "x (%d,%d,%d,%d) w (%d,%d,%d,%d) pad %d stride %d", cs->n, cs->c, cs->h,
             cs->w, cs->k, cs->c, cs->r, cs->s, cs->pad, cs->stride);
}

/* The plan of (cs, dt), created on first use, with the candidates of direction dir. */
static struct conv_plan *conv_plan_get(struct conv_plans *cp, const struct conv2d_shape *cs,
                                       enum dtype dt, enum layout lay, enum conv_dir dir)
{
    struct conv_plan *pl = NULL;
    for (size_t i = 0; i < cp->nplans && !pl; i++) {
        const struct conv2d_shape *k = &cp->plans[i]->cs;
        if (cp->plans[i]->dt == dt && cp->plans[i]->lay == lay && k->n == cs->n && k->c == cs->c && k->h == cs->h &&
            k->w == cs->w && k->k == cs->k && k->r == cs->r && k->s == cs->s &&
            k->pad == cs->pad && k->stride == cs->stride)
            pl = cp->plans[i];
    }
    if (!pl) {
        if (VEC_RESERVE(cp->plans, cp->cap_plans, cp->nplans + 1)) {
            error_set("CUDA backend: out of memory for convolution plans");
            return NULL;
        }
        pl = calloc(1, sizeof *pl);
        if (!pl) {
            error_set("CUDA backend: out of memory for a convolution plan");
            return NULL;
        }
        pl->cs = *cs;
        pl->dt = dt;
        pl->lay = lay;
        if (cudnn_conv_desc_init(&pl->d, cs, dt, lay)) {
            free(pl);
            return NULL;
        }
        cp->plans[cp->nplans++] = pl;
    }
    struct conv_algos *a = &pl->dir[dir];
    while (conv_algos_live(a) == 0 && a->stage != CONV_RANKED)
        if (conv_expand(cp, pl, dir))
            return NULL;
    if (conv_algos_live(a) == 0) {
        char shape[160];
        conv_shape_text(cs, shape, sizeof shape);
        error_set("cuDNN has no usable %s algorithm for conv %s (%d candidates, all failed or "
                  "need more than %zu MiB of workspace)",
                  conv_dir_name[dir], shape, a->count, CONV_WS_LIMIT >> 20);
        return NULL;
    }
    return pl;
}

/* conv_algos.h names cuDNN 9's allocation failures by number */
_Static_assert(CONV_CUDNN_HOST_ALLOCATION_FAILED ==
                   CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
               "conv_algos.h: cuDNN's host allocation failure status changed");
_Static_assert(CONV_CUDNN_DEVICE_ALLOCATION_FAILED ==
                   CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
               "conv_algos.h: cuDNN's device allocation failure status changed");

/* cuDNN's workspace for algorithm algo of direction dir of pl, with the descriptor's math
 * type already set as the candidate runs */
static cudnnStatus_t conv_workspace(struct conv_plans *cp, const struct conv_plan *pl,
                                    enum conv_dir dir, int algo, size_t *ws)
{
    const struct cudnn_conv_desc *d = &pl->d;
    if (dir == CONV_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(cp->cudnn, d->x, d->w, d->conv, d->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, ws);
    if (dir == CONV_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            cp->cudnn, d->w, d->y, d->conv, d->x, (cudnnConvolutionBwdDataAlgo_t)algo, ws);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        cp->cudnn, d->x, d->y, d->conv, d->w, (cudnnConvolutionBwdFilterAlgo_t)algo, ws);
}

/* Run candidate i of direction dir of pl: its math type set, its workspace asked for if
 * unknown and reserved, then cuDNN's call.  CUDNN_STATUS_SUCCESS, or the failure, with
 * the candidate marked as conv_algos.h says (dead, or alive after a transient one). */
static cudnnStatus_t conv_try(struct conv_plans *cp, struct conv_plan *pl, enum conv_dir dir,
                              int i, const void *x, const void *w, const void *dy, void *out)
{
    struct conv_algos *a = &pl->dir[dir];
    const struct cudnn_conv_desc *d = &pl->d;
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t st = cudnnSetConvolutionMathType(d->conv, (cudnnMathType_t)a->math[i]);
    if (st != CUDNN_STATUS_SUCCESS) {
        conv_algos_failed(a, i, 0);
        return st;
    }
    if (a->ws[i] == CONV_WS_UNKNOWN) {
        size_t ws = 0;
        st = conv_workspace(cp, pl, dir, a->algo[i], &ws);
        if (st != CUDNN_STATUS_SUCCESS) {
            conv_algos_failed(a, i, 0);
            return st;
        }
        if (!conv_algos_sized(a, i, ws, CONV_WS_LIMIT))
            return CUDNN_STATUS_NOT_SUPPORTED; /* more workspace than CONV_WS_LIMIT */
    }
    if (cuda_buffer_reserve(&cp->ws, cp->stream, cp->device, a->ws[i])) {
        st = CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
        conv_algos_failed(a, i, conv_status_transient(st));
        return st;
    }
    if (dir == CONV_FWD)
        st = cudnnConvolutionForward(cp->cudnn, &one, d->x, x, d->w, w, d->conv,
                                     (cudnnConvolutionFwdAlgo_t)a->algo[i], cp->ws.ptr,
                                     a->ws[i], &zero, d->y, out);
    else if (dir == CONV_BWD_DATA)
        st = cudnnConvolutionBackwardData(cp->cudnn, &one, d->w, w, d->y, dy, d->conv,
                                          (cudnnConvolutionBwdDataAlgo_t)a->algo[i],
                                          cp->ws.ptr, a->ws[i], &zero, d->x, out);
    else
        st = cudnnConvolutionBackwardFilter(cp->cudnn, &one, d->x, x, d->y, dy, d->conv,
                                            (cudnnConvolutionBwdFilterAlgo_t)a->algo[i],
                                            cp->ws.ptr, a->ws[i], &zero, d->w, out);
    if (st != CUDNN_STATUS_SUCCESS)
        conv_algos_failed(a, i, conv_status_transient(st));
    return st;
}

/* DDPPROF_CUDNN_LOG=1: the choice that ran, once per shape and direction, with the host
 * times of choosing (cuDNN's queries; 0 from the cache) and of this first call (where
 * cuDNN builds the algorithm's plan, and may compile its kernels) */
static void conv_log(const struct conv_plans *cp, struct conv_plan *pl, enum conv_dir dir,
                     int i, int64_t call_ns)
{
    const struct conv_algos *a = &pl->dir[dir];
    char shape[160];
    conv_shape_text(&pl->cs, shape, sizeof shape);
    const int cached = a->stage == CONV_CACHED;
    fprintf(stderr, "ddpprof: cuDNN conv %s %s %s: algorithm %d, math %s, workspace %zu bytes "
            "(candidate %d of %d, from %s%s%s); chosen in %.1f ms, first call %.1f ms\n",
            conv_dir_name[dir], conv_dtype_name[pl->dt], shape, a->algo[i],
            a->math[i] == CUDNN_FMA_MATH ? "FMA"
            : a->math[i] == CUDNN_DEFAULT_MATH ? "default" : "tensor-op",
            a->ws[i], i + 1, a->count,
            a->stage == CONV_RANKED && cp->find_algos ? "cudnnFind's timings"
                                                      : conv_stage_name[a->stage],
            cached ? " " : "", cached ? conv_cache_file(cp->cache) : "",
            (double)pl->choose_ns[dir] / 1e6, (double)call_ns / 1e6);
    pl->logged[dir] = 1;
}

/* Run direction dir of pl with its best live candidate that works (conv_algos.h): one that
 * fails with a cuDNN error is dead for good and the next one tried; one whose workspace
 * cannot be allocated (or that reports a host or device allocation failure itself:
 * conv_status_transient) is skipped for this call only and tried first again the next
 * time.  When every candidate so far has failed, cuDNN is asked for more (conv_expand):
 * a cached choice that no longer runs falls back to cuDNN's heuristics, their first to
 * their whole ranking. */
static int conv_run(struct conv_plans *cp, struct conv_plan *pl, enum conv_dir dir,
                    const void *x, const void *w, const void *dy, void *out)
{
    struct conv_algos *a = &pl->dir[dir];
    cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
    const int64_t t0 = clock_now_ns();
    int i = conv_algos_next(a, 0);
    while (i < a->count || a->stage != CONV_RANKED) {
        if (i >= a->count) { /* the new candidates, if any, start at i */
            if (conv_expand(cp, pl, dir))
                return -1;
            i = conv_algos_next(a, i);
            continue;
        }
        st = conv_try(cp, pl, dir, i, x, w, dy, out);
        if (st == CUDNN_STATUS_SUCCESS) {
            conv_store(cp, pl, dir, i);
            if (cp->log && !pl->logged[dir])
                conv_log(cp, pl, dir, i, clock_now_ns() - t0);
            return 0;
        }
        i = conv_algos_next(a, i + 1);
    }
    char shape[160];
    conv_shape_text(&pl->cs, shape, sizeof shape);
    CHECK_CUDNN(st);
    return error_wrap("conv %s %s: every cuDNN algorithm failed, the last one with",
                      conv_dir_name[dir], shape);
}

int conv_plans_run(struct conv_plans *cp, const struct conv2d_shape *cs, enum dtype dt,
                   enum layout lay, enum conv_dir dir, const void *x, const void *w,
                   const void *dy, void *out)
{
    struct conv_plan *pl = conv_plan_get(cp, cs, dt, lay, dir);
    if (!pl)
        return -1;
    return conv_run(cp, pl, dir, x, w, dy, out);
}
