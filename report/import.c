/* import.c — PyTorch profiler traces as runs (see import.h and report/FORMULAS.md
 * "Imported PyTorch traces").
 *
 * One rank is read in one pass: bytes (gunzipped when gzip) -> ptjson events -> either
 *   - the CPU window (ProfilerStep, DistributedDataParallel.forward, the autograd engine's
 *     evaluate_function ops, Optimizer.step/zero_grad, DataLoader, collectives, ops with
 *     input shapes), walked in start order into records: one per step and per call, and one
 *     backward span per run of evaluate_function ops;
 *   - the launch map (cuda_runtime/cuda_driver correlation -> launch time, a hash map keyed
 *     by the full correlation id: every launch is kept until the end of the file);
 *   - the device window (kernel, gpu_memcpy, gpu_memset), walked in start order into the
 *     kernel sweep (analysis_kernel_add), the NCCL all-reduce records, and the device span of
 *     the phase whose host span holds each launch.
 * At the end of the file the records are cut into steps, all-reduces numbered into buckets
 * by their order within the step, and turned into rows. */
#include "report/import.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/error.h"
#include "common/printable.h"
#include "common/vec.h"
#include "report/analysis.h"
#include "report/ptjson.h"
#include "report/reorder.h"
#include "report/sort.h"

#define IMPORT_CHUNK (1u << 20)
#define IMPORT_WINDOW 65536     /* records per reorder window */
#define IMPORT_LAUNCHES 4096    /* launch map's first slots (a power of two; it grows) */
#define IMPORT_LOOKBACK 64      /* records searched back for the phase of a launch */
/* Times a trace may hold, so that sums and offsets stay far from int64 overflow: ts and
 * baseTimeNanoseconds within 4e18 ns (127 years; old Kineto writes µs since 1970), one
 * event at most 1e14 ns (28 hours), a clock offset at most 1e17 ns (3 years). */
#define IMPORT_MAX_TS 4000000000000000000LL
#define IMPORT_MAX_DUR 100000000000000LL
#define IMPORT_MAX_OFFSET 100000000000000000LL

/* ---- records ---- */

enum rec_kind {
    R_STEP,      /* ProfilerStep#N (val: N) */
    R_FORWARD,   /* DistributedDataParallel.forward (val: batch size, -1 unknown) */
    R_BACKWARD,  /* a run of autograd::engine::evaluate_function ops */
    R_OPTIMIZER, /* Optimizer.step#..., Optimizer.zero_grad#... */
    R_DATA,      /* enumerate(DataLoader)#... */
    R_COLL,      /* a backend's all-reduce op: nccl:all_reduce, gloo:all_reduce (val: bytes) */
    R_PARAMS,    /* record_param_comms of an all-reduce (val: bytes; used: taken by a COLL) */
    R_DIMS,      /* (window only) an op with input shapes (val: the first input's size) */
    R_NCCL,      /* a device all-reduce: an NCCL kernel (val: bytes) */
    R_ANNOT,     /* a gpu_user_annotation nccl:all_reduce (fallback for unknown kernels) */
    /* every other collective (phase: its comm.* phase or barrier; val: bytes): */
    R_OCOLL,     /* a backend's op: gloo:broadcast, nccl:all_gather, ... (the row) */
    R_OISSUE,    /* the op that issued it: c10d::broadcast_, c10d::_allgather_base_, ... */
    R_OPARAMS,   /* record_param_comms with its Collective name (bytes) */
    R_ODEV       /* a device one: an NCCL kernel, ncclKernel_Broadcast_..., ... */
};

static const enum trace_phase rec_phase[] = {
    [R_STEP] = TRACE_PHASE_STEP,           [R_FORWARD] = TRACE_PHASE_FORWARD,
    [R_BACKWARD] = TRACE_PHASE_BACKWARD,   [R_OPTIMIZER] = TRACE_PHASE_OPTIMIZER,
    [R_DATA] = TRACE_PHASE_DATA,           [R_COLL] = TRACE_PHASE_ALLREDUCE,
    [R_PARAMS] = TRACE_PHASE_ALLREDUCE,    [R_DIMS] = TRACE_PHASE_SETUP,
    [R_NCCL] = TRACE_PHASE_ALLREDUCE,      [R_ANNOT] = TRACE_PHASE_ALLREDUCE,
    [R_OCOLL] = TRACE_PHASE_BARRIER,       [R_OISSUE] = TRACE_PHASE_BARRIER,
    [R_OPARAMS] = TRACE_PHASE_BARRIER,     [R_ODEV] = TRACE_PHASE_BARRIER}; /* R_O*: r.phase */

/* A CPU-window entry and a kept record (the window entries are its first 48 bytes). */
struct rec {
    int64_t start, end; /* ns on the file's clock */
    int64_t tid;
    int64_t val;        /* see enum rec_kind */
    int64_t launch;     /* R_NCCL: when the host launched it (-1 unknown) */
    uint32_t name;      /* id in the runset's names */
    uint8_t kind;
    uint8_t used;
    uint8_t phase;      /* R_O*: enum trace_phase of the collective */
    /* not in the window: */
    int64_t dev_start, dev_end; /* device span of the kernels it launched (-1 none) */
    int32_t step, bucket;       /* set at the end */
};

#define CPU_REC_BYTES 48
_Static_assert(offsetof(struct rec, dev_start) >= CPU_REC_BYTES, "window entries fit");

/* A device-window entry. */
struct dev_item {
    int64_t start, end;
    int64_t launch, corr, bytes; /* launch -1: not yet known */
    int64_t stream;              /* -1: not given */
    uint32_t name;               /* R_NCCL: id in names; else STRPOOL_NONE */
    uint8_t cls;                 /* enum kernel_class */
    uint8_t allreduce;
    uint8_t has_corr;
    uint8_t coll;                /* another collective's NCCL kernel: its phase; else 0 */
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

/* One rank being read. */
struct imp {
    const char *path;
    struct runset *rs;
    struct reorder cpu, dev;
    struct launch_map launch;
    struct rec_list recs;  /* CPU records, in start order */
    struct rec_list nccl;  /* device all-reduces, in start order */
    struct rec_list annot; /* gpu_user_annotation all-reduces */
    struct rec_list odev;  /* device collectives other than all-reduces, in start order */
    struct rec_list gann;  /* gpu_user_annotation spans of phases (forward, ...) */
    size_t bwd_open;       /* 1 + index of the backward span being grown; 0: none */
    size_t want_dims;      /* 1 + index of the forward waiting for its batch size; 0: none */
    int dev_out;           /* device activity has come out of its window */
    int64_t attr_mark;     /* latest launch attributed to a phase */
    struct kernel_sweep kern;
    int hta;               /* --hta-defaults: times rounded to µs, the last step's kernels out */
    int64_t hta_last_step; /* its last ProfilerStep's start (rounded); INT64_MAX: none */
    int failed;
    /* counts for the warnings */
    uint64_t events, no_ts, cpu_after_dev, unknown_nccl, dtype_unknown;
    uint64_t unlaunched; /* device activities with a correlation no launch carried */
    char unknown_nccl_name[96], unknown_dtype[32];
    /* names interned once */
    uint32_t n_backward;
    struct pt_header hdr;
    int truncated;
    uint64_t bytes_read;
};

static int imp_oom(struct imp *im)
{
    im->failed = 1;
    return error_set("%s: out of memory reading the trace", im->path);
}

static int rec_append(struct imp *im, struct rec_list *l, const struct rec *r)
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

static uint32_t imp_name(struct imp *im, const char *s, size_t len)
{
    uint32_t id = strpool_intern(&im->rs->names, s, len);
    if (id == STRPOOL_NONE) {
        im->failed = 1;
        error_wrap("%s", im->path);
    }
    return id;
}

/* ---- classification ---- */

static int starts_with(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

/* bytes per element of a collective's dtype, 0 when unknown */
static int64_t dtype_bytes(const char *t)
{
    static const struct {
        const char *name;
        int bytes;
    } types[] = {{"Float", 4},        {"float", 4},        {"float32", 4},  {"f32", 4},
                 {"Double", 8},       {"double", 8},       {"float64", 8},  {"Half", 2},
                 {"half", 2},         {"float16", 2},      {"BFloat16", 2}, {"bfloat16", 2},
                 {"Int", 4},          {"int", 4},          {"int32", 4},    {"Long", 8},
                 {"long", 8},         {"int64", 8},        {"Short", 2},    {"int16", 2},
                 {"Char", 1},         {"Byte", 1},         {"Bool", 1},     {"int8", 1},
                 {"uint8", 1},        {"ComplexFloat", 8}, {"ComplexDouble", 16}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strcmp(t, types[i].name) == 0)
            return types[i].bytes;
    return 0;
}

static int is_allreduce_name(const char *c)
{
    return strcasestr(c, "allreduce") || strcasestr(c, "all_reduce");
}

/* The phase of a collective other than all-reduce named s[0..len) as PyTorch names them
 * (op suffixes, record_param_comms' Collective name, NCCL kernel infixes): broadcast,
 * all_gather / allgather / _allgather_base / all_gather_into_tensor, reduce_scatter /
 * _reduce_scatter_base / reduce_scatter_tensor, reduce, barrier; leading and trailing
 * underscores and a _base, _into_tensor, _tensor or _coalesced tail are not part of the
 * kind.  -1 for anything else (an all-reduce included). */
static int coll_phase_of(const char *s, size_t len)
{
    static const struct {
        const char *name;
        enum trace_phase ph;
    } kinds[] = {{"broadcast", TRACE_PHASE_COMM_BROADCAST},
                 {"allgather", TRACE_PHASE_COMM_ALLGATHER},
                 {"all_gather", TRACE_PHASE_COMM_ALLGATHER},
                 {"reducescatter", TRACE_PHASE_COMM_REDUCE_SCATTER},
                 {"reduce_scatter", TRACE_PHASE_COMM_REDUCE_SCATTER},
                 {"reduce", TRACE_PHASE_COMM_REDUCE},
                 {"barrier", TRACE_PHASE_BARRIER}};
    static const char *const tails[] = {"_coalesced", "_into_tensor", "_tensor", "_base"};
    while (len > 0 && s[0] == '_')
        s++, len--;
    while (len > 0 && s[len - 1] == '_')
        len--;
    for (size_t t = 0; t < sizeof tails / sizeof *tails; t++) {
        size_t n = strlen(tails[t]);
        if (len > n && strncasecmp(s + len - n, tails[t], n) == 0)
            len -= n;
    }
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        if (strlen(kinds[k].name) == len && strncasecmp(s, kinds[k].name, len) == 0)
            return (int)kinds[k].ph;
    return -1;
}

/* The phase of an NCCL kernel of a collective other than all-reduce (ncclKernel_Broadcast_
 * RING_LL_..., ncclDevKernel_AllGather_RING_LL, ..._ReduceScatter_...), or -1: the word
 * after the scheme's prefix. */
static int nccl_kernel_coll_phase(const char *name, size_t len)
{
    size_t i = starts_with(name, len, "ncclKernel_")      ? 11
               : starts_with(name, len, "ncclDevKernel_") ? 14
                                                          : len;
    size_t j = i;
    while (j < len && name[j] != '_' && name[j] != '(')
        j++;
    return j > i ? coll_phase_of(name + i, j - i) : -1;
}

/* "nccl:all_reduce", "gloo:all_reduce", ...: a backend's name, a colon, all_reduce */
static int is_backend_allreduce(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
        i++;
    return i > 0 && i < len && s[i] == ':' && starts_with(s + i + 1, len - i - 1, "all_reduce");
}

/* The length of "<backend>:" at the start of s ("gloo:", "nccl:", "mpi:"), else 0 (c10d's
 * "c10d::op" included) */
static size_t backend_prefix(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
        i++;
    return i > 0 && i + 1 < len && s[i] == ':' && s[i + 1] != ':' ? i + 1 : 0;
}

/* The bytes of a collective of phase ph from its args: "In msg nelems" x the size of
 * "dtype", but an all-gather's are what the rank receives ("Out msg nelems", world x in, as
 * a ddpprof run's); -1 when they are not there. */
static int64_t imp_other_bytes(struct imp *im, const struct pt_event *e, int ph)
{
    int out = ph == TRACE_PHASE_COMM_ALLGATHER && e->has_out_nelems;
    int64_t n = out ? e->out_nelems : e->in_nelems;
    if ((!out && !e->has_nelems) || !e->dtype[0])
        return -1;
    int64_t per = dtype_bytes(e->dtype);
    if (per == 0) {
        if (im->dtype_unknown++ == 0)
            snprintf(im->unknown_dtype, sizeof im->unknown_dtype, "%s", e->dtype);
        return -1;
    }
    return n > INT64_MAX / per ? -1 : n * per;
}

/* The collective's bytes from its args, -1 when they are not there (an all-reduce's). */
static int64_t imp_coll_bytes(struct imp *im, const struct pt_event *e)
{
    return imp_other_bytes(im, e, TRACE_PHASE_ALLREDUCE);
}

/* ---- the CPU window's output: records, in start order ---- */

/* The record of a phase (forward, backward, optimizer) whose host span holds t: the latest
 * such record starting at or before t (searching back a few records; the records are in
 * start order, a backward span holding its place from its first op). */
static struct rec *imp_phase_at(struct imp *im, int64_t t)
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

static int imp_cpu_out(struct imp *im, const struct rec *r)
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
        /* the record_param_comms around it on its thread carries the sizes */
        for (size_t k = im->recs.n, seen = 0; k-- > 0 && seen < IMPORT_LOOKBACK; seen++) {
            struct rec *p = &im->recs.v[k];
            if (p->kind == R_PARAMS && !p->used && p->tid == c.tid && p->start <= c.start &&
                c.start <= p->end) {
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
    default: /* step, forward, optimizer, data: a new call ends a backward span */
        im->bwd_open = 0;
        if (rec_append(im, &im->recs, r) < 0)
            return -1;
        if (r->kind == R_FORWARD)
            im->want_dims = im->recs.n;
        return 0;
    }
}

static int imp_cpu_push(struct imp *im, const struct rec *r)
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

/* A launch: corr (>= 0) launched at ts; a repeated corr takes the later launch. */
static int imp_launch_put(struct imp *im, int64_t corr, int64_t ts)
{
    struct launch_map *m = &im->launch;
    if (corr < 0)
        return 0; /* not a correlation id Kineto writes */
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

static int64_t imp_launch_get(const struct imp *im, int64_t corr)
{
    if (corr < 0)
        return -1;
    const struct launch_slot *s = launch_map_find(&im->launch, corr);
    return s->corr == corr ? s->ts : -1;
}

static int imp_dev_out(struct imp *im, struct dev_item *d)
{
    if (!im->dev_out) {
        /* Kineto writes the CPU events first: let them all out before the first kernel
         * is attributed to a phase */
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
     * before the last ProfilerStep began, and none whose launch is not in the trace */
    int swept = !im->hta || (d->launch >= 0 && d->launch < im->hta_last_step);
    if (swept)
        analysis_kernel_add(&im->kern, d->start, d->end, (enum kernel_class)d->cls, d->launch);
    if (swept && d->stream >= 0 &&
        analysis_kernel_stream_add(&im->kern, d->stream, d->start, d->end, d->launch) < 0)
        return -1;
    if (d->allreduce) {
        struct rec r = {.start = d->start, .end = d->end, .val = d->bytes, .launch = d->launch,
                        .name = d->name, .kind = R_NCCL};
        return rec_append(im, &im->nccl, &r);
    }
    if (d->coll) {
        struct rec r = {.start = d->start, .end = d->end, .val = d->bytes, .launch = d->launch,
                        .name = d->name, .kind = R_ODEV, .phase = d->coll};
        return rec_append(im, &im->odev, &r);
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

static int imp_cpu_event(struct imp *im, const struct pt_event *e, int64_t end)
{
    const char *n = e->name;
    size_t len = e->name_len;
    struct rec r = {.start = e->ts_ns, .end = end, .tid = e->tid, .val = -1, .launch = -1,
                    .name = STRPOOL_NONE};
    int bph; /* the phase of another collective's op */
    if (starts_with(n, len, "autograd::engine::evaluate_function: ")) {
        r.kind = R_BACKWARD;
        return imp_cpu_push(im, &r);
    }
    if (starts_with(n, len, "ProfilerStep#")) {
        char *stop;
        long long v = strtoll(n + 13, &stop, 10);
        if (stop == n + 13 || *stop || v < 0 || v > 1000000000)
            return 0; /* not a step number: ignored */
        r.kind = R_STEP;
        r.val = v;
    } else if (len == 31 && memcmp(n, "DistributedDataParallel.forward", 31) == 0) {
        r.kind = R_FORWARD;
    } else if (starts_with(n, len, "Optimizer.step#") ||
               starts_with(n, len, "Optimizer.zero_grad#")) {
        r.kind = R_OPTIMIZER;
    } else if (starts_with(n, len, "enumerate(DataLoader)#")) {
        r.kind = R_DATA;
    } else if (is_backend_allreduce(n, len)) {
        r.kind = R_COLL;
        r.val = imp_coll_bytes(im, e);
    } else if (len == 18 && memcmp(n, "record_param_comms", 18) == 0) {
        int ph = coll_phase_of(e->coll, strlen(e->coll));
        if (!is_allreduce_name(e->coll) && ph < 0)
            return 0;
        r.kind = ph < 0 ? R_PARAMS : R_OPARAMS;
        r.phase = (uint8_t)(ph < 0 ? 0 : ph);
        r.val = ph < 0 ? imp_coll_bytes(im, e) : imp_other_bytes(im, e, ph);
    } else if ((bph = backend_prefix(n, len) ? coll_phase_of(n + backend_prefix(n, len),
                                                             len - backend_prefix(n, len))
                                             : -1) >= 0) {
        r.kind = R_OCOLL; /* gloo:broadcast, nccl:_allgather_base, ... */
        r.phase = (uint8_t)bph;
        r.val = imp_other_bytes(im, e, bph);
    } else if (starts_with(n, len, "c10d::") && (bph = coll_phase_of(n + 6, len - 6)) >= 0) {
        r.kind = R_OISSUE; /* c10d::broadcast_, c10d::_allgather_base_, ... */
        r.phase = (uint8_t)bph;
        r.val = imp_other_bytes(im, e, bph);
    } else if (e->has_dims0) {
        r.kind = R_DIMS;
        r.val = e->dims0;
        return imp_cpu_push(im, &r);
    } else {
        return 0;
    }
    if ((r.name = imp_name(im, n, len)) == STRPOOL_NONE)
        return -1;
    return imp_cpu_push(im, &r);
}

static int imp_dev_event(struct imp *im, const struct pt_event *e, int64_t end)
{
    struct dev_item d = {.start = e->ts_ns, .end = end, .launch = -1, .corr = e->correlation,
                         .bytes = -1, .name = STRPOOL_NONE, .has_corr = e->has_corr,
                         .stream = e->has_stream && e->stream >= 0 ? e->stream : -1};
    if (e->cat == PT_CAT_KERNEL) {
        d.cls = KERNEL_COMPUTE;
        if (strcasestr(e->name, "nccl")) {
            d.cls = KERNEL_COMM;
            int known = starts_with(e->name, e->name_len, "ncclKernel_") ||
                        starts_with(e->name, e->name_len, "ncclDevKernel_");
            if (!known && im->unknown_nccl++ == 0)
                snprintf(im->unknown_nccl_name, sizeof im->unknown_nccl_name, "%.80s", e->name);
            d.allreduce = (known && strstr(e->name, "AllReduce")) ||
                          (e->coll[0] && is_allreduce_name(e->coll));
            int ph = d.allreduce ? -1
                     : known  ? nccl_kernel_coll_phase(e->name, e->name_len)
                              : coll_phase_of(e->coll, strlen(e->coll));
            if (ph < 0 && !d.allreduce && e->coll[0])
                ph = coll_phase_of(e->coll, strlen(e->coll));
            d.coll = (uint8_t)(ph > 0 ? ph : 0);
            if (d.allreduce || d.coll) {
                d.bytes = d.coll ? imp_other_bytes(im, e, d.coll) : imp_coll_bytes(im, e);
                if ((d.name = imp_name(im, e->name, e->name_len)) == STRPOOL_NONE)
                    return -1;
            }
        }
    } else {
        d.cls = KERNEL_MEMORY;
    }
    if (d.has_corr)
        d.launch = imp_launch_get(im, d.corr);
    struct dev_item out;
    if (reorder_push(&im->dev, &d, &out))
        return imp_dev_out(im, &out);
    return 0;
}

static int64_t us_floor(int64_t ns)
{
    int64_t q = ns / 1000;
    return (q - (ns % 1000 < 0)) * 1000;
}

static int64_t us_ceil(int64_t ns)
{
    return -us_floor(-ns);
}

static int imp_event_at(struct imp *im, const struct pt_event *e, int64_t end);

static int imp_event(void *ctx, const struct pt_event *e)
{
    struct imp *im = ctx;
    im->events++;
    if (e->ph != 'X')
        return 0;
    if (!e->has_ts || e->ts_ns < -IMPORT_MAX_TS || e->ts_ns > IMPORT_MAX_TS ||
        (e->has_dur && e->dur_ns > IMPORT_MAX_DUR)) {
        im->no_ts++;
        return 0;
    }
    int64_t dur = e->has_dur && e->dur_ns > 0 ? e->dur_ns : 0;
    int64_t end = e->ts_ns + dur;
    if (im->hta) { /* HTA's rounding: the start up, the end down, to µs */
        struct pt_event r = *e;
        r.ts_ns = us_ceil(e->ts_ns);
        end = us_floor(end);
        if (end < r.ts_ns)
            end = r.ts_ns;
        r.dur_ns = end - r.ts_ns;
        return imp_event_at(im, &r, end);
    }
    return imp_event_at(im, e, end);
}

static int imp_event_at(struct imp *im, const struct pt_event *e, int64_t end)
{
    switch (e->cat) {
    case PT_CAT_NONE:
    case PT_CAT_CPU_OP:
    case PT_CAT_USER_ANNOTATION:
        return imp_cpu_event(im, e, end);
    case PT_CAT_CUDA_RUNTIME:
    case PT_CAT_CUDA_DRIVER:
        return e->has_corr ? imp_launch_put(im, e->correlation, e->ts_ns) : 0;
    case PT_CAT_KERNEL:
    case PT_CAT_GPU_MEMCPY:
    case PT_CAT_GPU_MEMSET:
        return imp_dev_event(im, e, end);
    case PT_CAT_GPU_USER_ANNOTATION: {
        /* a record_function's span over its device work: an all-reduce's, or a phase's */
        const char *n = e->name;
        size_t len = e->name_len;
        struct rec r = {.start = e->ts_ns, .end = end, .val = -1, .launch = -1};
        if (is_backend_allreduce(n, len))
            r.kind = R_ANNOT;
        else if (len == 31 && memcmp(n, "DistributedDataParallel.forward", 31) == 0)
            r.kind = R_FORWARD;
        else if (starts_with(n, len, "autograd::engine::evaluate_function: "))
            r.kind = R_BACKWARD;
        else if (starts_with(n, len, "Optimizer.step#") ||
                 starts_with(n, len, "Optimizer.zero_grad#"))
            r.kind = R_OPTIMIZER;
        else if (starts_with(n, len, "enumerate(DataLoader)#"))
            r.kind = R_DATA;
        else
            return 0;
        if ((r.name = imp_name(im, n, len)) == STRPOOL_NONE)
            return -1;
        return rec_append(im, r.kind == R_ANNOT ? &im->annot : &im->gann, &r);
    }
    default:
        return 0;
    }
}

/* ---- reading the bytes ---- */

typedef int (*imp_feed_fn)(void *ctx, const void *buf, size_t len);

static int imp_feed_json(void *ctx, const void *buf, size_t len)
{
    return ptjson_feed(ctx, buf, len);
}

/* Read path through fn, gunzipping when it starts with gzip's magic bytes.  *truncated is
 * set when the gzip stream ends early.  Returns 0 or -1 after error_set(). */
static int imp_read_file(const char *path, imp_feed_fn fn, void *ctx, int *truncated)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set("%s: cannot open (%s)", path, strerror(errno));
    unsigned char *in = malloc(IMPORT_CHUNK), *out = NULL;
    z_stream z;
    memset(&z, 0, sizeof z);
    int gz = -1, zinit = 0, rc = 0, zend = 0;
    uint64_t at = 0;
    if (!in) {
        close(fd);
        return error_set("%s: out of memory for the read buffer", path);
    }
    for (;;) {
        ssize_t got = read(fd, in, IMPORT_CHUNK);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = error_set("%s: read failed (%s)", path, strerror(errno));
            break;
        }
        if (got == 0)
            break;
        if (gz < 0) {
            gz = got >= 2 && in[0] == 0x1f && in[1] == 0x8b;
            if (gz) {
                out = malloc(IMPORT_CHUNK);
                if (!out || inflateInit2(&z, 15 + 32) != Z_OK) {
                    rc = error_set("%s: out of memory for gzip", path);
                    break;
                }
                zinit = 1;
            }
        }
        at += (uint64_t)got;
        if (!gz) {
            if ((rc = fn(ctx, in, (size_t)got)) < 0)
                break;
            continue;
        }
        z.next_in = in;
        z.avail_in = (uInt)got;
        while (rc == 0 && z.avail_in > 0) {
            if (zend) { /* another gzip member follows (concatenated .gz) */
                if (inflateReset(&z) != Z_OK) {
                    rc = error_set("%s: gzip reset failed", path);
                    break;
                }
                zend = 0;
            }
            z.next_out = out;
            z.avail_out = IMPORT_CHUNK;
            int zr = inflate(&z, Z_NO_FLUSH);
            if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
                rc = error_set("%s: corrupt gzip data near byte %llu (zlib: %s)", path,
                               (unsigned long long)(at - z.avail_in), z.msg ? z.msg : "error");
                break;
            }
            size_t n = IMPORT_CHUNK - z.avail_out;
            if (n && (rc = fn(ctx, out, n)) < 0)
                break;
            if (zr == Z_STREAM_END)
                zend = 1;
            if (zr == Z_BUF_ERROR && n == 0)
                break;
        }
        if (rc < 0)
            break;
    }
    if (rc == 0 && gz == 1) { /* drain what inflate still holds */
        for (;;) {
            z.next_out = out;
            z.avail_out = IMPORT_CHUNK;
            z.avail_in = 0;
            int zr = inflate(&z, Z_FINISH);
            size_t n = IMPORT_CHUNK - z.avail_out;
            if (n && (rc = fn(ctx, out, n)) < 0)
                break;
            if (zr == Z_STREAM_END)
                zend = 1;
            if (zr != Z_OK || n == 0)
                break;
        }
        if (rc == 0 && !zend)
            *truncated = 1;
    }
    if (zinit)
        inflateEnd(&z);
    free(in);
    free(out);
    close(fd);
    return rc;
}

/* ---- one rank: start, feed, finish ---- */

static int imp_init(struct imp *im, struct runset *rs, const char *path)
{
    memset(im, 0, sizeof *im);
    im->path = path;
    im->rs = rs;
    im->hta = rs->hta_defaults;
    im->hta_last_step = INT64_MAX;
    if (launch_map_init(&im->launch, IMPORT_LAUNCHES) < 0 ||
        reorder_init(&im->cpu, CPU_REC_BYTES, IMPORT_WINDOW) < 0 ||
        reorder_init(&im->dev, sizeof(struct dev_item), IMPORT_WINDOW) < 0)
        return imp_oom(im);
    static const char bwd[] = "autograd::engine::evaluate_function (backward span)";
    if ((im->n_backward = imp_name(im, bwd, sizeof bwd - 1)) == STRPOOL_NONE)
        return -1;
    return 0;
}

static void imp_free(struct imp *im)
{
    reorder_free(&im->cpu);
    reorder_free(&im->dev);
    free(im->launch.slot);
    free(im->recs.v);
    free(im->nccl.v);
    free(im->annot.v);
    free(im->odev.v);
    free(im->gann.v);
    for (int i = 0; i < im->kern.nstreams; i++)
        free(im->kern.streams[i].v);
    free(im->kern.streams);
}

/* Let every window's records out, CPU first. */
static int imp_drain(struct imp *im)
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
    return analysis_kernel_finish(&im->kern);
}

/* ---- steps, buckets, rows ---- */

struct step_span {
    int64_t start, end; /* end: exclusive */
    int32_t number;
};

/* A rank's own number for ProfilerStep#N: N + 1, so that every step is >= 1 (step 0 means
 * "outside every step") even when torch.profiler counts from #0; the run renumbers them
 * N - min N + 1 over its ranks (imp_run). */
static int32_t imp_step_number(int64_t n)
{
    return (int32_t)n + 1; /* n <= 1e9 (imp_cpu_event) */
}

/* The steps of a rank: ProfilerStep ranges; without them, from one
 * DistributedDataParallel.forward to the next; without those, from one optimizer call's
 * end to the next; without those, the whole trace.  *why says which (for the warning). */
static int imp_steps(struct imp *im, struct step_span **out, size_t *n, const char **why)
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
        if (im->nccl.v[i].start < first) /* a trace of device all-reduces alone */
            first = im->nccl.v[i].start;
        if (im->nccl.v[i].end > last)
            last = im->nccl.v[i].end;
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

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
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

/* Bucket numbers: the order of the all-reduce records of one kind within their step
 * (the list is in start order); records outside steps get none (-1). */
static void imp_number_buckets(struct rec_list *l, int kind)
{
    int32_t step = -1, next = 0;
    for (size_t i = 0; i < l->n; i++) {
        struct rec *r = &l->v[i];
        if (r->kind != kind)
            continue;
        if (r->step != step) {
            step = r->step;
            next = 0;
        }
        r->bucket = r->step >= 1 ? next++ : -1;
    }
}

static int imp_row(struct imp *im, struct rank_trace *t, const struct rec *r, int clock,
                   int64_t s, int64_t e)
{
    if (VEC_RESERVE(t->rows, t->cap, t->n + 1))
        return imp_oom(im);
    enum trace_phase ph = r->kind >= R_OCOLL ? (enum trace_phase)r->phase : rec_phase[r->kind];
    struct run_row *row = &t->rows[t->n];
    memset(row, 0, sizeof *row);
    row->start_ns = s;
    row->end_ns = e;
    row->bytes = trace_phase_collective(ph) ? r->val : 0;
    row->step = r->step;
    row->epoch = -1;
    row->bucket = ph == TRACE_PHASE_ALLREDUCE ? r->bucket : -1;
    row->stream = trace_phase_collective(ph) ? TRACE_LANE_COMM
                  : ph == TRACE_PHASE_DATA   ? TRACE_LANE_DATA
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

/* In the steps where no backend all-reduce op (nccl:all_reduce, ...) was recorded, the
 * record_param_comms of the all-reduces stand for them. */
static int imp_params_as_coll(struct imp *im)
{
    int64_t *with = malloc((im->recs.n + 1) * sizeof *with);
    size_t n = 0;
    if (!with)
        return imp_oom(im);
    for (size_t i = 0; i < im->recs.n; i++)
        if (im->recs.v[i].kind == R_COLL)
            with[n++] = im->recs.v[i].step;
    qsort(with, n, sizeof *with, cmp_i64);
    for (size_t i = 0; i < im->recs.n; i++) {
        struct rec *r = &im->recs.v[i];
        int64_t step = r->step;
        if (r->kind == R_PARAMS && !r->used && !bsearch(&step, with, n, sizeof *with, cmp_i64))
            r->kind = R_COLL;
    }
    free(with);
    return 0;
}

/* ---- the other collectives: one row each ---- */

/* The indices in l of the records of this kind and phase, in list order, into *out (the
 * caller frees it); returns the count, or (size_t)-1 out of memory. */
static size_t imp_collect(const struct rec_list *l, int kind, int phase, size_t **out)
{
    size_t n = 0;
    *out = malloc((l->n + 1) * sizeof **out);
    if (!*out)
        return (size_t)-1;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == kind && l->v[i].phase == phase)
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

/* imp_pair_steps over the records of kind ka in la and kind kb in lb, both of phase ph.
 * 0, or -1 after error_set() (out of memory). */
static int imp_pair_kinds(struct imp *im, struct rec_list *la, int ka, struct rec_list *lb,
                          int kb, int ph, imp_pair_fn fn)
{
    size_t *a = NULL, *b = NULL;
    size_t na = imp_collect(la, ka, ph, &a), nb = imp_collect(lb, kb, ph, &b);
    int rc = na == (size_t)-1 || nb == (size_t)-1 ? imp_oom(im) : 0;
    if (rc == 0)
        imp_pair_steps(la, a, na, lb, b, nb, fn);
    free(a);
    free(b);
    return rc;
}

/* record_param_comms b inside the op a that issued it: a takes its size */
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

/* The unused records of kind from and this phase in l become kind to. */
static void imp_promote(struct rec_list *l, int from, int to, int phase)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == from && l->v[i].phase == phase && !l->v[i].used)
            l->v[i].kind = (uint8_t)to;
}

/* A collective other than an all-reduce is one row (R_OCOLL) per call: its backend op
 * (gloo:broadcast) from the start of the op that issued it (c10d::broadcast_, else its
 * record_param_comms) to the later end; without a backend op, the issuing op alone; sizes
 * from record_param_comms.  Records are paired by their order within the step and kind;
 * (outside steps: in the group of step 0).  Device collectives (NCCL kernels) exchange sizes with
 * the host rows.  0, or -1 after error_set(). */
static int imp_other_collectives(struct imp *im)
{
    for (int ph = 0; ph < TRACE_PHASE_COUNT; ph++) {
        if (!trace_phase_collective(ph) || ph == TRACE_PHASE_ALLREDUCE ||
            ph == TRACE_PHASE_COMM_ALLREDUCE)
            continue;
        if (imp_pair_kinds(im, &im->recs, R_OISSUE, &im->recs, R_OPARAMS, ph, pair_params) < 0)
            return -1;
        imp_promote(&im->recs, R_OPARAMS, R_OISSUE, ph);
        if (imp_pair_kinds(im, &im->recs, R_OCOLL, &im->recs, R_OISSUE, ph, pair_issue) < 0)
            return -1;
        imp_promote(&im->recs, R_OISSUE, R_OCOLL, ph);
        if (imp_pair_kinds(im, &im->odev, R_ODEV, &im->recs, R_OCOLL, ph, pair_sizes) < 0)
            return -1;
    }
    return 0;
}

/* What the rank came to, for the run. */
struct imp_result {
    int64_t images;  /* sum of the batch sizes of the forwards in steps, -1 unknown */
    int64_t base_ns; /* added to every time (baseTimeNanoseconds) */
    int32_t first_step, steps;
    int device_rows; /* the all-reduce rows of the device, not the host, count */
};

static int imp_finish(struct imp *im, struct rank_trace *t, struct imp_result *res)
{
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
    /* steps, buckets */
    for (size_t i = 0; i < im->recs.n; i++) {
        struct rec *r = &im->recs.v[i];
        r->step = r->kind == R_STEP ? imp_step_number(r->val)
                                    : imp_step_at(steps, nsteps, r->start);
    }
    struct rec_list *dev = im->nccl.n ? &im->nccl : &im->annot;
    if (!im->nccl.n && im->annot.n) {
        if (sort_by_i64(im->annot.v, im->annot.n, sizeof *im->annot.v, 0) < 0) {
            free(steps);
            return error_wrap("%s", im->path);
        }
        if (im->unknown_nccl)
            report_warn("%s: no all-reduce kernel with a known NCCL name (ncclKernel_*, "
                        "ncclDevKernel_*): device all-reduce times taken from the %zu "
                        "gpu_user_annotation ranges instead",
                        im->path, im->annot.n);
    }
    for (size_t i = 0; i < dev->n; i++) {
        struct rec *r = &dev->v[i];
        r->step = imp_step_at(steps, nsteps, r->launch >= 0 ? r->launch : r->start);
    }
    for (size_t i = 0; i < im->odev.n; i++) {
        struct rec *r = &im->odev.v[i];
        r->step = imp_step_at(steps, nsteps, r->launch >= 0 ? r->launch : r->start);
    }
    if (imp_other_collectives(im) < 0) {
        free(steps);
        return -1;
    }
    /* the host all-reduces: the backend ops; in a step without any, its record_param_comms */
    if (imp_params_as_coll(im) < 0) {
        free(steps);
        return -1;
    }
    imp_number_buckets(&im->recs, R_COLL);
    imp_number_buckets(&im->recs, R_PARAMS);
    imp_number_buckets(dev, dev == &im->nccl ? R_NCCL : R_ANNOT);
    /* sizes by order within the step: a backend op on another thread than its
     * record_param_comms (gloo's worker) takes the k-th one's; a device all-reduce without
     * args takes its host collective's */
    imp_fill_bytes(&im->recs, R_COLL, &im->recs, R_PARAMS);
    imp_fill_bytes(dev, dev == &im->nccl ? R_NCCL : R_ANNOT, &im->recs, R_COLL);
    /* rows */
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
    if (why) /* fallback steps become step rows */
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
     * export) takes its device time from its gpu_user_annotation spans */
    int launched[R_ODEV + 1] = {0};
    for (size_t i = 0; i < im->recs.n; i++)
        launched[im->recs.v[i].kind] |= im->recs.v[i].dev_start >= 0;
    for (size_t i = 0; i < im->gann.n && !im->failed; i++) {
        struct rec *g = &im->gann.v[i];
        if (launched[g->kind])
            continue;
        g->step = imp_step_at(steps, nsteps, g->start);
        imp_row(im, t, g, TRACE_CLOCK_DEVICE, g->start, g->end);
    }
    res->images = images_known && forwards > 0 ? images : -1;
    res->device_rows = dev->n > 0;
    free(steps);
    if (im->failed)
        return -1;
    t->has_kernels = 1;
    t->kern = im->kern;
    im->kern.streams = NULL; /* the rank_trace owns them now */
    im->kern.nstreams = 0;
    return 0;
}

/* The warnings of a rank read to the end (or to a cut). */
static void imp_warn(const struct imp *im)
{
    if (im->truncated)
        report_warn("%s: the file is cut short after %llu bytes (a truncated write?): using the "
                    "%llu events before the cut",
                    im->path, (unsigned long long)im->bytes_read,
                    (unsigned long long)im->events);
    char shown[TEXT_PRINTABLE_MAX];
    if (im->unknown_nccl)
        report_warn("%s: %llu NCCL kernel(s) named in no known scheme (e.g. '%s'; known: "
                    "ncclKernel_*, ncclDevKernel_*): counted as communication in the kernel "
                    "figures; all-reduce buckets only from their Collective name args or "
                    "nccl:all_reduce annotations",
                    im->path, (unsigned long long)im->unknown_nccl,
                    text_printable(im->unknown_nccl_name, 80, shown, sizeof shown));
    if (im->dtype_unknown)
        report_warn("%s: %llu collective(s) of dtype '%s' (size unknown): their bytes are left "
                    "empty",
                    im->path, (unsigned long long)im->dtype_unknown,
                    text_printable(im->unknown_dtype, 30, shown, sizeof shown));
    if (im->cpu.late || im->dev.late)
        report_warn("%s: %llu event(s) more than %d events out of time order: phase spans and "
                    "kernel figures near them are approximate",
                    im->path, (unsigned long long)(im->cpu.late + im->dev.late), IMPORT_WINDOW);
    if (im->cpu_after_dev)
        report_warn("%s: %llu CPU event(s) came after device activity launched later (not "
                    "Kineto's order): device phase times may miss kernels",
                    im->path, (unsigned long long)im->cpu_after_dev);
    if (im->unlaunched && im->launch.n)
        report_warn("%s: %llu device activit%s whose correlation no cuda_runtime/cuda_driver "
                    "event carries (of %zu launches): their launch time is unknown (host wait "
                    "counts none of their gaps, no phase takes them)",
                    im->path, (unsigned long long)im->unlaunched,
                    im->unlaunched == 1 ? "y" : "ies", im->launch.n);
    if (im->no_ts)
        report_warn("%s: %llu event(s) without a usable ts (none, not a number, or beyond 127 "
                    "years; or longer than 28 hours): skipped",
                    im->path, (unsigned long long)im->no_ts);
}

/* Read one rank: from path (buf NULL) or from buf[0..len).  Fills t's rows, *hdr, *res. */
static int last_step_event(void *ctx, const struct pt_event *e)
{
    int64_t *last = ctx;
    if (e->ph == 'X' && e->has_ts && starts_with(e->name, e->name_len, "ProfilerStep#")) {
        int64_t ts = us_ceil(e->ts_ns);
        if (*last == INT64_MAX || ts > *last)
            *last = ts;
    }
    return 0;
}

/* --hta-defaults: the start of the trace's last ProfilerStep, rounded up to µs as HTA
 * rounds it (INT64_MAX: none, nothing dropped).  Returns 0, or -1 after error_set(). */
static int imp_last_step(const char *path, const char *buf, size_t len, int64_t *last)
{
    struct ptjson *p = ptjson_new(path, last_step_event, last);
    if (!p)
        return -1;
    int cut = 0;
    int rc = buf ? ptjson_feed(p, buf, len) : imp_read_file(path, imp_feed_json, p, &cut);
    if (rc == 0 && ptjson_finish(p) < 0)
        rc = -1;
    ptjson_free(p);
    return rc;
}

static int imp_rank(struct runset *rs, const char *path, const char *buf, size_t len,
                    struct rank_trace *t, struct pt_header *hdr, struct imp_result *res)
{
    struct imp *im = malloc(sizeof *im);
    if (!im)
        return error_set("%s: out of memory reading the trace", path);
    int rc = imp_init(im, rs, path);
    struct ptjson *p = rc == 0 ? ptjson_new(path, imp_event, im) : NULL;
    if (rc == 0 && !p)
        rc = -1;
    int gz_cut = 0;
    if (rc == 0 && im->hta) /* a first pass for the last ProfilerStep's start */
        rc = imp_last_step(path, buf, len, &im->hta_last_step);
    if (rc == 0)
        rc = buf ? ptjson_feed(p, buf, len) : imp_read_file(path, imp_feed_json, p, &gz_cut);
    if (rc == 0) {
        rc = ptjson_finish(p);
        im->truncated = rc == 1 || gz_cut;
        if (rc == 1)
            rc = 0;
    }
    if (p) {
        *hdr = *ptjson_header(p);
        im->bytes_read = ptjson_bytes(p);
    }
    ptjson_free(p);
    if (rc == 0 && hdr->format == PT_FORMAT_KINETO && !hdr->has_schema && im->events == 0)
        rc = error_set("%s: a JSON object without traceEvents or schemaVersion: not a PyTorch "
                       "profiler trace",
                       path);
    if (rc == 0 && im->events == 0)
        rc = error_set("%s: no trace events in it (traceEvents is empty%s)", path,
                       im->truncated ? ", or the file is cut before them" : "");
    if (rc == 0)
        rc = imp_drain(im);
    if (rc == 0 && im->recs.n == 0 && im->nccl.n == 0 && im->kern.count == 0)
        rc = error_set("%s: none of its %llu events is part of a training step "
                       "(ProfilerStep#N, DistributedDataParallel.forward, autograd "
                       "evaluate_function, Optimizer.step, DataLoader, a collective, a kernel): "
                       "not a PyTorch training trace?",
                       path, (unsigned long long)im->events);
    if (rc == 0) {
        imp_warn(im);
        rc = imp_finish(im, t, res);
    }
    res->base_ns = hdr->has_base ? hdr->base_ns : 0;
    if (rc == 0 && (res->base_ns < 0 || res->base_ns > IMPORT_MAX_TS)) {
        report_warn("%s: baseTimeNanoseconds %lld is out of range: taken as 0", path,
                    (long long)res->base_ns);
        res->base_ns = 0;
    }
    imp_free(im);
    free(im);
    return rc;
}

/* ---- runs ---- */

/* "host" of a tensorboard_trace_handler file name "<host>_<pid>.<ms>.pt.trace.json[.gz]" */
static char *imp_host_of(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strchr(base, '.'), *us = NULL;
    for (const char *c = base; c < (dot ? dot : base + strlen(base)); c++)
        if (*c == '_')
            us = c;
    if (!us || us == base || !strstr(base, ".pt.trace.json"))
        return NULL;
    for (const char *c = us + 1; c < dot; c++) /* after the last '_': the pid's digits */
        if (*c < '0' || *c > '9')
            return NULL;
    return strndup(base, (size_t)(us - base));
}

int import_is_trace_name(const char *name)
{
    size_t n = strlen(name);
    if (strcmp(name, "timeline.json") == 0)
        return 0;
    return (n > 5 && strcmp(name + n - 5, ".json") == 0) ||
           (n > 8 && strcmp(name + n - 8, ".json.gz") == 0);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int import_dir_traces(const char *dir, char ***paths, int *n)
{
    *paths = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return error_set("%s: cannot list the directory (%s)", dir, strerror(errno));
    char **v = NULL;
    size_t cap = 0;
    int count = 0, pt = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !import_is_trace_name(e->d_name))
            continue;
        char *p = NULL;
        struct stat st;
        if (asprintf(&p, "%s/%s", dir, e->d_name) < 0 || VEC_RESERVE(v, cap, (size_t)count + 1)) {
            free(p);
            rc = error_set("report: out of memory listing %s", dir);
            break;
        }
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(p);
            continue;
        }
        pt += strstr(e->d_name, ".pt.trace.json") != NULL;
        v[count++] = p;
    }
    closedir(d);
    if (rc == 0 && pt > 0) { /* tensorboard_trace_handler's files only */
        int k = 0;
        for (int i = 0; i < count; i++) {
            const char *base = strrchr(v[i], '/') + 1;
            if (strstr(base, ".pt.trace.json"))
                v[k++] = v[i];
            else
                free(v[i]);
        }
        count = k;
    }
    if (rc < 0) {
        for (int i = 0; i < count; i++)
            free(v[i]);
        free(v);
        return -1;
    }
    if (count > 1)
        qsort(v, (size_t)count, sizeof *v, cmp_str);
    *paths = v;
    *n = count;
    return 0;
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

/* Each rank's offset to the reference (the lowest rank): 0 on the reference's host when
 * both share a clock (Kineto, same host), else the median over shared all-reduces of
 * end_ref - end_rank (analysis_clock_offset). */
static int imp_align(struct run *run, const enum pt_format *fmt)
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
        if (fmt[k] == PT_FORMAT_KINETO && fmt[0] == PT_FORMAT_KINETO && t->host && ref->host &&
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
            int64_t off = nd > 0 ? analysis_clock_offset(d, nd) : 0;
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

/* Read the ranks (files, or one buffer) into a new run of rs. */
static int imp_run(struct runset *rs, const char *where, char *const *paths, int n,
                   const char *buf, size_t len)
{
    struct run *run = runset_new_run(rs, where);
    if (!run)
        return -1;
    run->ranks = calloc((size_t)n + 1, sizeof *run->ranks);
    struct imp_result *res = calloc((size_t)n + 1, sizeof *res);
    struct pt_header *hdr = calloc((size_t)n + 1, sizeof *hdr);
    enum pt_format *fmt = calloc((size_t)n + 1, sizeof *fmt);
    int rc = 0;
    if (!run->ranks || !res || !hdr || !fmt)
        rc = error_set("report: out of memory for %d traces", n);
    for (int i = 0; i < n && rc == 0; i++) {
        struct rank_trace *t = &run->ranks[i];
        run->nranks++;
        if (!(t->path = strdup(paths[i]))) {
            rc = error_set("report: out of memory");
            break;
        }
        rc = imp_rank(rs, t->path, buf, len, t, &hdr[i], &res[i]);
        t->host = buf ? NULL : imp_host_of(paths[i]);
    }
    /* ranks */
    int64_t world = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        int named;
        if (hdr[i].has_world && (hdr[i].world_size < 1 || hdr[i].world_size > 65536)) {
            rc = error_set("%s: distributedInfo.world_size = %lld is not in [1, 65536]: the "
                           "trace is damaged or was edited",
                           paths[i], (long long)hdr[i].world_size);
            break;
        }
        if (hdr[i].bad_durs)
            report_warn("%s: %llu complete event(s) with a dur that is no duration (negative, "
                        "not a number, or beyond 292 years): left out",
                        paths[i], (unsigned long long)hdr[i].bad_durs);
        if (hdr[i].has_rank && (hdr[i].rank < 0 || hdr[i].rank >= 65536)) {
            rc = error_set("%s: distributedInfo.rank = %lld is not in [0, 65536): the trace is "
                           "damaged or was edited",
                           paths[i], (long long)hdr[i].rank);
            break;
        }
        if (hdr[i].has_rank && hdr[i].rank >= 0 && hdr[i].rank < 65536) {
            run->ranks[i].rank = (int)hdr[i].rank;
        } else {
            /* the rank a file name says ("..._rank1...", not for a trace given in memory),
             * else the file's place in the list */
            const int by_name = !buf && ptjson_rank_of_name(paths[i], &named);
            run->ranks[i].rank = by_name ? named : i;
            report_warn("%s: no distributedInfo.rank (%s): taken as rank %d from the file %s",
                        paths[i],
                        hdr[i].format == PT_FORMAT_LEGACY ? "the legacy exporter writes none"
                                                          : "not a distributed run?",
                        run->ranks[i].rank, by_name ? "name" : "order");
        }
        if (hdr[i].has_world && hdr[i].world_size > world && hdr[i].world_size <= 65536)
            world = hdr[i].world_size;
    }
    for (int i = 0; i < n && rc == 0; i++)
        for (int k = 0; k < i && rc == 0; k++)
            if (run->ranks[i].rank == run->ranks[k].rank)
                rc = error_set("%s and %s are both rank %d: give the traces of different runs "
                               "as separate directories",
                               paths[k], paths[i], run->ranks[i].rank);
    if (rc == 0) {
        /* in rank order (res, hdr and fmt follow the same permutation) */
        for (int i = 0; i < n; i++)
            fmt[i] = hdr[i].format;
        struct {
            struct rank_trace t;
            struct imp_result r;
            struct pt_header h;
            enum pt_format f;
        } *tmp = calloc((size_t)n, sizeof *tmp);
        if (!tmp) {
            rc = error_set("report: out of memory");
        } else {
            for (int i = 0; i < n; i++) {
                tmp[i].t = run->ranks[i];
                tmp[i].r = res[i];
                tmp[i].h = hdr[i];
                tmp[i].f = fmt[i];
            }
            qsort(tmp, (size_t)n, sizeof *tmp, cmp_rank);
            for (int i = 0; i < n; i++) {
                run->ranks[i] = tmp[i].t;
                res[i] = tmp[i].r;
                hdr[i] = tmp[i].h;
                fmt[i] = tmp[i].f;
            }
            free(tmp);
        }
    }
    if (rc == 0) {
        run->world_size = (int)(world > 0 ? world : run->ranks[n - 1].rank + 1);
        if (run->world_size < n)
            run->world_size = n;
        if (n < run->world_size)
            report_warn("%s: world_size is %d but only %d rank trace(s) given", where,
                        run->world_size, n);
        /* steps renumbered from 1 over the run: ProfilerStep#N - (the smallest N) + 1 */
        int32_t first = INT32_MAX;
        for (int i = 0; i < n; i++)
            if (res[i].steps > 0 && res[i].first_step < first)
                first = res[i].first_step;
        /* each file's times onto its own absolute clock (+ baseTimeNanoseconds) */
        for (int i = 0; i < n; i++) {
            struct rank_trace *t = &run->ranks[i];
            for (size_t r = 0; r < t->n; r++) {
                if (t->rows[r].step >= 1 && first != INT32_MAX)
                    t->rows[r].step -= first - 1;
                t->rows[r].start_ns += res[i].base_ns;
                t->rows[r].end_ns += res[i].base_ns;
            }
        }
        rc = imp_align(run, fmt);
    }
    int64_t images = 0;
    int images_known = 1, any_kernels = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        struct rank_trace *t = &run->ranks[i];
        for (size_t r = 0; r < t->n; r++) {
            t->rows[r].start_ns += t->offset_ns;
            t->rows[r].end_ns += t->offset_ns;
        }
        if (res[i].images < 0)
            images_known = 0;
        else
            images += res[i].images;
        any_kernels |= t->kern.count > 0 || hdr[i].devices > 0;
    }
    if (rc == 0) {
        int legacy = 0;
        for (int i = 0; i < n; i++)
            legacy |= fmt[i] == PT_FORMAT_LEGACY;
        run->format = legacy ? "legacy" : "kineto";
        run->has_metrics = images_known && n == run->world_size;
        run->metrics_images = images;
        char ws[16];
        snprintf(ws, sizeof ws, "%d", run->world_size);
        rc = run_meta_add(run, "world_size", ws);
        if (rc == 0)
            rc = run_meta_add(run, "device", any_kernels ? "cuda" : "cpu");
        if (rc == 0 && hdr[0].has_backend)
            rc = run_meta_add(run, "comm", hdr[0].backend);
        if (rc == 0)
            rc = run_meta_add(run, "mode", run->world_size > 1 ? "ddp" : "");
    }
    free(res);
    free(hdr);
    free(fmt);
    return rc;
}

int import_run(struct runset *rs, const char *where, char *const *paths, int n)
{
    if (n < 1)
        return error_set("%s: no PyTorch profiler traces (*.json, *.json.gz) in it", where);
    return imp_run(rs, where, paths, n, NULL, 0);
}

int import_buffer(struct runset *rs, const char *buf, size_t len, const char *what)
{
    char *paths[1] = {(char *)what};
    return imp_run(rs, what, paths, 1, buf, len);
}
