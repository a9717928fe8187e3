/* predict_view.h — predictions shown: predict.csv and `ddpprof predict`'s lines under it
 * (report/predict_cli.c), and the report's "what if" lines (report/analysis/predict.h's
 * figures). */
#ifndef DDPPROF_REPORT_PREDICT_VIEW_H
#define DDPPROF_REPORT_PREDICT_VIEW_H

#include <stddef.h>
#include <stdio.h>

#include "report/analysis/predict.h"
#include "report/output/table.h"

/* predict.csv, empty */
void predict_table_init(struct table *t);

/* The measured row: s's own configuration and measured step; speedup -1: none. */
void predict_table_measured(struct table *t, const struct predict_source *s, double speedup);

/* One predicted row: configuration c (asked_bw: the link bandwidth asked for, before TCP's
 * share), precision amp, SyncBatchNorm ("on", "off"; NULL: not said), the prediction p, its
 * speedup (-1: none) and its change from the measured step. */
void predict_table_row(struct table *t, const struct predict_config *c, double asked_bw,
                       const char *amp, const char *sync_bn, const struct predict_out *p,
                       double speedup, double measured_step_ms);

/* The lines under `ddpprof predict`'s table: what it was predicted from, the comm (cal,
 * from run cal_from; fitted to s itself unless comm_from), what is assumed, notes[0..n)
 * and where predict.csv went (out). */
struct predict_footer {
    const struct predict_source *s;
    const struct predict_comm *cal;
    const char *cal_from;
    int have_cal, comm_from, asks_world_above_1;
    char (*notes)[320];
    int nnotes;
    const char *out;
};
void predict_print_footer(FILE *f, const struct predict_footer *p);

/* The report's "what if" section for its DDP run, from the figures w
 * (predict_whatif_figures: computed once per report for this and the recommendations):
 * lines of text (without newlines) into *lines (malloc'd array of malloc'd strings, *n of
 * them; the caller frees both).  0 (*n == 0 when there is no DDP run; one line saying why
 * when it cannot be predicted), -1 only on out of memory. */
int predict_whatif(const struct runset *rs, const struct predict_whatif *w, char ***lines,
                   size_t *n);

#endif
