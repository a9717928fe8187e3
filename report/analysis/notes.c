/* notes.c — the lines beside the report's tables (see notes.h; report/FORMULAS.md "Warm-up
 * steps", "Repeats", "Figures measured under load"). */
#include "report/analysis/notes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/vec.h"
#include "report/analysis/modes.h"

static double ms(int64_t ns)
{
    return (double)ns * 1e-6;
}

void notes_add(struct note_lines *c, const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (VEC_RESERVE(c->line, c->cap, c->n + 1)) {
        free(line);
        return;
    }
    c->line[c->n++] = line;
}

void notes_free(struct note_lines *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->line[i]);
    free(c->line);
    memset(c, 0, sizeof *c);
}

/* The notes beside the tables: each run's warm-up ("step 1: 643.0 ms, warm-up, not
 * counted") into warm, and the spread of the runs made more than once into spread. */
void notes_warmup_spread(const struct runset *rs, const struct run_stat *st,
                         const struct repeats *rep, struct note_lines *warm,
                         struct note_lines *spread)
{
    for (int i = 0; i < rs->n; i++) {
        const struct warmup_stat *w = &st[i].warmup;
        const char *how = w->detected ? "detected: the first step within 50% of the median "
                                        "of the next 5, at most 10 and a quarter of the "
                                        "steps; --warmup-steps N to choose"
                                      : "--warmup-steps";
        if (w->steps == 1)
            notes_add(warm, "run %s: step %d: %.1f ms, warm-up, not counted in the per-step "
                              "statistics, the throughput or the speedup (%s)",
                        rs->runs[i].label, w->first_step, ms(w->first_ns), how);
        else if (w->steps > 1)
            notes_add(warm, "run %s: steps %d-%d: warm-up (step %d: %.1f ms), not counted in "
                              "the per-step statistics, the throughput or the speedup (%s)",
                        rs->runs[i].label, w->first_step, w->last_step, w->first_step,
                        ms(w->first_ns), how);
        else if (w->first_ns >= 0 && w->detected)
            notes_add(warm, "run %s: no warm-up step (step %d: %.1f ms had settled)",
                        rs->runs[i].label, w->first_step, ms(w->first_ns));
        const struct repeats *p = &rep[i];
        if (p->n < 2)
            continue;
        double v[REPORT_MAX_REPEATS];
        struct spread a, b;
        char sp[128] = "";
        if (p->nspeedup > 0) {
            memcpy(v, p->speedup, (size_t)p->nspeedup * sizeof *v);
            analysis_spread(v, (size_t)p->nspeedup, &a);
            snprintf(sp, sizeof sp, "speedup %.2fx (%.2f-%.2fx), ", a.median, a.min, a.max);
        }
        memcpy(v, p->ips, (size_t)p->nips * sizeof *v);
        if (p->nips > 0)
            analysis_spread(v, (size_t)p->nips, &a);
        memcpy(v, p->wall, (size_t)p->nwall * sizeof *v);
        if (p->nwall > 0)
            analysis_spread(v, (size_t)p->nwall, &b);
        if (p->nips > 0 && p->nwall > 0)
            notes_add(spread, "run %s over %d repeats, median (min-max): %sthroughput %.1f "
                                "(%.1f-%.1f) img/s, wall %.3f (%.3f-%.3f) s",
                        rs->runs[i].label, p->n, sp, a.median, a.min, a.max, b.median, b.min,
                        b.max);
    }
}

/* The cautions beside the speedup table (report/FORMULAS.md "Figures measured under
 * load"): a rank whose trace ends early (run.h cut), a run measured on a busy host, a
 * speedup that compares such a run, an efficiency above 1. */
/* Step times in two groups (modes.h; FORMULAS.md "Two groups of step times"): the lowest
 * rank with enough steady steps; with 2 ranks or more, whether the slow steps are waits for
 * one rank -- steps whose ranks waited at least half the groups' difference per waiting
 * rank, for the slowest one's gradients (stragglers.csv wait_ms) plus in the collectives
 * outside the gradient buckets for the last to arrive (step_stat.coll_wait_ns) -- and which
 * rank that was most often (each step's: the one of the larger of the two waits). */
static void notes_modes(const struct run *r, const struct run_stat *s, struct note_lines *t)
{
    const struct rank_stat *rk = NULL;
    for (int k = 0; k < s->nranks && !rk; k++)
        if (s->ranks[k].nsteps >= MODES_MIN_STEPS)
            rk = &s->ranks[k];
    struct step_modes m;
    if (!rk || modes_split(rk->step_ns, rk->nsteps, &m) != 0 || !m.two)
        return;
    char why[400] = "";
    if (r->world_size >= 2 && s->nsteps > 0) {
        const double half_ns = 0.5 * (m.slow_ms - m.fast_ms) * 1e6;
        size_t waits = 0, in_colls = 0;
        int count[64] = {0}, top = -1;
        for (size_t i = 0; i < s->nsteps; i++) {
            const struct step_stat *x = &s->steps[i];
            if (x->ranks < 2 || (double)(x->wait_ns + x->coll_wait_ns) < half_ns * (x->ranks - 1))
                continue;
            waits++;
            const int colls = x->coll_wait_ns > x->wait_ns;
            const int who = colls ? x->coll_late_rank : x->slowest_rank;
            if (who < 0 || who >= 64)
                continue;
            in_colls += colls;
            count[who]++;
            if (top < 0 || count[who] > count[top])
                top = who;
        }
        const char *where = in_colls * 2 > waits
                                ? " to arrive in the collectives (phases.csv wait_ms, late_rank)"
                                : "'s gradients (stragglers.csv)";
        if (waits * 2 >= m.n_slow && top >= 0)
            snprintf(why, sizeof why, "; in %zu steps the other ranks waited that long for one "
                                      "rank%s, rank %d's in %.0f %% of them: a rank that lost "
                                      "its core, not the network -- advice on collectives uses "
                                      "transfer times",
                     waits, where, top, 100.0 * count[top] / (double)waits);
        else
            snprintf(why, sizeof why, "; the slow steps are not waits for one rank (%zu of "
                                      "them, stragglers.csv and the collectives' waits): every "
                                      "rank slowed together -- load on the machine, or periodic "
                                      "work",
                     waits);
    }
    notes_add(t, "run %s: its step times fall in two groups (rank %d's %zu steps after the "
                 "warm-up): %.0f %% near %.3f ms and %.0f %% near %.3f ms, none between "
                 "(separation %.1f): the means in these tables describe neither%s",
              r->label, rk->rank, m.n, 100.0 * (double)m.n_fast / (double)m.n, m.fast_ms,
              100.0 * (double)m.n_slow / (double)m.n, m.slow_ms, m.separation, why);
}

void notes_cautions(const struct runset *rs, const struct run_stat *st, struct note_lines *t)
{
    int base = analysis_baseline(rs);
    struct run_load base_load = {0};
    int over_ranks = 0, over_cores = 0, base_over = 0;
    if (base >= 0) {
        analysis_load(&rs->runs[base], &base_load);
        base_over = analysis_oversubscribed(&rs->runs[base], &over_ranks, &over_cores);
        base_load.loaded |= base_over;
    }
    for (int i = 0; i < rs->n; i++) {
        const struct run *r = &rs->runs[i];
        for (int k = 0; k < r->nranks; k++) { /* a rank that stopped early (run.h cut) */
            const struct rank_trace *rt = &r->ranks[k];
            if (rt->cut)
                notes_add(t, "run %s: rank %d's trace ends at step %lld of %lld — it "
                               "stopped there: its overlap%s left empty and its phase times "
                               "cover only the steps it has",
                            r->label, rt->rank, (long long)rt->last_step,
                            (long long)rt->run_steps,
                            k == 0 && !st[i].has_ips ? " and the run's throughput are"
                                                     : " is");
        }
        char flight[512] = ""; /* the comm's flight recorder after a failed collective */
        size_t flen = 0;
        for (int k = 0; k < r->nranks && flen < sizeof flight - 200; k++)
            if (r->ranks[k].flight)
                flen += (size_t)snprintf(flight + flen, sizeof flight - flen, "%srank %d %s %s",
                                         flen ? ", " : "", r->ranks[k].rank,
                                         flen ? "in" : "was in", r->ranks[k].flight);
        if (flen)
            notes_add(t, "run %s: a collective failed; the flight recorder (rankN.flight.csv) "
                           "says %s",
                        r->label, flight);
        notes_modes(r, &st[i], t);
        struct run_load l;
        analysis_load(r, &l);
        int over = analysis_oversubscribed(r, &over_ranks, &over_cores);
        if (over)
            notes_add(t, "run %s was oversubscribed: %d CPU ranks on %d cores "
                           "(--oversubscribe), so the ranks took turns on the cores: its times "
                           "are slower than this machine's",
                        r->label, over_ranks, over_cores);
        if (l.loaded) {
            char cores[32] = "", steal[80] = "", load[96] = "";
            if (l.cores)
                snprintf(cores, sizeof cores, " of %d", l.cores);
            if (l.has_steal && l.steal >= ANALYSIS_LOADED_STEAL)
                snprintf(steal, sizeof steal, "; the hypervisor took %.0f%% of the CPU time",
                         100.0 * l.steal);
            if (l.has_load && l.load_end >= 0.0)
                snprintf(load, sizeof load, " (load average %.2f at the start, %.2f at the end)",
                         l.load_start, l.load_end);
            else if (l.has_load)
                snprintf(load, sizeof load, " (load average %.2f at the start)", l.load_start);
            if (l.has_other)
                notes_add(t, "run %s was measured under load: other programs kept %.2f%s "
                               "cores busy on average%s%s: its times are slower than this "
                               "machine's",
                            r->label, l.other_cores, cores, load, steal);
            else
                notes_add(t, "run %s was measured under load%s%s: its times are slower than "
                               "this machine's",
                            r->label, load, steal);
        }
        if (!st[i].has_speedup || i == base)
            continue;
        l.loaded |= over; /* the speedup of an oversubscribed run is no scaling either */
        if (l.loaded || base_load.loaded)
            notes_add(t, "the speedup of %s (%.2fx) compares runs measured under load (%s): "
                           "it is not this machine's scaling; rerun on an idle machine",
                        r->label, st[i].speedup,
                        l.loaded && base_load.loaded ? "both"
                        : l.loaded                    ? r->label
                                                      : "the baseline");
        if (st[i].efficiency > 1.0)
            notes_add(t, "the efficiency of %s is %.2f, above 1 (faster than linear): "
                           "usually the baseline was slowed (load, a cold start), not DDP; "
                           "check the baseline before reading it as scaling",
                        r->label, st[i].efficiency);
    }
}
