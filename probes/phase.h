/* phase.h — the phases a probe range can have, and everything fixed per phase.
 *
 * One table shared by the trace writer (phase column, lane), NVTX (registered name,
 * colour, category) and CUPTI attribution (external correlation ids), so a phase looks
 * the same in the trace, in Nsight Systems and in the kernel attribution.  The names are
 * the `phase` column values of probes/TRACE.md. */
#ifndef DDPPROF_PHASE_H
#define DDPPROF_PHASE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum probe_phase {
    PROBE_STEP = 0,   /* one optimizer step: contains data, forward, backward, optimizer */
    PROBE_DATA,       /* loading / copying a batch */
    PROBE_FORWARD,
    PROBE_BACKWARD,
    PROBE_ALLREDUCE,  /* one DDP bucket's all-reduce (probe_bucket_*), never pushed */
    PROBE_OPTIMIZER,
    PROBE_EVAL,
    PROBE_BARRIER,
    PROBE_SETUP,      /* outside training steps; also CUPTI activity launched outside any range */
    PROBE_PHASE_COUNT
};

/* "step", "data", ... (TRACE.md's phase column); "?" for an out-of-range value. */
const char *phase_name(enum probe_phase ph);

/* The phase whose name is `name`, or -1. */
int phase_from_name(const char *name);

/* NVTX colour of the phase, 0xAARRGGBB (opaque). */
uint32_t phase_color(enum probe_phase ph);

/* NVTX category of the phase: phase + 1 (category 0 means "none" in NVTX). */
uint32_t phase_category(enum probe_phase ph);

/* Trace lane (TRACE.md's stream column) of the phase's host and device rows:
 * 1 for allreduce, 2 for data, 0 for everything else. */
int phase_stream(enum probe_phase ph);

#ifdef __cplusplus
}
#endif
#endif
