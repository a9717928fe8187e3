/* timeline.h — the merged timeline in Chrome trace format (timeline.json), for Perfetto
 * and chrome://tracing.  Every run is a group of processes ("ddp rank 0", "baseline rank 0"),
 * each run's time axis starts at its own first event, ranks are on rank 0's clock (the
 * reader applied clock_offset_ns.rankN).  Threads are lanes: "host compute", "host comm",
 * "host data", "device compute", ..., "cuda stream N".  Every trace row is one complete
 * event ("ph":"X", ts and dur in microseconds with nanosecond decimals) with args step,
 * epoch, bucket and bytes (epoch and bytes left out where an imported trace does not know
 * them; and kind, for rows that are not ranges: CUPTI activities).
 * Each process has process_name and process_sort_index metadata events, each lane
 * thread_name and thread_sort_index. */
#ifndef DDPPROF_REPORT_TIMELINE_H
#define DDPPROF_REPORT_TIMELINE_H

#include "report/input/run.h"

/* Rows of one lane that partly overlap (NCCL host rows of two buckets in flight, spanning
 * launch to wait-return; a bucket's device range starting before the previous one's ends)
 * go to sub-lanes of it: sub-lane j of lane tid is tid + j * TIMELINE_SUBLANE (j = 0 is the
 * lane itself).  Perfetto draws a lane as a stack and truncates a slice that starts inside
 * another and ends after it. */
#define TIMELINE_SUBLANE 1000000

/* tid[r] (t->n of them) = the thread of row r of t: its lane (host lanes from 1,
 * device-clock ranges from 100001, CUPTI streams from 200001, each + the row's stream),
 * moved to the first sub-lane on which it nests in or follows what is open there.  Also
 * the Kineto export's lanes.  0, or -1 (out of memory). */
int timeline_assign_lanes(const struct rank_trace *t, int *tid);

struct run_stat; /* report/analysis/analysis.h */

/* The bound of a default timeline.json: what Perfetto's UI and chrome://tracing open
 * comfortably (256 ranks of a 1-epoch ConvNet run wrote 286 MB, twice their traces). */
#define TIMELINE_MAX_BYTES ((size_t)64 << 20)
/* steps kept either side of a run's median and slowest step, at most, within the bound */
#define TIMELINE_WINDOW 3

/* Write the timeline of every run in rs to path: every row when they fit in max_bytes (0:
 * no bound, `--timeline full`), else every rank's rows of the steps around each run's
 * median and slowest step (st[i].rep_steps), as many steps either side (up to
 * TIMELINE_WINDOW) as fit; otherData.rows says which.  st may be NULL (every row).
 * Returns 0, or -1 after error_set(). */
int timeline_write(const struct runset *rs, const struct run_stat *st, const char *path,
                   size_t max_bytes);

/* s as a JSON string literal (quotes included; the whole of it); invalid UTF-8 bytes
 * become '?'.  Owned by the caller; NULL on out of memory.  (Also the Kineto export's.) */
char *timeline_json_quote(const char *s);

#endif
