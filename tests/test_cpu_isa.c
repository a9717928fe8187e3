/* test_cpu_isa.c — the CPU backend's ISA paths (trainer/backend/cpu_isa.h):
 *  1. DDPPROF_MAX_CPU_ISA caps the machine's ISA (never raises it); a name it does not know
 *     is one error line naming the variable and the names it takes;
 *  2. a backend created under a cap runs that cap's loops and says so, and holds oneDNN's
 *     kernels to it too (where this build has oneDNN and the machine has more);
 *  3. every path the machine has gives the same bits as the x86-64 baseline on the loops
 *     built per ISA (batch norm forward and backward, ReLU, max pooling -- the AVX-512 tiles
 *     where the machine has them -- and Adam), in fp32 and emulated fp16: the ISA a test
 *     runs on must not change its results. */
#include "backend/backend.h"
#include "backend/backend_cpu.h"
#include "backend/cpu_isa.h"
#include "common/error.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cap(const char *isa)
{
    if (isa)
        setenv("DDPPROF_MAX_CPU_ISA", isa, 1);
    else
        unsetenv("DDPPROF_MAX_CPU_ISA");
}

static void test_cap(void)
{
    const enum cpu_isa machine = cpu_isa_machine();
    enum cpu_isa got;
    cap(NULL);
    CHECK(cpu_isa_get(&got) == 0 && got == machine, "no cap: %s, the machine has %s",
          cpu_isa_name(got), cpu_isa_name(machine));
    for (int i = 0; i < CPU_ISA_COUNT; i++) {
        cap(cpu_isa_name((enum cpu_isa)i));
        const enum cpu_isa want = (enum cpu_isa)i < machine ? (enum cpu_isa)i : machine;
        CHECK(cpu_isa_get(&got) == 0 && got == want, "cap %s on a %s machine: %s, want %s",
              cpu_isa_name((enum cpu_isa)i), cpu_isa_name(machine), cpu_isa_name(got),
              cpu_isa_name(want));
    }
    cap("AVX2"); /* as oneDNN spells its own */
    CHECK(cpu_isa_get(&got) == 0 && got == (machine < CPU_ISA_AVX2 ? machine : CPU_ISA_AVX2),
          "cap AVX2: %s", cpu_isa_name(got));
    cap("avx1024");
    error_clear();
    CHECK(cpu_isa_get(&got) == -1 && strstr(error_get(), "DDPPROF_MAX_CPU_ISA=avx1024") &&
              strstr(error_get(), "avx512, avx2 or default"),
          "a bad cap: '%s'", error_get());
    CHECK(backend_cpu_create(1) == NULL, "a backend under a bad cap is refused");
    cap(NULL);
}

/* 2. (first: oneDNN takes its cap once per process, before its first kernel) */
static void test_backend_says(void)
{
    cap("default");
    struct backend *be = backend_cpu_create_path(1, 0, CPU_PATH_FAST);
    CHECK(be != NULL, "backend under cap default: %s", error_get());
    if (!be)
        return;
    const char *d = backend_cpu_describe(be);
    printf("cap default: %s\n", d);
    CHECK(strstr(d, "loops: default") != NULL, "describe does not say the cap: %s", d);
    CHECK(strstr(d, "max pooling: AVX-512") == NULL, "AVX-512 pooling under cap default: %s", d);
    if (strstr(d, "oneDNN") && cpu_isa_machine() > CPU_ISA_DEFAULT)
        CHECK(strstr(d, "cpu isa sse41") != NULL, "oneDNN not held to the cap: %s", d);
    be->destroy(be);
    cap(NULL);
}

enum { N = 3, C = 5, H = 28, W = 28, HW = H * W, ADAM_N = 1003 };

/* what the per-ISA loops compute from the same inputs, downloaded */
struct outs {
    float mean[C], invstd[C], y[N * C * HW];
    float sum_dy[C], sum_dy_xmu[C], dweight[C], dbias[C], dx[N * C * HW];
    float relu[N * C * HW], drelu[N * C * HW];
    float pool[N * C * HW / 4], dpool[N * C * HW], pool7[N * C * 3 * 3], dpool7[N * C * 7 * 7];
    int32_t arg[N * C * HW / 4], arg7[N * C * 3 * 3];
    float param[ADAM_N], m[ADAM_N], v[ADAM_N];
};

static void *up(struct backend *be, const void *host, size_t bytes)
{
    void *d = be->alloc(be, bytes);
    if (d && host)
        be->upload(be, d, host, bytes);
    return d;
}

static int run_ops(struct backend *be, enum dtype dt, struct outs *o)
{
    uint64_t seed = 42;
    static float x[N * C * HW], dy[N * C * HW], w[C], b[C], g[ADAM_N], p[ADAM_N];
    test_fill_uniform(x, N * C * HW, -2, 2, &seed);
    test_fill_uniform(dy, N * C * HW, -1, 1, &seed);
    test_fill_uniform(w, C, 0.5f, 1.5f, &seed);
    test_fill_uniform(b, C, -0.5f, 0.5f, &seed);
    test_fill_uniform(g, ADAM_N, -1, 1, &seed);
    test_fill_uniform(p, ADAM_N, -1, 1, &seed);
    /* ties for the pooling: every fourth value repeated */
    for (size_t i = 3; i < N * C * HW; i += 4)
        x[i] = x[i - 1];
    const size_t big = sizeof(float) * N * C * HW;
    float *dx_ = up(be, x, big), *ddy = up(be, dy, big), *dw = up(be, w, sizeof w),
          *db = up(be, b, sizeof b), *dmean = up(be, NULL, sizeof o->mean),
          *dinv = up(be, NULL, sizeof o->invstd), *dyy = up(be, NULL, big),
          *dsum = up(be, NULL, sizeof o->sum_dy), *dsumx = up(be, NULL, sizeof o->sum_dy_xmu),
          *ddw = up(be, NULL, sizeof o->dweight), *ddb = up(be, NULL, sizeof o->dbias),
          *dgx = up(be, NULL, big), *dr = up(be, NULL, big), *ddr = up(be, NULL, big),
          *dp = up(be, NULL, big / 4), *ddp = up(be, NULL, big), *dp7 = up(be, NULL, big),
          *ddp7 = up(be, NULL, big), *dg = up(be, g, sizeof g), *dpar = up(be, p, sizeof p),
          *dm = up(be, NULL, sizeof o->m), *dv = up(be, NULL, sizeof o->v);
    int32_t *darg = up(be, NULL, sizeof o->arg), *darg7 = up(be, NULL, sizeof o->arg7);
    const float count = (float)(N * HW);
    float *dcount = up(be, &count, sizeof count);
    int ok = dx_ && ddy && dw && db && dmean && dinv && dyy && dsum && dsumx && ddw && ddb &&
             dgx && dr && ddr && dp && ddp && dp7 && ddp7 && dg && dpar && dm && dv && darg &&
             darg7 && dcount;
    if (ok && dt != DT_F32) { /* half activations hold half values */
        be->round_amp(be, (size_t)N * C * HW, (enum amp_dtype)dt, dx_, dx_);
        be->round_amp(be, (size_t)N * C * HW, (enum amp_dtype)dt, ddy, ddy);
    }
    if (ok) {
        be->batchnorm_stats(be, N, C, HW, dt, dx_, 1e-5f, dmean, dinv);
        be->batchnorm_elemt(be, N, C, HW, dt, dx_, dmean, dinv, dw, db, dyy);
        be->batchnorm_backward_reduce(be, N, C, HW, dt, ddy, dx_, dmean, dinv, dsum, dsumx, ddw,
                                      ddb);
        be->batchnorm_backward_elemt(be, N, C, HW, dt, ddy, dx_, dmean, dinv, dw, dsum, dsumx,
                                     dcount, dgx);
        be->relu_forward(be, (size_t)N * C * HW, dt, dx_, dr);
        be->relu_backward(be, (size_t)N * C * HW, dt, dr, ddy, ddr);
        /* 28x28 by 2x2: the AVX-512 tiles where the machine has them */
        struct pool2d_shape ps = {.n = N, .c = C, .h = H, .w = W, .kernel = 2, .stride = 2};
        /* 7x7 by 3x3 stride 2: overlapping windows, the scalar loops on every ISA */
        struct pool2d_shape ps7 = {.n = N, .c = C, .h = 7, .w = 7, .kernel = 3, .stride = 2};
        ok = pool2d_shape_init(&ps) == 0 && pool2d_shape_init(&ps7) == 0;
        if (ok) {
            be->maxpool2d_forward(be, &ps, dt, dx_, dp, darg);
            be->maxpool2d_backward(be, &ps, dt, ddy, darg, ddp);
            be->maxpool2d_forward(be, &ps7, dt, dx_, dp7, darg7);
            be->maxpool2d_backward(be, &ps7, dt, ddy, darg7, ddp7);
        }
        for (long long step = 1; step <= 3; step++)
            be->adam_step(be, ADAM_N, dpar, dg, dm, dv, 1e-3, 0.9, 0.999, 1e-8, 1e-2, step);
        be->synchronize(be);
        be->download(be, o->mean, dmean, sizeof o->mean);
        be->download(be, o->invstd, dinv, sizeof o->invstd);
        be->download(be, o->y, dyy, sizeof o->y);
        be->download(be, o->sum_dy, dsum, sizeof o->sum_dy);
        be->download(be, o->sum_dy_xmu, dsumx, sizeof o->sum_dy_xmu);
        be->download(be, o->dweight, ddw, sizeof o->dweight);
        be->download(be, o->dbias, ddb, sizeof o->dbias);
        be->download(be, o->dx, dgx, sizeof o->dx);
        be->download(be, o->relu, dr, sizeof o->relu);
        be->download(be, o->drelu, ddr, sizeof o->drelu);
        be->download(be, o->pool, dp, sizeof o->pool);
        be->download(be, o->arg, darg, sizeof o->arg);
        be->download(be, o->dpool, ddp, sizeof o->dpool);
        be->download(be, o->pool7, dp7, sizeof o->pool7);
        be->download(be, o->arg7, darg7, sizeof o->arg7);
        be->download(be, o->dpool7, ddp7, sizeof o->dpool7);
        be->download(be, o->param, dpar, sizeof o->param);
        be->download(be, o->m, dm, sizeof o->m);
        be->download(be, o->v, dv, sizeof o->v);
    }
    void *all[] = {dx_, ddy, dw, db, dmean, dinv, dyy, dsum, dsumx, ddw, ddb, dgx, dr, ddr, dp,
                   ddp, dp7, ddp7, dg, dpar, dm, dv, darg, darg7, dcount};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        be->free(be, all[i]);
    return ok ? 0 : -1;
}

/* the first field of o whose bytes differ from ref's, or NULL */
static const char *differs(const struct outs *a, const struct outs *b)
{
#define FIELD(f)                                                                             \
    if (memcmp(a->f, b->f, sizeof a->f) != 0)                                                \
        return #f;
    FIELD(mean) FIELD(invstd) FIELD(y) FIELD(sum_dy) FIELD(sum_dy_xmu) FIELD(dweight)
    FIELD(dbias) FIELD(dx) FIELD(relu) FIELD(drelu) FIELD(pool) FIELD(arg) FIELD(dpool)
    FIELD(pool7) FIELD(arg7) FIELD(dpool7) FIELD(param) FIELD(m) FIELD(v)
#undef FIELD
    return NULL;
}

static void test_same_bits(void)
{
    const enum cpu_isa machine = cpu_isa_machine();
    static struct outs ref, got;
    const enum dtype types[] = {DT_F32, DT_F16};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const char *tn = types[t] == DT_F32 ? "fp32" : "fp16";
        cap("default");
        /* 2 threads in 3-item pieces: the same splits on every path */
        struct backend *be = backend_cpu_create_chunked(2, 3);
        CHECK(be && run_ops(be, types[t], &ref) == 0, "%s: the baseline's ops: %s", tn,
              error_get());
        if (be)
            be->destroy(be);
        for (int i = CPU_ISA_DEFAULT + 1; i <= (int)machine; i++) {
            cap(cpu_isa_name((enum cpu_isa)i));
            be = backend_cpu_create_chunked(2, 3);
            CHECK(be && strstr(backend_cpu_describe(be), cpu_isa_name((enum cpu_isa)i)),
                  "%s: a backend on %s: %s", tn, cpu_isa_name((enum cpu_isa)i),
                  be ? backend_cpu_describe(be) : error_get());
            memset(&got, 0xff, sizeof got);
            CHECK(be && run_ops(be, types[t], &got) == 0, "%s: ops on %s: %s", tn,
                  cpu_isa_name((enum cpu_isa)i), error_get());
            const char *f = differs(&got, &ref);
            CHECK(f == NULL, "%s: %s differs between the %s loops and the baseline's", tn,
                  f ? f : "", cpu_isa_name((enum cpu_isa)i));
            printf("%s: %s loops (%s) give the baseline's bits\n", tn,
                   cpu_isa_name((enum cpu_isa)i), be ? backend_cpu_describe(be) : "?");
            if (be)
                be->destroy(be);
        }
    }
    cap(NULL);
    if (machine == CPU_ISA_DEFAULT)
        printf("this machine has neither AVX2 nor AVX-512: only the baseline loops ran\n");
}

int main(void)
{
    printf("this machine: %s\n", cpu_isa_name(cpu_isa_machine()));
    test_backend_says();
    test_cap();
    test_same_bits();
    return test_finish();
}
