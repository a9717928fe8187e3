/* probe.c — the probe API: phase ranges to NVTX, host rows, device rows and CUPTI
 * correlation ids (see probe.h). */
#include "probes/probe.h"

#include "probes/activity.h"
#include "common/clock.h"
#include "probes/correlation.h"
#include "common/error.h"
#include "common/vec.h"
#include "probes/gpu.h"
#include "probes/nvtx.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct probe_frame {
    enum probe_phase ph;
    int64_t step;
    int epoch;
    int64_t start_ns;
    int ev_slot; /* event pair on the compute stream, -1: none */
    int corr;    /* 1: a CUPTI external id was pushed (not for layer ranges) */
    const char *name; /* the row's name (a layer's), NULL: none; the caller's, kept alive */
    uint64_t bytes;   /* the row's bytes when the pop gives none */
};

struct probe_bucket {
    int64_t launch_ns, step;
    uint64_t bytes;
    int epoch;
    uint64_t nvtx_id;
    int ev_slot;     /* event pair on the comm stream, -1: none */
    int corr_pushed; /* CUPTI correlation id pushed at launch, not yet popped */
    int open;        /* launched, range not yet written */
};

struct probe {
    enum probe_mode mode;
    int rank;
    int64_t step;
    int epoch;
    struct probe_frame stack[PROBE_MAX_DEPTH];
    int depth, overflow;
    struct probe_bucket *buckets; /* by bucket id, grown on first use */
    size_t nbuckets;
    struct trace_writer *w;
    struct nvtx_ranges *nvtx;
    struct activity_proc *ap;
    struct cupti_tracer *cupti;
    struct event_timer *ev_compute, *ev_comm;
    int comm_host_staged; /* full mode, all-reduces staged through the host: marked rows */
    uint64_t unbalanced;
    char note[256];
};

void probe_opts_default(struct probe_opts *o)
{
    memset(o, 0, sizeof *o);
    o->run_dir = ".";
    o->mode = PROBE_KERNELS;
    o->cupti = 1;
}

static const char *const probe_mode_names[] = {"off", "nvtx", "kernels", "full"};
#define PROBE_MODES (int)(sizeof probe_mode_names / sizeof probe_mode_names[0])
_Static_assert(PROBE_FULL + 1 == sizeof probe_mode_names / sizeof probe_mode_names[0],
               "a name per mode");

int probe_mode_parse(const char *s, enum probe_mode *mode)
{
    for (int i = 0; i < PROBE_MODES; i++)
        if (s && strcmp(s, probe_mode_names[i]) == 0) {
            *mode = (enum probe_mode)i;
            return 0;
        }
    return error_set("--trace: unknown mode '%s': use off, nvtx, kernels or full",
                     s ? s : "");
}

const char *probe_mode_name(enum probe_mode mode)
{
    return (unsigned)mode < (unsigned)PROBE_MODES ? probe_mode_names[mode] : "?";
}

static void probe_note_once(const char *line)
{
    static atomic_int printed;
    if (!atomic_exchange(&printed, 1))
        fprintf(stderr, "ddpprof: %s\n", line);
}

struct probe *probe_create(const struct probe_opts *o)
{
    struct probe *p = calloc(1, sizeof *p);
    if (!p) {
        error_set("probes: out of memory");
        return NULL;
    }
    p->mode = o->mode;
    p->rank = o->rank;
    p->comm_host_staged = o->comm_host_staged && o->mode == PROBE_FULL;
    if (p->mode == PROBE_OFF)
        return p;
    if ((unsigned)p->mode > PROBE_FULL) {
        free(p);
        error_set("probes: invalid trace mode %d", (int)o->mode);
        return NULL;
    }
    p->w = trace_writer_open(o->run_dir ? o->run_dir : ".", o->rank, o->flush_bytes);
    if (!p->w)
        goto fail;
    p->nvtx = nvtx_ranges_create();
    if (!p->nvtx)
        goto fail;
    nvtx_ranges_mark_rank(p->nvtx, o->rank, o->world_size > 0 ? o->world_size : 1);
    if (p->mode == PROBE_FULL && o->gpu) { /* device rows: CUDA event pairs */
        p->ev_compute = event_timer_create(o->compute_stream);
        if (!p->ev_compute) {
            error_wrap("probes (rank %d, compute stream)", o->rank);
            goto fail;
        }
        if (o->comm_stream) {
            p->ev_comm = event_timer_create(o->comm_stream);
            if (!p->ev_comm) {
                error_wrap("probes (rank %d, communication stream)", o->rank);
                goto fail;
            }
        }
    }
    if (p->mode >= PROBE_KERNELS && o->gpu && o->cupti) { /* cupti rows */
        p->ap = activity_proc_create(o->rank, trace_writer_emit, p->w);
        if (!p->ap)
            goto fail;
        p->cupti = cupti_tracer_start(p->ap, p->note, sizeof p->note);
        if (!p->cupti && !o->quiet)
            probe_note_once(p->note);
    }
    return p;
fail:
    event_timer_destroy(p->ev_compute);
    event_timer_destroy(p->ev_comm);
    activity_proc_destroy(p->ap);
    nvtx_ranges_destroy(p->nvtx);
    if (p->w) {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", error_get());
        trace_writer_close(p->w);
        error_set("%s", keep);
    }
    free(p);
    return NULL;
}

int probe_set_comm_stream(struct probe *p, void *stream)
{
    if (!p || p->mode != PROBE_FULL || !p->ev_compute || !stream)
        return 0;
    struct event_timer *t = event_timer_create(stream);
    if (!t)
        return error_wrap("probes (rank %d, communication stream)", p->rank);
    if (p->ev_comm) {
        for (size_t b = 0; b < p->nbuckets; b++)
            p->buckets[b].ev_slot = -1; /* pairs of the old timer are drained below */
        event_timer_drain(p->ev_comm, trace_writer_emit, p->w);
        event_timer_destroy(p->ev_comm);
    }
    p->ev_comm = t;
    return 0;
}

static void probe_poll_devices(struct probe *p)
{
    if (p->ev_compute)
        event_timer_poll(p->ev_compute, trace_writer_emit, p->w);
    if (p->ev_comm)
        event_timer_poll(p->ev_comm, trace_writer_emit, p->w);
}

void probe_set_step(struct probe *p, int64_t step, int epoch)
{
    if (!p || p->mode == PROBE_OFF)
        return;
    p->step = step;
    p->epoch = epoch;
    probe_poll_devices(p);
}

/* every push: name (NULL: the phase's) and bytes for the host row, payload for NVTX */
static void push(struct probe *p, enum probe_phase ph, const char *name, uint64_t bytes,
                 uint64_t payload)
{
    if (!p || p->mode == PROBE_OFF)
        return;
    if (p->depth == PROBE_MAX_DEPTH || (unsigned)ph >= PROBE_PHASE_COUNT) {
        p->overflow++; /* its pop is swallowed too */
        p->unbalanced++;
        return;
    }
    struct probe_frame *f = &p->stack[p->depth++];
    f->ph = ph;
    f->step = p->step;
    f->epoch = p->epoch;
    f->name = name;
    f->bytes = bytes;
    nvtx_ranges_push_named(p->nvtx, ph, name, payload);
    f->ev_slot = p->ev_compute ? event_timer_begin(p->ev_compute) : -1;
    f->corr = p->cupti && ph != PROBE_LAYER_FORWARD && ph != PROBE_LAYER_BACKWARD;
    if (f->corr)
        cupti_tracer_push(p->cupti, corr_encode(ph, p->step, p->epoch, -1));
    f->start_ns = clock_now_ns(); /* last: the host row excludes the probe's own work */
}

void probe_push(struct probe *p, enum probe_phase ph)
{
    push(p, ph, NULL, 0, p ? (uint64_t)p->step : 0);
}

void probe_push_sized(struct probe *p, enum probe_phase ph, uint64_t size)
{
    push(p, ph, NULL, 0, size);
}

/* a layer's NVTX payload is its quantity too: its parameter bytes (probes/nvtx.h) */
void probe_push_named(struct probe *p, enum probe_phase ph, const char *name, uint64_t bytes)
{
    push(p, ph, name, bytes, bytes);
}

void probe_pop(struct probe *p) { probe_pop_bytes(p, 0); }

void probe_pop_bytes(struct probe *p, uint64_t bytes)
{
    if (!p || p->mode == PROBE_OFF)
        return;
    int64_t end_ns = clock_now_ns(); /* first, for the same reason */
    if (p->overflow > 0) {
        p->overflow--;
        return;
    }
    if (p->depth == 0) {
        p->unbalanced++;
        return;
    }
    struct probe_frame *f = &p->stack[--p->depth];
    if (f->corr)
        cupti_tracer_pop(p->cupti);
    struct trace_row row = {
        .rank = p->rank,
        .step = f->step,
        .epoch = f->epoch,
        .phase = f->ph,
        .bucket = -1,
        .clock = TRACE_CLOCK_HOST,
        .start_ns = f->start_ns,
        .end_ns = end_ns,
        .bytes = bytes ? bytes : f->bytes,
        .name = f->name,
        .kind = TRACE_KIND_RANGE,
        .stream = phase_stream(f->ph),
    };
    if (f->ev_slot >= 0)
        event_timer_end(p->ev_compute, f->ev_slot, &row);
    nvtx_ranges_pop(p->nvtx);
    trace_writer_add(p->w, &row); /* a loss is counted and reported at destroy */
}

static struct probe_bucket *probe_bucket_get(struct probe *p, int bucket)
{
    if (bucket < 0)
        return NULL;
    if ((size_t)bucket >= p->nbuckets) {
        size_t old = p->nbuckets;
        if (VEC_RESERVE(p->buckets, p->nbuckets, (size_t)bucket + 1))
            return NULL;
        memset(p->buckets + old, 0, (p->nbuckets - old) * sizeof *p->buckets);
        for (size_t i = old; i < p->nbuckets; i++)
            p->buckets[i].ev_slot = -1;
    }
    return &p->buckets[bucket];
}

static void probe_bucket_name(char *buf, size_t cap, int bucket)
{
    snprintf(buf, cap, "allreduce.b%d", bucket);
}

void probe_bucket_launch(struct probe *p, int bucket, uint64_t bytes)
{
    if (!p || p->mode == PROBE_OFF)
        return;
    struct probe_bucket *b = probe_bucket_get(p, bucket);
    if (!b) {
        p->unbalanced++;
        return;
    }
    if (b->open) { /* launched twice without a range: end the first */
        nvtx_ranges_end(p->nvtx, b->nvtx_id);
        p->unbalanced++;
    }
    b->step = p->step;
    b->epoch = p->epoch;
    b->open = 1;
    b->nvtx_id = nvtx_ranges_start_bucket(p->nvtx, bucket, bytes);
    if (p->cupti) {
        cupti_tracer_push(p->cupti, corr_encode(PROBE_ALLREDUCE, p->step, p->epoch, bucket));
        b->corr_pushed = 1;
    }
    b->ev_slot = p->ev_comm ? event_timer_begin(p->ev_comm) : -1;
    b->bytes = bytes;
    b->launch_ns = clock_now_ns();
}

void probe_bucket_issued(struct probe *p, int bucket)
{
    if (!p || p->mode == PROBE_OFF || bucket < 0 || (size_t)bucket >= p->nbuckets)
        return;
    struct probe_bucket *b = &p->buckets[bucket];
    if (b->corr_pushed) {
        cupti_tracer_pop(p->cupti);
        b->corr_pushed = 0;
    }
    if (b->ev_slot >= 0) {
        char name[32];
        probe_bucket_name(name, sizeof name, bucket);
        struct trace_row row = {
            .rank = p->rank, .step = b->step, .epoch = b->epoch, .phase = PROBE_ALLREDUCE,
            .bucket = bucket, .clock = TRACE_CLOCK_DEVICE, .bytes = b->bytes, .name = name,
            .kind = TRACE_KIND_RANGE, .stream = phase_stream(PROBE_ALLREDUCE),
        };
        event_timer_end(p->ev_comm, b->ev_slot, &row);
        b->ev_slot = -1;
    }
}

void probe_bucket_range(struct probe *p, int bucket, uint64_t bytes, int64_t start_ns,
                        int64_t end_ns)
{
    if (!p || p->mode == PROBE_OFF)
        return;
    int64_t now = clock_now_ns();
    struct probe_bucket *b =
        bucket >= 0 && (size_t)bucket < p->nbuckets ? &p->buckets[bucket] : NULL;
    int64_t step = p->step, epoch = p->epoch, launch_ns = now;
    int launched = 0;
    if (b && b->open) {
        probe_bucket_issued(p, bucket); /* in case the caller did not */
        nvtx_ranges_end(p->nvtx, b->nvtx_id);
        b->open = 0;
        step = b->step;
        epoch = b->epoch;
        launch_ns = b->launch_ns;
        launched = 1;
    } else {
        p->unbalanced++; /* a range without its launch: written, with no NVTX range */
    }
    if (start_ns == 0 && end_ns == 0) {
        start_ns = launch_ns;
        end_ns = now;
    }
    char name[48];
    probe_bucket_name(name, sizeof name, bucket);
    if (p->comm_host_staged && launched) {
        /* no CUDA events time a host-staged all-reduce: its device row is the host's view
         * of the bucket's round trip, launch (the download) to now (the upload done),
         * marked by its name (TRACE.md) */
        size_t n = strlen(name);
        snprintf(name + n, sizeof name - n, "%s", TRACE_HOST_STAGED_SUFFIX);
        struct trace_row staged = {
            .rank = p->rank, .step = step, .epoch = (int)epoch, .phase = PROBE_ALLREDUCE,
            .bucket = bucket, .clock = TRACE_CLOCK_DEVICE, .start_ns = launch_ns,
            .end_ns = now, .bytes = bytes, .name = name, .kind = TRACE_KIND_RANGE,
            .stream = phase_stream(PROBE_ALLREDUCE),
        };
        trace_writer_add(p->w, &staged);
        name[n] = '\0';
    }
    struct trace_row row = {
        .rank = p->rank,
        .step = step,
        .epoch = (int)epoch,
        .phase = PROBE_ALLREDUCE,
        .bucket = bucket,
        .clock = TRACE_CLOCK_HOST,
        .start_ns = start_ns,
        .end_ns = end_ns,
        .bytes = bytes,
        .name = name,
        .kind = TRACE_KIND_RANGE,
        .stream = phase_stream(PROBE_ALLREDUCE),
    };
    trace_writer_add(p->w, &row);
}

void probe_row(struct probe *p, const struct trace_row *row)
{
    if (!p || p->mode == PROBE_OFF)
        return;
    struct trace_row r = *row;
    r.rank = p->rank;
    trace_writer_add(p->w, &r);
}

int probe_flush(struct probe *p)
{
    if (!p || p->mode == PROBE_OFF)
        return 0;
    probe_poll_devices(p);
    int rc = cupti_tracer_flush(p->cupti);
    if (trace_writer_flush(p->w) != 0)
        rc = -1;
    return rc;
}

void probe_stats(struct probe *p, struct probe_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!p || p->mode == PROBE_OFF)
        return;
    st->rows = trace_writer_rows(p->w);
    st->rows_lost = trace_writer_lost(p->w);
    st->unbalanced = p->unbalanced;
    st->device_dropped = event_timer_dropped(p->ev_compute) + event_timer_dropped(p->ev_comm);
    if (p->ap) {
        struct activity_stats as;
        activity_proc_stats(p->ap, &as);
        st->cupti_records = as.records;
        st->cupti_rows = as.rows;
        st->cupti_unattributed = as.unattributed;
    }
    st->cupti_dropped = cupti_tracer_dropped(p->cupti);
    st->cupti_active = p->cupti != NULL;
}

const char *probe_gpu_note(const struct probe *p)
{
    return p ? p->note : "";
}

int probe_destroy(struct probe *p)
{
    if (!p)
        return 0;
    int rc = 0;
    if (p->mode != PROBE_OFF) {
        /* ranges left open (an error path): close NVTX and CUPTI, write no row */
        for (; p->depth > 0; p->depth--) {
            if (p->cupti)
                cupti_tracer_pop(p->cupti);
            nvtx_ranges_pop(p->nvtx);
            p->unbalanced++;
        }
        for (size_t b = 0; b < p->nbuckets; b++) {
            if (!p->buckets[b].open)
                continue;
            if (p->buckets[b].corr_pushed)
                cupti_tracer_pop(p->cupti);
            nvtx_ranges_end(p->nvtx, p->buckets[b].nvtx_id);
            p->unbalanced++;
        }
        event_timer_drain(p->ev_compute, trace_writer_emit, p->w);
        event_timer_drain(p->ev_comm, trace_writer_emit, p->w);
        event_timer_destroy(p->ev_compute);
        event_timer_destroy(p->ev_comm);
        cupti_tracer_stop(p->cupti); /* delivers the last records through p->ap */
        if (p->ap)
            activity_proc_flush(p->ap);
        activity_proc_destroy(p->ap);
        nvtx_ranges_destroy(p->nvtx);
        rc = trace_writer_close(p->w);
    }
    free(p->buckets);
    free(p);
    return rc;
}
