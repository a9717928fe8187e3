/* test_tune_compatible.c — which of `ddpprof tune`'s faster candidates it may combine
 * (trainer/tune.h tune_compatible), without running anything: two changes combine only
 * when they set nothing in common.
 *
 * 1. different options combine (--comm gloo with --no-sync-bn, with a bucket cap); an
 *    option's value that spells another option's value does not make them clash;
 * 2. one option twice never combines, whatever the values (--bucket-cap-mb 1000 against
 *    --bucket-cap-mb 1), nor its two spellings (--batch-size 32 against -b 64);
 * 3. one environment variable in both never combines (DDPPROF_FAULT_DELAY_MS=1:0 against
 *    DDPPROF_FAULT_DELAY_MS=1:40), different ones do, and an environment word does not
 *    clash with an option word;
 * 4. a change of several options clashes when any of them does. */
#include "common/error.h"
#include "testutil.h"
#include "tune.h"

#include <stdio.h>

static void expect(const char *a, const char *b, int want)
{
    int got = tune_compatible(a, b), back = tune_compatible(b, a);
    CHECK(got == want && back == want, "'%s' and '%s': compatible %d (and back %d), want %d",
          a, b, got, back, want);
}

int main(void)
{
    /* 1 */
    expect("--comm gloo", "--no-sync-bn", 1);
    expect("--comm gloo", "--bucket-cap-mb 1", 1);
    expect("--no-sync-bn", "--bucket-cap-mb 0.5", 1);
    expect("--threads 1", "--lr 1", 1);
    expect("--amp fp16", "--comm gloo", 1);
    /* 2 */
    expect("--bucket-cap-mb 1000", "--bucket-cap-mb 1", 0);
    expect("--bucket-cap-mb 1", "--bucket-cap-mb 1", 0);
    expect("--batch-size 32", "-b 64", 0);
    expect("--comm gloo", "--comm shm", 0);
    /* 3 */
    expect("DDPPROF_FAULT_DELAY_MS=1:0", "DDPPROF_FAULT_DELAY_MS=1:40", 0);
    expect("DDPPROF_FAULT_DELAY_MS=1:0", "DDPPROF_FAULT_DELAY2_MS=1:0", 1);
    expect("DDPPROF_FAULT_DELAY_MS=1:0", "--no-sync-bn", 1);
    /* 4 */
    expect("--comm gloo --no-sync-bn", "--bucket-cap-mb 1 --no-sync-bn", 0);
    expect("X_A=1 --comm gloo", "X_B=1 --threads 2", 1);
    expect("X_A=1 --comm gloo", "X_A=2 --threads 2", 0);
    return test_finish();
}
