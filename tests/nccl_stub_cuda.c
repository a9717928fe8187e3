/* nccl_stub_cuda.c — a test double of the CUDA runtime and of the CUDA backend, as far as
 * the NCCL comm (trainer/comm/cuda/comm_nccl.c) uses them, for tests/test_cuda_nccl_world.c
 * on a host without a GPU (nccl_stub.h).
 *
 * What it fakes: a stream is a host thread running what was queued on it in order --
 * host functions (cudaLaunchHostFunc, which is how the stub NCCL queues its collectives),
 * event records, waits for an event (cudaStreamWaitEvent: the latest record at the time of
 * the call, as CUDA) and memsets; cudaEventQuery / cudaStreamQuery say whether that point
 * has been reached; cudaMalloc is malloc (host memory stands in for device memory).
 * cudaStreamDestroy and cudaEventDestroy return at once and free what they free once the
 * queued work that uses it has run, as CUDA does.  The backend is a struct backend named
 * "cuda" with nothing in its slots but a compute stream (backend_cuda.h's four queries).
 *
 * What it does not: no device, no kernels, no memory copies between host and device, no
 * stream priorities (the range is CUDA's usual 0..-5 and ignored), no legacy default stream
 * (a NULL stream is refused), no sticky errors.  cuda_check.c, linked in for its CUDA and
 * NCCL checks, also names cuBLAS and cuDNN statuses; the comm makes no cuBLAS or cuDNN
 * call, so those four names are never asked for here. */
#include "nccl_stub.h"

#include "backend/backend.h"
#include "common/cuda_check.h"
#include "cuda/backend_cuda.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum host_op_kind { HOST_FN, HOST_RECORD, HOST_WAIT, HOST_MEMSET };

struct host_op {
    enum host_op_kind kind;
    cudaHostFn_t fn;
    void *arg;
    struct CUevent_st *ev;
    uint64_t gen; /* record: this record's number; wait: the record waited for */
    void *ptr;
    int value;
    size_t bytes;
    struct host_op *next;
};

struct CUstream_st {
    struct host_op *head, *tail;
    int busy;    /* an op popped and running */
    int closing; /* cudaStreamDestroy was called: the thread frees the stream once drained */
};

struct CUevent_st {
    uint64_t recorded;  /* records issued */
    uint64_t completed; /* the latest record a stream has reached */
    int refs;           /* queued ops that name it */
    int destroyed;
};

/* One lock and one condition variable for every stream and event of the process: a few
 * threads, and a wait for an event on one stream is woken by a record on another. */
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t host_cv = PTHREAD_COND_INITIALIZER;

static void event_unref_locked(struct CUevent_st *e)
{
    if (e && --e->refs == 0 && e->destroyed)
        free(e);
}

static int op_ready_locked(const struct host_op *op)
{
    return op->kind != HOST_WAIT || op->ev->completed >= op->gen;
}

static void *stream_thread(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&host_mu);
    for (;;) {
        while (!(s->head && op_ready_locked(s->head)) && !(s->closing && !s->head))
            pthread_cond_wait(&host_cv, &host_mu);
        if (!s->head)
            break; /* closing and drained */
        struct host_op *op = s->head;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->busy = 1;
        pthread_mutex_unlock(&host_mu);
        if (op->kind == HOST_FN)
            op->fn(op->arg);
        else if (op->kind == HOST_MEMSET)
            memset(op->ptr, op->value, op->bytes);
        pthread_mutex_lock(&host_mu);
        if (op->kind == HOST_RECORD && op->gen > op->ev->completed)
            op->ev->completed = op->gen;
        event_unref_locked(op->ev);
        s->busy = 0;
        free(op);
        pthread_cond_broadcast(&host_cv);
    }
    pthread_mutex_unlock(&host_mu);
    free(s);
    return NULL;
}

static cudaError_t stream_push(struct CUstream_st *s, struct host_op *op)
{
    if (!s) {
        free(op);
        return cudaErrorInvalidResourceHandle; /* no legacy default stream here */
    }
    pthread_mutex_lock(&host_mu);
    if (op->ev)
        op->ev->refs++;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_broadcast(&host_cv);
    pthread_mutex_unlock(&host_mu);
    return cudaSuccess;
}

static struct host_op *op_new(enum host_op_kind kind)
{
    struct host_op *op = calloc(1, sizeof *op);
    if (op)
        op->kind = kind;
    return op;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    (void)flags;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return cudaErrorMemoryAllocation;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    const int rc = pthread_create(&t, &attr, stream_thread, s);
    pthread_attr_destroy(&attr);
    if (rc) {
        free(s);
        return cudaErrorMemoryAllocation;
    }
    *pStream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    (void)priority;
    return cudaStreamCreateWithFlags(pStream, flags);
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    *leastPriority = 0;
    *greatestPriority = -5;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!stream)
        return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&host_mu);
    stream->closing = 1;
    pthread_cond_broadcast(&host_cv);
    pthread_mutex_unlock(&host_mu);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    if (!stream)
        return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&host_mu);
    const int idle = !stream->head && !stream->busy;
    pthread_mutex_unlock(&host_mu);
    return idle ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    struct host_op *op = op_new(HOST_FN);
    if (!op)
        return cudaErrorMemoryAllocation;
    op->fn = fn;
    op->arg = userData;
    return stream_push(stream, op);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    (void)flags;
    *event = calloc(1, sizeof **event);
    return *event ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    if (!event)
        return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&host_mu);
    event->destroyed = 1;
    if (event->refs == 0)
        free(event);
    pthread_mutex_unlock(&host_mu);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    if (!event)
        return cudaErrorInvalidResourceHandle;
    struct host_op *op = op_new(HOST_RECORD);
    if (!op)
        return cudaErrorMemoryAllocation;
    pthread_mutex_lock(&host_mu);
    op->gen = ++event->recorded;
    pthread_mutex_unlock(&host_mu);
    op->ev = event;
    return stream_push(stream, op);
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    if (!event)
        return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&host_mu);
    const int done = event->completed >= event->recorded;
    pthread_mutex_unlock(&host_mu);
    return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    (void)flags;
    if (!event)
        return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&host_mu);
    const uint64_t gen = event->recorded;
    const int done = event->completed >= gen;
    pthread_mutex_unlock(&host_mu);
    if (done) /* nothing to wait for (never recorded, or already reached) */
        return stream ? cudaSuccess : cudaErrorInvalidResourceHandle;
    struct host_op *op = op_new(HOST_WAIT);
    if (!op)
        return cudaErrorMemoryAllocation;
    op->ev = event;
    op->gen = gen;
    return stream_push(stream, op);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    struct host_op *op = op_new(HOST_MEMSET);
    if (!op)
        return cudaErrorMemoryAllocation;
    op->ptr = devPtr;
    op->value = value;
    op->bytes = count;
    return stream_push(stream, op);
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    *devPtr = malloc(size ? size : 1);
    return *devPtr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *devPtr)
{
    free(devPtr);
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }

const char *cudaGetErrorName(cudaError_t error)
{
    switch (error) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorNotReady:
        return "cudaErrorNotReady";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidResourceHandle:
        return "cudaErrorInvalidResourceHandle";
    default:
        return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t error)
{
    switch (error) {
    case cudaSuccess:
        return "no error";
    case cudaErrorNotReady:
        return "device not ready";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle (the host stand-in has no legacy default stream)";
    default:
        return "unknown error";
    }
}

/* never asked for by the NCCL comm (see the top of the file) */
const char *cublasGetStatusName(cublasStatus_t status)
{
    (void)status;
    return "cuBLAS status (no cuBLAS in this test)";
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    (void)status;
    return "no cuBLAS in this test";
}

const char *cudnnGetErrorString(cudnnStatus_t status)
{
    (void)status;
    return "no cuDNN in this test";
}

void cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (max_size)
        message[0] = '\0';
}

/* ------------------------------------------------------------------ the CUDA backend */

static struct backend host_backend = {.name = "cuda"};
static cudaStream_t host_compute;

struct backend *cuda_host_backend(void)
{
    if (!host_compute && cudaStreamCreateWithFlags(&host_compute, cudaStreamNonBlocking))
        return NULL;
    return &host_backend;
}

int backend_cuda_is(const struct backend *be) { return be == &host_backend && host_compute; }

int backend_cuda_device(const struct backend *be)
{
    (void)be;
    return 0;
}

cudaStream_t backend_cuda_stream(const struct backend *be)
{
    (void)be;
    return host_compute;
}

int backend_cuda_bind(const struct backend *be)
{
    (void)be;
    return 0;
}
