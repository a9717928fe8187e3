/* testutil.c — see testutil.h. */
#include "testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int test_passed, test_failed;

void test_fail_at(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "FAIL %s:%d: %s: ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int test_finish(void)
{
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

void test_skip(const char *why)
{
    printf("SKIP: %s\n", why);
    exit(77);
}

double test_uniform(uint64_t *seed)
{
    uint64_t x = *seed;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *seed = x;
    return (double)(x >> 11) / 9007199254740992.0;
}

void test_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * (float)test_uniform(seed);
}

double test_max_err(const float *a, const double *b, size_t n, double atol, double rtol)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (atol + rtol * fabs(b[i]));
        if (!(e <= worst)) /* NaN counts as worst */
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

const char *test_source_dir(void)
{
    const char *d = getenv("DDPPROF_SOURCE_DIR");
    return d && *d ? d : ".";
}

char *test_tmpdir(void)
{
    char tmpl[] = "/tmp/ddpprof-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}
