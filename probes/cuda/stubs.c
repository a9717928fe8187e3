/* stubs.c — probes/gpu.h for builds without CUDA: CUPTI and CUDA events are unavailable,
 * said once by the caller (probe.c); everything else in the probes works. */
#include "probes/gpu.h"

#include "common/error.h"

#include <stdio.h>

struct cupti_tracer *cupti_tracer_start(struct activity_proc *ap, char *why, size_t why_cap)
{
    (void)ap;
    snprintf(why, why_cap, "CUPTI unavailable: this build has no CUDA (CPU-only build)");
    return NULL;
}

void cupti_tracer_push(struct cupti_tracer *t, uint64_t external_id)
{
    (void)t, (void)external_id;
}

void cupti_tracer_pop(struct cupti_tracer *t)
{
    (void)t;
}

int cupti_tracer_flush(struct cupti_tracer *t)
{
    (void)t;
    return 0;
}

uint64_t cupti_tracer_dropped(const struct cupti_tracer *t)
{
    (void)t;
    return 0;
}

void cupti_tracer_stop(struct cupti_tracer *t)
{
    (void)t;
}

struct event_timer *event_timer_create(void *stream)
{
    (void)stream;
    error_set("CUDA event timing: this build has no CUDA (CPU-only build)");
    return NULL;
}

int event_timer_begin(struct event_timer *t)
{
    (void)t;
    return -1;
}

void event_timer_end(struct event_timer *t, int slot, const struct trace_row *row)
{
    (void)t, (void)slot, (void)row;
}

void event_timer_poll(struct event_timer *t, trace_emit_fn emit, void *ctx)
{
    (void)t, (void)emit, (void)ctx;
}

void event_timer_drain(struct event_timer *t, trace_emit_fn emit, void *ctx)
{
    (void)t, (void)emit, (void)ctx;
}

uint64_t event_timer_dropped(const struct event_timer *t)
{
    (void)t;
    return 0;
}

void event_timer_destroy(struct event_timer *t)
{
    (void)t;
}
