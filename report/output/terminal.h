/* terminal.h — the report on the terminal: its tables (units in a second header line),
 * the notes and cautions beside them, the what-if lines, the hosts and restarts of the
 * runs, the diff, where the files went, and last what to do. */
#ifndef DDPPROF_REPORT_TERMINAL_H
#define DDPPROF_REPORT_TERMINAL_H

#include <stddef.h>
#include <stdio.h>

#include "report/analysis/advice.h"
#include "report/output/diff_view.h"
#include "report/analysis/notes.h"
#include "report/output/ops_view.h"
#include "report/output/tables.h"

/* What the terminal shows, made by the report. */
struct report_screen {
    const struct runset *rs;
    const struct report_tables *tables;
    const struct ops_tables *ops;
    const struct note_lines *warm, *spread, *cautions;
    char *const *whatif; /* the what-if lines (report/output/predict_view.h) */
    size_t nwhatif;
    const struct diff_view *diff; /* NULL: no diff */
    const struct advice *advice;
    const char *out;              /* where the files went */
    int kineto, kineto_files;     /* --kineto: the rank files written */
};

/* The whole report. */
void terminal_report(FILE *f, const struct report_screen *s);

/* `ddpprof diff`: the diff alone, and where it went. */
void terminal_diff_only(FILE *f, const struct report_screen *s);

#endif
