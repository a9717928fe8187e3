/* nvtx.h — the probes' NVTX3 ranges: what a user sees in Nsight Systems.
 *
 * Domain "ddpprof"; each phase's name is a registered string, with its own colour and a
 * category named after the phase (nvtxDomainNameCategoryA); every range carries one number
 * as its payload (NVTX_PAYLOAD_TYPE_UNSIGNED_INT64), the range's quantity: the step number
 * for step and the phases without another (data, backward, optimizer, eval, setup), the
 * images of the rank's batch for forward, the payload bytes for a collective (allreduce.bN,
 * comm.*, barrier: 0), the parameter bytes for a layer's range (layer.forward/backward,
 * named by its module, --trace full), so that a reader of an Nsight Systems report alone (report/
 * import_nsys.c) has the steps, the images and every collective's bytes.  At start each
 * process marks who it is: an NVTX mark "ddpprof nvtx=2 rank=R world_size=W" (payload R;
 * nvtx=2 names this contract: before it every range carried its step).  Phases nest as
 * push/pop ranges on the training thread.  A bucket's all-reduce is a start/end range named
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

/* Push a range for phase ph (not PROBE_ALLREDUCE) with payload (its quantity, above: the
 * caller, probe.c, picks it); pop the innermost.  Per thread, as NVTX push/pop. */
void nvtx_ranges_push(struct nvtx_ranges *n, enum probe_phase ph, uint64_t payload);
void nvtx_ranges_pop(struct nvtx_ranges *n);
/* nvtx_ranges_push with the range named name (an unregistered ASCII message: a layer's
 * module name, "layer1.0", its payload the layer's parameter bytes), the phase's colour and
 * category; name NULL: the phase's */
void nvtx_ranges_push_named(struct nvtx_ranges *n, enum probe_phase ph, const char *name,
                            uint64_t payload);

/* Start the range "allreduce.b<bucket>" (the bucket's bytes as payload); returns the id to
 * pass to nvtx_ranges_end, from any thread.  The name is registered the first time a bucket
 * number is seen (the only allocation). */
uint64_t nvtx_ranges_start_bucket(struct nvtx_ranges *n, int bucket, uint64_t bytes);
void nvtx_ranges_end(struct nvtx_ranges *n, uint64_t id);

/* The mark "ddpprof nvtx=2 rank=<rank> world_size=<world>" (payload rank): who this
 * process is, for a reader of the report (NVTX_RANK_MARK_FORMAT). */
#define NVTX_RANK_MARK_FORMAT "ddpprof nvtx=2 rank=%d world_size=%d"
void nvtx_ranges_mark_rank(struct nvtx_ranges *n, int rank, int world_size);

/* Destroy the domain and free n (n may be NULL). */
void nvtx_ranges_destroy(struct nvtx_ranges *n);

#ifdef __cplusplus
}
#endif
#endif
