/* clock.c — CLOCK_MONOTONIC in nanoseconds, milliseconds and seconds, and a millisecond
 * sleep. */
#include "common/clock.h"

#include <errno.h>
#include <time.h>

int64_t clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* cannot fail for CLOCK_MONOTONIC on Linux */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t clock_now_ms(void) { return clock_now_ns() / 1000000; }

double clock_now_s(void) { return 1e-9 * (double)clock_now_ns(); }

void clock_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
