/* nvtx.h — the probes' NVTX3 ranges: what a user sees in Nsight Systems.
 *
 * Domain "ddpprof"; each phase's name is a registered string, with its own colour and a
 * category named after the phase (nvtxDomainNameCategoryA); every range carries the step
 * number as its payload (NVTX_PAYLOAD_TYPE_UNSIGNED_INT64).  Phases nest as push/pop
 * ranges on the training thread.  A bucket's all-reduce is a start/end range named
 * "allreduce.bN" (category allreduce): bucket all-reduces run concurrently and complete
 * out of push/pop order, which only start/end ranges can express.  It is started on the
 * training thread when the bucket is launched (inside backward) and ended when its wait
 * returns (before optimizer).  So Nsight Systems shows, on the training thread, step >
 * [data], forward, backward, optimizer as nested push/pop ranges and, within the step,
 * the allreduce.bN ranges from launch to wait, sticking out past backward exactly as far
 * as communication was exposed: the same sequence on every rank.
 *
 * Built from the header-only NVTX3 in the CUDA toolkit when CMake finds it (CPU builds
 * too); without it every function here is a no-op (nvtx_compiled() says which).  NVTX
 * itself does nothing (one predictable branch) unless a tool such as nsys is attached. */
#ifndef DDPPROF_NVTX_H
#define DDPPROF_NVTX_H

#include "probes/phase.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nvtx_ranges;

/* 1 when this build has NVTX3, 0 when its functions are no-ops. */
int nvtx_compiled(void);

/* Create the "ddpprof" domain, register the phase names, name the categories.  NULL +
 * error_set on out of memory.  Free with nvtx_ranges_destroy. */
struct nvtx_ranges *nvtx_ranges_create(void);

/* Push a range for phase ph (not PROBE_ALLREDUCE) with step as payload; pop the innermost.
 * Per thread, as NVTX push/pop. */
void nvtx_ranges_push(struct nvtx_ranges *n, enum probe_phase ph, uint64_t step);
void nvtx_ranges_pop(struct nvtx_ranges *n);
/* nvtx_ranges_push with the range named name (an unregistered ASCII message: a layer's
 * module name, "layer1.0"), the phase's colour and category; name NULL: the phase's */
void nvtx_ranges_push_named(struct nvtx_ranges *n, enum probe_phase ph, const char *name,
                            uint64_t step);

/* Start the range "allreduce.b<bucket>" (step as payload); returns the id to pass to
 * nvtx_ranges_end, from any thread.  The name is registered the first time a bucket
 * number is seen (the only allocation). */
uint64_t nvtx_ranges_start_bucket(struct nvtx_ranges *n, int bucket, uint64_t step);
void nvtx_ranges_end(struct nvtx_ranges *n, uint64_t id);

/* Destroy the domain and free n (n may be NULL). */
void nvtx_ranges_destroy(struct nvtx_ranges *n);

#ifdef __cplusplus
}
#endif
#endif
