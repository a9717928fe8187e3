/* test_comm_poll.c — comm_poll_until, the bounded polling a non-blocking NCCL communicator
 * needs (init, finalize and every call that returns ncclInProgress), against a fake
 * asynchronous-error source: done at once, done after k asks, done after some time,
 * failing after k asks, and never done (must time out near the timeout, not hang, not
 * return early), plus a zero timeout (one ask) and an ask counter that sleeps rather than
 * spins. */
#include "comm/comm_poll.h"
#include "common/clock.h"
#include "testutil.h"

#include <stdio.h>

struct fake_source {
    long asks;
    long done_after;    /* asks that answer IN_PROGRESS before the final answer; <0: never */
    double done_at_s;   /* or: IN_PROGRESS until this clock_now_s() time (0: unused) */
    enum comm_poll_state final;
};

static enum comm_poll_state fake_state(void *ctx)
{
    struct fake_source *f = ctx;
    f->asks++;
    if (f->done_at_s > 0.0)
        return clock_now_s() >= f->done_at_s ? f->final : COMM_POLL_IN_PROGRESS;
    if (f->done_after < 0 || f->asks <= f->done_after)
        return COMM_POLL_IN_PROGRESS;
    return f->final;
}

int main(void)
{
    long asks = -1;
    struct fake_source f = {.done_after = 0, .final = COMM_POLL_DONE};
    CHECK(comm_poll_until(fake_state, &f, 1000, &asks) == COMM_POLL_DONE && asks == 1,
          "done at once: %ld asks", asks);

    f = (struct fake_source){.done_after = 5, .final = COMM_POLL_DONE};
    CHECK(comm_poll_until(fake_state, &f, 5000, &asks) == COMM_POLL_DONE && asks == 6,
          "done after 5 in-progress answers: %ld asks", asks);

    f = (struct fake_source){.done_after = 3, .final = COMM_POLL_FAILED};
    CHECK(comm_poll_until(fake_state, &f, 5000, &asks) == COMM_POLL_FAILED && asks == 4,
          "failure after 3 in-progress answers: %ld asks", asks);

    /* done after 150 ms of a 5 s timeout: seen within a sleep slice (10 ms) of it */
    double t0 = clock_now_s();
    f = (struct fake_source){.done_at_s = t0 + 0.150, .final = COMM_POLL_DONE};
    enum comm_poll_state st = comm_poll_until(fake_state, &f, 5000, &asks);
    double dt = clock_now_s() - t0;
    /* upper bound generous for a loaded CI machine: what matters is not waiting ~5 s */
    CHECK(st == COMM_POLL_DONE && dt >= 0.149 && dt < 1.0, "done at 150 ms: state %d after "
          "%.3f s", (int)st, dt);
    /* it sleeps: 150 ms in 1..10 ms slices is at most ~150 asks, a spin would be millions */
    CHECK(asks >= 2 && asks <= 200, "done at 150 ms took %ld asks (a spin, or no polling)",
          asks);

    /* never done: IN_PROGRESS once the timeout passed, not before it, and not much later */
    t0 = clock_now_s();
    f = (struct fake_source){.done_after = -1};
    st = comm_poll_until(fake_state, &f, 300, &asks);
    dt = clock_now_s() - t0;
    CHECK(st == COMM_POLL_IN_PROGRESS, "never done: state %d (must time out)", (int)st);
    CHECK(dt >= 0.299 && dt < 2.0, "never done, 300 ms timeout: returned after %.3f s", dt);
    CHECK(asks >= 2 && asks <= 400, "never done: %ld asks in 300 ms", asks);

    /* zero timeout: one ask, no sleep */
    f = (struct fake_source){.done_after = -1};
    CHECK(comm_poll_until(fake_state, &f, 0, &asks) == COMM_POLL_IN_PROGRESS && asks <= 2,
          "zero timeout: %ld asks", asks);
    /* a NULL ask counter is allowed */
    f = (struct fake_source){.done_after = 1, .final = COMM_POLL_DONE};
    CHECK(comm_poll_until(fake_state, &f, 1000, NULL) == COMM_POLL_DONE && f.asks == 2,
          "NULL asks: %ld asks", f.asks);
    return test_finish();
}
