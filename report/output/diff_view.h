/* diff_view.h — a diff of two runs (report/analysis/diff.h) shown: diff.csv (every row), the
 * terminal's short table (the step, the phases, the finer rows and ops that moved most)
 * with its one-line summary, and report.html's section. */
#ifndef DDPPROF_REPORT_DIFF_VIEW_H
#define DDPPROF_REPORT_DIFF_VIEW_H

#include <stdio.h>

#include "report/analysis/diff.h"
#include "report/output/table.h"

struct diff_view {
    struct table full, top;
    char *summary; /* "baseline -> ddp: step 12.345 -> 15.678 ms (+3.333 ms, +27.0 %) ..." */
};

/* Make v from d (the runs of rs).  0, or -1 after error_set() (out of memory).  Free with
 * diff_view_free (also after a failure). */
int diff_view_make(struct diff_view *v, const struct diff_result *d, const struct runset *rs);
void diff_view_free(struct diff_view *v);

/* report.html's diff section (a struct diff_view): the summary, the shares of the phases
 * as bars, the table. */
void diff_write_html(FILE *f, const void *diff_view);

#endif
