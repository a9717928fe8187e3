/* backend_cuda.c — the CUDA implementation of struct backend (backend.h), with the CPU
 * backend (backend_cpu.c) as its oracle.
 *
 * Everything runs in order on one non-blocking compute stream per backend: cuDNN for
 * convolution (forward, backward data, backward filter, through the plans of conv_plan.c:
 * algorithms chosen per shape and element type and cached per machine, conv_cache.h),
 * cuBLAS GEMM for linear layers, and the kernels of kernels.cu for everything else.  The host
 * waits only where a slot returns a value (softmax_xent, count_correct), in download,
 * synchronize and free.
 *
 * Slots return void, so a failing CUDA, cuDNN or cuBLAS call is recorded as the backend's
 * first error (the status slot), and later slots still run; a failed backend's loss is
 * NaN.  DDPPROF_CUDA_SYNC=1 synchronizes after every slot so a fault is pinned on the op
 * that caused it; DDPPROF_CUDNN_BENCHMARK=1 chooses convolution algorithms by timing them
 * (cudnnFind*) instead of cuDNN's heuristics; DDPPROF_CHANNELS_LAST=0 keeps half tensors
 * NCHW (cu_layout: channels-last is the default); DDPPROF_CUDNN_LOG=1 says on stderr which
 * algorithm each convolution shape and direction ran with (once each) and how it was
 * chosen; DDPPROF_CUDNN_CACHE=PATH|off moves or disables the per-machine cache of those
 * choices (conv_cache.h).
 *
 * Autocast is real here: a tensor of a half type (backend.h enum dtype) is stored as
 * 2-byte fp16/bf16 values (dtype_size), so activations take half the memory;
 * convolutions run cuDNN on half data with fp32 accumulation on tensor cores
 * (CUDNN_TENSOR_OP_MATH), linear layers cublasGemmEx on half data with
 * CUBLAS_COMPUTE_32F, and the kernels read halves into fp32 and round once when they
 * write.  fp32 tensors run strict fp32 by default (no TF32), so the fp32 path matches the
 * CPU oracle up to summation order; with tf32 (--tf32 on: PyTorch's defaults) fp32
 * convolutions may run TF32 tensor cores, as torch.backends.cudnn.allow_tf32 = True, and
 * fp32 GEMMs stay FP32, as torch.backends.cuda.matmul.allow_tf32 = False. */
#include "backend/backend.h"
#include "cuda/backend_cuda.h"
#include "cuda/cuda_api.h"
#include "common/cuda_check.h"
#include "cuda/conv_cache.h"
#include "cuda/conv_plan.h"
#include "cuda/cudnn_desc.h"
#include "common/error.h"
#include "cuda/kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pinned staging for uploads: two halves used in turn, each guarded by an event, so an
 * upload returns at once and its host buffer may be reused immediately. */
#define STAGE_HALF_BYTES ((size_t)4 << 20)
struct cuda_backend {
    struct backend ops; /* first: a struct backend * is a struct cuda_backend * */
    int device;
    cudaStream_t stream;
    cublasHandle_t cublas;
    cudnnHandle_t cudnn;
    int sync_each; /* DDPPROF_CUDA_SYNC=1 */
    int channels_last; /* half tensors NHWC (cu_layout) */

    struct conv_plans *conv;    /* cuDNN plans and their workspace (conv_plan.h) */
    struct cuda_buffer scratch; /* doubles: reductions and per-row losses */
    struct cuda_buffer done;    /* unsigned ints, all zero between launches: the per-channel
                                   reductions' counts of finished blocks (kernels.h) */
    float *dev_loss;    /* 1 float */
    int *dev_ints;      /* 1 int: the correct count (count_correct, the build's probe) */
    void *host_scalars; /* pinned, 64 bytes */
    unsigned char *stage; /* pinned, 2 * STAGE_HALF_BYTES */
    cudaEvent_t stage_done[2];
    int stage_half;
    size_t stage_off;

    int failed;
    char first_error[1024];
};

static void cu_destroy(struct backend *be);

/* ------------------------------------------------------------------ errors */

/* Keep the current error_get() message, prefixed with the op, as the first failure. */
static void cb_record(struct cuda_backend *cb, const char *op)
{
    if (!cb->failed) {
        cb->failed = 1;
        snprintf(cb->first_error, sizeof cb->first_error, "CUDA backend (device %d), %s: %s",
                 cb->device, op, error_get());
    }
    error_set("%s", cb->first_error);
}

/* Start of every slot: make the device current and drop a stale error another call left
 * in the runtime's last-error slot (sticky faults are reported again by later calls). */
static int cb_begin(struct cuda_backend *cb, const char *op)
{
    (void)cudaGetLastError();
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != cb->device) {
        if (CHECK_CUDA(cudaSetDevice(cb->device))) {
            cb_record(cb, op);
            return -1;
        }
    }
    return 0;
}

/* End of a slot: with DDPPROF_CUDA_SYNC=1, wait and pin a fault on this op. */
static void cb_end(struct cuda_backend *cb, const char *op)
{
    if (cb->sync_each && CHECK_CUDA(cudaStreamSynchronize(cb->stream)))
        cb_record(cb, op);
}

/* a kernel launcher's or library call's result: 0, or -1 recorded against op */
static int cb_cuda(struct cuda_backend *cb, const char *op, cudaError_t e, const char *call,
                   const char *file, int line)
{
    if (e == cudaSuccess)
        return 0;
    cuda_check_cuda(e, call, file, line);
    (void)cudaGetLastError();
    cb_record(cb, op);
    return -1;
}

#define CB_CUDA(cb, op, call) cb_cuda((cb), (op), (call), #call, __FILE__, __LINE__)

/* ------------------------------------------------------------------ public queries */

/* cuda_build_enabled and cuda_device_count are the program's loader's (cuda_loader.c),
 * which answers them without loading this module. */

int backend_cuda_is(const struct backend *be) { return be && be->destroy == cu_destroy; }

int backend_cuda_device(const struct backend *be)
{
    return ((const struct cuda_backend *)be)->device;
}

cudaStream_t backend_cuda_stream(const struct backend *be)
{
    return ((const struct cuda_backend *)be)->stream;
}

int backend_cuda_bind(const struct backend *be)
{
    const struct cuda_backend *cb = (const struct cuda_backend *)be;
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == cb->device)
        return 0;
    return CHECK_CUDA(cudaSetDevice(cb->device));
}

int cuda_info_get(int device, struct cuda_info *info)
{
    memset(info, 0, sizeof *info);
    int v = 0;
    if (cudaDriverGetVersion(&v) == cudaSuccess)
        info->driver_version = v;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess)
        info->runtime_version = v;
    (void)cudaGetLastError();
    info->cudnn_version = cudnnGetVersion();
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
        info->cublas_version = major * 10000 + minor * 100 + patch;
    if (ncclGetVersion(&v) == ncclSuccess)
        info->nccl_version = v;
    if (!conv_cache_path(info->cudnn_algo_cache, sizeof info->cudnn_algo_cache))
        snprintf(info->cudnn_algo_cache, sizeof info->cudnn_algo_cache, "off");
    if (device < 0)
        return 0;
    struct cudaDeviceProp prop;
    if (CHECK_CUDA(cudaGetDeviceProperties(&prop, device))) {
        (void)cudaGetLastError();
        return error_wrap("cuda_info_get: device %d", device);
    }
    snprintf(info->device_name, sizeof info->device_name, "%s", prop.name);
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->sm_count = prop.multiProcessorCount;
    info->memory_bytes = prop.totalGlobalMem;
    return 0;
}

/* ------------------------------------------------------------------ device buffers */

int cuda_buffer_reserve(struct cuda_buffer *b, cudaStream_t stream, int device, size_t bytes)
{
    if (bytes == 0 || (bytes <= b->bytes && b->ptr))
        return 0;
    bytes = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1); /* whole MiB */
    if (b->ptr) {
        if (CHECK_CUDA(cudaStreamSynchronize(stream)) || CHECK_CUDA(cudaFree(b->ptr)))
            return -1;
        b->ptr = NULL;
        b->bytes = 0;
    }
    if (CHECK_CUDA(cudaMalloc(&b->ptr, bytes))) {
        (void)cudaGetLastError();
        b->ptr = NULL;
        return error_wrap("CUDA backend: %zu bytes of scratch on device %d", bytes, device);
    }
    b->bytes = bytes;
    return 0;
}

void cuda_buffer_free(struct cuda_buffer *b)
{
    cudaFree(b->ptr);
    b->ptr = NULL;
    b->bytes = 0;
}

static double *cb_scratch(struct cuda_backend *cb, size_t doubles, const char *op)
{
    if (cuda_buffer_reserve(&cb->scratch, cb->stream, cb->device,
                            (doubles ? doubles : 1) * sizeof(double))) {
        cb_record(cb, op);
        return NULL;
    }
    return cb->scratch.ptr;
}

/* c counters for a per-channel reduction, zero (zeroed once when the buffer grows; every
 * reduction leaves them zero) */
static unsigned *cb_done(struct cuda_backend *cb, int c, const char *op)
{
    const size_t had = cb->done.bytes;
    if (cuda_buffer_reserve(&cb->done, cb->stream, cb->device, (size_t)c * sizeof(unsigned))) {
        cb_record(cb, op);
        return NULL;
    }
    if (cb->done.bytes != had &&
        CB_CUDA(cb, op, cudaMemsetAsync(cb->done.ptr, 0, cb->done.bytes, cb->stream)))
        return NULL;
    return cb->done.ptr;
}

/* ------------------------------------------------------------------ state slots */

static int cu_status(struct backend *be)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    if (!cb->failed) {
        /* a fault of work already finished shows up here without waiting */
        cudaError_t e = cudaStreamQuery(cb->stream);
        if (e != cudaSuccess && e != cudaErrorNotReady)
            cb_cuda(cb, "device work", e, "cudaStreamQuery(stream)", __FILE__, __LINE__);
    }
    if (cb->failed)
        return error_set("%s", cb->first_error);
    return 0;
}

static void *cu_stream(struct backend *be) { return ((struct cuda_backend *)be)->stream; }

/* ------------------------------------------------------------------ memory slots */

static void *cu_alloc(struct backend *be, size_t bytes)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    void *p = NULL;
    if (cb_begin(cb, "alloc"))
        return NULL;
    if (CHECK_CUDA(cudaMalloc(&p, bytes ? bytes : 1))) {
        (void)cudaGetLastError(); /* out of memory is the caller's to report, not sticky */
        error_wrap("CUDA backend: cannot allocate %zu bytes on device %d (free memory or use a "
                   "smaller batch)",
                   bytes, cb->device);
        return NULL;
    }
    if (bytes && CB_CUDA(cb, "alloc", cudaMemsetAsync(p, 0, bytes, cb->stream))) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void cu_free(struct backend *be, void *ptr)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    if (!ptr || cb_begin(cb, "free"))
        return;
    /* work queued on the stream may still read ptr */
    if (CB_CUDA(cb, "free", cudaStreamSynchronize(cb->stream)))
        return;
    CB_CUDA(cb, "free", cudaFree(ptr));
}

static void cu_upload(struct backend *be, void *dst, const void *host_src, size_t bytes)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    if (!bytes || cb_begin(cb, "upload"))
        return;
    if (bytes > STAGE_HALF_BYTES) { /* too big to stage: copy and wait */
        if (CB_CUDA(cb, "upload", cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice,
                                                  cb->stream)))
            return;
        CB_CUDA(cb, "upload", cudaStreamSynchronize(cb->stream));
        return;
    }
    if (cb->stage_off + bytes > STAGE_HALF_BYTES) { /* switch halves; wait for the other */
        cb->stage_half ^= 1;
        cb->stage_off = 0;
        if (CB_CUDA(cb, "upload", cudaEventSynchronize(cb->stage_done[cb->stage_half])))
            return;
    }
    unsigned char *p = cb->stage + (size_t)cb->stage_half * STAGE_HALF_BYTES + cb->stage_off;
    memcpy(p, host_src, bytes);
    if (CB_CUDA(cb, "upload",
                cudaMemcpyAsync(dst, p, bytes, cudaMemcpyHostToDevice, cb->stream)) ||
        CB_CUDA(cb, "upload", cudaEventRecord(cb->stage_done[cb->stage_half], cb->stream)))
        return;
    cb->stage_off += (bytes + 255) & ~(size_t)255;
    cb_end(cb, "upload");
}

static void cu_download(struct backend *be, void *host_dst, const void *src, size_t bytes)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    if (!bytes || cb_begin(cb, "download"))
        return;
    if (CB_CUDA(cb, "download",
                cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, cb->stream)))
        return;
    CB_CUDA(cb, "download", cudaStreamSynchronize(cb->stream));
}

static void cu_copy(struct backend *be, void *dst, const void *src, size_t bytes)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    if (!bytes || dst == src || cb_begin(cb, "copy"))
        return;
    if (CB_CUDA(cb, "copy",
                cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cb->stream)))
        return;
    cb_end(cb, "copy");
}

static void cu_zero(struct backend *be, void *dst, size_t bytes)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    if (!bytes || cb_begin(cb, "zero"))
        return;
    if (CB_CUDA(cb, "zero", cudaMemsetAsync(dst, 0, bytes, cb->stream)))
        return;
    cb_end(cb, "zero");
}

static void cu_synchronize(struct backend *be)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    if (cb_begin(cb, "synchronize"))
        return;
    CB_CUDA(cb, "synchronize", cudaStreamSynchronize(cb->stream));
}

static size_t cu_dtype_size(struct backend *be, enum dtype dt)
{
    (void)be;
    return dt == DT_F32 ? sizeof(float) : 2; /* __half, __nv_bfloat16 */
}

/* Channels-last for the half types, the tensor-core convolutions' own layout: cuDNN runs
 * them on NHWC tensors and KRSC filters, and converts NCHW operands to NHWC and the result
 * back around each call itself (cudnn_desc.h).  fp32 stays NCHW: its strict-FP32
 * convolutions run no tensor cores. */
static enum layout cu_layout(struct backend *be, enum dtype dt)
{
    const struct cuda_backend *cb = (const struct cuda_backend *)be;
    return cb->channels_last && dt != DT_F32 ? LAYOUT_NHWC : LAYOUT_NCHW;
}

/* ------------------------------------------------------------------ convolution slots */

/* cuDNN writes the convolution in dt, then the bias is added to it (PyTorch's cuDNN path:
 * two roundings for a half type, as backend.h says) */
static void cu_conv2d_forward(struct backend *be, const struct conv2d_shape *cs, enum dtype dt,
                              const void *x, const void *w, const void *b, void *y)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "conv2d_forward";
    if (cb_begin(cb, op))
        return;
    const enum layout lay = cu_layout(be, dt);
    if (conv_plans_run(cb->conv, cs, dt, lay, CONV_FWD, x, w, NULL, y)) {
        cb_record(cb, op);
        return;
    }
    if (b && CB_CUDA(cb, op,
                     kern_bias_add_channels(cb->stream, cs->n, cs->k, (size_t)cs->p * cs->q, dt,
                                            lay, b, y)))
        return;
    cb_end(cb, op);
}

static void cu_conv2d_backward(struct backend *be, const struct conv2d_shape *cs, enum dtype dt,
                               const void *x, const void *w, const void *dy, void *dx,
                               void *dw, void *db)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "conv2d_backward";
    if (cb_begin(cb, op))
        return;
    const enum layout lay = cu_layout(be, dt);
    if (db) {
        const size_t pq = (size_t)cs->p * cs->q;
        double *ws = cb_scratch(cb, kern_channel_ws_doubles(cs->n, cs->k, (int)pq), op);
        unsigned *done = ws ? cb_done(cb, cs->k, op) : NULL;
        if (!done || CB_CUDA(cb, op, kern_channel_sum(cb->stream, cs->n, cs->k, (int)pq, dt, lay,
                                                      dy, db, ws, done)))
            return;
    }
    if (dx && conv_plans_run(cb->conv, cs, dt, lay, CONV_BWD_DATA, NULL, w, dy, dx)) {
        cb_record(cb, op);
        return;
    }
    if (dw && conv_plans_run(cb->conv, cs, dt, lay, CONV_BWD_FILTER, x, NULL, dy, dw)) {
        cb_record(cb, op);
        return;
    }
    cb_end(cb, op);
}

/* ------------------------------------------------------------------ batch norm slots */

static void cu_batchnorm_stats(struct backend *be, int n, int c, int hw, enum dtype dt,
                               const void *x, float eps, float *mean, float *invstd)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "batchnorm_stats";
    if (cb_begin(cb, op))
        return;
    double *ws = cb_scratch(cb, kern_channel_ws_doubles(n, c, hw), op);
    unsigned *done = ws ? cb_done(cb, c, op) : NULL;
    if (!done ||
        CB_CUDA(cb, op, kern_bn_stats(cb->stream, n, c, hw, dt, cu_layout(be, dt), x, eps, mean,
                                      invstd, ws, done)))
        return;
    cb_end(cb, op);
}

static void cu_batchnorm_gather_stats(struct backend *be, int world, int c, const float *means,
                                      const float *invstds, const float *counts,
                                      float momentum, float eps, float *running_mean,
                                      float *running_var, float *mean, float *invstd)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "batchnorm_gather_stats";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op,
                kern_bn_gather_stats(cb->stream, world, c, means, invstds, counts, momentum, eps,
                                     running_mean, running_var, mean, invstd)))
        return;
    cb_end(cb, op);
}

static void cu_batchnorm_elemt(struct backend *be, int n, int c, int hw, enum dtype dt,
                               const void *x, const float *mean, const float *invstd,
                               const float *weight, const float *bias, void *y)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "batchnorm_elemt";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op,
                kern_bn_elemt(cb->stream, n, c, hw, dt, cu_layout(be, dt), x, mean, invstd, weight,
                              bias, y)))
        return;
    cb_end(cb, op);
}

static void cu_batchnorm_forward_eval(struct backend *be, int n, int c, int hw, enum dtype dt,
                                      const void *x, const float *running_mean,
                                      const float *running_var, float eps, const float *weight,
                                      const float *bias, void *y)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "batchnorm_forward_eval";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op,
                kern_bn_forward_eval(cb->stream, n, c, hw, dt, cu_layout(be, dt), x, running_mean,
                                     running_var, eps, weight, bias, y)))
        return;
    cb_end(cb, op);
}

static void cu_batchnorm_backward_reduce(struct backend *be, int n, int c, int hw,
                                         enum dtype dt, const void *dy, const void *x,
                                         const float *mean, const float *invstd, float *sum_dy,
                                         float *sum_dy_xmu, float *dweight, float *dbias)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "batchnorm_backward_reduce";
    if (cb_begin(cb, op))
        return;
    double *ws = cb_scratch(cb, kern_channel_ws_doubles(n, c, hw), op);
    unsigned *done = ws ? cb_done(cb, c, op) : NULL;
    if (!done || CB_CUDA(cb, op,
                         kern_bn_backward_reduce(cb->stream, n, c, hw, dt, cu_layout(be, dt), dy,
                                                 x, mean, invstd, sum_dy, sum_dy_xmu, dweight,
                                                 dbias, ws, done)))
        return;
    cb_end(cb, op);
}

static void cu_batchnorm_backward_elemt(struct backend *be, int n, int c, int hw,
                                        enum dtype dt, const void *dy, const void *x,
                                        const float *mean, const float *invstd,
                                        const float *weight, const float *sum_dy,
                                        const float *sum_dy_xmu, const float *count, void *dx)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "batchnorm_backward_elemt";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op,
                kern_bn_backward_elemt(cb->stream, n, c, hw, dt, cu_layout(be, dt), dy, x, mean,
                                       invstd, weight, sum_dy, sum_dy_xmu, count, dx)))
        return;
    cb_end(cb, op);
}

/* ------------------------------------------------------------------ activations, pooling */

static void cu_relu_forward(struct backend *be, size_t n, enum dtype dt, const void *x,
                            void *y)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "relu_forward";
    if (cb_begin(cb, op) || CB_CUDA(cb, op, kern_relu_forward(cb->stream, n, dt, x, y)))
        return;
    cb_end(cb, op);
}

static void cu_relu_backward(struct backend *be, size_t n, enum dtype dt, const void *y,
                             const void *dy, void *dx)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "relu_backward";
    if (cb_begin(cb, op) || CB_CUDA(cb, op, kern_relu_backward(cb->stream, n, dt, y, dy, dx)))
        return;
    cb_end(cb, op);
}

static void cu_maxpool2d_forward(struct backend *be, const struct pool2d_shape *ps,
                                 enum dtype dt, const void *x, void *y, int32_t *argmax)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "maxpool2d_forward";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op,
                kern_maxpool_forward(cb->stream, ps->n, ps->c, ps->h, ps->w, ps->kernel,
                                     ps->stride, ps->p, ps->q, dt, cu_layout(be, dt), x, y,
                                     argmax)))
        return;
    cb_end(cb, op);
}

static void cu_maxpool2d_backward(struct backend *be, const struct pool2d_shape *ps,
                                  enum dtype dt, const void *dy, const int32_t *argmax,
                                  void *dx)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "maxpool2d_backward";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op,
                kern_maxpool_backward(cb->stream, ps->n, ps->c, ps->h, ps->w, ps->kernel,
                                      ps->stride, ps->p, ps->q, dt, cu_layout(be, dt), dy,
                                      argmax, dx)))
        return;
    cb_end(cb, op);
}

static void cu_adaptive_avgpool2d_forward(struct backend *be, int n, int c, int h, int w,
                                          int p, int q, enum dtype dt, const void *x, void *y)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "adaptive_avgpool2d_forward";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op, kern_adaptive_avgpool_forward(cb->stream, n, c, h, w, p, q, dt,
                                                      cu_layout(be, dt), x, y)))
        return;
    cb_end(cb, op);
}

static void cu_adaptive_avgpool2d_backward(struct backend *be, int n, int c, int h, int w,
                                           int p, int q, enum dtype dt, const void *dy,
                                           void *dx)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "adaptive_avgpool2d_backward";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op,
                kern_adaptive_avgpool_backward(cb->stream, n, c, h, w, p, q, dt,
                                               cu_layout(be, dt), dy, dx)))
        return;
    cb_end(cb, op);
}

static void cu_add(struct backend *be, size_t n, enum dtype dt, const void *a, const void *b,
                   void *y)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "add";
    if (cb_begin(cb, op) || CB_CUDA(cb, op, kern_add(cb->stream, n, dt, a, b, y)))
        return;
    cb_end(cb, op);
}

/* ------------------------------------------------------------------ linear */

static cudaDataType_t cublas_dtype(enum dtype dt)
{
    return dt == DT_F16 ? CUDA_R_16F : dt == DT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Column-major C (m,n) = op(A) op(B) + beta C, A, B and C of dt, with fp32 accumulation
 * and fp32 alpha and beta (CUBLAS_COMPUTE_32F: no TF32 for fp32 data, --tf32 on or off,
 * as PyTorch's default torch.backends.cuda.matmul.allow_tf32 = False; for fp16 and bf16
 * data cuBLAS's tensor-core kernels, C rounded once from the fp32 result). */
static int cu_gemm(struct cuda_backend *cb, cublasOperation_t ta, cublasOperation_t tb, int m,
                   int n, int k, const void *a, int lda, const void *b, int ldb, float beta,
                   void *c, int ldc, enum dtype dt)
{
    const float alpha = 1.0f;
    const cudaDataType_t t = cublas_dtype(dt);
    return CHECK_CUBLAS(cublasGemmEx(cb->cublas, ta, tb, m, n, k, &alpha, a, t, lda, b, t, ldb,
                                     &beta, c, t, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* Row-major tensors seen by column-major cuBLAS are transposed: y (n,out) row-major is
 * y^T (out,n) column-major, so y^T = w x^T with w (out,in) row-major read as (in,out)^T. */
static void cu_linear_forward(struct backend *be, int n, int in, int out, enum dtype dt,
                              const void *x, const void *w, const void *b, void *y)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "linear_forward";
    if (cb_begin(cb, op))
        return;
    /* the bias enters as C with beta 1: one rounding of the fp32 sum, as PyTorch's addmm */
    if (b && CB_CUDA(cb, op, kern_bias_fill_rows(cb->stream, n, out, dt, b, y)))
        return;
    if (cu_gemm(cb, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, w, in, x, in, b ? 1.0f : 0.0f, y, out,
                dt)) {
        cb_record(cb, op);
        return;
    }
    cb_end(cb, op);
}

static void cu_linear_backward(struct backend *be, int n, int in, int out, enum dtype dt,
                               const void *x, const void *w, const void *dy, void *dx, void *dw,
                               void *db)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "linear_backward";
    if (cb_begin(cb, op))
        return;
    /* dx^T (in,n) = w^T... : column-major dx^T = W' D' with W' = w as (in,out), D' = dy as
     * (out,n); dw^T (in,out) = X' D'^T with X' = x as (in,n) */
    if (dx && cu_gemm(cb, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, w, in, dy, out, 0.0f, dx, in,
                      dt)) {
        cb_record(cb, op);
        return;
    }
    if (dw && cu_gemm(cb, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, x, in, dy, out, 0.0f, dw, in,
                      dt)) {
        cb_record(cb, op);
        return;
    }
    if (db && CB_CUDA(cb, op, kern_column_sum(cb->stream, n, out, dt, dy, db)))
        return;
    cb_end(cb, op);
}

/* ------------------------------------------------------------------ loss, metrics */

static float cu_softmax_xent(struct backend *be, int n, int c, const float *logits,
                             const int32_t *labels, float *dlogits)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "softmax_xent";
    if (n < 1 || c < 1 || cb_begin(cb, op))
        return NAN;
    double *rows = cb_scratch(cb, (size_t)n, op);
    float *host = cb->host_scalars;
    if (!rows ||
        CB_CUDA(cb, op,
                kern_softmax_xent(cb->stream, n, c, logits, labels, dlogits, rows,
                                  cb->dev_loss)) ||
        CB_CUDA(cb, op,
                cudaMemcpyAsync(host, cb->dev_loss, sizeof(float), cudaMemcpyDeviceToHost,
                                cb->stream)) ||
        CB_CUDA(cb, op, cudaStreamSynchronize(cb->stream)))
        return NAN;
    return cb->failed ? NAN : host[0];
}

/* softmax_xent without the host read: the kernel writes the loss to *loss */
static void cu_softmax_xent_dev(struct backend *be, int n, int c, const float *logits,
                                const int32_t *labels, float *dlogits, float *loss)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "softmax_xent_dev";
    if (n < 1 || c < 1 || cb_begin(cb, op))
        return;
    double *rows = cb_scratch(cb, (size_t)n, op);
    if (!rows ||
        CB_CUDA(cb, op,
                kern_softmax_xent(cb->stream, n, c, logits, labels, dlogits, rows, loss)))
        return;
    cb_end(cb, op);
}

static int cu_count_correct(struct backend *be, int n, int c, const float *logits,
                            const int32_t *labels)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "count_correct";
    int *host = cb->host_scalars;
    if (n < 1 || c < 1 || cb_begin(cb, op) ||
        CB_CUDA(cb, op, kern_count_correct(cb->stream, n, c, logits, labels, cb->dev_ints)) ||
        CB_CUDA(cb, op,
                cudaMemcpyAsync(host, cb->dev_ints, sizeof(int), cudaMemcpyDeviceToHost,
                                cb->stream)) ||
        CB_CUDA(cb, op, cudaStreamSynchronize(cb->stream)))
        return 0;
    return host[0];
}

/* ------------------------------------------------------------------ elementwise, optimizer */

static void cu_scale(struct backend *be, size_t n, float alpha, const float *src, float *dst)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "scale";
    if (cb_begin(cb, op) || CB_CUDA(cb, op, kern_scale(cb->stream, n, alpha, src, dst)))
        return;
    cb_end(cb, op);
}

static void cu_round_amp(struct backend *be, size_t n, enum amp_dtype dt, const float *src,
                         float *dst)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "round_amp";
    if (cb_begin(cb, op) || CB_CUDA(cb, op, kern_round_amp(cb->stream, n, (int)dt, src, dst)))
        return;
    cb_end(cb, op);
}

static void cu_cast(struct backend *be, size_t n, enum dtype from, const void *src,
                    enum dtype to, void *dst)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "cast";
    if (cb_begin(cb, op) || CB_CUDA(cb, op, kern_cast(cb->stream, n, from, src, to, dst)))
        return;
    cb_end(cb, op);
}

/* One launch per KERN_CAST_LIST tensors, 4-D ones moved between the types' layouts */
static void cu_cast_list(struct backend *be, int count, enum dtype from, const void *const *srcs,
                         enum dtype to, void *const *dsts, const size_t *numels,
                         const int *dims)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "cast_list";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op, kern_cast_list(cb->stream, count, from, cu_layout(be, from), srcs, to,
                                       cu_layout(be, to), dsts, numels, dims)))
        return;
    cb_end(cb, op);
}

static void cu_convert(struct backend *be, const int dims[4], enum dtype from, enum layout lf,
                       const void *src, enum dtype to, enum layout lt, void *dst)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "convert";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op, kern_convert(cb->stream, dims[0], dims[1], (size_t)dims[2] * dims[3],
                                     from, lf, src, to, lt, dst)))
        return;
    cb_end(cb, op);
}

/* One launch per KERN_UNSCALE_LIST gradients, no host wait.  A failed backend's found_inf
 * is whatever it holds; the caller's read-back reports the failure (download). */
static void cu_unscale(struct backend *be, int count, float *const *grads, const size_t *numels,
                       float inv_scale, float *found_inf)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "unscale";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op, kern_unscale(cb->stream, count, grads, numels, inv_scale, found_inf)))
        return;
    cb_end(cb, op);
}

static void cu_sgd_step(struct backend *be, size_t n, float *param, const float *grad,
                        float *buf, float lr, float momentum, float dampening,
                        float weight_decay, int nesterov, int first)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "sgd_step";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op,
                kern_sgd_step(cb->stream, n, param, grad, buf, lr, momentum, dampening,
                              weight_decay, nesterov, first)))
        return;
    cb_end(cb, op);
}

static void cu_adam_step(struct backend *be, size_t n, float *param, const float *grad,
                         float *exp_avg, float *exp_avg_sq, double lr, double beta1,
                         double beta2, double eps, double weight_decay, long long step)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    const char *op = "adam_step";
    if (cb_begin(cb, op) ||
        CB_CUDA(cb, op,
                kern_adam_step(cb->stream, n, param, grad, exp_avg, exp_avg_sq, lr, beta1,
                               beta2, eps, weight_decay, step)))
        return;
    cb_end(cb, op);
}

/* ------------------------------------------------------------------ lifetime */

static void cu_destroy(struct backend *be)
{
    struct cuda_backend *cb = (struct cuda_backend *)be;
    if (!cb)
        return;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != cb->device)
        cudaSetDevice(cb->device);
    if (cb->stream)
        cudaStreamSynchronize(cb->stream);
    conv_plans_free(cb->conv);
    if (cb->cudnn)
        cudnnDestroy(cb->cudnn);
    if (cb->cublas)
        cublasDestroy(cb->cublas);
    cuda_buffer_free(&cb->scratch);
    cuda_buffer_free(&cb->done);
    cudaFree(cb->dev_loss);
    cudaFree(cb->dev_ints);
    for (int i = 0; i < 2; i++)
        if (cb->stage_done[i])
            cudaEventDestroy(cb->stage_done[i]);
    cudaFreeHost(cb->stage);
    cudaFreeHost(cb->host_scalars);
    if (cb->stream)
        cudaStreamDestroy(cb->stream);
    (void)cudaGetLastError();
    free(cb);
}

static const struct backend cuda_backend_ops = {
    .name = "cuda",
    /* memory: cudaMalloc (zero-filled on the stream); uploads staged through pinned
     * buffers, downloads wait */
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .download = cu_download,
    .copy = cu_copy,
    .zero = cu_zero,
    .synchronize = cu_synchronize,
    .dtype_size = cu_dtype_size, /* half types: 2-byte fp16/bf16 */
    .layout = cu_layout,         /* half types NHWC with channels-last, else NCHW */
    /* state: the first error kept by any slot (or found by querying the stream), and the
     * compute stream */
    .status = cu_status,
    .stream = cu_stream,
    /* convolution: cuDNN, algorithms cached per shape; bias gradient by our reduction */
    .conv2d_forward = cu_conv2d_forward,
    .conv2d_backward = cu_conv2d_backward,
    /* batch norm: SyncBatchNorm decomposition, kernels.cu */
    .batchnorm_stats = cu_batchnorm_stats,
    .batchnorm_gather_stats = cu_batchnorm_gather_stats,
    .batchnorm_elemt = cu_batchnorm_elemt,
    .batchnorm_forward_eval = cu_batchnorm_forward_eval,
    .batchnorm_backward_reduce = cu_batchnorm_backward_reduce,
    .batchnorm_backward_elemt = cu_batchnorm_backward_elemt,
    /* activations and pooling: kernels.cu */
    .relu_forward = cu_relu_forward,
    .relu_backward = cu_relu_backward,
    .maxpool2d_forward = cu_maxpool2d_forward,
    .maxpool2d_backward = cu_maxpool2d_backward,
    .adaptive_avgpool2d_forward = cu_adaptive_avgpool2d_forward,
    .adaptive_avgpool2d_backward = cu_adaptive_avgpool2d_backward,
    /* residual connections: kernels.cu */
    .add = cu_add,
    /* linear: cuBLAS GEMM */
    .linear_forward = cu_linear_forward,
    .linear_backward = cu_linear_backward,
    /* loss and metrics: the host waits for the result */
    .softmax_xent = cu_softmax_xent,
    .softmax_xent_dev = cu_softmax_xent_dev,
    .count_correct = cu_count_correct,
    /* elementwise, mixed precision and optimizer: kernels.cu */
    .scale = cu_scale,
    .cast = cu_cast,
    .cast_list = cu_cast_list,
    .convert = cu_convert,
    .round_amp = cu_round_amp,
    .unscale = cu_unscale,
    .sgd_step = cu_sgd_step,
    .adam_step = cu_adam_step,
    .destroy = cu_destroy,
};

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

/* The GPU as the algorithm cache's keys name it: "name|GPU-<uuid>|major.minor" (the name
 * cut at 200 bytes; a tab or newline in it, which no driver reports, becomes a space) */
static void cu_gpu_identity(const struct cudaDeviceProp *p, char *buf, size_t cap)
{
    const unsigned char *u = (const unsigned char *)p->uuid.bytes;
    snprintf(buf, cap, "%.200s|GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x"
             "%02x|%d.%d", p->name, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
             u[10], u[11], u[12], u[13], u[14], u[15], p->major, p->minor);
    for (char *c = buf; *c; c++)
        if (*c == '\t' || *c == '\n' || *c == '\r')
            *c = ' ';
}

struct backend *backend_cuda_create(int device) { return backend_cuda_create_tf32(device, 0); }

struct backend *backend_cuda_create_tf32(int device, int tf32)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        error_set("no usable CUDA GPU for --gpu %d: %s (%s); check that the NVIDIA driver is "
                  "loaded and a GPU is visible (nvidia-smi, CUDA_VISIBLE_DEVICES), or use "
                  "--cpu N",
                  device, cudaGetErrorString(e), cudaGetErrorName(e));
        return NULL;
    }
    if (count == 0) {
        error_set("no CUDA GPU visible for --gpu %d (the driver sees none; check nvidia-smi "
                  "and CUDA_VISIBLE_DEVICES), or use --cpu N",
                  device);
        return NULL;
    }
    if (device < 0 || device >= count) {
        error_set("CUDA device %d does not exist: %d visible, pick one of 0..%d (nvidia-smi "
                  "lists them) or use --cpu N",
                  device, count, count - 1);
        return NULL;
    }
    struct cuda_backend *cb = calloc(1, sizeof *cb);
    if (!cb) {
        error_set("backend_cuda_create: out of memory");
        return NULL;
    }
    cb->ops = cuda_backend_ops;
    cb->device = device;
    cb->sync_each = env_flag("DDPPROF_CUDA_SYNC");
    const char *cl = getenv("DDPPROF_CHANNELS_LAST"); /* "0": half tensors NCHW too */
    cb->channels_last = !(cl && strcmp(cl, "0") == 0);
    struct cudaDeviceProp prop;
    char gpu[CONV_CACHE_GPU_LEN], cache[4096];
    struct conv_plans_opts po = {.find_algos = env_flag("DDPPROF_CUDNN_BENCHMARK"),
                                 .tf32 = tf32 != 0,
                                 .cache_path = conv_cache_path(cache, sizeof cache) ? cache : NULL,
                                 .gpu = gpu};
    if (CHECK_CUDA(cudaGetDeviceProperties(&prop, device)))
        goto fail;
    cu_gpu_identity(&prop, gpu, sizeof gpu);
    if (CHECK_CUDA(cudaSetDevice(device)) ||
        CHECK_CUDA(cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking)) ||
        CHECK_CUBLAS(cublasCreate(&cb->cublas)) ||
        CHECK_CUBLAS(cublasSetStream(cb->cublas, cb->stream)) ||
        /* half GEMMs accumulate in fp32 and round once, as the CPU oracle: no split-K
         * partial sums added in the output type (cuBLAS allows that by default for fp16 and
         * bf16, and PyTorch keeps it; on an H200 it put bf16 outputs 0.01 off the fp32 sum).
         * fp32 GEMMs never TF32, whatever tf32 says (no CUBLAS_TF32_TENSOR_OP_MATH): PyTorch's
         * default, torch.backends.cuda.matmul.allow_tf32 = False */
        CHECK_CUBLAS(cublasSetMathMode(cb->cublas, CUBLAS_DEFAULT_MATH |
                                                       CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) ||
        CHECK_CUDNN(cudnnCreate(&cb->cudnn)) || CHECK_CUDNN(cudnnSetStream(cb->cudnn, cb->stream)) ||
        !(cb->conv = conv_plans_create(cb->cudnn, cb->stream, device, &po)) ||
        CHECK_CUDA(cudaMalloc((void **)&cb->dev_loss, sizeof(float))) ||
        CHECK_CUDA(cudaMalloc((void **)&cb->dev_ints, sizeof(int))) ||
        CHECK_CUDA(cudaMallocHost(&cb->host_scalars, 64)) ||
        CHECK_CUDA(cudaMallocHost((void **)&cb->stage, 2 * STAGE_HALF_BYTES)) ||
        CHECK_CUDA(cudaEventCreateWithFlags(&cb->stage_done[0], cudaEventDisableTiming)) ||
        CHECK_CUDA(cudaEventCreateWithFlags(&cb->stage_done[1], cudaEventDisableTiming)))
        goto fail;
    /* run one kernel now: a GPU this build has no code for fails here, clearly */
    int *probe = cb->host_scalars;
    probe[0] = 0;
    if (CHECK_CUDA(kern_probe(cb->stream, cb->dev_ints)) ||
        CHECK_CUDA(cudaMemcpyAsync(probe, cb->dev_ints, sizeof(int), cudaMemcpyDeviceToHost,
                                   cb->stream)) ||
        CHECK_CUDA(cudaStreamSynchronize(cb->stream)) || probe[0] != 1) {
        error_wrap("CUDA device %d (%s, compute capability %d.%d) cannot run this build's "
                   "kernels (built for sm_80 and sm_90; rebuild with "
                   "-DCMAKE_CUDA_ARCHITECTURES=%d%d)",
                   device, prop.name, prop.major, prop.minor, prop.major, prop.minor);
        goto fail;
    }
    return &cb->ops;
fail:
    error_wrap("creating the CUDA backend on device %d", device);
    (void)cudaGetLastError();
    cu_destroy(&cb->ops);
    return NULL;
}
