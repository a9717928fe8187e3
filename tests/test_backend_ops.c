/* test_backend_ops.c — the backend-parity driver, as ggml's test-backend-ops: every slot of
 * struct backend runs on a reference and a candidate backend on the same random inputs,
 * and the candidate's result is compared with the reference's under a per-op error limit
 * whose reason is written next to it.  Prints one line per op (the worst error over its
 * cases) with OK or FAILED; with DDPPROF_BACKEND_OPS_REPORT=FILE also writes that table
 * there (scripts/gpu-check puts it in results/).
 *
 * usage: test_backend_ops [PAIR]     (or PAIR in $DDPPROF_BACKEND_OPS_PAIR)
 *   cpu1-vs-cpuN  runs on every build.  Reference: the CPU backend on 1 thread.
 *                 Candidate: the CPU backend on CAND_THREADS threads with every parallel
 *                 loop split into CAND_CHUNK-item pieces and every convolution into
 *                 CAND_CHUNK-image chunks (backend_cpu_create_chunked), so each thread
 *                 takes several uneven pieces.  Where the CPU backend says its results do
 *                 not depend on its threads (every op but the convolutions' GEMMs), they
 *                 must be equal bit for bit; convolutions must repeat bit for bit on the
 *                 candidate (the backend's "repeatable for a given thread count").
 *   cpuref-vs-cpufast  runs on every build (skips, 77, where the build has no fast
 *                 convolutions).  Reference: the CPU backend on 1 thread with its
 *                 reference convolutions alone (im2col + sgemm, backend_cpu_create_path).
 *                 Candidate: the CPU backend with its fast convolutions (conv_dnnl.h,
 *                 oneDNN; conv_wino.h, its own Winograd; every algorithm, --conv-algo
 *                 winograd, unless $DDPPROF_CONV_ALGO names another) on CAND_THREADS
 *                 threads split as in cpu1-vs-cpuN.  Every op
 *                 but the convolutions runs the same code on both: the same rules as
 *                 cpu1-vs-cpuN; the convolutions differ in algorithm (see conv_check).
 *   cpu-vs-cuda   Reference: the CPU backend (the oracle).  Candidate: the CUDA backend
 *                 on device 0.  Skips (77) without CUDA or a GPU.  Convolutions run twice:
 *                 with cuDNN's heuristics and with DDPPROF_CUDNN_BENCHMARK=1 (cudnnFind*);
 *                 a deliberately failing op must show up in the backend's status slot.
 *                 Built a second time as test_backend_ops_emu, this pair runs on any
 *                 machine against the CUDA backend's own code on the CPU (tests/cuda_emu:
 *                 its kernels and host code for real, stand-ins for the CUDA runtime,
 *                 cuDNN and cuBLAS): what it checks there is that code, not GPU numerics.
 * On both pairs the candidate's own reductions (batch-norm statistics and sums, the
 * convolution's bias gradient), which both backends claim deterministic, must repeat bit
 * for bit on a second call.
 *
 * The reference is always a CPU backend, so its buffers are host memory and are read
 * directly; the candidate's are downloaded.  A 4-D tensor is held by the candidate in its
 * layout of the op's type (backend.h: cuda keeps half tensors NHWC by default): this driver
 * moves it between that layout and NCHW on upload and download (buf_4d), so every op is
 * compared in NCHW, like with like, and the layouts themselves by the convert row.  Shapes are the ConvNet's and ResNet18's
 * (CIFAR: its convolutions, batch norms, residual add, adaptive average pool, Adam) plus
 * odd ones (odd sizes and batches, overlapping and gapped pooling windows, NULL optional
 * arguments, in-place calls, NaN, ties, bad labels).  Every op that takes a
 * dtype runs in fp32, fp16 and bf16 (its rows say which): the inputs are values of the
 * type, the CPU stores them as fp32 and the CUDA backend as 2-byte halves, converted here
 * on upload and download.  The cpu-vs-cuda pair adds sizes beyond one pass of the CUDA
 * kernels' grids (16384 blocks of 256 threads: 4194304 elements) and per-channel
 * reductions over more than 1M elements, which the CPU pair skips for time.
 *
 * Tolerance vocabulary (cpu-vs-cuda): "exact" ops do the same IEEE operations in the same
 * order on both sides (selections, one multiply, or the kernel_math.h formula compiled
 * without contraction on both: the CUDA build uses --fmad=false); ULP-level tolerances
 * cover libm differences (expf, sqrt in double is exact on both).  Reductions differ in
 * summation order (CPU: 16 float lanes then double; GPU: double throughout), GEMMs and
 * convolutions in algorithm.  A half output is the fp32 result rounded once (twice for
 * a convolution with bias), so where the fp32 results may differ the rounded ones may
 * differ by one spacing of the type (HALF_ULP, relative) per rounding; where the fp32
 * results are equal the halves are too. */
#include "backend/backend.h"
#include "backend/backend_cpu.h"
#include "common/error.h"
#include "common/half.h"
#include "backend/kernel_math.h"
#include "cuda/cuda_api.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ULP 1.1920929e-7 /* 2^-23: one float ulp relative to the value */
/* the largest spacing of a half type relative to the value: 2^-10 (fp16, 10 mantissa
 * bits), 2^-7 (bf16, 7); 0 for fp32 */
#define HALF_ULP(dt) ((dt) == DT_F16 ? 0x1p-10 : (dt) == DT_BF16 ? 0x1p-7 : 0.0)
/* cpu-vs-cuda half convolutions: fp16 spacings of the range allowed for cuDNN's transform
 * algorithms rounding in the half type (see conv_check) */
#define TRANSFORM_HALF_SPACINGS 8

/* the cpu1-vs-cpuN candidate: an odd number of threads and an odd piece size, so that
 * pieces do not line up with threads, vector widths or planes */
#define CAND_THREADS 3
#define CAND_CHUNK 3

enum pair_kind { PAIR_CPU_SPLIT, PAIR_CPU_CUDA };

static enum pair_kind pair;
static const char *pair_name;
static struct backend *ref, *cand;
static uint64_t seed = 0x2545f4914f6cdd1dULL;

/* ------------------------------------------------------------------ tolerances */

/* |cand - ref| <= atol + rtol |ref| per element; {0, 0} asks for equality */
struct tol {
    double atol, rtol;
};

/* The limit of an op the CPU backend computes identically whatever its threads and pieces
 * (each reduction stays inside one piece, backend_cpu.c): equality, bit for bit, between
 * the two CPU backends; against CUDA the limit given (its reason is at the call). */
static struct tol tol_split_free(double cuda_atol, double cuda_rtol)
{
    if (pair == PAIR_CPU_SPLIT)
        return (struct tol){0.0, 0.0};
    return (struct tol){cuda_atol, cuda_rtol};
}

/* ------------------------------------------------------------------ the table */

struct op_row {
    char op[64];
    double max_abs;   /* largest |cand - ref| */
    double ref;       /* largest |ref| */
    double worst;     /* largest error / tolerance (<= 1 passes) */
    int failed;
};
static struct op_row rows[400];
static int nrows;

static void record(const char *op, double max_abs, double ref_abs, double worst)
{
    struct op_row *r = NULL;
    for (int i = 0; i < nrows && !r; i++)
        if (strcmp(rows[i].op, op) == 0)
            r = &rows[i];
    if (!r && nrows < (int)(sizeof rows / sizeof rows[0])) {
        r = &rows[nrows++];
        snprintf(r->op, sizeof r->op, "%s", op);
    }
    if (!r)
        return;
    r->max_abs = fmax(r->max_abs, max_abs);
    r->ref = fmax(r->ref, ref_abs);
    r->worst = isnan(worst) || worst > r->worst ? worst : r->worst;
    r->failed |= !(worst <= 1.0);
}

/* Candidate result got against reference result want: worst of |got - want| / (atol +
 * rtol |want|).  NaN must meet NaN and inf the same inf.  Between the two CPU backends an
 * equality limit means the same bits (so -0 against +0 or another NaN fails too). */
static void compare(const char *op, const char *what, const float *got, const float *want,
                    size_t n, struct tol t)
{
    double worst = 0.0, max_abs = 0.0, ref_abs = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const double g = got[i], w = want[i];
        double r;
        if (isnan(w) || isnan(g) || isinf(w) || isinf(g)) {
            r = (isnan(w) && isnan(g)) || g == w ? 0.0 : INFINITY;
        } else {
            const double d = fabs(g - w), tol = t.atol + t.rtol * fabs(w);
            max_abs = fmax(max_abs, d);
            ref_abs = fmax(ref_abs, fabs(w));
            r = d == 0.0 ? 0.0 : tol > 0.0 ? d / tol : INFINITY;
        }
        if (r > worst) {
            worst = r;
            at = i;
        }
    }
    CHECK(worst <= 1.0,
          "%s %s: element %zu of %zu: %s %.9g, %s %.9g (%.3g of the tolerance atol %.3g "
          "rtol %.3g)",
          op, what, at, n, cand->name, n ? (double)got[at] : 0.0, ref->name,
          n ? (double)want[at] : 0.0, worst, t.atol, t.rtol);
    if (pair == PAIR_CPU_SPLIT && t.atol == 0.0 && t.rtol == 0.0) {
        size_t differ = 0, first = 0;
        for (size_t i = n; i-- > 0;)
            if (memcmp(&got[i], &want[i], sizeof got[i]) != 0) {
                differ++;
                first = i;
            }
        CHECK(differ == 0,
              "%s %s: %zu of %zu results differ in their bits between 1 and %d threads "
              "(first at %zu: %a vs %a), but the CPU backend claims they do not depend on "
              "threads",
              op, what, differ, n, CAND_THREADS, first, n ? (double)got[first] : 0.0,
              n ? (double)want[first] : 0.0);
        if (differ)
            worst = INFINITY;
    }
    record(op, max_abs, ref_abs, worst);
}

static double max_abs_of(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]))
            m = fmax(m, fabs(x[i]));
    return m;
}

/* the candidate has not failed inside a slot (slots return void: CUDA keeps the first
 * failure as the backend's status; the CPU backend's slots cannot fail, its status is 0) */
static void status_ok(const char *after)
{
    CHECK(cand->status(cand) == 0, "after %s: %s", after, error_get());
}

/* ------------------------------------------------------------------ paired buffers */

/* the same data in reference memory (r, host memory: the reference is a CPU backend) and
 * candidate memory (c).  A typed buffer holds n values of dt: the reference stores them
 * as floats (bytes = 4n), the candidate as its dtype_size says (cbytes); a raw buffer
 * (buf_new) is bytes of anything, the same on both. */
struct buf {
    size_t bytes, cbytes;
    size_t n;      /* typed: the number of values; raw: bytes / 4 */
    enum dtype dt; /* typed: the values' type; raw: DT_F32 */
    int typed;
    void *r, *c;
    int dims[4];     /* a 4-D tensor (buf_4d): its shape (n,c,h,w); else dims[0] = 0 */
    enum dtype ldt;  /* whose layout the candidate keeps it in (typed: dt) */
};

static const char *dt_name(enum dtype dt)
{
    return dt == DT_F16 ? "fp16" : dt == DT_BF16 ? "bf16" : "fp32";
}

/* the candidate's bytes of n floats of dt (half storage: bit patterns) from host floats */
static void *to_cand(const float *v, size_t n, enum dtype dt, size_t cbytes)
{
    void *h = malloc(cbytes ? cbytes : 1);
    if (cbytes == n * sizeof(float)) {
        memcpy(h, v, cbytes);
        return h;
    }
    uint16_t *u = h;
    for (size_t i = 0; i < n; i++)
        u[i] = dt == DT_BF16 ? half_f32_to_bf16(v[i]) : half_f32_to_f16(v[i]);
    return h;
}

/* the candidate holds b NHWC: a 4-D tensor whose layout differs (h*w > 1, c > 1) */
static int buf_nhwc(const struct buf *b)
{
    return b->dims[0] > 0 && b->dims[1] > 1 && b->dims[2] * b->dims[3] > 1 &&
           cand->layout(cand, b->ldt) == LAYOUT_NHWC;
}

/* b's candidate bytes h (elements of cbytes / n bytes) reordered NCHW -> NHWC (to_nhwc)
 * or back, in place */
static void buf_permute(const struct buf *b, void *h, int to_nhwc)
{
    if (!buf_nhwc(b))
        return;
    const size_t n = (size_t)b->dims[0], c = (size_t)b->dims[1];
    const size_t hw = (size_t)b->dims[2] * b->dims[3], es = b->cbytes / (n * c * hw);
    unsigned char *tmp = malloc(b->cbytes);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < c; j++)
            for (size_t k = 0; k < hw; k++) {
                const size_t nchw = (i * c + j) * hw + k, nhwc = (i * hw + k) * c + j;
                memcpy(tmp + (to_nhwc ? nhwc : nchw) * es,
                       (unsigned char *)h + (to_nhwc ? nchw : nhwc) * es, es);
            }
    memcpy(h, tmp, b->cbytes);
    free(tmp);
}

static struct buf buf_alloc(size_t bytes, size_t cbytes)
{
    struct buf b = {.bytes = bytes, .cbytes = cbytes, .n = bytes / sizeof(float),
                    .dt = DT_F32, .r = ref->alloc(ref, bytes), .c = cand->alloc(cand, cbytes)};
    if (!b.r || !b.c) {
        fprintf(stderr, "out of memory for %zu bytes: %s\n", bytes, error_get());
        exit(1);
    }
    return b;
}

static struct buf buf_new(size_t bytes, const void *init)
{
    struct buf b = buf_alloc(bytes, bytes);
    if (init) {
        memcpy(b.r, init, bytes);
        cand->upload(cand, b.c, init, bytes);
    }
    return b;
}

/* the reference's values copied over to the candidate (typed: converted to its storage) */
static void buf_sync(const struct buf *b)
{
    void *h = b->typed ? to_cand(b->r, b->n, b->dt, b->cbytes) : malloc(b->bytes ? b->bytes : 1);
    if (!b->typed)
        memcpy(h, b->r, b->bytes);
    buf_permute(b, h, 1);
    cand->upload(cand, b->c, h, b->cbytes);
    free(h);
}

/* mark b a 4-D tensor (n,c,h,w) kept in the candidate's layout of ldt (a typed buffer:
 * its own type), and upload its values again in that layout */
static void buf_4d(struct buf *b, int n, int c, int h, int w, enum dtype ldt)
{
    b->dims[0] = n, b->dims[1] = c, b->dims[2] = h, b->dims[3] = w;
    b->ldt = b->typed ? b->dt : ldt;
    buf_sync(b);
}

/* n values of dt, from init rounded to dt (NULL: zeros) */
static struct buf buf_new_dt(size_t n, enum dtype dt, const float *init)
{
    struct buf b = buf_alloc(n * sizeof(float), n * cand->dtype_size(cand, dt));
    b.typed = 1;
    b.dt = dt;
    b.n = n;
    if (init) {
        for (size_t i = 0; i < n; i++)
            ((float *)b.r)[i] = km_round_amp(init[i], (int)dt);
        buf_sync(&b);
    }
    return b;
}

static struct buf buf_rand_dt(size_t n, enum dtype dt, float lo, float hi)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    test_fill_uniform(h, n, lo, hi, &seed);
    struct buf b = buf_new_dt(n, dt, h);
    free(h);
    return b;
}

static struct buf buf_rand(size_t n, float lo, float hi) { return buf_rand_dt(n, DT_F32, lo, hi); }

/* the candidate's copy, downloaded, as the reference holds it: floats for a typed buffer
 * (caller frees) */
static void *buf_cand(const struct buf *b)
{
    void *raw = malloc(b->cbytes ? b->cbytes : 1);
    cand->download(cand, raw, b->c, b->cbytes);
    buf_permute(b, raw, 0);
    if (!b->typed || b->cbytes == b->bytes)
        return raw;
    float *h = malloc(b->bytes ? b->bytes : 1);
    const uint16_t *u = raw;
    for (size_t i = 0; i < b->n; i++)
        h[i] = b->dt == DT_BF16 ? half_bf16_to_f32(u[i]) : half_f16_to_f32(u[i]);
    free(raw);
    return h;
}

static void buf_free(struct buf *b)
{
    ref->free(ref, b->r);
    cand->free(cand, b->c);
    b->r = b->c = NULL;
}

/* compare a float buffer's two copies */
static void compare_buf(const char *op, const char *what, const struct buf *b, struct tol t)
{
    float *g = buf_cand(b);
    compare(op, what, g, b->r, b->n, t);
    free(g);
}

/* the candidate's copy of b holds exactly the bits of earlier (a repeat of the same call) */
static void check_repeat(const char *op, const char *what, const struct buf *b,
                         const void *earlier)
{
    void *now = buf_cand(b);
    CHECK(memcmp(now, earlier, b->bytes) == 0,
          "%s %s: a second identical call on the %s backend gave other bits", op, what,
          cand->name);
    free(now);
}

/* "op" for fp32, "op fp16" / "op bf16" for the half types: one row per op and type */
static const char *op_dt(const char *op, enum dtype dt, char *buf, size_t cap)
{
    if (dt == DT_F32)
        snprintf(buf, cap, "%s", op);
    else
        snprintf(buf, cap, "%s %s", op, dt_name(dt));
    return buf;
}

#define R(b) ((float *)(b).r)
#define C(b) ((float *)(b).c)
#define NF(b) ((b).n)

/* ------------------------------------------------------------------ memory */

static void test_memory(void)
{
    /* alloc is zero-filled */
    const size_t n = 300000;
    float *d = cand->alloc(cand, n * sizeof(float));
    float *h = malloc(n * sizeof(float));
    CHECK(d != NULL, "alloc: %s", error_get());
    cand->download(cand, h, d, n * sizeof(float));
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++)
        nonzero += h[i] != 0.0f;
    CHECK(nonzero == 0, "alloc: %zu of %zu floats not zero", nonzero, n);
    void *empty = cand->alloc(cand, 0);
    CHECK(empty != NULL, "alloc(0) returned NULL: %s", error_get());
    cand->free(cand, empty);
    cand->free(cand, NULL);
    record("alloc/free", (double)nonzero, 0.0, nonzero || !empty ? INFINITY : 0.0);

    /* many small uploads through the staging halves, each host buffer overwritten right
     * after its upload returns (the contract: the source may be reused at once) */
    const size_t chunk = 4096, chunks = n / chunk; /* 16 KiB each, 1.1 MiB a round */
    float *src = malloc(chunk * sizeof(float));
    float *want = malloc(n * sizeof(float));
    for (int round = 0; round < 10; round++) /* 11.4 MiB: both 4 MiB halves reused */
        for (size_t k = 0; k < chunks; k++) {
            test_fill_uniform(src, chunk, -1.0f, 1.0f, &seed);
            memcpy(want + k * chunk, src, chunk * sizeof(float));
            cand->upload(cand, d + k * chunk, src, chunk * sizeof(float));
            memset(src, 0xff, chunk * sizeof(float)); /* NaN if the copy read it late */
        }
    cand->download(cand, h, d, chunks * chunk * sizeof(float));
    /* copies: exact, bit for bit */
    compare("upload/download", "staged 16 KiB uploads", h, want, chunks * chunk,
            (struct tol){0.0, 0.0});

    /* one upload bigger than a staging half, then copy and zero */
    const size_t big = (size_t)3 << 20; /* 12 MiB */
    float *hb = malloc(big * sizeof(float)), *back = malloc(big * sizeof(float));
    test_fill_uniform(hb, big, -5.0f, 5.0f, &seed);
    float *db = cand->alloc(cand, big * sizeof(float));
    float *dc = cand->alloc(cand, big * sizeof(float));
    cand->upload(cand, db, hb, big * sizeof(float));
    cand->copy(cand, dc, db, big * sizeof(float));
    cand->zero(cand, dc + 100, 1000 * sizeof(float));
    cand->synchronize(cand);
    cand->download(cand, back, dc, big * sizeof(float));
    memset(hb + 100, 0, 1000 * sizeof(float));
    compare("copy/zero/synchronize", "12 MiB upload, copy, zero", back, hb, big,
            (struct tol){0.0, 0.0});
    cand->free(cand, db);
    cand->free(cand, dc);
    cand->free(cand, d);
    free(h);
    free(src);
    free(want);
    free(hb);
    free(back);
    status_ok("memory");
}

/* ------------------------------------------------------------------ convolution */

struct conv_case {
    const char *name;
    int n, c, h, k, r, pad, stride, bias;
};

static const struct conv_case conv_cases[] = {
    {"convnet layer1.0", 16, 1, 28, 16, 5, 2, 1, 1},
    {"convnet layer2.0", 16, 16, 14, 32, 5, 2, 1, 1},
    {"resnet conv1 (CIFAR)", 4, 3, 32, 64, 3, 1, 1, 0},
    {"resnet layer2.0.conv1", 4, 64, 32, 128, 3, 1, 2, 0},
    {"resnet layer2.0.downsample", 4, 64, 32, 128, 1, 0, 2, 0},
    {"resnet layer4.0.conv1", 2, 256, 8, 512, 3, 1, 2, 0},
    {"resnet layer4.x.conv2", 2, 512, 4, 512, 3, 1, 1, 0},
    {"resnet layer1.x.conv", 2, 64, 32, 64, 3, 1, 1, 0},  /* Winograd on the fast path */
    {"resnet layer3.x.conv", 3, 256, 8, 256, 3, 1, 1, 0}, /* Winograd on the fast path */
    {"3x3 16->24 with bias", 3, 16, 20, 24, 3, 1, 1, 1},  /* Winograd on the fast path */
    /* the backend's own Winograd (conv_wino.c): partial 2x2 tiles at an odd edge, a bias,
     * an uneven split of 5 images */
    {"3x3 pixels 16->24 with bias", 5, 16, 3, 24, 3, 1, 1, 1},
    {"odd 15x15 stride 2", 3, 16, 15, 8, 3, 1, 2, 1},
    {"7x7 stride 2 stem", 2, 3, 32, 64, 7, 3, 2, 1},
    {"odd batch of 17", 17, 3, 12, 8, 3, 1, 1, 1}, /* 3-image chunks, the last one of 2 */
};

static void conv_check(const struct conv_case *k, const char *mode, enum dtype dt)
{
    struct conv2d_shape cs = {.n = k->n, .c = k->c, .h = k->h, .w = k->h, .k = k->k, .r = k->r,
                              .s = k->r, .pad = k->pad, .stride = k->stride};
    CHECK(conv2d_shape_init(&cs) == 0, "%s: %s", k->name, error_get());
    const size_t nx = (size_t)cs.n * cs.c * cs.h * cs.w, nw = (size_t)cs.k * cs.c * cs.r * cs.s;
    const size_t ny = (size_t)cs.n * cs.k * cs.p * cs.q;
    struct buf x = buf_rand_dt(nx, dt, -1.0f, 1.0f), w = buf_rand_dt(nw, dt, -0.5f, 0.5f);
    struct buf b = buf_rand_dt((size_t)cs.k, dt, -0.5f, 0.5f);
    struct buf dy = buf_rand_dt(ny, dt, -1.0f, 1.0f);
    struct buf y = buf_new_dt(ny, dt, NULL), dx = buf_new_dt(nx, dt, NULL);
    struct buf dw = buf_new_dt(nw, dt, NULL), db = buf_new_dt((size_t)cs.k, dt, NULL);
    buf_4d(&x, cs.n, cs.c, cs.h, cs.w, dt), buf_4d(&dx, cs.n, cs.c, cs.h, cs.w, dt);
    buf_4d(&w, cs.k, cs.c, cs.r, cs.s, dt), buf_4d(&dw, cs.k, cs.c, cs.r, cs.s, dt);
    buf_4d(&dy, cs.n, cs.k, cs.p, cs.q, dt), buf_4d(&y, cs.n, cs.k, cs.p, cs.q, dt);
    ref->conv2d_forward(ref, &cs, dt, R(x), R(w), k->bias ? R(b) : NULL, R(y));
    cand->conv2d_forward(cand, &cs, dt, C(x), C(w), k->bias ? C(b) : NULL, C(y));
    ref->conv2d_backward(ref, &cs, dt, R(x), R(w), R(dy), R(dx), R(dw), k->bias ? R(db) : NULL);
    cand->conv2d_backward(cand, &cs, dt, C(x), C(w), C(dy), C(dx), C(dw),
                          k->bias ? C(db) : NULL);
    /* cpuref-vs-cpufast: oneDNN's direct convolution sums the same products as im2col +
     * sgemm in another order (blocked over input channels and taps; dw over its own
     * slices of images): the reassociation bound of cpu1-vs-cpuN applies, 1e-5.  The
     * cases marked Winograd run oneDNN's F(4x4,3x3) on AVX-512 machines, whose
     * transforms add their rounding: the worst over all cases measured 2.8e-6 (forward),
     * 3.0e-6 (dx) and 1.5e-6 (dw) of the largest |output| (AMD EPYC Zen 5), against
     * 8.7e-7 / 1.2e-6 / 1.5e-6 with direct kernels only; within the same 1e-5.
     * cpu-vs-cuda: cuDNN may choose FFT or Winograd algorithms, whose rounding error
     * reaches ~1e-4 of the output's range (and direct sums over up to 4608 products
     * ~1e-5); a wrong index, sign or missing term is an O(1) error.  So 1e-3 of the
     * largest |output|.
     * cpu1-vs-cpuN: chunks of CAND_CHUNK images change the GEMMs' widths (forward, dx)
     * and how dw's sum over images is split between threads (partials added in thread
     * order): float reassociation of sums of up to 12544 terms, ~5e-7 of the largest
     * |output| measured and ~2e-6 as a random-walk bound; 1e-5 of it allowed.
     * Half types: those fp32 differences may move a rounding by one spacing (HALF_ULP
     * relative); the forward rounds the convolution before it adds the bias, so there
     * the spacing is that of the convolution, which may be far larger than the output
     * where the bias cancels it: HALF_ULP of the range.
     * cpu-vs-cuda, half types: cuDNN may choose WINOGRAD_NONFUSED (or FFT) for half data,
     * which computes in the transformed domain in the half type and rounds there, at the
     * scale of the range: on an H200 (cuDNN 9.14, DDPPROF_CUDNN_LOG) its heuristics chose
     * WINOGRAD_NONFUSED for fp16 dw of the ConvNet's layer2 (5x5), 4.7 fp16 spacings of
     * the range off (0.316 at a range of 68), and find mode (which picks by timing, so
     * not the same algorithm every run) for fp16 dx of layer1, 2.3, and in a third run
     * for fp16 forward of layer2, 3.1.  So TRANSFORM_HALF_SPACINGS fp16 spacings of the range (0.8 %; bf16
     * gets the same absolute allowance, its results passed without it); a missing image
     * of a batch of 32 is ~3 % of the range.  (fp32 runs no such algorithm: conv_plan.c.) */
    const double frac = pair == PAIR_CPU_SPLIT ? 1e-5 : 1e-3, hu = HALF_ULP(dt);
    const double transform =
        pair == PAIR_CPU_CUDA && dt != DT_F32 ? TRANSFORM_HALF_SPACINGS * 0x1p-10 : 0.0;
    char op[64], row[80];
    snprintf(op, sizeof op, "conv2d_forward%s", mode);
    compare_buf(op_dt(op, dt, row, sizeof row), k->name, &y,
                (struct tol){(frac + hu + transform) * max_abs_of(R(y), ny), hu});
    snprintf(op, sizeof op, "conv2d_backward dx%s", mode);
    compare_buf(op_dt(op, dt, row, sizeof row), k->name, &dx,
                (struct tol){(frac + transform) * max_abs_of(R(dx), nx), hu});
    snprintf(op, sizeof op, "conv2d_backward dw%s", mode);
    compare_buf(op_dt(op, dt, row, sizeof row), k->name, &dw,
                (struct tol){(frac + transform) * max_abs_of(R(dw), nw), hu});
    if (k->bias) {
        /* cpu-vs-cuda: sums of n*p*q values in double on both sides (CPU: float lanes
         * first): ~1e-6.  The CPU backend sums db on the calling thread: equal. */
        snprintf(op, sizeof op, "conv2d_backward db%s", mode);
        compare_buf(op_dt(op, dt, row, sizeof row), k->name, &db,
                    tol_split_free(1e-5 * max_abs_of(R(db), (size_t)cs.k), 1e-5 + hu));
        /* the bias gradient is the backends' own deterministic reduction: repeatable */
        void *db1 = buf_cand(&db);
        cand->conv2d_backward(cand, &cs, dt, C(x), C(w), C(dy), NULL, NULL, C(db));
        check_repeat("conv2d_backward db", k->name, &db, db1);
        free(db1);
    }
    /* the CPU backend's claim: for a given thread count (and split) the same bits every
     * time; checked with a second forward, and the two backward calls below */
    void *y1 = NULL, *dx1 = NULL, *dw1 = NULL;
    if (pair == PAIR_CPU_SPLIT) {
        y1 = buf_cand(&y);
        dx1 = buf_cand(&dx);
        dw1 = buf_cand(&dw);
        cand->zero(cand, C(y), y.cbytes);
        cand->conv2d_forward(cand, &cs, dt, C(x), C(w), k->bias ? C(b) : NULL, C(y));
        check_repeat("conv2d_forward", k->name, &y, y1);
    }
    /* dx only, then dw only (the first layer passes dx NULL) */
    cand->zero(cand, C(dw), dw.cbytes);
    cand->conv2d_backward(cand, &cs, dt, C(x), C(w), C(dy), NULL, C(dw), NULL);
    snprintf(op, sizeof op, "conv2d_backward dw%s", mode);
    compare_buf(op_dt(op, dt, row, sizeof row), "dx NULL", &dw,
                (struct tol){(frac + transform) * max_abs_of(R(dw), nw), hu});
    if (dw1)
        check_repeat("conv2d_backward dw", "dx NULL", &dw, dw1);
    cand->zero(cand, C(dx), dx.cbytes);
    cand->conv2d_backward(cand, &cs, dt, C(x), C(w), C(dy), C(dx), NULL, NULL);
    snprintf(op, sizeof op, "conv2d_backward dx%s", mode);
    compare_buf(op_dt(op, dt, row, sizeof row), "dw NULL", &dx,
                (struct tol){(frac + transform) * max_abs_of(R(dx), nx), hu});
    if (dx1)
        check_repeat("conv2d_backward dx", "dw NULL", &dx, dx1);
    free(y1);
    free(dx1);
    free(dw1);
    struct buf *all[] = {&x, &w, &b, &dy, &y, &dx, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok(k->name);
}

/* cpu-vs-cuda only: a 1x1 convolution whose bias gradient sums 1146880 values per channel
 * (the chunked per-channel reduction over more than 1M elements) */
static const struct conv_case conv_big_case = {"1x1 on 70x2x128x128", 70, 2, 128, 3, 1, 0, 1, 1};

static void test_conv(const char *mode)
{
    for (int dt = DT_F32; dt <= DT_BF16; dt++) {
        for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
            conv_check(&conv_cases[i], mode, (enum dtype)dt);
        if (pair == PAIR_CPU_CUDA)
            conv_check(&conv_big_case, mode, (enum dtype)dt);
    }
}

/* ------------------------------------------------------------------ batch norm */

static void bn_check(int n, int c, int hw, int affine, enum dtype dt)
{
    const size_t m = (size_t)n * c * hw;
    char shape[64], row[80];
    snprintf(shape, sizeof shape, "(%d,%d,%d)%s", n, c, hw, affine ? "" : " no affine");
    /* an offset per channel, so mean and variance differ between channels */
    float *hx = malloc(m * sizeof(float));
    for (size_t i = 0; i < m; i++) {
        const int ch = (int)((i / (size_t)hw) % (size_t)c);
        hx[i] = (float)(ch % 7) - 3.0f + 2.0f * (float)test_uniform(&seed);
    }
    struct buf x = buf_new_dt(m, dt, hx);
    free(hx);
    struct buf dy = buf_rand_dt(m, dt, -1.0f, 1.0f), wt = buf_rand((size_t)c, 0.5f, 1.5f);
    struct buf bias = buf_rand((size_t)c, -0.5f, 0.5f);
    struct buf mean = buf_new((size_t)c * 4, NULL), invstd = buf_new((size_t)c * 4, NULL);
    struct buf y = buf_new_dt(m, dt, NULL), dx = buf_new_dt(m, dt, NULL);
    struct buf sums = buf_new((size_t)c * 8, NULL), dwt = buf_new((size_t)c * 4, NULL);
    struct buf dbias = buf_new((size_t)c * 4, NULL);
    buf_4d(&x, n, c, hw, 1, dt), buf_4d(&dy, n, c, hw, 1, dt);
    buf_4d(&y, n, c, hw, 1, dt), buf_4d(&dx, n, c, hw, 1, dt);
    const float eps = 1e-5f;
    /* the statistics, sums and parameter gradients are fp32 for every dt: the fp32
     * limits; the elementwise outputs are dt (one rounding of an equal or nearly equal
     * fp32 value: HALF_ULP more) */
    const double hu = HALF_ULP(dt);

    ref->batchnorm_stats(ref, n, c, hw, dt, R(x), eps, R(mean), R(invstd));
    cand->batchnorm_stats(cand, n, c, hw, dt, C(x), eps, C(mean), C(invstd));
    /* means of up to 1.3M values: the CPU's float lanes lose ~1e-6 relative to the
     * values' size (|x| <= 4); invstd from a two-pass variance, ~1e-6 relative */
    compare_buf(op_dt("batchnorm_stats mean", dt, row, sizeof row), shape, &mean,
                tol_split_free(4e-6 * 4.0, 1e-6));
    compare_buf(op_dt("batchnorm_stats invstd", dt, row, sizeof row), shape, &invstd,
                tol_split_free(0.0, 1e-5));
    /* both backends claim deterministic reductions (kernels.h: a fixed split summed in a
     * fixed order; backend_cpu.c: repeatable for a given thread count): a second call
     * gives the same bits */
    void *mean1 = buf_cand(&mean), *invstd1 = buf_cand(&invstd);
    cand->batchnorm_stats(cand, n, c, hw, dt, C(x), eps, C(mean), C(invstd));
    check_repeat("batchnorm_stats mean", shape, &mean, mean1);
    check_repeat("batchnorm_stats invstd", shape, &invstd, invstd1);
    free(mean1);
    free(invstd1);
    /* the rest of the chain runs on identical statistics: copy the reference's over */
    buf_sync(&mean);
    buf_sync(&invstd);

    const float *w_r = affine ? R(wt) : NULL, *w_c = affine ? C(wt) : NULL;
    const float *b_r = affine ? R(bias) : NULL, *b_c = affine ? C(bias) : NULL;
    ref->batchnorm_elemt(ref, n, c, hw, dt, R(x), R(mean), R(invstd), w_r, b_r, R(y));
    cand->batchnorm_elemt(cand, n, c, hw, dt, C(x), C(mean), C(invstd), w_c, b_c, C(y));
    /* (x - mean) * (invstd * w) + b in the same order and rounding on both: exact; 2 ulp of
     * the output range allowed for a compiler's different (but legal) evaluation */
    compare_buf(op_dt("batchnorm_elemt", dt, row, sizeof row), shape, &y,
                tol_split_free(2 * ULP * max_abs_of(R(y), m), hu));

    /* eval: the running statistics as (mean, var); invstd in double on both sides */
    struct buf rvar = buf_rand((size_t)c, 0.2f, 3.0f);
    ref->batchnorm_forward_eval(ref, n, c, hw, dt, R(x), R(mean), R(rvar), eps, w_r, b_r, R(y));
    cand->batchnorm_forward_eval(cand, n, c, hw, dt, C(x), C(mean), C(rvar), eps, w_c, b_c,
                                 C(y));
    compare_buf(op_dt("batchnorm_forward_eval", dt, row, sizeof row), shape, &y,
                tol_split_free(2 * ULP * max_abs_of(R(y), m), hu));

    ref->batchnorm_backward_reduce(ref, n, c, hw, dt, R(dy), R(x), R(mean), R(invstd), R(sums),
                                   R(sums) + c, affine ? R(dwt) : NULL, affine ? R(dbias) : NULL);
    cand->batchnorm_backward_reduce(cand, n, c, hw, dt, C(dy), C(x), C(mean), C(invstd),
                                    C(sums), C(sums) + c, affine ? C(dwt) : NULL,
                                    affine ? C(dbias) : NULL);
    /* sums of n*hw terms of size <= 4: the CPU's float lanes (hw/16 terms each) lose
     * ~hw/16 ulp of the sum of |terms| <= 4*n*hw; 1e-6 of that bound is ~10x that */
    const double l1 = 4.0 * n * hw;
    compare_buf(op_dt("batchnorm_backward_reduce", dt, row, sizeof row), shape, &sums,
                tol_split_free(1e-6 * l1, 1e-6));
    void *sums1 = buf_cand(&sums);
    cand->batchnorm_backward_reduce(cand, n, c, hw, dt, C(dy), C(x), C(mean), C(invstd),
                                    C(sums), C(sums) + c, NULL, NULL);
    check_repeat("batchnorm_backward_reduce", shape, &sums, sums1);
    free(sums1);
    if (affine) {
        compare_buf(op_dt("batchnorm_backward_reduce dweight", dt, row, sizeof row), shape,
                    &dwt, tol_split_free(4e-6 * l1, 1e-6));
        compare_buf(op_dt("batchnorm_backward_reduce dbias", dt, row, sizeof row), shape,
                    &dbias, tol_split_free(1e-6 * l1, 1e-6));
    }
    buf_sync(&sums);

    const float count_h = (float)n * (float)hw;
    struct buf count = buf_new(sizeof count_h, &count_h); /* device memory, as SyncBatchNorm's */
    ref->batchnorm_backward_elemt(ref, n, c, hw, dt, R(dy), R(x), R(mean), R(invstd), w_r,
                                  R(sums), R(sums) + c, R(count), R(dx));
    cand->batchnorm_backward_elemt(cand, n, c, hw, dt, C(dy), C(x), C(mean), C(invstd), w_c,
                                   C(sums), C(sums) + c, C(count), C(dx));
    /* km_bn_backward_elemt on both, no contraction: exact up to 4 ulp of the range */
    compare_buf(op_dt("batchnorm_backward_elemt", dt, row, sizeof row), shape, &dx,
                tol_split_free(4 * ULP * max_abs_of(R(dx), m), hu));
    /* in place: dx aliases dy */
    ref->batchnorm_backward_elemt(ref, n, c, hw, dt, R(dy), R(x), R(mean), R(invstd), w_r,
                                  R(sums), R(sums) + c, R(count), R(dy));
    cand->batchnorm_backward_elemt(cand, n, c, hw, dt, C(dy), C(x), C(mean), C(invstd), w_c,
                                   C(sums), C(sums) + c, C(count), C(dy));
    compare_buf(op_dt("batchnorm_backward_elemt", dt, row, sizeof row), "in place", &dy,
                tol_split_free(4 * ULP * max_abs_of(R(dy), m), hu));
    struct buf *all[] = {&x,   &dy,  &wt,  &bias,  &mean, &invstd, &y,
                         &dx,  &sums, &dwt, &dbias, &rvar, &count};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok("batch norm");
}

static void test_batchnorm_gather(void)
{
    const int world = 3, c = 37;
    float *h = malloc((size_t)world * c * sizeof(float));
    test_fill_uniform(h, (size_t)world * c, -2.0f, 2.0f, &seed);
    struct buf means = buf_new((size_t)world * c * 4, h);
    test_fill_uniform(h, (size_t)world * c, 0.3f, 3.0f, &seed);
    struct buf invstds = buf_new((size_t)world * c * 4, h);
    free(h);
    const float counts_h[3] = {6272.0f, 0.0f, 1568.0f}; /* a rank with no samples */
    struct buf counts = buf_new(sizeof counts_h, counts_h);
    struct buf rmean = buf_rand((size_t)c, -1.0f, 1.0f), rvar = buf_rand((size_t)c, 0.5f, 2.0f);
    struct buf mean = buf_new((size_t)c * 4, NULL), invstd = buf_new((size_t)c * 4, NULL);
    ref->batchnorm_gather_stats(ref, world, c, R(means), R(invstds), R(counts), 0.1f, 1e-5f,
                                R(rmean), R(rvar), R(mean), R(invstd));
    cand->batchnorm_gather_stats(cand, world, c, C(means), C(invstds), C(counts), 0.1f, 1e-5f,
                                 C(rmean), C(rvar), C(mean), C(invstd));
    /* the same IEEE double arithmetic on both sides (no contraction), rounded once to
     * float: equal; 1 ulp relative, 2 ulp of the range near zero, for safety */
#define GATHER_TOL(b) tol_split_free(2 * ULP * max_abs_of(R(b), (size_t)c), ULP)
    compare_buf("batchnorm_gather_stats", "mean", &mean, GATHER_TOL(mean));
    compare_buf("batchnorm_gather_stats", "invstd", &invstd, GATHER_TOL(invstd));
    compare_buf("batchnorm_gather_stats", "running_mean", &rmean, GATHER_TOL(rmean));
    compare_buf("batchnorm_gather_stats", "running_var", &rvar, GATHER_TOL(rvar));
    /* running statistics may be NULL */
    cand->batchnorm_gather_stats(cand, world, c, C(means), C(invstds), C(counts), 0.1f, 1e-5f,
                                 NULL, NULL, C(mean), C(invstd));
    compare_buf("batchnorm_gather_stats", "no running stats", &invstd, GATHER_TOL(invstd));
#undef GATHER_TOL
    struct buf *all[] = {&means, &invstds, &counts, &rmean, &rvar, &mean, &invstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok("batchnorm_gather_stats");
}

static void test_batchnorm(void)
{
    for (int d = DT_F32; d <= DT_BF16; d++) {
        const enum dtype dt = (enum dtype)d;
        bn_check(16, 16, 784, 1, dt); /* ConvNet bn1 at batch 16 */
        bn_check(16, 32, 196, 1, dt); /* ConvNet bn2 */
        bn_check(4, 512, 16, 1, dt);  /* ResNet layer4: many channels, tiny planes */
        bn_check(3, 5, 7, 0, dt);     /* odd sizes, no weight and bias */
        if (pair == PAIR_CPU_CUDA) /* 1310720 per channel: every chunk loops, 3.9M in all */
            bn_check(80, 3, 16384, 1, dt);
    }
    test_batchnorm_gather();
}

/* ------------------------------------------------------------------ ReLU, pooling */

/* more than one pass of the CUDA grid-stride loops (4194304 threads) on the cuda pair */
static size_t big_n(void) { return pair == PAIR_CPU_CUDA ? 5000003 : 1000003; }

static void test_relu(enum dtype dt)
{
    const size_t n = big_n(); /* not a multiple of any block size */
    char row[80], what[64];
    snprintf(what, sizeof what, "%zu with nan/inf/-0", n);
    float *h = malloc(n * sizeof(float));
    test_fill_uniform(h, n, -1.0f, 1.0f, &seed);
    h[0] = NAN;
    h[1] = -0.0f;
    h[2] = 0.0f;
    h[3] = INFINITY;
    h[4] = -INFINITY;
    struct buf x = buf_new_dt(n, dt, h), y = buf_new_dt(n, dt, NULL);
    struct buf dy = buf_rand_dt(n, dt, -1.0f, 1.0f);
    free(h);
    /* selections: exact */
    const struct tol exact = {0.0, 0.0};
    ref->relu_forward(ref, n, dt, R(x), R(y));
    cand->relu_forward(cand, n, dt, C(x), C(y));
    compare_buf(op_dt("relu_forward", dt, row, sizeof row), what, &y, exact);
    ref->relu_backward(ref, n, dt, R(y), R(dy), R(dy)); /* in place, as the ConvNet calls it */
    cand->relu_backward(cand, n, dt, C(y), C(dy), C(dy));
    compare_buf(op_dt("relu_backward", dt, row, sizeof row), "in place", &dy, exact);
    ref->relu_forward(ref, n, dt, R(x), R(x));
    cand->relu_forward(cand, n, dt, C(x), C(x));
    compare_buf(op_dt("relu_forward", dt, row, sizeof row), "in place", &x, exact);
    buf_free(&x);
    buf_free(&y);
    buf_free(&dy);
    status_ok("relu");
}

static void pool_check(int n, int c, int h, int kernel, int stride, int ties, enum dtype dt)
{
    struct pool2d_shape ps = {.n = n, .c = c, .h = h, .w = h, .kernel = kernel, .stride = stride};
    CHECK(pool2d_shape_init(&ps) == 0, "pool: %s", error_get());
    char shape[80], row[80];
    snprintf(shape, sizeof shape, "(%d,%d,%d,%d) k%d s%d%s", n, c, h, h, kernel, stride,
             ties ? " ties+nan" : "");
    const size_t nx = (size_t)n * c * h * h, ny = (size_t)n * c * ps.p * ps.q;
    float *hx = malloc(nx * sizeof(float));
    test_fill_uniform(hx, nx, -1.0f, 1.0f, &seed);
    if (ties) { /* few distinct values: the first maximum must win; some NaN windows */
        for (size_t i = 0; i < nx; i++)
            hx[i] = floorf(hx[i] * 2.0f);
        for (size_t i = 7; i < nx; i += 97)
            hx[i] = NAN;
    }
    struct buf x = buf_new_dt(nx, dt, hx), y = buf_new_dt(ny, dt, NULL);
    free(hx);
    struct buf am = buf_new(ny * 4, NULL), dy = buf_rand_dt(ny, dt, -1.0f, 1.0f);
    struct buf dx = buf_rand_dt(nx, dt, 5.0f, 6.0f); /* garbage: backward must overwrite it */
    buf_4d(&x, n, c, h, h, dt), buf_4d(&dx, n, c, h, h, dt);
    buf_4d(&y, n, c, ps.p, ps.q, dt), buf_4d(&dy, n, c, ps.p, ps.q, dt);
    buf_4d(&am, n, c, ps.p, ps.q, dt); /* argmax: in the layout of dt, as y */
    ref->maxpool2d_forward(ref, &ps, dt, R(x), R(y), am.r);
    cand->maxpool2d_forward(cand, &ps, dt, C(x), C(y), am.c);
    /* selection of one input: exact, argmax identical */
    compare_buf(op_dt("maxpool2d_forward", dt, row, sizeof row), shape, &y,
                (struct tol){0.0, 0.0});
    int32_t *ag = buf_cand(&am);
    size_t diff = 0;
    for (size_t i = 0; i < ny; i++)
        diff += ag[i] != ((int32_t *)am.r)[i];
    CHECK(diff == 0, "maxpool2d_forward %s %s: %zu of %zu argmax differ", dt_name(dt), shape,
          diff, ny);
    record(op_dt("maxpool2d_forward argmax", dt, row, sizeof row), (double)diff, 0.0,
           diff ? INFINITY : 0.0);
    free(ag);
    ref->maxpool2d_backward(ref, &ps, dt, R(dy), am.r, R(dx));
    cand->maxpool2d_backward(cand, &ps, dt, C(dy), am.c, C(dx));
    /* the same float additions in the same (output) order, one rounding: exact */
    compare_buf(op_dt("maxpool2d_backward", dt, row, sizeof row), shape, &dx,
                (struct tol){0.0, 0.0});
    struct buf *all[] = {&x, &y, &am, &dy, &dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok("maxpool");
}

static void test_pool(void)
{
    for (int d = DT_F32; d <= DT_BF16; d++) {
        const enum dtype dt = (enum dtype)d;
        pool_check(16, 16, 28, 2, 2, 0, dt); /* ConvNet */
        pool_check(16, 32, 14, 2, 2, 1, dt);
        pool_check(4, 8, 9, 3, 2, 1, dt); /* overlapping windows, floor mode */
        pool_check(2, 3, 8, 2, 3, 0, dt); /* gaps between windows */
        pool_check(3, 5, 7, 2, 2, 1, dt); /* odd input: the last row and column are dropped */
        if (pair == PAIR_CPU_CUDA) /* 4.3M inputs: beyond one pass of the grid */
            pool_check(64, 64, 33, 3, 2, 0, dt);
    }
}

/* ------------------------------------------------------------------ linear */

static void linear_check(int n, int in, int out, int bias, enum dtype dt)
{
    char shape[64], row[80];
    snprintf(shape, sizeof shape, "n%d in%d out%d%s", n, in, out, bias ? "" : " no bias");
    struct buf x = buf_rand_dt((size_t)n * in, dt, -1.0f, 1.0f);
    struct buf w = buf_rand_dt((size_t)out * in, dt, -0.1f, 0.1f);
    struct buf b = buf_rand_dt((size_t)out, dt, -0.5f, 0.5f);
    struct buf dy = buf_rand_dt((size_t)n * out, dt, -1.0f, 1.0f);
    struct buf y = buf_new_dt((size_t)n * out, dt, NULL), dx = buf_new_dt((size_t)n * in, dt, NULL);
    struct buf dw = buf_new_dt((size_t)out * in, dt, NULL), db = buf_new_dt((size_t)out, dt, NULL);
    ref->linear_forward(ref, n, in, out, dt, R(x), R(w), bias ? R(b) : NULL, R(y));
    cand->linear_forward(cand, n, in, out, dt, C(x), C(w), bias ? C(b) : NULL, C(y));
    ref->linear_backward(ref, n, in, out, dt, R(x), R(w), R(dy), R(dx), R(dw),
                         bias ? R(db) : NULL);
    cand->linear_backward(cand, n, in, out, dt, C(x), C(w), C(dy), C(dx), C(dw),
                          bias ? C(db) : NULL);
    /* fp32 GEMMs (no TF32 on either side; fp32 accumulation of half products with
     * CUBLAS_COMPUTE_32F, the bias added inside the GEMM on both sides) summing up to 1568
     * products in different orders: ~sqrt(K) ulp of the range, 1e-5 of the largest
     * |output| is >10x that; a half output one more rounding (HALF_ULP).  This holds only
     * while cuBLAS adds no split-K partial sums in the half type: on an H200 it did by
     * default (fp16 5.8e-4 off at an output of -0.005, bf16 0.01), until the backend
     * disallowed it (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION).  The CPU backend
     * runs each GEMM on the calling thread: equal. */
    const double hu = HALF_ULP(dt);
#define GEMM_TOL(b) tol_split_free(1e-5 * max_abs_of(R(b), NF(b)) + 1e-7, hu)
    compare_buf(op_dt("linear_forward", dt, row, sizeof row), shape, &y, GEMM_TOL(y));
    compare_buf(op_dt("linear_backward dx", dt, row, sizeof row), shape, &dx, GEMM_TOL(dx));
    compare_buf(op_dt("linear_backward dw", dt, row, sizeof row), shape, &dw, GEMM_TOL(dw));
    if (bias) /* column sums in double on both sides, in row order: 1 ulp */
        compare_buf(op_dt("linear_backward db", dt, row, sizeof row), shape, &db,
                    tol_split_free(0.0, ULP + hu));
    cand->linear_backward(cand, n, in, out, dt, C(x), C(w), C(dy), NULL, C(dw), NULL);
    compare_buf(op_dt("linear_backward dw", dt, row, sizeof row), "dx NULL", &dw, GEMM_TOL(dw));
#undef GEMM_TOL
    struct buf *all[] = {&x, &w, &b, &dy, &y, &dx, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok("linear");
}

static void test_linear(void)
{
    for (int d = DT_F32; d <= DT_BF16; d++) {
        const enum dtype dt = (enum dtype)d;
        linear_check(100, 1568, 10, 1, dt); /* ConvNet fc */
        linear_check(128, 512, 10, 1, dt);  /* ResNet fc */
        linear_check(3, 7, 5, 0, dt);
        if (pair == PAIR_CPU_CUDA) /* 4.2M-element input gradient */
            linear_check(2048, 2049, 33, 1, dt);
    }
}

/* ------------------------------------------------------------------ loss, metric */

static void xent_check(int n, int c, int bad_label)
{
    char shape[64];
    snprintf(shape, sizeof shape, "n%d c%d%s", n, c, bad_label ? " bad label" : "");
    struct buf logits = buf_rand((size_t)n * c, -4.0f, 4.0f);
    int32_t *lab = malloc((size_t)n * sizeof *lab);
    for (int i = 0; i < n; i++)
        lab[i] = (int32_t)(test_uniform(&seed) * c);
    if (bad_label)
        lab[n / 2] = c; /* out of range: NaN loss, plain softmax row */
    struct buf labels = buf_new((size_t)n * 4, lab);
    free(lab);
    struct buf d = buf_new((size_t)n * c * 4, NULL);
    const float lr = ref->softmax_xent(ref, n, c, R(logits), labels.r, R(d));
    const float lc = cand->softmax_xent(cand, n, c, C(logits), labels.c, C(d));
    /* per-row terms in double from expf (glibc < 1 ulp, CUDA <= 2 ulp): ~3 ulp of the
     * exp sum, ~4e-7 absolute in log(sum); 1e-6 of the loss (~2.3).  The CPU backend
     * computes the loss on the calling thread: equal. */
    compare("softmax_xent loss", shape, &lc, &lr, 1, tol_split_free(0.0, 1e-6));
    CHECK(!bad_label || isnan(lc), "softmax_xent %s: loss %g, want NaN", shape, (double)lc);
    /* dlogits = expf(..) / (sum * n): the expf ulps again (~3.5 ulp relative), and at the
     * label minus 1/n, where that error is up to 3.5 ulp of 1/n absolute: 8 ulp of both */
    compare_buf("softmax_xent dlogits", shape, &d, tol_split_free(8 * ULP / n, 8 * ULP));
    const float lc2 = cand->softmax_xent(cand, n, c, C(logits), labels.c, NULL);
    CHECK(lc2 == lc || (isnan(lc2) && isnan(lc)), "softmax_xent without dlogits: %g vs %g",
          (double)lc2, (double)lc);
    /* the loss left in device memory: the same kernel, the same value as the host read */
    struct buf loss = buf_new(sizeof(float), NULL), d2 = buf_new((size_t)n * c * 4, NULL);
    ref->softmax_xent_dev(ref, n, c, R(logits), labels.r, R(d2), R(loss));
    cand->softmax_xent_dev(cand, n, c, C(logits), labels.c, C(d2), C(loss));
    compare_buf("softmax_xent_dev loss", shape, &loss, tol_split_free(0.0, 1e-6));
    compare_buf("softmax_xent_dev dlogits", shape, &d2, tol_split_free(8 * ULP / n, 8 * ULP));
    CHECK(!bad_label || isnan(R(loss)[0]), "softmax_xent_dev %s: loss %g, want NaN", shape,
          (double)R(loss)[0]);
    buf_free(&loss);
    buf_free(&d2);
    buf_free(&logits);
    buf_free(&labels);
    buf_free(&d);
    status_ok("softmax_xent");
}

static void test_count_correct(void)
{
    const int n = 257, c = 10;
    float *h = malloc((size_t)n * c * sizeof(float));
    test_fill_uniform(h, (size_t)n * c, -2.0f, 2.0f, &seed);
    for (int i = 0; i < n * c; i++)
        h[i] = floorf(h[i]); /* ties: the first maximum counts */
    h[3 * c] = NAN;          /* a NaN first element, and one later */
    h[5 * c + 4] = NAN;
    int32_t *lab = malloc((size_t)n * sizeof *lab);
    for (int i = 0; i < n; i++)
        lab[i] = (int32_t)(test_uniform(&seed) * c);
    struct buf logits = buf_new((size_t)n * c * 4, h), labels = buf_new((size_t)n * 4, lab);
    const int cr = ref->count_correct(ref, n, c, R(logits), labels.r);
    const int cc = cand->count_correct(cand, n, c, C(logits), labels.c);
    CHECK(cr == cc, "count_correct: %s %d, %s %d", cand->name, cc, ref->name, cr);
    record("count_correct", fabs((double)cc - cr), cr, cc == cr ? 0.0 : INFINITY);
    free(h);
    free(lab);
    buf_free(&logits);
    buf_free(&labels);
    status_ok("count_correct");
}

/* ------------------------------------------------------------------ elementwise, optimizer */

static void test_scale(void)
{
    /* one multiply: exact */
    /* many pieces per thread; fewer pieces than threads; on cuda beyond one grid pass */
    const size_t sizes[] = {500001, 7, pair == PAIR_CPU_CUDA ? big_n() : 0};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && sizes[k]; k++) {
        const size_t n = sizes[k];
        struct buf x = buf_rand(n, -3.0f, 3.0f), y = buf_new(n * 4, NULL);
        ref->scale(ref, n, 0.37f, R(x), R(y));
        cand->scale(cand, n, 0.37f, C(x), C(y));
        compare_buf("scale", "out of place", &y, (struct tol){0.0, 0.0});
        ref->scale(ref, n, -1.0f / 3.0f, R(x), R(x));
        cand->scale(cand, n, -1.0f / 3.0f, C(x), C(x));
        compare_buf("scale", "in place", &x, (struct tol){0.0, 0.0});
        buf_free(&x);
        buf_free(&y);
    }
    status_ok("scale");
}

static void test_sgd(void)
{
    const size_t n = pair == PAIR_CPU_CUDA ? big_n() : 100003;
    struct sgd_case {
        const char *name;
        float lr, momentum, dampening, wd;
        int nesterov;
    } cases[] = {
        {"plain", 0.05f, 0.0f, 0.0f, 0.0f, 0},
        {"momentum, weight decay", 0.05f, 0.9f, 0.0f, 1e-3f, 0},
        {"nesterov", 0.01f, 0.9f, 0.0f, 1e-4f, 1},
        {"dampening", 0.1f, 0.8f, 0.25f, 0.0f, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const struct sgd_case *s = &cases[k];
        struct buf p = buf_rand(n, -1.0f, 1.0f), g = buf_rand(n, -1.0f, 1.0f);
        struct buf m = buf_new(n * 4, NULL);
        for (int step = 0; step < 3; step++) {
            float *buf_r = s->momentum != 0.0f ? R(m) : NULL;
            float *buf_c = s->momentum != 0.0f ? C(m) : NULL;
            ref->sgd_step(ref, n, R(p), R(g), buf_r, s->lr, s->momentum, s->dampening, s->wd,
                          s->nesterov, step == 0);
            cand->sgd_step(cand, n, C(p), C(g), buf_c, s->lr, s->momentum, s->dampening, s->wd,
                           s->nesterov, step == 0);
        }
        /* km_sgd_update on both without contraction: exact; 2 ulp of |p| allowed */
        compare_buf("sgd_step param", s->name, &p,
                    tol_split_free(2 * ULP * max_abs_of(R(p), n), 0.0));
        if (s->momentum != 0.0f)
            compare_buf("sgd_step momentum", s->name, &m,
                        tol_split_free(2 * ULP * max_abs_of(R(m), n), 0.0));
        buf_free(&p);
        buf_free(&g);
        buf_free(&m);
    }
    status_ok("sgd_step");
}

static void test_amp(void)
{
    const size_t n = 200000;
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { /* magnitudes from 2^-30 to 2^20: subnormal fp16 to inf */
        const double e = -30.0 + 50.0 * test_uniform(&seed);
        h[i] = (float)(pow(2.0, e) * (test_uniform(&seed) < 0.5 ? -1.0 : 1.0));
    }
    h[0] = NAN;
    h[1] = INFINITY;
    h[2] = 65504.0f;
    h[3] = 65520.0f; /* the fp16 tie that rounds to inf */
    struct buf x = buf_new(n * 4, h), y = buf_new(n * 4, NULL);
    for (int dt = AMP_F16; dt <= AMP_BF16; dt++) {
        ref->round_amp(ref, n, (enum amp_dtype)dt, R(x), R(y));
        cand->round_amp(cand, n, (enum amp_dtype)dt, C(x), C(y));
        /* pure bit manipulation in kernel_math.h: exact, bit for bit */
        float *g = buf_cand(&y);
        CHECK(memcmp(g, y.r, n * 4) == 0, "round_amp %s: bits differ",
              dt == AMP_F16 ? "fp16" : "bf16");
        compare(dt == AMP_F16 ? "round_amp fp16" : "round_amp bf16", "2^-30..2^20", g, R(y), n,
                (struct tol){0.0, 0.0});
        free(g);
    }
    buf_free(&x);
    buf_free(&y);
    free(h);
    status_ok("round_amp");
}

/* every conversion between the three types, on the same wide range of magnitudes: the CPU
 * rounds in software (kernel_math.h), the CUDA kernels with the hardware conversions;
 * both round to nearest even, so exact */
static void test_cast(void)
{
    const size_t n = big_n();
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        const double e = -30.0 + 50.0 * test_uniform(&seed);
        h[i] = (float)(pow(2.0, e) * (test_uniform(&seed) < 0.5 ? -1.0 : 1.0));
    }
    h[0] = INFINITY;
    h[1] = -65520.0f;
    h[2] = 0x1p-25f;  /* the fp16 tie between 0 and the smallest subnormal */
    h[3] = NAN;
    for (int f = DT_F32; f <= DT_BF16; f++)
        for (int t = DT_F32; t <= DT_BF16; t++) {
            const enum dtype from = (enum dtype)f, to = (enum dtype)t;
            struct buf src = buf_new_dt(n, from, h), dst = buf_new_dt(n, to, NULL);
            ref->cast(ref, n, from, R(src), to, R(dst));
            cand->cast(cand, n, from, C(src), to, C(dst));
            char row[64];
            snprintf(row, sizeof row, "cast %s->%s", dt_name(from), dt_name(to));
            compare_buf(row, "2^-30..2^20, inf, nan", &dst, (struct tol){0.0, 0.0});
            buf_free(&src);
            buf_free(&dst);
        }
    free(h);
    status_ok("cast");
}

/* cast over many tensors at once (autocast's weight gradients of a DDP bucket back to
 * fp32): more than one launch's list on cuda (KERN_CAST_LIST is 32), an empty tensor, one
 * beyond a grid pass; every type to every other, exact as cast */
static void test_cast_list(void)
{
    enum { COUNT = 37 };
    for (int f = DT_F32; f <= DT_BF16; f++)
        for (int t = DT_F32; t <= DT_BF16; t++) {
            const enum dtype from = (enum dtype)f, to = (enum dtype)t;
            if (from == to)
                continue;
            struct buf src[COUNT], dst[COUNT];
            size_t numels[COUNT];
            const void *rs[COUNT], *cs[COUNT];
            void *rd[COUNT], *cd[COUNT];
            for (int i = 0; i < COUNT; i++) {
                numels[i] = i == 3 ? 0 : i == 30 ? big_n() : (size_t)(i * 1543 % 4001) + 1;
                src[i] = buf_rand_dt(numels[i], from, -7e4f, 7e4f);
                dst[i] = buf_new_dt(numels[i], to, NULL);
                rs[i] = R(src[i]), cs[i] = C(src[i]);
                rd[i] = R(dst[i]), cd[i] = C(dst[i]);
            }
            ref->cast_list(ref, COUNT, from, rs, to, rd, numels, NULL);
            cand->cast_list(cand, COUNT, from, cs, to, cd, numels, NULL);
            char row[64];
            snprintf(row, sizeof row, "cast_list %s->%s", dt_name(from), dt_name(to));
            for (int i = 0; i < COUNT; i++) {
                compare_buf(row, "37 tensors, +-7e4", &dst[i], (struct tol){0.0, 0.0});
                buf_free(&src[i]);
                buf_free(&dst[i]);
            }
        }
    status_ok("cast_list");
}

/* cast_list with 4-D shapes (autocast's conv weights, and their gradients back): each
 * 4-D tensor read in the layout of from and written in that of to (buf_4d compares them
 * in NCHW); flat ones and a 1x1 filter as they are; exact as cast */
static void test_cast_list_4d(void)
{
    enum { COUNT = 5 };
    static const int shapes[COUNT][4] = {
        {16, 3, 5, 5}, {0, 0, 0, 0}, {64, 32, 3, 3}, {8, 4, 1, 1}, {7, 1, 3, 3}};
    for (int f = DT_F32; f <= DT_BF16; f++)
        for (int t = DT_F32; t <= DT_BF16; t++) {
            const enum dtype from = (enum dtype)f, to = (enum dtype)t;
            if (from == to)
                continue;
            struct buf src[COUNT], dst[COUNT];
            size_t numels[COUNT];
            const void *rs[COUNT], *cs[COUNT];
            void *rd[COUNT], *cd[COUNT];
            int dims[4 * COUNT];
            for (int i = 0; i < COUNT; i++) {
                const int *d = shapes[i];
                numels[i] = d[0] ? (size_t)d[0] * d[1] * d[2] * d[3] : 1001;
                src[i] = buf_rand_dt(numels[i], from, -7e4f, 7e4f);
                dst[i] = buf_new_dt(numels[i], to, NULL);
                if (d[0]) {
                    buf_4d(&src[i], d[0], d[1], d[2], d[3], from);
                    buf_4d(&dst[i], d[0], d[1], d[2], d[3], to);
                }
                memcpy(dims + 4 * i, d, sizeof shapes[i]);
                rs[i] = R(src[i]), cs[i] = C(src[i]);
                rd[i] = R(dst[i]), cd[i] = C(dst[i]);
            }
            ref->cast_list(ref, COUNT, from, rs, to, rd, numels, dims);
            cand->cast_list(cand, COUNT, from, cs, to, cd, numels, dims);
            char row[64];
            snprintf(row, sizeof row, "cast_list 4-D %s->%s", dt_name(from), dt_name(to));
            for (int i = 0; i < COUNT; i++) {
                compare_buf(row, "conv weights, a flat tensor", &dst[i], (struct tol){0.0, 0.0});
                buf_free(&src[i]);
                buf_free(&dst[i]);
            }
        }
    status_ok("cast_list 4-D");
}

/* convert between every pair of layouts and types, against the CPU's (which keeps NCHW
 * itself but converts either way): exact as cast.  Here the candidate's buffers are raw
 * (not buf_4d): the rows compare the layouts themselves, in each backend's own bytes. */
static void test_convert(void)
{
    static const int shapes[][4] = {{3, 5, 4, 6}, {2, 64, 7, 7}, {4, 1, 5, 5}, {5, 8, 1, 1}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int f = DT_F32; f <= DT_BF16; f++)
            for (int t = DT_F32; t <= DT_BF16; t++)
                for (int lf = 0; lf < 2; lf++)
                    for (int lt = 0; lt < 2; lt++) {
                        const enum dtype from = (enum dtype)f, to = (enum dtype)t;
                        const int *d = shapes[k];
                        const size_t n = (size_t)d[0] * d[1] * d[2] * d[3];
                        struct buf src = buf_rand_dt(n, from, -7e4f, 7e4f);
                        struct buf dst = buf_new_dt(n, to, NULL);
                        /* the reference's input in layout lf: the CPU's own convert */
                        float *h = malloc(n * sizeof *h);
                        ref->convert(ref, d, from, LAYOUT_NCHW, R(src), from,
                                     (enum layout)lf, h);
                        memcpy(R(src), h, n * sizeof *h);
                        buf_sync(&src);
                        free(h);
                        ref->convert(ref, d, from, (enum layout)lf, R(src), to, (enum layout)lt,
                                     R(dst));
                        cand->convert(cand, d, from, (enum layout)lf, C(src), to,
                                      (enum layout)lt, C(dst));
                        char row[64], what[64];
                        snprintf(row, sizeof row, "convert %s->%s", dt_name(from), dt_name(to));
                        snprintf(what, sizeof what, "(%d,%d,%d,%d) %s->%s", d[0], d[1], d[2],
                                 d[3], lf ? "nhwc" : "nchw", lt ? "nhwc" : "nchw");
                        compare_buf(row, what, &dst, (struct tol){0.0, 0.0});
                        buf_free(&src);
                        buf_free(&dst);
                    }
    status_ok("convert");
}

/* GradScaler's unscale over many tensors at once: more than one launch's list on cuda
 * (KERN_UNSCALE_LIST is 32), an empty tensor, one beyond a grid pass on the cuda pair;
 * one multiply per element (exact) and the one flag */
static void test_unscale(void)
{
    enum { COUNT = 41 };
    struct buf g[COUNT];
    size_t numels[COUNT];
    float *rp[COUNT], *cp[COUNT];
    struct buf flag = buf_new(sizeof(float), NULL);
    for (int bad = 0; bad < 3; bad++) {
        for (int i = 0; i < COUNT; i++) {
            numels[i] = i == 5 ? 0 : i == 7 ? big_n() : (size_t)(i * 997 % 3001) + 1;
            float *h = malloc((numels[i] ? numels[i] : 1) * sizeof *h);
            test_fill_uniform(h, numels[i], -1e4f, 1e4f, &seed);
            if (bad == 1 && i == COUNT - 1)
                h[numels[i] - 1] = INFINITY; /* the last tensor of the second list */
            if (bad == 2 && i == 7)
                h[numels[i] - 1] = NAN; /* the long tensor's last element */
            g[i] = buf_new(numels[i] * 4, h);
            free(h);
            rp[i] = R(g[i]);
            cp[i] = C(g[i]);
        }
        float found_r = -1.0f, found_c = -1.0f;
        ref->unscale(ref, COUNT, rp, numels, 1.0f / 65536.0f, R(flag));
        cand->unscale(cand, COUNT, cp, numels, 1.0f / 65536.0f, C(flag));
        found_r = R(flag)[0];
        cand->download(cand, &found_c, C(flag), sizeof found_c);
        CHECK(found_r == (bad != 0 ? 1.0f : 0.0f) && found_c == found_r,
              "unscale case %d: %s found_inf %g, %s %g", bad, cand->name, (double)found_c,
              ref->name, (double)found_r);
        record("unscale found_inf", fabs((double)found_c - found_r), 1.0,
               found_c == found_r ? 0.0 : INFINITY);
        for (int i = 0; i < COUNT; i++) {
            compare_buf("unscale", "values of 41 tensors", &g[i], (struct tol){0.0, 0.0});
            buf_free(&g[i]);
        }
    }
    buf_free(&flag);
    status_ok("unscale");
}

/* ------------------------------------------------------------------ ResNet18's ops */

/* the residual add, out of place and in place (y aliasing a, as the blocks call it) */
static void test_add(enum dtype dt)
{
    const size_t n = big_n();
    char row[80];
    float *h = malloc(n * sizeof(float));
    test_fill_uniform(h, n, -4.0f, 4.0f, &seed);
    h[0] = NAN;
    h[1] = INFINITY;
    h[2] = 60000.0f; /* fp16: 60000 + 60000 overflows to inf */
    struct buf a = buf_new_dt(n, dt, h);
    test_fill_uniform(h, n, -4.0f, 4.0f, &seed);
    h[1] = -INFINITY; /* inf + -inf = nan */
    h[2] = 60000.0f;
    struct buf b = buf_new_dt(n, dt, h), y = buf_new_dt(n, dt, NULL);
    free(h);
    /* one float addition rounded once to dt on both sides: exact */
    ref->add(ref, n, dt, R(a), R(b), R(y));
    cand->add(cand, n, dt, C(a), C(b), C(y));
    compare_buf(op_dt("add", dt, row, sizeof row), "with nan/inf", &y, (struct tol){0.0, 0.0});
    ref->add(ref, n, dt, R(a), R(b), R(a));
    cand->add(cand, n, dt, C(a), C(b), C(a));
    compare_buf(op_dt("add", dt, row, sizeof row), "in place", &a, (struct tol){0.0, 0.0});
    buf_free(&a);
    buf_free(&b);
    buf_free(&y);
    status_ok("add");
}

static void adaptive_pool_check(int n, int c, int h, int w, int p, int q, enum dtype dt)
{
    char shape[80], row[80];
    snprintf(shape, sizeof shape, "(%d,%d,%d,%d) to %dx%d", n, c, h, w, p, q);
    const size_t planes = (size_t)n * c, nx = planes * h * w, ny = planes * p * q;
    struct buf x = buf_rand_dt(nx, dt, -2.0f, 2.0f), y = buf_new_dt(ny, dt, NULL);
    struct buf dy = buf_rand_dt(ny, dt, -1.0f, 1.0f);
    struct buf dx = buf_rand_dt(nx, dt, 5.0f, 6.0f); /* garbage: backward must overwrite it */
    buf_4d(&x, n, c, h, w, dt), buf_4d(&dx, n, c, h, w, dt);
    buf_4d(&y, n, c, p, q, dt), buf_4d(&dy, n, c, p, q, dt);
    ref->adaptive_avgpool2d_forward(ref, n, c, h, w, p, q, dt, R(x), R(y));
    cand->adaptive_avgpool2d_forward(cand, n, c, h, w, p, q, dt, C(x), C(y));
    /* the same float additions in the same (row-major) order, one division, one rounding:
     * exact */
    compare_buf(op_dt("adaptive_avgpool2d_forward", dt, row, sizeof row), shape, &y,
                (struct tol){0.0, 0.0});
    ref->adaptive_avgpool2d_backward(ref, n, c, h, w, p, q, dt, R(dy), R(dx));
    cand->adaptive_avgpool2d_backward(cand, n, c, h, w, p, q, dt, C(dy), C(dx));
    /* each element the same quotients added in output order: exact */
    compare_buf(op_dt("adaptive_avgpool2d_backward", dt, row, sizeof row), shape, &dx,
                (struct tol){0.0, 0.0});
    struct buf *all[] = {&x, &y, &dy, &dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
    status_ok("adaptive_avgpool2d");
}

static void test_adaptive_pool(void)
{
    for (int d = DT_F32; d <= DT_BF16; d++) {
        const enum dtype dt = (enum dtype)d;
        adaptive_pool_check(16, 512, 4, 4, 1, 1, dt); /* ResNet18 on CIFAR: (1,1) of 4x4 */
        adaptive_pool_check(3, 7, 32, 32, 1, 1, dt);  /* one window of 1024 */
        adaptive_pool_check(2, 5, 7, 9, 3, 4, dt);    /* overlapping, uneven windows */
        adaptive_pool_check(2, 3, 5, 6, 10, 12, dt);  /* more outputs than inputs */
        if (pair == PAIR_CPU_CUDA) /* 4.7M inputs: beyond one pass of the grid */
            adaptive_pool_check(64, 72, 32, 32, 2, 2, dt);
    }
}

static void test_adam(void)
{
    const size_t n = pair == PAIR_CPU_CUDA ? big_n() : 100003;
    struct adam_case {
        const char *name;
        double lr, beta1, beta2, eps, wd;
    } cases[] = {
        {"defaults", 1e-3, 0.9, 0.999, 1e-8, 0.0},
        {"weight decay, lr 0.01", 0.01, 0.9, 0.999, 1e-8, 1e-2},
        {"betas 0.5/0.9, eps 1e-3", 3e-4, 0.5, 0.9, 1e-3, 0.0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const struct adam_case *a = &cases[k];
        struct buf p = buf_rand(n, -1.0f, 1.0f), g = buf_rand(n, -1e-3f, 1e-3f);
        struct buf m = buf_new(n * 4, NULL), v = buf_new(n * 4, NULL);
        for (long long step = 1; step <= 3; step++) {
            ref->adam_step(ref, n, R(p), R(g), R(m), R(v), a->lr, a->beta1, a->beta2, a->eps,
                           a->wd, step);
            cand->adam_step(cand, n, C(p), C(g), C(m), C(v), a->lr, a->beta1, a->beta2,
                            a->eps, a->wd, step);
        }
        /* km_adam_update on both without contraction (IEEE sqrt and division on both) and
         * km_adam_scalars on the host: exact; 2 ulp of the range allowed, as for SGD */
        compare_buf("adam_step param", a->name, &p,
                    tol_split_free(2 * ULP * max_abs_of(R(p), n), 0.0));
        compare_buf("adam_step exp_avg", a->name, &m,
                    tol_split_free(2 * ULP * max_abs_of(R(m), n), 0.0));
        compare_buf("adam_step exp_avg_sq", a->name, &v,
                    tol_split_free(2 * ULP * max_abs_of(R(v), n), 0.0));
        buf_free(&p);
        buf_free(&g);
        buf_free(&m);
        buf_free(&v);
    }
    status_ok("adam_step");
}

/* ------------------------------------------------------------------ failure reporting */

/* cpu-vs-cuda only: a slot that fails on the device must show in its status slot */
/* status and stream: a clean backend reports 0; the CPU backend has no stream (NULL), a CUDA
 * backend the stream its slots are queued on (not NULL).  Recorded as a row so the
 * coverage check sees both slots. */
static void test_status_stream(void)
{
    int ok = ref->status(ref) == 0 && cand->status(cand) == 0;
    CHECK(ok, "a fresh backend's status is not 0: %s", error_get());
    int want_stream = pair == PAIR_CPU_CUDA;
    CHECK(ref->stream(ref) == NULL, "the CPU reference has a stream");
    CHECK((cand->stream(cand) != NULL) == want_stream, "candidate %s: stream %p", cand->name,
          cand->stream(cand));
    ok = ok && (cand->stream(cand) != NULL) == want_stream;
    record("status/stream", 0.0, 0.0, ok ? 0.0 : 2.0);
    /* how each backend stores the types: cpu every one as fp32, cuda halves in 2 bytes */
    const size_t half = pair == PAIR_CPU_CUDA ? 2 : 4;
    const int sizes_ok = cand->dtype_size(cand, DT_F32) == 4 &&
                         cand->dtype_size(cand, DT_F16) == half &&
                         cand->dtype_size(cand, DT_BF16) == half;
    CHECK(sizes_ok, "candidate %s: dtype_size %zu %zu %zu, want 4 %zu %zu", cand->name,
          cand->dtype_size(cand, DT_F32), cand->dtype_size(cand, DT_F16),
          cand->dtype_size(cand, DT_BF16), half, half);
    record("dtype_size", 0.0, 0.0, sizes_ok ? 0.0 : 2.0);
}

static void test_failure_is_reported(void)
{
    struct backend *bad = backend_cuda_create(0);
    CHECK(bad != NULL, "second backend: %s", error_get());
    if (!bad)
        return;
    CHECK(bad->status(bad) == 0, "fresh backend: %s", error_get());
    /* a stride cuDNN refuses (documented BAD_PARAM): the slot cannot return an error, the
     * status must */
    struct conv2d_shape cs = {.n = 1, .c = 1, .h = 8, .w = 8, .k = 1, .r = 3, .s = 3,
                              .pad = 0, .stride = 0, .p = 6, .q = 6};
    float *x = bad->alloc(bad, 64 * 4), *w = bad->alloc(bad, 9 * 4), *y = bad->alloc(bad, 64 * 4);
    int32_t *lab = bad->alloc(bad, 4);
    bad->conv2d_forward(bad, &cs, DT_F32, x, w, NULL, y);
    CHECK(bad->status(bad) == -1, "a refused convolution left the status clean");
    const char *msg = error_get();
    CHECK(strstr(msg, "conv2d_forward") && !strchr(msg, '\n'),
          "status message does not name the op on one line: '%s'", msg);
    printf("deliberate failure reported as: %s\n", msg);
    const float loss = bad->softmax_xent(bad, 1, 2, y, lab, NULL);
    CHECK(isnan(loss), "a failed backend's loss is %g, want NaN", (double)loss);
    bad->free(bad, x);
    bad->free(bad, w);
    bad->free(bad, y);
    bad->free(bad, lab);
    bad->destroy(bad);
    status_ok("another backend's failure"); /* failures stay with their backend */
}

/* ------------------------------------------------------------------ coverage, table */

/* Every slot of struct backend but destroy (which ends each run) has a row whose op names
 * it: the slot's name as a word of the op, words split at spaces and slashes
 * ("conv2d_backward dw (find)", "copy/zero/synchronize").  A new slot needs its test. */
static void check_coverage(void)
{
    static const char *const slots[] = {
        "alloc", "free", "upload", "download", "copy", "zero", "synchronize", "status", "stream",
        "conv2d_forward", "conv2d_backward", "batchnorm_stats", "batchnorm_gather_stats",
        "batchnorm_elemt", "batchnorm_forward_eval", "batchnorm_backward_reduce",
        "batchnorm_backward_elemt", "relu_forward", "relu_backward", "maxpool2d_forward",
        "maxpool2d_backward", "linear_forward", "linear_backward", "softmax_xent",
        "softmax_xent_dev",
        "count_correct", "scale", "cast", "cast_list", "convert", "round_amp", "unscale",
        "sgd_step",
        "dtype_size",
        "adaptive_avgpool2d_forward", "adaptive_avgpool2d_backward", "add", "adam_step",
    };
    for (size_t s = 0; s < sizeof slots / sizeof slots[0]; s++) {
        const size_t len = strlen(slots[s]);
        int found = 0;
        for (int i = 0; i < nrows && !found; i++) {
            const char *word = rows[i].op;
            for (;;) {
                const size_t wlen = strcspn(word, " /");
                if (wlen == len && strncmp(word, slots[s], len) == 0)
                    found = 1;
                if (found || !word[wlen])
                    break;
                word += wlen + 1;
            }
        }
        CHECK(found, "slot %s was never compared", slots[s]);
    }
}

static void print_table(FILE *f)
{
    fprintf(f, "%-40s %12s %12s %10s %s\n", "op", "max|cand-ref|", "max|ref|", "err/tol",
            "result");
    for (int i = 0; i < nrows; i++)
        fprintf(f, "%-40s %12.3g %12.3g %10.3g %s\n", rows[i].op, rows[i].max_abs, rows[i].ref,
                rows[i].worst, rows[i].failed ? "FAILED" : "OK");
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    pair_name = argc > 1 ? argv[1] : getenv("DDPPROF_BACKEND_OPS_PAIR");
    if (!pair_name || !*pair_name)
        pair_name = "cpu1-vs-cpuN";
    int fast_pair = 0;
    if (strcmp(pair_name, "cpu1-vs-cpuN") == 0) {
        pair = PAIR_CPU_SPLIT;
    } else if (strcmp(pair_name, "cpuref-vs-cpufast") == 0) {
        pair = PAIR_CPU_SPLIT; /* the same rules, the convolutions' algorithms differ */
        fast_pair = 1;
    } else if (strcmp(pair_name, "cpu-vs-cuda") == 0) {
        pair = PAIR_CPU_CUDA;
    } else {
        fprintf(stderr,
                "test_backend_ops: unknown pair '%s': use cpu1-vs-cpuN, cpuref-vs-cpufast or "
                "cpu-vs-cuda\n",
                pair_name);
        return 2;
    }

    if (pair == PAIR_CPU_CUDA) {
        if (!cuda_build_enabled())
            test_skip("this build has no CUDA (toolkit not found or -DDDPPROF_CUDA=OFF)");
        if (cuda_device_count() == 0)
            test_skip("no CUDA device (no GPU or no driver): the cpu-vs-cuda pair needs one");
        struct cuda_info info;
        if (cuda_info_get(0, &info) == 0)
            printf("device 0: %s, compute capability %d.%d, %d SMs, %.1f GiB; driver %d, "
                   "runtime %d, cuDNN %zu, cuBLAS %d\n",
                   info.device_name, info.cc_major, info.cc_minor, info.sm_count,
                   (double)info.memory_bytes / (1 << 30), info.driver_version,
                   info.runtime_version, info.cudnn_version, info.cublas_version);
        ref = backend_cpu_create(0);
        /* each convolution's cuDNN algorithm on stderr (once per shape and direction), so a
         * parity failure names the algorithm that gave it */
        setenv("DDPPROF_CUDNN_LOG", "1", 0);
        cand = backend_cuda_create(0);
        printf("pair %s: reference cpu (library default threads), candidate cuda (device 0)\n",
               pair_name);
    } else if (fast_pair) {
        ref = backend_cpu_create_path(1, 0, CPU_PATH_REFERENCE);
        /* every fast kernel this machine has unless $DDPPROF_CONV_ALGO says which */
        enum conv_algo algo = CONV_ALGO_WINOGRAD;
        const char *want = getenv("DDPPROF_CONV_ALGO");
        for (int a = CONV_ALGO_AUTO; want && a <= CONV_ALGO_WINOGRAD; a++)
            if (strcmp(want, conv_algo_name((enum conv_algo)a)) == 0)
                algo = (enum conv_algo)a;
        cand = backend_cpu_create_conv(CAND_THREADS, CAND_CHUNK, CPU_PATH_FAST, algo);
        if (cand && !backend_cpu_is_fast(cand)) {
            char why[300];
            snprintf(why, sizeof why, "no fast convolutions in this build: %s",
                     backend_cpu_describe(cand));
            test_skip(why);
        }
        printf("pair %s: reference cpu (1 thread, %s), candidate cpu (%s; %d threads, loops "
               "in %d-item pieces, convolutions in %d-image chunks)\n",
               pair_name, ref ? backend_cpu_describe(ref) : "?",
               cand ? backend_cpu_describe(cand) : "?", CAND_THREADS, CAND_CHUNK,
               CAND_CHUNK);
    } else {
        ref = backend_cpu_create(1);
        cand = backend_cpu_create_chunked(CAND_THREADS, CAND_CHUNK);
        printf("pair %s: reference cpu (1 thread), candidate cpu (%d threads, loops in "
               "%d-item pieces, convolutions in %d-image chunks)\n",
               pair_name, CAND_THREADS, CAND_CHUNK, CAND_CHUNK);
    }
    CHECK(ref && cand, "backends: %s", error_get());
    if (!ref || !cand)
        return test_finish();

    test_status_stream();
    test_memory();
    test_conv("");
    test_batchnorm();
    for (int dt = DT_F32; dt <= DT_BF16; dt++)
        test_relu((enum dtype)dt);
    test_pool();
    test_linear();
    xent_check(100, 10, 0);
    xent_check(7, 1000, 0);
    xent_check(33, 10, 1);
    test_count_correct();
    test_scale();
    test_sgd();
    test_amp();
    test_cast();
    test_cast_list();
    test_cast_list_4d();
    test_convert();
    test_unscale();
    for (int dt = DT_F32; dt <= DT_BF16; dt++)
        test_add((enum dtype)dt);
    test_adaptive_pool();
    test_adam();

    if (pair == PAIR_CPU_CUDA) {
        test_failure_is_reported();
        /* convolutions again, algorithms chosen by timing them */
        setenv("DDPPROF_CUDNN_BENCHMARK", "1", 1);
        struct backend *heur = cand;
        cand = backend_cuda_create(0);
        CHECK(cand != NULL, "benchmark-mode backend: %s", error_get());
        if (cand) {
            test_conv(" (find)");
            cand->destroy(cand);
        }
        cand = heur;
        unsetenv("DDPPROF_CUDNN_BENCHMARK");
    }
    check_coverage();

    print_table(stdout);
    const char *path = getenv("DDPPROF_BACKEND_OPS_REPORT");
    if (path && *path) {
        FILE *f = fopen(path, "w");
        CHECK(f != NULL, "cannot write %s", path);
        if (f) {
            print_table(f);
            fclose(f);
        }
    }
    cand->destroy(cand);
    ref->destroy(ref);
    return test_finish();
}
