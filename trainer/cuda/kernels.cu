/* kernels.cu — the CUDA backend's own kernels and their C launchers (see kernels.h).
 *
 * Batch-norm statistics and gradient sums, the elementwise batch-norm, ReLU, max pooling,
 * bias, loss, metric, optimizer and mixed-precision kernels.  Every kernel mirrors the
 * CPU backend's formula (backend_cpu.c) and takes its per-element math from
 * kernel_math.h; reductions accumulate in double in a fixed order, so they are
 * deterministic and at least as accurate as the CPU's. */
#include "cuda/kernels.h"

#include <math.h>

#include "backend/kernel_math.h"

#define THREADS 256
#define WARPS (THREADS / 32)
#define MAX_BLOCKS 16384 /* grid-stride loops: enough blocks to fill any current GPU */

/* elements of one per-channel reduction chunk, and most chunks per channel */
#define CHUNK_ELEMS 4096
#define MAX_CHUNKS 256

static unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    if (b < 1)
        b = 1;
    return (unsigned)(b < MAX_BLOCKS ? b : MAX_BLOCKS);
}

#define GRID_STRIDE(i, n)                                                                    \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                  \
         i += (size_t)gridDim.x * blockDim.x)

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
    size_t chunks = (count + CHUNK_ELEMS - 1) / CHUNK_ELEMS;
    if (chunks < 1)
        chunks = 1;
    return (int)(chunks < MAX_CHUNKS ? chunks : MAX_CHUNKS);
}

extern "C" size_t kern_channel_ws_doubles(int n, int c, int hw)
{
    return 2 * (size_t)c * channel_chunks(n, c, hw);
}

enum chan_mode { CHAN_SUM = 0, CHAN_SQDEV = 1, CHAN_DY = 2 };

/* Block (chunk b, channel ch) sums its share of channel ch of (n,c,hw):
 *   CHAN_SUM: x;  CHAN_SQDEV: (x - mean[ch])^2;  CHAN_DY: dy and dy * (x - mean[ch]).
 * part[ch*chunks + b] (and part2[...] for the second sum of CHAN_DY). */
template <int MODE>
static __global__ void channel_partial_kernel(int n, int c, int hw, const float *x,
                                              const float *dy, const float *mean,
                                              double *part, double *part2)
{
    __shared__ double shared[WARPS];
    const int ch = blockIdx.y, chunks = gridDim.x, b = blockIdx.x;
    const size_t count = (size_t)n * hw;
    const size_t per = (count + chunks - 1) / chunks;
    const size_t lo = (size_t)b * per, hi = lo + per < count ? lo + per : count;
    const float m = MODE == CHAN_SUM ? 0.0f : mean[ch];
    double a = 0.0, a2 = 0.0;
    for (size_t e = lo + threadIdx.x; e < hi; e += THREADS) {
        const size_t i = e / (size_t)hw, j = e - i * (size_t)hw;
        const size_t idx = (i * (size_t)c + ch) * (size_t)hw + j;
        if (MODE == CHAN_SUM) {
            a += (double)x[idx];
        } else if (MODE == CHAN_SQDEV) {
            const float d = x[idx] - m; /* as the CPU: the deviation in float */
            a += (double)d * (double)d;
        } else {
            const double g = (double)dy[idx];
            a += g;
            a2 += g * ((double)x[idx] - (double)m);
        }
    }
    a = block_sum(a, shared);
    if (MODE == CHAN_DY)
        a2 = block_sum(a2, shared);
    if (threadIdx.x == 0) {
        part[(size_t)ch * chunks + b] = a;
        if (MODE == CHAN_DY)
            part2[(size_t)ch * chunks + b] = a2;
    }
}

static __device__ double chunk_total(const double *part, int ch, int chunks)
{
    double s = 0.0;
    for (int b = 0; b < chunks; b++)
        s += part[(size_t)ch * chunks + b];
    return s;
}

static __global__ void stats_mean_kernel(int c, int chunks, double count, const double *part,
                                         float *mean)
{
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch < c)
        mean[ch] = (float)(chunk_total(part, ch, chunks) / count);
}

static __global__ void stats_invstd_kernel(int c, int chunks, double count, float eps,
                                           const double *part, float *invstd)
{
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch < c)
        invstd[ch] = (float)(1.0 / sqrt(chunk_total(part, ch, chunks) / count + (double)eps));
}

static __global__ void sum_finish_kernel(int c, int chunks, const double *part, float *out)
{
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch < c)
        out[ch] = (float)chunk_total(part, ch, chunks);
}

static __global__ void backward_reduce_finish_kernel(int c, int chunks, const double *part,
                                                     const double *part2, const float *invstd,
                                                     float *sum_dy, float *sum_dy_xmu,
                                                     float *dweight, float *dbias)
{
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    const double s_dy = chunk_total(part, ch, chunks);
    const double s_dy_xmu = chunk_total(part2, ch, chunks);
    sum_dy[ch] = (float)s_dy;
    sum_dy_xmu[ch] = (float)s_dy_xmu;
    if (dweight)
        dweight[ch] = (float)(s_dy_xmu * invstd[ch]);
    if (dbias)
        dbias[ch] = (float)s_dy;
}

static unsigned channel_blocks(int c) { return (unsigned)((c + THREADS - 1) / THREADS); }

extern "C" cudaError_t kern_bn_stats(cudaStream_t s, int n, int c, int hw, const float *x,
                                     float eps, float *mean, float *invstd, double *ws)
{
    const int chunks = channel_chunks(n, c, hw);
    const dim3 grid((unsigned)chunks, (unsigned)c);
    const double count = (double)n * hw;
    channel_partial_kernel<CHAN_SUM><<<grid, THREADS, 0, s>>>(n, c, hw, x, NULL, NULL, ws, NULL);
    stats_mean_kernel<<<channel_blocks(c), THREADS, 0, s>>>(c, chunks, count, ws, mean);
    channel_partial_kernel<CHAN_SQDEV><<<grid, THREADS, 0, s>>>(n, c, hw, x, NULL, mean, ws,
                                                                 NULL);
    stats_invstd_kernel<<<channel_blocks(c), THREADS, 0, s>>>(c, chunks, count, eps, ws, invstd);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_channel_sum(cudaStream_t s, int n, int c, int hw, const float *x,
                                        float *out, double *ws)
{
    const int chunks = channel_chunks(n, c, hw);
    const dim3 grid((unsigned)chunks, (unsigned)c);
    channel_partial_kernel<CHAN_SUM><<<grid, THREADS, 0, s>>>(n, c, hw, x, NULL, NULL, ws, NULL);
    sum_finish_kernel<<<channel_blocks(c), THREADS, 0, s>>>(c, chunks, ws, out);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_bn_backward_reduce(cudaStream_t s, int n, int c, int hw,
                                               const float *dy, const float *x,
                                               const float *mean, const float *invstd,
                                               float *sum_dy, float *sum_dy_xmu,
                                               float *dweight, float *dbias, double *ws)
{
    const int chunks = channel_chunks(n, c, hw);
    const dim3 grid((unsigned)chunks, (unsigned)c);
    double *part2 = ws + (size_t)c * chunks;
    channel_partial_kernel<CHAN_DY><<<grid, THREADS, 0, s>>>(n, c, hw, x, dy, mean, ws, part2);
    backward_reduce_finish_kernel<<<channel_blocks(c), THREADS, 0, s>>>(
        c, chunks, ws, part2, invstd, sum_dy, sum_dy_xmu, dweight, dbias);
    return cudaGetLastError();
}

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

/* y = (x - mean) * (invstd * weight) + bias; eval (running_var != NULL) takes invstd from
 * the running variance as the CPU does: 1/sqrt(var + eps) in double */
static __global__ void bn_affine_kernel(size_t total, int c, int hw, const float *x,
                                        const float *mean, const float *invstd,
                                        const float *running_var, float eps,
                                        const float *weight, const float *bias, float *y)
{
    GRID_STRIDE(i, total)
    {
        const int ch = (int)((i / (size_t)hw) % (size_t)c);
        const float is = running_var ? (float)(1.0 / sqrt((double)running_var[ch] + (double)eps))
                                     : invstd[ch];
        const float sc = is * (weight ? weight[ch] : 1.0f);
        const float sh = bias ? bias[ch] : 0.0f;
        y[i] = (x[i] - mean[ch]) * sc + sh;
    }
}

extern "C" cudaError_t kern_bn_elemt(cudaStream_t s, int n, int c, int hw, const float *x,
                                     const float *mean, const float *invstd,
                                     const float *weight, const float *bias, float *y)
{
    const size_t total = (size_t)n * c * hw;
    bn_affine_kernel<<<blocks_for(total), THREADS, 0, s>>>(total, c, hw, x, mean, invstd, NULL,
                                                           0.0f, weight, bias, y);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_bn_forward_eval(cudaStream_t s, int n, int c, int hw,
                                            const float *x, const float *running_mean,
                                            const float *running_var, float eps,
                                            const float *weight, const float *bias, float *y)
{
    const size_t total = (size_t)n * c * hw;
    bn_affine_kernel<<<blocks_for(total), THREADS, 0, s>>>(
        total, c, hw, x, running_mean, NULL, running_var, eps, weight, bias, y);
    return cudaGetLastError();
}

static __global__ void bn_backward_elemt_kernel(size_t total, int c, int hw, const float *dy,
                                                const float *x, const float *mean,
                                                const float *invstd, const float *weight,
                                                const float *sum_dy, const float *sum_dy_xmu,
                                                float count, float *dx)
{
    GRID_STRIDE(i, total)
    {
        const int ch = (int)((i / (size_t)hw) % (size_t)c);
        const float wt = weight ? weight[ch] : 1.0f;
        const float mdy = sum_dy[ch] / count, mdyx = sum_dy_xmu[ch] / count;
        dx[i] = km_bn_backward_elemt(dy[i], x[i], mean[ch], invstd[ch], wt, mdy, mdyx);
    }
}

extern "C" cudaError_t kern_bn_backward_elemt(cudaStream_t s, int n, int c, int hw,
                                              const float *dy, const float *x,
                                              const float *mean, const float *invstd,
                                              const float *weight, const float *sum_dy,
                                              const float *sum_dy_xmu, float count, float *dx)
{
    const size_t total = (size_t)n * c * hw;
    bn_backward_elemt_kernel<<<blocks_for(total), THREADS, 0, s>>>(
        total, c, hw, dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count, dx);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ ReLU, pooling */

static __global__ void relu_forward_kernel(size_t n, const float *x, float *y)
{
    GRID_STRIDE(i, n)
    {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f; /* NaN -> 0, as the CPU */
    }
}

static __global__ void relu_backward_kernel(size_t n, const float *y, const float *dy, float *dx)
{
    GRID_STRIDE(i, n)
    {
        const float g = dy[i];
        dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
}

extern "C" cudaError_t kern_relu_forward(cudaStream_t s, size_t n, const float *x, float *y)
{
    if (n == 0)
        return cudaSuccess;
    relu_forward_kernel<<<blocks_for(n), THREADS, 0, s>>>(n, x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_relu_backward(cudaStream_t s, size_t n, const float *y,
                                          const float *dy, float *dx)
{
    if (n == 0)
        return cudaSuccess;
    relu_backward_kernel<<<blocks_for(n), THREADS, 0, s>>>(n, y, dy, dx);
    return cudaGetLastError();
}

/* one thread per output: the first maximum in window order wins and a NaN is taken, as
 * the CPU's pool_take */
static __global__ void maxpool_forward_kernel(size_t total, int h, int w, int kernel,
                                              int stride, int p_out, int q_out, const float *x,
                                              float *y, int32_t *argmax)
{
    GRID_STRIDE(o, total)
    {
        const size_t pq = (size_t)p_out * q_out;
        const size_t pl = o / pq;
        const int j = (int)(o - pl * pq);
        const int p = j / q_out, q = j - p * q_out;
        const float *xp = x + pl * (size_t)h * w;
        int32_t best = p * stride * w + q * stride;
        float bv = xp[best];
        for (int a = 0; a < kernel; a++)
            for (int b = 0; b < kernel; b++) {
                const int32_t idx = (p * stride + a) * w + q * stride + b;
                const float v = xp[idx];
                const bool take = (v > bv) | (v != v);
                bv = take ? v : bv;
                best = take ? idx : best;
            }
        y[o] = bv;
        argmax[o] = best;
    }
}

/* one thread per input element: the sum, in output order, of the dy whose argmax points
 * here (a gather, so no atomics and the CPU's order of additions) */
static __global__ void maxpool_backward_kernel(size_t total, int h, int w, int kernel,
                                               int stride, int p_out, int q_out,
                                               const float *dy, const int32_t *argmax,
                                               float *dx)
{
    GRID_STRIDE(i, total)
    {
        const size_t hw = (size_t)h * w;
        const size_t pl = i / hw;
        const int at = (int)(i - pl * hw);
        const int hh = at / w, ww = at - hh * w;
        /* outputs whose window [o*stride, o*stride + kernel) contains hh (likewise ww) */
        const int p_lo = hh - kernel + 1 <= 0 ? 0 : (hh - kernel + 1 + stride - 1) / stride;
        const int p_hi = min(hh / stride, p_out - 1);
        const int q_lo = ww - kernel + 1 <= 0 ? 0 : (ww - kernel + 1 + stride - 1) / stride;
        const int q_hi = min(ww / stride, q_out - 1);
        const float *dyp = dy + pl * (size_t)p_out * q_out;
        const int32_t *ap = argmax + pl * (size_t)p_out * q_out;
        float acc = 0.0f;
        for (int p = p_lo; p <= p_hi; p++)
            for (int q = q_lo; q <= q_hi; q++)
                if (ap[p * q_out + q] == at)
                    acc += dyp[p * q_out + q];
        dx[i] = acc;
    }
}

extern "C" cudaError_t kern_maxpool_forward(cudaStream_t s, size_t planes, int h, int w,
                                            int kernel, int stride, int p, int q,
                                            const float *x, float *y, int32_t *argmax)
{
    const size_t total = planes * (size_t)p * q;
    if (total == 0)
        return cudaSuccess;
    maxpool_forward_kernel<<<blocks_for(total), THREADS, 0, s>>>(total, h, w, kernel, stride, p,
                                                                 q, x, y, argmax);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_maxpool_backward(cudaStream_t s, size_t planes, int h, int w,
                                             int kernel, int stride, int p, int q,
                                             const float *dy, const int32_t *argmax,
                                             float *dx)
{
    const size_t total = planes * (size_t)h * w;
    if (total == 0)
        return cudaSuccess;
    maxpool_backward_kernel<<<blocks_for(total), THREADS, 0, s>>>(total, h, w, kernel, stride,
                                                                  p, q, dy, argmax, dx);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ bias */

static __global__ void bias_add_channels_kernel(size_t total, int k, size_t pq, const float *b,
                                                float *y)
{
    GRID_STRIDE(i, total)
    {
        y[i] += b[(i / pq) % (size_t)k];
    }
}

static __global__ void bias_fill_rows_kernel(size_t total, int out, const float *b, float *y)
{
    GRID_STRIDE(i, total)
    {
        y[i] = b[i % (size_t)out];
    }
}

/* one thread per column, rows summed in order in double (as the CPU) */
static __global__ void column_sum_kernel(int n, int out, const float *dy, float *db)
{
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= out)
        return;
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += dy[(size_t)i * out + o];
    db[o] = (float)s;
}

extern "C" cudaError_t kern_bias_add_channels(cudaStream_t s, int n, int k, size_t pq,
                                              const float *b, float *y)
{
    const size_t total = (size_t)n * k * pq;
    if (total == 0)
        return cudaSuccess;
    bias_add_channels_kernel<<<blocks_for(total), THREADS, 0, s>>>(total, k, pq, b, y);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_bias_fill_rows(cudaStream_t s, int n, int out, const float *b,
                                           float *y)
{
    const size_t total = (size_t)n * out;
    if (total == 0)
        return cudaSuccess;
    bias_fill_rows_kernel<<<blocks_for(total), THREADS, 0, s>>>(total, out, b, y);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_column_sum(cudaStream_t s, int n, int out, const float *dy,
                                       float *db)
{
    if (out <= 0)
        return cudaSuccess;
    column_sum_kernel<<<(unsigned)((out + THREADS - 1) / THREADS), THREADS, 0, s>>>(n, out, dy,
                                                                                    db);
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

static __global__ void round_amp_kernel(size_t n, int dt, const float *src, float *dst)
{
    GRID_STRIDE(i, n)
    {
        dst[i] = km_round_amp(src[i], dt);
    }
}

static __global__ void unscale_check_kernel(size_t n, float *g, float inv_scale, int *found)
{
    int any = 0;
    GRID_STRIDE(i, n)
    {
        g[i] = km_unscale(g[i], inv_scale, &any);
    }
    if (any)
        atomicOr(found, 1);
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

extern "C" cudaError_t kern_round_amp(cudaStream_t s, size_t n, int dt, const float *src,
                                      float *dst)
{
    if (n == 0)
        return cudaSuccess;
    round_amp_kernel<<<blocks_for(n), THREADS, 0, s>>>(n, dt, src, dst);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_unscale_check(cudaStream_t s, size_t n, float *g, float inv_scale,
                                          int *found)
{
    cudaError_t e = cudaMemsetAsync(found, 0, sizeof(int), s);
    if (e != cudaSuccess || n == 0)
        return e;
    unscale_check_kernel<<<blocks_for(n), THREADS, 0, s>>>(n, g, inv_scale, found);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_probe(cudaStream_t s, int *out)
{
    probe_kernel<<<1, 1, 0, s>>>(out);
    return cudaGetLastError();
}
