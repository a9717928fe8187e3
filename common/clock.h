/* clock.h — the project's one clock: CLOCK_MONOTONIC.
 *
 * Every host record of the probes, every CUPTI timestamp (cuptiActivityRegisterTimestampCallback),
 * the anchor of the CUDA-event rows, every deadline and every timing printed comes from
 * clock_now_ns(), so all of them can be compared.  probes/clock_offset.h puts the clocks of
 * several ranks (hosts) on rank 0's. */
#ifndef DDPPROF_CLOCK_H
#define DDPPROF_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC now, in nanoseconds.  Async-signal-safe, never fails. */
int64_t clock_now_ns(void);

/* the same in whole milliseconds (rounded down), for poll() deadlines */
int64_t clock_now_ms(void);

/* the same in seconds */
double clock_now_s(void);

/* sleep ms milliseconds (EINTR resumes the sleep) */
void clock_sleep_ms(int ms);

#ifdef __cplusplus
}
#endif
#endif
