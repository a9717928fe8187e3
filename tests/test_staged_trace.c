/* test_staged_trace.c — the trace of host-staged all-reduces (issue 21: `--gpu 0,0
 * --trace full` wrote no device all-reduce rows, and scripts/check-gpu-trace failed the run).
 *
 * Two forked CPU ranks run the staged comm (comm_staged.c over the shm comm, a fake device
 * whose copies are memcpy) through the probe calls the trainer's reducer observer makes
 * (train_session.c: probe_bucket_launch, the async all-reduce, probe_bucket_issued, wait,
 * probe_bucket_range with the comm's span), 3 steps of 3 buckets, with the probe told the
 * comm is host-staged as device.c tells it.  Then each rank's trace must hold, per step and
 * bucket, one host row allreduce.bN (the shm collective's span) and one device row
 * allreduce.bN.host-staged holding it; and scripts/check-gpu-trace, given meta.csv
 * comm=shm-staged, must pass its buckets and allreduce-rows checks on that directory and
 * fail them on the same run made without the flag (the rows missing). */
#include "comm/comm.h"
#include "comm/comm_shm.h"
#include "comm/comm_staged.h"
#include "common/error.h"
#include "probes/probe.h"
#include "probes/trace_format.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORLD 2
#define STEPS 3
#define BUCKETS 3
#define COUNT 1000 /* floats per bucket */

static int copy_down(void *ctx, void *host_dst, const void *dev_src, size_t bytes)
{
    (void)ctx;
    memcpy(host_dst, dev_src, bytes);
    return 0;
}

static int copy_up(void *ctx, void *dev_dst, const void *host_src, size_t bytes)
{
    (void)ctx;
    memcpy(dev_dst, host_src, bytes);
    return 0;
}

/* one rank's training steps, as the reducer and train.c drive the probe; exit status 0 ok */
static int rank_main(int rank, const char *segment, const char *dir, int staged)
{
    struct comm *shm = comm_shm_create(rank, WORLD, segment, 256 * 1024, 10000);
    const struct comm_stage stage = {copy_down, copy_up, NULL};
    struct comm *c = shm ? comm_staged_create(shm, &stage) : NULL;
    struct probe_opts po;
    probe_opts_default(&po);
    po.rank = rank;
    po.run_dir = dir;
    po.mode = PROBE_FULL;
    po.quiet = 1;
    po.comm_host_staged = staged && c && strcmp(c->name, COMM_STAGED_NAME) == 0;
    struct probe *p = c ? probe_create(&po) : NULL;
    if (!p) {
        fprintf(stderr, "rank %d: %s\n", rank, error_get());
        return 1;
    }
    static float grad[BUCKETS][COUNT];
    int rc = 0;
    for (int s = 1; s <= STEPS && rc == 0; s++) {
        probe_set_step(p, s, 1);
        probe_push(p, PROBE_STEP);
        probe_push(p, PROBE_BACKWARD);
        struct comm_work *w[BUCKETS];
        for (int b = 0; b < BUCKETS; b++) {
            for (int i = 0; i < COUNT; i++)
                grad[b][i] = (float)(rank + 1);
            probe_bucket_launch(p, b, sizeof grad[b]);
            w[b] = c->allreduce_async(c, grad[b], COUNT, COMM_F32);
            probe_bucket_issued(p, b);
            rc |= w[b] == NULL;
        }
        probe_pop(p);
        for (int b = 0; b < BUCKETS && rc == 0; b++) {
            struct comm_span span = {0, 0};
            rc |= c->wait(c, w[b], &span);
            probe_bucket_range(p, b, sizeof grad[b], span.start_ns, span.end_ns);
            rc |= grad[b][0] != 3.0f || grad[b][COUNT - 1] != 3.0f; /* 1 + 2 */
        }
        probe_push(p, PROBE_OPTIMIZER);
        probe_pop(p);
        probe_pop(p);
    }
    if (rc)
        fprintf(stderr, "rank %d: all-reduce: %s\n", rank, error_get());
    rc |= probe_destroy(p) != 0;
    c->destroy(c);
    return rc;
}

/* run both ranks into dir; 0 when both exited 0 */
static int run_world(const char *dir, int staged, int n)
{
    char segment[96];
    snprintf(segment, sizeof segment, "/ddpprof-test-stagedtrace-%d-%d", (int)getpid(), n);
    pid_t pid[WORLD];
    for (int r = 0; r < WORLD; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            alarm(60);
            _exit(rank_main(r, segment, dir, staged));
        }
    }
    int bad = 0;
    for (int r = 0; r < WORLD; r++) {
        int st = 0;
        bad |= pid[r] < 0 || waitpid(pid[r], &st, 0) != pid[r] || !WIFEXITED(st) ||
               WEXITSTATUS(st) != 0;
    }
    char meta[128];
    int len = snprintf(meta, sizeof meta,
                       "key,value\nmode,ddp\nworld_size,%d\nbuckets,%d\ncomm,%s\n", WORLD,
                       BUCKETS, COMM_STAGED_NAME);
    test_write_file(dir, "meta.csv", meta, (size_t)len);
    return bad;
}

struct ar_row {
    int n;
    long long start, end;
};

/* the rank's all-reduce rows: host[s][b] and staged[s][b] (device rows with the mark);
 * other device all-reduce rows counted in *unmarked */
static void read_rows(const char *dir, int rank, struct ar_row host[][BUCKETS],
                      struct ar_row staged[][BUCKETS], int *unmarked)
{
    char file[32];
    snprintf(file, sizeof file, "rank%d.trace.csv", rank);
    struct test_csv *t = test_csv_read(dir, file);
    CHECK(t != NULL, "no %s", file);
    if (!t)
        return;
    int c_rank = test_csv_col(t, "rank"), c_step = test_csv_col(t, "step");
    int c_phase = test_csv_col(t, "phase"), c_bucket = test_csv_col(t, "bucket");
    int c_clock = test_csv_col(t, "clock"), c_start = test_csv_col(t, "start_ns");
    int c_end = test_csv_col(t, "end_ns"), c_name = test_csv_col(t, "name");
    for (int i = 0; i < t->nrows; i++) {
        if (strcmp(test_csv_get(t, i, c_phase), "allreduce") != 0)
            continue;
        int rk = atoi(test_csv_get(t, i, c_rank)), step = atoi(test_csv_get(t, i, c_step));
        int bucket = atoi(test_csv_get(t, i, c_bucket));
        long long a = atoll(test_csv_get(t, i, c_start)), b = atoll(test_csv_get(t, i, c_end));
        const char *clock = test_csv_get(t, i, c_clock), *name = test_csv_get(t, i, c_name);
        CHECK(rk == rank && step >= 1 && step <= STEPS && bucket >= 0 && bucket < BUCKETS,
              "%s: row of rank %d step %d bucket %d", file, rk, step, bucket);
        if (step < 1 || step > STEPS || bucket < 0 || bucket >= BUCKETS)
            continue;
        char want[64];
        snprintf(want, sizeof want, "allreduce.b%d%s", bucket, TRACE_HOST_STAGED_SUFFIX);
        struct ar_row *r = NULL;
        if (strcmp(clock, "host") == 0)
            r = &host[step - 1][bucket];
        else if (strcmp(clock, "device") == 0 && strcmp(name, want) == 0)
            r = &staged[step - 1][bucket];
        else if (strcmp(clock, "device") == 0)
            ++*unmarked;
        if (r) {
            r->n++;
            r->start = a;
            r->end = b;
        }
    }
    test_csv_free(t);
}

/* scripts/check-gpu-trace's line for check name on dir, or "" (python3 missing: NULL) */
static char *checker_line(const char *dir, const char *name, char *line, size_t cap)
{
    const char *src = getenv("DDPPROF_SOURCE_DIR");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "command -v python3 >/dev/null && python3 '%s/scripts/check-gpu-trace' '%s'",
             src ? src : ".", dir);
    FILE *f = popen(cmd, "r");
    if (!f)
        return NULL;
    line[0] = '\0';
    char buf[1024];
    size_t nl = strlen(name);
    while (fgets(buf, sizeof buf, f)) {
        char *sp = strchr(buf, ' ');
        if (sp && strncmp(sp + 1, name, nl) == 0 && sp[1 + nl] == ':')
            snprintf(line, cap, "%s", buf);
    }
    int st = pclose(f);
    return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) <= 2 ? line : NULL;
}

int main(void)
{
    char tmpl[] = "/tmp/ddpprof-test-stagedtrace-XXXXXX";
    char *root = mkdtemp(tmpl);
    if (!root)
        test_skip("no temporary directory");
    char *marked = test_path(root, "staged"), *plain = test_path(root, "plain");
    CHECK(mkdir(marked, 0700) == 0 && mkdir(plain, 0700) == 0, "mkdir: %s", strerror(errno));
    CHECK(run_world(marked, 1, 1) == 0, "the staged ranks failed");
    CHECK(run_world(plain, 0, 2) == 0, "the ranks without the flag failed");

    for (int rank = 0; rank < WORLD; rank++) {
        struct ar_row host[STEPS][BUCKETS] = {{{0}}}, staged[STEPS][BUCKETS] = {{{0}}};
        int unmarked = 0;
        read_rows(marked, rank, host, staged, &unmarked);
        CHECK(unmarked == 0, "rank %d: %d device all-reduce rows without the mark", rank,
              unmarked);
        for (int s = 0; s < STEPS; s++)
            for (int b = 0; b < BUCKETS; b++) {
                struct ar_row *h = &host[s][b], *d = &staged[s][b];
                CHECK(h->n == 1 && d->n == 1,
                      "rank %d step %d bucket %d: %d host rows, %d host-staged rows", rank,
                      s + 1, b, h->n, d->n);
                CHECK(d->n != 1 || (d->start <= h->start && h->end <= d->end),
                      "rank %d step %d bucket %d: host-staged [%lld, %lld] does not hold the "
                      "collective [%lld, %lld]", rank, s + 1, b, d->start, d->end, h->start,
                      h->end);
            }
        /* without the flag: the host rows only (what --gpu 0,0 wrote before) */
        struct ar_row host0[STEPS][BUCKETS] = {{{0}}}, staged0[STEPS][BUCKETS] = {{{0}}};
        unmarked = 0;
        read_rows(plain, rank, host0, staged0, &unmarked);
        CHECK(host0[0][0].n == 1 && staged0[0][0].n == 0 && unmarked == 0,
              "rank %d without the flag: %d host, %d host-staged, %d other device rows", rank,
              host0[0][0].n, staged0[0][0].n, unmarked);
    }

    char line[1024];
    if (!checker_line(marked, "buckets", line, sizeof line)) {
        printf("check-gpu-trace not run (no python3)\n");
    } else {
        CHECK(strncmp(line, "PASS ", 5) == 0, "staged run: %s", line);
        checker_line(marked, "allreduce-rows", line, sizeof line);
        CHECK(strncmp(line, "PASS ", 5) == 0, "staged run: %s", line);
        checker_line(marked, "nccl-kernels", line, sizeof line);
        CHECK(strncmp(line, "SKIP ", 5) == 0, "staged run: %s", line);
        checker_line(plain, "buckets", line, sizeof line);
        CHECK(strncmp(line, "FAIL ", 5) == 0, "run without host-staged rows: %s", line);
        checker_line(plain, "allreduce-rows", line, sizeof line);
        CHECK(strncmp(line, "FAIL ", 5) == 0, "run without host-staged rows: %s", line);
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0, "rm %s", root);
    free(marked);
    free(plain);
    return test_finish();
}
