/* rng.h — a bit-exact copy of PyTorch's CPU random generator (at::mt19937 behind
 * torch.Generator) for the things the trainer draws: torch.randperm (DistributedSampler's
 * shuffle) and tensor.uniform_ (weight initialisation).
 *
 * rng_seed(r, s) is torch.Generator().manual_seed(s); rng_next_u32 is the generator's
 * random(); rng_randperm is torch.randperm(n, generator=g) (PyTorch 1.13 randperm_cpu, and
 * the same in 2.x for n < 2^32/20); rng_fill_uniform is t.uniform_(lo, hi, generator=g) for
 * a float32 tensor.  Checked against torch 1.13 by tests/test_sampler.c with golden files
 * from tests/golden/make_golden_rng.py.  No allocation, no globals: one struct per stream. */
#ifndef DDPPROF_RNG_H
#define DDPPROF_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RNG_MT_N 624

struct rng {
    uint32_t state[RNG_MT_N]; /* mt19937 state words */
    int index;                /* next word of state to temper; RNG_MT_N means regenerate */
};

/* torch.Generator().manual_seed(seed): std::mt19937 seeding (1812433253 recurrence) with
 * the low 32 bits of seed, as at::mt19937 does.  Never fails. */
void rng_seed(struct rng *r, uint64_t seed);

/* the next 32-bit output of the mt19937 stream (CPUGeneratorImpl::random()) */
uint32_t rng_next_u32(struct rng *r);

/* torch.rand(1, generator=g): a float in [0, 1) from the low 24 bits of one draw */
float rng_uniform(struct rng *r);

/* t.uniform_(lo, hi, generator=g) for a float32 tensor of n elements, element by element
 * in memory order, with torch's arithmetic (24-bit draw scaled in double, then rounded to
 * float).  x is (n,). */
void rng_fill_uniform(struct rng *r, float *x, size_t n, float lo, float hi);

/* torch.randperm(n, generator=g): writes a permutation of 0..n-1 to out (n entries,
 * caller-owned).  Returns 0, or -1 with error_set when n < 0. */
int rng_randperm(struct rng *r, int64_t n, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
