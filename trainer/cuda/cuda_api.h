/* cuda_api.h — constructors of the CUDA backend and the NCCL comm, and the host-side CUDA
 * queries (versions, shapes, unique-id exchange) the rest of the program and the tests use.
 *
 * The program's definitions are cuda_loader.c's, in every build: they forward to
 * libddpprof_cuda.so (the rest of trainer/cuda/, built when CMake found the CUDA toolkit
 * with cuDNN, NCCL and CUPTI), loaded on the first call that needs it, or fail with one
 * clear line saying why it cannot be (no CUDA build, file or library missing).  Callers
 * never #ifdef. */
#ifndef DDPPROF_CUDA_H
#define DDPPROF_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct backend;
struct comm;
struct store;
struct conv2d_shape;
struct pool2d_shape;

/* 1 when this build has the CUDA backend */
int cuda_build_enabled(void);

/* Number of visible CUDA devices, 0 when there is no driver or device, -1 (error_set) only
 * for a build without CUDA.  Asks the driver (libcuda.so.1): loads none of the CUDA
 * libraries, nor libddpprof_cuda.so. */
int cuda_device_count(void);

/* The CUDA backend on device `device` (an index among the visible devices).  NULL +
 * error_set (no CUDA build, no such device, no driver): one line saying which and what to
 * do.  Slots may be called from any thread (each makes the backend's device current), but
 * not concurrently.  A failing CUDA/cuDNN/cuBLAS call inside a slot (slots return void) is
 * kept as the backend's first error, which its status slot returns (backend.h); a failed
 * backend's softmax_xent returns NaN.  Its stream slot is the non-blocking stream every
 * slot is queued on. */
struct backend *backend_cuda_create(int device);

/* backend_cuda_create with the math of fp32 convolutions chosen: tf32 0, strict FP32 (the
 * CPU oracle's precision; backend_cuda_create's); 1, TF32 tensor cores allowed, as
 * PyTorch's defaults (torch.backends.cudnn.allow_tf32 = True): cuDNN ranks fp32
 * convolutions under CUDNN_DEFAULT_MATH and runs each with the math type it ranked it with.
 * fp32 GEMMs (cuBLAS) stay FP32 either way, as torch.backends.cuda.matmul.allow_tf32 =
 * False; half types are not affected.  --tf32 on|off. */
struct backend *backend_cuda_create_tf32(int device, int tf32);

/* The NCCL comm for rank/world: rank 0 creates the unique id and publishes it in the
 * store under "nccl_id" (the n-th communicator of a process under "nccl_id.n"), the others
 * read it; then all ranks meet at a store barrier and create the communicator on be's
 * device.  store may be NULL only when world == 1.  be is this rank's CUDA backend (its
 * compute stream orders the collectives).  The comm's stream slot is its own stream, which
 * the collectives run on.  NULL + error_set. */
struct comm *comm_nccl_create(struct backend *be, struct store *store, int rank, int world,
                              int timeout_ms);

/* The unique-id half of comm_nccl_create: rank 0 calls ncclGetUniqueId (no device needed)
 * and store_set(key); other ranks store_get(key).  id receives the 128 bytes. */
int comm_nccl_exchange_id(struct store *store, int rank, const char *key,
                          unsigned char id[128]);

/* What the run ran on, for meta.csv and results/: device (device < 0 or no device: empty
 * name, zeros) and library versions, as the libraries encode them. */
struct cuda_info {
    char device_name[256];
    int cc_major, cc_minor;  /* compute capability */
    int sm_count;
    size_t memory_bytes;
    int driver_version;      /* cudaDriverGetVersion, 13000 = 13.0; 0 without a driver */
    int runtime_version;     /* cudaRuntimeGetVersion */
    size_t cudnn_version;    /* cudnnGetVersion, 91900 = 9.19.0 */
    int cublas_version;      /* major*10000 + minor*100 + patch */
    int nccl_version;        /* ncclGetVersion, 22809 = 2.28.9 */
    char cudnn_algo_cache[4096]; /* the file of cuDNN's algorithm choices, or "off"
                                    (trainer/cuda/conv_cache.h: DDPPROF_CUDNN_CACHE) */
};

/* 0, or -1 (error_set) when device >= 0 cannot be queried or in a build without CUDA. */
int cuda_info_get(int device, struct cuda_info *info);

/* cuDNN's output shape (n,k,p,q) of cs (p, q need not be filled) with the descriptors the
 * backend builds, for dtype 0 fp32, 1 fp16, 2 bf16.  Needs no device.  0 or -1. */
int cuda_conv2d_output_dim(const struct conv2d_shape *cs, int dtype, int dims[4]);

/* cuDNN's output shape (n,c,p,q) of max pooling ps (no padding).  Needs no device. */
int cuda_pool2d_output_dim(const struct pool2d_shape *ps, int dims[4]);

#ifdef __cplusplus
}
#endif
#endif
