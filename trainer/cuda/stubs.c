/* stubs.c — the CUDA constructors of a build without the CUDA toolkit (see cuda.h). */
#include "cuda.h"

#include "error.h"

#include <stddef.h>

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
