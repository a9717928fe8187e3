/* diff.h — `ddpprof diff A B` and `ddpprof report A B --diff`: where the change in step time
 * between two runs comes from.  Per run, the mean step on the critical rank is split into
 * data, forward, backward, optimizer, exposed communication and other (an exact partition
 * of every counted step's range); finer rows (the layers of forward and backward, the
 * buckets and collectives of exposed communication) partition their parent with an "other"
 * remainder.  Each row's share of the step-time change is its change over the step's, the
 * shares of a level adding up to their parent's (100 % for the phases) exactly as printed.
 * report/FORMULAS.md "diff.csv" states the decomposition; report/output/diff_view.h shows it. */
#ifndef DDPPROF_REPORT_DIFF_H
#define DDPPROF_REPORT_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "report/analysis/analysis.h"

/* The two runs of a diff in rs: inputs[0..n) as given on the command line.  One input
 * holding two runs (a main job's baseline/ and ddp/): the baseline, then the other.  Two
 * inputs: the run of each (an input holding a main job's runs gives its run that is not
 * the baseline).  0 with *a, *b set, or -1 after error_set() (one line: what was given,
 * what to give). */
int diff_pick(const struct runset *rs, const char *const *inputs, int n, int *a, int *b);

/* One row of a diff (one row of diff.csv): level "step" (the first row), "phase" (the
 * step's DIFF_PARTS parts, an exact partition of it), "layer" and "comm" (finer rows under a
 * phase, with an "other" remainder), "op" and "kernel" (imports: outside the partition). */
struct diff_row {
    const char *level, *parent;
    char *name;
    int64_t a_ns, b_ns;           /* part sums over the counted steps */
    int64_t a_time_ns, b_time_ns; /* own time sums */
    int has_time;
    int64_t a_us, b_us;           /* rounded means per step (µs) */
    int64_t a_time_us, b_time_us; /* own time per step (µs), when has_time */
    int64_t share_cp;             /* share of the step change, hundredths of a percent */
    int has_share;
};

/* The parts of a step: data, forward, backward, optimizer, exposed_comm, other. */
#define DIFF_PARTS 6

/* The result of a diff: its rows, the counted steps of each run, the runs. */
struct diff_result {
    struct diff_row *rows; /* rows[0]: the step */
    size_t n;
    int64_t a_steps, b_steps;
    int a, b; /* the runs (indices in rs) */
};

/* Compute the diff of runs a and b of rs (st: their analysis, for the warm-up steps).
 * 0, or -1 after error_set() (a run without step ranges after its warm-up: nothing to
 * compare; out of memory).  Free with diff_free (also after a failure). */
int diff_compute(const struct runset *rs, const struct run_stat *st, int a, int b,
                 struct diff_result *out);
void diff_free(struct diff_result *d);

/* The rows of d that matter most, beyond the step: the phases by |share|
 * (DIFF_TOP_PHASES), the layers and comm rows that changed by |share| (DIFF_TOP_FINER), the
 * ops and kernels that changed by |delta| (DIFF_TOP_OPS); largest first, ties in table
 * order; at most max of their indices into out.  How many. */
enum diff_top { DIFF_TOP_PHASES, DIFF_TOP_FINER, DIFF_TOP_OPS };
size_t diff_top(const struct diff_result *d, enum diff_top which, size_t *out, size_t max);

#endif
