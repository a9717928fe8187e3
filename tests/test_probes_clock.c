/* test_probes_clock.c — the probes' clock and the min-RTT clock offset estimate
 * (probes/clock.c) on synthetic round trips.
 *
 * A simulated remote clock runs at a known offset from ours; round trips with random,
 * asymmetric one-way delays give samples; the estimate must pick the tightest round trip,
 * compute remote - (send + recv) / 2 exactly, and land within rtt / 2 of the true offset.
 * Unusable samples are skipped; no usable sample is an error. */
#include "common/clock.h"
#include "probes/clock_offset.h"
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

int main(void)
{
    test_now();
    test_exact();
    test_simulated();
    return test_finish();
}
