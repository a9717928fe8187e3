/* kineto.c — the Kineto export (see kineto.h): per rank, the rows sorted by start, written
 * as Kineto's ChromeTraceLogger lays them out. */
#include "report/output/kineto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "report/output/outfile.h"
#include "report/input/sort.h"
#include "report/output/timeline.h"

#define KINETO_CPU_PID 10000 /* + rank: the process of the rank's CPU events */
#define KINETO_COMPUTE_STREAM 7 /* the lanes of device-clock ranges, as CUDA streams */
#define KINETO_COMM_STREAM 20
#define KINETO_DATA_STREAM 21

/* One row's place in the file: the sort key first. */
struct kx {
    int64_t start;
    int64_t idx;
};

struct kx_ctx {
    FILE *f;
    const struct runset *rs;
    const struct run *run;
    const struct rank_trace *t;
    int64_t base_ns;
    int first;
    uint32_t ph[TRACE_PHASE_COUNT]; /* labels ids of the phases (STRPOOL_NONE: absent) */
    uint32_t kind[TRACE_KIND_COUNT];
    const char *backend;
    const int *tid;     /* per row: its lane and sub-lane (timeline_assign_lanes) */
    const int64_t *ext; /* per row: the External id pairing a host range with its device
                           range (0: none) */
};

/* The sub-lane of row i (0: the lane itself). */
static int kx_sub(const struct kx_ctx *c, size_t i)
{
    return c->tid[i] / TIMELINE_SUBLANE;
}

/* The thread of a host range's CPU events: 1 + its lane, sub-lanes 100 apart. */
static int kx_cpu_tid(const struct kx_ctx *c, size_t i)
{
    const struct run_row *r = &c->t->rows[i];
    return 1 + (r->stream >= 0 && r->stream < 100 ? r->stream : 0) + 100 * kx_sub(c, i);
}

/* The stream of a device range's annotation: the compute, comm or data lane's (Kineto
 * writes a record_function's device span on the stream of its work), sub-lanes 1000
 * apart: one lane per bucket in flight, as the timeline draws them. */
static int kx_dev_tid(const struct kx_ctx *c, size_t i)
{
    const struct run_row *r = &c->t->rows[i];
    const int base = r->stream == TRACE_LANE_COMM   ? KINETO_COMM_STREAM
                     : r->stream == TRACE_LANE_DATA ? KINETO_DATA_STREAM
                                                    : KINETO_COMPUTE_STREAM;
    return base + 1000 * kx_sub(c, i);
}

static void kx_sep(struct kx_ctx *c)
{
    fputs(c->first ? "\n  " : ",\n  ", c->f);
    c->first = 0;
}

static void kx_str(FILE *f, const char *s)
{
    char *q = timeline_json_quote(s);
    fputs(q ? q : "\"?\"", f);
    free(q);
}

/* ns on the run's clock as Kineto's µs with three decimals from baseTimeNanoseconds */
static void kx_ts(FILE *f, const char *key, int64_t ns)
{
    int neg = ns < 0;
    uint64_t u = neg ? 0 - (uint64_t)ns : (uint64_t)ns;
    fprintf(f, "\"%s\": %s%llu.%03llu", key, neg ? "-" : "", (unsigned long long)(u / 1000),
            (unsigned long long)(u % 1000));
}

static int kx_phase(const struct kx_ctx *c, const struct run_row *r)
{
    for (int p = 0; p < TRACE_PHASE_COUNT; p++)
        if (c->ph[p] != STRPOOL_NONE && r->phase == c->ph[p])
            return p;
    return -1;
}

/* The CPU event a ddpprof phase becomes: its name and Kineto category. */
static const char *kx_cpu_name(const struct kx_ctx *c, const struct run_row *r, int phase,
                               char *name, size_t cap)
{
    switch (phase) {
    case TRACE_PHASE_STEP:
        snprintf(name, cap, "ProfilerStep#%d", r->step);
        return "user_annotation";
    case TRACE_PHASE_FORWARD:
        snprintf(name, cap, "DistributedDataParallel.forward");
        return "user_annotation";
    case TRACE_PHASE_BACKWARD:
        snprintf(name, cap, "autograd::engine::evaluate_function: ddpprof.backward");
        return "cpu_op";
    case TRACE_PHASE_OPTIMIZER:
        snprintf(name, cap, "Optimizer.step#ddpprof.step");
        return "user_annotation";
    case TRACE_PHASE_DATA:
        snprintf(name, cap, "enumerate(DataLoader)#ddpprof.loader");
        return "user_annotation";
    case TRACE_PHASE_ALLREDUCE:
        snprintf(name, cap, "%s:all_reduce", c->backend);
        return "cpu_op";
    case TRACE_PHASE_COMM_BROADCAST:
    case TRACE_PHASE_COMM_ALLGATHER:
    case TRACE_PHASE_COMM_REDUCE_SCATTER:
    case TRACE_PHASE_COMM_REDUCE:
    case TRACE_PHASE_BARRIER: /* gloo:broadcast, ...: the backend's op, as PyTorch names it */
        snprintf(name, cap, "%s:%s", c->backend,
                 phase == TRACE_PHASE_COMM_ALLGATHER ? "all_gather"
                                                     : trace_phase_collective(phase));
        return "cpu_op";
    case TRACE_PHASE_COMM_ALLREDUCE: /* the comm's calibration (step -1, counted by no table)
                                        apart from the all-reduces of training */
        snprintf(name, cap, "ddpprof.%s", r->step < 0 ? "calib.allreduce" : "comm.allreduce");
        return "user_annotation";
    case TRACE_PHASE_LAYER_FORWARD: /* a layer's range: the phase and the module's name */
    case TRACE_PHASE_LAYER_BACKWARD:
        snprintf(name, cap, "ddpprof.%s: %s", trace_phase_name(phase),
                 strpool_get(&c->rs->names, r->name));
        return "user_annotation";
    default:
        snprintf(name, cap, "ddpprof.%s", phase >= 0 ? trace_phase_name(phase) : "range");
        return "user_annotation";
    }
}

/* the arg "External id": K (linking a CPU event to its device range, as Kineto links a
 * record_function to its gpu_user_annotation) */
static void kx_ext(FILE *f, int64_t ext)
{
    if (ext > 0)
        fprintf(f, "\"External id\": %lld", (long long)ext);
}

/* A host range (row i) as a CPU event (two for a collective with a payload:
 * record_param_comms around the backend's op).  comm.allreduce rows (SyncBatchNorm's, AMP's
 * and the loss's all-reduces) are ddpprof.comm.allreduce with the same args, which the
 * import reads back as such (report/input/pytorch_names.c): no tool could tell them from a
 * gradient bucket's BACKEND:all_reduce. */
static void kx_cpu(struct kx_ctx *c, size_t i, int phase)
{
    FILE *f = c->f;
    const struct run_row *r = &c->t->rows[i];
    int pid = KINETO_CPU_PID + c->t->rank, tid = kx_cpu_tid(c, i);
    char name[96];
    const char *cat = kx_cpu_name(c, r, phase, name, sizeof name);
    const char *coll = phase >= 0 ? trace_phase_collective(phase) : NULL;
    const int params = coll && r->bytes >= 0 && (phase != TRACE_PHASE_ALLREDUCE || r->bucket >= 0);
    if (params && phase != TRACE_PHASE_COMM_ALLREDUCE) {
        kx_sep(c);
        fprintf(f, "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", "
                   "\"pid\": %d, \"tid\": %d, ",
                pid, tid);
        kx_ts(f, "ts", r->start_ns - c->base_ns);
        fputs(", ", f);
        kx_ts(f, "dur", r->end_ns - r->start_ns);
        fprintf(f, ", \"args\": {\"Collective name\": \"%s\", \"In msg nelems\": %lld, "
                   "\"Out msg nelems\": %lld, \"dtype\": \"Byte\", \"Group size\": %d, "
                   "\"Rank\": %d}}",
                coll, (long long)r->bytes, (long long)r->bytes, c->run->world_size,
                c->t->rank);
    }
    kx_sep(c);
    fprintf(f, "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": ", cat);
    kx_str(f, name);
    fprintf(f, ", \"pid\": %d, \"tid\": %d, ", pid, tid);
    kx_ts(f, "ts", r->start_ns - c->base_ns);
    fputs(", ", f);
    kx_ts(f, "dur", r->end_ns - r->start_ns);
    int args = 0;
    if (params && phase == TRACE_PHASE_COMM_ALLREDUCE) {
        fprintf(f, ", \"args\": {\"Collective name\": \"allreduce\", \"In msg nelems\": "
                   "%lld, \"Out msg nelems\": %lld, \"dtype\": \"Byte\", \"Group size\": %d",
                (long long)r->bytes, (long long)r->bytes, c->run->world_size);
        args = 1;
    }
    if (c->ext[i] > 0) {
        fputs(args ? ", " : ", \"args\": {", f);
        kx_ext(f, c->ext[i]);
        args = 1;
    }
    fputs(args ? "}}" : "}", f);
}

/* A device-clock range (row i) as a gpu_user_annotation named as its phase's CPU event
 * (what Kineto writes for a record_function: its span over the device work), linked to
 * that CPU event by its External id. */
static void kx_annotation(struct kx_ctx *c, size_t i, int phase)
{
    FILE *f = c->f;
    const struct run_row *r = &c->t->rows[i];
    char name[96];
    kx_cpu_name(c, r, phase, name, sizeof name);
    kx_sep(c);
    fputs("{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": ", f);
    kx_str(f, name);
    fprintf(f, ", \"pid\": 0, \"tid\": %d, ", kx_dev_tid(c, i));
    kx_ts(f, "ts", r->start_ns - c->base_ns);
    fputs(", ", f);
    kx_ts(f, "dur", r->end_ns - r->start_ns);
    if (c->ext[i] > 0) {
        fputs(", \"args\": {", f);
        kx_ext(f, c->ext[i]);
        fputs("}", f);
    }
    fputs("}", f);
}

/* A CUPTI memcpy or memset row's name as Kineto writes it: "Memcpy HtoD", "Memset
 * (Device)" (tools tell copies from kernels by these: HTA's ^Memcpy|^Memset); a kernel's
 * as it is. */
static void kx_dev_name(FILE *f, const char *name, int memcpy_row, int memset_row)
{
    if (memset_row && strcmp(name, "memset") == 0) {
        fputs("\"Memset (Device)\"", f);
        return;
    }
    if ((memcpy_row || memset_row) && (name[0] == 'm')) {
        char *up = strdup(name);
        if (up) {
            up[0] = 'M';
            kx_str(f, up);
            free(up);
            return;
        }
    }
    kx_str(f, name);
}

/* A CUPTI row as device activity on its stream.  ddpprof records no launches, so there is
 * no cuda_runtime event or correlation to write. */
static void kx_dev(struct kx_ctx *c, const struct run_row *r)
{
    FILE *f = c->f;
    int stream = r->stream >= 0 ? r->stream : 0;
    const char *cat = r->kind == c->kind[TRACE_KIND_MEMCPY]   ? "gpu_memcpy"
                      : r->kind == c->kind[TRACE_KIND_MEMSET] ? "gpu_memset"
                                                              : "kernel";
    kx_sep(c);
    fprintf(f, "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": ", cat);
    kx_dev_name(f, strpool_get(&c->rs->names, r->name), r->kind == c->kind[TRACE_KIND_MEMCPY],
                r->kind == c->kind[TRACE_KIND_MEMSET]);
    fprintf(f, ", \"pid\": 0, \"tid\": %d, ", stream);
    kx_ts(f, "ts", r->start_ns - c->base_ns);
    fputs(", ", f);
    kx_ts(f, "dur", r->end_ns - r->start_ns);
    fprintf(f, ", \"args\": {\"device\": 0, \"stream\": %d", stream);
    if (strcmp(cat, "kernel") != 0)
        fprintf(f, ", \"bytes\": %lld", (long long)r->bytes);
    fputs("}}", f);
}

/* Pairing host and device ranges: the range rows sorted by (phase, step, bucket, name but
 * a bucket's, clock, start); within one (phase, step, bucket, name) the k-th device range
 * is the k-th host range's. */
static const struct run_row *pair_rows;
static uint32_t pair_allreduce;

static int cmp_pair(const void *a, const void *b)
{
    const struct run_row *x = &pair_rows[*(const size_t *)a], *y = &pair_rows[*(const size_t *)b];
#define PAIR_CMP_(f)                                                                         \
    if (x->f != y->f)                                                                        \
        return x->f < y->f ? -1 : 1;
    PAIR_CMP_(phase) PAIR_CMP_(step) PAIR_CMP_(bucket)
    if (x->phase != pair_allreduce) { /* a host-staged bucket's device row has its own name */
        PAIR_CMP_(name)
    }
    PAIR_CMP_(clock) PAIR_CMP_(start_ns)
#undef PAIR_CMP_
    return (*(const size_t *)a > *(const size_t *)b) - (*(const size_t *)a < *(const size_t *)b);
}

static int pair_same(const struct run_row *x, const struct run_row *y)
{
    return x->phase == y->phase && x->step == y->step && x->bucket == y->bucket &&
           (x->phase == pair_allreduce || x->name == y->name);
}

/* ext[i]: the External id of range row i (host: 1 + i, device: its host range's), 0 for a
 * device range without a host one and for every other row.  0, or -1 (out of memory). */
static int kx_pair(const struct kx_ctx *c, int64_t *ext)
{
    const struct rank_trace *t = c->t;
    const uint32_t range = c->kind[TRACE_KIND_RANGE];
    size_t *v = malloc((t->n + 1) * sizeof *v), n = 0;
    if (!v)
        return -1;
    for (size_t i = 0; i < t->n; i++) {
        ext[i] = 0;
        if (t->rows[i].kind == range && (t->rows[i].clock == TRACE_CLOCK_HOST ||
                                         t->rows[i].clock == TRACE_CLOCK_DEVICE))
            v[n++] = i;
    }
    pair_rows = t->rows;
    pair_allreduce = c->ph[TRACE_PHASE_ALLREDUCE];
    qsort(v, n, sizeof *v, cmp_pair);
    for (size_t a = 0; a < n;) {
        size_t b = a + 1;
        while (b < n && pair_same(&t->rows[v[a]], &t->rows[v[b]]))
            b++;
        size_t h = a, d = a; /* hosts come first in the group (clock order) */
        while (d < b && t->rows[v[d]].clock == TRACE_CLOCK_HOST)
            ext[v[d]] = (int64_t)v[d] + 1, d++;
        for (; h < b && d < b && t->rows[v[h]].clock == TRACE_CLOCK_HOST; h++, d++)
            ext[v[d]] = ext[v[h]];
        a = b;
    }
    free(v);
    return 0;
}

static int kx_rank(struct kx_ctx *c, const char *path)
{
    const struct rank_trace *t = c->t;
    struct kx *order = malloc((t->n + 1) * sizeof *order);
    int *tid = malloc((t->n + 1) * sizeof *tid);
    int64_t *ext = malloc((t->n + 1) * sizeof *ext);
    if (!order || !tid || !ext || timeline_assign_lanes(t, tid) < 0 || kx_pair(c, ext) < 0) {
        free(order);
        free(tid);
        free(ext);
        return error_set("%s: out of memory", path);
    }
    c->tid = tid;
    c->ext = ext;
    uint32_t range = c->kind[TRACE_KIND_RANGE];
    for (size_t i = 0; i < t->n; i++) {
        order[i].start = t->rows[i].start_ns;
        order[i].idx = (int64_t)i;
    }
    if (sort_by_i64(order, t->n, sizeof *order, 0) < 0) {
        free(order);
        free(tid);
        free(ext);
        return error_wrap("%s", path);
    }
    struct outfile o;
    if (outfile_open(&o, path) < 0) {
        free(order);
        free(tid);
        free(ext);
        return -1;
    }
    FILE *f = o.f;
    c->f = f;
    c->first = 1;
    const char *comm = c->run->meta.comm.s;
    fprintf(f, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n"
               "  \"distributedInfo\": {\"backend\": ");
    kx_str(f, comm ? comm : "unknown");
    fprintf(f, ", \"rank\": %d, \"world_size\": %d},\n", t->rank, c->run->world_size);
    fprintf(f, "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": %lld,\n"
               "  \"traceEvents\": [",
            (long long)c->base_ns);
    int pid = KINETO_CPU_PID + t->rank;
    kx_sep(c);
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, "
               "\"args\": {\"name\": ",
            pid);
    char label[256];
    snprintf(label, sizeof label, "ddpprof %s rank %d", c->run->label, t->rank);
    kx_str(f, label);
    fputs("}}", f);
    int subs = 0; /* the sub-lanes in use */
    for (size_t i = 0; i < t->n; i++)
        subs = kx_sub(c, i) > subs ? kx_sub(c, i) : subs;
    for (int sub = 0; sub <= subs && sub < 100; sub++)
        for (int lane = 0; lane < TRACE_LANE_COUNT; lane++) {
            kx_sep(c);
            fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                       "\"args\": {\"name\": \"%s%s",
                    pid, 1 + lane + 100 * sub, trace_lane_name(lane), sub ? " #" : "");
            if (sub)
                fprintf(f, "%d", sub + 1);
            fputs("\"}}", f);
        }
    /* CPU events in start order, then the device activity */
    for (size_t i = 0; i < t->n; i++) {
        const struct run_row *r = &t->rows[order[i].idx];
        if (r->kind == range && r->clock == TRACE_CLOCK_HOST) {
            kx_cpu(c, (size_t)order[i].idx, kx_phase(c, r));
        } else if (r->kind == c->kind[TRACE_KIND_SYNC]) {
            kx_sep(c);
            fprintf(f, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": ");
            kx_str(f, strpool_get(&c->rs->names, r->name));
            fprintf(f, ", \"pid\": %d, \"tid\": 1, ", pid);
            kx_ts(f, "ts", r->start_ns - c->base_ns);
            fputs(", ", f);
            kx_ts(f, "dur", r->end_ns - r->start_ns);
            fputs("}", f);
        }
    }
    for (size_t i = 0; i < t->n; i++) {
        const struct run_row *r = &t->rows[order[i].idx];
        if (r->kind == range && r->clock == TRACE_CLOCK_DEVICE)
            kx_annotation(c, (size_t)order[i].idx, kx_phase(c, r));
        else if (r->clock == TRACE_CLOCK_CUPTI && r->kind != c->kind[TRACE_KIND_SYNC])
            kx_dev(c, r);
    }
    fputs("\n  ],\n  \"traceName\": ", f);
    kx_str(f, path);
    fputs("\n}\n", f);
    free(order);
    free(tid);
    free(ext);
    return outfile_close(&o, 1);
}

static int kx_mkdir(const char *path)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return error_set("%s: cannot create the directory (%s)", path, strerror(errno));
    return 0;
}

/* a label or host name as one safe path component */
static void kx_safe(char *dst, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 1 < cap; s++)
        dst[n++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                           (*s >= '0' && *s <= '9') || *s == '-'
                       ? *s
                       : '-';
    dst[n] = '\0';
}

int kineto_write(const struct runset *rs, const char *out_dir, int *files)
{
    *files = 0;
    char *root = NULL;
    if (asprintf(&root, "%s/kineto", out_dir) < 0)
        return error_set("report: out of memory");
    int rc = kx_mkdir(root);
    for (int i = 0; i < rs->n && rc == 0; i++) {
        const struct run *run = &rs->runs[i];
        if (!run->format || strcmp(run->format, "ddpprof") != 0)
            continue;
        struct kx_ctx c = {.rs = rs, .run = run};
        for (int p = 0; p < TRACE_PHASE_COUNT; p++)
            c.ph[p] = strpool_find(&rs->labels, trace_phase_name(p));
        for (int k = 0; k < TRACE_KIND_COUNT; k++)
            c.kind[k] = strpool_find(&rs->labels, trace_kind_name(k));
        const char *comm = run->meta.comm.s;
        c.backend = comm && *comm ? comm : "ddpprof";
        int64_t t0 = INT64_MAX;
        for (int k = 0; k < run->nranks; k++)
            for (size_t r = 0; r < run->ranks[k].n; r++)
                if (run->ranks[k].rows[r].start_ns < t0)
                    t0 = run->ranks[k].rows[r].start_ns;
        c.base_ns = t0 == INT64_MAX ? 0 : t0 - t0 % 1000000000;
        char label[128], hostname[128], *dir = NULL;
        kx_safe(label, sizeof label, run->label);
        const char *h = run->meta.hostname.s;
        kx_safe(hostname, sizeof hostname, h && *h ? h : "ddpprof");
        if (asprintf(&dir, "%s/%s", root, label) < 0) {
            rc = error_set("report: out of memory");
            break;
        }
        rc = kx_mkdir(dir);
        for (int k = 0; k < run->nranks && rc == 0; k++) {
            char *path = NULL;
            c.t = &run->ranks[k];
            if (asprintf(&path, "%s/%s_%d.pt.trace.json", dir, hostname, c.t->rank) < 0) {
                rc = error_set("report: out of memory");
                break;
            }
            rc = kx_rank(&c, path);
            *files += rc == 0;
            free(path);
        }
        free(dir);
    }
    free(root);
    return rc;
}
