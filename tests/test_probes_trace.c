/* test_probes_trace.c — the per-rank trace writer (probes/trace_writer.c) and the host
 * rows of the probe API (probes/probe.c).
 *
 * Rows round-trip through libcsv's parser (names with commas, quotes, newlines, long and
 * UTF-8 names); the buffer is written only in whole rows when it passes its threshold;
 * several threads write at once; a child that dies by SIGTERM, SIGABRT or SIGSEGV (or is
 * SIGTERMed while two threads are writing and flushing, the signal landing in the main
 * thread or in a writer mid-append or mid-flush) leaves only whole, parseable rows
 * and loses none it had committed; a child SIGKILLed mid-run has all rows but the last
 * second's in the file (the flusher thread), whole and in sequence; a handler installed before the writer is chained and
 * the writer stays usable; --trace off creates nothing; a training-like sequence of probe
 * calls gives the expected, nested host rows. */
#include "common/clock.h"
#include "common/error.h"
#include "probes/probe.h"
#include "testutil.h"
#include "probes/trace_writer.h"

#include <csv.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NCOL 12

/* ---- a parsed trace: every row's fields as strings ------------------------------- */

struct parsed {
    char ***rows; /* rows[i][j], header is rows[0] */
    int *ncols;
    size_t n, cap;
    char *cur[NCOL + 4];
    int nf;
    int ok; /* csv_parse/fini succeeded */
};

static void parsed_field(void *s, size_t len, void *data)
{
    struct parsed *p = data;
    if (p->nf < NCOL + 4)
        p->cur[p->nf] = strndup(s, len);
    p->nf++;
}

static void parsed_row(int c, void *data)
{
    (void)c;
    struct parsed *p = data;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 256;
        p->rows = realloc(p->rows, p->cap * sizeof *p->rows);
        p->ncols = realloc(p->ncols, p->cap * sizeof *p->ncols);
    }
    int k = p->nf < NCOL + 4 ? p->nf : NCOL + 4;
    p->rows[p->n] = calloc(NCOL + 4, sizeof(char *));
    memcpy(p->rows[p->n], p->cur, (size_t)k * sizeof(char *));
    p->ncols[p->n] = p->nf;
    p->n++;
    p->nf = 0;
}

static void parsed_free(struct parsed *p)
{
    for (size_t i = 0; i < p->n; i++) {
        for (int j = 0; j < NCOL + 4; j++)
            free(p->rows[i][j]);
        free(p->rows[i]);
    }
    free(p->rows);
    free(p->ncols);
    memset(p, 0, sizeof *p);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    b[*len] = '\0';
    fclose(f);
    return b;
}

/* Parse a trace in strict mode; also says whether the file ends in a newline. */
static int parse_trace(const char *path, struct parsed *p, int *ends_in_newline)
{
    memset(p, 0, sizeof *p);
    size_t len = 0;
    char *b = slurp(path, &len);
    if (!b)
        return -1;
    *ends_in_newline = len > 0 && b[len - 1] == '\n';
    struct csv_parser cp;
    csv_init(&cp, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL);
    p->ok = csv_parse(&cp, b, len, parsed_field, parsed_row, p) == len &&
            csv_fini(&cp, parsed_field, parsed_row, p) == 0;
    csv_free(&cp);
    free(b);
    return 0;
}

/* every row has NCOL fields and the header is right */
static int trace_well_formed(const struct parsed *p)
{
    if (!p->ok || p->n < 1 || p->ncols[0] != NCOL || strcmp(p->rows[0][0], "rank") != 0 ||
        strcmp(p->rows[0][NCOL - 1], "stream") != 0)
        return 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->ncols[i] != NCOL)
            return 0;
    return 1;
}

static char tmp[512];

static void trace_path(char *buf, size_t cap, const char *dir, int rank)
{
    snprintf(buf, cap, "%s/rank%d.trace.csv", dir, rank);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static struct trace_row row_of(int rank, int64_t step, const char *name)
{
    struct trace_row r = {
        .rank = rank, .step = step, .epoch = 1, .phase = PROBE_FORWARD, .bucket = -1,
        .clock = TRACE_CLOCK_HOST, .start_ns = 1000 + step, .end_ns = 2000 + step,
        .bytes = 0, .name = name, .kind = TRACE_KIND_RANGE, .stream = 0,
    };
    return r;
}

/* ---- round trip ------------------------------------------------------------------ */

static void test_round_trip(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/roundtrip", tmp);
    mkdir(dir, 0755);
    struct trace_writer *w = trace_writer_open(dir, 3, 0);
    CHECK(w != NULL, "open: %s", error_get());
    if (!w)
        return;
    char longname[3000]; /* over TRACE_ROW_MAX quoted? no: 3 KB plain, in the buffer */
    memset(longname, 'k', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    /* 100 KB of a templated kernel's kind of name, with commas and quotes: written on its
     * own (over TRACE_ROW_MAX), whole, quoted, between buffered rows */
    static char hugename[100 * 1024];
    for (size_t i = 0; i + 1 < sizeof hugename; i++)
        hugename[i] = "void k<cute::tuple<int, \"x\">>"[i % 30];
    hugename[sizeof hugename - 1] = '\0';
    char utf8[1100]; /* a 2-byte UTF-8 sequence where the old 1024-byte cut was */
    memset(utf8, 'u', 1023);
    utf8[1023] = (char)0xC3;
    utf8[1024] = (char)0xA9;
    utf8[1025] = 'z';
    utf8[1026] = '\0';
    const char *names[] = {"forward", "void gemm<float, 4>(float*, int)", "say \"hi\"",
                           "two\nlines\r\n", "", longname, hugename, utf8, "after"};
    const int nn = (int)(sizeof names / sizeof names[0]);
    struct trace_row r0 = {
        .rank = 3, .step = 123456789012345ll, .epoch = 7, .phase = PROBE_ALLREDUCE, .bucket = 11,
        .clock = TRACE_CLOCK_CUPTI, .start_ns = -5, .end_ns = INT64_MAX,
        .bytes = UINT64_MAX, .name = NULL, .kind = TRACE_KIND_MEMCPY, .stream = 4294967295ll,
    };
    CHECK(trace_writer_add(w, &r0) == 0, "add: %s", error_get());
    for (int i = 0; i < nn; i++) {
        struct trace_row r = row_of(3, i, names[i]);
        CHECK(trace_writer_add(w, &r) == 0, "add: %s", error_get());
    }
    struct trace_row back = row_of(3, 99, "backwards");
    back.start_ns = 500, back.end_ns = 400; /* written as end = start */
    trace_writer_add(w, &back);
    CHECK(trace_writer_rows(w) == (uint64_t)nn + 2, "rows %llu",
          (unsigned long long)trace_writer_rows(w));
    CHECK(trace_writer_close(w) == 0, "close: %s", error_get());

    char path[700];
    trace_path(path, sizeof path, dir, 3);
    struct parsed p;
    int nl = 0;
    CHECK(parse_trace(path, &p, &nl) == 0, "read %s", path);
    CHECK(trace_well_formed(&p), "not well formed");
    CHECK(nl, "file does not end in a newline");
    CHECK(p.n == (size_t)nn + 3, "%zu rows (with header), expected %d", p.n, nn + 3);
    if (p.n == (size_t)nn + 3 && trace_well_formed(&p)) {
        const char *want0[NCOL] = {"3", "123456789012345", "7", "allreduce", "11", "cupti",
                                   "-5", "9223372036854775807", "18446744073709551615",
                                   "allreduce", "memcpy", "4294967295"};
        for (int j = 0; j < NCOL; j++)
            CHECK(strcmp(p.rows[1][j], want0[j]) == 0, "row 1 col %d: '%s' != '%s'", j,
                  p.rows[1][j], want0[j]);
        for (int i = 0; i < nn; i++) /* every name whole, the 100 KB one too */
            CHECK(strcmp(p.rows[2 + i][9], names[i]) == 0, "name %d (%zu bytes): read back "
                  "as %zu bytes", i, strlen(names[i]), strlen(p.rows[2 + i][9]));
        CHECK(strcmp(p.rows[2 + nn][6], "500") == 0 && strcmp(p.rows[2 + nn][7], "500") == 0,
              "end < start written as %s..%s", p.rows[2 + nn][6], p.rows[2 + nn][7]);
        CHECK(strcmp(p.rows[2][3], "forward") == 0 && strcmp(p.rows[2][4], "-1") == 0 &&
                  strcmp(p.rows[2][5], "host") == 0 && strcmp(p.rows[2][10], "range") == 0,
              "plain row fields");
    }
    parsed_free(&p);

    CHECK(trace_writer_open("/nonexistent-dir/x", 0, 0) == NULL, "open in a missing dir");
    CHECK(strstr(error_get(), "/nonexistent-dir/x") != NULL, "error names the path: %s",
          error_get());
}

/* A long row (its own write) that the disk refuses: the file keeps its whole rows, the row
 * is counted lost and close says so; the writer goes on.  File size limit: EFBIG, root too. */
static void test_long_row_refused(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/longfull", tmp);
    mkdir(dir, 0755);
    struct trace_writer *w = trace_writer_open(dir, 0, 0);
    CHECK(w != NULL, "open: %s", error_get());
    if (!w)
        return;
    struct trace_row r = row_of(0, 1, "short");
    CHECK(trace_writer_add(w, &r) == 0, "add: %s", error_get());
    static char name[200 * 1024];
    memset(name, 'n', sizeof name - 1);
    struct trace_row big = row_of(0, 2, name);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 64 * 1024; /* the header and the short row fit; 200 KB does not */
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
    int rc = trace_writer_add(w, &big);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    CHECK(rc == -1 && strstr(error_get(), "row dropped"), "a refused long row: rc %d, %s", rc,
          error_get());
    struct trace_row after = row_of(0, 3, "after");
    CHECK(trace_writer_add(w, &after) == 0, "add after: %s", error_get());
    CHECK(trace_writer_close(w) == -1 && strstr(error_get(), "1 trace row(s) lost"),
          "close after a lost row: %s", error_get());
    char path[700];
    trace_path(path, sizeof path, dir, 0);
    struct parsed p;
    int nl = 0;
    CHECK(parse_trace(path, &p, &nl) == 0 && trace_well_formed(&p) && nl,
          "the file is not whole rows after the refused row");
    CHECK(p.n == 3 && strcmp(p.rows[1][9], "short") == 0 && strcmp(p.rows[2][9], "after") == 0,
          "%zu rows (with header): expected the short row and the one after", p.n);
    parsed_free(&p);
}

/* ---- threshold ------------------------------------------------------------------- */

static void test_threshold(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/threshold", tmp);
    mkdir(dir, 0755);
    const size_t threshold = 1000;
    struct trace_writer *w = trace_writer_open(dir, 0, threshold);
    CHECK(w != NULL, "open: %s", error_get());
    if (!w)
        return;
    trace_writer_set_flush_interval(w, 0); /* only the threshold writes, however slow we run */
    char path[700];
    trace_path(path, sizeof path, dir, 0);
    long header = (long)strlen(TRACE_HEADER);
    CHECK(file_size(path) == header, "header written at open: %ld", file_size(path));
    char line[TRACE_ROW_MAX];
    struct trace_row r = row_of(0, 1, "forward");
    size_t rowlen = trace_format_row(line, sizeof line, &r);
    size_t buffered = 0;
    int flushes = 0, premature = 0, whole = 1;
    for (int i = 0; i < 100; i++) {
        trace_writer_add(w, &r);
        buffered += rowlen;
        long sz = file_size(path);
        if (buffered >= threshold) {
            flushes++;
            buffered = 0;
        }
        long want = header + (long)((size_t)(i + 1) * rowlen - buffered);
        if (sz != want)
            premature++;
        if ((sz - header) % (long)rowlen != 0)
            whole = 0;
    }
    CHECK(flushes >= 5, "only %d flushes", flushes);
    CHECK(premature == 0, "%d times the file size was not header + flushed rows", premature);
    CHECK(whole, "file size not a whole number of rows");
    CHECK(trace_writer_flush(w) == 0, "flush");
    CHECK(file_size(path) == header + 100 * (long)rowlen, "after flush: %ld", file_size(path));
    CHECK(trace_writer_close(w) == 0, "close: %s", error_get());
}

/* ---- threads --------------------------------------------------------------------- */

#define NTHREADS 4
#define PER_THREAD 20000

struct writer_arg {
    struct trace_writer *w;
    int id;
    int stop_at;            /* < 0: forever */
    atomic_long added;      /* rows added so far (the death tests wait for some) */
};

static void *writer_thread(void *arg)
{
    struct writer_arg *a = arg;
    for (int i = 0; a->stop_at < 0 || i < a->stop_at; i++) {
        struct trace_row r = row_of(0, i, NULL);
        r.bucket = a->id; /* thread id in bucket, sequence in step */
        r.phase = PROBE_ALLREDUCE;
        trace_writer_add(a->w, &r);
        atomic_fetch_add(&a->added, 1);
    }
    return NULL;
}

/* wait, at most 10 s, until every writer of a[0..n) added rows: under load a thread may
 * not have run at all yet when the test goes on to kill it */
static void wait_rows_added(struct writer_arg *a, int n)
{
    for (int ms = 0; ms < 10000; ms++) {
        int all = 1;
        for (int t = 0; t < n; t++)
            all &= atomic_load(&a[t].added) > 0;
        if (all)
            return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Each thread's rows (bucket = thread, step = sequence) must be 0..k-1 exactly once. */
static int sequences_complete(const struct parsed *p, int nthreads, long *counts)
{
    int ok = 1;
    long *next = calloc((size_t)nthreads, sizeof *next);
    for (size_t i = 1; i < p->n; i++) {
        int t = atoi(p->rows[i][4]);
        long s = atol(p->rows[i][1]);
        if (t < 0 || t >= nthreads || s != next[t])
            ok = 0;
        else
            next[t]++;
    }
    for (int t = 0; t < nthreads; t++)
        counts[t] = next[t];
    free(next);
    return ok;
}

static void test_threads(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/threads", tmp);
    mkdir(dir, 0755);
    struct trace_writer *w = trace_writer_open(dir, 0, 4096);
    CHECK(w != NULL, "open: %s", error_get());
    if (!w)
        return;
    pthread_t th[NTHREADS];
    struct writer_arg a[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        a[t] = (struct writer_arg){w, t, PER_THREAD, 0};
        pthread_create(&th[t], NULL, writer_thread, &a[t]);
    }
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    CHECK(trace_writer_close(w) == 0, "close: %s", error_get());
    char path[700];
    trace_path(path, sizeof path, dir, 0);
    struct parsed p;
    int nl;
    parse_trace(path, &p, &nl);
    long counts[NTHREADS];
    CHECK(trace_well_formed(&p), "threads: not well formed");
    CHECK(p.n == 1 + NTHREADS * PER_THREAD, "threads: %zu rows", p.n);
    CHECK(sequences_complete(&p, NTHREADS, counts), "threads: rows missing or repeated");
    parsed_free(&p);
}

/* ---- fatal signals --------------------------------------------------------------- */

enum death { DIE_SIGTERM, DIE_ABORT, DIE_SEGV, DIE_TERM_WHILE_BUSY, DIE_TERM_IN_WRITER };

/* ready: the write end of a pipe; the child writes one byte to it once its writers have
 * added rows (the parent waits for it before it sends SIGTERM) */
static void child_die(const char *dir, enum death how, int iteration, int ready)
{
    if (how == DIE_TERM_WHILE_BUSY || how == DIE_TERM_IN_WRITER) {
        /* two threads add rows until a SIGTERM lands: from the parent (busy: delivered to
         * this idle main thread while the writers append and flush), or sent by this main
         * thread to writer 0 itself (in-writer: with a tiny threshold most of its time is
         * spent flushing, so the handler mostly interrupts its own thread's flush).  The
         * signal is sent only once both threads added rows: under load (a full ctest -j)
         * it used to land before the trace file or any row existed */
        struct trace_writer *w = trace_writer_open(dir, 0, how == DIE_TERM_IN_WRITER ? 200 : 2048);
        if (!w)
            _exit(3);
        pthread_t th[2];
        struct writer_arg a[2] = {{w, 0, -1, 0}, {w, 1, -1, 0}};
        for (int t = 0; t < 2; t++)
            pthread_create(&th[t], NULL, writer_thread, &a[t]);
        wait_rows_added(a, 2);
        if (write(ready, "r", 1) != 1)
            _exit(5);
        if (how == DIE_TERM_IN_WRITER) {
            struct timespec ts = {0, 5000000 + 3000000 * iteration};
            nanosleep(&ts, NULL);
            pthread_kill(th[0], SIGTERM);
        }
        for (;;)
            pause();
    }
    /* a buffer far larger than what is written: every row is still in memory */
    struct trace_writer *w = trace_writer_open(dir, 0, 1 << 20);
    if (!w)
        _exit(3);
    for (int i = 0; i < 500; i++) {
        struct trace_row r = row_of(0, i, "kernel, with comma");
        r.bucket = 0;
        trace_writer_add(w, &r);
    }
    switch (how) {
    case DIE_SIGTERM:
        raise(SIGTERM);
        break;
    case DIE_ABORT:
        abort();
    case DIE_SEGV: {
        static volatile uintptr_t addr = 64; /* unmapped, aligned, not NULL; volatile so the
                                                compiler cannot see the address */
        *(volatile int *)addr = 1;
        break;
    }
    default:
        break;
    }
    _exit(4); /* not reached */
}

static void test_death(enum death how, const char *label, int iteration)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/death-%s-%d", tmp, label, iteration);
    mkdir(dir, 0755);
    fflush(NULL);
    int ready[2];
    CHECK(pipe(ready) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        if (how == DIE_SEGV) /* under ASan the chained SEGV report is expected: keep it quiet */
            freopen("/dev/null", "w", stderr);
        child_die(dir, how, iteration, ready[1]);
    }
    close(ready[1]);
    int busy = how == DIE_TERM_WHILE_BUSY || how == DIE_TERM_IN_WRITER;
    if (busy) { /* the writers are adding rows (or the child died: EOF), within 30 s */
        struct pollfd pfd = {.fd = ready[0], .events = POLLIN};
        char c;
        CHECK(poll(&pfd, 1, 30000) == 1 && read(ready[0], &c, 1) == 1,
              "%s: the child's writers added no row within 30 s", label);
    }
    close(ready[0]);
    if (how == DIE_TERM_WHILE_BUSY) {
        struct timespec ts = {0, 20000000 + 7000000 * iteration}; /* let them run a while */
        nanosleep(&ts, NULL);
        kill(pid, SIGTERM);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (how == DIE_SEGV) /* under ASan (exit 1) or TSan (exit 66) its own SEGV report
                            (chained) exits non-zero */
        CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) ||
                  (WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
                   (WEXITSTATUS(status) < 3 || WEXITSTATUS(status) == 66)),
              "%s: child status %#x", label, status);
    else
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == (how == DIE_ABORT ? SIGABRT : SIGTERM),
              "%s: child status %#x", label, status);
    char path[700];
    trace_path(path, sizeof path, dir, 0);
    struct parsed p;
    int nl = 0;
    CHECK(parse_trace(path, &p, &nl) == 0, "%s: no trace file", label);
    CHECK(trace_well_formed(&p), "%s: trace not well formed (%zu rows)", label, p.n);
    CHECK(nl, "%s: file ends in a partial row", label);
    if (busy) {
        long counts[2];
        CHECK(sequences_complete(&p, 2, counts),
              "%s: a committed row is missing or repeated", label);
        CHECK(counts[0] + counts[1] > 0, "%s: no rows at all", label);
    } else {
        CHECK(p.n == 501, "%s: %zu rows, expected header + 500", label, p.n);
    }
    parsed_free(&p);
}

/* ---- SIGKILL: the flusher wrote all but the last second -------------------------- */

/* A child adds one row every 2 ms (step = sequence, start_ns = CLOCK_MONOTONIC now) into a
 * 1 MiB buffer that never fills, and is SIGKILLed after about 2.5 s: no handler runs, so
 * only the once-a-second flusher can have put rows in the file.  They must be whole, in
 * sequence from 0, and reach to within 1.5 s of the kill (the 1 s interval, plus 0.5 s for
 * a loaded machine's scheduling). */
static void test_sigkill(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/sigkill", tmp);
    mkdir(dir, 0755);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct trace_writer *w = trace_writer_open(dir, 0, 1 << 20);
        if (!w)
            _exit(3);
        for (int64_t i = 0; i < 100000; i++) { /* 200 s at most: the parent kills it first */
            struct trace_row r = row_of(0, i, "step, \"quoted\"");
            r.bucket = 0; /* sequences_complete: thread 0 */
            r.start_ns = r.end_ns = clock_now_ns();
            trace_writer_add(w, &r);
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
        _exit(4);
    }
    struct timespec ts = {2, 500000000};
    nanosleep(&ts, NULL);
    int64_t killed_ns = clock_now_ns();
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "sigkill: child status %#x",
          status);
    char path[700];
    trace_path(path, sizeof path, dir, 0);
    struct parsed p;
    int nl = 0;
    CHECK(parse_trace(path, &p, &nl) == 0, "sigkill: no trace file");
    CHECK(trace_well_formed(&p), "sigkill: trace not well formed (%zu rows)", p.n);
    CHECK(nl, "sigkill: file ends in a partial row");
    long counts[1] = {0};
    CHECK(sequences_complete(&p, 1, counts), "sigkill: rows missing or out of sequence");
    CHECK(p.n > 1, "sigkill: the trace holds only its header");
    if (p.n > 1) {
        int64_t last_ns = atoll(p.rows[p.n - 1][6]);
        CHECK(killed_ns - last_ns < 1500000000LL,
              "sigkill: the last row in the file is %.3f s older than the kill (%zu rows)",
              1e-9 * (double)(killed_ns - last_ns), p.n - 1);
    }
    parsed_free(&p);
}

/* ---- a handler installed before the writer is chained ---------------------------- */

static volatile sig_atomic_t app_got_term;
static void app_on_term(int sig)
{
    (void)sig;
    app_got_term = 1;
}

static void test_chained_handler(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/chained", tmp);
    mkdir(dir, 0755);
    struct sigaction app = {0}, before, after;
    app.sa_handler = app_on_term;
    sigemptyset(&app.sa_mask);
    sigaction(SIGTERM, &app, &before);
    struct trace_writer *w = trace_writer_open(dir, 0, 1 << 20);
    CHECK(w != NULL, "open");
    if (!w)
        return;
    for (int i = 0; i < 10; i++) {
        struct trace_row r = row_of(0, i, "forward");
        r.bucket = 0;
        trace_writer_add(w, &r);
    }
    char path[700];
    trace_path(path, sizeof path, dir, 0);
    long header = (long)strlen(TRACE_HEADER);
    CHECK(file_size(path) == header, "rows written before the signal");
    raise(SIGTERM);
    CHECK(app_got_term, "the application's SIGTERM handler was not called");
    CHECK(file_size(path) > header, "the handler did not write the buffered rows");
    for (int i = 10; i < 20; i++) { /* the writer still works after an idle-time signal */
        struct trace_row r = row_of(0, i, "forward");
        r.bucket = 0;
        CHECK(trace_writer_add(w, &r) == 0, "add after the signal: %s", error_get());
    }
    CHECK(trace_writer_close(w) == 0, "close: %s", error_get());
    sigaction(SIGTERM, NULL, &after);
    CHECK(!(after.sa_flags & SA_SIGINFO) && after.sa_handler == app_on_term,
          "close did not restore the application's handler");
    sigaction(SIGTERM, &before, NULL);
    struct parsed p;
    int nl;
    parse_trace(path, &p, &nl);
    long counts[1];
    CHECK(trace_well_formed(&p) && p.n == 21 && sequences_complete(&p, 1, counts),
          "chained: %zu rows", p.n);
    parsed_free(&p);
}

/* ---- --trace off ------------------------------------------------------------------ */

static int dir_entries(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

static void test_off(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/off", tmp);
    mkdir(dir, 0755);
    struct probe_opts o;
    probe_opts_default(&o);
    o.mode = PROBE_OFF;
    o.run_dir = dir;
    struct probe *p = probe_create(&o);
    CHECK(p != NULL, "create off: %s", error_get());
    struct sigaction sa;
    sigaction(SIGTERM, NULL, &sa);
    CHECK(!(sa.sa_flags & SA_SIGINFO), "off installed a signal handler");
    const int n = 1000000;
    int64_t t0 = clock_now_ns();
    for (int i = 0; i < n; i++) {
        probe_set_step(p, i, 1);
        probe_push(p, PROBE_STEP);
        probe_push(p, PROBE_FORWARD);
        probe_pop(p);
        probe_bucket_launch(p, 0, 4);
        probe_bucket_issued(p, 0);
        probe_bucket_range(p, 0, 4, 1, 2);
        probe_pop(p);
    }
    int64_t t1 = clock_now_ns();
    struct probe_stats st;
    probe_stats(p, &st);
    CHECK(st.rows == 0 && st.unbalanced == 0, "off counted rows");
    CHECK(probe_destroy(p) == 0, "destroy off");
    CHECK(dir_entries(dir) == 0, "off created %d files", dir_entries(dir));
    printf("trace off: %.2f ns per step of 8 probe calls (informational)\n",
           (double)(t1 - t0) / n);
    /* NULL probes are accepted everywhere */
    probe_push(NULL, PROBE_STEP);
    probe_pop(NULL);
    CHECK(probe_destroy(NULL) == 0, "destroy NULL");
}

/* what a range costs in full mode on a CPU rank (printed, not asserted: a time depends on
 * the machine); the rows must all be there */
static void test_full_cost(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cost", tmp);
    mkdir(dir, 0755);
    struct probe_opts o;
    probe_opts_default(&o);
    o.mode = PROBE_FULL;
    o.run_dir = dir;
    struct probe *p = probe_create(&o);
    CHECK(p != NULL, "create: %s", error_get());
    if (!p)
        return;
    const int n = 200000;
    int64_t t0 = clock_now_ns();
    for (int i = 0; i < n; i++) {
        probe_push(p, PROBE_FORWARD);
        probe_pop(p);
    }
    int64_t t1 = clock_now_ns();
    struct probe_stats st;
    probe_stats(p, &st);
    CHECK(st.rows == (uint64_t)n && st.rows_lost == 0, "rows %llu",
          (unsigned long long)st.rows);
    CHECK(probe_destroy(p) == 0, "destroy: %s", error_get());
    printf("trace full: %.0f ns per push/pop pair, row written (informational)\n",
           (double)(t1 - t0) / n);
}

/* ---- host rows of a training-like sequence ---------------------------------------- */

struct span {
    int64_t s, e;
};

static void test_probe_rows(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/probe", tmp);
    mkdir(dir, 0755);
    enum probe_mode m;
    CHECK(probe_mode_parse("nvtx", &m) == 0 && m == PROBE_NVTX, "parse nvtx");
    CHECK(probe_mode_parse("kernels", &m) == 0 && m == PROBE_KERNELS, "parse kernels");
    CHECK(probe_mode_parse("full", &m) == 0 && m == PROBE_FULL, "parse full");
    CHECK(probe_mode_parse("verbose", &m) == -1 &&
              strstr(error_get(), "off, nvtx, kernels or full"),
          "parse bad: %s", error_get());
    CHECK(strcmp(probe_mode_name(PROBE_KERNELS), "kernels") == 0 &&
              strcmp(probe_mode_name((enum probe_mode)(PROBE_FULL + 1)), "?") == 0,
          "mode names: %s", probe_mode_name(PROBE_KERNELS));
    struct probe_opts o;
    probe_opts_default(&o);
    CHECK(o.mode == PROBE_KERNELS, "the default mode is %s, not kernels",
          probe_mode_name(o.mode));
    o.rank = 1;
    o.run_dir = dir;
    struct probe *p = probe_create(&o);
    CHECK(p != NULL, "create: %s", error_get());
    if (!p)
        return;
    CHECK(strcmp(probe_gpu_note(p), "") == 0, "CPU probe has a GPU note: %s", probe_gpu_note(p));
    int dummy_stream;
    CHECK(probe_set_comm_stream(p, &dummy_stream) == 0, "comm stream on a CPU probe is ignored");
    const int steps = 3, buckets = 3;
    struct span comm_span[4][3];
    probe_push(p, PROBE_SETUP);
    probe_pop(p);
    for (int s = 1; s <= steps; s++) {
        probe_set_step(p, s, 1 + (s > 2));
        probe_push(p, PROBE_STEP);
        probe_push(p, PROBE_DATA);
        probe_pop(p);
        probe_push(p, PROBE_FORWARD);
        probe_pop(p);
        probe_push(p, PROBE_BACKWARD);
        for (int b = 0; b < buckets; b++) {
            probe_bucket_launch(p, b, 1000u * (unsigned)(b + 1));
            probe_bucket_issued(p, b);
            comm_span[s][b].s = clock_now_ns(); /* "the comm thread ran it" */
            comm_span[s][b].e = comm_span[s][b].s + 1000;
        }
        probe_pop(p);
        for (int b = 0; b < buckets; b++) /* bucket 2 of step 2: transport cannot tell */
            probe_bucket_range(p, b, 1000u * (unsigned)(b + 1),
                               s == 2 && b == 2 ? 0 : comm_span[s][b].s,
                               s == 2 && b == 2 ? 0 : comm_span[s][b].e);
        probe_push(p, PROBE_OPTIMIZER);
        probe_pop(p);
        probe_pop(p);
    }
    probe_pop(p); /* unbalanced */
    struct probe_stats st;
    probe_stats(p, &st);
    CHECK(st.unbalanced == 1, "unbalanced %llu", (unsigned long long)st.unbalanced);
    CHECK(st.rows == 1 + (uint64_t)steps * (5 + buckets), "rows %llu",
          (unsigned long long)st.rows);
    CHECK(st.cupti_active == 0, "CUPTI active on a CPU probe");
    CHECK(probe_destroy(p) == 0, "destroy: %s", error_get());

    char path[700];
    trace_path(path, sizeof path, dir, 1);
    struct parsed t;
    int nl;
    parse_trace(path, &t, &nl);
    CHECK(trace_well_formed(&t), "probe trace not well formed");
    if (!trace_well_formed(&t))
        return;
    /* per step: the spans of each phase, from the rows */
    struct span ph[4][PROBE_PHASE_COUNT];
    struct span ar[4][3];
    int count[4][PROBE_PHASE_COUNT] = {{0}};
    int64_t last_end = 0;
    int order_ok = 1, fields_ok = 1;
    for (size_t i = 1; i < t.n; i++) {
        char **r = t.rows[i];
        int s = atoi(r[1]), phase = phase_from_name(r[3]), bucket = atoi(r[4]);
        struct span sp = {atoll(r[6]), atoll(r[7])};
        if (s < 0 || s > steps || phase < 0) {
            fields_ok = 0;
            continue;
        }
        fields_ok &= strcmp(r[0], "1") == 0 && strcmp(r[5], "host") == 0 &&
                     strcmp(r[10], "range") == 0 && sp.e >= sp.s;
        fields_ok &= atoi(r[2]) == (s == 0 ? 0 : 1 + (s > 2));
        if (phase == PROBE_ALLREDUCE) {
            char name[32];
            snprintf(name, sizeof name, "allreduce.b%d", bucket);
            fields_ok &= bucket >= 0 && bucket < buckets && strcmp(r[9], name) == 0 &&
                         atoll(r[8]) == 1000ll * (bucket + 1) && strcmp(r[11], "1") == 0;
            if (bucket >= 0 && bucket < buckets)
                ar[s][bucket] = sp;
        } else {
            fields_ok &= bucket == -1 && strcmp(r[9], r[3]) == 0 && strcmp(r[8], "0") == 0 &&
                         atoi(r[11]) == phase_stream((enum probe_phase)phase);
            if (sp.e < last_end && phase != PROBE_STEP)
                order_ok = 0; /* sibling ranges complete in order */
            last_end = sp.e;
        }
        ph[s][phase] = sp;
        count[s][phase]++;
    }
    CHECK(fields_ok, "a row has wrong fields");
    CHECK(order_ok, "sibling ranges out of order");
    CHECK(count[0][PROBE_SETUP] == 1, "setup rows %d", count[0][PROBE_SETUP]);
    for (int s = 1; s <= steps; s++) {
        CHECK(count[s][PROBE_STEP] == 1 && count[s][PROBE_DATA] == 1 &&
                  count[s][PROBE_FORWARD] == 1 && count[s][PROBE_BACKWARD] == 1 &&
                  count[s][PROBE_OPTIMIZER] == 1 && count[s][PROBE_ALLREDUCE] == buckets,
              "step %d: wrong row counts", s);
        struct span st_ = ph[s][PROBE_STEP];
        const int inner[] = {PROBE_DATA, PROBE_FORWARD, PROBE_BACKWARD, PROBE_OPTIMIZER};
        for (int k = 0; k < 4; k++)
            CHECK(ph[s][inner[k]].s >= st_.s && ph[s][inner[k]].e <= st_.e,
                  "step %d: %s not inside step", s, phase_name((enum probe_phase)inner[k]));
        for (int k = 0; k + 1 < 4; k++)
            CHECK(ph[s][inner[k]].e <= ph[s][inner[k + 1]].s, "step %d: %s overlaps %s", s,
                  phase_name((enum probe_phase)inner[k]),
                  phase_name((enum probe_phase)inner[k + 1]));
        for (int b = 0; b < buckets; b++) {
            if (s == 2 && b == 2) /* launch..wait: starts inside backward */
                CHECK(ar[s][b].s >= ph[s][PROBE_BACKWARD].s &&
                          ar[s][b].s <= ph[s][PROBE_BACKWARD].e &&
                          ar[s][b].e <= ph[s][PROBE_OPTIMIZER].s,
                      "fallback all-reduce span not launch..wait");
            else
                CHECK(ar[s][b].s == comm_span[s][b].s && ar[s][b].e == comm_span[s][b].e,
                      "step %d bucket %d: the comm span was not written as given", s, b);
        }
    }
    parsed_free(&t);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(void)
{
    char *d = test_tmpdir();
    if (!d)
        test_skip("no temp directory");
    snprintf(tmp, sizeof tmp, "%s", d);
    free(d);

    test_round_trip();
    test_long_row_refused();
    test_threshold();
    test_threads();
    test_death(DIE_SIGTERM, "sigterm", 0);
    test_death(DIE_ABORT, "abort", 0);
    test_death(DIE_SEGV, "segv", 0);
    for (int i = 0; i < 4; i++)
        test_death(DIE_TERM_WHILE_BUSY, "busy", i);
    for (int i = 0; i < 16; i++)
        test_death(DIE_TERM_IN_WRITER, "in-writer", i);
    test_sigkill();
    test_chained_handler();
    test_off();
    test_full_cost();
    test_probe_rows();

    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_finish();
}
