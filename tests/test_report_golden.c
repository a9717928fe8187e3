/* test_report_golden.c — the report on hand-built traces whose every figure was worked out
 * by hand from report/FORMULAS.md (the arithmetic is in the comments): phases.csv,
 * overlap.csv, buckets.csv, stragglers.csv and speedup.csv must match exactly, byte for
 * byte; timeline.json must be valid JSON with one X event per trace row and the rank's
 * clock offset applied; the HTML and SVG files must be there.
 *
 * Fixture (times in µs on rank 0's clock; the files hold ns from 5e9):
 *   golden/baseline  1 rank, mode baseline, 2 steps + an eval range at step 0
 *   golden/ddp       2 ranks, clock_offset_ns.rank1 = 500000 (rank 1's file times are
 *                    500 µs early), 2 steps, 2 buckets, one CUPTI kernel row on rank 0
 *   bw4              4 ranks, 1 step, one bucket of 8e6 bytes; rank 0 has a host and a
 *                    device all-reduce row (the device one must win) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "report/report.h"
#include "testutil.h"

static void write_file(const char *dir, const char *name, const char *text)
{
    test_write_file(dir, name, text, strlen(text));
}

#define BASE_NS 5000000000LL

static const char *trace_header =
    "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream\n";

/* One row; times in µs on rank 0's clock, written as this rank's ns (minus its offset). */
static void row(struct test_text *t, int rank, int step, const char *phase, int bucket,
                const char *clock, long start_us, long end_us, long bytes, const char *name,
                const char *kind, int stream, long offset_us)
{
    test_text_add(t, "%d,%d,1,%s,%d,%s,%lld,%lld,%ld,%s,%s,%d\n", rank, step, phase, bucket, clock,
                  BASE_NS + (start_us - offset_us) * 1000LL,
                  BASE_NS + (end_us - offset_us) * 1000LL, bytes, name, kind, stream);
}

static void range(struct test_text *t, int rank, int step, const char *phase, long s, long e,
                  long offset_us)
{
    row(t, rank, step, phase, -1, "host", s, e, 0, phase, "range",
        strcmp(phase, "data") == 0 ? 2 : 0, offset_us);
}

static void allreduce(struct test_text *t, int rank, int step, int bucket, long s, long e,
                      long bytes, long offset_us)
{
    char name[32];
    snprintf(name, sizeof name, "allreduce.b%d", bucket);
    row(t, rank, step, "allreduce", bucket, "host", s, e, bytes, name, "range", 1, offset_us);
}

static void make_baseline(const char *dir)
{
    mkdir(dir, 0777);
    write_file(dir, "meta.csv",
               "key,value\nmodel,convnet\nmode,baseline\ndevice,cpu\nworld_size,1\n"
               "batch_size,32\nglobal_batch_size,32\nepochs,1\namp,off\ntrain_samples,64\n"
               "final_accuracy,0.500000\nsteps,2\nwall_s,1.5\n");
    write_file(dir, "metrics.csv", "step,epoch,loss,lr,images\n1,1,2.3,0.01,32\n2,1,2.2,0.01,32\n");
    struct test_text t = {0};
    test_text_add(&t, "%s", trace_header);
    /* step 1 [0,6000]: data 500, forward 1500, backward 3000, optimizer 1000 */
    range(&t, 0, 1, "data", 0, 500, 0);
    range(&t, 0, 1, "forward", 500, 2000, 0);
    range(&t, 0, 1, "backward", 2000, 5000, 0);
    range(&t, 0, 1, "optimizer", 5000, 6000, 0);
    range(&t, 0, 1, "step", 0, 6000, 0);
    /* step 2 [6000,14000]: data 1000, forward 2000, backward 4000, optimizer 1000 */
    range(&t, 0, 2, "data", 6000, 7000, 0);
    range(&t, 0, 2, "forward", 7000, 9000, 0);
    range(&t, 0, 2, "backward", 9000, 13000, 0);
    range(&t, 0, 2, "optimizer", 13000, 14000, 0);
    range(&t, 0, 2, "step", 6000, 14000, 0);
    range(&t, 0, 0, "eval", 14000, 15000, 0);
    write_file(dir, "rank0.trace.csv", t.s);
    free(t.s);
}

static void make_ddp(const char *dir)
{
    mkdir(dir, 0777);
    write_file(dir, "meta.csv",
               "key,value\nmodel,convnet\nmode,ddp\ndevice,cpu\nworld_size,2\nbatch_size,32\n"
               "global_batch_size,64\nepochs,1\namp,off\ntrain_samples,128\n"
               "final_accuracy,0.600000\nsteps,2\nwall_s,1.25\nbucket.0.params,4\n"
               "clock_offset_ns.rank0,0\nclock_offset_ns.rank1,500000\n");
    write_file(dir, "metrics.csv", "step,epoch,loss,lr,images\n1,1,2.3,0.01,64\n2,1,2.2,0.01,64\n");
    struct test_text t = {0};
    test_text_add(&t, "%s", trace_header);
    range(&t, 0, 1, "data", 0, 500, 0);
    row(&t, 0, 1, "forward", -1, "cupti", 600, 1500, 0, "volta_sgemm", "kernel", 7, 0);
    range(&t, 0, 1, "forward", 500, 2500, 0);
    allreduce(&t, 0, 1, 0, 4000, 5000, 4000000, 0);
    range(&t, 0, 1, "backward", 2500, 6000, 0);
    allreduce(&t, 0, 1, 1, 5500, 7000, 1000000, 0);
    range(&t, 0, 1, "optimizer", 7000, 8000, 0);
    /* a CPU rank's other threads' CPU (kind cpu, bytes = ns), written before the range */
    row(&t, 0, 1, "backward", -1, "host", 2510, 5990, 400000, "cpu.others", "cpu", 1, 0);
    row(&t, 0, 1, "step", -1, "host", 10, 7990, 900000, "cpu.others", "cpu", 1, 0);
    range(&t, 0, 1, "step", 0, 8000, 0);
    range(&t, 0, 2, "data", 8000, 8500, 0);
    range(&t, 0, 2, "forward", 8500, 10500, 0);
    allreduce(&t, 0, 2, 0, 12000, 13000, 4000000, 0);
    range(&t, 0, 2, "backward", 10500, 14000, 0);
    allreduce(&t, 0, 2, 1, 13500, 15000, 1000000, 0);
    range(&t, 0, 2, "optimizer", 15000, 16000, 0);
    row(&t, 0, 2, "backward", -1, "host", 10510, 13990, 600000, "cpu.others", "cpu", 1, 0);
    row(&t, 0, 2, "step", -1, "host", 8010, 15990, 1100000, "cpu.others", "cpu", 1, 0);
    range(&t, 0, 2, "step", 8000, 16000, 0);
    write_file(dir, "rank0.trace.csv", t.s);
    free(t.s);
    t = (struct test_text){0};
    test_text_add(&t, "%s", trace_header);
    range(&t, 1, 1, "data", 0, 500, 500);
    range(&t, 1, 1, "forward", 500, 3000, 500);
    allreduce(&t, 1, 1, 0, 4500, 5200, 4000000, 500);
    range(&t, 1, 1, "backward", 3000, 6500, 500);
    allreduce(&t, 1, 1, 1, 6500, 7000, 1000000, 500);
    range(&t, 1, 1, "optimizer", 7000, 8000, 500);
    range(&t, 1, 1, "step", 0, 8000, 500);
    range(&t, 1, 2, "data", 8000, 8700, 500);
    range(&t, 1, 2, "forward", 8700, 10600, 500);
    allreduce(&t, 1, 2, 0, 12000, 12900, 4000000, 500);
    range(&t, 1, 2, "backward", 10600, 13900, 500);
    allreduce(&t, 1, 2, 1, 13900, 15000, 1000000, 500);
    range(&t, 1, 2, "optimizer", 15000, 16000, 500);
    range(&t, 1, 2, "step", 8000, 16000, 500);
    write_file(dir, "rank1.trace.csv", t.s);
    free(t.s);
}

static void make_bw4(const char *dir)
{
    mkdir(dir, 0777);
    write_file(dir, "meta.csv",
               "key,value\nmodel,convnet\nmode,ddp\ndevice,cuda\nworld_size,4\nepochs,1\n"
               "amp,fp16\ntrain_samples,128\nfinal_accuracy,0.7\nwall_s,2\n");
    static const long ar_end[4] = {9000, 4000, 5000, 4000};
    for (int r = 0; r < 4; r++) {
        struct test_text t = {0};
        test_text_add(&t, "%s", trace_header);
        range(&t, r, 1, "backward", 0, 4000, 0);
        allreduce(&t, r, 1, 0, 2000, ar_end[r], 8000000, 0);
        if (r == 0) /* the device-clock row replaces rank 0's host all-reduce rows */
            row(&t, 0, 1, "allreduce", 0, "device", 2000, 3000, 8000000, "allreduce.b0", "range",
                1, 0);
        range(&t, r, 1, "step", 0, 10000, 0);
        char name[32];
        snprintf(name, sizeof name, "rank%d.trace.csv", r);
        write_file(dir, name, t.s);
        free(t.s);
    }
}

static void check_file(const char *dir, const char *name, const char *want)
{
    char *got = test_read_file(dir, name);
    CHECK(got && strcmp(got, want) == 0, "%s/%s differs:\n--- got\n%s--- want\n%s", dir, name,
          got ? got : "(missing)\n", want);
    free(got);
}

static size_t count_substr(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---- a minimal JSON validator (RFC 8259 grammar, no semantics) ---- */

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return p;
}

static const char *json_value(const char *p, int depth);

static const char *json_string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    while (*p && *p != '"') {
        if ((unsigned char)*p < 0x20)
            return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
                        return NULL;
                p += 4;
            } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
        p++;
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_number(const char *p)
{
    const char *s = p;
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return p > s ? p : NULL;
}

static const char *json_value(const char *p, int depth)
{
    p = json_ws(p);
    if (depth > 64)
        return NULL;
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        int obj = *p == '{';
        p = json_ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (obj) {
                if (!(p = json_string(json_ws(p))))
                    return NULL;
                p = json_ws(p);
                if (*p++ != ':')
                    return NULL;
            }
            if (!(p = json_value(p, depth + 1)))
                return NULL;
            p = json_ws(p);
            if (*p == close)
                return p + 1;
            if (*p++ != ',')
                return NULL;
        }
    }
    if (*p == '"')
        return json_string(p);
    if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
        return p + 4;
    if (!strncmp(p, "false", 5))
        return p + 5;
    return json_number(p);
}

static int json_valid(const char *s)
{
    const char *end = json_value(s, 0);
    return end && *json_ws(end) == '\0';
}

/* ---- the expected tables ---- */

static const char *want_phases =
    "run,rank,phase,count,total_ms,mean_ms,p50_ms,p95_ms,max_ms,pct_of_step,warmup_steps,"
    "collective,bytes,transfer_ms,wait_ms,late_rank,late_share_pct\n"
    /* baseline: steps 6000, 8000 µs -> p50 = d_ceil(1) = 6000, p95 = d_ceil(1.9) = 8000 */
    "baseline,0,step,2,14.000,7.000,6.000,8.000,8.000,100.00,0,,,,,,\n"
    "baseline,0,data,2,1.500,0.750,0.500,1.000,1.000,10.71,0,,,,,,\n"      /* 1500/14000 */
    "baseline,0,forward,2,3.500,1.750,1.500,2.000,2.000,25.00,0,,,,,,\n"
    "baseline,0,backward,2,7.000,3.500,3.000,4.000,4.000,50.00,0,,,,,,\n"
    "baseline,0,optimizer,2,2.000,1.000,1.000,1.000,1.000,14.29,0,,,,,,\n" /* 2000/14000 */
    "baseline,0,eval,1,1.000,1.000,1.000,1.000,1.000,,0,,,,,,\n"           /* step 0: no share */
    "ddp,0,step,2,16.000,8.000,8.000,8.000,8.000,100.00,0,,,,,,\n"
    "ddp,0,data,2,1.000,0.500,0.500,0.500,0.500,6.25,0,,,,,,\n"
    /* the CUPTI kernel is not counted */
    "ddp,0,forward,2,4.000,2.000,2.000,2.000,2.000,25.00,0,,,,,,\n"
    "ddp,0,backward,2,7.000,3.500,3.500,3.500,3.500,43.75,0,,,,,,\n"
    /* all-reduce 1000,1000,1500,1500: p50 = d_2, p95 = d_ceil(3.8) = d_4.  Per call (bucket,
     * step; rank 1's times as below): b0 s1 1000/700, b0 s2 1000/900, b1 s1 1500/500, b1 s2
     * 1500/1100 -> transfers 700+900+500+1100 = 3200 on both ranks; rank 0's wait
     * 300+100+1000+400 = 1800, rank 1's 0; rank 1 has the least time (arrives last) in all
     * 4 calls: late_rank 1, 100 % */
    "ddp,0,allreduce,4,5.000,1.250,1.000,1.500,1.500,31.25,0,allreduce,10000000,3.200,1.800,1,100.00\n"
    "ddp,0,optimizer,2,2.000,1.000,1.000,1.000,1.000,12.50,0,,,,,,\n"
    "ddp,1,step,2,16.000,8.000,8.000,8.000,8.000,100.00,0,,,,,,\n"
    "ddp,1,data,2,1.200,0.600,0.500,0.700,0.700,7.50,0,,,,,,\n"
    "ddp,1,forward,2,4.400,2.200,1.900,2.500,2.500,27.50,0,,,,,,\n"
    "ddp,1,backward,2,6.800,3.400,3.300,3.500,3.500,42.50,0,,,,,,\n"
    /* 500,700,900,1100 */
    "ddp,1,allreduce,4,3.200,0.800,0.700,1.100,1.100,20.00,0,allreduce,10000000,3.200,0.000,1,100.00\n"
    "ddp,1,optimizer,2,2.000,1.000,1.000,1.000,1.000,12.50,0,,,,,,\n";

static const char *want_overlap =
    "run,rank,step_ms,compute_ms,comm_ms,exposed_comm_ms,overlap_pct,idle_ms,k_compute_ms,"
    "k_comm_ms,k_overlap_pct,k_idle_ms,device_host_wait_ms,device_kernel_gap_ms,comm_cpu_ms,"
    "comm_cpu_bwd_ms\n"
    /* C = [500,6000]+[7000,14000] = 12500; no comm; idle = 14000 - 12500; no kernels: the
     * kernel columns are empty; no kind cpu rows (a trace before them): comm_cpu_* empty */
    "baseline,0,14.000,12.500,0.000,0.000,,1.500,,,,,,,,\n"
    /* C = [500,6000]+[7000,8000]+[8500,14000]+[15000,16000] = 13000; M = 5000;
     * M∩C = 1000+500+1000+500 = 3000 -> exposed 2000, 60 %; C∪M = [500,8000]+[8500,16000];
     * one CUPTI kernel [600,1500]: k_compute 900 µs, no NCCL kernel (k_comm 0, overlap
     * undefined), window = the kernel, so k_idle 0; no launch times: host wait and kernel
     * gap unknown; kind cpu rows: step 900 and 1100 µs -> median 1.000 ms, backward 400 and
     * 600 -> 0.500 ms (medians of two: their mean); they change no other figure */
    "ddp,0,16.000,13.000,5.000,2.000,60.00,1.000,0.900,0.000,,0.000,,,1.000,0.500\n"
    /* C = [500,6500]+[7000,8000]+[8700,13900]+[15000,16000] = 13200; M = 700+500+900+1100;
     * M∩C = 700+0+900+0 = 1600 -> exposed 1600, 50 %; C∪M = [500,8000]+[8700,16000] = 14800 */
    "ddp,1,16.000,13.200,3.200,1.600,50.00,1.200,,,,,,,,\n";

static const char *want_buckets =
    "run,world_size,bucket,params,bytes,count,mean_ms,algbw_GBps,busbw_GBps,pct_hidden,"
    "transfer_ms,sync_wait_ms,start_skew_ms,xfer_algbw_GBps,xfer_busbw_GBps\n"
    /* b0: 1000,1000,700,900 -> mean 900 µs; 4e6 B / 900000 ns = 4.444 GB/s; busbw x 2(1)/2;
     * all inside backward; 4 parameter tensors, from meta.csv.  Per collective (step):
     * step 1 r0 1000, r1 700 -> transfer 700, waits 300 and 0, starts 4000 and 4500 -> skew
     * 500; step 2 r0 1000, r1 900 -> transfer 900, waits 100 and 0, skew 0.  transfer
     * (700+900)/2 = 800, sync wait 400/4 rows = 100, skew (500+0)/2 = 250; xfer algbw
     * 4e6 / 800000 = 5 GB/s (busbw x 1) */
    "ddp,2,0,4,4000000,4,0.900,4.444,4.444,100.00,0.800,0.100,0.250,5.000,5.000\n"
    /* b1: 1500,1500,500,1100 -> mean 1150 µs; 1e6 / 1150000 = 0.870; hidden 500+500+0+0 of
     * 4600 = 21.74 %; no bucket.1.params in meta.csv: params unknown.  step 1: 1500, 500 ->
     * transfer 500, wait 1000, skew 6500-5500 = 1000; step 2: 1500, 1100 -> 1100, wait 400,
     * skew 13900-13500 = 400.  transfer 800, wait 1400/4 = 350, skew 700; 1e6/8e5 = 1.25 */
    "ddp,2,1,,1000000,4,1.150,0.870,0.870,21.74,0.800,0.350,0.700,1.250,1.250\n";

static const char *want_stragglers =
    "run,step,ranks,slowest_rank,max_compute_ms,min_compute_ms,skew_ms,wait_ms\n"
    /* step 1: ready r0 6000, r1 6500 (after the offset) -> rank 1, wait 500; compute 6000/6500 */
    "ddp,1,2,1,6.500,6.000,0.500,0.500\n"
    /* step 2: ready r0 14000, r1 13900 -> rank 0, wait 100; compute 6000/5900 */
    "ddp,2,2,0,6.000,5.900,0.100,0.100\n";

static const char *want_speedup =
    "run,mode,device,world_size,amp,epochs,images,wall_s,train_s,images_per_s,speedup,"
    "efficiency,final_accuracy,repeats,wall_s_median,wall_s_min,wall_s_max,"
    "images_per_s_median,images_per_s_min,images_per_s_max,speedup_median,speedup_min,"
    "speedup_max,basis,steady_steps,steady_images,steady_s,first_step_ms,"
    "images_per_s_whole_run,speedup_whole_run,efficiency_whole_run\n"
    /* 64 images / 0.014 s = 4571.4; 2 steps, too few for a warm-up: the steady state is
     * every step (so the whole run's figures are the same); step 1 [0, 6000] µs */
    "baseline,baseline,cpu,1,off,1,64,1.500,0.014,4571.4,1.000,1.000,0.500000,1,1.500,1.500,1.500,4571.4,4571.4,4571.4,1.000,1.000,1.000,"
    "steady,2,64,0.014,6.000,4571.4,1.000,1.000\n"
    /* 128 / 0.016 = 8000 img/s; 8000 / 4571.43 = 1.75; / 2 ranks = 0.875; rank 0's step 1
     * [0, 8000] µs */
    "ddp,ddp,cpu,2,off,1,128,1.250,0.016,8000.0,1.750,0.875,0.600000,1,1.250,1.250,1.250,8000.0,8000.0,8000.0,1.750,1.750,1.750,"
    "steady,2,128,0.016,8.000,8000.0,1.750,0.875\n";

static void test_parent_layout(const char *root)
{
    char *parent = test_path(root, "golden");
    mkdir(parent, 0777);
    char *b = test_path(parent, "baseline"), *d = test_path(parent, "ddp");
    make_baseline(b);
    make_ddp(d);
    char *term_path = test_path(root, "terminal.txt");
    FILE *term = fopen(term_path, "w+");
    const char *dirs[] = {parent};
    int rc = report_run(dirs, 1, NULL, term);
    CHECK(rc == 0, "report on %s: %s", parent, error_get());
    fclose(term);
    /* the default output directory is the parent */
    check_file(parent, "phases.csv", want_phases);
    check_file(parent, "overlap.csv", want_overlap);
    check_file(parent, "buckets.csv", want_buckets);
    check_file(parent, "stragglers.csv", want_stragglers);
    check_file(parent, "speedup.csv", want_speedup);

    char *tl = test_read_file(parent, "timeline.json");
    CHECK(tl && json_valid(tl), "timeline.json is not valid JSON");
    if (tl) {
        /* rows: baseline 11, ddp rank 0 19 (with the kernel and 4 cpu rows), rank 1 14 */
        CHECK(count_substr(tl, "\"ph\":\"X\"") == 44, "%zu X events, want 44",
              count_substr(tl, "\"ph\":\"X\""));
        /* 3 processes x (name + sort index); lanes: baseline 2, ddp rank 0 5 (the cpu rows
         * overlap the all-reduces on the comm lane: a sub-lane of it), rank 1 3, each thread
         * name + sort index */
        CHECK(count_substr(tl, "\"ph\":\"M\"") == 26, "%zu M events, want 26",
              count_substr(tl, "\"ph\":\"M\""));
        CHECK(strstr(tl, "\"args\":{\"name\":\"ddp rank 1\"}") != NULL, "no process ddp rank 1");
        CHECK(strstr(tl, "\"name\":\"cuda stream 7\"") != NULL, "no lane for the CUPTI stream");
        /* rank 1's first data range starts at 0 µs once its offset is applied (pid of run 2,
         * rank 1 = 200001); ns precision survives as three decimals */
        CHECK(strstr(tl, "{\"name\":\"data\",\"cat\":\"data\",\"ph\":\"X\",\"ts\":0.000,"
                         "\"dur\":500.000,\"pid\":200001,\"tid\":3,\"args\":{\"step\":1,"
                         "\"epoch\":1,\"bucket\":-1,\"bytes\":0}}") != NULL,
              "rank 1's first event is not at ts 0 on rank 0's clock");
        CHECK(strstr(tl, "\"name\":\"allreduce.b0\",\"cat\":\"allreduce\",\"ph\":\"X\",\"ts\":"
                         "4000.000,\"dur\":1000.000,\"pid\":200000,\"tid\":2,\"args\":{\"step\":"
                         "1,\"epoch\":1,\"bucket\":0,\"bytes\":4000000}}") != NULL,
              "rank 0's first all-reduce event is wrong");
        CHECK(strstr(tl, "\"kind\":\"kernel\"") != NULL, "the kernel row has no kind");
    }
    free(tl);

    char *html = test_read_file(parent, "report.html");
    CHECK(html && strstr(html, "<svg") && strstr(html, "</html>"), "report.html incomplete");
    CHECK(html && !strstr(html, "<script") && !strstr(html, "https://") &&
              !strstr(html, "<link") && !strstr(html, "@import"),
          "report.html refers to scripts, links or the network");
    CHECK(html && count_substr(html, "http://") == count_substr(html, "http://www.w3.org/2000/svg"),
          "report.html has a URL other than the SVG namespace");
    free(html);
    for (int k = 0; k < 2; k++) {
        char *svg = test_read_file(parent, k ? "speedup.svg" : "phases.svg");
        CHECK(svg && strstr(svg, "<svg") && strstr(svg, "</svg>"), "%s incomplete",
              k ? "speedup.svg" : "phases.svg");
        free(svg);
    }
    char *out = test_read_file(root, "terminal.txt");
    /* the terminal tables: a title naming the CSV, labels, then units in parentheses */
    CHECK(out && strstr(out, "# speedup: per run, against the baseline  (speedup.csv)"),
          "terminal output has no speedup table");
    CHECK(out && strstr(out, "(ms)") && strstr(out, "(GB/s)") && strstr(out, "(img/s)"),
          "terminal headers carry no units");
    CHECK(out && strstr(out, "   ddp       ddp       cpu"), "terminal rows not aligned:\n%s",
          out ? out : "");
    free(out);
    free(term_path);
    free(b);
    free(d);
    free(parent);
}

static void test_several_runs(const char *root)
{
    /* baseline, ddp and the 4-rank run as separate arguments, into --out */
    char *b = test_path(root, "golden/baseline"), *d = test_path(root, "golden/ddp");
    char *bw = test_path(root, "bw4"), *out = test_path(root, "out/nested");
    make_bw4(bw);
    const char *dirs[] = {b, d, bw};
    int rc = report_run(dirs, 3, out, NULL);
    CHECK(rc == 0, "report on three runs: %s", error_get());
    char *sp = test_read_file(out, "speedup.csv");
    /* bw4 has no metrics.csv: images = 128 x 1 epoch; train_s 0.010 -> 12800 img/s; speedup
     * 12800 / 4571.43 = 2.8, efficiency 0.7; its one step is its steady state (its images:
     * 128 x 1 step / 1 step) */
    CHECK(sp && strstr(sp, "\nbw4,ddp,cuda,4,fp16,1,128,2.000,0.010,12800.0,2.800,0.700,0.7"
                    ",1,2.000,2.000,2.000,12800.0,12800.0,12800.0,2.800,2.800,2.800"
                    ",steady,1,128,0.010,10.000,12800.0,2.800,0.700\n"),
          "speedup.csv of three runs:\n%s", sp ? sp : "(missing)");
    CHECK(sp && count_substr(sp, "\n") == 4, "speedup.csv should have a header and 3 rows");
    free(sp);
    char *bk = test_read_file(out, "buckets.csv");
    /* rank 0's device row (1000) replaces its host row (7000): 1000,2000,3000,2000 -> mean
     * 2000 µs; 8e6 B / 2e6 ns = 4 GB/s; busbw = 4 x 2(4-1)/4 = 6; hidden (1000+2000+2000+2000)
     * / 8000 = 87.5 %; one collective: transfer = min 1000, waits 0+1000+2000+1000 over 4
     * rows = 1000, all start at 2000: skew 0; xfer algbw 8e6 / 1e6 = 8, busbw 8 x 6/4 = 12 */
    CHECK(bk && strstr(bk, "\nbw4,4,0,,8000000,4,2.000,4.000,6.000,87.50,1.000,1.000,0.000,"
                           "8.000,12.000\n"),
          "buckets.csv of bw4:\n%s", bk ? bk : "(missing)");
    free(bk);
    free(b);
    free(d);
    free(bw);
    free(out);
}

static void test_single_run_no_baseline(const char *root)
{
    /* a DDP run alone: no baseline, so speedup and efficiency are empty; output in the run */
    char *d = test_path(root, "golden/ddp");
    const char *dirs[] = {d};
    int rc = report_run(dirs, 1, NULL, NULL);
    CHECK(rc == 0, "report on %s: %s", d, error_get());
    char *sp = test_read_file(d, "speedup.csv");
    CHECK(sp && strstr(sp, "\nddp,ddp,cpu,2,off,1,128,1.250,0.016,8000.0,,,0.600000"
                    ",1,1.250,1.250,1.250,8000.0,8000.0,8000.0,,,"
                    ",steady,2,128,0.016,8.000,8000.0,,\n"),
          "speedup.csv of a lone DDP run:\n%s", sp ? sp : "(missing)");
    free(sp);
    free(d);
}

int main(void)
{
    char *root = test_tmpdir();
    test_parent_layout(root);
    test_several_runs(root);
    test_single_run_no_baseline(root);
    test_tmpdir_done(root);
    return test_finish();
}
