/* event_anchor.h — the arithmetic that puts CUDA event times on the host clock (pure, no
 * CUDA: probes/cuda/event_timer.c runs it, tests/test_probes_clock.c drives it with a
 * simulated drifting device clock).
 *
 * An anchor is an event whose host time is known within err_ns.  A later event's host time
 * is the anchor's plus the device's elapsed time between them — which is off by the
 * device-vs-host clock drift (tens of ppm: tens of microseconds a second).  So a new anchor
 * must not take its host time from the device's elapsed time alone: its host time is
 * bracketed by the host clock — the event completed at or after the host began recording
 * it (recorded_ns) and at or before the host saw it complete (observed_ns) — and the
 * elapsed-time estimate is clamped into that bracket.  Clamping into an interval that holds
 * the truth never moves an estimate away from it, so a re-anchor never makes the error
 * worse, and a tight bracket caps it at the bracket's width whatever the drift. */
#ifndef DDPPROF_EVENT_ANCHOR_H
#define DDPPROF_EVENT_ANCHOR_H

#include <math.h>
#include <stdint.h>

struct event_anchor {
    int64_t host_ns; /* host time of the anchor event */
    int64_t err_ns;  /* bound on |host_ns - truth| */
};

/* Host time of an event elapsed_ms (device clock, cudaEventElapsedTime) after the anchor. */
static inline int64_t event_anchor_map(const struct event_anchor *a, double elapsed_ms)
{
    return a->host_ns + (int64_t)llround(elapsed_ms * 1e6);
}

/* The anchor for an event elapsed_ms after a, recorded on the stream by a host call that
 * began at recorded_ns and seen complete (cudaEventQuery) at observed_ns: the elapsed-time
 * estimate clamped into [recorded_ns, observed_ns], with the error bound that bracket
 * gives.  A bracket that cannot hold (observed before recorded) is ignored: the estimate
 * keeps a's bound, which then leaves the drift since a uncounted. */
static inline struct event_anchor event_anchor_next(const struct event_anchor *a,
                                                    double elapsed_ms, int64_t recorded_ns,
                                                    int64_t observed_ns)
{
    struct event_anchor n = {event_anchor_map(a, elapsed_ms), a->err_ns};
    if (observed_ns < recorded_ns)
        return n;
    if (n.host_ns < recorded_ns)
        n.host_ns = recorded_ns;
    else if (n.host_ns > observed_ns)
        n.host_ns = observed_ns;
    int64_t below = n.host_ns - recorded_ns, above = observed_ns - n.host_ns;
    n.err_ns = below > above ? below : above;
    return n;
}

#endif
