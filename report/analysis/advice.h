/* advice.h — "say what to do": from the figures the report already has (phases, overlap,
 * buckets, stragglers, speedup, the host's load), a one-line verdict on the runs and the
 * recommendations that could save the most time per step, at most ADVICE_SHOWN of them
 * (shown by report/output/advice_view.h: the terminal's last lines, the page, advice.csv).
 * Each recommendation comes from one rule of a table (advice.c); a rule looks at one run
 * and either proposes one candidate, with the figure that backs it and the time per step
 * it could save, or nothing.  Each candidate says where that time comes from (measured in
 * the trace, measured by ddpprof tune in A/B trials, predicted, assumed) and whether it is
 * recommended (not when inside the run's noise, measured slower, or predicted for a run
 * measured under load); the recommended are ranked by that time and shown.  The rules,
 * their thresholds, estimates, sources and statuses are stated in report/FORMULAS.md
 * ("Advice"). */
#ifndef DDPPROF_REPORT_ADVICE_H
#define DDPPROF_REPORT_ADVICE_H

#include <stddef.h>
#include <stdio.h>

#include "report/analysis/analysis.h"

#define ADVICE_SHOWN 3 /* recommendations printed (advice.csv lists every candidate) */

/* The rules' thresholds (report/FORMULAS.md "Advice"); shares are of the mean step time. */
#define ADVICE_DATA_PCT 10.0         /* data loading at least this share of the step */
#define ADVICE_GRAD_EXPOSED_PCT 5.0  /* gradient all-reduce not hidden behind backward */
#define ADVICE_CAP_PCT 2.0           /* the predicted step at the best bucket cap shorter */
#define ADVICE_BLOCKING_PCT 5.0      /* collectives outside the gradient buckets */
#define ADVICE_STRAGGLER_SHARE 60.0  /* one rank the slowest in at least this % of steps */
#define ADVICE_STRAGGLER_STEPS 5     /* ... of at least this many counted steps */
#define ADVICE_WAIT_PCT 2.0          /* and the others' wait for it at least this share */
#define ADVICE_IMBALANCE_PCT 5.0     /* no steady straggler, waiting at least this share */
#define ADVICE_LAUNCH_PCT 20.0       /* the device waiting for the host (launch-bound) */
#define ADVICE_TINY_BATCH 16         /* a batch per rank at most this ... */
#define ADVICE_FIXED_PCT 25.0        /* ... with per-step fixed costs at least this share */
#define ADVICE_AMP_GAIN 0.5          /* assumed: AMP halves forward+backward on a GPU */
#define ADVICE_LOAD_CAP 0.9          /* the load rule's estimate at most this of the step */
/* The verdict's words: speedup below ADVICE_SLOWER "slower than the baseline", below
 * ADVICE_NO_FASTER "no faster", else by efficiency: >= 0.9 well, >= 0.7 fairly, poorly. */
#define ADVICE_SLOWER 0.95
#define ADVICE_NO_FASTER 1.05
#define ADVICE_EFF_WELL 0.9
#define ADVICE_EFF_FAIR 0.7
/* The verdict's cause: the exposed communication's growth is the stragglers' when the
 * others' wait for the slowest rank is at least this share of it. */
#define ADVICE_CAUSE_WAIT 0.5
/* The run's noise (FORMULAS.md "Advice": the noise): half the range from the 10th to the
 * 90th percentile of its steady steps, of a rank with at least ADVICE_NOISE_STEPS of them
 * (else none), or, with --repeat, half the range of the repeats' mean steps if larger. */
#define ADVICE_NOISE_LO 10
#define ADVICE_NOISE_HI 90
#define ADVICE_NOISE_STEPS 5

/* Where a candidate's saving comes from. */
enum advice_source {
    ADVICE_MEASURED, /* "measured (trace)": a time the run spent, read from its trace (acting
                        on it could at most save it) */
    ADVICE_PREDICTED, /* "predicted": ddpprof predict's model */
    ADVICE_ASSUMED,  /* "assumed": a stated assumption (FORMULAS.md), not a measurement */
    ADVICE_AB        /* "measured (A/B)": ddpprof tune ran the change against the run's
                        configuration in interleaved rounds (tune.csv) */
};

/* Whether a candidate is recommended, and why not. */
enum advice_status {
    ADVICE_ST_RECOMMENDED,  /* "recommended": shown when among the first ADVICE_SHOWN */
    ADVICE_ST_NOISE, /* "inside the noise": its saving is not beyond the run's noise (or
                            tune measured it as noise) */
    ADVICE_ST_SLOWER,    /* "slower": tune measured the change making the step slower */
    ADVICE_ST_UNDER_LOAD    /* "unreliable under load": a prediction for a run measured under
                            load (the model's costs are an idle machine's) */
};

struct advice_item {
    const char *rule; /* the rule's name (static): "data", "grad_exposed", ... */
    int run;          /* index of the run it is about (runset order) */
    double saving_ms; /* time per step it could save (its estimate; FORMULAS.md); measured
                         (A/B): the step's measured change, negative when it got slower */
    int has_interval; /* saving_lo_ms .. saving_hi_ms are set: measured (A/B), the rounds'
                         range; predicted, where the prediction carries an interval */
    double saving_lo_ms, saving_hi_ms;
    double step_ms;   /* that run's mean step time */
    enum advice_source source;
    enum advice_status status;
    int has_noise;    /* noise_ms is set */
    double noise_ms;  /* the noise the saving was held against: the run's; measured (A/B):
                         tune's (the given configuration against itself) */
    const char *ab_verdict; /* measured (A/B): tune's "faster", "slower" or "noise" (static);
                               else NULL */
    char *text;       /* "data loading is 18 % of the step (12.3 ms): more loader workers" */
};

struct advice {
    char *verdict;             /* "verdict: ..." (NULL only before advice_make) */
    char *cause_action;        /* where the verdict names the cause of a speedup gap: what
                                  would change it ("more cores per rank, or GPUs, ..."),
                                  else NULL */
    const char *cause_name;    /* ... and the cause ("compute per rank"; static) */
    int gap;                   /* the verdict's run is slower than the baseline or scales
                                  poorly (speedup < ADVICE_NO_FASTER or efficiency <
                                  ADVICE_EFF_FAIR) */
    struct advice_item *items; /* every candidate: the recommended ones first, each group
                                  best first */
    size_t n, cap;
    size_t recommended;        /* the items with status ADVICE_ST_RECOMMENDED */
    size_t noise, slower, under_load; /* ... with each other status */
    int has_noise;             /* the verdict's run's noise (for the "no recommendation" line) */
    double noise_ms;
};

/* Run every rule on the runs of rs (the runs other than the baseline when there are any,
 * else all), hold each candidate against its run's noise and load, apply what ddpprof tune
 * measured, and rank them: the recommended first; in each group the largest saving first,
 * equal savings in rule order, then run order.  rep: the runs' repeats (repeats_read; NULL:
 * none), for the noise.  wf: ddpprof predict's what-if figures of rs
 * (predict_whatif_figures), which the bucket-cap rule reads.  tune: tune.csv as read
 * (NULL: none), applied to the runs of the configuration it measured.  out is overwritten.
 * 0, or -1 after error_set (out of memory). */
struct predict_whatif;
struct repeats;
struct tune_results;
int advice_make(const struct runset *rs, const struct run_stat *st, const struct repeats *rep,
                const struct predict_whatif *wf, const struct tune_results *tune,
                struct advice *out);

/* The recommendations shown: min(recommended, ADVICE_SHOWN). */
size_t advice_shown(const struct advice *a);

/* The names of a source and a status, as advice.csv writes them */
const char *advice_source_name(enum advice_source s);
const char *advice_status_name(enum advice_status s);

/* 100 part / whole, 0 when whole is not positive: a share of the step, as every rule and
 * advice.csv give it */
double advice_pct(double part, double whole);

void advice_free(struct advice *a);

#endif
