/* test_report_timeline.c — timeline.json draws in Perfetto as written: on one thread lane,
 * slices are nested or disjoint.  NCCL host rows span launch to wait-return, so with two
 * buckets in flight they partly overlap; the timeline must give the later one a sub-lane
 * ("host comm #2") and keep rows that nest or follow each other on the lane itself.
 *
 * The trace: per step, bucket 0's all-reduce [6000, 8000] µs and bucket 1's [6500, 8500]
 * on the host comm lane (partial overlap), bucket 2's [8600, 8800] after both (disjoint),
 * and the usual nested step > forward/backward ranges on the compute lane. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "probes/trace_writer.h"
#include "report/report.h"
#include "testutil.h"

static void add(struct trace_writer *w, int step, enum probe_phase ph, int bucket, long s_us,
                long e_us, const char *name, int stream)
{
    struct trace_row r = {.rank = 0, .step = step, .epoch = 1, .phase = ph, .bucket = bucket,
                          .clock = TRACE_CLOCK_HOST, .start_ns = 5000000000LL + s_us * 1000LL,
                          .end_ns = 5000000000LL + e_us * 1000LL, .bytes = bucket >= 0 ? 4096 : 0,
                          .name = name, .kind = TRACE_KIND_RANGE, .stream = stream};
    CHECK(trace_writer_add(w, &r) == 0, "trace_writer_add: %s", error_get());
}

/* the "tid" of the first event named name whose args hold "step":step */
static long tid_of(const char *json, const char *name, int step)
{
    char key[128], st[32];
    snprintf(key, sizeof key, "{\"name\":\"%s\"", name);
    snprintf(st, sizeof st, "\"step\":%d,", step);
    for (const char *p = strstr(json, key); p; p = strstr(p + 1, key)) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *ev = strndup(p, len);
        const char *t = strstr(ev, "\"tid\":");
        long tid = -1;
        if (t && strstr(ev, st))
            tid = strtol(t + 6, NULL, 10);
        free(ev);
        if (tid >= 0)
            return tid;
    }
    return -1;
}

int main(void)
{
    char *dir = test_tmpdir();
    test_write_file(dir, "meta.csv",
                    "key,value\nmodel,convnet\nmode,ddp\ndevice,cuda\nworld_size,1\nepochs,1\n"
                    "amp,off\nwall_s,1\n",
                    strlen("key,value\nmodel,convnet\nmode,ddp\ndevice,cuda\nworld_size,1\n"
                           "epochs,1\namp,off\nwall_s,1\n"));
    struct trace_writer *w = trace_writer_open(dir, 0, 4096);
    CHECK(w != NULL, "trace_writer_open: %s", error_get());
    if (!w)
        return test_finish();
    for (int step = 1; step <= 2; step++) {
        long t = (step - 1) * 10000;
        add(w, step, PROBE_FORWARD, -1, t + 1000, t + 3000, NULL, 0);
        add(w, step, PROBE_ALLREDUCE, 0, t + 6000, t + 8000, "allreduce.b0", 1);
        add(w, step, PROBE_ALLREDUCE, 1, t + 6500, t + 8500, "allreduce.b1", 1);
        add(w, step, PROBE_ALLREDUCE, 2, t + 8600, t + 8800, "allreduce.b2", 1);
        add(w, step, PROBE_BACKWARD, -1, t + 3000, t + 7000, NULL, 0);
        add(w, step, PROBE_OPTIMIZER, -1, t + 8800, t + 9000, NULL, 0);
        add(w, step, PROBE_STEP, -1, t, t + 9000, NULL, 0);
    }
    CHECK(trace_writer_close(w) == 0, "trace_writer_close: %s", error_get());
    const char *dirs[] = {dir};
    CHECK(report_run(dirs, 1, NULL, NULL) == 0, "report: %s", error_get());
    char *json = test_read_file(dir, "timeline.json");
    CHECK(json != NULL, "no timeline.json");
    if (json) {
        for (int step = 1; step <= 2; step++) {
            long b0 = tid_of(json, "allreduce.b0", step), b1 = tid_of(json, "allreduce.b1", step);
            long b2 = tid_of(json, "allreduce.b2", step);
            CHECK(b0 > 0 && b1 > 0 && b2 > 0, "step %d: tids %ld %ld %ld", step, b0, b1, b2);
            CHECK(b0 != b1, "step %d: overlapping buckets 0 and 1 share lane %ld", step, b0);
            CHECK(b2 == b0, "step %d: bucket 2 (after both) is on %ld, not the lane %ld", step,
                  b2, b0);
            CHECK(tid_of(json, "backward", step) == tid_of(json, "step", step),
                  "step %d: backward nests in step but left its lane", step);
        }
        CHECK(strstr(json, "\"host comm #2\"") != NULL, "no thread named 'host comm #2'");
        CHECK(strstr(json, "\"host comm\"") != NULL, "no thread named 'host comm'");
    }
    free(json);
    return test_finish();
}
