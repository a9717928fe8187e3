/* report.h — `ddpprof report`: turn run directories into the tables, the merged timeline
 * and the charts.  Reads only the files probes/ writes (probes/TRACE.md: rankN.trace.csv,
 * meta.csv, metrics.csv); never needs the trainer or a GPU.  Formulas: report/FORMULAS.md. */
#ifndef DDPPROF_REPORT_H
#define DDPPROF_REPORT_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Report on run_dirs[0..n).  Each is a run directory (it has meta.csv) or a parent holding
 * runs in subdirectories (baseline/ and ddp/, as `ddpprof --cpu N` writes them); all runs
 * are compared in one speedup table, the baseline being the run with mode "baseline" (else
 * world size 1).  Writes into out_dir (created if missing; NULL: the first directory given,
 * i.e. the run itself or the parent): phases.csv, buckets.csv, overlap.csv, stragglers.csv,
 * speedup.csv, timeline.json, phases.svg, speedup.svg, report.html.  Prints the tables,
 * aligned with units, to terminal (NULL: print nothing).  Warnings (a rank's trace
 * missing, a truncated last line, no clock offsets, no baseline) go to stderr and the report
 * goes on with what is there.  Returns 0, or -1 after error_set() with one line naming the
 * file and line at fault (missing column, non-numeric field, end before start, empty trace,
 * not a run directory, unwritable output).  The caller owns everything it passed. */
int report_run(const char *const *run_dirs, int n, const char *out_dir, FILE *terminal);

#ifdef __cplusplus
}
#endif
#endif
