/* layers.h — per layer: the times and figures behind layers.csv and the page's roofline
 * (report/output/layers_view.h writes them; report/FORMULAS.md "layers.csv — per run, rank and
 * layer").
 *
 * From a ddpprof run traced with --trace full: its layer.forward / layer.backward rows
 * (probes/TRACE.md), the layers' FLOPs and bytes and the device's measured peak in
 * meta.csv (layer.K.*, peak_gflops, peak_gbps).  Runs without them (other trace modes,
 * imports) have no rows. */
#ifndef DDPPROF_REPORT_LAYERS_H
#define DDPPROF_REPORT_LAYERS_H

#include <stdint.h>
#include <stdio.h>

#include "report/analysis/analysis.h"

/* One layer of a run, from meta.csv, and its times on one rank (layers.csv's inputs). */
struct layer_time {
    const char *name, *type;
    double flops[2], bytes[2]; /* -1: not recorded */
    int64_t med_ns[2];         /* -1: no counted step */
    int nsteps[2];             /* the counted steps of each direction */
    int steps;                 /* the larger */
    int device;                /* 1: timed by device rows (CUDA events) */
};

struct layer_times {
    struct layer_time *v;
    int n;
    const char *clock; /* "device" when any layer is timed by device rows, else "host" */
    double peak_gflops, peak_gbps; /* meta.csv peak_*; -1: not measured */
};

/* The layers of run i (rs->runs[i]'s meta.csv, forward order) with their median times per
 * step after the warm-up (st[i]) on its k-th rank (rs->runs[i].ranks[k]).  0 with out->n 0
 * when the run has no layers; -1 after error_set (out of memory).  Free with
 * layers_times_free.  For other report code (the predictor's per-layer durations). */
int layers_rank_times(const struct runset *rs, const struct run_stat *st, int i, int k,
                      struct layer_times *out);
void layers_times_free(struct layer_times *s);

/* achieved GFLOP/s of flops in ns (0 when either is unknown) */
double layers_gflops(double flops, int64_t ns);

/* the roofline's bound at intensity x (FLOP/byte): min(peak flops, x * peak bandwidth) */
double layers_roof(const struct layer_times *s, double x);

#endif
