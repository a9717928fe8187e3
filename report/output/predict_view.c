/* predict_view.c — predict.csv, `ddpprof predict`'s lines and the report's what-if lines
 * (see predict_view.h). */
#include "report/output/predict_view.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "report/analysis/analysis.h"
#include "report/input/run.h"

enum { PC_CONFIG, PC_WORLD, PC_CAP, PC_BW, PC_LAT, PC_FLOOR, PC_BUSY, PC_AMP, PC_SYNC_BN, PC_BUCKETS, PC_STEP,
       PC_STEP_LO, PC_STEP_HI, PC_COMPUTE, PC_COMM, PC_EXPOSED, PC_WAIT, PC_OVERLAP, PC_SPEEDUP, PC_CHANGE, PC_COUNT };
static const struct table_col predict_cols[PC_COUNT] = {
    [PC_CONFIG] = {"config", "config", "", 1},
    [PC_WORLD] = {"world", "world", "", 0},
    [PC_CAP] = {"bucket_cap_mb", "cap", "MB", 0},
    [PC_BW] = {"bandwidth_gbps", "bandwidth", "Gbit/s", 0},
    [PC_LAT] = {"latency_us", "latency", "us", 0},
    [PC_FLOOR] = {"floor_ms", "floor", "ms", 0},
    [PC_BUSY] = {"busy_ms", "busy", "ms", 0},
    [PC_AMP] = {"amp", "amp", "", 1},
    [PC_SYNC_BN] = {"sync_bn", "sync BN", "", 1},
    [PC_BUCKETS] = {"buckets", "buckets", "", 0},
    [PC_STEP] = {"step_ms", "step", "ms", 0},
    [PC_STEP_LO] = {"step_lo_ms", "80% from", "ms", 0},
    [PC_STEP_HI] = {"step_hi_ms", "to", "ms", 0},
    [PC_COMPUTE] = {"compute_ms", "compute", "ms", 0},
    [PC_COMM] = {"comm_ms", "comm", "ms", 0},
    [PC_EXPOSED] = {"exposed_comm_ms", "exposed", "ms", 0},
    [PC_WAIT] = {"wait_ms", "rank wait", "ms", 0},
    [PC_OVERLAP] = {"overlap_pct", "overlap", "%", 0},
    [PC_SPEEDUP] = {"speedup", "speedup", "x", 0},
    [PC_CHANGE] = {"step_change_pct", "vs measured", "%", 0},
};

void predict_table_init(struct table *t)
{
    table_init(t, "predict: the measured step and each what-if (report/FORMULAS.md "
                  "\"Predictions\")", "predict.csv", predict_cols, PC_COUNT);
}

void predict_table_measured(struct table *t, const struct predict_source *s, double speedup)
{
    table_add_row(t);
    table_set(t, PC_CONFIG, "measured");
    table_set(t, PC_WORLD, "%d", s->world);
    if (s->world > 1)
        table_set(t, PC_CAP, "%g", s->cap_mb);
    if (s->calibrated) {
        table_set(t, PC_BW, "%.4g", s->comm.bandwidth_gbps);
        table_set(t, PC_LAT, "%.4g", s->comm.latency_us);
        table_set(t, PC_FLOOR, "%.4g", s->comm.floor_ms);
        table_set(t, PC_BUSY, "%.4g", s->comm.busy_ms);
    }
    table_set(t, PC_AMP, "%s", s->amp);
    if (s->run->meta.sync_bn.s)
        table_set(t, PC_SYNC_BN, "%s", s->sync_bn ? "on" : "off");
    if (s->run->meta.buckets.s)
        table_set(t, PC_BUCKETS, "%lld", (long long)s->run->meta.buckets.i);
    table_set(t, PC_STEP, "%.3f", s->step_ms);
    double lo, hi;
    predict_measured_interval(s, &lo, &hi);
    table_set(t, PC_STEP_LO, "%.3f", lo);
    table_set(t, PC_STEP_HI, "%.3f", hi);
    table_set(t, PC_COMPUTE, "%.3f", s->compute_ms);
    table_set(t, PC_COMM, "%.3f", s->comm_ms);
    table_set(t, PC_EXPOSED, "%.3f", s->exposed_ms);
    if (s->m.wait_world > 1)
        table_set(t, PC_WAIT, "%.3f", s->m.wait_ms);
    if (s->has_overlap)
        table_set(t, PC_OVERLAP, "%.1f", s->overlap_pct);
    if (speedup > 0)
        table_set(t, PC_SPEEDUP, "%.3f", speedup);
    table_set(t, PC_CHANGE, "0.0");
}

void predict_table_row(struct table *t, const struct predict_config *c, double asked_bw,
                       const char *amp, const char *sync_bn, const struct predict_out *p,
                       double speedup, double measured_step_ms)
{
    table_add_row(t);
    table_set(t, PC_CONFIG, "predicted");
    table_set(t, PC_WORLD, "%d", c->world);
    table_set(t, PC_CAP, "%g", c->bucket_cap_mb);
    table_set(t, PC_BW, "%.4g", asked_bw);
    table_set(t, PC_LAT, "%.4g", c->comm.latency_us);
    table_set(t, PC_FLOOR, "%.4g", c->comm.floor_ms);
    table_set(t, PC_BUSY, "%.4g", c->comm.busy_ms);
    table_set(t, PC_AMP, "%s", amp);
    if (sync_bn)
        table_set(t, PC_SYNC_BN, "%s", sync_bn);
    table_set(t, PC_BUCKETS, "%d", p->buckets);
    table_set(t, PC_STEP, "%.3f", p->step_ms);
    table_set(t, PC_STEP_LO, "%.3f", p->step_lo_ms);
    table_set(t, PC_STEP_HI, "%.3f", p->step_hi_ms);
    table_set(t, PC_COMPUTE, "%.3f", p->compute_ms);
    table_set(t, PC_COMM, "%.3f", p->comm_ms);
    table_set(t, PC_EXPOSED, "%.3f", p->exposed_comm_ms);
    if (c->world > 1)
        table_set(t, PC_WAIT, "%.3f", p->straggler_ms);
    if (p->comm_ms > 0)
        table_set(t, PC_OVERLAP, "%.1f", p->overlap_pct);
    if (speedup > 0)
        table_set(t, PC_SPEEDUP, "%.3f", speedup);
    table_set(t, PC_CHANGE, "%+.1f", 100.0 * (p->step_ms - measured_step_ms) / measured_step_ms);
}

/* the comm's threads' CPU beside compute on a CPU rank (overlap.csv comm_cpu_ms,
 * comm_cpu_bwd_ms of rank 0; report/FORMULAS.md), when the trace measured it */
static void predict_print_comm_cpu(FILE *f, const struct predict_source *s)
{
    const struct rank_stat *r = s->st->nranks > 0 ? &s->st->ranks[0] : NULL;
    if (!r || !r->has_comm_cpu || !r->has_comm_cpu_bwd)
        return;
    fprintf(f, "#  comm: its threads took %.3f ms of CPU a step, %.3f ms of it inside backward",
            r->comm_cpu_ns * 1e-6, r->comm_cpu_bwd_ns * 1e-6);
    if (r->comm_cpu_bwd_span_ns > 0)
        fprintf(f, " (%.1f %% of backward)", 100.0 * r->comm_cpu_bwd_ns / r->comm_cpu_bwd_span_ns);
    fputc('\n', f);
}

/* a run measured under load or oversubscribed (report/FORMULAS.md "Figures measured under
 * load"): its predictions carry that machine, and their intervals cannot see it change */
static void predict_print_load(FILE *f, const struct run *r)
{
    struct run_load l;
    int ranks = 0, cores = 0;
    analysis_load(r, &l);
    const int over = analysis_oversubscribed(r, &ranks, &cores);
    if (!l.loaded && !over)
        return;
    fprintf(f, "#  run %s was measured ", r->label);
    if (over)
        fprintf(f, "with %d CPU ranks on %d cores (oversubscribed)", ranks, cores);
    else if (l.has_other && l.other_cores >= ANALYSIS_LOADED_CORES)
        fprintf(f, "under load (other programs kept %.2f of %d cores busy)", l.other_cores,
                l.cores);
    else if (l.has_steal && l.steal >= ANALYSIS_LOADED_STEAL)
        fprintf(f, "under load (the hypervisor took %.0f %% of the CPU)", 100.0 * l.steal);
    else
        fprintf(f, "under load (load average %.2f on %d cores at its start)", l.load_start,
                l.cores);
    fprintf(f, ": every prediction carries that machine's times (its ranks' waits, its "
               "comm's), and the 80 %% intervals only its spread; a run on an idle machine "
               "predicts an idle machine (issue 38: -0.44 ms predicted, -10.4 ms measured "
               "under load)\n");
}

void predict_print_footer(FILE *f, const struct predict_footer *p)
{
    const struct predict_source *s = p->s;
    const struct predict_comm *cal = p->cal;
    fprintf(f, "#  predicted from run %s (%s): %d rank(s), median step %.3f ms over %zu "
               "step(s) after %d warm-up step(s)\n",
            s->run->label, s->run->dir, s->world, s->step_ms, s->st->ranks[0].nsteps,
            s->st->warmup.steps);
    predict_print_load(f, s->run);
    if (p->have_cal && s->calibrated && !p->comm_from) {
        fprintf(f, "#  comm: ring all-reduce fitted to %zu all-reduce(s) of %zu size(s): "
                   "%.4g Gbit/s, %.4g us per hop\n", s->cal_samples, s->cal_sizes,
                cal->bandwidth_gbps, cal->latency_us);
        if (cal->floor_ms > 0)
            fprintf(f, "#  comm: an all-reduce takes at least %.4g ms (the median of the "
                       "setup's %zu near-empty ones)\n", cal->floor_ms, s->cal_small);
        if (s->cal_busy > 0)
            fprintf(f, "#  comm: an all-reduce that starts before backward ends takes %.4g ms "
                       "more (the median excess of the run's %zu such)\n", cal->busy_ms,
                    s->cal_busy);
    } else if (p->have_cal) {
        fprintf(f, "#  comm: calibrated on run %s: %.4g Gbit/s, %.4g us per hop, at least "
                   "%.4g ms, %.4g ms more beside backward\n", p->cal_from, cal->bandwidth_gbps,
                cal->latency_us, cal->floor_ms, cal->busy_ms);
    }
    if (p->have_cal && cal->grad_progress)
        fprintf(f, "#  comm: its threads run at the gradients (comm_progress,gradient): an "
                   "all-reduce started in backward takes each ring step at the next "
                   "gradient\n");
    predict_print_comm_cpu(f, s);
    if (p->have_cal && cal->cpu_ms_per_byte > 0) {
        fprintf(f, "#  comm: its threads take %.4g ms of CPU per MB a rank moves%s%s; a what-if's "
                   "all-reduces started before backward ends lengthen backward by theirs",
                cal->cpu_ms_per_byte * 1e6, p->comm_from ? ", from run " : "",
                p->comm_from ? p->cal_from : "");
        if (!p->comm_from && s->cpu_bwd_own_ms > 0)
            fprintf(f, " (this run's configuration: %.3f ms)", s->cpu_bwd_own_ms);
        fprintf(f, " (report/FORMULAS.md \"The comm's CPU beside backward\")\n");
    }
    if (!s->layered)
        fprintf(f, "#  no per-layer rows (a run with --trace full records them): gradients "
                   "taken as ready spread over backward by their bytes\n");
    if (!s->param_keys && s->m.nparams > 0)
        fprintf(f, "#  no param.I.* in meta.csv: the measured buckets stand for the "
                   "parameters (a cap can merge them, not split them)\n");
    if (s->world == 1 && p->asks_world_above_1)
        fprintf(f, "#  from a 1-rank run: each rank computes as that run did (its threads "
                   "per rank: %s)\n", s->run->meta.threads_per_rank.s
                                         ? s->run->meta.threads_per_rank.s : "?");
    const struct predict_spread *sp = &s->spread;
    fprintf(f, "#  80 %% interval (step_lo_ms to step_hi_ms; report/FORMULAS.md \"The 80 %% "
               "interval\"): step times p10 %+.1f %%, p90 %+.1f %% of the median (%zu "
               "step(s)); ", -100.0 * sp->step_lo_rel, 100.0 * sp->step_hi_rel, sp->steps);
    if (p->have_cal && cal->resid_sizes > 0)
        fprintf(f, "the comm fit's residuals p10 %+.3f ms, p90 %+.3f ms an all-reduce (%zu "
                   "size(s))", cal->resid_lo_ms, cal->resid_hi_ms, cal->resid_sizes);
    else
        fprintf(f, "no comm fit (no comm term)");
    if (sp->skew_steps > 0)
        fprintf(f, "; rank-arrival skew %.3f ms a step per waiting rank (the median over %zu "
                   "step(s) of stragglers.csv)", sp->skew_ms, sp->skew_steps);
    else if (s->world == 1)
        fprintf(f, "; from 1 rank: the straggler term stands for the skew");
    fprintf(f, "; each side's terms added in quadrature\n");
    for (int k = 0; k < p->nnotes; k++)
        fprintf(f, "#  %s\n", p->notes[k]);
    fprintf(f, "#  written to %s/predict.csv\n", p->out);
    fflush(f);
}

static int add_line(char ***lines, size_t *n, const char *fmt, ...)
{
    char **v = realloc(*lines, (*n + 1) * sizeof *v);
    if (!v)
        return error_set("report: out of memory");
    *lines = v;
    va_list ap;
    va_start(ap, fmt);
    int ok = vasprintf(&v[*n], fmt, ap);
    va_end(ap);
    if (ok < 0)
        return error_set("report: out of memory");
    (*n)++;
    return 0;
}

int predict_whatif(const struct runset *rs, const struct predict_whatif *wp, char ***lines,
                   size_t *n)
{
    *lines = NULL;
    *n = 0;
    const struct predict_whatif w = *wp;
    if (w.run < 0)
        return 0;
    const char *label = rs->runs[w.run].label;
    if (!w.ok)
        return add_line(lines, n, "what if: run %s cannot be predicted: %s", label, w.why);
    int rc = add_line(lines, n,
                      "what if (run %s, predicted; ring all-reduce fitted: %.4g Gbit/s, %.4g us "
                      "per hop, at least %.4g ms, %.4g ms more beside backward; "
                      "report/FORMULAS.md \"Predictions\"):",
                      label, w.comm.bandwidth_gbps, w.comm.latency_us, w.comm.floor_ms,
                      w.comm.busy_ms);
    if (rc == 0 && w.best_cap_mb != w.cap_mb)
        rc = add_line(lines, n,
                      "  best bucket cap %.3g MB (of %d from %.3g to %g): step %.3f ms (80 %%: "
                      "%.3f-%.3f), %+.3f ms per step (%+.1f %%), exposed comm %.3f ms (%+.3f) "
                      "against the run's %g MB (step %.3f ms, 80 %%: %.3f-%.3f)",
                      w.best_cap_mb, w.ncand, w.cands[0], w.cands[w.ncand - 1], w.best_step_ms,
                      w.best_lo_ms, w.best_hi_ms, w.best_step_ms - w.step_ms,
                      100.0 * (w.best_step_ms - w.step_ms) / w.step_ms, w.best_exposed_ms,
                      w.best_exposed_ms - w.exposed_ms, w.cap_mb, w.step_ms, w.step_lo_ms,
                      w.step_hi_ms);
    else if (rc == 0)
        rc = add_line(lines, n,
                      "  best bucket cap: the run's own %g MB (no candidate of %d from %.3g to "
                      "%g MB is predicted faster); step %.3f ms (80 %%: %.3f-%.3f), exposed "
                      "comm %.3f ms per step", w.cap_mb, w.ncand, w.cands[0],
                      w.cands[w.ncand - 1], w.step_ms, w.step_lo_ms, w.step_hi_ms, w.exposed_ms);
    for (int k = 0; rc == 0 && k < 2; k++) {
        const int mult = k ? 4 : 2;
        if (w.scale[k].speedup > 0 && w.speedup > 0)
            rc = add_line(lines, n,
                          "  world %d (%dx): step %.3f ms (80 %%: %.3f-%.3f), speedup %.2fx "
                          "over the baseline (%.2fx now, by median steps): %.2fx the "
                          "throughput, exposed comm %.3f ms", w.scale[k].world, mult,
                          w.scale[k].step_ms, w.scale[k].lo_ms, w.scale[k].hi_ms,
                          w.scale[k].speedup, w.speedup, w.scale[k].gain, w.scale[k].exposed_ms);
        else
            rc = add_line(lines, n,
                          "  world %d (%dx): step %.3f ms (80 %%: %.3f-%.3f), %.2fx the "
                          "throughput (no baseline for a speedup), exposed comm %.3f ms",
                          w.scale[k].world, mult, w.scale[k].step_ms, w.scale[k].lo_ms,
                          w.scale[k].hi_ms, w.scale[k].gain, w.scale[k].exposed_ms);
    }
    return rc;
}
