/* layers.h — per layer: layers.csv and the roofline on the page (report/FORMULAS.md
 * "layers.csv — per run, rank and layer").
 *
 * From a ddpprof run traced with --trace full: its layer.forward / layer.backward rows
 * (probes/TRACE.md), the layers' FLOPs and bytes and the device's measured peak in
 * meta.csv (layer.K.*, peak_gflops, peak_gbps).  Runs without them (other trace modes,
 * imports) have no rows. */
#ifndef DDPPROF_REPORT_LAYERS_H
#define DDPPROF_REPORT_LAYERS_H

#include <stdio.h>

#include "report/analysis.h"
#include "report/table.h"

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
