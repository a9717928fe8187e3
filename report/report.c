/* report.c — report_run and report_main (see report.h): read the inputs (run directories,
 * PyTorch traces), analyse them, then write and print the tables, the timeline, the charts
 * and, on request, the Kineto export. */
#include "report/report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report/advice_view.h"
#include "report/analysis.h"
#include "report/charts.h"
#include "report/diff.h"
#include "report/diff_view.h"
#include "common/error.h"
#include "common/printable.h"
#include "common/vec.h"
#include "report/import.h"
#include "report/kineto.h"
#include "report/layers_view.h"
#include "report/ops_view.h"
#include "report/outfile.h"
#include "report/predict.h"
#include "report/predict_view.h"
#include "report/run.h"
#include "report/table.h"
#include "report/timeline.h"

#define TERMINAL_MAX_ROWS 200
#define STRAGGLERS_SHOWN 10

/* The columns of each table: an enum naming them, then their spec in the same order
 * (designated initialisers: each spec sits at its column's index).  The host column comes
 * last in the per-rank tables, and only when a run names its ranks' hosts (meta.csv
 * host.rankN, which DDP runs write): the tables of runs that do not keep their columns. */
enum phases_col { PH_RUN, PH_RANK, PH_PHASE, PH_COUNT, PH_TOTAL, PH_MEAN, PH_P50, PH_P95,
                  PH_MAX, PH_PCT_OF_STEP, PH_WARMUP, PH_COLLECTIVE, PH_BYTES, PH_HOST,
                  PH_NCOLS };
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
                   OV_KERNEL_GAP, OV_HOST, OV_NCOLS };
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
                   SP_SPEEDUP_MAX, SP_NCOLS };
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
    [SP_SPEEDUP_MAX] = {"speedup_max", "max", "x", 0}};

#define NCOLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int report_is_dir(const char *path);

static double ms(int64_t ns)
{
    return (double)ns * 1e-6;
}

/* a meta.csv value's text as written, "" when absent */
static const char *text_of(const struct meta_value *v)
{
    return v->s ? v->s : "";
}

static void report_phases(const struct runset *rs, const struct run_stat *st, struct table *t)
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
                const char *host = run_rank_host(&rs->runs[i], r->rank);
                if (host && t->ncols > PH_HOST)
                    table_set(t, PH_HOST, "%s", host);
            }
        }
}

static void report_buckets(const struct runset *rs, const struct run_stat *st, struct table *t)
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

static void report_overlap(const struct runset *rs, const struct run_stat *st, struct table *t)
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
static void report_idle(const struct runset *rs, const struct run_stat *st, struct table *t)
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

static void report_ranks(const struct runset *rs, const struct run_stat *st, struct table *t)
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

static void report_straggler_row(struct table *t, const char *label, const struct step_stat *s)
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

static void report_stragglers(const struct runset *rs, const struct run_stat *st, struct table *t)
{
    for (int i = 0; i < rs->n; i++)
        for (size_t s = 0; s < st[i].nsteps; s++)
            report_straggler_row(t, rs->runs[i].label, &st[i].steps[s]);
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
static int report_stragglers_worst(const struct runset *rs, const struct run_stat *st,
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
        report_straggler_row(t, w[k].label, w[k].s);
    free(w);
    return 0;
}

/* ---- repeats (--repeat N of the main job; FORMULAS.md "Repeats") ----
 * Repeat 1 of a main job is DIR/baseline and DIR/ddp, repeat k >= 2 DIR/repeat-k/baseline
 * and DIR/repeat-k/ddp.  A run's repeats are the runs of the same name in repeat-2/,
 * repeat-3/, ... beside it; each repeat's speedup is against that repeat's baseline. */
#define REPORT_MAX_REPEATS 100

struct repeats {
    int n;                     /* repeats read, this run included (1: none beside it) */
    double wall[REPORT_MAX_REPEATS], ips[REPORT_MAX_REPEATS], speedup[REPORT_MAX_REPEATS];
    int nwall, nips, nspeedup; /* the repeats with each figure */
};

static void report_repeat_add(struct repeats *p, const struct run_stat *s)
{
    if (p->n >= REPORT_MAX_REPEATS)
        return;
    p->n++;
    if (s->has_wall)
        p->wall[p->nwall++] = s->wall_s;
    if (s->has_ips)
        p->ips[p->nips++] = s->images_per_s;
    if (s->has_speedup)
        p->speedup[p->nspeedup++] = s->speedup;
}

/* "a/b/c" -> the length of "a/b" (0 when there is no slash) */
static size_t report_parent_len(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    return slash ? (size_t)(slash - dir) : 0;
}

static const char *report_base(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    return slash ? slash + 1 : dir;
}

static int report_same_parent(const char *a, const char *b)
{
    size_t la = report_parent_len(a), lb = report_parent_len(b);
    return la == lb && strncmp(a, b, la) == 0;
}

/* Fill rep[0..rs->n): each ddpprof run's own figures, then those of its repeats, read from
 * the repeat-k/ directories beside it with the same warm-up rule.  0, or -1 (error_set). */
static int report_repeats(const struct runset *rs, const struct run_stat *st, int warmup,
                          struct repeats *rep)
{
    for (int i = 0; i < rs->n; i++)
        report_repeat_add(&rep[i], &st[i]);
    for (int i = 0; i < rs->n; i++) {
        const struct run *r = &rs->runs[i];
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = report_same_parent(rs->runs[j].dir, r->dir);
        if (seen || !r->format || strcmp(r->format, "ddpprof") != 0)
            continue;
        size_t plen = report_parent_len(r->dir);
        for (int k = 2; k <= REPORT_MAX_REPEATS; k++) {
            char *dir = NULL;
            if (asprintf(&dir, "%.*s%srepeat-%d", (int)plen, r->dir, plen ? "/" : "", k) < 0)
                return error_set("report: out of memory");
            if (!report_is_dir(dir)) {
                free(dir);
                break;
            }
            struct runset sub;
            runset_init(&sub);
            struct run_stat *sst = NULL;
            int rc = runset_add_dir(&sub, dir);
            if (rc == 0)
                rc = runset_finish(&sub);
            if (rc == 0 && !(sst = analysis_run_warmup(&sub, warmup)))
                rc = -1;
            for (int q = 0; q < sub.n && rc == 0; q++)
                for (int j = i; j < rs->n; j++)
                    if (report_same_parent(rs->runs[j].dir, r->dir) &&
                        strcmp(report_base(rs->runs[j].dir), report_base(sub.runs[q].dir)) == 0)
                        report_repeat_add(&rep[j], &sst[q]);
            if (sst)
                analysis_free(sst, sub.n);
            runset_free(&sub);
            free(dir);
            if (rc < 0)
                return error_wrap("repeat %d", k);
        }
    }
    return 0;
}

static void report_speedup(const struct runset *rs, const struct run_stat *st,
                           struct repeats *rep, struct table *t)
{
    for (int i = 0; i < rs->n; i++) {
        const struct run *r = &rs->runs[i];
        const struct run_stat *s = &st[i];
        table_add_row(t);
        table_set(t, SP_RUN, "%s", r->label);
        table_set(t, SP_MODE, "%s", text_of(&r->meta.mode));
        table_set(t, SP_DEVICE, "%s", text_of(&r->meta.device));
        table_set(t, SP_WORLD_SIZE, "%d", r->world_size);
        table_set(t, SP_AMP, "%s", text_of(&r->meta.amp));
        table_set(t, SP_EPOCHS, "%s", text_of(&r->meta.epochs));
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
        table_set(t, SP_FINAL_ACCURACY, "%s", text_of(&r->meta.final_accuracy));
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

/* the cautions of a report, one line each (report_cautions_free frees them) */
struct report_cautions {
    char **line;
    size_t n, cap;
};

/* append one line (printf) to c; out of memory drops it */
static void report_line(struct report_cautions *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void report_line(struct report_cautions *c, const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (VEC_RESERVE(c->line, c->cap, c->n + 1)) {
        free(line);
        return;
    }
    c->line[c->n++] = line;
}

static void report_cautions_free(struct report_cautions *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->line[i]);
    free(c->line);
    memset(c, 0, sizeof *c);
}

/* The notes beside the tables: each run's warm-up ("step 1: 643.0 ms, warm-up, not
 * counted") into warm, and the spread of the runs made more than once into spread. */
static void report_notes(const struct runset *rs, const struct run_stat *st,
                         const struct repeats *rep, struct report_cautions *warm,
                         struct report_cautions *spread)
{
    for (int i = 0; i < rs->n; i++) {
        const struct warmup_stat *w = &st[i].warmup;
        const char *how = w->detected ? "detected: the first step within 50% of the median "
                                        "of the next 5, at most 10 and a quarter of the "
                                        "steps; --warmup-steps N to choose"
                                      : "--warmup-steps";
        if (w->steps == 1)
            report_line(warm, "run %s: step %d: %.1f ms, warm-up, not counted in the per-step "
                              "statistics (%s)",
                        rs->runs[i].label, w->first_step, ms(w->first_ns), how);
        else if (w->steps > 1)
            report_line(warm, "run %s: steps %d-%d: warm-up (step %d: %.1f ms), not counted in "
                              "the per-step statistics (%s)",
                        rs->runs[i].label, w->first_step, w->last_step, w->first_step,
                        ms(w->first_ns), how);
        else if (w->first_ns >= 0 && w->detected)
            report_line(warm, "run %s: no warm-up step (step %d: %.1f ms had settled)",
                        rs->runs[i].label, w->first_step, ms(w->first_ns));
        const struct repeats *p = &rep[i];
        if (p->n < 2)
            continue;
        double v[REPORT_MAX_REPEATS];
        struct spread a, b;
        char sp[128] = "";
        if (p->nspeedup > 0) {
            memcpy(v, p->speedup, (size_t)p->nspeedup * sizeof *v);
            analysis_spread(v, (size_t)p->nspeedup, &a);
            snprintf(sp, sizeof sp, "speedup %.2fx (%.2f-%.2fx), ", a.median, a.min, a.max);
        }
        memcpy(v, p->ips, (size_t)p->nips * sizeof *v);
        if (p->nips > 0)
            analysis_spread(v, (size_t)p->nips, &a);
        memcpy(v, p->wall, (size_t)p->nwall * sizeof *v);
        if (p->nwall > 0)
            analysis_spread(v, (size_t)p->nwall, &b);
        if (p->nips > 0 && p->nwall > 0)
            report_line(spread, "run %s over %d repeats, median (min-max): %sthroughput %.1f "
                                "(%.1f-%.1f) img/s, wall %.3f (%.3f-%.3f) s",
                        rs->runs[i].label, p->n, sp, a.median, a.min, a.max, b.median, b.min,
                        b.max);
    }
}

/* The cautions beside the speedup table (report/FORMULAS.md "Figures measured under
 * load"): a rank whose trace ends early (run.h cut), a run measured on a busy host, a speedup that compares such a run, an
 * efficiency above 1.  Appended to *t, one line each (none: t->n stays 0). */
static void report_cautions(const struct runset *rs, const struct run_stat *st,
                            struct report_cautions *t)
{
    int base = analysis_baseline(rs);
    struct run_load base_load = {0};
    int over_ranks = 0, over_cores = 0, base_over = 0;
    if (base >= 0) {
        analysis_load(&rs->runs[base], &base_load);
        base_over = analysis_oversubscribed(&rs->runs[base], &over_ranks, &over_cores);
        base_load.loaded |= base_over;
    }
    for (int i = 0; i < rs->n; i++) {
        const struct run *r = &rs->runs[i];
        for (int k = 0; k < r->nranks; k++) { /* a rank that stopped early (run.h cut) */
            const struct rank_trace *rt = &r->ranks[k];
            if (rt->cut)
                report_line(t, "run %s: rank %d's trace ends at step %lld of %lld — it "
                               "stopped there: its overlap%s left empty and its phase times "
                               "cover only the steps it has",
                            r->label, rt->rank, (long long)rt->last_step,
                            (long long)rt->run_steps,
                            k == 0 && !st[i].has_ips ? " and the run's throughput are"
                                                     : " is");
        }
        char flight[512] = ""; /* the comm's flight recorder after a failed collective */
        size_t flen = 0;
        for (int k = 0; k < r->nranks && flen < sizeof flight - 200; k++)
            if (r->ranks[k].flight)
                flen += (size_t)snprintf(flight + flen, sizeof flight - flen, "%srank %d %s %s",
                                         flen ? ", " : "", r->ranks[k].rank,
                                         flen ? "in" : "was in", r->ranks[k].flight);
        if (flen)
            report_line(t, "run %s: a collective failed; the flight recorder (rankN.flight.csv) "
                           "says %s",
                        r->label, flight);
        struct run_load l;
        analysis_load(r, &l);
        int over = analysis_oversubscribed(r, &over_ranks, &over_cores);
        if (over)
            report_line(t, "run %s was oversubscribed: %d CPU ranks on %d cores "
                           "(--oversubscribe), so the ranks took turns on the cores: its times "
                           "are slower than this machine's",
                        r->label, over_ranks, over_cores);
        if (l.loaded) {
            char cores[32] = "", steal[80] = "", load[96] = "";
            if (l.cores)
                snprintf(cores, sizeof cores, " of %d", l.cores);
            if (l.has_steal && l.steal >= ANALYSIS_LOADED_STEAL)
                snprintf(steal, sizeof steal, "; the hypervisor took %.0f%% of the CPU time",
                         100.0 * l.steal);
            if (l.has_load && l.load_end >= 0.0)
                snprintf(load, sizeof load, " (load average %.2f at the start, %.2f at the end)",
                         l.load_start, l.load_end);
            else if (l.has_load)
                snprintf(load, sizeof load, " (load average %.2f at the start)", l.load_start);
            if (l.has_other)
                report_line(t, "run %s was measured under load: other programs kept %.2f%s "
                               "cores busy on average%s%s: its times are slower than this "
                               "machine's",
                            r->label, l.other_cores, cores, load, steal);
            else
                report_line(t, "run %s was measured under load%s%s: its times are slower than "
                               "this machine's",
                            r->label, load, steal);
        }
        if (!st[i].has_speedup || i == base)
            continue;
        l.loaded |= over; /* the speedup of an oversubscribed run is no scaling either */
        if (l.loaded || base_load.loaded)
            report_line(t, "the speedup of %s (%.2fx) compares runs measured under load (%s): "
                           "it is not this machine's scaling; rerun on an idle machine",
                        r->label, st[i].speedup,
                        l.loaded && base_load.loaded ? "both"
                        : l.loaded                    ? r->label
                                                      : "the baseline");
        if (st[i].efficiency > 1.0)
            report_line(t, "the efficiency of %s is %.2f, above 1 (faster than linear): "
                           "usually the baseline was slowed (load, a cold start), not DDP; "
                           "check the baseline before reading it as scaling",
                        r->label, st[i].efficiency);
    }
}

/* The directory of a file path ("a/b.json" -> "a", "b.json" -> "."). */
static char *report_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *d = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!d)
        error_set("report: out of memory");
    return d;
}

static int report_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Read every input into rs: ddpprof run directories (or parents of runs), directories of
 * PyTorch traces (one run each), and trace files (all of them: one run, read last). */
static int report_inputs(struct runset *rs, const char *const *inputs, int n)
{
    if (!report_is_dir(inputs[0]) && !(rs->default_out = report_dirname(inputs[0])))
        return -1;
    char **loose = calloc((size_t)n + 1, sizeof *loose);
    int nloose = 0, rc = 0;
    if (!loose)
        return error_set("report: out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        const char *in = inputs[i];
        struct stat st;
        if (stat(in, &st) != 0) {
            rc = error_set("%s: no such run directory or trace file (%s)", in, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            rc = import_dir(rs, in);
        } else if (S_ISREG(st.st_mode)) {
            loose[nloose++] = (char *)in;
        } else {
            rc = error_set("%s: not a run directory or a trace file", in);
        }
    }
    if (rc == 0 && nloose > 0)
        rc = import_run(rs, loose[0], loose, nloose);
    free(loose);
    return rc;
}

/* 1 when some run names the host of one of its ranks */
static int report_has_hosts(const struct runset *rs)
{
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < rs->runs[i].nranks; k++)
            if (run_rank_host(&rs->runs[i], rs->runs[i].ranks[k].rank))
                return 1;
    return 0;
}

/* For the terminal: "# run n0: 4 ranks on 2 hosts, one clock (rank 0's)" for a run on
 * several hosts, and the restarts of an elastic run with their causes */
static void report_print_nodes(const struct runset *rs, FILE *out)
{
    for (int i = 0; i < rs->n; i++) {
        const struct run *r = &rs->runs[i];
        int hosts = 0;
        for (int k = 0; k < r->nranks; k++) {
            const char *h = run_rank_host(r, r->ranks[k].rank);
            int seen = !h;
            for (int j = 0; j < k && !seen; j++) {
                const char *o = run_rank_host(r, r->ranks[j].rank);
                seen = o && strcmp(o, h) == 0;
            }
            hosts += !seen;
        }
        if (hosts > 1)
            fprintf(out, "# run %s: %d ranks on %d hosts, one clock (rank 0's)\n", r->label,
                    r->nranks, hosts);
        /* restarts is at most the file's rows: a damaged count prints no flood */
        const struct meta_value *restarts = &r->meta.restarts;
        int64_t n = restarts->s && restarts->i > 0 ? restarts->i : 0;
        if ((size_t)n > r->meta.rows)
            n = (int64_t)r->meta.rows;
        for (int k = 1; k <= n; k++) {
            const struct meta_value *cause = meta_at(&r->meta.restart_cause, k);
            fprintf(out, "# run %s: restart %d of the job after: %s\n", r->label, k,
                    cause ? cause->s : "(cause not recorded)");
        }
        if (n > 0 && r->meta.resumed_step.s)
            fprintf(out, "# run %s: resumed at step %s (epoch %s); the failed attempts' traces "
                    "are in %s/attempt-*\n",
                    r->label, r->meta.resumed_step.s, text_of(&r->meta.resumed_epoch), r->dir);
    }
}

/* The diff of two runs (report/diff.h) into *d and out/diff.csv; *made 1 when there is
 * one.  how: REPORT_DIFF_ASKED (a diff that cannot be made is an error) or
 * REPORT_DIFF_AUTO (a main job's baseline and DDP run; otherwise, or when it cannot be
 * made, none). */
static int report_diff(const struct runset *rs, const struct run_stat *st,
                       const char *const *inputs, int n, int how, struct diff_view *d,
                       int *made, const char *out)
{
    int a, b;
    *made = 0;
    if (how == REPORT_DIFF_AUTO && (rs->n != 2 || analysis_baseline(rs) < 0))
        return 0;
    struct diff_result r = {0};
    int rc = diff_pick(rs, inputs, n, &a, &b);
    if (rc == 0)
        rc = diff_compute(rs, st, a, b, &r);
    if (rc == 0)
        rc = diff_view_make(d, &r, rs);
    diff_free(&r);
    if (rc == 0)
        rc = table_write_csv(&d->full, out);
    if (rc == 0) {
        *made = 1;
        return 0;
    }
    diff_view_free(d);
    if (how == REPORT_DIFF_ASKED)
        return -1;
    return 0; /* an automatic diff that cannot be made is left out (ddpprof diff says why) */
}

static void report_print_diff(const struct diff_view *d, FILE *terminal)
{
    table_print(&d->top, terminal, TERMINAL_MAX_ROWS);
    fprintf(terminal, "#  diff %s\n", d->summary ? d->summary : "");
}

int report_run(const char *const *run_dirs, int n, const char *out_dir, FILE *terminal)
{
    struct report_opts o = {.out_dir = out_dir};
    return report_run_opts(run_dirs, n, &o, terminal);
}

static int report_run_to(const char *const *inputs, int n, const struct report_opts *opts,
                         FILE *terminal);

int report_run_opts(const char *const *inputs, int n, const struct report_opts *opts,
                    FILE *terminal)
{
    /* names from the traces (ops, kernels, hosts, paths) reach the terminal with their
     * control bytes escaped: no escape sequence of theirs retitles or drives it */
    FILE *shown = terminal ? text_terminal_stream(terminal) : NULL;
    int rc = report_run_to(inputs, n, opts, shown ? shown : terminal);
    if (shown)
        fclose(shown); /* a write that failed left its error on terminal, for the caller */
    return rc;
}

static int report_run_to(const char *const *inputs, int n, const struct report_opts *opts,
                         FILE *terminal)
{
    if (n < 1 || !inputs)
        return error_set("report: no run directory or trace given (%s)", report_usage());
    struct runset rs;
    runset_init(&rs);
    rs.hta_defaults = opts && opts->hta_defaults;
    struct run_stat *st = NULL;
    enum { T_PHASES, T_OVERLAP, T_BUCKETS, T_STRAGGLERS, T_SPEEDUP, T_RANKS, T_IDLE, T_WORST,
           T_LAYERS, T_COUNT };
    struct table t[T_COUNT];
    table_init(&t[T_PHASES], "phases: time per phase, per run and rank", "phases.csv",
               phases_cols, NCOLS(phases_cols));
    table_init(&t[T_OVERLAP], "overlap: compute, communication and idle time per rank "
                              "(phase-based; k_: kernel-based)",
               "overlap.csv", overlap_cols, NCOLS(overlap_cols));
    table_init(&t[T_BUCKETS], "buckets: all-reduce per gradient bucket", "buckets.csv",
               buckets_cols, NCOLS(buckets_cols));
    table_init(&t[T_STRAGGLERS], "stragglers: per step", "stragglers.csv", stragglers_cols,
               NCOLS(stragglers_cols));
    table_init(&t[T_SPEEDUP], "speedup: per run, against the baseline", "speedup.csv",
               speedup_cols, NCOLS(speedup_cols));
    table_init(&t[T_RANKS], "ranks: where each rank came from and how its clock was aligned",
               "ranks.csv", ranks_cols, NCOLS(ranks_cols));
    table_init(&t[T_IDLE], "idle: HTA's idle time breakdown and queue length per rank and stream",
               "idle.csv", idle_cols, NCOLS(idle_cols));
    table_init(&t[T_WORST], "stragglers: the steps where ranks waited longest",
               "stragglers.csv", stragglers_cols, NCOLS(stragglers_cols));
    layers_table_init(&t[T_LAYERS]);
    struct ops_tables ops; /* ops.csv: imports that name their ops (report/ops.h) */
    ops_tables_init(&ops);
    int rc = report_inputs(&rs, inputs, n);
    if (rc == 0)
        rc = runset_finish(&rs);
    if (rc == 0 && !report_has_hosts(&rs)) { /* no host column */
        t[T_PHASES].ncols = PH_HOST;
        t[T_OVERLAP].ncols = OV_HOST;
    }
    const char *out = opts && opts->out_dir ? opts->out_dir : rs.default_out;
    char *diff_out = NULL; /* ddpprof diff A B: FIRST/diff, not A's own report */
    if (rc == 0 && opts && opts->diff_only && !opts->out_dir && n == 2 && out) {
        if (asprintf(&diff_out, "%s/diff", out) < 0)
            rc = error_set("report: out of memory");
        else
            out = diff_out;
    }
    if (rc == 0)
        rc = outfile_mkdirs(out);
    int warmup = opts && opts->warmup_given ? opts->warmup_steps : ANALYSIS_WARMUP_AUTO;
    if (rc == 0 && !(st = analysis_run_warmup(&rs, warmup)))
        rc = -1;
    struct report_cautions cautions = {0}, warm = {0}, spread = {0};
    struct repeats *rep = NULL;
    struct diff_view diff;
    int has_diff = 0;
    memset(&diff, 0, sizeof diff);
    if (rc == 0 && opts && opts->diff)
        rc = report_diff(&rs, st, inputs, n, opts->diff, &diff, &has_diff, out);
    if (rc == 0 && !(rep = calloc((size_t)rs.n + 1, sizeof *rep)))
        rc = error_set("report: out of memory");
    if (rc == 0)
        rc = report_repeats(&rs, st, warmup, rep);
    if (rc == 0) {
        report_notes(&rs, st, rep, &warm, &spread);
        report_cautions(&rs, st, &cautions);
        report_phases(&rs, st, &t[T_PHASES]);
        report_overlap(&rs, st, &t[T_OVERLAP]);
        report_buckets(&rs, st, &t[T_BUCKETS]);
        report_stragglers(&rs, st, &t[T_STRAGGLERS]);
        report_speedup(&rs, st, rep, &t[T_SPEEDUP]);
        report_ranks(&rs, st, &t[T_RANKS]);
        report_idle(&rs, st, &t[T_IDLE]);
        rc = report_stragglers_worst(&rs, st, &t[T_WORST]);
        ops_tables_fill(&ops, &rs);
    }
    if (rc == 0)
        rc = layers_fill(&rs, st, &t[T_LAYERS]);
    struct advice adv = {0}; /* the verdict and recommendations: advice.csv, page, terminal */
    struct table adv_t;
    table_init(&adv_t, "advice: every candidate, best first", "advice.csv", advice_cols,
               advice_ncols);
    struct predict_whatif wf = {.run = -1}; /* predict's what-if: the page's and advice's */
    if (rc == 0)
        rc = predict_whatif_figures(&rs, st, &wf);
    if (rc == 0 && (rc = advice_make(&rs, st, &wf, &adv)) == 0) {
        advice_table(&adv, &rs, &adv_t);
        rc = table_write_csv(&adv_t, out);
    }
    for (int k = 0; k < T_WORST && rc == 0; k++)
        rc = table_write_csv(&t[k], out);
    if (rc == 0 && t[T_LAYERS].nrows > 0) /* --trace full runs only */
        rc = table_write_csv(&t[T_LAYERS], out);
    if (rc == 0)
        rc = ops_tables_write(&ops, out);
    if (rc == 0) {
        char *path = NULL;
        if (asprintf(&path, "%s/timeline.json", out) < 0)
            rc = error_set("report: out of memory");
        else
            rc = timeline_write(&rs, st, path,
                                opts && opts->timeline_full ? 0 : TIMELINE_MAX_BYTES);
        free(path);
    }
    char **whatif = NULL; /* the DDP run's predictions (report/predict.h) */
    size_t nwhatif = 0;
    if (rc == 0)
        rc = predict_whatif(&rs, &wf, &whatif, &nwhatif);
    if (rc == 0) {
        const struct table *shown[8] = {&t[T_SPEEDUP], &t[T_OVERLAP], &t[T_PHASES],
                                        &t[T_BUCKETS], &t[T_WORST], &t[T_RANKS]};
        int nshown = 6;
        if (ops.cpu.nrows > 0)
            shown[nshown++] = &ops.cpu;
        if (ops.kernel.nrows > 0)
            shown[nshown++] = &ops.kernel;
        struct report_cautions notes = {0};
        for (size_t i = 0; i < spread.n; i++)
            report_line(&notes, "%s", spread.line[i]);
        for (size_t i = 0; i < warm.n; i++)
            report_line(&notes, "%s", warm.line[i]);
        for (size_t i = 0; i < nwhatif; i++)
            report_line(&notes, "%s", whatif[i]);
        const struct chart_section sect = {diff_write_html, &diff};
        rc = charts_write_sections(&rs, st, shown, nshown, (const char *const *)cautions.line,
                                   cautions.n, (const char *const *)notes.line, notes.n, &adv,
                                   &sect, has_diff, out);
        report_cautions_free(&notes);
    }
    int kineto_files = 0;
    if (rc == 0 && opts && opts->kineto)
        rc = kineto_write(&rs, out, &kineto_files);
    if (rc == 0 && terminal && opts && opts->diff_only) {
        if (has_diff)
            report_print_diff(&diff, terminal);
        fprintf(terminal, "#\n# diff in %s/diff.csv and report.html (and the report's tables "
                          "beside them)\n", out);
        fflush(terminal);
    } else if (rc == 0 && terminal) {
        table_print(&t[T_PHASES], terminal, TERMINAL_MAX_ROWS);
        for (size_t i = 0; i < warm.n; i++)
            fprintf(terminal, "#  %s\n", warm.line[i]);
        table_print(&t[T_OVERLAP], terminal, TERMINAL_MAX_ROWS);
        if (t[T_IDLE].nrows > 0)
            table_print(&t[T_IDLE], terminal, TERMINAL_MAX_ROWS);
        table_print(&t[T_BUCKETS], terminal, TERMINAL_MAX_ROWS);
        if (t[T_STRAGGLERS].nrows > 0) {
            table_print(&t[T_WORST], terminal, STRAGGLERS_SHOWN);
            fprintf(terminal, "#  (%zu step(s) in all, in stragglers.csv)\n",
                    t[T_STRAGGLERS].nrows);
        }
        table_print(&t[T_SPEEDUP], terminal, TERMINAL_MAX_ROWS);
        for (size_t i = 0; i < spread.n; i++)
            fprintf(terminal, "#  %s\n", spread.line[i]);
        for (size_t i = 0; i < cautions.n; i++)
            fprintf(terminal, "#  caution: %s\n", cautions.line[i]);
        for (size_t i = 0; i < nwhatif; i++)
            fprintf(terminal, "%s# %s\n", i ? "" : "#\n", whatif[i]);
        table_print(&t[T_RANKS], terminal, TERMINAL_MAX_ROWS);
        if (t[T_LAYERS].nrows > 0)
            fprintf(terminal, "# layers: %zu row(s) (per run, rank and layer) in layers.csv, "
                    "the roofline in report.html\n", t[T_LAYERS].nrows);
        if (ops.cpu.nrows > 0)
            table_print(&ops.cpu, terminal, OPS_TOP);
        if (ops.kernel.nrows > 0)
            table_print(&ops.kernel, terminal, OPS_TOP);
        report_print_nodes(&rs, terminal);
        if (has_diff)
            report_print_diff(&diff, terminal);
        fprintf(terminal,
                "#\n# report in %s: phases.csv overlap.csv buckets.csv stragglers.csv "
                "speedup.csv ranks.csv idle.csv advice.csv %s%stimeline.json report.html "
                "phases.svg speedup.svg\n",
                out, ops.all.nrows > 0 ? "ops.csv " : "", has_diff ? "diff.csv " : "");
        if (opts && opts->kineto)
            fprintf(terminal, "# Kineto JSON: %d rank file(s) in %s/kineto/\n", kineto_files,
                    out);
        advice_print(&adv, terminal); /* the last lines: what to do */
        fflush(terminal);
    }
    advice_free(&adv);
    table_free(&adv_t);
    for (size_t i = 0; i < nwhatif; i++)
        free(whatif[i]);
    free(whatif);
    report_cautions_free(&cautions);
    report_cautions_free(&warm);
    report_cautions_free(&spread);
    diff_view_free(&diff);
    free(diff_out);
    free(rep);
    for (int k = 0; k < T_COUNT; k++)
        table_free(&t[k]);
    ops_tables_free(&ops);
    analysis_free(st, rs.n);
    runset_free(&rs);
    return rc;
}

const char *report_usage(void)
{
    return "usage: ddpprof report RUN_DIR|TRACE_DIR|TRACE.json[.gz]... [--out DIR] [--kineto] "
           "[--timeline steps|full] [--warmup-steps N] [--hta-defaults] [--diff]; ddpprof "
           "diff A B | ddpprof diff MAIN_JOB_DIR [--out DIR] [--warmup-steps N]";
}

int report_main(int argc, char **argv)
{
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    struct report_opts o = {0};
    int n = 0;
    if (!inputs)
        return error_set("report: out of memory");
    if (strcmp(argv[0], "diff") == 0) { /* ddpprof diff A B: report --diff, the diff alone */
        o.diff = REPORT_DIFF_ASKED;
        o.diff_only = 1;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0) {
            if (i + 1 >= argc) {
                free(inputs);
                return error_set("report: --out needs a directory (%s)", report_usage());
            }
            o.out_dir = argv[++i];
        } else if (strcmp(argv[i], "--kineto") == 0) {
            o.kineto = 1;
        } else if (strcmp(argv[i], "--timeline") == 0) {
            if (i + 1 >= argc || (strcmp(argv[i + 1], "full") != 0 &&
                                  strcmp(argv[i + 1], "steps") != 0)) {
                free(inputs);
                return error_set("report: --timeline is 'steps' (the default: at most 64 MiB) "
                                 "or 'full' (%s)", report_usage());
            }
            o.timeline_full = strcmp(argv[++i], "full") == 0;
        } else if (strcmp(argv[i], "--hta-defaults") == 0) {
            o.hta_defaults = 1;
        } else if (strcmp(argv[i], "--diff") == 0) {
            o.diff = REPORT_DIFF_ASKED;
        } else if (strcmp(argv[i], "--warmup-steps") == 0) {
            char *end = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 >= argc || end == argv[i + 1] || *end || v < 0 || v > 1000000) {
                free(inputs);
                return error_set("report: --warmup-steps needs a step count in [0, 1000000] "
                                 "(%s)", report_usage());
            }
            o.warmup_given = 1;
            o.warmup_steps = (int)v;
            i++;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s\n\n"
                   "  RUN_DIR     a ddpprof run directory, or a parent of runs (baseline/, ddp/)\n"
                   "  TRACE_DIR   a directory of PyTorch profiler traces, one per rank, as\n"
                   "              torch.profiler.tensorboard_trace_handler writes them\n"
                   "  TRACE.json  PyTorch profiler trace files (Kineto JSON or the legacy\n"
                   "              exporter's array; .gz too): all the files given form one run\n"
                   "  --out DIR   where the tables go (default: the first input's directory)\n"
                   "  --kineto    also write each ddpprof rank as Kineto JSON in DIR/kineto/\n"
                   "  --timeline steps|full  timeline.json: at most 64 MiB, every rank's steps\n"
                   "              around each run's median and slowest step when all of it\n"
                   "              is more (steps, the default; its otherData.rows says what\n"
                   "              it kept), or every row (full)\n"
                   "  --warmup-steps N  leave each run's first N steps out of the per-step\n"
                   "              statistics (default: until the step time settles,\n"
                   "              report/FORMULAS.md \"Warm-up steps\"; 0 keeps them all)\n"
                   "  --hta-defaults  PyTorch traces' kernel columns (k_, idle.csv) as Holistic\n"
                   "              Trace Analysis' default settings give them: times rounded\n"
                   "              to µs, the last ProfilerStep's kernels left out\n"
                   "  --diff      also diff.csv and a diff section on the page: the second\n"
                   "              run against the first (one main-job directory: its ddp run\n"
                   "              against its baseline), per phase, layer and bucket, each\n"
                   "              row's share of the step-time change (ddpprof diff A B:\n"
                   "              the same, the terminal showing the diff alone)\n",
                   report_usage());
            free(inputs);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            error_set("report: unknown option '%s' (%s)", argv[i], report_usage());
            free(inputs);
            return -1;
        } else {
            inputs[n++] = argv[i];
        }
    }
    if (!o.diff && n == 1) /* a main job's directory: diff.csv as the main job writes it */
        o.diff = REPORT_DIFF_AUTO;
    int rc = n == 0 ? error_set("report: no run directory or trace given (%s)", report_usage())
                    : report_run_opts(inputs, n, &o, stdout);
    free(inputs);
    return rc;
}
