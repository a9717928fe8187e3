/* import_core.c — the import core (see import_core.h and report/FORMULAS.md "Imported
 * PyTorch traces"); report/input/import.c hands it the inputs, each through its importer.
 *
 * One rank is read in one pass: the importer's events go either
 *   - into the host window (steps, phases, collectives, ops with input shapes), walked in
 *     start order into records: one per step and per call, and one backward span per run of
 *     backward ops;
 *   - into the launch map (correlation -> launch time, a hash map keyed by the full
 *     correlation id: every launch is kept until the end of the file);
 *   - into the device window (kernels, memcpy, memset), walked in start order into the
 *     kernel sweep (kernel_sweep_add), the collective kernels' records, the device
 *     span of the phase whose host span holds each launch, and the op table's kernels;
 *   - into the op window (every named host op; IMPORT_OPS_WINDOW), walked in start order
 *     into the op table (report/input/ops.h: key_averages' self times, ops.csv; what comes later
 *     than the window is nested there among the ops it keeps).
 * At the end of the file the records are cut into steps, the all-reduces numbered into
 * buckets by their order within the step, and turned into rows; at the end of the run the
 * steps are renumbered over its ranks and the clocks aligned. */
#include "report/input/import_core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/printable.h"
#include "common/vec.h"
#include "report/input/import_group.h"
#include "report/input/kernels.h"
#include "report/input/ops.h"
#include "report/input/ptjson.h"
#include "report/input/reorder.h"
#include "report/input/sort.h"

#define IMPORT_LAUNCHES 4096 /* launch map's first slots (a power of two; it grows) */
#define IMPORT_LOOKBACK 64   /* records searched back for the phase of a launch */
#define IMPORT_OPS_WINDOW 4096 /* ops per reorder window (later ones: report/input/ops.h) */
#define IMPORT_MAX_OFFSET 100000000000000000LL /* a clock offset at most 1e17 ns (3 years) */

/* ---- records ---- */

enum rec_kind {
    R_STEP,      /* IMPORT_STEP (val: N) */
    R_FORWARD,   /* IMPORT_FORWARD (val: batch size, -1 unknown) */
    R_BACKWARD,  /* a run of IMPORT_BACKWARD ops */
    R_OPTIMIZER, /* IMPORT_OPTIMIZER */
    R_DATA,      /* IMPORT_DATA */
    R_EVAL,      /* IMPORT_EVAL */
    R_COLL,      /* IMPORT_COLL: a backend's collective op (val: bytes) */
    R_PARAMS,    /* IMPORT_PARAMS (val: bytes; used: taken by a COLL) */
    R_DIMS,      /* (window only) IMPORT_DIMS (val: the first input's size) */
    R_NCCL,      /* a device all-reduce: a communication kernel (val: bytes) */
    R_ANNOT,     /* a device range of an all-reduce (fallback for unknown kernels) */
    /* every other collective (coll: its kind; val: bytes): */
    R_OCOLL,     /* IMPORT_COLL: a backend's op, gloo:broadcast, ... (the row) */
    R_OISSUE,    /* IMPORT_ISSUE: the op that issued it, c10d::broadcast_, ... */
    R_OPARAMS,   /* IMPORT_PARAMS: its description, record_param_comms (bytes) */
    R_ODEV       /* a device one: ncclKernel_Broadcast_..., ... */
};

static const enum trace_phase rec_phase[] = {
    [R_STEP] = TRACE_PHASE_STEP,         [R_FORWARD] = TRACE_PHASE_FORWARD,
    [R_BACKWARD] = TRACE_PHASE_BACKWARD, [R_OPTIMIZER] = TRACE_PHASE_OPTIMIZER,
    [R_DATA] = TRACE_PHASE_DATA,         [R_EVAL] = TRACE_PHASE_EVAL,
    [R_DIMS] = TRACE_PHASE_SETUP};

/* The phase of each collective's rows.  Every collective is communication; the all-reduces
 * are the gradient buckets (imp_number_buckets), every other kind one row per call
 * (imp_other_collectives). */
static const enum trace_phase coll_phase[IMPORT_COLL_COUNT] = {
    [IMPORT_COLL_NONE] = TRACE_PHASE_ALLREDUCE,
    [IMPORT_COLL_ALL_REDUCE] = TRACE_PHASE_ALLREDUCE,
    [IMPORT_COLL_BROADCAST] = TRACE_PHASE_COMM_BROADCAST,
    [IMPORT_COLL_ALL_GATHER] = TRACE_PHASE_COMM_ALLGATHER,
    [IMPORT_COLL_REDUCE_SCATTER] = TRACE_PHASE_COMM_REDUCE_SCATTER,
    [IMPORT_COLL_REDUCE] = TRACE_PHASE_COMM_REDUCE,
    [IMPORT_COLL_BARRIER] = TRACE_PHASE_BARRIER,
    [IMPORT_COLL_ALL_REDUCE_OTHER] = TRACE_PHASE_COMM_ALLREDUCE};

/* A host-window entry and a kept record (the window entries are its first 48 bytes). */
struct rec {
    int64_t start, end; /* ns on the file's clock */
    int64_t tid;
    int64_t val;        /* see enum rec_kind */
    int64_t launch;     /* R_NCCL: when the host launched it (-1 unknown) */
    int64_t ext;        /* a span's External id (0 or less: none; import_span) */
    uint32_t name;      /* id in the runset's names */
    uint8_t kind;
    uint8_t used;
    uint8_t coll;       /* enum import_coll: R_COLL .. R_ANNOT (all-reduce), R_O* */
    /* not in the window: */
    int64_t dev_start, dev_end; /* device span of the kernels it launched (-1 none) */
    int32_t step, bucket;       /* set at the end */
};

#define CPU_REC_BYTES 56
_Static_assert(offsetof(struct rec, dev_start) >= CPU_REC_BYTES, "window entries fit");

static int rec_is_coll(const struct rec *r)
{
    return r->kind == R_COLL || r->kind == R_PARAMS || r->kind == R_NCCL || r->kind == R_ANNOT ||
           r->kind >= R_OCOLL;
}

static enum trace_phase rec_phase_of(const struct rec *r)
{
    return rec_is_coll(r) ? coll_phase[r->coll] : rec_phase[r->kind];
}

/* A device-window entry. */
struct dev_item {
    int64_t start, end;
    int64_t launch, corr, bytes; /* launch -1: not yet known */
    int64_t stream;              /* -1: not given */
    uint32_t name;               /* a collective's: id in names; else STRPOOL_NONE */
    uint8_t cls;                 /* enum kernel_class */
    uint8_t coll;                /* enum import_coll; IMPORT_COLL_NONE: not a collective */
    uint8_t has_corr;
    uint8_t pad[5];
};

/* An op-window entry: ordered by (start, end desc, seq), seq counting the ops as they come,
 * so that ops of the same range nest in file order as key_averages nests them. */
struct op_item {
    int64_t start, end, seq, tid;
    uint32_t name;
    uint8_t pad[4];
};

struct launch_slot {
    int64_t corr, ts; /* corr -1: empty */
};

/* correlation id -> launch time: open addressing, linear probing, at most half full */
struct launch_map {
    struct launch_slot *slot;
    size_t cap, n; /* cap: a power of two */
};

struct rec_list {
    struct rec *v;
    size_t n, cap;
};

/* What the rank came to, for the run. */
struct imp_result {
    int64_t images; /* sum of the batch sizes of the forwards in steps, -1 unknown */
    int32_t first_step, steps;
    int device_rows; /* the all-reduce rows of the device, not the host, count */
};

/* One rank being read. */
struct import_rank {
    const char *path;
    struct runset *rs;
    struct import_sink *sink;
    int index;             /* in the sink's run */
    struct reorder cpu, dev, ops;
    int64_t op_seq;
    struct op_table optab; /* ops.csv's figures (report/input/ops.h) */
    struct launch_map launch;
    struct rec_list recs;  /* host records, in start order */
    struct rec_list nccl;  /* device all-reduces, in start order */
    struct rec_list annot; /* device ranges of all-reduces */
    struct rec_list odev;  /* device collectives other than all-reduces, in start order */
    struct rec_list gann;  /* device ranges of phases (forward, ...) */
    size_t bwd_open;       /* 1 + index of the backward span being grown; 0: none */
    size_t want_dims;      /* 1 + index of the forward waiting for its batch size; 0: none */
    int dev_out;           /* device activity has come out of its window */
    int64_t attr_mark;     /* latest launch attributed to a phase */
    struct kernel_sweep kern;
    int hta;               /* --hta-defaults: the last step's kernels out */
    int64_t hta_last_step; /* its last step's start; INT64_MAX: none */
    int failed;
    /* counts for the warnings */
    uint64_t cpu_after_dev;
    uint64_t unlaunched; /* device activities with a correlation no launch carried */
    uint64_t bad_steps;  /* step spans whose number is none (ProfilerStep#-5): left out */
    char bad_step_name[48];
    struct import_counts counts;
    /* names interned once */
    uint32_t n_backward;
};

static struct rank_trace *imp_trace(struct import_rank *im)
{
    return &im->rs->runs[im->sink->run].ranks[im->index];
}

static int imp_oom(struct import_rank *im)
{
    im->failed = 1;
    return error_set("%s: out of memory reading the trace", im->path);
}

static int rec_append(struct import_rank *im, struct rec_list *l, const struct rec *r)
{
    if (VEC_RESERVE(l->v, l->cap, l->n + 1))
        return imp_oom(im);
    l->v[l->n] = *r;
    l->v[l->n].dev_start = l->v[l->n].dev_end = -1;
    l->v[l->n].step = 0;
    l->v[l->n].bucket = -1;
    l->n++;
    return 0;
}

static uint32_t imp_name(struct import_rank *im, const char *s, size_t len)
{
    uint32_t id = strpool_intern(&im->rs->names, s, len);
    if (id == STRPOOL_NONE) {
        im->failed = 1;
        error_wrap("%s", im->path);
    }
    return id;
}

/* ---- the host window's output: records, in start order ---- */

/* The record of a phase (forward, backward, optimizer) whose host span holds t: the latest
 * such record starting at or before t (searching back a few records; the records are in
 * start order, a backward span holding its place from its first op). */
static struct rec *imp_phase_at(struct import_rank *im, int64_t t)
{
    size_t lo = 0, hi = im->recs.n; /* first record starting after t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (im->recs.v[mid].start <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo, seen = 0; k-- > 0 && seen < IMPORT_LOOKBACK; seen++) {
        struct rec *r = &im->recs.v[k];
        if ((r->kind == R_FORWARD || r->kind == R_BACKWARD || r->kind == R_OPTIMIZER) &&
            r->start <= t && t <= r->end)
            return r;
    }
    return NULL;
}

static int imp_cpu_out(struct import_rank *im, const struct rec *r)
{
    if (im->dev_out && r->kind != R_DIMS && r->kind != R_COLL && r->kind != R_PARAMS &&
        r->kind != R_OCOLL && r->kind != R_OISSUE && r->kind != R_OPARAMS &&
        r->start < im->attr_mark)
        im->cpu_after_dev++;
    switch ((enum rec_kind)r->kind) {
    case R_BACKWARD:
        if (im->bwd_open) {
            struct rec *b = &im->recs.v[im->bwd_open - 1];
            if (r->end > b->end)
                b->end = r->end;
            return 0;
        } else {
            struct rec b = *r;
            b.name = im->n_backward;
            if (rec_append(im, &im->recs, &b) < 0)
                return -1;
            im->bwd_open = im->recs.n;
            return 0;
        }
    case R_DIMS:
        if (im->want_dims) {
            struct rec *fwd = &im->recs.v[im->want_dims - 1];
            if (r->start > fwd->end) {
                im->want_dims = 0;
            } else if (r->start >= fwd->start && r->tid == fwd->tid) {
                fwd->val = r->val;
                im->want_dims = 0;
            }
        }
        return 0;
    case R_COLL: {
        struct rec c = *r;
        /* the description around it on its thread carries the sizes */
        for (size_t k = im->recs.n, seen = 0; k-- > 0 && seen < IMPORT_LOOKBACK; seen++) {
            struct rec *p = &im->recs.v[k];
            if (p->kind == R_PARAMS && !p->used && p->coll == c.coll && p->tid == c.tid &&
                p->start <= c.start && c.start <= p->end) {
                p->used = 1;
                if (c.val < 0)
                    c.val = p->val;
                break;
            }
        }
        return rec_append(im, &im->recs, &c);
    }
    case R_PARAMS:
    case R_OCOLL:
    case R_OISSUE:
    case R_OPARAMS:
        return rec_append(im, &im->recs, r);
    default: /* step, forward, optimizer, data, eval: a new call ends a backward span */
        im->bwd_open = 0;
        if (rec_append(im, &im->recs, r) < 0)
            return -1;
        if (r->kind == R_FORWARD)
            im->want_dims = im->recs.n;
        return 0;
    }
}

static int imp_cpu_push(struct import_rank *im, const struct rec *r)
{
    struct rec out;
    if (reorder_push(&im->cpu, r, &out))
        return imp_cpu_out(im, &out);
    return 0;
}

/* ---- launches and the device window's output ---- */

static size_t launch_hash(int64_t corr, size_t cap)
{
    uint64_t h = (uint64_t)corr * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    return (size_t)(h >> 32) & (cap - 1);
}

static int launch_map_init(struct launch_map *m, size_t cap)
{
    m->slot = malloc(cap * sizeof *m->slot);
    if (!m->slot)
        return -1;
    for (size_t i = 0; i < cap; i++)
        m->slot[i].corr = -1;
    m->cap = cap;
    m->n = 0;
    return 0;
}

/* The slot of corr, or the empty slot where it would go. */
static struct launch_slot *launch_map_find(const struct launch_map *m, int64_t corr)
{
    size_t i = launch_hash(corr, m->cap);
    while (m->slot[i].corr != -1 && m->slot[i].corr != corr)
        i = (i + 1) & (m->cap - 1);
    return &m->slot[i];
}

int import_rank_launch(struct import_rank *im, int64_t corr, int64_t ts)
{
    struct launch_map *m = &im->launch;
    if (corr < 0)
        return 0; /* not a correlation id a launch carries */
    if (2 * (m->n + 1) > m->cap) {
        struct launch_map bigger;
        if (m->cap > SIZE_MAX / 2 / sizeof *m->slot || launch_map_init(&bigger, 2 * m->cap) < 0)
            return imp_oom(im);
        for (size_t i = 0; i < m->cap; i++)
            if (m->slot[i].corr != -1)
                *launch_map_find(&bigger, m->slot[i].corr) = m->slot[i];
        bigger.n = m->n;
        free(m->slot);
        *m = bigger;
    }
    struct launch_slot *s = launch_map_find(m, corr);
    if (s->corr == -1)
        m->n++;
    s->corr = corr;
    s->ts = ts;
    return 0;
}

static int64_t imp_launch_get(const struct import_rank *im, int64_t corr)
{
    if (corr < 0)
        return -1;
    const struct launch_slot *s = launch_map_find(&im->launch, corr);
    return s->corr == corr ? s->ts : -1;
}

static int imp_dev_out(struct import_rank *im, struct dev_item *d)
{
    if (!im->dev_out) {
        /* the host spans come first (Kineto's order): let them all out before the first
         * kernel is attributed to a phase */
        struct rec r;
        im->dev_out = 1;
        while (reorder_pop(&im->cpu, &r))
            if (imp_cpu_out(im, &r) < 0)
                return -1;
    }
    if (d->launch < 0 && d->has_corr)
        d->launch = imp_launch_get(im, d->corr);
    if (d->launch < 0 && d->has_corr)
        im->unlaunched++;
    /* HTA's defaults (include_last_profiler_step=False) keep the device activity launched
     * before the last step began, and none whose launch is not in the trace */
    int swept = !im->hta || (d->launch >= 0 && d->launch < im->hta_last_step);
    if (swept)
        kernel_sweep_add(&im->kern, d->start, d->end, (enum kernel_class)d->cls, d->launch);
    if (swept && d->stream >= 0 &&
        kernel_sweep_stream_add(&im->kern, d->stream, d->start, d->end, d->launch) < 0)
        return -1;
    if (swept && d->name != STRPOOL_NONE &&
        op_table_kernel(&im->optab, d->name, (enum kernel_class)d->cls, d->start, d->end) < 0)
        return imp_oom(im);
    if (d->coll != IMPORT_COLL_NONE) {
        int ar = d->coll == IMPORT_COLL_ALL_REDUCE;
        struct rec r = {.start = d->start, .end = d->end, .val = d->bytes, .launch = d->launch,
                        .name = d->name, .kind = ar ? R_NCCL : R_ODEV, .coll = d->coll};
        return rec_append(im, ar ? &im->nccl : &im->odev, &r);
    }
    if (d->cls != KERNEL_COMM && d->launch >= 0) {
        struct rec *p = imp_phase_at(im, d->launch);
        if (p) {
            if (p->dev_start < 0 || d->start < p->dev_start)
                p->dev_start = d->start;
            if (d->end > p->dev_end)
                p->dev_end = d->end;
        }
        if (d->launch > im->attr_mark)
            im->attr_mark = d->launch;
    }
    return 0;
}

/* ---- events ---- */

static const enum rec_kind span_rec[] = {
    [IMPORT_STEP] = R_STEP,           [IMPORT_FORWARD] = R_FORWARD,
    [IMPORT_BACKWARD] = R_BACKWARD,   [IMPORT_OPTIMIZER] = R_OPTIMIZER,
    [IMPORT_DATA] = R_DATA,           [IMPORT_EVAL] = R_EVAL,
    [IMPORT_COLL] = R_COLL,
    [IMPORT_PARAMS] = R_PARAMS,       [IMPORT_DIMS] = R_DIMS,
    [IMPORT_ISSUE] = R_OISSUE};

int import_rank_span(struct import_rank *im, const struct import_span *sp)
{
    struct rec r = {.start = sp->start_ns, .end = sp->end_ns, .tid = sp->tid, .val = sp->val,
                    .launch = -1, .ext = sp->ext, .name = STRPOOL_NONE,
                    .kind = span_rec[sp->kind], .coll = (uint8_t)sp->coll};
    if (sp->kind == IMPORT_STEP && (sp->val < 0 || sp->val > 1000000000)) {
        if (im->bad_steps++ == 0) /* not a step number: counted, left out */
            snprintf(im->bad_step_name, sizeof im->bad_step_name, "%.*s",
                     (int)(sp->name_len < 47 ? sp->name_len : 47), sp->name ? sp->name : "");
        return 0;
    }
    if ((sp->kind == IMPORT_COLL || sp->kind == IMPORT_PARAMS) &&
        sp->coll != IMPORT_COLL_ALL_REDUCE)
        r.kind = sp->kind == IMPORT_COLL ? R_OCOLL : R_OPARAMS;
    if (sp->kind != IMPORT_BACKWARD && sp->kind != IMPORT_DIMS &&
        (r.name = imp_name(im, sp->name, sp->name_len)) == STRPOOL_NONE)
        return -1;
    return imp_cpu_push(im, &r);
}

int import_rank_activity(struct import_rank *im, const struct import_activity *a)
{
    struct dev_item d = {.start = a->start_ns, .end = a->end_ns, .launch = -1, .corr = a->corr,
                         .bytes = a->bytes, .name = STRPOOL_NONE, .has_corr = !!a->has_corr,
                         .stream = a->stream, .cls = (uint8_t)a->cls,
                         .coll = (uint8_t)a->coll};
    if (a->unknown_name && im->counts.unknown_comm++ == 0)
        snprintf(im->counts.unknown_comm_name, sizeof im->counts.unknown_comm_name, "%.80s",
                 a->name);
    if ((d.coll != IMPORT_COLL_NONE || (a->name && a->name_len > 0)) &&
        (d.name = imp_name(im, a->name ? a->name : "", a->name ? a->name_len : 0)) ==
            STRPOOL_NONE)
        return -1;
    if (d.has_corr)
        d.launch = imp_launch_get(im, d.corr);
    struct dev_item out;
    if (reorder_push(&im->dev, &d, &out))
        return imp_dev_out(im, &out);
    return 0;
}

int import_rank_op(struct import_rank *im, const struct import_op *op)
{
    static const char step[] = "ProfilerStep#", steps[] = "ProfilerStep*";
    const char *name = op->name;
    size_t len = op->name_len;
    if (len >= sizeof step - 1 && memcmp(name, step, sizeof step - 1) == 0) {
        name = steps; /* key_averages' wildcard */
        len = sizeof steps - 1;
    }
    if (op->async) {
        uint32_t id = imp_name(im, name, len);
        if (id == STRPOOL_NONE)
            return -1;
        return op_table_async(&im->optab, id, op->start_ns, op->end_ns) < 0 ? imp_oom(im) : 0;
    }
    struct op_item it = {.start = op->start_ns, .end = op->end_ns, .seq = im->op_seq++,
                         .tid = op->tid};
    if ((it.name = imp_name(im, name, len)) == STRPOOL_NONE)
        return -1;
    struct op_item out;
    if (reorder_push(&im->ops, &it, &out) &&
        op_table_cpu(&im->optab, out.tid, out.start, out.end, out.name) < 0)
        return imp_oom(im);
    return 0;
}

void import_rank_ops_torch(struct import_rank *im)
{
    op_table_torch(&im->optab);
}

int import_rank_device_span(struct import_rank *im, const struct import_span *sp)
{
    if (sp->kind == IMPORT_COLL && sp->coll != IMPORT_COLL_ALL_REDUCE)
        return 0; /* the device time of other collectives is their kernels' */
    struct rec r = {.start = sp->start_ns, .end = sp->end_ns, .val = -1, .launch = -1,
                    .ext = sp->ext,
                    .kind = sp->kind == IMPORT_COLL ? R_ANNOT : span_rec[sp->kind],
                    .coll = (uint8_t)sp->coll};
    if ((r.name = imp_name(im, sp->name, sp->name_len)) == STRPOOL_NONE)
        return -1;
    return rec_append(im, r.kind == R_ANNOT ? &im->annot : &im->gann, &r);
}

void import_rank_hta_cut(struct import_rank *im, int64_t last_step_ns)
{
    im->hta_last_step = last_step_ns;
}

const struct import_counts *import_rank_counts(const struct import_rank *im)
{
    return &im->counts;
}

/* ---- one rank: begin, drain, finish ---- */

struct import_rank *import_rank_begin(struct import_sink *s, const char *path)
{
    struct runset *rs = s->rs;
    if (s->run < 0) {
        if (!runset_new_run(rs, s->where))
            return NULL;
        s->run = rs->n - 1;
    }
    struct run *run = &rs->runs[s->run];
    size_t n = (size_t)run->nranks;
    if (VEC_RESERVE(run->ranks, s->cap, n + 1)) {
        error_set("report: out of memory for %zu traces", n + 1);
        return NULL;
    }
    struct import_rank_info *info = realloc(s->info, (n + 1) * sizeof *info);
    if (info)
        s->info = info;
    struct imp_result *res = info ? realloc(s->res, (n + 1) * sizeof *res) : NULL;
    if (res)
        s->res = res;
    if (!info || !res) {
        error_set("report: out of memory for %zu traces", n + 1);
        return NULL;
    }
    memset(&run->ranks[n], 0, sizeof run->ranks[n]);
    memset(&s->info[n], 0, sizeof s->info[n]);
    memset(&s->res[n], 0, sizeof s->res[n]);
    run->nranks++;
    struct rank_trace *t = &run->ranks[n];
    struct import_rank *im = calloc(1, sizeof *im);
    if (!(t->path = strdup(path)) || !im) {
        free(im);
        error_set("%s: out of memory reading the trace", path);
        return NULL;
    }
    im->path = t->path;
    im->rs = rs;
    im->sink = s;
    im->index = (int)n;
    im->hta = rs->hta_defaults;
    im->hta_last_step = INT64_MAX;
    if (launch_map_init(&im->launch, IMPORT_LAUNCHES) < 0 ||
        reorder_init(&im->cpu, CPU_REC_BYTES, IMPORT_WINDOW) < 0 ||
        reorder_init(&im->dev, sizeof(struct dev_item), IMPORT_WINDOW) < 0 ||
        reorder_init_seq(&im->ops, sizeof(struct op_item), IMPORT_OPS_WINDOW) < 0) {
        imp_oom(im);
        import_rank_free(im);
        return NULL;
    }
    static const char bwd[] = "autograd::engine::evaluate_function (backward span)";
    if ((im->n_backward = imp_name(im, bwd, sizeof bwd - 1)) == STRPOOL_NONE) {
        import_rank_free(im);
        return NULL;
    }
    return im;
}

void import_rank_free(struct import_rank *im)
{
    if (!im)
        return;
    reorder_free(&im->cpu);
    reorder_free(&im->dev);
    reorder_free(&im->ops);
    op_table_free(&im->optab);
    free(im->launch.slot);
    free(im->recs.v);
    free(im->nccl.v);
    free(im->annot.v);
    free(im->odev.v);
    free(im->gann.v);
    for (int i = 0; i < im->kern.nstreams; i++)
        free(im->kern.streams[i].v);
    free(im->kern.streams);
    free(im);
}

struct import_rank_info *import_rank_info(struct import_rank *im)
{
    return &im->sink->info[im->index];
}

void import_rank_set_host(struct import_rank *im, char *host)
{
    struct rank_trace *t = imp_trace(im);
    free(t->host);
    t->host = host;
}

int import_rank_drain(struct import_rank *im)
{
    struct rec r;
    while (reorder_pop(&im->cpu, &r))
        if (imp_cpu_out(im, &r) < 0)
            return -1;
    im->bwd_open = 0;
    struct dev_item d;
    while (reorder_pop(&im->dev, &d))
        if (imp_dev_out(im, &d) < 0)
            return -1;
    struct op_item op;
    while (reorder_pop(&im->ops, &op))
        if (op_table_cpu(&im->optab, op.tid, op.start, op.end, op.name) < 0)
            return imp_oom(im);
    if (op_table_finish(&im->optab) < 0)
        return imp_oom(im);
    return kernel_sweep_finish(&im->kern);
}

int import_rank_empty(const struct import_rank *im)
{
    return im->recs.n == 0 && im->nccl.n == 0 && im->kern.count == 0;
}

void import_rank_warn(const struct import_rank *im)
{
    if (im->cpu.late || im->dev.late) /* late ops: below (ops.h says what becomes of them) */
        report_warn("%s: %llu event(s) more than %d events out of time order: phase spans and "
                    "kernel figures near them are approximate",
                    im->path, (unsigned long long)(im->cpu.late + im->dev.late), IMPORT_WINDOW);
    if (im->optab.late_unnested)
        report_warn("%s: %llu op(s) came more than %d ops after their time, and after the "
                    "first %d ops, those kept to nest such late ones (Kineto writes CUDA "
                    "runtime calls after every CPU op): ops.csv counts them, but their time "
                    "stays in the self time of the op that made them",
                    im->path, (unsigned long long)im->optab.late_unnested, IMPORT_OPS_WINDOW,
                    (int)OPS_HISTORY);
    if (im->cpu_after_dev)
        report_warn("%s: %llu CPU event(s) came after device activity launched later (not "
                    "Kineto's order): device phase times may miss kernels",
                    im->path, (unsigned long long)im->cpu_after_dev);
    if (im->bad_steps) {
        char shown[TEXT_PRINTABLE_MAX];
        report_warn("%s: %llu step span(s) whose number is not in 0..1e9 (e.g. '%s'): left "
                    "out, their time counted in no step",
                    im->path, (unsigned long long)im->bad_steps,
                    text_printable(im->bad_step_name, 40, shown, sizeof shown));
    }
    if (im->unlaunched && im->launch.n)
        report_warn("%s: %llu device activit%s whose correlation no cuda_runtime/cuda_driver "
                    "event carries (of %zu launches): their launch time is unknown (host wait "
                    "counts none of their gaps, no phase takes them)",
                    im->path, (unsigned long long)im->unlaunched,
                    im->unlaunched == 1 ? "y" : "ies", im->launch.n);
}

/* ---- steps, buckets, rows ---- */

struct step_span {
    int64_t start, end; /* end: exclusive */
    int32_t number;
};

/* A rank's own number for step N: N + 1, so that every step is >= 1 (step 0 means "outside
 * every step") even when torch.profiler counts from #0; the run renumbers them
 * N - min N + 1 over its ranks (import_sink_finish). */
static int32_t imp_step_number(int64_t n)
{
    return (int32_t)n + 1; /* n <= 1e9 (import_rank_span) */
}

/* The steps of a rank: the step spans; without them, from one forward to the next; without
 * those, from one optimizer call's end to the next; without those, the whole trace.  *why
 * says which (for the warning). */
static int imp_steps(struct import_rank *im, struct step_span **out, size_t *n,
                     const char **why)
{
    const struct rec_list *l = &im->recs;
    size_t k = 0, count = 0;
    for (size_t i = 0; i < l->n; i++)
        count += l->v[i].kind == R_STEP;
    *why = NULL;
    int from = R_STEP;
    if (count == 0) {
        for (size_t i = 0; i < l->n; i++)
            count += l->v[i].kind == R_FORWARD;
        from = R_FORWARD;
        *why = "DistributedDataParallel.forward calls (a step runs from one to the next)";
    }
    if (count == 0) {
        for (size_t i = 0; i < l->n; i++)
            count += l->v[i].kind == R_OPTIMIZER;
        from = R_OPTIMIZER;
        *why = "optimizer calls (a step ends where one ends)";
    }
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].start < first)
            first = l->v[i].start;
        if (l->v[i].end > last)
            last = l->v[i].end;
    }
    for (size_t i = 0; i < im->nccl.n; i++) {
        if (im->nccl.v[i].start < first) /* a trace of device collectives alone */
            first = im->nccl.v[i].start;
        if (im->nccl.v[i].end > last)
            last = im->nccl.v[i].end;
    }
    if (im->kern.count > 0) { /* the device activity too (a report of kernels alone) */
        if (im->kern.first_ns < first)
            first = im->kern.first_ns;
        if (im->kern.last_ns > last)
            last = im->kern.last_ns;
    }
    if (first > last) /* no record at all: an empty step, not INT64_MAX..INT64_MIN */
        first = last = 0;
    if (count == 0) {
        *why = "nothing (the whole trace is taken as one step)";
        count = 1;
        from = -1;
    }
    struct step_span *s = calloc(count + 1, sizeof *s);
    if (!s)
        return imp_oom(im);
    if (from < 0) {
        s[0] = (struct step_span){first, last + 1, 1};
        k = 1;
    }
    for (size_t i = 0; i < l->n && from >= 0; i++) {
        const struct rec *r = &l->v[i];
        if (r->kind != from)
            continue;
        if (from == R_STEP) {
            s[k++] = (struct step_span){r->start, r->end, imp_step_number(r->val)};
        } else if (from == R_FORWARD) {
            if (k > 0)
                s[k - 1].end = r->start;
            s[k] = (struct step_span){r->start, last + 1, (int32_t)(k + 1)};
            k++;
        } else { /* optimizer: (previous end, this end] */
            int64_t begin = k > 0 ? s[k - 1].end : first;
            if (r->end < begin)
                continue;
            s[k] = (struct step_span){begin, r->end + 1, (int32_t)(k + 1)};
            k++;
        }
    }
    *out = s;
    *n = k;
    return 0;
}

/* The number of the step holding t (0: outside every step). */
static int32_t imp_step_at(const struct step_span *s, size_t n, int64_t t)
{
    size_t lo = 0, hi = n; /* first step starting after t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid].start <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && t < s[lo - 1].end ? s[lo - 1].number : 0;
}

/* Bucket numbers: the order of the all-reduce records of one kind within their step (the
 * list is in start order); records outside steps, and other collectives, get none (-1). */
static void imp_number_buckets(struct rec_list *l, int kind)
{
    int32_t step = -1, next = 0;
    for (size_t i = 0; i < l->n; i++) {
        struct rec *r = &l->v[i];
        if (r->kind != kind || r->coll != IMPORT_COLL_ALL_REDUCE)
            continue;
        if (r->step != step) {
            step = r->step;
            next = 0;
        }
        r->bucket = r->step >= 1 ? next++ : -1;
    }
}

static int imp_row(struct import_rank *im, struct rank_trace *t, const struct rec *r, int clock,
                   int64_t s, int64_t e)
{
    if (VEC_RESERVE(t->rows, t->cap, t->n + 1))
        return imp_oom(im);
    enum trace_phase ph = rec_phase_of(r);
    int coll = rec_is_coll(r);
    struct run_row *row = &t->rows[t->n];
    memset(row, 0, sizeof *row);
    row->start_ns = s;
    row->end_ns = e;
    row->bytes = coll ? r->val : 0;
    row->step = r->step;
    row->epoch = -1;
    row->bucket = coll ? r->bucket : -1;
    row->stream = coll                        ? TRACE_LANE_COMM
                  : ph == TRACE_PHASE_DATA    ? TRACE_LANE_DATA
                                              : TRACE_LANE_COMPUTE;
    row->clock = (uint8_t)clock;
    uint32_t phase = strpool_intern(&im->rs->labels, trace_phase_name(ph),
                                    strlen(trace_phase_name(ph)));
    uint32_t kind = strpool_intern(&im->rs->labels, trace_kind_name(TRACE_KIND_RANGE),
                                   strlen(trace_kind_name(TRACE_KIND_RANGE)));
    if (phase == STRPOOL_NONE || kind == STRPOOL_NONE) {
        im->failed = 1;
        return error_wrap("%s", im->path);
    }
    row->phase = phase;
    row->kind = kind;
    row->name = r->name;
    t->n++;
    return 0;
}

/* Records of kind dk in dst without a size take the size of the record of kind sk in src
 * with the same step and bucket (both lists in (step, bucket) order for their kind). */
static void imp_fill_bytes(struct rec_list *dst, int dk, const struct rec_list *src, int sk)
{
    size_t h = 0;
    for (size_t i = 0; i < dst->n; i++) {
        struct rec *d = &dst->v[i];
        if (d->kind != dk || d->val >= 0 || d->bucket < 0)
            continue;
        for (; h < src->n; h++) {
            const struct rec *c = &src->v[h];
            if (c->kind != sk || c->bucket < 0)
                continue;
            if (c->step > d->step || (c->step == d->step && c->bucket >= d->bucket))
                break;
        }
        if (h < src->n && src->v[h].kind == sk && src->v[h].step == d->step &&
            src->v[h].bucket == d->bucket)
            d->val = src->v[h].val;
    }
}

/* In the steps where no backend op of a collective's kind was recorded, the descriptions of
 * that kind stand for them. */
static int imp_params_as_coll(struct import_rank *im)
{
    int64_t *with = malloc((im->recs.n + 1) * sizeof *with);
    size_t n = 0;
    if (!with)
        return imp_oom(im);
    for (size_t i = 0; i < im->recs.n; i++)
        if (im->recs.v[i].kind == R_COLL)
            with[n++] = (int64_t)im->recs.v[i].step * IMPORT_COLL_COUNT + im->recs.v[i].coll;
    qsort(with, n, sizeof *with, sort_cmp_i64);
    for (size_t i = 0; i < im->recs.n; i++) {
        struct rec *r = &im->recs.v[i];
        int64_t key = (int64_t)r->step * IMPORT_COLL_COUNT + r->coll;
        if (r->kind == R_PARAMS && !r->used && !bsearch(&key, with, n, sizeof *with, sort_cmp_i64))
            r->kind = R_COLL;
    }
    free(with);
    return 0;
}

/* ---- the other collectives: one row each ---- */

/* The indices in l of the records of this kind and collective, in list order, into *out
 * (the caller frees it); returns the count, or (size_t)-1 out of memory. */
static size_t imp_collect(const struct rec_list *l, int kind, int coll, size_t **out)
{
    size_t n = 0;
    *out = malloc((l->n + 1) * sizeof **out);
    if (!*out)
        return (size_t)-1;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == kind && l->v[i].coll == coll)
            (*out)[n++] = i;
    return n;
}

typedef void (*imp_pair_fn)(struct rec *a, struct rec *b);

/* Pairs the k-th record of a step in la[ia] with the k-th of the same step in lb[ib]
 * (both in start order, so in step order): fn(a, b) for each pair. */
static void imp_pair_steps(struct rec_list *la, const size_t *ia, size_t na,
                           struct rec_list *lb, const size_t *ib, size_t nb, imp_pair_fn fn)
{
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        struct rec *a = &la->v[ia[i]], *b = &lb->v[ib[j]];
        if (a->step < b->step) {
            i++;
        } else if (b->step < a->step) {
            j++;
        } else {
            fn(a, b);
            i++;
            j++;
        }
    }
}

/* imp_pair_steps over the records of kind ka in la and kind kb in lb, both of collective
 * coll.  0, or -1 after error_set() (out of memory). */
static int imp_pair_kinds(struct import_rank *im, struct rec_list *la, int ka,
                          struct rec_list *lb, int kb, int coll, imp_pair_fn fn)
{
    size_t *a = NULL, *b = NULL;
    size_t na = imp_collect(la, ka, coll, &a), nb = imp_collect(lb, kb, coll, &b);
    int rc = na == (size_t)-1 || nb == (size_t)-1 ? imp_oom(im) : 0;
    if (rc == 0)
        imp_pair_steps(la, a, na, lb, b, nb, fn);
    free(a);
    free(b);
    return rc;
}

/* a description b inside the op a that issued it: a takes its size */
static void pair_params(struct rec *a, struct rec *b)
{
    if (a->val < 0)
        a->val = b->val;
    b->used = 1;
}

/* backend op a and the op b that issued it: one collective, from the issue to the end of
 * the backend's work (the training thread waits for it in between) */
static void pair_issue(struct rec *a, struct rec *b)
{
    if (b->start < a->start)
        a->start = b->start;
    if (b->end > a->end)
        a->end = b->end;
    if (a->val < 0)
        a->val = b->val;
    b->used = 1;
}

/* a device collective a and its host row b share their sizes */
static void pair_sizes(struct rec *a, struct rec *b)
{
    if (a->val < 0)
        a->val = b->val;
    if (b->val < 0)
        b->val = a->val;
}

/* The unused records of kind from and this collective in l become kind to. */
static void imp_promote(struct rec_list *l, int from, int to, int coll)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == from && l->v[i].coll == coll && !l->v[i].used)
            l->v[i].kind = (uint8_t)to;
}

/* A collective other than an all-reduce is one row (R_OCOLL) per call: its backend op
 * (gloo:broadcast) from the start of the op that issued it (c10d::broadcast_, else its
 * description) to the later end; without a backend op, the issuing op alone; sizes from the
 * description.  Records are paired by their order within the step and kind (outside steps:
 * in the group of step 0).  Device collectives (NCCL kernels) exchange sizes with the host
 * rows.  0, or -1 after error_set(). */
static int imp_other_collectives(struct import_rank *im)
{
    for (int c = IMPORT_COLL_NONE + 1; c < IMPORT_COLL_COUNT; c++) {
        if (c == IMPORT_COLL_ALL_REDUCE)
            continue;
        if (imp_pair_kinds(im, &im->recs, R_OISSUE, &im->recs, R_OPARAMS, c, pair_params) < 0)
            return -1;
        imp_promote(&im->recs, R_OPARAMS, R_OISSUE, c);
        if (imp_pair_kinds(im, &im->recs, R_OCOLL, &im->recs, R_OISSUE, c, pair_issue) < 0)
            return -1;
        imp_promote(&im->recs, R_OISSUE, R_OCOLL, c);
        if (imp_pair_kinds(im, &im->odev, R_ODEV, &im->recs, R_OCOLL, c, pair_sizes) < 0)
            return -1;
    }
    return 0;
}

/* The host spans that carry an External id, sorted by it: a device range's link to the
 * span whose step it belongs to (a device range can start before its host span, on another
 * clock, or end in the next step). */
struct ext_ref {
    int64_t ext;
    size_t i; /* in im->recs */
};

static int ext_index(const struct import_rank *im, struct ext_ref **out, size_t *n)
{
    *n = 0;
    *out = malloc((im->recs.n + 1) * sizeof **out);
    if (!*out)
        return -1;
    for (size_t i = 0; i < im->recs.n; i++)
        if (im->recs.v[i].ext > 0)
            (*out)[(*n)++] = (struct ext_ref){im->recs.v[i].ext, i};
    return sort_by_i64(*out, *n, sizeof **out, offsetof(struct ext_ref, ext));
}

/* The step of the host span of External id ext (its first), or fallback when none. */
static int32_t ext_step(const struct import_rank *im, const struct ext_ref *v, size_t n,
                        int64_t ext, int32_t fallback)
{
    if (ext <= 0)
        return fallback;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].ext < ext)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].ext == ext ? im->recs.v[v[lo].i].step : fallback;
}

/* The records' steps (by their start), the device records' (by correlation to a host
 * record, else their launch time), the other collectives and the host collectives, then
 * the buckets and sizes numbered by order within the step.  dev: the device all-reduces
 * (NCCL kernels, else annotations).  *exts (the correlation index) is the caller's to
 * free.  0, or -1 after error_set(). */
static int fin_assign(struct import_rank *im, const struct step_span *steps, size_t nsteps,
                      struct rec_list *dev, struct ext_ref **exts, size_t *nexts)
{
    for (size_t i = 0; i < im->recs.n; i++) {
        struct rec *r = &im->recs.v[i];
        r->step = r->kind == R_STEP ? imp_step_number(r->val)
                                    : imp_step_at(steps, nsteps, r->start);
    }
    if (!im->nccl.n && im->annot.n) {
        if (sort_by_i64(im->annot.v, im->annot.n, sizeof *im->annot.v, 0) < 0)
            return error_wrap("%s", im->path);
        if (im->counts.unknown_comm)
            report_warn("%s: no all-reduce kernel with a known NCCL name (ncclKernel_*, "
                        "ncclDevKernel_*): device all-reduce times taken from the %zu "
                        "gpu_user_annotation ranges instead",
                        im->path, im->annot.n);
    }
    if (ext_index(im, exts, nexts) < 0)
        return imp_oom(im);
    for (size_t i = 0; i < dev->n; i++) {
        struct rec *r = &dev->v[i];
        r->step = ext_step(im, *exts, *nexts, r->ext,
                           imp_step_at(steps, nsteps, r->launch >= 0 ? r->launch : r->start));
    }
    for (size_t i = 0; i < im->odev.n; i++) {
        struct rec *r = &im->odev.v[i];
        r->step = imp_step_at(steps, nsteps, r->launch >= 0 ? r->launch : r->start);
    }
    if (imp_other_collectives(im) < 0)
        return -1;
    /* the host collectives: the backend ops; in a step without any, their descriptions */
    if (imp_params_as_coll(im) < 0)
        return -1;
    imp_number_buckets(&im->recs, R_COLL);
    imp_number_buckets(&im->recs, R_PARAMS);
    imp_number_buckets(dev, dev == &im->nccl ? R_NCCL : R_ANNOT);
    /* sizes by order within the step: a backend op on another thread than its description
     * (gloo's worker) takes the k-th one's; a device all-reduce without a size takes its
     * host collective's */
    imp_fill_bytes(&im->recs, R_COLL, &im->recs, R_PARAMS);
    imp_fill_bytes(dev, dev == &im->nccl ? R_NCCL : R_ANNOT, &im->recs, R_COLL);
    return 0;
}

/* The rank's rows into t: every record's host row (and device row when it has one), the
 * fallback steps as step rows (fallback: no ProfilerStep), the device all-reduces and other
 * device records, and the device ranges of phases without launched kernels; the images of
 * the forwards into res. */
static void fin_rows(struct import_rank *im, struct rank_trace *t, const struct step_span *steps,
                     size_t nsteps, int fallback, const struct rec_list *dev,
                     const struct ext_ref *exts, size_t nexts, struct imp_result *res)
{
    int64_t images = 0;
    int images_known = 1, forwards = 0;
    for (size_t i = 0; i < im->recs.n && !im->failed; i++) {
        const struct rec *r = &im->recs.v[i];
        if (r->kind == R_DIMS || r->kind == R_PARAMS || r->kind == R_OISSUE ||
            r->kind == R_OPARAMS)
            continue;
        if (r->kind == R_FORWARD && r->step >= 1) {
            forwards++;
            if (r->val > 0)
                images += r->val;
            else
                images_known = 0;
        }
        if (imp_row(im, t, r, TRACE_CLOCK_HOST, r->start, r->end) < 0)
            break;
        if (r->dev_start >= 0 &&
            imp_row(im, t, r, TRACE_CLOCK_DEVICE, r->dev_start, r->dev_end) < 0)
            break;
    }
    if (fallback) /* fallback steps become step rows */
        for (size_t i = 0; i < nsteps && !im->failed; i++) {
            static const char what[] = "step (from the trace's calls)";
            struct rec r = {.kind = R_STEP, .step = steps[i].number, .bucket = -1,
                            .name = imp_name(im, what, sizeof what - 1)};
            if (r.name == STRPOOL_NONE)
                break;
            imp_row(im, t, &r, TRACE_CLOCK_HOST, steps[i].start, steps[i].end - 1);
        }
    for (size_t i = 0; i < dev->n && !im->failed; i++)
        imp_row(im, t, &dev->v[i], TRACE_CLOCK_DEVICE, dev->v[i].start, dev->v[i].end);
    for (size_t i = 0; i < im->odev.n && !im->failed; i++)
        imp_row(im, t, &im->odev.v[i], TRACE_CLOCK_DEVICE, im->odev.v[i].start,
                im->odev.v[i].end);
    /* a phase without kernels launched inside it (no launch times: e.g. ddpprof's own
     * export) takes its device time from its device ranges */
    int launched[R_ODEV + 1] = {0}, any_launched = 0;
    for (size_t i = 0; i < im->recs.n; i++) {
        launched[im->recs.v[i].kind] |= im->recs.v[i].dev_start >= 0;
        any_launched |= im->recs.v[i].dev_start >= 0;
    }
    for (size_t i = 0; i < im->gann.n && !im->failed; i++) {
        struct rec *g = &im->gann.v[i];
        /* a step's device range only where no launch is known at all (ddpprof's export:
         * CUDA events around the step); elsewhere a step is its host range */
        if (launched[g->kind] || (g->kind == R_STEP && any_launched))
            continue;
        g->step = ext_step(im, exts, nexts, g->ext, imp_step_at(steps, nsteps, g->start));
        imp_row(im, t, g, TRACE_CLOCK_DEVICE, g->start, g->end);
    }
    res->images = images_known && forwards > 0 ? images : -1;
    res->device_rows = dev->n > 0;
}

int import_rank_finish(struct import_rank *im)
{
    struct rank_trace *t = imp_trace(im);
    struct imp_result *res = &im->sink->res[im->index];
    const char *why;
    struct step_span *steps = NULL;
    size_t nsteps = 0;
    if (imp_steps(im, &steps, &nsteps, &why) < 0)
        return -1;
    if (why)
        report_warn("%s: no ProfilerStep#N events: steps taken from %s; %zu step(s)", im->path,
                    why, nsteps);
    res->steps = (int32_t)nsteps;
    res->first_step = nsteps ? steps[0].number : 0;
    for (size_t i = 1; i < nsteps; i++)
        if (steps[i].number < res->first_step)
            res->first_step = steps[i].number;
    struct rec_list *dev = im->nccl.n ? &im->nccl : &im->annot;
    struct ext_ref *exts = NULL;
    size_t nexts = 0;
    int rc = fin_assign(im, steps, nsteps, dev, &exts, &nexts);
    if (rc == 0)
        fin_rows(im, t, steps, nsteps, why != NULL, dev, exts, nexts, res);
    free(exts);
    free(steps);
    if (rc < 0 || im->failed)
        return -1;
    if (op_table_any(&im->optab)) { /* ops.csv's rows: the rank_trace owns them now */
        if (!(t->ops = malloc(sizeof *t->ops)))
            return imp_oom(im);
        *t->ops = im->optab;
        memset(&im->optab, 0, sizeof im->optab);
    }
    t->has_kernels = 1;
    t->kern = im->kern;
    im->kern.streams = NULL; /* the rank_trace owns them now */
    im->kern.nstreams = 0;
    return 0;
}

/* ---- runs ---- */

void import_sink_init(struct import_sink *s, struct runset *rs, const char *where,
                      int from_memory)
{
    memset(s, 0, sizeof *s);
    s->rs = rs;
    s->where = where;
    s->from_memory = from_memory;
    s->run = -1;
}

void import_sink_free(struct import_sink *s)
{
    free(s->info);
    free(s->res);
    s->info = NULL;
    s->res = NULL;
}

/* The selected all-reduce rows of a rank, by (step, bucket): their ends, for the clock
 * offsets (device rows when the rank has them). */
struct end_key {
    int64_t key; /* step * 2^32 + bucket */
    int64_t end;
};

static int imp_ends(const struct rank_trace *t, int device, struct end_key **out, size_t *n)
{
    size_t k = 0;
    struct end_key *v = malloc((t->n + 1) * sizeof *v);
    if (!v)
        return error_set("%s: out of memory", t->path);
    for (size_t i = 0; i < t->n; i++) {
        const struct run_row *r = &t->rows[i];
        if (r->bucket < 0 || r->step < 1 ||
            r->clock != (device ? TRACE_CLOCK_DEVICE : TRACE_CLOCK_HOST))
            continue;
        v[k].key = (int64_t)r->step * 4294967296LL + r->bucket;
        v[k].end = r->end_ns;
        k++;
    }
    if (sort_by_i64(v, k, sizeof *v, 0) < 0) {
        free(v);
        return error_wrap("%s", t->path);
    }
    *out = v;
    *n = k;
    return 0;
}

static int imp_has_device_allreduce(const struct rank_trace *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->rows[i].bucket >= 0 && t->rows[i].clock == TRACE_CLOCK_DEVICE)
            return 1;
    return 0;
}

int64_t import_clock_offset(int64_t *d, size_t n)
{
    qsort(d, n, sizeof *d, sort_cmp_i64);
    return d[(n - 1) / 2];
}

/* Each rank's offset to the reference (the lowest rank): 0 on the reference's host when
 * both share a clock (Kineto, same host), else the median over shared all-reduces of
 * end_ref - end_rank (import_clock_offset). */
static int imp_align(struct run *run, const struct import_rank_info *info)
{
    struct rank_trace *ref = &run->ranks[0];
    if (!(ref->clock_method = strdup("reference")))
        return error_set("report: out of memory");
    int ref_dev = imp_has_device_allreduce(ref);
    struct end_key *re = NULL;
    size_t nre = 0;
    int rc = 0;
    for (int k = 1; k < run->nranks && rc == 0; k++) {
        struct rank_trace *t = &run->ranks[k];
        char method[160];
        if (info[k].shared_clock && info[0].shared_clock && t->host && ref->host &&
            strcmp(t->host, ref->host) == 0) {
            t->offset_ns = 0;
            snprintf(method, sizeof method, "same host as rank %d (shared clock)", ref->rank);
        } else {
            int dev = ref_dev && imp_has_device_allreduce(t);
            if (!re || dev != ref_dev) {
                free(re);
                re = NULL;
                if ((rc = imp_ends(ref, dev, &re, &nre)) < 0)
                    break;
            }
            struct end_key *te = NULL;
            size_t nte = 0;
            if ((rc = imp_ends(t, dev, &te, &nte)) < 0)
                break;
            int64_t *d = malloc((nte + 1) * sizeof *d);
            size_t nd = 0;
            for (size_t i = 0, j = 0; d && i < nre && j < nte;) {
                if (re[i].key < te[j].key) {
                    i++;
                } else if (re[i].key > te[j].key) {
                    j++;
                } else {
                    int64_t diff;
                    if (!__builtin_sub_overflow(re[i].end, te[j].end, &diff))
                        d[nd++] = diff;
                    i++;
                    j++;
                }
            }
            free(te);
            if (!d) {
                rc = error_set("report: out of memory");
                break;
            }
            int64_t off = nd > 0 ? import_clock_offset(d, nd) : 0;
            if (nd > 0 && (off > IMPORT_MAX_OFFSET || off < -IMPORT_MAX_OFFSET)) {
                t->offset_ns = 0;
                snprintf(method, sizeof method, "none: the estimate (%lld s) is implausible",
                         (long long)(off / 1000000000));
                report_warn("%s: clock offset to rank %d estimated at %lld s, implausible: "
                            "taken as 0",
                            t->path, ref->rank, (long long)(off / 1000000000));
            } else if (nd > 0) {
                t->offset_ns = off;
                snprintf(method, sizeof method, "median of %zu %s all-reduce end(s) vs rank %d",
                         nd, dev ? "device" : "host", ref->rank);
            } else {
                t->offset_ns = 0;
                snprintf(method, sizeof method, "none: no all-reduce shared with rank %d",
                         ref->rank);
                report_warn("%s: no all-reduce in common with rank %d (%s): its clock is taken "
                            "as rank %d's",
                            t->path, ref->rank, ref->path, ref->rank);
            }
            free(d);
        }
        if (!(t->clock_method = strdup(method)))
            rc = error_set("report: out of memory");
    }
    free(re);
    return rc;
}

static int cmp_rank(const void *a, const void *b)
{
    const struct rank_trace *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Who each rank is (distributedInfo.rank, else the file's name or place), checked: the
 * highest world size the traces say into *world (0: none).  0, or -1 after error_set() (a
 * rank or world size out of range, two traces of one rank). */
static int sink_ranks(struct import_sink *s, struct run *run, int n, int64_t *world)
{
    const struct import_rank_info *info = s->info;
    *world = 0;
    for (int i = 0; i < n; i++) {
        const char *path = run->ranks[i].path;
        int named;
        if (info[i].has_world && (info[i].world_size < 1 || info[i].world_size > 65536))
            return error_set("%s: distributedInfo.world_size = %lld is not in [1, 65536]: the "
                             "trace is damaged or was edited",
                             path, (long long)info[i].world_size);
        if (info[i].bad_durs)
            report_warn("%s: %llu complete event(s) with a dur that is no duration (negative, "
                        "not a number, or beyond 292 years): left out",
                        path, (unsigned long long)info[i].bad_durs);
        if (info[i].has_rank && (info[i].rank < 0 || info[i].rank >= 65536))
            return error_set("%s: distributedInfo.rank = %lld is not in [0, 65536): the trace "
                             "is damaged or was edited",
                             path, (long long)info[i].rank);
        if (info[i].has_rank) {
            run->ranks[i].rank = (int)info[i].rank;
        } else {
            /* the rank a file name says ("..._rank1...", not for a trace given in memory),
             * else the file's place in the list */
            const int by_name = !s->from_memory && import_group_name_rank(path, NULL, 0, &named);
            run->ranks[i].rank = by_name ? named : i;
            report_warn("%s: no distributedInfo.rank (%s): taken as rank %d from the file %s",
                        path, info[i].no_rank_why ? info[i].no_rank_why : "none given",
                        run->ranks[i].rank, by_name ? "name" : "order");
        }
        if (info[i].has_world && info[i].world_size > *world && info[i].world_size <= 65536)
            *world = info[i].world_size;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < i; k++)
            if (run->ranks[i].rank == run->ranks[k].rank)
                return error_set("%s and %s are both rank %d: give the traces of different "
                                 "runs as separate directories",
                                 run->ranks[k].path, run->ranks[i].path, run->ranks[i].rank);
    return 0;
}

/* The ranks in rank order (res and info follow the same permutation).  0, or -1 after
 * error_set() (out of memory). */
static int sink_sort(struct run *run, struct imp_result *res, struct import_rank_info *info,
                     int n)
{
    struct {
        struct rank_trace t;
        struct imp_result r;
        struct import_rank_info f;
    } *tmp = calloc((size_t)n, sizeof *tmp);
    if (!tmp)
        return error_set("report: out of memory");
    for (int i = 0; i < n; i++) {
        tmp[i].t = run->ranks[i];
        tmp[i].r = res[i];
        tmp[i].f = info[i];
    }
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_rank);
    for (int i = 0; i < n; i++) {
        run->ranks[i] = tmp[i].t;
        res[i] = tmp[i].r;
        info[i] = tmp[i].f;
    }
    free(tmp);
    return 0;
}

/* The run's world size (the traces', else the highest rank + 1, at least the ranks
 * given), its steps renumbered from 1, each file's times onto its own absolute clock. */
static void sink_world_steps(struct import_sink *s, struct run *run, int n, int64_t world)
{
    const struct imp_result *res = s->res;
    const struct import_rank_info *info = s->info;
    run->world_size = (int)(world > 0 ? world : run->ranks[n - 1].rank + 1);
    if (run->ranks[n - 1].rank >= run->world_size) { /* in rank order: the highest */
        int above = 0;
        for (int i = 0; i < n; i++)
            above += run->ranks[i].rank >= run->world_size;
        report_warn("%s: %d trace(s) of a rank not below the world size %d their "
                    "distributedInfo says (e.g. %s, rank %d): the world size is taken as %d",
                    s->where, above, run->world_size, run->ranks[n - 1].path,
                    run->ranks[n - 1].rank, run->ranks[n - 1].rank + 1);
        run->world_size = run->ranks[n - 1].rank + 1;
    }
    if (run->world_size < n)
        run->world_size = n;
    if (n < run->world_size)
        report_warn("%s: world_size is %d but only %d rank trace(s) given", s->where,
                    run->world_size, n);
    /* steps renumbered from 1 over the run: N - (the smallest N) + 1 */
    int32_t first = INT32_MAX;
    for (int i = 0; i < n; i++)
        if (res[i].steps > 0 && res[i].first_step < first)
            first = res[i].first_step;
    /* each file's times onto its own absolute clock (+ its base time) */
    for (int i = 0; i < n; i++) {
        struct rank_trace *t = &run->ranks[i];
        for (size_t r = 0; r < t->n; r++) {
            if (t->rows[r].step >= 1 && first != INT32_MAX)
                t->rows[r].step -= first - 1;
            t->rows[r].start_ns += info[i].base_ns;
            t->rows[r].end_ns += info[i].base_ns;
        }
    }
}

/* Every rank onto the reference clock (its offset), then the run's facts: its format, its
 * images, and the meta an import knows (world size, device, comm, mode).  0, or -1 after
 * error_set(). */
static int sink_run_facts(struct import_sink *s, struct run *run, int n)
{
    const struct imp_result *res = s->res;
    const struct import_rank_info *info = s->info;
    int64_t images = 0;
    int images_known = 1, any_kernels = 0;
    for (int i = 0; i < n; i++) {
        struct rank_trace *t = &run->ranks[i];
        for (size_t r = 0; r < t->n; r++) {
            t->rows[r].start_ns += t->offset_ns;
            t->rows[r].end_ns += t->offset_ns;
        }
        if (res[i].images < 0)
            images_known = 0;
        else
            images += res[i].images;
        any_kernels |= t->kern.count > 0 || info[i].devices > 0;
    }
    /* a run of mixed formats is named after one whose clocks cannot be shared */
    run->format = info[0].format;
    for (int i = 0; i < n; i++)
        if (strcmp(info[i].format, run->format) != 0 && !info[i].shared_clock)
            run->format = info[i].format;
    run->has_metrics = images_known && n == run->world_size;
    run->metrics_images = images;
    char ws[16];
    snprintf(ws, sizeof ws, "%d", run->world_size);
    int rc = meta_set(&run->meta, RUN_META_world_size, ws, run->dir);
    if (rc == 0)
        rc = meta_set(&run->meta, RUN_META_device, any_kernels ? "cuda" : "cpu", run->dir);
    if (rc == 0 && info[0].has_backend)
        rc = meta_set(&run->meta, RUN_META_comm, info[0].backend, run->dir);
    if (rc == 0)
        rc = meta_set(&run->meta, RUN_META_mode, run->world_size > 1 ? "ddp" : "", run->dir);
    return rc;
}

int import_sink_finish(struct import_sink *s)
{
    if (s->run < 0)
        return 0; /* no rank: nothing to finish (an importer that makes its own runs) */
    struct run *run = &s->rs->runs[s->run];
    const int n = run->nranks > 0 ? run->nranks : 0;
    int64_t world = 0;
    int rc = sink_ranks(s, run, n, &world);
    if (rc == 0)
        rc = sink_sort(run, s->res, s->info, n);
    if (rc == 0) {
        sink_world_steps(s, run, n, world);
        rc = imp_align(run, s->info);
    }
    if (rc == 0)
        rc = sink_run_facts(s, run, n);
    return rc;
}
