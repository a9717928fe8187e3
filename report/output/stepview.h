/* stepview.h — the picture a DDP user looks for first: the timeline of a step.  Per run, the
 * representative steps (the median and the slowest, analysis.h's rep_steps) drawn as inline
 * SVG for report.html: every rank a row on the aligned clock, its data / forward / backward /
 * optimizer ranges as bars, and under them one lane per gradient bucket holding that
 * bucket's all-reduce, so overlap with backward and waiting for other ranks are seen. */
#ifndef DDPPROF_REPORT_STEPVIEW_H
#define DDPPROF_REPORT_STEPVIEW_H

#include <stdio.h>

#include "report/analysis/analysis.h"

/* Write the drawings of every run of rs into the page f (a note where a run has no steps). */
void stepview_write(FILE *f, const struct runset *rs, const struct run_stat *st);

#endif
