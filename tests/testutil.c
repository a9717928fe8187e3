/* testutil.c — see testutil.h. */
#include "testutil.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

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

void test_fd_gradient(test_loss_fn loss, const void *ctx, double *v, size_t n, double h,
                      double *g)
{
    for (size_t i = 0; i < n; i++) {
        const double save = v[i];
        v[i] = save + h;
        const double lp = loss(ctx);
        v[i] = save - h;
        const double lm = loss(ctx);
        v[i] = save;
        g[i] = (lp - lm) / (2.0 * h);
    }
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

struct test_csv *test_csv_read(const char *dir, const char *name)
{
    char *text = test_read_file(dir, name);
    if (!text || !text[0]) {
        free(text);
        return NULL;
    }
    struct test_csv *t = calloc(1, sizeof *t);
    size_t cap = 64, n = 0, rcap = 16, nrec = 0;
    char **fields = malloc(cap * sizeof *fields);
    size_t *first = calloc(rcap, sizeof *first); /* index in fields of each record's first */
    if (!t || !fields || !first)
        abort();
    t->path = test_path(dir, name);
    t->text_ = text;
    /* unquote in place: the output never runs ahead of the input */
    char *in = text, *out = text;
    while (*in) {
        if (n + 1 >= cap && !(fields = realloc(fields, (cap *= 2) * sizeof *fields)))
            abort();
        if (nrec + 1 >= rcap && !(first = realloc(first, (rcap *= 2) * sizeof *first)))
            abort();
        first[nrec++] = n;
        for (;;) { /* one field */
            fields[n++] = out;
            if (*in == '"') {
                for (in++; *in; in++) {
                    if (*in == '"' && in[1] != '"')
                        break;
                    *out++ = *in;
                    if (*in == '"')
                        in++;
                }
                if (*in == '"')
                    in++;
            }
            while (*in && *in != ',' && *in != '\n')
                *out++ = *in++;
            char end = *in;
            if (end)
                in++;
            *out++ = '\0';
            if (end != ',')
                break;
            if (n + 1 >= cap && !(fields = realloc(fields, (cap *= 2) * sizeof *fields)))
                abort();
        }
    }
    first[nrec] = n;
    t->fields_ = fields;
    t->ncols = (int)first[1];
    t->header = fields;
    t->nrows = (int)nrec - 1;
    t->row = malloc((nrec ? nrec : 1) * sizeof *t->row);
    t->nfields = malloc((nrec ? nrec : 1) * sizeof *t->nfields);
    if (!t->row || !t->nfields)
        abort();
    for (size_t r = 1; r < nrec; r++) {
        t->row[r - 1] = fields + first[r];
        t->nfields[r - 1] = (int)(first[r + 1] - first[r]);
    }
    free(first);
    return t;
}

int test_csv_col(const struct test_csv *t, const char *name)
{
    for (int c = 0; c < t->ncols; c++)
        if (strcmp(t->header[c], name) == 0)
            return c;
    test_failed++;
    fprintf(stderr, "FAIL %s: no column '%s' (columns:", t->path, name);
    for (int c = 0; c < t->ncols; c++)
        fprintf(stderr, "%s%s", c ? "," : " ", t->header[c]);
    fprintf(stderr, ")\n");
    return -1;
}

const char *test_csv_get(const struct test_csv *t, int r, int col)
{
    return r >= 0 && r < t->nrows && col >= 0 && col < t->nfields[r] ? t->row[r][col] : "";
}

int test_csv_find(const struct test_csv *t, int from, ...)
{
    int cols[16], n = 0, bad = 0;
    const char *vals[16];
    va_list ap;
    va_start(ap, from);
    for (const char *c; n < 16 && (c = va_arg(ap, const char *)) != NULL; n++) {
        cols[n] = test_csv_col(t, c);
        vals[n] = va_arg(ap, const char *);
        bad |= cols[n] < 0;
    }
    va_end(ap);
    for (int r = from < 0 ? 0 : from; !bad && r < t->nrows; r++) {
        int k = 0;
        while (k < n && strcmp(test_csv_get(t, r, cols[k]), vals[k]) == 0)
            k++;
        if (k == n)
            return r;
    }
    return -1;
}

int test_csv_doubles(const struct test_csv *t, const char *name, double *out, int max)
{
    int col = test_csv_col(t, name), n = 0;
    for (int r = 0; col >= 0 && r < t->nrows && n < max; r++) {
        const char *s = test_csv_get(t, r, col);
        char *end;
        out[n] = strtod(s, &end);
        n += end != s;
    }
    return n;
}

void test_csv_free(struct test_csv *t)
{
    if (!t)
        return;
    free(t->path);
    free(t->row);
    free(t->nfields);
    free(t->fields_);
    free(t->text_);
    free(t);
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

static int tmpdir_remove_entry(const char *path, const struct stat *st, int flag,
                               struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void test_tmpdir_done(char *dir)
{
    if (dir && test_failed == 0) /* keep the files of a failure to look at */
        nftw(dir, tmpdir_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

void test_text_add(struct test_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    if (vasprintf(&line, fmt, ap) < 0)
        abort();
    va_end(ap);
    size_t n = strlen(line);
    t->s = realloc(t->s, t->len + n + 1);
    if (!t->s)
        abort();
    memcpy(t->s + t->len, line, n + 1);
    t->len += n;
    free(line);
}

/* CLOCK_MONOTONIC in seconds (common/clock.h's clock_now_s: testutil links no library of
 * the program) */
static double wait_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int test_wait_child(pid_t pid, double limit_s, int *status)
{
    const double end = wait_now_s() + limit_s;
    int st = 0, rc = 0;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (wait_now_s() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            rc = -1;
            break;
        }
        struct timespec ts = {0, 5 * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    if (status)
        *status = st;
    return rc;
}

int test_wait_status(pid_t pid, double limit_s)
{
    int st;
    return test_wait_child(pid, limit_s, &st) < 0 ? -1 : st;
}

int test_wait_code(pid_t pid, double limit_s)
{
    int st;
    if (test_wait_child(pid, limit_s, &st) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
