/* cupti_clock.c — CUPTI timestamps on the probes' clock.
 *
 * CUPTI's default Linux clock is CLOCK_REALTIME; registering clock_now_ns makes every
 * activity timestamp CLOCK_MONOTONIC nanoseconds, the clock of the host rows, so cupti
 * rows need no conversion (TRACE.md: clock cupti is the same clock as host).  Must be
 * registered before any activity kind is enabled. */
#include "probes/cuda/cupti_internal.h"

#include "common/clock.h"

static uint64_t CUPTIAPI cupti_clock_now(void)
{
    return (uint64_t)clock_now_ns();
}

CUptiResult cupti_clock_register(void)
{
    return cuptiActivityRegisterTimestampCallback(cupti_clock_now);
}
