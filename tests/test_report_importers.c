/* test_report_importers.c — the importer table and the import core on their own
 * (report/input/importer.h, report/input/import_core.h, report/input/pytorch_names.h):
 *   - which importer claims what: a ddpprof run directory, the Kineto and the legacy
 *     fixtures' files, the report's own timeline.json, nsys's .sqlite/.nsys-rep and an
 *     SQLite file of any name, any other file (the Kineto reader's JSON error rather than
 *     none);
 *   - PyTorch's name rules, including the names that must not match;
 *   - the core driven by hand with normalised events, as a new format's importer would
 *     drive it: a two-rank run on two hosts whose steps (ProfilerStep#5, #6 in the trace)
 *     become 1 and 2, whose all-reduces are buckets 0 and 1 of each step with a broadcast
 *     between them (its own phase, comm lane, no bucket, issued earlier than its backend
 *     op started), whose kernels land in the phase that launched them, and whose second
 *     rank's clock, 1 ms behind, is found from the all-reduce ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "report/input/import.h"
#include "report/input/import_core.h"
#include "report/input/import_group.h"
#include "report/input/importer.h"
#include "report/input/pytorch_names.h"
#include "report/input/run.h"
#include "testutil.h"

static void expect_claim(const char *path, int is_dir, const char *name, enum import_claim want)
{
    enum import_claim level;
    const struct importer *imp = importer_for(path, is_dir, &level);
    CHECK(level == want && (name ? imp && strcmp(imp->name, name) == 0 : !imp),
          "%s: claimed %d by %s, want %d by %s", path, (int)level, imp ? imp->name : "none",
          (int)want, name ? name : "none");
}

static void test_table(const char *tmp)
{
    char buf[1024];
    CHECK(importers_count == 4, "four importers, %zu listed", importers_count);
    for (size_t i = 0; i < importers_count; i++)
        CHECK(importers[i]->name && importers[i]->claims && importers[i]->load,
              "importer %zu has every slot", i);
    test_write_file(tmp, "meta.csv", "key,value\nworld_size,1\n", 23);
    expect_claim(tmp, 1, "ddpprof run directory", IMPORT_CLAIM_YES);
    snprintf(buf, sizeof buf, "%s/tests/fixtures/pytorch/kineto-2hosts", test_source_dir());
    expect_claim(buf, 1, "ddpprof run directory", IMPORT_CLAIM_MAYBE);
    snprintf(buf, sizeof buf,
             "%s/tests/fixtures/pytorch/kineto-2hosts/hostA_1001.1700000000123.pt.trace.json",
             test_source_dir());
    expect_claim(buf, 0, "PyTorch Kineto JSON", IMPORT_CLAIM_FIRST);
    snprintf(buf, sizeof buf,
             "%s/tests/fixtures/pytorch/legacy-gloo-2ranks/"
             "fixturehost_1000.1795438320634.pt.trace.json.gz",
             test_source_dir());
    expect_claim(buf, 0, "PyTorch legacy exporter JSON", IMPORT_CLAIM_FIRST);
    test_write_file(tmp, "timeline.json", "[]", 2);
    test_write_file(tmp, "t.json", "  [ {} ]", 8);
    test_write_file(tmp, "notes.txt", "hello", 5);
    snprintf(buf, sizeof buf, "%s/timeline.json", tmp);
    expect_claim(buf, 0, NULL, IMPORT_CLAIM_NO);
    snprintf(buf, sizeof buf, "%s/t.json", tmp);
    expect_claim(buf, 0, "PyTorch legacy exporter JSON", IMPORT_CLAIM_YES);
    snprintf(buf, sizeof buf, "%s/notes.txt", tmp);
    expect_claim(buf, 0, "PyTorch Kineto JSON", IMPORT_CLAIM_MAYBE);
    /* Nsight Systems: its export surely, a report surely but only maybe with its export
     * beside it (and still by nsys, not Kineto), an SQLite database of any name
     * (report/input/import_nsys.c) */
    snprintf(buf, sizeof buf, "%s/tests/fixtures/nsys/ddp-2022.4/rank0.sqlite", test_source_dir());
    expect_claim(buf, 0, "Nsight Systems report (SQLite export)", IMPORT_CLAIM_YES);
    expect_claim("/nonexistent/ddp.rank1.nsys-rep", 0, "Nsight Systems report (SQLite export)",
                 IMPORT_CLAIM_YES);
    test_write_file(tmp, "twin.sqlite", "SQLite format 3\0 and the rest", 30);
    test_write_file(tmp, "twin.nsys-rep", "a report", 8);
    snprintf(buf, sizeof buf, "%s/twin.nsys-rep", tmp);
    expect_claim(buf, 0, "Nsight Systems report (SQLite export)", IMPORT_CLAIM_MAYBE);
    unlink(buf);
    snprintf(buf, sizeof buf, "%s/twin.sqlite", tmp);
    unlink(buf);
    test_write_file(tmp, "db.bin", "SQLite format 3\0 and the rest", 30);
    snprintf(buf, sizeof buf, "%s/db.bin", tmp);
    expect_claim(buf, 0, "Nsight Systems report (SQLite export)", IMPORT_CLAIM_YES);
    unlink(buf);
    /* a directory's trace files: t.json only (timeline.json and notes.txt are not listed) */
    char **paths = NULL;
    int n = -1;
    CHECK(import_dir_traces(tmp, &paths, &n) == 0 && n == 1 && strstr(paths[0], "/t.json"),
          "import_dir_traces: %d file(s)", n);
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

static void expect_span(const char *name, const char *coll_arg, int device, int want_rc,
                        enum import_kind want_kind, enum import_coll want_coll)
{
    enum import_kind kind = IMPORT_DIMS;
    enum import_coll coll = IMPORT_COLL_COUNT;
    int rc = pt_name_span(name, strlen(name), coll_arg, device, &kind, &coll);
    CHECK(rc == want_rc && (rc != 1 || (kind == want_kind && coll == want_coll)),
          "pt_name_span('%s', '%s', %d) = %d kind %d coll %d", name, coll_arg, device, rc,
          (int)kind, (int)coll);
}

static void test_names(void)
{
    const enum import_coll none = IMPORT_COLL_NONE, ar = IMPORT_COLL_ALL_REDUCE;
    expect_span("ProfilerStep#3", "", 0, 1, IMPORT_STEP, none);
    /* a step's device range (taken only where no launch is known: import_core.c) */
    expect_span("ProfilerStep#3", "", 1, 1, IMPORT_STEP, none);
    /* ddpprof's export: the all-reduces without gradients, evaluation; a comm named with a
     * dash (shm-staged) */
    expect_span("ddpprof.comm.allreduce", "allreduce", 0, 1, IMPORT_COLL,
                IMPORT_COLL_ALL_REDUCE_OTHER);
    expect_span("ddpprof.eval", "", 1, 1, IMPORT_EVAL, none);
    expect_span("ddpprof.calib.allreduce", "allreduce", 0, 0, 0, 0);
    expect_span("shm-staged:all_reduce", "", 1, 1, IMPORT_COLL, ar);
    expect_span("-x:all_reduce", "", 0, 0, 0, 0);
    expect_span("DistributedDataParallel.forward", "", 0, 1, IMPORT_FORWARD, none);
    expect_span("DistributedDataParallel.forwards", "", 0, 0, 0, 0);
    expect_span("autograd::engine::evaluate_function: MmBackward0", "", 1, 1, IMPORT_BACKWARD,
                none);
    expect_span("Optimizer.step#SGD.step", "", 0, 1, IMPORT_OPTIMIZER, none);
    expect_span("Optimizer.zero_grad#SGD.zero_grad", "", 0, 1, IMPORT_OPTIMIZER, none);
    expect_span("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "", 0, 1,
                IMPORT_DATA, none);
    expect_span("nccl:all_reduce", "", 0, 1, IMPORT_COLL, ar);
    expect_span("gloo:all_reduce", "", 1, 1, IMPORT_COLL, ar);
    expect_span("NCCL:all_reduce", "", 0, 0, 0, 0); /* backends are lower case */
    expect_span(":all_reduce", "", 0, 0, 0, 0);
    expect_span("record_param_comms", "allreduce", 0, 1, IMPORT_PARAMS, ar);
    expect_span("record_param_comms", "", 0, -1, 0, 0);
    expect_span("record_param_comms", "scatter", 0, -1, 0, 0);
    expect_span("aten::conv2d", "", 0, 0, 0, 0);
    /* the other collectives: backend ops, the c10d:: ops that issue them, descriptions */
    expect_span("gloo:broadcast", "", 0, 1, IMPORT_COLL, IMPORT_COLL_BROADCAST);
    expect_span("gloo:broadcast", "", 1, 0, 0, 0); /* device ranges: all-reduces only */
    expect_span("nccl:_allgather_base", "", 0, 1, IMPORT_COLL, IMPORT_COLL_ALL_GATHER);
    expect_span("nccl:reduce_scatter_tensor", "", 0, 1, IMPORT_COLL,
                IMPORT_COLL_REDUCE_SCATTER);
    expect_span("gloo:barrier", "", 0, 1, IMPORT_COLL, IMPORT_COLL_BARRIER);
    expect_span("gloo:scatter", "", 0, 0, 0, 0);
    expect_span("c10d::broadcast_", "", 0, 1, IMPORT_ISSUE, IMPORT_COLL_BROADCAST);
    expect_span("c10d::_allgather_base_", "", 0, 1, IMPORT_ISSUE, IMPORT_COLL_ALL_GATHER);
    expect_span("c10d::allreduce_", "", 0, 0, 0, 0); /* an all-reduce's: its backend op */
    expect_span("record_param_comms", "broadcast", 0, 1, IMPORT_PARAMS, IMPORT_COLL_BROADCAST);
    expect_span("record_param_comms", "_allgather_base", 0, 1, IMPORT_PARAMS,
                IMPORT_COLL_ALL_GATHER);
    int64_t n = -1;
    CHECK(pt_name_step("ProfilerStep#12", 15, &n) == 1 && n == 12, "step number 12: %lld",
          (long long)n);
    CHECK(pt_name_step("ProfilerStep#", 13, &n) == 0 &&
              pt_name_step("ProfilerStep#1x", 15, &n) == 0 &&
              pt_name_step("ProfilerStep#2000000000", 23, &n) == 0,
          "not step numbers");
    enum import_coll coll = IMPORT_COLL_COUNT;
    int known = -1;
    const char *k1 = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", *k2 = "myNcclThing",
               *k3 = "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)";
    CHECK(pt_name_kernel(k1, strlen(k1), "", &coll, &known) == 1 && coll == ar && known == 1,
          "NCCL all-reduce kernel");
    CHECK(pt_name_kernel(k2, strlen(k2), "all_reduce", &coll, &known) == 1 && coll == ar &&
              known == 0,
          "an unknown NCCL kernel name, its Collective name arg an all-reduce");
    CHECK(pt_name_kernel(k3, strlen(k3), "", &coll, &known) == 1 && known == 1 &&
              coll == IMPORT_COLL_BROADCAST,
          "NCCL kernel of another collective: %d", (int)coll);
    CHECK(pt_name_kernel(k2, strlen(k2), "allgather", &coll, &known) == 1 &&
              coll == IMPORT_COLL_ALL_GATHER,
          "an unknown NCCL kernel name, its Collective name arg an all-gather");
    CHECK(pt_name_kernel("sgemm", 5, "", &coll, &known) == 0, "a compute kernel");
    CHECK(pt_dtype_bytes("BFloat16") == 2 && pt_dtype_bytes("Float") == 4 &&
              pt_dtype_bytes("quint4x2") == 0,
          "dtype sizes");
}

/* ---- the core by hand ---- */

static void span(struct import_rank *r, enum import_kind kind, enum import_coll coll,
                 int64_t s, int64_t e, int64_t val, const char *name)
{
    struct import_span sp = {.start_ns = s, .end_ns = e, .tid = 1, .val = val, .kind = kind,
                             .coll = coll, .name = name, .name_len = strlen(name)};
    CHECK(import_rank_span(r, &sp) == 0, "span %s: %s", name, error_get());
}

static void kernel(struct import_rank *r, int64_t s, int64_t e, int64_t corr,
                   enum import_coll coll, const char *name)
{
    struct import_activity a = {.start_ns = s, .end_ns = e, .corr = corr, .has_corr = 1,
                                .stream = coll ? 13 : 7, .bytes = coll ? 4096 : -1,
                                .cls = coll ? KERNEL_COMM : KERNEL_COMPUTE, .coll = coll,
                                .name = name, .name_len = strlen(name)};
    CHECK(import_rank_activity(r, &a) == 0, "activity %s: %s", name, error_get());
}

/* One rank of the hand-made format: steps #5 and #6 of 10 ms from t0 (ns on its clock),
 * forward [1, 3) ms, backward ops [3, 7) ms, all-reduce [4, 5) ms, broadcast [5, 5.5) ms,
 * all-reduce [6, 7) ms; a kernel launched in forward at 1.5 ms runs [2, 4) ms; the device
 * all-reduces run as the host ones. */
static void feed_rank(struct import_sink *sink, const char *path, int rank, const char *host,
                      int64_t t0)
{
    struct import_rank *r = import_rank_begin(sink, path);
    CHECK(r != NULL, "import_rank_begin: %s", error_get());
    if (!r)
        return;
    const int64_t ms = 1000000;
    for (int s = 0; s < 2; s++) {
        int64_t b = t0 + s * 10 * ms;
        int64_t c = 100 * (s + 1);
        span(r, IMPORT_STEP, IMPORT_COLL_NONE, b, b + 10 * ms, 5 + s, "Step#");
        span(r, IMPORT_FORWARD, IMPORT_COLL_NONE, b + 1 * ms, b + 3 * ms, 32, "forward");
        CHECK(import_rank_launch(r, c, b + 1 * ms + ms / 2) == 0, "launch");
        CHECK(import_rank_launch(r, c + 1, b + 4 * ms) == 0, "launch");
        CHECK(import_rank_launch(r, c + 2, b + 6 * ms) == 0, "launch");
        span(r, IMPORT_BACKWARD, IMPORT_COLL_NONE, b + 3 * ms, b + 5 * ms, -1, "bwd op");
        span(r, IMPORT_COLL, IMPORT_COLL_ALL_REDUCE, b + 4 * ms, b + 5 * ms, 4096, "ar");
        span(r, IMPORT_BACKWARD, IMPORT_COLL_NONE, b + 5 * ms, b + 7 * ms, -1, "bwd op");
        span(r, IMPORT_ISSUE, IMPORT_COLL_BROADCAST, b + 5 * ms - 100, b + 5 * ms + 50, -1,
             "issue");
        span(r, IMPORT_COLL, IMPORT_COLL_BROADCAST, b + 5 * ms, b + 5 * ms + ms / 2, 64, "bc");
        span(r, IMPORT_COLL, IMPORT_COLL_ALL_REDUCE, b + 6 * ms, b + 7 * ms, -1, "ar");
        span(r, IMPORT_OPTIMIZER, IMPORT_COLL_NONE, b + 8 * ms, b + 9 * ms, -1, "opt");
    }
    for (int s = 0; s < 2; s++) {
        int64_t b = t0 + s * 10 * ms;
        int64_t c = 100 * (s + 1);
        kernel(r, b + 2 * ms, b + 4 * ms, c, IMPORT_COLL_NONE, "gemm");
        kernel(r, b + 4 * ms, b + 5 * ms, c + 1, IMPORT_COLL_ALL_REDUCE, "allreduce kernel");
        kernel(r, b + 6 * ms, b + 7 * ms, c + 2, IMPORT_COLL_ALL_REDUCE, "allreduce kernel");
    }
    CHECK(import_rank_drain(r) == 0 && !import_rank_empty(r), "drain: %s", error_get());
    CHECK(import_rank_finish(r) == 0, "finish: %s", error_get());
    struct import_rank_info *info = import_rank_info(r);
    info->format = "handmade";
    info->has_rank = 1;
    info->rank = rank;
    info->has_world = 1;
    info->world_size = 2;
    info->base_ns = 0;
    import_rank_set_host(r, strdup(host));
    import_rank_free(r);
}

static const struct run_row *find_row(const struct runset *rs, const struct rank_trace *t,
                                      const char *phase, int clock, int step, int nth)
{
    for (size_t i = 0; i < t->n; i++) {
        const struct run_row *w = &t->rows[i];
        if (w->clock == clock && w->step == step &&
            strcmp(strpool_get(&rs->labels, w->phase), phase) == 0 && nth-- == 0)
            return w;
    }
    return NULL;
}

static void test_core(void)
{
    struct runset rs;
    runset_init(&rs);
    struct import_sink sink;
    import_sink_init(&sink, &rs, "handmade", 1);
    const int64_t ms = 1000000;
    /* rank 1 first (ranks are sorted); its clock 1 ms behind rank 0's */
    feed_rank(&sink, "r1", 1, "hostB", 50 * ms - 1 * ms);
    feed_rank(&sink, "r0", 0, "hostA", 50 * ms);
    CHECK(import_sink_finish(&sink) == 0, "sink finish: %s", error_get());
    import_sink_free(&sink);
    CHECK(rs.n == 1 && rs.runs[0].nranks == 2, "one run of two ranks");
    if (rs.n != 1 || rs.runs[0].nranks != 2) {
        runset_free(&rs);
        return;
    }
    const struct run *run = &rs.runs[0];
    const struct rank_trace *t0 = &run->ranks[0], *t1 = &run->ranks[1];
    CHECK(t0->rank == 0 && t1->rank == 1 && run->world_size == 2 &&
              strcmp(run->format, "handmade") == 0 && run->has_metrics &&
              run->metrics_images == 2 * 2 * 32,
          "ranks %d %d, world %d, format %s, images %lld", t0->rank, t1->rank, run->world_size,
          run->format, (long long)run->metrics_images);
    CHECK(t1->offset_ns == 1 * ms && t1->clock_method &&
              strstr(t1->clock_method, "median of 4 device all-reduce end(s)"),
          "rank 1's offset %lld (%s)", (long long)t1->offset_ns,
          t1->clock_method ? t1->clock_method : "none");
    for (int rank = 0; rank < 2; rank++) {
        const struct rank_trace *t = &run->ranks[rank];
        for (int step = 1; step <= 2; step++) {
            const int64_t b = 50 * ms + (step - 1) * 10 * ms;
            const int h = TRACE_CLOCK_HOST, d = TRACE_CLOCK_DEVICE;
            const struct run_row *st = find_row(&rs, t, "step", h, step, 0),
                                 *a0 = find_row(&rs, t, "allreduce", h, step, 0),
                                 *bc = find_row(&rs, t, "comm.broadcast", h, step, 0),
                                 *a1 = find_row(&rs, t, "allreduce", h, step, 1),
                                 *d1 = find_row(&rs, t, "allreduce", d, step, 1),
                                 *fw = find_row(&rs, t, "forward", d, step, 0),
                                 *bw = find_row(&rs, t, "backward", h, step, 0);
            CHECK(st && st->start_ns == b && a0 && a0->bucket == 0 && a0->bytes == 4096 && bc &&
                      bc->bucket == -1 && bc->bytes == 64 && bc->stream == TRACE_LANE_COMM &&
                      bc->start_ns == b + 5 * ms - 100 && bc->end_ns == b + 5 * ms + ms / 2 &&
                      a1 && a1->bucket == 1 && a1->bytes == -1 && d1 && d1->bucket == 1 &&
                      d1->bytes == 4096 && d1->end_ns == b + 7 * ms,
                  "rank %d step %d: steps renumbered, buckets 0 and 1 around the broadcast",
                  rank, step);
            CHECK(fw && fw->start_ns == b + 2 * ms && fw->end_ns == b + 4 * ms && bw &&
                      bw->start_ns == b + 3 * ms && bw->end_ns == b + 7 * ms,
                  "rank %d step %d: the kernel in forward's device span, one backward span",
                  rank, step);
        }
        CHECK(t->has_kernels && t->kern.count == 6, "rank %d: 6 activities swept", rank);
    }
    runset_free(&rs);
}

/* report/input/import_group.c: the runs of a directory by file name */
static void test_groups(void)
{
    char name[64];
    int rank = -1;
    CHECK(import_group_name_rank("/d/baseline.rank0.nsys-rep", name, sizeof name, &rank) &&
              strcmp(name, "baseline") == 0 && rank == 0,
          "baseline.rank0.nsys-rep: '%s' rank %d", name, rank);
    CHECK(import_group_name_rank("ddp_rank12.sqlite", name, sizeof name, &rank) &&
              strcmp(name, "ddp") == 0 && rank == 12,
          "ddp_rank12.sqlite: '%s' rank %d", name, rank);
    CHECK(import_group_name_rank("rank1.sqlite", name, sizeof name, &rank) && name[0] == 0 &&
              rank == 1,
          "rank1.sqlite: '%s' rank %d", name, rank);
    CHECK(!import_group_name_rank("prof.1.sqlite", name, sizeof name, &rank), "prof.1: no rank");

    /* scripts/nsys-profile's names: two runs, baseline first */
    char *nsys[] = {"o/baseline.rank0.sqlite", "o/ddp.rank0.sqlite", "o/ddp.rank1.sqlite"};
    int *group = NULL, ngroups = 0;
    char **names = NULL;
    CHECK(import_group_by_name(nsys, 3, &group, &names, &ngroups) == 0 && ngroups == 2 &&
              strcmp(names[0], "baseline") == 0 && strcmp(names[1], "ddp") == 0 &&
              group[0] == 0 && group[1] == 1 && group[2] == 1,
          "nsys-profile names: %d group(s)", ngroups);
    for (int g = 0; names && g < ngroups; g++)
        free(names[g]);
    free(names);
    free(group);
    /* nsys profile -o NAME.%q{RANK}: the same two runs */
    CHECK(import_group_dotted_rank("/o/ddp.1.nsys-rep", name, sizeof name, &rank) &&
              strcmp(name, "ddp") == 0 && rank == 1,
          "ddp.1.nsys-rep: '%s' rank %d", name, rank);
    CHECK(!import_group_dotted_rank("w/host_12.1700000000.pt.trace.json", name, sizeof name,
                                    &rank) &&
              !import_group_dotted_rank("ddp.123456.sqlite", name, sizeof name, &rank) &&
              !import_group_dotted_rank("ddp1.sqlite", name, sizeof name, &rank),
          "a PyTorch trace name, 6 digits, no dot: no rank");
    char *q[] = {"o/baseline.0.sqlite", "o/ddp.0.nsys-rep", "o/ddp.1.nsys-rep"};
    CHECK(import_group_by_name(q, 3, &group, &names, &ngroups) == 0 && ngroups == 2 &&
              strcmp(names[0], "baseline") == 0 && strcmp(names[1], "ddp") == 0 &&
              group[0] == 0 && group[1] == 1 && group[2] == 1,
          "NAME.%%q{RANK} names: %d group(s)", ngroups);
    for (int g = 0; names && g < ngroups; g++)
        free(names[g]);
    free(names);
    free(group);
    /* no rank named twice: one run, as before */
    char *one[] = {"t/rank0.json", "t/x_rank1.json"};
    CHECK(import_group_by_name(one, 2, &group, &names, &ngroups) == 0 && ngroups == 1 && !names,
          "distinct ranks: %d group(s)", ngroups);
    free(group);
    /* a rank twice in one run: an error naming both files */
    char *twice[] = {"a/ddp.rank0.json", "a/ddp.rank0.json.gz", "a/base.rank0.json"};
    CHECK(import_group_by_name(twice, 3, &group, &names, &ngroups) == -1 &&
              strstr(error_get(), "ddp.rank0.json.gz") && strstr(error_get(), "both name rank 0"),
          "rank 0 twice in run ddp: '%s'", error_get());
}

int main(void)
{
    char *tmp = test_tmpdir();
    test_table(tmp);
    test_names();
    test_core();
    test_groups();
    static const char *const made[] = {"meta.csv", "timeline.json", "t.json", "notes.txt"};
    for (size_t i = 0; i < sizeof made / sizeof *made; i++) {
        char *p = test_path(tmp, made[i]);
        remove(p);
        free(p);
    }
    remove(tmp);
    free(tmp);
    return test_finish();
}
