/* fuzz_ptjson.c — a PyTorch profiler trace (Kineto JSON or the legacy exporter's array)
 * read from memory as a one-rank run (report/input/import_pytorch.c over
 * report/input/ptjson.c and yajl, into the import core), then analysed
 * (report/analysis/analysis.c) as every table would be.
 *
 * The import must succeed or fail with one line; an imported run must analyse.  The reader
 * must deliver the same events fed in chunks (of 1..16 bytes, from the input's last byte)
 * as fed whole: a file is read 1 MiB at a time, and tokens cut by a chunk's end are held
 * back (report/input/ptjson.c). */
#include "fuzz/fuzz_util.h"

#include <string.h>

#include "report/analysis/analysis.h"
#include "report/input/import.h"
#include "report/input/ptjson.h"
#include "report/input/run.h"

struct fold {
    uint64_t h, n;
};

static int fold_event(void *ctx, const struct pt_event *e)
{
    struct fold *f = ctx;
    const int64_t v[] = {e->ph, e->cat, e->has_ts, e->has_dur, e->ts_ns, e->dur_ns, e->pid,
                         e->tid, e->correlation, e->external_id, e->stream, e->in_nelems,
                         e->dims0, (int64_t)e->name_len};
    const unsigned char *b = (const unsigned char *)v;
    for (size_t i = 0; i < sizeof v; i++)
        f->h = (f->h ^ b[i]) * 1099511628211ull;
    for (size_t i = 0; i < e->name_len; i++)
        f->h = (f->h ^ (unsigned char)e->name[i]) * 1099511628211ull;
    f->n++;
    return 0;
}

/* ptjson over data in chunks of `chunk` bytes: ptjson_finish's code, the events in *f */
static int parse_chunked(const uint8_t *data, size_t size, size_t chunk, struct fold *f)
{
    *f = (struct fold){1469598103934665603ull, 0};
    struct ptjson *p = ptjson_new("fuzz.json", fold_event, f);
    FUZZ_CHECK(p, "ptjson_new: %s", "out of memory?");
    int rc = 0;
    for (size_t at = 0; at < size && rc == 0; at += chunk)
        rc = ptjson_feed(p, data + at, size - at < chunk ? size - at : chunk);
    if (rc == 0)
        rc = ptjson_finish(p);
    ptjson_free(p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct runset rs;
    runset_init(&rs);
    if (fuzz_status(import_buffer(&rs, (const char *)data, size, "fuzz.json"),
                    "import_buffer") == 0) {
        FUZZ_CHECK(rs.n == 1 && rs.runs[0].nranks >= 1, "%d runs imported", rs.n);
        FUZZ_CHECK(fuzz_status(runset_finish(&rs), "runset_finish") == 0, "runset_finish");
        struct run_stat *st = analysis_run(&rs);
        FUZZ_CHECK(st, "analysis_run: %s", "out of memory?");
        analysis_free(st, rs.n);
    }
    runset_free(&rs);
    if (size > 0) {
        struct fold whole, cut;
        const int rw = parse_chunked(data, size, size, &whole);
        const size_t chunk = 1 + data[size - 1] % 16;
        const int rc = parse_chunked(data, size, chunk, &cut);
        FUZZ_CHECK(rc == rw && cut.n == whole.n && cut.h == whole.h,
                   "in chunks of %zu bytes: rc %d, %llu events; whole: rc %d, %llu events%s",
                   chunk, rc, (unsigned long long)cut.n, rw, (unsigned long long)whole.n,
                   cut.h == whole.h ? "" : " (different events)");
    }
    return 0;
}
