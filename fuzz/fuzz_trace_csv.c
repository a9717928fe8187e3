/* fuzz_trace_csv.c — one rank's trace file, rankN.trace.csv (report/input/run.c trace_load: the
 * fast path for plain lines and libcsv for the rest), read at clock offset 0 and at an
 * offset near the int64 limit.
 *
 * Every row read must have end_ns >= start_ns and interned names and labels. */
#include "fuzz/fuzz_util.h"

#include "report/input/run.h"
#include "report/input/strpool.h"

#include <string.h>

static void fuzz_trace(const char *path, int64_t offset)
{
    struct strpool names, labels;
    strpool_init(&names);
    strpool_init(&labels);
    struct rank_trace t;
    memset(&t, 0, sizeof t);
    if (fuzz_status(trace_load(&names, &labels, path, 0, offset, &t), "trace_load") == 0) {
        FUZZ_CHECK(t.n <= t.cap, "%zu rows, capacity %zu", t.n, t.cap);
        for (size_t i = 0; i < t.n; i++) {
            const struct run_row *r = &t.rows[i];
            FUZZ_CHECK(r->end_ns >= r->start_ns, "row %zu ends before it starts", i);
            FUZZ_CHECK(r->name < names.n && r->phase < labels.n && r->kind < labels.n,
                       "row %zu: a name or label that is not interned", i);
            FUZZ_CHECK(r->clock < TRACE_CLOCK_COUNT, "row %zu: clock %d", i, r->clock);
        }
    }
    rank_trace_free(&t);
    strpool_free(&names);
    strpool_free(&labels);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_memfile(0, data, size);
    fuzz_trace(path, 0);
    fuzz_trace(path, INT64_MAX - 1000000000);
    return 0;
}
