/* layers.c — the layers' times per step and their figures (see layers.h; the formulas are
 * report/FORMULAS.md's "layers.csv"). */
#include "report/analysis/layers.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/vec.h"
#include "report/input/run.h"
#include "report/input/sort.h"

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
double layers_gflops(double flops, int64_t ns)
{
    return flops >= 0 && ns > 0 ? flops / (double)ns : 0.0;
}

/* the roofline's bound at intensity x: min(peak flops, x * peak bandwidth) */
double layers_roof(const struct layer_times *s, double x)
{
    const double bw = x * s->peak_gbps;
    return bw < s->peak_gflops ? bw : s->peak_gflops;
}

void layers_times_free(struct layer_times *s)
{
    free(s->v);
    *s = (struct layer_times){0};
}
