/* bench_report.c — ddpprof-bench-report: writes a synthetic run directory or Kineto trace of
 * any size and times the report on it, for scripts/bench-report (reader speed in rows/s or
 * MB/s, peak memory).
 *
 *   ddpprof-bench-report gen DIR RANKS ROWS_PER_RANK   write DIR/{meta,metrics,rankN.trace}.csv
 *   ddpprof-bench-report load DIR                      read the traces only
 *   ddpprof-bench-report run DIR OUT                   the whole report (no terminal output)
 *   ddpprof-bench-report kineto-gen FILE MB            write a Kineto trace of about MB MB
 *   ddpprof-bench-report import FILE                   read one PyTorch trace (report/import_*.c)
 *
 * load, run and import print one line: rows or bytes, wall and CPU seconds, rows per wall
 * second or MB per CPU second (one core: the reader is one thread) and peak RSS (VmHWM of
 * this process, so run one measurement per process). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "common/error.h"
#include "probes/run_format.h"
#include "probes/trace_format.h"
#include "bench/kineto_gen.h"
#include "report/input/import.h"
#include "report/report.h"
#include "report/input/run.h"

static uint64_t bench_rng = 0x9e3779b97f4a7c15ull;

static int64_t bench_jitter(int64_t mean)
{
    bench_rng ^= bench_rng << 13;
    bench_rng ^= bench_rng >> 7;
    bench_rng ^= bench_rng << 17;
    return mean * 9 / 10 + (int64_t)(bench_rng % (uint64_t)(mean / 5 + 1));
}

static double bench_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static long bench_hwm_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* One step is 8 rows: data, forward, backward, 3 bucket all-reduces, optimizer, step. */
static int bench_gen(const char *dir, int ranks, long rows_per_rank)
{
    static const int64_t bucket_bytes[3] = {1048576, 4194304, 2097152};
    long steps = rows_per_rank / 8;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/meta.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return perror(path), 1;
    fprintf(f, "key,value\nmodel,synthetic\nmode,ddp\ndevice,cpu\nworld_size,%d\nbatch_size,32\n"
               "global_batch_size,%d\nepochs,1\namp,off\ntrain_samples,%ld\nfinal_accuracy,0.5\n"
               "steps,%ld\nwall_s,%.3f\n",
            ranks, 32 * ranks, steps * 32 * ranks, steps, (double)steps * 0.01 + 1);
    for (int r = 0; r < ranks; r++) {
        char key[64];
        run_meta_key_at(key, sizeof key, RUN_META_rank_clock_offset_ns, r);
        fprintf(f, "%s,%d\n", key, r * 1000);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    if (!(f = fopen(path, "w")))
        return perror(path), 1;
    fputs("step,epoch,loss,lr,images\n", f);
    for (long s = 1; s <= steps; s++)
        fprintf(f, "%ld,1,2.3,0.0001,%d\n", s, 32 * ranks);
    fclose(f);
    for (int r = 0; r < ranks; r++) {
        snprintf(path, sizeof path, "%s/" TRACE_FILE_FORMAT, dir, r);
        if (!(f = fopen(path, "w")))
            return perror(path), 1;
        static char buf[1 << 20];
        setvbuf(f, buf, _IOFBF, sizeof buf);
        fputs(TRACE_HEADER, f);
        int64_t t = 1000000000000 - r * 1000;
        for (long s = 1; s <= steps; s++) {
            int64_t t0 = t, d = bench_jitter(500000), fw = bench_jitter(2000000);
            int64_t bw = bench_jitter(4000000), opt = bench_jitter(300000);
            fprintf(f, "%d,%ld,1,data,-1,host,%lld,%lld,0,data,range,2\n", r, s, (long long)t,
                    (long long)(t + d));
            t += d;
            fprintf(f, "%d,%ld,1,forward,-1,host,%lld,%lld,0,forward,range,0\n", r, s,
                    (long long)t, (long long)(t + fw));
            t += fw;
            int64_t ar = t + bw / 3;
            for (int b = 0; b < 3; b++) {
                int64_t dur = bench_jitter(1500000);
                fprintf(f, "%d,%ld,1,allreduce,%d,host,%lld,%lld,%lld,allreduce.b%d,range,1\n",
                        r, s, b, (long long)ar, (long long)(ar + dur), (long long)bucket_bytes[b],
                        b);
                ar += dur;
            }
            fprintf(f, "%d,%ld,1,backward,-1,host,%lld,%lld,0,backward,range,0\n", r, s,
                    (long long)t, (long long)(t + bw));
            t = (t + bw > ar ? t + bw : ar);
            fprintf(f, "%d,%ld,1,optimizer,-1,host,%lld,%lld,0,optimizer,range,0\n", r, s,
                    (long long)t, (long long)(t + opt));
            t += opt;
            fprintf(f, "%d,%ld,1,step,-1,host,%lld,%lld,0,step,range,0\n", r, s, (long long)t0,
                    (long long)t);
            t += 10000;
        }
        if (fclose(f) != 0)
            return perror(path), 1;
    }
    return 0;
}

static long bench_count_rows(const char *dir)
{
    long rows = 0;
    for (int r = 0;; r++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/" TRACE_FILE_FORMAT, dir, r);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        static char buf[1 << 16];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            for (size_t i = 0; i < n; i++)
                rows += buf[i] == '\n';
        rows--; /* the header */
        fclose(f);
    }
    return rows;
}

/* Read one PyTorch profiler trace through the import, as `ddpprof report FILE` does. */
static int bench_import(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return perror(path), 1;
    double t0 = clock_now_s(), c0 = bench_cpu_s();
    struct runset rs;
    runset_init(&rs);
    char *paths[] = {(char *)path};
    int rc = import_run(&rs, path, paths, 1);
    double s = clock_now_s() - t0, cpu = bench_cpu_s() - c0;
    if (rc < 0) {
        fprintf(stderr, "ddpprof-bench-report: %s\n", error_get());
        runset_free(&rs);
        return 1;
    }
    size_t rows = rs.n > 0 && rs.runs[0].nranks > 0 ? rs.runs[0].ranks[0].n : 0;
    double mb = (double)st.st_size / 1e6;
    printf("import %8.1f MB  %6.3f s (cpu %6.3f s)  %6.1f MB/s per core  peak RSS %7.1f MiB  "
           "(%zu rows kept)\n",
           mb, s, cpu, mb / cpu, (double)bench_hwm_kib() / 1024.0, rows);
    runset_free(&rs);
    return 0;
}

/* Two runs reported together, without and with the diff (report/analysis/diff.c), as
 * `ddpprof report A B [--diff]` does without terminal output: the diff's cost is the
 * difference. */
static int bench_pair(const char *a, const char *b, const char *out, int diff)
{
    long rows = bench_count_rows(a) + bench_count_rows(b);
    double t0 = clock_now_s(), c0 = bench_cpu_s();
    const char *dirs[] = {a, b};
    struct report_opts o = {.out_dir = out, .diff = diff ? REPORT_DIFF_ASKED : REPORT_DIFF_OFF};
    int rc = report_run_opts(dirs, 2, &o, NULL);
    double s = clock_now_s() - t0, cpu = bench_cpu_s() - c0;
    if (rc < 0) {
        fprintf(stderr, "ddpprof-bench-report: %s\n", error_get());
        return 1;
    }
    printf("%-6s %9ld rows  %6.3f s (cpu %6.3f s)  %5.2f M rows/s  peak RSS %7.1f MiB  "
           "(2 runs%s)\n",
           diff ? "diff" : "2 runs", rows, s, cpu, (double)rows / s / 1e6,
           (double)bench_hwm_kib() / 1024.0, diff ? ": report A B --diff" : ": report A B");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "pair") == 0)
        return bench_pair(argv[2], argv[3], argv[4], strcmp(argv[5], "diff") == 0);
    if (argc == 5 && strcmp(argv[1], "gen") == 0)
        return bench_gen(argv[2], atoi(argv[3]), atol(argv[4]));
    if (argc == 4 && strcmp(argv[1], "kineto-gen") == 0) {
        long steps = 0;
        if (kineto_gen(argv[2], (uint64_t)(atof(argv[3]) * 1e6), &steps) < 0)
            return 1;
        printf("kineto-gen: %s: %ld steps\n", argv[2], steps);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "import") == 0)
        return bench_import(argv[2]);
    int load = argc == 3 && strcmp(argv[1], "load") == 0;
    if (!load && !(argc == 4 && strcmp(argv[1], "run") == 0)) {
        fprintf(stderr, "usage: %s gen DIR RANKS ROWS_PER_RANK | load DIR | run DIR OUT | "
                        "kineto-gen FILE MB | import FILE | pair A B OUT diff|nodiff\n",
                argv[0]);
        return 2;
    }
    long rows = bench_count_rows(argv[2]);
    double t0 = clock_now_s(), c0 = bench_cpu_s();
    int rc;
    if (load) {
        struct runset rs;
        runset_init(&rs);
        rc = runset_add_dir(&rs, argv[2]);
        runset_free(&rs);
    } else {
        const char *dirs[] = {argv[2]};
        rc = report_run(dirs, 1, argv[3], NULL);
    }
    double s = clock_now_s() - t0, cpu = bench_cpu_s() - c0;
    if (rc < 0) {
        fprintf(stderr, "ddpprof-bench-report: %s\n", error_get());
        return 1;
    }
    printf("%-6s %9ld rows  %6.3f s (cpu %6.3f s)  %5.2f M rows/s  peak RSS %7.1f MiB  "
           "(%.0f B/row)\n",
           load ? "load" : "report", rows, s, cpu, (double)rows / s / 1e6,
           (double)bench_hwm_kib() / 1024.0, (double)bench_hwm_kib() * 1024.0 / (double)rows);
    return 0;
}
