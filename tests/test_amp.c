/* test_amp.c — mixed precision pieces without a GPU: the autocast rounding (the helper and
 * the backend slot) on known fp16/bf16 values, the GradScaler's unscale, inf check,
 * backoff and growth, and that its check is one fused pass with one read-back however
 * many parameters there are (issue 11: it used to read back once per parameter). */
#include "backend/backend.h"
#include "backend/kernel_math.h"
#include "nn/params.h"
#include "nn/scaler.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static float pow2(int e) { return ldexpf(1.0f, e); }

static void test_rounding(struct backend *be)
{
    const struct {
        float in, f16, bf16;
    } cases[] = {
        {1.0f, 1.0f, 1.0f},
        {65504.0f, 65504.0f, 65536.0f},          /* largest half; bf16 keeps 8 bits */
        {65519.0f, 65504.0f, 65536.0f},          /* below the half rounding midpoint */
        {65520.0f, INFINITY, 65536.0f},          /* the midpoint rounds to inf in fp16 */
        {1e6f, INFINITY, 999424.0f},             /* overflow: inf, the GradScaler's signal */
        {pow2(-24), pow2(-24), pow2(-24)},       /* smallest half subnormal */
        {pow2(-25), 0.0f, pow2(-25)},            /* tie between 0 and 2^-24: to even (0) */
        {3 * pow2(-25), pow2(-23), 3 * pow2(-25)}, /* tie 1.5 ulp -> 2 ulp (even) */
        {1 + pow2(-11), 1.0f, 1.0f},             /* fp16 tie -> even mantissa */
        {1 + 3 * pow2(-11), 1 + pow2(-9), 1.0f}, /* fp16 tie -> even (up) */
        {1 + pow2(-8), 1 + pow2(-8), 1.0f},      /* bf16 tie -> even (down) */
        {1 + 3 * pow2(-8), 1 + 3 * pow2(-8), 1 + pow2(-6)}, /* bf16 tie -> even (up) */
        {-2.5f, -2.5f, -2.5f},
        {-0.0f, -0.0f, -0.0f},
        {3.0e38f, INFINITY, 0x1.c4p+127f},      /* PyTorch: 3.004055e38 */
    };
    size_t n = sizeof cases / sizeof cases[0];
    float in[32], out16[32], outbf[32];
    for (size_t i = 0; i < n; i++) {
        in[i] = cases[i].in;
        CHECK(memcmp(&(float){km_round_amp(cases[i].in, AMP_F16)}, &cases[i].f16, 4) == 0,
              "fp16(%a) = %a, want %a", (double)cases[i].in,
              (double)km_round_amp(cases[i].in, AMP_F16), (double)cases[i].f16);
        float bf = km_round_amp(cases[i].in, AMP_BF16);
        CHECK(memcmp(&bf, &cases[i].bf16, 4) == 0, "bf16(%a) = %a, want %a",
              (double)cases[i].in, (double)bf, (double)cases[i].bf16);
    }
    CHECK(isnan(km_round_amp(NAN, AMP_F16)) && isnan(km_round_amp(NAN, AMP_BF16)), "nan");
    CHECK(km_round_amp(0.1f, AMP_OFF) == 0.1f, "off is the identity");

    /* the backend slot does the same, in place and out of place */
    be->round_amp(be, n, AMP_F16, in, out16);
    be->round_amp(be, n, AMP_BF16, in, outbf);
    for (size_t i = 0; i < n; i++) {
        float a = km_round_amp(in[i], AMP_F16), b = km_round_amp(in[i], AMP_BF16);
        CHECK(memcmp(&out16[i], &a, 4) == 0 && memcmp(&outbf[i], &b, 4) == 0,
              "backend round_amp element %zu", i);
    }
    be->round_amp(be, n, AMP_F16, in, in);
    CHECK(memcmp(in, out16, n * 4) == 0, "round_amp in place");

    /* the backend's vectorised fp16 path (F16C where the CPU has it) against the shared
     * helper, bit for bit, on 2^20 values spread over every exponent, both signs, the
     * subnormal and overflow ranges and the exact fp16 rounding ties (NaN aside) */
    enum { M = 1 << 20 };
    static float big[M], fast[M];
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < M; i++) {
        uint32_t bits = (uint32_t)(test_uniform(&seed) * 4294967296.0);
        if (i % 4 == 1) /* a tie: an fp16 value plus half its ulp */
            bits = (bits & 0xffffe000u) | 0x1000u;
        memcpy(&big[i], &bits, 4);
        if (isnan(big[i]))
            big[i] = 1.0f;
    }
    be->round_amp(be, M, AMP_F16, big, fast);
    size_t wrong = 0;
    for (size_t i = 0; i < M; i++) {
        float want = km_round_amp(big[i], AMP_F16);
        wrong += memcmp(&fast[i], &want, 4) != 0;
    }
    CHECK(wrong == 0, "%zu of %d values rounded differently from km_round_amp", wrong, M);
}

static void test_scaler(struct backend *be)
{
    struct param_table t;
    params_init(&t, be);
    int shape[1] = {5};
    struct param *p = params_add(&t, "", "w", PARAM_TRAINABLE, 1, shape);
    float g[5] = {65536.0f, -32768.0f, 0.0f, 6.5536f, 131072.0f}, back[5];
    struct grad_scaler s;
    scaler_init(&s, 1);
    CHECK(s.scale == 65536.0f && s.growth_factor == 2.0f && s.backoff_factor == 0.5f &&
              s.growth_interval == 2000, "PyTorch's defaults");

    int found = -1;
    be->upload(be, p->grad, g, sizeof g);
    CHECK(scaler_unscale(&s, &t, NULL, NULL, &found) == 0 && found == 0, "clean gradients");
    be->download(be, back, p->grad, sizeof back);
    CHECK(back[0] == 1.0f && back[1] == -0.5f && back[2] == 0.0f && back[4] == 2.0f &&
              back[3] == 6.5536f / 65536.0f, "unscaled by 1/65536 exactly");

    g[3] = INFINITY;
    be->upload(be, p->grad, g, sizeof g);
    CHECK(scaler_unscale(&s, &t, NULL, NULL, &found) == 0 && found == 1, "inf found");
    scaler_update(&s, found);
    CHECK(s.scale == 32768.0f && s.growth_tracker == 0, "backoff halves: %g", (double)s.scale);
    g[3] = NAN;
    be->upload(be, p->grad, g, sizeof g);
    CHECK(scaler_unscale(&s, &t, NULL, NULL, &found) == 0 && found == 1, "nan found");

    s.growth_interval = 3;
    for (int i = 0; i < 2; i++)
        scaler_update(&s, 0);
    CHECK(s.scale == 32768.0f && s.growth_tracker == 2, "no growth before the interval");
    scaler_update(&s, 0);
    CHECK(s.scale == 65536.0f && s.growth_tracker == 0, "growth after 3 clean steps");
    scaler_update(&s, 0);
    scaler_update(&s, 1);
    CHECK(s.scale == 32768.0f && s.growth_tracker == 0, "an inf resets the growth count");

    struct grad_scaler off;
    scaler_init(&off, 0);
    be->upload(be, p->grad, g, sizeof g);
    CHECK(scaler_unscale(&off, &t, NULL, NULL, &found) == 0 && found == 0, "disabled: no check");
    be->download(be, back, p->grad, sizeof back);
    CHECK(back[0] == g[0], "disabled: gradients untouched");
    scaler_update(&off, 1);
    CHECK(off.scale == 1.0f, "disabled: scale stays 1");
    params_free(&t);
}

/* A backend that forwards to the CPU one and counts the slots a host wait hides behind on
 * a device (download) and the unscale passes; the scaler uses no other slots. */
struct counting {
    struct backend ops; /* first: the slots receive this */
    struct backend *cpu;
    int downloads, unscales, tensors, allocs;
};

static void *count_alloc(struct backend *be, size_t bytes)
{
    struct counting *c = (struct counting *)be;
    c->allocs++;
    return c->cpu->alloc(c->cpu, bytes);
}

static void count_free(struct backend *be, void *p)
{
    struct counting *c = (struct counting *)be;
    c->cpu->free(c->cpu, p);
}

static void count_upload(struct backend *be, void *dst, const void *src, size_t bytes)
{
    struct counting *c = (struct counting *)be;
    c->cpu->upload(c->cpu, dst, src, bytes);
}

static void count_download(struct backend *be, void *dst, const void *src, size_t bytes)
{
    struct counting *c = (struct counting *)be;
    c->downloads++;
    c->cpu->download(c->cpu, dst, src, bytes);
}

static void count_unscale(struct backend *be, int count, float *const *grads,
                          const size_t *numels, float inv_scale, float *found_inf)
{
    struct counting *c = (struct counting *)be;
    c->unscales++;
    c->tensors += count;
    c->cpu->unscale(c->cpu, count, grads, numels, inv_scale, found_inf);
}

static void test_scaler_one_wait(struct backend *cpu)
{
    struct counting c = {.ops = {.name = "counting", .alloc = count_alloc, .free = count_free,
                                 .upload = count_upload, .download = count_download,
                                 .unscale = count_unscale},
                         .cpu = cpu};
    struct backend *be = &c.ops;
    struct param_table t;
    params_init(&t, be);
    struct param *p[10];
    for (int i = 0; i < 10; i++) {
        int shape[1] = {1 + 37 * i};
        char leaf[8];
        snprintf(leaf, sizeof leaf, "w%d", i);
        p[i] = params_add(&t, "", leaf, i == 4 ? PARAM_BUFFER : PARAM_TRAINABLE, 1, shape);
        CHECK(p[i] != NULL, "param %d", i);
    }
    float *scratch = be->alloc(be, sizeof(float));
    struct grad_scaler s;
    scaler_init(&s, 1);
    for (int bad = 0; bad < 2; bad++) {
        for (int i = 0; i < 10; i++)
            if (p[i]->grad)
                for (size_t j = 0; j < p[i]->numel; j++)
                    p[i]->grad[j] = bad && i == 8 && j == 5 ? INFINITY : (float)j;
        c.downloads = c.unscales = c.tensors = 0;
        int found = -1;
        CHECK(scaler_unscale(&s, &t, NULL, scratch, &found) == 0 && found == bad,
              "found_inf %d, want %d", found, bad);
        CHECK(c.unscales == 1 && c.tensors == 9,
              "%d unscale passes over %d tensors, want one over the 9 trainable", c.unscales,
              c.tensors);
        CHECK(c.downloads == 1, "%d read-backs of found_inf in one step, want 1", c.downloads);
        CHECK(p[9]->grad[2] == 2.0f / 65536.0f, "gradients unscaled");
    }
    /* without a scratch float the scaler allocates one for the call, and frees it */
    c.allocs = c.downloads = 0;
    int found = -1;
    CHECK(scaler_unscale(&s, &t, NULL, NULL, &found) == 0 && found == 1 && c.allocs == 1 &&
              c.downloads == 1,
          "no scratch: found %d, %d allocations, %d read-backs", found, c.allocs, c.downloads);
    be->free(be, scratch);
    params_free(&t);
}

int main(void)
{
    struct backend *be = backend_cpu_create(1);
    test_rounding(be);
    test_scaler(be);
    test_scaler_one_wait(be);
    be->destroy(be);
    return test_finish();
}
