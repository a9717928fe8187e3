/* charts.h — the pictures: phases.svg (stacked bars of mean time per step, per run and
 * rank), speedup.svg (speedup per run against the ideal), and report.html, one
 * self-contained page (inline CSS and SVG, nothing fetched) with those charts, a step-time
 * box plot, the representative steps (report/output/stepview.h) and the tables. */
#ifndef DDPPROF_REPORT_CHARTS_H
#define DDPPROF_REPORT_CHARTS_H

#include <stdio.h>

#include "report/analysis/advice.h"
#include "report/analysis/analysis.h"
#include "report/output/table.h"

/* Write out_dir/phases.svg, out_dir/speedup.svg and out_dir/report.html.  tables are shown
 * in the page in the order given; cautions[0..ncautions), one paragraph each, beside the
 * first (the speedup table), then notes[0..nnotes) (the repeats' spread, the warm-up
 * steps), one paragraph each; advice (NULL: none), the verdict and recommendations, at the
 * top.  Returns 0, or -1 after error_set() naming the file. */
int charts_write(const struct runset *rs, const struct run_stat *st,
                 const struct table *const *tables, int ntables,
                 const char *const *cautions, size_t ncautions,
                 const char *const *notes, size_t nnotes, const struct advice *advice,
                 const char *out_dir);

/* A section of report.html written by another module (diff.c's diff), placed after the
 * speedup table and its notes: write(f, ctx) writes HTML (an <h2> and what follows). */
struct chart_section {
    void (*write)(FILE *f, const void *ctx);
    const void *ctx;
};

/* charts_write with sections[0..nsections) on the page too. */
int charts_write_sections(const struct runset *rs, const struct run_stat *st,
                          const struct table *const *tables, int ntables,
                          const char *const *cautions, size_t ncautions,
                          const char *const *notes, size_t nnotes, const struct advice *advice,
                          const struct chart_section *sections, int nsections,
                          const char *out_dir);

#endif
