/* train_layers.c — per-layer tracing of one rank's run (train_layers.h): the model's layer
 * hook (nn/layer_list.h) turned into the probes' layer.forward / layer.backward ranges, and
 * the layers' costs and the device's peak in meta.csv. */
#include "train_layers.h"

#include "train_rank.h"

#include "common/error.h"
#include "peak_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void layers_enter(void *ctx, const struct layer_info *l, enum layer_dir dir)
{
    struct rank *r = ctx;
    probe_push_named(r->probe, dir == LAYER_FORWARD ? PROBE_LAYER_FORWARD : PROBE_LAYER_BACKWARD,
                     l->name, l->param_bytes);
}

static void layers_leave(void *ctx, const struct layer_info *l, enum layer_dir dir)
{
    (void)l, (void)dir;
    probe_pop(((struct rank *)ctx)->probe);
}

/* DDPPROF_BENCH_LAYERS_ALTERNATE=1 (scripts/bench-layers): record the layers on
 * odd-numbered steps only, so one run measures steps with and without them side by side
 * (the same process, data and load) */
static int layers_alternate(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("DDPPROF_BENCH_LAYERS_ALTERNATE");
        v = e && strcmp(e, "1") == 0;
    }
    return v;
}

void rank_layers_start(struct rank *r)
{
    if (r->o->run.trace != PROBE_FULL || !r->o->run.out_dir || !r->probe)
        return;
    if (layers_alternate() && (r->step + 1) % 2 == 0) /* the step about to run is even */
        return;
    r->layer_obs = (struct layer_observer){.enter = layers_enter, .leave = layers_leave,
                                           .ctx = r};
    r->m->layers.obs = &r->layer_obs;
}

void rank_layers_stop(struct rank *r) { r->m->layers.obs = NULL; }

void rank_layers_meta(struct rank *r)
{
    if (r->o->run.trace != PROBE_FULL || !r->log.meta)
        return;
    struct runlog *l = &r->log;
    const struct model *m = r->m;
    struct backend *be = r->dev.be;
    const int n = r->o->data.batch_size;
    const size_t act = be->dtype_size(be, (enum dtype)m->amp);
    runlog_meta(l, RUN_META_layers, "%d", m->layers.count);
    for (int k = 0; k < m->layers.count; k++) {
        const struct layer_info *li = &m->layers.items[k];
        double ff, bf, fb, bb;
        layer_costs(li, LAYER_FORWARD, n, act, &ff, &fb);
        layer_costs(li, LAYER_BACKWARD, n, act, &bf, &bb);
        runlog_meta_at(l, RUN_META_layer_name, k, "%s", li->name);
        runlog_meta_at(l, RUN_META_layer_type, k, "%s", li->type);
        runlog_meta_at(l, RUN_META_layer_param_bytes, k, "%llu",
                       (unsigned long long)li->param_bytes);
        runlog_meta_at(l, RUN_META_layer_flops_forward, k, "%.0f", ff);
        runlog_meta_at(l, RUN_META_layer_flops_backward, k, "%.0f", bf);
        runlog_meta_at(l, RUN_META_layer_bytes_forward, k, "%.0f", fb);
        runlog_meta_at(l, RUN_META_layer_bytes_backward, k, "%.0f", bb);
    }
    for (int i = 0; i < m->params.trainable; i++) {
        const struct param *p = params_trainable(&m->params, i);
        runlog_meta_at(l, RUN_META_param_name, i, "%s", p->name);
        runlog_meta_at(l, RUN_META_param_bytes, i, "%zu", p->numel * sizeof(float));
    }
    struct peak pk;
    if (peak_measure(be, r->dev.gpu >= 0, r->o->dev.threads, 0.3, &pk)) {
        /* not fatal: the report then gives no fraction of peak */
        fprintf(stderr, "ddpprof: rank %d: no peak measured (%s): layers.csv will have no "
                        "fraction of peak\n", r->rank, error_get());
        return;
    }
    runlog_meta(l, RUN_META_peak_gflops, "%.2f", pk.gflops);
    runlog_meta(l, RUN_META_peak_gbps, "%.2f", pk.gbps);
    runlog_meta(l, RUN_META_peak_source, "%s", pk.source);
}
