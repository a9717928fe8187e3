/* testutil.h — the tiny test helper every C test uses.
 *
 * CHECK(cond, fmt, ...) records a failure with file and line and goes on; test_finish()
 * prints "N passed, N failed" and returns the exit status (0 only if nothing failed).
 * A test that cannot run here (no GPU) calls test_skip(why), which exits 77. */
#ifndef DDPPROF_TESTUTIL_H
#define DDPPROF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

extern int test_passed, test_failed;

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (cond) {                                                                          \
            test_passed++;                                                                   \
        } else {                                                                             \
            test_failed++;                                                                   \
            test_fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__);                            \
        }                                                                                    \
    } while (0)

void test_fail_at(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int test_finish(void);
_Noreturn void test_skip(const char *why);

/* deterministic uniform floats in [lo, hi) (xorshift; seed != 0) */
void test_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t *seed);
double test_uniform(uint64_t *seed); /* [0, 1) */

/* largest |a-b| / (atol + rtol*|b|) over n elements; <= 1 means within tolerance */
double test_max_err(const float *a, const double *b, size_t n, double atol, double rtol);

/* dir + "/" + name (caller frees; aborts when out of memory) */
char *test_path(const char *dir, const char *name);
/* write len bytes of text to dir/name (aborts when it cannot: a broken fixture) */
void test_write_file(const char *dir, const char *name, const char *text, size_t len);
/* the whole of dir/name, NUL-terminated (caller frees), or NULL when it cannot be read */
char *test_read_file(const char *dir, const char *name);

/* the source tree ($DDPPROF_SOURCE_DIR, else "."), and a fresh temp directory (caller frees) */
const char *test_source_dir(void);
char *test_tmpdir(void);

#endif
