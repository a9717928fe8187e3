/* cupti_tracer.c — start and stop CUPTI activity tracing, push/pop correlation ids.
 *
 * Start order matters: first the callback subscriber (CUPTI allows one, so this is where
 * "another tool such as nsys holds CUPTI" shows, before we change anything of CUPTI's),
 * then the timestamp callback (before any activity kind is enabled, so every record is
 * on clock_now_ns), then the buffer callbacks, then the kinds, then the per-call opt-outs.
 * Without a device or driver nothing of CUPTI is touched: cudaGetDeviceCount says so first.
 *
 * Correlation: CUPTI writes an external-correlation record for an API call made inside a
 * pushed range only when it writes an activity record for that call.  Kernels launched
 * through the runtime carry the runtime call's correlation id, but NCCL, cuDNN and cuBLAS
 * launch through the driver API (cuLaunchKernel, cuLaunchKernelEx): those kernels are
 * correlated only through the driver call's record.  So both RUNTIME and DRIVER records
 * are enabled (as kineto does), and the per-call queries that launch nothing and that
 * libraries make by the thousand are switched off again (tracer_quiet_*).
 *
 * Delivery: a flusher thread of the tracer asks CUPTI for its completed buffers every
 * CUPTI_FLUSH_INTERVAL_MS (cuptiActivityFlushAll(0): buffers whose records are all
 * complete, full or not; it waits for no device work), so the records are converted,
 * attributed and written to the trace on that thread (or on CUPTI's own, for a buffer
 * that fills up), never on the training thread during the steps.  The forced flushes
 * (cupti_tracer_flush at an epoch's end, cupti_tracer_stop) take what is left. */
#include "probes/cuda/cupti_internal.h"

#include "common/error.h"
#include "probes/gpu.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* how often the flusher thread hands CUPTI's completed buffers to the trace: well within
 * the trace writer's once-a-second write (TRACE.md: a killed rank loses at most the last
 * second or two of rows) */
#define CUPTI_FLUSH_INTERVAL_MS 500

/* RUNTIME and DRIVER records are not written as rows (activity.c counts them): enabling
 * them is what makes CUPTI emit the external-correlation records for the runtime and
 * driver calls inside a pushed range. */
const CUpti_ActivityKind cupti_tracer_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,               CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
};
const size_t cupti_tracer_nkinds = sizeof cupti_tracer_kinds / sizeof cupti_tracer_kinds[0];

/* Calls that launch nothing, made per op by cuDNN, cuBLAS, NCCL and our backend: no
 * records for them (best effort: a CUPTI that refuses keeps recording them). */
const CUpti_CallbackId cupti_tracer_quiet_driver[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,          CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,           CUPTI_DRIVER_TRACE_CBID_cuCtxGetFlags,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetStreamPriorityRange,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,     CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction,      CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel,
    CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,       CUPTI_DRIVER_TRACE_CBID_cuFuncGetParamInfo,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,         CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamQuery,            CUPTI_DRIVER_TRACE_CBID_cuEventQuery,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo,   CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx,
};
const size_t cupti_tracer_nquiet_driver =
    sizeof cupti_tracer_quiet_driver / sizeof cupti_tracer_quiet_driver[0];
const CUpti_CallbackId cupti_tracer_quiet_runtime[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
};
const size_t cupti_tracer_nquiet_runtime =
    sizeof cupti_tracer_quiet_runtime / sizeof cupti_tracer_quiet_runtime[0];

struct cupti_tracer {
    struct activity_proc *ap;
    size_t kinds_enabled;
    pthread_t flusher;
    int flusher_running;
    pthread_mutex_t mu; /* guards stopping, with cv the flusher's sleep */
    pthread_cond_t cv;
    int stopping;
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
        cuptiActivityDisable(cupti_tracer_kinds[--t->kinds_enabled]);
}

/* the flusher thread: CUPTI's completed buffers every CUPTI_FLUSH_INTERVAL_MS */
static void *tracer_flusher(void *arg)
{
    struct cupti_tracer *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stopping) {
        struct timespec at;
        clock_gettime(CLOCK_MONOTONIC, &at);
        at.tv_nsec += (long)CUPTI_FLUSH_INTERVAL_MS * 1000000L;
        at.tv_sec += at.tv_nsec / 1000000000L;
        at.tv_nsec %= 1000000000L;
        while (!t->stopping && pthread_cond_timedwait(&t->cv, &t->mu, &at) == 0) {
        }
        if (t->stopping)
            break;
        pthread_mutex_unlock(&t->mu);
        cuptiActivityFlushAll(0); /* its buffer callbacks write the rows, on this thread */
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* Start the flusher with every signal blocked in it (as the trace writer's flusher): a
 * signal meant for the process lands on a thread of the program's own.  0 or -1. */
static int tracer_flusher_start(struct cupti_tracer *t)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&t->mu, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    t->flusher_running = pthread_create(&t->flusher, NULL, tracer_flusher, t) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!t->flusher_running) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        return -1;
    }
    return 0;
}

static void tracer_flusher_stop(struct cupti_tracer *t)
{
    if (!t->flusher_running)
        return;
    pthread_mutex_lock(&t->mu);
    t->stopping = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->flusher, NULL);
    t->flusher_running = 0;
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
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
    while (r == CUPTI_SUCCESS && t->kinds_enabled < cupti_tracer_nkinds) {
        step = "cuptiActivityEnable";
        r = cuptiActivityEnable(cupti_tracer_kinds[t->kinds_enabled]);
        if (r == CUPTI_SUCCESS)
            t->kinds_enabled++;
    }
    if (r != CUPTI_SUCCESS) {
        snprintf(why, why_cap, "CUPTI unavailable: %s failed: %s; host and NVTX probes go on",
                 step, cupti_result_text(r));
        goto fail;
    }
    /* after the kinds: enabling a kind resets its per-call settings */
    for (size_t i = 0; i < cupti_tracer_nquiet_driver; i++)
        cuptiActivityEnableDriverApi(cupti_tracer_quiet_driver[i], 0);
    for (size_t i = 0; i < cupti_tracer_nquiet_runtime; i++)
        cuptiActivityEnableRuntimeApi(cupti_tracer_quiet_runtime[i], 0);
    if (tracer_flusher_start(t) != 0) {
        snprintf(why, why_cap, "CUPTI unavailable: cannot start its flusher thread; host and "
                 "NVTX probes go on");
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
    tracer_flusher_stop(t);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    tracer_disable(t);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cupti_callbacks_unsubscribe();
    free(t);
    atomic_store(&tracer_active, 0);
}
