/* sampler.h — torch.utils.data.DistributedSampler, index for index.
 *
 * Each epoch the dataset indices are shuffled with torch.randperm seeded seed + epoch (or
 * kept in order), padded by repeating from the start up to a multiple of num_replicas (or,
 * with drop_last, truncated down to one), and rank r takes indices[r::num_replicas].  The
 * single-process baseline is the same with num_replicas 1, rank 0, so it shuffles exactly
 * like torch.randperm.  Plain data, no allocation kept: copy or embed it freely. */
#ifndef DDPPROF_SAMPLER_H
#define DDPPROF_SAMPLER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sampler {
    int64_t dataset_size;
    int num_replicas;    /* world size */
    int rank;            /* 0 .. num_replicas-1 */
    int shuffle;         /* nonzero: randperm seeded seed + epoch; zero: 0..n-1 */
    int drop_last;       /* nonzero: truncate to a multiple of num_replicas instead of padding */
    int64_t seed;
    int64_t epoch;       /* set by sampler_set_epoch; 0 after sampler_init */
    int64_t num_samples; /* indices per rank per epoch (len(sampler)) */
    int64_t total_size;  /* num_samples * num_replicas */
};

/* DistributedSampler(dataset of dataset_size, num_replicas, rank, shuffle, seed, drop_last).
 * Returns 0, or -1 with error_set when dataset_size < 0, num_replicas < 1 or rank is not in
 * [0, num_replicas). */
int sampler_init(struct sampler *s, int64_t dataset_size, int num_replicas, int rank,
                 int shuffle, int64_t seed, int drop_last);

/* sampler.set_epoch(epoch): the next sampler_indices shuffles with seed + epoch. */
void sampler_set_epoch(struct sampler *s, int64_t epoch);

/* the number of indices this rank gets each epoch (len(sampler)) */
int64_t sampler_num_samples(const struct sampler *s);

/* list(iter(sampler)) for the current epoch: writes s->num_samples dataset indices to out
 * (caller-owned).  Allocates a dataset_size scratch array internally; returns 0, or -1 with
 * error_set if that allocation fails. */
int sampler_indices(const struct sampler *s, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
