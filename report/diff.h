/* diff.h — `ddpprof diff A B` and `ddpprof report A B --diff`: where the change in step time
 * between two runs comes from.  Per run, the mean step on the critical rank is split into
 * data, forward, backward, optimizer, exposed communication and other (an exact partition
 * of every counted step's range); finer rows (the layers of forward and backward, the
 * buckets and collectives of exposed communication) partition their parent with an "other"
 * remainder.  Each row's share of the step-time change is its change over the step's, the
 * shares of a level adding up to their parent's (100 % for the phases) exactly as printed.
 * report/FORMULAS.md "diff.csv" states the decomposition. */
#ifndef DDPPROF_REPORT_DIFF_H
#define DDPPROF_REPORT_DIFF_H

#include <stdio.h>

#include "report/analysis.h"
#include "report/table.h"

/* The two runs of a diff in rs: inputs[0..n) as given on the command line.  One input
 * holding two runs (a main job's baseline/ and ddp/): the baseline, then the other.  Two
 * inputs: the run of each (an input holding a main job's runs gives its run that is not
 * the baseline).  0 with *a, *b set, or -1 after error_set() (one line: what was given,
 * what to give). */
int diff_pick(const struct runset *rs, const char *const *inputs, int n, int *a, int *b);

/* The result of a diff: the full table (diff.csv), the terminal's short one (the step, the
 * phases, the finer rows that moved most) and the one-line summary. */
struct diff_result {
    struct table full, top;
    char *summary; /* "baseline -> ddp: step 12.345 -> 15.678 ms (+3.333 ms, +27.0 %) ..." */
    int a, b;      /* the runs (indices in rs) */
};

/* Compute the diff of runs a and b of rs (st: their analysis, for the warm-up steps).
 * 0, or -1 after error_set() (a run without step ranges after its warm-up: nothing to
 * compare; out of memory).  Free with diff_free (also after a failure). */
int diff_compute(const struct runset *rs, const struct run_stat *st, int a, int b,
                 struct diff_result *out);
void diff_free(struct diff_result *d);

/* report.html's diff section: the summary, the shares of the phases as bars, the table. */
void diff_write_html(FILE *f, const void *diff_result);

#endif
