/* test_common.c — the header-only growable array (common/vec.h), the clock
 * (common/clock.h) and the strict whole-number parser (common/parse.h): growth keeps the
 * items and grows geometrically, a reserve that cannot be met leaves the old block and
 * capacity as they were; the clock's three units agree, never go back, and a sleep lasts
 * at least as long as asked, signals or not; parse_i64 takes exactly '-'? digits+ in the
 * int64 range and nothing else; DDP's bucket assignment (common/ddp_buckets.h) gives
 * PyTorch's buckets, worked out by hand for a few caps. */
#include "common/clock.h"
#include "common/ddp_buckets.h"
#include "common/parse.h"
#include "common/vec.h"
#include "testutil.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* ------------------------------------------------------------------ vec.h */

static void test_vec_growth(void)
{
    int64_t *v = NULL;
    size_t cap = 0, reallocs = 0, bad_steps = 0;
    const size_t n = 100000;
    for (size_t i = 0; i < n; i++) {
        const size_t old_cap = cap;
        if (VEC_RESERVE(v, cap, i + 1)) {
            CHECK(0, "VEC_RESERVE failed growing to %zu items", i + 1);
            free(v);
            return;
        }
        if (cap != old_cap) {
            reallocs++;
            /* the first block is VEC_MIN_CAP items, every later one twice the last */
            if (old_cap ? cap != 2 * old_cap : cap != VEC_MIN_CAP) {
                if (!bad_steps++)
                    fprintf(stderr, "capacity went from %zu to %zu at %zu items\n", old_cap, cap,
                            i + 1);
            }
        }
        bad_steps += cap < i + 1;
        v[i] = (int64_t)(i * 7919u);
    }
    CHECK(bad_steps == 0, "%zu growth steps were not x2 from VEC_MIN_CAP or fell short",
          bad_steps);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += v[i] != (int64_t)(i * 7919u);
    CHECK(bad == 0, "%zu of %zu items changed while the array grew", bad, n);
    /* 16 * 2^13 = 131072 >= 100000: 14 blocks in all, O(log n) copies */
    CHECK(reallocs == 14, "%zu reallocations for %zu appends, want 14", reallocs, n);
    CHECK(cap < 2 * n, "capacity %zu for %zu items: more than twice", cap, n);

    /* a need within the capacity changes nothing */
    int64_t *before = v;
    const size_t cap_before = cap;
    CHECK(VEC_RESERVE(v, cap, cap) == 0 && v == before && cap == cap_before,
          "a reserve within the capacity moved the block or changed the capacity");
    CHECK(VEC_RESERVE(v, cap, 0) == 0 && v == before && cap == cap_before,
          "reserving 0 items moved the block or changed the capacity");
    free(v);

    /* a need far above VEC_MIN_CAP from empty: one block, a power-of-two multiple */
    char *c = NULL;
    size_t ccap = 0;
    CHECK(VEC_RESERVE(c, ccap, 1000) == 0 && c && ccap == 1024,
          "reserving 1000 bytes from empty gave capacity %zu, want 1024", ccap);
    memset(c, 'x', ccap); /* the whole capacity is usable */
    free(c);
}

static void test_vec_failure(void)
{
    double *v = NULL;
    size_t cap = 0;
    CHECK(VEC_RESERVE(v, cap, 40) == 0, "reserve of 40 doubles failed");
    for (int i = 0; i < 40; i++)
        v[i] = i + 0.5;
    double *const block = v;
    const size_t cap_before = cap;

    /* needs whose byte count overflows size_t: refused, nothing changed */
    const size_t overflowing[] = {SIZE_MAX, SIZE_MAX / 2 + 2, SIZE_MAX / sizeof *v + 1};
    for (size_t k = 0; k < sizeof overflowing / sizeof overflowing[0]; k++) {
        const int rc = VEC_RESERVE(v, cap, overflowing[k]);
        CHECK(rc == -1, "reserving %zu doubles returned %d, want -1", overflowing[k], rc);
        CHECK(v == block && cap == cap_before,
              "a failed reserve of %zu moved the block (%p -> %p) or the capacity (%zu -> %zu)",
              overflowing[k], (void *)block, (void *)v, cap_before, cap);
    }

#if !defined(__SANITIZE_ADDRESS__)
    /* a size that fits size_t but no address space (2^60 bytes): realloc fails, and the
     * old block must survive it (ASan aborts on such a request instead of failing it) */
    const int rc = VEC_RESERVE(v, cap, (size_t)1 << 57);
    CHECK(rc == -1, "reserving 2^57 doubles (2^60 bytes) returned %d, want -1", rc);
    CHECK(v == block && cap == cap_before, "a failed realloc moved the block or the capacity");
#endif

    int intact = 1;
    for (int i = 0; i < 40; i++)
        intact &= v[i] == i + 0.5;
    CHECK(intact, "the old block's items changed after failed reserves");
    /* and it still grows afterwards */
    CHECK(VEC_RESERVE(v, cap, cap + 1) == 0 && cap == 2 * cap_before && v[39] == 39.5,
          "growing after a failure: capacity %zu, want %zu", cap, 2 * cap_before);
    free(v);
}

/* ------------------------------------------------------------------ clock.h */

static void test_clock_units(void)
{
    for (int i = 0; i < 1000; i++) {
        const int64_t ns0 = clock_now_ns();
        const double s = clock_now_s();
        const int64_t ms = clock_now_ms();
        const int64_t ns1 = clock_now_ns();
        CHECK(ns1 >= ns0, "clock_now_ns went back: %lld then %lld", (long long)ns0,
              (long long)ns1);
        /* s is a double of ~1e5 s of uptime: 1e-11 s resolution, 1 us of slack is plenty */
        CHECK(s >= ns0 * 1e-9 - 1e-6 && s <= ns1 * 1e-9 + 1e-6,
              "clock_now_s %.9f outside [%.9f, %.9f] of clock_now_ns", s, ns0 * 1e-9,
              ns1 * 1e-9);
        CHECK(ms >= ns0 / 1000000 && ms <= ns1 / 1000000,
              "clock_now_ms %lld outside [%lld, %lld] of clock_now_ns", (long long)ms,
              (long long)(ns0 / 1000000), (long long)(ns1 / 1000000));
        if (test_failed)
            break;
    }
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

static void test_clock_sleep(void)
{
    const int waits_ms[] = {0, 1, 30, 120};
    for (size_t k = 0; k < sizeof waits_ms / sizeof waits_ms[0]; k++) {
        const int ms = waits_ms[k];
        const int64_t t0 = clock_now_ns();
        clock_sleep_ms(ms);
        const double slept_ms = (clock_now_ns() - t0) / 1e6;
        CHECK(slept_ms >= ms, "clock_sleep_ms(%d) slept %.3f ms", ms, slept_ms);
        /* an upper bound only against a hang: a loaded 2-core machine may be late */
        CHECK(slept_ms < ms + 5000.0, "clock_sleep_ms(%d) took %.3f ms", ms, slept_ms);
    }

    /* a signal every 7 ms (handler without SA_RESTART) must not cut a 150 ms sleep short */
    struct sigaction sa = {.sa_handler = on_alarm}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old);
    const struct itimerval every = {{0, 7000}, {0, 7000}}, off = {{0, 0}, {0, 0}};
    alarms = 0;
    setitimer(ITIMER_REAL, &every, NULL);
    const int64_t t0 = clock_now_ns();
    clock_sleep_ms(150);
    const double slept_ms = (clock_now_ns() - t0) / 1e6;
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    CHECK(alarms > 0, "no SIGALRM arrived during the sleep: the test proved nothing");
    CHECK(slept_ms >= 150.0, "clock_sleep_ms(150) slept %.3f ms across %d signals", slept_ms,
          (int)alarms);
}

/* ------------------------------------------------------------------ parse.h */

static void test_parse_i64(void)
{
    static const struct {
        const char *s;
        size_t len;
        int ok;
        int64_t want;
    } cases[] = {
        {"0", 1, 1, 0},
        {"-0", 2, 1, 0},
        {"42", 2, 1, 42},
        {"-17", 3, 1, -17},
        {"0000000000000000000000000000123", 31, 1, 123}, /* leading zeros, any number */
        {"9223372036854775807", 19, 1, INT64_MAX},
        {"-9223372036854775808", 20, 1, INT64_MIN},
        {"9223372036854775808", 19, 0, 0}, /* one past INT64_MAX */
        {"-9223372036854775809", 20, 0, 0},
        {"99999999999999999999", 20, 0, 0},
        {"", 0, 0, 0},
        {"-", 1, 0, 0},
        {"+1", 2, 0, 0},
        {" 1", 2, 0, 0},
        {"1 ", 2, 0, 0},
        {"--1", 3, 0, 0},
        {"1-", 2, 0, 0},
        {"0x10", 4, 0, 0},
        {"1e3", 3, 0, 0},
        {"12\0" "3", 4, 0, 0}, /* a NUL byte inside */
        {"12", 1, 1, 1},       /* only len bytes are read */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t v = -12345;
        const int rc = parse_i64(cases[k].s, cases[k].len, &v);
        if (cases[k].ok)
            CHECK(rc == 0 && v == cases[k].want, "parse_i64('%.*s') = %d, %lld; want %lld",
                  (int)cases[k].len, cases[k].s, rc, (long long)v, (long long)cases[k].want);
        else
            CHECK(rc == -1 && v == -12345, "parse_i64 took '%.*s' (%zu bytes): %d, %lld",
                  (int)cases[k].len, cases[k].s, cases[k].len, rc, (long long)v);
    }
}

/* reverse order, first cap min(first, cap), a bucket closes at >= its limit while a
 * parameter is left; the answers worked by hand */
static void test_ddp_buckets(void)
{
    static const size_t bytes[4] = {300, 200, 300, 400};
    static const struct {
        size_t first, cap;
        int want_n, want[4];
    } cases[] = {
        {1 << 20, 250, 3, {2, 2, 1, 0}},  /* 400 | 300 | 200+300 (the last keeps the rest) */
        {1 << 20, 1200, 1, {0, 0, 0, 0}}, /* all 1200 bytes: reaching the cap at i = 0 */
        {300, 500, 3, {2, 1, 1, 0}},      /* first 300: 400 | 300+200 | 300 */
        {1 << 20, 700, 2, {1, 1, 0, 0}},  /* 400+300 | 200+300 */
        {1, 1, 4, {3, 2, 1, 0}},          /* every parameter its own bucket */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int got[4] = {-1, -1, -1, -1};
        int n = ddp_buckets_assign(bytes, 4, cases[k].first, cases[k].cap, got);
        CHECK(n == cases[k].want_n, "case %zu: %d buckets, want %d", k, n, cases[k].want_n);
        for (int i = 0; i < 4; i++)
            CHECK(got[i] == cases[k].want[i], "case %zu: parameter %d in bucket %d, want %d", k,
                  i, got[i], cases[k].want[i]);
    }
    CHECK(ddp_buckets_assign(bytes, 0, 1, 1, NULL) == 0, "no parameters: no bucket");
    CHECK(ddp_bucket_cap_bytes(25.0) == 25u << 20, "25 MB = %zu bytes", ddp_bucket_cap_bytes(25.0));
    CHECK(ddp_bucket_cap_bytes(0.05) == 52428, "0.05 MB = %zu bytes", ddp_bucket_cap_bytes(0.05));
}

int main(void)
{
    test_vec_growth();
    test_vec_failure();
    test_clock_units();
    test_clock_sleep();
    test_parse_i64();
    test_ddp_buckets();
    return test_finish();
}
