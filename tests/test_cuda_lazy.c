/* test_cuda_lazy.c — the CUDA parts load only when they are used (common/plugin.h,
 * trainer/cuda/cuda_loader.c, probes/cuda/gpu_loader.c), in every build.
 *
 * CUDA build: cuda_build_enabled and cuda_device_count (0 without a driver, the driver's
 * count on a GPU machine) map none of cudart, cuBLAS, cuDNN, NCCL, CUPTI or the two
 * modules (this process's /proc/self/maps); cuda_info_get(-1) then maps
 * libddpprof_cuda.so from DDPPROF_LIB_DIR with cuDNN and reports cuDNN's version (so the
 * module ran), and cupti_tracer_start maps libddpprof_probes_cuda.so with CUPTI.  Where
 * the modules cannot be loaded (DDPPROF_LIB_DIR elsewhere, in a child process), every
 * entry fails in one line naming the file, the dynamic loader's reason and the way out,
 * the same line on every call; a module without the table symbol is one line too, and so
 * is a table whose abi is not the program's (a module of another build).
 * The tests' lookup of the loaded libcudart's entry points (cudart_sym.h), which
 * test_gpu_nccl needs, finds them once the module is loaded.
 * CPU build: nothing to load; every entry says so in one line and nothing is mapped.
 * tests/test_cuda_lazy_binary.sh checks the ddpprof binary itself (CPU runs map nothing,
 * `--gpu 0` finds the module beside the binary). */
#include "common/error.h"
#include "common/plugin.h"
#include "cuda/cuda_api.h"
#include "cudart_sym.h"
#include "probes/activity.h"
#include "probes/cuda/gpu_module.h"
#include "probes/gpu.h"
#include "testutil.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const cuda_libs[] = {
    "libddpprof_cuda.so", "libddpprof_probes_cuda.so", "libcudart", "libcublas",
    "libcudnn", "libnccl", "libcupti",
};
#define NLIBS (sizeof cuda_libs / sizeof cuda_libs[0])

/* 1 when a mapping of this process has name in its path */
static int mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL, "cannot read /proc/self/maps");
    if (!f)
        return 0;
    char line[PATH_MAX + 256];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

/* one error line: non-empty, no newline */
static int one_line(const char *msg) { return msg[0] != '\0' && strchr(msg, '\n') == NULL; }

static void emit_nothing(void *ctx, const struct trace_row *row) { (void)ctx, (void)row; }

/* The plugin paths: DDPPROF_LIB_DIR when set, else the program's own directory. */
static void test_paths(const char *argv0)
{
    const char *dir = getenv("DDPPROF_LIB_DIR");
    char path[PATH_MAX + 64], want[PATH_MAX + 64];
    if (dir) {
        CHECK(plugin_path("libx.so", path, sizeof path) == 0, "%s", error_get());
        snprintf(want, sizeof want, "%s/libx.so", dir);
        CHECK(strcmp(path, want) == 0, "DDPPROF_LIB_DIR=%s: path '%s'", dir, path);
    }
    char *self = realpath(argv0, NULL), *keep = dir ? strdup(dir) : NULL;
    CHECK(self != NULL, "realpath(%s)", argv0);
    unsetenv("DDPPROF_LIB_DIR");
    if (self) {
        *strrchr(self, '/') = '\0';
        snprintf(want, sizeof want, "%s/libx.so", self);
        CHECK(plugin_path("libx.so", path, sizeof path) == 0 && strcmp(path, want) == 0,
              "without DDPPROF_LIB_DIR: '%s', not beside the program ('%s')", path, want);
    }
    if (keep)
        setenv("DDPPROF_LIB_DIR", keep, 1);
    free(self);
    free(keep);
}

/* In a child whose DDPPROF_LIB_DIR holds no module: every entry fails in one line. */
static int child_no_module(void)
{
    setenv("DDPPROF_LIB_DIR", "/nonexistent-ddpprof-libs", 1);
    const int cuda = cuda_build_enabled();
    error_clear();
    CHECK(backend_cuda_create(0) == NULL, "backend_cuda_create without its module succeeded");
    char first[1024];
    snprintf(first, sizeof first, "%s", error_get());
    printf("no module: backend_cuda_create: %s\n", first);
    CHECK(one_line(first) && strstr(first, "--cpu"), "not one line with the way out: '%s'",
          first);
    if (cuda) {
        CHECK(strstr(first, "/nonexistent-ddpprof-libs/libddpprof_cuda.so") &&
                  strstr(first, "No such file"),
              "does not name the file and dlopen's reason: '%s'", first);
        const char *p = strstr(first, "/nonexistent-ddpprof-libs/");
        CHECK(p && !strstr(p + 1, "/nonexistent-ddpprof-libs/"), "path said twice: '%s'",
              first);
    } else {
        CHECK(strstr(first, "built without CUDA") != NULL, "CPU build: '%s'", first);
    }
    struct cuda_info info;
    unsigned char id[128];
    int dims[4];
    error_clear();
    CHECK(cuda_info_get(-1, &info) == -1 && strcmp(error_get(), first) == 0,
          "cuda_info_get: '%s'", error_get());
    error_clear();
    CHECK(comm_nccl_exchange_id(NULL, 0, "k", id) == -1 && strcmp(error_get(), first) == 0,
          "comm_nccl_exchange_id: '%s'", error_get());
    error_clear();
    CHECK(comm_nccl_create(NULL, NULL, 0, 1, 1000) == NULL && strcmp(error_get(), first) == 0,
          "comm_nccl_create: '%s'", error_get());
    error_clear();
    CHECK(cuda_pool2d_output_dim(NULL, dims) == -1 && strcmp(error_get(), first) == 0,
          "cuda_pool2d_output_dim: '%s'", error_get());

    char why[512] = "";
    CHECK(cupti_tracer_start(NULL, why, sizeof why) == NULL, "CUPTI started without a module");
    printf("no module: %s\n", why);
    CHECK(one_line(why) && strncmp(why, "CUPTI unavailable", 17) == 0, "why: '%s'", why);
    CHECK(!cuda || strstr(why, "libddpprof_probes_cuda.so"), "why names no file: '%s'", why);
    error_clear();
    CHECK(event_timer_create(NULL) == NULL, "event timer without a module");
    CHECK(one_line(error_get()) && strstr(error_get(), "unavailable"), "event timer: '%s'",
          error_get());
    for (size_t i = 0; i < NLIBS; i++)
        CHECK(!mapped(cuda_libs[i]), "%s mapped though nothing could be loaded", cuda_libs[i]);
    return test_finish();
}

static void test_no_module(void)
{
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        int rc = child_no_module();
        fflush(stdout);
        _exit(rc);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "the child without modules failed (status %d)", status);
}

int main(int argc, char **argv)
{
    (void)argc;
    test_paths(argv[0]);
    test_no_module();

    /* the cheap queries load nothing */
    const int cuda = cuda_build_enabled();
    error_clear();
    const int count = cuda_device_count();
    printf("CUDA build: %d, devices: %d\n", cuda, count);
    if (cuda)
        CHECK(count >= 0, "cuda_device_count %d: %s", count, error_get());
    else
        CHECK(count == -1 && one_line(error_get()) && strstr(error_get(), "without CUDA"),
              "CPU build: count %d, '%s'", count, error_get());
    for (size_t i = 0; i < NLIBS; i++)
        CHECK(!mapped(cuda_libs[i]), "%s mapped by cuda_build_enabled/cuda_device_count",
              cuda_libs[i]);

    /* the first call that needs the backend module loads it (and only it) */
    struct cuda_info info;
    error_clear();
    const int rc = cuda_info_get(-1, &info);
    if (cuda) {
        CHECK(rc == 0 && info.cudnn_version > 0, "cuda_info_get(-1): %s", error_get());
        CHECK(mapped("libddpprof_cuda.so") && mapped("libcudnn") && mapped("libcublas"),
              "the backend module or its libraries are not mapped after cuda_info_get");
        CHECK(!mapped("libddpprof_probes_cuda.so") && !mapped("libcupti"),
              "the probes module came with the backend's");
        /* the module took libcudart in RTLD_LOCAL: not in the global scope, yet the tests'
         * lookup (cudart_sym.h, test_gpu_nccl's stream hold and interposer) finds it */
        CHECK(mapped("libcudart"), "libcudart is not mapped after cuda_info_get");
        CHECK(cudart_sym("cudaHostAlloc") && cudart_sym("cudaHostGetDevicePointer") &&
                  cudart_sym("cudaEventQuery"),
              "cudart_sym does not find cudaHostAlloc/cudaHostGetDevicePointer/cudaEventQuery "
              "in the loaded libcudart (%s)", cudart_path() ? cudart_path() : "none found");
        printf("libcudart (loaded by the module): %s\n", cudart_path() ? cudart_path() : "?");
    } else {
        CHECK(rc == -1 && strstr(error_get(), "without CUDA"), "CPU build: '%s'", error_get());
    }

    /* the probes' module: with the first tracer (unavailable here without a GPU) */
    struct activity_proc *ap = activity_proc_create(0, emit_nothing, NULL);
    CHECK(ap != NULL, "activity_proc_create: %s", error_get());
    char why[512] = "";
    struct cupti_tracer *t = ap ? cupti_tracer_start(ap, why, sizeof why) : NULL;
    printf("cupti_tracer_start: %s\n", t ? "tracing" : why);
    CHECK(t || (one_line(why) && strncmp(why, "CUPTI unavailable", 17) == 0), "why: '%s'", why);
    CHECK(!cuda || (mapped("libddpprof_probes_cuda.so") && mapped("libcupti")),
          "the probes module or CUPTI is not mapped after cupti_tracer_start");
    CHECK(cuda || (!t && strstr(why, "no CUDA")), "CPU build: '%s'", why);
    cupti_tracer_stop(t);
    activity_proc_destroy(ap);
    for (size_t i = 0; i < NLIBS && !cuda; i++)
        CHECK(!mapped(cuda_libs[i]), "%s mapped in a CPU build", cuda_libs[i]);

    /* a shared object that is not a module of ours: one line, and it is let go */
    error_clear();
    CHECK(plugin_load(cuda ? "libddpprof_probes_cuda.so" : "libddpprof_cuda.so",
                      "ddpprof_no_such_table", 0) == NULL,
          "a table that does not exist was found");
    printf("plugin_load: %s\n", error_get());
    CHECK(one_line(error_get()) &&
              strstr(error_get(), cuda ? "no symbol ddpprof_no_such_table" : "No such file"),
          "'%s'", error_get());

    /* a table of another build (its abi is not the program's): one line, refused */
    if (cuda) {
        error_clear();
        CHECK(plugin_load(GPU_MODULE_FILE, GPU_MODULE_TABLE, GPU_MODULE_ABI + 1) == NULL,
              "a table of another build was taken");
        printf("plugin_load, another build: %s\n", error_get());
        char want[96];
        snprintf(want, sizeof want, "(table %d, this program %d): rebuild", GPU_MODULE_ABI,
                 GPU_MODULE_ABI + 1);
        CHECK(one_line(error_get()) &&
                  strstr(error_get(), GPU_MODULE_FILE " is from another build") &&
                  strstr(error_get(), want),
              "'%s'", error_get());
    }
    return test_finish();
}
