/* advice.c — the verdict and the recommendations (advice.h): one table of rules, each
 * reading one run's figures (struct advice_run, filled once from the analysis) and
 * proposing at most one candidate with the time per step it could save; each candidate
 * held against its run's noise and load and against what ddpprof tune measured (tune.csv:
 * measured (A/B)); the recommended ones first, ranked by that time.  Thresholds, estimates,
 * sources and statuses: report/FORMULAS.md "Advice". */
#include "report/analysis/advice.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/vec.h"
#include "report/analysis/diff.h"
#include "report/analysis/predict.h"
#include "report/analysis/repeats.h"
#include "report/input/run.h"
#include "report/input/tune_results.h"

/* The non-bucket collective kinds a step can block in (trace_format.h's kinds). */
static const char *const advice_kinds[] = {"allreduce", "allgather", "broadcast",
                                           "reduce_scatter", "reduce", "barrier"};
static const char *const advice_kind_words[] = {"all-reduce", "all-gather", "broadcast",
                                                "reduce-scatter", "reduce", "barrier"};
#define ADVICE_NKINDS ((int)(sizeof advice_kinds / sizeof *advice_kinds))

/* One run's figures, per step: each the mean over its ranks with counted steps of that
 * rank's total over its counted steps / their number. */
struct advice_run {
    int idx;
    const struct predict_whatif *whatif; /* ddpprof predict's figures when it predicted
                                            this run (report/analysis/predict.h), else NULL */
    const struct run *r;
    const struct run_stat *s;
    int ranks;              /* ranks with counted steps (0: the run has no step ranges) */
    double step_ms;         /* the mean step */
    double seg_ms[SEG_COUNT];
    double compute_ms;      /* overlap.csv's compute_ms per step */
    double exposed_ms;      /* its exposed_comm_ms less the collectives outside steps (they
                               count there: eval's reduce, the setup's broadcast) */
    double kind_ms[ADVICE_NKINDS]; /* collectives outside the gradient buckets, in steps:
                                      their transfer, per call the least time of any rank
                                      (the rest of a rank's time in it is waiting for the
                                      last to arrive, which stays: run_stat.colls) */
    double blocking_ms;     /* their sum */
    double coll_wait_ms;    /* the rest: one waiting rank's wait in them per step */
    const char *coll_wait_phase; /* the phase with the most of it ("comm.allreduce") */
    int loaded;             /* measured under load or oversubscribed (the load rule's test) */
    int has_noise;          /* noise_ms is set (FORMULAS.md "Advice": the noise) */
    double noise_ms;
    int has_host_wait;
    double host_wait_ms;    /* device_host_wait_ms per step */
    double grad_exposed_ms; /* gradient all-reduce not under backward and not waiting for
                               another rank (sync wait), per rank and step */
    int has_grad;           /* the run has gradient buckets */
    double grad_hidden_pct; /* of the gradient all-reduce time */
    int prefix;             /* name the run in the text (several runs are advised on) */
};

double advice_pct(double part, double whole)
{
    return whole > 0.0 ? 100.0 * part / whole : 0.0;
}

/* The run's noise (FORMULAS.md "Advice": the noise) into a->noise_ms: half the 10th-90th
 * percentile range of the steady steps of its lowest rank with ADVICE_NOISE_STEPS of them;
 * with repeats, half the range of their mean steps (this run's mean step x its images/s
 * over each repeat's) where that is larger. */
static void advice_noise(const struct run_stat *s, const struct repeats *rep, struct advice_run *a)
{
    for (int k = 0; k < s->nranks && !a->has_noise; k++) {
        const struct rank_stat *r = &s->ranks[k];
        if (r->nsteps < ADVICE_NOISE_STEPS) /* step_ns: ascending */
            continue;
        a->has_noise = 1;
        const int64_t hi = analysis_percentile(r->step_ns, r->nsteps, ADVICE_NOISE_HI),
                      lo = analysis_percentile(r->step_ns, r->nsteps, ADVICE_NOISE_LO);
        a->noise_ms = 0.5e-6 * (double)(hi - lo);
    }
    /* rep->ips: every repeat's, this run's among them (in no order: the tables sort it) */
    if (!rep || rep->nips < 2 || !s->has_ips || !(s->images_per_s > 0.0) || !(a->step_ms > 0.0))
        return;
    double lo = s->images_per_s, hi = s->images_per_s;
    for (int k = 0; k < rep->nips; k++) {
        if (!(rep->ips[k] > 0.0))
            return;
        lo = rep->ips[k] < lo ? rep->ips[k] : lo;
        hi = rep->ips[k] > hi ? rep->ips[k] : hi;
    }
    const double between = 0.5 * a->step_ms * s->images_per_s * (1.0 / lo - 1.0 / hi);
    if (!a->has_noise || between > a->noise_ms)
        a->noise_ms = between;
    a->has_noise = 1;
}

static void advice_run_fill(const struct runset *rs, const struct run_stat *st,
                            const struct repeats *rep, int i, struct advice_run *a)
{
    memset(a, 0, sizeof *a);
    a->idx = i;
    a->r = &rs->runs[i];
    a->s = &st[i];
    double nsteps = 0.0; /* counted steps, summed over the ranks with them */
    for (int k = 0; k < st[i].nranks; k++) {
        const struct rank_stat *r = &st[i].ranks[k];
        if (r->nsteps == 0 || r->step_total_ns <= 0)
            continue;
        const double n = (double)r->nsteps, to_ms = 1e-6 / n;
        a->ranks++;
        nsteps += n;
        a->step_ms += (double)r->step_total_ns * to_ms;
        for (int g = 0; g < SEG_COUNT; g++)
            a->seg_ms[g] += (double)r->seg_ns[g] * to_ms;
        a->compute_ms += (double)r->compute_ns * to_ms;
        int64_t outside = 0; /* collective time outside steps: all exposed (no compute there) */
        for (int p = 0; p < r->nphases; p++) {
            const struct phase_stat *ps = &r->phases[p];
            if (ps->collective)
                outside += ps->total_ns - ps->in_steps_ns;
        }
        const int64_t e = r->exposed_ns - outside;
        a->exposed_ms += (double)(e > 0 ? e : 0) * to_ms;
        int64_t hw;
        if (r->has_kern && analysis_host_wait_ns(&r->kern, &hw)) {
            a->has_host_wait = 1;
            a->host_wait_ms += (double)hw * to_ms;
        }
    }
    struct run_load l;
    int ranks, cores;
    analysis_load(a->r, &l);
    a->loaded = l.loaded || analysis_oversubscribed(a->r, &ranks, &cores);
    if (a->ranks == 0)
        return;
    const double m = 1.0 / a->ranks;
    a->step_ms *= m;
    a->compute_ms *= m;
    a->exposed_ms *= m;
    a->host_wait_ms *= m;
    for (int g = 0; g < SEG_COUNT; g++)
        a->seg_ms[g] *= m;
    /* the collectives outside the buckets: per call, the transfer (the least time of any
     * rank) and the others' wait, per step of one rank (the counted steps' mean) and, for
     * the wait, of one waiting rank (/ (ranks - 1)) */
    const double per_step = 1e-6 / (nsteps * m), waiting = a->ranks > 1 ? a->ranks - 1 : 1;
    int64_t most = 0;
    for (size_t c = 0; c < st[i].ncolls; c++) {
        const struct coll_stat *cs = &st[i].colls[c];
        if (cs->grad)
            continue; /* the gradient buckets: grad_exposed's and the stragglers' */
        for (int q = 0; q < ADVICE_NKINDS; q++)
            if (cs->collective && strcmp(cs->collective, advice_kinds[q]) == 0)
                a->kind_ms[q] += (double)cs->transfer_ns * per_step;
        a->coll_wait_ms += (double)cs->wait_ns * per_step / waiting;
        if (cs->wait_ns > most) {
            most = cs->wait_ns;
            a->coll_wait_phase = strpool_get(&rs->labels, cs->phase);
        }
    }
    for (int q = 0; q < ADVICE_NKINDS; q++)
        a->blocking_ms += a->kind_ms[q];
    advice_noise(&st[i], rep, a);
    int64_t total = 0, hidden = 0;
    for (size_t b = 0; b < st[i].nbuckets; b++) { /* rows are per rank and step */
        const struct bucket_stat *bs = &st[i].buckets[b];
        if (bs->count == 0)
            continue;
        a->has_grad = 1;
        /* less the sync wait: a rank waiting in it for a slower one is the straggler's */
        const int64_t e = bs->total_ns - bs->hidden_ns - bs->wait_ns;
        a->grad_exposed_ms += (double)(e > 0 ? e : 0) * 1e-6 / (double)bs->count;
        total += bs->total_ns;
        hidden += bs->hidden_ns;
    }
    a->grad_hidden_pct = advice_pct((double)hidden, (double)total);
}

/* ---- the rules: each fills *c (rule, source, saving_ms, text) and returns 1, or 0 ---- */

struct advice_cand {
    enum advice_source source;
    double saving_ms;
    char text[480];
    const char *opt; /* the ddpprof option it recommends, where it names one ("--no-sync-bn",
                        "--bucket-cap-mb", "--amp"): what a ddpprof tune trial can have
                        measured; NULL: none */
    double value;    /* --bucket-cap-mb's value */
};

typedef int (*advice_rule_fn)(const struct advice_run *a, struct advice_cand *c);

static void cand_text(struct advice_cand *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cand_text(struct advice_cand *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->text, sizeof c->text, fmt, ap);
    va_end(ap);
}

/* A run measured on a busy host: its times are not this machine's, so act on nothing
 * before rerunning.  Estimate (assumed): the share of the CPU others took, of the step. */
static int rule_load(const struct advice_run *a, struct advice_cand *c)
{
    struct run_load l;
    analysis_load(a->r, &l);
    int ranks = 0, cores = 0;
    const int over = analysis_oversubscribed(a->r, &ranks, &cores);
    if (!l.loaded && !over)
        return 0;
    double f = 0.0;
    char why[160] = "";
    if (over) {
        f = 1.0 - (double)cores / ranks;
        snprintf(why, sizeof why, "%d CPU ranks on %d cores", ranks, cores);
    }
    double g = -1.0;
    char gw[120] = "";
    if (l.has_other && l.other_cores >= ANALYSIS_LOADED_CORES && l.cores) {
        g = l.other_cores / l.cores;
        snprintf(gw, sizeof gw, "other programs kept %.2f of %d cores busy", l.other_cores,
                 l.cores);
    } else if (l.has_steal && l.steal >= ANALYSIS_LOADED_STEAL) {
        g = l.steal;
        snprintf(gw, sizeof gw, "the hypervisor took %.0f %% of the CPU time", 100.0 * l.steal);
    } else if (l.loaded && l.has_load && l.cores && l.load_start > 0.0) {
        g = 1.0 - l.cores / l.load_start;
        snprintf(gw, sizeof gw, "load average %.2f on %d cores", l.load_start, l.cores);
    }
    if (g >= 0.0) {
        if (g > f)
            f = g;
        if (*why)
            strncat(why, "; ", sizeof why - strlen(why) - 1);
        strncat(why, gw, sizeof why - strlen(why) - 1);
    }
    if (f > ADVICE_LOAD_CAP)
        f = ADVICE_LOAD_CAP;
    c->source = ADVICE_ASSUMED;
    c->saving_ms = f * a->step_ms;
    cand_text(c, "measured under load (%s): rerun on an idle machine before acting on these "
                 "figures",
              why);
    return 1;
}

/* Data loading inside the step: batches loaded ahead would not be waited for. */
static int rule_data(const struct advice_run *a, struct advice_cand *c)
{
    const double d = a->seg_ms[SEG_DATA], p = advice_pct(d, a->step_ms);
    if (p < ADVICE_DATA_PCT)
        return 0;
    c->source = ADVICE_MEASURED;
    c->saving_ms = d;
    cand_text(c, "data loading is %.0f %% of the step (%.1f ms): more loader workers, so the "
                 "next batch is ready before the step asks for it",
              p, d);
    return 1;
}

/* The gradient all-reduce left after backward: the step waits for it. */
static int rule_grad_exposed(const struct advice_run *a, struct advice_cand *c)
{
    const double e = a->grad_exposed_ms, p = advice_pct(e, a->step_ms);
    if (!a->has_grad || p < ADVICE_GRAD_EXPOSED_PCT)
        return 0;
    c->source = ADVICE_MEASURED;
    c->saving_ms = e;
    cand_text(c, "gradient all-reduce: %.1f ms per step (%.0f %% of the step) not hidden "
                 "behind backward (%.0f %% of it hidden): fewer gradient bytes (fp16 "
                 "compression of the gradients), a faster interconnect, or more compute per "
                 "step to hide it under (a larger batch per rank)",
              e, p, a->grad_hidden_pct);
    return 1;
}

/* The bucket cap ddpprof predict finds fastest for this run (report/analysis/predict.h). */
static int rule_bucket_cap(const struct advice_run *a, struct advice_cand *c)
{
    const struct predict_whatif *w = a->whatif;
    if (!w || w->best_cap_mb == w->cap_mb)
        return 0;
    const double save = w->step_ms - w->best_step_ms;
    if (advice_pct(save, w->step_ms) < ADVICE_CAP_PCT)
        return 0;
    c->source = ADVICE_PREDICTED;
    c->saving_ms = save;
    c->opt = "--bucket-cap-mb";
    c->value = w->best_cap_mb;
    cand_text(c, "bucket cap %.3g MB: exposed communication %+.1f ms per step, predicted "
                 "(step %.1f -> %.1f ms): --bucket-cap-mb %.3g instead of %g",
              w->best_cap_mb, w->best_exposed_ms - w->exposed_ms, w->step_ms, w->best_step_ms,
              w->best_cap_mb, w->cap_mb);
    return 1;
}

/* What to do about the largest kind of collective outside the gradient buckets. */
static const char *blocking_hint(const struct advice_run *a, const char *kind)
{
    const int sync_bn = a->r->meta.sync_bn.s && a->r->meta.sync_bn.i == 1;
    if (strcmp(kind, "allgather") == 0)
        return sync_bn ? "SyncBatchNorm gathers every BatchNorm layer's statistics in forward "
                         "and all-reduces its gradients' in backward: --no-sync-bn (local "
                         "BatchNorm) where each rank's batch is large enough"
                       : "gather less often";
    if (strcmp(kind, "allreduce") == 0)
        return sync_bn ? "SyncBatchNorm all-reduces every BatchNorm layer's gradient "
                         "statistics in backward and gathers them in forward: --no-sync-bn "
                         "(local BatchNorm) where each rank's batch is large enough (AMP's "
                         "and the loss's all-reduces stay)"
                       : "reduce the loss and metrics less often than every step";
    if (strcmp(kind, "broadcast") == 0)
        return "DDP broadcasts its buffers before every forward: broadcast_buffers=False "
               "where they need not match";
    if (strcmp(kind, "barrier") == 0)
        return "take the barriers out of the training step";
    return "issue them less often than every step";
}

/* Collectives outside the gradient buckets, inside steps: the training thread waits in
 * them (SyncBatchNorm, a buffer broadcast, a loss all-reduce, barriers); per kind the least
 * time of any rank. */
static int rule_blocking(const struct advice_run *a, struct advice_cand *c)
{
    const double b = a->blocking_ms, p = advice_pct(b, a->step_ms);
    if (p < ADVICE_BLOCKING_PCT)
        return 0;
    int top = 0, second = -1;
    for (int q = 1; q < ADVICE_NKINDS; q++)
        if (a->kind_ms[q] > a->kind_ms[top])
            top = q;
    for (int q = 0; q < ADVICE_NKINDS; q++)
        if (q != top && a->kind_ms[q] > 0.0 && (second < 0 || a->kind_ms[q] > a->kind_ms[second]))
            second = q;
    char kinds[128];
    int n = snprintf(kinds, sizeof kinds, "%s %.1f ms", advice_kind_words[top],
                     a->kind_ms[top]);
    if (second >= 0 && n > 0 && (size_t)n < sizeof kinds)
        snprintf(kinds + n, sizeof kinds - (size_t)n, ", %s %.1f ms",
                 advice_kind_words[second], a->kind_ms[second]);
    c->source = ADVICE_MEASURED;
    c->saving_ms = b;
    if (a->r->meta.sync_bn.s && a->r->meta.sync_bn.i == 1 &&
        (strcmp(advice_kinds[top], "allreduce") == 0 ||
         strcmp(advice_kinds[top], "allgather") == 0))
        c->opt = "--no-sync-bn"; /* blocking_hint's */
    cand_text(c, "the step waits %.1f ms in collectives outside the gradient buckets (%.0f %% "
                 "of it; %s): %s",
              b, p, kinds, blocking_hint(a, advice_kinds[top]));
    return 1;
}

/* Per-step straggler counts: the rank slowest most often, its share of steps and the
 * others' mean wait per step for it; and the mean wait per step over all steps (each step's
 * wait_ns is summed over the waiting ranks: / (ranks - 1) is one rank's). */
struct straggler_fig {
    int steps, rank, count;
    double share, wait_ms, all_wait_ms;
};

static int straggler_fig(const struct advice_run *a, struct straggler_fig *f)
{
    const struct run_stat *s = a->s;
    memset(f, 0, sizeof *f);
    f->rank = -1;
    int maxrank = -1;
    for (size_t k = 0; k < s->nsteps; k++)
        if (s->steps[k].ranks >= 2 && s->steps[k].slowest_rank > maxrank)
            maxrank = s->steps[k].slowest_rank;
    if (maxrank < 0)
        return 0;
    int *count = calloc((size_t)maxrank + 1, sizeof *count);
    double *wait = calloc((size_t)maxrank + 1, sizeof *wait);
    if (!count || !wait) {
        free(count);
        free(wait);
        return 0; /* out of memory: this rule stays silent */
    }
    for (size_t k = 0; k < s->nsteps; k++) {
        const struct step_stat *t = &s->steps[k];
        if (t->ranks < 2 || t->slowest_rank < 0)
            continue;
        const double w = (double)t->wait_ns * 1e-6 / (t->ranks - 1);
        f->steps++;
        count[t->slowest_rank]++;
        wait[t->slowest_rank] += w;
        f->all_wait_ms += w;
    }
    for (int r = 0; r <= maxrank; r++)
        if (f->rank < 0 || count[r] > count[f->rank])
            f->rank = r;
    f->count = count[f->rank];
    f->share = advice_pct(f->count, f->steps);
    f->wait_ms = wait[f->rank] / f->steps;
    f->all_wait_ms /= f->steps;
    free(count);
    free(wait);
    return f->steps > 0;
}

static int straggler_steady(const struct straggler_fig *f)
{
    return f->steps >= ADVICE_STRAGGLER_STEPS && f->share >= ADVICE_STRAGGLER_SHARE;
}

/* One rank slowest in most steps: the others wait for it. */
static int rule_straggler(const struct advice_run *a, struct advice_cand *c)
{
    struct straggler_fig f;
    if (!straggler_fig(a, &f) || !straggler_steady(&f) ||
        advice_pct(f.wait_ms, a->step_ms) < ADVICE_WAIT_PCT)
        return 0;
    const char *dev = meta_is(&a->r->meta.device, "cuda") ? "GPU" : "host";
    c->source = ADVICE_MEASURED;
    c->saving_ms = f.wait_ms;
    cand_text(c, "rank %d is the straggler in %.0f %% of steps (%d of %d; the others wait "
                 "%.1f ms per step for it): look at what else runs on its %s, its CPU binding "
                 "and clocks, and its share of the data",
              f.rank, f.share, f.count, f.steps, f.wait_ms, dev);
    return 1;
}

/* Ranks waiting for one another without one steady straggler: jitter or uneven work. */
static int rule_imbalance(const struct advice_run *a, struct advice_cand *c)
{
    struct straggler_fig f;
    if (!straggler_fig(a, &f) || straggler_steady(&f) || f.steps < ADVICE_STRAGGLER_STEPS)
        return 0;
    const double p = advice_pct(f.all_wait_ms, a->step_ms);
    if (p < ADVICE_IMBALANCE_PCT)
        return 0;
    c->source = ADVICE_MEASURED;
    c->saving_ms = f.all_wait_ms;
    cand_text(c, "ranks wait %.1f ms per step for one another (%.0f %% of the step) and the "
                 "slowest rank changes (rank %d in %.0f %% of %d steps): uneven work per rank "
                 "or a noisy machine (pin threads, keep other programs off the cores)",
              f.all_wait_ms, p, f.rank, f.share, f.steps);
    return 1;
}

/* A GPU run in fp32 (not the fp32 baseline itself). */
static int rule_amp_gpu(const struct advice_run *a, struct advice_cand *c)
{
    if (!meta_is(&a->r->meta.device, "cuda") || !meta_is(&a->r->meta.amp, "off") ||
        meta_is(&a->r->meta.mode, "baseline"))
        return 0;
    const double fb = a->seg_ms[SEG_FORWARD] + a->seg_ms[SEG_BACKWARD];
    if (fb <= 0.0)
        return 0;
    c->source = ADVICE_ASSUMED;
    c->saving_ms = ADVICE_AMP_GAIN * fb;
    c->opt = "--amp";
    cand_text(c, "AMP is off on GPU: forward and backward are %.0f %% of the step (%.1f ms); "
                 "--amp bf16 or fp16 runs convolutions and matrix products on tensor cores",
              advice_pct(fb, a->step_ms), fb);
    return 1;
}

/* The device idle, waiting for the host to launch its work. */
static int rule_launch(const struct advice_run *a, struct advice_cand *c)
{
    const double p = advice_pct(a->host_wait_ms, a->step_ms);
    if (!a->has_host_wait || p < ADVICE_LAUNCH_PCT)
        return 0;
    c->source = ADVICE_MEASURED;
    c->saving_ms = a->host_wait_ms;
    cand_text(c, "the GPU waits for the host %.1f ms per step (%.0f %% of the step): "
                 "launch-bound; a larger batch per rank, fewer and larger kernels (CUDA "
                 "graphs, torch.compile)",
              a->host_wait_ms, p);
    return 1;
}

/* A small batch per rank: the per-step fixed costs weigh on every image. */
static int rule_tiny_batch(const struct advice_run *a, struct advice_cand *c)
{
    const struct meta_value *b = &a->r->meta.batch_size;
    const int batch = b->s ? (int)b->i : 0;
    const double fixed = a->exposed_ms + a->seg_ms[SEG_OPTIMIZER];
    const double p = advice_pct(fixed, a->step_ms);
    if (batch < 1 || batch > ADVICE_TINY_BATCH || p < ADVICE_FIXED_PCT)
        return 0;
    c->source = ADVICE_ASSUMED;
    c->saving_ms = fixed / 2.0;
    cand_text(c, "batch %d per rank: exposed communication and the optimizer, paid once per "
                 "step whatever the batch, are %.0f %% of the step (%.1f ms): -b %d pays them "
                 "once per %d images (learning rate to match)",
              batch, p, fixed, 2 * batch, 2 * batch);
    return 1;
}

/* noise: the candidate is held against the run's noise.  Not the load rule's (a caution
 * about the measurement, no change), nor the straggler's and imbalance's (their saving is
 * the ranks' waiting, which is what makes the steps spread: held against that spread, it
 * would be judged by itself). */
static const struct advice_rule {
    const char *name;
    advice_rule_fn fn;
    int noise;
} advice_rules[] = {
    {"load", rule_load, 0},
    {"data", rule_data, 1},
    {"grad_exposed", rule_grad_exposed, 1},
    {"bucket_cap", rule_bucket_cap, 1},
    {"blocking", rule_blocking, 1},
    {"straggler", rule_straggler, 0},
    {"imbalance", rule_imbalance, 0},
    {"amp_gpu", rule_amp_gpu, 1},
    {"launch", rule_launch, 1},
    {"tiny_batch", rule_tiny_batch, 1},
};
#define ADVICE_NRULES ((int)(sizeof advice_rules / sizeof *advice_rules))

/* ---- ranking, the verdict, output ---- */

struct ranked {
    struct advice_item item;
    int rule_order;
    const char *opt; /* advice_cand's */
    double value;
};

static int cmp_ranked(const void *x, const void *y)
{
    const struct ranked *a = x, *b = y;
    const int ra = a->item.status != ADVICE_ST_RECOMMENDED,
              rb = b->item.status != ADVICE_ST_RECOMMENDED;
    if (ra != rb)
        return ra - rb;
    if (a->item.saving_ms != b->item.saving_ms)
        return a->item.saving_ms < b->item.saving_ms ? 1 : -1;
    if (a->rule_order != b->rule_order)
        return a->rule_order - b->rule_order;
    return a->item.run - b->item.run;
}

static const char *device_words(const struct run *r)
{
    if (meta_is(&r->meta.device, "cuda"))
        return r->world_size == 1 ? "GPU" : "GPUs";
    if (meta_is(&r->meta.device, "cpu"))
        return r->world_size == 1 ? "CPU rank" : "CPU ranks";
    return r->world_size == 1 ? "rank" : "ranks";
}

/* The run the verdict is about: the run other than the baseline with the most ranks (the
 * first of those), else the first run with step ranges, else the first. */
static int verdict_run(const struct advice_run *ar, int n, int base)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (i != base && ar[i].ranks > 0 &&
            (best < 0 || ar[i].r->world_size > ar[best].r->world_size))
            best = i;
    for (int i = 0; i < n && best < 0; i++)
        if (ar[i].ranks > 0)
            best = i;
    return best < 0 ? 0 : best;
}

/* ---- the verdict's cause (FORMULAS.md "Advice": the verdict) ----
 * Where the run the verdict is about is slower than the baseline or scales poorly, the
 * diff of the baseline and that run (report/analysis/diff.h) says which part of the step
 * grew most: compute per rank (forward + backward + optimizer), exposed communication
 * (most of it waiting for a slower rank: stragglers), data, or the rest. */

enum cause_kind { CAUSE_COMPUTE, CAUSE_COMM, CAUSE_DATA, CAUSE_OTHER, CAUSE_NKINDS };

/* The diff's figures the cause is read from, ms per step on the critical rank. */
struct cause_fig {
    double step_a, step_b, dstep;
    double delta[CAUSE_NKINDS];
    double fb_a, fb_b;        /* forward + backward (their parts of the step) */
    char comm_top[64];        /* the collective under exposed_comm that grew most ("": none) */
    double comm_top_ms;
};

static double us_ms(int64_t us)
{
    return (double)us * 1e-3;
}

/* The figures of diff d into *f. */
static void cause_fig_fill(const struct diff_result *d, struct cause_fig *f)
{
    memset(f, 0, sizeof *f);
    f->step_a = us_ms(d->rows[0].a_us);
    f->step_b = us_ms(d->rows[0].b_us);
    f->dstep = f->step_b - f->step_a;
    for (size_t i = 1; i < d->n; i++) {
        const struct diff_row *r = &d->rows[i];
        const double delta = us_ms(r->b_us - r->a_us);
        if (strcmp(r->level, "comm") == 0 && strcmp(r->name, "other") != 0 &&
            (!f->comm_top[0] || delta > f->comm_top_ms)) {
            snprintf(f->comm_top, sizeof f->comm_top, "%s", r->name);
            f->comm_top_ms = delta;
        }
        if (strcmp(r->level, "phase") != 0)
            continue;
        const int fb = strcmp(r->name, "forward") == 0 || strcmp(r->name, "backward") == 0;
        const enum cause_kind k = fb || strcmp(r->name, "optimizer") == 0 ? CAUSE_COMPUTE
                                  : strcmp(r->name, "exposed_comm") == 0   ? CAUSE_COMM
                                  : strcmp(r->name, "data") == 0           ? CAUSE_DATA
                                                                           : CAUSE_OTHER;
        f->delta[k] += delta;
        if (fb) {
            f->fb_a += us_ms(r->a_us);
            f->fb_b += us_ms(r->b_us);
        }
    }
}

/* A bounded string builder: appends stop at the end of the buffer. */
struct cause_buf {
    char *p;
    size_t size, len;
};

static void cb_add(struct cause_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cb_add(struct cause_buf *b, const char *fmt, ...)
{
    if (b->len + 1 >= b->size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->size - b->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len = b->len + (size_t)n < b->size ? b->len + (size_t)n : b->size - 1;
}

static int meta_int(const struct meta_value *v, int *out)
{
    if (!v->s || v->i < 1 || v->i > 1 << 20)
        return 0;
    *out = (int)v->i;
    return 1;
}

/* Why each rank's compute is slower than the baseline's, and what would change it. */
static void cause_compute(const struct advice_run *a, const struct run *base,
                          const struct cause_fig *f, const struct predict_whatif *wf,
                          struct cause_buf *why, struct cause_buf *act)
{
    const struct run *r = a->r;
    int bb = 0, rb = 0, tb = 0, tr = 0, cores = 0, ranks = 0;
    double ratio = f->fb_a > 0.0 ? f->fb_b / f->fb_a : 0.0;
    const int per_image = meta_int(&base->meta.batch_size, &bb) &&
                          meta_int(&r->meta.batch_size, &rb) && bb != rb;
    if (per_image)
        ratio *= (double)bb / rb;
    if (ratio > 0.0)
        cb_add(why, ": each rank's forward+backward takes %.2fx the baseline's%s", ratio,
               per_image ? " per image" : "");
    const int cpu = meta_is(&r->meta.device, "cpu") && meta_is(&base->meta.device, "cpu");
    if (!meta_int(&r->meta.local_world_size, &ranks))
        ranks = r->world_size;
    const int threads = meta_int(&base->meta.threads_per_rank, &tb) &&
                        meta_int(&r->meta.threads_per_rank, &tr);
    const int have_cores = meta_int(&r->meta.host_cores, &cores);
    if (cpu && threads && tb > tr)
        cb_add(why, ": the baseline ran %d threads, each rank %d", tb, tr);
    else if (cpu && threads)
        cb_add(why, ": each rank ran %d thread%s as the baseline did, sharing the host's caches "
                    "and memory bandwidth", tr, tr == 1 ? "" : "s");
    if (cpu && have_cores)
        cb_add(why, " (%d rank%s on %d core%s)", ranks, ranks == 1 ? "" : "s", cores,
               cores == 1 ? "" : "s");
    if (cpu)
        cb_add(act, "more cores per rank, or GPUs, would change it");
    else
        cb_add(act, "each rank's device is slower than the baseline's at the same work: its "
                    "clocks, what else runs on it, its precision");
    if (wf && wf->ok && wf->run == a->idx && wf->scale[0].speedup > 0.0)
        cb_add(act, " (what if: %d such ranks, each on its own %s: %.2fx the baseline, "
                    "predicted)",
               wf->scale[0].world, cpu ? "cores" : "device", wf->scale[0].speedup);
}

/* What would change the exposed communication: by the collective that grew most. */
static void cause_comm(const struct advice_run *a, const struct cause_fig *f,
                       const struct predict_whatif *wf, struct cause_buf *why,
                       struct cause_buf *act)
{
    const char *top = f->comm_top[0] ? f->comm_top : NULL;
    if (top && f->comm_top_ms > 0.0)
        cb_add(why, ", most of it in %s (%+.1f ms)", top, f->comm_top_ms);
    const int sync_bn = a->r->meta.sync_bn.s && a->r->meta.sync_bn.i == 1;
    if (top && top[0] == 'b' && top[1] >= '0' && top[1] <= '9') {
        cb_add(act, "the gradient all-reduce: a faster interconnect, fewer gradient bytes, or "
                    "more compute per step to hide it under (a larger batch per rank)");
        if (wf && wf->ok && wf->run == a->idx && wf->best_cap_mb != wf->cap_mb)
            cb_add(act, "; --bucket-cap-mb %.3g is predicted %+.1f ms per step%s",
                   wf->best_cap_mb, wf->best_step_ms - wf->step_ms,
                   a->loaded ? " (not to be trusted: measured under load, the prediction "
                               "assumes an idle machine)"
                             : "");
    } else if (top && sync_bn &&
               (strcmp(top, "comm.allreduce") == 0 || strcmp(top, "comm.allgather") == 0)) {
        cb_add(act, "SyncBatchNorm's collectives: --no-sync-bn where each rank's batch is "
                    "large enough");
    } else if (top && strcmp(top, "comm.broadcast") == 0) {
        cb_add(act, "DDP's buffer broadcast: broadcast_buffers=False where they need not match");
    } else {
        cb_add(act, "a faster interconnect, or fewer collectives per step");
    }
}

/* The ranks' wait for one another per step -- for the slowest at the end of backward
 * (stragglers.csv) and for the last to arrive in the collectives outside the gradient
 * buckets (SyncBatchNorm's: run_stat.colls), one waiting rank's -- when it is at least half
 * the growth of the exposed communication (ADVICE_CAUSE_WAIT): the waiting is the late
 * ranks', not the wire's.  1 with *f (f->steps 0: no straggler figures), *wait_ms and
 * *in_colls (most of it in those collectives) set, else 0. */
static int cause_waits(const struct advice_run *a, const struct cause_fig *c,
                       struct straggler_fig *f, double *wait_ms, int *in_colls)
{
    const double sw = straggler_fig(a, f) ? f->all_wait_ms : 0.0, total = sw + a->coll_wait_ms;
    if (!(total > 0.0))
        return 0;
    *in_colls = a->coll_wait_ms > sw;
    *wait_ms = total < c->delta[CAUSE_COMM] ? total : c->delta[CAUSE_COMM];
    return *wait_ms >= ADVICE_CAUSE_WAIT * c->delta[CAUSE_COMM];
}

static void cause_waits_text(const struct advice_run *a, const struct straggler_fig *f,
                             double wait_ms, int in_colls, struct cause_buf *why,
                             struct cause_buf *act)
{
    if (in_colls) {
        const int sync_bn = a->r->meta.sync_bn.s && a->r->meta.sync_bn.i == 1;
        cb_add(why, ": the ranks wait %.1f ms per step for one another inside the collectives "
                    "outside the gradient buckets (most in %s; their transfer, the least time "
                    "of any rank in each call, is %.1f ms per step): a rank comes late to them",
               wait_ms, a->coll_wait_phase ? a->coll_wait_phase : "-", a->blocking_ms);
        cb_add(act, "the late ranks' cores: what else runs on them (load), CPU binding and "
                    "clocks%s",
               sync_bn ? "; turning SyncBatchNorm off would not remove the wait, it would "
                         "move into the gradient all-reduce"
                       : "");
        return;
    }
    cb_add(why, ": the other ranks wait %.1f ms per step for the slowest (rank %d in %.0f %% "
                "of %d steps)",
           wait_ms, f->rank, f->share, f->steps);
    if (straggler_steady(f))
        cb_add(act, "rank %d's compute: what else runs on its %s, its CPU binding and clocks, "
                    "its share of the data", f->rank,
               meta_is(&a->r->meta.device, "cuda") ? "GPU" : "cores");
    else
        cb_add(act, "the slowest rank changes: uneven work per rank or a noisy machine (pin "
                    "threads, keep other programs off the cores)");
}

/* The cause of the speedup gap of run v against base, into cause ("cause: ...") and
 * action (what would change it), its short name into *name; 0 when there is none to name
 * (no diff). */
static int verdict_cause(const struct runset *rs, const struct run_stat *st,
                         const struct advice_run *ar, int base, int v,
                         const struct predict_whatif *wf, char *cause, size_t size,
                         char *action, size_t asize, const char **name)
{
    struct diff_result d = {0};
    const int ok = diff_compute(rs, st, base, v, &d) == 0 && d.n > DIFF_PARTS;
    error_clear(); /* a diff that cannot be made names no cause; ddpprof diff says why */
    struct cause_fig f;
    if (ok)
        cause_fig_fill(&d, &f);
    diff_free(&d);
    if (!ok)
        return 0;
    struct cause_buf why = {cause, size, 0}, act = {action, asize, 0};
    const struct advice_run *a = &ar[v];
    const struct run *b = &rs->runs[base];
    int k = 0;
    for (int q = 1; q < CAUSE_NKINDS; q++)
        if (f.delta[q] > f.delta[k])
            k = q;
    if (f.dstep <= 0.0 || f.delta[k] <= 0.0) {
        int pb, pr;
        cb_add(&why, "cause: not the step time (the baseline's %.1f ms, this run's %.1f ms): "
                     "the images per step", f.step_a, f.step_b);
        if (meta_int(&b->meta.batch_size, &pb) && meta_int(&a->r->meta.batch_size, &pr))
            cb_add(&why, " (%d per rank x %d ranks against the baseline's %d)", pr,
                   a->r->world_size, pb);
        cb_add(&act, "a larger batch per rank would change it");
        cb_add(&why, "; %s", action);
        *name = "images per step";
        return 1;
    }
    const double share = 100.0 * f.delta[k] / f.dstep;
    static const char *const names[CAUSE_NKINDS] = {"compute per rank", "exposed communication",
                                                    "data loading", "outside the traced phases"};
    struct straggler_fig sf;
    double wait_ms = 0.0;
    int in_colls = 0;
    const int waits = k == CAUSE_COMM && cause_waits(a, &f, &sf, &wait_ms, &in_colls);
    *name = waits ? "waiting for a slower rank" : names[k];
    cb_add(&why, "cause: %s%s, %+.1f ms per step (%.0f %% of the step's %+.1f ms over the "
                 "baseline's %.1f ms, diff.csv)",
           *name, waits ? ", in exposed communication" : "", f.delta[k], share, f.dstep,
           f.step_a);
    if (waits)
        cause_waits_text(a, &sf, wait_ms, in_colls, &why, &act);
    else if (k == CAUSE_COMPUTE)
        cause_compute(a, b, &f, wf, &why, &act);
    else if (k == CAUSE_COMM)
        cause_comm(a, &f, wf, &why, &act);
    else if (k == CAUSE_DATA)
        cb_add(&act, "more loader workers, so the next batch is ready before the step asks "
                     "for it");
    else
        cb_add(&act, "the training loop's own work between the phases (diff.csv's other)");
    cb_add(&why, "; %s", action);
    return 1;
}

/* The verdict line; adv->gap and adv->cause_action set on the way.  NULL: out of memory. */
static char *verdict_text(const struct runset *rs, const struct run_stat *st,
                          const struct advice_run *ar, int base, const struct predict_whatif *wf,
                          struct advice *adv)
{
    const int v = verdict_run(ar, rs->n, base);
    const struct advice_run *a = &ar[v];
    char *out = NULL;
    if (a->ranks == 0) {
        if (asprintf(&out, "verdict: run %s has no step ranges in its traces: nothing to "
                           "advise on",
                     a->r->label) < 0)
            out = NULL;
        return out;
    }
    char head[256], cause[1024] = "", act[512] = "";
    const struct run_stat *s = a->s;
    const char *who = run_mode_is(a->r, "ddp")        ? "DDP"
                      : run_mode_is(a->r, "baseline") ? "the baseline"
                                                      : "training";
    if (base >= 0 && v != base && s->has_speedup) {
        const char *word = s->speedup < ADVICE_SLOWER        ? "is slower than the baseline"
                           : s->speedup < ADVICE_NO_FASTER   ? "is no faster than the baseline"
                           : s->efficiency >= ADVICE_EFF_WELL ? "scales well"
                           : s->efficiency >= ADVICE_EFF_FAIR ? "scales fairly"
                                                              : "scales poorly";
        snprintf(head, sizeof head, "%s on %d %s (run %s) %s: %.2fx the baseline's "
                                    "throughput, efficiency %.2f",
                 who, a->r->world_size, device_words(a->r), a->r->label, word, s->speedup,
                 s->efficiency);
        adv->gap = s->speedup < ADVICE_NO_FASTER || s->efficiency < ADVICE_EFF_FAIR;
        if (adv->gap && verdict_cause(rs, st, ar, base, v, wf, cause + 2, sizeof cause - 2,
                                      act, sizeof act, &adv->cause_name)) {
            cause[0] = ';';
            cause[1] = ' ';
            if (!(adv->cause_action = strdup(act)))
                return NULL;
        }
    } else {
        snprintf(head, sizeof head, "%s on %d %s (run %s), %s", who, a->r->world_size,
                 device_words(a->r), a->r->label,
                 v == base ? "nothing to compare it with" : "no baseline to compare");
    }
    const double step = a->step_ms, comp = a->compute_ms, exp = a->exposed_ms,
                 data = a->seg_ms[SEG_DATA];
    double other = step - comp - exp - data;
    if (other < 0.0)
        other = 0.0;
    struct run_load l, lb = {0};
    analysis_load(a->r, &l);
    if (base >= 0 && base != v)
        analysis_load(&rs->runs[base], &lb);
    int ranks, cores;
    const int loaded = l.loaded || lb.loaded || analysis_oversubscribed(a->r, &ranks, &cores) ||
                       (base >= 0 && base != v &&
                        analysis_oversubscribed(&rs->runs[base], &ranks, &cores));
    if (asprintf(&out, "verdict: %s; its step (%.1f ms) is compute %.0f %%, exposed "
                       "communication %.0f %%, data %.0f %%, other %.0f %%%s%s",
                 head, step, advice_pct(comp, step), advice_pct(exp, step),
                 advice_pct(data, step), advice_pct(other, step),
                 loaded ? " (measured under load)" : "", cause) < 0)
        out = NULL;
    return out;
}

/* ---- holding each candidate against the run's noise and load (FORMULAS.md "Advice") ---- */

static void item_append(struct advice_item *it, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* it->text with more appended; it->text unchanged when out of memory */
static void item_append(struct advice_item *it, const char *fmt, ...)
{
    char more[512], *t = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(more, sizeof more, fmt, ap);
    va_end(ap);
    if (asprintf(&t, "%s%s", it->text, more) >= 0) {
        free(it->text);
        it->text = t;
    }
}

/* The status of a rule's candidate x of run a: a prediction for a run measured under load
 * is unreliable; a saving not beyond the run's noise (or a predicted interval reaching no
 * gain) is inside the noise; else recommended. */
static void cand_judge(const struct advice_run *a, int noise_rule, struct ranked *x)
{
    struct advice_item *it = &x->item;
    it->has_noise = noise_rule && a->has_noise; /* the noise it is held against */
    it->noise_ms = a->noise_ms;
    it->status = ADVICE_ST_RECOMMENDED;
    if (it->source == ADVICE_PREDICTED && a->loaded) {
        it->status = ADVICE_ST_UNDER_LOAD;
        item_append(it, "; measured under load: the prediction assumes an idle machine");
    } else if (noise_rule && ((a->has_noise && it->saving_ms <= a->noise_ms) ||
                              (it->has_interval && it->saving_lo_ms <= 0.0))) {
        it->status = ADVICE_ST_NOISE;
    }
}

/* ---- what ddpprof tune measured (tune.csv): measured (A/B) ---- */

/* One tune.csv row's change, as the advice names it. */
struct tune_change {
    const char *rule; /* "bucket_cap", "sync_bn", "amp", "comm", "threads"; "tune": any
                         other change, or more than one option, or an environment */
    const char *opt;  /* the one option it sets ("--no-sync-bn"), NULL for "tune" */
    double value;     /* its number (--bucket-cap-mb, --threads) */
    char word[32];    /* its word (--amp fp16, --comm gloo) */
};

static void tune_change_parse(const char *args, struct tune_change *c)
{
    static const struct {
        const char *opt, *rule;
        int takes;
    } known[] = {{"--bucket-cap-mb", "bucket_cap", 1}, {"--no-sync-bn", "sync_bn", 0},
                 {"--amp", "amp", 1},                  {"--comm", "comm", 1},
                 {"--threads", "threads", 1}};
    char buf[256], *w[3] = {0};
    int n = 0;
    memset(c, 0, sizeof *c);
    c->rule = "tune";
    snprintf(buf, sizeof buf, "%s", args);
    for (char *save = NULL, *t = strtok_r(buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
        if (n < 3)
            w[n++] = t;
        else
            return;
    if (n == 0 || strchr(w[0], '=')) /* an environment word: NAME=VALUE */
        return;
    for (size_t k = 0; k < sizeof known / sizeof *known; k++)
        if (strcmp(w[0], known[k].opt) == 0 && n == 1 + known[k].takes) {
            c->rule = known[k].rule;
            c->opt = known[k].opt;
            if (n == 2) {
                snprintf(c->word, sizeof c->word, "%s", w[1]);
                c->value = strtod(w[1], NULL);
            }
        }
}

/* Does rule candidate x recommend the change c? */
static int tune_change_is(const struct ranked *x, const struct tune_change *c)
{
    if (!x->opt || !c->opt || strcmp(x->opt, c->opt) != 0 || x->item.source == ADVICE_AB)
        return 0;
    if (strcmp(c->opt, "--bucket-cap-mb") == 0) /* as the advice prints it: 3 digits */
        return fabs(c->value - x->value) <= 0.005 * fabs(x->value);
    if (strcmp(c->opt, "--amp") == 0)
        return strcmp(c->word, "off") != 0;
    return 1;
}

/* The configuration keys a tune trial must share with the run it is applied to (the
 * candidates change some of them: each is compared where both name it). */
static const struct {
    const char *name;
    size_t off;
} tune_keys[] = {
#define TUNE_KEY_(k) {#k, offsetof(struct run_meta, k)}
    TUNE_KEY_(model),      TUNE_KEY_(device),           TUNE_KEY_(world_size),
    TUNE_KEY_(batch_size), TUNE_KEY_(threads_per_rank), TUNE_KEY_(amp),
    TUNE_KEY_(sync_bn),    TUNE_KEY_(bucket_cap_mb),    TUNE_KEY_(comm),
#undef TUNE_KEY_
};

/* 1 when run r is of the configuration tune measured (t->given), else 0 with the first key
 * that differs in why */
static int tune_same_config(const struct run *r, const struct tune_results *t, char *why,
                            size_t size)
{
    if (!t->has_given) {
        snprintf(why, size, "no %s/meta.csv to tell which configuration it measured",
                 t->given_dir ? t->given_dir : "round-1/given");
        return 0;
    }
    for (size_t k = 0; k < sizeof tune_keys / sizeof *tune_keys; k++) {
        const struct meta_value *x = (const void *)((const char *)&r->meta + tune_keys[k].off),
                                *y = (const void *)((const char *)&t->given + tune_keys[k].off);
        const int required = strcmp(tune_keys[k].name, "world_size") == 0;
        if (!x->s || !y->s) {
            if (!required)
                continue;
        } else if (strcmp(tune_keys[k].name, "bucket_cap_mb") == 0
                       ? fabs(x->d - y->d) <= 1e-9 * fabs(y->d)
                       : strcmp(x->s, y->s) == 0) {
            continue;
        }
        snprintf(why, size, "%s %s, tune's %s", tune_keys[k].name, x->s ? x->s : "unknown",
                 y->s ? y->s : "unknown");
        return 0;
    }
    return 1;
}

/* Row w's measured change into item it (source measured (A/B), status as tune judged) */
static void tune_apply(const struct tune_row *w, struct advice_item *it)
{
    const double g = w->step_ms_given;
    it->source = ADVICE_AB;
    it->saving_ms = -w->change_pct / 100.0 * g;
    it->has_interval = 1;
    it->saving_lo_ms = -w->high_pct / 100.0 * g;
    it->saving_hi_ms = -w->low_pct / 100.0 * g;
    it->has_noise = 1;
    it->noise_ms = w->noise_pct / 100.0 * g;
    it->ab_verdict = strcmp(w->verdict, "faster") == 0   ? "faster"
                     : strcmp(w->verdict, "slower") == 0 ? "slower"
                                                         : "noise";
    it->status = it->ab_verdict[0] == 'f'   ? ADVICE_ST_RECOMMENDED
                 : it->ab_verdict[0] == 's' ? ADVICE_ST_SLOWER
                                            : ADVICE_ST_NOISE;
}

/* "step 6.100 -> 8.400 ms, +37.7 % (5 rounds: +20.1 to +50.3 %): slower" */
static void tune_words(const struct tune_row *w, char *buf, size_t size)
{
    snprintf(buf, size, "step %.3f -> %.3f ms, %+.1f %% (%d interleaved rounds: %+.1f to "
                        "%+.1f %%): %s",
             w->step_ms_given, w->step_ms, w->change_pct, w->rounds, w->low_pct, w->high_pct,
             w->verdict);
}

/* Apply t to run i's candidates rk[from..*n): each row to the rule candidate recommending
 * the same change, else as a candidate of its own.  0, or -1 after error_set(). */
static int tune_merge(const struct tune_results *t, const struct advice_run *a,
                      struct ranked **rk, size_t *n, size_t *cap, size_t from)
{
    for (size_t k = 0; k < t->n; k++) {
        const struct tune_row *w = &t->rows[k];
        struct tune_change c;
        char words[256];
        if (!w->args[0])
            continue; /* "same": the configuration against itself, tune's noise, no change */
        tune_change_parse(w->args, &c);
        tune_words(w, words, sizeof words);
        struct ranked *x = NULL;
        for (size_t j = from; j < *n && !x; j++)
            if (tune_change_is(&(*rk)[j], &c))
                x = &(*rk)[j];
        if (x) { /* the rule's text stays: what it read from the trace, then the trial's */
            tune_apply(w, &x->item);
            item_append(&x->item, "; ddpprof tune measured %s: %s", w->args, words);
            continue;
        }
        if (VEC_RESERVE(*rk, *cap, *n + 1))
            return error_set("report: out of memory");
        x = &(*rk)[*n];
        memset(x, 0, sizeof *x);
        x->rule_order = ADVICE_NRULES;
        x->item.rule = c.rule;
        x->item.run = a->idx;
        x->item.step_ms = a->step_ms;
        tune_apply(w, &x->item);
        if (asprintf(&x->item.text, "%s%s%s%s (%s): ddpprof tune measured %s",
                     a->prefix ? "run " : "", a->prefix ? a->r->label : "", a->prefix ? ": " : "",
                     w->candidate, w->args, words) < 0) {
            x->item.text = NULL;
            return error_set("report: out of memory");
        }
        (*n)++;
    }
    return 0;
}

int advice_make(const struct runset *rs, const struct run_stat *st, const struct repeats *rep,
                const struct predict_whatif *wf, const struct tune_results *tune,
                struct advice *out)
{
    memset(out, 0, sizeof *out);
    if (rs->n < 1) {
        out->verdict = strdup("verdict: no run: nothing to advise on");
        return out->verdict ? 0 : error_set("report: out of memory");
    }
    struct advice_run *ar = calloc((size_t)rs->n, sizeof *ar);
    struct ranked *rk = NULL;
    size_t n = 0, cap = 0;
    int rc = 0, tuned = 0;
    char why[256] = "";
    if (!ar)
        return error_set("report: out of memory");
    const int base = analysis_baseline(rs);
    int subjects = 0;
    for (int i = 0; i < rs->n; i++) {
        advice_run_fill(rs, st, rep ? &rep[i] : NULL, i, &ar[i]);
        ar[i].whatif = wf->ok && wf->run == i ? wf : NULL; /* the bucket-cap rule's */
        subjects += i != base || rs->n == 1;
    }
    for (int i = 0; i < rs->n && rc == 0; i++) {
        if ((i == base && rs->n > 1) || ar[i].ranks == 0)
            continue;
        ar[i].prefix = subjects > 1;
        const size_t from = n;
        for (int k = 0; k < ADVICE_NRULES && rc == 0; k++) {
            struct advice_cand c = {0};
            if (!advice_rules[k].fn(&ar[i], &c))
                continue;
            if (VEC_RESERVE(rk, cap, n + 1)) {
                rc = error_set("report: out of memory");
                break;
            }
            struct ranked *x = &rk[n];
            memset(x, 0, sizeof *x);
            x->rule_order = k;
            x->opt = c.opt;
            x->value = c.value;
            x->item.rule = advice_rules[k].name;
            x->item.run = i;
            x->item.saving_ms = c.saving_ms;
            x->item.step_ms = ar[i].step_ms;
            x->item.source = c.source;
            if (ar[i].prefix ? asprintf(&x->item.text, "run %s: %s", ar[i].r->label, c.text) < 0
                             : !(x->item.text = strdup(c.text))) {
                x->item.text = NULL;
                rc = error_set("report: out of memory");
                break;
            }
            n++;
            cand_judge(&ar[i], advice_rules[k].noise, x);
        }
        if (rc == 0 && tune && tune->n > 0) {
            if (tune_same_config(ar[i].r, tune, why, sizeof why)) {
                rc = tune_merge(tune, &ar[i], &rk, &n, &cap, from);
                tuned++;
            }
        }
    }
    if (rc == 0 && tune && tune->n > 0 && !tuned)
        report_warn("%s: ddpprof tune measured another configuration than the runs advised on "
                    "here (%s): its trials are not applied (report/FORMULAS.md \"Advice\")",
                    tune->path, why[0] ? why : "no run with step ranges");
    if (rc == 0 && !(out->verdict = verdict_text(rs, st, ar, base, wf, out)))
        rc = error_set("report: out of memory");
    if (rc == 0) {
        const struct advice_run *v = &ar[verdict_run(ar, rs->n, base)];
        out->has_noise = v->has_noise;
        out->noise_ms = v->noise_ms;
    }
    if (rc == 0 && n > 0) {
        qsort(rk, n, sizeof *rk, cmp_ranked);
        if (!(out->items = malloc(n * sizeof *out->items)))
            rc = error_set("report: out of memory");
    }
    for (size_t k = 0; k < n; k++) {
        if (rc == 0) {
            struct advice_item *it = &out->items[out->n++];
            *it = rk[k].item;
            out->recommended += it->status == ADVICE_ST_RECOMMENDED;
            out->noise += it->status == ADVICE_ST_NOISE;
            out->slower += it->status == ADVICE_ST_SLOWER;
            out->under_load += it->status == ADVICE_ST_UNDER_LOAD;
        } else {
            free(rk[k].item.text);
        }
    }
    out->cap = out->n;
    free(rk);
    free(ar);
    if (rc != 0)
        advice_free(out);
    return rc;
}

size_t advice_shown(const struct advice *a)
{
    return a->recommended < ADVICE_SHOWN ? a->recommended : ADVICE_SHOWN;
}

const char *advice_source_name(enum advice_source s)
{
    static const char *const names[] = {
        [ADVICE_MEASURED] = "measured (trace)",
        [ADVICE_PREDICTED] = "predicted",
        [ADVICE_ASSUMED] = "assumed",
        [ADVICE_AB] = "measured (A/B)",
    };
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "";
}

const char *advice_status_name(enum advice_status s)
{
    static const char *const names[] = {
        [ADVICE_ST_RECOMMENDED] = "recommended",
        [ADVICE_ST_NOISE] = "inside the noise",
        [ADVICE_ST_SLOWER] = "slower",
        [ADVICE_ST_UNDER_LOAD] = "unreliable under load",
    };
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "";
}

void advice_free(struct advice *a)
{
    for (size_t k = 0; k < a->n; k++)
        free(a->items[k].text);
    free(a->items);
    free(a->verdict);
    free(a->cause_action);
    memset(a, 0, sizeof *a);
}
