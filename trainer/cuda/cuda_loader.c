/* cuda_loader.c — cuda_api.h for the program, in every build.
 *
 * The CUDA backend and the NCCL comm live in libddpprof_cuda.so (cuda_module.h), which a
 * CUDA build puts next to the ddpprof binary; it is loaded (common/plugin.h) by the first
 * call that needs it, so a run on CPU ranks and `ddpprof --version` never map cudart,
 * cuBLAS, cuDNN or NCCL (~220 MiB of resident memory, most of it cuBLASLt and cuDNN
 * relocations).  cuda_build_enabled needs no library, and cuda_device_count asks the
 * driver (libcuda.so.1) directly.  When the module cannot be loaded — a build without
 * CUDA, the file missing, a library it needs missing — every entry fails with one line
 * saying why and what to do.
 *
 * CMake passes DDPPROF_CUDA_BUILT (1 when it builds the module) and
 * DDPPROF_CUDA_RUNTIME_MAJOR (the CUDA runtime the module links, 13 for CUDA 13.x). */
#include "cuda/cuda_api.h"

#include "common/error.h"
#include "common/plugin.h"
#include "cuda/cuda_module.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const char no_cuda[] = "this ddpprof was built without CUDA (CMake found no CUDA "
                              "toolkit with cuDNN, NCCL and CUPTI): use --cpu N, or rebuild "
                              "where the toolkit is installed";

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const struct cuda_module *cuda_mod; /* set once by cuda_module_open */
static char cuda_why[1024];                /* why it is NULL */

static void cuda_module_open(void)
{
    if (!DDPPROF_CUDA_BUILT) {
        snprintf(cuda_why, sizeof cuda_why, "%s", no_cuda);
        return;
    }
    cuda_mod = plugin_load(CUDA_MODULE_FILE, CUDA_MODULE_TABLE, CUDA_MODULE_ABI);
    if (!cuda_mod)
        snprintf(cuda_why, sizeof cuda_why,
                 "the CUDA backend could not be loaded (%s): " CUDA_MODULE_FILE " must lie "
                 "next to the ddpprof binary, with the CUDA libraries it needs; or use --cpu N",
                 error_get());
}

/* the module, or NULL + error_set with the reason (the same line on every call) */
static const struct cuda_module *cuda_module_get(void)
{
    pthread_once(&cuda_once, cuda_module_open);
    if (!cuda_mod)
        error_set("%s", cuda_why);
    return cuda_mod;
}

int cuda_build_enabled(void) { return DDPPROF_CUDA_BUILT; }

/* The driver's count, as cudaGetDeviceCount would give it: CUDA_VISIBLE_DEVICES applies
 * (the driver reads it), and a driver older than the runtime the module links counts as
 * none (the runtime would refuse it: cudaErrorInsufficientDriver). */
static int cuda_count;
static pthread_once_t cuda_count_once = PTHREAD_ONCE_INIT;

static void cuda_count_devices(void)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL); /* kept: cudart uses it */
    if (!drv)
        return; /* no driver */
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(drv, "cuInit");
    int (*version)(int *) = (int (*)(int *))dlsym(drv, "cuDriverGetVersion");
    int (*count)(int *) = (int (*)(int *))dlsym(drv, "cuDeviceGetCount");
    int v = 0, n = 0; /* CUresult: 0 is CUDA_SUCCESS */
    if (init && version && count && init(0) == 0 && version(&v) == 0 &&
        v / 1000 >= DDPPROF_CUDA_RUNTIME_MAJOR && count(&n) == 0 && n > 0)
        cuda_count = n;
}

int cuda_device_count(void)
{
    if (!DDPPROF_CUDA_BUILT)
        return error_set("%s", no_cuda);
    pthread_once(&cuda_count_once, cuda_count_devices);
    return cuda_count;
}

struct backend *backend_cuda_create(int device) { return backend_cuda_create_tf32(device, 0); }

struct backend *backend_cuda_create_tf32(int device, int tf32)
{
    const struct cuda_module *m = cuda_module_get();
    return m ? m->backend_create(device, tf32) : NULL;
}

struct comm *comm_nccl_create(struct backend *be, struct store *store, int rank, int world,
                              int timeout_ms)
{
    const struct cuda_module *m = cuda_module_get();
    return m ? m->nccl_create(be, store, rank, world, timeout_ms) : NULL;
}

int comm_nccl_exchange_id(struct store *store, int rank, const char *key,
                          unsigned char id[128])
{
    const struct cuda_module *m = cuda_module_get();
    return m ? m->nccl_exchange_id(store, rank, key, id) : -1;
}

int cuda_info_get(int device, struct cuda_info *info)
{
    memset(info, 0, sizeof *info);
    const struct cuda_module *m = cuda_module_get();
    return m ? m->info_get(device, info) : -1;
}

int cuda_conv2d_output_dim(const struct conv2d_shape *cs, int dtype, int dims[4])
{
    const struct cuda_module *m = cuda_module_get();
    return m ? m->conv2d_output_dim(cs, dtype, dims) : -1;
}

int cuda_pool2d_output_dim(const struct pool2d_shape *ps, int dims[4])
{
    const struct cuda_module *m = cuda_module_get();
    return m ? m->pool2d_output_dim(ps, dims) : -1;
}
