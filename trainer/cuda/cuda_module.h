/* cuda_module.h — the table libddpprof_cuda.so hands the program's loader
 * (cuda_loader.c): the entries of cuda_api.h that need the CUDA libraries, each the
 * module's function of the same name.  cuda_build_enabled and cuda_device_count are the
 * loader's own (no library needed).  Both sides are compiled from this header in one
 * build; abi changes with the table, so a module left over from another build is refused
 * in one line instead of called through the wrong slots. */
#ifndef DDPPROF_CUDA_MODULE_H
#define DDPPROF_CUDA_MODULE_H

#include "cuda/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_MODULE_FILE "libddpprof_cuda.so" /* trainer/CMakeLists.txt builds it */
#define CUDA_MODULE_TABLE "ddpprof_cuda_module"
#define CUDA_MODULE_ABI 3

struct cuda_module {
    int abi; /* CUDA_MODULE_ABI */
    struct backend *(*backend_create)(int device, int tf32); /* backend_cuda_create_tf32 */
    struct comm *(*nccl_create)(struct backend *be, struct store *store, int rank, int world,
                                int timeout_ms);
    int (*nccl_exchange_id)(struct store *store, int rank, const char *key,
                            unsigned char id[128]);
    int (*info_get)(int device, struct cuda_info *info);
    int (*conv2d_output_dim)(const struct conv2d_shape *cs, int dtype, int dims[4]);
    int (*pool2d_output_dim)(const struct pool2d_shape *ps, int dims[4]);
};

#ifdef __cplusplus
}
#endif
#endif
