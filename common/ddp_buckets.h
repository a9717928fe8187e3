/* ddp_buckets.h — DDP's gradient bucket assignment, a pure function: which bucket each
 * trainable parameter's gradient goes to, as PyTorch's Reducer forms them.  One copy for
 * the trainer's reducer (trainer/ddp/reducer.c) and for the predictor (report/analysis/predict.c),
 * so a predicted bucket is exactly the bucket a run with that cap would all-reduce.
 *
 * The rule (PyTorch 1.13 steady state, for models whose gradients become ready in reverse
 * parameter order): walk the parameters from the last to the first; a bucket closes once
 * its bytes reach its limit (and a parameter is left); the first bucket's limit is
 * min(first_cap_bytes, cap_bytes) -- PyTorch's 1 MiB first bucket, capped by the cap so a
 * small --bucket-cap-mb really splits a small model -- the others' cap_bytes.  Bucket 0
 * holds the last parameters, the ones backward produces first. */
#ifndef DDPPROF_DDP_BUCKETS_H
#define DDPPROF_DDP_BUCKETS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's first-bucket cap (dist._DEFAULT_FIRST_BUCKET_BYTES) */
#define DDP_FIRST_BUCKET_BYTES ((size_t)1 << 20)

/* Assign n parameters of param_bytes[0..n) bytes (model parameter order) to buckets:
 * bucket_of[i] is parameter i's bucket (bucket_of has n entries; the caller owns it).
 * Returns the number of buckets (0 when n == 0).  Never fails. */
int ddp_buckets_assign(const size_t *param_bytes, int n, size_t first_cap_bytes,
                       size_t cap_bytes, int *bucket_of);

/* --bucket-cap-mb as bytes: mb x 2^20, rounded down (PyTorch's int(bucket_cap_mb * MB)) */
size_t ddp_bucket_cap_bytes(double mb);

#ifdef __cplusplus
}
#endif
#endif
