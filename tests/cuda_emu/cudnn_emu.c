/* cudnn_emu.c — cuDNN's legacy convolution API on the CPU, for the emulated CUDA backend
 * (see cudnn.h beside this file). */
#include "cudnn.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"

struct emu_cudnn {
    cudaStream_t stream;
};

struct emu_cudnn_tensor {
    cudnnTensorFormat_t format;
    cudnnDataType_t type;
    int n, c, h, w;
};

struct emu_cudnn_filter {
    cudnnTensorFormat_t format; /* NCHW: (k,c,r,s); NHWC: (k,r,s,c) */
    cudnnDataType_t type;
    int k, c, r, s;
};

struct emu_cudnn_conv {
    int pad_h, pad_w, u, v, dil_h, dil_w;
    cudnnConvolutionMode_t mode;
    cudnnMathType_t math;
    int set;
};

struct emu_cudnn_pool {
    int window_h, window_w, pad_h, pad_w, stride_h, stride_w;
};

static char last_error[256];

static cudnnStatus_t fail(cudnnStatus_t st, const char *what)
{
    snprintf(last_error, sizeof last_error, "emulated cuDNN: %s", what);
    return st;
}

size_t cudnnGetVersion(void) { return 91900; }

const char *cudnnGetErrorString(cudnnStatus_t status)
{
    switch (status) {
    case CUDNN_STATUS_SUCCESS:
        return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED:
        return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM:
        return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED:
        return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_INTERNAL_ERROR:
        return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
        return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
        return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED:
        return "CUDNN_STATUS_EXECUTION_FAILED";
    }
    return "CUDNN_STATUS_UNKNOWN";
}

void cudnnGetLastErrorString(char *message, size_t max)
{
    if (max) {
        snprintf(message, max, "%s", last_error);
        last_error[0] = '\0';
    }
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    *handle = calloc(1, sizeof **handle);
    return *handle ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    free(handle);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream)
{
    handle->stream = stream;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ descriptors */

#define EMU_CREATE(d)                                                                       \
    do {                                                                                    \
        *(d) = calloc(1, sizeof **(d));                                                     \
        return *(d) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED; \
    } while (0)

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) { EMU_CREATE(d); }
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) { EMU_CREATE(d); }
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
    EMU_CREATE(d);
}
cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *d) { EMU_CREATE(d); }

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d)
{
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

static int known_type(cudnnDataType_t t)
{
    return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16;
}

static int known_format(cudnnTensorFormat_t f)
{
    return f == CUDNN_TENSOR_NCHW || f == CUDNN_TENSOR_NHWC;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                         cudnnDataType_t type, int n, int c, int h, int w)
{
    if (!known_format(format) || !known_type(type) || n < 1 || c < 1 || h < 1 || w < 1)
        return fail(CUDNN_STATUS_BAD_PARAM, "tensor descriptor");
    *d = (struct emu_cudnn_tensor){format, type, n, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w)
{
    if (!known_format(format) || !known_type(type) || k < 1 || c < 1 || h < 1 || w < 1)
        return fail(CUDNN_STATUS_BAD_PARAM, "filter descriptor");
    *d = (struct emu_cudnn_filter){format, type, k, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute_type)
{
    if (pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dilation_h != 1 || dilation_w != 1 ||
        mode != CUDNN_CROSS_CORRELATION || compute_type != CUDNN_DATA_FLOAT)
        return fail(CUDNN_STATUS_NOT_SUPPORTED,
                    "convolution descriptor (the emulation does cross-correlation without "
                    "dilation, fp32 compute)");
    d->pad_h = pad_h, d->pad_w = pad_w, d->u = u, d->v = v;
    d->dil_h = dilation_h, d->dil_w = dilation_w;
    d->mode = mode;
    d->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math)
{
    if (math < CUDNN_DEFAULT_MATH || math > CUDNN_FMA_MATH)
        return fail(CUDNN_STATUS_BAD_PARAM, "math type");
    d->math = math;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t conv,
                                                    const cudnnTensorDescriptor_t x,
                                                    const cudnnFilterDescriptor_t w, int *n,
                                                    int *c, int *h, int *wo)
{
    if (!conv->set || x->c != w->c)
        return fail(CUDNN_STATUS_BAD_PARAM, "output dimensions: channels differ");
    const int p = (x->h + 2 * conv->pad_h - w->r) / conv->u + 1;
    const int q = (x->w + 2 * conv->pad_w - w->s) / conv->v + 1;
    if (p < 1 || q < 1)
        return fail(CUDNN_STATUS_BAD_PARAM, "output dimensions: empty output");
    *n = x->n, *c = w->k, *h = p, *wo = q;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t nan, int window_h,
                                          int window_w, int pad_h, int pad_w, int stride_h,
                                          int stride_w)
{
    (void)nan;
    if (mode != CUDNN_POOLING_MAX || window_h < 1 || window_w < 1 || pad_h < 0 || pad_w < 0 ||
        stride_h < 1 || stride_w < 1)
        return fail(CUDNN_STATUS_BAD_PARAM, "pooling descriptor");
    *d = (struct emu_cudnn_pool){window_h, window_w, pad_h, pad_w, stride_h, stride_w};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetPooling2dForwardOutputDim(const cudnnPoolingDescriptor_t pool,
                                                const cudnnTensorDescriptor_t x, int *n, int *c,
                                                int *h, int *w)
{
    *n = x->n, *c = x->c;
    *h = (x->h + 2 * pool->pad_h - pool->window_h) / pool->stride_h + 1;
    *w = (x->w + 2 * pool->pad_w - pool->window_w) / pool->stride_w + 1;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ algorithm choice */

static cudnnStatus_t one_algo(cudnnConvolutionDescriptor_t conv, int requested, int *returned,
                              int algo, void *perf, size_t perf_size)
{
    /* the three perf structs share their layout (cudnn.h) */
    cudnnConvolutionFwdAlgoPerf_t p = {.algo = (cudnnConvolutionFwdAlgo_t)algo,
                                       .status = CUDNN_STATUS_SUCCESS,
                                       .determinism = CUDNN_DETERMINISTIC,
                                       .mathType = conv->math};
    *returned = 0;
    if (requested < 1)
        return fail(CUDNN_STATUS_BAD_PARAM, "no result requested");
    memcpy(perf, &p, perf_size);
    *returned = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int *count)
{
    (void)handle;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int *count)
{
    (void)handle;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle,
                                                                 int *count)
{
    (void)handle;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, int requested,
    int *returned, cudnnConvolutionFwdAlgoPerf_t *perf)
{
    (void)handle, (void)x, (void)w, (void)y;
    return one_algo(conv, requested, returned, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                    perf, sizeof *perf);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, int requested,
    int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    (void)handle, (void)w, (void)dy, (void)dx;
    return one_algo(conv, requested, returned, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, perf,
                    sizeof *perf);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw, int requested,
    int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    (void)handle, (void)x, (void)dy, (void)dw;
    return one_algo(conv, requested, returned, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, perf,
                    sizeof *perf);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, int requested,
    int *returned, cudnnConvolutionFwdAlgoPerf_t *perf)
{
    return cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y, requested, returned,
                                                  perf);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, int requested,
    int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, dy, conv, dx, requested,
                                                       returned, perf);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw, int requested,
    int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x, dy, conv, dw, requested,
                                                         returned, perf);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle,
                                                      const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t conv,
                                                      const cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t algo,
                                                      size_t *bytes)
{
    (void)handle, (void)x, (void)w, (void)conv, (void)y, (void)algo;
    *bytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx,
    cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes)
{
    (void)handle, (void)w, (void)dy, (void)conv, (void)dx, (void)algo;
    *bytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes)
{
    (void)handle, (void)x, (void)dy, (void)conv, (void)dw, (void)algo;
    *bytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ the convolutions */

static float load(cudnnDataType_t t, const void *p, size_t i)
{
    if (t == CUDNN_DATA_HALF)
        return half_f16_to_f32(((const uint16_t *)p)[i]);
    if (t == CUDNN_DATA_BFLOAT16)
        return half_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

static void store(cudnnDataType_t t, void *p, size_t i, float v)
{
    if (t == CUDNN_DATA_HALF)
        ((uint16_t *)p)[i] = half_f32_to_f16(v);
    else if (t == CUDNN_DATA_BFLOAT16)
        ((uint16_t *)p)[i] = half_f32_to_bf16(v);
    else
        ((float *)p)[i] = v;
}

static size_t tensor_at(const struct emu_cudnn_tensor *d, int n, int c, int h, int w)
{
    if (d->format == CUDNN_TENSOR_NHWC)
        return (((size_t)n * d->h + h) * d->w + w) * d->c + c;
    return (((size_t)n * d->c + c) * d->h + h) * d->w + w;
}

static size_t filter_at(const struct emu_cudnn_filter *d, int k, int c, int r, int s)
{
    if (d->format == CUDNN_TENSOR_NHWC)
        return (((size_t)k * d->r + r) * d->s + s) * d->c + c;
    return (((size_t)k * d->c + c) * d->r + r) * d->s + s;
}

/* the three operands' shapes fit each other and the data types agree */
static cudnnStatus_t check(const struct emu_cudnn_tensor *x, const struct emu_cudnn_filter *w,
                           const struct emu_cudnn_conv *conv, const struct emu_cudnn_tensor *y)
{
    int n, k, p, q;
    cudnnStatus_t st = cudnnGetConvolution2dForwardOutputDim(
        (cudnnConvolutionDescriptor_t)conv, (cudnnTensorDescriptor_t)x,
        (cudnnFilterDescriptor_t)w, &n, &k, &p, &q);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (y->n != n || y->c != k || y->h != p || y->w != q)
        return fail(CUDNN_STATUS_BAD_PARAM, "the output descriptor's shape");
    if (x->type != w->type || y->type != x->type)
        return fail(CUDNN_STATUS_BAD_PARAM, "data types differ");
    return CUDNN_STATUS_SUCCESS;
}

/* out = alpha * v + beta * out, rounded once (beta 0: out is not read, as cuDNN) */
static void blend(cudnnDataType_t t, void *out, size_t i, double v, const void *alpha,
                  const void *beta)
{
    const double a = *(const float *)alpha, b = *(const float *)beta;
    double r = a * v;
    if (b != 0.0)
        r += b * load(t, out, i);
    store(t, out, i, (float)r);
}

/* a tensor's values as floats in NCHW order (NULL: out of memory) */
static float *tensor_nchw(const struct emu_cudnn_tensor *d, const void *p)
{
    float *f = malloc((size_t)d->n * d->c * d->h * d->w * sizeof *f);
    size_t i = 0;
    for (int n = 0; f && n < d->n; n++)
        for (int c = 0; c < d->c; c++)
            for (int h = 0; h < d->h; h++)
                for (int w = 0; w < d->w; w++)
                    f[i++] = load(d->type, p, tensor_at(d, n, c, h, w));
    return f;
}

/* a filter's values as floats in KCRS order */
static float *filter_kcrs(const struct emu_cudnn_filter *d, const void *p)
{
    float *f = malloc((size_t)d->k * d->c * d->r * d->s * sizeof *f);
    size_t i = 0;
    for (int k = 0; f && k < d->k; k++)
        for (int c = 0; c < d->c; c++)
            for (int r = 0; r < d->r; r++)
                for (int s = 0; s < d->s; s++)
                    f[i++] = load(d->type, p, filter_at(d, k, c, r, s));
    return f;
}

/* The three directions over NCHW/KCRS float copies as GEMMs (OpenBLAS sgemm: fp32 sums,
 * as cuDNN's) over each image's im2col matrix col (C*R*S, P*Q):
 *   forward          y[n] (K, PQ) = w (K, CRS) col[n]
 *   backward data    dcol (CRS, PQ) = w^T dy[n], scattered back into dx[n] (col2im)
 *   backward filter  dw (K, CRS) += dy[n] (K, PQ) col[n]^T
 * acc has the output's shape (NCHW or KCRS), zeroed by the caller. */
enum conv_dir { DIR_FWD, DIR_DATA, DIR_FILTER };

/* col (CRS, PQ) of image x (C, H, W) (to_col), or col added back into x (from col) */
static void im2col(const struct emu_cudnn_tensor *xd, const struct emu_cudnn_filter *wd,
                   const struct emu_cudnn_conv *cv, int P, int Q, float *x, float *col,
                   int to_col)
{
    const int C = xd->c, H = xd->h, W = xd->w, R = wd->r, S = wd->s;
    size_t row = 0;
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            for (int s = 0; s < S; s++, row++)
                for (int p = 0; p < P; p++) {
                    const int h = p * cv->u - cv->pad_h + r;
                    float *cp = col + row * (size_t)P * Q + (size_t)p * Q;
                    for (int q = 0; q < Q; q++) {
                        const int w = q * cv->v - cv->pad_w + s;
                        const int in = h >= 0 && h < H && w >= 0 && w < W;
                        float *xp = in ? x + ((size_t)c * H + h) * W + w : NULL;
                        if (to_col)
                            cp[q] = in ? *xp : 0.0f;
                        else if (in)
                            *xp += cp[q];
                    }
                }
}

static int conv_gemms(enum conv_dir dir, const struct emu_cudnn_tensor *xd,
                      const struct emu_cudnn_filter *wd, const struct emu_cudnn_conv *cv,
                      const struct emu_cudnn_tensor *yd, float *x, const float *w,
                      const float *dy, float *out)
{
    const int K = wd->k, P = yd->h, Q = yd->w, CRS = xd->c * wd->r * wd->s, PQ = P * Q;
    const size_t chw = (size_t)xd->c * xd->h * xd->w, kpq = (size_t)K * PQ;
    float *col = malloc((size_t)CRS * PQ * sizeof *col);
    if (!col)
        return -1;
    for (int n = 0; n < xd->n; n++) {
        if (dir == DIR_FWD) {
            im2col(xd, wd, cv, P, Q, x + n * chw, col, 1);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, PQ, CRS, 1.0f, w, CRS, col,
                        PQ, 0.0f, out + n * kpq, PQ);
        } else if (dir == DIR_DATA) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CRS, PQ, K, 1.0f, w, CRS,
                        dy + n * kpq, PQ, 0.0f, col, PQ);
            im2col(xd, wd, cv, P, Q, out + n * chw, col, 0);
        } else {
            im2col(xd, wd, cv, P, Q, x + n * chw, col, 1);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, K, CRS, PQ, 1.0f, dy + n * kpq,
                        PQ, col, PQ, 1.0f, out, CRS);
        }
    }
    free(col);
    return 0;
}

/* The layout transforms a real cuDNN runs around one convolution call, counted as GPU
 * operations (emu_ops_library(2)).  cuDNN's tensor-core convolution kernels work on NHWC
 * data and KRSC filters; for half (fp16, bf16) data, whose convolutions run on tensor cores
 * (CUDNN_TENSOR_OP_MATH), an operand in NCHW format is transformed to NHWC first, and an
 * NCHW output is written NHWC and transformed back: cuDNN's developer guide, Legacy API,
 * "Convolution Functions", "Data and Filter Formats" ("The cuDNN library may use padding,
 * folding, and NCHW-to-NHWC transformations to call the Tensor Core operations", its
 * "Tensor Transformations" section;
 * https://docs.nvidia.com/deeplearning/cudnn/developer/legacy-api.html).  The rule here:
 * one transform per NCHW operand of a half-type call -- x, w and y, whichever direction
 * reads or writes them, so 3 for an all-NCHW call and 0 for an all-NHWC one.  On an H200
 * ResNet18 fp16 (batch 32, cuDNN 9) ran ~165 such transposes a step for its 59 NCHW
 * convolution calls (issue 34): this rule's 177 is of that size; fp32 (no tensor cores
 * under strict FP32) counts none. */
static unsigned emu_conv_transforms(const struct emu_cudnn_tensor *x,
                                    const struct emu_cudnn_filter *w,
                                    const struct emu_cudnn_tensor *y)
{
    if (x->type != CUDNN_DATA_HALF && x->type != CUDNN_DATA_BFLOAT16)
        return 0;
    return (x->format == CUDNN_TENSOR_NCHW) + (w->format == CUDNN_TENSOR_NCHW) +
           (y->format == CUDNN_TENSOR_NCHW);
}

/* one direction: operands staged as floats, the GEMMs, the output blended in its layout */
static cudnnStatus_t conv_run(enum conv_dir dir, const struct emu_cudnn_tensor *xd,
                              const void *x, const struct emu_cudnn_filter *wd, const void *w,
                              const struct emu_cudnn_conv *cv, const struct emu_cudnn_tensor *yd,
                              const void *dy, const void *alpha, const void *beta, void *out)
{
    cudnnStatus_t st = check(xd, wd, cv, yd);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    const size_t nx = (size_t)xd->n * xd->c * xd->h * xd->w;
    const size_t nw = (size_t)wd->k * wd->c * wd->r * wd->s;
    const size_t ny = (size_t)yd->n * yd->c * yd->h * yd->w;
    float *xf = dir != DIR_DATA ? tensor_nchw(xd, x) : NULL;
    float *wf = dir != DIR_FILTER ? filter_kcrs(wd, w) : NULL;
    float *dyf = dir != DIR_FWD ? tensor_nchw(yd, dy) : NULL;
    const size_t nacc = dir == DIR_FWD ? ny : dir == DIR_DATA ? nx : nw;
    float *acc = calloc(nacc, sizeof *acc);
    if (!acc || (dir != DIR_DATA && !xf) || (dir != DIR_FILTER && !wf) ||
        (dir != DIR_FWD && !dyf) || conv_gemms(dir, xd, wd, cv, yd, xf, wf, dyf, acc)) {
        st = fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of memory");
        goto out;
    }
    emu_ops_library(0);
    for (unsigned t = emu_conv_transforms(xd, wd, yd); t > 0; t--)
        emu_ops_library(2);
    size_t i = 0;
    if (dir == DIR_FILTER) {
        for (int k = 0; k < wd->k; k++)
            for (int c = 0; c < wd->c; c++)
                for (int r = 0; r < wd->r; r++)
                    for (int s = 0; s < wd->s; s++)
                        blend(wd->type, out, filter_at(wd, k, c, r, s), acc[i++], alpha, beta);
    } else {
        const struct emu_cudnn_tensor *od = dir == DIR_FWD ? yd : xd;
        for (int n = 0; n < od->n; n++)
            for (int c = 0; c < od->c; c++)
                for (int h = 0; h < od->h; h++)
                    for (int ww = 0; ww < od->w; ww++)
                        blend(od->type, out, tensor_at(od, n, c, h, ww), acc[i++], alpha, beta);
    }
out:
    free(xf);
    free(wf);
    free(dyf);
    free(acc);
    return st;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      const cudnnTensorDescriptor_t xd, const void *x,
                                      const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t conv,
                                      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes,
                                      const void *beta, const cudnnTensorDescriptor_t yd,
                                      void *y)
{
    (void)handle, (void)algo, (void)ws, (void)ws_bytes;
    return conv_run(DIR_FWD, xd, x, wd, w, conv, yd, NULL, alpha, beta, y);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wd, const void *w,
                                           const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const cudnnConvolutionDescriptor_t conv,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws,
                                           size_t ws_bytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxd, void *dx)
{
    (void)handle, (void)algo, (void)ws, (void)ws_bytes;
    return conv_run(DIR_DATA, dxd, NULL, wd, w, conv, dyd, dy, alpha, beta, dx);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xd, const void *x,
                                             const cudnnTensorDescriptor_t dyd, const void *dy,
                                             const cudnnConvolutionDescriptor_t conv,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws,
                                             size_t ws_bytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwd, void *dw)
{
    (void)handle, (void)algo, (void)ws, (void)ws_bytes;
    return conv_run(DIR_FILTER, xd, x, dwd, NULL, conv, dyd, dy, alpha, beta, dw);
}
