/* modes.h — step times that fall into two groups (report/FORMULAS.md "Two groups of step
 * times").  Under load a rank that loses its core now and then makes some steps wait for
 * it: a 2-rank step measured ~6 or ~16 ms, never between, and every mean over such steps
 * describes neither.  modes_split finds the split of the sorted durations into a fast and
 * a slow group with the least within-group sum of squares (1-D two-means, exact) and calls
 * it two groups only when it is one: each group at least MODES_MIN_SHARE of the steps and
 * MODES_MIN_GROUP steps, the slow group's median at least MODES_MIN_RATIO x the fast
 * group's, and the gap between the group means at least MODES_MIN_SEPARATION pooled
 * within-group standard deviations.  Why 5: the best split of one group is never far apart
 * -- a normal sample's gives ~2.7, a uniform one's ~3.5, and test_report_modes's 20 draws
 * of 200 steps each of normal, uniform, exponential and lognormal times reached 4.2 at most,
 * while the issue's ~6-or-~16 ms steps give over 12. */
#ifndef DDPPROF_REPORT_MODES_H
#define DDPPROF_REPORT_MODES_H

#include <stddef.h>
#include <stdint.h>

#define MODES_MIN_STEPS 10
#define MODES_MIN_GROUP 3
#define MODES_MIN_SHARE 0.10
#define MODES_MIN_RATIO 1.5
#define MODES_MIN_SEPARATION 5.0

struct step_modes {
    int two;                 /* 1: two groups by the rules above */
    size_t n, n_fast, n_slow; /* steps, and in each group (n_fast + n_slow = n when two) */
    double fast_ms, slow_ms; /* the groups' medians */
    double separation;       /* (mean slow - mean fast) / pooled within-group sd */
    int64_t split_ns;        /* midway between the groups: a step longer is in the slow one */
};

/* The groups of dur[0..n) (nanoseconds, any order) into *out; out->two = 0 for fewer than
 * MODES_MIN_STEPS steps.  0, or -1 after error_set() (out of memory). */
int modes_split(const int64_t *dur, size_t n, struct step_modes *out);

#endif
