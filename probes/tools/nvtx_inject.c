/* nvtx_inject.c — libddpprof_nvtx_inject.so: the NVTX capture tool as a dynamic injection.
 *
 * Run any program (the real trainer, every rank) with
 *   NVTX_INJECTION64_PATH=<build>/libddpprof_nvtx_inject.so DDPPROF_NVTX_CAPTURE=<dir>
 * and each process that emits NVTX writes <dir>/nvtx.<pid>.csv at exit (see
 * probes/nvtx_capture.h; read them back with nvtx_capture_load).  Without
 * DDPPROF_NVTX_CAPTURE it refuses to attach.  Only InitializeInjectionNvtx2 is exported. */
#include "probes/tools/nvtx_capture.h"

#include "common/error.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char inject_path[PATH_MAX];

static void inject_save(void)
{
    if (nvtx_capture_save(inject_path) != 0)
        fprintf(stderr, "nvtx capture: %s\n", error_get());
}

__attribute__((visibility("default"))) int
InitializeInjectionNvtx2(nvtx_capture_export_table_fn get_export_table)
{
    const char *dir = getenv("DDPPROF_NVTX_CAPTURE");
    if (!dir || !*dir)
        return 0;
    if ((size_t)snprintf(inject_path, sizeof inject_path, "%s/nvtx.%d.csv", dir, (int)getpid()) >=
        sizeof inject_path)
        return 0;
    if (!nvtx_capture_initialize(get_export_table))
        return 0;
    atexit(inject_save);
    return 1;
}
