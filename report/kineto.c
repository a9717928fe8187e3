/* kineto.c — the Kineto export (see kineto.h): per rank, the rows sorted by start, written
 * as Kineto's ChromeTraceLogger lays them out. */
#include "report/kineto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "report/sort.h"
#include "report/timeline.h"

#define KINETO_CPU_PID 10000 /* + rank: the process of the rank's CPU events */
#define KINETO_COMM_STREAM 20 /* the stream of device all-reduces without a stream id */

/* One row's place in the file: the sort key first. */
struct kx {
    int64_t start;
    int64_t idx;
};

/* The host range of (phase, step, bucket) that launched a device range. */
struct kx_host {
    int64_t key, start;
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
    int has_cupti; /* the rank has CUPTI rows: its device ranges become annotations */
};

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

static int64_t kx_host_key(int phase, const struct run_row *r)
{
    return ((int64_t)phase << 56) | ((int64_t)(uint32_t)r->step << 20) |
           (int64_t)((uint32_t)(r->bucket + 1) & 0xfffff);
}

/* A host range as a CPU event (two for an all-reduce: record_param_comms around the
 * backend's op). */
static void kx_cpu(struct kx_ctx *c, const struct run_row *r, int phase)
{
    FILE *f = c->f;
    int pid = KINETO_CPU_PID + c->t->rank, tid = 1 + (r->stream >= 0 ? r->stream : 0);
    char name[96];
    const char *cat = "user_annotation";
    switch (phase) {
    case TRACE_PHASE_STEP:
        snprintf(name, sizeof name, "ProfilerStep#%d", r->step);
        break;
    case TRACE_PHASE_FORWARD:
        snprintf(name, sizeof name, "DistributedDataParallel.forward");
        break;
    case TRACE_PHASE_BACKWARD:
        snprintf(name, sizeof name, "autograd::engine::evaluate_function: ddpprof.backward");
        cat = "cpu_op";
        break;
    case TRACE_PHASE_OPTIMIZER:
        snprintf(name, sizeof name, "Optimizer.step#ddpprof.step");
        break;
    case TRACE_PHASE_DATA:
        snprintf(name, sizeof name, "enumerate(DataLoader)#ddpprof.loader");
        break;
    case TRACE_PHASE_ALLREDUCE:
        snprintf(name, sizeof name, "%s:all_reduce", c->backend);
        cat = "cpu_op";
        break;
    default:
        snprintf(name, sizeof name, "ddpprof.%s", trace_phase_name(phase));
        break;
    }
    if (phase == TRACE_PHASE_ALLREDUCE && r->bucket >= 0) {
        kx_sep(c);
        fprintf(f, "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", "
                   "\"pid\": %d, \"tid\": %d, ",
                pid, tid);
        kx_ts(f, "ts", r->start_ns - c->base_ns);
        fputs(", ", f);
        kx_ts(f, "dur", r->end_ns - r->start_ns);
        fprintf(f, ", \"args\": {\"Collective name\": \"allreduce\", \"In msg nelems\": %lld, "
                   "\"Out msg nelems\": %lld, \"dtype\": \"Byte\", \"Group size\": %d, "
                   "\"Rank\": %d}}",
                (long long)r->bytes, (long long)r->bytes, c->run->world_size, c->t->rank);
    }
    kx_sep(c);
    fprintf(f, "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": ", cat);
    kx_str(f, name);
    fprintf(f, ", \"pid\": %d, \"tid\": %d, ", pid, tid);
    kx_ts(f, "ts", r->start_ns - c->base_ns);
    fputs(", ", f);
    kx_ts(f, "dur", r->end_ns - r->start_ns);
    fputs("}", f);
}

/* A device-clock range as a gpu_user_annotation (where CUPTI rows are the rank's kernels). */
static void kx_annotation(struct kx_ctx *c, const struct run_row *r, int phase)
{
    FILE *f = c->f;
    char name[96];
    if (phase == TRACE_PHASE_ALLREDUCE)
        snprintf(name, sizeof name, "%s:all_reduce", c->backend);
    else
        snprintf(name, sizeof name, "ddpprof.%s", phase >= 0 ? trace_phase_name(phase) : "range");
    kx_sep(c);
    fputs("{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": ", f);
    kx_str(f, name);
    fprintf(f, ", \"pid\": 0, \"tid\": %d, ",
            phase == TRACE_PHASE_ALLREDUCE ? KINETO_COMM_STREAM : 7);
    kx_ts(f, "ts", r->start_ns - c->base_ns);
    fputs(", ", f);
    kx_ts(f, "dur", r->end_ns - r->start_ns);
    fputs("}", f);
}

/* A device-clock range or a CUPTI row as device activity; corr > 0: launched (a
 * cuda_runtime event and an ac2g flow at launch_ns). */
static void kx_dev(struct kx_ctx *c, const struct run_row *r, int phase, int64_t corr,
                   int64_t launch_ns)
{
    FILE *f = c->f;
    int pid = KINETO_CPU_PID + c->t->rank;
    int stream = r->clock == TRACE_CLOCK_CUPTI && r->stream >= 0 ? r->stream
                 : phase == TRACE_PHASE_ALLREDUCE                ? KINETO_COMM_STREAM
                                                                 : 7;
    const char *cat = "kernel";
    if (r->kind == c->kind[TRACE_KIND_MEMCPY])
        cat = "gpu_memcpy";
    else if (r->kind == c->kind[TRACE_KIND_MEMSET])
        cat = "gpu_memset";
    if (corr > 0) {
        kx_sep(c);
        fprintf(f, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
                   "\"pid\": %d, \"tid\": 1, ",
                pid);
        kx_ts(f, "ts", launch_ns - c->base_ns);
        fprintf(f, ", \"dur\": 1.000, \"args\": {\"correlation\": %lld}}", (long long)corr);
        kx_sep(c);
        fprintf(f, "{\"ph\": \"s\", \"id\": %lld, \"pid\": %d, \"tid\": 1, ", (long long)corr,
                pid);
        kx_ts(f, "ts", launch_ns - c->base_ns);
        fputs(", \"cat\": \"ac2g\", \"name\": \"ac2g\"}", f);
    }
    kx_sep(c);
    fprintf(f, "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": ", cat);
    if (r->clock == TRACE_CLOCK_CUPTI) {
        kx_str(f, strpool_get(&c->rs->names, r->name));
    } else if (phase == TRACE_PHASE_ALLREDUCE) {
        fputs("\"ncclDevKernel_AllReduce_Sum_u8_RING_LL(ncclDevKernelArgsStorage<4096ul>)\"", f);
    } else {
        char name[96];
        snprintf(name, sizeof name, "ddpprof %s (device range)",
                 phase >= 0 ? trace_phase_name(phase) : "range");
        kx_str(f, name);
    }
    fprintf(f, ", \"pid\": 0, \"tid\": %d, ", stream);
    kx_ts(f, "ts", r->start_ns - c->base_ns);
    fputs(", ", f);
    kx_ts(f, "dur", r->end_ns - r->start_ns);
    fprintf(f, ", \"args\": {\"device\": 0, \"stream\": %d", stream);
    if (corr > 0)
        fprintf(f, ", \"correlation\": %lld", (long long)corr);
    if (phase == TRACE_PHASE_ALLREDUCE && r->clock != TRACE_CLOCK_CUPTI && r->bytes >= 0)
        fprintf(f, ", \"Collective name\": \"allreduce\", \"In msg nelems\": %lld, "
                   "\"Out msg nelems\": %lld, \"Group size\": %d, \"dtype\": \"Byte\"",
                (long long)r->bytes, (long long)r->bytes, c->run->world_size);
    else if (!strcmp(cat, "gpu_memcpy") || !strcmp(cat, "gpu_memset"))
        fprintf(f, ", \"bytes\": %lld", (long long)r->bytes);
    fputs("}}", f);
    if (corr > 0) {
        kx_sep(c);
        fprintf(f, "{\"ph\": \"f\", \"id\": %lld, \"pid\": 0, \"tid\": %d, ", (long long)corr,
                stream);
        kx_ts(f, "ts", r->start_ns - c->base_ns);
        fputs(", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}", f);
    }
}

static int kx_cmp_host(const void *a, const void *b)
{
    const struct kx_host *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

static int kx_rank(struct kx_ctx *c, const char *path)
{
    const struct rank_trace *t = c->t;
    struct kx *order = malloc((t->n + 1) * sizeof *order);
    struct kx_host *host = malloc((t->n + 1) * sizeof *host);
    size_t nh = 0;
    if (!order || !host) {
        free(order);
        free(host);
        return error_set("%s: out of memory", path);
    }
    uint32_t range = c->kind[TRACE_KIND_RANGE];
    c->has_cupti = 0;
    for (size_t i = 0; i < t->n; i++) {
        order[i].start = t->rows[i].start_ns;
        order[i].idx = (int64_t)i;
        const struct run_row *r = &t->rows[i];
        int ph = kx_phase(c, r);
        c->has_cupti |= r->clock == TRACE_CLOCK_CUPTI && r->kind != c->kind[TRACE_KIND_SYNC];
        if (r->kind == range && r->clock == TRACE_CLOCK_HOST && ph >= 0)
            host[nh++] = (struct kx_host){kx_host_key(ph, r), r->start_ns};
    }
    if (sort_by_i64(order, t->n, sizeof *order, 0) < 0) {
        free(order);
        free(host);
        return error_wrap("%s", path);
    }
    qsort(host, nh, sizeof *host, kx_cmp_host);
    FILE *f = fopen(path, "w");
    if (!f) {
        free(order);
        free(host);
        return error_set("%s: cannot create (%s)", path, strerror(errno));
    }
    c->f = f;
    c->first = 1;
    const char *comm = run_meta(c->run, "comm");
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
    for (int lane = 0; lane < TRACE_LANE_COUNT; lane++) {
        kx_sep(c);
        fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                   "\"args\": {\"name\": \"%s\"}}",
                pid, 1 + lane, trace_lane_name(lane));
    }
    /* CPU events in start order, then the device activity */
    for (size_t i = 0; i < t->n; i++) {
        const struct run_row *r = &t->rows[order[i].idx];
        int ph = kx_phase(c, r);
        if (r->kind == range && r->clock == TRACE_CLOCK_HOST)
            kx_cpu(c, r, ph);
        else if (r->kind == c->kind[TRACE_KIND_SYNC]) {
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
    int64_t corr = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct run_row *r = &t->rows[order[i].idx];
        int ph = kx_phase(c, r);
        if (r->kind == c->kind[TRACE_KIND_SYNC] || (r->kind == range && r->clock == TRACE_CLOCK_HOST))
            continue;
        if (r->clock == TRACE_CLOCK_DEVICE && c->has_cupti) {
            kx_annotation(c, r, ph);
            continue;
        }
        int64_t launch = -1;
        if (ph >= 0) {
            struct kx_host key = {kx_host_key(ph, r), 0};
            const struct kx_host *h = bsearch(&key, host, nh, sizeof *host, kx_cmp_host);
            if (h)
                launch = h->start;
        }
        kx_dev(c, r, ph, launch >= 0 ? ++corr : 0, launch);
    }
    fputs("\n  ],\n  \"traceName\": ", f);
    kx_str(f, path);
    fputs("\n}\n", f);
    free(order);
    free(host);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    return bad ? error_set("%s: write failed: check the disk", path) : 0;
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
        const char *comm = run_meta(run, "comm");
        c.backend = comm && *comm ? comm : "ddpprof";
        int64_t t0 = INT64_MAX;
        for (int k = 0; k < run->nranks; k++)
            for (size_t r = 0; r < run->ranks[k].n; r++)
                if (run->ranks[k].rows[r].start_ns < t0)
                    t0 = run->ranks[k].rows[r].start_ns;
        c.base_ns = t0 == INT64_MAX ? 0 : t0 - t0 % 1000000000;
        char label[128], hostname[128], *dir = NULL;
        kx_safe(label, sizeof label, run->label);
        const char *h = run_meta(run, "hostname");
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
