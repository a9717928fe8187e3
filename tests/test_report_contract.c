/* test_report_contract.c — the writer and the reader agree on probes/TRACE.md: traces
 * written through probes' trace_writer (libcsv quoting, its own buffering) are read by the
 * report with the expected figures, and a kernel name holding a comma, a quote and a line
 * break comes through to timeline.json intact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "report/report.h"
#include "testutil.h"
#include "probes/trace_writer.h"

static void add(struct trace_writer *w, int rank, int step, enum probe_phase ph, int bucket,
                enum trace_clock clock, long start_us, long end_us, uint64_t bytes,
                const char *name, enum trace_kind kind, int stream)
{
    struct trace_row r = {.rank = rank, .step = step, .epoch = 1, .phase = ph, .bucket = bucket,
                          .clock = clock, .start_ns = 7000000000LL + start_us * 1000LL,
                          .end_ns = 7000000000LL + end_us * 1000LL, .bytes = bytes,
                          .name = name, .kind = kind, .stream = stream};
    CHECK(trace_writer_add(w, &r) == 0, "trace_writer_add: %s", error_get());
}

int main(void)
{
    char *dir = test_tmpdir();
    char *p = NULL;
    if (asprintf(&p, "%s/meta.csv", dir) < 0)
        abort();
    FILE *f = fopen(p, "w");
    fputs("key,value\nmodel,convnet\nmode,ddp\ndevice,cpu\nworld_size,2\nepochs,1\namp,off\n"
          "clock_offset_ns.rank1,0\nwall_s,1\n",
          f);
    fclose(f);
    free(p);
    static const char *kernel = "void k<float, \"x\">\n(int)";
    for (int rank = 0; rank < 2; rank++) {
        /* a small flush threshold, so rows reach the file in several writes */
        struct trace_writer *w = trace_writer_open(dir, rank, 512);
        CHECK(w != NULL, "trace_writer_open: %s", error_get());
        if (!w)
            return test_finish();
        for (int step = 1; step <= 3; step++) {
            long t = (step - 1) * 10000;
            add(w, rank, step, PROBE_DATA, -1, TRACE_CLOCK_HOST, t, t + 1000, 0, NULL,
                TRACE_KIND_RANGE, 2);
            add(w, rank, step, PROBE_FORWARD, -1, TRACE_CLOCK_HOST, t + 1000, t + 3000, 0, NULL,
                TRACE_KIND_RANGE, 0);
            add(w, rank, step, PROBE_FORWARD, -1, TRACE_CLOCK_CUPTI, t + 1500, t + 2500, 0,
                kernel, TRACE_KIND_KERNEL, 13);
            /* the all-reduce half under backward [3000, 7000]: [6000, 8000] */
            add(w, rank, step, PROBE_ALLREDUCE, 0, TRACE_CLOCK_HOST, t + 6000, t + 8000, 2000000,
                "allreduce.b0", TRACE_KIND_RANGE, 1);
            add(w, rank, step, PROBE_BACKWARD, -1, TRACE_CLOCK_HOST, t + 3000,
                t + 7000 + rank * 500, 0, NULL, TRACE_KIND_RANGE, 0);
            add(w, rank, step, PROBE_OPTIMIZER, -1, TRACE_CLOCK_HOST, t + 8000, t + 9000, 0, NULL,
                TRACE_KIND_RANGE, 0);
            add(w, rank, step, PROBE_STEP, -1, TRACE_CLOCK_HOST, t, t + 9000, 0, NULL,
                TRACE_KIND_RANGE, 0);
        }
        CHECK(trace_writer_close(w) == 0, "trace_writer_close: %s", error_get());
    }
    const char *dirs[] = {dir};
    CHECK(report_run(dirs, 1, NULL, NULL) == 0, "report: %s", error_get());
    char *run = strrchr(dir, '/') + 1;
    char *phases = test_read_file(dir, "phases.csv"), *want = NULL;
    /* rank 1's backward is 4500 µs a step: 13.5 ms of 27 ms of steps = 50 %; not a
     * collective: no collective, bytes, transfer, wait or late rank */
    if (asprintf(&want, "\n%s,1,backward,3,13.500,4.500,4.500,4.500,4.500,50.00,0,,,,,,\n", run) < 0)
        abort();
    CHECK(phases && strstr(phases, want), "phases.csv lacks %s:\n%s", want, phases ? phases : "");
    free(want);
    char *buckets = test_read_file(dir, "buckets.csv");
    /* 6 rows of 2000 µs: 2e6 B / 2e6 ns = 1 GB/s; hidden: rank 0 1000 of 2000, rank 1 1500;
     * both ranks run each step's all-reduce at the same time for as long: transfer 2000,
     * sync wait 0, start skew 0, xfer algbw = algbw */
    if (asprintf(&want, "\n%s,2,0,,2000000,6,2.000,1.000,1.000,62.50,2.000,0.000,0.000,1.000,"
                        "1.000\n",
                 run) < 0)
        abort();
    CHECK(buckets && strstr(buckets, want), "buckets.csv lacks %s:\n%s", want,
          buckets ? buckets : "");
    free(want);
    char *tl = test_read_file(dir, "timeline.json");
    CHECK(tl && strstr(tl, "\"name\":\"void k<float, \\\"x\\\">\\n(int)\""),
          "the kernel name is not intact in timeline.json");
    free(tl);
    free(buckets);
    free(phases);
    test_tmpdir_done(dir);
    return test_finish();
}
