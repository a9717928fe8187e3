/* flight_file.h — reading a flight recorder file, <dir>/rank<N>.flight.csv (its format is in
 * probes/TRACE.md).  The trainer's comms write it (trainer/comm/flight.c) and both the
 * launcher and the report read it; the report may not see the trainer, nor the trainer the
 * report, so the one reader lives here, under both. */
#ifndef DDPPROF_COMMON_FLIGHT_FILE_H
#define DDPPROF_COMMON_FLIGHT_FILE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLIGHT_FILE_FORMAT "rank%d.flight.csv"

/* Where rank's recorder says it was: its first collective not done, else its last, as
 * "all-gather #80 (failed)" or "all-reduce #12 (bucket 1, started"), into out (cap
 * bytes).  1 if found, 0 when there is no file or no entry.  A malformed line is skipped:
 * the file is evidence, not input to check. */
int flight_file_position(const char *dir, int rank, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
