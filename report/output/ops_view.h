/* ops_view.h — ops.csv and the page's top-N tables of the ops and kernels (report/input/ops.h's
 * op tables, one per rank of a trace that names its ops), report/FORMULAS.md "ops.csv". */
#ifndef DDPPROF_REPORT_OPS_VIEW_H
#define DDPPROF_REPORT_OPS_VIEW_H

#include "report/input/run.h"
#include "report/output/table.h"

#define OPS_TOP 10 /* rows per rank of the top-N tables */

struct ops_tables {
    struct table all;    /* ops.csv: every op and kernel name of every rank */
    struct table cpu;    /* the page's: the OPS_TOP ops by self time, per run and rank */
    struct table kernel; /* the page's: the OPS_TOP kernels by total time, per run and rank */
};

void ops_tables_init(struct ops_tables *o);
/* Fill the three from every rank with an op table (none: no rows). */
void ops_tables_fill(struct ops_tables *o, const struct runset *rs);
/* Write out_dir/ops.csv when there are rows; else remove an earlier report's ops.csv there.
 * Returns 0, or -1 after error_set(). */
int ops_tables_write(const struct ops_tables *o, const char *out_dir);
void ops_tables_free(struct ops_tables *o);

#endif
