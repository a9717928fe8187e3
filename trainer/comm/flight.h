/* flight.h — the comms' flight recorder: the last FLIGHT_ENTRIES collectives of a rank and
 * their states, written to <dir>/rank<N>.flight.csv when a collective fails (a timeout, a
 * mismatch, a peer that died or gave up), as PyTorch's NCCL flight recorder does.  The
 * launcher reads the files to say where each rank was ("rank 1 is in all-reduce #1127,
 * rank 0 in reduce #1127").  The format is in probes/TRACE.md.
 *
 * Threads: one recorder per communicator; any thread may record (a mutex).  A NULL
 * recorder is accepted everywhere and does nothing (the comm goes on without one). */
#ifndef DDPPROF_COMM_FLIGHT_H
#define DDPPROF_COMM_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "common/flight_file.h" /* FLIGHT_FILE_FORMAT; flight_file_position reads a dump */

#ifdef __cplusplus
extern "C" {
#endif

#define FLIGHT_ENTRIES 64
#define FLIGHT_HEADER "rank,seq,kind,bucket,bytes,state,queued_ns,started_ns,ended_ns\n"

enum flight_state { FLIGHT_QUEUED = 0, FLIGHT_STARTED, FLIGHT_DONE, FLIGHT_FAILED };

struct flight;

/* The directory the recorders of this process dump into (the run directory; NULL or "":
 * none, failures are not dumped).  Copied.  Call before the comm fails (at setup). */
void flight_set_dir(const char *dir);

/* A recorder for rank, or NULL when out of memory.  flight_free(NULL) does nothing. */
struct flight *flight_create(int rank);
void flight_free(struct flight *f);

/* The DDP bucket of the next collective this thread issues (the reducer says it right
 * before a bucket's all-reduce, and -1 right after): flight_queued takes it when its own
 * bucket is -1.  Thread-local. */
void flight_next_bucket(int bucket);

/* Collective seq (1, 2, ... per communicator) was issued: kind is a static string ("all-reduce"),
 * bucket -1 when unknown (then flight_next_bucket's), bytes its payload on this rank. */
void flight_queued(struct flight *f, uint64_t seq, const char *kind, int bucket, uint64_t bytes);
void flight_set_state(struct flight *f, uint64_t seq, enum flight_state st);

/* Write the recorder to <dir>/rank<N>.flight.csv (flight_set_dir), once: later calls do
 * nothing.  0, or -1 (no directory, or the file could not be written; error state kept). */
int flight_dump(struct flight *f);

#ifdef __cplusplus
}
#endif
#endif
