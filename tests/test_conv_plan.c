/* test_conv_plan.c — how the CUDA backend's convolution plans choose cuDNN algorithms
 * (trainer/cuda/conv_plan.c and conv_cache.c; issue 34 item 3: no cold start), on the
 * host, without a GPU.
 *
 * The module's own objects (trainer/CMakeLists.txt: ddpprof_conv_plan) are linked against
 * this file's definitions of cuDNN's handle calls -- the queries cudnnGet*Algorithm_v7,
 * cudnnGet*AlgorithmMaxCount, cudnnFind* and cudnnGet*WorkspaceSize, and the convolutions
 * -- which the linker takes before libcudnn's: a fake cuDNN that ranks a fixed list of
 * algorithms and counts every call, per shape, element type and direction.  Descriptors
 * are the real cuDNN's (they need no device), and so is cudnnGetVersion.  Each "process"
 * is a fork()ed child with plans of its own, sending its counts and its stderr back:
 *   - cold: one query per shape, type and direction, asking for cuDNN's first result
 *     only, and one workspace query; the second call of each asks nothing;
 *   - warm (a second process, the same cache file): no query of any kind, the same
 *     algorithms run, with the cached workspace;
 *   - a corrupt or foreign cache file: one warning line, cold counts, the file rewritten
 *     (the next process is warm); DDPPROF_CUDNN_CACHE=off: every process cold;
 *   - fallbacks: a first result that is not deterministic (or, for strict fp32, one that
 *     transforms the data) brings cuDNN's whole ranking, whose choice is the one made
 *     before issue 34; a choice that fails when run falls back, from the heuristics' first
 *     or from a stale cache line, and the cache learns the one that ran;
 *   - keys: --tf32 on and off, another GPU, cudnnFind's choices are cached apart; the math
 *     types of --tf32 are PyTorch's, when cuDNN ranks and when the convolution runs;
 *   - the file: where it lives (DDPPROF_CUDNN_CACHE, XDG_CACHE_HOME, HOME, off); what it
 *     refuses with one warning (another format, a cut-short line, a key not written as
 *     written, too many lines); bounded at CONV_CACHE_MAX_ENTRIES, the oldest dropped; two
 *     processes writing at once lose neither's lines. */
#include "backend/backend.h"
#include "common/error.h"
#include "cuda/backend_cuda.h"
#include "cuda/conv_cache.h"
#include "cuda/conv_plan.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------ the fake cuDNN */

#define FAKE_HANDLE ((cudnnHandle_t)(uintptr_t)0x5eed)
#define FAKE_KEYS 64
#define NDIR 3

/* what a process asked of cuDNN (one struct: it travels through a pipe) */
struct fake_counts {
    int v7[NDIR];        /* cudnnGet*Algorithm_v7 calls */
    int v7_first[NDIR];  /* ... of them asking for 1 result */
    int max_count[NDIR]; /* cudnnGet*AlgorithmMaxCount */
    int find[NDIR];      /* cudnnFind* */
    int ws[NDIR];        /* cudnnGet*WorkspaceSize */
    int runs[NDIR];      /* convolutions run (successful or not) */
    int bad_ws_runs;     /* run with less workspace than the algorithm needs */
    int plan_errors;     /* conv_plans_run failures */
    int nkeys;           /* distinct (direction, type, shape) queried or run */
    char key[FAKE_KEYS][64];
    int key_queries[FAKE_KEYS]; /* v7 + find calls per key */
    int key_algo[FAKE_KEYS];    /* the algorithm that last ran successfully, -1 none */
    unsigned query_math[3];     /* per dtype: bit m set when cuDNN ranked under math m */
    unsigned run_math[3];       /* per dtype: bit m set when a convolution ran with math m */
};
static struct fake_counts fc;

/* how the fake behaves, set by the parent before it forks */
static struct {
    int nondet_first_dir; /* this direction's first result is not deterministic (-1: none) */
    int transform_first;  /* the forward ranking starts with WINOGRAD_NONFUSED */
    int fail_dir, fail_algo; /* runs of this algorithm in this direction fail (-1: none) */
} cfg = {-1, 0, -1, -1};

/* the workspace the fake says algorithm a needs */
static size_t fake_ws(int a) { return (size_t)4096 * (size_t)(a + 1); }

static int fake_dtype(cudnnDataType_t t)
{
    return t == CUDNN_DATA_HALF ? DT_F16 : t == CUDNN_DATA_BFLOAT16 ? DT_BF16 : DT_F32;
}

/* the key of a call: direction, element type, x's shape and the filter's (k, r) */
static int fake_key(int dir, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w)
{
    cudnnDataType_t t, wt;
    cudnnTensorFormat_t fmt;
    int n, c, h, wd, ns, cs, hs, ws, k, fc_, r, s;
    if (cudnnGetTensor4dDescriptor(x, &t, &n, &c, &h, &wd, &ns, &cs, &hs, &ws) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnGetFilter4dDescriptor(w, &wt, &fmt, &k, &fc_, &r, &s) != CUDNN_STATUS_SUCCESS)
        return -1;
    char key[64];
    snprintf(key, sizeof key, "%d:%d:%d,%d,%d,%d:%d,%d", dir, fake_dtype(t), n, c, h, wd, k, r);
    for (int i = 0; i < fc.nkeys; i++)
        if (strcmp(fc.key[i], key) == 0)
            return i;
    if (fc.nkeys == FAKE_KEYS)
        return -1;
    snprintf(fc.key[fc.nkeys], sizeof fc.key[0], "%s", key);
    fc.key_algo[fc.nkeys] = -1;
    return fc.nkeys++;
}

static int fake_dtype_of(cudnnTensorDescriptor_t x)
{
    cudnnDataType_t t;
    int n, c, h, w, ns, cs, hs, ws;
    cudnnGetTensor4dDescriptor(x, &t, &n, &c, &h, &w, &ns, &cs, &hs, &ws);
    return fake_dtype(t);
}

struct fake_perf {
    int algo;
    cudnnDeterminism_t det;
};

/* The fake's ranking of a direction, best first, with cuDNN's algorithm numbers:
 * forward 1 IMPLICIT_PRECOMP_GEMM, 0 IMPLICIT_GEMM, 5 FFT_TILING (7 WINOGRAD_NONFUSED first
 * with transform_first); backward data 1 ALGO_1, 0 ALGO_0 (not deterministic), 5
 * WINOGRAD_NONFUSED; backward filter 1 ALGO_1, 0 ALGO_0, 3 ALGO_3 (neither deterministic),
 * or with nondet_first_dir 3, 0, 1. */
static int fake_rank(int dir, struct fake_perf *out)
{
    static const struct fake_perf fwd[] = {{1, CUDNN_DETERMINISTIC}, {0, CUDNN_DETERMINISTIC},
                                           {5, CUDNN_DETERMINISTIC}};
    static const struct fake_perf fwd_t[] = {{7, CUDNN_DETERMINISTIC}, {1, CUDNN_DETERMINISTIC},
                                             {0, CUDNN_DETERMINISTIC}};
    static const struct fake_perf data[] = {{1, CUDNN_DETERMINISTIC},
                                            {0, CUDNN_NON_DETERMINISTIC},
                                            {5, CUDNN_DETERMINISTIC}};
    static const struct fake_perf filt[] = {{1, CUDNN_DETERMINISTIC},
                                            {0, CUDNN_NON_DETERMINISTIC},
                                            {3, CUDNN_NON_DETERMINISTIC}};
    static const struct fake_perf nondet[] = {{3, CUDNN_NON_DETERMINISTIC},
                                              {0, CUDNN_NON_DETERMINISTIC},
                                              {1, CUDNN_DETERMINISTIC}};
    const struct fake_perf *list = dir == 0 ? (cfg.transform_first ? fwd_t : fwd)
                                   : dir == 1 ? data
                                              : filt;
    if (dir == cfg.nondet_first_dir)
        list = nondet;
    memcpy(out, list, 3 * sizeof *out);
    return 3;
}

/* what cuDNN reports as a result's math type under the descriptor's math: fp32 under
 * DEFAULT_MATH gets TF32 tensor-core kernels (reported TENSOR_OP), under FMA_MATH FMA */
static cudnnMathType_t fake_reported_math(cudnnConvolutionDescriptor_t conv)
{
    cudnnMathType_t m = CUDNN_DEFAULT_MATH;
    cudnnGetConvolutionMathType(conv, &m);
    return m == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

/* one ranking query of direction dir: counted, filled as perf structs of any direction */
#define FAKE_QUERY(dirn, is_find, xdesc, wdesc, requested, returned, perf)                  \
    do {                                                                                     \
        const int key_ = fake_key((dirn), (xdesc), (wdesc));                                 \
        if (key_ >= 0)                                                                       \
            fc.key_queries[key_]++;                                                          \
        if (is_find)                                                                         \
            fc.find[(dirn)]++;                                                               \
        else {                                                                               \
            fc.v7[(dirn)]++;                                                                 \
            fc.v7_first[(dirn)] += (requested) == 1;                                         \
        }                                                                                    \
        fc.query_math[fake_dtype_of(xdesc)] |= 1u << fake_math_now;                          \
        struct fake_perf r_[3];                                                              \
        int n_ = fake_rank((dirn), r_);                                                      \
        if (n_ > (requested))                                                                \
            n_ = (requested);                                                                \
        for (int i_ = 0; i_ < n_; i_++) {                                                    \
            memset(&(perf)[i_], 0, sizeof (perf)[i_]);                                       \
            (perf)[i_].algo = r_[i_].algo;                                                   \
            (perf)[i_].status = CUDNN_STATUS_SUCCESS;                                        \
            (perf)[i_].determinism = r_[i_].det;                                             \
            (perf)[i_].mathType = fake_math_rep;                                             \
            (perf)[i_].memory = fake_ws(r_[i_].algo);                                        \
        }                                                                                    \
        *(returned) = n_;                                                                    \
    } while (0)

static cudnnMathType_t fake_math_now, fake_math_rep;

static void fake_math_of(cudnnConvolutionDescriptor_t conv)
{
    fake_math_now = CUDNN_DEFAULT_MATH;
    cudnnGetConvolutionMathType(conv, &fake_math_now);
    fake_math_rep = fake_reported_math(conv);
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t h, int *count)
{
    (void)h;
    fc.max_count[0]++;
    *count = 8;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t h, int *count)
{
    (void)h;
    fc.max_count[1]++;
    *count = 6;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t h, int *count)
{
    (void)h;
    fc.max_count[2]++;
    *count = 7;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, const int req,
    int *got, cudnnConvolutionFwdAlgoPerf_t *perf)
{
    (void)h, (void)y;
    fake_math_of(conv);
    FAKE_QUERY(0, 0, x, w, req, got, perf);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, const int req,
    int *got, cudnnConvolutionFwdAlgoPerf_t *perf)
{
    (void)h, (void)y;
    fake_math_of(conv);
    FAKE_QUERY(0, 1, x, w, req, got, perf);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, const int req,
    int *got, cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    (void)h, (void)dy;
    fake_math_of(conv);
    FAKE_QUERY(1, 0, dx, w, req, got, perf);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, const int req,
    int *got, cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    (void)h, (void)dy;
    fake_math_of(conv);
    FAKE_QUERY(1, 1, dx, w, req, got, perf);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw, const int req,
    int *got, cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    (void)h, (void)dy;
    fake_math_of(conv);
    FAKE_QUERY(2, 0, x, dw, req, got, perf);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw, const int req,
    int *got, cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    (void)h, (void)dy;
    fake_math_of(conv);
    FAKE_QUERY(2, 1, x, dw, req, got, perf);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y,
    cudnnConvolutionFwdAlgo_t algo, size_t *bytes)
{
    (void)h, (void)x, (void)w, (void)conv, (void)y;
    fc.ws[0]++;
    *bytes = fake_ws((int)algo);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx,
    cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes)
{
    (void)h, (void)w, (void)dy, (void)conv, (void)dx;
    fc.ws[1]++;
    *bytes = fake_ws((int)algo);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes)
{
    (void)h, (void)x, (void)dy, (void)conv, (void)dw;
    fc.ws[2]++;
    *bytes = fake_ws((int)algo);
    return CUDNN_STATUS_SUCCESS;
}

/* one convolution: counted; it fails as cfg says, or for want of workspace */
static cudnnStatus_t fake_run(int dir, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                              cudnnConvolutionDescriptor_t conv, int algo, void *ws,
                              size_t ws_bytes)
{
    fc.runs[dir]++;
    cudnnMathType_t m = CUDNN_DEFAULT_MATH;
    cudnnGetConvolutionMathType(conv, &m);
    fc.run_math[fake_dtype_of(x)] |= 1u << m;
    if (ws_bytes < fake_ws(algo) || !ws) {
        fc.bad_ws_runs++;
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (dir == cfg.fail_dir && algo == cfg.fail_algo)
        return CUDNN_STATUS_NOT_SUPPORTED;
    const int key = fake_key(dir, x, w);
    if (key >= 0)
        fc.key_algo[key] = algo;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha,
                                      const cudnnTensorDescriptor_t xd, const void *x,
                                      const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t conv,
                                      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes,
                                      const void *beta, const cudnnTensorDescriptor_t yd,
                                      void *y)
{
    (void)h, (void)alpha, (void)x, (void)w, (void)beta, (void)yd, (void)y;
    return fake_run(0, xd, wd, conv, (int)algo, ws, ws_bytes);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
                                           const cudnnFilterDescriptor_t wd, const void *w,
                                           const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const cudnnConvolutionDescriptor_t conv,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws,
                                           size_t ws_bytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxd, void *dx)
{
    (void)h, (void)alpha, (void)w, (void)dyd, (void)dy, (void)beta, (void)dx;
    return fake_run(1, dxd, wd, conv, (int)algo, ws, ws_bytes);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha,
                                             const cudnnTensorDescriptor_t xd, const void *x,
                                             const cudnnTensorDescriptor_t dyd, const void *dy,
                                             const cudnnConvolutionDescriptor_t conv,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws,
                                             size_t ws_bytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwd, void *dw)
{
    (void)h, (void)alpha, (void)x, (void)dyd, (void)dy, (void)beta, (void)dw;
    return fake_run(2, xd, dwd, conv, (int)algo, ws, ws_bytes);
}

/* the CUDA backend's workspace (backend_cuda.c), in host memory */
int cuda_buffer_reserve(struct cuda_buffer *b, cudaStream_t stream, int device, size_t bytes)
{
    (void)stream, (void)device;
    if (bytes == 0 || (bytes <= b->bytes && b->ptr))
        return 0;
    free(b->ptr);
    b->ptr = malloc(bytes);
    b->bytes = b->ptr ? bytes : 0;
    return b->ptr ? 0 : error_set("fake workspace: out of memory");
}

void cuda_buffer_free(struct cuda_buffer *b)
{
    free(b->ptr);
    b->ptr = NULL;
    b->bytes = 0;
}

/* ------------------------------------------------------------------ processes */

/* The convolutions of a training step: the ConvNet's two layers and a ResNet18 3x3 layer,
 * batch 32 */
static const struct conv2d_shape shapes[] = {
    {.n = 32, .c = 1, .h = 28, .w = 28, .k = 16, .r = 5, .s = 5, .pad = 2, .stride = 1},
    {.n = 32, .c = 16, .h = 14, .w = 14, .k = 32, .r = 5, .s = 5, .pad = 2, .stride = 1},
    {.n = 32, .c = 64, .h = 8, .w = 8, .k = 64, .r = 3, .s = 3, .pad = 1, .stride = 1},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

struct job {
    const char *cache; /* NULL: no cache */
    const char *gpu;
    int tf32, find;
    int fp16;          /* also fp16 (else fp32 only) */
};

#define GPU_A "NVIDIA H200|GPU-00000000-1111-2222-3333-444444444444|9.0"
#define GPU_B "NVIDIA A100-SXM4-80GB|GPU-99999999-1111-2222-3333-444444444444|8.0"

/* every shape and type of j in every direction, twice (a second step), in one set of
 * plans; the counts into fc */
static void job_run(const struct job *j)
{
    memset(&fc, 0, sizeof fc);
    struct conv_plans_opts o = {.find_algos = j->find, .tf32 = j->tf32, .cache_path = j->cache,
                                .gpu = j->gpu};
    struct conv_plans *p = conv_plans_create(FAKE_HANDLE, NULL, 0, &o);
    if (!p) {
        fprintf(stderr, "conv_plans_create: %s\n", error_get());
        fc.plan_errors++;
        return;
    }
    static float data[4]; /* the fake reads no tensor */
    for (int step = 0; step < 2; step++)
        for (int t = 0; t < (j->fp16 ? 2 : 1); t++)
            for (int i = 0; i < NSHAPES; i++) {
                struct conv2d_shape cs = shapes[i];
                conv2d_shape_init(&cs);
                for (int dir = 0; dir < NDIR; dir++)
                    if (conv_plans_run(p, &cs, t ? DT_F16 : DT_F32, LAYOUT_NCHW,
                                       (enum conv_dir)dir, data, data, data, data)) {
                        fprintf(stderr, "conv_plans_run: %s\n", error_get());
                        fc.plan_errors++;
                    }
            }
    conv_plans_free(p);
}

struct proc {
    struct fake_counts c;
    int exited_ok;
    char err[16384]; /* its stderr */
    int err_lines;
};

static char *tmp;

/* fn(arg) in a child process with its stderr to a file; fc and that stderr come back */
static void in_child(void (*fn)(const void *), const void *arg, struct proc *pr)
{
    memset(pr, 0, sizeof *pr);
    char *errf = test_path(tmp, "stderr.txt");
    int fds[2];
    if (pipe(fds)) {
        CHECK(0, "pipe: %s", strerror(errno));
        free(errf);
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(3);
        close(fd);
        fn(arg);
        fflush(stderr);
        const char *p = (const char *)&fc;
        size_t left = sizeof fc;
        while (left) {
            ssize_t n = write(fds[1], p, left);
            if (n <= 0)
                _exit(4);
            p += n;
            left -= (size_t)n;
        }
        _exit(0);
    }
    close(fds[1]);
    char *p = (char *)&pr->c;
    size_t got = 0;
    while (got < sizeof pr->c) {
        ssize_t n = read(fds[0], p + got, sizeof pr->c - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    pr->exited_ok = got == sizeof pr->c && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    CHECK(pr->exited_ok, "the child process failed (status 0x%x, %zu of %zu bytes)", status,
          got, sizeof pr->c);
    char *text = test_read_file(tmp, "stderr.txt");
    CHECK(!text || strlen(text) < sizeof pr->err, "a child's stderr (%zu bytes) does not fit",
          strlen(text));
    snprintf(pr->err, sizeof pr->err, "%s", text ? text : "");
    for (const char *s = pr->err; *s; s++)
        pr->err_lines += *s == '\n';
    free(text);
    free(errf);
}

static void job_fn(const void *arg) { job_run(arg); }

static void process(const struct job *j, struct proc *pr) { in_child(job_fn, j, pr); }

static int sum3(const int *v) { return v[0] + v[1] + v[2]; }

/* every key of pr queried exactly `each` times */
static int queried_each(const struct proc *pr, int each)
{
    for (int i = 0; i < pr->c.nkeys; i++)
        if (pr->c.key_queries[i] != each)
            return 0;
    return pr->c.nkeys > 0;
}

/* the algorithm that ran for the key of (dir, dtype, shape i), -1 when none */
static int algo_of(const struct proc *pr, int dir, enum dtype dt, int i)
{
    char key[64];
    snprintf(key, sizeof key, "%d:%d:%d,%d,%d,%d:%d,%d", dir, (int)dt, shapes[i].n, shapes[i].c,
             shapes[i].h, shapes[i].w, shapes[i].k, shapes[i].r);
    for (int k = 0; k < pr->c.nkeys; k++)
        if (strcmp(pr->c.key[k], key) == 0)
            return pr->c.key_algo[k];
    return -1;
}

/* the data lines of the cache file at path (-1 when unreadable) */
static int cache_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n - 2;
}

/* ------------------------------------------------------------------ the tests */

static void test_cold_warm(void)
{
    char *cache = test_path(tmp, "cache/ddpprof/cudnn-algos.tsv"); /* folders made on write */
    const struct job j = {.cache = cache, .gpu = GPU_A, .fp16 = 1};
    const int keys = NSHAPES * 2 * NDIR;
    struct proc cold, warm, bad, again, off1, off2;

    process(&j, &cold);
    CHECK(cold.c.plan_errors == 0, "cold: %d plan errors: %s", cold.c.plan_errors, cold.err);
    CHECK(cold.c.nkeys == keys && queried_each(&cold, 1),
          "cold: one query per shape, type and direction: %d keys (want %d)", cold.c.nkeys, keys);
    CHECK(sum3(cold.c.v7) == keys && sum3(cold.c.v7_first) == keys && sum3(cold.c.max_count) == 0 &&
              sum3(cold.c.find) == 0,
          "cold: %d v7 queries, %d of them for the first result only, %d max-count, %d find "
          "(want %d, %d, 0, 0)",
          sum3(cold.c.v7), sum3(cold.c.v7_first), sum3(cold.c.max_count), sum3(cold.c.find), keys,
          keys);
    CHECK(sum3(cold.c.ws) == keys, "cold: %d workspace queries, want one per choice (%d)",
          sum3(cold.c.ws), keys);
    CHECK(sum3(cold.c.runs) == 2 * keys && cold.c.bad_ws_runs == 0,
          "cold: %d runs (want %d), %d short of workspace", sum3(cold.c.runs), 2 * keys,
          cold.c.bad_ws_runs);
    CHECK(cold.err_lines == 0, "cold: stderr '%s'", cold.err);
    CHECK(cache_lines(cache) == keys, "cold: the cache holds %d lines, want %d",
          cache_lines(cache), keys);
    CHECK(algo_of(&cold, 0, DT_F32, 0) == 1 && algo_of(&cold, 2, DT_F16, 1) == 1,
          "cold: the heuristics' first ran (fwd fp32 %d, bwd filter fp16 %d)",
          algo_of(&cold, 0, DT_F32, 0), algo_of(&cold, 2, DT_F16, 1));

    process(&j, &warm);
    CHECK(warm.c.plan_errors == 0, "warm: %d plan errors: %s", warm.c.plan_errors, warm.err);
    CHECK(sum3(warm.c.v7) == 0 && sum3(warm.c.max_count) == 0 && sum3(warm.c.find) == 0 &&
              sum3(warm.c.ws) == 0,
          "warm: cuDNN was asked: %d v7, %d max-count, %d find, %d workspace (want none)",
          sum3(warm.c.v7), sum3(warm.c.max_count), sum3(warm.c.find), sum3(warm.c.ws));
    CHECK(sum3(warm.c.runs) == 2 * keys && warm.c.bad_ws_runs == 0,
          "warm: %d runs, %d short of the cached workspace", sum3(warm.c.runs),
          warm.c.bad_ws_runs);
    int same = warm.c.nkeys == cold.c.nkeys;
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < NSHAPES; i++)
            for (int d = 0; d < NDIR; d++)
                same &= algo_of(&warm, d, t ? DT_F16 : DT_F32, i) ==
                        algo_of(&cold, d, t ? DT_F16 : DT_F32, i);
    CHECK(same, "warm: not the cold run's algorithms");
    CHECK(warm.err_lines == 0, "warm: stderr '%s'", warm.err);

    /* a corrupt file: one warning, chosen again, rewritten whole */
    FILE *f = fopen(cache, "w");
    CHECK(f != NULL, "rewrite %s", cache);
    if (f) {
        fputs("this is not a cache\n\x01\x02 binary \n", f);
        fclose(f);
    }
    process(&j, &bad);
    printf("a corrupt cache file: %s", bad.err);
    CHECK(bad.err_lines == 1 && strstr(bad.err, cache) && strstr(bad.err, "ignored"),
          "corrupt: want one warning line naming the file: '%s'", bad.err);
    CHECK(sum3(bad.c.v7) == keys && queried_each(&bad, 1) && bad.c.plan_errors == 0,
          "corrupt: %d queries, want %d (one each)", sum3(bad.c.v7), keys);
    CHECK(cache_lines(cache) == keys, "corrupt: rewritten with %d lines, want %d",
          cache_lines(cache), keys);
    process(&j, &again);
    CHECK(sum3(again.c.v7) == 0 && sum3(again.c.ws) == 0 && again.err_lines == 0,
          "after the rewrite: %d queries, stderr '%s'", sum3(again.c.v7), again.err);

    /* DDPPROF_CUDNN_LOG=1: one line per choice, saying where it came from (scripts/gpu-check
     * counts them: cudnn_choices) */
    setenv("DDPPROF_CUDNN_LOG", "1", 1);
    struct proc logged;
    process(&j, &logged);
    const char *first_line = logged.err;
    int from_cache = 0;
    for (const char *s = logged.err; (s = strstr(s, "(candidate 1 of 1, from the cache ")); s++)
        from_cache++;
    CHECK(logged.err_lines == keys && from_cache == keys &&
              strncmp(first_line, "ddpprof: cuDNN conv forward fp32 x (32,1,28,28) w (16,1,5,5) "
                                  "pad 2 stride 1: algorithm 1, math FMA, workspace 8192 bytes "
                                  "(candidate 1 of 1, from the cache ", 150) == 0,
          "DDPPROF_CUDNN_LOG, warm: %d lines, %d from the cache (want %d): %.300s",
          logged.err_lines, from_cache, keys, logged.err);
    const struct job nolog_cache = {.cache = NULL, .gpu = GPU_A};
    process(&nolog_cache, &logged);
    CHECK(logged.err_lines == NSHAPES * NDIR &&
              strstr(logged.err, "(candidate 1 of 1, from cuDNN's heuristics' first); chosen in "),
          "DDPPROF_CUDNN_LOG, cold: %d lines (want %d): %.300s", logged.err_lines, NSHAPES * NDIR,
          logged.err);
    unsetenv("DDPPROF_CUDNN_LOG");

    /* no cache: every process chooses */
    const struct job none = {.cache = NULL, .gpu = GPU_A, .fp16 = 1};
    process(&none, &off1);
    process(&none, &off2);
    CHECK(sum3(off1.c.v7) == keys && sum3(off2.c.v7) == keys && off2.err_lines == 0,
          "no cache: %d then %d queries, want %d each", sum3(off1.c.v7), sum3(off2.c.v7), keys);
    free(cache);
}

static void test_fallbacks(void)
{
    struct proc p;

    /* a first result that is not deterministic: the whole ranking, deterministic first */
    cfg.nondet_first_dir = 2;
    const struct job nocache = {.gpu = GPU_A};
    process(&nocache, &p);
    CHECK(p.c.v7[2] == 2 * NSHAPES && p.c.max_count[2] == NSHAPES && p.c.v7[0] == NSHAPES &&
              p.c.max_count[0] == 0,
          "non-deterministic first: backward filter %d v7 + %d max-count (want %d + %d), "
          "forward %d v7 + %d max-count",
          p.c.v7[2], p.c.max_count[2], 2 * NSHAPES, NSHAPES, p.c.v7[0], p.c.max_count[0]);
    CHECK(algo_of(&p, 2, DT_F32, 0) == 1, "non-deterministic first: ALGO_%d ran, want ALGO_1",
          algo_of(&p, 2, DT_F32, 0));
    cfg.nondet_first_dir = -1;

    /* strict fp32 takes no transform algorithm (whole ranking); TF32 allowed, it does */
    cfg.transform_first = 1;
    process(&nocache, &p);
    CHECK(p.c.v7[0] == 2 * NSHAPES && algo_of(&p, 0, DT_F32, 1) == 1,
          "strict fp32, WINOGRAD_NONFUSED first: %d v7 (want %d), algorithm %d ran (want 1)",
          p.c.v7[0], 2 * NSHAPES, algo_of(&p, 0, DT_F32, 1));
    const struct job tf32 = {.gpu = GPU_A, .tf32 = 1};
    process(&tf32, &p);
    CHECK(p.c.v7[0] == NSHAPES && algo_of(&p, 0, DT_F32, 1) == 7,
          "tf32, WINOGRAD_NONFUSED first: %d v7 (want %d), algorithm %d ran (want 7)",
          p.c.v7[0], NSHAPES, algo_of(&p, 0, DT_F32, 1));
    cfg.transform_first = 0;

    /* the first result fails when run: the ranking's next; the cache learns it */
    char *cache = test_path(tmp, "fallback.tsv");
    const struct job j = {.cache = cache, .gpu = GPU_A};
    cfg.fail_dir = 0, cfg.fail_algo = 1;
    process(&j, &p);
    CHECK(p.c.plan_errors == 0 && algo_of(&p, 0, DT_F32, 0) == 0 && p.c.v7[0] == 2 * NSHAPES &&
              p.c.max_count[0] == NSHAPES,
          "first result fails: algorithm %d ran (want 0) after %d v7 + %d max-count (want %d + "
          "%d); %s",
          algo_of(&p, 0, DT_F32, 0), p.c.v7[0], p.c.max_count[0], 2 * NSHAPES, NSHAPES, p.err);
    process(&j, &p);
    CHECK(sum3(p.c.v7) == 0 && algo_of(&p, 0, DT_F32, 0) == 0 && p.c.runs[0] == 2 * NSHAPES,
          "warm after a fallback: %d queries, algorithm %d, %d forward runs (the failing one "
          "not tried again)",
          sum3(p.c.v7), algo_of(&p, 0, DT_F32, 0), p.c.runs[0]);
    cfg.fail_dir = cfg.fail_algo = -1;

    /* a stale line: the cached choice fails; the heuristics' first (1) runs and is cached */
    char *stale = test_path(tmp, "stale.tsv");
    const struct job js = {.cache = stale, .gpu = GPU_A};
    cfg.fail_dir = 0, cfg.fail_algo = 1; /* the first process learns algorithm 0 ... */
    process(&js, &p);
    cfg.fail_algo = 0;                   /* ... which then fails: its lines are stale */
    process(&js, &p);
    CHECK(p.c.plan_errors == 0 && algo_of(&p, 0, DT_F32, 0) == 1 && p.c.v7[0] == NSHAPES &&
              p.c.v7_first[0] == NSHAPES && sum3(p.c.v7) == NSHAPES,
          "stale line: algorithm %d ran (want 1) after %d forward queries (want %d first-only), "
          "%d in all; %s",
          algo_of(&p, 0, DT_F32, 0), p.c.v7[0], NSHAPES, sum3(p.c.v7), p.err);
    process(&js, &p);
    CHECK(sum3(p.c.v7) == 0 && algo_of(&p, 0, DT_F32, 0) == 1,
          "after a stale line: %d queries, algorithm %d (want 0, 1)", sum3(p.c.v7),
          algo_of(&p, 0, DT_F32, 0));
    cfg.fail_dir = cfg.fail_algo = -1;
    free(stale);
    free(cache);
}

static void test_keys_and_math(void)
{
    char *cache = test_path(tmp, "keys.tsv");
    const int per_type = NSHAPES * NDIR;
    struct proc p;
    const struct job strict = {.cache = cache, .gpu = GPU_A, .fp16 = 1};
    process(&strict, &p);
    CHECK(p.c.query_math[DT_F32] == 1u << CUDNN_FMA_MATH &&
              p.c.run_math[DT_F32] == 1u << CUDNN_FMA_MATH,
          "strict fp32: ranked under math 0x%x, ran 0x%x (want FMA only)", p.c.query_math[DT_F32],
          p.c.run_math[DT_F32]);
    CHECK(p.c.query_math[DT_F16] == 1u << CUDNN_TENSOR_OP_MATH &&
              p.c.run_math[DT_F16] == 1u << CUDNN_TENSOR_OP_MATH,
          "fp16: ranked under math 0x%x, ran 0x%x (want TENSOR_OP only)", p.c.query_math[DT_F16],
          p.c.run_math[DT_F16]);

    /* --tf32 on: fp32 chosen again under PyTorch's DEFAULT_MATH, fp16 from the cache */
    const struct job tf32 = {.cache = cache, .gpu = GPU_A, .tf32 = 1, .fp16 = 1};
    process(&tf32, &p);
    CHECK(sum3(p.c.v7) == per_type && p.c.query_math[DT_F32] == 1u << CUDNN_DEFAULT_MATH &&
              p.c.run_math[DT_F32] == 1u << CUDNN_TENSOR_OP_MATH,
          "tf32: %d queries (want %d: fp32 only), ranked under 0x%x (want DEFAULT), ran 0x%x "
          "(want the reported TENSOR_OP)",
          sum3(p.c.v7), per_type, p.c.query_math[DT_F32], p.c.run_math[DT_F32]);
    process(&tf32, &p);
    CHECK(sum3(p.c.v7) == 0 && p.c.run_math[DT_F32] == 1u << CUDNN_TENSOR_OP_MATH,
          "tf32 warm: %d queries, ran math 0x%x", sum3(p.c.v7), p.c.run_math[DT_F32]);
    process(&strict, &p);
    CHECK(sum3(p.c.v7) == 0 && p.c.run_math[DT_F32] == 1u << CUDNN_FMA_MATH,
          "strict again: %d queries (its lines stayed), ran math 0x%x", sum3(p.c.v7),
          p.c.run_math[DT_F32]);

    /* another GPU, and cudnnFind's choices: their own lines */
    const struct job other = {.cache = cache, .gpu = GPU_B};
    process(&other, &p);
    CHECK(sum3(p.c.v7) == per_type, "another GPU: %d queries, want %d", sum3(p.c.v7), per_type);
    const struct job find = {.cache = cache, .gpu = GPU_A, .find = 1};
    process(&find, &p);
    CHECK(sum3(p.c.find) == per_type && sum3(p.c.v7) == 0 && sum3(p.c.max_count) == per_type,
          "find: %d cudnnFind (want %d), %d v7", sum3(p.c.find), per_type, sum3(p.c.v7));
    process(&find, &p);
    CHECK(sum3(p.c.find) == 0 && sum3(p.c.v7) == 0 && sum3(p.c.ws) == 0,
          "find warm: %d cudnnFind, %d v7, %d workspace", sum3(p.c.find), sum3(p.c.v7),
          sum3(p.c.ws));
    free(cache);
}

/* ------------------------------------------------------------------ the file */

static void test_path_env(void)
{
    char buf[512], *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("DDPPROF_CUDNN_CACHE", "/x/algos.tsv", 1);
    CHECK(conv_cache_path(buf, sizeof buf) == 1 && strcmp(buf, "/x/algos.tsv") == 0,
          "DDPPROF_CUDNN_CACHE: '%s'", buf);
    CHECK(conv_cache_path(buf, 8) == 0, "a path longer than the buffer was given");
    setenv("DDPPROF_CUDNN_CACHE", "off", 1);
    CHECK(conv_cache_path(buf, sizeof buf) == 0, "DDPPROF_CUDNN_CACHE=off gave a path");
    setenv("DDPPROF_CUDNN_CACHE", "", 1); /* empty: as unset */
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    CHECK(conv_cache_path(buf, sizeof buf) == 1 &&
              strcmp(buf, "/xdg/ddpprof/cudnn-algos.tsv") == 0,
          "XDG_CACHE_HOME: '%s'", buf);
    setenv("XDG_CACHE_HOME", "relative", 1); /* not absolute: ignored, as the XDG spec says */
    CHECK(conv_cache_path(buf, sizeof buf) == 1 &&
              strcmp(buf, "/home/u/.cache/ddpprof/cudnn-algos.tsv") == 0,
          "HOME: '%s'", buf);
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    CHECK(conv_cache_path(buf, sizeof buf) == 0, "no HOME gave a path");
    unsetenv("DDPPROF_CUDNN_CACHE");
    if (home)
        setenv("HOME", home, 1);
    free(home);
}

static struct conv_cache_key key_no(int i)
{
    struct conv_cache_key k = {.gpu = GPU_A, .cudnn = 91400, .dir = i % 3, .dtype = 1,
                               .math = CONV_CACHE_TENSOR_OP, .n = 1 + i, .c = 3, .h = 32,
                               .w = 32, .k = 64, .r = 3, .s = 3, .pad = 1, .stride = 1,
                               .dilation = 1, .groups = 1};
    return k;
}

static const char *open_path;
static void open_fn(const void *arg)
{
    (void)arg;
    struct conv_cache *c = conv_cache_open(open_path);
    struct conv_cache_key k = key_no(0);
    struct conv_cache_value v;
    fc.nkeys = c && conv_cache_find(c, &k, &v) ? 1 : 0; /* found or not, through the pipe */
    fc.plan_errors = c ? 0 : 1;
    conv_cache_free(c);
}

/* the file holding text: opened in a child, how many warning lines and whether key 0 hit */
static void open_text(const char *name, const char *text, struct proc *pr)
{
    char *path = test_path(tmp, name);
    test_write_file(tmp, name, text, strlen(text));
    open_path = path;
    in_child(open_fn, NULL, pr);
    free(path);
}

static void test_file(void)
{
    /* a good file, as written, then the ways a file is not one */
    char *path = test_path(tmp, "file.tsv");
    struct conv_cache *c = conv_cache_open(path);
    CHECK(c != NULL, "open a missing cache: %s", error_get());
    if (!c) {
        free(path);
        return;
    }
    struct conv_cache_key k0 = key_no(0);
    struct conv_cache_value v = {.algo = 1, .math = CUDNN_TENSOR_OP_MATH, .ws = 4096}, got;
    CHECK(conv_cache_put(c, &k0, &v) == 0, "put");
    /* the same shape channels-last (NHWC tensors, KRSC filters) is another choice */
    struct conv_cache_key k0_nhwc = key_no(0);
    k0_nhwc.layout = 1;
    CHECK(!conv_cache_find(c, &k0_nhwc, &got), "an NCHW choice found for the NHWC key");
    const struct conv_cache_value v_nhwc = {.algo = 2, .math = CUDNN_TENSOR_OP_MATH, .ws = 0};
    CHECK(conv_cache_put(c, &k0_nhwc, &v_nhwc) == 0 && conv_cache_find(c, &k0_nhwc, &got) &&
              got.algo == 2 && conv_cache_find(c, &k0, &got) && got.algo == 1,
          "NCHW and NHWC choices of one shape kept apart");
    conv_cache_free(c);
    char *good = test_read_file(tmp, "file.tsv");
    CHECK(good && strncmp(good, "# ddpprof cuDNN algorithm cache", 31) == 0, "file: '%s'",
          good ? good : "(none)");
    struct proc p;
    if (good) {
        open_text("good.tsv", good, &p);
        CHECK(p.err_lines == 0 && p.c.nkeys == 1, "the written file: %d warnings, hit %d: %s",
              p.err_lines, p.c.nkeys, p.err);
        size_t n = strlen(good);
        char *cut = strdup(good);
        cut[n - 1] = '\0'; /* the last line without its newline: a write cut short */
        open_text("cut.tsv", cut, &p);
        printf("a cut-short cache file: %s", p.err);
        CHECK(p.err_lines == 1 && p.c.nkeys == 0 && strstr(p.err, "cut short"),
              "cut short: '%s'", p.err);
        free(cut);
        char *zero = malloc(n + 2);
        const char *tab = strstr(good, "\tnchw\t");
        if (zero && tab) { /* "nchw\t1" becomes "nchw\t01": not as written, never a match */
            size_t at = (size_t)(tab - good) + 6;
            memcpy(zero, good, at);
            zero[at] = '0';
            memcpy(zero + at + 1, good + at, n - at + 1);
            open_text("zero.tsv", zero, &p);
            CHECK(p.err_lines == 1 && p.c.nkeys == 0, "a leading zero: '%s'", p.err);
        }
        free(zero);
        char *foreign = strdup(good);
        foreign[2] = 'X'; /* another first line */
        open_text("foreign.tsv", foreign, &p);
        CHECK(p.err_lines == 1 && p.c.nkeys == 0 && strstr(p.err, "first line"),
              "foreign: '%s'", p.err);
        free(foreign);
    }
    open_text("empty.tsv", "", &p);
    CHECK(p.err_lines == 1 && p.c.nkeys == 0, "empty: '%s'", p.err);

    /* bounded: a full file plus one line keeps the newest CONV_CACHE_MAX_ENTRIES */
    if (good) {
        const char *second_nl = strchr(strchr(good, '\n') + 1, '\n');
        size_t head = (size_t)(second_nl - good) + 1;
        FILE *f = fopen(path, "w");
        fwrite(good, 1, head, f);
        for (int i = 0; i < CONV_CACHE_MAX_ENTRIES; i++) {
            struct conv_cache_key k = key_no(i);
            char text[512];
            conv_cache_key_text(&k, text, sizeof text);
            fprintf(f, "%s\t1\t1\t4096\n", text);
        }
        fclose(f);
        c = conv_cache_open(path);
        struct conv_cache_key newest = key_no(CONV_CACHE_MAX_ENTRIES);
        CHECK(c && conv_cache_find(c, &k0, &got) && conv_cache_put(c, &newest, &v) == 0,
              "a full cache: %s", error_get());
        conv_cache_free(c);
        CHECK(cache_lines(path) == CONV_CACHE_MAX_ENTRIES, "bounded: %d lines, want %d",
              cache_lines(path), CONV_CACHE_MAX_ENTRIES);
        c = conv_cache_open(path);
        struct conv_cache_key k1 = key_no(1);
        CHECK(c && !conv_cache_find(c, &k0, &got) && conv_cache_find(c, &k1, &got) &&
                  conv_cache_find(c, &newest, &got) && got.algo == v.algo && got.ws == v.ws,
              "bounded: the oldest line dropped, the newest kept");
        conv_cache_free(c);
        /* one line more than the format keeps: not this code's file */
        char *full = test_read_file(tmp, "file.tsv");
        struct conv_cache_key extra = key_no(CONV_CACHE_MAX_ENTRIES + 1);
        char text[512];
        conv_cache_key_text(&extra, text, sizeof text);
        size_t fl = full ? strlen(full) : 0;
        char *over = full ? malloc(fl + strlen(text) + 16) : NULL;
        if (over) {
            sprintf(over, "%s%s\t1\t1\t4096\n", full, text);
            open_text("over.tsv", over, &p);
            CHECK(p.err_lines == 1 && p.c.nkeys == 0, "too many lines: '%s'", p.err);
        }
        free(over);
        free(full);
    }
    free(good);
    free(path);
}

/* two processes putting at once: both sets of lines survive (the folder's lock, merging) */
static const char *race_path;
static void race_fn(const void *arg)
{
    const int base = *(const int *)arg;
    struct conv_cache *c = conv_cache_open(race_path);
    struct conv_cache_value v = {.algo = 1, .math = 0, .ws = 0};
    for (int i = 0; c && i < 100; i++) {
        struct conv_cache_key k = key_no(base + i);
        if (conv_cache_put(c, &k, &v))
            fc.plan_errors++;
    }
    conv_cache_free(c);
}

static void test_two_writers(void)
{
    char *path = test_path(tmp, "race/algos.tsv");
    race_path = path;
    fflush(stdout);
    fflush(stderr);
    pid_t a = fork();
    if (a == 0) {
        const int base = 0;
        race_fn(&base);
        _exit(fc.plan_errors ? 1 : 0);
    }
    const int base = 1000;
    struct proc p;
    in_child(race_fn, &base, &p);
    int status = 0;
    waitpid(a, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && p.c.plan_errors == 0,
          "a writer failed: %s", p.err);
    CHECK(cache_lines(path) == 200, "two writers: %d lines, want 200", cache_lines(path));
    free(path);
}

int main(void)
{
    tmp = test_tmpdir();
    /* the plans' own environment: no cuDNN log, no cache but the tests' */
    unsetenv("DDPPROF_CUDNN_LOG");
    test_cold_warm();
    test_fallbacks();
    test_keys_and_math();
    test_path_env();
    test_file();
    test_two_writers();
    test_tmpdir_done(tmp);
    return test_finish();
}
