/* charts.c — SVG charts and the self-contained HTML page (see charts.h).  Plain SVG 1.1
 * drawn by hand: rectangles, lines and text, system sans-serif fonts, <title> tooltips. */
#include "report/output/charts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "report/output/advice_view.h"
#include "report/output/layers_view.h"
#include "report/output/outfile.h"
#include "report/output/stepview.h"
#include "report/output/svg.h"

#define CHART_W 1000
#define LABEL_W 190
#define PLOT_W 600
#define ROW_H 26
#define BAR_H 18

static double ms(int64_t ns)
{
    return (double)ns * 1e-6;
}

/* Grid lines and tick labels for values lo..hi across the plot (both multiples of tick). */
static void chart_axis(FILE *f, double top, double bottom, double lo, double hi, double tick,
                       const char *unit)
{
    for (int k = 0; lo + k * tick <= hi + tick * 1e-6; k++) {
        double v = lo + k * tick, x = LABEL_W + PLOT_W * (v - lo) / (hi - lo);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\">%g</text>\n",
                x, top, x, bottom, x, bottom + 14, v);
    }
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"tick\">%s</text>\n", LABEL_W + PLOT_W / 2,
            bottom + 30, unit);
}

static void chart_open(FILE *f, int height, const char *title)
{
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
            "font-size=\"12\">\n"
            "<style>.grid{stroke:#e4e4e4;stroke-width:1}.tick{fill:#555;text-anchor:middle;"
            "font-size:11px}.lab{fill:#222;text-anchor:end}.val{fill:#222}"
            ".ttl{font-size:14px;font-weight:bold;fill:#222}</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
            "<text x=\"10\" y=\"20\" class=\"ttl\">",
            CHART_W, height, CHART_W, height);
    html_escape(f, title);
    fputs("</text>\n", f);
}

static void chart_empty(FILE *f, const char *title, const char *why)
{
    chart_open(f, 60, title);
    fputs("<text x=\"10\" y=\"45\" class=\"val\">", f);
    html_escape(f, why);
    fputs("</text>\n</svg>\n", f);
}

static void chart_label(FILE *f, double y, const char *run, int rank)
{
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"lab\">", LABEL_W - 8, y);
    html_escape(f, run);
    if (rank >= 0)
        fprintf(f, " rank %d", rank);
    fputs("</text>\n", f);
}

/* Stacked bars: mean time per step of each segment, one bar per run and rank. */
static void chart_phases(FILE *f, const struct runset *rs, const struct run_stat *st)
{
    const char *title = "Phase breakdown: mean time per step, per run and rank";
    int bars = 0;
    double max = 0;
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < st[i].nranks; k++)
            if (st[i].ranks[k].nsteps > 0) {
                const struct rank_stat *r = &st[i].ranks[k];
                double sum = 0;
                for (int s = 0; s < SEG_COUNT; s++)
                    sum += analysis_seg_ms_per_step(r, (enum seg)s);
                if (sum > max)
                    max = sum;
                bars++;
            }
    if (bars == 0 || !(max > 0)) {
        chart_empty(f, title, "no step ranges in the traces");
        return;
    }
    double tick = chart_tick(max);
    max = ceil(max / tick) * tick;
    int top = 58, bottom = top + bars * ROW_H;
    chart_open(f, bottom + 44, title);
    for (int s = 0; s < SEG_COUNT; s++) { /* legend */
        int x = 10 + s * 125;
        fprintf(f, "<rect x=\"%d\" y=\"32\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"42\" class=\"val\">%s</text>\n",
                x, seg_colors[s], x + 16, seg_names[s]);
    }
    chart_axis(f, top - 4, bottom, 0, max, tick, "ms per step");
    int row = 0;
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < st[i].nranks; k++) {
            const struct rank_stat *r = &st[i].ranks[k];
            if (r->nsteps == 0)
                continue;
            double y = top + row++ * ROW_H, x = LABEL_W, total = 0;
            chart_label(f, y + BAR_H - 4, rs->runs[i].label, r->rank);
            for (int s = 0; s < SEG_COUNT; s++) {
                double v = analysis_seg_ms_per_step(r, (enum seg)s), w = PLOT_W * v / max;
                total += v;
                if (v <= 0)
                    continue;
                fprintf(f,
                        "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                        "<title>%s: %.3f ms per step</title></rect>\n",
                        x, y, w, BAR_H, seg_colors[s], seg_names[s], v);
                x += w;
            }
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"val\">%.3f ms</text>\n", x + 6,
                    y + BAR_H - 4, total);
        }
    fputs("</svg>\n", f);
}

/* Box plot of step times: whiskers p5..p95, box p25..p75, median, dots at min and max. */
static void chart_steps(FILE *f, const struct runset *rs, const struct run_stat *st)
{
    const char *title = "Step time distribution (box p25-p75, line p50, whiskers p5-p95, "
                        "dots min and max)";
    int rows = 0;
    double max = 0, min = INFINITY;
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < st[i].nranks; k++) {
            const struct rank_stat *r = &st[i].ranks[k];
            if (r->nsteps == 0)
                continue;
            rows++;
            double p95 = ms(analysis_percentile(r->step_ns, r->nsteps, 95));
            if (p95 > max)
                max = p95;
            if (ms(r->step_ns[0]) < min)
                min = ms(r->step_ns[0]);
        }
    if (rows == 0 || !(max > 0)) {
        chart_empty(f, title, "no step ranges in the traces");
        return;
    }
    /* the axis spans the fastest step to a quarter beyond the slowest p95 (a slower max is
     * drawn at the right edge in red, its value in the label) */
    double tick = chart_tick(max * 1.25 - min * 0.8);
    double lo = floor(min * 0.8 / tick) * tick, hi = ceil(max * 1.25 / tick) * tick;
    int top = 40, bottom = top + rows * ROW_H;
    chart_open(f, bottom + 44, title);
    chart_axis(f, top - 4, bottom, lo, hi, tick, "ms per step");
    int row = 0;
#define X(v) (LABEL_W + PLOT_W * (((v) > hi ? hi : (v)) - lo) / (hi - lo))
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < st[i].nranks; k++) {
            const struct rank_stat *r = &st[i].ranks[k];
            if (r->nsteps == 0)
                continue;
            double y = top + row++ * ROW_H, mid = y + BAR_H / 2.0;
            double q[7];
            static const int pct[7] = {0, 5, 25, 50, 75, 95, 100};
            for (int j = 0; j < 7; j++)
                q[j] = pct[j] == 0 ? ms(r->step_ns[0])
                                   : ms(analysis_percentile(r->step_ns, r->nsteps, pct[j]));
            chart_label(f, y + BAR_H - 4, rs->runs[i].label, r->rank);
            fprintf(f, "<g><title>%zu steps: min %.3f, p5 %.3f, p25 %.3f, p50 %.3f, p75 %.3f, "
                       "p95 %.3f, max %.3f ms</title>\n",
                    r->nsteps, q[0], q[1], q[2], q[3], q[4], q[5], q[6]);
            fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
                    X(q[1]), mid, X(q[5]), mid);
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"#a0cbe8\" "
                       "stroke=\"#333\"/>\n",
                    X(q[2]), y, X(q[4]) - X(q[2]), BAR_H);
            fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#111\" "
                       "stroke-width=\"2.5\"/>\n",
                    X(q[3]), y, X(q[3]), y + BAR_H);
            fprintf(f, "<circle cx=\"%.2f\" cy=\"%.1f\" r=\"2.5\" fill=\"#333\"/>"
                       "<circle cx=\"%.2f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/></g>\n",
                    X(q[0]), mid, X(q[6]), mid, q[6] > hi ? "#e15759" : "#333");
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" class=\"val\">p50 %.3f ms, max %.3f ms</text>\n",
                    (double)LABEL_W + PLOT_W + 8, y + BAR_H - 4, q[3], q[6]);
        }
#undef X
    fputs("</svg>\n", f);
}

/* Speedup per run as bars, with the ideal (the world size) marked on each. */
static void chart_speedup(FILE *f, const struct runset *rs, const struct run_stat *st)
{
    const char *title = "Speedup over the baseline (bar) and ideal linear speedup (dark mark)";
    int rows = 0;
    double max = 0;
    for (int i = 0; i < rs->n; i++)
        if (st[i].has_speedup) {
            rows++;
            if (st[i].speedup > max)
                max = st[i].speedup;
            if (rs->runs[i].world_size > max)
                max = rs->runs[i].world_size;
        }
    if (rows == 0) {
        chart_empty(f, title, "no speedup: needs a baseline run and throughput for each run");
        return;
    }
    double tick = chart_tick(max * 1.1);
    max = ceil(max * 1.1 / tick) * tick;
    int top = 40, bottom = top + rows * ROW_H;
    chart_open(f, bottom + 44, title);
    chart_axis(f, top - 4, bottom, 0, max, tick, "speedup (x)");
    int row = 0;
    for (int i = 0; i < rs->n; i++) {
        if (!st[i].has_speedup)
            continue;
        double y = top + row++ * ROW_H, w = PLOT_W * st[i].speedup / max;
        double ideal = LABEL_W + PLOT_W * rs->runs[i].world_size / max;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"lab\">", LABEL_W - 8, y + BAR_H - 4);
        html_escape(f, rs->runs[i].label);
        fprintf(f, " (%d rank%s)</text>\n", rs->runs[i].world_size,
                rs->runs[i].world_size == 1 ? "" : "s");
        fprintf(f,
                "<rect x=\"%d\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"#4e79a7\">"
                "<title>speedup %.3f, efficiency %.3f</title></rect>\n",
                LABEL_W, y, w, BAR_H, st[i].speedup, st[i].efficiency);
        fprintf(f,
                "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#222\" "
                "stroke-width=\"3\"><title>ideal %d</title></line>\n",
                ideal, y - 2, ideal, y + BAR_H + 2, rs->runs[i].world_size);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"val\">%.3fx, efficiency %.3f</text>\n",
                (double)LABEL_W + (w > ideal - LABEL_W ? w : ideal - LABEL_W) + 8, y + BAR_H - 4,
                st[i].speedup, st[i].efficiency);
    }
    fputs("</svg>\n", f);
}

typedef void (*chart_fn)(FILE *, const struct runset *, const struct run_stat *);

static int charts_file(const char *dir, const char *name, chart_fn fn, const struct runset *rs,
                       const struct run_stat *st)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        return error_set("report: out of memory");
    struct outfile o;
    if (outfile_open(&o, path) < 0) {
        free(path);
        return -1;
    }
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", o.f);
    fn(o.f, rs, st);
    int rc = outfile_close(&o, 1);
    free(path);
    return rc;
}

static const char page_css[] =
    "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:24px;color:#222;"
    "background:#fff;max-width:1040px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px "
    "solid #ddd;padding-bottom:4px}"
    "table{border-collapse:collapse;margin:8px 0 16px;font-size:12px}"
    "caption{text-align:left;font-weight:bold;padding:4px 0}"
    "caption .file{font-weight:normal;color:#777}"
    "th,td{padding:3px 8px;border-bottom:1px solid #e6e6e6;text-align:right;"
    "font-variant-numeric:tabular-nums}"
    "th{background:#f4f4f4;vertical-align:bottom}.l{text-align:left}"
    ".unit{font-weight:normal;color:#777}.runs td{text-align:left}"
    "p.note{color:#555;font-size:12px}p.caution{color:#a40;font-size:13px}svg{display:block;margin:6px 0}"
    "div.advice{border-left:4px solid #27a;padding:2px 10px;margin:10px 0;background:#f4f8fb}"
    "p.verdict{font-weight:bold;margin:6px 0}p.advice{margin:4px 0}";

int charts_write(const struct runset *rs, const struct run_stat *st,
                 const struct table *const *tables, int ntables,
                 const char *const *cautions, size_t ncautions,
                 const char *const *notes, size_t nnotes, const struct advice *advice,
                 const char *out_dir)
{
    return charts_write_sections(rs, st, tables, ntables, cautions, ncautions, notes, nnotes,
                                 advice, NULL, 0, out_dir);
}

int charts_write_sections(const struct runset *rs, const struct run_stat *st,
                          const struct table *const *tables, int ntables,
                          const char *const *cautions, size_t ncautions,
                          const char *const *notes, size_t nnotes, const struct advice *advice,
                          const struct chart_section *sections, int nsections,
                          const char *out_dir)
{
    if (charts_file(out_dir, "phases.svg", chart_phases, rs, st) < 0 ||
        charts_file(out_dir, "speedup.svg", chart_speedup, rs, st) < 0)
        return -1;
    char *path = NULL;
    if (asprintf(&path, "%s/report.html", out_dir) < 0)
        return error_set("report: out of memory");
    struct outfile o;
    if (outfile_open(&o, path) < 0) {
        free(path);
        return -1;
    }
    FILE *f = o.f;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<title>ddpprof report</title>\n<style>%s</style></head><body>\n"
               "<h1>ddpprof report</h1>\n<table class=\"runs\"><tr><th class=\"l\">run</th>"
               "<th class=\"l\">model</th><th class=\"l\">mode</th><th class=\"l\">device</th>"
               "<th>ranks</th><th class=\"l\">amp</th><th class=\"l\">directory</th></tr>\n",
            page_css);
    for (int i = 0; i < rs->n; i++) {
        const struct run *r = &rs->runs[i];
        const char *const shown[] = {r->meta.model.s, r->meta.mode.s, r->meta.device.s};
        fputs("<tr><td>", f);
        html_escape(f, r->label);
        for (int k = 0; k < 3; k++) {
            const char *v = shown[k];
            fputs("</td><td>", f);
            html_escape(f, v ? v : "-");
        }
        fprintf(f, "</td><td style=\"text-align:right\">%d</td><td>", r->world_size);
        const char *amp = r->meta.amp.s;
        html_escape(f, amp ? amp : "-");
        fputs("</td><td>", f);
        html_escape(f, r->dir);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    if (advice) /* the verdict and what to do, at the top */
        advice_write_html(advice, f);
    fputs("<h2>Speedup</h2>\n", f);
    chart_speedup(f, rs, st);
    if (ntables > 0)
        table_write_html(tables[0], f, 1000);
    for (size_t i = 0; i < ncautions; i++) { /* one paragraph per line */
        fputs("<p class=\"caution\">caution: ", f);
        html_escape(f, cautions[i]);
        fputs("</p>\n", f);
    }
    for (size_t i = 0; i < nnotes; i++) { /* the repeats' spread, the warm-up steps */
        fputs("<p class=\"note\">", f);
        html_escape(f, notes[i]);
        fputs("</p>\n", f);
    }
    for (int k = 0; k < nsections; k++) /* other modules' sections (diff.c's) */
        sections[k].write(f, sections[k].ctx);
    fputs("<h2>Where the time goes</h2>\n", f);
    chart_phases(f, rs, st);
    chart_steps(f, rs, st);
    fputs("<h2>Representative steps</h2>\n", f);
    stepview_write(f, rs, st);
    layers_page_write(f, rs, st); /* --trace full runs: the roofline */
    fputs("<h2>Tables</h2>\n", f);
    for (int k = 1; k < ntables; k++)
        table_write_html(tables[k], f, 200);
    fputs("<p class=\"note\">Formulas (speedup, efficiency, algbw, busbw, overlap, exposed "
          "communication, idle, skew, wait, percentiles) are defined in report/FORMULAS.md of "
          "the ddpprof source. The merged timeline is timeline.json (open it in Perfetto or "
          "chrome://tracing).</p>\n</body></html>\n",
          f);
    int rc = outfile_close(&o, 1);
    free(path);
    return rc;
}
