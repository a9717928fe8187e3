/* stubs.c — the CUDA entry points of a build without the CUDA toolkit (see cuda_api.h). */
#include "cuda/cuda_api.h"

#include "common/error.h"

#include <stddef.h>
#include <string.h>

static const char no_cuda[] = "this ddpprof was built without CUDA (CMake found no CUDA "
                              "toolkit with cuDNN, NCCL and CUPTI): use --cpu N, or rebuild "
                              "where the toolkit is installed";

int cuda_build_enabled(void) { return 0; }

int cuda_device_count(void) { return error_set("%s", no_cuda); }

struct backend *backend_cuda_create(int device)
{
    (void)device;
    return error_set("%s", no_cuda), NULL;
}

struct comm *comm_nccl_create(struct backend *be, struct store *store, int rank, int world,
                              int timeout_ms)
{
    (void)be, (void)store, (void)rank, (void)world, (void)timeout_ms;
    return error_set("%s", no_cuda), NULL;
}

int comm_nccl_exchange_id(struct store *store, int rank, const char *key,
                          unsigned char id[128])
{
    (void)store, (void)rank, (void)key, (void)id;
    return error_set("%s", no_cuda);
}

int cuda_info_get(int device, struct cuda_info *info)
{
    (void)device;
    memset(info, 0, sizeof *info);
    return error_set("%s", no_cuda);
}

int cuda_conv2d_output_dim(const struct conv2d_shape *cs, int dtype, int dims[4])
{
    (void)cs, (void)dtype, (void)dims;
    return error_set("%s", no_cuda);
}

int cuda_pool2d_output_dim(const struct pool2d_shape *ps, int dims[4])
{
    (void)ps, (void)dims;
    return error_set("%s", no_cuda);
}
