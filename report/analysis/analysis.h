/* analysis.h — the numbers behind every table and chart, computed from the runs' trace
 * rows.  Every formula is defined once in report/FORMULAS.md; this is its implementation,
 * one function per formula (declared below, or static in analysis.c where only the
 * analysis needs it), and report/output/ only formats what these return.
 * Which rows count: kind "range" rows; per rank and phase, the `device` clock rows when the
 * rank has any for that phase (GPU time), else the `host` rows.  CUPTI rows (kernels,
 * memcpy, ...) only go to the timeline. */
#ifndef DDPPROF_REPORT_ANALYSIS_H
#define DDPPROF_REPORT_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "report/input/run.h"

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
    const char *collective; /* the collective kind of a communication phase
                               (trace_phase_collective), else NULL */
    int64_t bytes;          /* total payload of its rows; -1: some row's is unknown */
    /* a collective phase of a run with >= 2 ranks (phases.csv transfer_ms, wait_ms,
     * late_rank, late_share_pct; analysis_colls): over this rank's calls in the steps after
     * the warm-up, the sum of each call's transfer (its least time over the ranks) and of
     * this rank's time in it less that (its wait for the last rank to arrive); and, for the
     * phase over all ranks, the rank that arrived last in most calls and in what share */
    int has_xfer;
    int64_t transfer_ns, wait_ns;
    int late_rank;     /* rank id; -1: no call had a rank arrive last (no call waited) */
    double late_share; /* its late calls / the calls seen on >= 2 ranks */
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
    unsigned device_phases; /* bit 1 << p (enum trace_phase): phase p counts device rows */
    int median_step, slowest_step; /* the step numbers of the p50 and the longest step range
                                      (-1: no step ranges) */
    int64_t warmup_step_ns; /* the warm-up steps' step ranges, left out of step_ns */
    size_t warmup_nsteps;   /* ... and how many */
    int has_kern;                  /* device activity was seen: kern is its sweep */
    struct kernel_sweep kern;
    /* overlap.csv comm_cpu_ms, comm_cpu_bwd_ms (report/FORMULAS.md): the median over the
     * counted steps of the CPU time the rank's threads other than the training thread took
     * in a step and in its backward (kind cpu rows of CPU ranks, probes/TRACE.md); has_*
     * 0: the trace has no such rows (GPU ranks, traces before them) */
    double comm_cpu_ns, comm_cpu_bwd_ns;
    double comm_cpu_bwd_span_ns; /* the median span of those backward rows (backward's time
                                    between its two readings of the clocks) */
    int has_comm_cpu, has_comm_cpu_bwd;
};

struct bucket_stat {
    int bucket;
    int64_t params; /* parameter tensors: meta.csv bucket.N.params, else -1 (unknown) */
    int64_t bytes;  /* meta.csv bucket.N.bytes, else the rows' largest bytes; -1 unknown */
    size_t count;   /* all-reduce rows, over ranks and steps */
    int64_t total_ns, hidden_ns;
    size_t collectives;  /* distinct (step, bucket) all-reduces: one per step */
    int64_t transfer_ns; /* sum over them of the shortest duration over ranks */
    int64_t wait_ns;     /* sum over rows of duration - that collective's transfer time */
    size_t skewed;       /* collectives seen on two ranks or more */
    int64_t skew_ns;     /* sum over them of the latest start - the earliest start */
};

/* A collective phase inside the steps after the warm-up: the k-th call of its phase in step
 * s on every rank is one call, for the gradient buckets' `allreduce` bucket k of step s
 * (report/FORMULAS.md "phases.csv", transfer and wait; "Advice", the blocking rule). */
struct coll_stat {
    uint32_t phase;         /* id in runset.labels: comm.allreduce, comm.allgather, barrier, ... */
    const char *collective; /* its kind (trace_phase_collective): "allreduce", ... */
    size_t calls;           /* distinct (step, k) calls */
    size_t rows;            /* their rows, over the ranks */
    int64_t total_ns;       /* the rows' time */
    int64_t transfer_ns;    /* sum over the calls of the shortest duration over ranks: the
                               collective's own time (the last rank to arrive waits least) */
    int64_t wait_ns;        /* sum over rows of duration - that call's transfer: the ranks'
                               wait in it for the last to arrive */
    int grad;               /* 1: the gradient buckets' `allreduce` phase (a call is one
                               bucket in one step); advice's blocking rule leaves it out */
    size_t multi;           /* calls seen on >= 2 ranks */
    int late_rank;          /* rank id arriving last (least time) in most calls with a wait;
                               -1: none */
    size_t late_calls;      /* ... in how many */
};

struct step_stat {
    int step;
    int ranks;        /* ranks with this step's step and backward ranges */
    int slowest_rank; /* the latest end of backward */
    int64_t max_compute_ns, min_compute_ns, skew_ns, wait_ns;
    /* the collectives outside the gradient buckets in this step (run_stat.colls' calls):
     * the ranks' wait in them for the last to arrive, and the rank (id) the most of it was
     * for -- in each call the rank with the least time; -1: no wait */
    int64_t coll_wait_ns;
    int coll_late_rank;
};

/* ---- warm-up (report/FORMULAS.md "Warm-up steps") ----
 * The first steps of a run (allocation, cuDNN's and oneDNN's first-call planning, cold
 * caches) are slower than the rest; like torch.profiler's schedule(warmup=...), every
 * per-step statistic (phases.csv, overlap.csv, buckets.csv, stragglers.csv, the step
 * drawings) leaves them out, and so do the throughput, speedup and efficiency (the steady
 * state); train_s and the _whole_run figures of speedup.csv count every step. */
#define ANALYSIS_WARMUP_AUTO (-1) /* detect: analysis_warmup_detect */
#define ANALYSIS_WARMUP_TOL 0.5   /* settled: within 50 % above the median that follows */
#define ANALYSIS_WARMUP_NEXT 5    /* ... of the next 5 steps */
#define ANALYSIS_WARMUP_CAP 10    /* at most 10 steps, and at most a quarter of them */
struct warmup_stat {
    int steps;          /* warm-up steps left out (the lowest step numbers >= 1) */
    int last_step;      /* the last one's step number (0: none) */
    int detected;       /* 1: found by analysis_warmup_detect, 0: --warmup-steps */
    int64_t first_ns;   /* the first step's duration (the reference rank's), -1: no steps */
    int first_step;     /* its step number */
};

/* The warm-up steps of step durations dur[0..n) in step order: the index w of the first
 * step that has settled -- dur[w] <= (1 + ANALYSIS_WARMUP_TOL) x the median (lower middle)
 * of dur[w+1 .. w+ANALYSIS_WARMUP_NEXT] (those present; a last step has settled) -- tried
 * for w < cap = min(ANALYSIS_WARMUP_CAP, n / 4); cap when none has. */
int analysis_warmup_detect(const int64_t *dur, size_t n);

/* What a run's throughput and speedup are taken over (speedup.csv basis). */
enum analysis_basis {
    ANALYSIS_BASIS_NONE,      /* no figure */
    ANALYSIS_BASIS_STEADY,    /* the steps after the warm-up */
    ANALYSIS_BASIS_WHOLE_RUN, /* every step's range (train_s) */
    ANALYSIS_BASIS_WALL       /* the run's wall_s (no step ranges) */
};
extern const char *const analysis_basis_names[]; /* "", "steady", "whole_run", "wall" */

struct run_stat {
    const struct run *run;
    struct rank_stat *ranks; /* as run->ranks */
    int nranks;
    struct bucket_stat *buckets; /* ascending bucket id */
    size_t nbuckets;
    struct step_stat *steps; /* ascending step */
    size_t nsteps;
    struct coll_stat *colls; /* the collectives in steps, per phase (phase order): the
                                gradient buckets' (grad = 1) and every other */
    size_t ncolls;
    int rep_steps[2]; /* the drawn steps (report.html): the median and the slowest step of
                         the lowest rank with step ranges */
    int nrep;
    /* speedup.csv (report/FORMULAS.md): images_per_s, speedup and efficiency are the
     * steady state's (the steps after the warm-up) where both runs have one, else the
     * whole run's (basis says which); the _whole figures count every step */
    int has_images, has_wall, has_train, has_ips, has_speedup;
    int64_t images;
    double wall_s, train_s, images_per_s, speedup, efficiency;
    enum analysis_basis basis; /* of speedup (of images_per_s without a speedup) */
    int train_from_wall; /* no step ranges: train_s is wall_s */
    int has_steady;      /* the steady figures below are set */
    size_t steady_steps; /* rank 0's steps after the warm-up */
    int64_t steady_images;
    double steady_s;     /* their step ranges' time */
    int has_ips_whole, has_speedup_whole;
    double images_per_s_whole, speedup_whole, efficiency_whole; /* every step (train_s), or
                                                                   wall_s (basis_whole) */
    enum analysis_basis basis_whole;
    struct warmup_stat warmup; /* the steps left out of the per-step statistics */
};

/* Analyse every run of rs into a new array of rs->n run_stat (free with analysis_free).
 * Returns NULL after error_set() (out of memory). */
struct run_stat *analysis_run(const struct runset *rs);
/* analysis_run with warmup_steps warm-up steps left out of every run's per-step statistics
 * (ANALYSIS_WARMUP_AUTO: detected per run; more than a run has: all but its last). */
struct run_stat *analysis_run_warmup(const struct runset *rs, int warmup_steps);
void analysis_free(struct run_stat *st, int n);

/* The host's load while a run was measured (report/FORMULAS.md "Figures measured under
 * load"), from meta.csv: other_cores = (host_busy_s - ranks_cpu_s) / wall_s, the cores
 * other programs kept busy on average; steal = host_steal_s / (wall_s x host_cores), the
 * share of the CPU time the hypervisor took.  loaded: other_cores >= ANALYSIS_LOADED_CORES
 * or steal >= ANALYSIS_LOADED_STEAL or, where the CPU times are not there, a load average
 * at the start above host_cores. */
#define ANALYSIS_LOADED_CORES 0.25
#define ANALYSIS_LOADED_STEAL 0.05
struct run_load {
    int has_other, has_steal, has_load, loaded;
    double other_cores, steal, load_start, load_end;
    int cores; /* host_cores, 0 when unknown */
};
void analysis_load(const struct run *r, struct run_load *out);

/* 1 when run r had more CPU ranks on its host than the host has cores (--oversubscribe):
 * meta.csv device cpu, local_world_size (else world_size) above host_cores; *ranks and
 * *cores are set then. */
int analysis_oversubscribed(const struct run *r, int *ranks, int *cores);

/* The index of the baseline run (mode "baseline", else world size 1), or -1. */
int analysis_baseline(const struct runset *rs);

/* ---- repeats (report/FORMULAS.md "Repeats") ---- */

/* The median and range of v[0..n) (n > 0): the middle value of the sorted values, the mean
 * of the two middle ones for even n; min, max.  Sorts v. */
struct spread {
    double median, min, max;
};
void analysis_spread(double *v, size_t n, struct spread *out);

/* ---- the formulas of report/FORMULAS.md, one function each ----
 * Those that return int: 1 and *out set when the figure is defined, 0 (the empty field)
 * when it is not. */

/* p50_ms, p95_ms (and the chart's p5..p75): nearest-rank percentile of sorted[0..n), the
 * value at 1-based rank ceil(p * n / 100), p in 1..100; 0 when n == 0. */
int64_t analysis_percentile(const int64_t *sorted, size_t n, int p);

/* mean_ms of phases.csv and buckets.csv, in ns: total_ns / count (count > 0). */
double analysis_mean_ns(int64_t total_ns, size_t count);

/* phases.csv pct_of_step: 100 · the phase's time inside steps / the rank's step time;
 * undefined when the phase has no rows inside steps or the rank no step ranges. */
int analysis_pct_of_step(const struct rank_stat *r, const struct phase_stat *ps, double *pct);

/* overlap.csv overlap_pct: 100 · |M ∩ C| / |M|; undefined when |M| = 0. */
int analysis_overlap_pct(const struct rank_stat *r, double *pct);

/* buckets.csv algbw_GBps: bytes / mean time of one all-reduce (bytes per ns = GB/s);
 * undefined when that time is 0. */
int analysis_algbw(const struct bucket_stat *b, double *gbps);

/* buckets.csv busbw_GBps: algbw · 2(n-1)/n for n = world_size (nccl-tests' all-reduce bus
 * bandwidth); 0 for n = 1. */
double analysis_busbw(double algbw_gbps, int world_size);

/* buckets.csv pct_hidden: 100 · all-reduce time under backward / all-reduce time;
 * undefined when the time is 0. */
int analysis_pct_hidden(const struct bucket_stat *b, double *pct);

/* speedup.csv images_per_s: images / seconds (the steady steps' images / their time;
 * _whole_run: images / train_s, or wall_s for a run without step ranges). */
double analysis_images_per_s(int64_t images, double seconds);

/* speedup.csv speedup: images/s over the baseline's images/s. */
double analysis_speedup(double images_per_s, double baseline_images_per_s);

/* speedup.csv efficiency: speedup / world_size (1.0 = linear scaling). */
double analysis_efficiency(double speedup, int world_size);

/* The phase chart: mean ms per step of segment s, its total / the rank's step ranges
 * (r->nsteps > 0). */
double analysis_seg_ms_per_step(const struct rank_stat *r, enum seg s);

/* ---- collective figures that need no common clock (buckets.csv) ---- */

/* transfer_ms: the mean over the bucket's collectives of the shortest duration of each over
 * ranks; undefined without collectives. */
int analysis_transfer_ns(const struct bucket_stat *b, double *ns);

/* sync_wait_ms: the mean over the bucket's rows of duration - the collective's transfer. */
int analysis_sync_wait_ns(const struct bucket_stat *b, double *ns);

/* start_skew_ms: the mean over collectives seen on >= 2 ranks of latest - earliest start. */
int analysis_start_skew_ns(const struct bucket_stat *b, double *ns);

/* xfer_algbw_GBps: bytes / transfer time (bytes per ns = GB/s); undefined when the bytes
 * are unknown or the time is 0.  Its busbw is analysis_busbw of it. */
int analysis_xfer_algbw(const struct bucket_stat *b, double *gbps);

/* ---- kernel-based overlap and idle (overlap.csv, Holistic Trace Analysis' definitions),
 * from the sweep (report/input/kernels.h) ---- */

/* k_overlap_pct: 100 · |comm ∩ compute| / |comm| over the kernels; undefined without comm. */
int analysis_kernel_overlap_pct(const struct kernel_sweep *k, double *pct);

/* k_idle_ms: the window (first start to last end) less the union of all activities. */
int64_t analysis_kernel_idle_ns(const struct kernel_sweep *k);

/* device_host_wait_ms: the device-wide idle gaps closed by an activity the host launched
 * after the gap began; device_kernel_gap_ms: the rest of the idle time.  Undefined without launch times. */
int analysis_host_wait_ns(const struct kernel_sweep *k, int64_t *ns);
int analysis_kernel_gap_ns(const struct kernel_sweep *k, int64_t *ns);

#endif
