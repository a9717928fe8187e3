/* report.c — report_run (see report.h): read the runs, analyse them, then write and print
 * the tables, the timeline and the charts. */
#include "report/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report/analysis.h"
#include "report/charts.h"
#include "common/error.h"
#include "report/run.h"
#include "report/table.h"
#include "report/timeline.h"

#define TERMINAL_MAX_ROWS 200
#define STRAGGLERS_SHOWN 10

static const struct table_col phases_cols[] = {
    {"run", "run", "", 1},          {"rank", "rank", "", 0},       {"phase", "phase", "", 1},
    {"count", "count", "", 0},      {"total_ms", "total", "ms", 0}, {"mean_ms", "mean", "ms", 0},
    {"p50_ms", "p50", "ms", 0},     {"p95_ms", "p95", "ms", 0},     {"max_ms", "max", "ms", 0},
    {"pct_of_step", "of step", "%", 0}};

static const struct table_col buckets_cols[] = {
    {"run", "run", "", 1},           {"world_size", "ranks", "", 0},
    {"bucket", "bucket", "", 0},     {"params", "params", "", 0},
    {"bytes", "size", "B", 0},       {"count", "calls", "", 0},
    {"mean_ms", "time", "ms", 0},    {"algbw_GBps", "algbw", "GB/s", 0},
    {"busbw_GBps", "busbw", "GB/s", 0}, {"pct_hidden", "hidden", "%", 0}};

static const struct table_col overlap_cols[] = {
    {"run", "run", "", 1},          {"rank", "rank", "", 0},
    {"step_ms", "step", "ms", 0},   {"compute_ms", "compute", "ms", 0},
    {"comm_ms", "comm", "ms", 0},   {"exposed_comm_ms", "exposed comm", "ms", 0},
    {"overlap_pct", "overlap", "%", 0}, {"idle_ms", "idle", "ms", 0}};

static const struct table_col stragglers_cols[] = {
    {"run", "run", "", 1},          {"step", "step", "", 0},
    {"ranks", "ranks", "", 0},      {"slowest_rank", "slowest", "rank", 0},
    {"max_compute_ms", "max compute", "ms", 0}, {"min_compute_ms", "min compute", "ms", 0},
    {"skew_ms", "skew", "ms", 0},   {"wait_ms", "wait", "ms", 0}};

static const struct table_col speedup_cols[] = {
    {"run", "run", "", 1},          {"mode", "mode", "", 1},
    {"device", "device", "", 1},    {"world_size", "ranks", "", 0},
    {"amp", "amp", "", 1},          {"epochs", "epochs", "", 0},
    {"images", "images", "", 0},    {"wall_s", "wall", "s", 0},
    {"train_s", "train", "s", 0},   {"images_per_s", "throughput", "img/s", 0},
    {"speedup", "speedup", "x", 0}, {"efficiency", "efficiency", "", 0},
    {"final_accuracy", "accuracy", "", 0}};

#define NCOLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static double ms(int64_t ns)
{
    return (double)ns * 1e-6;
}

static const char *meta_or_empty(const struct run *r, const char *key)
{
    const char *v = run_meta(r, key);
    return v ? v : "";
}

static void report_phases(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < st[i].nranks; k++) {
            const struct rank_stat *r = &st[i].ranks[k];
            for (int p = 0; p < r->nphases; p++) {
                const struct phase_stat *ps = &r->phases[p];
                double pct;
                table_add_row(t);
                table_set(t, 0, "%s", rs->runs[i].label);
                table_set(t, 1, "%d", r->rank);
                table_set(t, 2, "%s", strpool_get(&rs->labels, ps->phase));
                table_set(t, 3, "%zu", ps->count);
                table_set(t, 4, "%.3f", ms(ps->total_ns));
                table_set(t, 5, "%.3f", ps->mean_ns * 1e-6);
                table_set(t, 6, "%.3f", ms(ps->p50_ns));
                table_set(t, 7, "%.3f", ms(ps->p95_ns));
                table_set(t, 8, "%.3f", ms(ps->max_ns));
                if (analysis_pct_of_step(r, ps, &pct))
                    table_set(t, 9, "%.2f", pct);
            }
        }
}

static void report_buckets(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++) {
        int n = rs->runs[i].world_size;
        for (size_t b = 0; b < st[i].nbuckets; b++) {
            const struct bucket_stat *bs = &st[i].buckets[b];
            double algbw, pct;
            table_add_row(t);
            table_set(t, 0, "%s", rs->runs[i].label);
            table_set(t, 1, "%d", n);
            table_set(t, 2, "%d", bs->bucket);
            if (bs->params >= 0)
                table_set(t, 3, "%lld", (long long)bs->params);
            table_set(t, 4, "%lld", (long long)bs->bytes);
            table_set(t, 5, "%zu", bs->count);
            table_set(t, 6, "%.3f", analysis_mean_ns(bs->total_ns, bs->count) * 1e-6);
            if (analysis_algbw(bs, &algbw)) {
                table_set(t, 7, "%.3f", algbw);
                table_set(t, 8, "%.3f", analysis_busbw(algbw, n));
            }
            if (analysis_pct_hidden(bs, &pct))
                table_set(t, 9, "%.2f", pct);
        }
    }
}

static void report_overlap(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < st[i].nranks; k++) {
            const struct rank_stat *r = &st[i].ranks[k];
            double pct;
            table_add_row(t);
            table_set(t, 0, "%s", rs->runs[i].label);
            table_set(t, 1, "%d", r->rank);
            table_set(t, 2, "%.3f", ms(r->step_union_ns));
            table_set(t, 3, "%.3f", ms(r->compute_ns));
            table_set(t, 4, "%.3f", ms(r->comm_ns));
            table_set(t, 5, "%.3f", ms(r->exposed_ns));
            if (analysis_overlap_pct(r, &pct))
                table_set(t, 6, "%.2f", pct);
            table_set(t, 7, "%.3f", ms(r->idle_ns));
        }
}

static void report_straggler_row(struct table *t, const char *label, const struct step_stat *s)
{
    table_add_row(t);
    table_set(t, 0, "%s", label);
    table_set(t, 1, "%d", s->step);
    table_set(t, 2, "%d", s->ranks);
    table_set(t, 3, "%d", s->slowest_rank);
    table_set(t, 4, "%.3f", ms(s->max_compute_ns));
    table_set(t, 5, "%.3f", ms(s->min_compute_ns));
    table_set(t, 6, "%.3f", ms(s->skew_ns));
    table_set(t, 7, "%.3f", ms(s->wait_ns));
}

static void report_stragglers(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++)
        for (size_t s = 0; s < st[i].nsteps; s++)
            report_straggler_row(t, rs->runs[i].label, &st[i].steps[s]);
}

struct worst {
    const struct step_stat *s;
    const char *label;
};

static int cmp_worst(const void *a, const void *b)
{
    const struct worst *x = a, *y = b;
    if (x->s->wait_ns != y->s->wait_ns)
        return (x->s->wait_ns < y->s->wait_ns) - (x->s->wait_ns > y->s->wait_ns);
    return (x->s->step > y->s->step) - (x->s->step < y->s->step);
}

/* The steps with the most waiting, for the terminal and the page. */
static int report_stragglers_worst(const struct runset *rs, const struct run_stat *st,
                                   struct table *t)
{
    size_t n = 0;
    for (int i = 0; i < rs->n; i++)
        n += st[i].nsteps;
    struct worst *w = malloc((n + 1) * sizeof *w);
    if (!w)
        return error_set("report: out of memory sorting %zu steps", n);
    n = 0;
    for (int i = 0; i < rs->n; i++)
        for (size_t s = 0; s < st[i].nsteps; s++)
            w[n++] = (struct worst){&st[i].steps[s], rs->runs[i].label};
    qsort(w, n, sizeof *w, cmp_worst);
    for (size_t k = 0; k < n && k < STRAGGLERS_SHOWN; k++)
        report_straggler_row(t, w[k].label, w[k].s);
    free(w);
    return 0;
}

static void report_speedup(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++) {
        const struct run *r = &rs->runs[i];
        const struct run_stat *s = &st[i];
        table_add_row(t);
        table_set(t, 0, "%s", r->label);
        table_set(t, 1, "%s", meta_or_empty(r, "mode"));
        table_set(t, 2, "%s", meta_or_empty(r, "device"));
        table_set(t, 3, "%d", r->world_size);
        table_set(t, 4, "%s", meta_or_empty(r, "amp"));
        table_set(t, 5, "%s", meta_or_empty(r, "epochs"));
        if (s->has_images)
            table_set(t, 6, "%lld", (long long)s->images);
        if (s->has_wall)
            table_set(t, 7, "%.3f", s->wall_s);
        if (s->has_train)
            table_set(t, 8, "%.3f", s->train_s);
        if (s->has_ips)
            table_set(t, 9, "%.1f", s->images_per_s);
        if (s->has_speedup) {
            table_set(t, 10, "%.3f", s->speedup);
            table_set(t, 11, "%.3f", s->efficiency);
        }
        table_set(t, 12, "%s", meta_or_empty(r, "final_accuracy"));
    }
}

/* mkdir -p */
static int report_mkdirs(const char *dir)
{
    char *p = strdup(dir);
    if (!p)
        return error_set("report: out of memory");
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                error_set("%s: cannot create the output directory (%s)", p, strerror(errno));
                free(p);
                return -1;
            }
            *s = c;
            if (c == '\0')
                break;
        }
    }
    free(p);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return error_set("%s: not a directory: choose another --out", dir);
    return 0;
}

int report_run(const char *const *run_dirs, int n, const char *out_dir, FILE *terminal)
{
    if (n < 1 || !run_dirs)
        return error_set("report: no run directory given (ddpprof report RUN_DIR... [--out DIR])");
    struct runset rs;
    runset_init(&rs);
    struct run_stat *st = NULL;
    enum { T_PHASES, T_OVERLAP, T_BUCKETS, T_STRAGGLERS, T_SPEEDUP, T_WORST, T_COUNT };
    struct table t[T_COUNT];
    table_init(&t[T_PHASES], "phases: time per phase, per run and rank", "phases.csv",
               phases_cols, NCOLS(phases_cols));
    table_init(&t[T_OVERLAP], "overlap: compute, communication and idle time per rank",
               "overlap.csv", overlap_cols, NCOLS(overlap_cols));
    table_init(&t[T_BUCKETS], "buckets: all-reduce per gradient bucket", "buckets.csv",
               buckets_cols, NCOLS(buckets_cols));
    table_init(&t[T_STRAGGLERS], "stragglers: per step", "stragglers.csv", stragglers_cols,
               NCOLS(stragglers_cols));
    table_init(&t[T_SPEEDUP], "speedup: per run, against the baseline", "speedup.csv",
               speedup_cols, NCOLS(speedup_cols));
    table_init(&t[T_WORST], "stragglers: the steps where ranks waited longest",
               "stragglers.csv", stragglers_cols, NCOLS(stragglers_cols));
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = runset_add_dir(&rs, run_dirs[i]);
    if (rc == 0)
        rc = runset_finish(&rs);
    const char *out = out_dir ? out_dir : rs.default_out;
    if (rc == 0)
        rc = report_mkdirs(out);
    if (rc == 0 && !(st = analysis_run(&rs)))
        rc = -1;
    if (rc == 0) {
        report_phases(&rs, st, &t[T_PHASES]);
        report_overlap(&rs, st, &t[T_OVERLAP]);
        report_buckets(&rs, st, &t[T_BUCKETS]);
        report_stragglers(&rs, st, &t[T_STRAGGLERS]);
        report_speedup(&rs, st, &t[T_SPEEDUP]);
        rc = report_stragglers_worst(&rs, st, &t[T_WORST]);
    }
    for (int k = 0; k < T_WORST && rc == 0; k++)
        rc = table_write_csv(&t[k], out);
    if (rc == 0) {
        char *path = NULL;
        if (asprintf(&path, "%s/timeline.json", out) < 0)
            rc = error_set("report: out of memory");
        else
            rc = timeline_write(&rs, path);
        free(path);
    }
    if (rc == 0) {
        const struct table *shown[] = {&t[T_SPEEDUP], &t[T_OVERLAP], &t[T_PHASES], &t[T_BUCKETS],
                                       &t[T_WORST]};
        rc = charts_write(&rs, st, shown, NCOLS(shown), out);
    }
    if (rc == 0 && terminal) {
        table_print(&t[T_PHASES], terminal, TERMINAL_MAX_ROWS);
        table_print(&t[T_OVERLAP], terminal, TERMINAL_MAX_ROWS);
        table_print(&t[T_BUCKETS], terminal, TERMINAL_MAX_ROWS);
        if (t[T_STRAGGLERS].nrows > 0) {
            table_print(&t[T_WORST], terminal, STRAGGLERS_SHOWN);
            fprintf(terminal, "#  (%zu step(s) in all, in stragglers.csv)\n",
                    t[T_STRAGGLERS].nrows);
        }
        table_print(&t[T_SPEEDUP], terminal, TERMINAL_MAX_ROWS);
        fprintf(terminal,
                "#\n# report in %s: phases.csv overlap.csv buckets.csv stragglers.csv "
                "speedup.csv timeline.json report.html phases.svg speedup.svg\n",
                out);
        fflush(terminal);
    }
    for (int k = 0; k < T_COUNT; k++)
        table_free(&t[k]);
    analysis_free(st, rs.n);
    runset_free(&rs);
    return rc;
}
