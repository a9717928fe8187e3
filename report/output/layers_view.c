/* layers_view.c — layers.csv and the page's roofline (see layers_view.h; the formulas are
 * report/FORMULAS.md's "layers.csv", computed by layers.h). */
#include "report/output/layers_view.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "report/analysis/layers.h"

enum layers_col { LY_RUN, LY_RANK, LY_LAYER, LY_NAME, LY_TYPE, LY_STEPS, LY_CLOCK, LY_FWD_MS,
                  LY_BWD_MS, LY_FLOPS_FWD, LY_FLOPS_BWD, LY_BYTES_FWD, LY_BYTES_BWD,
                  LY_FWD_GFLOPS, LY_BWD_GFLOPS, LY_GFLOPS, LY_GBPS, LY_INTENSITY,
                  LY_ROOF_GFLOPS, LY_PCT_PEAK_FLOPS, LY_PCT_PEAK_BW, LY_PCT_ROOF, LY_BOUND,
                  LY_NCOLS };
static const struct table_col layers_cols[LY_NCOLS] = {
    [LY_RUN] = {"run", "run", "", 1},
    [LY_RANK] = {"rank", "rank", "", 0},
    [LY_LAYER] = {"layer", "#", "", 0},
    [LY_NAME] = {"name", "name", "", 1},
    [LY_TYPE] = {"type", "type", "", 1},
    [LY_STEPS] = {"steps", "steps", "", 0},
    [LY_CLOCK] = {"clock", "clock", "", 1},
    [LY_FWD_MS] = {"forward_ms", "forward", "ms", 0},
    [LY_BWD_MS] = {"backward_ms", "backward", "ms", 0},
    [LY_FLOPS_FWD] = {"flops_forward", "flops fwd", "", 0},
    [LY_FLOPS_BWD] = {"flops_backward", "flops bwd", "", 0},
    [LY_BYTES_FWD] = {"bytes_forward", "bytes fwd", "B", 0},
    [LY_BYTES_BWD] = {"bytes_backward", "bytes bwd", "B", 0},
    [LY_FWD_GFLOPS] = {"forward_gflops", "fwd", "GFLOP/s", 0},
    [LY_BWD_GFLOPS] = {"backward_gflops", "bwd", "GFLOP/s", 0},
    [LY_GFLOPS] = {"gflops", "achieved", "GFLOP/s", 0},
    [LY_GBPS] = {"gbps", "achieved", "GB/s", 0},
    [LY_INTENSITY] = {"intensity_flop_per_byte", "intensity", "FLOP/B", 0},
    [LY_ROOF_GFLOPS] = {"roofline_gflops", "roofline", "GFLOP/s", 0},
    [LY_PCT_PEAK_FLOPS] = {"pct_peak_flops", "of peak flops", "%", 0},
    [LY_PCT_PEAK_BW] = {"pct_peak_bw", "of peak bw", "%", 0},
    [LY_PCT_ROOF] = {"pct_roofline", "of roofline", "%", 0},
    [LY_BOUND] = {"bound", "bound", "", 1}};

void layers_table_init(struct table *t)
{
    table_init(t, "layers: per layer and rank, median per step after the warm-up",
               "layers.csv", layers_cols, LY_NCOLS);
}

int layers_fill(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < rs->runs[i].nranks; k++) {
            struct layer_times s;
            if (layers_rank_times(rs, st, i, k, &s))
                return -1;
            for (int l = 0; l < s.n; l++) {
                const struct layer_time *ls = &s.v[l];
                if (ls->steps == 0)
                    continue;
                table_add_row(t);
                table_set(t, LY_RUN, "%s", rs->runs[i].label);
                table_set(t, LY_RANK, "%d", rs->runs[i].ranks[k].rank);
                table_set(t, LY_LAYER, "%d", l);
                table_set(t, LY_NAME, "%s", ls->name ? ls->name : "");
                table_set(t, LY_TYPE, "%s", ls->type ? ls->type : "");
                table_set(t, LY_STEPS, "%d", ls->steps);
                table_set(t, LY_CLOCK, "%s", ls->device ? "device" : "host");
                const int cols_ms[2] = {LY_FWD_MS, LY_BWD_MS},
                          cols_f[2] = {LY_FLOPS_FWD, LY_FLOPS_BWD},
                          cols_b[2] = {LY_BYTES_FWD, LY_BYTES_BWD},
                          cols_g[2] = {LY_FWD_GFLOPS, LY_BWD_GFLOPS};
                double flops = 0, bytes = 0;
                int64_t ns = 0;
                int known = 1;
                for (int d = 0; d < 2; d++) {
                    if (ls->med_ns[d] >= 0)
                        table_set(t, cols_ms[d], "%.4f", (double)ls->med_ns[d] * 1e-6);
                    if (ls->flops[d] >= 0)
                        table_set(t, cols_f[d], "%.0f", ls->flops[d]);
                    if (ls->bytes[d] >= 0)
                        table_set(t, cols_b[d], "%.0f", ls->bytes[d]);
                    if (ls->flops[d] >= 0 && ls->med_ns[d] > 0)
                        table_set(t, cols_g[d], "%.3f", layers_gflops(ls->flops[d], ls->med_ns[d]));
                    known = known && ls->flops[d] >= 0 && ls->bytes[d] >= 0 && ls->med_ns[d] >= 0;
                    flops += ls->flops[d], bytes += ls->bytes[d], ns += ls->med_ns[d];
                }
                if (!known || ns <= 0)
                    continue;
                const double g = flops / (double)ns, gb = bytes / (double)ns;
                table_set(t, LY_GFLOPS, "%.3f", g);
                table_set(t, LY_GBPS, "%.3f", gb);
                if (bytes > 0)
                    table_set(t, LY_INTENSITY, "%.4f", flops / bytes);
                if (s.peak_gflops > 0 && s.peak_gbps > 0 && bytes > 0) {
                    const double x = flops / bytes, roof = layers_roof(&s, x);
                    table_set(t, LY_ROOF_GFLOPS, "%.3f", roof);
                    table_set(t, LY_PCT_PEAK_FLOPS, "%.2f", 100.0 * g / s.peak_gflops);
                    table_set(t, LY_PCT_PEAK_BW, "%.2f", 100.0 * gb / s.peak_gbps);
                    table_set(t, LY_PCT_ROOF, "%.2f", 100.0 * g / roof);
                    table_set(t, LY_BOUND, "%s",
                              x * s.peak_gbps < s.peak_gflops ? "memory" : "compute");
                }
            }
            layers_times_free(&s);
        }
    return t->failed ? error_set("report: out of memory for layers.csv") : 0;
}

/* ---- the roofline chart ---- */

#define RF_W 1000
#define RF_H 420
#define RF_L 80
#define RF_R 260 /* room for the legend */
#define RF_T 40
#define RF_B 50

static double rf_x(double v, double lo, double hi)
{
    return RF_L + (RF_W - RF_L - RF_R) * (log10(v) - log10(lo)) / (log10(hi) - log10(lo));
}

static double rf_y(double v, double lo, double hi)
{
    return RF_H - RF_B - (RF_H - RF_T - RF_B) * (log10(v) - log10(lo)) / (log10(hi) - log10(lo));
}

static double rf_floor10(double v) { return pow(10, floor(log10(v))); }
static double rf_ceil10(double v) { return pow(10, ceil(log10(v))); }

/* layer ls's roofline point in direction d (0 forward, 1 backward): its intensity *x
 * (FLOP/byte) and achieved *y (GFLOP/s); 0 when it has none (no FLOPs, bytes or time) */
static int rf_point(const struct layer_time *ls, int d, double *x, double *y)
{
    if (!(ls->flops[d] > 0 && ls->bytes[d] > 0 && ls->med_ns[d] > 0))
        return 0;
    *x = ls->flops[d] / ls->bytes[d];
    *y = layers_gflops(ls->flops[d], ls->med_ns[d]);
    return 1;
}

/* one run's first rank: its layers' points and the roof */
static void layers_roofline(FILE *f, const struct runset *rs, const struct layer_times *s,
                            int i)
{
    /* the axes' ranges: every point and the ridge, in whole decades */
    double xlo = INFINITY, xhi = 0, ylo = INFINITY, yhi = 0;
    for (int l = 0; l < s->n; l++)
        for (int d = 0; d < 2; d++) {
            double x, y;
            if (rf_point(&s->v[l], d, &x, &y))
                xlo = fmin(xlo, x), xhi = fmax(xhi, x), ylo = fmin(ylo, y), yhi = fmax(yhi, y);
        }
    const int roof = s->peak_gflops > 0 && s->peak_gbps > 0;
    if (!(xhi > 0))
        return;
    if (roof) {
        const double ridge = s->peak_gflops / s->peak_gbps;
        xlo = fmin(xlo, ridge), xhi = fmax(xhi, ridge), yhi = fmax(yhi, s->peak_gflops);
    }
    xlo = rf_floor10(xlo), xhi = rf_ceil10(xhi * 1.0001), ylo = rf_floor10(ylo);
    yhi = rf_ceil10(yhi * 1.0001);
    if (xhi <= xlo)
        xhi = xlo * 10;
    if (yhi <= ylo)
        yhi = ylo * 10;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
            "font-size=\"12\" class=\"roofline\">\n"
            "<style>.grid{stroke:#e4e4e4;stroke-width:1}.tick{fill:#555;font-size:11px}"
            ".ttl{font-size:14px;font-weight:bold;fill:#222}</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
            "<text x=\"10\" y=\"20\" class=\"ttl\">roofline: run ",
            RF_W, RF_H, RF_W, RF_H);
    html_escape(f, rs->runs[i].label);
    fprintf(f, ", rank %d (%s clock, median per step)</text>\n", rs->runs[i].ranks[0].rank,
            s->clock);
    for (double v = xlo; v <= xhi * 1.0001; v *= 10) {
        const double x = rf_x(v, xlo, xhi);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"grid\"/>"
                   "<text x=\"%.1f\" y=\"%d\" class=\"tick\" text-anchor=\"middle\">%g</text>\n",
                x, RF_T, x, RF_H - RF_B, x, RF_H - RF_B + 14, v);
    }
    for (double v = ylo; v <= yhi * 1.0001; v *= 10) {
        const double y = rf_y(v, ylo, yhi);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>"
                   "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%g</text>\n",
                RF_L, y, RF_W - RF_R, y, RF_L - 6, y + 4, v);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"tick\" text-anchor=\"middle\">arithmetic "
               "intensity (FLOP/byte)</text>\n"
               "<text x=\"16\" y=\"%d\" class=\"tick\" transform=\"rotate(-90 16 %d)\" "
               "text-anchor=\"middle\">achieved GFLOP/s</text>\n",
            (RF_W - RF_R + RF_L) / 2, RF_H - 12, (RF_H) / 2, (RF_H) / 2);
    if (roof) { /* the bandwidth slope up to the ridge, then the compute roof */
        const double ridge = s->peak_gflops / s->peak_gbps;
        const double x0 = xlo, y0 = x0 * s->peak_gbps;
        const double sx = y0 < ylo ? ylo / s->peak_gbps : x0, sy = fmax(y0, ylo);
        fprintf(f, "<polyline class=\"roof\" fill=\"none\" stroke=\"#444\" stroke-width=\"2\" "
                   "points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"><title>measured peak: %.1f "
                   "GFLOP/s, %.1f GB/s (ridge at %.2f FLOP/byte)</title></polyline>\n",
                rf_x(sx, xlo, xhi), rf_y(sy, ylo, yhi), rf_x(ridge, xlo, xhi),
                rf_y(s->peak_gflops, ylo, yhi), rf_x(xhi, xlo, xhi),
                rf_y(s->peak_gflops, ylo, yhi), s->peak_gflops, s->peak_gbps, ridge);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">peak %.1f "
                   "GFLOP/s, %.1f GB/s (measured)</text>\n",
                RF_W - RF_R, rf_y(s->peak_gflops, ylo, yhi) - 6, s->peak_gflops, s->peak_gbps);
    }
    static const char *const color[2] = {"#4e79a7", "#f28e2b"};
    static const char *const dir[2] = {"forward", "backward"};
    for (int l = 0; l < s->n; l++)
        for (int d = 0; d < 2; d++) {
            const struct layer_time *ls = &s->v[l];
            double x, g;
            if (!rf_point(ls, d, &x, &g))
                continue;
            fprintf(f, "<circle class=\"layer\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" "
                       "fill-opacity=\"0.75\"><title>",
                    rf_x(x, xlo, xhi), rf_y(g, ylo, yhi), color[d]);
            html_escape(f, ls->name ? ls->name : "?");
            fprintf(f, " (%s) %s: %.3f ms, %.3f GFLOP/s, %.2f FLOP/byte</title></circle>\n",
                    ls->type ? ls->type : "?", dir[d], (double)ls->med_ns[d] * 1e-6, g, x);
        }
    for (int d = 0; d < 2; d++)
        fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"5\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">"
                   "%s</text>\n",
                RF_W - RF_R + 24, RF_T + 10 + 20 * d, color[d], RF_W - RF_R + 36,
                RF_T + 14 + 20 * d, dir[d]);
    fputs("</svg>\n", f);
}

void layers_page_write(FILE *f, const struct runset *rs, const struct run_stat *st)
{
    int title = 0;
    for (int i = 0; i < rs->n; i++) {
        struct layer_times s;
        if (rs->runs[i].nranks < 1 || layers_rank_times(rs, st, i, 0, &s) || s.n == 0)
            continue;
        if (!title) {
            fputs("<h2>Per layer: roofline</h2>\n<p class=\"note\">Each layer's forward and "
                  "backward at its arithmetic intensity (FLOP per byte of tensors read and "
                  "written) and achieved GFLOP/s, under the roof of the device's peak measured "
                  "at the run's start (meta.csv peak_source); layers.csv has the figures "
                  "(report/FORMULAS.md).</p>\n",
                  f);
            title = 1;
        }
        layers_roofline(f, rs, &s, i);
        layers_times_free(&s);
    }
}
