/* correlation.h — attributing GPU activity to the probe range that launched it.
 *
 * Each probe range pushes a CUPTI external correlation id (cuptiActivityPushExternalCorrelationId)
 * that is its (phase, step, epoch, bucket) packed into 64 bits, so no table of ranges is
 * kept.  CUPTI emits an external-correlation record (CUPTI correlation id -> our id) for
 * every API call made inside the range; kernels, memcpys and memsets carry the CUPTI
 * correlation id of the call that launched them.  corr_map remembers the recent
 * (correlation id -> external id) pairs: a ring indexed by the correlation id, which
 * CUPTI hands out in increasing order, so lookups are O(1) and old pairs age out by
 * themselves.  No CUDA headers: tested on synthetic ids. */
#ifndef DDPPROF_CORRELATION_H
#define DDPPROF_CORRELATION_H

#include "probes/phase.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Field ranges of an external id; values outside are clamped (step, epoch) or dropped
 * (bucket -> -1). */
#define CORR_MAX_STEP 0xFFFFFFFFll
#define CORR_MAX_EPOCH 0xFFF
#define CORR_MAX_BUCKET 0xFFFE

/* Pack a range's identity; never 0 (0 is "no external id"). */
uint64_t corr_encode(enum probe_phase ph, int64_t step, int epoch, int bucket);

/* Unpack; 0, or -1 if id is not one corr_encode makes. */
int corr_decode(uint64_t id, enum probe_phase *ph, int64_t *step, int *epoch, int *bucket);

struct corr_map;

/* A map holding the last `capacity` correlation ids (rounded up to a power of two; 0:
 * 65536).  NULL + error_set on out of memory. */
struct corr_map *corr_map_create(size_t capacity);

/* Remember correlation_id -> external_id (overwrites the pair it ages out). */
void corr_map_put(struct corr_map *m, uint32_t correlation_id, uint64_t external_id);

/* 1 and *external_id if correlation_id is known, else 0. */
int corr_map_get(const struct corr_map *m, uint32_t correlation_id, uint64_t *external_id);

void corr_map_destroy(struct corr_map *m);

#ifdef __cplusplus
}
#endif
#endif
