/* gpu_module.h — the table libddpprof_probes_cuda.so hands the probes' loader
 * (gpu_loader.c): every function of probes/gpu.h, each the module's function of the same
 * name (cupti_tracer.c, event_timer.c).  Both sides are compiled from this header in one
 * build; abi changes with the table, so a module left over from another build is refused
 * in one line instead of called through the wrong slots. */
#ifndef DDPPROF_GPU_MODULE_H
#define DDPPROF_GPU_MODULE_H

#include "probes/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_MODULE_FILE "libddpprof_probes_cuda.so" /* probes/CMakeLists.txt builds it */
#define GPU_MODULE_TABLE "ddpprof_probes_cuda_module"
#define GPU_MODULE_ABI 1

struct gpu_module {
    int abi; /* GPU_MODULE_ABI */
    struct cupti_tracer *(*cupti_start)(struct activity_proc *ap, char *why, size_t why_cap);
    void (*cupti_push)(struct cupti_tracer *t, uint64_t external_id);
    void (*cupti_pop)(struct cupti_tracer *t);
    int (*cupti_flush)(struct cupti_tracer *t);
    uint64_t (*cupti_dropped)(const struct cupti_tracer *t);
    void (*cupti_stop)(struct cupti_tracer *t);
    struct event_timer *(*timer_create)(void *stream);
    int (*timer_begin)(struct event_timer *t);
    void (*timer_end)(struct event_timer *t, int slot, const struct trace_row *row);
    void (*timer_poll)(struct event_timer *t, trace_emit_fn emit, void *ctx);
    void (*timer_drain)(struct event_timer *t, trace_emit_fn emit, void *ctx);
    uint64_t (*timer_dropped)(const struct event_timer *t);
    void (*timer_destroy)(struct event_timer *t);
};

#ifdef __cplusplus
}
#endif
#endif
