/* cuda_module.c — the one symbol libddpprof_cuda.so exports: its table (cuda_module.h).
 * Everything else in the module is hidden (C and CUDA visibility preset). */
#include "cuda/cuda_module.h"

__attribute__((visibility("default"))) const struct cuda_module ddpprof_cuda_module = {
    .abi = CUDA_MODULE_ABI,
    .backend_create = backend_cuda_create_tf32,
    .nccl_create = comm_nccl_create,
    .nccl_exchange_id = comm_nccl_exchange_id,
    .info_get = cuda_info_get,
    .conv2d_output_dim = cuda_conv2d_output_dim,
    .pool2d_output_dim = cuda_pool2d_output_dim,
};
