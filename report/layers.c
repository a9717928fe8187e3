/* layers.c — layers.csv and the roofline (see layers.h; the formulas are
 * report/FORMULAS.md's "layers.csv"). */
#include "report/layers.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/vec.h"
#include "report/run.h"
#include "report/sort.h"

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

/* one layer row's duration in one step, for the sort: key ((layer * 2 + dir) * 2 + device)
 * << 32 | step */
struct layer_sample {
    int64_t key, dur_ns;
};


int layers_rank_times(const struct runset *rs, const struct run_stat *st, int i, int k,
                          struct layer_times *s)
{
    const struct run *r = &rs->runs[i];
    const struct rank_trace *rt = &r->ranks[k];
    *s = (struct layer_times){0};
    const double nl = meta_num(&r->meta.layers, -1);
    const uint32_t ph[2] = {
        strpool_find(&rs->labels, trace_phase_name(TRACE_PHASE_LAYER_FORWARD)),
        strpool_find(&rs->labels, trace_phase_name(TRACE_PHASE_LAYER_BACKWARD))};
    /* each layer has 7 keys: more layers than meta.csv has keys is no run's */
    if (!(nl >= 1 && nl <= (double)r->meta.rows) ||
        (ph[0] == STRPOOL_NONE && ph[1] == STRPOOL_NONE))
        return 0;
    s->n = (int)nl;
    s->v = calloc((size_t)s->n, sizeof *s->v);
    int *by_name = calloc((size_t)rs->names.n + 1, sizeof *by_name); /* name id -> layer + 1 */
    struct layer_sample *smp = NULL;
    size_t nsmp = 0, cap = 0;
    int rc = 0;
    if (!s->v || !by_name) {
        rc = error_set("report: out of memory for %d layers", s->n);
        goto out;
    }
    const struct run_meta *m = &r->meta;
    for (int l = 0; l < s->n; l++) {
        struct layer_time *ls = &s->v[l];
        ls->name = meta_text_at(&m->layer_name, l);
        ls->type = meta_text_at(&m->layer_type, l);
        const struct meta_list *flops[2] = {&m->layer_flops_forward, &m->layer_flops_backward},
                               *bytes[2] = {&m->layer_bytes_forward, &m->layer_bytes_backward};
        for (int d = 0; d < 2; d++) {
            ls->flops[d] = meta_num(meta_at(flops[d], l), -1);
            ls->bytes[d] = meta_num(meta_at(bytes[d], l), -1);
            ls->med_ns[d] = -1;
        }
        uint32_t id = ls->name ? strpool_find(&rs->names, ls->name) : STRPOOL_NONE;
        if (id != STRPOOL_NONE && !by_name[id])
            by_name[id] = l + 1;
    }
    const int warm_last = st[i].warmup.last_step;
    for (size_t j = 0; j < rt->n; j++) {
        const struct run_row *w = &rt->rows[j];
        const int d = w->phase == ph[0] ? 0 : w->phase == ph[1] ? 1 : -1;
        const int dev = w->clock == TRACE_CLOCK_DEVICE;
        if (d < 0 || (!dev && w->clock != TRACE_CLOCK_HOST) || w->step <= warm_last ||
            w->step < 1 || !by_name[w->name])
            continue;
        if (VEC_RESERVE(smp, cap, nsmp + 1)) {
            rc = error_set("report: out of memory for the layer rows");
            goto out;
        }
        smp[nsmp++] = (struct layer_sample){
            .key = (((int64_t)(by_name[w->name] - 1) * 2 + d) * 2 + dev) << 32 |
                   (int64_t)w->step,
            .dur_ns = w->end_ns - w->start_ns};
    }
    if ((rc = sort_by_i64(smp, nsmp, sizeof *smp, offsetof(struct layer_sample, key))))
        goto out;
    /* per layer and direction: the per-step sums (a layer run twice in a step counts both),
     * then their median */
    int64_t *per = malloc((nsmp + 1) * sizeof *per);
    if (!per) {
        rc = error_set("report: out of memory for the layer rows");
        goto out;
    }
    /* the device's time where the layer has device rows (a GPU: CUDA events; host rows
     * then time the launches), else the host's: device samples sort after host ones, so
     * they overwrite */
    for (size_t a = 0; a < nsmp;) {
        const int64_t ldc = smp[a].key >> 32;
        size_t np = 0;
        while (a < nsmp && smp[a].key >> 32 == ldc) {
            int64_t sum = 0, step = smp[a].key;
            while (a < nsmp && smp[a].key == step)
                sum += smp[a++].dur_ns;
            per[np++] = sum;
        }
        if ((rc = sort_by_i64(per, np, sizeof *per, 0)))
            break;
        struct layer_time *ls = &s->v[ldc / 4];
        const int dir = (int)(ldc / 2 % 2), dev = (int)(ldc % 2);
        ls->med_ns[dir] = analysis_percentile(per, np, 50);
        ls->nsteps[dir] = (int)np;
        ls->device |= dev;
    }
    for (int l = 0; l < s->n; l++) {
        struct layer_time *ls = &s->v[l];
        ls->steps = ls->nsteps[0] > ls->nsteps[1] ? ls->nsteps[0] : ls->nsteps[1];
        if (ls->device)
            s->clock = "device";
    }
    if (!s->clock)
        s->clock = "host";
    free(per);
    if (rc)
        goto out;
    s->peak_gflops = meta_num(&r->meta.peak_gflops, -1);
    s->peak_gbps = meta_num(&r->meta.peak_gbps, -1);
out:
    free(smp);
    free(by_name);
    if (rc) {
        free(s->v);
        *s = (struct layer_times){0};
    }
    return rc;
}

/* achieved GFLOP/s of flops in ns (0 when either is unknown) */
static double gflops_of(double flops, int64_t ns)
{
    return flops >= 0 && ns > 0 ? flops / (double)ns : 0.0;
}

/* the roofline's bound at intensity x: min(peak flops, x * peak bandwidth) */
static double roof_of(const struct layer_times *s, double x)
{
    const double bw = x * s->peak_gbps;
    return bw < s->peak_gflops ? bw : s->peak_gflops;
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
                        table_set(t, cols_g[d], "%.3f", gflops_of(ls->flops[d], ls->med_ns[d]));
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
                    const double x = flops / bytes, roof = roof_of(&s, x);
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
    *y = gflops_of(ls->flops[d], ls->med_ns[d]);
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

void layers_times_free(struct layer_times *s)
{
    free(s->v);
    *s = (struct layer_times){0};
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
