/* kernels.c — the device activity sweep (kernels.h): running unions and per-stream
 * activities as they are read, HTA's per-stream figures when the sweep is finished. */
#include "report/input/kernels.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "report/input/sort.h"

/* Extend a running union by [s, e) (s not before the previous start); returns the gap
 * [r->e, s) it jumped over in *gap (0 when none). */
static void kernel_run_add(struct kernel_run *r, int64_t s, int64_t e, int64_t *gap)
{
    *gap = 0;
    if (!r->open) {
        r->open = 1;
        r->s = s;
        r->e = e;
    } else if (s <= r->e) {
        if (e > r->e)
            r->e = e;
    } else {
        *gap = s - r->e;
        r->total += r->e - r->s;
        r->s = s;
        r->e = e;
    }
}

static void kernel_run_close(struct kernel_run *r)
{
    if (r->open)
        r->total += r->e - r->s;
    r->open = 0;
}

void kernel_sweep_add(struct kernel_sweep *k, int64_t start_ns, int64_t end_ns,
                      enum kernel_class cls, int64_t launch_ns)
{
    if (k->count > 0 && start_ns < k->prev_start)
        start_ns = k->prev_start; /* out of order: the sweep cannot go back */
    if (end_ns < start_ns)
        end_ns = start_ns;
    if (k->count == 0 || start_ns < k->first_ns)
        k->first_ns = start_ns;
    if (k->count == 0 || end_ns > k->last_ns)
        k->last_ns = end_ns;
    k->prev_start = start_ns;
    k->count++;
    int64_t gap, other;
    int64_t gap_from = k->all.e; /* where a gap of `all` would have begun */
    kernel_run_add(&k->all, start_ns, end_ns, &gap);
    if (gap > 0) {
        k->gaps++;
        if (launch_ns >= 0) {
            k->gaps_launch_known++;
            if (launch_ns > gap_from) /* the GPU waited for the host to launch this */
                k->host_wait_ns += gap;
        }
    }
    if (launch_ns >= 0)
        k->launches_known++;
    if (cls == KERNEL_COMPUTE)
        kernel_run_add(&k->compute, start_ns, end_ns, &other);
    if (cls == KERNEL_COMM)
        kernel_run_add(&k->comm, start_ns, end_ns, &other);
    if (cls != KERNEL_MEMORY)
        kernel_run_add(&k->cc, start_ns, end_ns, &other);
}

int kernel_sweep_stream_add(struct kernel_sweep *k, int64_t stream, int64_t start_ns,
                            int64_t end_ns, int64_t launch_ns)
{
    int i = k->nstreams;
    while (i > 0 && k->streams[i - 1].id > stream)
        i--;
    if (i == 0 || k->streams[i - 1].id != stream) { /* a new stream, kept in id order */
        if (k->nstreams == k->cap_streams) {
            int cap = k->cap_streams ? 2 * k->cap_streams : 4;
            struct kernel_stream *v = realloc(k->streams, (size_t)cap * sizeof *v);
            if (!v)
                return error_set("report: out of memory (streams)");
            k->streams = v;
            k->cap_streams = cap;
        }
        memmove(&k->streams[i + 1], &k->streams[i],
                (size_t)(k->nstreams - i) * sizeof *k->streams);
        memset(&k->streams[i], 0, sizeof *k->streams);
        k->streams[i].id = stream;
        k->nstreams++;
        i++;
    }
    struct kernel_stream *s = &k->streams[i - 1];
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        struct kernel_act *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return error_set("report: out of memory (stream activities)");
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (struct kernel_act){.start = start_ns, .end = end_ns, .launch = launch_ns};
    return 0;
}

struct queue_point {
    int64_t ts, delta;
};

/* HTA's get_idle_time_breakdown and queue length summary for one stream (see FORMULAS.md). */
static int kernel_stream_finish(struct kernel_stream *s)
{
    if (sort_by_i64(s->v, s->n, sizeof *s->v, offsetof(struct kernel_act, start)) < 0)
        return -1;
    s->host_wait_ns = s->kernel_wait_ns = s->other_ns = 0;
    for (size_t i = 1; i < s->n; i++) {
        int64_t prev_end = s->v[i - 1].end; /* the previous kernel's, not the latest end */
        int64_t gap = s->v[i].start - prev_end;
        if (s->v[i].launch >= 0 && s->v[i].launch > prev_end)
            s->host_wait_ns += gap;
        else if (gap < KERNEL_WAIT_NS)
            s->kernel_wait_ns += gap;
        else
            s->other_ns += gap;
    }
    /* queue length: +1 at each launch, -1 when its activity starts; the activities without
     * a known launch are left out, as HTA leaves them */
    size_t nl = 0;
    for (size_t i = 0; i < s->n; i++)
        nl += s->v[i].launch >= 0;
    s->queue_points = s->queue_max = 0;
    s->queue_mean = 0;
    if (nl == 0)
        return 0;
    struct queue_point *q = malloc(2 * nl * sizeof *q);
    if (!q)
        return error_set("report: out of memory (queue length)");
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].launch >= 0)
            q[m++] = (struct queue_point){s->v[i].launch, 1};
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].launch >= 0)
            q[m++] = (struct queue_point){s->v[i].start, -1};
    /* stable: at one time, launches before starts (HTA sorts launches, then kernels, by ts) */
    if (sort_by_i64(q, m, sizeof *q, offsetof(struct queue_point, ts)) < 0) {
        free(q);
        return -1;
    }
    int64_t len = 0, sum = 0;
    for (size_t i = 0; i < m; i++) {
        len += q[i].delta;
        sum += len;
        if (len > s->queue_max)
            s->queue_max = len;
    }
    s->queue_points = (int64_t)m;
    s->queue_mean = (double)sum / (double)m;
    free(q);
    return 0;
}

int kernel_sweep_finish(struct kernel_sweep *k)
{
    kernel_run_close(&k->all);
    kernel_run_close(&k->compute);
    kernel_run_close(&k->comm);
    kernel_run_close(&k->cc);
    k->finished = 1;
    for (int i = 0; i < k->nstreams; i++)
        if (kernel_stream_finish(&k->streams[i]) < 0)
            return -1;
    return 0;
}
