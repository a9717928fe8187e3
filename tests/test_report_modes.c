/* test_report_modes.c — modes_split (report/analysis/modes.h): step times in two groups
 * are found with the right sizes and medians, and what is one group is not split: normal
 * noise, a uniform spread, a long tail (exponential and lognormal), a few outliers under
 * 10 % of the steps, and too few steps.  The samples are drawn from a fixed generator, so
 * the verdicts are the same on every machine; each distribution is drawn 20 times. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "report/analysis/modes.h"
#include "testutil.h"

static uint64_t rng = 88172645463325252ull;

static double uniform(void) /* xorshift64*, (0, 1) */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return ((double)((rng * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(void)
{
    return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
}

static int64_t ns(double ms)
{
    return (int64_t)llround(ms * 1e6);
}

enum shape { NORMAL, UNIFORM, EXPONENTIAL, LOGNORMAL, OUTLIERS, TWO };

static void draw(enum shape s, int64_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double ms = 0;
        switch (s) {
        case NORMAL: ms = 10.0 + 1.0 * normal(); break;
        case UNIFORM: ms = 5.0 + 10.0 * uniform(); break;
        case EXPONENTIAL: ms = 5.0 - 3.0 * log(uniform()); break;
        case LOGNORMAL: ms = 6.0 * exp(0.4 * normal()); break;
        /* 5 % of the steps 3x slower: a few preemptions, not a second mode */
        case OUTLIERS: ms = (i % 20 == 7 ? 18.0 : 6.0) + 0.3 * normal(); break;
        /* the load: ~6 ms or ~16 ms, 38 % slow */
        case TWO: ms = (i % 50 < 19 ? 16.0 + 1.0 * normal() : 6.0 + 0.4 * normal()); break;
        }
        d[i] = ns(ms);
    }
}

int main(void)
{
    static const char *name[] = {"normal", "uniform", "exponential", "lognormal", "outliers",
                                 "two groups"};
    enum { N = 200, TRIES = 20 };
    int64_t d[N];
    for (int s = NORMAL; s <= TWO; s++) {
        int two = 0;
        double worst_sep = s == TWO ? INFINITY : 0.0;
        for (int t = 0; t < TRIES; t++) {
            draw((enum shape)s, d, N);
            struct step_modes m;
            CHECK(modes_split(d, N, &m) == 0, "%s: modes_split failed", name[s]);
            two += m.two;
            worst_sep = s == TWO ? fmin(worst_sep, m.separation) : fmax(worst_sep, m.separation);
            if (s == TWO && m.two) {
                CHECK(m.n_slow == 76 && m.n_fast == 124, "two groups: %zu fast, %zu slow, "
                      "expected 124 and 76", m.n_fast, m.n_slow);
                CHECK(fabs(m.fast_ms - 6.0) < 0.2 && fabs(m.slow_ms - 16.0) < 0.5,
                      "two groups: medians %.2f and %.2f ms, expected ~6 and ~16",
                      m.fast_ms, m.slow_ms);
                CHECK(m.split_ns > ns(8.0) && m.split_ns < ns(14.0),
                      "two groups: split at %.2f ms", (double)m.split_ns * 1e-6);
            }
        }
        printf("%-12s two groups in %2d of %d draws; separation %s %.2f\n", name[s], two,
               TRIES, s == TWO ? "at least" : "at most", worst_sep);
        CHECK(two == (s == TWO ? TRIES : 0), "%s: called two groups in %d of %d draws",
              name[s], two, TRIES);
    }
    /* too few steps: never two groups, whatever they hold */
    int64_t few[9] = {ns(6), ns(6), ns(6), ns(6), ns(6), ns(16), ns(16), ns(16), ns(16)};
    struct step_modes m;
    CHECK(modes_split(few, 9, &m) == 0 && !m.two && m.n == 9, "9 steps: not judged");
    /* ten steps, two exact groups of 5: found, separation infinite (no spread in either) */
    int64_t ten[10] = {ns(16), ns(6), ns(16), ns(6), ns(16), ns(6), ns(16), ns(6), ns(16), ns(6)};
    CHECK(modes_split(ten, 10, &m) == 0 && m.two && m.n_fast == 5 && m.n_slow == 5 &&
              m.fast_ms == 6.0 && m.slow_ms == 16.0,
          "10 steps in two exact groups: two %d, %zu/%zu, %.1f/%.1f ms", m.two, m.n_fast,
          m.n_slow, m.fast_ms, m.slow_ms);
    /* all equal: one group */
    for (int i = 0; i < 10; i++)
        ten[i] = ns(7);
    CHECK(modes_split(ten, 10, &m) == 0 && !m.two, "10 equal steps: one group");
    return test_finish();
}
