/* timeline.c — the merged Chrome trace (timeline.json, see timeline.h): one process per run
 * and rank, one thread per lane, one complete ("X") event per trace row.  Written through
 * a hand-rolled buffer with each distinct string escaped once, so a million rows take well
 * under a second. */
#include "report/output/timeline.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/vec.h"
#include "probes/trace_format.h"
#include "report/analysis/analysis.h"
#include "report/output/outfile.h"

struct jw {
    FILE *f;
    char buf[1 << 18]; /* longer strings (names have no cap) are written past it */
    size_t len;
};

static void jw_flush(struct jw *w)
{
    fwrite(w->buf, 1, w->len, w->f);
    w->len = 0;
}

static void jw_put(struct jw *w, const char *s, size_t n)
{
    if (w->len + n > sizeof w->buf) {
        jw_flush(w);
        if (n > sizeof w->buf) {
            fwrite(s, 1, n, w->f);
            return;
        }
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void jw_cstr(struct jw *w, const char *s)
{
    jw_put(w, s, strlen(s));
}


/* Appends for the fixed text: room made ahead by jw_reserve (one compare per event), a
 * string of any length through jw_put. */
static void jw_reserve(struct jw *w, size_t n)
{
    if (w->len + n > sizeof w->buf)
        jw_flush(w);
}

static void jw_raw(struct jw *w, const char *s, size_t n)
{
    if (w->len + n > sizeof w->buf) {
        jw_put(w, s, n);
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

#define JW_LIT(w, lit) jw_raw((w), (lit), sizeof(lit) - 1)

static void jw_i64(struct jw *w, int64_t v)
{
    char tmp[24], *p = tmp + sizeof tmp;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    jw_raw(w, p, (size_t)(tmp + sizeof tmp - p));
}

/* ns as microseconds with three decimals, exactly ("1234567" -> "1234.567"). */
static void jw_us(struct jw *w, int64_t ns)
{
    if (ns < 0) {
        JW_LIT(w, "-");
        ns = -ns;
    }
    jw_i64(w, ns / 1000);
    char frac[4] = {'.', (char)('0' + ns % 1000 / 100), (char)('0' + ns % 100 / 10),
                    (char)('0' + ns % 10)};
    jw_raw(w, frac, 4);
}

char *timeline_json_quote(const char *s)
{
    size_t n = strlen(s); /* whole: a templated kernel's name can run to several KiB */
    char *out = n < (SIZE_MAX - 3) / 6 ? malloc(6 * n + 3) : NULL, *o = out;
    if (!out)
        return NULL;
    *o++ = '"';
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
            i++;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            *o++ = '\\';
            *o++ = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            i++;
        } else if (c < 0x20) {
            o += sprintf(o, "\\u%04x", c);
            i++;
        } else if (c < 0x80) {
            *o++ = (char)c;
            i++;
        } else {
            size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            if (c >= 0xf5)
                len = 0;
            size_t k = 1;
            while (len && k < len && i + k < n && ((unsigned char)s[i + k] & 0xc0) == 0x80)
                k++;
            if (len && k == len) {
                memcpy(o, s + i, len);
                o += len;
                i += len;
            } else {
                *o++ = '?';
                i++;
            }
        }
    }
    *o++ = '"';
    *o = '\0';
    return out;
}

/* Lazily built JSON literals for every string of a pool. */
struct quoted {
    const struct strpool *pool;
    char **lit;
    size_t *len;
};

static const char *quoted_get(struct quoted *q, uint32_t id, size_t *len)
{
    if (!q->lit[id]) {
        q->lit[id] = timeline_json_quote(strpool_get(q->pool, id));
        q->len[id] = q->lit[id] ? strlen(q->lit[id]) : 0;
    }
    if (!q->lit[id]) {
        *len = 3;
        return "\"?\"";
    }
    *len = q->len[id];
    return q->lit[id];
}

static void quoted_free(struct quoted *q, uint32_t n)
{
    if (q->lit)
        for (uint32_t i = 0; i < n; i++)
            free(q->lit[i]);
    free(q->lit);
    free(q->len);
}

/* The thread of a row: host lanes from 1, device-clock ranges from 100001, CUPTI streams
 * from 200001 (stream ids folded into 0..99998). */
static int timeline_tid(const struct run_row *r)
{
    int s = r->stream;
    if (s < 0 || s > 99998)
        s = (int)((unsigned)s % 99999u);
    int base = r->clock == TRACE_CLOCK_HOST ? 1 : r->clock == TRACE_CLOCK_DEVICE ? 100001 : 200001;
    return base + s;
}


/* "host compute", "device comm", "host stream 7", "cuda stream 13" (+ " #2" for the second
 * sub-lane): the clock and lane names of the trace format (probes/trace_format.h) */
static void timeline_thread_name(int tid, char *out, size_t size)
{
    int sub = tid / TIMELINE_SUBLANE;
    tid %= TIMELINE_SUBLANE;
    int base = tid >= 200001 ? 200001 : tid >= 100001 ? 100001 : 1, s = tid - base;
    const char *clock = trace_clock_name(base == 1 ? TRACE_CLOCK_HOST : TRACE_CLOCK_DEVICE);
    char suffix[16] = "";
    if (sub > 0)
        snprintf(suffix, sizeof suffix, " #%d", sub + 1);
    if (base == 200001)
        snprintf(out, size, "cuda stream %d%s", s, suffix);
    else if (s < TRACE_LANE_COUNT)
        snprintf(out, size, "%s %s%s", clock, trace_lane_name(s), suffix);
    else
        snprintf(out, size, "%s stream %d%s", clock, s, suffix);
}

/* Sorting a rank's rows for the sub-lane sweep: by lane, then start, longer first (an
 * enclosing slice before what it holds), then file order. */
static const struct run_row *sweep_rows;
static const int *sweep_lane;

static int cmp_sweep(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const struct run_row *x = &sweep_rows[i], *y = &sweep_rows[j];
    if (sweep_lane[i] != sweep_lane[j])
        return sweep_lane[i] < sweep_lane[j] ? -1 : 1;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    if (x->end_ns != y->end_ns)
        return x->end_ns > y->end_ns ? -1 : 1;
    return (i > j) - (i < j);
}

/* One sub-lane of the sweep: the end times of the slices still open on it, innermost last. */
struct sublane {
    int64_t *open;
    size_t n, cap;
};

int timeline_assign_lanes(const struct rank_trace *t, int *tid)
{
    size_t *order = malloc((t->n + 1) * sizeof *order);
    struct sublane *subs = NULL;
    size_t nsubs = 0, cap_subs = 0;
    int rc = order ? 0 : -1;
    for (size_t r = 0; r < t->n; r++)
        tid[r] = timeline_tid(&t->rows[r]);
    if (rc == 0) {
        for (size_t r = 0; r < t->n; r++)
            order[r] = r;
        sweep_rows = t->rows;
        sweep_lane = tid;
        qsort(order, t->n, sizeof *order, cmp_sweep);
    }
    int lane = 0;
    for (size_t k = 0; k < t->n && rc == 0; k++) {
        const struct run_row *row = &t->rows[order[k]];
        if (tid[order[k]] != lane) { /* a new lane: every sub-lane starts empty */
            lane = tid[order[k]];
            for (size_t j = 0; j < nsubs; j++)
                subs[j].n = 0;
        }
        size_t j = 0;
        for (;; j++) {
            if (j == nsubs) {
                if (VEC_RESERVE(subs, cap_subs, nsubs + 1) || j + 1 >= INT32_MAX / TIMELINE_SUBLANE) {
                    rc = -1;
                    break;
                }
                subs[nsubs++] = (struct sublane){0};
            }
            struct sublane *sl = &subs[j];
            while (sl->n && sl->open[sl->n - 1] <= row->start_ns)
                sl->n--; /* ended before this row starts */
            if (sl->n == 0 || sl->open[sl->n - 1] >= row->end_ns) { /* disjoint or nested */
                if (VEC_RESERVE(sl->open, sl->cap, sl->n + 1)) {
                    rc = -1;
                    break;
                }
                sl->open[sl->n++] = row->end_ns;
                break;
            }
        }
        if (rc == 0)
            tid[order[k]] = lane + (int)j * TIMELINE_SUBLANE;
    }
    for (size_t j = 0; j < nsubs; j++)
        free(subs[j].open);
    free(subs);
    free(order);
    return rc;
}

/* The distinct lanes of a rank: an open-addressing set of tids (all >= 1; 0 is empty). */
struct laneset {
    int *slot;
    size_t cap, n;
};

static int laneset_add(struct laneset *ls, int tid)
{
    if (2 * (ls->n + 1) > ls->cap) {
        size_t cap = ls->cap ? 2 * ls->cap : 64;
        int *slot = calloc(cap, sizeof *slot);
        if (!slot)
            return -1;
        for (size_t i = 0; i < ls->cap; i++)
            if (ls->slot[i]) {
                size_t h = (size_t)ls->slot[i] * 2654435761u & (cap - 1);
                while (slot[h])
                    h = (h + 1) & (cap - 1);
                slot[h] = ls->slot[i];
            }
        free(ls->slot);
        ls->slot = slot;
        ls->cap = cap;
    }
    size_t h = (size_t)tid * 2654435761u & (ls->cap - 1);
    while (ls->slot[h] && ls->slot[h] != tid)
        h = (h + 1) & (ls->cap - 1);
    if (!ls->slot[h]) {
        ls->slot[h] = tid;
        ls->n++;
    }
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void timeline_meta(struct jw *w, int *first, const char *what, int pid, int tid,
                          const char *key, const char *value_json)
{
    jw_cstr(w, *first ? "\n" : ",\n");
    *first = 0;
    jw_cstr(w, "{\"name\":\"");
    jw_cstr(w, what);
    jw_cstr(w, "\",\"ph\":\"M\",\"pid\":");
    jw_reserve(w, 64);
    jw_i64(w, pid);
    if (tid >= 0) {
        JW_LIT(w, ",\"tid\":");
        jw_i64(w, tid);
    }
    jw_cstr(w, ",\"args\":{\"");
    jw_cstr(w, key);
    jw_cstr(w, "\":");
    jw_cstr(w, value_json);
    jw_cstr(w, "}}");
}

/* DDPPROF_TIMELINE_COLLECT=DIR (the test suite sets it): a copy of every timeline written
 * goes to DIR/timeline.<pid>.<n>.json, where tests/test_timelines_valid.sh checks each one
 * against Perfetto's drawing rule.  Best effort: a copy that fails is only said. */
static void timeline_collect(const char *path)
{
    static int count;
    const char *dir = getenv("DDPPROF_TIMELINE_COLLECT");
    if (!dir || !*dir)
        return;
    char dst[4096];
    snprintf(dst, sizeof dst, "%s/timeline.%d.%d.json", dir, (int)getpid(), count++);
    FILE *in = fopen(path, "rb"), *out = in ? fopen(dst, "wb") : NULL;
    char buf[1 << 16];
    size_t n;
    int bad = !out;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0)
        bad = fwrite(buf, 1, n, out) != n;
    if (out && fclose(out) != 0)
        bad = 1;
    if (in)
        fclose(in);
    if (bad)
        fprintf(stderr, "ddpprof report: DDPPROF_TIMELINE_COLLECT: cannot copy %s to %s\n",
                path, dst);
}

/* ---- the bound: which rows are written ---- */

/* The steps of one run that are written: all rows, or those of steps in the windows. */
struct tl_keep {
    int all;
    int nwin;
    int lo[2], hi[2];
};

static int tl_kept(const struct tl_keep *k, const struct run_row *row)
{
    if (k->all)
        return 1;
    for (int j = 0; j < k->nwin; j++)
        if (row->step >= k->lo[j] && row->step <= k->hi[j])
            return 1;
    return 0;
}

/* About the bytes a row takes in the file (its name, phase and kind quoted, the fixed text
 * and numbers): the bound's measure. */
static size_t tl_row_bytes(struct quoted *names, struct quoted *labels, const struct run_row *row,
                           uint32_t range)
{
    size_t nn, np, nk = 0;
    quoted_get(names, row->name, &nn);
    quoted_get(labels, row->phase, &np);
    if (row->kind != range)
        quoted_get(labels, row->kind, &nk);
    return nn + np + nk + 150;
}

/* The rows to write: all when they fit in max_bytes (0: no bound), else per run the steps
 * of its windows around the median and slowest steps (st: rep_steps), w steps either side
 * for the largest w <= TIMELINE_WINDOW that fits (0 when none does).  keep[] gets one per
 * run; *what the sentence of the file's metadata. */
static void tl_choose(const struct runset *rs, const struct run_stat *st, size_t max_bytes,
                      struct quoted *names, struct quoted *labels, struct tl_keep *keep,
                      char *what, size_t cap)
{
    const uint32_t range = strpool_find(&rs->labels, trace_kind_name(TRACE_KIND_RANGE));
    size_t total = 0, rows = 0;
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < rs->runs[i].nranks; k++)
            for (size_t r = 0; r < rs->runs[i].ranks[k].n; r++) {
                total += tl_row_bytes(names, labels, &rs->runs[i].ranks[k].rows[r], range);
                rows++;
            }
    for (int i = 0; i < rs->n; i++)
        keep[i] = (struct tl_keep){.all = 1};
    if (max_bytes == 0 || total <= max_bytes || !st) {
        snprintf(what, cap, "every row (%zu)%s", rows,
                 max_bytes == 0 ? ": --timeline full" : "");
        return;
    }
    int w = TIMELINE_WINDOW;
    size_t kept_rows = 0;
    for (;; w--) {
        size_t bytes = 0;
        kept_rows = 0;
        for (int i = 0; i < rs->n; i++) {
            struct tl_keep *k = &keep[i];
            *k = (struct tl_keep){0};
            for (int j = 0; j < st[i].nrep && j < 2; j++) {
                k->lo[k->nwin] = st[i].rep_steps[j] - w;
                k->hi[k->nwin++] = st[i].rep_steps[j] + w;
            }
            for (int q = 0; q < rs->runs[i].nranks; q++)
                for (size_t r = 0; r < rs->runs[i].ranks[q].n; r++) {
                    const struct run_row *row = &rs->runs[i].ranks[q].rows[r];
                    if (tl_kept(k, row)) {
                        bytes += tl_row_bytes(names, labels, row, range);
                        kept_rows++;
                    }
                }
        }
        if (bytes <= max_bytes || w == 0)
            break;
    }
    size_t len = (size_t)snprintf(what, cap,
                                  "%zu of %zu rows, bounded to %zu MiB (ddpprof report "
                                  "--timeline full writes every row): every rank's rows of",
                                  kept_rows, rows, max_bytes >> 20);
    for (int i = 0; i < rs->n && len < cap; i++) {
        if (st[i].nrep == 0) {
            len += (size_t)snprintf(what + len, cap - len, "%s run %s: none (no step ranges)",
                                    i ? ";" : "", rs->runs[i].label);
            continue;
        }
        len += (size_t)snprintf(what + len, cap - len, "%s run %s: steps", i ? ";" : "",
                                rs->runs[i].label);
        for (int j = 0; j < keep[i].nwin && len < cap; j++)
            len += (size_t)snprintf(what + len, cap - len, "%s %d-%d (the %s step %d, %d either "
                                    "side)", j ? " and" : "", keep[i].lo[j], keep[i].hi[j],
                                    j == 0 ? "median" : "slowest", st[i].rep_steps[j], w);
    }
}

/* The file being written: its writer, the names quoted once, the lane of each row of the
 * rank being written. */
struct tl_file {
    struct jw *w;
    int first; /* no event written yet */
    struct quoted names, labels;
    int *row_tid;
    size_t cap_row_tid;
    uint32_t range; /* the label id of kind "range" */
    const char *path;
};

/* A rank's process (its name: run, rank and host) and its lanes (threads), each row's lane
 * into f->row_tid.  0, or -1 after error_set(). */
static int tl_rank_head(struct tl_file *f, const struct run *run, const struct rank_trace *t,
                        int i, int pid)
{
    struct jw *w = f->w;
    char buf[512];
    char *q;
    const char *host = run_rank_host(run, t->rank); /* several nodes: which one */
    if (host)
        snprintf(buf, sizeof buf, "%s rank %d (%.200s)", run->label, t->rank, host);
    else
        snprintf(buf, sizeof buf, "%s rank %d", run->label, t->rank);
    if (!(q = timeline_json_quote(buf)))
        return error_set("%s: out of memory", f->path);
    timeline_meta(w, &f->first, "process_name", pid, -1, "name", q);
    free(q);
    snprintf(buf, sizeof buf, "%d", i * 100000 + t->rank);
    timeline_meta(w, &f->first, "process_sort_index", pid, -1, "sort_index", buf);

    struct laneset ls = {0};
    int last = 0, oom = VEC_RESERVE(f->row_tid, f->cap_row_tid, t->n + 1) ||
                        timeline_assign_lanes(t, f->row_tid) < 0;
    for (size_t r = 0; r < t->n && !oom; r++) {
        if (f->row_tid[r] != last)
            oom = laneset_add(&ls, f->row_tid[r]) < 0;
        last = f->row_tid[r];
    }
    int *tids = oom ? NULL : malloc((ls.n + 1) * sizeof *tids);
    if (!tids) {
        free(ls.slot);
        return error_set("%s: out of memory listing the lanes of %s", f->path, t->path);
    }
    size_t nt = 0;
    for (size_t i = 0; i < ls.cap; i++)
        if (ls.slot[i])
            tids[nt++] = ls.slot[i];
    free(ls.slot);
    qsort(tids, nt, sizeof *tids, cmp_int);
    for (size_t r = 0; r < nt; r++) {
        char lane[64], qs[80];
        timeline_thread_name(tids[r], lane, sizeof lane);
        snprintf(qs, sizeof qs, "\"%s\"", lane);
        timeline_meta(w, &f->first, "thread_name", pid, tids[r], "name", qs);
        snprintf(qs, sizeof qs, "%d", tids[r]);
        timeline_meta(w, &f->first, "thread_sort_index", pid, tids[r], "sort_index", qs);
    }
    free(tids);
    return 0;
}

/* A rank's kept rows, one complete event each, times from t0 (the run's first event). */
static void tl_rank_rows(struct tl_file *f, const struct rank_trace *t,
                         const struct tl_keep *keep, int pid, int64_t t0)
{
    struct jw *w = f->w;
    for (size_t r = 0; r < t->n; r++) {
        const struct run_row *row = &t->rows[r];
        if (!tl_kept(keep, row))
            continue;
        size_t nn, np, nk = 0;
        const char *name = quoted_get(&f->names, row->name, &nn);
        const char *phase = quoted_get(&f->labels, row->phase, &np);
        const char *kind = row->kind == f->range ? NULL : quoted_get(&f->labels, row->kind, &nk);
        jw_reserve(w, nn + np + nk + 320);
        if (f->first)
            JW_LIT(w, "\n{\"name\":");
        else
            JW_LIT(w, ",\n{\"name\":");
        f->first = 0;
        jw_raw(w, name, nn);
        JW_LIT(w, ",\"cat\":");
        jw_raw(w, phase, np);
        JW_LIT(w, ",\"ph\":\"X\",\"ts\":");
        jw_us(w, row->start_ns - t0);
        JW_LIT(w, ",\"dur\":");
        jw_us(w, row->end_ns - row->start_ns);
        JW_LIT(w, ",\"pid\":");
        jw_i64(w, pid);
        JW_LIT(w, ",\"tid\":");
        jw_i64(w, f->row_tid[r]);
        JW_LIT(w, ",\"args\":{\"step\":");
        jw_i64(w, row->step);
        if (row->epoch >= 0) { /* imports know no epoch */
            JW_LIT(w, ",\"epoch\":");
            jw_i64(w, row->epoch);
        }
        JW_LIT(w, ",\"bucket\":");
        jw_i64(w, row->bucket);
        if (row->bytes >= 0) { /* an imported collective without sizes */
            JW_LIT(w, ",\"bytes\":");
            jw_i64(w, row->bytes);
        }
        if (kind) {
            JW_LIT(w, ",\"kind\":");
            jw_raw(w, kind, nk);
        }
        JW_LIT(w, "}}");
    }
}

/* Every run's ranks: their heads and kept rows.  0, or -1 after error_set(). */
static int tl_runs(struct tl_file *f, const struct runset *rs, const struct tl_keep *keep)
{
    for (int i = 0; i < rs->n; i++) {
        const struct run *run = &rs->runs[i];
        int64_t t0 = INT64_MAX;
        for (int k = 0; k < run->nranks; k++)
            for (size_t r = 0; r < run->ranks[k].n; r++)
                if (run->ranks[k].rows[r].start_ns < t0)
                    t0 = run->ranks[k].rows[r].start_ns;
        for (int k = 0; k < run->nranks; k++) {
            const struct rank_trace *t = &run->ranks[k];
            const int pid = (i + 1) * 100000 + t->rank;
            if (tl_rank_head(f, run, t, i, pid) < 0)
                return -1;
            tl_rank_rows(f, t, &keep[i], pid, t0);
        }
    }
    return 0;
}

int timeline_write(const struct runset *rs, const struct run_stat *st, const char *path,
                   size_t max_bytes)
{
    struct outfile o;
    if (outfile_open(&o, path) < 0)
        return -1;
    struct tl_file f = {
        .w = malloc(sizeof *f.w), .first = 1,
        .names = {&rs->names, calloc(rs->names.n + 1, sizeof(char *)),
                  calloc(rs->names.n + 1, sizeof(size_t))},
        .labels = {&rs->labels, calloc(rs->labels.n + 1, sizeof(char *)),
                   calloc(rs->labels.n + 1, sizeof(size_t))},
        .range = strpool_find(&rs->labels, trace_kind_name(TRACE_KIND_RANGE)), .path = path};
    struct jw *w = f.w;
    int rc = 0;
    struct tl_keep *keep = NULL;
    if (!w || !f.names.lit || !f.labels.lit || !f.names.len || !f.labels.len) {
        rc = error_set("%s: out of memory", path);
        goto done;
    }
    if (!(keep = calloc((size_t)rs->n + 1, sizeof *keep))) {
        rc = error_set("%s: out of memory", path);
        goto done;
    }
    char what[1024], *qwhat;
    tl_choose(rs, st, max_bytes, &f.names, &f.labels, keep, what, sizeof what);
    if (!(qwhat = timeline_json_quote(what))) {
        rc = error_set("%s: out of memory", path);
        goto done;
    }
    w->f = o.f;
    w->len = 0;
    jw_cstr(w, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"ddpprof report\","
               "\"clock\":\"each run from its first event; ranks on rank 0's clock\","
               "\"rows\":");
    jw_cstr(w, qwhat);
    free(qwhat);
    jw_cstr(w, "},\"traceEvents\":[");
    rc = tl_runs(&f, rs, keep);
    if (rc == 0) {
        jw_cstr(w, "\n]}\n");
        jw_flush(w);
    }
done:
    if (outfile_close(&o, rc == 0) < 0)
        rc = -1;
    quoted_free(&f.names, rs->names.n);
    quoted_free(&f.labels, rs->labels.n);
    free(keep);
    free(f.row_tid);
    free(w);
    if (rc == 0)
        timeline_collect(path);
    return rc;
}
