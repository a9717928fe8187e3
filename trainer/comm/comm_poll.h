/* comm_poll.h — bounded polling of an asynchronous state, for transports whose library
 * reports "still in progress" instead of blocking (a non-blocking NCCL communicator:
 * ncclCommInitRankConfig with blocking = 0, ncclCommFinalize, and any call that returns
 * ncclInProgress, until ncclCommGetAsyncError says otherwise).
 *
 * Host logic only (no CUDA, no NCCL), so it is unit-tested with a fake state source. */
#ifndef DDPPROF_COMM_POLL_H
#define DDPPROF_COMM_POLL_H

#ifdef __cplusplus
extern "C" {
#endif

enum comm_poll_state {
    COMM_POLL_DONE = 0,        /* the operation completed successfully */
    COMM_POLL_IN_PROGRESS = 1, /* not yet: ask again later */
    COMM_POLL_FAILED = -1,     /* it failed (the source has said why, error_set or its own) */
};

/* Asks state(ctx) until it is not COMM_POLL_IN_PROGRESS or timeout_ms has passed since the
 * call, sleeping between asks (1 ms at first, growing to 10 ms, so a quick operation is
 * seen quickly and a slow one costs a few hundred asks a second at most).  state is asked
 * at least once, and once more after the deadline, so an operation that completed while
 * we slept is never reported as timed out.  Returns the last state: COMM_POLL_DONE,
 * COMM_POLL_FAILED, or COMM_POLL_IN_PROGRESS when the timeout passed (the caller names
 * what timed out and aborts it).  *asks (may be NULL) receives how many times state was
 * asked. */
enum comm_poll_state comm_poll_until(enum comm_poll_state (*state)(void *ctx), void *ctx,
                                     int timeout_ms, long *asks);

#ifdef __cplusplus
}
#endif
#endif
