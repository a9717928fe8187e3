/* test_cuda_host.c — the host-side CUDA code that needs no GPU (any machine with the
 * toolkit): device detection that never fails, the one-line errors of the no-GPU paths,
 * library versions, and cuDNN descriptor setup with cuDNN's own output shape for every
 * convolution and pooling layer of the ConvNet and of ResNet18 (CIFAR and ImageNet stems),
 * in fp32, fp16 and bf16, against conv2d_shape_init / pool2d_shape_init and the PyTorch
 * formula; and the convolution plans' retry rules (conv_algos.h): an algorithm whose
 * workspace could not be allocated is tried again, one cuDNN refused is not.  Skips (77)
 * in a build without CUDA. */
#include "backend/backend.h"
#include "comm/comm.h"
#include "cuda/conv_algos.h"
#include "cuda/cuda_api.h"
#include "common/error.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#ifdef DDPPROF_TEST_CUDNN
#include <cudnn_graph.h>
#endif

/* one error line: non-empty, no newline */
static int one_line(const char *msg) { return msg[0] != '\0' && strchr(msg, '\n') == NULL; }

static void test_device_count(void)
{
    int a = cuda_device_count(), b = cuda_device_count();
    CHECK(a >= 0, "cuda_device_count() = %d in a CUDA build: must be >= 0 (%s)", a, error_get());
    CHECK(a == b, "cuda_device_count() changed between calls: %d then %d", a, b);
    printf("visible CUDA devices: %d\n", a);
}

static void test_no_device_paths(int count)
{
    /* a device index that does not exist: always testable, GPU or not */
    error_clear();
    struct backend *be = backend_cuda_create(count);
    CHECK(be == NULL, "backend_cuda_create(%d) with %d devices succeeded", count, count);
    const char *msg = error_get();
    CHECK(one_line(msg), "backend_cuda_create error is not one line: '%s'", msg);
    CHECK(strstr(msg, "GPU") || strstr(msg, "CUDA"), "error does not say GPU/CUDA: '%s'", msg);
    CHECK(strstr(msg, "--cpu") != NULL, "error does not offer --cpu N: '%s'", msg);
    printf("backend_cuda_create(%d): %s\n", count, msg);
    if (be)
        be->destroy(be);

    error_clear();
    CHECK(backend_cuda_create(-1) == NULL, "backend_cuda_create(-1) succeeded");
    CHECK(one_line(error_get()), "device -1: error '%s'", error_get());

    if (count == 0) {
        struct cuda_info info;
        CHECK(cuda_info_get(0, &info) == -1, "cuda_info_get(0) without a device succeeded");
        CHECK(one_line(error_get()), "cuda_info_get(0): error '%s'", error_get());
    }

    /* the state slots of the CPU backend: no stream, never an asynchronous error */
    struct backend *cpu = backend_cpu_create(1);
    CHECK(cpu != NULL, "cpu backend: %s", error_get());
    if (cpu) {
        CHECK(cpu->stream(cpu) == NULL, "a cpu backend has a CUDA stream");
        CHECK(cpu->status(cpu) == 0, "cpu->status failed: %s", error_get());
        /* NCCL on a CPU backend is refused with the way out */
        error_clear();
        struct comm *c = comm_nccl_create(cpu, NULL, 0, 1, 1000);
        CHECK(c == NULL, "comm_nccl_create on a cpu backend succeeded");
        CHECK(one_line(error_get()) && strstr(error_get(), "CUDA backend"),
              "comm_nccl_create(cpu): '%s'", error_get());
        if (c)
            c->destroy(c);
        cpu->destroy(cpu);
    }
    error_clear();
    CHECK(comm_nccl_create(NULL, NULL, 0, 1, 1000) == NULL, "comm_nccl_create(NULL) succeeded");
    CHECK(one_line(error_get()), "comm_nccl_create(NULL): '%s'", error_get());
}

static void test_versions(void)
{
    struct cuda_info info;
    CHECK(cuda_info_get(-1, &info) == 0, "cuda_info_get(-1): %s", error_get());
    /* the build requires cuDNN 9 and NCCL 2; runtime and cuBLAS exist with the toolkit */
    CHECK(info.cudnn_version >= 90000, "cuDNN version %zu", info.cudnn_version);
    CHECK(info.nccl_version >= 20000, "NCCL version %d", info.nccl_version);
    CHECK(info.runtime_version >= 11000, "CUDA runtime version %d", info.runtime_version);
    CHECK(info.cublas_version >= 110000, "cuBLAS version %d", info.cublas_version);
    CHECK(info.device_name[0] == '\0', "device name without a device: '%s'", info.device_name);
    printf("versions: runtime %d, driver %d, cuDNN %zu, cuBLAS %d, NCCL %d\n",
           info.runtime_version, info.driver_version, info.cudnn_version, info.cublas_version,
           info.nccl_version);
}

struct conv_case {
    const char *layer;
    int c, h, k, r, pad, stride;
};

/* Every distinct convolution of the ConvNet and ResNet18 (CIFAR variant: 3x3 stem; the
 * ImageNet 7x7 stride-2 stem on a 32x32 input too), square inputs. */
static const struct conv_case conv_cases[] = {
    {"convnet layer1.0", 1, 28, 16, 5, 2, 1},
    {"convnet layer2.0", 16, 14, 32, 5, 2, 1},
    {"resnet18 conv1 (CIFAR stem)", 3, 32, 64, 3, 1, 1},
    {"resnet18 conv1 (ImageNet stem)", 3, 32, 64, 7, 3, 2},
    {"resnet18 layer1.x.conv1/2", 64, 32, 64, 3, 1, 1},
    {"resnet18 layer2.0.conv1", 64, 32, 128, 3, 1, 2},
    {"resnet18 layer2.0.downsample.0", 64, 32, 128, 1, 0, 2},
    {"resnet18 layer2.x.conv2", 128, 16, 128, 3, 1, 1},
    {"resnet18 layer3.0.conv1", 128, 16, 256, 3, 1, 2},
    {"resnet18 layer3.0.downsample.0", 128, 16, 256, 1, 0, 2},
    {"resnet18 layer3.x.conv2", 256, 8, 256, 3, 1, 1},
    {"resnet18 layer4.0.conv1", 256, 8, 512, 3, 1, 2},
    {"resnet18 layer4.0.downsample.0", 256, 8, 512, 1, 0, 2},
    {"resnet18 layer4.x.conv2", 512, 4, 512, 3, 1, 1},
    {"odd input, stride 2", 16, 15, 8, 3, 1, 2},
    {"1x1 stride 2 on 7x7", 32, 7, 64, 1, 0, 2},
};

static void test_conv_shapes(void)
{
    const int batches[] = {1, 32, 128};
    const char *dtype_name[] = {"fp32", "fp16", "bf16"};
    int checked = 0;
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
        const struct conv_case *k = &conv_cases[i];
        for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
            for (int dt = 0; dt < 3; dt++) {
                struct conv2d_shape cs = {.n = batches[b], .c = k->c, .h = k->h, .w = k->h,
                                          .k = k->k, .r = k->r, .s = k->r, .pad = k->pad,
                                          .stride = k->stride};
                CHECK(conv2d_shape_init(&cs) == 0, "%s: %s", k->layer, error_get());
                const int want = (k->h + 2 * k->pad - k->r) / k->stride + 1; /* PyTorch */
                int dims[4] = {0};
                const int rc = cuda_conv2d_output_dim(&cs, dt, dims);
                CHECK(rc == 0, "%s %s n=%d: %s", k->layer, dtype_name[dt], cs.n, error_get());
                CHECK(dims[0] == cs.n && dims[1] == cs.k && dims[2] == cs.p && dims[3] == cs.q &&
                          cs.p == want && cs.q == want,
                      "%s %s n=%d: cuDNN (%d,%d,%d,%d), trainer (%d,%d,%d,%d), PyTorch %dx%d",
                      k->layer, dtype_name[dt], cs.n, dims[0], dims[1], dims[2], dims[3], cs.n,
                      cs.k, cs.p, cs.q, want, want);
                checked++;
            }
    }
    printf("conv descriptors and output shapes: %d cases\n", checked);

    /* rejected before cuDNN: kernel larger than the padded input; unknown dtype */
    struct conv2d_shape bad = {.n = 1, .c = 1, .h = 4, .w = 4, .k = 1, .r = 7, .s = 7,
                               .pad = 1, .stride = 1};
    int dims[4];
    CHECK(cuda_conv2d_output_dim(&bad, 0, dims) == -1, "7x7 kernel on padded 6x6 accepted");
    CHECK(one_line(error_get()), "bad shape error: '%s'", error_get());
    struct conv2d_shape ok = {.n = 1, .c = 1, .h = 8, .w = 8, .k = 1, .r = 3, .s = 3,
                              .pad = 1, .stride = 1};
    CHECK(cuda_conv2d_output_dim(&ok, 3, dims) == -1, "dtype 3 accepted");
    /* a non-square input goes through the same descriptors */
    struct conv2d_shape rect = {.n = 2, .c = 3, .h = 10, .w = 6, .k = 4, .r = 3, .s = 3,
                                .pad = 0, .stride = 1};
    CHECK(cuda_conv2d_output_dim(&rect, 0, dims) == 0 && dims[2] == 8 && dims[3] == 4,
          "10x6 input, 3x3 kernel: got %dx%d (%s)", dims[2], dims[3], error_get());
}

static void test_pool_shapes(void)
{
    struct pool_case {
        const char *layer;
        int c, h, kernel, stride;
    } cases[] = {
        {"convnet layer1.3", 16, 28, 2, 2}, {"convnet layer2.3", 32, 14, 2, 2},
        {"odd input 7, k2 s2", 32, 7, 2, 2}, {"overlapping k3 s2", 64, 9, 3, 2},
        {"gaps k2 s3", 8, 8, 2, 3},          {"resnet18 avgpool window 4", 512, 4, 4, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pool2d_shape ps = {.n = 32, .c = cases[i].c, .h = cases[i].h, .w = cases[i].h,
                                  .kernel = cases[i].kernel, .stride = cases[i].stride};
        CHECK(pool2d_shape_init(&ps) == 0, "%s: %s", cases[i].layer, error_get());
        int dims[4] = {0};
        CHECK(cuda_pool2d_output_dim(&ps, dims) == 0, "%s: %s", cases[i].layer, error_get());
        CHECK(dims[0] == ps.n && dims[1] == ps.c && dims[2] == ps.p && dims[3] == ps.q,
              "%s: cuDNN (%d,%d,%d,%d), trainer (%d,%d,%d,%d)", cases[i].layer, dims[0], dims[1],
              dims[2], dims[3], ps.n, ps.c, ps.p, ps.q);
    }
    struct pool2d_shape bad = {.n = 1, .c = 1, .h = 4, .w = 4, .kernel = 0, .stride = 1};
    int dims[4];
    CHECK(cuda_pool2d_output_dim(&bad, dims) == -1, "kernel 0 accepted");
}

/* The candidate list of a convolution direction: a failure for want of memory keeps the
 * algorithm first in line for the next call (issue 11: it used to be dropped for good);
 * a cuDNN error drops it; the workspace limit and duplicates keep it out. */
static void test_conv_algos(void)
{
    struct conv_algos a = {0};
    const size_t limit = 1000;
    CHECK(conv_algos_add(&a, 7, 1, 900, limit) == 1 && conv_algos_add(&a, 3, 0, 0, limit) == 1 &&
              conv_algos_add(&a, 5, 1, 10, limit) == 1,
          "three candidates");
    CHECK(conv_algos_add(&a, 3, 1, 0, limit) == 0, "a duplicate algorithm was added");
    CHECK(conv_algos_add(&a, 9, 0, 1001, limit) == 0, "a workspace above the limit was added");
    CHECK(a.count == 3 && a.algo[0] == 7 && a.math[0] == 1 && a.ws[0] == 900, "order kept");

    /* a call where the best one's workspace allocation fails: the next live one runs */
    int i = conv_algos_next(&a, 0);
    CHECK(i == 0, "first live candidate %d", i);
    conv_algos_failed(&a, i, 1);
    i = conv_algos_next(&a, i + 1);
    CHECK(i == 1 && a.algo[i] == 3, "after a transient failure the call goes on with %d", i);
    /* the next call: the best one is first in line again */
    CHECK(conv_algos_next(&a, 0) == 0 && conv_algos_live(&a) == 3,
          "an algorithm that once lacked workspace memory is not tried again (live %d)",
          conv_algos_live(&a));

    /* a cuDNN error drops it for good */
    conv_algos_failed(&a, 0, 0);
    CHECK(conv_algos_next(&a, 0) == 1 && conv_algos_live(&a) == 2,
          "a refused algorithm stays in line");
    conv_algos_failed(&a, 2, 0);
    CHECK(conv_algos_next(&a, 2) == 3 && conv_algos_live(&a) == 1, "walk past the last");
    conv_algos_failed(&a, 1, 1); /* no memory for the last live one: still alive */
    CHECK(conv_algos_live(&a) == 1 && conv_algos_next(&a, 0) == 1, "the last one stays");
    conv_algos_failed(&a, 1, 0);
    CHECK(conv_algos_live(&a) == 0 && conv_algos_next(&a, 0) == a.count, "all dead");

    /* workspaces asked for only when a candidate is about to run (CONV_WS_UNKNOWN): listed
     * whatever the limit, then judged by conv_algos_sized */
    struct conv_algos lazy = {0};
    CHECK(conv_algos_add(&lazy, 1, 0, CONV_WS_UNKNOWN, limit) == 1 &&
              conv_algos_add(&lazy, 2, 0, CONV_WS_UNKNOWN, limit) == 1,
          "candidates of unknown workspace not listed");
    CHECK(conv_algos_sized(&lazy, 0, limit + 1, limit) == 0 && lazy.dead[0] &&
              conv_algos_next(&lazy, 0) == 1,
          "a candidate whose workspace turned out above the limit stays in line");
    CHECK(conv_algos_sized(&lazy, 1, 64, limit) == 1 && lazy.ws[1] == 64 &&
              conv_algos_live(&lazy) == 1,
          "a candidate within the limit is not kept with its workspace");
    CHECK(conv_algos_sized(&lazy, 5, 0, limit) == 0, "an index past the list was sized");

    struct conv_algos full = {0};
    for (int k = 0; k < CONV_MAX_CANDIDATES + 3; k++)
        conv_algos_add(&full, k, 0, 0, limit);
    CHECK(full.count == CONV_MAX_CANDIDATES, "list holds %d, at most %d", full.count,
          CONV_MAX_CANDIDATES);
}

/* every status of cuDNN 9 (cudnn_graph.h), its value and whether a candidate that fails with
 * it stays alive (transient: host or device memory ran out) */
#define CUDNN9_STATUSES(X)                                                                   \
    X(CUDNN_STATUS_SUCCESS, 0, 0)                                                            \
    X(CUDNN_STATUS_NOT_INITIALIZED, 1001, 0)                                                 \
    X(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH, 1002, 0)                                     \
    X(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH, 1003, 0)                                  \
    X(CUDNN_STATUS_DEPRECATED, 1004, 0)                                                      \
    X(CUDNN_STATUS_LICENSE_ERROR, 1005, 0)                                                   \
    X(CUDNN_STATUS_RUNTIME_IN_PROGRESS, 1006, 0)                                             \
    X(CUDNN_STATUS_RUNTIME_FP_OVERFLOW, 1007, 0)                                             \
    X(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED, 1008, 0)                                       \
    X(CUDNN_STATUS_BAD_PARAM, 2000, 0)                                                       \
    X(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, 2002, 0)                                          \
    X(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER, 2003, 0)                                    \
    X(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, 2004, 0)                                         \
    X(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND, 2005, 0)                                          \
    X(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, 2006, 0)                                     \
    X(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH, 2007, 0)                                       \
    X(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, 2008, 0)                                        \
    X(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, 2009, 0)                                    \
    X(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, 2010, 0)                                        \
    X(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH, 2011, 0)                                   \
    X(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, 2012, 0)                                       \
    X(CUDNN_STATUS_NOT_SUPPORTED, 3000, 0)                                                   \
    X(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, 3001, 0)                                     \
    X(CUDNN_STATUS_NOT_SUPPORTED_SHAPE, 3002, 0)                                             \
    X(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, 3003, 0)                                         \
    X(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, 3004, 0)                                            \
    X(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER, 3005, 0)                          \
    X(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART, 3006, 0)                               \
    X(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH, 3007, 0)                                     \
    X(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING, 3008, 0)                      \
    X(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE, 3009, 0)                            \
    X(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT, 3010, 0)                        \
    X(CUDNN_STATUS_NOT_SUPPORTED_PADDING, 3011, 0)                                           \
    X(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM, 3012, 0)                                  \
    X(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API, 3013, 0)                             \
    X(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE, 3014, 0)                             \
    X(CUDNN_STATUS_INTERNAL_ERROR, 4000, 0)                                                  \
    X(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED, 4001, 0)                               \
    X(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE, 4002, 0)                                 \
    X(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, 4003, 1)                           \
    X(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, 4004, 1)                         \
    X(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM, 4005, 0)                                 \
    X(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED, 4006, 0)                          \
    X(CUDNN_STATUS_EXECUTION_FAILED, 5000, 0)                                                \
    X(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER, 5001, 0)                                    \
    X(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS, 5002, 0)                                         \
    X(CUDNN_STATUS_EXECUTION_FAILED_CUDART, 5003, 0)                                         \
    X(CUDNN_STATUS_EXECUTION_FAILED_CURAND, 5004, 0)

/* conv_status_transient on every cuDNN 9 status (issue 21: only CUDNN_STATUS_ALLOC_FAILED —
 * the host allocation sub-code in cuDNN 9 — was transient, so a device allocation failure
 * killed the algorithm for the rest of the run); and a candidate failing with the device
 * one stays first in line */
static void test_conv_status(void)
{
    static const struct {
        int st, transient;
        const char *name;
    } rows[] = {
#define ROW(name, value, transient) {value, transient, #name},
        CUDNN9_STATUSES(ROW)
#undef ROW
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
        CHECK(conv_status_transient(rows[k].st) == rows[k].transient,
              "%s (%d) classified %s", rows[k].name, rows[k].st,
              rows[k].transient ? "permanent: the algorithm dies for good"
                                : "transient: a failing algorithm is retried forever");
#ifdef DDPPROF_TEST_CUDNN
    /* the table is the installed cuDNN's */
#define SAME(name, value, transient) \
    CHECK((int)(name) == (value), "%s is %d in cudnn_graph.h, %d here", #name, (int)(name), value);
    CUDNN9_STATUSES(SAME)
#undef SAME
    CHECK(conv_status_transient(CUDNN_STATUS_FULL_ERROR_CODE(
              CUDNN_STATUS_INTERNAL_ERROR, CUDNN_STATUS_SPECIFIC_ERROR(
                                               CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED))),
          "a composed device allocation failure is permanent");
#endif

    struct conv_algos a = {0};
    conv_algos_add(&a, 1, 0, 0, 0);
    conv_algos_add(&a, 2, 0, 0, 0);
    conv_algos_failed(&a, 0, conv_status_transient(4004)); /* DEVICE_ALLOCATION_FAILED */
    CHECK(conv_algos_next(&a, 0) == 0 && conv_algos_live(&a) == 2,
          "an algorithm cuDNN could not get device memory for was dropped");
    conv_algos_failed(&a, 0, conv_status_transient(3002)); /* NOT_SUPPORTED_SHAPE */
    CHECK(conv_algos_next(&a, 0) == 1 && conv_algos_live(&a) == 1,
          "an algorithm that does not support the shape stayed");
}

int main(void)
{
    if (!cuda_build_enabled())
        test_skip("this build has no CUDA (toolkit not found or -DDDPPROF_CUDA=OFF)");
    test_device_count();
    test_no_device_paths(cuda_device_count());
    test_versions();
    test_conv_shapes();
    test_pool_shapes();
    test_conv_algos();
    test_conv_status();
    return test_finish();
}
