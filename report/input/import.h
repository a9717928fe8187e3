/* import.h — the report's inputs other than one ddpprof run directory given by name, read
 * through the importers (report/input/importer.h: ddpprof run directories, PyTorch Kineto JSON,
 * the legacy exporter's JSON) over one import core (report/input/import_core.h), so every table,
 * the timeline and the charts work on them as on ddpprof's own runs
 * (report/FORMULAS.md "Imported PyTorch traces"). */
#ifndef DDPPROF_REPORT_IMPORT_H
#define DDPPROF_REPORT_IMPORT_H

#include <stddef.h>

#include "report/input/run.h"

/* Read every input of the report into rs: ddpprof run directories (or parents of runs),
 * directories of traces (one run each, or the runs their names say), and trace files (all
 * of them: one run, read last).  rs->default_out is the first input's directory when it is
 * a file.  0, or -1 after error_set(). */
int import_inputs(struct runset *rs, const char *const *inputs, int n);

/* A directory given to the report, appended to rs: read whole by the importer that claims it
 * (a ddpprof run, or a parent of runs), else its trace files as the ranks of one run
 * (import_dir_traces, import_run).  Returns 0, or -1 after error_set(). */
int import_dir(struct runset *rs, const char *dir);

/* The trace files of dir that some importer claims, sorted by name: only those of the
 * surest claim (tensorboard_trace_handler's "*.pt.trace.json[.gz]" when there are any, else
 * every "*.json[.gz]" but timeline.json, ...).  *paths (each and the array freed by the
 * caller) gets *n >= 0 paths.  Returns 0, or -1 after error_set(). */
int import_dir_traces(const char *dir, char ***paths, int *n);

/* Read the trace files paths[0..n) (n >= 1), each by the importer that claims it, as the
 * ranks of one run, named after where (a directory, or the first file), appended to rs.
 * Ranks come from each trace (else from "rankN" in the file name, else from the file order,
 * with a warning); clocks are aligned (same host and a format with a shared clock: shared;
 * otherwise from all-reduce end times) and the offset and its method kept per rank.
 * Returns 0, or -1 after error_set() with one line naming the file (unreadable, not JSON, no
 * events, nothing a training step is made of, two traces of one rank).  What the report can
 * do without (no ProfilerStep, no rank, a cut file, unknown NCCL kernel names, out-of-order
 * events) is a warning on stderr. */
int import_run(struct runset *rs, const char *where, char *const *paths, int n);

/* One PyTorch trace held in memory, buf[0..len), read as a one-rank run appended to rs (what
 * names it in messages): the same path as a file through import_run, without the file.  The
 * fuzz target's entry point (report/input/import_pytorch.c).  Returns as import_run. */
int import_buffer(struct runset *rs, const char *buf, size_t len, const char *what);

#endif
