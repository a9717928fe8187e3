/* test_report_diff.c — `ddpprof diff` (report/analysis/diff.c) on a synthetic pair whose
 * every row was worked out by hand from report/FORMULAS.md "diff.csv" (the arithmetic is
 * in the comments): the step change, each phase's, layer's and bucket's part of the step and share of the
 * change, the shares adding up to 100.00 exactly as printed, the "other" remainders; which
 * two runs a diff takes (a main-job directory, two run directories, swapped); and its bad
 * input (three runs, one run).
 *
 * Fixture (times in µs; files in ns from 5e9), 4 steps per run, every step alike:
 *   A = OUT/baseline  1 rank, step 10000 = data 1000 + forward 3000 (layer1.0 1000, fc 1500,
 *                     other 500) + backward 4000 (fc 1000, layer1.0 2000, other 1000) +
 *                     optimizer 1000 + other 1000
 *   B = OUT/ddp       2 ranks; rank 0 (the critical rank: its step is the longest) step 13000 =
 *                     data 1000 + forward 4000 (layer1.0 1000, fc 2500, other 500) + backward
 *                     4000 (as A) + exposed communication 2000 + optimizer 1000 + other 1000;
 *                     bucket 0's all-reduce [7000, 10000) is under backward until 9000: 1000
 *                     exposed; bucket 1's [9500, 11000) overlaps bucket 0 until 10000 (those
 *                     instants are bucket 0's, the lowest running): 1000 exposed.
 *                     rank 1: steps of 12000 (not critical), its rows must not count.
 *   meta.csv lists the layers fc, layer1.0 (the model's order: the rows' order in diff.csv),
 *   the reverse of the order the trace names them first.
 * So: step +3000 µs; forward +1000 (share 1/3 = 33.33 %), exposed_comm +2000 (66.67 %); the
 * rest 0; forward/fc +1000 (33.33 %); exposed_comm/b0 +1000 and b1 +1000: 33.333.. each,
 * rounded to add up to 66.67: 33.34 (b0, the earlier of equal remainders) and 33.33. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "report/report.h"
#include "testutil.h"

#define BASE_NS 5000000000LL
#define NSTEPS 4

/* one range row, times in µs from the step's start t0 */
static void rng(struct test_text *t, int rank, int step, const char *phase, int bucket, long t0,
                long s, long e, const char *name)
{
    int stream = strcmp(phase, "data") == 0 ? 2 : strcmp(phase, "allreduce") == 0 ? 1 : 0;
    test_text_add(t, "%d,%d,1,%s,%d,host,%lld,%lld,%d,%s,range,%d\n", rank, step, phase, bucket,
                  BASE_NS + (t0 + s) * 1000LL, BASE_NS + (t0 + e) * 1000LL,
                  strcmp(phase, "allreduce") == 0 ? 4096 : 0, name ? name : phase, stream);
}

static void write_meta(const char *dir, const char *mode, int world)
{
    char meta[512];
    snprintf(meta, sizeof meta,
             "key,value\nmodel,convnet\nmode,%s\ndevice,cpu\nworld_size,%d\nepochs,1\n"
             "steps,%d\nwall_s,1\nclock_offset_ns.rank0,0\nclock_offset_ns.rank1,0\n"
             "layers,2\nlayer.0.name,fc\nlayer.1.name,layer1.0\n", /* the rows' order */
             mode, world, NSTEPS);
    mkdir(dir, 0777);
    test_write_file(dir, "meta.csv", meta, strlen(meta));
    struct test_text m = {0};
    test_text_add(&m, "step,epoch,loss,lr,images\n");
    for (int s = 1; s <= NSTEPS; s++)
        test_text_add(&m, "%d,1,2.3,0.01,32\n", s);
    test_write_file(dir, "metrics.csv", m.s, m.len);
    free(m.s);
}

static const char *header =
    "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream\n";

static void make_a(const char *dir)
{
    write_meta(dir, "baseline", 1);
    struct test_text t = {0};
    test_text_add(&t, "%s", header);
    for (int s = 1; s <= NSTEPS; s++) {
        long t0 = (s - 1) * 20000L;
        rng(&t, 0, s, "data", -1, t0, 0, 1000, NULL);
        rng(&t, 0, s, "layer.forward", -1, t0, 1000, 2000, "layer1.0");
        rng(&t, 0, s, "layer.forward", -1, t0, 2000, 3500, "fc");
        rng(&t, 0, s, "forward", -1, t0, 1000, 4000, NULL);
        rng(&t, 0, s, "layer.backward", -1, t0, 4000, 5000, "fc");
        rng(&t, 0, s, "layer.backward", -1, t0, 5000, 7000, "layer1.0");
        rng(&t, 0, s, "backward", -1, t0, 4000, 8000, NULL);
        rng(&t, 0, s, "optimizer", -1, t0, 8000, 9000, NULL);
        rng(&t, 0, s, "step", -1, t0, 0, 10000, NULL);
    }
    test_write_file(dir, "rank0.trace.csv", t.s, t.len);
    free(t.s);
}

static void make_b(const char *dir)
{
    write_meta(dir, "ddp", 2);
    struct test_text t = {0};
    test_text_add(&t, "%s", header);
    for (int s = 1; s <= NSTEPS; s++) {
        long t0 = (s - 1) * 20000L;
        rng(&t, 0, s, "data", -1, t0, 0, 1000, NULL);
        rng(&t, 0, s, "layer.forward", -1, t0, 1000, 2000, "layer1.0");
        rng(&t, 0, s, "layer.forward", -1, t0, 2000, 4500, "fc");
        rng(&t, 0, s, "forward", -1, t0, 1000, 5000, NULL);
        rng(&t, 0, s, "layer.backward", -1, t0, 5000, 6000, "fc");
        rng(&t, 0, s, "layer.backward", -1, t0, 6000, 8000, "layer1.0");
        rng(&t, 0, s, "allreduce", 0, t0, 7000, 10000, "allreduce.b0");
        rng(&t, 0, s, "backward", -1, t0, 5000, 9000, NULL);
        rng(&t, 0, s, "allreduce", 1, t0, 9500, 11000, "allreduce.b1");
        rng(&t, 0, s, "optimizer", -1, t0, 11000, 12000, NULL);
        rng(&t, 0, s, "step", -1, t0, 0, 13000, NULL);
    }
    test_write_file(dir, "rank0.trace.csv", t.s, t.len);
    free(t.s);
    t = (struct test_text){0};
    test_text_add(&t, "%s", header);
    for (int s = 1; s <= NSTEPS; s++) { /* shorter steps: never the critical rank */
        long t0 = (s - 1) * 20000L;
        rng(&t, 1, s, "forward", -1, t0, 0, 6000, NULL);
        rng(&t, 1, s, "backward", -1, t0, 6000, 11000, NULL);
        rng(&t, 1, s, "step", -1, t0, 0, 12000, NULL);
    }
    test_write_file(dir, "rank1.trace.csv", t.s, t.len);
    free(t.s);
}

/* "12.345" -> 12345 (places 3), "33.33" -> 3333 (places 2), ...; -999999999 when empty */
static long long fixed(const char *s, int places)
{
    if (!s || !*s)
        return -999999999LL;
    double v = strtod(s, NULL);
    for (int k = 0; k < places; k++)
        v *= 10.0;
    return v < 0 ? (long long)(v - 0.5) : (long long)(v + 0.5);
}

/* the row of diff.csv with that level, parent and name; -1 (and a failure) when none */
static int find(const struct test_csv *c, const char *level, const char *parent,
                const char *name)
{
    int r = test_csv_find(c, 0, "level", level, "parent", parent, "name", name, NULL);
    CHECK(r >= 0, "%s: no row level=%s parent=%s name=%s", c->path, level, parent, name);
    return r;
}

static long long field(const struct test_csv *c, int r, const char *col, int places)
{
    return r < 0 ? -999999999LL : fixed(test_csv_get(c, r, test_csv_col(c, col)), places);
}

/* expect a_ms, b_ms and share_pct (-1: empty) of one row */
static void expect(const struct test_csv *c, const char *level, const char *parent,
                   const char *name, long long a_us, long long b_us, long long share_cp)
{
    int r = find(c, level, parent, name);
    long long a = field(c, r, "a_ms", 3), b = field(c, r, "b_ms", 3);
    long long d = field(c, r, "delta_ms", 3), sh = field(c, r, "share_pct", 2);
    CHECK(a == a_us && b == b_us && d == b_us - a_us,
          "%s/%s: a_ms %lld b_ms %lld delta %lld (thousandths), want %lld %lld %lld", parent,
          name, a, b, d, a_us, b_us, b_us - a_us);
    CHECK(sh == (share_cp < 0 ? -999999999LL : share_cp),
          "%s/%s: share_pct %lld (hundredths), want %lld", parent, name, sh, share_cp);
}

/* the sums of a_ms, b_ms and share_pct over the rows under parent at level */
static void sums(const struct test_csv *c, const char *level, const char *parent,
                 long long *a, long long *b, long long *sh)
{
    int L = test_csv_col(c, "level"), P = test_csv_col(c, "parent");
    *a = *b = *sh = 0;
    for (int r = 0; r < c->nrows; r++)
        if (strcmp(test_csv_get(c, r, L), level) == 0 && strcmp(test_csv_get(c, r, P), parent) == 0) {
            *a += field(c, r, "a_ms", 3);
            *b += field(c, r, "b_ms", 3);
            *sh += field(c, r, "share_pct", 2);
        }
}

/* diff the inputs into out; the terminal's text in *term (caller frees); 0 or -1 */
static int run_diff(const char **inputs, int n, const char *out, char **term)
{
    struct report_opts o = {.out_dir = out, .warmup_given = 1, .warmup_steps = 0,
                            .diff = REPORT_DIFF_ASKED, .diff_only = 1};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int rc = report_run_opts(inputs, n, &o, f);
    fclose(f);
    if (term)
        *term = buf;
    else
        free(buf);
    return rc;
}

static void check_pair(const char *out)
{
    struct test_csv *c = test_csv_read(out, "diff.csv");
    CHECK(c != NULL, "%s/diff.csv missing", out);
    if (!c)
        return;
    int st = find(c, "step", "", "step");
    CHECK(strcmp(test_csv_get(c, st, test_csv_col(c, "run_a")), "baseline") == 0 &&
              strcmp(test_csv_get(c, st, test_csv_col(c, "run_b")), "ddp") == 0,
          "A is the baseline, B the ddp run");
    expect(c, "step", "", "step", 10000, 13000, 10000);
    CHECK(field(c, st, "a_steps", 0) == NSTEPS && field(c, st, "b_steps", 0) == NSTEPS,
          "4 steps counted in each run (warm-up 0)");
    expect(c, "phase", "step", "data", 1000, 1000, 0);
    expect(c, "phase", "step", "forward", 3000, 4000, 3333);
    expect(c, "phase", "step", "backward", 4000, 4000, 0);
    expect(c, "phase", "step", "optimizer", 1000, 1000, 0);
    expect(c, "phase", "step", "exposed_comm", 0, 2000, 6667);
    expect(c, "phase", "step", "other", 1000, 1000, 0);
    long long a, b, sh;
    sums(c, "phase", "step", &a, &b, &sh);
    CHECK(a == 10000 && b == 13000 && sh == 10000,
          "phases add up to the step: a %lld b %lld share %lld (want 10000 13000 10000)", a, b, sh);
    /* layers: forward's and backward's, with their remainder */
    expect(c, "layer", "forward", "layer1.0", 1000, 1000, 0);
    expect(c, "layer", "forward", "fc", 1500, 2500, 3333);
    expect(c, "layer", "forward", "other", 500, 500, 0);
    expect(c, "layer", "backward", "fc", 1000, 1000, 0);
    expect(c, "layer", "backward", "layer1.0", 2000, 2000, 0);
    expect(c, "layer", "backward", "other", 1000, 1000, 0);
    CHECK(find(c, "layer", "forward", "fc") < find(c, "layer", "forward", "layer1.0") &&
              find(c, "layer", "backward", "fc") < find(c, "layer", "backward", "layer1.0"),
          "layers in meta.csv's order (layer.K.name), not in the order first read");
    sums(c, "layer", "forward", &a, &b, &sh);
    CHECK(a == 3000 && b == 4000 && sh == 3333, "forward's layers add up to it: %lld %lld %lld",
          a, b, sh);
    /* buckets of exposed communication: equal remainders, the earlier row takes the 0.01 */
    expect(c, "comm", "exposed_comm", "b0", 0, 1000, 3334);
    expect(c, "comm", "exposed_comm", "b1", 0, 1000, 3333);
    sums(c, "comm", "exposed_comm", &a, &b, &sh);
    CHECK(a == 0 && b == 2000 && sh == 6667, "the buckets add up to exposed_comm: %lld %lld %lld",
          a, b, sh);
    int b0 = find(c, "comm", "exposed_comm", "b0");
    CHECK(field(c, b0, "b_time_ms", 3) == 3000 && field(c, b0, "a_time_ms", 3) == 0,
          "b0's own all-reduce time per step: 3.000 ms in B");
    int fw = find(c, "phase", "step", "forward");
    CHECK(field(c, fw, "delta_pct", 1) == 333, "forward +33.3 %%: %lld",
          field(c, fw, "delta_pct", 1));
    test_csv_free(c);
}

int main(void)
{
    char *tmp = test_tmpdir();
    char *job = test_path(tmp, "job");
    mkdir(job, 0777);
    char *a = test_path(job, "baseline"), *b = test_path(job, "ddp");
    make_a(a);
    make_b(b);

    /* 1. a main-job directory: its baseline against its ddp run */
    char *out1 = test_path(tmp, "out1"), *term = NULL;
    const char *in1[] = {job};
    int rc = run_diff(in1, 1, out1, &term);
    CHECK(rc == 0, "diff of the main-job directory: %s", rc ? error_get() : "");
    check_pair(out1);
    CHECK(term && strstr(term, "share of change") && strstr(term, "exposed_comm") &&
              strstr(term, "baseline -> ddp: step 10.000 -> 13.000 ms (+3.000 ms, +30.0 %)"),
          "the terminal's table and summary:\n%s", term ? term : "");
    CHECK(term && !strstr(term, "phases: time per phase"), "ddpprof diff prints the diff alone");
    free(term);
    char *html = test_read_file(out1, "report.html");
    CHECK(html && strstr(html, "Diff: where the step-time change comes from") &&
              strstr(html, "+66.67 %"),
          "report.html has the diff section with the shares' bars");
    free(html);

    /* 2. two run directories, A then B: the same rows */
    char *out2 = test_path(tmp, "out2");
    const char *in2[] = {a, b};
    rc = run_diff(in2, 2, out2, NULL);
    CHECK(rc == 0, "diff A B: %s", rc ? error_get() : "");
    check_pair(out2);

    /* 3. swapped: B's step is A's, the deltas change sign, the shares stay */
    char *out3 = test_path(tmp, "out3");
    const char *in3[] = {b, a};
    rc = run_diff(in3, 2, out3, NULL);
    CHECK(rc == 0, "diff B A: %s", rc ? error_get() : "");
    struct test_csv *c = test_csv_read(out3, "diff.csv");
    CHECK(c != NULL, "swapped diff.csv");
    if (c) {
        expect(c, "step", "", "step", 13000, 10000, 10000);
        expect(c, "phase", "step", "exposed_comm", 2000, 0, 6667);
        expect(c, "phase", "step", "forward", 4000, 3000, 3333);
        test_csv_free(c);
    }

    /* 4. the same run twice: no change, no shares */
    char *out4 = test_path(tmp, "out4");
    const char *in4[] = {a, a};
    char *other = test_path(tmp, "copy");
    make_a(other);
    in4[1] = other;
    rc = run_diff(in4, 2, out4, NULL);
    CHECK(rc == 0, "diff A A': %s", rc ? error_get() : "");
    if ((c = test_csv_read(out4, "diff.csv"))) {
        expect(c, "step", "", "step", 10000, 10000, -1);
        expect(c, "phase", "step", "forward", 3000, 3000, -1);
        test_csv_free(c);
    }

    /* 5. bad input: one line saying what to give */
    char *out5 = test_path(tmp, "out5");
    const char *in5[] = {a, b, other};
    rc = run_diff(in5, 3, out5, NULL);
    CHECK(rc != 0 && strstr(error_get(), "3 inputs given: give two runs"),
          "three runs: %s", error_get());
    const char *in6[] = {a};
    rc = run_diff(in6, 1, out5, NULL);
    CHECK(rc != 0 && strstr(error_get(), "holds 1 run: give one directory holding two"),
          "one run: %s", error_get());
    char *paths[] = {out1, out2, out3, out4, out5, other, a, b, job};
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++)
        free(paths[k]);
    test_tmpdir_done(tmp);
    return test_finish();
}
