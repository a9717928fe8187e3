/* tables.c — the report's tables from the analysis (see tables.h): their columns (units in
 * the header) and one row per run, rank, phase, bucket, step ... as report/FORMULAS.md
 * defines each figure. */
#include "report/output/tables.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "report/output/layers_view.h"

/* The columns of each table: an enum naming them, then their spec in the same order
 * (designated initialisers: each spec sits at its column's index).  The host column comes
 * last in the per-rank tables, and only when a run names its ranks' hosts (meta.csv
 * host.rankN, which DDP runs write): the tables of runs that do not keep their columns. */
enum phases_col { PH_RUN, PH_RANK, PH_PHASE, PH_COUNT, PH_TOTAL, PH_MEAN, PH_P50, PH_P95,
                  PH_MAX, PH_PCT_OF_STEP, PH_WARMUP, PH_COLLECTIVE, PH_BYTES, PH_TRANSFER,
                  PH_WAIT, PH_LATE_RANK, PH_LATE_SHARE, PH_HOST, PH_NCOLS };
static const struct table_col phases_cols[PH_NCOLS] = {
    [PH_RUN] = {"run", "run", "", 1},
    [PH_RANK] = {"rank", "rank", "", 0},
    [PH_PHASE] = {"phase", "phase", "", 1},
    [PH_COUNT] = {"count", "count", "", 0},
    [PH_TOTAL] = {"total_ms", "total", "ms", 0},
    [PH_MEAN] = {"mean_ms", "mean", "ms", 0},
    [PH_P50] = {"p50_ms", "p50", "ms", 0},
    [PH_P95] = {"p95_ms", "p95", "ms", 0},
    [PH_MAX] = {"max_ms", "max", "ms", 0},
    [PH_PCT_OF_STEP] = {"pct_of_step", "of step", "%", 0},
    [PH_WARMUP] = {"warmup_steps", "warm-up", "steps", 0},
    [PH_COLLECTIVE] = {"collective", "collective", "", 1},
    [PH_BYTES] = {"bytes", "bytes", "B", 0},
    [PH_TRANSFER] = {"transfer_ms", "transfer", "ms", 0},
    [PH_WAIT] = {"wait_ms", "wait", "ms", 0},
    [PH_LATE_RANK] = {"late_rank", "late", "rank", 0},
    [PH_LATE_SHARE] = {"late_share_pct", "late in", "%", 0},
    [PH_HOST] = {"host", "host", "", 1}};

enum buckets_col { BU_RUN, BU_WORLD_SIZE, BU_BUCKET, BU_PARAMS, BU_BYTES, BU_COUNT, BU_MEAN,
                   BU_ALGBW, BU_BUSBW, BU_PCT_HIDDEN, BU_TRANSFER, BU_SYNC_WAIT, BU_START_SKEW,
                   BU_XFER_ALGBW, BU_XFER_BUSBW, BU_NCOLS };
static const struct table_col buckets_cols[BU_NCOLS] = {
    [BU_RUN] = {"run", "run", "", 1},
    [BU_WORLD_SIZE] = {"world_size", "ranks", "", 0},
    [BU_BUCKET] = {"bucket", "bucket", "", 0},
    [BU_PARAMS] = {"params", "params", "", 0},
    [BU_BYTES] = {"bytes", "size", "B", 0},
    [BU_COUNT] = {"count", "calls", "", 0},
    [BU_MEAN] = {"mean_ms", "time", "ms", 0},
    [BU_ALGBW] = {"algbw_GBps", "algbw", "GB/s", 0},
    [BU_BUSBW] = {"busbw_GBps", "busbw", "GB/s", 0},
    [BU_PCT_HIDDEN] = {"pct_hidden", "hidden", "%", 0},
    [BU_TRANSFER] = {"transfer_ms", "transfer", "ms", 0},
    [BU_SYNC_WAIT] = {"sync_wait_ms", "sync wait", "ms", 0},
    [BU_START_SKEW] = {"start_skew_ms", "start skew", "ms", 0},
    [BU_XFER_ALGBW] = {"xfer_algbw_GBps", "xfer algbw", "GB/s", 0},
    [BU_XFER_BUSBW] = {"xfer_busbw_GBps", "xfer busbw", "GB/s", 0}};

enum overlap_col { OV_RUN, OV_RANK, OV_STEP, OV_COMPUTE, OV_COMM, OV_EXPOSED_COMM, OV_OVERLAP,
                   OV_IDLE, OV_K_COMPUTE, OV_K_COMM, OV_K_OVERLAP, OV_K_IDLE, OV_HOST_WAIT,
                   OV_KERNEL_GAP, OV_COMM_CPU, OV_COMM_CPU_BWD, OV_HOST, OV_NCOLS };
static const struct table_col overlap_cols[OV_NCOLS] = {
    [OV_RUN] = {"run", "run", "", 1},
    [OV_RANK] = {"rank", "rank", "", 0},
    [OV_STEP] = {"step_ms", "step", "ms", 0},
    [OV_COMPUTE] = {"compute_ms", "compute", "ms", 0},
    [OV_COMM] = {"comm_ms", "comm", "ms", 0},
    [OV_EXPOSED_COMM] = {"exposed_comm_ms", "exposed comm", "ms", 0},
    [OV_OVERLAP] = {"overlap_pct", "overlap", "%", 0},
    [OV_IDLE] = {"idle_ms", "idle", "ms", 0},
    [OV_K_COMPUTE] = {"k_compute_ms", "k compute", "ms", 0},
    [OV_K_COMM] = {"k_comm_ms", "k comm", "ms", 0},
    [OV_K_OVERLAP] = {"k_overlap_pct", "k overlap", "%", 0},
    [OV_K_IDLE] = {"k_idle_ms", "k idle", "ms", 0},
    [OV_HOST_WAIT] = {"device_host_wait_ms", "device host wait", "ms", 0},
    [OV_KERNEL_GAP] = {"device_kernel_gap_ms", "device kernel gap", "ms", 0},
    [OV_COMM_CPU] = {"comm_cpu_ms", "comm cpu", "ms", 0},
    [OV_COMM_CPU_BWD] = {"comm_cpu_bwd_ms", "comm cpu bwd", "ms", 0},
    [OV_HOST] = {"host", "host", "", 1}};

enum idle_col { ID_RUN, ID_RANK, ID_STREAM, ID_HOST_WAIT, ID_KERNEL_WAIT, ID_OTHER,
                ID_QUEUE_MEAN, ID_QUEUE_MAX, ID_NCOLS };
static const struct table_col idle_cols[ID_NCOLS] = {
    [ID_RUN] = {"run", "run", "", 1},
    [ID_RANK] = {"rank", "rank", "", 0},
    [ID_STREAM] = {"stream", "stream", "", 0},
    [ID_HOST_WAIT] = {"host_wait_ms", "host wait", "ms", 0},
    [ID_KERNEL_WAIT] = {"kernel_wait_ms", "kernel wait", "ms", 0},
    [ID_OTHER] = {"other_ms", "other", "ms", 0},
    [ID_QUEUE_MEAN] = {"queue_mean", "queue mean", "", 0},
    [ID_QUEUE_MAX] = {"queue_max", "queue max", "", 0}};

enum ranks_col { RK_RUN, RK_RANK, RK_FORMAT, RK_HOST, RK_STEPS, RK_OFFSET, RK_METHOD, RK_SOURCE,
                 RK_NCOLS };
static const struct table_col ranks_cols[RK_NCOLS] = {
    [RK_RUN] = {"run", "run", "", 1},
    [RK_RANK] = {"rank", "rank", "", 0},
    [RK_FORMAT] = {"format", "format", "", 1},
    [RK_HOST] = {"host", "host", "", 1},
    [RK_STEPS] = {"steps", "steps", "", 0},
    [RK_OFFSET] = {"clock_offset_ms", "clock offset", "ms", 0},
    [RK_METHOD] = {"clock_method", "clock found by", "", 1},
    [RK_SOURCE] = {"source", "source", "", 1}};

enum stragglers_col { ST_RUN, ST_STEP, ST_RANKS, ST_SLOWEST_RANK, ST_MAX_COMPUTE,
                      ST_MIN_COMPUTE, ST_SKEW, ST_WAIT, ST_NCOLS };
static const struct table_col stragglers_cols[ST_NCOLS] = {
    [ST_RUN] = {"run", "run", "", 1},
    [ST_STEP] = {"step", "step", "", 0},
    [ST_RANKS] = {"ranks", "ranks", "", 0},
    [ST_SLOWEST_RANK] = {"slowest_rank", "slowest", "rank", 0},
    [ST_MAX_COMPUTE] = {"max_compute_ms", "max compute", "ms", 0},
    [ST_MIN_COMPUTE] = {"min_compute_ms", "min compute", "ms", 0},
    [ST_SKEW] = {"skew_ms", "skew", "ms", 0},
    [ST_WAIT] = {"wait_ms", "wait", "ms", 0}};

enum speedup_col { SP_RUN, SP_MODE, SP_DEVICE, SP_WORLD_SIZE, SP_AMP, SP_EPOCHS, SP_IMAGES,
                   SP_WALL, SP_TRAIN, SP_IMAGES_PER_S, SP_SPEEDUP, SP_EFFICIENCY,
                   SP_FINAL_ACCURACY, SP_REPEATS, SP_WALL_MED, SP_WALL_MIN, SP_WALL_MAX,
                   SP_IPS_MED, SP_IPS_MIN, SP_IPS_MAX, SP_SPEEDUP_MED, SP_SPEEDUP_MIN,
                   SP_SPEEDUP_MAX, SP_BASIS, SP_STEADY_STEPS, SP_STEADY_IMAGES, SP_STEADY_S,
                   SP_FIRST_STEP, SP_IPS_WHOLE, SP_SPEEDUP_WHOLE, SP_EFFICIENCY_WHOLE,
                   SP_NCOLS };
static const struct table_col speedup_cols[SP_NCOLS] = {
    [SP_RUN] = {"run", "run", "", 1},
    [SP_MODE] = {"mode", "mode", "", 1},
    [SP_DEVICE] = {"device", "device", "", 1},
    [SP_WORLD_SIZE] = {"world_size", "ranks", "", 0},
    [SP_AMP] = {"amp", "amp", "", 1},
    [SP_EPOCHS] = {"epochs", "epochs", "", 0},
    [SP_IMAGES] = {"images", "images", "", 0},
    [SP_WALL] = {"wall_s", "wall", "s", 0},
    [SP_TRAIN] = {"train_s", "train", "s", 0},
    [SP_IMAGES_PER_S] = {"images_per_s", "throughput", "img/s", 0},
    [SP_SPEEDUP] = {"speedup", "speedup", "x", 0},
    [SP_EFFICIENCY] = {"efficiency", "efficiency", "", 0},
    [SP_FINAL_ACCURACY] = {"final_accuracy", "accuracy", "", 0},
    [SP_REPEATS] = {"repeats", "repeats", "", 0},
    [SP_WALL_MED] = {"wall_s_median", "wall med", "s", 0},
    [SP_WALL_MIN] = {"wall_s_min", "min", "s", 0},
    [SP_WALL_MAX] = {"wall_s_max", "max", "s", 0},
    [SP_IPS_MED] = {"images_per_s_median", "throughput med", "img/s", 0},
    [SP_IPS_MIN] = {"images_per_s_min", "min", "img/s", 0},
    [SP_IPS_MAX] = {"images_per_s_max", "max", "img/s", 0},
    [SP_SPEEDUP_MED] = {"speedup_median", "speedup med", "x", 0},
    [SP_SPEEDUP_MIN] = {"speedup_min", "min", "x", 0},
    [SP_SPEEDUP_MAX] = {"speedup_max", "max", "x", 0},
    [SP_BASIS] = {"basis", "basis", "", 1},
    [SP_STEADY_STEPS] = {"steady_steps", "steady steps", "", 0},
    [SP_STEADY_IMAGES] = {"steady_images", "steady images", "", 0},
    [SP_STEADY_S] = {"steady_s", "steady", "s", 0},
    [SP_FIRST_STEP] = {"first_step_ms", "first step", "ms", 0},
    [SP_IPS_WHOLE] = {"images_per_s_whole_run", "throughput whole run", "img/s", 0},
    [SP_SPEEDUP_WHOLE] = {"speedup_whole_run", "speedup whole run", "x", 0},
    [SP_EFFICIENCY_WHOLE] = {"efficiency_whole_run", "efficiency whole run", "", 0}};

#define NCOLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static double ms(int64_t ns)
{
    return (double)ns * 1e-6;
}


static void fill_phases(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < st[i].nranks; k++) {
            const struct rank_stat *r = &st[i].ranks[k];
            for (int p = 0; p < r->nphases; p++) {
                const struct phase_stat *ps = &r->phases[p];
                double pct;
                table_add_row(t);
                table_set(t, PH_RUN, "%s", rs->runs[i].label);
                table_set(t, PH_RANK, "%d", r->rank);
                table_set(t, PH_PHASE, "%s", strpool_get(&rs->labels, ps->phase));
                table_set(t, PH_COUNT, "%zu", ps->count);
                table_set(t, PH_TOTAL, "%.3f", ms(ps->total_ns));
                table_set(t, PH_MEAN, "%.3f", ps->mean_ns * 1e-6);
                table_set(t, PH_P50, "%.3f", ms(ps->p50_ns));
                table_set(t, PH_P95, "%.3f", ms(ps->p95_ns));
                table_set(t, PH_MAX, "%.3f", ms(ps->max_ns));
                if (analysis_pct_of_step(r, ps, &pct))
                    table_set(t, PH_PCT_OF_STEP, "%.2f", pct);
                table_set(t, PH_WARMUP, "%d", st[i].warmup.steps);
                if (ps->collective) /* communication: its kind and payload */
                    table_set(t, PH_COLLECTIVE, "%s", ps->collective);
                if (ps->collective && ps->bytes >= 0)
                    table_set(t, PH_BYTES, "%lld", (long long)ps->bytes);
                if (ps->has_xfer) { /* a collective of a run with >= 2 ranks */
                    table_set(t, PH_TRANSFER, "%.3f", ms(ps->transfer_ns));
                    table_set(t, PH_WAIT, "%.3f", ms(ps->wait_ns));
                    if (ps->late_rank >= 0) {
                        table_set(t, PH_LATE_RANK, "%d", ps->late_rank);
                        table_set(t, PH_LATE_SHARE, "%.2f", 100.0 * ps->late_share);
                    }
                }
                const char *host = run_rank_host(&rs->runs[i], r->rank);
                if (host && t->ncols > PH_HOST)
                    table_set(t, PH_HOST, "%s", host);
            }
        }
}

static void fill_buckets(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++) {
        int n = rs->runs[i].world_size;
        for (size_t b = 0; b < st[i].nbuckets; b++) {
            const struct bucket_stat *bs = &st[i].buckets[b];
            double algbw, pct;
            table_add_row(t);
            table_set(t, BU_RUN, "%s", rs->runs[i].label);
            table_set(t, BU_WORLD_SIZE, "%d", n);
            table_set(t, BU_BUCKET, "%d", bs->bucket);
            if (bs->params >= 0)
                table_set(t, BU_PARAMS, "%lld", (long long)bs->params);
            if (bs->bytes >= 0)
                table_set(t, BU_BYTES, "%lld", (long long)bs->bytes);
            table_set(t, BU_COUNT, "%zu", bs->count);
            table_set(t, BU_MEAN, "%.3f", analysis_mean_ns(bs->total_ns, bs->count) * 1e-6);
            if (analysis_algbw(bs, &algbw)) {
                table_set(t, BU_ALGBW, "%.3f", algbw);
                table_set(t, BU_BUSBW, "%.3f", analysis_busbw(algbw, n));
            }
            if (analysis_pct_hidden(bs, &pct))
                table_set(t, BU_PCT_HIDDEN, "%.2f", pct);
            double ns, xbw;
            if (analysis_transfer_ns(bs, &ns))
                table_set(t, BU_TRANSFER, "%.3f", ns * 1e-6);
            if (analysis_sync_wait_ns(bs, &ns))
                table_set(t, BU_SYNC_WAIT, "%.3f", ns * 1e-6);
            if (analysis_start_skew_ns(bs, &ns))
                table_set(t, BU_START_SKEW, "%.3f", ns * 1e-6);
            if (analysis_xfer_algbw(bs, &xbw)) {
                table_set(t, BU_XFER_ALGBW, "%.3f", xbw);
                table_set(t, BU_XFER_BUSBW, "%.3f", analysis_busbw(xbw, n));
            }
        }
    }
}

static void fill_overlap(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < st[i].nranks; k++) {
            const struct rank_stat *r = &st[i].ranks[k];
            double pct;
            table_add_row(t);
            table_set(t, OV_RUN, "%s", rs->runs[i].label);
            table_set(t, OV_RANK, "%d", r->rank);
            table_set(t, OV_STEP, "%.3f", ms(r->step_union_ns));
            table_set(t, OV_COMPUTE, "%.3f", ms(r->compute_ns));
            table_set(t, OV_COMM, "%.3f", ms(r->comm_ns));
            table_set(t, OV_EXPOSED_COMM, "%.3f", ms(r->exposed_ns));
            const int cut = rs->runs[i].ranks[k].cut; /* stopped early: no ratio */
            if (!cut && analysis_overlap_pct(r, &pct))
                table_set(t, OV_OVERLAP, "%.2f", pct);
            table_set(t, OV_IDLE, "%.3f", ms(r->idle_ns));
            const char *host = run_rank_host(&rs->runs[i], r->rank);
            if (host && t->ncols > OV_HOST)
                table_set(t, OV_HOST, "%s", host);
            if (r->has_comm_cpu)
                table_set(t, OV_COMM_CPU, "%.3f", r->comm_cpu_ns * 1e-6);
            if (r->has_comm_cpu_bwd)
                table_set(t, OV_COMM_CPU_BWD, "%.3f", r->comm_cpu_bwd_ns * 1e-6);
            if (!r->has_kern)
                continue;
            const struct kernel_sweep *k = &r->kern;
            int64_t ns;
            table_set(t, OV_K_COMPUTE, "%.3f", ms(k->compute.total));
            table_set(t, OV_K_COMM, "%.3f", ms(k->comm.total));
            if (!cut && analysis_kernel_overlap_pct(k, &pct))
                table_set(t, OV_K_OVERLAP, "%.2f", pct);
            table_set(t, OV_K_IDLE, "%.3f", ms(analysis_kernel_idle_ns(k)));
            if (analysis_host_wait_ns(k, &ns))
                table_set(t, OV_HOST_WAIT, "%.3f", ms(ns));
            if (analysis_kernel_gap_ns(k, &ns))
                table_set(t, OV_KERNEL_GAP, "%.3f", ms(ns));
        }
}

/* idle.csv: HTA's idle time breakdown and queue length per rank and stream (imports whose
 * device activity names its stream) */
static void fill_idle(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < st[i].nranks; k++) {
            const struct rank_stat *r = &st[i].ranks[k];
            for (int j = 0; r->has_kern && j < r->kern.nstreams; j++) {
                const struct kernel_stream *s = &r->kern.streams[j];
                table_add_row(t);
                table_set(t, ID_RUN, "%s", rs->runs[i].label);
                table_set(t, ID_RANK, "%d", r->rank);
                table_set(t, ID_STREAM, "%lld", (long long)s->id);
                table_set(t, ID_HOST_WAIT, "%.3f", ms(s->host_wait_ns));
                table_set(t, ID_KERNEL_WAIT, "%.3f", ms(s->kernel_wait_ns));
                table_set(t, ID_OTHER, "%.3f", ms(s->other_ns));
                if (s->queue_points > 0) {
                    table_set(t, ID_QUEUE_MEAN, "%.4f", s->queue_mean);
                    table_set(t, ID_QUEUE_MAX, "%lld", (long long)s->queue_max);
                }
            }
        }
}

static void fill_ranks(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < rs->runs[i].nranks; k++) {
            const struct rank_trace *rt = &rs->runs[i].ranks[k];
            table_add_row(t);
            table_set(t, RK_RUN, "%s", rs->runs[i].label);
            table_set(t, RK_RANK, "%d", rt->rank);
            table_set(t, RK_FORMAT, "%s", rs->runs[i].format ? rs->runs[i].format : "");
            const char *host = rt->host ? rt->host : run_rank_host(&rs->runs[i], rt->rank);
            table_set(t, RK_HOST, "%s", host ? host : "");
            table_set(t, RK_STEPS, "%zu", st[i].ranks[k].nsteps);
            table_set(t, RK_OFFSET, "%.3f", ms(rt->offset_ns));
            table_set(t, RK_METHOD, "%s", rt->clock_method ? rt->clock_method : "");
            table_set(t, RK_SOURCE, "%s", rt->path);
        }
}

static void straggler_row(struct table *t, const char *label, const struct step_stat *s)
{
    table_add_row(t);
    table_set(t, ST_RUN, "%s", label);
    table_set(t, ST_STEP, "%d", s->step);
    table_set(t, ST_RANKS, "%d", s->ranks);
    table_set(t, ST_SLOWEST_RANK, "%d", s->slowest_rank);
    table_set(t, ST_MAX_COMPUTE, "%.3f", ms(s->max_compute_ns));
    table_set(t, ST_MIN_COMPUTE, "%.3f", ms(s->min_compute_ns));
    table_set(t, ST_SKEW, "%.3f", ms(s->skew_ns));
    table_set(t, ST_WAIT, "%.3f", ms(s->wait_ns));
}

static void fill_stragglers(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++)
        for (size_t s = 0; s < st[i].nsteps; s++)
            straggler_row(t, rs->runs[i].label, &st[i].steps[s]);
}

struct worst {
    const struct step_stat *s;
    const char *label;
};

static int cmp_worst(const void *a, const void *b)
{
    const struct worst *x = a, *y = b;
    if (x->s->wait_ns != y->s->wait_ns)
        return (x->s->wait_ns < y->s->wait_ns) - (x->s->wait_ns > y->s->wait_ns);
    return (x->s->step > y->s->step) - (x->s->step < y->s->step);
}

/* The steps with the most waiting, for the terminal and the page. */
static int fill_stragglers_worst(const struct runset *rs, const struct run_stat *st,
                                   struct table *t)
{
    size_t n = 0;
    for (int i = 0; i < rs->n; i++)
        n += st[i].nsteps;
    struct worst *w = malloc((n + 1) * sizeof *w);
    if (!w)
        return error_set("report: out of memory sorting %zu steps", n);
    n = 0;
    for (int i = 0; i < rs->n; i++)
        for (size_t s = 0; s < st[i].nsteps; s++)
            w[n++] = (struct worst){&st[i].steps[s], rs->runs[i].label};
    qsort(w, n, sizeof *w, cmp_worst);
    for (size_t k = 0; k < n && k < STRAGGLERS_SHOWN; k++)
        straggler_row(t, w[k].label, w[k].s);
    free(w);
    return 0;
}

/* The steady state's columns of a run's row and the whole run's beside them. */
static void fill_speedup_steady(const struct run_stat *s, struct table *t)
{
    table_set(t, SP_BASIS, "%s", analysis_basis_names[s->basis]);
    if (s->has_steady) {
        table_set(t, SP_STEADY_STEPS, "%zu", s->steady_steps);
        table_set(t, SP_STEADY_IMAGES, "%lld", (long long)s->steady_images);
        table_set(t, SP_STEADY_S, "%.3f", s->steady_s);
    }
    if (s->warmup.first_ns >= 0)
        table_set(t, SP_FIRST_STEP, "%.3f", ms(s->warmup.first_ns));
    if (s->has_ips_whole)
        table_set(t, SP_IPS_WHOLE, "%.1f", s->images_per_s_whole);
    if (s->has_speedup_whole) {
        table_set(t, SP_SPEEDUP_WHOLE, "%.3f", s->speedup_whole);
        table_set(t, SP_EFFICIENCY_WHOLE, "%.3f", s->efficiency_whole);
    }
}

static void fill_speedup(const struct runset *rs, const struct run_stat *st,
                         struct repeats *rep, struct table *t)
{
    for (int i = 0; i < rs->n; i++) {
        const struct run *r = &rs->runs[i];
        const struct run_stat *s = &st[i];
        table_add_row(t);
        table_set(t, SP_RUN, "%s", r->label);
        table_set(t, SP_MODE, "%s", meta_text(&r->meta.mode));
        table_set(t, SP_DEVICE, "%s", meta_text(&r->meta.device));
        table_set(t, SP_WORLD_SIZE, "%d", r->world_size);
        table_set(t, SP_AMP, "%s", meta_text(&r->meta.amp));
        table_set(t, SP_EPOCHS, "%s", meta_text(&r->meta.epochs));
        if (s->has_images)
            table_set(t, SP_IMAGES, "%lld", (long long)s->images);
        if (s->has_wall)
            table_set(t, SP_WALL, "%.3f", s->wall_s);
        if (s->has_train)
            table_set(t, SP_TRAIN, "%.3f", s->train_s);
        if (s->has_ips)
            table_set(t, SP_IMAGES_PER_S, "%.1f", s->images_per_s);
        if (s->has_speedup) {
            table_set(t, SP_SPEEDUP, "%.3f", s->speedup);
            table_set(t, SP_EFFICIENCY, "%.3f", s->efficiency);
        }
        table_set(t, SP_FINAL_ACCURACY, "%s", meta_text(&r->meta.final_accuracy));
        fill_speedup_steady(s, t);
        struct repeats *p = &rep[i];
        struct spread sp;
        table_set(t, SP_REPEATS, "%d", p->n);
        if (p->nwall > 0) {
            analysis_spread(p->wall, (size_t)p->nwall, &sp);
            table_set(t, SP_WALL_MED, "%.3f", sp.median);
            table_set(t, SP_WALL_MIN, "%.3f", sp.min);
            table_set(t, SP_WALL_MAX, "%.3f", sp.max);
        }
        if (p->nips > 0) {
            analysis_spread(p->ips, (size_t)p->nips, &sp);
            table_set(t, SP_IPS_MED, "%.1f", sp.median);
            table_set(t, SP_IPS_MIN, "%.1f", sp.min);
            table_set(t, SP_IPS_MAX, "%.1f", sp.max);
        }
        if (p->nspeedup > 0) {
            analysis_spread(p->speedup, (size_t)p->nspeedup, &sp);
            table_set(t, SP_SPEEDUP_MED, "%.3f", sp.median);
            table_set(t, SP_SPEEDUP_MIN, "%.3f", sp.min);
            table_set(t, SP_SPEEDUP_MAX, "%.3f", sp.max);
        }
    }
}

/* 1 when some run names the host of one of its ranks */
static int has_hosts(const struct runset *rs)
{
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < rs->runs[i].nranks; k++)
            if (run_rank_host(&rs->runs[i], rs->runs[i].ranks[k].rank))
                return 1;
    return 0;
}

void tables_init(struct report_tables *r)
{
    struct table *t = r->t;
    table_init(&t[TABLE_PHASES], "phases: time per phase, per run and rank", "phases.csv",
               phases_cols, NCOLS(phases_cols));
    table_init(&t[TABLE_OVERLAP], "overlap: compute, communication and idle time per rank "
                                  "(phase-based; k_: kernel-based)",
               "overlap.csv", overlap_cols, NCOLS(overlap_cols));
    table_init(&t[TABLE_BUCKETS], "buckets: all-reduce per gradient bucket", "buckets.csv",
               buckets_cols, NCOLS(buckets_cols));
    table_init(&t[TABLE_STRAGGLERS], "stragglers: per step", "stragglers.csv", stragglers_cols,
               NCOLS(stragglers_cols));
    table_init(&t[TABLE_SPEEDUP], "speedup: per run, against the baseline", "speedup.csv",
               speedup_cols, NCOLS(speedup_cols));
    table_init(&t[TABLE_RANKS], "ranks: where each rank came from and how its clock was aligned",
               "ranks.csv", ranks_cols, NCOLS(ranks_cols));
    table_init(&t[TABLE_IDLE], "idle: HTA's idle time breakdown and queue length per rank and "
                               "stream",
               "idle.csv", idle_cols, NCOLS(idle_cols));
    table_init(&t[TABLE_WORST], "stragglers: the steps where ranks waited longest",
               "stragglers.csv", stragglers_cols, NCOLS(stragglers_cols));
    layers_table_init(&t[TABLE_LAYERS]);
}

int tables_fill(struct report_tables *r, const struct runset *rs, const struct run_stat *st,
                struct repeats *rep)
{
    struct table *t = r->t;
    if (!has_hosts(rs)) { /* no host column */
        t[TABLE_PHASES].ncols = PH_HOST;
        t[TABLE_OVERLAP].ncols = OV_HOST;
    }
    fill_phases(rs, st, &t[TABLE_PHASES]);
    fill_overlap(rs, st, &t[TABLE_OVERLAP]);
    fill_buckets(rs, st, &t[TABLE_BUCKETS]);
    fill_stragglers(rs, st, &t[TABLE_STRAGGLERS]);
    fill_speedup(rs, st, rep, &t[TABLE_SPEEDUP]);
    fill_ranks(rs, st, &t[TABLE_RANKS]);
    fill_idle(rs, st, &t[TABLE_IDLE]);
    int rc = fill_stragglers_worst(rs, st, &t[TABLE_WORST]);
    if (rc == 0)
        rc = layers_fill(rs, st, &t[TABLE_LAYERS]);
    return rc;
}

int tables_write(const struct report_tables *r, const char *out)
{
    int rc = 0;
    for (int k = 0; k < TABLE_WORST && rc == 0; k++)
        rc = table_write_csv(&r->t[k], out);
    if (rc == 0 && r->t[TABLE_LAYERS].nrows > 0) /* --trace full runs only */
        rc = table_write_csv(&r->t[TABLE_LAYERS], out);
    return rc;
}

void tables_free(struct report_tables *r)
{
    for (int k = 0; k < TABLE_COUNT; k++)
        table_free(&r->t[k]);
}
