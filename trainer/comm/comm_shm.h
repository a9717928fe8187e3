/* comm_shm.h — the `shm` transport of struct comm: collectives between CPU ranks (processes)
 * on one node through one POSIX shared-memory segment.
 *
 * Each rank runs a comm thread that executes its collectives in issue order, so an
 * all-reduce started with allreduce_async overlaps the caller's work (backward).  The
 * blocking collectives (broadcast, reduce, allgather, barrier, the blocking all-reduce that
 * comm_allreduce uses) are ordered after any all-reduce still in flight: queued behind it,
 * or, when nothing is queued or running, run on the caller's own thread (no hand-off).
 *
 * Results are bit-identical on every rank: sums are taken in rank order 0..world-1 in fp32
 * (fp16/bf16 inputs are widened, summed in fp32 and rounded once, to nearest even).
 * Collectives larger than the segment's per-rank slot are cut into chunks.
 *
 * Failure: every wait for the peers (one barrier; a collective has one per chunk, two for
 * all-reduce) gives up after timeout_ms with an error naming this rank, the collective, its
 * sequence number (counted from 1 over all collectives issued on this comm) and the ranks
 * that did not arrive.  wait() itself sleeps until the comm thread is done with the handle,
 * which these bounded barriers guarantee.  A peer that died (pid check every 100 ms) or
 * destroyed its comm, a peer that gave up after an error (its message is passed on), and
 * ranks issuing different collectives are reported as soon as they are seen, not after the
 * timeout.  After any error the comm is unusable: every later call fails at once, and the
 * peers are told (they fail too instead of waiting).
 *
 * Segment lifetime: rank 0 creates the segment; as soon as all `world` ranks have attached,
 * the last one to attach removes its name, so nothing is left in /dev/shm after any exit,
 * crash included (except when ranks die before all of them attached; then the rank that
 * times out waiting, if any, removes it). */
#ifndef DDPPROF_COMM_SHM_H
#define DDPPROF_COMM_SHM_H

#include <stddef.h>

#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Join the shm communicator `segment_name` ("/name" or "name"; one path component, all
 * ranks must pass the same name, world and max_bytes) as `rank` of `world`.  Rank 0 creates
 * the segment (it must not exist yet: a leftover from another run is an error naming it);
 * the other ranks wait for it, up to timeout_ms.  Returns once all ranks have attached.
 *
 * max_bytes (>= 256) is the per-rank slot: the segment takes about world * max_bytes of
 * /dev/shm (reserved up front, so a full /dev/shm is a clear error, not a SIGBUS), and
 * collectives move max_bytes/2 bytes per rank per step (double-buffered); larger ones are
 * chunked.  timeout_ms (> 0) bounds every wait for the peers, attach included.
 *
 * Returns the comm (release with c->destroy, which does not wait for peers; handles not
 * waited for by then are freed), or NULL + error_set. */
struct comm *comm_shm_create(int rank, int world, const char *segment_name, size_t max_bytes,
                             int timeout_ms);

/* A rank that reaches a barrier first polls for the late peer for up to 200 us before it
 * sleeps on a futex (a sleep's wake-up costs far more than most waits) when poll is 1,
 * only briefly when 0: where the ranks' threads outnumber the CPUs they may use, a polling
 * rank holds a CPU that a peer's thread needs.  The caller knows (its --threads, its
 * affinity); comm_shm_create assumes one thread per rank and the online CPUs.  c must come
 * from comm_shm_create; call it before the first collective (the value is read by
 * whichever thread runs one). */
void comm_shm_set_polling(struct comm *c, int poll);

#ifdef __cplusplus
}
#endif
#endif
