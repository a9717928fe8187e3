/* diff_view.c — the diff (diff.h) as diff.csv, the terminal's short table and summary, and
 * the page's section (see diff_view.h). */
#include "report/output/diff_view.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

#define DIFF_TOP_FINER_ROWS 8 /* finer rows on the terminal */
#define DIFF_TOP_OPS_ROWS 6   /* imports' operators and kernels on the terminal */

enum diff_col { DF_RUN_A, DF_RUN_B, DF_LEVEL, DF_PARENT, DF_NAME, DF_A, DF_B, DF_DELTA,
                DF_DELTA_PCT, DF_SHARE, DF_A_TIME, DF_B_TIME, DF_TIME_DELTA, DF_A_STEPS,
                DF_B_STEPS, DF_NCOLS };
static const struct table_col diff_cols[DF_NCOLS] = {
    [DF_RUN_A] = {"run_a", "A", "", 1},
    [DF_RUN_B] = {"run_b", "B", "", 1},
    [DF_LEVEL] = {"level", "level", "", 1},
    [DF_PARENT] = {"parent", "parent", "", 1},
    [DF_NAME] = {"name", "name", "", 1},
    [DF_A] = {"a_ms", "A", "ms", 0},
    [DF_B] = {"b_ms", "B", "ms", 0},
    [DF_DELTA] = {"delta_ms", "delta", "ms", 0},
    [DF_DELTA_PCT] = {"delta_pct", "delta", "%", 0},
    [DF_SHARE] = {"share_pct", "share of change", "%", 0},
    [DF_A_TIME] = {"a_time_ms", "A time", "ms", 0},
    [DF_B_TIME] = {"b_time_ms", "B time", "ms", 0},
    [DF_TIME_DELTA] = {"time_delta_ms", "time delta", "ms", 0},
    [DF_A_STEPS] = {"a_steps", "A steps", "", 0},
    [DF_B_STEPS] = {"b_steps", "B steps", "", 0}};

enum top_col { TP_LEVEL, TP_NAME, TP_A, TP_B, TP_DELTA, TP_DELTA_PCT, TP_SHARE, TP_NCOLS };
static const struct table_col top_cols[TP_NCOLS] = {
    [TP_LEVEL] = {"level", "level", "", 1},
    [TP_NAME] = {"name", "name", "", 1},
    [TP_A] = {"a_ms", "A", "ms/step", 0},
    [TP_B] = {"b_ms", "B", "ms/step", 0},
    [TP_DELTA] = {"delta_ms", "delta", "ms", 0},
    [TP_DELTA_PCT] = {"delta_pct", "delta", "%", 0},
    [TP_SHARE] = {"share_pct", "share of change", "%", 0}};

/* "-1.234" from -1234 thousandths (or hundredths with places 2) */
static void fmt_fixed(char *buf, size_t cap, int64_t v, int places)
{
    int64_t div = places == 3 ? 1000 : 100;
    uint64_t a = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    snprintf(buf, cap, "%s%llu.%0*llu", v < 0 ? "-" : "", (unsigned long long)(a / (uint64_t)div),
             places, (unsigned long long)(a % (uint64_t)div));
}

static void set_fixed(struct table *t, int col, int64_t v, int places)
{
    char buf[48];
    fmt_fixed(buf, sizeof buf, v, places);
    table_set(t, col, "%s", buf);
}

static void fill_full(struct table *t, const struct diff_result *d_res, const char *la,
                      const char *lb)
{
    for (size_t i = 0; i < d_res->n; i++) {
        const struct diff_row *d = &d_res->rows[i];
        table_add_row(t);
        table_set(t, DF_RUN_A, "%s", la);
        table_set(t, DF_RUN_B, "%s", lb);
        table_set(t, DF_LEVEL, "%s", d->level);
        table_set(t, DF_PARENT, "%s", d->parent);
        table_set(t, DF_NAME, "%s", d->name);
        set_fixed(t, DF_A, d->a_us, 3);
        set_fixed(t, DF_B, d->b_us, 3);
        set_fixed(t, DF_DELTA, d->b_us - d->a_us, 3);
        if (d->a_us != 0)
            table_set(t, DF_DELTA_PCT, "%.1f",
                      100.0 * (double)(d->b_us - d->a_us) / (double)d->a_us);
        if (d->has_share)
            set_fixed(t, DF_SHARE, d->share_cp, 2);
        if (d->has_time) {
            set_fixed(t, DF_A_TIME, d->a_time_us, 3);
            set_fixed(t, DF_B_TIME, d->b_time_us, 3);
            set_fixed(t, DF_TIME_DELTA, d->b_time_us - d->a_time_us, 3);
        }
        if (i == 0) {
            table_set(t, DF_A_STEPS, "%lld", (long long)d_res->a_steps);
            table_set(t, DF_B_STEPS, "%lld", (long long)d_res->b_steps);
        }
    }
}

static void top_row(struct table *t, const struct diff_row *d)
{
    table_add_row(t);
    table_set(t, TP_LEVEL, "%s", d->level);
    if (strcmp(d->level, "step") == 0 || strcmp(d->level, "phase") == 0 || !*d->parent)
        table_set(t, TP_NAME, "%s", d->name);
    else
        table_set(t, TP_NAME, "%s/%s", d->parent, d->name);
    set_fixed(t, TP_A, d->a_us, 3);
    set_fixed(t, TP_B, d->b_us, 3);
    set_fixed(t, TP_DELTA, d->b_us - d->a_us, 3);
    if (d->a_us != 0)
        table_set(t, TP_DELTA_PCT, "%.1f", 100.0 * (double)(d->b_us - d->a_us) / (double)d->a_us);
    if (d->has_share)
        set_fixed(t, TP_SHARE, d->share_cp, 2);
}

static char *make_summary(const struct diff_result *R, const char *la, const char *lb)
{
    const struct diff_row *s = &R->rows[0];
    char a[32], b[32], d[32], part[512] = "";
    fmt_fixed(a, sizeof a, s->a_us, 3);
    fmt_fixed(b, sizeof b, s->b_us, 3);
    fmt_fixed(d, sizeof d, s->b_us - s->a_us, 3);
    size_t idx[3], n = diff_top(R, DIFF_TOP_PHASES, idx, 3), len = 0;
    for (size_t k = 0; k < n && s->has_share; k++) {
        char sh[32];
        fmt_fixed(sh, sizeof sh, R->rows[idx[k]].share_cp, 2);
        len += (size_t)snprintf(part + len, sizeof part - len, "%s%s %s%s %%", k ? ", " : "",
                                R->rows[idx[k]].name, R->rows[idx[k]].share_cp > 0 ? "+" : "", sh);
        if (len >= sizeof part)
            break;
    }
    char pct[48] = "";
    if (s->a_us != 0)
        snprintf(pct, sizeof pct, ", %+.1f %%", 100.0 * (double)(s->b_us - s->a_us) / (double)s->a_us);
    char *out = NULL;
    if (asprintf(&out, "%s -> %s: step %s -> %s ms (%s%s ms%s)%s%s", la, lb, a, b,
                 s->b_us >= s->a_us ? "+" : "", d, pct,
                 s->has_share ? "; shares of the change: " : "; no change in step time",
                 s->has_share ? part : "") < 0)
        out = NULL;
    return out;
}

int diff_view_make(struct diff_view *v, const struct diff_result *d, const struct runset *rs)
{
    memset(v, 0, sizeof *v);
    table_init(&v->full, "diff: the change in time per step, and each row's share of the "
                         "step-time change", "diff.csv", diff_cols, DF_NCOLS);
    table_init(&v->top, "diff: where the step-time change comes from (A -> B, ms per step on "
                        "the critical rank; all rows in diff.csv)",
               "diff.csv", top_cols, TP_NCOLS);
    const char *la = rs->runs[d->a].label, *lb = rs->runs[d->b].label;
    fill_full(&v->full, d, la, lb);
    top_row(&v->top, &d->rows[0]);
    size_t pick[DIFF_PARTS + DIFF_TOP_FINER_ROWS];
    static const struct {
        enum diff_top which;
        size_t max;
    } parts[] = {{DIFF_TOP_PHASES, DIFF_PARTS},
                 {DIFF_TOP_FINER, DIFF_TOP_FINER_ROWS},
                 {DIFF_TOP_OPS, DIFF_TOP_OPS_ROWS}};
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
        size_t n = diff_top(d, parts[p].which, pick, parts[p].max);
        for (size_t k = 0; k < n; k++)
            top_row(&v->top, &d->rows[pick[k]]);
    }
    int rc = 0;
    if (!(v->summary = make_summary(d, la, lb)))
        rc = error_set("diff: out of memory");
    if (v->full.failed || v->top.failed)
        rc = error_set("diff: out of memory");
    return rc;
}

void diff_view_free(struct diff_view *v)
{
    table_free(&v->full);
    table_free(&v->top);
    free(v->summary);
    v->summary = NULL;
}

/* the phases' shares as horizontal bars around a zero line */
static void diff_bars(FILE *f, const struct table *t)
{
    int share = -1, level = -1, name = -1, delta = -1;
    for (int c = 0; c < t->ncols; c++) {
        if (strcmp(t->cols[c].csv, "share_pct") == 0)
            share = c;
        if (strcmp(t->cols[c].csv, "delta_ms") == 0)
            delta = c;
        if (strcmp(t->cols[c].csv, "level") == 0)
            level = c;
        if (strcmp(t->cols[c].csv, "name") == 0)
            name = c;
    }
    double v[DIFF_PARTS], dv[DIFF_PARTS], lo = 0, hi = 0;
    const char *nm[DIFF_PARTS];
    int n = 0;
    for (size_t r = 0; r < t->nrows && n < DIFF_PARTS; r++) {
        if (strcmp(table_get(t, r, level), "phase") != 0 || !*table_get(t, r, share))
            continue;
        v[n] = atof(table_get(t, r, share));
        dv[n] = atof(table_get(t, r, delta));
        nm[n] = table_get(t, r, name);
        lo = v[n] < lo ? v[n] : lo;
        hi = v[n] > hi ? v[n] : hi;
        n++;
    }
    if (n == 0 || hi - lo <= 0)
        return;
    const int W = 640, left = 120, bar = 18, H = n * (bar + 6) + 24, plot = W - left - 70;
    double scale = plot / (hi - lo);
    int zero = left + (int)(-lo * scale);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    for (int i = 0; i < n; i++) {
        int y = 4 + i * (bar + 6);
        double x0 = v[i] < 0 ? zero + v[i] * scale : zero, w = (v[i] < 0 ? -v[i] : v[i]) * scale;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 6, y + 13);
        html_escape(f, nm[i]);
        fprintf(f, "</text><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>"
                   "<text x=\"%.1f\" y=\"%d\">%+.2f %%</text>\n",
                x0, y, w, bar, dv[i] < 0 ? "#4c9f70" : "#d1603d", x0 + w + 4, y + 13, v[i]);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"0\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n</svg>\n", zero,
            zero, H - 20);
}

void diff_write_html(FILE *f, const void *diff_view)
{
    const struct diff_view *d = diff_view;
    fputs("<h2>Diff: where the step-time change comes from</h2>\n<p class=\"note\">", f);
    html_escape(f, d->summary ? d->summary : "");
    fputs("</p>\n<p class=\"note\">Each row's share of the change in the mean step (critical "
          "rank): the phases add up to 100 %, the layers of forward and backward and the "
          "buckets of exposed communication to their parent's share (report/FORMULAS.md "
          "\"diff.csv\"). Red: the row is slower in B, green: faster.</p>\n",
          f);
    diff_bars(f, &d->full);
    table_write_html(&d->full, f, 400);
}
