/* testutil.h — the tiny test helper every C test uses.
 *
 * CHECK(cond, fmt, ...) records a failure with file and line and goes on; test_finish()
 * prints "N passed, N failed" and returns the exit status (0 only if nothing failed).
 * A test that cannot run here (no GPU) calls test_skip(why), which exits 77. */
#ifndef DDPPROF_TESTUTIL_H
#define DDPPROF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

/* central differences of loss(ctx) with respect to v[0..n) (v one of ctx's inputs), step h,
 * into g[0..n) */
typedef double (*test_loss_fn)(const void *ctx);
void test_fd_gradient(test_loss_fn loss, const void *ctx, double *v, size_t n, double h,
                      double *g);

/* dir + "/" + name (caller frees; aborts when out of memory) */
char *test_path(const char *dir, const char *name);
/* write len bytes of text to dir/name (aborts when it cannot: a broken fixture) */
void test_write_file(const char *dir, const char *name, const char *text, size_t len);
/* the whole of dir/name, NUL-terminated (caller frees), or NULL when it cannot be read */
char *test_read_file(const char *dir, const char *name);

/* A CSV table read whole (RFC 4180: a quoted field may hold commas, line breaks and ""
 * for a quote), its first row the header.  Tests find a column by its header name, never
 * by its position, so a column added to a table breaks none of them. */
struct test_csv {
    char *path;     /* dir/name, for messages */
    int ncols;      /* fields of the header */
    char **header;  /* the column names */
    int nrows;      /* data rows (the header left out) */
    char ***row;    /* row[r][c], unquoted */
    int *nfields;   /* fields of row r (a well-formed row has ncols) */
    char *text_;    /* storage */
    char **fields_; /* storage */
};
/* dir/name read (caller frees with test_csv_free), or NULL when it cannot be read or is
 * empty (no failure recorded: the caller CHECKs) */
struct test_csv *test_csv_read(const char *dir, const char *name);
/* the index of column name; when the header has no such column, a test failure naming the
 * file and the column (and the columns it has), and -1 */
int test_csv_col(const struct test_csv *t, const char *name);
/* field col of data row r; "" when col < 0 or the row is shorter */
const char *test_csv_get(const struct test_csv *t, int r, int col);
/* the first data row from row `from` on whose every named column holds the value given:
 * (col, value) pairs ending in NULL; -1 when none (a missing column: test_csv_col's failure) */
int test_csv_find(const struct test_csv *t, int from, ...);
/* the numbers of column name, at most max of them, into out (rows whose field is no number
 * are passed over); how many were read, 0 when the column is missing (test_csv_col's
 * failure) */
int test_csv_doubles(const struct test_csv *t, const char *name, double *out, int max);
void test_csv_free(struct test_csv *t);

/* the source tree ($DDPPROF_SOURCE_DIR, else "."), and a fresh temp directory (caller frees) */
const char *test_source_dir(void);
char *test_tmpdir(void);
/* remove dir and all below it unless a check has failed (its files are then kept to look
 * at); frees dir */
void test_tmpdir_done(char *dir);

/* A growing text (a trace or table a test writes); s NULL until the first add, freed by
 * the caller. */
struct test_text {
    char *s;
    size_t len;
};
/* append the formatted line (aborts when out of memory) */
void test_text_add(struct test_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A child waited for with a deadline: waitpid(pid, WNOHANG) every 5 ms until it has ended
 * or limit_s (from now; <= 0: one look) has passed, when it is SIGKILLed and reaped.
 * 0 when it ended by itself, -1 when it had to be killed; *status (status may be NULL) its
 * wait status either way (the kill's when -1). */
int test_wait_child(pid_t pid, double limit_s, int *status);
/* test_wait_child's wait status, or -1 when the child had to be killed */
int test_wait_status(pid_t pid, double limit_s);
/* test_wait_child as a shell says it: the exit code, or 128 + the signal that ended the
 * child; -1 when it had to be killed */
int test_wait_code(pid_t pid, double limit_s);

#endif
