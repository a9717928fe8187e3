/* analysis.h — the numbers behind every table and chart, computed from the runs' trace
 * rows.  Every formula is defined once in report/FORMULAS.md; this is its implementation.
 * Which rows count: kind "range" rows; per rank and phase, the `device` clock rows when the
 * rank has any for that phase (GPU time), else the `host` rows.  CUPTI rows (kernels,
 * memcpy, ...) only go to the timeline. */
#ifndef DDPPROF_REPORT_ANALYSIS_H
#define DDPPROF_REPORT_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "report/run.h"

/* The stacked-bar segments of the phase breakdown (per step, inside step ranges). */
enum seg { SEG_DATA, SEG_FORWARD, SEG_BACKWARD, SEG_OPTIMIZER, SEG_EXPOSED, SEG_OTHER, SEG_COUNT };
extern const char *const seg_names[SEG_COUNT];

struct phase_stat {
    uint32_t phase; /* id in runset.labels */
    size_t count;
    int64_t total_ns, p50_ns, p95_ns, max_ns; /* percentiles: nearest rank */
    double mean_ns;
    int64_t in_steps_ns; /* total of the rows with step >= 1 */
    int in_steps;        /* some row has step >= 1 */
};

struct rank_stat {
    int rank;
    struct phase_stat *phases; /* the phases present, in report order */
    int nphases;
    int64_t *step_ns; /* step range durations, ascending */
    size_t nsteps;
    int64_t step_total_ns; /* sum of step_ns */
    int64_t step_union_ns, compute_ns, comm_ns, exposed_ns, idle_ns;
    int64_t seg_ns[SEG_COUNT]; /* totals over all steps */
};

struct bucket_stat {
    int bucket;
    int64_t params; /* parameter tensors: meta.csv bucket.N.params, else -1 (unknown) */
    int64_t bytes;  /* meta.csv bucket.N.bytes, else the rows' largest bytes */
    size_t count;   /* all-reduce rows, over ranks and steps */
    int64_t total_ns, hidden_ns;
};

struct step_stat {
    int step;
    int ranks;        /* ranks with this step's step and backward ranges */
    int slowest_rank; /* the latest end of backward */
    int64_t max_compute_ns, min_compute_ns, skew_ns, wait_ns;
};

struct run_stat {
    const struct run *run;
    struct rank_stat *ranks; /* as run->ranks */
    int nranks;
    struct bucket_stat *buckets; /* ascending bucket id */
    size_t nbuckets;
    struct step_stat *steps; /* ascending step */
    size_t nsteps;
    int has_images, has_wall, has_train, has_ips, has_speedup;
    int64_t images;
    double wall_s, train_s, images_per_s, speedup, efficiency;
    int train_from_wall; /* no step ranges: train_s is wall_s */
};

/* Analyse every run of rs into a new array of rs->n run_stat (free with analysis_free).
 * Returns NULL after error_set() (out of memory). */
struct run_stat *analysis_run(const struct runset *rs);
void analysis_free(struct run_stat *st, int n);

/* Nearest-rank percentile of sorted[0..n): the value at 1-based rank ceil(p * n / 100),
 * p in 1..100; 0 when n == 0. */
int64_t analysis_percentile(const int64_t *sorted, size_t n, int p);

/* The index of the baseline run (mode "baseline", else world size 1), or -1. */
int analysis_baseline(const struct runset *rs);

#endif
