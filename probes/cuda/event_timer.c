/* event_timer.c — CUDA event pairs around ranges on one stream, resolved without
 * stalling the step, on the host clock (see gpu.h). */
#include "probes/gpu.h"

#include "probes/event_anchor.h"

#include "common/clock.h"
#include "common/error.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_REANCHOR_NS 1000000000ll /* re-anchor about every second */
/* After recording a new anchor on an idle stream, look for its completion this long
 * (non-blocking queries, no sync): seen within it, the anchor's host time is bracketed
 * within tens of microseconds.  Once a second at most, and only when the stream is idle. */
#define EVENT_ANCHOR_SPIN_NS 50000ll
/* Wait this long past the interval for an idle stream, then record on a busy one (its
 * bracket is wide: the clamp can only improve the estimate, never worsen it). */
#define EVENT_ANCHOR_IDLE_WAIT_NS 4000000000ll

enum { SLOT_FREE = 0, SLOT_BEGUN, SLOT_ENDED };

struct event_slot {
    cudaEvent_t start, end; /* created on first use */
    int state;
    struct trace_row row;
    char name[64];
};

struct event_timer {
    cudaStream_t stream;
    struct event_slot slot[EVENT_TIMER_SLOTS];
    size_t head, count;          /* slots in use, in begin order */
    cudaEvent_t anchor, next;    /* next: a newer anchor on its way */
    struct event_anchor at;      /* host time of anchor and its error bound */
    int64_t next_recorded_ns;    /* host time before next was recorded (0: none pending) */
    int64_t anchored_at_ns;      /* host time of the last re-anchor */
    uint64_t dropped;
};

struct event_timer *event_timer_create(void *stream)
{
    struct event_timer *t = calloc(1, sizeof *t);
    if (!t) {
        error_set("CUDA event timing: out of memory");
        return NULL;
    }
    t->stream = (cudaStream_t)stream;
    cudaError_t e = cudaEventCreate(&t->anchor);
    if (e == cudaSuccess)
        e = cudaEventCreate(&t->next);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(t->stream);
    int64_t t0 = clock_now_ns();
    if (e == cudaSuccess)
        e = cudaEventRecord(t->anchor, t->stream);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(t->anchor);
    int64_t t1 = clock_now_ns();
    if (e != cudaSuccess) {
        error_set("CUDA event timing: cannot anchor the stream's events: %s",
                  cudaGetErrorString(e));
        event_timer_destroy(t);
        return NULL;
    }
    /* the stream was idle: the anchor ran between t0 and t1 */
    t->at.host_ns = t0 + (t1 - t0) / 2;
    t->at.err_ns = (t1 - t0 + 1) / 2;
    t->anchored_at_ns = t1;
    return t;
}

int event_timer_begin(struct event_timer *t)
{
    if (!t)
        return -1;
    if (t->count == EVENT_TIMER_SLOTS) {
        t->dropped++;
        return -1;
    }
    size_t i = (t->head + t->count) % EVENT_TIMER_SLOTS;
    struct event_slot *s = &t->slot[i];
    if (!s->start && cudaEventCreate(&s->start) != cudaSuccess)
        return -1;
    if (!s->end && cudaEventCreate(&s->end) != cudaSuccess)
        return -1;
    if (cudaEventRecord(s->start, t->stream) != cudaSuccess)
        return -1;
    s->state = SLOT_BEGUN;
    t->count++;
    return (int)i;
}

void event_timer_end(struct event_timer *t, int slot, const struct trace_row *row)
{
    if (!t || slot < 0 || slot >= EVENT_TIMER_SLOTS || t->slot[slot].state != SLOT_BEGUN)
        return;
    struct event_slot *s = &t->slot[slot];
    s->row = *row;
    const char *name = row->name ? row->name : phase_name(row->phase);
    size_t n = strnlen(name, sizeof s->name - 1);
    memcpy(s->name, name, n);
    s->name[n] = '\0';
    s->row.name = s->name;
    s->row.clock = TRACE_CLOCK_DEVICE;
    if (cudaEventRecord(s->end, t->stream) == cudaSuccess)
        s->state = SLOT_ENDED;
    /* else it stays BEGUN and is dropped when it reaches the head at drain */
}

/* host time of a completed event */
static int64_t event_host_ns(struct event_timer *t, cudaEvent_t ev)
{
    float ms = 0;
    if (cudaEventElapsedTime(&ms, t->anchor, ev) != cudaSuccess)
        return INT64_MIN;
    return event_anchor_map(&t->at, ms);
}

/* next was seen complete at observed: it becomes the anchor, its host time from the host
 * clock's bracket (event_anchor_next), not from the device's elapsed time alone */
static void event_reanchor_take(struct event_timer *t, int64_t observed)
{
    float ms = 0;
    int64_t recorded = t->next_recorded_ns;
    t->next_recorded_ns = 0;
    if (cudaEventElapsedTime(&ms, t->anchor, t->next) != cudaSuccess)
        return;
    t->at = event_anchor_next(&t->at, ms, recorded, observed);
    cudaEvent_t old = t->anchor;
    t->anchor = t->next;
    t->next = old;
    t->anchored_at_ns = observed;
}

static void event_reanchor(struct event_timer *t)
{
    int64_t now = clock_now_ns();
    if (t->next_recorded_ns) {
        /* observed is read after the query says complete: the event completed before it */
        if (cudaEventQuery(t->next) == cudaSuccess)
            event_reanchor_take(t, clock_now_ns());
        return;
    }
    if (now - t->anchored_at_ns < EVENT_REANCHOR_NS)
        return;
    /* prefer an idle stream: the event completes at once and a short look brackets it */
    int idle = cudaStreamQuery(t->stream) == cudaSuccess;
    if (!idle && now - t->anchored_at_ns < EVENT_REANCHOR_NS + EVENT_ANCHOR_IDLE_WAIT_NS)
        return;
    int64_t recorded = clock_now_ns();
    if (cudaEventRecord(t->next, t->stream) != cudaSuccess)
        return;
    t->next_recorded_ns = recorded;
    if (!idle)
        return; /* seen at a later poll: a wide bracket */
    for (;;) {
        cudaError_t q = cudaEventQuery(t->next);
        int64_t seen = clock_now_ns();
        if (q == cudaSuccess) {
            event_reanchor_take(t, seen);
            return;
        }
        if (q != cudaErrorNotReady || seen - recorded > EVENT_ANCHOR_SPIN_NS)
            return;
    }
}

void event_timer_poll(struct event_timer *t, trace_emit_fn emit, void *ctx)
{
    if (!t)
        return;
    event_reanchor(t);
    while (t->count > 0) {
        struct event_slot *s = &t->slot[t->head];
        if (s->state != SLOT_ENDED)
            break;
        cudaError_t q = cudaEventQuery(s->end);
        if (q == cudaErrorNotReady)
            break;
        if (q == cudaSuccess) {
            int64_t a = event_host_ns(t, s->start), b = event_host_ns(t, s->end);
            if (a != INT64_MIN && b != INT64_MIN) {
                s->row.start_ns = a;
                s->row.end_ns = b;
                emit(ctx, &s->row);
            }
        }
        s->state = SLOT_FREE;
        t->head = (t->head + 1) % EVENT_TIMER_SLOTS;
        t->count--;
    }
}

void event_timer_drain(struct event_timer *t, trace_emit_fn emit, void *ctx)
{
    if (!t)
        return;
    cudaStreamSynchronize(t->stream);
    event_timer_poll(t, emit, ctx);
    /* what is left was begun and never ended (or failed to record its end) */
    while (t->count > 0) {
        t->slot[t->head].state = SLOT_FREE;
        t->head = (t->head + 1) % EVENT_TIMER_SLOTS;
        t->count--;
        t->dropped++;
        event_timer_poll(t, emit, ctx);
    }
}

uint64_t event_timer_dropped(const struct event_timer *t)
{
    return t ? t->dropped : 0;
}

void event_timer_destroy(struct event_timer *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < EVENT_TIMER_SLOTS; i++) {
        if (t->slot[i].start)
            cudaEventDestroy(t->slot[i].start);
        if (t->slot[i].end)
            cudaEventDestroy(t->slot[i].end);
    }
    if (t->anchor)
        cudaEventDestroy(t->anchor);
    if (t->next)
        cudaEventDestroy(t->next);
    free(t);
}
