/* timeline.c — the merged Chrome trace (timeline.json, see timeline.h): one process per run
 * and rank, one thread per lane, one complete ("X") event per trace row.  Written through
 * a hand-rolled buffer with each distinct string escaped once, so a million rows take well
 * under a second. */
#include "timeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

struct jw {
    FILE *f;
    char buf[1 << 16];
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

static void jw_i64(struct jw *w, int64_t v)
{
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[n++] = '-';
    char out[24];
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    jw_put(w, out, (size_t)n);
}

/* ns as microseconds with three decimals, exactly ("1234567" -> "1234.567"). */
static void jw_us(struct jw *w, int64_t ns)
{
    if (ns < 0) {
        jw_put(w, "-", 1);
        ns = -ns;
    }
    jw_i64(w, ns / 1000);
    char frac[4] = {'.', (char)('0' + ns % 1000 / 100), (char)('0' + ns % 100 / 10),
                    (char)('0' + ns % 10)};
    jw_put(w, frac, 4);
}

/* s as a JSON string literal (quotes included); invalid UTF-8 bytes become '?'.  Owned by
 * the caller; NULL on out of memory. */
static char *json_quote(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(6 * n + 3), *o = out;
    if (!out)
        return NULL;
    *o++ = '"';
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
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
};

static const char *quoted_get(struct quoted *q, uint32_t id)
{
    if (!q->lit[id])
        q->lit[id] = json_quote(strpool_get(q->pool, id));
    return q->lit[id] ? q->lit[id] : "\"?\"";
}

static void quoted_free(struct quoted *q, uint32_t n)
{
    if (q->lit)
        for (uint32_t i = 0; i < n; i++)
            free(q->lit[i]);
    free(q->lit);
}

/* The thread of a row: host lanes from 1, device-clock ranges from 100001, CUPTI streams
 * from 200001 (stream ids folded into 0..99998). */
static int timeline_tid(const struct trace_row *r)
{
    int s = r->stream;
    if (s < 0 || s > 99998)
        s = (int)((unsigned)s % 99999u);
    return (r->clock == TRACE_CLOCK_HOST ? 1 : r->clock == TRACE_CLOCK_DEVICE ? 100001 : 200001) + s;
}

static void timeline_thread_name(int tid, char *out, size_t size)
{
    static const char *const lanes[3] = {"compute", "comm", "data"};
    int base = tid >= 200001 ? 200001 : tid >= 100001 ? 100001 : 1, s = tid - base;
    if (base == 200001)
        snprintf(out, size, "cuda stream %d", s);
    else if (s < 3)
        snprintf(out, size, "%s %s", base == 1 ? "host" : "device", lanes[s]);
    else
        snprintf(out, size, "%s stream %d", base == 1 ? "host" : "device", s);
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
    jw_i64(w, pid);
    if (tid >= 0) {
        jw_cstr(w, ",\"tid\":");
        jw_i64(w, tid);
    }
    jw_cstr(w, ",\"args\":{\"");
    jw_cstr(w, key);
    jw_cstr(w, "\":");
    jw_cstr(w, value_json);
    jw_cstr(w, "}}");
}

int timeline_write(const struct runset *rs, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return error_set("%s: cannot create (%s)", path, strerror(errno));
    struct jw *w = malloc(sizeof *w);
    struct quoted names = {&rs->names, calloc(rs->names.n + 1, sizeof(char *))};
    struct quoted labels = {&rs->labels, calloc(rs->labels.n + 1, sizeof(char *))};
    int rc = 0;
    if (!w || !names.lit || !labels.lit) {
        rc = error_set("%s: out of memory", path);
        goto done;
    }
    w->f = f;
    w->len = 0;
    jw_cstr(w, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"ddpprof report\","
               "\"clock\":\"each run from its first event; ranks on rank 0's clock\"},"
               "\"traceEvents\":[");
    int first = 1;
    for (int i = 0; i < rs->n && rc == 0; i++) {
        const struct run *run = &rs->runs[i];
        int64_t t0 = INT64_MAX;
        for (int k = 0; k < run->nranks; k++)
            for (size_t r = 0; r < run->ranks[k].n; r++)
                if (run->ranks[k].rows[r].start_ns < t0)
                    t0 = run->ranks[k].rows[r].start_ns;
        for (int k = 0; k < run->nranks && rc == 0; k++) {
            const struct rank_trace *t = &run->ranks[k];
            int pid = (i + 1) * 100000 + t->rank;
            char buf[512];
            char *q;
            snprintf(buf, sizeof buf, "%s rank %d", run->label, t->rank);
            if (!(q = json_quote(buf))) {
                rc = error_set("%s: out of memory", path);
                break;
            }
            timeline_meta(w, &first, "process_name", pid, -1, "name", q);
            free(q);
            snprintf(buf, sizeof buf, "%d", i * 100000 + t->rank);
            timeline_meta(w, &first, "process_sort_index", pid, -1, "sort_index", buf);

            int *tids = malloc((t->n + 1) * sizeof *tids);
            if (!tids) {
                rc = error_set("%s: out of memory listing the lanes of %s", path, t->path);
                break;
            }
            for (size_t r = 0; r < t->n; r++)
                tids[r] = timeline_tid(&t->rows[r]);
            qsort(tids, t->n, sizeof *tids, cmp_int);
            for (size_t r = 0; r < t->n; r++) {
                if (r > 0 && tids[r] == tids[r - 1])
                    continue;
                char lane[64], qs[80];
                timeline_thread_name(tids[r], lane, sizeof lane);
                snprintf(qs, sizeof qs, "\"%s\"", lane);
                timeline_meta(w, &first, "thread_name", pid, tids[r], "name", qs);
                snprintf(qs, sizeof qs, "%d", tids[r]);
                timeline_meta(w, &first, "thread_sort_index", pid, tids[r], "sort_index", qs);
            }
            free(tids);

            for (size_t r = 0; r < t->n; r++) {
                const struct trace_row *row = &t->rows[r];
                jw_cstr(w, first ? "\n{\"name\":" : ",\n{\"name\":");
                first = 0;
                jw_cstr(w, quoted_get(&names, row->name));
                jw_cstr(w, ",\"cat\":");
                jw_cstr(w, quoted_get(&labels, row->phase));
                jw_cstr(w, ",\"ph\":\"X\",\"ts\":");
                jw_us(w, row->start_ns - t0);
                jw_cstr(w, ",\"dur\":");
                jw_us(w, row->end_ns - row->start_ns);
                jw_cstr(w, ",\"pid\":");
                jw_i64(w, pid);
                jw_cstr(w, ",\"tid\":");
                jw_i64(w, timeline_tid(row));
                jw_cstr(w, ",\"args\":{\"step\":");
                jw_i64(w, row->step);
                jw_cstr(w, ",\"epoch\":");
                jw_i64(w, row->epoch);
                jw_cstr(w, ",\"bucket\":");
                jw_i64(w, row->bucket);
                jw_cstr(w, ",\"bytes\":");
                jw_i64(w, row->bytes);
                jw_cstr(w, ",\"kind\":");
                jw_cstr(w, quoted_get(&labels, row->kind));
                jw_cstr(w, "}}");
            }
        }
    }
    if (rc == 0) {
        jw_cstr(w, "\n]}\n");
        jw_flush(w);
    }
done:;
    int bad = ferror(f);
    if (fclose(f) != 0)
        bad = 1;
    if (bad && rc == 0)
        rc = error_set("%s: write failed (%s): check the disk", path, strerror(errno));
    quoted_free(&names, rs->names.n);
    quoted_free(&labels, rs->labels.n);
    free(w);
    return rc;
}
