/* stepview.c — the representative steps (see stepview.h), drawn by hand in SVG: per rank a
 * phase lane and one thin lane per bucket, time axis in ms from the step's first start. */
#include "report/output/stepview.h"

#include <stdint.h>
#include <string.h>

#include "probes/trace_format.h"
#include "report/output/svg.h"
#include "report/output/table.h"

#define SV_W 1000
#define SV_LABEL 110
#define SV_PLOT 860
#define SV_PHASE_H 16 /* the phase lane */
#define SV_LANE_H 7   /* one bucket's lane */
#define SV_GAP 8      /* between ranks */
#define SV_MAX_LANES 16 /* buckets beyond share the last lane */

/* The phases drawn on the main lane and their colours (the phase chart's). */
static const struct {
    enum trace_phase phase;
    enum seg seg;
} sv_phases[] = {{TRACE_PHASE_DATA, SEG_DATA},
                 {TRACE_PHASE_FORWARD, SEG_FORWARD},
                 {TRACE_PHASE_BACKWARD, SEG_BACKWARD},
                 {TRACE_PHASE_OPTIMIZER, SEG_OPTIMIZER}};
#define SV_NPHASES (sizeof sv_phases / sizeof *sv_phases)

struct sv_ids {
    uint32_t phase[TRACE_PHASE_COUNT]; /* labels ids (STRPOOL_NONE: absent) */
    uint32_t range;
};

/* Does row count for rank stat r (a range, on the device clock where the rank's phase has
 * device rows, else the host clock)?  Returns its enum trace_phase, or -1. */
static int sv_phase(const struct sv_ids *ids, const struct rank_stat *r, const struct run_row *row)
{
    if (row->kind != ids->range)
        return -1;
    for (int p = 0; p < TRACE_PHASE_COUNT; p++) {
        if (ids->phase[p] == STRPOOL_NONE || row->phase != ids->phase[p])
            continue;
        int dev = (r->device_phases >> p) & 1u;
        if ((dev && row->clock == TRACE_CLOCK_DEVICE) || (!dev && row->clock == TRACE_CLOCK_HOST))
            return p;
        return -1;
    }
    return -1;
}

static double sv_x(int64_t t, int64_t t0, int64_t t1)
{
    return SV_LABEL + (double)SV_PLOT * (double)(t - t0) / (double)(t1 - t0);
}

static void sv_step(FILE *f, const struct run_stat *s, const struct sv_ids *ids, int step,
                    const char *what)
{
    const struct run *run = s->run;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    int lanes = 0;
    for (int k = 0; k < run->nranks; k++) {
        const struct rank_trace *t = &run->ranks[k];
        for (size_t i = 0; i < t->n; i++) {
            const struct run_row *row = &t->rows[i];
            int p = row->step == step ? sv_phase(ids, &s->ranks[k], row) : -1;
            if (p < 0)
                continue;
            if (row->start_ns < t0)
                t0 = row->start_ns;
            if (row->end_ns > t1)
                t1 = row->end_ns;
            if (p == TRACE_PHASE_ALLREDUCE && row->bucket + 1 > lanes)
                lanes = row->bucket + 1;
            if (p != TRACE_PHASE_ALLREDUCE && trace_phase_collective(p) && lanes < 1)
                lanes = 1; /* the other collectives are drawn on the first comm lane */
        }
    }
    if (t0 == INT64_MAX || t1 <= t0)
        return;
    if (lanes > SV_MAX_LANES)
        lanes = SV_MAX_LANES;
    int rank_h = SV_PHASE_H + lanes * SV_LANE_H + SV_GAP, top = 46;
    int height = top + run->nranks * rank_h + 36;
    double ms = (double)(t1 - t0) * 1e-6, tick = chart_tick(ms);
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 "
            "%d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\" "
            "class=\"stepview\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
            "<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\" fill=\"#222\">",
            SV_W, height, SV_W, height);
    html_escape(f, run->label);
    fprintf(f, ": %s, step %d (%.3f ms from the first rank's start to the last end)</text>\n",
            what, step, ms);
    for (size_t p = 0; p < SV_NPHASES; p++) /* legend */
        fprintf(f, "<rect x=\"%zu\" y=\"26\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                   "<text x=\"%zu\" y=\"35\" fill=\"#222\">%s</text>\n",
                10 + p * 110, seg_colors[sv_phases[p].seg], 24 + p * 110,
                seg_names[sv_phases[p].seg]);
    fprintf(f, "<rect x=\"450\" y=\"26\" width=\"10\" height=\"10\" fill=\"%s\"/>"
               "<text x=\"464\" y=\"35\" fill=\"#222\">collectives: all-reduce a lane per bucket, "
               "others the first</text>\n",
            seg_colors[SEG_EXPOSED]);
    int bottom = top + run->nranks * rank_h;
    for (int k = 0; tick > 0 && k * tick <= ms * (1 + 1e-9); k++) {
        double x = SV_LABEL + SV_PLOT * (k * tick) / ms;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e4e4e4\"/>"
                   "<text x=\"%.1f\" y=\"%d\" fill=\"#555\" text-anchor=\"middle\">%g</text>\n",
                x, top - 4, x, bottom, x, bottom + 14, k * tick);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#555\" text-anchor=\"middle\">ms</text>\n",
            SV_LABEL + SV_PLOT / 2, bottom + 28);
    for (int k = 0; k < run->nranks; k++) {
        const struct rank_trace *t = &run->ranks[k];
        int y = top + k * rank_h;
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#222\" text-anchor=\"end\">rank %d</text>\n",
                SV_LABEL - 8, y + SV_PHASE_H - 4, t->rank);
        for (int b = 0; b < lanes; b++)
            fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#777\" font-size=\"7\" "
                       "text-anchor=\"end\">b%d%s</text>\n",
                    SV_LABEL - 8, y + SV_PHASE_H + (b + 1) * SV_LANE_H - 1, b,
                    b == SV_MAX_LANES - 1 ? "+" : "");
        for (size_t i = 0; i < t->n; i++) {
            const struct run_row *row = &t->rows[i];
            int p = row->step == step ? sv_phase(ids, &s->ranks[k], row) : -1;
            if (p < 0 || p == TRACE_PHASE_STEP)
                continue;
            const char *color = NULL;
            for (size_t q = 0; q < SV_NPHASES; q++)
                if ((int)sv_phases[q].phase == p)
                    color = seg_colors[sv_phases[q].seg];
            double x0 = sv_x(row->start_ns, t0, t1), x1 = sv_x(row->end_ns, t0, t1);
            double w = x1 - x0 < 0.5 ? 0.5 : x1 - x0;
            double d_ms = (double)(row->end_ns - row->start_ns) * 1e-6;
            if (p == TRACE_PHASE_ALLREDUCE && row->bucket >= 0) {
                int lane = row->bucket < SV_MAX_LANES ? row->bucket : SV_MAX_LANES - 1;
                fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                           "<title>rank %d bucket %d all-reduce: %.3f ms</title></rect>\n",
                        x0, y + SV_PHASE_H + lane * SV_LANE_H + 1, w, SV_LANE_H - 2,
                        seg_colors[SEG_EXPOSED], t->rank, row->bucket, d_ms);
            } else if (trace_phase_collective(p)) { /* broadcast, all-gather, ...: lane 0 */
                fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                           "<title>rank %d %s (%s): %.3f ms</title></rect>\n",
                        x0, y + SV_PHASE_H + 1, w, SV_LANE_H - 2, seg_colors[SEG_EXPOSED],
                        t->rank, trace_phase_name(p), trace_phase_collective(p), d_ms);
            } else if (color) {
                fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                           "<title>rank %d %s: %.3f ms</title></rect>\n",
                        x0, y, w, SV_PHASE_H - 2, color, t->rank, trace_phase_name(p), d_ms);
            }
        }
    }
    fputs("</svg>\n", f);
}

void stepview_write(FILE *f, const struct runset *rs, const struct run_stat *st)
{
    struct sv_ids ids;
    for (int p = 0; p < TRACE_PHASE_COUNT; p++)
        ids.phase[p] = strpool_find(&rs->labels, trace_phase_name(p));
    ids.range = strpool_find(&rs->labels, trace_kind_name(TRACE_KIND_RANGE));
    for (int i = 0; i < rs->n; i++) {
        const struct run_stat *s = &st[i];
        if (s->nrep == 0) {
            fputs("<p class=\"note\">", f);
            html_escape(f, rs->runs[i].label);
            fputs(": no step ranges to draw.</p>\n", f);
            continue;
        }
        for (int k = 0; k < s->nrep; k++)
            sv_step(f, s, &ids, s->rep_steps[k], k == 0 ? "median step" : "slowest step");
    }
}
