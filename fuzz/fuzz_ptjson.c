/* fuzz_ptjson.c — a PyTorch profiler trace (Kineto JSON or the legacy exporter's array)
 * read from memory as a one-rank run (report/import_pytorch.c over report/ptjson.c and yajl,
 * into the import core), then analysed (report/analysis.c) as every table would be.
 *
 * The import must succeed or fail with one line; an imported run must analyse. */
#include "fuzz/fuzz_util.h"

#include "report/analysis.h"
#include "report/import.h"
#include "report/run.h"

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
    return 0;
}
