/* predict.h — `ddpprof predict`: what a run's step would take in another configuration
 * (world size, bucket cap, network bandwidth and latency, AMP), by replaying one median
 * step of the run as a dependency graph (report/FORMULAS.md "Predictions"):
 *
 *   data -> forward -> backward, layer by layer in backward order; each parameter's
 *   gradient is ready when its layer's backward ends; buckets are formed for the asked cap
 *   by the reducer's own rule (common/ddp_buckets.h); a bucket's all-reduce starts when its
 *   last gradient is ready and the one comm stream is free (FIFO, bucket order) and takes
 *   the ring all-reduce cost 2(N-1)/N * bytes / bandwidth + 2(N-1) * latency; the
 *   optimizer starts after backward and the last bucket; stragglers add the expected
 *   slowest of N ranks' compute over the mean.
 *
 * The engine (predict_replay) is pure and knows nothing of files; predict.c builds its
 * model from a run (the per-layer trace rows and meta.csv keys of `--trace full`, probes/
 * TRACE.md), calibrates the comm from the run's own collectives, and anchors every
 * prediction at the run's measured median step:
 *
 *   predicted step = measured median step + replay(asked) - replay(the run's own config)
 *
 * so `ddpprof predict RUN` with no what-if gives the measured step. */
#ifndef DDPPROF_REPORT_PREDICT_H
#define DDPPROF_REPORT_PREDICT_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the engine ---- */

struct predict_layer {
    const char *name;       /* borrowed */
    double fwd_ms, bwd_ms;  /* median per step */
};

struct predict_param {
    size_t bytes; /* its gradient's bytes (fp32) */
    int layer;    /* index into the layers (forward order); -1: ready at backward's end */
};

struct predict_model {
    struct predict_layer *layers; /* forward order; may be 0: gradients then become ready
                                     spread over backward in proportion to their bytes */
    int nlayers;
    struct predict_param *params; /* model parameter order (the reducer's) */
    int nparams;
    double data_ms, forward_ms, backward_ms, optimizer_ms; /* median per step */
    /* the training thread's own collectives per step (SyncBatchNorm, AMP's flag, the loss):
     * their payloads; their time is inside forward/backward at held_world ranks */
    size_t *held_bytes;
    int nheld, held_world;
    /* the last nheld_sync_bn of held_bytes are SyncBatchNorm's (forward and backward) */
    int nheld_sync_bn;
    /* per rank and step, forward + backward compute (ms), for the straggler term */
    double *compute_ms;
    size_t ncompute;
    /* the rank-arrival wait measured at wait_world ranks (0: none measured): per step the
     * slowest rank's gradients ready less the mean rank's (stragglers.csv wait_ms / ranks),
     * the median over steps; the straggler term is this, scaled to another world by the
     * compute samples' E[max] ratio (report/FORMULAS.md "Predictions") */
    double wait_ms;
    int wait_world;
};

/* The ring all-reduce's parameters: latency per hop (µs) and link bandwidth (gigabits per
 * second, 10^9 bit/s, as tc and NICs count). */
struct predict_comm {
    double latency_us, bandwidth_gbps;
    /* the least an all-reduce of 2 ranks or more takes (ms; 0: none): the time of the
     * setup's near-empty all-reduce, which the line's latency does not reach where waking
     * a waiting rank costs more than the wire (a CPU rank in a VM: up to a scheduler tick) */
    double floor_ms;
    /* what an all-reduce that starts while the ranks still compute (before the end of
     * backward) takes more than the line (ms; 0: none): the median excess of the run's own
     * such bucket all-reduces.  On CPU ranks the comm's threads share the cores with
     * backward and get one at the scheduler's next tick; on a GPU, compute's kernels share
     * the SMs with the collective's */
    double busy_ms;
    /* 1: the comm's threads share the ranks' cores and run when the reducer calls its
     * progress, after each gradient (meta.csv comm_progress=gradient, gloo on CPU ranks):
     * an all-reduce that starts before backward ends takes each step of its ring at the
     * next gradient, then `busy` more; 0: it runs beside compute, T + busy */
    int grad_progress;
    /* what the comm's threads take of the CPU per byte a rank moves in a collective (ring:
     * 2(N-1)/N of its bytes), ms (0: not measured): the run's kind cpu rows (overlap.csv
     * comm_cpu_ms, CPU ranks of one compute thread) over the bytes its collectives moved a
     * step.  The part of it spent beside backward lengthens backward (report/FORMULAS.md
     * "The comm's CPU beside backward") */
    double cpu_ms_per_byte;
    /* added to every all-reduce's time of 2 ranks or more (ms; the time at least 0): the
     * 80 % interval's comm term (report/FORMULAS.md "The 80 % interval"); 0 in a prediction */
    double offset_ms;
    /* what the fit left unexplained (report/FORMULAS.md "The 80 % interval"): of its
     * resid_sizes residuals (0: not fitted), min(0, p10) and max(0, p90), ms an all-reduce */
    size_t resid_sizes;
    double resid_lo_ms, resid_hi_ms;
};

struct predict_config {
    int world;
    double bucket_cap_mb;
    struct predict_comm comm;
};

struct predict_out {
    int buckets;
    double step_ms;         /* data + forward + backward + exposed comm + optimizer + held
                               collectives + straggler wait (the replay's, not anchored) */
    double compute_ms;      /* data + forward + backward + optimizer */
    double comm_ms;         /* the buckets' all-reduce time */
    double exposed_comm_ms; /* the last bucket's end after backward's end (>= 0) */
    double overlap_pct;     /* 100 (comm - exposed) / comm; 0 without comm */
    double held_ms;         /* the held collectives at the asked world (the step adds its
                               change from held_world: forward and backward hold the rest) */
    double cpu_bwd_ms;      /* the comm's CPU beside backward: cpu_ms_per_byte times the
                               bytes moved by the all-reduces that start before backward
                               ends (in compute_ms and step_ms) */
    double straggler_ms;    /* the slowest rank's lateness over the mean rank's: the
                               measured wait scaled to N, else E[max of N ranks' compute] -
                               mean compute */
    /* the 80 % interval of step_ms (predict_one; the replay leaves them 0) */
    double step_lo_ms, step_hi_ms;
};

/* Ring all-reduce time of bytes among world ranks (ms): 2(N-1)/N * bytes / bandwidth +
 * 2(N-1) * latency, at least c->floor_ms, plus c->offset_ms (at least 0); 0 for world <= 1. */
double predict_ring_ms(const struct predict_comm *c, int world, double bytes);

/* Replay one step of m in configuration c into *out.  Returns 0, or -1 after error_set()
 * (out of memory, a world below 1, a non-positive cap or bandwidth). */
int predict_replay(const struct predict_model *m, const struct predict_config *c,
                   struct predict_out *out);

/* What predict_replay_log says of each bucket all-reduce: its bytes, its duration in the
 * replay (busy included where beside), and whether it started before backward's end
 * (beside compute).  b[0..n), one per bucket; free(b) when done. */
struct predict_bucket_rec {
    size_t bytes;
    double ms;
    int beside;
};
struct predict_bucket_log {
    int n;
    struct predict_bucket_rec *b;
};

/* predict_replay, and where log is not NULL each bucket's replayed all-reduce into it
 * (log->b allocated, NULL after a failure). */
int predict_replay_log(const struct predict_model *m, const struct predict_config *c,
                       struct predict_out *out, struct predict_bucket_log *log);

/* The busy term (report/FORMULAS.md "The comm's calibration"): of n bucket all-reduces
 * that ran beside compute in configuration c of m (bytes[i], measured ms[i]), the median
 * excess over what the replay of c gives that bucket without busy -- the line's time, or
 * with c->comm.grad_progress the ring's steps taken at the gradients, which the measured
 * durations hold already; a measured bucket the replay does not form beside compute (no
 * bucket of its bytes) is measured against the line.  ms[i] becomes that excess; the
 * median, at least 0, goes to *busy_ms.  0, or -1 after error_set(). */
int predict_fit_busy(const struct predict_model *m, const struct predict_config *c,
                     const double *bytes, double *ms, size_t n, double *busy_ms);

/* The expected slowest of world draws from samples[0..n) (sorted ascending) less their
 * mean: sum_i x_(i) ((i/n)^N - ((i-1)/n)^N) - mean; 0 for world <= 1 or n == 0. */
double predict_straggler_ms(const double *sorted, size_t n, int world);

/* The straggler term of m at world ranks: 0 for world <= 1; with a measured wait
 * (m->wait_world > 1) m->wait_ms * S(world) / S(wait_world), S = predict_straggler_ms of
 * m's compute samples (m->wait_ms where S(wait_world) is 0); else S(world).  0, or -1 after
 * error_set() (out of memory). */
int predict_straggler_of(const struct predict_model *m, int world, double *out);

/* SyncBatchNorm's collectives of one step as the run measured them (the training thread's
 * comm.allgather / comm.allreduce rows inside forward or backward, all ranks): per call the
 * transfer (the least time of any rank) and the mean over ranks of the rest (the wait for
 * the last to arrive); per step the sums, the median over the steps with every call on
 * every rank. */
struct predict_sync_bn {
    size_t steps, calls;          /* steps measured; calls per step */
    double fwd_xfer_ms, fwd_wait_ms; /* in forward (the statistics' all-gathers) */
    double bwd_xfer_ms, bwd_wait_ms; /* in backward (the sums' all-reduces) */
};

/* The model in without SyncBatchNorm (report/FORMULAS.md "SyncBatchNorm off"): forward and
 * backward less the collectives' transfer and wait (the mean rank's), their payloads out of
 * the held collectives, and the wait they absorbed added to the rank-arrival wait (it moves
 * into the first gradient bucket's all-reduce).  *out borrows in's arrays. */
void predict_model_sync_bn_off(const struct predict_model *in, const struct predict_sync_bn *sb,
                               struct predict_model *out);

/* The 80 % interval of a predicted step (report/FORMULAS.md "The 80 % interval"): each side's
 * half-width the root of the sum of the squares of the three terms' on that side --
 * step_ms * spread_lo (_hi) for the step-time spread (relative), comm_lo_ms (comm_hi_ms) for
 * the comm fit's residuals, skew_ms for the rank-arrival skew -- into *lo (at least 0) and
 * *hi. */
void predict_interval_combine(double step_ms, double spread_lo, double spread_hi,
                              double comm_lo_ms, double comm_hi_ms, double skew_ms, double *lo,
                              double *hi);

/* Least squares of time = a + b * bytes over (bytes[i], ms[i]), i < n: the ring's latency
 * and bandwidth at world ranks (a = 2(N-1) latency, b = 2(N-1)/N / bandwidth).  With one
 * distinct size (or a fit whose intercept is negative) the line goes through the origin:
 * latency 0.  Returns 0, or -1 when n == 0, world < 2 or the slope is not positive. */
int predict_fit_ring(const double *bytes, const double *ms, size_t n, int world,
                     struct predict_comm *out);

/* ---- a run's model and its predictions (predict.c) ---- */

struct runset;
struct run;
struct run_stat;

/* What of a run an 80 % interval is made of (report/FORMULAS.md "The 80 % interval"). */
struct predict_spread {
    size_t steps;                   /* rank 0's steady steps (0: no step spread) */
    double step_lo_rel, step_hi_rel; /* 1 - p10 / p50 and p90 / p50 - 1 of their times */
    size_t skew_steps;              /* steps of 2 ranks or more in stragglers.csv */
    double skew_ms;                 /* the median of their wait_ms / (ranks - 1) */
};

/* One run's model and what was measured of it. */
struct predict_source {
    const struct run *run;
    const struct run_stat *st;
    int world, batch;
    double cap_mb;
    const char *amp;
    double step_ms;                 /* measured median step (rank 0, after warm-up) */
    double compute_ms, comm_ms, exposed_ms, overlap_pct; /* overlap.csv's, per step */
    int has_overlap;
    struct predict_model m;
    char **layer_type; /* per layer: meta layer.K.type, or NULL */
    int layered;       /* per-layer rows were found */
    int param_keys;    /* meta param.I.* were found */
    int calibrated;    /* comm fitted from this run's collectives */
    struct predict_comm comm;
    size_t cal_sizes, cal_samples; /* distinct sizes and rows the fit used */
    size_t cal_small;              /* near-empty all-reduces behind the floor */
    size_t cal_busy;               /* bucket all-reduces behind the busy term */
    struct predict_spread spread;  /* the interval's terms */
    int sync_bn;                   /* meta.csv sync_bn 1 */
    struct predict_sync_bn sbn;    /* its collectives (sbn.steps 0: none measured) */
    double cpu_bwd_own_ms;         /* the replay's cpu_bwd of the run's own configuration */
};

/* The sources of every run of a runset, one of them predicted. */
struct predict_grid {
    const struct runset *rs;
    const struct run_stat *st;
    struct predict_source *src; /* per run of rs (.run NULL: a run that cannot be modelled) */
    int which;                  /* the predicted run */
    double base_step;           /* the baseline's median step (ms), 0: none */
    int base_batch;
};

/* Fill g->src (g's rs, st and which set): 0, or -1 after error_set() when the predicted
 * run cannot be modelled (another run that cannot is left out).  Free with
 * predict_grid_free, also after a failure. */
int predict_grid_init(struct predict_grid *g);
void predict_grid_free(struct predict_grid *g);

/* Which run of rs to predict from: the first when the directory given is a run, else the
 * DDP run, else the first. */
int predict_pick(const struct runset *rs, int dir_is_run);

/* Another run of g in precision amp with per-layer times, or NULL. */
const struct predict_source *predict_amp_source(const struct predict_grid *g, const char *amp);

/* The speedup over g's baseline of world ranks of batch images stepping in step_ms; -1
 * when there is no baseline to compare with. */
double predict_speedup_of(const struct predict_grid *g, int world, int batch, double step_ms);

/* The comm s is predicted with: calibrated from s, else from one of others[0..nothers),
 * into *c and the run's label into *from (1), else 0. */
int predict_source_comm(const struct predict_source *s, const struct predict_source *others,
                        int nothers, struct predict_comm *c, const char **from);

/* s's model with the per-layer times of other's precision for the autocast layers (conv,
 * linear), scaled by the two runs' ratio over the other layers.  *m borrows s's arrays but
 * layers (the caller frees m->layers).  0, or -1 after error_set(). */
int predict_model_amp(const struct predict_source *s, const struct predict_source *other,
                      struct predict_model *m);

/* One prediction of s at configuration c with model m, anchored at the measured step (own:
 * the replay of s's own configuration own_c with s->m), the parts as overlap.csv measures
 * them, and the step's 80 % interval (step_lo_ms, step_hi_ms) from s->spread.  0, or -1
 * after error_set(). */
int predict_one(const struct predict_source *s, const struct predict_model *m,
                const struct predict_config *own_c, const struct predict_out *own,
                const struct predict_config *c, struct predict_out *o);

/* The 80 % interval of s's measured step (its own configuration: no comm term) into *lo,
 * *hi. */
void predict_measured_interval(const struct predict_source *s, double *lo, double *hi);

/* What of an asked link bandwidth s's comm carries as payload (1, or TCP's share). */
double predict_link_efficiency(const struct predict_source *s);

/* ---- the report's "what if" (its lines: report/output/predict_view.h) ---- */

/* The figures of the what-if lines, for the page and the recommendations: the best bucket
 * cap over the candidates and the predicted speedup at 2x and 4x the world size at the
 * calibrated bandwidth. */
#define PREDICT_WHATIF_CANDIDATES 14
struct predict_whatif {
    int run;  /* the DDP run predicted (index in the runset), -1: none in the set */
    int ok;   /* the figures are set; else why says why not (run >= 0) */
    char why[256];
    struct predict_comm comm; /* the fitted ring */
    int world;
    double cap_mb, step_ms, exposed_ms, speedup; /* the run's own (speedup -1: no baseline) */
    double step_lo_ms, step_hi_ms;               /* its 80 % interval */
    double cands[PREDICT_WHATIF_CANDIDATES];     /* the caps searched, MB */
    int ncand;
    double best_cap_mb, best_step_ms, best_exposed_ms; /* the fastest predicted cap (the
                                                          run's own when none is faster) */
    double best_lo_ms, best_hi_ms;                     /* its step's 80 % interval */
    struct {
        int world;
        double step_ms, exposed_ms, speedup, gain; /* gain: throughput / the run's */
        double lo_ms, hi_ms;                       /* the step's 80 % interval */
    } scale[2]; /* 2x and 4x the world size, at best_cap_mb */
};

/* 0 (figures in *w, w->run -1 when there is no DDP run of ddpprof's), or -1 after
 * error_set() (out of memory). */
int predict_whatif_figures(const struct runset *rs, const struct run_stat *st,
                           struct predict_whatif *w);

#ifdef __cplusplus
}
#endif
#endif
