/* run.c — reading run directories (see run.h): meta.csv and metrics.csv through a small
 * row-at-a-time libcsv helper; rankN.trace.csv straight into flat row arrays (no per-row
 * allocation) through one pair of field/row callbacks, fed two ways: a plain line (no
 * quote, no stray carriage return: every line the probes write for ranges) is split at
 * its commas here, anything else (quoted kernel names, a line cut short, odd line ends)
 * goes through libcsv's streaming csv_parse.  Measured with scripts/bench-report on a
 * 2-core VM: libcsv alone read about 1.3M rows/s, the fast path for plain lines 2-3M. */
#include "report/input/run.h"

#include <csv.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/flight_file.h"
#include "common/printable.h"
#include "common/vec.h"
#include "report/input/ops.h"
#include "report/input/sort.h"

#define RUN_READ_CHUNK (1u << 20)
/* A row's times as a run can have them: within 4e18 ns (127 years) of the clock's zero,
 * lasting at most 1e14 ns (28 hours), the bounds of the imports (report/input/import_core.h);
 * beyond them a row is left out with a warning (an end_ns of INT64_MAX made a p95 of
 * 9.2e12 ms), and sums of durations stay far from int64 overflow. */
#define RUN_MAX_TIME_NS 4000000000000000000LL
#define RUN_MAX_ROW_NS 100000000000000LL

static char *run_strdup(const char *s)
{
    char *d = strdup(s);
    if (!d)
        error_set("report: out of memory copying a %zu-byte string", strlen(s));
    return d;
}

static char *run_path_join(const char *dir, const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", dir, name) < 0) {
        error_set("report: out of memory joining %s and %s", dir, name);
        return NULL;
    }
    return p;
}

static int run_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int run_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The length of a UTF-8 byte order mark at the start of a file's first bytes (3), else 0:
 * a spreadsheet or an editor on Windows may write one, and the header is the same. */
static size_t run_bom(const char *s, size_t len)
{
    return len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
}

/* ---- small CSV files (meta.csv, metrics.csv): one callback per complete row ---- */

typedef run_csv_row_fn run_row_fn;

struct run_rows {
    const char *path;
    run_row_fn fn;
    void *ctx;
    char *buf; /* the current row's fields, NUL-separated */
    size_t len, cap;
    size_t *offs; /* field -> offset in buf */
    size_t cap_offs;
    int nfields;
    long lines_done, row_line;
    int prev_cr;
    int failed;
    char **ptrs; /* field -> its string, for fn */
    size_t cap_ptrs;
};

static void run_rows_field(void *s, size_t len, void *data)
{
    struct run_rows *r = data;
    const char *f = s ? s : ""; /* libcsv passes NULL for an empty first field */
    if (r->failed)
        return;
    if (r->nfields == 0)
        r->row_line = r->lines_done + 1;
    for (size_t i = 0; i < len; i++)
        r->lines_done += f[i] == '\n';
    if (VEC_RESERVE(r->buf, r->cap, r->len + len + 1) ||
        VEC_RESERVE(r->offs, r->cap_offs, (size_t)r->nfields + 1)) {
        r->failed = 1;
        error_set("%s line %ld: out of memory reading a row", r->path, r->row_line);
        return;
    }
    r->offs[r->nfields++] = r->len;
    if (len)
        memcpy(r->buf + r->len, f, len);
    r->buf[r->len + len] = '\0';
    r->len += len + 1;
}

static void run_rows_end(int c, void *data)
{
    struct run_rows *r = data;
    if (r->failed)
        return;
    if (r->nfields == 0) { /* a blank line, or the '\n' of a "\r\n" */
        if (!(c == '\n' && r->prev_cr) && (c == '\n' || c == '\r'))
            r->lines_done++;
        r->prev_cr = c == '\r';
        return;
    }
    if (c == -1) {
        report_warn("%s line %ld: last line has no newline (truncated write?): dropped", r->path,
                    r->row_line);
    } else {
        r->lines_done++;
        r->prev_cr = c == '\r';
        if (VEC_RESERVE(r->ptrs, r->cap_ptrs, (size_t)r->nfields)) {
            r->failed = 1;
            error_set("%s line %ld: out of memory reading a row", r->path, r->row_line);
            return;
        }
        for (int i = 0; i < r->nfields; i++)
            r->ptrs[i] = r->buf + r->offs[i];
        if (r->fn(r->ctx, r->ptrs, r->nfields, r->row_line) < 0)
            r->failed = 1;
    }
    r->nfields = 0;
    r->len = 0;
}

/* a field of a file as a message shows it: one line, at most 40 bytes (a message holds
 * one such value) */
static const char *run_shown(const char *v)
{
    static _Thread_local char buf[TEXT_PRINTABLE_MAX];
    return text_printable(v, 40, buf, sizeof buf);
}

/* Call fn for every complete row of path (the header included).  Returns 0 or -1. */
static int run_rows_each(const char *path, run_row_fn fn, void *ctx)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set("%s: cannot open (%s)", path, strerror(errno));
    struct csv_parser p;
    if (csv_init(&p, CSV_STRICT | CSV_REPALL_NL) != 0) {
        close(fd);
        return error_set("%s: out of memory starting the CSV parser", path);
    }
    struct run_rows r = {.path = path, .fn = fn, .ctx = ctx};
    char buf[16384];
    ssize_t got;
    int rc = 0, first = 1;
    while (!r.failed && (got = read(fd, buf, sizeof buf)) != 0) {
        if (got < 0) {
            if (errno == EINTR)
                continue;
            rc = error_set("%s: read failed (%s)", path, strerror(errno));
            break;
        }
        const size_t bom = first ? run_bom(buf, (size_t)got) : 0;
        first = 0;
        got -= (ssize_t)bom;
        if (csv_parse(&p, buf + bom, (size_t)got, run_rows_field, run_rows_end, &r) != (size_t)got &&
            !r.failed) {
            rc = error_set("%s line %ld: malformed CSV (%s): rewrite the file", path,
                           r.lines_done + 1, csv_strerror(csv_error(&p)));
            break;
        }
    }
    if (rc == 0 && !r.failed)
        csv_fini(&p, run_rows_field, run_rows_end, &r);
    if (r.failed)
        rc = -1;
    csv_free(&p);
    close(fd);
    free(r.buf);
    free(r.offs);
    free(r.ptrs);
    return rc;
}

int run_csv_each(const char *path, run_csv_row_fn fn, void *ctx)
{
    return run_rows_each(path, fn, ctx);
}

/* ---- meta.csv: its rows as read, then parsed once (report/input/meta.h) ---- */

struct meta_read {
    const char *dir;
    struct meta_row *rows; /* strings owned */
    size_t n, cap;
};

static int run_meta_row(void *ctx, char **f, int nf, long line)
{
    struct meta_read *m = ctx;
    if (line == 1 && strcmp(f[0], "key") == 0)
        return 0;
    if (nf < 2)
        return error_set("%s/meta.csv line %ld: %d field(s), expected key,value", m->dir, line,
                         nf);
    if (VEC_RESERVE(m->rows, m->cap, m->n + 1))
        return error_set("%s/meta.csv line %ld: out of memory", m->dir, line);
    char *key = run_strdup(f[0]), *value = run_strdup(f[1]);
    if (!key || !value) {
        free(key);
        free(value);
        return -1;
    }
    m->rows[m->n++] = (struct meta_row){key, value, line};
    return 0;
}

int run_meta_read(const char *dir, struct run_meta *meta)
{
    char *path = run_path_join(dir, "meta.csv");
    if (!path)
        return -1;
    struct meta_read m = {.dir = dir};
    int rc = run_rows_each(path, run_meta_row, &m);
    if (rc == 0)
        rc = meta_parse(meta, m.rows, m.n, path);
    for (size_t i = 0; i < m.n; i++) {
        free((char *)m.rows[i].key);
        free((char *)m.rows[i].value);
    }
    free(m.rows);
    free(path);
    return rc;
}

/* dir/meta.csv into r->meta: 0, or -1 after error_set() */
static int run_read_meta(struct run *r, const char *dir)
{
    return run_meta_read(dir, &r->meta);
}

int run_mode_is(const struct run *r, const char *mode)
{
    return meta_is(&r->meta.mode, mode);
}

const char *run_rank_host(const struct run *r, int rank)
{
    return meta_text_at(&r->meta.rank_host, rank);
}

/* ---- metrics.csv ---- */

struct run_metrics {
    struct run *run;
    const char *path;
    int images_col; /* -1 until the header was read */
    int step_col;   /* -1: no step column */
};

/* Keep row's step and images (run->metrics_rows) when its step is an integer >= 1; a
 * row without one is counted in the images all the same.  0, or -1 (out of memory). */
static int run_metrics_keep(struct run_metrics *m, char **f, int nf, int64_t images)
{
    struct run *r = m->run;
    int64_t step;
    if (m->step_col < 0 || m->step_col >= nf ||
        meta_int_of(f[m->step_col], strlen(f[m->step_col]), &step) < 0 || step < 1)
        return 0;
    if (VEC_RESERVE(r->metrics_rows, r->metrics_cap, r->metrics_nrows + 1))
        return error_set("%s: out of memory", m->path);
    r->metrics_rows[r->metrics_nrows++] = (struct run_step_images){step, images};
    return 0;
}

static int run_metrics_row(void *ctx, char **f, int nf, long line)
{
    struct run_metrics *m = ctx;
    if (m->images_col < 0) {
        for (int i = 0; i < nf; i++) {
            if (strcmp(f[i], "images") == 0)
                m->images_col = i;
            if (strcmp(f[i], "step") == 0)
                m->step_col = i;
        }
        if (m->images_col < 0)
            return error_set("%s line %ld: no column 'images' in the header (expected "
                             "step,epoch,loss,lr,images)",
                             m->path, line);
        return 0;
    }
    int64_t v;
    if (m->images_col >= nf)
        return error_set("%s line %ld: %d field(s), no images column", m->path, line, nf);
    if (meta_int_of(f[m->images_col], strlen(f[m->images_col]), &v) < 0 || v < 0)
        return error_set("%s line %ld: images '%s' is not a non-negative integer", m->path, line,
                         run_shown(f[m->images_col]));
    m->run->metrics_images += v;
    m->run->metrics_steps++;
    return run_metrics_keep(m, f, nf, v);
}

/* ---- rankN.trace.csv ---- */

struct trace_parse {
    const char *path;
    int rank;
    int64_t offset_ns;
    struct strpool *names, *labels;
    struct rank_trace *out;
    long lines_done, row_line;
    int prev_cr;
    int field;    /* index of the next field in the current row */
    int header;   /* the header row is being read */
    int ncols;    /* fields per row, from the header */
    signed char *colmap; /* file column -> enum trace_column, or -1 (ignored column) */
    size_t cap_cols;
    int have[TRACE_COL_COUNT];
    struct run_row cur;
    int64_t cur_rank;
    long rows_ended;  /* rows (not blank lines) completed: tells when libcsv finished one */
    size_t absurd;    /* rows left out for a time no run has (trace_on_row) */
    long absurd_line; /* the first one's line */
    int bad;          /* the current row has a bad field; message in badmsg */
    char badmsg[320];
    int failed;       /* error_set() was called: stop */
};

/* "is not host, device or cupti": the values of the clock column, from the format */
static void trace_clock_choices(char *buf, size_t cap)
{
    size_t len = 0;
    for (int c = 0; c < TRACE_CLOCK_COUNT && len < cap; c++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s",
                                c == 0 ? "is not " : c + 1 < TRACE_CLOCK_COUNT ? ", " : " or ",
                                trace_clock_name(c));
}

static void trace_field_bad(struct trace_parse *t, const char *what, const void *s, size_t len)
{
    if (t->bad)
        return;
    t->bad = 1;
    char field[42], shown[TEXT_PRINTABLE_MAX];
    const size_t n = len > 41 ? 41 : len; /* one byte past 40 makes text_printable cut */
    memcpy(field, s, n);
    field[n] = '\0';
    snprintf(t->badmsg, sizeof t->badmsg, "column %s: '%s' %s",
             trace_column_name(t->colmap[t->field]),
             text_printable(field, 40, shown, sizeof shown), what);
}

static void trace_on_field(void *sv, size_t len, void *data)
{
    struct trace_parse *t = data;
    const char *s = sv ? sv : "";
    if (t->failed)
        return;
    if (t->field == 0)
        t->row_line = t->lines_done + 1;
    if (t->header) {
        for (size_t i = 0; i < len; i++)
            t->lines_done += s[i] == '\n';
        if (VEC_RESERVE(t->colmap, t->cap_cols, (size_t)t->field + 1)) {
            t->failed = 1;
            error_set("%s line 1: out of memory reading the header", t->path);
            return;
        }
        int col = trace_column_of(s, len);
        if (col >= 0 && t->have[col]) {
            t->failed = 1;
            error_set("%s line 1: column '%s' appears twice in the header", t->path,
                      trace_column_name(col));
            return;
        }
        if (col >= 0)
            t->have[col] = 1;
        t->colmap[t->field++] = (signed char)col;
        return;
    }
    if (t->field >= t->ncols) {
        t->field++;
        return;
    }
    int64_t v;
    struct run_row *r = &t->cur;
    switch (t->colmap[t->field]) {
    case TRACE_COL_RANK:
    case TRACE_COL_STEP:
    case TRACE_COL_EPOCH:
    case TRACE_COL_BUCKET:
    case TRACE_COL_STREAM:
        if (meta_int_of(s, len, &v) < 0 || v < INT32_MIN || v > INT32_MAX) {
            trace_field_bad(t, "is not a 32-bit integer", s, len);
            break;
        }
        switch (t->colmap[t->field]) {
        case TRACE_COL_RANK: t->cur_rank = v; break;
        case TRACE_COL_STEP: r->step = (int32_t)v; break;
        case TRACE_COL_EPOCH: r->epoch = (int32_t)v; break;
        case TRACE_COL_BUCKET: r->bucket = (int32_t)v; break;
        default: r->stream = (int32_t)v; break;
        }
        break;
    case TRACE_COL_START:
    case TRACE_COL_END:
    case TRACE_COL_BYTES:
        if (meta_int_of(s, len, &v) < 0) {
            trace_field_bad(t, "is not an integer", s, len);
            break;
        }
        if (t->colmap[t->field] == TRACE_COL_BYTES) {
            if (v < 0)
                trace_field_bad(t, "is negative", s, len);
            r->bytes = v;
        } else if ((v > 0 && t->offset_ns > INT64_MAX - v) ||
                   (v < 0 && t->offset_ns < INT64_MIN - v)) {
            trace_field_bad(t, "overflows with the clock offset", s, len);
        } else if (t->colmap[t->field] == TRACE_COL_START) {
            r->start_ns = v + t->offset_ns;
        } else {
            r->end_ns = v + t->offset_ns;
        }
        break;
    case TRACE_COL_CLOCK:
        if ((v = trace_clock_of(s, len)) >= 0) {
            r->clock = (uint8_t)v;
        } else {
            char what[96];
            trace_clock_choices(what, sizeof what);
            trace_field_bad(t, what, s, len);
        }
        break;
    case TRACE_COL_PHASE:
    case TRACE_COL_KIND:
    case TRACE_COL_NAME: {
        if (len && memchr(s, '\n', len)) /* a quoted line break: keep line numbers right */
            for (size_t i = 0; i < len; i++)
                t->lines_done += s[i] == '\n';
        struct strpool *pool = t->colmap[t->field] == TRACE_COL_NAME ? t->names : t->labels;
        uint32_t id = strpool_intern(pool, s, len);
        if (id == STRPOOL_NONE) {
            t->failed = 1;
            error_wrap("%s line %ld", t->path, t->row_line);
            return;
        }
        if (t->colmap[t->field] == TRACE_COL_NAME)
            r->name = id;
        else if (t->colmap[t->field] == TRACE_COL_PHASE)
            r->phase = id;
        else
            r->kind = id;
        break;
    }
    default:
        break;
    }
    t->field++;
}

static int trace_header_done(struct trace_parse *t)
{
    for (int c = 0; c < TRACE_COL_COUNT; c++)
        if (!t->have[c])
            return error_set("%s line 1: no column '%s' in the header (probes/TRACE.md: "
                             TRACE_COLUMNS_CSV ")",
                             t->path, trace_column_name(c));
    t->ncols = t->field;
    t->header = 0;
    return 0;
}

static int trace_append(struct trace_parse *t)
{
    struct rank_trace *o = t->out;
    if (VEC_RESERVE(o->rows, o->cap, o->n + 1))
        return error_set("%s line %ld: out of memory growing to %zu rows", t->path,
                         t->row_line, o->n + 1);
    o->rows[o->n++] = t->cur;
    return 0;
}

static void trace_on_row(int c, void *data)
{
    struct trace_parse *t = data;
    if (t->failed)
        return;
    if (t->field == 0) { /* a blank line, or the '\n' of a "\r\n" */
        if (!(c == '\n' && t->prev_cr) && (c == '\n' || c == '\r'))
            t->lines_done++;
        t->prev_cr = c == '\r';
        return;
    }
    if (c == -1 && !t->header) {
        report_warn("%s line %ld: last line has no newline (truncated write?): dropped", t->path,
                    t->row_line);
    } else {
        if (c != -1) {
            t->lines_done++;
            t->prev_cr = c == '\r';
        }
        if (t->header) {
            if (trace_header_done(t) < 0)
                t->failed = 1;
        } else if (t->field != t->ncols) {
            t->failed = 1;
            error_set("%s line %ld: %d field(s), the header has %d", t->path, t->row_line,
                      t->field, t->ncols);
        } else if (t->bad) {
            t->failed = 1;
            error_set("%s line %ld: %s", t->path, t->row_line, t->badmsg);
        } else if (t->cur.end_ns < t->cur.start_ns) {
            t->failed = 1;
            error_set("%s line %ld: end_ns is %lld ns before start_ns (end before start)", t->path,
                      t->row_line, (long long)(t->cur.start_ns - t->cur.end_ns));
        } else if (t->cur_rank != t->rank) {
            t->failed = 1;
            error_set("%s line %ld: rank %lld in the trace of rank %d", t->path, t->row_line,
                      (long long)t->cur_rank, t->rank);
        } else if (t->cur.start_ns < -RUN_MAX_TIME_NS || t->cur.end_ns > RUN_MAX_TIME_NS ||
                   (uint64_t)t->cur.end_ns - (uint64_t)t->cur.start_ns >
                       (uint64_t)RUN_MAX_ROW_NS) {
            if (t->absurd++ == 0)
                t->absurd_line = t->row_line;
        } else if (trace_append(t) < 0) {
            t->failed = 1;
        }
    }
    t->field = 0;
    t->bad = 0;
    t->rows_ended++;
    memset(&t->cur, 0, sizeof t->cur);
}

/* The fast path for a line (without its '\n') holding no quote and no other carriage
 * return: split at commas, trim spaces and tabs as libcsv does, and call the same callbacks.
 * Returns 0 (nothing done) when the line needs libcsv. */
static int trace_fast_line(struct trace_parse *t, char *s, size_t n)
{
    if (n && s[n - 1] == '\r')
        n--;
    if (memchr(s, '"', n) || memchr(s, '\r', n))
        return 0;
    if (n == 0) { /* a blank line */
        t->lines_done++;
        t->prev_cr = 0;
        return 1;
    }
    char *p = s, *end = s + n;
    for (;;) {
        char *c = p;
        while (c < end && *c != ',')
            c++;
        char *a = p, *b = c;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        trace_on_field(a, (size_t)(b - a), t);
        if (c == end)
            break;
        p = c + 1;
    }
    trace_on_row('\n', t);
    return 1;
}

/* Feed bytes to libcsv (quoted fields, odd line ends, a last line without newline);
 * *in_csv says whether libcsv is still inside a row afterwards.  Returns 0 or -1. */
static int trace_feed_csv(struct trace_parse *t, struct csv_parser *p, const char *s, size_t n,
                          int *in_csv)
{
    long rows_before = t->rows_ended;
    if (csv_parse(p, s, n, trace_on_field, trace_on_row, t) != n && !t->failed)
        return error_set("%s line %ld: malformed CSV (%s, e.g. a stray quote)", t->path,
                         t->lines_done + 1, csv_strerror(csv_error(p)));
    *in_csv = t->rows_ended == rows_before || t->field > 0;
    return 0;
}

/* A row's fields folded into 64 bits (FNV-1a), for finding repeated rows. */
static uint64_t trace_row_hash(const struct run_row *r)
{
    const int64_t v[] = {r->start_ns, r->end_ns, r->bytes, r->step, r->epoch, r->bucket,
                         r->stream, r->name, r->phase, r->kind, r->clock};
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)v;
    for (size_t i = 0; i < sizeof v; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

struct row_key {
    int64_t key; /* the hash */
    size_t i;    /* the row */
};

#define ROW_CMP_(f)                                                                          \
    if (a->f != b->f)                                                                        \
        return a->f < b->f ? -1 : 1;
/* Rows field for field (0: the same row). */
static int trace_row_cmp(const struct run_row *a, const struct run_row *b)
{
    ROW_CMP_(start_ns) ROW_CMP_(end_ns) ROW_CMP_(bytes) ROW_CMP_(step) ROW_CMP_(epoch)
    ROW_CMP_(bucket) ROW_CMP_(stream) ROW_CMP_(name) ROW_CMP_(phase) ROW_CMP_(kind)
    ROW_CMP_(clock)
    return 0;
}
#undef ROW_CMP_

/* row_keys of one hash: by their rows' fields, then file order */
static int trace_key_cmp(const void *x, const void *y, void *rows)
{
    const struct row_key *a = x, *b = y;
    const struct run_row *r = rows;
    int c = trace_row_cmp(&r[a->i], &r[b->i]);
    return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* Leave out rows that repeat an earlier row field for field (a trace written twice, rows
 * concatenated): no two ranges or activities of a run have the same times and everything
 * else, and a repeated one counts twice in every table.  *dropped gets how many.  Returns
 * 0, or -1 after error_set(). */
static int trace_drop_repeats(struct rank_trace *t, size_t *dropped)
{
    *dropped = 0;
    if (t->n < 2)
        return 0;
    struct row_key *k = malloc(t->n * sizeof *k);
    unsigned char *gone = calloc(t->n, 1);
    if (!k || !gone) {
        free(k);
        free(gone);
        return error_set("%s: out of memory checking %zu rows for repeats", t->path, t->n);
    }
    for (size_t i = 0; i < t->n; i++)
        k[i] = (struct row_key){(int64_t)trace_row_hash(&t->rows[i]), i};
    int rc = sort_by_i64(k, t->n, sizeof *k, offsetof(struct row_key, key));
    /* equal hashes are adjacent; within one hash (almost always one row, or copies of
     * one), rows sorted by their fields then file order: a copy follows its first */
    for (size_t a = 0; rc == 0 && a < t->n;) {
        size_t b = a + 1;
        while (b < t->n && k[b].key == k[a].key)
            b++;
        if (b - a > 1)
            qsort_r(k + a, b - a, sizeof *k, trace_key_cmp, t->rows);
        for (size_t j = a + 1; j < b; j++)
            if (trace_row_cmp(&t->rows[k[j - 1].i], &t->rows[k[j].i]) == 0) {
                gone[k[j].i] = 1;
                (*dropped)++;
            }
        a = b;
    }
    if (rc == 0 && *dropped) {
        size_t n = 0;
        for (size_t i = 0; i < t->n; i++)
            if (!gone[i])
                t->rows[n++] = t->rows[i];
        t->n = n;
    }
    free(k);
    free(gone);
    return rc < 0 ? error_wrap("%s", t->path) : 0;
}

/* What the tables would leave out of a trace without a word, said with a count: repeated
 * rows (left out), phases the format does not have, all-reduce rows without a bucket.
 * Returns 0, or -1 after error_set(). */
static int trace_check_rows(const struct strpool *labels, struct rank_trace *t)
{
    size_t dropped;
    if (trace_drop_repeats(t, &dropped) < 0)
        return -1;
    if (dropped)
        report_warn("%s: %zu row(s) repeat an earlier row field for field (a trace written "
                    "twice?): counted once",
                    t->path, dropped);
    signed char *known = calloc((size_t)labels->n + 1, 1); /* 0 unseen, 1 a phase, -1 not */
    if (!known)
        return error_set("%s: out of memory", t->path);
    const uint32_t allreduce = strpool_find(labels, trace_phase_name(TRACE_PHASE_ALLREDUCE));
    size_t unknown = 0, no_bucket = 0;
    uint32_t first_unknown = STRPOOL_NONE;
    for (size_t i = 0; i < t->n; i++) {
        const struct run_row *r = &t->rows[i];
        if (r->phase < labels->n && known[r->phase] == 0) {
            const char *ph = strpool_get(labels, r->phase);
            known[r->phase] = trace_phase_of(ph, strlen(ph)) >= 0 ? 1 : -1;
        }
        if (r->phase < labels->n && known[r->phase] < 0) {
            unknown++;
            if (first_unknown == STRPOOL_NONE)
                first_unknown = r->phase;
        }
        no_bucket += r->phase == allreduce && r->bucket < 0;
    }
    free(known);
    char shown[TEXT_PRINTABLE_MAX];
    if (unknown)
        report_warn("%s: %zu row(s) of a phase the trace format does not have (e.g. '%s'; "
                    "probes/TRACE.md): listed under it in phases.csv, but counted as neither "
                    "compute nor communication",
                    t->path, unknown,
                    text_printable(strpool_get(labels, first_unknown), 40, shown, sizeof shown));
    if (no_bucket)
        report_warn("%s: %zu allreduce row(s) with a negative bucket (a gradient bucket's "
                    "all-reduce has its bucket id): in no row of buckets.csv",
                    t->path, no_bucket);
    return 0;
}

int trace_load(struct strpool *names, struct strpool *labels, const char *path, int rank,
               int64_t offset_ns, struct rank_trace *out)
{
    out->rank = rank;
    out->offset_ns = offset_ns;
    out->path = run_strdup(path);
    if (!out->path)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set("%s: cannot open (%s)", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        /* rows are at least ~40 bytes: reserve for the file at once (grows if not enough) */
        size_t guess = (size_t)st.st_size / 40 + 16;
        out->rows = malloc(guess * sizeof *out->rows);
        out->cap = out->rows ? guess : 0;
    }
    struct csv_parser p;
    if (csv_init(&p, CSV_STRICT | CSV_REPALL_NL | CSV_STRICT_FINI) != 0) {
        close(fd);
        return error_set("%s: out of memory starting the CSV parser", path);
    }
    struct trace_parse t = {.path = path, .rank = rank, .offset_ns = offset_ns, .names = names,
                            .labels = labels, .out = out, .header = 1};
    char *buf = malloc(RUN_READ_CHUNK);
    int rc = 0;
    if (!buf)
        rc = error_set("%s: out of memory for the read buffer", path);
    size_t keep = 0; /* bytes of an unfinished line carried over at buf[0] */
    int in_csv = 0;  /* libcsv is in the middle of a row */
    int first = 1;
    ssize_t got;
    while (rc == 0 && !t.failed && (got = read(fd, buf + keep, RUN_READ_CHUNK - keep)) != 0) {
        if (got < 0) {
            if (errno == EINTR)
                continue;
            rc = error_set("%s: read failed (%s)", path, strerror(errno));
            break;
        }
        size_t len = keep + (size_t)got, pos = first ? run_bom(buf, len) : 0;
        first = 0;
        while (rc == 0 && !t.failed && pos < len) {
            const char *nl = memchr(buf + pos, '\n', len - pos);
            if (!nl) {
                if (pos == 0 && len == RUN_READ_CHUNK) { /* a line longer than the buffer */
                    rc = trace_feed_csv(&t, &p, buf, len, &in_csv);
                    pos = len;
                }
                break;
            }
            size_t n = (size_t)(nl - (buf + pos));
            if (in_csv || !trace_fast_line(&t, buf + pos, n))
                rc = trace_feed_csv(&t, &p, buf + pos, n + 1, &in_csv);
            pos += n + 1;
        }
        keep = len - pos;
        memmove(buf, buf + pos, keep);
    }
    if (rc == 0 && !t.failed && keep > 0) /* the last line has no newline */
        rc = trace_feed_csv(&t, &p, buf, keep, &in_csv);
    if (rc == 0 && !t.failed && csv_fini(&p, trace_on_field, trace_on_row, &t) != 0 && !t.failed)
        report_warn("%s line %ld: last line ends inside a quoted field (truncated write?): dropped",
                    path, t.lines_done + 1);
    if (rc == 0 && !t.failed && t.header)
        rc = error_set("%s: empty file: expected the header line " TRACE_COLUMNS_CSV
                       " (probes/TRACE.md); rerun the training or delete the file to report the "
                       "other ranks",
                       path);
    if (t.failed)
        rc = -1;
    csv_free(&p);
    close(fd);
    free(buf);
    free(t.colmap);
    if (rc == 0 && t.absurd)
        report_warn("%s: %zu row(s) with a time no run has (beyond %.0e ns, or lasting more "
                    "than %.0f hours; first at line %ld): left out of every table",
                    path, t.absurd, (double)RUN_MAX_TIME_NS, RUN_MAX_ROW_NS / 3.6e12,
                    t.absurd_line);
    if (rc == 0)
        rc = trace_check_rows(labels, out);
    return rc;
}

void rank_trace_free(struct rank_trace *t)
{
    free(t->path);
    free(t->rows);
    free(t->clock_method);
    free(t->host);
    free(t->flight);
    for (int i = 0; i < t->kern.nstreams; i++)
        free(t->kern.streams[i].v);
    free(t->kern.streams);
    op_table_free(t->ops);
    free(t->ops);
    memset(t, 0, sizeof *t);
}

/* ---- runs ---- */

void runset_init(struct runset *rs)
{
    memset(rs, 0, sizeof *rs);
    strpool_init(&rs->names);
    strpool_init(&rs->labels);
}

static void run_free(struct run *r)
{
    meta_free(&r->meta);
    for (int i = 0; i < r->nranks; i++)
        rank_trace_free(&r->ranks[i]);
    free(r->ranks);
    free(r->metrics_rows);
    free(r->dir);
    free(r->label);
}

void runset_free(struct runset *rs)
{
    for (int i = 0; i < rs->n; i++)
        run_free(&rs->runs[i]);
    free(rs->runs);
    strpool_free(&rs->names);
    strpool_free(&rs->labels);
    free(rs->default_out);
    memset(rs, 0, sizeof *rs);
}

/* The highest N with a rankN.trace.csv in dir, or -1. */
static int run_highest_rank_file(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int hi = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        const int n = trace_file_rank(e->d_name);
        if (n >= 0 && n < 65536 && n > hi)
            hi = n;
    }
    closedir(d);
    return hi;
}

/* Say so when dir holds trace files of ranks at or above world_size (an earlier run's
 * left in the directory, or a meta.csv of another run): they are not read. */
static void run_warn_ranks_above(const char *dir, int world_size)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    int above = 0, first = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        const int n = trace_file_rank(e->d_name);
        if (n >= world_size) {
            above++;
            first = first < 0 || n < first ? n : first;
        }
    }
    closedir(d);
    if (above)
        report_warn("%s: %d trace file(s) of a rank not below meta.csv's world_size %d (e.g. "
                    TRACE_FILE_FORMAT "): not read",
                    dir, above, world_size, first);
}

/* rankN.flight.csv beside the trace (probes/TRACE.md), as common/flight_file.h reads it:
 * "all-gather #80 (failed)"; NULL when there is none (or no memory). */
static char *run_flight_position(const char *dir, int rank)
{
    char where[160];
    return flight_file_position(dir, rank, where, sizeof where) ? run_strdup(where) : NULL;
}

/* The steps a run that did not finish (no meta.csv `steps`) planned: epochs x the batches
 * of one rank's DistributedSampler share (ceil, or floor with drop_last, of train_samples /
 * world_size), the trainer's loop (trainer/train_step.c); 0 when meta.csv does not say. */
static int64_t run_planned_steps(const struct run *r)
{
    const struct meta_value *keys[] = {&r->meta.epochs, &r->meta.train_samples,
                                       &r->meta.batch_size, &r->meta.world_size};
    int64_t v[4];
    for (int k = 0; k < 4; k++) {
        v[k] = keys[k]->i;
        if (!keys[k]->s || v[k] < 1 || v[k] > INT32_MAX)
            return 0;
    }
    const struct meta_value *dl = &r->meta.drop_last;
    int64_t share = dl->s && dl->i == 1 ? v[1] / v[3] : (v[1] + v[3] - 1) / v[3];
    return v[0] * ((share + v[2] - 1) / v[2]);
}

/* Warn about a rank whose trace is missing steps the run took (meta.csv `steps`, written
 * by rank 0 at the end of a run that finished) or, in a run that did not finish, planned:
 * a rank that stopped there (it died, or hung and was stopped), or rows lost to a full
 * disk.  Its figures then cover part of the run: the rank is marked cut (run.h) and the
 * report says so. */
static void run_check_steps(struct run *r)
{
    int64_t total = r->meta.steps.i;
    if (!r->meta.steps.s || total < 1)
        total = run_planned_steps(r);
    if (total < 1)
        return;
    for (int i = 0; i < r->nranks; i++) {
        struct rank_trace *t = &r->ranks[i];
        int64_t lo = INT64_MAX, hi = 0;
        for (size_t k = 0; k < t->n; k++)
            if (t->rows[k].step > 0) {
                lo = t->rows[k].step < lo ? t->rows[k].step : lo;
                hi = t->rows[k].step > hi ? t->rows[k].step : hi;
            }
        t->last_step = hi;
        t->run_steps = total;
        t->cut = hi < total;
        if (hi == 0) {
            report_warn("%s: rank %d's trace has no training step but the run took %lld: it "
                        "stopped before its first step, or its rows were lost (a full "
                        "disk?); its figures are empty",
                        t->path, t->rank, (long long)total);
            continue;
        }
        if (hi < total) {
            report_warn("%s: rank %d's trace ends at step %lld of %lld: it stopped there (it "
                        "died or hung, or its rows were lost to a full disk); its figures "
                        "cover part of the run and its overlap is left empty",
                        t->path, t->rank, (long long)hi, (long long)total);
            continue;
        }
        if (hi - lo >= (int64_t)1 << 26) /* not a run this machine took */
            continue;
        size_t span = (size_t)(hi - lo + 1);
        unsigned char *seen = calloc((span + 7) / 8, 1);
        if (!seen)
            continue;
        for (size_t k = 0; k < t->n; k++)
            if (t->rows[k].step >= lo) {
                size_t s = (size_t)(t->rows[k].step - lo);
                seen[s / 8] |= (unsigned char)(1u << (s % 8));
            }
        size_t missing = 0;
        for (size_t s = 0; s < span; s++)
            missing += !(seen[s / 8] >> (s % 8) & 1);
        free(seen);
        if (missing)
            report_warn("%s: rank %d's trace has no rows for %zu of steps %lld..%lld: rows were "
                        "lost (a full disk?); its figures cover part of the run",
                        t->path, t->rank, missing, (long long)lo, (long long)hi);
    }
}

static int run_load_traces(struct runset *rs, struct run *r)
{
    r->ranks = calloc((size_t)r->world_size, sizeof *r->ranks);
    if (!r->ranks)
        return error_set("%s: out of memory for %d ranks", r->dir, r->world_size);
    int missing_offsets = 0;
    for (int rank = 0; rank < r->world_size; rank++) {
        char name[64];
        snprintf(name, sizeof name, TRACE_FILE_FORMAT, rank);
        char *path = run_path_join(r->dir, name);
        if (!path)
            return -1;
        if (!run_is_file(path)) {
            free(path);
            continue;
        }
        /* (a clock offset that is no integer failed meta.csv's parse) */
        const struct meta_value *off = meta_at(&r->meta.rank_clock_offset_ns, rank);
        const int64_t offset = off ? off->i : 0;
        if (!off && rank > 0)
            missing_offsets++;
        struct rank_trace *t = &r->ranks[r->nranks];
        int rc = trace_load(&rs->names, &rs->labels, path, rank, offset, t);
        free(path);
        r->nranks++; /* freed with the run even when half-read */
        if (rc < 0)
            return -1;
        /* rank 0's clock is the reference; the others were measured against it through
         * the store (probes/TRACE.md "Clock alignment") */
        t->clock_method = run_strdup(rank == 0 ? "reference"
                                     : off     ? "meta.csv (store round trips)"
                                               : "none (no offset in meta.csv)");
        if (!t->clock_method)
            return -1;
        t->flight = run_flight_position(r->dir, rank);
    }
    run_warn_ranks_above(r->dir, r->world_size);
    /* one node's directory of a multi-node run (its ranks only): runset_finish merges the
     * nodes' directories and warns then if ranks are still missing */
    const struct meta_value *lw = &r->meta.local_world_size;
    int one_node = r->meta.node_rank.s && lw->s && lw->i < r->world_size;
    if (r->nranks == 0) {
        report_warn("%s: no rank traces (rank0.trace.csv ...): only the speedup row, from "
                    "meta.csv",
                    r->dir);
    } else if (r->nranks < r->world_size && !one_node) {
        char present[256] = "";
        size_t len = 0;
        for (int i = 0; i < r->nranks && len < sizeof present - 16; i++)
            len += (size_t)snprintf(present + len, sizeof present - len, "%s%d", i ? "," : "",
                                    r->ranks[i].rank);
        report_warn("%s: world_size is %d but only %d rank trace(s) found: reporting rank(s) %s",
                    r->dir, r->world_size, r->nranks, present);
    }
    if (missing_offsets && r->nranks > 1)
        report_warn("%s/meta.csv: no clock_offset_ns for %d rank(s): their clocks are taken as "
                    "rank 0's",
                    r->dir, missing_offsets);
    run_check_steps(r);
    return 0;
}

struct run *runset_new_run(struct runset *rs, const char *dir)
{
    if (VEC_RESERVE(rs->runs, rs->cap_runs, (size_t)rs->n + 1)) {
        error_set("report: out of memory adding run %s", dir);
        return NULL;
    }
    struct run *r = &rs->runs[rs->n++];
    memset(r, 0, sizeof *r);
    r->dir = run_strdup(dir);
    return r->dir ? r : NULL;
}

int run_dir_is_run(const char *dir)
{
    char *meta = run_path_join(dir, "meta.csv");
    int yes = meta && run_is_file(meta);
    free(meta);
    return yes;
}

static int run_load(struct runset *rs, const char *dir)
{
    struct run *r = runset_new_run(rs, dir);
    if (!r)
        return -1;
    r->format = "ddpprof";
    if (run_read_meta(r, dir) < 0)
        return -1;
    const struct meta_value *ws = &r->meta.world_size; /* (one that is no integer failed) */
    if (ws->s && (ws->i < 1 || ws->i > 65536))
        return error_set("%s/meta.csv: world_size is '%s', not a rank count in 1..65536", dir,
                         run_shown(ws->s));
    if (ws->s) {
        r->world_size = (int)ws->i;
    } else {
        r->world_size = run_highest_rank_file(dir) + 1;
        if (r->world_size < 1)
            r->world_size = 1;
        report_warn("%s/meta.csv: no world_size: taking %d from the rank traces present", dir,
                    r->world_size);
    }
    int rc = 0;
    char *path = run_path_join(dir, "metrics.csv");
    if (!path)
        return -1;
    if (run_is_file(path)) {
        struct run_metrics m = {.run = r, .path = path, .images_col = -1, .step_col = -1};
        rc = run_rows_each(path, run_metrics_row, &m);
        r->has_metrics = rc == 0;
    } else {
        report_warn("%s: no metrics.csv: images counted as train_samples x epochs", dir);
    }
    free(path);
    if (rc < 0)
        return -1;
    return run_load_traces(rs, r);
}

static int run_cmp_name(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int rx = strcmp(x, "baseline") == 0 ? 0 : strcmp(x, "ddp") == 0 ? 1 : 2;
    int ry = strcmp(y, "baseline") == 0 ? 0 : strcmp(y, "ddp") == 0 ? 1 : 2;
    return rx != ry ? rx - ry : strcmp(x, y);
}

int runset_add_dir(struct runset *rs, const char *dir)
{
    if (!run_is_dir(dir))
        return error_set(access(dir, F_OK) == 0 ? "%s: not a directory (a run directory holds "
                                                   "meta.csv and rankN.trace.csv)"
                                                 : "%s: no such run directory",
                         dir);
    char *meta = run_path_join(dir, "meta.csv");
    if (!meta)
        return -1;
    int single = run_is_file(meta);
    free(meta);
    if (!rs->default_out && !(rs->default_out = run_strdup(dir)))
        return -1;
    if (single)
        return run_load(rs, dir);

    DIR *d = opendir(dir);
    if (!d)
        return error_set("%s: cannot list the directory (%s)", dir, strerror(errno));
    char **subs = NULL;
    size_t cap_subs = 0;
    int nsubs = 0, rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *sub = run_path_join(dir, e->d_name);
        char *m = sub ? run_path_join(sub, "meta.csv") : NULL;
        if (!m) {
            rc = -1;
        } else if (run_is_file(m)) {
            char *name = run_strdup(e->d_name);
            if (!name || VEC_RESERVE(subs, cap_subs, (size_t)nsubs + 1)) {
                free(name);
                rc = error_set("report: out of memory listing %s", dir);
            } else {
                subs[nsubs++] = name;
            }
        }
        free(m);
        free(sub);
    }
    closedir(d);
    if (rc == 0 && nsubs == 0)
        rc = error_set("%s: not a run directory (no meta.csv, and no baseline/ or ddp/ "
                       "subdirectory with one)",
                       dir);
    if (rc == 0)
        qsort(subs, (size_t)nsubs, sizeof *subs, run_cmp_name);
    for (int i = 0; i < nsubs; i++) {
        if (rc == 0) {
            char *sub = run_path_join(dir, subs[i]);
            rc = sub ? run_load(rs, sub) : -1;
            free(sub);
        }
        free(subs[i]);
    }
    free(subs);
    return rc;
}

/* The last k path components of dir ("a/b/c", 2 -> "b/c"), trailing slashes ignored. */
static char *run_tail(const char *dir, int k)
{
    size_t end = strlen(dir);
    while (end > 1 && dir[end - 1] == '/')
        end--;
    size_t start = end;
    for (int seen = 0; start > 0; start--) {
        if (dir[start - 1] == '/' && ++seen == k)
            break;
    }
    char *s = strndup(dir + start, end - start);
    if (!s)
        error_set("report: out of memory naming run %s", dir);
    return s;
}

int runset_add_siblings(struct runset *rs, const char *dir)
{
    char *copy = strdup(dir);
    if (!copy)
        return error_set("report: out of memory");
    size_t len = strlen(copy);
    while (len > 1 && copy[len - 1] == '/')
        copy[--len] = '\0';
    char *slash = strrchr(copy, '/');
    const char *parent = slash ? (slash == copy ? "/" : (*slash = '\0', copy)) : ".";
    const char *self = slash ? dir + (slash - copy) + 1 : dir;
    int rc = 0;
    static const char *const subs[] = {"baseline", "ddp"};
    for (int k = 0; k < 2 && rc == 0; k++) {
        if (strncmp(self, subs[k], strlen(subs[k])) == 0 &&
            (self[strlen(subs[k])] == '\0' || self[strlen(subs[k])] == '/'))
            continue;
        char *p = NULL;
        if (asprintf(&p, "%s/%s", parent, subs[k]) < 0) {
            rc = error_set("report: out of memory");
            break;
        }
        if (run_dir_is_run(p))
            rc = runset_add_dir(rs, p);
        free(p);
    }
    free(copy);
    return rc;
}

/* ---- several nodes: one run from the directories of its nodes ---- */

static int run_cmp_rank(const void *a, const void *b)
{
    const struct rank_trace *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Move the ranks of `from` that `into` lacks into `into` (duplicates, e.g. one shared
 * directory given twice, are dropped), then free `from`.  The run whose meta.csv is node 0's
 * (it holds rank 0's metrics and accuracy) keeps its meta; the merged run is named after
 * that directory. */
static int run_merge(struct run *into, struct run *from)
{
    /* from holds node 0's meta: swap everything but ranks */
    if (from->meta.node_rank.s && from->meta.node_rank.i == 0) {
        struct run tmp = *into;
        *into = *from;
        *from = tmp;
        struct rank_trace *ranks = into->ranks;
        int n = into->nranks;
        into->ranks = from->ranks;
        into->nranks = from->nranks;
        from->ranks = ranks;
        from->nranks = n;
    }
    struct rank_trace *all = realloc(into->ranks,
                                     (size_t)(into->nranks + from->nranks + 1) * sizeof *all);
    if (!all)
        return error_set("report: out of memory merging %s into %s", from->dir, into->dir);
    into->ranks = all;
    for (int k = 0; k < from->nranks; k++) {
        int dup = 0;
        for (int j = 0; j < into->nranks && !dup; j++)
            dup = into->ranks[j].rank == from->ranks[k].rank;
        if (dup) {
            rank_trace_free(&from->ranks[k]);
            continue;
        }
        into->ranks[into->nranks++] = from->ranks[k];
    }
    from->nranks = 0;
    qsort(into->ranks, (size_t)into->nranks, sizeof *into->ranks, run_cmp_rank);
    run_free(from);
    return 0;
}

/* Directories whose meta.csv name the same run_id are one run on several nodes (each node
 * writes its own ranks' traces, with the same clock offsets onto rank 0's clock): merge
 * them, in the order given, into the first. */
static int runset_merge_nodes(struct runset *rs)
{
    for (int i = 0; i < rs->n; i++) {
        const char *id = rs->runs[i].meta.run_id.s;
        if (!id)
            continue;
        int merged = 0;
        for (int j = i + 1; j < rs->n;) {
            const char *other = rs->runs[j].meta.run_id.s;
            if (!other || strcmp(other, id) != 0) {
                j++;
                continue;
            }
            if (run_merge(&rs->runs[i], &rs->runs[j]) < 0)
                return -1;
            memmove(&rs->runs[j], &rs->runs[j + 1], (size_t)(rs->n - j - 1) * sizeof *rs->runs);
            rs->n--;
            id = rs->runs[i].meta.run_id.s;
            merged = 1;
        }
        const struct run *r = &rs->runs[i];
        const struct meta_value *lw = &r->meta.local_world_size;
        if ((merged || (lw->s && lw->i < r->world_size)) && r->nranks > 0 &&
            r->nranks < r->world_size)
            report_warn("%s: a run of %d ranks on several nodes, but only %d rank trace(s) "
                        "found: give every node's run directory (ddpprof report NODE0_DIR "
                        "NODE1_DIR ...)",
                        r->dir, r->world_size, r->nranks);
    }
    return 0;
}

int runset_finish(struct runset *rs)
{
    if (runset_merge_nodes(rs) < 0)
        return -1;
    for (int k = 1; k <= 3; k++) {
        for (int i = 0; i < rs->n; i++) {
            free(rs->runs[i].label);
            rs->runs[i].label = k < 3 ? run_tail(rs->runs[i].dir, k) : run_strdup(rs->runs[i].dir);
            if (!rs->runs[i].label)
                return -1;
        }
        int clash = 0;
        for (int i = 0; i < rs->n; i++)
            for (int j = 0; j < i; j++)
                clash |= strcmp(rs->runs[i].label, rs->runs[j].label) == 0;
        if (!clash)
            break;
    }
    return 0;
}
