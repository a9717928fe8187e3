/* sampler.c — DistributedSampler semantics; see sampler.h. */
#include "data/sampler.h"

#include <stdlib.h>

#include "common/error.h"
#include "common/rng.h"

int sampler_init(struct sampler *s, int64_t dataset_size, int num_replicas, int rank,
                 int shuffle, int64_t seed, int drop_last)
{
    if (dataset_size < 0)
        return error_set("sampler: dataset size %lld is negative", (long long)dataset_size);
    if (num_replicas < 1)
        return error_set("sampler: num_replicas = %d; the world size must be >= 1",
                         num_replicas);
    if (rank < 0 || rank >= num_replicas)
        return error_set("sampler: invalid rank %d, rank should be in the interval [0, %d]",
                         rank, num_replicas - 1);
    s->dataset_size = dataset_size;
    s->num_replicas = num_replicas;
    s->rank = rank;
    s->shuffle = shuffle != 0;
    s->drop_last = drop_last != 0;
    s->seed = seed;
    s->epoch = 0;
    /* drop_last with n % R != 0: ceil((n - R) / R), which is n / R for n >= 0;
     * otherwise ceil(n / R) */
    if (s->drop_last)
        s->num_samples = dataset_size / num_replicas;
    else
        s->num_samples = (dataset_size + num_replicas - 1) / num_replicas;
    s->total_size = s->num_samples * num_replicas;
    return 0;
}

void sampler_set_epoch(struct sampler *s, int64_t epoch) { s->epoch = epoch; }

int64_t sampler_num_samples(const struct sampler *s) { return s->num_samples; }

int sampler_indices(const struct sampler *s, int64_t *out)
{
    int64_t n = s->dataset_size;
    if (s->num_samples == 0)
        return 0;
    int64_t *all = malloc((size_t)n * sizeof *all);
    if (!all)
        return error_set("sampler: out of memory for %lld indices", (long long)n);
    if (s->shuffle) {
        struct rng g;
        /* g.manual_seed(seed + epoch): Python ints, so the sum wraps like uint64 */
        rng_seed(&g, (uint64_t)s->seed + (uint64_t)s->epoch);
        rng_randperm(&g, n, all); /* n >= 0 was checked in sampler_init */
    } else {
        for (int64_t i = 0; i < n; i++)
            all[i] = i;
    }
    /* Position p of the padded (or truncated) list is all[p % n]: padding repeats the
     * list from its start, as many times as needed.  Rank r takes p = r, r + R, ... */
    for (int64_t k = 0; k < s->num_samples; k++) {
        int64_t p = s->rank + k * s->num_replicas;
        out[k] = all[p % n];
    }
    free(all);
    return 0;
}
