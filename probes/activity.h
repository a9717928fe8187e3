/* activity.h — GPU activity records -> attributed trace rows (CUPTI's record processing).
 *
 * probes/cuda/ copies the few fields it needs from each CUPTI activity record into a
 * struct activity_record (no CUDA headers here, so this is tested on synthetic records,
 * as kineto does) and feeds them in the order CUPTI delivers them.  External-correlation
 * records fill the correlation map; kernels, memcpys, memsets and synchronizations become
 * rows (clock cupti, kind kernel/memcpy/memset/sync, stream = CUDA stream id) attributed
 * to the phase, step, epoch and bucket of the probe range that launched them.
 *
 * Runtime and driver API records only count (stats): CUPTI emits the external-correlation
 * record of a call only along with the call's own record, which is why they are enabled.
 *
 * Records may arrive before their correlation record (CUPTI fills buffers per context
 * and stream).  Such a record waits (its name copied) and is retried at the end of every
 * batch (activity_proc_end_batch, once per completed CUPTI buffer); after
 * ACTIVITY_MAX_WAIT_BATCHES batches, when ACTIVITY_MAX_WAITING records wait, or at
 * activity_proc_flush, it is written unattributed: phase setup, step 0, epoch 0, bucket
 * -1 (work launched outside every probe range).  Thread-safe (a mutex): CUPTI may
 * complete buffers on its own thread. */
#ifndef DDPPROF_ACTIVITY_H
#define DDPPROF_ACTIVITY_H

#include "probes/trace_writer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum activity_kind {
    ACTIVITY_KERNEL = 0,
    ACTIVITY_MEMCPY,
    ACTIVITY_MEMSET,
    ACTIVITY_SYNC,
    ACTIVITY_EXTERNAL_CORRELATION,
    ACTIVITY_API,  /* a runtime or driver API call: counted, not written */
    ACTIVITY_OTHER /* counted, not written */
};

/* ACTIVITY_API's subkind: which API the call belongs to */
enum activity_api_domain { ACTIVITY_API_RUNTIME = 1, ACTIVITY_API_DRIVER = 2 };

/* Mirrors of CUpti_ActivityMemcpyKind and CUpti_ActivitySynchronizationType (same values;
 * probes/cuda checks that at compile time). */
enum activity_memcpy_kind {
    ACTIVITY_MEMCPY_UNKNOWN = 0,
    ACTIVITY_MEMCPY_HTOD = 1,
    ACTIVITY_MEMCPY_DTOH = 2,
    ACTIVITY_MEMCPY_HTOA = 3,
    ACTIVITY_MEMCPY_ATOH = 4,
    ACTIVITY_MEMCPY_ATOA = 5,
    ACTIVITY_MEMCPY_ATOD = 6,
    ACTIVITY_MEMCPY_DTOA = 7,
    ACTIVITY_MEMCPY_DTOD = 8,
    ACTIVITY_MEMCPY_HTOH = 9,
    ACTIVITY_MEMCPY_PTOP = 10
};
enum activity_sync_type {
    ACTIVITY_SYNC_UNKNOWN = 0,
    ACTIVITY_SYNC_EVENT_SYNCHRONIZE = 1,
    ACTIVITY_SYNC_STREAM_WAIT_EVENT = 2,
    ACTIVITY_SYNC_STREAM_SYNCHRONIZE = 3,
    ACTIVITY_SYNC_CONTEXT_SYNCHRONIZE = 4
};

#define ACTIVITY_NO_STREAM 0xFFFFFFFFu /* CUPTI's "invalid" stream id (context syncs) */

struct activity_record {
    enum activity_kind kind;
    uint32_t correlation_id;  /* CUPTI correlation id of the launching API call (0: none) */
    uint64_t start_ns, end_ns;
    uint32_t stream_id;       /* ACTIVITY_NO_STREAM when none: written as -1 */
    uint64_t bytes;           /* memcpy, memset */
    int subkind;              /* memcpy: activity_memcpy_kind; sync: activity_sync_type;
                                 api: activity_api_domain */
    uint32_t cbid;            /* api: the call's CUPTI callback id (cupti_*_cbid.h) */
    const char *name;         /* kernel name, borrowed for the call (copied if it waits) */
    uint64_t external_id;     /* ACTIVITY_EXTERNAL_CORRELATION: our id for correlation_id */
};

#define ACTIVITY_MAX_WAITING 4096
#define ACTIVITY_MAX_WAIT_BATCHES 2
#define ACTIVITY_NAME_MAX 512 /* a waiting record's copied name is cut here */

struct activity_stats {
    uint64_t records;      /* every record fed in */
    uint64_t rows;         /* rows emitted */
    uint64_t attributed;   /* rows with the range that launched them */
    uint64_t unattributed; /* rows written as phase setup */
    uint64_t api_runtime;  /* runtime API calls (not written) */
    uint64_t api_driver;   /* driver API calls (not written): NCCL's, cuDNN's, cuBLAS's launches */
    uint64_t other;        /* records of kinds we do not write */
};

struct activity_proc;

/* Rows go to emit(ctx, row) with rank set.  NULL + error_set on out of memory. */
struct activity_proc *activity_proc_create(int rank, trace_emit_fn emit, void *ctx);

/* Feed one record (r and r->name are only read during the call). */
void activity_proc_add(struct activity_proc *ap, const struct activity_record *r);

/* A batch (one CUPTI buffer) ended: retry the waiting records, write the too-old ones. */
void activity_proc_end_batch(struct activity_proc *ap);

/* Write every waiting record now (resolved if possible, else unattributed). */
void activity_proc_flush(struct activity_proc *ap);

void activity_proc_stats(struct activity_proc *ap, struct activity_stats *out);

/* Frees ap without flushing (ap may be NULL). */
void activity_proc_destroy(struct activity_proc *ap);

/* "memcpy HtoD", ...; "cudaStreamSynchronize", ...: the row names used for memcpy and sync. */
const char *activity_memcpy_name(int memcpy_kind);
const char *activity_sync_name(int sync_type);

#ifdef __cplusplus
}
#endif
#endif
