/* diff.c — the diff of two runs (diff.h): per run, every counted step of the critical rank
 * swept once, each instant of the step given to exactly one row; the sums become means
 * per step, rounded so that every group adds up to its parent as printed; then the
 * change per row and its share of the step-time change.  report/FORMULAS.md "diff.csv";
 * report/output/diff_view.c makes the tables. */
#include "report/analysis/diff.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/vec.h"
#include "report/input/ops.h"
#include "report/input/sort.h"

/* the parts of a step, in diff.csv order */
enum part { P_DATA, P_FORWARD, P_BACKWARD, P_OPTIMIZER, P_EXPOSED, P_OTHER, P_COUNT };
_Static_assert(P_COUNT == DIFF_PARTS, "diff.h's count of the step's parts");
static const char *const part_names[P_COUNT] = {"data",      "forward",      "backward",
                                                "optimizer", "exposed_comm", "other"};

/* what a selected row is to the sweep */
enum cat { C_NONE, C_STEP, C_FWD, C_BWD, C_OPT, C_DATA, C_BUCKET, C_HELD, C_LFWD, C_LBWD };

/* the trace's phase names of the per-layer rows (probes/TRACE.md, --trace full) */
#define DIFF_LAYER_FORWARD "layer.forward"
#define DIFF_LAYER_BACKWARD "layer.backward"

/* One run's sums over its counted steps (ns). */
struct side {
    int64_t steps, step_ns;
    int64_t part[P_COUNT], time[P_COUNT];
    int64_t *lf_part, *lf_time, *lb_part, *lb_time; /* per name id */
    char *lf_seen, *lb_seen;
    int64_t *bk_part, *bk_time; /* per bucket id */
    char *bk_seen;
    int64_t cl_part[TRACE_PHASE_COUNT], cl_time[TRACE_PHASE_COUNT]; /* held collectives */
    char cl_seen[TRACE_PHASE_COUNT];
    int crit;           /* the rank (index in run->ranks) critical in most counted steps */
    int64_t crit_steps; /* its step ranges, warm-up included (its op table's steps) */
};

/* The sweep's view of the runset: what each label is. */
struct ctx {
    const struct runset *rs;
    uint32_t nlabels, nnames;
    int nbk;                /* bucket ids 0..nbk-1 */
    unsigned char *cat;     /* labels id -> enum cat */
    signed char *held;      /* labels id -> enum trace_phase of a held collective, else -1 */
    uint32_t range_kind;
    int a, b;               /* the runs */
};

/* a selected row of one rank, keyed by its step for the radix sort */
struct srow {
    int64_t step;
    size_t row;
};

struct ev {
    int64_t pos;
    int64_t start; /* the row's clipped start (innermost layer: the latest start) */
    size_t row;
    int open; /* 1: start, 0: end */
};

/* ---- choosing the two runs ---- */

/* length of p without trailing slashes (but "/" stays) */
static size_t trimmed_len(const char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    return n;
}

/* 1 when run dir lies at or under input */
static int run_under(const char *dir, const char *input)
{
    size_t n = trimmed_len(input), d = trimmed_len(dir);
    if (d < n || strncmp(dir, input, n) != 0)
        return 0;
    return d == n || dir[n] == '/';
}

/* the run of input j: the one run under it, or of several its one run that is not the
 * baseline; -1 when none, -2 when ambiguous */
static int run_of_input(const struct runset *rs, const char *input)
{
    int found = -1, count = 0, other = -1, nother = 0;
    for (int i = 0; i < rs->n; i++)
        if (run_under(rs->runs[i].dir, input)) {
            found = i;
            count++;
            if (!run_mode_is(&rs->runs[i], "baseline")) {
                other = i;
                nother++;
            }
        }
    if (count <= 1)
        return found;
    return nother == 1 ? other : -2;
}

int diff_pick(const struct runset *rs, const char *const *inputs, int n, int *a, int *b)
{
    if (n == 1) {
        if (rs->n != 2)
            return error_set("diff: %s holds %d run%s: give one directory holding two (a main "
                             "job's baseline/ and ddp/), or two runs: ddpprof diff A B",
                             inputs[0], rs->n, rs->n == 1 ? "" : "s");
        int base = analysis_baseline(rs);
        *a = base == 1 ? 1 : 0;
        *b = 1 - *a;
        return 0;
    }
    if (n != 2)
        return error_set("diff: %d inputs given: give two runs (ddpprof diff A B), or one "
                         "main-job directory (its baseline against its ddp run)", n);
    int r[2];
    for (int j = 0; j < 2; j++) {
        r[j] = run_of_input(rs, inputs[j]);
        if (r[j] == -2)
            return error_set("diff: %s holds several runs and not one DDP run beside a "
                             "baseline: give the run directory itself (e.g. %s/ddp)",
                             inputs[j], inputs[j]);
    }
    if ((r[0] < 0 || r[1] < 0) && rs->n == 2) { /* imports name their runs otherwise */
        r[0] = 0;
        r[1] = 1;
    }
    if (r[0] < 0 || r[1] < 0 || r[0] == r[1])
        return error_set("diff: %s and %s do not make two runs (%d read): give two different "
                         "runs, each a run directory or a directory of its trace files (trace "
                         "files given together form one run)",
                         inputs[0], inputs[1], rs->n);
    *a = r[0];
    *b = r[1];
    return 0;
}

/* ---- the sweep ---- */

static int ctx_init(struct ctx *c, const struct runset *rs, int a, int b)
{
    memset(c, 0, sizeof *c);
    c->rs = rs;
    c->nlabels = rs->labels.n;
    c->nnames = rs->names.n;
    c->cat = calloc((size_t)c->nlabels + 1, 1);
    c->held = malloc((size_t)c->nlabels + 1);
    if (!c->cat || !c->held)
        return error_set("diff: out of memory");
    memset(c->held, -1, (size_t)c->nlabels + 1);
    static const struct {
        enum trace_phase ph;
        enum cat cat;
    } own[] = {{TRACE_PHASE_STEP, C_STEP},           {TRACE_PHASE_FORWARD, C_FWD},
               {TRACE_PHASE_BACKWARD, C_BWD},        {TRACE_PHASE_OPTIMIZER, C_OPT},
               {TRACE_PHASE_DATA, C_DATA},           {TRACE_PHASE_ALLREDUCE, C_BUCKET}};
    for (size_t k = 0; k < sizeof own / sizeof own[0]; k++) {
        uint32_t id = strpool_find(&rs->labels, trace_phase_name(own[k].ph));
        if (id != STRPOOL_NONE)
            c->cat[id] = (unsigned char)own[k].cat;
    }
    for (int ph = 0; ph < TRACE_PHASE_COUNT; ph++) {
        uint32_t id = strpool_find(&rs->labels, trace_phase_name(ph));
        if (id != STRPOOL_NONE && ph != TRACE_PHASE_ALLREDUCE && trace_phase_collective(ph)) {
            c->cat[id] = C_HELD;
            c->held[id] = (signed char)ph;
        }
    }
    uint32_t id = strpool_find(&rs->labels, DIFF_LAYER_FORWARD);
    if (id != STRPOOL_NONE)
        c->cat[id] = C_LFWD;
    if ((id = strpool_find(&rs->labels, DIFF_LAYER_BACKWARD)) != STRPOOL_NONE)
        c->cat[id] = C_LBWD;
    c->range_kind = strpool_find(&rs->labels, trace_kind_name(TRACE_KIND_RANGE));
    c->a = a;
    c->b = b;
    int runs[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        const struct run *r = &rs->runs[runs[k]];
        for (int q = 0; q < r->nranks; q++)
            for (size_t i = 0; i < r->ranks[q].n; i++) {
                const struct run_row *row = &r->ranks[q].rows[i];
                if (c->cat[row->phase] == C_BUCKET && row->bucket >= c->nbk &&
                    row->bucket < 1000000)
                    c->nbk = row->bucket + 1;
            }
    }
    return 0;
}

static void ctx_free(struct ctx *c)
{
    free(c->cat);
    free(c->held);
}

static int side_init(struct side *s, const struct ctx *c)
{
    memset(s, 0, sizeof *s);
    size_t nn = (size_t)c->nnames + 1, nb = (size_t)c->nbk + 1;
    s->lf_part = calloc(nn, sizeof *s->lf_part);
    s->lf_time = calloc(nn, sizeof *s->lf_time);
    s->lb_part = calloc(nn, sizeof *s->lb_part);
    s->lb_time = calloc(nn, sizeof *s->lb_time);
    s->lf_seen = calloc(nn, 1);
    s->lb_seen = calloc(nn, 1);
    s->bk_part = calloc(nb, sizeof *s->bk_part);
    s->bk_time = calloc(nb, sizeof *s->bk_time);
    s->bk_seen = calloc(nb, 1);
    if (!s->lf_part || !s->lf_time || !s->lb_part || !s->lb_time || !s->lf_seen ||
        !s->lb_seen || !s->bk_part || !s->bk_time || !s->bk_seen)
        return error_set("diff: out of memory");
    return 0;
}

static void side_free(struct side *s)
{
    free(s->lf_part);
    free(s->lf_time);
    free(s->lb_part);
    free(s->lb_time);
    free(s->lf_seen);
    free(s->lb_seen);
    free(s->bk_part);
    free(s->bk_time);
    free(s->bk_seen);
}

/* Which rows count (report/FORMULAS.md "Which rows count"): ranges, on the device clock
 * where the rank has device rows of the phase, else the host clock; with a step >= 1.
 * Returns the selected rows sorted by step (stable: file order within a step) in *out. */
static int select_rows(const struct ctx *c, const struct rank_trace *t, struct srow **out,
                       size_t *n)
{
    char *dev = calloc((size_t)c->nlabels + 1, 1);
    struct srow *v = malloc((t->n + 1) * sizeof *v);
    if (!dev || !v) {
        free(dev);
        free(v);
        return error_set("diff: out of memory");
    }
    for (size_t i = 0; i < t->n; i++)
        if (t->rows[i].kind == c->range_kind && t->rows[i].clock == TRACE_CLOCK_DEVICE)
            dev[t->rows[i].phase] = 1;
    size_t m = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct run_row *r = &t->rows[i];
        if (r->kind != c->range_kind || r->step < 1 || c->cat[r->phase] == C_NONE)
            continue;
        if (r->clock == TRACE_CLOCK_DEVICE ||
            (r->clock == TRACE_CLOCK_HOST && !dev[r->phase]))
            v[m++] = (struct srow){r->step, i};
    }
    free(dev);
    if (sort_by_i64(v, m, sizeof *v, offsetof(struct srow, step)) < 0) {
        free(v);
        return error_wrap("diff: %s", t->path);
    }
    *out = v;
    *n = m;
    return 0;
}

static int cmp_ev(const void *x, const void *y)
{
    const struct ev *a = x, *b = y;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* the active layer row that started last (the innermost of nested ones) */
static size_t innermost(const struct ev *act, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (act[i].start >= act[best].start)
            best = i;
    return act[best].row;
}

static void drop_active(struct ev *act, size_t *n, size_t row)
{
    for (size_t i = 0; i < *n; i++)
        if (act[i].row == row) {
            act[i] = act[--*n];
            return;
        }
}

/* Sweep one step [S, E) of one rank: rows v[0..m) (selected, this step's).  Every instant
 * goes to one part: compute (forward, else backward, else optimizer, each less the
 * collectives the training thread waits in), else exposed communication (any collective),
 * else data, else other; forward and backward instants to their innermost layer row,
 * exposed ones to the lowest bucket running, else the held collective. */
static int sweep_step(const struct ctx *c, const struct rank_trace *t, const struct srow *v,
                      size_t m, int64_t S, int64_t E, struct side *s, int *bkc,
                      struct ev *ev, struct ev *lfa, struct ev *lba)
{
    size_t ne = 0;
    int heldc[TRACE_PHASE_COUNT] = {0};
    for (size_t i = 0; i < m; i++) {
        const struct run_row *r = &t->rows[v[i].row];
        enum cat k = (enum cat)c->cat[r->phase];
        int64_t d = r->end_ns - r->start_ns;
        switch (k) { /* each row's own time, unclipped (phases.csv's durations) */
        case C_FWD: s->time[P_FORWARD] += d; break;
        case C_BWD: s->time[P_BACKWARD] += d; break;
        case C_OPT: s->time[P_OPTIMIZER] += d; break;
        case C_DATA: s->time[P_DATA] += d; break;
        case C_BUCKET:
            if (r->bucket >= 0 && r->bucket < c->nbk) {
                s->bk_time[r->bucket] += d;
                s->bk_seen[r->bucket] = 1;
            }
            break;
        case C_HELD:
            s->cl_time[c->held[r->phase]] += d;
            s->cl_seen[c->held[r->phase]] = 1;
            break;
        case C_LFWD:
            s->lf_time[r->name] += d;
            s->lf_seen[r->name] = 1;
            break;
        case C_LBWD:
            s->lb_time[r->name] += d;
            s->lb_seen[r->name] = 1;
            break;
        default: break;
        }
        if (k == C_STEP || (k == C_BUCKET && (r->bucket < 0 || r->bucket >= c->nbk)))
            continue;
        int64_t a = r->start_ns > S ? r->start_ns : S, b = r->end_ns < E ? r->end_ns : E;
        if (b <= a)
            continue;
        ev[ne++] = (struct ev){a, a, v[i].row, 1};
        ev[ne++] = (struct ev){b, a, v[i].row, 0};
    }
    qsort(ev, ne, sizeof *ev, cmp_ev);
    int cf = 0, cb = 0, co = 0, cd = 0, nbk = 0, nheld = 0;
    size_t nlf = 0, nlb = 0;
    int64_t covered = 0;
    for (size_t i = 0; i < ne;) {
        int64_t pos = ev[i].pos;
        for (; i < ne && ev[i].pos == pos; i++) {
            const struct run_row *r = &t->rows[ev[i].row];
            int d = ev[i].open ? 1 : -1;
            switch ((enum cat)c->cat[r->phase]) {
            case C_FWD: cf += d; break;
            case C_BWD: cb += d; break;
            case C_OPT: co += d; break;
            case C_DATA: cd += d; break;
            case C_BUCKET:
                bkc[r->bucket] += d;
                nbk += d;
                break;
            case C_HELD:
                heldc[c->held[r->phase]] += d;
                nheld += d;
                break;
            case C_LFWD:
                if (d > 0)
                    lfa[nlf++] = ev[i];
                else
                    drop_active(lfa, &nlf, ev[i].row);
                break;
            case C_LBWD:
                if (d > 0)
                    lba[nlb++] = ev[i];
                else
                    drop_active(lba, &nlb, ev[i].row);
                break;
            default: break;
            }
        }
        if (i >= ne)
            break;
        int64_t len = ev[i].pos - pos;
        int compute = (cf > 0 || cb > 0 || co > 0) && nheld == 0;
        enum part p = compute && cf > 0   ? P_FORWARD
                      : compute && cb > 0 ? P_BACKWARD
                      : compute           ? P_OPTIMIZER
                      : nbk + nheld > 0   ? P_EXPOSED
                      : cd > 0            ? P_DATA
                                          : P_OTHER;
        if (p == P_OTHER)
            continue; /* other is the step less what is covered */
        s->part[p] += len;
        covered += len;
        if (nbk + nheld > 0)
            s->time[P_EXPOSED] += len; /* the comm union's time in the step */
        if (p == P_FORWARD && nlf > 0)
            s->lf_part[t->rows[innermost(lfa, nlf)].name] += len;
        else if (p == P_BACKWARD && nlb > 0)
            s->lb_part[t->rows[innermost(lba, nlb)].name] += len;
        else if (p == P_EXPOSED) {
            int done = 0;
            for (int k = 0; k < c->nbk && nbk > 0 && !done; k++)
                if (bkc[k] > 0) {
                    s->bk_part[k] += len;
                    done = 1;
                }
            for (int ph = 0; ph < TRACE_PHASE_COUNT && !done; ph++)
                if (heldc[ph] > 0) {
                    s->cl_part[ph] += len;
                    done = 1;
                }
        }
    }
    s->part[P_OTHER] += (E - S) - covered;
    s->step_ns += E - S;
    s->steps++;
    return 0;
}

/* a step row: (step, duration) on one rank, for the critical rank of each step */
struct steprow {
    int64_t step;
    int64_t dur, start, end;
    int rank_idx; /* index in run->ranks */
    size_t lo, hi; /* the rank's selected rows of this step: sel[rank_idx][lo..hi) */
};

/* Sum run r's counted steps (step > cutoff) on their critical rank into s. */
static int side_fill(const struct ctx *c, const struct run *r, int cutoff, struct side *s)
{
    int nr = r->nranks, rc = 0;
    struct srow **sel = calloc((size_t)nr + 1, sizeof *sel);
    size_t *nsel = calloc((size_t)nr + 1, sizeof *nsel);
    struct steprow *steps = NULL;
    size_t nsteps = 0, cap = 0, maxm = 0;
    if (!sel || !nsel)
        rc = error_set("diff: out of memory");
    int64_t *critn = calloc((size_t)nr + 1, sizeof *critn), *all = calloc((size_t)nr + 1,
                                                                          sizeof *all);
    if (!critn || !all)
        rc = error_set("diff: out of memory");
    for (int q = 0; q < nr && rc == 0; q++) {
        rc = select_rows(c, &r->ranks[q], &sel[q], &nsel[q]);
        for (size_t i = 0; i < nsel[q] && rc == 0; i++)
            all[q] += c->cat[r->ranks[q].rows[sel[q][i].row].phase] == C_STEP;
        for (size_t i = 0; i < nsel[q] && rc == 0;) { /* per step: its slice, its step row */
            size_t j = i;
            while (j < nsel[q] && sel[q][j].step == sel[q][i].step)
                j++;
            if (j - i > maxm)
                maxm = j - i;
            for (size_t k = i; k < j; k++) {
                const struct run_row *row = &r->ranks[q].rows[sel[q][k].row];
                if (c->cat[row->phase] != C_STEP || row->step <= cutoff)
                    continue;
                if (VEC_RESERVE(steps, cap, nsteps + 1)) {
                    rc = error_set("diff: out of memory");
                    break;
                }
                steps[nsteps++] = (struct steprow){row->step, row->end_ns - row->start_ns,
                                                   row->start_ns, row->end_ns, q, i, j};
                break; /* one step range per rank and step */
            }
            i = j;
        }
    }
    if (rc == 0 && sort_by_i64(steps, nsteps, sizeof *steps, offsetof(struct steprow, step)))
        rc = error_wrap("diff");
    int *bkc = calloc((size_t)c->nbk + 1, sizeof *bkc);
    struct ev *ev = malloc((2 * maxm + 1) * sizeof *ev);
    struct ev *lfa = malloc((2 * maxm + 1) * sizeof *lfa);
    struct ev *lba = malloc((2 * maxm + 1) * sizeof *lba);
    if (rc == 0 && (!bkc || !ev || !lfa || !lba))
        rc = error_set("diff: out of memory");
    for (size_t i = 0; i < nsteps && rc == 0;) {
        size_t j = i, crit = i; /* the critical rank: the longest step range (lowest rank) */
        for (; j < nsteps && steps[j].step == steps[i].step; j++)
            if (steps[j].dur > steps[crit].dur)
                crit = j;
        const struct steprow *p = &steps[crit];
        critn[p->rank_idx]++;
        memset(bkc, 0, ((size_t)c->nbk + 1) * sizeof *bkc);
        rc = sweep_step(c, &r->ranks[p->rank_idx], sel[p->rank_idx] + p->lo, p->hi - p->lo,
                        p->start, p->end, s, bkc, ev, lfa, lba);
        i = j;
    }
    for (int q = 0; rc == 0 && q < nr; q++)
        if (critn[q] > critn[s->crit])
            s->crit = q;
    if (rc == 0)
        s->crit_steps = all[s->crit];
    free(critn);
    free(all);
    free(bkc);
    free(ev);
    free(lfa);
    free(lba);
    for (int q = 0; sel && q < nr; q++)
        free(sel[q]);
    free(sel);
    free(nsel);
    free(steps);
    return rc;
}

/* ---- rounding: every group adds up to its parent as printed ---- */

/* out[i] = num[i] / den (den > 0) rounded to integers that add up to target: each floored,
 * then 1 added to the largest remainders (ties: the earlier row), as many as target asks
 * (taken from the smallest ones when it asks for fewer). */
static void round_to(const int64_t *num, int n, int64_t den, int64_t target, int64_t *out,
                     int64_t *rem)
{
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        int64_t q = num[i] / den, r = num[i] % den;
        if (r < 0) {
            q--;
            r += den;
        }
        out[i] = q;
        rem[i] = r;
        sum += q;
    }
    for (int64_t d = target - sum; d > 0 && n > 0; d--) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (rem[i] >= 0 && (best < 0 || rem[i] > rem[best]))
                best = i;
        if (best < 0)
            break;
        out[best]++;
        rem[best] = -1;
    }
    for (int64_t d = sum - target; d > 0 && n > 0; d--) { /* only when target is off */
        int best = -1;
        for (int i = 0; i < n; i++)
            if (best < 0 || out[i] > out[best])
                best = i;
        out[best]--;
    }
}

/* num / den rounded half away from zero (den > 0) */
static int64_t round_div(int64_t num, int64_t den)
{
    return num >= 0 ? (num + den / 2) / den : -((-num + den / 2) / den);
}

/* ---- the rows ---- */

struct rows {
    struct diff_row *v;
    size_t n, cap;
};

static struct diff_row *rows_add(struct rows *R, const char *level, const char *parent,
                             const char *name)
{
    if (VEC_RESERVE(R->v, R->cap, R->n + 1))
        return NULL;
    struct diff_row *d = &R->v[R->n];
    memset(d, 0, sizeof *d);
    d->level = level;
    d->parent = parent;
    if (!(d->name = strdup(name)))
        return NULL;
    R->n++;
    return d;
}

/* Round the group R->v[from..to) against its parent: means per step that add up to the
 * parent's, shares that add up to the parent's. */
static int group_round(struct rows *R, size_t from, size_t to, const struct diff_row *parent,
                       const struct side *A, const struct side *B, int64_t dstep_us)
{
    int n = (int)(to - from);
    if (n <= 0)
        return 0;
    int64_t *num = malloc((size_t)n * sizeof *num), *out = malloc((size_t)n * sizeof *out);
    int64_t *rem = malloc((size_t)n * sizeof *rem);
    if (!num || !out || !rem) {
        free(num);
        free(out);
        free(rem);
        return error_set("diff: out of memory");
    }
    for (int i = 0; i < n; i++)
        num[i] = R->v[from + i].a_ns;
    round_to(num, n, A->steps * 1000, parent->a_us, out, rem);
    for (int i = 0; i < n; i++) {
        R->v[from + i].a_us = out[i];
        num[i] = R->v[from + i].b_ns;
    }
    round_to(num, n, B->steps * 1000, parent->b_us, out, rem);
    for (int i = 0; i < n; i++)
        R->v[from + i].b_us = out[i];
    if (dstep_us != 0 && parent->has_share) {
        int64_t sign = dstep_us < 0 ? -1 : 1;
        for (int i = 0; i < n; i++)
            num[i] = sign * 10000 * (R->v[from + i].b_us - R->v[from + i].a_us);
        round_to(num, n, sign * dstep_us, parent->share_cp, out, rem);
        for (int i = 0; i < n; i++) {
            R->v[from + i].share_cp = out[i];
            R->v[from + i].has_share = 1;
        }
    }
    free(num);
    free(out);
    free(rem);
    return 0;
}

/* a finer group under parent: children's part sums from the two sides, a remainder "other"
 * (kept when not zero on either side, or always with keep_other) */
struct child_src {
    const char *name;
    int64_t a_part, b_part, a_time, b_time;
    int64_t order; /* layers: their place in the model (layer_order) */
};

/* Per name id, the layers' order: their place in forward order (meta.csv layer.K.name of
 * run A, then of run B), then the other names in the order they were read.  NULL when
 * out of memory. */
static int64_t *layer_order(const struct ctx *c)
{
    int64_t *order = malloc(((size_t)c->nnames + 1) * sizeof *order);
    if (!order)
        return NULL;
    for (uint32_t id = 0; id < c->nnames; id++)
        order[id] = INT32_MAX + (int64_t)id;
    int64_t pos = 0;
    const int runs[2] = {c->a, c->b};
    for (int k = 0; k < 2; k++) {
        const struct run *r = &c->rs->runs[runs[k]];
        const int n = r->meta.layers.s ? (int)r->meta.layers.i : 0;
        for (int i = 0; i < n && i < 100000; i++) {
            const char *name = meta_text_at(&r->meta.layer_name, i);
            uint32_t id = name ? strpool_find(&c->rs->names, name) : STRPOOL_NONE;
            if (id != STRPOOL_NONE && id < c->nnames && order[id] >= INT32_MAX)
                order[id] = pos++;
        }
    }
    return order;
}

static int add_group(struct rows *R, const char *level, size_t parent_idx,
                     const struct child_src *kids, size_t nkids, int keep_other,
                     const struct side *A, const struct side *B, int64_t dstep_us)
{
    if (nkids == 0)
        return 0;
    size_t from = R->n;
    int64_t sa = 0, sb = 0;
    for (size_t i = 0; i < nkids; i++) {
        struct diff_row *d = rows_add(R, level, R->v[parent_idx].name, kids[i].name);
        if (!d)
            return error_set("diff: out of memory");
        d->a_ns = kids[i].a_part;
        d->b_ns = kids[i].b_part;
        d->a_time_ns = kids[i].a_time;
        d->b_time_ns = kids[i].b_time;
        d->has_time = 1;
        sa += kids[i].a_part;
        sb += kids[i].b_part;
    }
    int64_t ra = R->v[parent_idx].a_ns - sa, rb = R->v[parent_idx].b_ns - sb;
    if (keep_other || ra != 0 || rb != 0) {
        struct diff_row *d = rows_add(R, level, R->v[parent_idx].name, "other");
        if (!d)
            return error_set("diff: out of memory");
        d->a_ns = ra;
        d->b_ns = rb;
    }
    struct diff_row parent = R->v[parent_idx]; /* a copy: R->v may move */
    return group_round(R, from, R->n, &parent, A, B, dstep_us);
}

/* one op or kernel name of the two runs' critical ranks */
struct op_pair {
    int64_t delta; /* |b - a| in ns per step x steps_a x steps_b (the order: largest first) */
    uint32_t name;
    int kind;
    int64_t a_ns, b_ns; /* per step, ns */
};

static int cmp_op_pair(const void *x, const void *y)
{
    const struct op_pair *a = x, *b = y;
    if (a->delta != b->delta)
        return (a->delta < b->delta) - (a->delta > b->delta);
    if (a->kind != b->kind)
        return (a->kind > b->kind) - (a->kind < b->kind);
    return (a->name > b->name) - (a->name < b->name);
}

/* The operators (self time) and kernels (total time) of imported traces, per step of the
 * critical rank's whole trace (report/input/ops.h's tables cover the trace): rows of level "op"
 * and "kernel", largest change first, outside the partition (no share). */
static int add_ops(struct rows *R, const struct ctx *c, const struct side *A,
                   const struct side *B)
{
    const struct op_table *t[2] = {c->rs->runs[c->a].ranks[A->crit].ops,
                                   c->rs->runs[c->b].ranks[B->crit].ops};
    const int64_t steps[2] = {A->crit_steps, B->crit_steps};
    size_t n = (t[0] ? t[0]->n : 0) + (t[1] ? t[1]->n : 0), m = 0;
    if (n == 0)
        return 0;
    struct op_pair *v = calloc(n, sizeof *v);
    size_t *at = malloc(2 * ((size_t)c->nnames + 1) * sizeof *at); /* (kind, name) -> v */
    if (!v || !at) {
        free(v);
        free(at);
        return error_set("diff: out of memory");
    }
    for (size_t i = 0; i < 2 * ((size_t)c->nnames + 1); i++)
        at[i] = SIZE_MAX;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; t[k] && steps[k] > 0 && i < t[k]->n; i++) {
            const struct op_stat *o = &t[k]->v[i];
            if (o->name >= c->nnames)
                continue;
            int64_t ns = (o->kind == OP_CPU ? o->self_ns : o->total_ns) / steps[k];
            size_t *slot = &at[(o->kind == OP_CPU ? 0 : (size_t)c->nnames + 1) + o->name];
            if (*slot == SIZE_MAX) {
                *slot = m;
                v[m++] = (struct op_pair){0, o->name, o->kind, 0, 0};
            }
            size_t j = *slot;
            if (k == 0)
                v[j].a_ns = ns;
            else
                v[j].b_ns = ns;
        }
    for (size_t j = 0; j < m; j++)
        v[j].delta = v[j].b_ns > v[j].a_ns ? v[j].b_ns - v[j].a_ns : v[j].a_ns - v[j].b_ns;
    qsort(v, m, sizeof *v, cmp_op_pair);
    int rc = 0;
    for (size_t j = 0; j < m && rc == 0; j++) {
        struct diff_row *d = rows_add(R, v[j].kind == OP_CPU ? "op" : "kernel", "",
                                  strpool_get(&c->rs->names, v[j].name));
        if (!d) {
            rc = error_set("diff: out of memory");
            break;
        }
        d->a_us = round_div(v[j].a_ns, 1000);
        d->b_us = round_div(v[j].b_ns, 1000);
    }
    free(v);
    free(at);
    return rc;
}

/* Build every row of the diff from the two sides. */
static int build_rows(const struct ctx *c, const struct side *A, const struct side *B,
                      struct rows *R)
{
    struct diff_row *st = rows_add(R, "step", "", "step");
    if (!st)
        return error_set("diff: out of memory");
    st->a_ns = A->step_ns;
    st->b_ns = B->step_ns;
    st->a_time_ns = A->step_ns;
    st->b_time_ns = B->step_ns;
    st->has_time = 1;
    st->a_us = round_div(A->step_ns, A->steps * 1000);
    st->b_us = round_div(B->step_ns, B->steps * 1000);
    int64_t dstep = st->b_us - st->a_us;
    if (dstep != 0) {
        st->share_cp = 10000;
        st->has_share = 1;
    }
    struct child_src kids[P_COUNT];
    for (int p = 0; p < P_COUNT; p++)
        kids[p] = (struct child_src){part_names[p], A->part[p], B->part[p],
                                     p == P_OTHER ? A->part[p] : A->time[p],
                                     p == P_OTHER ? B->part[p] : B->time[p], p};
    /* the phases: an exact partition of the step (no remainder) */
    size_t from = R->n;
    for (int p = 0; p < P_COUNT; p++) {
        struct diff_row *d = rows_add(R, "phase", "step", kids[p].name);
        if (!d)
            return error_set("diff: out of memory");
        d->a_ns = kids[p].a_part;
        d->b_ns = kids[p].b_part;
        d->a_time_ns = kids[p].a_time;
        d->b_time_ns = kids[p].b_time;
        d->has_time = 1;
    }
    struct diff_row step_copy = R->v[0];
    if (group_round(R, from, R->n, &step_copy, A, B, dstep) < 0)
        return -1;
    size_t idx[P_COUNT];
    for (int p = 0; p < P_COUNT; p++)
        idx[p] = from + (size_t)p;
    /* layers under forward and backward, in the order their names were first read */
    size_t nn = c->nnames, nk;
    struct child_src *lk = malloc((nn + (size_t)c->nbk + TRACE_PHASE_COUNT + 1) * sizeof *lk);
    if (!lk)
        return error_set("diff: out of memory");
    int64_t *order = layer_order(c);
    int rc = order ? 0 : error_set("diff: out of memory");
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        const int64_t *ap = pass ? A->lb_part : A->lf_part, *bp = pass ? B->lb_part : B->lf_part;
        const int64_t *at = pass ? A->lb_time : A->lf_time, *bt = pass ? B->lb_time : B->lf_time;
        const char *as = pass ? A->lb_seen : A->lf_seen, *bs = pass ? B->lb_seen : B->lf_seen;
        nk = 0;
        for (size_t id = 0; id < nn; id++)
            if (as[id] || bs[id])
                lk[nk++] = (struct child_src){strpool_get(&c->rs->names, (uint32_t)id), ap[id],
                                              bp[id], at[id], bt[id], order[id]};
        if (sort_by_i64(lk, nk, sizeof *lk, offsetof(struct child_src, order)) < 0)
            rc = error_wrap("diff");
        if (rc == 0)
            rc = add_group(R, "layer", idx[pass ? P_BACKWARD : P_FORWARD], lk, nk, 1, A, B, dstep);
    }
    /* the buckets and the held collectives under exposed communication */
    char (*bname)[32] = malloc(((size_t)c->nbk + 1) * sizeof *bname);
    if (rc == 0 && !bname)
        rc = error_set("diff: out of memory");
    nk = 0;
    for (int k = 0; k < c->nbk && rc == 0; k++)
        if (A->bk_seen[k] || B->bk_seen[k]) {
            snprintf(bname[k], sizeof bname[k], "b%d", k);
            lk[nk++] = (struct child_src){bname[k], A->bk_part[k], B->bk_part[k], A->bk_time[k],
                                          B->bk_time[k], k};
        }
    for (int ph = 0; ph < TRACE_PHASE_COUNT && rc == 0; ph++)
        if (A->cl_seen[ph] || B->cl_seen[ph])
            lk[nk++] = (struct child_src){trace_phase_name(ph), A->cl_part[ph], B->cl_part[ph],
                                          A->cl_time[ph], B->cl_time[ph], 0};
    if (rc == 0)
        rc = add_group(R, "comm", idx[P_EXPOSED], lk, nk, 0, A, B, dstep);
    if (rc == 0)
        rc = add_ops(R, c, A, B);
    free(bname);
    free(lk);
    free(order);
    return rc;
}

static void rows_free(struct rows *R)
{
    for (size_t i = 0; i < R->n; i++)
        free(R->v[i].name);
    free(R->v);
    memset(R, 0, sizeof *R);
}

static int64_t mag(const struct diff_row *d)
{
    int64_t v = d->has_share ? d->share_cp : d->b_us - d->a_us;
    return v < 0 ? -v : v;
}

static int top_is(const struct diff_row *d, enum diff_top w)
{
    int phase = strcmp(d->level, "phase") == 0;
    int ops = strcmp(d->level, "op") == 0 || strcmp(d->level, "kernel") == 0;
    if (w == DIFF_TOP_PHASES)
        return phase;
    if (d->b_us == d->a_us || strcmp(d->level, "step") == 0)
        return 0;
    return w == DIFF_TOP_OPS ? ops : !phase && !ops;
}

static int cmp_mag(const void *x, const void *y, void *rows)
{
    const struct rows *R = rows;
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    int64_t a = mag(&R->v[i]), b = mag(&R->v[j]);
    if (a != b)
        return (a < b) - (a > b);
    return (i > j) - (i < j);
}

/* the rows of R->v[lo..hi) that are `which`, largest first (ties: table order), at most
 * max of them into out; returns how many */
static size_t top_of(const struct rows *R, size_t lo, size_t hi, enum diff_top which,
                     size_t *out, size_t max)
{
    size_t *v = malloc((hi - lo + 1) * sizeof *v), n = 0;
    if (!v)
        return 0;
    for (size_t i = lo; i < hi; i++)
        if (top_is(&R->v[i], which))
            v[n++] = i;
    qsort_r(v, n, sizeof *v, cmp_mag, (void *)R);
    if (n > max)
        n = max;
    memcpy(out, v, n * sizeof *v);
    free(v);
    return n;
}

size_t diff_top(const struct diff_result *d, enum diff_top which, size_t *out, size_t max)
{
    const struct rows R = {d->rows, d->n, d->n};
    return d->n > 1 ? top_of(&R, 1, d->n, which, out, max) : 0;
}

int diff_compute(const struct runset *rs, const struct run_stat *st, int a, int b,
                 struct diff_result *out)
{
    memset(out, 0, sizeof *out);
    out->a = a;
    out->b = b;
    struct ctx c;
    struct side A, B;
    struct rows R = {0};
    memset(&A, 0, sizeof A);
    memset(&B, 0, sizeof B);
    int rc = ctx_init(&c, rs, a, b);
    if (rc == 0)
        rc = side_init(&A, &c);
    if (rc == 0)
        rc = side_init(&B, &c);
    const int idx[2] = {a, b};
    struct side *sides[2] = {&A, &B};
    for (int k = 0; k < 2 && rc == 0; k++) {
        const struct run *r = &rs->runs[idx[k]];
        const struct warmup_stat *w = &st[idx[k]].warmup;
        int cutoff = w->steps > 0 ? w->last_step : 0;
        rc = side_fill(&c, r, cutoff, sides[k]);
        if (rc == 0 && sides[k]->steps == 0)
            rc = error_set("diff: run %s (%s) has no step ranges%s: nothing to compare",
                           r->label, r->dir,
                           w->steps > 0 ? " after its warm-up (--warmup-steps 0 keeps them)" : "");
    }
    if (rc == 0)
        rc = build_rows(&c, &A, &B, &R);
    if (rc == 0) {
        for (size_t i = 0; i < R.n; i++)
            if (R.v[i].has_time) {
                R.v[i].a_time_us = round_div(R.v[i].a_time_ns, A.steps * 1000);
                R.v[i].b_time_us = round_div(R.v[i].b_time_ns, B.steps * 1000);
            }
        out->a_steps = A.steps;
        out->b_steps = B.steps;
        out->rows = R.v;
        out->n = R.n;
        R = (struct rows){0};
    }
    rows_free(&R);
    side_free(&A);
    side_free(&B);
    ctx_free(&c);
    return rc;
}

void diff_free(struct diff_result *d)
{
    struct rows R = {d->rows, d->n, d->n};
    rows_free(&R);
    d->rows = NULL;
    d->n = 0;
}
