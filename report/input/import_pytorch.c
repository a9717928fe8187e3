/* import_pytorch.c — the PyTorch profiler's traces as importers (report/input/importer.h): Kineto
 * JSON and the legacy autograd exporter's array, plain or gzip, one file per rank (as
 * tensorboard_trace_handler writes them).  Each event from report/input/ptjson.c is translated
 * into the import core's normalised events (report/input/import_core.h) by the name rules of
 * report/input/pytorch_names.c; what the events mean for steps, buckets and clocks is the core's.
 * report/FORMULAS.md "Imported PyTorch traces" says how. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/error.h"
#include "common/printable.h"
#include "report/input/import.h"
#include "report/input/import_core.h"
#include "report/input/importer.h"
#include "report/input/ptjson.h"
#include "report/input/pytorch_names.h"

#define PT_CHUNK (1u << 20)

/* One rank being translated. */
struct pt_rank {
    const char *path;
    struct import_rank *core;
    int hta; /* --hta-defaults: times rounded to µs as HTA rounds them */
    /* counts for the warnings */
    uint64_t events, no_ts, dtype_unknown;
    char unknown_dtype[32];
};

/* The bytes of a collective of kind coll from its args: "In msg nelems" x the size of
 * "dtype", but an all-gather's are what the rank receives ("Out msg nelems", world x in, as
 * a ddpprof run's); -1 when they are not there. */
static int64_t pt_coll_bytes(struct pt_rank *pr, const struct pt_event *e, enum import_coll coll)
{
    int out = coll == IMPORT_COLL_ALL_GATHER && e->has_out_nelems;
    int64_t n = out ? e->out_nelems : e->in_nelems;
    if ((!out && !e->has_nelems) || !e->dtype[0])
        return -1;
    int64_t per = pt_dtype_bytes(e->dtype);
    if (per == 0) {
        if (pr->dtype_unknown++ == 0)
            snprintf(pr->unknown_dtype, sizeof pr->unknown_dtype, "%s", e->dtype);
        return -1;
    }
    return n > INT64_MAX / per ? -1 : n * per;
}

/* A host op (cpu_op, user_annotation, a legacy event). */
static int pt_host_event(struct pt_rank *pr, const struct pt_event *e, int64_t end)
{
    struct import_span sp = {.start_ns = e->ts_ns, .end_ns = end, .tid = e->tid, .val = -1,
                             .name = e->name, .name_len = e->name_len,
                             .ext = e->has_ext ? e->external_id : 0};
    int named = pt_name_span(e->name, e->name_len, e->coll, 0, &sp.kind, &sp.coll);
    if (named < 0)
        return 0;
    if (named == 0) {
        if (!e->has_dims0)
            return 0;
        sp.kind = IMPORT_DIMS;
        sp.val = e->dims0;
    } else if (sp.kind == IMPORT_STEP) {
        if (!pt_name_step(e->name, e->name_len, &sp.val))
            sp.val = -1; /* not a step number: the core counts it */
    } else if (sp.kind == IMPORT_COLL || sp.kind == IMPORT_PARAMS || sp.kind == IMPORT_ISSUE) {
        sp.val = pt_coll_bytes(pr, e, sp.coll);
    }
    return import_rank_span(pr->core, &sp);
}

/* A kernel, memcpy or memset. */
static int pt_device_event(struct pt_rank *pr, const struct pt_event *e, int64_t end)
{
    struct import_activity a = {.start_ns = e->ts_ns, .end_ns = end, .corr = e->correlation,
                                .has_corr = e->has_corr, .bytes = -1, .cls = KERNEL_MEMORY,
                                .coll = IMPORT_COLL_NONE, .name = e->name,
                                .name_len = e->name_len,
                                .stream = e->has_stream && e->stream >= 0 ? e->stream : -1};
    if (e->cat == PT_CAT_KERNEL) {
        int known = 0;
        a.cls = KERNEL_COMPUTE;
        if (pt_name_kernel(e->name, e->name_len, e->coll, &a.coll, &known)) {
            a.cls = KERNEL_COMM;
            a.unknown_name = !known;
            if (a.coll != IMPORT_COLL_NONE)
                a.bytes = pt_coll_bytes(pr, e, a.coll);
        }
    }
    return import_rank_activity(pr->core, &a);
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

/* Every host op, runtime calls included, is an op of ops.csv (key_averages counts them).
 * gloo's collective work ("gloo:all_reduce", ...) begins on the caller's thread and ends
 * on gloo's: torch counts it as async, with no self time (seen in torch 1.13's
 * key_averages of tests/fixtures/pytorch/keyavg-gloo-2ranks). */
static int pt_op(struct pt_rank *pr, const struct pt_event *e, int64_t end)
{
    struct import_op op = {.start_ns = e->ts_ns, .end_ns = end, .tid = e->tid,
                           .name = e->name, .name_len = e->name_len,
                           .async = e->name_len > 5 && memcmp(e->name, "gloo:", 5) == 0};
    return import_rank_op(pr->core, &op);
}

static int pt_event_at(struct pt_rank *pr, const struct pt_event *e, int64_t end)
{
    switch (e->cat) {
    case PT_CAT_NONE:
    case PT_CAT_CPU_OP:
    case PT_CAT_USER_ANNOTATION:
        if (pt_op(pr, e, end) < 0)
            return -1;
        return pt_host_event(pr, e, end);
    case PT_CAT_CUDA_RUNTIME:
    case PT_CAT_CUDA_DRIVER:
        if (pt_op(pr, e, end) < 0)
            return -1;
        return e->has_corr ? import_rank_launch(pr->core, e->correlation, e->ts_ns) : 0;
    case PT_CAT_KERNEL:
    case PT_CAT_GPU_MEMCPY:
    case PT_CAT_GPU_MEMSET:
        return pt_device_event(pr, e, end);
    case PT_CAT_GPU_USER_ANNOTATION: {
        /* a record_function's span over its device work: a collective's, or a phase's */
        struct import_span sp = {.start_ns = e->ts_ns, .end_ns = end, .val = -1,
                                 .name = e->name, .name_len = e->name_len,
                                 .ext = e->has_ext ? e->external_id : 0};
        if (pt_name_span(e->name, e->name_len, "", 1, &sp.kind, &sp.coll) <= 0)
            return 0;
        return import_rank_device_span(pr->core, &sp);
    }
    default:
        return 0;
    }
}

static int pt_event(void *ctx, const struct pt_event *e)
{
    struct pt_rank *pr = ctx;
    pr->events++;
    if (e->ph != 'X')
        return 0;
    if (!e->has_ts || e->ts_ns < -IMPORT_MAX_TS || e->ts_ns > IMPORT_MAX_TS ||
        (e->has_dur && e->dur_ns > IMPORT_MAX_DUR)) {
        pr->no_ts++;
        return 0;
    }
    int64_t dur = e->has_dur && e->dur_ns > 0 ? e->dur_ns : 0;
    int64_t end = e->ts_ns + dur;
    if (pr->hta) { /* HTA's rounding: the start up, the end down, to µs */
        struct pt_event r = *e;
        r.ts_ns = us_ceil(e->ts_ns);
        end = us_floor(end);
        if (end < r.ts_ns)
            end = r.ts_ns;
        r.dur_ns = end - r.ts_ns;
        return pt_event_at(pr, &r, end);
    }
    return pt_event_at(pr, e, end);
}

/* ---- reading the bytes ---- */

typedef int (*pt_feed_fn)(void *ctx, const void *buf, size_t len);

static int pt_feed_json(void *ctx, const void *buf, size_t len)
{
    return ptjson_feed(ctx, buf, len);
}

/* Read path through fn, gunzipping when it starts with gzip's magic bytes.  *truncated is
 * set when the gzip stream ends early.  Returns 0 or -1 after error_set(). */
static int pt_read_file(const char *path, pt_feed_fn fn, void *ctx, int *truncated)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set("%s: cannot open (%s)", path, strerror(errno));
    unsigned char *in = malloc(PT_CHUNK), *out = NULL;
    z_stream z;
    memset(&z, 0, sizeof z);
    int gz = -1, zinit = 0, rc = 0, zend = 0;
    uint64_t at = 0;
    if (!in) {
        close(fd);
        return error_set("%s: out of memory for the read buffer", path);
    }
    for (;;) {
        ssize_t got = read(fd, in, PT_CHUNK);
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
                out = malloc(PT_CHUNK);
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
            z.avail_out = PT_CHUNK;
            int zr = inflate(&z, Z_NO_FLUSH);
            if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
                rc = error_set("%s: corrupt gzip data near byte %llu (zlib: %s)", path,
                               (unsigned long long)(at - z.avail_in), z.msg ? z.msg : "error");
                break;
            }
            size_t n = PT_CHUNK - z.avail_out;
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
            z.avail_out = PT_CHUNK;
            z.avail_in = 0;
            int zr = inflate(&z, Z_FINISH);
            size_t n = PT_CHUNK - z.avail_out;
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


/* ---- one rank ---- */

static int last_step_event(void *ctx, const struct pt_event *e)
{
    int64_t *last = ctx;
    if (e->ph == 'X' && e->has_ts &&
        e->name_len >= sizeof PT_STEP_PREFIX - 1 &&
        memcmp(e->name, PT_STEP_PREFIX, sizeof PT_STEP_PREFIX - 1) == 0) {
        int64_t ts = us_ceil(e->ts_ns);
        if (*last == INT64_MAX || ts > *last)
            *last = ts;
    }
    return 0;
}

/* --hta-defaults: the start of the trace's last ProfilerStep, rounded up to µs as HTA
 * rounds it (INT64_MAX: none, nothing dropped).  Returns 0, or -1 after error_set(). */
static int pt_last_step(const char *path, const char *buf, size_t len, int64_t *last)
{
    struct ptjson *p = ptjson_new(path, last_step_event, last);
    if (!p)
        return -1;
    int cut = 0;
    int rc = buf ? ptjson_feed(p, buf, len) : pt_read_file(path, pt_feed_json, p, &cut);
    if (rc == 0 && ptjson_finish(p) < 0)
        rc = -1;
    ptjson_free(p);
    return rc;
}

/* "host" of a tensorboard_trace_handler file name "<host>_<pid>.<ms>.pt.trace.json[.gz]" */
static char *pt_host_of(const char *path)
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

/* The warnings of a rank read to the end (or to a cut), around the core's. */
static void pt_warn(const struct pt_rank *pr, int truncated, uint64_t bytes_read)
{
    const struct import_counts *c = import_rank_counts(pr->core);
    if (truncated)
        report_warn("%s: the file is cut short after %llu bytes (a truncated write?): using the "
                    "%llu events before the cut",
                    pr->path, (unsigned long long)bytes_read, (unsigned long long)pr->events);
    char shown[TEXT_PRINTABLE_MAX];
    if (c->unknown_comm)
        report_warn("%s: %llu NCCL kernel(s) named in no known scheme (e.g. '%s'; known: "
                    "ncclKernel_*, ncclDevKernel_*): counted as communication in the kernel "
                    "figures; all-reduce buckets only from their Collective name args or "
                    "nccl:all_reduce annotations",
                    pr->path, (unsigned long long)c->unknown_comm,
                    text_printable(c->unknown_comm_name, 80, shown, sizeof shown));
    if (pr->dtype_unknown)
        report_warn("%s: %llu collective(s) of dtype '%s' (size unknown): their bytes are left "
                    "empty",
                    pr->path, (unsigned long long)pr->dtype_unknown,
                    text_printable(pr->unknown_dtype, 30, shown, sizeof shown));
    import_rank_warn(pr->core);
    if (pr->no_ts)
        report_warn("%s: %llu event(s) without a usable ts (none, not a number, or beyond 127 "
                    "years; or longer than 28 hours): skipped",
                    pr->path, (unsigned long long)pr->no_ts);
}

/* Read one rank into the sink: from path (buf NULL) or from buf[0..len). */
static int pt_load_rank(struct import_sink *sink, const char *path, const char *buf, size_t len)
{
    struct pt_rank pr = {0};
    struct import_rank *core = import_rank_begin(sink, path);
    if (!core)
        return -1;
    pr.core = core;
    pr.path = path;
    import_rank_ops_torch(core);
    pr.hta = sink->rs->hta_defaults;
    int rc = 0;
    struct ptjson *p = ptjson_new(path, pt_event, &pr);
    if (!p)
        rc = -1;
    int gz_cut = 0, truncated = 0;
    struct pt_header hdr = {0};
    uint64_t bytes_read = 0;
    if (rc == 0 && pr.hta) { /* a first pass for the last ProfilerStep's start */
        int64_t last = INT64_MAX;
        rc = pt_last_step(path, buf, len, &last);
        import_rank_hta_cut(core, last);
    }
    if (rc == 0)
        rc = buf ? ptjson_feed(p, buf, len) : pt_read_file(path, pt_feed_json, p, &gz_cut);
    if (rc == 0) {
        rc = ptjson_finish(p);
        truncated = rc == 1 || gz_cut;
        if (rc == 1)
            rc = 0;
    }
    if (p) {
        hdr = *ptjson_header(p);
        bytes_read = ptjson_bytes(p);
    }
    ptjson_free(p);
    if (rc == 0 && hdr.format == PT_FORMAT_KINETO && !hdr.has_schema && pr.events == 0)
        rc = error_set("%s: a JSON object without traceEvents or schemaVersion: not a PyTorch "
                       "profiler trace",
                       path);
    if (rc == 0 && pr.events == 0)
        rc = error_set("%s: no trace events in it (traceEvents is empty%s)", path,
                       truncated ? ", or the file is cut before them" : "");
    if (rc == 0)
        rc = import_rank_drain(core);
    if (rc == 0 && import_rank_empty(core))
        rc = error_set("%s: none of its %llu events is part of a training step "
                       "(ProfilerStep#N, DistributedDataParallel.forward, autograd "
                       "evaluate_function, Optimizer.step, DataLoader, a collective, a kernel): "
                       "not a PyTorch training trace?",
                       path, (unsigned long long)pr.events);
    if (rc == 0) {
        pt_warn(&pr, truncated, bytes_read);
        rc = import_rank_finish(core);
    }
    struct import_rank_info *info = import_rank_info(core);
    int legacy = hdr.format == PT_FORMAT_LEGACY;
    info->format = legacy ? "legacy" : "kineto";
    info->shared_clock = hdr.format == PT_FORMAT_KINETO; /* legacy: each process from 0 */
    info->has_rank = hdr.has_rank;
    info->rank = hdr.rank;
    info->no_rank_why = legacy ? "the legacy exporter writes none" : "not a distributed run?";
    info->has_world = hdr.has_world;
    info->world_size = hdr.world_size;
    info->has_backend = hdr.has_backend;
    memcpy(info->backend, hdr.backend, sizeof info->backend);
    info->devices = hdr.devices;
    info->bad_durs = hdr.bad_durs;
    info->base_ns = hdr.has_base ? hdr.base_ns : 0;
    if (rc == 0 && (info->base_ns < 0 || info->base_ns > IMPORT_MAX_TS)) {
        report_warn("%s: baseTimeNanoseconds %lld is out of range: taken as 0", path,
                    (long long)info->base_ns);
        info->base_ns = 0;
    }
    import_rank_set_host(core, buf ? NULL : pt_host_of(path));
    import_rank_free(core);
    return rc;
}

static int pt_load(const char *path, struct import_sink *sink)
{
    return pt_load_rank(sink, path, NULL, 0);
}

int import_buffer(struct runset *rs, const char *buf, size_t len, const char *what)
{
    struct import_sink sink;
    import_sink_init(&sink, rs, what, 1);
    int rc = pt_load_rank(&sink, what, buf, len);
    if (rc == 0)
        rc = import_sink_finish(&sink);
    import_sink_free(&sink);
    return rc;
}

/* ---- claims ---- */

/* How surely a file of this name is a PyTorch trace: tensorboard_trace_handler's
 * "*.pt.trace.json[.gz]" first, then any "*.json[.gz]" but timeline.json (the report's own
 * output); any other file only when given by name (it may be JSON all the same). */
static enum import_claim pt_claims_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (strcmp(base, "timeline.json") == 0)
        return IMPORT_CLAIM_NO;
    int json = (n > 5 && strcmp(base + n - 5, ".json") == 0) ||
               (n > 8 && strcmp(base + n - 8, ".json.gz") == 0);
    if (!json)
        return IMPORT_CLAIM_MAYBE;
    return strstr(base, ".pt.trace.json") ? IMPORT_CLAIM_FIRST : IMPORT_CLAIM_YES;
}

/* Does the file's JSON (gunzipped) begin with '[': the legacy exporter's array? */
static int pt_is_array(const char *path)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        return 0;
    char b[64];
    int got = gzread(f, b, sizeof b), array = 0;
    gzclose(f);
    for (int i = 0; i < got; i++) {
        if (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r')
            continue;
        array = b[i] == '[';
        break;
    }
    return array;
}

static enum import_claim pt_kineto_claims(const char *path, int is_dir)
{
    return is_dir ? IMPORT_CLAIM_NO : pt_claims_name(path);
}

static enum import_claim pt_legacy_claims(const char *path, int is_dir)
{
    enum import_claim c = is_dir ? IMPORT_CLAIM_NO : pt_claims_name(path);
    return c >= IMPORT_CLAIM_YES && pt_is_array(path) ? c : IMPORT_CLAIM_NO;
}

/* Both formats stream through one reader (ptjson.c tells them apart by the first byte). */
const struct importer importer_kineto = {"PyTorch Kineto JSON", pt_kineto_claims, pt_load};
const struct importer importer_legacy = {"PyTorch legacy exporter JSON", pt_legacy_claims,
                                         pt_load};
