/* conv_plan.c — cuDNN convolution plans and algorithm choice (see conv_plan.h). */
#include "cuda/conv_plan.h"

#include "cuda/conv_algos.h"

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

struct conv_plan {
    struct conv2d_shape cs; /* key (with dt) */
    enum dtype dt;
    struct cudnn_conv_desc d;
    struct conv_algos dir[3];
    int logged[3];      /* the algorithm that ran was said (DDPPROF_CUDNN_LOG) */
    int64_t choose_ns[3]; /* host time cuDNN took to rank the candidates */
};

struct conv_plans {
    cudnnHandle_t cudnn;   /* the backend's */
    cudaStream_t stream;   /* cudnn's stream */
    int device;
    int find_algos;        /* DDPPROF_CUDNN_BENCHMARK=1 */
    int log;               /* DDPPROF_CUDNN_LOG=1: say each plan's algorithm once */
    struct cuda_buffer ws; /* the workspace every algorithm runs with */
    struct conv_plan **plans;
    size_t nplans, cap_plans;
};

struct conv_plans *conv_plans_create(cudnnHandle_t cudnn, cudaStream_t stream, int device,
                                     int find_algos)
{
    struct conv_plans *cp = calloc(1, sizeof *cp);
    if (!cp) {
        error_set("CUDA backend: out of memory for convolution plans");
        return NULL;
    }
    cp->cudnn = cudnn;
    cp->stream = stream;
    cp->device = device;
    cp->find_algos = find_algos;
    const char *log = getenv("DDPPROF_CUDNN_LOG");
    cp->log = log && *log && strcmp(log, "0") != 0;
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
    free(cp);
}

/* The math type a candidate runs with: fp32 data always strict FMA math (no TF32, whatever
 * cuDNN reported); half data the math type cuDNN ranked the algorithm with, since cuDNN
 * picks an algorithm's tensor-core variant by the pair (algorithm, math type), as PyTorch
 * sets the descriptor from the chosen perf result.  Set on the descriptor before the
 * workspace query and before each run. */
static cudnnMathType_t conv_math(enum dtype dt, cudnnMathType_t reported)
{
    return dt == DT_F32 ? CUDNN_FMA_MATH : reported;
}

/* the descriptor's math type as cudnn_desc.c set it, for cuDNN's ranking of a direction
 * (an earlier direction's candidates may have left another one set) */
static int conv_math_reset(struct conv_plan *pl)
{
    return CHECK_CUDNN(cudnnSetConvolutionMathType(
        pl->d.conv, pl->dt == DT_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
}

/* fp32 convolutions sum their products directly (implicit or explicit GEMM, direct, and
 * the small fused Winograd): FFT, FFT_TILING and WINOGRAD_NONFUSED transform the data and
 * round in the transformed domain.  On an H200 (cuDNN 9.14, DDPPROF_CUDNN_BENCHMARK=1)
 * fp32 backward results of the ConvNet's 5x5 layers were 3.9e-3 of their range off the CPU
 * oracle (dx 0.050 at a range of 43); without these candidates find mode chose ALGO_1
 * there, 2.8e-5 off as the heuristics' choices (and for the same shapes in fp16 cuDNN
 * chose WINOGRAD_NONFUSED, 4.7 fp16 spacings of the range off).  fp32 is the precision
 * that matches the oracle, so these are not candidates for it; half types keep them
 * (tests/test_backend_ops.c allows their rounding). */
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

/* cuDNN's result i of direction dir may be a candidate of plan pl */
static int conv_candidate(const struct conv_plan *pl, enum conv_dir dir, int algo,
                          cudnnStatus_t status)
{
    return status == CUDNN_STATUS_SUCCESS && !(pl->dt == DT_F32 && conv_transform_algo(dir, algo));
}

/* Preference class of a cuDNN result: 0 best.  Deterministic algorithms come first (runs
 * repeat bit for bit); fp32 results that report tensor-core math (TF32) come last, kept
 * only as a fallback: the descriptor's FMA math type still applies when they run. */
static int conv_class(enum dtype dt, cudnnDeterminism_t det, cudnnMathType_t m)
{
    const int tf32 = dt == DT_F32 && (m == CUDNN_TENSOR_OP_MATH ||
                                           m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
    return 2 * tf32 + (det != CUDNN_DETERMINISTIC);
}

/* The candidate lists: cuDNN's ranking (heuristics, or measured times with find_algos)
 * within each preference class (conv_class); each one's workspace is asked for only when
 * it is about to run (conv_workspace). */
static int conv_choose_fwd(struct conv_plans *cp, struct conv_plan *pl)
{
    cudnnConvolutionFwdAlgoPerf_t perf[CONV_MAX_CANDIDATES];
    int max = 0, got = 0;
    const struct cudnn_conv_desc *d = &pl->d;
    if (conv_math_reset(pl) ||
        CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(cp->cudnn, &max)))
        return -1;
    if (max > CONV_MAX_CANDIDATES)
        max = CONV_MAX_CANDIDATES;
    if (cp->find_algos ? CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithm(
                             cp->cudnn, d->x, d->w, d->conv, d->y, max, &got, perf))
                       : CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(
                             cp->cudnn, d->x, d->w, d->conv, d->y, max, &got, perf)))
        return -1;
    struct conv_algos *a = &pl->dir[CONV_FWD];
    for (int pass = 0; pass < 4; pass++)
        for (int i = 0; i < got; i++) {
            const cudnnMathType_t m = conv_math(pl->dt, perf[i].mathType);
            if (!conv_candidate(pl, CONV_FWD, (int)perf[i].algo, perf[i].status) ||
                conv_class(pl->dt, perf[i].determinism, perf[i].mathType) != pass)
                continue;
            conv_algos_add(a, (int)perf[i].algo, (int)m, CONV_WS_UNKNOWN, CONV_WS_LIMIT);
        }
    return 0;
}

static int conv_choose_bwd_data(struct conv_plans *cp, struct conv_plan *pl)
{
    cudnnConvolutionBwdDataAlgoPerf_t perf[CONV_MAX_CANDIDATES];
    int max = 0, got = 0;
    const struct cudnn_conv_desc *d = &pl->d;
    if (conv_math_reset(pl) ||
        CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cp->cudnn, &max)))
        return -1;
    if (max > CONV_MAX_CANDIDATES)
        max = CONV_MAX_CANDIDATES;
    if (cp->find_algos ? CHECK_CUDNN(cudnnFindConvolutionBackwardDataAlgorithm(
                             cp->cudnn, d->w, d->y, d->conv, d->x, max, &got, perf))
                       : CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                             cp->cudnn, d->w, d->y, d->conv, d->x, max, &got, perf)))
        return -1;
    struct conv_algos *a = &pl->dir[CONV_BWD_DATA];
    for (int pass = 0; pass < 4; pass++)
        for (int i = 0; i < got; i++) {
            const cudnnMathType_t m = conv_math(pl->dt, perf[i].mathType);
            if (!conv_candidate(pl, CONV_BWD_DATA, (int)perf[i].algo, perf[i].status) ||
                conv_class(pl->dt, perf[i].determinism, perf[i].mathType) != pass)
                continue;
            conv_algos_add(a, (int)perf[i].algo, (int)m, CONV_WS_UNKNOWN, CONV_WS_LIMIT);
        }
    return 0;
}

static int conv_choose_bwd_filter(struct conv_plans *cp, struct conv_plan *pl)
{
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CONV_MAX_CANDIDATES];
    int max = 0, got = 0;
    const struct cudnn_conv_desc *d = &pl->d;
    if (conv_math_reset(pl) ||
        CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cp->cudnn, &max)))
        return -1;
    if (max > CONV_MAX_CANDIDATES)
        max = CONV_MAX_CANDIDATES;
    if (cp->find_algos ? CHECK_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithm(
                             cp->cudnn, d->x, d->y, d->conv, d->w, max, &got, perf))
                       : CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                             cp->cudnn, d->x, d->y, d->conv, d->w, max, &got, perf)))
        return -1;
    struct conv_algos *a = &pl->dir[CONV_BWD_FILTER];
    for (int pass = 0; pass < 4; pass++)
        for (int i = 0; i < got; i++) {
            const cudnnMathType_t m = conv_math(pl->dt, perf[i].mathType);
            if (!conv_candidate(pl, CONV_BWD_FILTER, (int)perf[i].algo, perf[i].status) ||
                conv_class(pl->dt, perf[i].determinism, perf[i].mathType) != pass)
                continue;
            conv_algos_add(a, (int)perf[i].algo, (int)m, CONV_WS_UNKNOWN, CONV_WS_LIMIT);
        }
    return 0;
}

static void conv_shape_text(const struct conv2d_shape *cs, char *buf, size_t cap)
{
    snprintf(buf, cap, "x (%d,%d,%d,%d) w (%d,%d,%d,%d) pad %d stride %d", cs->n, cs->c, cs->h,
             cs->w, cs->k, cs->c, cs->r, cs->s, cs->pad, cs->stride);
}

/* The plan of (cs, dt), created on first use, with the candidates of direction dir. */
static struct conv_plan *conv_plan_get(struct conv_plans *cp, const struct conv2d_shape *cs,
                                       enum dtype dt, enum conv_dir dir)
{
    struct conv_plan *pl = NULL;
    for (size_t i = 0; i < cp->nplans && !pl; i++) {
        const struct conv2d_shape *k = &cp->plans[i]->cs;
        if (cp->plans[i]->dt == dt && k->n == cs->n && k->c == cs->c && k->h == cs->h &&
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
        if (cudnn_conv_desc_init(&pl->d, cs, dt)) {
            free(pl);
            return NULL;
        }
        cp->plans[cp->nplans++] = pl;
    }
    struct conv_algos *a = &pl->dir[dir];
    if (!a->ready) {
        const int64_t t0 = clock_now_ns();
        int rc = dir == CONV_FWD        ? conv_choose_fwd(cp, pl)
                 : dir == CONV_BWD_DATA ? conv_choose_bwd_data(cp, pl)
                                        : conv_choose_bwd_filter(cp, pl);
        if (rc)
            return NULL;
        pl->choose_ns[dir] = clock_now_ns() - t0;
        a->ready = 1;
    }
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

/* Run direction dir of pl with its best live candidate that works (conv_algos.h): one that
 * fails with a cuDNN error is dead for good and the next one tried; one whose workspace
 * cannot be allocated (or that reports a host or device allocation failure itself:
 * conv_status_transient) is skipped for this call only and tried first again the next
 * time. */
static int conv_run(struct conv_plans *cp, struct conv_plan *pl, enum conv_dir dir,
                    const void *x, const void *w, const void *dy, void *out)
{
    struct conv_algos *a = &pl->dir[dir];
    const struct cudnn_conv_desc *d = &pl->d;
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
    const int64_t t0 = clock_now_ns();
    for (int i = conv_algos_next(a, 0); i < a->count; i = conv_algos_next(a, i + 1)) {
        st = cudnnSetConvolutionMathType(d->conv, (cudnnMathType_t)a->math[i]);
        if (st != CUDNN_STATUS_SUCCESS) {
            conv_algos_failed(a, i, 0);
            continue;
        }
        if (a->ws[i] == CONV_WS_UNKNOWN) {
            size_t ws = 0;
            st = conv_workspace(cp, pl, dir, a->algo[i], &ws);
            if (st != CUDNN_STATUS_SUCCESS) {
                conv_algos_failed(a, i, 0);
                continue;
            }
            if (!conv_algos_sized(a, i, ws, CONV_WS_LIMIT)) {
                st = CUDNN_STATUS_NOT_SUPPORTED; /* more workspace than CONV_WS_LIMIT */
                continue;
            }
        }
        if (cuda_buffer_reserve(&cp->ws, cp->stream, cp->device, a->ws[i])) {
            st = CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
            conv_algos_failed(a, i, conv_status_transient(st));
            continue;
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
            st = cudnnConvolutionBackwardFilter(cp->cudnn, &one, d->x, x, d->y, dy,
                                                d->conv,
                                                (cudnnConvolutionBwdFilterAlgo_t)a->algo[i],
                                                cp->ws.ptr, a->ws[i], &zero, d->w, out);
        if (st == CUDNN_STATUS_SUCCESS) {
            if (cp->log && !pl->logged[dir]) {
                char shape[160];
                conv_shape_text(&pl->cs, shape, sizeof shape);
                /* host times: cuDNN's ranking, and this first call (where cuDNN builds
                 * the algorithm's plan, and may compile its kernels) */
                fprintf(stderr, "ddpprof: cuDNN conv %s %s %s: algorithm %d, math %s, "
                        "workspace %zu bytes (candidate %d of %d); ranked in %.1f ms, first "
                        "call %.1f ms\n", conv_dir_name[dir], conv_dtype_name[pl->dt], shape,
                        a->algo[i],
                        a->math[i] == CUDNN_FMA_MATH ? "FMA"
                        : a->math[i] == CUDNN_DEFAULT_MATH ? "default" : "tensor-op",
                        a->ws[i], i + 1, a->count, (double)pl->choose_ns[dir] / 1e6,
                        (double)(clock_now_ns() - t0) / 1e6);
                pl->logged[dir] = 1;
            }
            return 0;
        }
        conv_algos_failed(a, i, conv_status_transient(st));
    }
    char shape[160];
    conv_shape_text(&pl->cs, shape, sizeof shape);
    CHECK_CUDNN(st);
    return error_wrap("conv %s %s: every cuDNN algorithm failed, the last one with",
                      conv_dir_name[dir], shape);
}

int conv_plans_run(struct conv_plans *cp, const struct conv2d_shape *cs, enum dtype dt,
                   enum conv_dir dir, const void *x, const void *w, const void *dy, void *out)
{
    struct conv_plan *pl = conv_plan_get(cp, cs, dt, dir);
    if (!pl)
        return -1;
    return conv_run(cp, pl, dir, x, w, dy, out);
}
