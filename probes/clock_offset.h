/* clock_offset.h — the estimate of a rank's clock offset to rank 0.
 *
 * Ranks on other hosts have other monotonic clocks (common/clock.h); at start each rank
 * measures its offset to rank 0 with round trips through the store (the trainer does the
 * exchange) and this module turns the samples into one offset, as TRACE.md says: keep the
 * round trip with the smallest RTT, offset = remote - (send + recv) / 2. */
#ifndef DDPPROF_CLOCK_OFFSET_H
#define DDPPROF_CLOCK_OFFSET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One round trip: this rank read send_ns, asked rank 0 for its clock (remote_ns, on rank
 * 0's clock_now_ns), and read recv_ns when the answer came back. */
struct clock_sample {
    int64_t send_ns, remote_ns, recv_ns;
};

/* The estimate: add offset_ns to a time on this rank's clock to put it on rank 0's.
 * rtt_ns is the round trip of the sample used; |error| <= rtt_ns / 2 when the two
 * directions may be arbitrarily asymmetric. */
struct clock_offset {
    int64_t offset_ns, rtt_ns;
};

/* From n samples keep the one with the smallest round trip (the first of equals) and
 * compute offset = remote - (send + recv) / 2 (rounded toward -inf on odd sums).
 * Samples with recv_ns < send_ns are ignored.  0, or -1 with error_set when no sample
 * is usable.  Pure: no clock is read. */
int clock_offset_estimate(const struct clock_sample *samples, size_t n, struct clock_offset *out);

#ifdef __cplusplus
}
#endif
#endif
