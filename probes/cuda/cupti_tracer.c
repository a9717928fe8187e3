/* cupti_tracer.c — start and stop CUPTI activity tracing, push/pop correlation ids.
 *
 * Start order matters: first the callback subscriber (CUPTI allows one, so this is where
 * "another tool such as nsys holds CUPTI" shows, before we change anything of CUPTI's),
 * then the timestamp callback (before any activity kind is enabled, so every record is
 * on clock_now_ns), then the buffer callbacks, then the kinds.  Without a
 * device or driver nothing of CUPTI is touched: cudaGetDeviceCount says so first. */
#include "probes/cuda/cupti_internal.h"

#include "common/error.h"
#include "probes/gpu.h"

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* RUNTIME records are not written: enabling them is what makes CUPTI emit the
 * external-correlation records for runtime calls inside a pushed range. */
static const CUpti_ActivityKind tracer_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
};
#define TRACER_NKINDS (sizeof tracer_kinds / sizeof tracer_kinds[0])

struct cupti_tracer {
    struct activity_proc *ap;
    size_t kinds_enabled;
};

static atomic_int tracer_active;

const char *cupti_result_text(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
        return "unknown CUPTI error";
    return s;
}

static void tracer_disable(struct cupti_tracer *t)
{
    while (t->kinds_enabled > 0)
        cuptiActivityDisable(tracer_kinds[--t->kinds_enabled]);
}

struct cupti_tracer *cupti_tracer_start(struct activity_proc *ap, char *why, size_t why_cap)
{
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev == 0) {
        snprintf(why, why_cap, "CUPTI unavailable: no CUDA device or driver (%s); "
                 "no GPU activity rows, host and NVTX probes go on",
                 ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
        return NULL;
    }
    if (atomic_exchange(&tracer_active, 1)) {
        snprintf(why, why_cap,
                 "CUPTI unavailable: already traced by another probe in this process");
        return NULL;
    }
    struct cupti_tracer *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(why, why_cap, "CUPTI unavailable: out of memory");
        atomic_store(&tracer_active, 0);
        return NULL;
    }
    t->ap = ap;
    const char *step = "cuptiSubscribe";
    CUptiResult r = cupti_callbacks_subscribe();
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        snprintf(why, why_cap, "CUPTI unavailable: another tool holds CUPTI (under nsys, "
                 "use --trace nvtx); host and NVTX probes go on");
        goto fail;
    }
    if (r == CUPTI_SUCCESS) {
        step = "cuptiActivityRegisterTimestampCallback";
        r = cupti_clock_register();
    }
    if (r == CUPTI_SUCCESS) {
        step = "cuptiActivityRegisterCallbacks";
        r = cupti_buffers_register(ap);
    }
    while (r == CUPTI_SUCCESS && t->kinds_enabled < TRACER_NKINDS) {
        step = "cuptiActivityEnable";
        r = cuptiActivityEnable(tracer_kinds[t->kinds_enabled]);
        if (r == CUPTI_SUCCESS)
            t->kinds_enabled++;
    }
    if (r != CUPTI_SUCCESS) {
        snprintf(why, why_cap, "CUPTI unavailable: %s failed: %s; host and NVTX probes go on",
                 step, cupti_result_text(r));
        goto fail;
    }
    return t;
fail:
    tracer_disable(t);
    cupti_callbacks_unsubscribe();
    free(t);
    atomic_store(&tracer_active, 0);
    return NULL;
}

void cupti_tracer_push(struct cupti_tracer *t, uint64_t external_id)
{
    if (t)
        cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                               external_id);
}

void cupti_tracer_pop(struct cupti_tracer *t)
{
    if (t)
        cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, NULL);
}

int cupti_tracer_flush(struct cupti_tracer *t)
{
    if (!t)
        return 0;
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS)
        return error_set("CUPTI: cuptiActivityFlushAll failed: %s", cupti_result_text(r));
    return 0;
}

uint64_t cupti_tracer_dropped(const struct cupti_tracer *t)
{
    return t ? cupti_buffers_dropped() : 0;
}

void cupti_tracer_stop(struct cupti_tracer *t)
{
    if (!t)
        return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    tracer_disable(t);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cupti_callbacks_unsubscribe();
    free(t);
    atomic_store(&tracer_active, 0);
}
