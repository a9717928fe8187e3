/* gpu_module.c — the one symbol libddpprof_probes_cuda.so exports: its table
 * (gpu_module.h).  Everything else in the module is hidden (C visibility preset). */
#include "probes/cuda/gpu_module.h"

__attribute__((visibility("default"))) const struct gpu_module ddpprof_probes_cuda_module = {
    .abi = GPU_MODULE_ABI,
    .cupti_start = cupti_tracer_start,
    .cupti_push = cupti_tracer_push,
    .cupti_pop = cupti_tracer_pop,
    .cupti_flush = cupti_tracer_flush,
    .cupti_dropped = cupti_tracer_dropped,
    .cupti_stop = cupti_tracer_stop,
    .timer_create = event_timer_create,
    .timer_begin = event_timer_begin,
    .timer_end = event_timer_end,
    .timer_poll = event_timer_poll,
    .timer_drain = event_timer_drain,
    .timer_dropped = event_timer_dropped,
    .timer_destroy = event_timer_destroy,
};
