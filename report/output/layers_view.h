/* layers_view.h — layers.csv and the page's roofline, from the layers' times and figures
 * (report/analysis/layers.h). */
#ifndef DDPPROF_REPORT_LAYERS_VIEW_H
#define DDPPROF_REPORT_LAYERS_VIEW_H

#include <stdio.h>

#include "report/analysis/analysis.h"
#include "report/output/table.h"

/* layers.csv, empty */
void layers_table_init(struct table *t);

/* One row per run, rank and layer (forward order).  0, or -1 after error_set (out of
 * memory). */
int layers_fill(const struct runset *rs, const struct run_stat *st, struct table *t);

/* The page's section: a roofline chart (log-log, achieved GFLOP/s against arithmetic
 * intensity, each layer's forward and backward of each run's first rank, under the
 * measured peak's roof).  Nothing when no run has layer rows. */
void layers_page_write(FILE *f, const struct runset *rs, const struct run_stat *st);

#endif
