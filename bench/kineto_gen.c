/* kineto_gen.c — the synthetic Kineto trace (see kineto_gen.h).  Every step has the same
 * shape; times advance 50 ms a step.  The CPU part of all steps is written first (in start
 * order), then the device part, as Kineto's ChromeTraceLogger does. */
#include "bench/kineto_gen.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KG_STEP_US 50000
#define KG_MODULES 60
#define KG_BWD_OPS 60
#define KG_BUCKETS 3
#define KG_OPT_KERNELS 20
#define KG_PID 4242
#define KG_AUTOGRAD 4249

struct kg {
    FILE *f;
    uint64_t bytes;
    long ext; /* External id */
};

static void kg_out(struct kg *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kg_out(struct kg *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(g->f, fmt, ap);
    va_end(ap);
    if (n > 0)
        g->bytes += (uint64_t)n;
}

/* a complete event; ts and dur in ns, written as µs with three decimals */
static void kg_x(struct kg *g, const char *cat, const char *name, int pid, int tid, long long ts,
                 long long dur, const char *args)
{
    kg_out(g,
           ",\n  {\n    \"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, "
           "\"tid\": %d,\n"
           "    \"ts\": %lld.%03lld, \"dur\": %lld.%03lld%s%s%s\n  }",
           cat, name, pid, tid, ts / 1000, ts % 1000, dur / 1000, dur % 1000,
           args ? ",\n    \"args\": {\n      " : "", args ? args : "", args ? "\n    }" : "");
}

static void kg_op(struct kg *g, const char *name, int tid, long long ts, long long dur,
                  const char *dims)
{
    char args[512];
    long e = g->ext++;
    if (dims)
        snprintf(args, sizeof args,
                 "\"External id\": %ld,\"Record function id\": 0, \"Sequence number\": %ld, "
                 "\"Fwd thread id\": 0, \"Input Dims\": %s, \"Input type\": [\"float\", "
                 "\"float\", \"float\"], \"Input Strides\": [[150528, 50176, 224, 1], [27, 9, 3, "
                 "1], [1]], \"Ev Idx\": %ld",
                 e, e, dims, e);
    else
        snprintf(args, sizeof args,
                 "\"External id\": %ld,\"Record function id\": 0, \"Ev Idx\": %ld", e, e);
    kg_x(g, "cpu_op", name, KG_PID, tid, ts, dur, args);
}

/* The CPU events of step k (start order), starting at t0 ns. */
static void kg_cpu(struct kg *g, long k, long long t0)
{
    char name[64];
    snprintf(name, sizeof name, "ProfilerStep#%ld", k + 1);
    kg_x(g, "user_annotation", name, KG_PID, KG_PID, t0, 48000000, NULL);
    kg_x(g, "user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
         KG_PID, KG_PID, t0 + 10000, 990000, NULL);
    kg_op(g, "aten::to", KG_PID, t0 + 900000, 50000, "[[64, 3, 224, 224], [], [], []]");
    kg_x(g, "user_annotation", "Optimizer.zero_grad#SGD.zero_grad", KG_PID, KG_PID,
         t0 + 1010000, 80000, NULL);
    kg_x(g, "user_annotation", "DistributedDataParallel.forward", KG_PID, KG_PID, t0 + 1100000,
         KG_MODULES * 200000 + 100000, NULL);
    long long t = t0 + 1150000;
    for (int m = 0; m < KG_MODULES; m++, t += 200000) { /* conv2d -> convolution -> ... */
        kg_op(g, "aten::conv2d", KG_PID, t, 150000, "[[64, 64, 56, 56], [64, 64, 3, 3], []]");
        kg_op(g, "aten::convolution", KG_PID, t + 5000, 140000,
              "[[64, 64, 56, 56], [64, 64, 3, 3], []]");
        kg_op(g, "aten::_convolution", KG_PID, t + 10000, 130000,
              "[[64, 64, 56, 56], [64, 64, 3, 3], []]");
        kg_op(g, "aten::cudnn_convolution", KG_PID, t + 15000, 100000,
              "[[64, 64, 56, 56], [64, 64, 3, 3], []]");
        kg_op(g, "aten::empty", KG_PID, t + 20000, 5000, NULL);
        kg_op(g, "aten::relu_", KG_PID, t + 160000, 30000, "[[64, 64, 56, 56]]");
    }
    t = t0 + 13500000; /* backward on the autograd thread */
    for (int o = 0; o < KG_BWD_OPS; o++, t += 300000) {
        kg_op(g, "autograd::engine::evaluate_function: ConvolutionBackward0", KG_AUTOGRAD, t,
              280000, NULL);
        kg_op(g, "ConvolutionBackward0", KG_AUTOGRAD, t + 5000, 260000, NULL);
        kg_op(g, "aten::convolution_backward", KG_AUTOGRAD, t + 10000, 240000,
              "[[64, 64, 56, 56], [64, 64, 56, 56], [64, 64, 3, 3]]");
        kg_op(g, "aten::empty_like", KG_AUTOGRAD, t + 15000, 5000, "[[64, 64, 56, 56]]");
        if (o % 20 == 19) { /* a bucket is ready: its all-reduce */
            char args[512];
            static const long nelems[KG_BUCKETS] = {262144, 6553600, 4194304};
            int b = o / 20;
            snprintf(args, sizeof args,
                     "\"External id\": %ld,\"Collective name\": \"allreduce\", \"In msg nelems\": "
                     "%ld, \"Out msg nelems\": %ld, \"Group size\": 1, \"dtype\": \"Float\", "
                     "\"Process Group Name\": \"0\", \"Rank\": 0",
                     g->ext++, nelems[b], nelems[b]);
            kg_x(g, "cpu_op", "record_param_comms", KG_PID, KG_AUTOGRAD, t + 285000, 12000, args);
            kg_op(g, "nccl:all_reduce", KG_AUTOGRAD, t + 288000, 8000, NULL);
        }
    }
    kg_x(g, "user_annotation", "Optimizer.step#SGD.step", KG_PID, KG_PID, t0 + 32000000,
         2000000, NULL);
    for (int o = 0; o < KG_OPT_KERNELS; o++)
        kg_op(g, "aten::_foreach_add_", KG_PID, t0 + 32010000 + o * 90000, 80000,
              "[[], [], []]");
}

/* one launched device activity: runtime event, kernel, and the flow between */
static void kg_launch(struct kg *g, long *corr, int tid, long long launch, long long start,
                      long long dur, const char *name, int stream, const char *extra)
{
    char args[640];
    long c = ++*corr;
    snprintf(args, sizeof args, "\"cbid\": 211, \"correlation\": %ld", c);
    kg_x(g, "cuda_runtime", "cudaLaunchKernel", KG_PID, tid, launch, 6000, args);
    kg_out(g, ",\n  {\n    \"ph\": \"s\", \"id\": %ld, \"pid\": %d, \"tid\": %d, "
              "\"ts\": %lld.%03lld,\n"
              "    \"cat\": \"ac2g\", \"name\": \"ac2g\"\n  }",
           c, KG_PID, tid, launch / 1000, launch % 1000);
    snprintf(args, sizeof args,
             "\"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": %d, \"correlation\": %ld, "
             "\"registers per thread\": 72, \"shared memory\": 49152, \"blocks per SM\": 2.4, "
             "\"warps per SM\": 9.7, \"grid\": [392, 1, 1], \"block\": [128, 1, 1], "
             "\"est. achieved occupancy %%\": 12%s",
             stream, c, extra ? extra : "");
    kg_x(g, "kernel", name, 0, stream, start, dur, args);
    kg_out(g, ",\n  {\n    \"ph\": \"f\", \"id\": %ld, \"pid\": 0, \"tid\": %d, "
              "\"ts\": %lld.%03lld,\n"
              "    \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }",
           c, stream, start / 1000, start % 1000);
}

/* The device activity (and runtime events) of step k. */
static void kg_gpu(struct kg *g, long k, long long t0)
{
    long corr = k * 1000;
    long long t = t0 + 1200000;
    for (int m = 0; m < KG_MODULES; m++, t += 200000)
        kg_launch(g, &corr, KG_PID, t + 20000, t + 40000, 170000,
                  "void cudnn::cnn::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, "
                  "false, false, true>(int, int, int, float const*, int, float*, float const*, "
                  "kernel_conv_params, unsigned long long, int, float, float, int, float const*, "
                  "float const*, bool, int, int)",
                  7, NULL);
    t = t0 + 13500000;
    for (int o = 0; o < KG_BWD_OPS; o++, t += 300000) {
        kg_launch(g, &corr, KG_AUTOGRAD, t + 20000, t + 30000, 130000,
                  "void cudnn::detail::dgrad_engine<float, 128, 6, 8, 3, 3, 5, false>(int, int, "
                  "int, float const*, int, float const*, int, float*, kernel_grad_params, "
                  "unsigned long long, int, unsigned long long, int, float, int, int, int)",
                  7, NULL);
        kg_launch(g, &corr, KG_AUTOGRAD, t + 25000, t + 160000, 130000,
                  "void cudnn::detail::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>"
                  "(int, int, int, float const*, int, float*, float const*, kernel_grad_params, "
                  "unsigned long long, int, float, int, int, int, int)",
                  7, NULL);
        if (o % 20 == 19)
            kg_launch(g, &corr, KG_AUTOGRAD, t + 290000, t + 300000, 4000000,
                      "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                      20, ", \"Collective name\": \"allreduce\", \"dtype\": \"Float\"");
    }
    for (int o = 0; o < KG_OPT_KERNELS; o++)
        kg_launch(g, &corr, KG_PID, t0 + 32020000 + o * 90000, t0 + 32100000 + o * 90000,
                  60000, "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<"
                         "at::native::(anonymous namespace)::TensorListMetadata<2>>",
                  7, NULL);
}

int kineto_gen(const char *path, uint64_t target_bytes, long *steps)
{
    struct kg g = {0};
    /* the size of one step, measured by writing it to /dev/null */
    g.f = fopen("/dev/null", "w");
    if (!g.f)
        return fprintf(stderr, "kineto-gen: /dev/null: %s\n", strerror(errno)), -1;
    kg_cpu(&g, 0, 0);
    kg_gpu(&g, 0, 0);
    fclose(g.f);
    long n = (long)(target_bytes / (g.bytes ? g.bytes : 1));
    if (n < 1)
        n = 1;
    memset(&g, 0, sizeof g);
    if (!(g.f = fopen(path, "w")))
        return fprintf(stderr, "kineto-gen: %s: %s\n", path, strerror(errno)), -1;
    static char buf[1 << 20];
    setvbuf(g.f, buf, _IOFBF, sizeof buf);
    const long long t0 = 5000000000000000LL; /* ns after baseTimeNanoseconds */
    kg_out(&g, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\n      \"id\": 0, "
               "\"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 84929216512,\n      "
               "\"computeMajor\": 9, \"computeMinor\": 0, \"numSms\": 132\n    }\n  ],\n"
               "  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 1},\n"
               "  \"record_shapes\": 1,\n  \"displayTimeUnit\": \"ms\",\n"
               "  \"baseTimeNanoseconds\": 1700000000000000000,\n  \"traceEvents\": [\n"
               "  {\n    \"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": %d, "
               "\"tid\": 0,\n    \"args\": {\n      \"name\": \"python\"\n    }\n  }",
           KG_PID);
    for (long k = 0; k < n; k++)
        kg_cpu(&g, k, t0 + k * (long long)KG_STEP_US * 1000);
    for (long k = 0; k < n; k++)
        kg_gpu(&g, k, t0 + k * (long long)KG_STEP_US * 1000);
    kg_out(&g, "\n  ],\n  \"traceName\": \"%s\"\n}\n", path);
    if (ferror(g.f) | (fclose(g.f) != 0))
        return fprintf(stderr, "kineto-gen: %s: write failed\n", path), -1;
    *steps = n;
    return 0;
}
