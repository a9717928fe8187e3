/* comm_gloo.h — the `gloo` transport of struct comm: collectives between CPU ranks on any
 * number of hosts through Gloo (Debian's libgloo, the library PyTorch itself uses for CPU
 * collectives), over TCP.
 *
 * Rendezvous goes through ddpprof's own store (comm/store.h): Gloo's rendezvous Store
 * interface is implemented over it, every key under `key_prefix`.  Each rank listens on
 * the address of the interface that routes to `peer_addr` (MASTER_ADDR: the interface the
 * other hosts reach us on), or on the interface named by GLOO_SOCKET_IFNAME when set (as
 * in PyTorch).
 *
 * As the shm comm, each rank runs one comm thread that executes its collectives in issue
 * order, so an all-reduce started with allreduce_async overlaps the caller's work
 * (backward); the blocking collectives go through the same queue.  Sums are taken in fp32
 * (fp16/bf16 buffers are widened, summed, and rounded once); every rank ends with the same
 * bits (Gloo's ring all-reduce reduces each segment once and then copies it around), though
 * the order of the terms is Gloo's, not rank order.
 *
 * Failure: every collective has Gloo's timeout (timeout_ms); a timeout, a peer that closed
 * its connections (it died, or gave up) or any Gloo error is an error naming this rank, the
 * collective, its sequence number (from 1, over all collectives on this comm) and, where
 * Gloo says which peer address failed, the ranks on that host.  After an error the comm is
 * unusable: every later call fails at once with the same message.  destroy closes this
 * rank's connections, so its peers fail at once; a collective of its own still running then
 * gets 200 ms to end, else (Gloo cannot cancel it) it is abandoned to the process's exit.
 *
 * Built only where CMake found Gloo; otherwise comm_gloo_stub.c makes comm_gloo_create
 * fail with one line saying so. */
#ifndef DDPPROF_COMM_GLOO_H
#define DDPPROF_COMM_GLOO_H

#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct store;

/* Join the Gloo communicator of `world` ranks as `rank`, meeting the others through store
 * under key_prefix (all ranks pass the same prefix; a fresh one per communicator on one
 * store, e.g. "gloo/0/").  peer_addr picks the local interface (NULL or "": let Gloo bind
 * to this host's name).  Returns once every pair of ranks is connected (at most timeout_ms
 * per wait), or NULL + error_set naming the rank and what failed.  The store must stay
 * open until destroy.  Release with c->destroy (waits for nothing; handles not waited for
 * are freed). */
struct comm *comm_gloo_create(struct store *store, const char *key_prefix, int rank, int world,
                              const char *peer_addr, int timeout_ms);

/* 1 when this build has Gloo, 0 when comm_gloo_create can only fail. */
int comm_gloo_available(void);

#ifdef __cplusplus
}
#endif
#endif
