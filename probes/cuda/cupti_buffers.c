/* cupti_buffers.c — CUPTI's activity-buffer manager: 4 MiB buffers handed to CUPTI on
 * request, completed buffers read record by record into struct activity_record and fed
 * to the activity processing (probes/activity.c), dropped records counted. */
#include "probes/cuda/cupti_internal.h"

#include <stdatomic.h>
#include <stdlib.h>

/* The record layouts of the CUPTI this is compiled against (CUDA 13: Kernel10,
 * Memcpy6, Memset4, Synchronization2). */
typedef CUpti_ActivityKernel10 cupti_kernel_t;
typedef CUpti_ActivityMemcpy6 cupti_memcpy_t;
typedef CUpti_ActivityMemset4 cupti_memset_t;
typedef CUpti_ActivitySynchronization2 cupti_sync_t;

/* activity.h mirrors these enums by value */
#define BUFFERS_SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " mirrored in activity.h")
BUFFERS_SAME(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, ACTIVITY_MEMCPY_HTOD);
BUFFERS_SAME(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, ACTIVITY_MEMCPY_DTOD);
BUFFERS_SAME(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, ACTIVITY_MEMCPY_PTOP);
BUFFERS_SAME(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
             ACTIVITY_SYNC_STREAM_SYNCHRONIZE);
BUFFERS_SAME(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
             ACTIVITY_SYNC_CONTEXT_SYNCHRONIZE);
BUFFERS_SAME(CUPTI_SYNCHRONIZATION_INVALID_VALUE, ACTIVITY_NO_STREAM);

static struct activity_proc *buffers_proc; /* set before the callbacks are registered */
static _Atomic uint64_t buffers_dropped, buffers_count;

int cupti_record_convert(const CUpti_Activity *rec, struct activity_record *out)
{
    *out = (struct activity_record){.kind = ACTIVITY_OTHER};
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const cupti_kernel_t *k = (const cupti_kernel_t *)rec;
        out->kind = ACTIVITY_KERNEL;
        out->correlation_id = k->correlationId;
        out->start_ns = k->start;
        out->end_ns = k->end;
        out->stream_id = k->streamId;
        out->name = k->name;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const cupti_memcpy_t *m = (const cupti_memcpy_t *)rec;
        out->kind = ACTIVITY_MEMCPY;
        out->correlation_id = m->correlationId;
        out->start_ns = m->start;
        out->end_ns = m->end;
        out->stream_id = m->streamId;
        out->bytes = m->bytes;
        out->subkind = m->copyKind;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const cupti_memset_t *m = (const cupti_memset_t *)rec;
        out->kind = ACTIVITY_MEMSET;
        out->correlation_id = m->correlationId;
        out->start_ns = m->start;
        out->end_ns = m->end;
        out->stream_id = m->streamId;
        out->bytes = m->bytes;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const cupti_sync_t *s = (const cupti_sync_t *)rec;
        out->kind = ACTIVITY_SYNC;
        out->correlation_id = s->correlationId;
        out->start_ns = s->start;
        out->end_ns = s->end;
        out->stream_id = s->streamId; /* may be ACTIVITY_NO_STREAM */
        out->subkind = (int)s->type;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)rec;
        out->kind = ACTIVITY_API;
        out->subkind = rec->kind == CUPTI_ACTIVITY_KIND_DRIVER ? ACTIVITY_API_DRIVER
                                                               : ACTIVITY_API_RUNTIME;
        out->cbid = a->cbid;
        out->correlation_id = a->correlationId;
        out->start_ns = a->start;
        out->end_ns = a->end;
        out->stream_id = ACTIVITY_NO_STREAM;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *e = (const CUpti_ActivityExternalCorrelation *)rec;
        if (e->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
            return 0; /* someone else's ids */
        out->kind = ACTIVITY_EXTERNAL_CORRELATION;
        out->correlation_id = e->correlationId;
        out->external_id = e->externalId;
        return 1;
    }
    default:
        return 0;
    }
}

static void CUPTIAPI buffers_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *p = NULL;
    if (posix_memalign(&p, 8, CUPTI_BUFFER_BYTES) != 0)
        p = NULL; /* CUPTI then drops records, which it counts */
    *buffer = p;
    *size = p ? CUPTI_BUFFER_BYTES : 0;
    *max_records = 0; /* as many as fit */
    if (p)
        atomic_fetch_add(&buffers_count, 1);
}

static void CUPTIAPI buffers_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                       size_t size, size_t valid)
{
    (void)size;
    CUpti_Activity *rec = NULL;
    while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        struct activity_record r;
        cupti_record_convert(rec, &r);
        activity_proc_add(buffers_proc, &r); /* ACTIVITY_OTHER is only counted */
    }
    activity_proc_end_batch(buffers_proc);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
        atomic_fetch_add(&buffers_dropped, (uint64_t)dropped);
    free(buffer);
}

CUptiResult cupti_buffers_register(struct activity_proc *ap)
{
    buffers_proc = ap;
    return cuptiActivityRegisterCallbacks(buffers_requested, buffers_completed);
}

uint64_t cupti_buffers_dropped(void)
{
    return atomic_load(&buffers_dropped);
}

uint64_t cupti_buffers_count(void)
{
    return atomic_load(&buffers_count);
}
