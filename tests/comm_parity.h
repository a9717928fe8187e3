/* comm_parity.h — one parity driver for every transport of struct comm (shm, gloo, and nccl
 * over tests/nccl_stub.c): each collective (broadcast from every root, all-reduce blocking,
 * asynchronous and joined, reduce to the first and last rank, all-gather blocking and
 * joined, barrier) in every dtype (f32, f16, bf16) and at lengths 0, 1, 7 and `big`,
 * checked against one oracle.
 *
 * The oracle: rank r's input for a tag is derived from (r, tag), so every rank computes
 * every rank's input.  Sums: with COMM_PARITY_EXACT, bit-identical to the fp32 sum in rank
 * order 0..world-1 rounded once to the dtype (shm's contract); else within the rounding of
 * an fp32 sum of world terms in any order (plus the one rounding to fp16/bf16), and the same
 * bits on every rank (gloo's).  Broadcast, all-gather and the non-roots of reduce: exact.
 * Asynchronous all-reduces run in issue order (their spans, where the transport has them)
 * and a blocking collective issued behind them is ordered after them; a handle left
 * unwaited is freed by destroy.
 *
 * Failures are CHECKs (testutil.h) on the calling rank. */
#ifndef DDPPROF_TESTS_COMM_PARITY_H
#define DDPPROF_TESTS_COMM_PARITY_H

#include <stddef.h>

struct comm;

#define COMM_PARITY_MAX_WORLD 4

/* The rank side of a case: runs in a forked process, reports through CHECK. */
typedef void (*comm_rank_fn)(int rank, int world, const void *arg);

/* Fork world (<= COMM_PARITY_MAX_WORLD) ranks running fn; each must exit 0, except
 * killed_rank (-1: none), which must die by signal killed_sig.  Ranks still running after
 * limit_s are killed and the case fails ("case N" in messages).  The ranks' CHECK counts
 * are added to this process's. */
void comm_parity_fork(int world, comm_rank_fn fn, const void *arg, int killed_rank,
                      int killed_sig, int limit_s, int case_number);

/* comm_parity_run's flags */
#define COMM_PARITY_EXACT 1   /* sums bit-identical to the rank-order fp32 sum (see above) */
#define COMM_PARITY_UNTIMED 2 /* the transport's waits report no span (both 0: nccl, whose
                                 collectives only the probes' CUDA events time) */

/* Run every check on c (a joined comm of c->world ranks, every rank calling this with the
 * same arguments).  Leaves c usable. */
void comm_parity_run(struct comm *c, size_t big, int flags);

#endif
