/* test_report_bad.c — the report on broken input: every bad trace gives a one-line error
 * naming the file and line (missing column, non-numeric field, end before start, wrong
 * field count, empty file, stray quote, unknown clock, a rank's row in another rank's file,
 * bad meta.csv / metrics.csv, not a run directory), or a warning on stderr and a partial
 * report where the user is better served (a truncated last line is dropped, a missing rank
 * is reported without it).  Quoted fields with commas and line breaks and CRLF line ends
 * must parse, with line numbers still right after them.  Finally a few hundred random
 * mutations of a valid trace must each give 0 or -1, never a crash (run it under ASan). */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "report/report.h"
#include "report/input/run.h"
#include "testutil.h"

static char *root;

static const char *header =
    "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream\n";

/* Two good steps of rank r: 7 rows each (lines 2..15 after the header). */
static char *good_rows(int r)
{
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    for (int step = 1; step <= 2; step++) {
        long long t = 1000000000LL + (step - 1) * 10000000LL;
        fprintf(f, "%d,%d,1,data,-1,host,%lld,%lld,0,data,range,2\n", r, step, t, t + 1000000);
        fprintf(f, "%d,%d,1,forward,-1,host,%lld,%lld,0,forward,range,0\n", r, step, t + 1000000,
                t + 3000000);
        fprintf(f, "%d,%d,1,backward,-1,host,%lld,%lld,0,backward,range,0\n", r, step,
                t + 3000000, t + 7000000);
        fprintf(f, "%d,%d,1,allreduce,0,host,%lld,%lld,4096,allreduce.b0,range,1\n", r, step,
                t + 5000000, t + 8000000);
        fprintf(f, "%d,%d,1,optimizer,-1,host,%lld,%lld,0,optimizer,range,0\n", r, step,
                t + 8000000, t + 9000000);
        fprintf(f, "%d,%d,1,step,-1,host,%lld,%lld,0,step,range,0\n", r, step, t, t + 9000000);
        fprintf(f, "%d,%d,1,eval,-1,host,%lld,%lld,0,eval,range,0\n", r, 0, t + 9000000,
                t + 9500000);
    }
    fclose(f);
    return s;
}

/* A fresh run directory `name` with meta.csv (world_size 2), metrics.csv and good traces
 * for both ranks; returns its path. */
static char *make_run(const char *name)
{
    char *dir = test_path(root, name);
    mkdir(dir, 0777);
    const char *meta = "key,value\nmodel,convnet\nmode,ddp\ndevice,cpu\nworld_size,2\nepochs,1\n"
                       "amp,off\nwall_s,1\nclock_offset_ns.rank1,0\nfinal_accuracy,0.1\n";
    test_write_file(dir, "meta.csv", meta, strlen(meta));
    const char *metrics = "step,epoch,loss,lr,images\n1,1,2.3,0.1,64\n2,1,2.2,0.1,64\n";
    test_write_file(dir, "metrics.csv", metrics, strlen(metrics));
    for (int r = 0; r < 2; r++) {
        char *rows = good_rows(r), *text = NULL;
        if (asprintf(&text, "%s%s", header, rows) < 0)
            abort();
        char fname[32];
        snprintf(fname, sizeof fname, "rank%d.trace.csv", r);
        test_write_file(dir, fname, text, strlen(text));
        free(rows);
        free(text);
    }
    return dir;
}

static void set_trace(const char *dir, int rank, const char *text, size_t len)
{
    char fname[32];
    snprintf(fname, sizeof fname, "rank%d.trace.csv", rank);
    test_write_file(dir, fname, text, len);
}

/* Run the report on dir with stderr captured; returns the status, *err the captured text. */
static int run_report(const char *dir, char **err)
{
    char *errpath = test_path(root, "stderr.txt");
    fflush(stderr);
    int saved = dup(2);
    int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    error_clear();
    const char *dirs[] = {dir};
    int rc = report_run(dirs, 1, NULL, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    *err = test_read_file(root, "stderr.txt");
    free(errpath);
    return rc;
}

/* The report must fail with a message holding every one of the given strings. */
static void expect_error(const char *what, const char *dir, ...)
{
    char *err;
    int rc = run_report(dir, &err);
    CHECK(rc == -1, "%s: report_run returned %d, want -1", what, rc);
    va_list ap;
    va_start(ap, dir);
    for (const char *s; (s = va_arg(ap, const char *));)
        CHECK(strstr(error_get(), s) != NULL, "%s: error \"%s\" lacks \"%s\"", what,
              error_get(), s);
    va_end(ap);
    CHECK(strchr(error_get(), '\n') == NULL, "%s: the error is not one line: %s", what,
          error_get());
    free(err);
}

static void test_missing_column(void)
{
    char *dir = make_run("missing-column");
    const char *t = "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,name,kind,stream\n"
                    "0,1,1,step,-1,host,1,2,step,range,0\n";
    set_trace(dir, 0, t, strlen(t));
    expect_error("missing column", dir, "rank0.trace.csv line 1", "'bytes'", NULL);
    free(dir);
}

static void test_non_numeric(void)
{
    char *dir = make_run("non-numeric");
    char *rows = good_rows(1), *text = NULL;
    /* line 4 of rank 1 (backward, start 1003000000) gets a start_ns of "10x3000000" */
    if (asprintf(&text, "%s%s", header, rows) < 0)
        abort();
    char *line4 = text;
    for (int i = 0; i < 3; i++)
        line4 = strchr(line4, '\n') + 1;
    char *field = line4;
    for (int i = 0; i < 6; i++)
        field = strchr(field, ',') + 1;
    field[2] = 'x';
    set_trace(dir, 1, text, strlen(text));
    expect_error("non-numeric", dir, "rank1.trace.csv line 4", "start_ns", "'10x3000000'", NULL);
    free(rows);
    free(text);
    free(dir);
}

static void test_end_before_start(void)
{
    char *dir = make_run("end-before-start");
    char *t = NULL;
    if (asprintf(&t, "%s0,1,1,step,-1,host,100,200,0,step,range,0\n"
                     "0,1,1,forward,-1,host,300,299,0,forward,range,0\n",
                 header) < 0)
        abort();
    set_trace(dir, 0, t, strlen(t));
    expect_error("end before start", dir, "rank0.trace.csv line 3", "end before start", NULL);
    free(t);
    free(dir);
}

static void test_field_count(void)
{
    char *dir = make_run("field-count");
    char *t = NULL;
    if (asprintf(&t, "%s0,1,1,step,-1,host,100,200,0,step,range,0\n0,1,1,step,-1,host,100\n",
                 header) < 0)
        abort();
    set_trace(dir, 0, t, strlen(t));
    expect_error("short row", dir, "rank0.trace.csv line 3", "7 field(s), the header has 12", NULL);
    free(t);
    free(dir);
}

static void test_empty_file(void)
{
    char *dir = make_run("empty-file");
    set_trace(dir, 1, "", 0);
    expect_error("empty file", dir, "rank1.trace.csv", "empty file", NULL);
    free(dir);
}

static void test_other_errors(void)
{
    char *dir = make_run("stray-quote");
    char *t = NULL;
    if (asprintf(&t, "%s0,1,1,step,-1,host,100,200,0,st\"ep,range,0\n", header) < 0)
        abort();
    set_trace(dir, 0, t, strlen(t));
    expect_error("stray quote", dir, "rank0.trace.csv line 2", "malformed CSV", NULL);
    free(t);
    free(dir);

    dir = make_run("bad-clock");
    if (asprintf(&t, "%s0,1,1,step,-1,host,100,200,0,step,range,0\n"
                     "0,1,1,step,-1,gpu,100,200,0,step,range,0\n",
                 header) < 0)
        abort();
    set_trace(dir, 0, t, strlen(t));
    expect_error("unknown clock", dir, "rank0.trace.csv line 3", "'gpu'", NULL);
    free(t);
    free(dir);

    dir = make_run("wrong-rank");
    if (asprintf(&t, "%s1,1,1,step,-1,host,100,200,0,step,range,0\n", header) < 0)
        abort();
    set_trace(dir, 0, t, strlen(t));
    expect_error("wrong rank", dir, "rank0.trace.csv line 2", "rank 1", NULL);
    free(t);
    free(dir);

    dir = make_run("bad-metrics");
    const char *m = "step,epoch,loss,lr,images\n1,1,2.3,0.1,64\n2,1,2.2,0.1,lots\n";
    test_write_file(dir, "metrics.csv", m, strlen(m));
    expect_error("bad metrics", dir, "metrics.csv line 3", "'lots'", NULL);
    free(dir);

    dir = make_run("bad-meta");
    const char *meta = "key,value\nworld_size,two\n";
    test_write_file(dir, "meta.csv", meta, strlen(meta));
    expect_error("bad world_size", dir, "meta.csv", "world_size", "'two'", NULL);
    free(dir);

    dir = test_path(root, "not-a-run");
    mkdir(dir, 0777);
    expect_error("not a run directory", dir, "not-a-run", "not a run directory", NULL);
    free(dir);
    dir = test_path(root, "does-not-exist");
    expect_error("no directory", dir, "does-not-exist", NULL);
    free(dir);

    /* an output directory that cannot be made */
    dir = make_run("bad-out");
    const char *dirs[] = {dir};
    CHECK(report_run(dirs, 1, "/proc/ddpprof-report-test", NULL) == -1 &&
              strstr(error_get(), "/proc/ddpprof-report-test"),
          "an uncreatable --out gives an error naming it: %s", error_get());
    free(dir);
}

/* runset_add_dir on a path that is not a directory says what it is */
static void test_run_dir_messages(void)
{
    char *file = test_path(root, "a-file");
    test_write_file(root, "a-file", "x\n", 2);
    struct runset rs;
    runset_init(&rs);
    CHECK(runset_add_dir(&rs, file) == -1 && strstr(error_get(), "a-file: not a directory") &&
              !strstr(error_get(), "no such"),
          "a file given as a run directory: '%s'", error_get());
    char *missing = test_path(root, "no-such-dir");
    CHECK(runset_add_dir(&rs, missing) == -1 &&
              strstr(error_get(), "no-such-dir: no such run directory"),
          "a missing run directory: '%s'", error_get());
    runset_free(&rs);
    free(file);
    free(missing);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

static void test_truncated_last_line(void)
{
    char *dir = make_run("truncated");
    char *rows = good_rows(0), *text = NULL;
    /* a partial 15th row (no newline): dropped with a warning */
    if (asprintf(&text, "%s%s0,3,1,data,-1,host,1020000000,10200", header, rows) < 0)
        abort();
    set_trace(dir, 0, text, strlen(text));
    char *err;
    int rc = run_report(dir, &err);
    CHECK(rc == 0, "truncated last line: report failed: %s", error_get());
    CHECK(err && strstr(err, "rank0.trace.csv line 16") && strstr(err, "truncated"),
          "truncated last line: no warning naming the line:\n%s", err ? err : "");
    char *phases = test_read_file(dir, "phases.csv");
    /* rank 0 still has its 2 data ranges, not 3 */
    CHECK(phases && strstr(phases, "\ntruncated,0,data,2,"),
          "truncated last line: the partial row was not dropped:\n%s", phases ? phases : "");
    free(phases);
    free(err);
    free(text);

    /* the same inside a quoted field */
    if (asprintf(&text, "%s%s0,3,1,data,-1,host,1020000000,1020000100,0,\"da", header, rows) < 0)
        abort();
    set_trace(dir, 0, text, strlen(text));
    rc = run_report(dir, &err);
    CHECK(rc == 0 && err && strstr(err, "rank0.trace.csv") && strstr(err, "truncated"),
          "truncated inside quotes: rc %d, stderr:\n%s", rc, err ? err : "");
    free(err);
    free(text);
    free(rows);
    free(dir);
}

static void test_missing_rank(void)
{
    char *dir = make_run("missing-rank");
    char *p = test_path(dir, "rank1.trace.csv");
    unlink(p);
    free(p);
    char *err;
    int rc = run_report(dir, &err);
    CHECK(rc == 0, "missing rank: report failed: %s", error_get());
    CHECK(err && strstr(err, "world_size is 2 but only 1 rank trace(s) found: reporting rank(s) 0"),
          "missing rank: no warning:\n%s", err ? err : "");
    char *ov = test_read_file(dir, "overlap.csv");
    CHECK(ov && count_lines(ov) == 2 && strstr(ov, "\nmissing-rank,0,"),
          "missing rank: overlap.csv should hold rank 0 only:\n%s", ov ? ov : "");
    char *st = test_read_file(dir, "stragglers.csv");
    CHECK(st && count_lines(st) == 1, "missing rank: stragglers need two ranks:\n%s", st ? st : "");
    free(st);
    free(ov);
    free(err);
    free(dir);
}

static void test_header_only_and_quoting(void)
{
    /* a rank with a header and no rows is a rank with nothing to report, not an error */
    char *dir = make_run("header-only");
    set_trace(dir, 1, header, strlen(header));
    char *err;
    CHECK(run_report(dir, &err) == 0, "header-only trace: %s", error_get());
    free(err);
    free(dir);

    /* CRLF line ends, a quoted name with a comma and a line break, spaces around fields */
    dir = make_run("quoting");
    const char *t =
        "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream\r\n"
        "0,1,1,step,-1,host,1000,9000,0,step,range,0\r\n"
        "0,1,1,forward,-1,cupti, 2000 ,3000,0,\"void gemm<float, 2>\n(kernel)\",kernel,7\r\n"
        "0,1,1,forward,-1,host,1000,4000,0,forward,range,0\r\n";
    set_trace(dir, 0, t, strlen(t));
    CHECK(run_report(dir, &err) == 0, "quoted fields and CRLF: %s", error_get());
    char *tl = test_read_file(dir, "timeline.json");
    CHECK(tl && strstr(tl, "\"name\":\"void gemm<float, 2>\\n(kernel)\""),
          "the quoted kernel name did not reach the timeline intact");
    free(tl);
    free(err);
    /* and line numbers count the quoted line break: the bad row below is on line 6 */
    const char *bad =
        "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream\r\n"
        "0,1,1,step,-1,host,1000,9000,0,step,range,0\r\n"
        "0,1,1,forward,-1,cupti,2000,3000,0,\"void gemm<float, 2>\n(kernel)\",kernel,7\r\n"
        "\r\n"
        "0,1,1,forward,-1,host,1000,oops,0,forward,range,0\r\n";
    set_trace(dir, 0, bad, strlen(bad));
    expect_error("line numbers after a quoted line break", dir, "rank0.trace.csv line 6",
                 "end_ns", NULL);
    free(dir);
}

/* The fast path for plain lines and libcsv give the same report: the same traces with every
 * field quoted (so every line goes through libcsv) must give byte-identical files. */
static void test_fast_path_matches_libcsv(void)
{
    static const char *const outputs[] = {"phases.csv", "overlap.csv", "buckets.csv",
                                          "stragglers.csv", "timeline.json"};
    char *plain = make_run("plain"), *quoted = make_run("quoted");
    for (int r = 0; r < 2; r++) {
        char *rows = good_rows(r), *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        fputs(header, f);
        fputc('"', f);
        for (const char *c = rows; *c; c++) {
            if (*c == ',')
                fputs("\",\"", f);
            else if (*c == '\n')
                fputs(c[1] ? "\"\n\"" : "\"\n", f);
            else
                fputc(*c, f);
        }
        fclose(f);
        set_trace(quoted, r, text, len);
        free(text);
        free(rows);
    }
    char *err;
    CHECK(run_report(plain, &err) == 0, "plain traces: %s", error_get());
    free(err);
    CHECK(run_report(quoted, &err) == 0, "quoted traces: %s", error_get());
    free(err);
    for (size_t k = 0; k < sizeof outputs / sizeof outputs[0]; k++) {
        char *a = test_read_file(plain, outputs[k]), *b = test_read_file(quoted, outputs[k]);
        /* the run labels differ ("plain", "quoted"): compare after the first line */
        size_t ia = 0, ib = 0;
        int same = a && b;
        while (same && a[ia] && b[ib]) {
            if (!strncmp(a + ia, "plain", 5) && !strncmp(b + ib, "quoted", 6)) {
                ia += 5;
                ib += 6;
            } else if (a[ia++] != b[ib++]) {
                same = 0;
            }
        }
        same = same && a[ia] == b[ib];
        CHECK(same && strlen(a) > 100, "%s differs between the fast path and libcsv", outputs[k]);
        free(a);
        free(b);
    }
    free(plain);
    free(quoted);
}

/* Random byte edits of a valid trace: the report may accept or refuse, never crash. */
static void test_mutations(void)
{
    char *dir = make_run("fuzz");
    char *rows = good_rows(0), *text = NULL;
    if (asprintf(&text, "%s%s", header, rows) < 0)
        abort();
    size_t n = strlen(text);
    uint64_t seed = 12345;
    static const char alphabet[] = "0123456789,\"\r\n -x";
    int ok = 0, refused = 0;
    char *m = malloc(n + 1);
    for (int k = 0; k < 300; k++) {
        memcpy(m, text, n + 1);
        size_t len = n;
        int edits = 1 + (int)(test_uniform(&seed) * 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(test_uniform(&seed) * (double)len);
            double what = test_uniform(&seed);
            if (what < 0.6)
                m[at] = alphabet[(int)(test_uniform(&seed) * (sizeof alphabet - 1))];
            else if (what < 0.8)
                len = at; /* truncate */
            else
                m[at] = (char)(unsigned char)(int)(test_uniform(&seed) * 256); /* any byte */
        }
        set_trace(dir, 0, m, len);
        char *err;
        int rc = run_report(dir, &err);
        free(err);
        if (rc == 0)
            ok++;
        else if (rc == -1 && error_get()[0])
            refused++;
    }
    CHECK(ok + refused == 300, "mutations: %d accepted + %d refused with a message != 300", ok,
          refused);
    CHECK(ok > 0 && refused > 0, "mutations: %d accepted, %d refused: expected some of each", ok,
          refused);
    free(m);
    free(text);
    free(rows);
    free(dir);
}

/* meta.csv is parsed once against probes/run_format.h: a key the format does not know, a
 * value not of its key's type and an index that is none are each one warning naming the
 * file, line and key, and are left out; an OLD key, a repeated key (the last counts) and
 * good values are silent and typed; a clock offset that is no integer is an error. */
static void test_meta_keys(void)
{
    char *dir = make_run("meta-keys");
    const char *meta = "key,value\nmodel,convnet\nmode,ddp\ndevice,cpu\nworld_size,2\n"
                       "epochs,1\nwall_s,1\nclock_offset_ns.rank1,0\nfinal_accuracy,0.1\n"
                       "accuracy_epoch,\"1,0.1,0.5\"\nhost_cores,4\nhost_cores,8\n"
                       "no_such_key,1\nbatch_size,many\nbucket.01.bytes,5\nhost.rank1,n1\n";
    test_write_file(dir, "meta.csv", meta, strlen(meta));
    char *err = NULL;
    int rc = run_report(dir, &err);
    CHECK(rc == 0, "meta-keys: report failed: %s", error_get());
    CHECK(err && count_lines(err) == 3, "meta-keys: want 3 warnings, got:\n%s", err ? err : "");
    CHECK(err && strstr(err, "meta.csv line 13: unknown key 'no_such_key'"),
          "meta-keys: no warning naming the unknown key's line:\n%s", err ? err : "");
    CHECK(err && strstr(err, "meta.csv line 14: batch_size is 'many', not an integer: ignored"),
          "meta-keys: no warning naming the malformed value:\n%s", err ? err : "");
    CHECK(err && strstr(err, "meta.csv line 15: unknown key 'bucket.01.bytes'"),
          "meta-keys: no warning naming the bad index:\n%s", err ? err : "");
    free(err);

    struct runset rs;
    runset_init(&rs);
    CHECK(runset_add_dir(&rs, dir) == 0 && rs.n == 1, "meta-keys: %s", error_get());
    if (rs.n == 1) {
        const struct run_meta *m = &rs.runs[0].meta;
        CHECK(m->host_cores.s && m->host_cores.i == 8, "the last host_cores counts: %s",
              m->host_cores.s ? m->host_cores.s : "(none)");
        CHECK(m->wall_s.s && m->wall_s.d == 1.0 && m->final_accuracy.d == 0.1,
              "numbers are parsed once");
        CHECK(!m->batch_size.s, "a malformed value is left out");
        CHECK(m->accuracy_epoch.s && strcmp(m->accuracy_epoch.s, "1,0.1,0.5") == 0,
              "an OLD key is read");
        CHECK(meta_text_at(&m->rank_host, 1) && strcmp(meta_text_at(&m->rank_host, 1), "n1") == 0 &&
                  !meta_at(&m->rank_host, 0) && !meta_at(&m->rank_host, 2),
              "host.rank1 is rank 1's alone");
        CHECK(m->rows == 15, "meta-keys: %zu rows", m->rows);
    }
    runset_free(&rs);
    free(dir);

    dir = make_run("meta-bad-offset");
    meta = "key,value\nworld_size,2\nclock_offset_ns.rank1,1.5\n";
    test_write_file(dir, "meta.csv", meta, strlen(meta));
    expect_error("bad clock offset", dir, "meta.csv line 3", "clock_offset_ns.rank1", "'1.5'",
                 NULL);
    free(dir);
}

int main(void)
{
    root = test_tmpdir();
    test_missing_column();
    test_non_numeric();
    test_end_before_start();
    test_field_count();
    test_empty_file();
    test_other_errors();
    test_run_dir_messages();
    test_meta_keys();
    test_truncated_last_line();
    test_missing_rank();
    test_header_only_and_quoting();
    test_fast_path_matches_libcsv();
    test_mutations();
    test_tmpdir_done(root);
    return test_finish();
}
