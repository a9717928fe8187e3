/* probe_cost_cuda.h — what tests/probe_cost_cuda.c counts (the CUDA runtime and CUPTI
 * calls of the probes' GPU code), shared with tests/test_probe_cost.c.  No CUDA headers:
 * the test reads the counts through dlsym on the loaded module. */
#ifndef DDPPROF_TEST_PROBE_COST_CUDA_H
#define DDPPROF_TEST_PROBE_COST_CUDA_H

#include <stdint.h>

/* X(id, name): every entry point counted, CUDA runtime first (PC_FIRST_CUPTI: CUPTI's) */
#define PROBE_COST_CALL_LIST(X)                                                              \
    X(PC_cudaGetDeviceCount, "cudaGetDeviceCount")                                           \
    X(PC_cudaEventCreate, "cudaEventCreate")                                                 \
    X(PC_cudaEventDestroy, "cudaEventDestroy")                                               \
    X(PC_cudaEventRecord, "cudaEventRecord")                                                 \
    X(PC_cudaEventQuery, "cudaEventQuery")                                                   \
    X(PC_cudaEventSynchronize, "cudaEventSynchronize")                                       \
    X(PC_cudaEventElapsedTime, "cudaEventElapsedTime")                                       \
    X(PC_cudaStreamQuery, "cudaStreamQuery")                                                 \
    X(PC_cudaStreamSynchronize, "cudaStreamSynchronize")                                     \
    X(PC_cuptiSubscribe, "cuptiSubscribe")                                                   \
    X(PC_cuptiUnsubscribe, "cuptiUnsubscribe")                                               \
    X(PC_cuptiEnableCallback, "cuptiEnableCallback")                                         \
    X(PC_cuptiActivityRegisterTimestampCallback, "cuptiActivityRegisterTimestampCallback")   \
    X(PC_cuptiActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks")                   \
    X(PC_cuptiActivityEnable, "cuptiActivityEnable")                                         \
    X(PC_cuptiActivityDisable, "cuptiActivityDisable")                                       \
    X(PC_cuptiActivityEnableApi, "cuptiActivityEnable{Driver,Runtime}Api")                   \
    X(PC_cuptiActivityPushExternalCorrelationId, "cuptiActivityPushExternalCorrelationId")   \
    X(PC_cuptiActivityPopExternalCorrelationId, "cuptiActivityPopExternalCorrelationId")     \
    X(PC_cuptiActivityFlushAll, "cuptiActivityFlushAll(0)")                                  \
    X(PC_cuptiActivityFlushAllForced, "cuptiActivityFlushAll(FORCED)")                       \
    X(PC_cuptiActivityFlushPeriod, "cuptiActivityFlushPeriod")

enum probe_cost_call {
#define PC_ENUM(id, name) id,
    PROBE_COST_CALL_LIST(PC_ENUM)
#undef PC_ENUM
    PROBE_COST_CALLS
};
#define PC_FIRST_CUPTI PC_cuptiSubscribe

#define PROBE_COST_KINDS 64 /* CUpti_ActivityKind values tracked (all of CUDA 13's fit) */

struct probe_cost_counts {
    uint64_t calls[2][PROBE_COST_CALLS]; /* [0]: the marked (training) thread, [1]: others */
    int kind_enabled[PROBE_COST_KINDS];  /* CUpti_ActivityKind enabled now */
    uint64_t misuse;                     /* pops of an empty correlation stack */
    uint64_t kernels;                    /* synthetic kernels launched (one per push) */
    uint64_t delivered;                  /* records handed to the buffer callbacks */
};

/* the module's entry points (dlsym): mark the calling thread as the training thread; read
 * the counts so far; an entry point's name */
typedef void (*probe_cost_mark_thread_fn)(void);
typedef void (*probe_cost_read_fn)(struct probe_cost_counts *out);
typedef const char *(*probe_cost_call_name_fn)(int call);

#endif
