/* clock_offset.c — the min-RTT clock offset estimate (see clock_offset.h). */
#include "probes/clock_offset.h"

#include "common/error.h"

/* floor((a + b) / 2) without overflowing for any two int64 values */
static int64_t clock_midpoint(int64_t a, int64_t b)
{
    return (a >> 1) + (b >> 1) + (a & b & 1);
}

int clock_offset_estimate(const struct clock_sample *samples, size_t n, struct clock_offset *out)
{
    const struct clock_sample *best = NULL;
    int64_t best_rtt = 0;
    for (size_t i = 0; i < n; i++) {
        const struct clock_sample *s = &samples[i];
        if (s->recv_ns < s->send_ns)
            continue;
        int64_t rtt = s->recv_ns - s->send_ns;
        if (!best || rtt < best_rtt) {
            best = s;
            best_rtt = rtt;
        }
    }
    if (!best)
        return error_set("clock offset: none of the %zu round-trip samples is usable "
                         "(each needs recv_ns >= send_ns): repeat the exchange", n);
    out->offset_ns = best->remote_ns - clock_midpoint(best->send_ns, best->recv_ns);
    out->rtt_ns = best_rtt;
    return 0;
}
