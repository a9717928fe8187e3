/* cupti_internal.h — what the probes/cuda/cupti_*.c files share (CUDA builds only).
 *
 * The split follows kineto: cupti_buffers.c (activity-buffer manager and record
 * conversion), cupti_callbacks.c (callback subscription and dispatch), cupti_clock.c
 * (CUPTI timestamps on the probes' clock), cupti_tracer.c (start/stop, correlation ids). */
#ifndef DDPPROF_CUPTI_INTERNAL_H
#define DDPPROF_CUPTI_INTERNAL_H

#include "probes/activity.h"

#include <cupti.h>
#include <stddef.h>
#include <stdint.h>

#define CUPTI_BUFFER_BYTES (4u << 20) /* per activity buffer */

/* The activity kinds cupti_tracer_start enables, in order (DRIVER among them: kernels
 * that NCCL, cuDNN and cuBLAS launch through the driver API are correlated only through
 * the driver call's record), and the driver and runtime calls whose records it switches
 * off again (queries that launch nothing). */
extern const CUpti_ActivityKind cupti_tracer_kinds[];
extern const size_t cupti_tracer_nkinds;
extern const CUpti_CallbackId cupti_tracer_quiet_driver[], cupti_tracer_quiet_runtime[];
extern const size_t cupti_tracer_nquiet_driver, cupti_tracer_nquiet_runtime;

/* One line for a CUPTI status: "CUPTI_ERROR_...: text". */
const char *cupti_result_text(CUptiResult r);

/* Register the buffer callbacks; completed buffers go to ap.  CUPTI result. */
CUptiResult cupti_buffers_register(struct activity_proc *ap);
/* Records dropped so far, buffers handed out so far. */
uint64_t cupti_buffers_dropped(void);
uint64_t cupti_buffers_count(void);

/* Copy the fields the probes use from one CUPTI record; 0 for kinds not written
 * (kind set to ACTIVITY_OTHER). */
int cupti_record_convert(const CUpti_Activity *rec, struct activity_record *out);

/* Subscribe to the callbacks the probes dispatch (resource: contexts); CUPTI result
 * (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED when another tool holds CUPTI). */
CUptiResult cupti_callbacks_subscribe(void);
void cupti_callbacks_unsubscribe(void);

/* Make CUPTI timestamp records with clock_now_ns. */
CUptiResult cupti_clock_register(void);

#endif
