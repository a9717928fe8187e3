/* probe_cost_cuda.c — a counting stand-in for the CUDA runtime and CUPTI, linked with the
 * probes' CUDA objects (every probes/cuda source but the loader, unchanged) into a
 * libddpprof_probes_cuda.so of the tests' own (tests/CMakeLists.txt: build/tests/probe-cost/),
 * for tests/test_probe_cost.c.
 *
 * The program loads it as it loads the real module (probes/cuda/gpu_loader.c, with
 * DDPPROF_LIB_DIR pointing there), so the probes run exactly their GPU code on a machine
 * without one, and every CUDA runtime and CUPTI call they make lands here and is counted,
 * by entry point and by thread: the thread that called probe_cost_mark_thread (the
 * training thread) or any other (CUPTI's, a flusher's).
 *
 * What it fakes: one device; streams and events are opaque pointers whose work is always
 * complete (every query succeeds, elapsed times grow by 1 us a call); CUPTI accepts the
 * subscriber, the callbacks and every activity kind, and keeps the external-correlation
 * stack of the calling thread (a pop without a push is counted as a misuse).  Each push,
 * while kernels and external correlation are enabled, stands for one kernel launched in
 * that range: an external-correlation record (a new correlation id -> the pushed id) and
 * a kernel record of 1 us on stream 7, named probe_cost_kernel, which wait for the next
 * flush; a flush (cuptiActivityFlushAll, forced or not) hands them to the registered
 * buffer callbacks in CUPTI's layout, as many buffers as they need (at least one), on
 * the thread that flushed, as CUPTI's own flush does.
 * What it does not: no device, no API records, no errors but those of a misuse. */
#include "probe_cost_cuda.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

static pthread_t cost_training;
static atomic_int cost_training_set;
static struct probe_cost_counts cost_counts;
_Static_assert(CUPTI_ACTIVITY_KIND_COUNT <= PROBE_COST_KINDS, "every kind has its flag");
static pthread_mutex_t cost_mu = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local int cost_corr_depth; /* this thread's external-correlation stack */
static CUpti_BuffersCallbackRequestFunc cost_request;
static CUpti_BuffersCallbackCompleteFunc cost_complete;

EXPORT void probe_cost_mark_thread(void)
{
    cost_training = pthread_self();
    atomic_store(&cost_training_set, 1);
}

EXPORT void probe_cost_read(struct probe_cost_counts *out)
{
    pthread_mutex_lock(&cost_mu);
    *out = cost_counts;
    pthread_mutex_unlock(&cost_mu);
}

EXPORT const char *probe_cost_call_name(int call)
{
    static const char *const names[PROBE_COST_CALLS] = {
#define COST_NAME(id, name) [id] = name,
        PROBE_COST_CALL_LIST(COST_NAME)
#undef COST_NAME
    };
    return call >= 0 && call < PROBE_COST_CALLS ? names[call] : "?";
}

static void cost_count(int call)
{
    const int training = atomic_load(&cost_training_set) &&
                         pthread_equal(pthread_self(), cost_training);
    pthread_mutex_lock(&cost_mu);
    cost_counts.calls[training ? 0 : 1][call]++;
    pthread_mutex_unlock(&cost_mu);
}

static void cost_misuse(void)
{
    pthread_mutex_lock(&cost_mu);
    cost_counts.misuse++;
    pthread_mutex_unlock(&cost_mu);
}

/* ---- the CUDA runtime ---------------------------------------------------------------- */

static _Atomic uint64_t cost_event_us; /* elapsed times grow by 1 us per event asked */
struct cost_event {
    uint64_t us;
};

cudaError_t cudaGetDeviceCount(int *count)
{
    cost_count(PC_cudaGetDeviceCount);
    *count = 1;
    return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
    (void)e;
    return "probe-cost stand-in error";
}

cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
    cost_count(PC_cudaEventCreate);
    *ev = (cudaEvent_t)calloc(1, sizeof(struct cost_event));
    return *ev ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    cost_count(PC_cudaEventDestroy);
    free(ev);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    (void)s;
    cost_count(PC_cudaEventRecord);
    ((struct cost_event *)(void *)ev)->us = atomic_fetch_add(&cost_event_us, 1) + 1;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    (void)ev;
    cost_count(PC_cudaEventQuery);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    (void)ev;
    cost_count(PC_cudaEventSynchronize);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    cost_count(PC_cudaEventElapsedTime);
    const struct cost_event *ea = (const void *)a, *eb = (const void *)b;
    *ms = (float)((double)eb->us - (double)ea->us) / 1000.0f;
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    (void)s;
    cost_count(PC_cudaStreamQuery);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    cost_count(PC_cudaStreamSynchronize);
    return cudaSuccess;
}

/* ---- CUPTI ---------------------------------------------------------------------------- */

CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
    (void)r;
    *s = "probe-cost stand-in result";
    return CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud)
{
    (void)cb, (void)ud;
    cost_count(PC_cuptiSubscribe);
    *sub = (CUpti_SubscriberHandle)&cost_counts;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    (void)sub;
    cost_count(PC_cuptiUnsubscribe);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
                                CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    (void)enable, (void)sub, (void)domain, (void)cbid;
    cost_count(PC_cuptiEnableCallback);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    (void)f;
    cost_count(PC_cuptiActivityRegisterTimestampCallback);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete)
{
    cost_count(PC_cuptiActivityRegisterCallbacks);
    cost_request = request;
    cost_complete = complete;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    cost_count(PC_cuptiActivityEnable);
    pthread_mutex_lock(&cost_mu);
    if ((unsigned)kind < PROBE_COST_KINDS)
        cost_counts.kind_enabled[kind] = 1;
    pthread_mutex_unlock(&cost_mu);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
    cost_count(PC_cuptiActivityDisable);
    pthread_mutex_lock(&cost_mu);
    if ((unsigned)kind < PROBE_COST_KINDS)
        cost_counts.kind_enabled[kind] = 0;
    pthread_mutex_unlock(&cost_mu);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
{
    (void)cbid, (void)enable;
    cost_count(PC_cuptiActivityEnableApi);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
    (void)cbid, (void)enable;
    cost_count(PC_cuptiActivityEnableApi);
    return CUPTI_SUCCESS;
}

/* records waiting for a flush: an external correlation (kernel 0) or a kernel */
struct cost_record {
    int kernel;
    uint32_t correlation_id;
    uint64_t external_id, start_ns;
};
static struct cost_record *cost_pending; /* under cost_mu */
static size_t cost_npending, cost_cap_pending;
static uint32_t cost_last_correlation;

static uint64_t cost_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the probes' clock (common/clock.c) */
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* one kernel launched inside the range of external_id */
static void cost_launch(uint64_t external_id)
{
    pthread_mutex_lock(&cost_mu);
    if (cost_counts.kind_enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] &&
        cost_counts.kind_enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION]) {
        if (cost_npending + 2 > cost_cap_pending) {
            size_t cap = cost_cap_pending ? 2 * cost_cap_pending : 1024;
            struct cost_record *v = realloc(cost_pending, cap * sizeof *v);
            if (v) {
                cost_pending = v;
                cost_cap_pending = cap;
            }
        }
        if (cost_npending + 2 <= cost_cap_pending) {
            const uint32_t cid = ++cost_last_correlation;
            cost_pending[cost_npending++] = (struct cost_record){0, cid, external_id, 0};
            cost_pending[cost_npending++] = (struct cost_record){1, cid, 0, cost_now_ns()};
            cost_counts.kernels++;
        }
    }
    pthread_mutex_unlock(&cost_mu);
}

CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                   uint64_t id)
{
    (void)kind;
    cost_count(PC_cuptiActivityPushExternalCorrelationId);
    cost_corr_depth++;
    cost_launch(id);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                  uint64_t *id)
{
    (void)kind;
    cost_count(PC_cuptiActivityPopExternalCorrelationId);
    if (id)
        *id = 0;
    if (cost_corr_depth == 0) {
        cost_misuse();
        return CUPTI_ERROR_QUEUE_EMPTY;
    }
    cost_corr_depth--;
    return CUPTI_SUCCESS;
}

static size_t cost_record_size(CUpti_ActivityKind kind)
{
    return kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ? sizeof(CUpti_ActivityKernel10)
                                                         : sizeof(CUpti_ActivityExternalCorrelation);
}

/* Move the waiting records that fit into buf (size bytes) in CUPTI's layout; the bytes used */
static size_t cost_fill(uint8_t *buf, size_t size)
{
    size_t used = 0, taken = 0;
    pthread_mutex_lock(&cost_mu);
    for (; taken < cost_npending; taken++) {
        const struct cost_record *r = &cost_pending[taken];
        const CUpti_ActivityKind kind = r->kernel ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                                                  : CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
        const size_t n = cost_record_size(kind);
        if (used + n > size)
            break;
        if (r->kernel) {
            CUpti_ActivityKernel10 k;
            memset(&k, 0, sizeof k);
            k.kind = kind;
            k.correlationId = r->correlation_id;
            k.start = r->start_ns;
            k.end = r->start_ns + 1000;
            k.streamId = 7;
            k.name = "probe_cost_kernel";
            memcpy(buf + used, &k, n);
        } else {
            CUpti_ActivityExternalCorrelation e;
            memset(&e, 0, sizeof e);
            e.kind = kind;
            e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
            e.externalId = r->external_id;
            e.correlationId = r->correlation_id;
            memcpy(buf + used, &e, n);
        }
        used += n;
    }
    memmove(cost_pending, cost_pending + taken, (cost_npending - taken) * sizeof *cost_pending);
    cost_npending -= taken;
    cost_counts.delivered += taken;
    pthread_mutex_unlock(&cost_mu);
    return used;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    cost_count(flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED ? PC_cuptiActivityFlushAllForced
                                                       : PC_cuptiActivityFlushAll);
    if (!cost_request || !cost_complete)
        return CUPTI_ERROR_INVALID_OPERATION;
    for (;;) {
        uint8_t *buf = NULL;
        size_t size = 0, max_records = 0;
        cost_request(&buf, &size, &max_records);
        if (!buf)
            return CUPTI_SUCCESS;
        const size_t valid = cost_fill(buf, size);
        cost_complete(NULL, 0, buf, size, valid); /* frees buf */
        pthread_mutex_lock(&cost_mu);
        const int more = valid > 0 && cost_npending > 0;
        pthread_mutex_unlock(&cost_mu);
        if (!more)
            return CUPTI_SUCCESS;
    }
}

CUptiResult cuptiActivityFlushPeriod(uint32_t ms)
{
    (void)ms;
    cost_count(PC_cuptiActivityFlushPeriod);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec)
{
    size_t at = 0;
    if (*rec)
        at = (size_t)((uint8_t *)*rec - buffer) + cost_record_size((*rec)->kind);
    if (at >= valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)(void *)(buffer + at);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped)
{
    (void)ctx, (void)stream;
    *dropped = 0;
    return CUPTI_SUCCESS;
}
