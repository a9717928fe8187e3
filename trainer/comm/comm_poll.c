/* comm_poll.c — bounded polling of an asynchronous state (see comm_poll.h). */
#include "comm/comm_poll.h"

#include <stdint.h>
#include <time.h>

static int64_t poll_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

enum comm_poll_state comm_poll_until(enum comm_poll_state (*state)(void *ctx), void *ctx,
                                     int timeout_ms, long *asks)
{
    const int64_t budget_ns = (int64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000LL;
    const int64_t deadline = poll_now_ns() + budget_ns;
    long n = 0;
    long sleep_ns = 1000000L; /* 1 ms, doubling up to 10 ms */
    enum comm_poll_state st;
    for (;;) {
        const int late = poll_now_ns() >= deadline; /* read before asking: see the contract */
        st = state(ctx);
        n++;
        if (st != COMM_POLL_IN_PROGRESS || late)
            break;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        sleep_ns = sleep_ns * 2 > 10000000L ? 10000000L : sleep_ns * 2;
    }
    if (asks)
        *asks = n;
    return st;
}
