/* backend_cpu.c — the CPU backend: the reference implementation of struct backend and the
 * oracle the CUDA backend is tested against.
 *
 * Half types (enum dtype) are stored as the fp32 values they hold: each op computes in
 * fp32 and rounds its output once where the CUDA backend writes a half ("half types"
 * below), so the oracle has the device's rounding points.
 *
 * Two kinds of kernels where speed asked for it (backend_cpu.h, enum cpu_path): the fast
 * ones, which the trainer runs, and the reference ones, kept as the oracle they are
 * compared with (tests/test_backend_ops.c, pair cpuref-vs-cpufast):
 * - convolution: fast, oneDNN's JIT kernels on each thread's slice of the batch
 *   (conv_dnnl.h; where the build has oneDNN and it takes the shape: direct, and with
 *   CONV_ALGO_WINOGRAD Winograd F(4x4,3x3) for 3x3 stride-1 layers of 8x8 pixels and more
 *   on AVX-512), and, unless CONV_ALGO_DIRECT, the backend's own Winograd F(2x2,3x3)
 *   (conv_wino.h) for the 3x3 stride-1 layers oneDNN runs no Winograd for (all of them
 *   without AVX-512, without oneDNN, or with CONV_ALGO_AUTO: backend.h); reference,
 *   im2col/col2im plus OpenBLAS sgemm over chunks of images: the columns of a chunk sit
 *   side by side in one (C*R*S, nb*P*Q) matrix, so each GEMM is wide even when one image's
 *   P*Q is small, and the chunk is sized to stay in a core's L2 cache;
 * - 2x2 stride-2 max pooling: fast, AVX-512 intrinsics where the machine has them
 *   (pool_tiles_2x2); reference, scalar loops.
 * Linear layers are sgemm calls.  Batch norm, ReLU, max pooling, the loss and SGD are
 * loops written so the compiler vectorises them, the hot ones built for AVX-512, AVX2 and
 * the baseline (CPU_KERNEL, the same bits on each); reductions keep 16 float partial sums
 * (one vector) and combine them in double.  Per-element SGD and batch-norm-backward math
 * comes from kernel_math.h, shared with the CUDA kernels.
 *
 * Threads: the backend runs `threads` threads of its own (the caller plus workers) and
 * keeps OpenBLAS single-threaded inside each: convolutions split the batch, the other ops
 * split channels, planes or elements.  A reduction never crosses a split except conv2d's
 * dw, whose per-thread parts are added in thread order, so results are bit-for-bit
 * repeatable for a given thread count.  openblas_set_num_threads(1) is process-wide.
 * backend_cpu_create_chunked (backend_cpu.h) lets a test force odd, uneven splits.
 *
 * The backend owns a grow-on-demand workspace (im2col buffers, per-plane partial sums),
 * the fast convolutions' primitives and workspace, and its threads, so
 * slots on one backend must not run concurrently (the trainer calls them from one thread),
 * and a process that forks must create its backends after the fork. */
#include "backend/backend.h"
#include "backend/backend_cpu.h"
#include "backend/conv_dnnl.h"
#include "backend/conv_wino.h"
#include "backend/cpu_isa.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "backend/kernel_math.h"

/* Most floats one thread's convolution chunk may use for its columns and its (K, nb*P*Q)
 * GEMM operand: 1.5 MiB, so both stay in a core's L2 cache between im2col and the GEMM. */
#define CPU_CONV_CHUNK_FLOATS ((size_t)384 << 10)

/* The batch-norm, ReLU and pooling loops are built three times, for AVX-512, AVX2 and the
 * baseline x86-64 (CPU_KERNEL), and each backend picks one when it is created: the best
 * the machine has, or the one DDPPROF_MAX_CPU_ISA caps it to (cpu_isa.h), so the tests
 * can run the AVX2 loops on an AVX-512 machine too.  Not with FMA: the compiler would
 * contract a*b + c and the results would differ between machines and from the CUDA
 * kernels (kernel_math.h).  Each version does the same IEEE operations in the same order
 * (reductions keep CPU_LANES explicit lanes), so all three give the same bits.  Measured
 * (bench_convnet_ops, one thread): batch-norm backward elemt 84 -> 35 us, the other loops
 * 5-30 % faster.
 *
 * CPU_KERNEL(name) { body } defines the loop over [lo, hi) as name##_body, inlined into
 * one function per ISA, and name, the table of the three indexed by enum cpu_isa; a slot
 * runs CPU_ISA_FN(be, name). */
typedef void (*cpu_range_fn)(const void *ctx, size_t lo, size_t hi);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_KERNEL(name)                                                                       \
    static inline __attribute__((always_inline)) void name##_body(const void *ctx, size_t lo, \
                                                                   size_t hi);                 \
    static void name##_default(const void *ctx, size_t lo, size_t hi)                          \
    {                                                                                          \
        name##_body(ctx, lo, hi);                                                              \
    }                                                                                          \
    __attribute__((target("avx2"))) static void name##_avx2(const void *ctx, size_t lo,       \
                                                            size_t hi)                         \
    {                                                                                          \
        name##_body(ctx, lo, hi);                                                              \
    }                                                                                          \
    __attribute__((target("avx512f"))) static void name##_avx512(const void *ctx, size_t lo,  \
                                                                 size_t hi)                    \
    {                                                                                          \
        name##_body(ctx, lo, hi);                                                              \
    }                                                                                          \
    static const cpu_range_fn name[CPU_ISA_COUNT] = {name##_default, name##_avx2,             \
                                                     name##_avx512};                           \
    static inline __attribute__((always_inline)) void name##_body(const void *ctx, size_t lo, \
                                                                   size_t hi)
#else
#define CPU_KERNEL(name)                                                                       \
    static void name##_body(const void *ctx, size_t lo, size_t hi);                            \
    static const cpu_range_fn name[CPU_ISA_COUNT] = {name##_body, name##_body, name##_body};   \
    static void name##_body(const void *ctx, size_t lo, size_t hi)
#endif
#define CPU_ISA_FN(be, name) (name[((const struct cpu_backend *)(be))->isa])

/* independent partial sums per reduction: enough to fill the vector registers and hide
 * the latency of the adds */
#define CPU_LANES 16

/* GCC turns short copy and zeroing loops into memset/memcpy calls, which cost more than
 * the few vector stores they replace in im2col; this keeps them inline. */
#if defined(__GNUC__) && !defined(__clang__)
#define CPU_INLINE_STORES __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define CPU_INLINE_STORES
#endif

/* The backend's worker threads.  cpu_pool_run(pool, m, fn, arg) runs fn(arg, t) for
 * t = 0..m-1, t = 0 on the calling thread, and returns when all are done.  Between jobs a
 * worker spins for up to CPU_SPIN_NS before sleeping on the condition variable, and the
 * caller spins as long for the workers to finish: a training step issues dozens of jobs a
 * few microseconds apart, and a futex wake-up costs more than most of them. */
#define CPU_SPIN_NS 50000L

struct cpu_pool {
    int threads; /* including the caller */
    int chunk;   /* test knob (backend_cpu_create_chunked): > 0 splits every loop into
                    pieces of chunk items, and convolutions into chunks of at most chunk
                    images, whatever the size; 0: the sizes below decide */
    int started; /* workers actually created */
    pthread_t *tid;
    pthread_mutex_t mu; /* guards sleeping: generation and quit change under it */
    pthread_cond_t wake, done;
    atomic_ulong generation; /* bumped for each job */
    atomic_int running;      /* workers still inside the current job */
    atomic_int quit;
    int active; /* threads taking part in the current job */
    void (*fn)(void *arg, int t);
    void *arg;
};

struct cpu_worker_arg {
    struct cpu_pool *pool;
    int t;
};

struct cpu_backend {
    struct backend ops; /* first, so a struct backend * is a struct cpu_backend * */
    float *ws;          /* workspace, ws_floats long, contents undefined between slots */
    size_t ws_floats;
    struct cpu_pool pool;
    struct cpu_worker_arg *worker_args;
    struct conv_dnnl *fast; /* the fast convolutions (conv_dnnl.h), or NULL: reference */
    struct conv_wino *wino; /* the own Winograd for the shapes it takes, or NULL */
    enum cpu_isa isa;       /* the loops' instructions (CPU_KERNEL, cpu_isa.h) */
    int pool_avx512;        /* the AVX-512 max pooling (pool_tiles_2x2), else scalar */
    char describe[400];
};

/* ------------------------------------------------------------------ worker threads */

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* spin until *v != old (returns 1) or CPU_SPIN_NS pass (returns 0) */
static int cpu_spin_ulong(atomic_ulong *v, unsigned long old)
{
    const int64_t start = clock_now_ns();
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(v, memory_order_acquire) != old)
            return 1;
        cpu_relax();
        if (i % 64 == 0 && clock_now_ns() - start > CPU_SPIN_NS)
            return 0;
    }
}

static int cpu_spin_zero(atomic_int *v)
{
    const int64_t start = clock_now_ns();
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(v, memory_order_acquire) == 0)
            return 1;
        cpu_relax();
        if (i % 64 == 0 && clock_now_ns() - start > CPU_SPIN_NS)
            return 0;
    }
}

static void *cpu_pool_worker(void *p)
{
    const struct cpu_worker_arg *wa = p;
    struct cpu_pool *pool = wa->pool;
    unsigned long seen = 0;
    for (;;) {
        if (!cpu_spin_ulong(&pool->generation, seen)) {
            pthread_mutex_lock(&pool->mu);
            while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->quit))
                pthread_cond_wait(&pool->wake, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load(&pool->quit))
            return NULL;
        seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (wa->t < pool->active)
            pool->fn(pool->arg, wa->t);
        if (atomic_fetch_sub(&pool->running, 1) == 1) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

static void cpu_pool_run(struct cpu_pool *pool, int m, void (*fn)(void *arg, int t), void *arg)
{
    if (m <= 1 || pool->started == 0) {
        for (int t = 0; t < m; t++)
            fn(arg, t);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    pool->active = m;
    atomic_store(&pool->running, pool->started);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    fn(arg, 0);
    if (!cpu_spin_zero(&pool->running)) {
        pthread_mutex_lock(&pool->mu);
        while (atomic_load(&pool->running) > 0)
            pthread_cond_wait(&pool->done, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
}

static void cpu_pool_stop(struct cpu_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    atomic_store(&pool->quit, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->started; i++)
        pthread_join(pool->tid[i], NULL);
    free(pool->tid);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    pthread_mutex_destroy(&pool->mu);
}

/* ------------------------------------------------------------------ memory */

static void *cpu_alloc(struct backend *be, size_t bytes)
{
    (void)be;
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p)
        error_set("cpu backend: cannot allocate %zu bytes: free memory or use a smaller batch",
                  bytes);
    return p;
}

static void cpu_free(struct backend *be, void *ptr)
{
    (void)be;
    free(ptr);
}

static void cpu_copy(struct backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes)
        memmove(dst, src, bytes);
}

static void cpu_zero(struct backend *be, void *dst, size_t bytes)
{
    (void)be;
    if (bytes)
        memset(dst, 0, bytes);
}

static void cpu_synchronize(struct backend *be) { (void)be; }

static int cpu_status(struct backend *be) { return (void)be, 0; }

static void *cpu_stream(struct backend *be) { return (void)be, NULL; }

/* the workspace, at least `floats` long; NULL if it cannot grow (the old one is kept) */
static float *cpu_workspace(struct cpu_backend *cb, size_t floats)
{
    if (floats <= cb->ws_floats)
        return cb->ws;
    size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
    float *ws = aligned_alloc(64, bytes);
    if (!ws)
        return NULL;
    free(cb->ws);
    cb->ws = ws;
    cb->ws_floats = bytes / sizeof(float);
    return ws;
}

/* ------------------------------------------------------------------ half types */

/* The CPU stores a tensor of a half type (enum dtype) as fp32 values that the type
 * represents exactly: every op that writes one rounds its fp32 result once, where the
 * CUDA backend writes a half.  Inputs of a half type are trusted to hold such values. */

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
/* fp16 rounding with the F16C conversion instructions (IEEE round to nearest even, the
 * same results as km_round_amp for every finite value and inf; 8 elements at a time).
 * Chosen at run time: a build for any x86-64 still runs where F16C is missing. */
__attribute__((target("avx,f16c"))) static void round_f16_f16c(const float *x, float *out,
                                                               size_t lo, size_t hi)
{
    size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
    for (; i < hi; i++)
        out[i] = km_round_amp(x[i], AMP_F16);
}

/* CPUID leaf 1: F16C (ECX bit 29) and AVX (bit 28) with the OS saving the AVX state
 * (OSXSAVE, bit 27, and XCR0 bits 1-2); cpuid.h works with gcc and clang alike. */
static int cpu_has_f16c(void)
{
    static int has = -1; /* benign race: every thread computes the same answer */
    if (has < 0) {
        unsigned a, b, c, d;
        int ok = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1) && (c >> 28 & 1) &&
                 (c >> 27 & 1);
        if (ok) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            ok = (lo & 6) == 6;
        }
        has = ok;
    }
    return has;
}
#else
static void round_f16_f16c(const float *x, float *out, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++)
        out[i] = km_round_amp(x[i], AMP_F16);
}

static int cpu_has_f16c(void) { return 0; }
#endif

/* x[lo, hi) rounded to dt in place; DT_F32 leaves it alone */
static void cpu_round_span(float *x, size_t lo, size_t hi, enum dtype dt)
{
    if (dt == DT_F16 && cpu_has_f16c()) {
        round_f16_f16c(x, x, lo, hi);
        return;
    }
    if (dt != DT_F32)
        for (size_t i = lo; i < hi; i++)
            x[i] = km_round_amp(x[i], dt);
}

static size_t cpu_dtype_size(struct backend *be, enum dtype dt)
{
    (void)be, (void)dt;
    return sizeof(float);
}

/* x (n) rounded to dt in place, split over the threads (defined with the parallel loops) */
static void cpu_round(struct backend *be, size_t n, enum dtype dt, float *x);

/* ------------------------------------------------------------------ reductions */

/* CPU_LANES floats as one GCC/clang vector, loaded from any float address: each lane is
 * one of the independent partial sums, so the arithmetic is the same whatever vector
 * width a clone compiles it to. */
typedef float cpu_lanes __attribute__((vector_size(CPU_LANES * sizeof(float)), aligned(4)));

#define CPU_LOAD(p) (*(const cpu_lanes *)(p))

static double cpu_sum(const float *x, size_t m)
{
    cpu_lanes acc = {0};
    size_t i = 0;
    for (; i + CPU_LANES <= m; i += CPU_LANES)
        acc += CPU_LOAD(x + i);
    double s = 0.0;
    for (; i < m; i++)
        s += x[i];
    for (int l = 0; l < CPU_LANES; l++)
        s += acc[l];
    return s;
}

/* sum((x - mean)^2) */
static double cpu_sum_sq_dev(const float *x, size_t m, float mean)
{
    cpu_lanes acc = {0};
    size_t i = 0;
    for (; i + CPU_LANES <= m; i += CPU_LANES) {
        const cpu_lanes d = CPU_LOAD(x + i) - mean;
        acc += d * d;
    }
    double s = 0.0;
    for (; i < m; i++) {
        double d = (double)x[i] - mean;
        s += d * d;
    }
    for (int l = 0; l < CPU_LANES; l++)
        s += acc[l];
    return s;
}

/* sum(dy) and sum(dy * (x - mean)) */
static void cpu_sum_dy_xmu(const float *dy, const float *x, size_t m, float mean, double *s_dy,
                           double *s_dy_xmu)
{
    cpu_lanes a = {0}, b = {0};
    size_t i = 0;
    for (; i + CPU_LANES <= m; i += CPU_LANES) {
        const cpu_lanes g = CPU_LOAD(dy + i);
        a += g;
        b += g * (CPU_LOAD(x + i) - mean);
    }
    double sa = 0.0, sb = 0.0;
    for (; i < m; i++) {
        sa += dy[i];
        sb += (double)dy[i] * ((double)x[i] - mean);
    }
    for (int l = 0; l < CPU_LANES; l++) {
        sa += a[l];
        sb += b[l];
    }
    *s_dy += sa;
    *s_dy_xmu += sb;
}

/* ------------------------------------------------------------------ convolution */

/* Output positions o in [0, out) whose input index o*stride - pad + off lies in [0, in):
 * [*lo, *hi). */
static void conv_valid_range(int off, int pad, int stride, int in, int out, int *lo, int *hi)
{
    int l = pad - off <= 0 ? 0 : (pad - off + stride - 1) / stride;
    int t = in - 1 + pad - off;
    int h = t < 0 ? 0 : t / stride + 1;
    if (h > out)
        h = out;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

/* Stride 1 with Q == W (a "same" convolution, the common case): output position
 * j = p*Q + q of kernel tap (r, s) reads input position j + d, d = (r - pad)*W + (s - pad),
 * so a column plane is the input plane shifted by d.  Of the run [a, b) from the first to
 * the last real tap (both inside the image), the positions whose column q wraps around a
 * row edge are padding; mask (S, P*Q), built once per call, is 1 where column j % Q is a
 * real tap for kernel column s.  Returns 0 when the shortcut does not apply. */
static int conv_is_shifted(const struct conv2d_shape *cs)
{
    return cs->stride == 1 && cs->q == cs->w;
}

static void conv_build_mask(const struct conv2d_shape *cs, int32_t *mask)
{
    const size_t pq = (size_t)cs->p * cs->q;
    for (int s = 0; s < cs->s; s++) {
        int q_lo, q_hi;
        conv_valid_range(s, cs->pad, 1, cs->w, cs->q, &q_lo, &q_hi);
        for (size_t j = 0; j < pq; j++) {
            const int q = (int)(j % (size_t)cs->q);
            mask[s * pq + j] = q >= q_lo && q < q_hi;
        }
    }
}

/* out[j] = j in [a, b) && mask[j] ? in[j] : 0 for j in [0, m); in is read only in [a, b) */
CPU_INLINE_STORES static void conv_masked_copy(float *out, const float *in, const int32_t *mask,
                                               size_t a, size_t b, size_t m)
{
    for (size_t j = 0; j < a; j++)
        out[j] = 0.0f;
    for (size_t j = a; j < b; j++) {
        const float v = in[j];
        out[j] = mask[j] ? v : 0.0f;
    }
    for (size_t j = b; j < m; j++)
        out[j] = 0.0f;
}

/* acc[j] += mask[j] ? src[j] : 0 for j in [a, b) */
static void conv_masked_add(float *acc, const float *src, const int32_t *mask, size_t a, size_t b)
{
    for (size_t j = a; j < b; j++) {
        const float v = src[j];
        acc[j] += mask[j] ? v : 0.0f;
    }
}

/* col (C*R*S, nb*P*Q) from x (nb,C,H,W): row (c,r,s), column img*P*Q + p*Q + q holds
 * x[img][c][p*stride - pad + r][q*stride - pad + s], zero outside the image.  mask is
 * conv_build_mask's when conv_is_shifted, else NULL. */
CPU_INLINE_STORES static void conv_im2col(const struct conv2d_shape *cs, int nb, const float *x,
                                          const int32_t *mask, float *col)
{
    const int H = cs->h, W = cs->w, P = cs->p, Q = cs->q, st = cs->stride, pad = cs->pad;
    const size_t pq = (size_t)P * Q, ld = (size_t)nb * pq, hw = (size_t)H * W;
    for (int c = 0; c < cs->c; c++)
        for (int r = 0; r < cs->r; r++) {
            int p_lo, p_hi;
            conv_valid_range(r, pad, st, H, P, &p_lo, &p_hi);
            for (int s = 0; s < cs->s; s++) {
                int q_lo, q_hi;
                conv_valid_range(s, pad, st, W, Q, &q_lo, &q_hi);
                float *row = col + ((size_t)(c * cs->r + r) * cs->s + s) * ld;
                if (p_lo >= p_hi || q_lo >= q_hi) { /* this tap never touches the image */
                    for (size_t j = 0; j < ld; j++)
                        row[j] = 0.0f;
                    continue;
                }
                if (mask) {
                    const size_t a = (size_t)p_lo * Q + q_lo, b = (size_t)(p_hi - 1) * Q + q_hi;
                    const ptrdiff_t d = (ptrdiff_t)(r - pad) * W + (s - pad);
                    for (int img = 0; img < nb; img++)
                        conv_masked_copy(row + img * pq,
                                         x + ((size_t)img * cs->c + c) * hw + d,
                                         mask + s * pq, a, b, pq);
                    continue;
                }
                const int nq = q_hi - q_lo;
                for (int img = 0; img < nb; img++) {
                    const float *plane = x + ((size_t)img * cs->c + c) * hw;
                    float *out = row + img * pq;
                    for (size_t j = 0; j < (size_t)p_lo * Q; j++)
                        out[j] = 0.0f;
                    for (int p = p_lo; p < p_hi; p++) {
                        float *o = out + (size_t)p * Q;
                        const float *in =
                            plane + (size_t)(p * st - pad + r) * W + (q_lo * st - pad + s);
                        for (int q = 0; q < q_lo; q++)
                            o[q] = 0.0f;
                        for (int j = 0; j < nq; j++)
                            o[q_lo + j] = in[j * st];
                        for (int q = q_hi; q < Q; q++)
                            o[q] = 0.0f;
                    }
                    for (size_t j = (size_t)p_hi * Q; j < pq; j++)
                        out[j] = 0.0f;
                }
            }
        }
}

/* dx (nb,C,H,W) = col2im(col): the adjoint of conv_im2col (overwrites dx) */
static void conv_col2im(const struct conv2d_shape *cs, int nb, const float *col,
                        const int32_t *mask, float *dx)
{
    const int H = cs->h, W = cs->w, P = cs->p, Q = cs->q, st = cs->stride, pad = cs->pad;
    const size_t pq = (size_t)P * Q, ld = (size_t)nb * pq, hw = (size_t)H * W;
    memset(dx, 0, (size_t)nb * cs->c * hw * sizeof(float));
    for (int c = 0; c < cs->c; c++)
        for (int r = 0; r < cs->r; r++) {
            int p_lo, p_hi;
            conv_valid_range(r, pad, st, H, P, &p_lo, &p_hi);
            for (int s = 0; s < cs->s; s++) {
                int q_lo, q_hi;
                conv_valid_range(s, pad, st, W, Q, &q_lo, &q_hi);
                if (p_lo >= p_hi || q_lo >= q_hi)
                    continue;
                const float *row = col + ((size_t)(c * cs->r + r) * cs->s + s) * ld;
                if (mask) {
                    const size_t a = (size_t)p_lo * Q + q_lo, b = (size_t)(p_hi - 1) * Q + q_hi;
                    const ptrdiff_t d = (ptrdiff_t)(r - pad) * W + (s - pad);
                    for (int img = 0; img < nb; img++)
                        conv_masked_add(dx + ((size_t)img * cs->c + c) * hw + d, row + img * pq,
                                        mask + s * pq, a, b);
                    continue;
                }
                const int nq = q_hi - q_lo;
                for (int img = 0; img < nb; img++) {
                    float *plane = dx + ((size_t)img * cs->c + c) * hw;
                    const float *src = row + img * pq;
                    for (int p = p_lo; p < p_hi; p++) {
                        const float *o = src + (size_t)p * Q + q_lo;
                        float *in = plane + (size_t)(p * st - pad + r) * W + (q_lo * st - pad + s);
                        for (int j = 0; j < nq; j++)
                            in[j * st] += o[j];
                    }
                }
            }
        }
}

/* One convolution call's work: the n images in chunks of nb, the chunks split into
 * contiguous runs, one run per thread.  dt is the tensors' type: outputs are rounded to
 * it (forward: the convolution, then again after the bias is added).  Thread t's
 * workspace is ws + t*ws_stride: col (C*R*S, nb*P*Q), then mat (K, nb*P*Q), then
 * (backward, t > 0) its partial dw (K, C*R*S);
 * thread 0 accumulates into dw itself and the partials are added in thread order, so the
 * result is deterministic for a given thread count.  mask (shared, after the threads'
 * parts) is conv_build_mask's or NULL. */
struct conv_job {
    const struct conv2d_shape *cs;
    enum dtype dt;
    const float *x, *w, *b, *dy;
    float *y, *dx, *dw;
    int nb, chunks, per_thread, threads;
    size_t ws_stride;
    float *ws;
    const int32_t *mask;
};

/* Plan chunks and threads, reserve the workspace and build the mask; 0, or -1 when not
 * even one image's buffers fit in memory. */
static int conv_plan(struct cpu_backend *cb, const struct conv2d_shape *cs, int backward,
                     struct conv_job *job)
{
    const size_t crs = (size_t)cs->c * cs->r * cs->s, pq = (size_t)cs->p * cs->q;
    const size_t per_image = (crs + (size_t)cs->k) * pq;
    const size_t mask_floats = conv_is_shifted(cs) ? (size_t)cs->s * pq : 0;
    size_t cap = CPU_CONV_CHUNK_FLOATS / per_image;
    if (cb->pool.chunk > 0 && cap > (size_t)cb->pool.chunk)
        cap = (size_t)cb->pool.chunk;
    if (cap < 1)
        cap = 1;
    int chunks = (int)(((size_t)cs->n + cap - 1) / cap);
    int threads = cb->pool.threads < chunks ? cb->pool.threads : chunks;
    if (cs->n >= cb->pool.threads) { /* equal chunks, as many per thread */
        threads = cb->pool.threads;
        chunks = (chunks + threads - 1) / threads * threads;
    }
    for (;;) {
        const int nb = (cs->n + chunks - 1) / chunks;
        chunks = (cs->n + nb - 1) / nb;
        const int per_thread = (chunks + threads - 1) / threads;
        threads = (chunks + per_thread - 1) / per_thread;
        size_t stride = (crs + (size_t)cs->k) * nb * pq;
        if (backward)
            stride += (size_t)cs->k * crs;
        stride = (stride + 15) & ~(size_t)15; /* keep every thread's part 64-byte aligned */
        if (cpu_workspace(cb, stride * threads + mask_floats)) {
            int32_t *mask = NULL;
            if (mask_floats) {
                mask = (int32_t *)(cb->ws + stride * threads);
                conv_build_mask(cs, mask);
            }
            *job = (struct conv_job){.cs = cs, .nb = nb, .chunks = chunks,
                                     .per_thread = per_thread, .threads = threads,
                                     .ws_stride = stride, .ws = cb->ws, .mask = mask};
            return 0;
        }
        if (nb == 1 && threads == 1)
            return -1;
        chunks = cs->n; /* out of memory: one image at a time on one thread */
        threads = 1;
    }
}

static void conv_forward_task(void *arg, int t)
{
    const struct conv_job *job = arg;
    const struct conv2d_shape *cs = job->cs;
    const int K = cs->k, crs = cs->c * cs->r * cs->s;
    const size_t pq = (size_t)cs->p * cs->q, chw = (size_t)cs->c * cs->h * cs->w;
    float *col = job->ws + t * job->ws_stride;
    float *mat = col + (size_t)crs * job->nb * pq;
    const int c_end = (t + 1) * job->per_thread < job->chunks ? (t + 1) * job->per_thread
                                                              : job->chunks;
    for (int ch = t * job->per_thread; ch < c_end; ch++) {
        const int i0 = ch * job->nb;
        const int m = cs->n - i0 < job->nb ? cs->n - i0 : job->nb;
        const size_t ld = (size_t)m * pq;
        float *yi = job->y + (size_t)i0 * K * pq;
        conv_im2col(cs, m, job->x + (size_t)i0 * chw, job->mask, col);
        /* one image: its (K, P*Q) output is already NCHW, so the GEMM writes y directly */
        float *out = m == 1 ? yi : mat;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, (int)ld, crs, 1.0f, job->w,
                    crs, col, (int)ld, 0.0f, out, (int)ld);
        for (int img = 0; img < m; img++)
            for (int k = 0; k < K; k++) {
                const float *src = out + (size_t)k * ld + img * pq;
                float *dst = yi + ((size_t)img * K + k) * pq;
                const float bias = job->b ? job->b[k] : 0.0f;
                if (job->dt == DT_F32) {
                    for (size_t j = 0; j < pq; j++)
                        dst[j] = src[j] + bias;
                    continue;
                }
                /* the CUDA backend's half output of cuDNN, then its bias kernel */
                for (size_t j = 0; j < pq; j++)
                    dst[j] = src[j];
                cpu_round_span(dst, 0, pq, job->dt);
                if (job->b) {
                    for (size_t j = 0; j < pq; j++)
                        dst[j] += bias;
                    cpu_round_span(dst, 0, pq, job->dt);
                }
            }
    }
}

static void conv_backward_task(void *arg, int t)
{
    const struct conv_job *job = arg;
    const struct conv2d_shape *cs = job->cs;
    const int K = cs->k, crs = cs->c * cs->r * cs->s;
    const size_t pq = (size_t)cs->p * cs->q, chw = (size_t)cs->c * cs->h * cs->w;
    float *col = job->ws + t * job->ws_stride;
    float *mat = col + (size_t)crs * job->nb * pq;
    float *dw = t == 0 ? job->dw : mat + (size_t)K * job->nb * pq;
    const int c_begin = t * job->per_thread;
    const int c_end = c_begin + job->per_thread < job->chunks ? c_begin + job->per_thread
                                                              : job->chunks;
    for (int ch = c_begin; ch < c_end; ch++) {
        const int i0 = ch * job->nb;
        const int m = cs->n - i0 < job->nb ? cs->n - i0 : job->nb;
        const size_t ld = (size_t)m * pq;
        const float *dyi = job->dy + (size_t)i0 * K * pq;
        /* dy of the chunk as (K, m*P*Q); for one image that is dy itself */
        const float *dym = dyi;
        if (m > 1) {
            for (int img = 0; img < m; img++)
                for (int k = 0; k < K; k++)
                    memcpy(mat + (size_t)k * ld + img * pq, dyi + ((size_t)img * K + k) * pq,
                           pq * sizeof(float));
            dym = mat;
        }
        if (job->dw) {
            conv_im2col(cs, m, job->x + (size_t)i0 * chw, job->mask, col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, K, crs, (int)ld, 1.0f, dym,
                        (int)ld, col, (int)ld, ch > c_begin ? 1.0f : 0.0f, dw, crs);
        }
        if (job->dx) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crs, (int)ld, K, 1.0f, job->w,
                        crs, dym, (int)ld, 0.0f, col, (int)ld);
            conv_col2im(cs, m, col, job->mask, job->dx + (size_t)i0 * chw);
            cpu_round_span(job->dx + (size_t)i0 * chw, 0, (size_t)m * chw, job->dt);
        }
    }
}

/* Direct loops, used only when the workspace cannot be allocated: slow but needs no
 * memory, so a void slot still computes the right answer. */
static void conv_forward_direct(const struct conv2d_shape *cs, const float *x, const float *w,
                                const float *b, float *y)
{
    const int C = cs->c, H = cs->h, W = cs->w, R = cs->r, S = cs->s, P = cs->p, Q = cs->q;
    for (int i = 0; i < cs->n; i++)
        for (int k = 0; k < cs->k; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    double acc = b ? b[k] : 0.0;
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++) {
                            int ih = p * cs->stride - cs->pad + r;
                            if (ih < 0 || ih >= H)
                                continue;
                            for (int s = 0; s < S; s++) {
                                int iw = q * cs->stride - cs->pad + s;
                                if (iw >= 0 && iw < W)
                                    acc += (double)x[(((size_t)i * C + c) * H + ih) * W + iw] *
                                           w[(((size_t)k * C + c) * R + r) * S + s];
                            }
                        }
                    y[(((size_t)i * cs->k + k) * P + p) * Q + q] = (float)acc;
                }
}

static void conv_backward_direct(const struct conv2d_shape *cs, const float *x, const float *w,
                                 const float *dy, float *dx, float *dw)
{
    const int C = cs->c, H = cs->h, W = cs->w, R = cs->r, S = cs->s, P = cs->p, Q = cs->q;
    if (dx)
        memset(dx, 0, (size_t)cs->n * C * H * W * sizeof(float));
    if (dw)
        memset(dw, 0, (size_t)cs->k * C * R * S * sizeof(float));
    for (int i = 0; i < cs->n; i++)
        for (int k = 0; k < cs->k; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    float g = dy[(((size_t)i * cs->k + k) * P + p) * Q + q];
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++) {
                            int ih = p * cs->stride - cs->pad + r;
                            if (ih < 0 || ih >= H)
                                continue;
                            for (int s = 0; s < S; s++) {
                                int iw = q * cs->stride - cs->pad + s;
                                if (iw < 0 || iw >= W)
                                    continue;
                                size_t xi = (((size_t)i * C + c) * H + ih) * W + iw;
                                size_t wi = (((size_t)k * C + c) * R + r) * S + s;
                                if (dx)
                                    dx[xi] += g * w[wi];
                                if (dw)
                                    dw[wi] += g * x[xi];
                            }
                        }
                }
}

/* y (n,k,p,q) = round(round(y) + b) planewise, b may be NULL: a half-type forward's rounding
 * after a convolution computed in fp32 (defined with the parallel loops) */
static void conv_round_bias(struct backend *be, const struct conv2d_shape *cs, enum dtype dt,
                            const float *b, float *y);

/* db (k) = the sum of dy (n,k,p,q) over n, p, q, rounded to dt (defined with the parallel
 * loops) */
static void conv_bias_grad(struct backend *be, const struct conv2d_shape *cs, enum dtype dt,
                           const float *dy, float *db);

/* The fast convolutions: the own Winograd where it takes the shape, else oneDNN's kernels;
 * 0 when one of them ran, -1 (the reference path runs) when neither can */
static int conv_fast_forward(struct cpu_backend *cb, const struct conv2d_shape *cs,
                             const float *x, const float *w, const float *b, float *y)
{
    if (cb->wino && conv_wino_takes(cs, cb->fast && conv_dnnl_winograd(cb->fast)) &&
        conv_wino_forward(cb->wino, cs, x, w, b, y) == 0)
        return 0;
    return cb->fast ? conv_dnnl_forward(cb->fast, cs, x, w, b, y) : -1;
}

static int conv_fast_backward(struct cpu_backend *cb, const struct conv2d_shape *cs,
                              const float *x, const float *w, const float *dy, float *dx,
                              float *dw)
{
    if (cb->wino && conv_wino_takes(cs, cb->fast && conv_dnnl_winograd(cb->fast)) &&
        conv_wino_backward(cb->wino, cs, x, w, dy, dx, dw) == 0)
        return 0;
    return cb->fast ? conv_dnnl_backward(cb->fast, cs, x, w, dy, dx, dw) : -1;
}

static void cpu_conv2d_forward(struct backend *be, const struct conv2d_shape *cs, enum dtype dt,
                               const void *xv, const void *wv, const void *bv, void *yv)
{
    struct cpu_backend *cb = (struct cpu_backend *)be;
    const float *x = xv, *w = wv, *b = bv;
    float *y = yv;
    if (conv_fast_forward(cb, cs, x, w, dt == DT_F32 ? b : NULL, y) == 0) {
        if (dt != DT_F32) /* the rounding points of the reference: the convolution, the bias */
            conv_round_bias(be, cs, dt, b, y);
        return;
    }
    struct conv_job job;
    if (conv_plan(cb, cs, 0, &job) < 0) {
        if (dt == DT_F32) {
            conv_forward_direct(cs, x, w, b, y);
            return;
        }
        /* the rounding points of the chunked path: the convolution, then the bias */
        const size_t pq = (size_t)cs->p * cs->q, ny = (size_t)cs->n * cs->k * pq;
        conv_forward_direct(cs, x, w, NULL, y);
        cpu_round_span(y, 0, ny, dt);
        if (b) {
            for (size_t i = 0; i < ny; i++)
                y[i] += b[(i / pq) % (size_t)cs->k];
            cpu_round_span(y, 0, ny, dt);
        }
        return;
    }
    job.dt = dt;
    job.x = x;
    job.w = w;
    job.b = b;
    job.y = y;
    cpu_pool_run(&cb->pool, job.threads, conv_forward_task, &job);
}

static void cpu_conv2d_backward(struct backend *be, const struct conv2d_shape *cs,
                                enum dtype dt, const void *xv, const void *wv, const void *dyv,
                                void *dxv, void *dwv, void *dbv)
{
    struct cpu_backend *cb = (struct cpu_backend *)be;
    const float *x = xv, *w = wv, *dy = dyv;
    float *dx = dxv, *dw = dwv, *db = dbv;
    const int K = cs->k;
    const size_t pq = (size_t)cs->p * cs->q, krs = (size_t)K * cs->c * cs->r * cs->s;
    if (db)
        conv_bias_grad(be, cs, dt, dy, db);
    if (!dx && !dw)
        return;
    if (conv_fast_backward(cb, cs, x, w, dy, dx, dw) == 0) {
        if (dx)
            cpu_round(be, (size_t)cs->n * cs->c * cs->h * cs->w, dt, dx);
        if (dw)
            cpu_round(be, krs, dt, dw);
        return;
    }
    struct conv_job job;
    if (conv_plan(cb, cs, 1, &job) < 0) {
        conv_backward_direct(cs, x, w, dy, dx, dw);
        if (dx)
            cpu_round(be, (size_t)cs->n * cs->c * cs->h * cs->w, dt, dx);
        if (dw)
            cpu_round(be, krs, dt, dw);
        return;
    }
    job.dt = dt;
    job.x = x;
    job.w = w;
    job.dy = dy;
    job.dx = dx;
    job.dw = dw;
    cpu_pool_run(&cb->pool, job.threads, conv_backward_task, &job);
    if (dw) /* add the other threads' partial dw, in thread order */
        for (int t = 1; t < job.threads; t++) {
            const float *part = job.ws + t * job.ws_stride +
                                ((size_t)cs->c * cs->r * cs->s + K) * job.nb * pq;
            for (size_t j = 0; j < krs; j++)
                dw[j] += part[j];
        }
    if (dw)
        cpu_round(be, krs, dt, dw);
}

/* ------------------------------------------------------------------ parallel loops */

/* Elementwise and per-channel ops split [0, items) into one contiguous range per thread
 * when they touch at least this many floats; below it, waking the workers costs more
 * than it saves.  Every reduction stays inside one range, so results do not depend on
 * the number of threads.  (With the chunk knob, pieces of pool.chunk items are dealt to
 * the threads round-robin instead, at any size.) */
#define CPU_PARALLEL_FLOATS ((size_t)32 << 10)

typedef void (*cpu_range_fn)(const void *ctx, size_t lo, size_t hi);

struct cpu_range_job {
    cpu_range_fn body;
    const void *ctx;
    size_t items;
    int parts;
    size_t chunk; /* 0: part t is one contiguous range; else pieces t, t+parts, ... */
};

static void cpu_range_task(void *arg, int t)
{
    const struct cpu_range_job *job = arg;
    if (job->chunk) {
        const size_t stride = (size_t)job->parts * job->chunk;
        for (size_t lo = (size_t)t * job->chunk; lo < job->items; lo += stride)
            job->body(job->ctx, lo, job->items - lo < job->chunk ? job->items : lo + job->chunk);
        return;
    }
    const size_t lo = job->items * t / job->parts, hi = job->items * (t + 1) / job->parts;
    if (lo < hi)
        job->body(job->ctx, lo, hi);
}

static void cpu_parallel_for(struct backend *be, size_t items, size_t floats, cpu_range_fn body,
                             const void *ctx)
{
    struct cpu_backend *cb = (struct cpu_backend *)be;
    const size_t chunk = cb->pool.chunk > 0 ? (size_t)cb->pool.chunk : 0;
    const size_t pieces = chunk ? (items + chunk - 1) / chunk : items;
    int parts = chunk || floats >= CPU_PARALLEL_FLOATS ? cb->pool.threads : 1;
    if ((size_t)parts > pieces)
        parts = (int)pieces;
    if (parts <= 1 && !chunk) {
        if (items)
            body(ctx, 0, items);
        return;
    }
    struct cpu_range_job job = {.body = body, .ctx = ctx, .items = items, .parts = parts,
                                .chunk = chunk};
    cpu_pool_run(&cb->pool, parts, cpu_range_task, &job);
}

struct round_args {
    float *x;
    enum dtype dt;
};

static void round_range(const void *ctx, size_t lo, size_t hi)
{
    const struct round_args *a = ctx;
    cpu_round_span(a->x, lo, hi, a->dt);
}

static void cpu_round(struct backend *be, size_t n, enum dtype dt, float *x)
{
    if (dt == DT_F32)
        return;
    const struct round_args a = {.x = x, .dt = dt};
    cpu_parallel_for(be, n, 2 * n, round_range, &a);
}

struct round_bias_args {
    const struct conv2d_shape *cs;
    enum dtype dt;
    const float *b;
    float *y;
};

/* planes [lo, hi) of y */
static void round_bias_range(const void *ctx, size_t lo, size_t hi)
{
    const struct round_bias_args *a = ctx;
    const size_t pq = (size_t)a->cs->p * a->cs->q;
    for (size_t pl = lo; pl < hi; pl++) {
        float *yp = a->y + pl * pq;
        cpu_round_span(yp, 0, pq, a->dt);
        if (!a->b)
            continue;
        const float bias = a->b[pl % (size_t)a->cs->k];
        for (size_t j = 0; j < pq; j++)
            yp[j] += bias;
        cpu_round_span(yp, 0, pq, a->dt);
    }
}

static void conv_round_bias(struct backend *be, const struct conv2d_shape *cs, enum dtype dt,
                            const float *b, float *y)
{
    const struct round_bias_args a = {.cs = cs, .dt = dt, .b = b, .y = y};
    const size_t planes = (size_t)cs->n * cs->k;
    cpu_parallel_for(be, planes, 2 * planes * cs->p * cs->q, round_bias_range, &a);
}

struct bias_grad_args {
    const float *dy;
    size_t pq;
    double *part;
};

/* planes [lo, hi): each plane's sum into part */
CPU_KERNEL(bias_grad_range)
{
    const struct bias_grad_args *a = ctx;
    for (size_t pl = lo; pl < hi; pl++)
        a->part[pl] = cpu_sum(a->dy + pl * a->pq, a->pq);
}

/* Per-plane sums (in memory order, split over the threads), then added per channel in
 * image order on the calling thread: the same bits for any split.  Without workspace for
 * the parts: the same sums plane by plane on the calling thread. */
static void conv_bias_grad(struct backend *be, const struct conv2d_shape *cs, enum dtype dt,
                           const float *dy, float *db)
{
    const int K = cs->k;
    const size_t pq = (size_t)cs->p * cs->q, planes = (size_t)cs->n * K;
    const struct bias_grad_args a = {
        .dy = dy, .pq = pq, .part = (double *)cpu_workspace((struct cpu_backend *)be, 2 * planes)};
    if (a.part)
        cpu_parallel_for(be, planes, planes * pq, CPU_ISA_FN(be, bias_grad_range), &a);
    for (int k = 0; k < K; k++) {
        double s = 0.0;
        for (int i = 0; i < cs->n; i++) {
            const size_t pl = (size_t)i * K + k;
            s += a.part ? a.part[pl] : cpu_sum(dy + pl * pq, pq);
        }
        db[k] = (float)s;
    }
    cpu_round_span(db, 0, (size_t)K, dt);
}

/* ------------------------------------------------------------------ batch norm */

/* the arguments of every batch-norm slot, named as in backend.h; x etc. are (n,c,hw) of
 * dt */
struct bn_args {
    int n, c, hw;
    enum dtype dt;
    const float *x, *dy, *mean, *invstd, *weight, *bias, *sum_dy, *sum_dy_xmu, *running_var;
    float eps, count;
    float *y, *dx, *out_mean, *out_invstd, *out_sum_dy, *out_sum_dy_xmu, *dweight, *dbias;
    double *part; /* per-plane partial sums (workspace) */
};

/* channels [lo, hi) */
CPU_KERNEL(bn_stats_range)
{
    const struct bn_args *a = ctx;
    const double count = (double)a->n * a->hw;
    for (size_t ch = lo; ch < hi; ch++) {
        double s = 0.0;
        for (int i = 0; i < a->n; i++)
            s += cpu_sum(a->x + ((size_t)i * a->c + ch) * a->hw, (size_t)a->hw);
        const float mu = (float)(s / count);
        double ss = 0.0;
        for (int i = 0; i < a->n; i++)
            ss += cpu_sum_sq_dev(a->x + ((size_t)i * a->c + ch) * a->hw, (size_t)a->hw, mu);
        a->out_mean[ch] = mu;
        a->out_invstd[ch] = (float)(1.0 / sqrt(ss / count + a->eps));
    }
}

static void cpu_batchnorm_stats(struct backend *be, int n, int c, int hw, enum dtype dt,
                                const void *x, float eps, float *mean, float *invstd)
{
    (void)dt; /* half values are read as the fp32 values they are stored as */
    const struct bn_args a = {.n = n, .c = c, .hw = hw, .x = x, .eps = eps, .out_mean = mean,
                              .out_invstd = invstd};
    cpu_parallel_for(be, (size_t)c, (size_t)n * c * hw, CPU_ISA_FN(be, bn_stats_range), &a);
}

/* torch.batch_norm_gather_stats_with_counts: Chan's parallel merge of (mean, biased var,
 * count) over ranks; ranks with count <= 0 contribute nothing, and with no samples at all
 * the running statistics are left alone. */
static void cpu_batchnorm_gather_stats(struct backend *be, int world, int c, const float *means,
                                       const float *invstds, const float *counts,
                                       float momentum, float eps, float *running_mean,
                                       float *running_var, float *mean, float *invstd)
{
    (void)be;
    for (int ch = 0; ch < c; ch++)
        km_bn_gather_channel(world, c, ch, means, invstds, counts, momentum, eps, running_mean,
                             running_var, mean, invstd);
}

/* planes [lo, hi) of y = (x - mean) * invstd * weight + bias; eval mode passes the running
 * mean as mean and invstd = NULL, running_var and eps instead */
CPU_KERNEL(bn_affine_range)
{
    const struct bn_args *a = ctx;
    for (size_t pl = lo; pl < hi; pl++) {
        const size_t ch = pl % (size_t)a->c, off = pl * a->hw;
        const float is = a->invstd ? a->invstd[ch]
                                   : (float)(1.0 / sqrt((double)a->running_var[ch] + a->eps));
        const float mu = a->mean[ch], sc = is * (a->weight ? a->weight[ch] : 1.0f);
        const float sh = a->bias ? a->bias[ch] : 0.0f;
        const float *xi = a->x + off;
        float *yi = a->y + off;
        for (int j = 0; j < a->hw; j++)
            yi[j] = (xi[j] - mu) * sc + sh;
        cpu_round_span(yi, 0, (size_t)a->hw, a->dt);
    }
}

static void cpu_batchnorm_elemt(struct backend *be, int n, int c, int hw, enum dtype dt,
                                const void *x, const float *mean, const float *invstd,
                                const float *weight, const float *bias, void *y)
{
    const struct bn_args a = {.n = n, .c = c, .hw = hw, .dt = dt, .x = x, .mean = mean,
                              .invstd = invstd, .weight = weight, .bias = bias, .y = y};
    cpu_parallel_for(be, (size_t)n * c, (size_t)n * c * hw, CPU_ISA_FN(be, bn_affine_range), &a);
}

static void cpu_batchnorm_forward_eval(struct backend *be, int n, int c, int hw, enum dtype dt,
                                       const void *x, const float *running_mean,
                                       const float *running_var, float eps,
                                       const float *weight, const float *bias, void *y)
{
    const struct bn_args a = {.n = n, .c = c, .hw = hw, .dt = dt, .x = x, .mean = running_mean,
                              .running_var = running_var, .eps = eps, .weight = weight,
                              .bias = bias, .y = y};
    cpu_parallel_for(be, (size_t)n * c, (size_t)n * c * hw, CPU_ISA_FN(be, bn_affine_range), &a);
}

/* channels [lo, hi) */
CPU_KERNEL(bn_backward_reduce_range)
{
    const struct bn_args *a = ctx;
    for (size_t ch = lo; ch < hi; ch++) {
        double s_dy = 0.0, s_dy_xmu = 0.0;
        for (int i = 0; i < a->n; i++) {
            const size_t off = ((size_t)i * a->c + ch) * a->hw;
            cpu_sum_dy_xmu(a->dy + off, a->x + off, (size_t)a->hw, a->mean[ch], &s_dy,
                           &s_dy_xmu);
        }
        a->out_sum_dy[ch] = (float)s_dy;
        a->out_sum_dy_xmu[ch] = (float)s_dy_xmu;
        if (a->dweight)
            a->dweight[ch] = (float)(s_dy_xmu * a->invstd[ch]);
        if (a->dbias)
            a->dbias[ch] = (float)s_dy;
    }
}

/* planes [lo, hi): plane pl's sum(dy) and sum(dy * (x - mean)) into part[2 pl], [2 pl + 1],
 * each as cpu_sum_dy_xmu adds it to a zero sum */
CPU_KERNEL(bn_reduce_planes_range)
{
    const struct bn_args *a = ctx;
    for (size_t pl = lo; pl < hi; pl++) {
        const size_t off = pl * a->hw;
        double s_dy = 0.0, s_dy_xmu = 0.0;
        cpu_sum_dy_xmu(a->dy + off, a->x + off, (size_t)a->hw, a->mean[pl % (size_t)a->c],
                       &s_dy, &s_dy_xmu);
        a->part[2 * pl] = s_dy;
        a->part[2 * pl + 1] = s_dy_xmu;
    }
}

/* The per-channel sums, read plane after plane in memory order (a channel's planes lie
 * c*hw apart, which the prefetchers follow worse) into per-plane parts, then added per
 * channel in image order: the same additions in the same order as bn_backward_reduce_range,
 * so the same bits.  That one runs where the parts' workspace cannot be had. */
static void cpu_batchnorm_backward_reduce(struct backend *be, int n, int c, int hw,
                                          enum dtype dt, const void *dy, const void *x,
                                          const float *mean, const float *invstd,
                                          float *sum_dy, float *sum_dy_xmu, float *dweight,
                                          float *dbias)
{
    (void)dt; /* half values are read as the fp32 values they are stored as */
    struct bn_args a = {.n = n, .c = c, .hw = hw, .dy = dy, .x = x, .mean = mean,
                        .invstd = invstd, .out_sum_dy = sum_dy, .out_sum_dy_xmu = sum_dy_xmu,
                        .dweight = dweight, .dbias = dbias};
    const size_t planes = (size_t)n * c;
    a.part = (double *)cpu_workspace((struct cpu_backend *)be, 4 * planes);
    if (!a.part) {
        cpu_parallel_for(be, (size_t)c, 2 * planes * hw, CPU_ISA_FN(be, bn_backward_reduce_range), &a);
        return;
    }
    cpu_parallel_for(be, planes, 2 * planes * hw, CPU_ISA_FN(be, bn_reduce_planes_range), &a);
    for (int ch = 0; ch < c; ch++) {
        double s_dy = 0.0, s_dy_xmu = 0.0;
        for (int i = 0; i < n; i++) {
            s_dy += a.part[2 * ((size_t)i * c + ch)];
            s_dy_xmu += a.part[2 * ((size_t)i * c + ch) + 1];
        }
        sum_dy[ch] = (float)s_dy;
        sum_dy_xmu[ch] = (float)s_dy_xmu;
        if (dweight)
            dweight[ch] = (float)(s_dy_xmu * invstd[ch]);
        if (dbias)
            dbias[ch] = (float)s_dy;
    }
}

/* planes [lo, hi); dx may alias dy */
CPU_KERNEL(bn_backward_elemt_range)
{
    const struct bn_args *a = ctx;
    for (size_t pl = lo; pl < hi; pl++) {
        const size_t ch = pl % (size_t)a->c, off = pl * a->hw;
        const float mu = a->mean[ch], is = a->invstd[ch];
        const float wt = a->weight ? a->weight[ch] : 1.0f;
        const float mdy = a->sum_dy[ch] / a->count, mdyx = a->sum_dy_xmu[ch] / a->count;
        const float *dyi = a->dy + off, *xi = a->x + off;
        float *dxi = a->dx + off;
        for (int j = 0; j < a->hw; j++)
            dxi[j] = km_bn_backward_elemt(dyi[j], xi[j], mu, is, wt, mdy, mdyx);
        cpu_round_span(dxi, 0, (size_t)a->hw, a->dt);
    }
}

static void cpu_batchnorm_backward_elemt(struct backend *be, int n, int c, int hw,
                                         enum dtype dt, const void *dy, const void *x,
                                         const float *mean, const float *invstd,
                                         const float *weight, const float *sum_dy,
                                         const float *sum_dy_xmu, const float *count, void *dx)
{
    const struct bn_args a = {.n = n, .c = c, .hw = hw, .dt = dt, .dy = dy, .x = x, .mean = mean,
                              .invstd = invstd, .weight = weight, .sum_dy = sum_dy,
                              .sum_dy_xmu = sum_dy_xmu, .count = *count, .dx = dx};
    cpu_parallel_for(be, (size_t)n * c, (size_t)3 * n * c * hw, CPU_ISA_FN(be, bn_backward_elemt_range), &a);
}

/* ------------------------------------------------------------------ activations, pooling */

/* the arguments of the elementwise slots: x, y, dy, dx, alpha; the optimizer's too */
struct ew_args {
    const float *x, *y, *dy;
    float *out, *buf;
    float alpha, lr, momentum, dampening, weight_decay;
    int nesterov, first;
};

CPU_KERNEL(relu_forward_range)
{
    const struct ew_args *a = ctx;
    for (size_t i = lo; i < hi; i++)
        a->out[i] = a->x[i] > 0.0f ? a->x[i] : 0.0f;
}

/* ReLU and max pooling select values: a half input gives a half output unrounded */
static void cpu_relu_forward(struct backend *be, size_t n, enum dtype dt, const void *x,
                             void *y)
{
    (void)dt;
    const struct ew_args a = {.x = x, .out = y};
    cpu_parallel_for(be, n, 2 * n, CPU_ISA_FN(be, relu_forward_range), &a);
}

CPU_KERNEL(relu_backward_range)
{
    const struct ew_args *a = ctx;
    for (size_t i = lo; i < hi; i++) {
        const float g = a->dy[i]; /* loaded unconditionally, so the loop vectorises */
        a->out[i] = a->y[i] > 0.0f ? g : 0.0f;
    }
}

static void cpu_relu_backward(struct backend *be, size_t n, enum dtype dt, const void *y,
                              const void *dy, void *dx)
{
    (void)dt;
    const struct ew_args a = {.y = y, .dy = dy, .out = dx};
    cpu_parallel_for(be, n, 3 * n, CPU_ISA_FN(be, relu_backward_range), &a);
}

/* Max pooling: the first maximum in window order wins and a NaN is taken (as PyTorch's
 * CPU kernel).  The selects are branch-free: on real data the comparison is a coin flip. */
static inline void pool_take(float v, int32_t idx, float *bv, int32_t *best)
{
    const int take = (v > *bv) | (v != v);
    *bv = take ? v : *bv;
    *best = take ? idx : *best;
}

/* the ConvNet's 2x2 stride-2 window, unrolled so the loop over q vectorises */
static void pool_plane_2x2(const float *xp, int W, int P, int Q, float *yp, int32_t *ap)
{
    for (int p = 0; p < P; p++) {
        const float *r0 = xp + (size_t)2 * p * W, *r1 = r0 + W;
        const int32_t base = 2 * p * W;
        float *yr = yp + (size_t)p * Q;
        int32_t *ar = ap + (size_t)p * Q;
        for (int q = 0; q < Q; q++) {
            const int32_t i0 = base + 2 * q;
            float bv = r0[2 * q];
            int32_t best = i0;
            pool_take(r0[2 * q + 1], i0 + 1, &bv, &best);
            pool_take(r1[2 * q], i0 + W, &bv, &best);
            pool_take(r1[2 * q + 1], i0 + W + 1, &bv, &best);
            yr[q] = bv;
            ar[q] = best;
        }
    }
}

/* Planes that the 2x2 stride-2 window tiles exactly (H = 2P, W = 2Q) with a row of outputs
 * in one AVX-512 vector (Q <= 16): every input is in one window.  There each output row is
 * one vector operation: the window's four inputs for every q gathered into four vectors
 * (the even and odd columns of its two input rows), pool_take's selects done lane by lane
 * in window order, so the same results as pool_plane_2x2; the backward writes every input
 * once, dy where it was its window's argmax, else 0 (0 + dy: the general path's add to a
 * zeroed plane turns a -0 into +0), so it needs no zeroing pass.  Masked loads keep each
 * row's reads inside its plane; its writes run over into later rows (of this plane or the
 * next ones), which are written after it, wherever that stays inside the thread's range
 * of planes (`room` floats from the plane's start); elsewhere they are masked (masked
 * stores are slow on AMD's cores).  Intrinsics, chosen at run time: GCC turned the same
 * code written with generic vectors into scalar compares.  Measured (bench_convnet_ops,
 * one thread, ConvNet): forward 94 -> 35-50 us (conv1), 65 -> 33-40 us (conv2); backward
 * 36 -> 23-29 us (conv2), ~90 us either way for conv1, bound by its 1.6 MB of writes. */
static int pool_tiles_2x2(const struct pool2d_shape *ps)
{
    return ps->kernel == 2 && ps->stride == 2 && ps->h == 2 * ps->p && ps->w == 2 * ps->q &&
           ps->q <= 16;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static int cpu_has_avx512f(void) { return __builtin_cpu_supports("avx512f"); }

/* the masks of a row: in0/in1 the 2Q inputs of an input row in two vectors, out the Q
 * outputs */
struct pool_masks {
    __mmask16 in0, in1, out;
};

static struct pool_masks pool_masks_for(int Q)
{
    const int w = 2 * Q;
    return (struct pool_masks){
        .in0 = (__mmask16)(w >= 16 ? 0xffff : (1u << w) - 1),
        .in1 = (__mmask16)(w > 16 ? (1u << (w - 16)) - 1 : 0),
        .out = (__mmask16)(Q >= 16 ? 0xffff : (1u << Q) - 1),
    };
}

__attribute__((target("avx512f"))) static void pool_plane_tiles_forward(const float *xp, int W,
                                                                         int P, int Q, float *yp,
                                                                         int32_t *ap, size_t room)
{
    const struct pool_masks k = pool_masks_for(Q);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27,
                                          29, 31);
    const __m512i one = _mm512_set1_epi32(1), wv = _mm512_set1_epi32(W);
    for (int p = 0; p < P; p++) {
        const float *r0 = xp + (size_t)2 * p * W, *r1 = r0 + W;
        const __m512 a0 = _mm512_maskz_loadu_ps(k.in0, r0);
        const __m512 a1 = _mm512_maskz_loadu_ps(k.in1, r0 + 16);
        const __m512 b0 = _mm512_maskz_loadu_ps(k.in0, r1);
        const __m512 b1 = _mm512_maskz_loadu_ps(k.in1, r1 + 16);
        const __m512 v[3] = {_mm512_permutex2var_ps(a0, odd, a1),
                             _mm512_permutex2var_ps(b0, even, b1),
                             _mm512_permutex2var_ps(b0, odd, b1)};
        const __m512i i0 = _mm512_add_epi32(even, _mm512_set1_epi32(2 * p * W));
        const __m512i idx[3] = {_mm512_add_epi32(i0, one), _mm512_add_epi32(i0, wv),
                                _mm512_add_epi32(_mm512_add_epi32(i0, wv), one)};
        __m512 bv = _mm512_permutex2var_ps(a0, even, a1);
        __m512i best = i0;
        for (int j = 0; j < 3; j++) {
            const __mmask16 take = _mm512_cmp_ps_mask(v[j], bv, _CMP_GT_OQ) |
                                   _mm512_cmp_ps_mask(v[j], v[j], _CMP_UNORD_Q);
            bv = _mm512_mask_mov_ps(bv, take, v[j]);
            best = _mm512_mask_mov_epi32(best, take, idx[j]);
        }
        if ((size_t)p * Q + 16 <= room) { /* the overrun is later rows', written after */
            _mm512_storeu_ps(yp + (size_t)p * Q, bv);
            _mm512_storeu_si512(ap + (size_t)p * Q, best);
        } else {
            _mm512_mask_storeu_ps(yp + (size_t)p * Q, k.out, bv);
            _mm512_mask_storeu_epi32(ap + (size_t)p * Q, k.out, best);
        }
    }
}

__attribute__((target("avx512f"))) static void pool_plane_tiles_backward(const float *dyp,
                                                                          const int32_t *ap,
                                                                          int W, int P, int Q,
                                                                          float *dxp, size_t room)
{
    const struct pool_masks k = pool_masks_for(Q);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                         15, 31);
    const __m512i one = _mm512_set1_epi32(1), wv = _mm512_set1_epi32(W);
    const __m512 zero = _mm512_setzero_ps();
    for (int p = 0; p < P; p++) {
        float *r0 = dxp + (size_t)2 * p * W, *r1 = r0 + W;
        const __m512 g = _mm512_maskz_loadu_ps(k.out, dyp + (size_t)p * Q);
        const __m512i id = _mm512_maskz_loadu_epi32(k.out, ap + (size_t)p * Q);
        const __m512i i0 = _mm512_add_epi32(even, _mm512_set1_epi32(2 * p * W));
        const __m512i i1 = _mm512_add_epi32(i0, wv);
        const __m512 e0 = _mm512_add_ps(_mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(id, i0), g), zero);
        const __m512 o0 = _mm512_add_ps(
            _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(id, _mm512_add_epi32(i0, one)), g), zero);
        const __m512 e1 = _mm512_add_ps(_mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(id, i1), g), zero);
        const __m512 o1 = _mm512_add_ps(
            _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(id, _mm512_add_epi32(i1, one)), g), zero);
        if ((size_t)(2 * p + 1) * W + 32 <= room) { /* r0 runs into r1, r1 into later rows */
            _mm512_storeu_ps(r0, _mm512_permutex2var_ps(e0, lo, o0));
            if (k.in1)
                _mm512_storeu_ps(r0 + 16, _mm512_permutex2var_ps(e0, hi, o0));
            _mm512_storeu_ps(r1, _mm512_permutex2var_ps(e1, lo, o1));
            if (k.in1)
                _mm512_storeu_ps(r1 + 16, _mm512_permutex2var_ps(e1, hi, o1));
            continue;
        }
        _mm512_mask_storeu_ps(r0, k.in0, _mm512_permutex2var_ps(e0, lo, o0));
        _mm512_mask_storeu_ps(r0 + 16, k.in1, _mm512_permutex2var_ps(e0, hi, o0));
        _mm512_mask_storeu_ps(r1, k.in0, _mm512_permutex2var_ps(e1, lo, o1));
        _mm512_mask_storeu_ps(r1 + 16, k.in1, _mm512_permutex2var_ps(e1, hi, o1));
    }
}
#else
static int cpu_has_avx512f(void) { return 0; }

static void pool_plane_tiles_forward(const float *xp, int W, int P, int Q, float *yp,
                                     int32_t *ap, size_t room)
{
    (void)room;
    pool_plane_2x2(xp, W, P, Q, yp, ap);
}

static void pool_plane_tiles_backward(const float *dyp, const int32_t *ap, int W, int P, int Q,
                                      float *dxp, size_t room)
{
    (void)dyp, (void)ap, (void)W, (void)P, (void)Q, (void)dxp, (void)room; /* no AVX-512 */
}
#endif

/* the AVX-512 kernels apply: the machine has them, be runs its fast path, ps tiles */
static int cpu_pool_tiles(struct backend *be, const struct pool2d_shape *ps)
{
    return ((struct cpu_backend *)be)->pool_avx512 && pool_tiles_2x2(ps);
}

struct pool_args {
    const struct pool2d_shape *ps;
    enum dtype dt;
    const float *x, *dy;
    const int32_t *argmax_in;
    float *y, *dx;
    int32_t *argmax;
    int tiles; /* the AVX-512 kernels of pool_tiles_2x2 */
};

/* planes [lo, hi) */
CPU_KERNEL(pool_forward_range)
{
    const struct pool_args *a = ctx;
    const struct pool2d_shape *ps = a->ps;
    const int H = ps->h, W = ps->w, P = ps->p, Q = ps->q, K = ps->kernel, st = ps->stride;
    if (a->tiles) {
        for (size_t pl = lo; pl < hi; pl++)
            pool_plane_tiles_forward(a->x + pl * H * W, W, P, Q, a->y + pl * P * Q,
                                     a->argmax + pl * P * Q, (hi - pl) * P * Q);
        return;
    }
    for (size_t pl = lo; pl < hi; pl++) {
        const float *xp = a->x + pl * H * W;
        float *yp = a->y + pl * P * Q;
        int32_t *ap = a->argmax + pl * P * Q;
        if (K == 2 && st == 2) {
            pool_plane_2x2(xp, W, P, Q, yp, ap);
            continue;
        }
        for (int p = 0; p < P; p++)
            for (int q = 0; q < Q; q++) {
                int32_t best = p * st * W + q * st;
                float bv = xp[best];
                for (int i = 0; i < K; i++)
                    for (int j = 0; j < K; j++) {
                        const int idx = (p * st + i) * W + q * st + j;
                        pool_take(xp[idx], idx, &bv, &best);
                    }
                yp[p * Q + q] = bv;
                ap[p * Q + q] = best;
            }
    }
}

static void cpu_maxpool2d_forward(struct backend *be, const struct pool2d_shape *ps,
                                  enum dtype dt, const void *x, void *y, int32_t *argmax)
{
    (void)dt;
    const struct pool_args a = {.ps = ps, .x = x, .y = y, .argmax = argmax,
                                .tiles = cpu_pool_tiles(be, ps)};
    const size_t planes = (size_t)ps->n * ps->c;
    cpu_parallel_for(be, planes, planes * ps->h * ps->w, CPU_ISA_FN(be, pool_forward_range), &a);
}

/* planes [lo, hi) */
CPU_KERNEL(pool_backward_range)
{
    const struct pool_args *a = ctx;
    const size_t hw = (size_t)a->ps->h * a->ps->w, pq = (size_t)a->ps->p * a->ps->q;
    if (a->tiles) {
        for (size_t pl = lo; pl < hi; pl++)
            pool_plane_tiles_backward(a->dy + pl * pq, a->argmax_in + pl * pq, a->ps->w,
                                      a->ps->p, a->ps->q, a->dx + pl * hw, (hi - pl) * hw);
        return;
    }
    memset(a->dx + lo * hw, 0, (hi - lo) * hw * sizeof(float));
    for (size_t pl = lo; pl < hi; pl++) {
        float *dxp = a->dx + pl * hw;
        const float *dyp = a->dy + pl * pq;
        const int32_t *ap = a->argmax_in + pl * pq;
        for (size_t j = 0; j < pq; j++)
            dxp[ap[j]] += dyp[j];
        cpu_round_span(dxp, 0, hw, a->dt); /* where overlapping windows added two */
    }
}

static void cpu_maxpool2d_backward(struct backend *be, const struct pool2d_shape *ps,
                                   enum dtype dt, const void *dy, const int32_t *argmax,
                                   void *dx)
{
    const struct pool_args a = {.ps = ps, .dt = dt, .dy = dy, .argmax_in = argmax, .dx = dx,
                                .tiles = cpu_pool_tiles(be, ps)};
    const size_t planes = (size_t)ps->n * ps->c;
    cpu_parallel_for(be, planes, planes * ps->h * ps->w, CPU_ISA_FN(be, pool_backward_range), &a);
}

/* ------------------------------------------------------------------ linear */

static void cpu_linear_forward(struct backend *be, int n, int in, int out, enum dtype dt,
                               const void *xv, const void *wv, const void *bv, void *yv)
{
    const float *x = xv, *w = wv, *b = bv;
    float *y = yv;
    if (b)
        for (int i = 0; i < n; i++)
            memcpy(y + (size_t)i * out, b, (size_t)out * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in,
                b ? 1.0f : 0.0f, y, out);
    cpu_round(be, (size_t)n * out, dt, y);
}

static void cpu_linear_backward(struct backend *be, int n, int in, int out, enum dtype dt,
                                const void *xv, const void *wv, const void *dyv, void *dxv,
                                void *dwv, void *dbv)
{
    const float *x = xv, *w = wv, *dy = dyv;
    float *dx = dxv, *dw = dwv, *db = dbv;
    if (dx) /* (n,in) = dy (n,out) w (out,in) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w,
                    in, 0.0f, dx, in);
    if (dw) /* (out,in) = dy^T (out,n) x (n,in) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in,
                    0.0f, dw, in);
    if (db)
        for (int o = 0; o < out; o++) {
            double s = 0.0;
            for (int i = 0; i < n; i++)
                s += dy[(size_t)i * out + o];
            db[o] = (float)s;
        }
    if (dx)
        cpu_round(be, (size_t)n * in, dt, dx);
    if (dw)
        cpu_round(be, (size_t)out * in, dt, dw);
    if (db)
        cpu_round(be, (size_t)out, dt, db);
}

/* ------------------------------------------------------------------ loss, metrics */

/* A label outside [0, c) makes the loss NaN (and its dlogits row the plain softmax / n), so
 * a bad data set shows up in the loss instead of reading out of bounds. */
static float cpu_softmax_xent(struct backend *be, int n, int c, const float *logits,
                              const int32_t *labels, float *dlogits)
{
    (void)be;
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        const float *row = logits + (size_t)i * c;
        float mx = row[0];
        for (int j = 1; j < c; j++)
            mx = row[j] > mx ? row[j] : mx;
        double s = 0.0;
        for (int j = 0; j < c; j++)
            s += expf(row[j] - mx);
        const int32_t lab = labels[i];
        const int ok = lab >= 0 && lab < c;
        total += ok ? (double)mx + log(s) - row[lab] : NAN;
        if (dlogits) {
            float *d = dlogits + (size_t)i * c;
            const double inv = 1.0 / (s * n);
            for (int j = 0; j < c; j++)
                d[j] = (float)(expf(row[j] - mx) * inv);
            if (ok)
                d[lab] -= 1.0f / (float)n;
        }
    }
    return (float)(total / n);
}

static void cpu_softmax_xent_dev(struct backend *be, int n, int c, const float *logits,
                                 const int32_t *labels, float *dlogits, float *loss)
{
    *loss = cpu_softmax_xent(be, n, c, logits, labels, dlogits);
}

static int cpu_count_correct(struct backend *be, int n, int c, const float *logits,
                             const int32_t *labels)
{
    (void)be;
    int correct = 0;
    for (int i = 0; i < n; i++) {
        const float *row = logits + (size_t)i * c;
        int best = 0;
        for (int j = 1; j < c; j++)
            if (row[j] > row[best])
                best = j;
        correct += best == labels[i];
    }
    return correct;
}

/* ------------------------------------------------------------------ elementwise, optimizer */

static void scale_range(const void *ctx, size_t lo, size_t hi)
{
    const struct ew_args *a = ctx;
    for (size_t i = lo; i < hi; i++)
        a->out[i] = a->alpha * a->x[i];
}

static void cpu_scale(struct backend *be, size_t n, float alpha, const float *src, float *dst)
{
    const struct ew_args a = {.x = src, .out = dst, .alpha = alpha};
    cpu_parallel_for(be, n, 2 * n, scale_range, &a);
}


/* mixed precision: x = src, out = dst, first = the amp_dtype */
static void round_amp_range(const void *ctx, size_t lo, size_t hi)
{
    const struct ew_args *a = ctx;
    if (a->first == AMP_F16 && cpu_has_f16c()) {
        round_f16_f16c(a->x, a->out, lo, hi);
        return;
    }
    for (size_t i = lo; i < hi; i++)
        a->out[i] = km_round_amp(a->x[i], a->first);
}

/* Every type is stored as fp32: a cast to fp32, or to the type it already holds, copies
 * the values (a half tensor holds only values of its type); one to a half type rounds. */
static void cpu_cast(struct backend *be, size_t n, enum dtype from, const void *src,
                     enum dtype to, void *dst)
{
    if (to == DT_F32 || to == from) {
        cpu_copy(be, dst, src, n * sizeof(float));
        return;
    }
    const struct ew_args a = {.x = src, .out = dst, .first = (int)to};
    cpu_parallel_for(be, n, 2 * n, round_amp_range, &a);
}

/* Every type is NCHW here, so a 4-D tensor of the list is converted as a flat one. */
static void cpu_cast_list(struct backend *be, int count, enum dtype from,
                          const void *const *srcs, enum dtype to, void *const *dsts,
                          const size_t *numels, const int *dims)
{
    (void)dims;
    for (int i = 0; i < count; i++)
        cpu_cast(be, numels[i], from, srcs[i], to, dsts[i]);
}

static enum layout cpu_layout(struct backend *be, enum dtype dt)
{
    (void)be, (void)dt;
    return LAYOUT_NCHW;
}

/* The cast, with the elements moved from layout lf's order to lt's (on the calling
 * thread: the CPU's own tensors are NCHW, so only a test asks it to permute). */
static void cpu_convert(struct backend *be, const int dims[4], enum dtype from, enum layout lf,
                        const void *src, enum dtype to, enum layout lt, void *dst)
{
    const size_t n = (size_t)dims[0], c = (size_t)dims[1], hw = (size_t)dims[2] * dims[3];
    if (lf == lt || hw == 1 || c == 1) {
        cpu_cast(be, n * c * hw, from, src, to, dst);
        return;
    }
    const float *s = src;
    float *d = dst;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < c; j++)
            for (size_t k = 0; k < hw; k++) {
                const size_t nchw = (i * c + j) * hw + k, nhwc = (i * hw + k) * c + j;
                const float v = s[lf == LAYOUT_NCHW ? nchw : nhwc];
                d[lt == LAYOUT_NCHW ? nchw : nhwc] = to == DT_F32 ? v : km_round_amp(v, (int)to);
            }
}

static void cpu_round_amp(struct backend *be, size_t n, enum amp_dtype dt, const float *src,
                          float *dst)
{
    const struct ew_args a = {.x = src, .out = dst, .first = (int)dt};
    cpu_parallel_for(be, n, 2 * n, round_amp_range, &a);
}

/* out = g, alpha = inv_scale; a range that meets a non-finite result raises *found */
struct unscale_args {
    struct ew_args ew;
    atomic_int *found;
};

static void unscale_range(const void *ctx, size_t lo, size_t hi)
{
    const struct unscale_args *a = ctx;
    int found = 0;
    for (size_t i = lo; i < hi; i++)
        a->ew.out[i] = km_unscale(a->ew.out[i], a->ew.alpha, &found);
    if (found)
        atomic_store(a->found, 1);
}

static void cpu_unscale(struct backend *be, int count, float *const *grads,
                        const size_t *numels, float inv_scale, float *found_inf)
{
    atomic_int found;
    atomic_init(&found, 0);
    for (int t = 0; t < count; t++) {
        const struct unscale_args a = {.ew = {.out = grads[t], .alpha = inv_scale},
                                       .found = &found};
        cpu_parallel_for(be, numels[t], 2 * numels[t], unscale_range, &a);
    }
    *found_inf = atomic_load(&found) ? 1.0f : 0.0f;
}

/* x = grad, out = param */
static void sgd_range(const void *ctx, size_t lo, size_t hi)
{
    const struct ew_args *a = ctx;
    if (!a->buf) { /* no momentum: km_sgd_update never touches its buffer */
        float unused = 0.0f;
        for (size_t i = lo; i < hi; i++)
            a->out[i] = km_sgd_update(a->out[i], a->x[i], &unused, a->lr, 0.0f, a->dampening,
                                      a->weight_decay, a->nesterov, a->first);
        return;
    }
    for (size_t i = lo; i < hi; i++)
        a->out[i] = km_sgd_update(a->out[i], a->x[i], &a->buf[i], a->lr, a->momentum,
                                  a->dampening, a->weight_decay, a->nesterov, a->first);
}

static void cpu_sgd_step(struct backend *be, size_t n, float *param, const float *grad,
                         float *buf, float lr, float momentum, float dampening,
                         float weight_decay, int nesterov, int first)
{
    const struct ew_args a = {.x = grad, .out = param, .buf = momentum != 0.0f ? buf : NULL,
                              .lr = lr, .momentum = momentum, .dampening = dampening,
                              .weight_decay = weight_decay, .nesterov = nesterov,
                              .first = first};
    cpu_parallel_for(be, n, 3 * n, sgd_range, &a);
}

/* ------------------------------------------------------------------ residual add, adaptive
 * average pooling, Adam (ResNet18's ops) */

static void add_range(const void *ctx, size_t lo, size_t hi)
{
    const struct ew_args *a = ctx;
    for (size_t i = lo; i < hi; i++)
        a->out[i] = a->x[i] + a->dy[i];
    cpu_round_span(a->out, lo, hi, (enum dtype)a->first);
}

/* x = a, dy = b (aliasing out is fine: each element is read before it is written) */
static void cpu_add(struct backend *be, size_t n, enum dtype dt, const void *a, const void *b,
                    void *y)
{
    const struct ew_args args = {.x = a, .dy = b, .out = y, .first = (int)dt};
    cpu_parallel_for(be, n, 3 * n, add_range, &args);
}

/* one adaptive pooling window along an axis of `in` split into `out`: [*lo, *hi) */
static inline void adaptive_window(int i, int in, int out, int *lo, int *hi)
{
    *lo = (int)((int64_t)i * in / out);
    *hi = (int)(((int64_t)(i + 1) * in + out - 1) / out);
}

struct adaptive_pool_args {
    int h, w, p, q;
    enum dtype dt;
    const float *x, *dy;
    float *y, *dx;
};

/* planes [lo, hi) */
static void adaptive_avg_forward_range(const void *ctx, size_t lo, size_t hi)
{
    const struct adaptive_pool_args *a = ctx;
    const size_t hw = (size_t)a->h * a->w, pq = (size_t)a->p * a->q;
    for (size_t pl = lo; pl < hi; pl++) {
        const float *xp = a->x + pl * hw;
        float *yp = a->y + pl * pq;
        for (int i = 0; i < a->p; i++) {
            int r0, r1;
            adaptive_window(i, a->h, a->p, &r0, &r1);
            for (int j = 0; j < a->q; j++) {
                int c0, c1;
                adaptive_window(j, a->w, a->q, &c0, &c1);
                float acc = 0.0f;
                for (int r = r0; r < r1; r++)
                    for (int c = c0; c < c1; c++)
                        acc += xp[(size_t)r * a->w + c];
                yp[(size_t)i * a->q + j] = acc / (float)((r1 - r0) * (c1 - c0));
            }
        }
        cpu_round_span(yp, 0, pq, a->dt);
    }
}

static void cpu_adaptive_avgpool2d_forward(struct backend *be, int n, int c, int h, int w,
                                           int p, int q, enum dtype dt, const void *x, void *y)
{
    const size_t planes = (size_t)n * c;
    const struct adaptive_pool_args a = {.h = h, .w = w, .p = p, .q = q, .dt = dt, .x = x,
                                         .y = y};
    cpu_parallel_for(be, planes, planes * h * w, adaptive_avg_forward_range, &a);
}

/* planes [lo, hi): each output's dy / its window size added over its window, outputs in
 * row-major order (the order the CUDA kernel gathers them in) */
static void adaptive_avg_backward_range(const void *ctx, size_t lo, size_t hi)
{
    const struct adaptive_pool_args *a = ctx;
    const size_t hw = (size_t)a->h * a->w, pq = (size_t)a->p * a->q;
    memset(a->dx + lo * hw, 0, (hi - lo) * hw * sizeof(float));
    for (size_t pl = lo; pl < hi; pl++) {
        float *dxp = a->dx + pl * hw;
        const float *dyp = a->dy + pl * pq;
        for (int i = 0; i < a->p; i++) {
            int r0, r1;
            adaptive_window(i, a->h, a->p, &r0, &r1);
            for (int j = 0; j < a->q; j++) {
                int c0, c1;
                adaptive_window(j, a->w, a->q, &c0, &c1);
                const float g = dyp[(size_t)i * a->q + j] / (float)((r1 - r0) * (c1 - c0));
                for (int r = r0; r < r1; r++)
                    for (int c = c0; c < c1; c++)
                        dxp[(size_t)r * a->w + c] += g;
            }
        }
        cpu_round_span(dxp, 0, hw, a->dt);
    }
}

static void cpu_adaptive_avgpool2d_backward(struct backend *be, int n, int c, int h, int w,
                                            int p, int q, enum dtype dt, const void *dy,
                                            void *dx)
{
    const size_t planes = (size_t)n * c;
    const struct adaptive_pool_args a = {.h = h, .w = w, .p = p, .q = q, .dt = dt, .dy = dy,
                                         .dx = dx};
    cpu_parallel_for(be, planes, planes * h * w, adaptive_avg_backward_range, &a);
}

struct adam_args {
    float *param, *exp_avg, *exp_avg_sq;
    const float *grad;
    struct km_adam k;
};

/* Vectorised (the four arrays do not overlap, and this file is built with
 * -fno-math-errno, so sqrtf needs no errno path): sqrt and division are correctly rounded
 * in vector and scalar form alike, so each clone gives the same bits. */
CPU_KERNEL(adam_range)
{
    const struct adam_args *a = ctx;
    float *restrict param = a->param, *restrict m = a->exp_avg, *restrict v = a->exp_avg_sq;
    const float *restrict grad = a->grad;
    const struct km_adam k = a->k;
    for (size_t i = lo; i < hi; i++)
        param[i] = km_adam_update(param[i], grad[i], &m[i], &v[i], &k);
}

static void cpu_adam_step(struct backend *be, size_t n, float *param, const float *grad,
                          float *exp_avg, float *exp_avg_sq, double lr, double beta1,
                          double beta2, double eps, double weight_decay, long long step)
{
    struct adam_args a = {.param = param, .exp_avg = exp_avg, .exp_avg_sq = exp_avg_sq,
                          .grad = grad};
    km_adam_scalars(lr, beta1, beta2, eps, weight_decay, step, &a.k);
    cpu_parallel_for(be, n, 4 * n, CPU_ISA_FN(be, adam_range), &a);
}

static void cpu_destroy(struct backend *be)
{
    struct cpu_backend *cb = (struct cpu_backend *)be;
    if (!cb)
        return;
    conv_dnnl_destroy(cb->fast);
    conv_wino_destroy(cb->wino);
    cpu_pool_stop(&cb->pool);
    free(cb->worker_args);
    free(cb->ws);
    free(cb);
}

static const struct backend cpu_backend_ops = {
    .name = "cpu",
    /* memory: host malloc; upload/download are plain copies */
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .synchronize = cpu_synchronize, /* everything is synchronous */
    .dtype_size = cpu_dtype_size,   /* half types stored as the fp32 values they hold */
    .layout = cpu_layout,           /* NCHW for every type */
    /* state: nothing runs asynchronously, there is no stream */
    .status = cpu_status,
    .stream = cpu_stream,
    /* convolution: im2col/col2im + sgemm over chunks of images */
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_backward = cpu_conv2d_backward,
    /* batch norm: SyncBatchNorm decomposition */
    .batchnorm_stats = cpu_batchnorm_stats,
    .batchnorm_gather_stats = cpu_batchnorm_gather_stats,
    .batchnorm_elemt = cpu_batchnorm_elemt,
    .batchnorm_forward_eval = cpu_batchnorm_forward_eval,
    .batchnorm_backward_reduce = cpu_batchnorm_backward_reduce,
    .batchnorm_backward_elemt = cpu_batchnorm_backward_elemt,
    /* activations and pooling */
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .maxpool2d_forward = cpu_maxpool2d_forward,
    .maxpool2d_backward = cpu_maxpool2d_backward,
    .adaptive_avgpool2d_forward = cpu_adaptive_avgpool2d_forward,
    .adaptive_avgpool2d_backward = cpu_adaptive_avgpool2d_backward,
    /* residual connections */
    .add = cpu_add,
    /* linear: sgemm */
    .linear_forward = cpu_linear_forward,
    .linear_backward = cpu_linear_backward,
    /* loss and metrics */
    .softmax_xent = cpu_softmax_xent,
    .softmax_xent_dev = cpu_softmax_xent_dev,
    .count_correct = cpu_count_correct,
    /* elementwise and optimizer */
    .scale = cpu_scale,
    /* mixed precision: kernel_math.h's rounding and unscale per element */
    .cast = cpu_cast,
    .cast_list = cpu_cast_list,
    .convert = cpu_convert,
    .round_amp = cpu_round_amp,
    .unscale = cpu_unscale,
    .sgd_step = cpu_sgd_step,
    .adam_step = cpu_adam_step,
    .destroy = cpu_destroy,
};

/* The backend splits the work itself, so every GEMM runs single-threaded inside one of its
 * threads.  The library default (threads = 0) is OpenBLAS's own thread count
 * (OPENBLAS_NUM_THREADS or the number of cores), read once before it is set to 1. */
static pthread_once_t cpu_blas_once = PTHREAD_ONCE_INIT;
static int cpu_default_threads = 1;

static void cpu_blas_init(void)
{
    const int n = openblas_get_num_threads();
    cpu_default_threads = n > 0 ? n : 1;
    openblas_set_num_threads(1);
}

/* conv_dnnl's view of the pool */
static void cpu_pool_run_ctx(void *ctx, int m, void (*fn)(void *arg, int t), void *arg)
{
    cpu_pool_run(ctx, m, fn, arg);
}

const char *conv_algo_name(enum conv_algo algo)
{
    switch (algo) {
    case CONV_ALGO_AUTO: return "auto";
    case CONV_ALGO_DIRECT: return "direct";
    case CONV_ALGO_WINOGRAD: return "winograd";
    }
    return "?";
}

struct backend *backend_cpu_create(int threads)
{
    return backend_cpu_create_path(threads, 0, CPU_PATH_FAST);
}

struct backend *backend_cpu_create_algo(int threads, enum conv_algo algo)
{
    return backend_cpu_create_conv(threads, 0, CPU_PATH_FAST, algo);
}

struct backend *backend_cpu_create_chunked(int threads, int chunk)
{
    return backend_cpu_create_path(threads, chunk, CPU_PATH_FAST);
}

const char *backend_cpu_describe(const struct backend *be)
{
    return ((const struct cpu_backend *)be)->describe;
}

int backend_cpu_is_fast(const struct backend *be)
{
    const struct cpu_backend *cb = (const struct cpu_backend *)be;
    return cb->fast != NULL || cb->wino != NULL || cb->pool_avx512;
}

struct backend *backend_cpu_create_path(int threads, int chunk, enum cpu_path path)
{
    return backend_cpu_create_conv(threads, chunk, path, CONV_ALGO_AUTO);
}

struct backend *backend_cpu_create_conv(int threads, int chunk, enum cpu_path path,
                                        enum conv_algo algo)
{
    if (threads < 0) {
        error_set("backend_cpu_create: threads %d: use 0 (library default) or a positive count",
                  threads);
        return NULL;
    }
    if (chunk < 0) {
        error_set("backend_cpu_create_chunked: chunk %d: use 0 (sized by the backend) or a "
                  "positive count",
                  chunk);
        return NULL;
    }
    pthread_once(&cpu_blas_once, cpu_blas_init);
    if (threads == 0)
        threads = cpu_default_threads;
    struct cpu_backend *cb = calloc(1, sizeof *cb);
    if (!cb) {
        error_set("backend_cpu_create: out of memory allocating the backend");
        return NULL;
    }
    cb->ops = cpu_backend_ops;
    if (cpu_isa_get(&cb->isa)) {
        free(cb);
        return NULL;
    }
    struct cpu_pool *pool = &cb->pool;
    pool->threads = threads;
    pool->chunk = chunk;
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->running, 0);
    atomic_init(&pool->quit, 0);
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->tid = calloc((size_t)threads, sizeof *pool->tid);
    cb->worker_args = calloc((size_t)threads, sizeof *cb->worker_args);
    if (!pool->tid || !cb->worker_args) {
        error_set("backend_cpu_create: out of memory allocating %d worker threads", threads);
        cpu_destroy(&cb->ops);
        return NULL;
    }
    for (int t = 1; t < threads; t++) {
        cb->worker_args[t] = (struct cpu_worker_arg){.pool = pool, .t = t};
        int rc = pthread_create(&pool->tid[t - 1], NULL, cpu_pool_worker, &cb->worker_args[t]);
        if (rc != 0) {
            error_set("backend_cpu_create: cannot start worker thread %d of %d (%s): use "
                      "fewer threads",
                      t, threads, strerror(rc));
            cpu_destroy(&cb->ops);
            return NULL;
        }
        pool->started++;
    }
    const char *conv = "im2col + OpenBLAS sgemm (reference)", *why = "", *wino = "";
    const char *pooling = "scalar (reference)";
    if (path == CPU_PATH_FAST) { /* each part falls back to its reference alone */
        const struct conv_pool cp = {.run = cpu_pool_run_ctx, .ctx = pool,
                                          .threads = threads, .chunk = chunk};
        cb->fast = conv_dnnl_create(&cp, algo == CONV_ALGO_WINOGRAD, cb->isa);
        if (cb->fast)
            conv = conv_dnnl_describe(cb->fast);
        else
            why = error_get();
        cb->wino = algo == CONV_ALGO_DIRECT ? NULL : conv_wino_create(&cp);
        if (cb->wino)
            wino = cb->fast && conv_dnnl_winograd(cb->fast)
                       ? "; own Winograd F(2x2,3x3) for 3x3 layers of at most 4x4 pixels"
                       : "; own Winograd F(2x2,3x3) for 3x3 layers";
        cb->pool_avx512 = cb->isa == CPU_ISA_AVX512 && cpu_has_avx512f();
        if (cb->pool_avx512)
            pooling = "AVX-512";
    }
    snprintf(cb->describe, sizeof cb->describe,
             "convolutions%s%s%s: %s%s%s%s; max pooling: %s; loops: %s%s",
             path == CPU_PATH_FAST ? " (--conv-algo " : "",
             path == CPU_PATH_FAST ? conv_algo_name(algo) : "", path == CPU_PATH_FAST ? ")" : "",
             conv, wino, *why ? " -- " : "", why, pooling, cpu_isa_name(cb->isa),
             cb->isa < cpu_isa_machine() ? " (DDPPROF_MAX_CPU_ISA)" : "");
    error_clear();
    return &cb->ops;
}
