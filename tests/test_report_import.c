/* test_report_import.c — `ddpprof report` on PyTorch profiler traces.
 *
 *   - the Kineto fixture (tests/fixtures/pytorch/kineto-2hosts, made by its generator from
 *     the documented schema: 4 ranks on two hosts, hostB's clock 2345.678 µs ahead, three
 *     buckets, NCCL kernels in the old and the new naming): the report recovers the skew
 *     exactly, the bucket sizes, the collective figures, the phase- and kernel-based overlap
 *     and idle and the images — every figure worked out by hand from the generator's
 *     timeline (the arithmetic is in the comments, times in µs per step);
 *   - the legacy fixture (a real 2-rank gloo DDP job written by Debian's torch 1.13): what
 *     does not depend on that machine's timing (ranks, steps, buckets, phases, unknown
 *     sizes left empty, offsets from all-reduce ends, the warnings);
 *   - the legacy BatchNorm fixture (the same job with a BatchNorm2d: DDP broadcasts its
 *     buffers in every forward, and the loop all-gathers the loss): every collective is
 *     communication — one comm.broadcast row per broadcast (c10d::broadcast_ with its
 *     gloo:broadcast), comm.allgather rows, overlap.csv's comm_ms and compute_ms as
 *     FORMULAS.md defines them, worked out here from the imported rows;
 *   - run directories and trace files mixed in one report; the --kineto export read back
 *     gives the same tables;
 *   - every bad input the issue names (no ProfilerStep, no rank, a cut file, a cut .gz,
 *     unknown NCCL kernel names, an unknown dtype; not JSON, a lone value, an empty file,
 *     no traceEvents, no training events, two traces of one rank, deep nesting, corrupt
 *     gzip): one line, or a warning and a report; events out of order give the same tables
 *     as in order; a few hundred mutations and every truncation of a trace never crash;
 *   - units: µs -> ns parsing, the reorder window, the offset median, the kernel sweep. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "report/analysis/analysis.h"
#include "report/input/import.h"
#include "report/input/import_core.h"
#include "report/input/import_group.h"
#include "report/input/kernels.h"
#include "report/input/ptjson.h"
#include "report/input/reorder.h"
#include "report/report.h"
#include "testutil.h"

static char *root;

/* ---- helpers ---- */

/* the shared growing text (testutil.h); `add` keeps this file's many trace lines within 100
 * columns */
#define add test_text_add

/* Run report_run_opts on inputs with stderr captured into *err (caller frees). */
#define CAPTURE_KINETO 1 /* report_capture's flags: --kineto */
#define CAPTURE_HTA 2    /* --hta-defaults */

static int report_capture(const char *const *inputs, int n, const char *out, int flags,
                          char **err)
{
    char *errpath = test_path(root, "stderr.txt");
    fflush(stderr);
    int saved = dup(2);
    int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    error_clear();
    struct report_opts o = {.out_dir = out, .kineto = (flags & CAPTURE_KINETO) != 0,
                            .hta_defaults = (flags & CAPTURE_HTA) != 0};
    int rc = report_run_opts(inputs, n, &o, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    *err = test_read_file(root, "stderr.txt");
    free(errpath);
    return rc;
}

static int report1(const char *input, const char *out, char **err)
{
    const char *in[] = {input};
    return report_capture(in, 1, out, 0, err);
}

static void expect_line(const char *file, const char *dir, const char *line)
{
    char *text = test_read_file(dir, file);
    char *want = NULL;
    if (asprintf(&want, "\n%s\n", line) < 0)
        abort();
    CHECK(text && strstr(text, want), "%s/%s lacks the row\n  %s\n--- it holds:\n%s", dir, file,
          line, text ? text : "(missing)");
    free(want);
    free(text);
}

/* file holds a line starting with prefix */
static void expect_prefix(const char *file, const char *dir, const char *prefix)
{
    char *text = test_read_file(dir, file);
    char *want = NULL;
    if (asprintf(&want, "\n%s", prefix) < 0)
        abort();
    CHECK(text && strstr(text, want), "%s/%s lacks a row starting\n  %s\n--- it holds:\n%s", dir,
          file, prefix, text ? text : "(missing)");
    free(want);
    free(text);
}

static const char *fixture(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/fixtures/pytorch/%s", test_source_dir(), name);
    return buf;
}

/* ---- the Kineto fixture ---- */

static void test_kineto_fixture(void)
{
    char *out = test_path(root, "kineto-out"), *err = NULL;
    int rc = report1(fixture("kineto-2hosts"), out, &err);
    CHECK(rc == 0, "report on the Kineto fixture: %s", error_get());
    CHECK(err && strstr(err, "warning") == NULL, "no warning expected, got:\n%s", err);
    /* clocks: rank 1 shares hostA's clock; hostB runs 2345.678 µs ahead, found from the 12
     * device all-reduces it shares with rank 0 (every rank leaves each at the same instant) */
    const char *ranks[] = {
        "kineto-2hosts,0,kineto,hostA,4,0.000,reference,",
        "kineto-2hosts,1,kineto,hostA,4,0.000,same host as rank 0 (shared clock),",
        "kineto-2hosts,2,kineto,hostB,4,-2.346,median of 12 device all-reduce end(s) vs rank 0,",
        "kineto-2hosts,3,kineto,hostB,4,-2.346,median of 12 device all-reduce end(s) vs rank 0,"};
    char *rk = test_read_file(out, "ranks.csv");
    for (int r = 0; r < 4; r++)
        CHECK(rk && strstr(rk, ranks[r]), "ranks.csv lacks %s:\n%s", ranks[r], rk ? rk : "");
    free(rk);
    /* buckets: rank r's NCCL kernel of b0 is [7100 + 100r, 9100): 2000, 1900, 1800, 1700 ->
     * mean 1850; 262144 Float = 1048576 B / 1850000 ns = 0.567 GB/s, busbw x 2(3)/4 = 0.850;
     * all of it inside the backward kernels' span [5200, 12000): 100 %.  Per step the
     * shortest is 1700 (transfer), waits 300, 200, 100, 0 -> mean 150, starts 300 apart
     * (skew, on the aligned clock); 1048576 / 1700000 = 0.617, x 1.5 = 0.925 */
    expect_line("buckets.csv", out,
                "kineto-2hosts,4,0,,1048576,16,1.850,0.567,0.850,100.00,1.700,0.150,0.300,0.617,"
                "0.925");
    /* b1 [9100 + 100r, 11300): 2200..1900, mean 2050; 6553600 Float = 26214400 B */
    expect_line("buckets.csv", out,
                "kineto-2hosts,4,1,,26214400,16,2.050,12.788,19.181,100.00,1.900,0.150,0.300,"
                "13.797,20.696");
    /* b2 [12000 + 100r, 13000): 1000..700, mean 850; 1000000 BFloat16 = 2e6 B; after the
     * backward kernels (which end at 12000): 0 % hidden */
    expect_line("buckets.csv", out,
                "kineto-2hosts,4,2,,2000000,16,0.850,2.353,3.529,0.00,0.700,0.150,0.300,2.857,"
                "4.286");
    /* overlap, rank 0, per step (x 4 steps):
     *   phase-based: C = device forward [1000,4500) + backward [5200,12000) + optimizer
     *   [14100,14600) = 3500 + 6800 + 500 = 10800; M = every collective: the broadcast
     *   kernel [700,800) + b0 2000 + b1 2200 + b2 1000 = 5300; M ∩ C = [7100,11300) = 4200
     *   -> exposed 1100, 79.25 %; idle = 18000 - |C ∪ M| = 18000 - (100 + 3500 + 7800 +
     *   500) = 6100
     *   kernel-based: compute kernels 800+800+800+700 + 1800+2000+2000+500 + 500 = 9900;
     *   NCCL: broadcast [700,800) + [7100,11300) + [12000,13000) = 5300; NCCL ∩ compute =
     *   [7100,11000) = 3900 -> 73.58 %; busy = memcpy [600,900) + [1000,1800) + [1900,2700)
     *   + [3000,4500) + [5200,11300) + [11500,13000) + [14100,14600) = 11500; window =
     *   4 x 20000 - 6000 (first start 600, last end 14600 of step 4) = 74000 -> idle
     *   74000 - 46000 = 28000.  Gaps closed by an activity launched after they began (host
     *   wait): [2700,3000) L2950, [4500,5200) L5100, [11300,11500) L11400, [13000,14100)
     *   L14050 = 2300 per step, + 3 x [14600, 20600) between steps (memcpy L20520) = 27200;
     *   kernel gaps [900,1000) L700 and [1800,1900) L1600: 200 per step = 800 */
    /* (an import has no kind cpu rows: comm_cpu_ms and comm_cpu_bwd_ms, last, are empty) */
    expect_line("overlap.csv", out,
                "kineto-2hosts,0,72.000,43.200,21.200,4.400,79.25,24.400,39.600,21.200,73.58,"
                "28.000,27.200,0.800,,");
    /* rank r enters each all-reduce 100r late: M = 5300 - 300r, M ∩ C = 4200 - 200r, the
     * gap [12000, 12000 + 100r) before b2 (launched at 11620: a kernel gap) adds 100r to
     * idle and to kernel gap; NCCL kernels 5300 - 300r, ∩ compute 3900 - 200r (comm_ms is
     * k_comm_ms now: both are every NCCL collective) */
    expect_line("overlap.csv", out,
                "kineto-2hosts,1,72.000,43.200,20.000,4.000,80.00,24.800,39.600,20.000,74.00,"
                "28.400,27.200,1.200,,");
    expect_line("overlap.csv", out,
                "kineto-2hosts,2,72.000,43.200,18.800,3.600,80.85,25.200,39.600,18.800,74.47,"
                "28.800,27.200,1.600,,");
    expect_line("overlap.csv", out,
                "kineto-2hosts,3,72.000,43.200,17.600,3.200,81.82,25.600,39.600,17.600,75.00,"
                "29.200,27.200,2.000,,");
    /* the broadcast: record_param_comms (broadcast, 1024 x Float = 4096 B) in forward and
     * its NCCL kernel [700, 800) (old and new names): a comm.broadcast device row per step,
     * sized from the host's record_param_comms; the buckets' all-reduces are the allreduce
     * phase (3 x 4 steps).  The broadcast takes 0.1 ms on every rank in each call: all of
     * it transfer, no wait, so no rank arrived last */
    expect_line("phases.csv", out,
                "kineto-2hosts,0,comm.broadcast,4,0.400,0.100,0.100,0.100,0.100,0.56,0,"
                "broadcast,16384,0.400,0.000,,");
    expect_line("phases.csv", out,
                "kineto-2hosts,3,comm.broadcast,4,0.400,0.100,0.100,0.100,0.100,0.56,0,"
                "broadcast,16384,0.400,0.000,,");
    expect_prefix("phases.csv", out, "kineto-2hosts,0,allreduce,12,20.800,");
    /* backward: the kernels launched inside the host span [5000, 11600] run [5200, 12000);
     * forward: [1000, 4500) -> the device rows replace the host ones */
    expect_line("phases.csv", out,
                "kineto-2hosts,0,backward,4,27.200,6.800,6.800,6.800,6.800,37.78,0,,,,,,");
    expect_line("phases.csv", out,
                "kineto-2hosts,2,forward,4,14.000,3.500,3.500,3.500,3.500,19.44,0,,,,,,");
    /* ProfilerStep#10..#13 renumbered 1..4; batch 32 from the forward's first input dims:
     * 4 ranks x 4 steps x 32 = 512 images in 4 x 18 ms of rank 0's steps */
    /* 4 steps, too few for a warm-up: the steady state is every step; the first 18 ms */
    expect_line("speedup.csv", out, "kineto-2hosts,ddp,cuda,4,,,512,,0.072,7111.1,,,,1,,,,7111.1,7111.1,7111.1,,,,"
                                    "steady,4,512,0.072,18.000,7111.1,,");
    expect_line("stragglers.csv", out, "kineto-2hosts,4,4,0,12.000,12.000,0.000,0.000");
    free(err);

    /* the offset in ns, exactly, through the import API */
    struct runset rs;
    runset_init(&rs);
    char **paths = NULL;
    int n = 0;
    CHECK(import_dir_traces(fixture("kineto-2hosts"), &paths, &n) == 0 && n == 4,
          "import_dir_traces found %d traces: %s", n, error_get());
    if (n == 4 && import_run(&rs, "k", paths, n) == 0) {
        const struct run *r = &rs.runs[0];
        CHECK(r->nranks == 4 && r->ranks[2].offset_ns == -2345678 &&
                  r->ranks[3].offset_ns == -2345678 && r->ranks[1].offset_ns == 0,
              "offsets %lld %lld %lld, want 0 -2345678 -2345678",
              (long long)r->ranks[1].offset_ns, (long long)r->ranks[2].offset_ns,
              (long long)r->ranks[3].offset_ns);
        CHECK(r->world_size == 4 && strcmp(r->format, "kineto") == 0, "world %d format %s",
              r->world_size, r->format);
    } else {
        CHECK(0, "import_run: %s", error_get());
    }
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    runset_free(&rs);
    free(out);
}

/* Holistic Trace Analysis itself on the Kineto fixture (tests/fixtures/pytorch/
 * kineto-2hosts.hta.csv, written by hta_expected.py with HTA's code; this test does not need
 * HTA): with the last step kept and no rounding ("exact"), ddpprof's k_idle_ms is HTA's
 * temporal breakdown idle time and k_compute_ms its compute time, per rank, to the µs. */
/* ddpprof's figures against HTA's committed ones for setting "exact" (the report's own) or
 * "default" (ddpprof report --hta-defaults) */
static void kineto_vs_hta(const char *setting)
{
    const int dflt = strcmp(setting, "default") == 0;
    const char *in[] = {fixture("kineto-2hosts")};
    char *out = test_path(root, dflt ? "hta-default-out" : "hta-out"), *err = NULL, path[4200];
    char fmt[64];
    CHECK(report_capture(in, 1, out, dflt ? CAPTURE_HTA : 0, &err) == 0, "kineto: %s",
          error_get());
    free(err);
    snprintf(path, sizeof path, "%s.hta.csv", fixture("kineto-2hosts"));
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "%s: cannot open", path);
    struct test_csv *ov = test_csv_read(out, "overlap.csv");
    int compared = 0;
    char line[256];
    while (f && ov && fgets(line, sizeof line, f)) {
        int rank;
        char fig[32];
        double us;
        snprintf(fmt, sizeof fmt, "%s,%%d,%%31[a-z_],,%%lf", setting);
        if (sscanf(line, fmt, &rank, fig, &us) != 3 ||
            (strcmp(fig, "idle") != 0 && strcmp(fig, "compute") != 0))
            continue;
        char rk[16];
        snprintf(rk, sizeof rk, "%d", rank);
        int row = test_csv_find(ov, 0, "run", "kineto-2hosts", "rank", rk, NULL);
        int col = test_csv_col(ov, strcmp(fig, "idle") == 0 ? "k_idle_ms" : "k_compute_ms");
        double got = strtod(test_csv_get(ov, row, col), NULL);
        CHECK(row >= 0 && got * 1000 > us - 0.5 && got * 1000 < us + 0.5,
              "%s, rank %d: ddpprof's k_%s %.3f ms, HTA's %.3f µs", setting, rank, fig, got, us);
        compared++;
    }
    CHECK(compared == 8, "compared %d HTA figures (want 4 ranks x idle, compute)", compared);
    /* idle.csv: HTA's per-stream idle time breakdown (exact to 0.5 µs) and queue_max */
    char *id = test_read_file(out, "idle.csv");
    CHECK(id && strstr(id, "run,rank,stream,host_wait_ms,kernel_wait_ms,other_ms,queue_mean,"
                           "queue_max\n"),
          "idle.csv's header:\n%s", id ? id : "");
    int per_stream = 0;
    struct test_csv *idt = test_csv_read(out, "idle.csv");
    if (f)
        rewind(f);
    while (f && idt && fgets(line, sizeof line, f)) {
        int rank, stream;
        char fig[32];
        const char *name;
        double us;
        snprintf(fmt, sizeof fmt, "%s,%%d,%%31[a-z_],%%d,%%lf", setting);
        if (sscanf(line, fmt, &rank, fig, &stream, &us) != 4)
            continue;
        if (strcmp(fig, "host_wait") == 0)
            name = "host_wait_ms";
        else if (strcmp(fig, "kernel_wait") == 0)
            name = "kernel_wait_ms";
        else if (strcmp(fig, "other") == 0)
            name = "other_ms";
        else if (strcmp(fig, "queue_max") == 0)
            name = "queue_max";
        else
            continue; /* queue_mean: HTA's depends on its unstable sort's order at ties */
        char rk[16], st[16];
        snprintf(rk, sizeof rk, "%d", rank);
        snprintf(st, sizeof st, "%d", stream);
        int row = test_csv_find(idt, 0, "run", "kineto-2hosts", "rank", rk, "stream", st, NULL);
        double v = strtod(test_csv_get(idt, row, test_csv_col(idt, name)), NULL);
        double got = strcmp(name, "queue_max") == 0 ? v : v * 1000;
        CHECK(got > us - 0.5 && got < us + 0.5,
              "%s, rank %d stream %d: ddpprof's %s %.3f, HTA's %.3f", setting, rank, stream, fig,
              got, us);
        per_stream++;
    }
    CHECK(per_stream == 29, "%s: compared %d per-stream HTA figures (want 29: HTA leaves out "
                            "some zeros)", setting, per_stream);
    /* queue_mean: HTA's launches-then-kernels order kept at equal times (a stable sort) */
    CHECK(id && strstr(id, dflt ? "\nkineto-2hosts,0,7,22.800,0.000,0.600,0.8000,2\n"
                                : "\nkineto-2hosts,0,7,32.400,0.000,0.800,0.8000,2\n") &&
              strstr(id, dflt ? "\nkineto-2hosts,3,20,38.208,0.000,0.903,0.5000,1\n"
                              : "\nkineto-2hosts,3,20,53.500,0.000,1.200,0.5000,1\n"),
          "%s: idle.csv:\n%s", setting, id ? id : "");
    free(id);
    test_csv_free(idt);
    if (f)
        fclose(f);
    test_csv_free(ov);
    free(out);
}

static void test_kineto_vs_hta(void)
{
    kineto_vs_hta("exact");
    kineto_vs_hta("default");
}

/* ---- the legacy fixture ---- */

/* the legacy fixture's traces renamed a_rank1 and b_rank0: the rank comes from the file
 * name (against the file order, which would make a_rank1 rank 0), with a warning saying so */
static void test_legacy_named_ranks(void)
{
    char *dir = test_path(root, "legacy-named"), *out = test_path(root, "legacy-named-out");
    char *cmd = NULL, *err = NULL;
    const char *src = fixture("legacy-gloo-2ranks");
    if (asprintf(&cmd,
                 "mkdir -p '%s' && cp '%s/fixturehost_1000.1795438320634.pt.trace.json.gz' "
                 "'%s/a_rank1.pt.trace.json.gz' && cp "
                 "'%s/fixturehost_1001.1795438320634.pt.trace.json.gz' "
                 "'%s/b_rank0.pt.trace.json.gz'",
                 dir, src, dir, src, dir) < 0)
        abort();
    CHECK(system(cmd) == 0, "%s", cmd);
    int rc = report1(dir, out, &err);
    CHECK(rc == 0, "report on the renamed legacy traces: %s", error_get());
    CHECK(err && strstr(err, "a_rank1.pt.trace.json.gz: no distributedInfo.rank") &&
              strstr(err, "taken as rank 1 from the file name") &&
              strstr(err, "taken as rank 0 from the file name") && !strstr(err, "file order"),
          "the ranks from the names:\n%s", err ? err : "");
    int r = -1;
    CHECK(import_group_name_rank("/x/rank7/w_RANK-12.pt.trace.json", NULL, 0, &r) == 1 && r == 12,
          "rank of a name: %d", r);
    CHECK(import_group_name_rank("/x/rank7/host_1001.pt.trace.json", NULL, 0, &r) == 0 &&
              import_group_name_rank("ranked.json", NULL, 0, &r) == 0 &&
              import_group_name_rank("rank99999.json", NULL, 0, &r) == 0,
          "names without a rank give one");
    free(cmd);
    free(err);
    free(out);
    free(dir);
}

static void test_legacy_fixture(void)
{
    char *out = test_path(root, "legacy-out"), *err = NULL;
    int rc = report1(fixture("legacy-gloo-2ranks"), out, &err);
    CHECK(rc == 0, "report on the legacy fixture: %s", error_get());
    /* the legacy exporter writes no rank: both files say so, ranks from the name order */
    CHECK(err && strstr(err, "fixturehost_1000") && strstr(err, "taken as rank 0") &&
              strstr(err, "fixturehost_1001") && strstr(err, "taken as rank 1"),
          "the missing-rank warnings:\n%s", err ? err : "");
    char *rk = test_read_file(out, "ranks.csv");
    CHECK(rk && strstr(rk, "\nlegacy-gloo-2ranks,0,legacy,fixturehost,2,0.000,reference,") &&
              strstr(rk, "median of 4 host all-reduce end(s) vs rank 0"),
          "ranks.csv: two steps each, rank 1 aligned on 2 steps x 2 buckets:\n%s", rk ? rk : "");
    free(rk);
    /* two buckets, 2 steps x 2 ranks each; a legacy trace has no sizes: bytes and
     * bandwidths empty, never 0 */
    char *bk = test_read_file(out, "buckets.csv");
    CHECK(bk && strstr(bk, "\nlegacy-gloo-2ranks,2,0,,,4,") &&
              strstr(bk, "\nlegacy-gloo-2ranks,2,1,,,4,") &&
              !strstr(bk, "\nlegacy-gloo-2ranks,2,2,"),
          "buckets.csv:\n%s", bk ? bk : "");
    struct test_csv *bt = bk ? test_csv_read(out, "buckets.csv") : NULL;
    if (bt) {
        int r = test_csv_find(bt, 0, "run", "legacy-gloo-2ranks", "world_size", "2", "bucket", "0",
                              NULL);
#define BUCKET0(name) test_csv_get(bt, r, test_csv_col(bt, name))[0]
        CHECK(r >= 0 && bt->nfields[r] == bt->ncols && BUCKET0("algbw_GBps") == '\0' &&
                  BUCKET0("busbw_GBps") == '\0' && BUCKET0("xfer_algbw_GBps") == '\0' &&
                  BUCKET0("transfer_ms") != '\0' && BUCKET0("sync_wait_ms") != '\0',
              "b0: algbw/busbw/xfer empty without sizes, transfer and sync wait present");
#undef BUCKET0
    }
    test_csv_free(bt);
    free(bk);
    char *ph = test_read_file(out, "phases.csv");
    static const char *phases[] = {"step,2,", "data,2,", "forward,2,", "backward,2,",
                                   "allreduce,4,", "optimizer,4,"};
    for (int r = 0; r < 2; r++)
        for (size_t k = 0; k < sizeof phases / sizeof *phases; k++) {
            char want[96];
            snprintf(want, sizeof want, "\nlegacy-gloo-2ranks,%d,%s", r, phases[k]);
            CHECK(ph && strstr(ph, want), "phases.csv lacks %s", want + 1);
        }
    free(ph);
    /* no shapes recorded: images (and so throughput) empty; train_s from the steps */
    char *sp = test_read_file(out, "speedup.csv");
    CHECK(sp && strstr(sp, "\nlegacy-gloo-2ranks,ddp,cpu,2,,,,,0.0"), "speedup.csv:\n%s",
          sp ? sp : "");
    free(sp);
    free(err);
    free(out);
}

/* ---- the legacy BatchNorm fixture: every collective is communication ---- */

struct span {
    int64_t s, e;
};

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s;
}

/* |union| of the host range rows of rank t whose phase is one of names[0..n) (NULL ends) */
static int64_t rows_union(const struct runset *rs, const struct rank_trace *t,
                          const char *const *names)
{
    struct span *v = calloc(t->n + 1, sizeof *v);
    size_t m = 0;
    for (size_t i = 0; v && i < t->n; i++)
        for (const char *const *nm = names; *nm; nm++)
            if (strcmp(strpool_get(&rs->labels, t->rows[i].phase), *nm) == 0 &&
                t->rows[i].step >= 1)
                v[m++] = (struct span){t->rows[i].start_ns, t->rows[i].end_ns};
    if (!v)
        abort();
    qsort(v, m, sizeof *v, cmp_span);
    int64_t len = 0, s = 0, e = INT64_MIN;
    for (size_t i = 0; i < m; i++) {
        if (v[i].s > e) {
            if (e > s)
                len += e - s;
            s = v[i].s;
            e = v[i].e;
        } else if (v[i].e > e) {
            e = v[i].e;
        }
    }
    if (m && e > s)
        len += e - s;
    free(v);
    return len;
}

/* A real gloo job with a BatchNorm (tests/fixtures/pytorch/make_legacy_traces.py --bn):
 * DDP broadcasts the buffers twice per forward (one per dtype), the loop all-gathers the
 * loss after the optimizer step.  Before every collective was communication, the broadcasts
 * were forward compute and the all-gathers nothing. */
static void test_legacy_bn_fixture(void)
{
    char *out = test_path(root, "legacy-bn-out"), *err = NULL;
    int rc = report1(fixture("legacy-gloo-bn-2ranks"), out, &err);
    CHECK(rc == 0, "report on the legacy BatchNorm fixture: %s", error_get());
    /* 2 steps: 4 broadcasts (c10d::broadcast_ and its gloo:broadcast are one), 2
     * all-gathers, per rank; the legacy exporter writes no sizes: bytes empty; buckets.csv
     * keeps the 2 gradient buckets only */
    for (int r = 0; r < 2; r++) {
        char want[128];
        snprintf(want, sizeof want, "legacy-gloo-bn-2ranks,%d,comm.broadcast,4,", r);
        expect_prefix("phases.csv", out, want);
        snprintf(want, sizeof want, "legacy-gloo-bn-2ranks,%d,comm.allgather,2,", r);
        expect_prefix("phases.csv", out, want);
        snprintf(want, sizeof want, "legacy-gloo-bn-2ranks,%d,allreduce,4,", r);
        expect_prefix("phases.csv", out, want);
    }
    char *ph = test_read_file(out, "phases.csv");
    /* the collective kind, then no bytes (then transfer_ms, wait_ms, ...) */
    CHECK(ph && strstr(ph, ",0,broadcast,,") && strstr(ph, ",0,allgather,,") &&
              strstr(ph, ",0,allreduce,,") && strstr(ph, "forward,2,") &&
              !strstr(ph, ",0,forward,,"),
          "phases.csv: collective kinds, no bytes (unknown):\n%s", ph ? ph : "");
    free(ph);
    char *bk = test_read_file(out, "buckets.csv");
    CHECK(bk && strstr(bk, "\nlegacy-gloo-bn-2ranks,2,1,") &&
              !strstr(bk, "\nlegacy-gloo-bn-2ranks,2,2,"),
          "buckets.csv: the gradient buckets only:\n%s", bk ? bk : "");
    free(bk);
    free(err);
    free(out);

    /* overlap.csv from the rows, as FORMULAS.md defines it: M = every collective, C =
     * forward, backward, optimizer less the other collectives: |C| = |FBO ∪ H| - |H| */
    struct runset rs;
    runset_init(&rs);
    char **paths = NULL;
    int n = 0;
    CHECK(import_dir_traces(fixture("legacy-gloo-bn-2ranks"), &paths, &n) == 0 && n == 2,
          "import_dir_traces: %d traces: %s", n, error_get());
    struct run_stat *st = NULL;
    if (n == 2 && import_run(&rs, "bn", paths, n) == 0 && runset_finish(&rs) == 0 &&
        (st = analysis_run_warmup(&rs, 0))) {
        static const char *const fbo[] = {"forward", "backward", "optimizer", NULL};
        static const char *const held[] = {"comm.broadcast", "comm.allgather", NULL};
        static const char *const fbo_held[] = {"forward", "backward", "optimizer",
                                               "comm.broadcast", "comm.allgather", NULL};
        static const char *const bcast[] = {"comm.broadcast", NULL};
        static const char *const fwd[] = {"forward", NULL};
        static const char *const fwd_bcast[] = {"forward", "comm.broadcast", NULL};
        static const char *const every[] = {"allreduce", "comm.broadcast", "comm.allgather",
                                            NULL};
        static const char *const grads[] = {"allreduce", NULL};
        for (int k = 0; k < 2; k++) {
            const struct rank_trace *t = &rs.runs[0].ranks[k];
            const struct rank_stat *r = &st[0].ranks[k];
            int64_t h = rows_union(&rs, t, held), b = rows_union(&rs, t, bcast);
            int64_t c = rows_union(&rs, t, fbo_held) - h, m = rows_union(&rs, t, every);
            /* the broadcasts lie inside forward, and take time (ms on this machine) */
            CHECK(b > 100000 && rows_union(&rs, t, fwd_bcast) == rows_union(&rs, t, fwd),
                  "rank %d: broadcasts %lld ns, not all inside forward", t->rank,
                  (long long)b);
            CHECK(r->compute_ns == c && r->comm_ns == m,
                  "rank %d: compute %lld comm %lld ns, want %lld %lld", t->rank,
                  (long long)r->compute_ns, (long long)r->comm_ns, (long long)c, (long long)m);
            /* what changed: the broadcast time left compute, the collectives joined comm */
            CHECK(r->compute_ns <= rows_union(&rs, t, fbo) - b &&
                      r->comm_ns > rows_union(&rs, t, grads),
                  "rank %d: compute %lld ns holds the broadcasts' %lld, or comm %lld ns only "
                  "the gradient all-reduces", t->rank, (long long)r->compute_ns, (long long)b,
                  (long long)r->comm_ns);
        }
    } else {
        CHECK(0, "import_run / analysis: %s", error_get());
    }
    analysis_free(st, rs.n);
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    runset_free(&rs);
}

/* ---- a small Kineto trace built here ---- */

struct mini {
    int rank;           /* -1: no distributedInfo */
    int steps;          /* ProfilerStep events (0: none) */
    const char *nccl;   /* the all-reduce kernel's name */
    const char *dtype;
    int reverse;        /* write the events in reverse order */
    int nccl_args;      /* Collective name args on the kernel */
    int worker;         /* the backend op is gloo's, on a worker thread (tid 9) */
    int first;          /* the first ProfilerStep's number (torch.profiler counts from 0) */
    int64_t corr_stride; /* correlation ids 1, 1 + stride, ... (0: 1, 2, ...) */
    int kineto_order;   /* every host event first, then the device's (as Kineto writes) */
    int lost_launch;    /* the last iteration's all-reduce launch is not written */
};

/* One rank, 3 iterations 10 ms apart: data, forward (input dims 8x4), backward ops, one
 * all-reduce (record_param_comms + nccl:all_reduce, its kernel), optimizer; kernels launched
 * through cuda_runtime. */
static char *mini_trace(const struct mini *m)
{
    struct test_text ev[64 * 3];
    int n = 0;
    memset(ev, 0, sizeof ev);
    int64_t corr = 1;
    for (int k = 0; k < 3; k++) {
        long t = 1000000 + k * 10000; /* µs */
        if (k < m->steps)
            add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\","
                          "\"pid\":1,\"tid\":1,\"ts\":%ld,\"dur\":9000}", m->first + k, t);
        add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"enumerate(DataLoader)#"
                      "x\",\"pid\":1,\"tid\":1,\"ts\":%ld,\"dur\":500}", t + 10);
        add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"DistributedDataParal"
                      "lel.forward\",\"pid\":1,\"tid\":1,\"ts\":%ld,\"dur\":2000}", t + 600);
        add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::linear\",\"pid\":1,"
                      "\"tid\":1,\"ts\":%ld,\"dur\":100,\"args\":{\"Input Dims\":[[8,4],[2,4]]}}",
            t + 610);
        add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"autograd::engine::evaluate_fu"
                      "nction: AddmmBackward0\",\"pid\":1,\"tid\":2,\"ts\":%ld,\"dur\":3000}",
            t + 3000);
        add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\",\"pid\":1,"
                      "\"tid\":2,\"ts\":%ld,\"dur\":50,\"args\":{\"Collective name\":\"allreduce\","
                      "\"In msg nelems\":1000,\"dtype\":\"%s\",\"Group size\":2}}",
            t + 4000, m->dtype);
        if (m->worker)
            add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"gloo:all_reduce\","
                          "\"pid\":1,\"tid\":9,\"ts\":%ld,\"dur\":1900}", t + 4100);
        else
            add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"nccl:all_reduce\","
                          "\"pid\":1,\"tid\":2,\"ts\":%ld,\"dur\":40}", t + 4005);
        add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"Optimizer.step#SGD."
                      "step\",\"pid\":1,\"tid\":1,\"ts\":%ld,\"dur\":500}", t + 8000);
        /* device: a forward kernel, a backward kernel, the all-reduce */
        long launch[3] = {t + 700, t + 3100, t + 4010}, ks[3] = {t + 800, t + 3200, t + 4100},
             ke[3] = {t + 2500, t + 5900, t + 6000};
        for (int j = 0; j < 3; j++) {
            if (!(m->lost_launch && k == 2 && j == 2))
                add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKe"
                              "rnel\",\"pid\":1,\"tid\":%d,\"ts\":%ld,\"dur\":5,"
                              "\"args\":{\"correlation\":%lld}}",
                    j == 0 ? 1 : 2, launch[j], (long long)corr);
            if (j < 2)
                add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm_%d\",\"pid\":0,"
                              "\"tid\":7,\"ts\":%ld,\"dur\":%ld,\"args\":{\"stream\":7,"
                              "\"correlation\":%lld}}", j, ks[j], ke[j] - ks[j],
                    (long long)corr);
            else
                add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"pid\":0,"
                              "\"tid\":20,\"ts\":%ld,\"dur\":%ld,\"args\":{\"stream\":20,"
                              "\"correlation\":%lld%s}}", m->nccl, ks[j], ke[j] - ks[j],
                    (long long)corr,
                    m->nccl_args ? ",\"Collective name\":\"allreduce\",\"In msg nelems\":1000,"
                                   "\"dtype\":\"Float\"" : "");
            corr += m->corr_stride ? m->corr_stride : 1;
        }
        add(&ev[n++], "{\"ph\":\"X\",\"cat\":\"gpu_user_annotation\",\"name\":\"nccl:all_reduce\","
                      "\"pid\":0,\"tid\":20,\"ts\":%ld,\"dur\":1900}", t + 4100);
    }
    struct test_text t = {0};
    add(&t, "{\"schemaVersion\":1,");
    if (m->rank >= 0)
        add(&t, "\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":%d,\"world_size\":2},",
            m->rank);
    add(&t, "\"baseTimeNanoseconds\":1700000000000000000,\"traceEvents\":[\n");
    int written = 0;
    for (int pass = 0; pass < 2; pass++) /* kineto_order: pid 1 (host), then pid 0 (device) */
        for (int i = 0; i < n; i++) {
            int k = m->reverse ? n - 1 - i : i;
            if (!ev[k].s || (m->kineto_order && !strstr(ev[k].s, pass ? "\"pid\":0" : "\"pid\":1")))
                continue;
            written++;
            add(&t, "%s%s\n", ev[k].s, written < n ? "," : "");
            free(ev[k].s);
            ev[k].s = NULL;
        }
    add(&t, "]}\n");
    return t.s;
}

static void write_text(const char *dir, const char *name, const char *text)
{
    test_write_file(dir, name, text, strlen(text));
}

static char *make_dir(const char *name)
{
    char *d = test_path(root, name);
    mkdir(d, 0777);
    return d;
}

/* A directory holding the mini traces of ranks 0 and 1 (each built from m with its rank). */
static char *mini_dir(const char *name, struct mini m)
{
    char *d = make_dir(name);
    for (int r = 0; r < 2; r++) {
        struct mini mr = m;
        if (m.rank >= 0)
            mr.rank = r;
        char *t = mini_trace(&mr), fname[64];
        snprintf(fname, sizeof fname, "host_%d.1.pt.trace.json", 100 + r);
        write_text(d, fname, t);
        free(t);
    }
    return d;
}

static const struct mini mini_good = {0, 3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
                                      "Float", 0, 0, 0, 5, 0, 0, 0};

static void test_mini_good_and_reversed(void)
{
    char *d = mini_dir("mini", mini_good), *out = test_path(root, "mini-out"), *err = NULL;
    CHECK(report1(d, out, &err) == 0, "mini: %s", error_get());
    CHECK(err && !strstr(err, "warning"), "mini: no warning expected:\n%s", err);
    free(err);
    /* one bucket of 1000 Float = 4000 B per step, its kernel [4100, 6000) = 1900 µs, both
     * ranks identical: transfer 1900, no wait, no skew; 3 steps x 2 ranks = 6 calls */
    expect_line("buckets.csv", out, "mini,2,0,,4000,6,1.900,0.002,0.002,94.74,1.900,0.000,"
                                    "0.000,0.002,0.002");
    /* images: batch 8 from Input Dims [[8,4],...]: 2 ranks x 3 steps x 8 = 48 */
    char *sp = test_read_file(out, "speedup.csv");
    CHECK(sp && strstr(sp, "\nmini,ddp,cuda,2,,,48,"), "speedup.csv:\n%s", sp ? sp : "");
    free(sp);

    /* the same events written in reverse order: the reorder windows restore the order, the
     * tables are the same */
    struct mini rev = mini_good;
    rev.reverse = 1;
    char *d2 = mini_dir("mini-rev", rev), *out2 = test_path(root, "mini-rev-out");
    CHECK(report1(d2, out2, &err) == 0, "mini reversed: %s", error_get());
    free(err);
    static const char *files[] = {"phases.csv", "overlap.csv", "buckets.csv", "stragglers.csv"};
    for (int k = 0; k < 4; k++) {
        char *a = test_read_file(out, files[k]), *b = test_read_file(out2, files[k]);
        /* the run labels differ ("mini" / "mini-rev"): compare after them */
        int same = a && b;
        for (char *p = a, *q = b; same && p && q;) {
            char *pe = strchr(p, '\n'), *qe = strchr(q, '\n');
            if (!pe || !qe) {
                same = !pe && !qe;
                break;
            }
            char *pc = memchr(p, ',', (size_t)(pe - p)), *qc = memchr(q, ',', (size_t)(qe - q));
            same = pc && qc && pe - pc == qe - qc && memcmp(pc, qc, (size_t)(pe - pc)) == 0;
            p = pe + 1;
            q = qe + 1;
        }
        CHECK(same, "%s differs when the events come in reverse order:\n%s---\n%s", files[k],
              a ? a : "", b ? b : "");
        free(a);
        free(b);
    }
    /* gloo's all-reduce runs on a worker thread, its record_param_comms on the caller's:
     * the sizes are matched by order within the step (bucket 0: 1000 Float = 4000 B) */
    struct mini w = mini_good;
    w.worker = 1;
    char *d3 = mini_dir("mini-worker", w), *out3 = test_path(root, "mini-worker-out");
    CHECK(report1(d3, out3, &err) == 0, "mini with a worker thread: %s", error_get());
    free(err);
    expect_prefix("buckets.csv", out3, "mini-worker,2,0,,4000,6,1.900,");
    free(d3);
    free(out3);
    free(d);
    free(d2);
    free(out);
    free(out2);
}

/* ---- the first step: ProfilerStep#0, #1 or #5 is step 1 ---- */

/* One rank of the legacy exporter's format (a bare array, µs from the process start, no
 * device activity, no args): 3 steps numbered from first, 10 ms apart, each with data,
 * forward, a backward op, a gloo all-reduce and an optimizer step. */
static char *legacy_trace(int first)
{
    struct test_text t = {0};
    add(&t, "[");
    for (int k = 0; k < 3; k++) {
        long s = 100 + k * 10000;
        add(&t, "%s{\"name\": \"ProfilerStep#%d\", \"ph\": \"X\", \"ts\": %ld, \"dur\": 9000, "
                "\"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}},\n",
            k ? "," : "", first + k, s);
        add(&t, "{\"name\": \"enumerate(DataLoader)#x\", \"ph\": \"X\", \"ts\": %ld, \"dur\": "
                "500, \"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}},\n", s + 10);
        add(&t, "{\"name\": \"DistributedDataParallel.forward\", \"ph\": \"X\", \"ts\": %ld, "
                "\"dur\": 2000, \"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}},\n", s + 600);
        add(&t, "{\"name\": \"autograd::engine::evaluate_function: AddmmBackward0\", \"ph\": "
                "\"X\", \"ts\": %ld, \"dur\": 3000, \"tid\": 2, \"pid\": \"CPU functions\", "
                "\"args\": {}},\n", s + 3000);
        add(&t, "{\"name\": \"gloo:all_reduce\", \"ph\": \"X\", \"ts\": %ld, \"dur\": 1900, "
                "\"tid\": 9, \"pid\": \"CPU functions\", \"args\": {}},\n", s + 4100);
        add(&t, "{\"name\": \"Optimizer.step#SGD.step\", \"ph\": \"X\", \"ts\": %ld, \"dur\": "
                "500, \"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}}\n", s + 8000);
    }
    add(&t, "]\n");
    return t.s;
}

/* The name rules of the other collectives (FORMULAS.md "Imported PyTorch traces"), in a
 * trace built here: per 10 ms step (µs from its start), forward [1000, 4000) holding
 * c10d::broadcast_ [1100, 1200) + its gloo:broadcast [1300, 1500) on the worker (one
 * collective [1100, 1500), no sizes) and c10d::_allgather_base_ [2000, 2100) with its
 * record_param_comms (_allgather_base, 10 Float in, 20 out: 80 bytes received) and
 * nccl:_allgather_base [2050, 2600) (one [2000, 2600)); backward [4500, 5500) holding the
 * bucket gloo:all_reduce [4600, 4800) and a lone c10d::reduce_scatter_tensor_ [5000, 5300);
 * gloo:barrier [6000, 6100); optimizer [7000, 7500).  Per step: C = 3000 - 400 - 600 +
 * 1000 - 300 + 500 = 3200; M = 200 + 400 + 600 + 300 + 100 = 1600, M ∩ C = the bucket's
 * 200: exposed 1400, 12.50 %; idle = 9000 - |C ∪ M| = 9000 - 4600 = 4400. */
static void test_collective_names(void)
{
    struct test_text t = {0};
    static const struct {
        const char *name, *args;
        int tid, s, e;
    } ev[] = {
        {"DistributedDataParallel.forward", "{}", 1, 1000, 4000},
        {"c10d::broadcast_", "{}", 1, 1100, 1200},
        {"gloo:broadcast", "{}", 9, 1300, 1500},
        {"c10d::_allgather_base_", "{}", 1, 2000, 2100},
        {"record_param_comms", "{\"Collective name\": \"_allgather_base\", \"In msg nelems\": "
                               "10, \"Out msg nelems\": 20, \"dtype\": \"Float\"}", 1, 2010, 2090},
        {"nccl:_allgather_base", "{}", 9, 2050, 2600},
        {"autograd::engine::evaluate_function: AddmmBackward0", "{}", 2, 4500, 5500},
        {"gloo:all_reduce", "{}", 9, 4600, 4800},
        {"c10d::reduce_scatter_tensor_", "{}", 2, 5000, 5300},
        {"gloo:barrier", "{}", 9, 6000, 6100},
        {"Optimizer.step#SGD.step", "{}", 1, 7000, 7500}};
    add(&t, "[");
    for (int k = 0; k < 2; k++) {
        int s = 100 + k * 10000;
        add(&t, "%s{\"name\": \"ProfilerStep#%d\", \"ph\": \"X\", \"ts\": %d, \"dur\": 9000, "
                "\"tid\": 1, \"pid\": 1, \"args\": {}}", k ? ",\n" : "", k + 1, s);
        for (size_t i = 0; i < sizeof ev / sizeof *ev; i++)
            add(&t, ",\n{\"name\": \"%s\", \"ph\": \"X\", \"ts\": %d, \"dur\": %d, \"tid\": %d, "
                    "\"pid\": 1, \"args\": %s}",
                ev[i].name, s + ev[i].s, ev[i].e - ev[i].s, ev[i].tid, ev[i].args);
    }
    add(&t, "]\n");
    char *d = make_dir("collnames"), *out = test_path(root, "collnames-out"), *err = NULL;
    write_text(d, "host_100.1.pt.trace.json", t.s);
    free(t.s);
    CHECK(report1(d, out, &err) == 0, "report on the collective names: %s", error_get());
    /* one rank: no other to wait for, so no transfer, wait or late rank */
    expect_line("phases.csv", out,
                "collnames,0,comm.broadcast,2,0.800,0.400,0.400,0.400,0.400,4.44,0,broadcast,,,,,");
    expect_line("phases.csv", out,
                "collnames,0,comm.allgather,2,1.200,0.600,0.600,0.600,0.600,6.67,0,allgather,160,,,,");
    expect_line("phases.csv", out, "collnames,0,comm.reduce_scatter,2,0.600,0.300,0.300,0.300,"
                                   "0.300,3.33,0,reduce_scatter,,,,,");
    expect_line("phases.csv", out,
                "collnames,0,barrier,2,0.200,0.100,0.100,0.100,0.100,1.11,0,barrier,,,,,");
    expect_line("phases.csv", out,
                "collnames,0,allreduce,2,0.400,0.200,0.200,0.200,0.200,2.22,0,allreduce,,,,,");
    expect_line("overlap.csv", out, "collnames,0,18.000,6.400,3.200,2.800,12.50,8.800,,,,,,,,");
    char *bk = test_read_file(out, "buckets.csv");
    CHECK(bk && strstr(bk, "\ncollnames,1,0,") && !strstr(bk, "\ncollnames,1,1,"),
          "buckets.csv: the one gradient bucket:\n%s", bk ? bk : "");
    free(bk);
    free(err);
    free(out);
    free(d);
}

/* The report of run directory d (name) into out: 3 steps of 9 ms per rank of 2, forward
 * the phases.csv figures given ("5.100,1.700,..."), one bucket of bytes ("" where the
 * trace does not say) called in every step, and straggler rows for steps 1..3 only. */
static void check_three_steps(const char *d, const char *out, const char *name,
                              const char *forward, const char *bytes)
{
    char *err = NULL, line[160];
    CHECK(report1(d, out, &err) == 0, "%s: %s", name, error_get());
    free(err);
    for (int r = 0; r < 2; r++) {
        snprintf(line, sizeof line, "%s,%d,step,3,27.000,9.000,9.000,9.000,9.000,100.00,0,,,,,,",
                 name, r);
        expect_line("phases.csv", out, line);
        snprintf(line, sizeof line, "%s,%d,forward,3,%s,0,,,,,,", name, r, forward);
        expect_line("phases.csv", out, line);
    }
    /* one bucket, 3 steps x 2 ranks */
    snprintf(line, sizeof line, "%s,2,0,,%s,6,1.900,", name, bytes);
    expect_prefix("buckets.csv", out, line);
    for (int s = 1; s <= 3; s++) {
        snprintf(line, sizeof line, "%s,%d,2,0,", name, s);
        expect_prefix("stragglers.csv", out, line);
    }
    snprintf(line, sizeof line, "%s,4,", name);
    char *st = test_read_file(out, "stragglers.csv");
    CHECK(st && !strstr(st, line) && (snprintf(line, sizeof line, "\n%s,0,", name), 1) &&
              !strstr(st, line),
          "%s: stragglers.csv has steps 1..3 only:\n%s", name, st ? st : "");
    free(st);
}

/* Whatever number torch.profiler gave the first step (#0 by default, #1, or #5 after a
 * schedule's wait and warm-up), every profiled step is counted: 3 steps per rank, each
 * step's share of step time adds up, every step has its straggler row and its bucket
 * calls.  Before the fix, a trace starting at #0 lost its first step (step 0 means
 * "outside every step"): 2 steps, 6 ms of forward over 27 ms of steps.  (3 steps are too
 * few for warm-up detection: warmup_steps 0, every step counted.) */
static void test_first_step(void)
{
    static const int firsts[] = {0, 1, 5};
    for (size_t i = 0; i < sizeof firsts / sizeof *firsts; i++) {
        char name[32], *out = test_path(root, "first-out");
        /* Kineto: forward device span [800, 2500) = 1700 µs of each 9000 µs step: 18.89 % */
        struct mini m = mini_good;
        m.first = firsts[i];
        snprintf(name, sizeof name, "kfirst%d", firsts[i]);
        char *d = mini_dir(name, m);
        check_three_steps(d, out, name, "5.100,1.700,1.700,1.700,1.700,18.89", "4000");
        free(d);

        /* the legacy exporter's format: host times, a gloo all-reduce per step */
        snprintf(name, sizeof name, "lfirst%d", firsts[i]);
        d = make_dir(name);
        for (int r = 0; r < 2; r++) {
            char *t = legacy_trace(firsts[i]), fname[64];
            snprintf(fname, sizeof fname, "host_%d.1.pt.trace.json", 100 + r);
            write_text(d, fname, t);
            free(t);
        }
        check_three_steps(d, out, name, "6.000,2.000,2.000,2.000,2.000,22.22", "");
        free(d);
        free(out);
    }
}

/* ---- launches: every correlation id, however large ---- */

static void expect_warning(const char *what, const char *input, const char *want1,
                           const char *want2);

/* The launch of every device activity is found by its full correlation id.  Ids 1, 65537,
 * 131073, ... (all equal modulo 65536, as on a long real trace) with every launch written
 * before every kernel (Kineto's order) give the same tables as ids 1, 2, 3: before the
 * launches were kept in a map, a 65536-slot table kept only the last of them and the
 * others' gaps silently left host wait.  A kernel whose launch is missing is counted in a
 * warning. */
static void test_launch_ids(void)
{
    struct mini m = mini_good;
    m.kineto_order = 1;
    char *d = mini_dir("corr", m), *out = test_path(root, "corr-out"), *err = NULL;
    CHECK(report1(d, out, &err) == 0, "corr: %s", error_get());
    CHECK(err && !strstr(err, "warning"), "corr: no warning expected:\n%s", err);
    free(err);
    m.corr_stride = 65536;
    char *d2 = mini_dir("corrbig", m), *out2 = test_path(root, "corrbig-out");
    CHECK(report1(d2, out2, &err) == 0, "corrbig: %s", error_get());
    CHECK(err && !strstr(err, "warning"), "corrbig: no warning expected:\n%s", err);
    free(err);
    /* per iteration: the device idles [2500, 3200) before the backward kernel launched at
     * 3100 (host wait 700) and [6000, 10800) before the next forward kernel launched at
     * 10700 (host wait 4800): 700 + 4800 + 700 + 4800 + 700 = 11.700 ms, no kernel gap */
    static const char *row = ",11.700,0.000,,\n"; /* no cpu rows: comm_cpu_* empty */
    char *a = test_read_file(out, "overlap.csv"), *b = test_read_file(out2, "overlap.csv");
    CHECK(a && b && strstr(a, row) && strstr(b, row),
          "host wait with ids 1, 2, ... and 1, 65537, ...:\n%s---\n%s", a ? a : "", b ? b : "");
    free(a);
    free(b);
    /* the last all-reduce's launch is not in the trace: counted, and its gap is not host wait */
    m.corr_stride = 0;
    m.lost_launch = 1;
    char *d3 = mini_dir("corrlost", m);
    expect_warning("a lost launch", d3, "1 device activity whose correlation no cuda_runtime",
                   "(of 8 launches)");
    free(d3);
    free(d);
    free(d2);
    free(out);
    free(out2);
}

/* ---- warnings: the report goes on ---- */

static void expect_warning(const char *what, const char *input, const char *want1,
                           const char *want2)
{
    char *out = test_path(root, "warn-out"), *err = NULL;
    int rc = report1(input, out, &err);
    CHECK(rc == 0, "%s: the report should go on: %s", what, error_get());
    CHECK(err && strstr(err, want1) && (!want2 || strstr(err, want2)),
          "%s: stderr lacks '%s'%s%s:\n%s", what, want1, want2 ? " / " : "", want2 ? want2 : "",
          err ? err : "");
    free(err);
    free(out);
}

static void test_warnings(void)
{
    struct mini m = mini_good;
    m.steps = 0; /* no ProfilerStep: steps from the forward calls */
    char *d = mini_dir("no-steps", m);
    expect_warning("no ProfilerStep", d, "no ProfilerStep#N events",
                   "DistributedDataParallel.forward calls");
    char *out = test_path(root, "warn-out");
    expect_prefix("ranks.csv", out, "no-steps,0,kineto,host,3,0.000,reference,");
    free(d);

    /* dur -1 and 1e300 on two DataLoader ranges: left out with a count, not read as
     * zero-length ranges without a word */
    d = make_dir("bad-dur");
    char *bt = mini_trace(&mini_good), *p1 = strstr(bt, "\"dur\":500"), *p2 = NULL;
    p2 = p1 ? strstr(p1 + 1, "\"dur\":500") : NULL;
    CHECK(p1 && p2, "the mini trace has two DataLoader ranges");
    char *edited = NULL;
    if (p1 && p2 &&
        asprintf(&edited, "%.*s\"dur\":-1%.*s\"dur\":1e300%s", (int)(p1 - bt), bt,
                 (int)(p2 - p1 - 9), p1 + 9, p2 + 9) > 0) {
        write_text(d, "host_100.1.pt.trace.json", edited);
        expect_warning("bad dur", d, "2 complete event(s) with a dur that is no duration",
                       "left out");
    }
    free(edited);
    free(bt);
    free(d);

    m = mini_good;
    m.rank = -1; /* no distributedInfo */
    d = mini_dir("no-rank", m);
    expect_warning("no rank", d, "no distributedInfo.rank", "taken as rank 1 from the file order");
    free(d);

    m = mini_good; /* an NCCL kernel named in no known scheme, without args */
    m.nccl = "ncclSuperKernel_Reduce_v9";
    d = mini_dir("unknown-nccl", m);
    expect_warning("unknown NCCL naming", d, "named in no known scheme",
                   "gpu_user_annotation ranges instead");
    /* the annotations stand in: bucket 0 still has its 6 device rows of 1900 µs */
    expect_line("buckets.csv", out, "unknown-nccl,2,0,,4000,6,1.900,0.002,0.002,94.74,1.900,"
                                    "0.000,0.000,0.002,0.002");
    free(d);

    m = mini_good;
    m.nccl = "ncclSuperKernel_Reduce_v9";
    m.nccl_args = 1; /* unknown name, but Kineto's Collective name args say all-reduce */
    d = mini_dir("unknown-nccl-args", m);
    expect_warning("unknown NCCL naming with args", d, "named in no known scheme", NULL);
    expect_line("buckets.csv", out, "unknown-nccl-args,2,0,,4000,6,1.900,0.002,0.002,94.74,"
                                    "1.900,0.000,0.000,0.002,0.002");
    free(d);

    m = mini_good;
    m.dtype = "Float8_e4m3fn"; /* no size known: bytes empty, the host row's too */
    d = mini_dir("dtype", m);
    expect_warning("unknown dtype", d, "dtype 'Float8_e4m3fn'", "left empty");
    expect_line("buckets.csv", out, "dtype,2,0,,,6,1.900,,,94.74,1.900,0.000,0.000,,");
    free(d);

    /* a cut file: the events before the cut are used */
    char *t = mini_trace(&mini_good);
    d = make_dir("cut");
    char *half = strndup(t, strlen(t) * 2 / 3);
    write_text(d, "cut.json", half);
    char *f = test_path(d, "cut.json");
    expect_warning("cut file", f, "cut short after", "events before the cut");
    free(f);
    free(half);
    free(d);

    /* a cut .gz: written with gzip -c, then cut */
    d = make_dir("cutgz");
    write_text(d, "t.json", t);
    char *cmd = NULL;
    if (asprintf(&cmd, "gzip -c '%s/t.json' > '%s/t.json.gz' && head -c 700 '%s/t.json.gz' > "
                       "'%s/cut.json.gz' && rm '%s/t.json' '%s/t.json.gz'",
                 d, d, d, d, d, d) < 0 ||
        system(cmd) != 0)
        CHECK(0, "gzip failed: %s", cmd);
    f = test_path(d, "cut.json.gz");
    expect_warning("cut gzip", f, "cut short after", NULL);
    free(f);
    free(cmd);
    free(d);
    free(t);
    free(out);
}

/* ---- errors: one line, non-zero ---- */

static void expect_error(const char *what, const char *name, const char *content, size_t len,
                         const char *want)
{
    char *d = make_dir("errors");
    test_write_file(d, name, content, len);
    char *f = test_path(d, name), *err = NULL, *out = test_path(root, "err-out");
    int rc = report1(f, out, &err);
    CHECK(rc == -1, "%s: want an error, got %d", what, rc);
    CHECK(strstr(error_get(), want) && strstr(error_get(), name), "%s: error '%s' lacks '%s'",
          what, error_get(), want);
    CHECK(!strchr(error_get(), '\n'), "%s: the error is not one line", what);
    unlink(f);
    free(f);
    free(err);
    free(out);
    free(d);
}

static void test_errors(void)
{
    expect_error("not JSON", "a.json", "hello world", 11, "not valid JSON at byte");
    expect_error("a lone value", "b.json", "42", 2, "single value");
    expect_error("empty file", "c.json", "", 0, "empty file");
    expect_error("no traceEvents", "d.json", "{\"foo\": [1, 2]}", 15, "without traceEvents");
    const char *plain =
        "[{\"ph\":\"X\",\"name\":\"aten::add\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2}]";
    expect_error("no training events", "e.json", plain, strlen(plain), "none of its 1 events");
    expect_error("empty traceEvents", "f.json", "{\"schemaVersion\":1,\"traceEvents\":[]}", 36,
                 "no trace events");
    char deep[400];
    memset(deep, '[', sizeof deep);
    expect_error("deep nesting", "g.json", deep, sizeof deep, "nested deeper than");
    const unsigned char gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff,
                                0x00, 0x11, 0x22, 0x33, 0x44, 0x55};
    expect_error("corrupt gzip", "h.json.gz", (const char *)gz, sizeof gz, "corrupt gzip");
    const char *garbage = "{\"traceEvents\":[{\"ph\":\"X\",}]}";
    expect_error("bad JSON in the middle", "i.json", garbage, strlen(garbage),
                 "not valid JSON at byte");

    /* two traces of one rank in a directory */
    char *d = make_dir("dup-rank"), *err = NULL;
    char *t = mini_trace(&mini_good);
    write_text(d, "a_1.1.pt.trace.json", t);
    write_text(d, "b_2.1.pt.trace.json", t);
    free(t);
    char *out = test_path(root, "err-out");
    CHECK(report1(d, out, &err) == -1 && strstr(error_get(), "are both rank 0"),
          "two traces of rank 0: %s", error_get());
    free(err);
    free(out);
    free(d);
    /* a rank or world size out of range is a damaged trace, refused naming it (2e9 was
     * ignored: the world then came from the ranks given) */
    static const char dist[] = "\"rank\":0,\"world_size\":2";
    const char *const bad_dist[][3] = {
        {"world-2e9", "\"rank\":0,\"world_size\":2e9", "world_size = 2000000000 is not in [1, 65536]"},
        {"world-0", "\"rank\":0,\"world_size\":0", "world_size = 0 is not in [1, 65536]"},
        {"rank-big", "\"rank\":70000,\"world_size\":2", "rank = 70000 is not in [0, 65536)"},
    };
    for (size_t k = 0; k < sizeof bad_dist / sizeof bad_dist[0]; k++) {
        char *bd = make_dir(bad_dist[k][0]), *bt = mini_trace(&mini_good), *edited = NULL;
        char *at = strstr(bt, dist);
        CHECK(at != NULL, "the mini trace has no %s", dist);
        if (at && asprintf(&edited, "%.*s%s%s", (int)(at - bt), bt, bad_dist[k][1],
                           at + strlen(dist)) > 0) {
            write_text(bd, "a_1.1.pt.trace.json", edited);
            char *bo = test_path(root, "err-out");
            CHECK(report1(bd, bo, &err) == -1 && strstr(error_get(), bad_dist[k][2]) &&
                      strstr(error_get(), "a_1.1.pt.trace.json"),
                  "%s: %s", bad_dist[k][0], error_get());
            free(err);
            err = NULL;
            free(bo);
        }
        free(edited);
        free(bt);
        free(bd);
    }

    /* not a run directory, and no traces in it either */
    d = make_dir("nothing-here");
    out = test_path(root, "err-out");
    CHECK(report1(d, out, &err) == -1 && strstr(error_get(), "not a run directory"),
          "an empty directory: %s", error_get());
    free(err);
    free(out);
    free(d);
}

/* ---- mixed inputs and the Kineto export read back ---- */

static const char *trace_header =
    "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream\n";

/* A small ddpprof run directory: 2 ranks, 2 steps, 2 buckets, host rows only. */
static char *ddpprof_run(const char *name)
{
    char *d = make_dir(name);
    write_text(d, "meta.csv", "key,value\nmodel,convnet\nmode,ddp\ndevice,cpu\nworld_size,2\n"
                              "epochs,1\namp,off\nwall_s,1\ncomm,shm\nclock_offset_ns.rank1,0\n");
    write_text(d, "metrics.csv", "step,epoch,loss,lr,images\n1,1,2.3,0.1,64\n2,1,2.2,0.1,64\n");
    for (int r = 0; r < 2; r++) {
        struct test_text t = {0};
        add(&t, "%s", trace_header);
        for (int s = 1; s <= 2; s++) {
            long long b = 5000000000LL + (s - 1) * 10000000LL + r * 100000LL;
            add(&t, "%d,%d,1,data,-1,host,%lld,%lld,0,data,range,2\n", r, s, b, b + 1000000);
            add(&t, "%d,%d,1,forward,-1,host,%lld,%lld,0,forward,range,0\n", r, s, b + 1000000,
                b + 3000000);
            add(&t, "%d,%d,1,allreduce,0,host,%lld,%lld,4096,allreduce.b0,range,1\n", r, s,
                b + 5000000, b + 6000000 - r * 200000);
            add(&t, "%d,%d,1,backward,-1,host,%lld,%lld,0,backward,range,0\n", r, s,
                b + 3000000, b + 7000000);
            add(&t, "%d,%d,1,allreduce,1,host,%lld,%lld,8192,allreduce.b1,range,1\n", r, s,
                b + 6500000, b + 8000000 - r * 100000);
            add(&t, "%d,%d,1,optimizer,-1,host,%lld,%lld,0,optimizer,range,0\n", r, s,
                b + 8000000, b + 9000000);
            add(&t, "%d,%d,1,step,-1,host,%lld,%lld,0,step,range,0\n", r, s, b, b + 9000000);
        }
        char fname[32];
        snprintf(fname, sizeof fname, "rank%d.trace.csv", r);
        write_text(d, fname, t.s);
        free(t.s);
    }
    return d;
}

/* A one-rank GPU-shaped ddpprof run: host ranges, device-clock ranges (CUDA events) of
 * forward and the all-reduce, and CUPTI rows (kernels, an NCCL kernel, a memcpy). */
static char *ddpprof_gpu_run(const char *name)
{
    char *d = make_dir(name);
    write_text(d, "meta.csv", "key,value\nmode,ddp\ndevice,cuda\nworld_size,1\ncomm,nccl\n"
                              "hostname,gpubox\n");
    struct test_text t = {0};
    add(&t, "%s", trace_header);
    for (int s = 1; s <= 2; s++) {
        long long b = 5000000000LL + (s - 1) * 10000000LL;
        add(&t, "0,%d,1,data,-1,host,%lld,%lld,0,data,range,2\n", s, b, b + 1000000);
        add(&t, "0,%d,1,forward,-1,host,%lld,%lld,0,forward,range,0\n", s, b + 1000000,
            b + 3000000);
        add(&t, "0,%d,1,forward,-1,device,%lld,%lld,0,forward,range,0\n", s, b + 1200000,
            b + 3500000);
        add(&t, "0,%d,1,forward,-1,cupti,%lld,%lld,0,\"void k<float, 3>\",kernel,7\n", s,
            b + 1300000, b + 2000000);
        add(&t, "0,%d,1,backward,-1,host,%lld,%lld,0,backward,range,0\n", s, b + 3000000,
            b + 7000000);
        add(&t, "0,%d,1,backward,-1,cupti,%lld,%lld,0,wgrad,kernel,7\n", s, b + 3600000,
            b + 6000000);
        add(&t, "0,%d,1,allreduce,0,host,%lld,%lld,4096,allreduce.b0,range,1\n", s,
            b + 5000000, b + 6000000);
        add(&t, "0,%d,1,allreduce,0,device,%lld,%lld,4096,allreduce.b0,range,1\n", s,
            b + 5100000, b + 6100000);
        add(&t, "0,%d,1,allreduce,0,cupti,%lld,%lld,0,ncclDevKernel_AllReduce_Sum_f32_RING_LL,"
                "kernel,13\n", s, b + 5100000, b + 6100000);
        add(&t, "0,%d,1,optimizer,-1,host,%lld,%lld,0,optimizer,range,0\n", s, b + 8000000,
            b + 9000000);
        add(&t, "0,%d,1,optimizer,-1,cupti,%lld,%lld,8192,memcpy HtoD,memcpy,7\n", s,
            b + 8000000, b + 9000000);
        add(&t, "0,%d,1,step,-1,host,%lld,%lld,0,step,range,0\n", s, b, b + 9000000);
    }
    write_text(d, "rank0.trace.csv", t.s);
    free(t.s);
    return d;
}

/* Report dir into a, its --kineto export read back into b: the tables must be equal. */
static void check_export_round_trip(const char *run, const char *label, const char *host)
{
    char *a = NULL, *b = NULL, *k = NULL, *err = NULL, *exported = NULL;
    if (asprintf(&a, "%s/%s-ref", root, label) < 0 || asprintf(&b, "%s/%s-back", root, label) < 0 ||
        asprintf(&k, "%s/kineto/%s", a, label) < 0 ||
        asprintf(&exported, "%s_0.pt.trace.json", host) < 0)
        abort();
    const char *in[] = {run};
    CHECK(report_capture(in, 1, a, CAPTURE_KINETO, &err) == 0, "%s with --kineto: %s", label,
          error_get());
    free(err);
    char *k0 = test_read_file(k, exported);
    CHECK(k0 && strstr(k0, "\"schemaVersion\": 1") && strstr(k0, "\"distributedInfo\"") &&
              strstr(k0, "\"ProfilerStep#2\"") && strstr(k0, "\"record_param_comms\""),
          "%s: the export %s/%s lacks the Kineto fields", label, k, exported);
    free(k0);
    CHECK(report1(k, b, &err) == 0, "%s: the export read back: %s", label, error_get());
    free(err);
    static const char *files[] = {"phases.csv", "overlap.csv", "buckets.csv", "stragglers.csv"};
    for (int i = 0; i < 4; i++) {
        char *x = test_read_file(a, files[i]), *y = test_read_file(b, files[i]);
        CHECK(x && y && strcmp(x, y) == 0, "%s %s: the export read back differs:\n%s---\n%s",
              label, files[i], x ? x : "", y ? y : "");
        free(x);
        free(y);
    }
    free(a);
    free(b);
    free(k);
    free(exported);
}

static void test_mixed_and_export(void)
{
    char *run = ddpprof_run("rt"), *out = test_path(root, "mixed-out"), *err = NULL;
    char *mini = mini_dir("mini-files", mini_good);
    char *f0 = test_path(mini, "host_100.1.pt.trace.json");
    char *f1 = test_path(mini, "host_101.1.pt.trace.json");
    /* a run directory and two loose trace files (one run) in one report, with the export */
    const char *in[] = {run, f0, f1};
    CHECK(report_capture(in, 3, out, CAPTURE_KINETO, &err) == 0, "mixed inputs: %s", error_get());
    char *sp = test_read_file(out, "speedup.csv");
    CHECK(sp && strstr(sp, "\nrt,ddp,cpu,2,") &&
              strstr(sp, "\nhost_100.1.pt.trace.json,ddp,cuda,2,"),
          "speedup.csv of a run and two files:\n%s", sp ? sp : "");
    free(sp);
    free(err);

    /* the ddpprof runs' Kineto exports (OUT/kineto/RUN/HOST_{0,1}.pt.trace.json: one host,
     * so one clock) read back as trace directories give the same tables: a CPU run, and a
     * GPU-shaped one whose device ranges come back from gpu_user_annotation spans and whose
     * kernels give the same kernel figures */
    char *gpu = ddpprof_gpu_run("gpu");
    check_export_round_trip(gpu, "gpu", "gpubox");
    free(gpu);
    char *kdir = test_path(out, "kineto/rt"), *out2 = test_path(root, "export-out");
    char *k0 = test_read_file(kdir, "ddpprof_0.pt.trace.json");
    CHECK(k0 && strstr(k0, "\"distributedInfo\": {\"backend\": \"shm\", \"rank\": 0, "
                           "\"world_size\": 2}") &&
              strstr(k0, "\"ProfilerStep#2\"") && strstr(k0, "\"record_param_comms\"") &&
              strstr(k0, "\"In msg nelems\": 8192"),
          "the export of rank 0 lacks the Kineto fields");
    free(k0);
    CHECK(report1(kdir, out2, &err) == 0, "the export read back: %s", error_get());
    free(err);
    char *ref = test_path(root, "rt-alone");
    CHECK(report1(run, ref, &err) == 0, "the run alone: %s", error_get());
    free(err);
    static const char *files[] = {"phases.csv", "overlap.csv", "buckets.csv", "stragglers.csv"};
    for (int k = 0; k < 4; k++) {
        char *a = test_read_file(ref, files[k]), *b = test_read_file(out2, files[k]);
        CHECK(a && b && strcmp(a, b) == 0, "%s: the export read back differs:\n%s---\n%s",
              files[k], a ? a : "", b ? b : "");
        free(a);
        free(b);
    }
    char *rk = test_read_file(out2, "ranks.csv");
    CHECK(rk && strstr(rk, "\nrt,1,kineto,ddpprof,2,0.000,same host as rank 0 (shared clock),"),
          "the export's ranks share one clock:\n%s", rk ? rk : "");
    free(rk);
    free(ref);
    free(kdir);
    free(out2);
    free(f0);
    free(f1);
    free(mini);
    free(run);
    free(out);
}

/* ---- nothing crashes ---- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* import_buffer (the fuzz target's entry) and the analysis on damaged traces: 0 or -1. */
static void test_mutations(void)
{
    char *t = mini_trace(&mini_good);
    size_t n = strlen(t);
    char *errpath = test_path(root, "fuzz-stderr.txt");
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    int bad = 0, ok = 0;
    char *buf = malloc(n + 1);
    static const char pool[] = "{}[],:\"0123456789-.eE \\ntrufalsn";
    for (int iter = 0; iter < 600; iter++) {
        size_t len = n;
        memcpy(buf, t, n);
        if (iter < 200) { /* cut at every third byte of the first 600 */
            len = (size_t)iter * 3 % n;
        } else {
            int k = 1 + (int)(next_rand() % 6);
            for (int j = 0; j < k; j++) {
                size_t at = next_rand() % n;
                buf[at] = (next_rand() & 1) ? pool[next_rand() % (sizeof pool - 1)]
                                            : (char)(next_rand() & 0xff);
            }
        }
        struct runset rs;
        runset_init(&rs);
        int rc = import_buffer(&rs, buf, len, "mutated.json");
        if (rc == 0 && runset_finish(&rs) == 0) {
            struct run_stat *st = analysis_run(&rs);
            analysis_free(st, rs.n);
            ok++;
        }
        bad += rc != 0 && rc != -1;
        runset_free(&rs);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    free(errpath);
    CHECK(bad == 0, "%d mutated traces returned neither 0 nor -1", bad);
    CHECK(ok > 0, "some mutated traces should still import (got none)");
    free(buf);
    free(t);
}

/* ---- units ---- */

static void test_units(void)
{
    static const struct {
        const char *s;
        int ok;
        int64_t ns;
    } us[] = {{"1.5", 1, 1500},
              {"198093488368.463", 1, 198093488368463LL},
              {"0.0005", 1, 1}, /* rounded to the nearest ns, half up */
              {"0.0004", 1, 0},
              {"-3", 1, -3000},
              {"1e3", 1, 1000000},
              {"2.5E-1", 1, 250},
              {"abc", 0, 0},
              {"", 0, 0},
              {"1.", 0, 0},
              {"1e30", 0, 0},
              {"99999999999999999999", 0, 0}};
    for (size_t i = 0; i < sizeof us / sizeof *us; i++) {
        int64_t ns = 0;
        int rc = ptjson_us_to_ns(us[i].s, strlen(us[i].s), &ns);
        CHECK((rc == 0) == us[i].ok && (!us[i].ok || ns == us[i].ns),
              "ptjson_us_to_ns(\"%s\") = %d, %lld", us[i].s, rc, (long long)ns);
    }

    /* the reorder window: a shuffle within the window comes out sorted, a record further
     * out of order than the window is counted late */
    struct reorder r;
    CHECK(reorder_init(&r, 16, 8) == 0, "reorder_init");
    int64_t rec[2], out[2], last = -1;
    static const int64_t in[] = {5, 3, 7, 1, 2, 9, 8, 4, 6, 10, 12, 11, 13, 14, 15, 16, 17};
    int sorted = 1, outs = 0;
    for (size_t i = 0; i < sizeof in / sizeof *in; i++) {
        rec[0] = in[i];
        rec[1] = in[i] + 1;
        if (reorder_push(&r, rec, out)) {
            sorted &= out[0] >= last;
            last = out[0];
            outs++;
        }
    }
    while (reorder_pop(&r, out)) {
        sorted &= out[0] >= last;
        last = out[0];
        outs++;
    }
    CHECK(sorted && outs == 17 && r.late == 0, "reorder: sorted %d, %d out, %llu late", sorted,
          outs, (unsigned long long)r.late);
    for (int i = 100; i < 120; i++) { /* then one record 20 places early */
        rec[0] = i == 119 ? 50 : i;
        rec[1] = rec[0];
        reorder_push(&r, rec, out);
    }
    while (reorder_pop(&r, out))
        ;
    CHECK(r.late == 1, "reorder: one late record, counted %llu", (unsigned long long)r.late);
    reorder_free(&r);

    /* the offset median: robust to an outlier; the lower middle of an even count */
    int64_t d1[] = {5, -3, 100, 4, 6}, d2[] = {4, 1, 3, 2};
    CHECK(import_clock_offset(d1, 5) == 5 && import_clock_offset(d2, 4) == 2,
          "import_clock_offset");

    /* the kernel sweep by hand: a compute [0,10) L0, comm [5,20) L1, compute [30,40) L25
     * (launched after the gap began at 20: host wait 10), memcpy [45,50) L35 (launched
     * before the gap began at 40: kernel gap 5).  compute 20, comm 15, comm ∩ compute 5 ->
     * 33.33 %; busy 35 of the window 50 -> idle 15 */
    struct kernel_sweep k = {0};
    kernel_sweep_add(&k, 0, 10, KERNEL_COMPUTE, 0);
    kernel_sweep_add(&k, 5, 20, KERNEL_COMM, 1);
    kernel_sweep_add(&k, 30, 40, KERNEL_COMPUTE, 25);
    kernel_sweep_add(&k, 45, 50, KERNEL_MEMORY, 35);
    kernel_sweep_finish(&k);
    double pct = 0;
    int64_t hw = -1, kg = -1;
    CHECK(k.compute.total == 20 && k.comm.total == 15 && analysis_kernel_overlap_pct(&k, &pct) &&
              pct > 33.33 && pct < 33.34 && analysis_kernel_idle_ns(&k) == 15 &&
              analysis_host_wait_ns(&k, &hw) && hw == 10 && analysis_kernel_gap_ns(&k, &kg) &&
              kg == 5,
          "kernel sweep: compute %lld comm %lld overlap %.2f idle %lld host wait %lld gap %lld",
          (long long)k.compute.total, (long long)k.comm.total, pct,
          (long long)analysis_kernel_idle_ns(&k), (long long)hw, (long long)kg);
    struct kernel_sweep none = {0}; /* no launch times: host wait and gap undefined */
    kernel_sweep_add(&none, 0, 10, KERNEL_COMPUTE, -1);
    kernel_sweep_add(&none, 20, 30, KERNEL_COMPUTE, -1);
    kernel_sweep_finish(&none);
    CHECK(!analysis_host_wait_ns(&none, &hw) && analysis_kernel_idle_ns(&none) == 10,
          "kernel sweep without launch times");
}

int main(void)
{
    root = test_tmpdir();
    test_units();
    test_kineto_fixture();
    test_kineto_vs_hta();
    test_legacy_fixture();
    test_legacy_named_ranks();
    test_legacy_bn_fixture();
    test_collective_names();
    test_mini_good_and_reversed();
    test_first_step();
    test_launch_ids();
    test_warnings();
    test_errors();
    test_mixed_and_export();
    test_mutations();
    test_tmpdir_done(root);
    return test_finish();
}
