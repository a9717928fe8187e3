/* rng.c — PyTorch's CPU generator (mt19937) and the draws built on it; see rng.h. */
#include "common/rng.h"

#include "common/error.h"

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void rng_seed(struct rng *r, uint64_t seed)
{
    r->state[0] = (uint32_t)(seed & 0xffffffffu);
    for (int j = 1; j < RNG_MT_N; j++) {
        uint32_t prev = r->state[j - 1];
        r->state[j] = 1812433253u * (prev ^ (prev >> 30)) + (uint32_t)j;
    }
    r->index = RNG_MT_N;
}

/* refill all RNG_MT_N words of state (the "twist") */
static void rng_twist(struct rng *r)
{
    uint32_t *mt = r->state;
    for (int k = 0; k < RNG_MT_N; k++) {
        uint32_t y = (mt[k] & MT_UPPER) | (mt[(k + 1) % RNG_MT_N] & MT_LOWER);
        mt[k] = mt[(k + MT_M) % RNG_MT_N] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
    }
    r->index = 0;
}

uint32_t rng_next_u32(struct rng *r)
{
    if (r->index >= RNG_MT_N)
        rng_twist(r);
    uint32_t y = r->state[r->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* at::uniform_real_distribution<float>: (draw & (2^24-1)) * 2^-24 in double (torch's
 * dist_acctype<float> on CPU), times (hi - lo) computed in float, plus lo, then rounded to
 * float when stored. */
static float rng_uniform_between(struct rng *r, float lo, float hi)
{
    double x = (double)(rng_next_u32(r) & ((1u << 24) - 1u)) * (1.0 / 16777216.0);
    float span = hi - lo;
    return (float)(x * span + lo);
}

float rng_uniform(struct rng *r) { return rng_uniform_between(r, 0.0f, 1.0f); }

void rng_fill_uniform(struct rng *r, float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rng_uniform_between(r, lo, hi);
}

int rng_randperm(struct rng *r, int64_t n, int64_t *out)
{
    if (n < 0)
        return error_set("rng_randperm: n = %lld is negative; pass a dataset size >= 0",
                         (long long)n);
    for (int64_t i = 0; i < n; i++)
        out[i] = i;
    /* randperm_cpu: for i in 0..n-2, z = random() % (n - i), swap(r[i], r[i + z]) */
    for (int64_t i = 0; i + 1 < n; i++) {
        int64_t z = (int64_t)(rng_next_u32(r) % (uint64_t)(n - i));
        int64_t tmp = out[i];
        out[i] = out[i + z];
        out[i + z] = tmp;
    }
    return 0;
}
