/* phase.h — the phases a probe range can have, and everything fixed per phase.
 *
 * One table shared by the trace writer (phase column, lane), NVTX (registered name,
 * colour, category) and CUPTI attribution (external correlation ids), so a phase looks
 * the same in the trace, in Nsight Systems and in the kernel attribution.  The phases and
 * their names are those of the trace's `phase` column (probes/trace_format.h). */
#ifndef DDPPROF_PHASE_H
#define DDPPROF_PHASE_H

#include <stdint.h>

#include "probes/trace_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PROBE_STEP, PROBE_DATA, ... PROBE_SETUP: the phases of probes/trace_format.h, same
 * order and values (what each one covers is said there). */
#define PROBE_PHASE_ENUM_(id, name) PROBE_##id = TRACE_PHASE_##id,
enum probe_phase { TRACE_PHASES(PROBE_PHASE_ENUM_) PROBE_PHASE_COUNT = TRACE_PHASE_COUNT };
#undef PROBE_PHASE_ENUM_

/* "step", "data", ... (TRACE.md's phase column); "?" for an out-of-range value. */
const char *phase_name(enum probe_phase ph);

/* The phase whose name is `name`, or -1. */
int phase_from_name(const char *name);

/* NVTX colour of the phase, 0xAARRGGBB (opaque). */
uint32_t phase_color(enum probe_phase ph);

/* NVTX category of the phase: phase + 1 (category 0 means "none" in NVTX). */
uint32_t phase_category(enum probe_phase ph);

/* Trace lane (enum trace_lane, the stream column) of the phase's host and device rows:
 * 1 for the collectives (allreduce, comm.*, barrier), 2 for data, 0 for everything else. */
int phase_stream(enum probe_phase ph);

#ifdef __cplusplus
}
#endif
#endif
