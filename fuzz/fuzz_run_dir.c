/* fuzz_run_dir.c — a whole run directory through the whole report (report/input/run.c reading
 * meta.csv, metrics.csv and the rank traces; report/analysis/analysis.c; every table, the timeline,
 * the charts and the Kineto export written).
 *
 * Input: meta.csv, then "\n--metrics--\n" and metrics.csv, "\n--rank0--\n" and
 * rank0.trace.csv, "\n--rank1--\n" and rank1.trace.csv; a part that is not there is a file
 * that is not there.  The report must succeed or fail with one line. */
#include "fuzz/fuzz_util.h"

#include "report/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        unsetenv("DDPPROF_TIMELINE_COLLECT"); /* the test suite's copy of every timeline */
        FUZZ_CHECK((devnull = fopen("/dev/null", "w")), "/dev/null");
    }
    static const char *const files[] = {"meta.csv", "metrics.csv", "rank0.trace.csv",
                                        "rank1.trace.csv"};
    static const char *const seps[] = {"\n--metrics--\n", "\n--rank0--\n", "\n--rank1--\n",
                                       "\n--end--\n"};
    size_t at = 0;
    for (int k = 0; k < 4; k++) {
        const uint8_t *piece;
        size_t len;
        if (fuzz_split(data, size, &at, seps[k], &piece, &len))
            fuzz_write(files[k], piece, len);
        else
            fuzz_remove(files[k]);
    }
    char out[4200];
    snprintf(out, sizeof out, "%s/out", fuzz_dir());
    const char *inputs[] = {fuzz_dir()};
    const struct report_opts opts = {.out_dir = out, .kineto = 1};
    fuzz_status(report_run_opts(inputs, 1, &opts, devnull), "report_run_opts");
    return 0;
}
