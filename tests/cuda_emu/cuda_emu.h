/* cuda_emu.h — just enough of CUDA to run trainer/cuda/kernels.cu on the CPU, for tests.
 *
 * tests/CMakeLists.txt compiles kernels.cu with the host C++ compiler against this header
 * (reached through the cuda_runtime.h, cuda_fp16.h and cuda_bf16.h beside it), after
 * rewrite_launches.cmake has turned every `kernel<<<grid, block, shmem, stream>>>(args)`
 * into `emu_launch(kernel, grid, block, shmem, stream)(args)`.  No CUDA toolkit is needed.
 *
 * What it models, and what it does not:
 *   - A launch runs its blocks one after another; each block's threads run as coroutines
 *     (ucontext) on one OS thread, so a block's threads really interleave at barriers:
 *     __syncthreads waits for every live thread of the block, and the warp operations
 *     (__shfl_sync, __shfl_down_sync, __any_sync; full masks only) wait for every live
 *     lane of the warp (32 consecutive threads), exchange, and wait again.  A thread that
 *     returns counts as arrived.  Threads whose barriers can never meet (a __syncthreads
 *     some threads skip, a shuffle inside a divergent branch) abort the test with a
 *     message instead of hanging.
 *   - Launch limits are checked as on a GPU (at most 1024 threads a block, grid y and z
 *     at most 65535), reported through cudaGetLastError.
 *   - Between two barriers a thread runs alone, so races inside that window are not
 *     found, and __shared__ memory is one static array shared by the blocks in turn.
 *   - Arithmetic is the host's: float and double as the CPU does them, expf/log from
 *     libm, fp16/bf16 conversions from common/half.h (round to nearest even, like the
 *     hardware's cvt.rn).  So the emulation checks indexing, bounds, reductions and
 *     synchronisation, not GPU numerics or speed.
 * Streams are ignored: every call completes before it returns.  Device pointers are host
 * pointers.
 *
 * Beyond the kernels, the runtime calls the CUDA backend (trainer/cuda/backend_cuda.c)
 * makes are here too -- one device, memory from malloc, streams and events that are
 * always complete -- and, with cudnn.h, cublas_v2.h and nccl.h beside this file, the
 * library calls it makes, so the whole backend runs on the CPU (tests/test_step_launches.c).
 * Every operation a GPU would run is counted (emu_ops_get): each kernel launch, memset and
 * memcpy (by direction), and each cuDNN convolution and cuBLAS GEMM as one operation,
 * whatever number of kernels the real library would launch for it. */
#ifndef DDPPROF_CUDA_EMU_H
#define DDPPROF_CUDA_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "common/half.h"

/* ------------------------------------------------------------------ C-visible runtime */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;

/* the CUDA runtime's numbers */
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorNotReady = 600,
} cudaError_t;

#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02

/* library_types.h's */
typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum cudaDataType_t cudaDataType_t;
typedef enum libraryPropertyType_t {
    MAJOR_VERSION,
    MINOR_VERSION,
    PATCH_LEVEL
} libraryPropertyType;
typedef enum libraryPropertyType_t libraryPropertyType_t;

/* the fields of cudaDeviceProp the backend reads */
struct cudaDeviceProp {
    char name[256];
    struct {
        char bytes[16];
    } uuid;
    size_t totalGlobalMem;
    int major, minor;
    int multiProcessorCount;
};

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

/* the first launch error since the last call (then cleared), as the CUDA runtime */
cudaError_t cudaGetLastError(void);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s);

/* threads and blocks run by all launches so far (a test's proof that it ran them) */
unsigned long long emu_threads_run(void);
unsigned long long emu_blocks_run(void);

/* The runtime of one emulated device (device 0, an "emulated GPU" of compute capability
 * 9.0): memory is malloc'd host memory, every stream and event is complete at once. */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);
const char *cudaGetErrorName(cudaError_t e);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);

/* What a GPU would have run since the last emu_ops_reset: kernels (launches with a valid
 * configuration), cudaMemsetAsync calls, cudaMemcpyAsync calls by direction (indexed by
 * enum cudaMemcpyKind), and the fake libraries' operations: a cuDNN convolution (one
 * direction of one layer) or a cuBLAS GEMM each count once, and the layout transforms a
 * real cuDNN runs around a convolution (cudnn_emu.c emu_conv_transforms) one each. */
struct emu_ops {
    unsigned long long kernels;
    unsigned long long memsets;
    unsigned long long memcpys[5];
    unsigned long long cudnn_convs;
    unsigned long long cublas_gemms;
    unsigned long long cudnn_transforms;
};
void emu_ops_get(struct emu_ops *ops);
void emu_ops_reset(void);
/* the total: every field above summed */
unsigned long long emu_ops_total(const struct emu_ops *ops);
/* for the fake libraries: one cuDNN convolution (0), cuBLAS GEMM (1) or cuDNN layout
 * transform (2) ran */
void emu_ops_library(int which);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus

#include <tuple>

/* ------------------------------------------------------------------ qualifiers */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

/* ------------------------------------------------------------------ built-in variables */

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* the running thread's coordinates, set by the scheduler at every switch */
extern dim3 threadIdx, blockIdx, blockDim, gridDim;

/* ------------------------------------------------------------------ synchronisation */

void __syncthreads(void);

/* the calling thread's lane stores `bytes` of v, the warp meets, the lane reads lane
 * src's bytes into out (its own when src is outside the warp), the warp meets again */
void emu_warp_exchange(const void *v, void *out, size_t bytes, int src, unsigned mask);
/* the OR of pred over the warp's live lanes */
int emu_warp_any(int pred, unsigned mask);

template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta)
{
    T out;
    emu_warp_exchange(&v, &out, sizeof v, (int)((threadIdx.x & 31u) + delta), mask);
    return out;
}

template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src)
{
    T out;
    emu_warp_exchange(&v, &out, sizeof v, src & 31, mask);
    return out;
}

static inline int __any_sync(unsigned mask, int pred) { return emu_warp_any(pred, mask); }

/* blocks run one at a time and threads switch only at barriers: plain updates are atomic */
static inline int atomicAdd(int *p, int v)
{
    const int old = *p;
    *p = old + v;
    return old;
}

static inline unsigned atomicAdd(unsigned *p, unsigned v)
{
    const unsigned old = *p;
    *p = old + v;
    return old;
}

/* blocks run one after another: every store is visible to the blocks after it */
static inline void __threadfence(void) {}

static inline int atomicOr(int *p, int v)
{
    const int old = *p;
    *p = old | v;
    return old;
}

static inline int min(int a, int b) { return a < b ? a : b; }

/* ------------------------------------------------------------------ half types */

struct __half {
    uint16_t x;
};

struct __nv_bfloat16 {
    uint16_t x;
};

static inline float __half2float(__half h) { return half_f16_to_f32(h.x); }
static inline __half __float2half_rn(float f) { return __half{half_f32_to_f16(f)}; }
static inline float __bfloat162float(__nv_bfloat16 b) { return half_bf16_to_f32(b.x); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    return __nv_bfloat16{half_f32_to_bf16(f)};
}

/* ------------------------------------------------------------------ launches */

/* Run body(ctx) as every thread of every block of (grid, block); a bad configuration
 * runs nothing and is reported by cudaGetLastError. */
void emu_run(dim3 grid, dim3 block, void (*body)(void *ctx), void *ctx);

/* emu_launch(kernel, grid, block[, shmem, stream])(args...): the kernel's parameters
 * are converted once, as a launch does, and each thread calls the kernel with its own
 * copy of them. */
template <typename... P> struct emu_launcher {
    void (*fn)(P...);
    dim3 grid, block;

    void operator()(P... args) const
    {
        struct call {
            void (*fn)(P...);
            std::tuple<P...> params;
            static void run(void *ctx)
            {
                call *c = static_cast<call *>(ctx);
                std::tuple<P...> mine = c->params;
                std::apply(c->fn, mine);
            }
        } c{fn, std::tuple<P...>(args...)};
        emu_run(grid, block, &call::run, &c);
    }
};

template <typename... P>
static inline emu_launcher<P...> emu_launch(void (*fn)(P...), dim3 grid, dim3 block,
                                            size_t shmem = 0, cudaStream_t s = nullptr)
{
    (void)shmem, (void)s;
    return emu_launcher<P...>{fn, grid, block};
}

#endif /* __cplusplus */
#endif
