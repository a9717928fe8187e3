/* kernels.cu — the CUDA backend's own kernels and their C launchers (see kernels.h).
 *
 * Batch-norm statistics and gradient sums, the elementwise batch-norm, ReLU, max and
 * adaptive average pooling, residual add, bias, loss, metric, optimizer (SGD, Adam) and
 * mixed-precision kernels.  Every kernel mirrors the CPU backend's formula (backend_cpu.c)
 * and takes its per-element math from kernel_math.h; reductions accumulate in double in a
 * fixed order, so they are deterministic and at least as accurate as the CPU's.
 *
 * Activation kernels are templates over the element type T (float, __half,
 * __nv_bfloat16): each element is read into fp32 (elem<T>::load), computed on as in
 * fp32, and written back rounded to nearest even (elem<T>::store), once, as the CPU
 * backend rounds its fp32 storage of a half tensor.  WITH_ELEM picks T from a dtype.
 *
 * The block size and grid limits below may be overridden at compile time; tests/cuda_emu
 * builds this file with tiny grid limits so that every grid-stride loop and chunked
 * reduction makes several passes, and with one-warp blocks where it runs whole training
 * steps (tests/test_step_launches.c: fewer emulated threads, the same launches).  A launch's configuration must not contain '>' (tests/cuda_emu rewrites
 * launches with a regular expression). */
#include "cuda/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "backend/kernel_math.h"

#ifndef KERN_THREADS
#define KERN_THREADS 256 /* threads a block */
#endif
#define THREADS KERN_THREADS
#define WARPS (THREADS / 32)
static_assert(THREADS % 32 == 0 && THREADS >= 32 && THREADS <= 1024,
              "KERN_THREADS: whole warps, at most 1024");
#ifndef KERN_MAX_BLOCKS
#define KERN_MAX_BLOCKS 16384 /* grid-stride loops: enough blocks to fill any current GPU */
#endif

/* elements of one per-channel reduction chunk, and most chunks per channel */
#ifndef KERN_CHUNK_ELEMS
#define KERN_CHUNK_ELEMS 4096
#endif
#ifndef KERN_MAX_CHUNKS
#define KERN_MAX_CHUNKS 256
#endif

static unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    if (b < 1)
        b = 1;
    return (unsigned)(b < KERN_MAX_BLOCKS ? b : KERN_MAX_BLOCKS);
}

#define GRID_STRIDE(i, n)                                                                    \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                  \
         i += (size_t)gridDim.x * blockDim.x)

/* ------------------------------------------------------------------ element types */

namespace {

/* load: the element's value in fp32 (exact); store: fp32 rounded to T, nearest even
 * (beyond the fp16 range: inf) */
template <typename T> struct elem;

template <> struct elem<float> {
    static __device__ float load(float v) { return v; }
    static __device__ float store(float v) { return v; }
};

template <> struct elem<__half> {
    static __device__ float load(__half v) { return __half2float(v); }
    static __device__ __half store(float v) { return __float2half_rn(v); }
};

template <> struct elem<__nv_bfloat16> {
    static __device__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

} // namespace

template <typename T> static __device__ float ld(const T *p, size_t i)
{
    return elem<T>::load(p[i]);
}

template <typename T> static __device__ void st(T *p, size_t i, float v)
{
    p[i] = elem<T>::store(v);
}

/* Run the statements that follow with T the element type of dt (fp32 for anything but
 * the half types). */
#define WITH_ELEM(dt, T, ...)                                                                \
    do {                                                                                     \
        switch (dt) {                                                                        \
        case DT_F16: {                                                                       \
            typedef __half T;                                                                \
            __VA_ARGS__;                                                                     \
        } break;                                                                             \
        case DT_BF16: {                                                                      \
            typedef __nv_bfloat16 T;                                                         \
            __VA_ARGS__;                                                                     \
        } break;                                                                             \
        default: {                                                                           \
            typedef float T;                                                                 \
            __VA_ARGS__;                                                                     \
        } break;                                                                             \
        }                                                                                    \
    } while (0)

/* ------------------------------------------------------------------ block reductions */

static __device__ double warp_sum(double v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

/* sum of v over the block (THREADS threads); the result is valid in thread 0 */
static __device__ double block_sum(double v, double *shared /* WARPS */)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads(); /* shared may still be read from a previous call */
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    double t = 0.0;
    if (warp == 0) {
        t = lane < WARPS ? shared[lane] : 0.0;
        t = warp_sum(t);
    }
    return t;
}

/* ------------------------------------------------------------------ per-channel sums */

static int channel_chunks(int n, int c, int hw)
{
    (void)c;
    const size_t count = (size_t)n * hw;
    size_t chunks = (count + KERN_CHUNK_ELEMS - 1) / KERN_CHUNK_ELEMS;
    if (chunks < 1)
        chunks = 1;
    return (int)(chunks < KERN_MAX_CHUNKS ? chunks : KERN_MAX_CHUNKS);
}

extern "C" size_t kern_channel_ws_doubles(int n, int c, int hw)
{
    return 2 * (size_t)c * channel_chunks(n, c, hw);
}

enum chan_mode { CHAN_SUM = 0, CHAN_SQDEV = 1, CHAN_DY = 2 };

/* what the last block of a channel makes of the channel's total (chan_finish) */
enum chan_fin { FIN_MEAN = 0, FIN_INVSTD = 1, FIN_SUM = 2, FIN_BWD = 3 };

struct chan_out {
    double count;  /* n*hw */
    float eps;
    float *mean;   /* FIN_MEAN: total / count */
    float *invstd; /* FIN_INVSTD: 1/sqrt(total/count + eps) */
    const float *invstd_in; /* FIN_BWD: the forward's, for dweight */
    void *sum;     /* FIN_SUM: (float)total rounded to T */
    float *sum_dy, *sum_dy_xmu, *dweight, *dbias; /* FIN_BWD */
};

/* the chunks' partial sums of channel ch in chunk order (volatile: written by other blocks
 * of this launch, read once they have all counted themselves done) */
static __device__ double chunk_total(const double *part, int ch, int chunks)
{
    const volatile double *p = part + (size_t)ch * chunks;
    double s = 0.0;
    for (int b = 0; b < chunks; b++)
        s += p[b];
    return s;
}

/* the channel's results from its partial sums, by the last of its blocks */
template <int FIN, typename T>
static __device__ void chan_finish(int ch, int chunks, const double *part,
                                   const double *part2, const struct chan_out &o)
{
    const double total = chunk_total(part, ch, chunks);
    if (FIN == FIN_MEAN) {
        o.mean[ch] = (float)(total / o.count);
    } else if (FIN == FIN_INVSTD) {
        o.invstd[ch] = (float)(1.0 / sqrt(total / o.count + (double)o.eps));
    } else if (FIN == FIN_SUM) {
        st((T *)o.sum, ch, (float)total); /* the CPU's (float)sum, then its rounding */
    } else {
        const double s_dy_xmu = chunk_total(part2, ch, chunks);
        o.sum_dy[ch] = (float)total;
        o.sum_dy_xmu[ch] = (float)s_dy_xmu;
        if (o.dweight)
            o.dweight[ch] = (float)(s_dy_xmu * o.invstd_in[ch]);
        if (o.dbias)
            o.dbias[ch] = (float)total;
    }
}

/* One launch per reduction: block (chunk b, channel ch) sums its share of channel ch of
 * (n,c,hw) --
 *   CHAN_SUM: x;  CHAN_SQDEV: (x - mean[ch])^2;  CHAN_DY: dy and dy * (x - mean[ch]) --
 * into part[ch*chunks + b] (and part2[...] for the second sum of CHAN_DY), then counts
 * itself done in done[ch]; the channel's last block to finish adds the chunks' partial
 * sums in chunk order (so the totals do not depend on which block was last) and writes
 * the channel's results (chan_finish), then sets done[ch] back to 0 for the next launch.
 * The partial's store is fenced before the count, the count before the reads: the
 * "last block" reduction of CUDA's threadFenceReduction sample. */
template <int MODE, int FIN, typename T>
static __global__ void channel_reduce_kernel(int n, int c, int hw, int nhwc, const T *x,
                                             const T *dy,
                                             const float *mean, double *part, double *part2,
                                             unsigned *done, struct chan_out o)
{
    __shared__ double shared[WARPS];
    __shared__ int last;
    const int ch = blockIdx.y, chunks = gridDim.x, b = blockIdx.x;
    const size_t count = (size_t)n * hw;
    const size_t per = (count + chunks - 1) / chunks;
    const size_t lo = (size_t)b * per, hi = lo + per < count ? lo + per : count;
    const float m = MODE == CHAN_SUM ? 0.0f : mean[ch];
    double a = 0.0, a2 = 0.0;
    for (size_t e = lo + threadIdx.x; e < hi; e += THREADS) {
        const size_t i = e / (size_t)hw, j = e - i * (size_t)hw;
        const size_t idx = nhwc ? e * (size_t)c + ch : (i * (size_t)c + ch) * (size_t)hw + j;
        if (MODE == CHAN_SUM) {
            a += (double)ld(x, idx);
        } else if (MODE == CHAN_SQDEV) {
            const float d = ld(x, idx) - m; /* as the CPU: the deviation in float */
            a += (double)d * (double)d;
        } else {
            const double g = (double)ld(dy, idx);
            a += g;
            a2 += g * ((double)ld(x, idx) - (double)m);
        }
    }
    a = block_sum(a, shared);
    if (MODE == CHAN_DY)
        a2 = block_sum(a2, shared);
    if (threadIdx.x == 0) {
        part[(size_t)ch * chunks + b] = a;
        if (MODE == CHAN_DY)
            part2[(size_t)ch * chunks + b] = a2;
        __threadfence();
        last = atomicAdd(&done[ch], 1u) == (unsigned)chunks - 1;
    }
    __syncthreads();
    if (threadIdx.x == 0 && last) {
        __threadfence();
        chan_finish<FIN, T>(ch, chunks, part, part2, o);
        done[ch] = 0;
    }
}

extern "C" cudaError_t kern_bn_stats(cudaStream_t s, int n, int c, int hw, enum dtype dt,
                                     enum layout lay, const void *x, float eps, float *mean, float *invstd,
                                     double *ws, unsigned *done)
{
    const int chunks = channel_chunks(n, c, hw);
    const dim3 grid((unsigned)chunks, (unsigned)c);
    struct chan_out o = {};
    o.count = (double)n * hw;
    o.eps = eps;
    o.mean = mean;
    o.invstd = invstd;
    WITH_ELEM(dt, T, {
        const T *xt = (const T *)x;
        channel_reduce_kernel<CHAN_SUM, FIN_MEAN, T><<<grid, THREADS, 0, s>>>(
            n, c, hw, lay == LAYOUT_NHWC, xt, NULL, NULL, ws, NULL, done, o);
        channel_reduce_kernel<CHAN_SQDEV, FIN_INVSTD, T><<<grid, THREADS, 0, s>>>(
            n, c, hw, lay == LAYOUT_NHWC, xt, NULL, mean, ws, NULL, done, o);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t kern_channel_sum(cudaStream_t s, int n, int c, int hw, enum dtype dt,
                                        enum layout lay, const void *x, void *out, double *ws, unsigned *done)
{
    const int chunks = channel_chunks(n, c, hw);
    const dim3 grid((unsigned)chunks, (unsigned)c);
    struct chan_out o = {};
    o.sum = out;
    WITH_ELEM(dt, T, {
        channel_reduce_kernel<CHAN_SUM, FIN_SUM, T><<<grid, THREADS, 0, s>>>(
            n, c, hw, lay == LAYOUT_NHWC, (const T *)x, NULL, NULL, ws, NULL, done, o);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t kern_bn_backward_reduce(cudaStream_t s, int n, int c, int hw,
                                               enum dtype dt, enum layout lay, const void *dy, const void *x,
                                               const float *mean, const float *invstd,
                                               float *sum_dy, float *sum_dy_xmu,
                                               float *dweight, float *dbias, double *ws,
                                               unsigned *done)
{
    const int chunks = channel_chunks(n, c, hw);
    const dim3 grid((unsigned)chunks, (unsigned)c);
    double *part2 = ws + (size_t)c * chunks;
    struct chan_out o = {};
    o.invstd_in = invstd;
    o.sum_dy = sum_dy;
    o.sum_dy_xmu = sum_dy_xmu;
    o.dweight = dweight;
    o.dbias = dbias;
    WITH_ELEM(dt, T, {
        channel_reduce_kernel<CHAN_DY, FIN_BWD, T><<<grid, THREADS, 0, s>>>(
            n, c, hw, lay == LAYOUT_NHWC, (const T *)x, (const T *)dy, mean, ws, part2, done, o);
    });
    return cudaGetLastError();
}

static unsigned channel_blocks(int c) { return (unsigned)((c + THREADS - 1) / THREADS); }

/* torch.batch_norm_gather_stats_with_counts, one thread per channel: the CPU's Chan merge */
static __global__ void gather_stats_kernel(int world, int c, const float *means,
                                           const float *invstds, const float *counts,
                                           float momentum, float eps, float *running_mean,
                                           float *running_var, float *mean, float *invstd)
{
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch < c)
        km_bn_gather_channel(world, c, ch, means, invstds, counts, momentum, eps, running_mean,
                             running_var, mean, invstd);
}

extern "C" cudaError_t kern_bn_gather_stats(cudaStream_t s, int world, int c,
                                            const float *means, const float *invstds,
                                            const float *counts, float momentum, float eps,
                                            float *running_mean, float *running_var,
                                            float *mean, float *invstd)
{
    gather_stats_kernel<<<channel_blocks(c), THREADS, 0, s>>>(
        world, c, means, invstds, counts, momentum, eps, running_mean, running_var, mean, invstd);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ elementwise batch norm */

/* the channel of element i of a 4-D tensor (n,c,hw) stored NCHW or NHWC */
static __device__ int channel_of(size_t i, int c, size_t hw, int nhwc)
{
    return (int)(nhwc ? i % (size_t)c : (i / hw) % (size_t)c);
}

/* y = (x - mean) * (invstd * weight) + bias; eval (running_var != NULL) takes invstd from
 * the running variance, as the CPU */
template <typename T>
static __global__ void bn_affine_kernel(size_t total, int c, int hw, int nhwc, const T *x,
                                        const float *mean, const float *invstd,
                                        const float *running_var, float eps,
                                        const float *weight, const float *bias, T *y)
{
    GRID_STRIDE(i, total)
    {
        const int ch = channel_of(i, c, (size_t)hw, nhwc);
        const float is = running_var ? (float)(1.0 / sqrt((double)running_var[ch] + (double)eps))
                                     : invstd[ch];
        const float sc = is * (weight ? weight[ch] : 1.0f);
        const float sh = bias ? bias[ch] : 0.0f;
        st(y, i, (ld(x, i) - mean[ch]) * sc + sh);
    }
}

extern "C" cudaError_t kern_bn_elemt(cudaStream_t s, int n, int c, int hw, enum dtype dt,
                                     enum layout lay, const void *x, const float *mean, const float *invstd,
                                     const float *weight, const float *bias, void *y)
{
    const size_t total = (size_t)n * c * hw;
    WITH_ELEM(dt, T, {
        bn_affine_kernel<T><<<blocks_for(total), THREADS, 0, s>>>(
            total, c, hw, lay == LAYOUT_NHWC, (const T *)x, mean, invstd, NULL, 0.0f, weight,
            bias, (T *)y);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t kern_bn_forward_eval(cudaStream_t s, int n, int c, int hw, enum dtype dt,
                                            enum layout lay, const void *x, const float *running_mean,
                                            const float *running_var, float eps,
                                            const float *weight, const float *bias, void *y)
{
    const size_t total = (size_t)n * c * hw;
    WITH_ELEM(dt, T, {
        bn_affine_kernel<T><<<blocks_for(total), THREADS, 0, s>>>(
            total, c, hw, lay == LAYOUT_NHWC, (const T *)x, running_mean, NULL, running_var, eps,
            weight, bias, (T *)y);
    });
    return cudaGetLastError();
}

template <typename T>
static __global__ void bn_backward_elemt_kernel(size_t total, int c, int hw, int nhwc,
                                                const T *dy,
                                                const T *x, const float *mean,
                                                const float *invstd, const float *weight,
                                                const float *sum_dy, const float *sum_dy_xmu,
                                                const float *count_dev, T *dx)
{
    const float count = *count_dev; /* device memory: the host never reads it */
    GRID_STRIDE(i, total)
    {
        const int ch = channel_of(i, c, (size_t)hw, nhwc);
        const float wt = weight ? weight[ch] : 1.0f;
        const float mdy = sum_dy[ch] / count, mdyx = sum_dy_xmu[ch] / count;
        st(dx, i, km_bn_backward_elemt(ld(dy, i), ld(x, i), mean[ch], invstd[ch], wt, mdy, mdyx));
    }
}

extern "C" cudaError_t kern_bn_backward_elemt(cudaStream_t s, int n, int c, int hw,
                                              enum dtype dt, enum layout lay, const void *dy, const void *x,
                                              const float *mean, const float *invstd,
                                              const float *weight, const float *sum_dy,
                                              const float *sum_dy_xmu, const float *count,
                                              void *dx)
{
    const size_t total = (size_t)n * c * hw;
    WITH_ELEM(dt, T, {
        bn_backward_elemt_kernel<T><<<blocks_for(total), THREADS, 0, s>>>(
            total, c, hw, lay == LAYOUT_NHWC, (const T *)dy, (const T *)x, mean, invstd, weight,
            sum_dy,
            sum_dy_xmu, count, (T *)dx);
    });
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ ReLU, pooling */

template <typename T> static __global__ void relu_forward_kernel(size_t n, const T *x, T *y)
{
    GRID_STRIDE(i, n)
    {
        const float v = ld(x, i);
        st(y, i, v > 0.0f ? v : 0.0f); /* NaN -> 0, as the CPU */
    }
}

template <typename T>
static __global__ void relu_backward_kernel(size_t n, const T *y, const T *dy, T *dx)
{
    GRID_STRIDE(i, n)
    {
        const float g = ld(dy, i);
        st(dx, i, ld(y, i) > 0.0f ? g : 0.0f);
    }
}

extern "C" cudaError_t kern_relu_forward(cudaStream_t s, size_t n, enum dtype dt,
                                         const void *x, void *y)
{
    if (n == 0)
        return cudaSuccess;
    WITH_ELEM(dt, T, {
        relu_forward_kernel<T><<<blocks_for(n), THREADS, 0, s>>>(n, (const T *)x, (T *)y);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t kern_relu_backward(cudaStream_t s, size_t n, enum dtype dt,
                                          const void *y, const void *dy, void *dx)
{
    if (n == 0)
        return cudaSuccess;
    WITH_ELEM(dt, T, {
        relu_backward_kernel<T><<<blocks_for(n), THREADS, 0, s>>>(n, (const T *)y,
                                                                   (const T *)dy, (T *)dx);
    });
    return cudaGetLastError();
}

/* Element o of a 4-D tensor (n, c, plane elements) stored NCHW or NHWC: its image, its
 * channel and its place j within the channel's plane.  Element j of plane (img, ch) is at
 * plane_base(...) + j * (nhwc ? c : 1). */
struct plane_at {
    size_t img, j;
    int ch;
};

static __device__ struct plane_at plane_of(size_t o, int c, size_t plane, int nhwc)
{
    struct plane_at a;
    if (nhwc) {
        const size_t pix = o / (size_t)c;
        a.ch = (int)(o - pix * (size_t)c);
        a.img = pix / plane;
        a.j = pix - a.img * plane;
    } else {
        const size_t pl = o / plane;
        a.j = o - pl * plane;
        a.img = pl / (size_t)c;
        a.ch = (int)(pl - a.img * (size_t)c);
    }
    return a;
}

static __device__ size_t plane_base(size_t img, int ch, int c, size_t plane, int nhwc)
{
    return nhwc ? img * plane * (size_t)c + (size_t)ch : (img * (size_t)c + (size_t)ch) * plane;
}

/* one thread per output: the first maximum in window order wins and a NaN is taken, as
 * the CPU's pool_take; argmax holds the index within the plane, y*w + x, in either layout */
template <typename T>
static __global__ void maxpool_forward_kernel(size_t total, int c, int nhwc, int h, int w,
                                              int kernel, int stride, int p_out, int q_out,
                                              const T *x, T *y, int32_t *argmax)
{
    const size_t es = nhwc ? (size_t)c : 1; /* between a plane's elements */
    GRID_STRIDE(o, total)
    {
        const size_t pq = (size_t)p_out * q_out;
        const struct plane_at at = plane_of(o, c, pq, nhwc);
        const int j = (int)at.j;
        const int p = j / q_out, q = j - p * q_out;
        const T *xp = x + plane_base(at.img, at.ch, c, (size_t)h * w, nhwc);
        int32_t best = p * stride * w + q * stride;
        float bv = ld(xp, (size_t)best * es);
        for (int a = 0; a < kernel; a++)
            for (int b = 0; b < kernel; b++) {
                const int32_t idx = (p * stride + a) * w + q * stride + b;
                const float v = ld(xp, (size_t)idx * es);
                const bool take = (v > bv) | (v != v);
                bv = take ? v : bv;
                best = take ? idx : best;
            }
        st(y, o, bv);
        argmax[o] = best;
    }
}

/* one thread per input element: the sum, in output order, of the dy whose argmax points
 * here (a gather, so no atomics and the CPU's order of additions), rounded once */
template <typename T>
static __global__ void maxpool_backward_kernel(size_t total, int c, int nhwc, int h, int w,
                                               int kernel, int stride, int p_out, int q_out,
                                               const T *dy, const int32_t *argmax, T *dx)
{
    const size_t es = nhwc ? (size_t)c : 1;
    GRID_STRIDE(i, total)
    {
        const size_t hw = (size_t)h * w;
        const struct plane_at pa = plane_of(i, c, hw, nhwc);
        const int at = (int)pa.j;
        const int hh = at / w, ww = at - hh * w;
        /* outputs whose window [o*stride, o*stride + kernel) contains hh (likewise ww) */
        const int p_lo = hh - kernel + 1 <= 0 ? 0 : (hh - kernel + 1 + stride - 1) / stride;
        const int p_hi = min(hh / stride, p_out - 1);
        const int q_lo = ww - kernel + 1 <= 0 ? 0 : (ww - kernel + 1 + stride - 1) / stride;
        const int q_hi = min(ww / stride, q_out - 1);
        const size_t ob = plane_base(pa.img, pa.ch, c, (size_t)p_out * q_out, nhwc);
        const T *dyp = dy + ob;
        const int32_t *ap = argmax + ob;
        float acc = 0.0f;
        for (int p = p_lo; p <= p_hi; p++)
            for (int q = q_lo; q <= q_hi; q++)
                if (ap[((size_t)p * q_out + q) * es] == at)
                    acc += ld(dyp, ((size_t)p * q_out + q) * es);
        st(dx, i, acc);
    }
}

extern "C" cudaError_t kern_maxpool_forward(cudaStream_t s, int n, int c, int h, int w,
                                            int kernel, int stride, int p, int q, enum dtype dt,
                                            enum layout lay, const void *x, void *y,
                                            int32_t *argmax)
{
    const size_t total = (size_t)n * c * p * q;
    if (total == 0)
        return cudaSuccess;
    WITH_ELEM(dt, T, {
        maxpool_forward_kernel<T><<<blocks_for(total), THREADS, 0, s>>>(
            total, c, lay == LAYOUT_NHWC, h, w, kernel, stride, p, q, (const T *)x, (T *)y,
            argmax);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t kern_maxpool_backward(cudaStream_t s, int n, int c, int h, int w,
                                             int kernel, int stride, int p, int q,
                                             enum dtype dt, enum layout lay, const void *dy,
                                             const int32_t *argmax, void *dx)
{
    const size_t total = (size_t)n * c * h * w;
    if (total == 0)
        return cudaSuccess;
    WITH_ELEM(dt, T, {
        maxpool_backward_kernel<T><<<blocks_for(total), THREADS, 0, s>>>(
            total, c, lay == LAYOUT_NHWC, h, w, kernel, stride, p, q, (const T *)dy, argmax,
            (T *)dx);
    });
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ adaptive average pool */

/* the window of output i along an axis of `in` split into `out`: [*lo, *hi) (as the CPU) */
static __device__ void adaptive_window(int i, int in, int out, int *lo, int *hi)
{
    *lo = (int)((long long)i * in / out);
    *hi = (int)(((long long)(i + 1) * in + out - 1) / out);
}

/* one thread per output: the window summed in fp32 in row-major order, as the CPU */
template <typename T>
static __global__ void adaptive_avg_forward_kernel(size_t total, int ch, int nhwc, int h, int w,
                                                   int p_out, int q_out, const T *x, T *y)
{
    const size_t es = nhwc ? (size_t)ch : 1;
    GRID_STRIDE(o, total)
    {
        const size_t pq = (size_t)p_out * q_out;
        const struct plane_at at = plane_of(o, ch, pq, nhwc);
        const int j = (int)at.j;
        const int i = j / q_out, jj = j - i * q_out;
        int r0, r1, c0, c1;
        adaptive_window(i, h, p_out, &r0, &r1);
        adaptive_window(jj, w, q_out, &c0, &c1);
        const T *xp = x + plane_base(at.img, at.ch, ch, (size_t)h * w, nhwc);
        float acc = 0.0f;
        for (int r = r0; r < r1; r++)
            for (int c = c0; c < c1; c++)
                acc += ld(xp, ((size_t)r * w + c) * es);
        st(y, o, acc / (float)((r1 - r0) * (c1 - c0)));
    }
}

/* one thread per input element: the outputs whose window holds it are rows
 * [floor(r*p/h), ceil((r+1)*p/h)) and likewise columns; their dy / window size summed in
 * output order (the CPU's order of additions), rounded once */
template <typename T>
static __global__ void adaptive_avg_backward_kernel(size_t total, int ch, int nhwc, int h,
                                                    int w, int p_out, int q_out, const T *dy,
                                                    T *dx)
{
    const size_t es = nhwc ? (size_t)ch : 1;
    GRID_STRIDE(e, total)
    {
        const size_t hw = (size_t)h * w;
        const struct plane_at pa = plane_of(e, ch, hw, nhwc);
        const int at = (int)pa.j;
        const int r = at / w, c = at - r * w;
        const int i_lo = (int)((long long)r * p_out / h);
        const int i_hi = min((int)(((long long)(r + 1) * p_out + h - 1) / h), p_out);
        const int j_lo = (int)((long long)c * q_out / w);
        const int j_hi = min((int)(((long long)(c + 1) * q_out + w - 1) / w), q_out);
        const T *dyp = dy + plane_base(pa.img, pa.ch, ch, (size_t)p_out * q_out, nhwc);
        float acc = 0.0f;
        for (int i = i_lo; i < i_hi; i++) {
            int r0, r1;
            adaptive_window(i, h, p_out, &r0, &r1);
            if (r < r0 || r >= r1)
                continue;
            for (int j = j_lo; j < j_hi; j++) {
                int c0, c1;
                adaptive_window(j, w, q_out, &c0, &c1);
                if (c < c0 || c >= c1)
                    continue;
                acc += ld(dyp, ((size_t)i * q_out + j) * es) / (float)((r1 - r0) * (c1 - c0));
            }
        }
        st(dx, e, acc);
    }
}

extern "C" cudaError_t kern_adaptive_avgpool_forward(cudaStream_t s, int n, int c, int h,
                                                     int w, int p, int q, enum dtype dt,
                                                     enum layout lay, const void *x, void *y)
{
    const size_t total = (size_t)n * c * p * q;
    if (total == 0)
        return cudaSuccess;
    WITH_ELEM(dt, T, {
        adaptive_avg_forward_kernel<T><<<blocks_for(total), THREADS, 0, s>>>(
            total, c, lay == LAYOUT_NHWC, h, w, p, q, (const T *)x, (T *)y);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t kern_adaptive_avgpool_backward(cudaStream_t s, int n, int c, int h,
                                                      int w, int p, int q, enum dtype dt,
                                                      enum layout lay, const void *dy, void *dx)
{
    const size_t total = (size_t)n * c * h * w;
    if (total == 0)
        return cudaSuccess;
    WITH_ELEM(dt, T, {
        adaptive_avg_backward_kernel<T><<<blocks_for(total), THREADS, 0, s>>>(
            total, c, lay == LAYOUT_NHWC, h, w, p, q, (const T *)dy, (T *)dx);
    });
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ residual add */

template <typename T>
static __global__ void add_kernel(size_t n, const T *a, const T *b, T *y)
{
    GRID_STRIDE(i, n)
    {
        st(y, i, ld(a, i) + ld(b, i));
    }
}

extern "C" cudaError_t kern_add(cudaStream_t s, size_t n, enum dtype dt, const void *a,
                                const void *b, void *y)
{
    if (n == 0)
        return cudaSuccess;
    WITH_ELEM(dt, T, {
        add_kernel<T><<<blocks_for(n), THREADS, 0, s>>>(n, (const T *)a, (const T *)b, (T *)y);
    });
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ bias */

template <typename T>
static __global__ void bias_add_channels_kernel(size_t total, int k, size_t pq, int nhwc,
                                                const T *b, T *y)
{
    GRID_STRIDE(i, total)
    {
        st(y, i, ld(y, i) + ld(b, (size_t)channel_of(i, k, pq, nhwc)));
    }
}

template <typename T>
static __global__ void bias_fill_rows_kernel(size_t total, int out, const T *b, T *y)
{
    GRID_STRIDE(i, total)
    {
        y[i] = b[i % (size_t)out];
    }
}

/* one thread per column, rows summed in order in double (as the CPU), written as the
 * CPU's (float)sum rounded to T */
template <typename T>
static __global__ void column_sum_kernel(int n, int out, const T *dy, T *db)
{
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= out)
        return;
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += ld(dy, (size_t)i * out + o);
    st(db, o, (float)s);
}

extern "C" cudaError_t kern_bias_add_channels(cudaStream_t s, int n, int k, size_t pq,
                                              enum dtype dt, enum layout lay, const void *b,
                                              void *y)
{
    const size_t total = (size_t)n * k * pq;
    if (total == 0)
        return cudaSuccess;
    WITH_ELEM(dt, T, {
        bias_add_channels_kernel<T><<<blocks_for(total), THREADS, 0, s>>>(
            total, k, pq, lay == LAYOUT_NHWC, (const T *)b, (T *)y);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t kern_bias_fill_rows(cudaStream_t s, int n, int out, enum dtype dt,
                                           const void *b, void *y)
{
    const size_t total = (size_t)n * out;
    if (total == 0)
        return cudaSuccess;
    WITH_ELEM(dt, T, {
        bias_fill_rows_kernel<T><<<blocks_for(total), THREADS, 0, s>>>(total, out, (const T *)b,
                                                                        (T *)y);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t kern_column_sum(cudaStream_t s, int n, int out, enum dtype dt,
                                       const void *dy, void *db)
{
    if (out <= 0)
        return cudaSuccess;
    const unsigned blocks = (unsigned)((out + THREADS - 1) / THREADS);
    WITH_ELEM(dt, T, {
        column_sum_kernel<T><<<blocks, THREADS, 0, s>>>(n, out, (const T *)dy, (T *)db);
    });
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ loss, metric */

static __device__ float warp_max(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, off));
    return __shfl_sync(0xffffffffu, v, 0);
}

/* one warp per row, the CPU's formulas: loss_i = max + log(sum exp(x - max)) - x[label] in
 * double; dlogits = exp(x - max) / (sum * n), minus 1/n at the label.  A label outside
 * [0, c) gives a NaN loss and a plain softmax / n row. */
static __global__ void softmax_xent_rows_kernel(int n, int c, const float *logits,
                                                const int32_t *labels, float *dlogits,
                                                double *row_loss)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (row >= n)
        return; /* whole warps leave together: row depends only on the warp */
    const float *x = logits + (size_t)row * c;
    float mx = -INFINITY;
    for (int j = lane; j < c; j += 32)
        mx = fmaxf(mx, x[j]);
    mx = warp_max(mx);
    /* the CPU starts from x[0] and keeps a NaN only where '>' would; fmaxf ignores NaN,
     * so a row holding a NaN is marked NaN explicitly below */
    double s = 0.0;
    int nan_seen = 0;
    for (int j = lane; j < c; j += 32) {
        s += (double)expf(x[j] - mx);
        nan_seen |= x[j] != x[j];
    }
    s = warp_sum(s);
    s = __shfl_sync(0xffffffffu, s, 0);
    nan_seen = __any_sync(0xffffffffu, nan_seen);
    const int32_t lab = labels[row];
    const bool ok = lab >= 0 && lab < c;
    if (lane == 0)
        row_loss[row] = ok && !nan_seen ? (double)mx + log(s) - (double)x[lab] : (double)NAN;
    if (dlogits) {
        float *d = dlogits + (size_t)row * c;
        const double inv = 1.0 / (s * n);
        for (int j = lane; j < c; j += 32) {
            float v = (float)((double)expf(x[j] - mx) * inv);
            if (ok && j == lab)
                v -= 1.0f / (float)n;
            d[j] = v;
        }
    }
}

/* one block: *out = (float)(sum(row_loss) / n), summed in a fixed order */
static __global__ void mean_loss_kernel(int n, const double *row_loss, float *out)
{
    __shared__ double shared[WARPS];
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += THREADS)
        s += row_loss[i];
    s = block_sum(s, shared);
    if (threadIdx.x == 0)
        *out = (float)(s / n);
}

extern "C" cudaError_t kern_softmax_xent(cudaStream_t s, int n, int c, const float *logits,
                                         const int32_t *labels, float *dlogits,
                                         double *row_loss, float *loss_out)
{
    softmax_xent_rows_kernel<<<(unsigned)((n + WARPS - 1) / WARPS), THREADS, 0, s>>>(
        n, c, logits, labels, dlogits, row_loss);
    mean_loss_kernel<<<1, THREADS, 0, s>>>(n, row_loss, loss_out);
    return cudaGetLastError();
}

/* one thread per row, the CPU's scan: a later element wins only if strictly greater */
static __global__ void count_correct_kernel(int n, int c, const float *logits,
                                            const int32_t *labels, int *count)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const float *row = logits + (size_t)i * c;
    int best = 0;
    for (int j = 1; j < c; j++)
        if (row[j] > row[best])
            best = j;
    if (best == labels[i])
        atomicAdd(count, 1);
}

extern "C" cudaError_t kern_count_correct(cudaStream_t s, int n, int c, const float *logits,
                                          const int32_t *labels, int *count)
{
    cudaError_t e = cudaMemsetAsync(count, 0, sizeof(int), s);
    if (e != cudaSuccess)
        return e;
    count_correct_kernel<<<(unsigned)((n + THREADS - 1) / THREADS), THREADS, 0, s>>>(
        n, c, logits, labels, count);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ elementwise, optimizer */

static __global__ void scale_kernel(size_t n, float alpha, const float *src, float *dst)
{
    GRID_STRIDE(i, n)
    {
        dst[i] = alpha * src[i];
    }
}

static __global__ void sgd_kernel(size_t n, float *param, const float *grad, float *buf,
                                  float lr, float momentum, float dampening, float weight_decay,
                                  int nesterov, int first)
{
    GRID_STRIDE(i, n)
    {
        float unused = 0.0f;
        float *b = buf ? &buf[i] : &unused;
        param[i] = km_sgd_update(param[i], grad[i], b, lr, momentum, dampening, weight_decay,
                                 nesterov, first);
    }
}

static __global__ void adam_kernel(size_t n, float *param, const float *grad, float *exp_avg,
                                   float *exp_avg_sq, struct km_adam k)
{
    GRID_STRIDE(i, n)
    {
        param[i] = km_adam_update(param[i], grad[i], &exp_avg[i], &exp_avg_sq[i], &k);
    }
}

static __global__ void round_amp_kernel(size_t n, int dt, const float *src, float *dst)
{
    GRID_STRIDE(i, n)
    {
        dst[i] = km_round_amp(src[i], dt);
    }
}

template <typename S, typename D>
static __global__ void cast_kernel(size_t n, const S *src, D *dst)
{
    GRID_STRIDE(i, n)
    {
        st(dst, i, ld(src, i));
    }
}

/* where element i of a 4-D tensor (c channels of hw elements) stored in layout to_nhwc is
 * in the same tensor stored in layout from_nhwc */
static __device__ size_t relayout_src(size_t i, int c, size_t hw, int from_nhwc, int to_nhwc)
{
    const struct plane_at a = plane_of(i, c, hw, to_nhwc);
    return plane_base(a.img, a.ch, c, hw, from_nhwc) + a.j * (from_nhwc ? (size_t)c : 1);
}

/* dst (n,c,hw) of D in layout to_nhwc = src of S in layout from_nhwc: a gather, so the
 * writes are in order */
template <typename S, typename D>
static __global__ void convert_kernel(size_t total, int c, size_t hw, int from_nhwc,
                                      int to_nhwc, const S *src, D *dst)
{
    GRID_STRIDE(i, total)
    {
        st(dst, i, ld(src, relayout_src(i, c, hw, from_nhwc, to_nhwc)));
    }
}

/* up to KERN_CAST_LIST tensors, by value as the unscale list below: block row blockIdx.y
 * converts tensor blockIdx.y; c[y] > 0 for a 4-D one whose channels (c[y] of hw[y]
 * elements each) move from layout from_nhwc to to_nhwc */
struct cast_list {
    const void *src[KERN_CAST_LIST];
    void *dst[KERN_CAST_LIST];
    size_t n[KERN_CAST_LIST];
    size_t hw[KERN_CAST_LIST];
    int c[KERN_CAST_LIST];
    int from_nhwc, to_nhwc;
};

template <typename S, typename D> static __global__ void cast_list_kernel(struct cast_list list)
{
    const S *src = (const S *)list.src[blockIdx.y];
    D *dst = (D *)list.dst[blockIdx.y];
    const size_t n = list.n[blockIdx.y], hw = list.hw[blockIdx.y];
    const int c = list.c[blockIdx.y];
    if (c > 0) {
        GRID_STRIDE(i, n)
        {
            st(dst, i, ld(src, relayout_src(i, c, hw, list.from_nhwc, list.to_nhwc)));
        }
        return;
    }
    GRID_STRIDE(i, n)
    {
        st(dst, i, ld(src, i));
    }
}

/* up to KERN_UNSCALE_LIST tensors, passed by value as a kernel argument (as PyTorch's
 * multi_tensor_apply): block row blockIdx.y walks tensor blockIdx.y */
struct unscale_list {
    float *grad[KERN_UNSCALE_LIST];
    size_t n[KERN_UNSCALE_LIST];
};

static __global__ void unscale_kernel(struct unscale_list list, float inv_scale, float *found)
{
    float *g = list.grad[blockIdx.y];
    const size_t n = list.n[blockIdx.y];
    int any = 0;
    GRID_STRIDE(i, n)
    {
        g[i] = km_unscale(g[i], inv_scale, &any);
    }
    if (any)
        *found = 1.0f; /* every writer writes the same value */
}

static __global__ void probe_kernel(int *out) { *out = 1; }

extern "C" cudaError_t kern_scale(cudaStream_t s, size_t n, float alpha, const float *src,
                                  float *dst)
{
    if (n == 0)
        return cudaSuccess;
    scale_kernel<<<blocks_for(n), THREADS, 0, s>>>(n, alpha, src, dst);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_sgd_step(cudaStream_t s, size_t n, float *param, const float *grad,
                                     float *buf, float lr, float momentum, float dampening,
                                     float weight_decay, int nesterov, int first)
{
    if (n == 0)
        return cudaSuccess;
    /* without momentum km_sgd_update never touches the buffer */
    sgd_kernel<<<blocks_for(n), THREADS, 0, s>>>(n, param, grad, momentum != 0.0f ? buf : NULL,
                                                 lr, momentum, dampening, weight_decay, nesterov,
                                                 first);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_adam_step(cudaStream_t s, size_t n, float *param,
                                      const float *grad, float *exp_avg, float *exp_avg_sq,
                                      double lr, double beta1, double beta2, double eps,
                                      double weight_decay, long long step)
{
    if (n == 0)
        return cudaSuccess;
    struct km_adam k;
    km_adam_scalars(lr, beta1, beta2, eps, weight_decay, step, &k);
    adam_kernel<<<blocks_for(n), THREADS, 0, s>>>(n, param, grad, exp_avg, exp_avg_sq, k);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_round_amp(cudaStream_t s, size_t n, int dt, const float *src,
                                      float *dst)
{
    if (n == 0)
        return cudaSuccess;
    round_amp_kernel<<<blocks_for(n), THREADS, 0, s>>>(n, dt, src, dst);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_cast(cudaStream_t s, size_t n, enum dtype from, const void *src,
                                 enum dtype to, void *dst)
{
    if (n == 0)
        return cudaSuccess;
    if (from == to)
        return src == dst ? cudaSuccess
                          : cudaMemcpyAsync(dst, src, n * (from == DT_F32 ? 4 : 2),
                                            cudaMemcpyDeviceToDevice, s);
    WITH_ELEM(from, S, WITH_ELEM(to, D, {
        cast_kernel<S, D><<<blocks_for(n), THREADS, 0, s>>>(n, (const S *)src, (D *)dst);
    }));
    return cudaGetLastError();
}

extern "C" cudaError_t kern_convert(cudaStream_t s, int n, int c, size_t hw, enum dtype from,
                                    enum layout lf, const void *src, enum dtype to,
                                    enum layout lt, void *dst)
{
    const size_t total = (size_t)n * c * hw;
    if (lf == lt || hw == 1 || c == 1)
        return kern_cast(s, total, from, src, to, dst);
    WITH_ELEM(from, S, WITH_ELEM(to, D, {
        convert_kernel<S, D><<<blocks_for(total), THREADS, 0, s>>>(
            total, c, hw, lf == LAYOUT_NHWC, lt == LAYOUT_NHWC, (const S *)src, (D *)dst);
    }));
    return cudaGetLastError();
}

extern "C" cudaError_t kern_cast_list(cudaStream_t s, int count, enum dtype from,
                                      enum layout lf, const void *const *srcs, enum dtype to,
                                      enum layout lt, void *const *dsts, const size_t *numels,
                                      const int *dims)
{
    cudaError_t e = cudaSuccess;
    for (int at = 0; e == cudaSuccess && at < count; at += KERN_CAST_LIST) {
        struct cast_list list;
        const int m = count - at < KERN_CAST_LIST ? count - at : KERN_CAST_LIST;
        size_t most = 0;
        list.from_nhwc = lf == LAYOUT_NHWC;
        list.to_nhwc = lt == LAYOUT_NHWC;
        for (int i = 0; i < m; i++) {
            list.src[i] = srcs[at + i];
            list.dst[i] = dsts[at + i];
            list.n[i] = numels[at + i];
            const int *d = dims ? dims + 4 * (size_t)(at + i) : NULL;
            const int moves = d && d[0] > 0 && lf != lt && d[1] > 1 && d[2] * d[3] > 1;
            list.c[i] = moves ? d[1] : 0;
            list.hw[i] = moves ? (size_t)d[2] * d[3] : 1;
            most = list.n[i] > most ? list.n[i] : most;
        }
        if (most == 0)
            continue;
        /* as kern_unscale: the longest tensor decides the row width, within one grid's
         * worth of blocks */
        unsigned bx = blocks_for(most), cap = KERN_MAX_BLOCKS / (unsigned)m;
        bx = bx < cap ? bx : cap < 1 ? 1 : cap;
        WITH_ELEM(from, S, WITH_ELEM(to, D, {
            cast_list_kernel<S, D><<<dim3(bx, (unsigned)m), THREADS, 0, s>>>(list);
        }));
        e = cudaGetLastError();
    }
    return e;
}

extern "C" cudaError_t kern_unscale(cudaStream_t s, int count, float *const *grads,
                                    const size_t *numels, float inv_scale, float *found)
{
    cudaError_t e = cudaMemsetAsync(found, 0, sizeof(float), s);
    for (int at = 0; e == cudaSuccess && at < count; at += KERN_UNSCALE_LIST) {
        struct unscale_list list;
        const int m = count - at < KERN_UNSCALE_LIST ? count - at : KERN_UNSCALE_LIST;
        size_t most = 0;
        for (int i = 0; i < m; i++) {
            list.grad[i] = grads[at + i];
            list.n[i] = numels[at + i];
            most = list.n[i] > most ? list.n[i] : most;
        }
        /* the longest tensor decides the row width; the whole grid stays within the
         * blocks one grid-stride loop would use */
        unsigned bx = blocks_for(most), cap = KERN_MAX_BLOCKS / (unsigned)m;
        bx = bx < cap ? bx : cap < 1 ? 1 : cap;
        unscale_kernel<<<dim3(bx, (unsigned)m), THREADS, 0, s>>>(list, inv_scale, found);
        e = cudaGetLastError();
    }
    return e;
}

extern "C" cudaError_t kern_probe(cudaStream_t s, int *out)
{
    probe_kernel<<<1, 1, 0, s>>>(out);
    return cudaGetLastError();
}
