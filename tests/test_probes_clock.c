/* test_probes_clock.c — the probes' clock and the min-RTT clock offset estimate
 * (probes/clock.c) on synthetic round trips.
 *
 * A simulated remote clock runs at a known offset from ours; round trips with random,
 * asymmetric one-way delays give samples; the estimate must pick the tightest round trip,
 * compute remote - (send + recv) / 2 exactly, and land within rtt / 2 of the true offset.
 * Unusable samples are skipped; no usable sample is an error.
 *
 * The CUDA event timer's anchor arithmetic (probes/event_anchor.h): with a simulated device
 * clock drifting 50 ppm against the host over 10 s and a re-anchor a second (brackets as
 * the timer gets them: tight when an idle stream's anchor was seen within the short look,
 * a step wide otherwise), every device row mapped to host time stays within 160 us of the
 * truth — where taking each new anchor's host time from the device's elapsed time alone
 * (the old arithmetic) drifts 500 us by the end. */
#include "common/clock.h"
#include "probes/clock_offset.h"
#include "probes/event_anchor.h"
#include "common/error.h"
#include "testutil.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

static void test_now(void)
{
    int64_t a = clock_now_ns();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t direct = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    int64_t b = clock_now_ns();
    CHECK(a <= direct && direct <= b, "clock_now_ns is not CLOCK_MONOTONIC: %lld %lld %lld",
          (long long)a, (long long)direct, (long long)b);
    int monotonic = 1;
    int64_t prev = clock_now_ns();
    for (int i = 0; i < 100000; i++) {
        int64_t t = clock_now_ns();
        monotonic &= t >= prev;
        prev = t;
    }
    CHECK(monotonic, "clock_now_ns went backwards");
}

static void test_exact(void)
{
    /* hand-made: the second sample has the smallest RTT (4) */
    struct clock_sample s[] = {
        {1000, 5000, 1010},  /* rtt 10 */
        {2000, 6003, 2004},  /* rtt 4: offset = 6003 - 2002 = 4001 */
        {3000, 7000, 3004},  /* rtt 4 too: a later equal one is not taken */
        {4000, 9999, 3999},  /* recv < send: ignored */
    };
    struct clock_offset o = {0, 0};
    CHECK(clock_offset_estimate(s, 4, &o) == 0, "estimate: %s", error_get());
    CHECK(o.offset_ns == 4001 && o.rtt_ns == 4, "offset %lld rtt %lld", (long long)o.offset_ns,
          (long long)o.rtt_ns);

    /* odd send + recv rounds toward -inf: 7 - floor((2 + 5) / 2) = 4; negative values too */
    struct clock_sample odd[] = {{2, 7, 5}};
    clock_offset_estimate(odd, 1, &o);
    CHECK(o.offset_ns == 4 && o.rtt_ns == 3, "odd: offset %lld", (long long)o.offset_ns);
    struct clock_sample neg[] = {{-5, 0, -2}}; /* floor(-3.5) = -4 */
    clock_offset_estimate(neg, 1, &o);
    CHECK(o.offset_ns == 4, "negative: offset %lld", (long long)o.offset_ns);

    /* near the int64 limits the midpoint must not overflow */
    struct clock_sample big[] = {{INT64_MAX - 10, INT64_MAX - 100, INT64_MAX - 2}};
    clock_offset_estimate(big, 1, &o);
    CHECK(o.offset_ns == -94 && o.rtt_ns == 8, "big: offset %lld", (long long)o.offset_ns);

    /* nothing usable */
    struct clock_sample bad[] = {{10, 0, 9}};
    error_clear();
    CHECK(clock_offset_estimate(bad, 1, &o) == -1, "all samples unusable");
    CHECK(strstr(error_get(), "round-trip") != NULL, "error says why: %s", error_get());
    CHECK(clock_offset_estimate(NULL, 0, &o) == -1, "no samples");
}

/* a remote clock at +offset, one-way delays uniform in [base, base + spread) each way */
static void test_simulated(void)
{
    uint64_t seed = 12345;
    const int64_t true_offsets[] = {0, 1234567, -987654321012ll, 42};
    for (int k = 0; k < 4; k++) {
        int64_t off = true_offsets[k];
        struct clock_sample s[16];
        int64_t t = 1000000000ll * (k + 1);
        int64_t min_rtt = INT64_MAX;
        for (int i = 0; i < 16; i++) {
            int64_t up = 20000 + (int64_t)(test_uniform(&seed) * 200000);
            int64_t down = 20000 + (int64_t)(test_uniform(&seed) * 200000);
            s[i].send_ns = t;
            s[i].remote_ns = t + up + off;
            s[i].recv_ns = t + up + down;
            if (up + down < min_rtt)
                min_rtt = up + down;
            t += 1000000;
        }
        struct clock_offset o;
        CHECK(clock_offset_estimate(s, 16, &o) == 0, "simulated %d", k);
        CHECK(o.rtt_ns == min_rtt, "simulated %d: rtt %lld, tightest %lld", k,
              (long long)o.rtt_ns, (long long)min_rtt);
        /* the error of a midpoint estimate is at most half the round trip */
        int64_t err = o.offset_ns - off;
        CHECK(err <= o.rtt_ns / 2 + 1 && err >= -(o.rtt_ns / 2 + 1),
              "simulated %d: error %lld beyond rtt/2 = %lld", k, (long long)err,
              (long long)(o.rtt_ns / 2));
        /* symmetric delays give the exact offset */
        struct clock_sample sym = {5000, 5000 + 777 + off, 5000 + 2 * 777};
        clock_offset_estimate(&sym, 1, &o);
        CHECK(o.offset_ns == off, "symmetric %d: %lld != %lld", k, (long long)o.offset_ns,
              (long long)off);
    }
}

static void test_anchor_exact(void)
{
    struct event_anchor a = {1000000, 3};
    CHECK(event_anchor_map(&a, 1.5) == 2500000, "map: %lld",
          (long long)event_anchor_map(&a, 1.5));
    /* estimate 2000000 inside the bracket [1999990, 2000030]: kept, error by the bracket */
    struct event_anchor n = event_anchor_next(&a, 1.0, 1999990, 2000030);
    CHECK(n.host_ns == 2000000 && n.err_ns == 30, "inside: %lld err %lld",
          (long long)n.host_ns, (long long)n.err_ns);
    /* the device ran slow (estimate before the host began recording): clamped up */
    n = event_anchor_next(&a, 1.0, 2000050, 2000070);
    CHECK(n.host_ns == 2000050 && n.err_ns == 20, "below: %lld err %lld",
          (long long)n.host_ns, (long long)n.err_ns);
    /* the device ran fast (estimate after the host saw it complete): clamped down */
    n = event_anchor_next(&a, 1.0, 1999900, 1999960);
    CHECK(n.host_ns == 1999960 && n.err_ns == 60, "above: %lld err %lld",
          (long long)n.host_ns, (long long)n.err_ns);
    /* a bracket that cannot hold is ignored */
    n = event_anchor_next(&a, 1.0, 2000100, 2000000);
    CHECK(n.host_ns == 2000000 && n.err_ns == 3, "bad bracket: %lld err %lld",
          (long long)n.host_ns, (long long)n.err_ns);
}

/* worst |mapped - truth| over 10 s of rows every 5 ms, re-anchoring every second; the
 * device clock runs at (1 + ppm * 1e-6) times the host's.  bracketed = 0: the old
 * arithmetic (the new anchor's host time from the device's elapsed time only). */
static int64_t anchor_sim_worst(double ppm, int bracketed, uint64_t *seed)
{
    const double rate = 1 + ppm * 1e-6;
    const int64_t t0 = 5000000000ll; /* host time of the first anchor */
    struct event_anchor a = {t0 + 2000, 2000}; /* created with a 4 us synchronize */
    int64_t anchor_true = t0, worst = 0;
    for (int64_t ms = 5; ms <= 10000; ms += 5) {
        int64_t truth = t0 + ms * 1000000;
        /* a row: the device's elapsed time since the anchor, in float milliseconds as
         * cudaEventElapsedTime gives it */
        float dev_ms = (float)((double)(truth - anchor_true) * rate / 1e6);
        int64_t err = event_anchor_map(&a, dev_ms) - truth;
        if (err < 0)
            err = -err;
        if (err > worst)
            worst = err;
        if (ms % 1000)
            continue;
        /* re-anchor on an event completing now: recorded up to 10 us ago; seen within the
         * timer's 50 us look on odd seconds (the stream was idle), a step later (3-40 ms)
         * on even ones */
        int64_t recorded = truth - (int64_t)(test_uniform(seed) * 10000);
        int64_t seen = (ms / 1000) % 2 ? truth + 2000 + (int64_t)(test_uniform(seed) * 40000)
                                       : truth + 3000000 + (int64_t)(test_uniform(seed) * 37e6);
        if (bracketed)
            a = event_anchor_next(&a, dev_ms, recorded, seen);
        else
            a.host_ns = event_anchor_map(&a, dev_ms);
        CHECK(!bracketed || (a.host_ns - truth <= a.err_ns && truth - a.host_ns <= a.err_ns),
              "%+.0f ppm at %lld ms: anchor %lld ns off, bound %lld", ppm, (long long)ms,
              (long long)(a.host_ns - truth), (long long)a.err_ns);
        anchor_true = truth;
    }
    return worst;
}

static void test_anchor_drift(void)
{
    /* 50 ppm over the two seconds between tight brackets is 100 us, and a tight bracket
     * (recorded up to 10 us before, seen up to 42 us after) leaves the anchor at most 42 us
     * off: 142 us at worst, 160 with margin — far below the 500 us the old arithmetic
     * reaches over 10 s (wide brackets only clamp, so they never add error) */
    const int64_t bound = 160000;
    uint64_t seed = 21;
    for (int sign = -1; sign <= 1; sign += 2) {
        double ppm = 50.0 * sign;
        int64_t fixed = anchor_sim_worst(ppm, 1, &seed);
        CHECK(fixed <= bound, "%+.0f ppm: rows up to %lld ns off the host clock (bound %lld)",
              ppm, (long long)fixed, (long long)bound);
        /* the simulation is strong enough to catch the old arithmetic */
        int64_t old = anchor_sim_worst(ppm, 0, &seed);
        CHECK(old > 2 * bound, "%+.0f ppm: the old arithmetic stayed within %lld ns", ppm,
              (long long)old);
    }
}

int main(void)
{
    test_now();
    test_exact();
    test_simulated();
    test_anchor_exact();
    test_anchor_drift();
    return test_finish();
}
