/* comm_probe.h — a struct comm that records every collective it runs as a trace row.
 *
 * Every collective is communication (DESIGN.md): the gradient buckets' all-reduces are
 * recorded by the DDP reducer's observer (probe_bucket_*), and every other collective the
 * training thread issues — DDP's initial broadcast, SyncBatchNorm's all-gather (forward)
 * and all-reduce (backward), AMP's found-inf flag, the loss, evaluation's reduce, a
 * checkpoint's broadcast, barriers — goes through this wrapper, which writes one probe range
 * per call: phase comm.<kind> (barrier for a barrier) with the payload's bytes
 * (probes/TRACE.md).  The reducer keeps the bare comm, so its bucket all-reduces are not
 * recorded twice.
 *
 * A range is the call on the training thread: the whole collective where the transport
 * blocks (shm, gloo, staged), the launch where it is joined on a stream (nccl: the device
 * row, on the compute stream, then holds the wait for it).  Cost: one push and one pop per
 * collective, no allocation. */
#ifndef DDPPROF_COMM_PROBE_H
#define DDPPROF_COMM_PROBE_H

#include "comm/comm.h"

struct probe;

/* A comm that runs each collective on inner and records it in probe (NULL or an off
 * probe: nothing recorded).  inner and probe must outlive it; its destroy frees the wrapper
 * only.  NULL + error_set on out of memory. */
struct comm *comm_probe_wrap(struct comm *inner, struct probe *probe);

#endif
