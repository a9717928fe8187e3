/* plugin.h — shared objects the program loads on first use, found next to the program.
 *
 * In a CUDA build the CUDA backend with the NCCL comm (trainer/cuda) and the CUPTI probes
 * (probes/cuda) are MODULE libraries, libddpprof_cuda.so and libddpprof_probes_cuda.so,
 * which their loaders (trainer/cuda/cuda_loader.c, probes/cuda/gpu_loader.c) open only
 * when a GPU is used, so a run on CPU ranks, --version and the report never map cudart,
 * cuBLAS, cuDNN, NCCL or CUPTI.  A module calls back into the program for a few
 * functions (error_set, the rendezvous store, ...), which the program exports
 * (cmake/layers.cmake, ddpprof_module): one error message per thread, one clock.
 *
 * A module is looked for in $DDPPROF_LIB_DIR when it is set (the test programs, which do
 * not sit next to it), else in the directory of the running program (/proc/self/exe),
 * where the build puts it beside build/ddpprof: it travels with the binary. */
#ifndef DDPPROF_PLUGIN_H
#define DDPPROF_PLUGIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The path plugin_load opens for file ("libddpprof_cuda.so"), into path.  0, or -1
 * (error_set) when the program's directory cannot be read or the path does not fit. */
int plugin_path(const char *file, char *path, size_t cap);

/* Open file (RTLD_NOW: a missing library or symbol fails here, not at a later call) and
 * return the address of its exported symbol `table`, a struct whose first member is
 * `int abi`: it must equal abi (the program's), else the module is from another build and
 * is refused before any of its slots is called.  The module stays loaded for the life of
 * the process.  NULL + error_set (one line) with the path and the dynamic loader's reason,
 * or saying the table is missing or of another build. */
const void *plugin_load(const char *file, const char *table, int abi);

#ifdef __cplusplus
}
#endif
#endif
