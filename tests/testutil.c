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

char *test_path(const char *dir, const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        abort();
    return p;
}

void test_write_file(const char *dir, const char *name, const char *text, size_t len)
{
    char *p = test_path(dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(text, 1, len, f) != len) {
        perror(p);
        abort();
    }
    fclose(f);
    free(p);
}

char *test_read_file(const char *dir, const char *name)
{
    char *p = test_path(dir, name);
    FILE *f = fopen(p, "rb");
    free(p);
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n)
        n = 0;
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
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
