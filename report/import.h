/* import.h — PyTorch profiler traces as report runs: Kineto JSON and the legacy autograd
 * exporter's array, plain or gzip, one file per rank (as tensorboard_trace_handler writes
 * them), mapped onto ddpprof's phases, steps, buckets and clocks (report/FORMULAS.md
 * "Imported PyTorch traces" says how), so every table, the timeline and the charts work
 * on them as on ddpprof's own runs.
 *
 * Memory does not grow with the file: events stream through report/ptjson.c and two
 * bounded reorder windows (CPU events, device activity); what is kept per rank is what the
 * tables need: one row per step, phase call and collective, and the running unions of the
 * device activity (struct kernel_sweep).  The cost is an assumption about order, which
 * Kineto and the legacy exporter both meet: the CPU events of a step are written before,
 * or within the window of, the device activity they launched.  Events further out of order
 * are still used and counted in a warning. */
#ifndef DDPPROF_REPORT_IMPORT_H
#define DDPPROF_REPORT_IMPORT_H

#include <stddef.h>

#include "report/run.h"

/* Is name a trace file name the report reads: "*.json" or "*.json.gz" (timeline.json, the
 * report's own output, excluded)? */
int import_is_trace_name(const char *name);

/* The trace files of dir, sorted by name: the "*.pt.trace.json[.gz]" ones if there are
 * any, else every "*.json[.gz]" but timeline.json.  *paths (each and the array freed by the
 * caller) gets *n >= 0 paths.  Returns 0, or -1 after error_set(). */
int import_dir_traces(const char *dir, char ***paths, int *n);

/* Read the trace files paths[0..n) (n >= 1) as the ranks of one run, named after where
 * (a directory, or the first file), appended to rs.  Ranks come from each trace's
 * distributedInfo.rank (else from "rankN" in the file name, else from the file order, with
 * a warning); clocks are aligned
 * (same host: shared clock; otherwise from all-reduce end times) and the offset and its
 * method kept per rank.  Returns 0, or -1 after error_set() with one line naming the file
 * (unreadable, not JSON, no events, nothing a training step is made of, two traces of one
 * rank).  What the report can do without (no ProfilerStep, no rank, a cut file, unknown
 * NCCL kernel names, out-of-order events) is a warning on stderr. */
int import_run(struct runset *rs, const char *where, char *const *paths, int n);

/* One trace held in memory, buf[0..len), read as a one-rank run appended to rs (what names
 * it in messages): the same path as a file through import_run, without the file.  The
 * fuzz target's entry point.  Returns as import_run. */
int import_buffer(struct runset *rs, const char *buf, size_t len, const char *what);

#endif
