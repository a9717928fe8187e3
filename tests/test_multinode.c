/* test_multinode.c — two hosts on one machine: network namespaces joined by a veth pair
 * (addresses of this test's own: 10.213.X.1 and .2, X from the pid), node 0 in one and node
 * 1 in the other, each with its own host name (unshare --uts), 2 CPU ranks each, --comm gloo,
 * each node writing its own run directory.  Traffic stays on these namespaces and their
 * loopbacks.  Skips (77) where namespaces cannot be made (not root) or without Gloo.
 *
 *  1. the 4-rank run equals a 1-process run at 4x the batch: losses within 1e-5, weights
 *     within 1e-5 of their magnitude (as test_ddp_equivalence for shm);
 *  2. `ddpprof report NODE0 NODE1` merges them: 4 ranks from 2 hosts, each named;
 *  3. on one clock: in every step, no rank's bucket all-reduce ends before every rank has
 *     started it, to within the RTT each rank measured to rank 0 (meta.csv);
 *  4. node 1 killed mid-run (its agent, SIGKILL: its ranks follow): node 0's ranks stop
 *     within 10 s, node 0 names node 1, no process or shm segment is left;
 *  5. --max-restarts 1, a rank of node 1 killed at a random step: training completes, the
 *     failed attempt's files are kept in attempt-0/, meta.csv and the report tell the
 *     restart, and the final weights equal those of an uninterrupted run resumed from the
 *     same checkpoint;
 *  6. an impostor on node 1's host, before node 1 joins, claims node 1 four times at node
 *     0's rendezvous (as a ddpprof without secrets, setting the attempt's cause, and with a
 *     wrong secret): every claim is refused, node 0's log names its address, and the real
 *     node 1 joins and the job completes.
 * Every node has the job's secret from DDPPROF_JOB_SECRET_FILE (a file of mode 0600), as a
 * user passes it to every node. */
#include "comm/comm_gloo.h"
#include "comm/store_auth.h"
#include "comm/store_wire.h"
#include "common/clock.h"
#include "io/safetensors.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_STEPS 64
#define MAX_ROWS 4096

static char tmp[1024];
static char ns[2][32], addr[2][32];
static int net_up;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

static void net_down(void)
{
    if (net_up)
        sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", ns[0], ns[1]);
    net_up = 0;
}

/* Two namespaces joined by a veth pair, loopbacks up.  0, or -1 when it cannot be done. */
static int net_setup(void)
{
    int pid = (int)getpid(), x = 1 + pid % 250;
    snprintf(ns[0], sizeof ns[0], "ddpA%d", pid);
    snprintf(ns[1], sizeof ns[1], "ddpB%d", pid);
    snprintf(addr[0], sizeof addr[0], "10.213.%d.1", x);
    snprintf(addr[1], sizeof addr[1], "10.213.%d.2", x);
    if (sh("ip netns add %s 2>/dev/null", ns[0]))
        return -1;
    net_up = 1;
    if (sh("ip netns add %s && ip link add va%d type veth peer name vb%d && "
           "ip link set va%d netns %s && ip link set vb%d netns %s && "
           "ip -n %s addr add %s/24 dev va%d && ip -n %s addr add %s/24 dev vb%d && "
           "ip -n %s link set lo up && ip -n %s link set lo up && "
           "ip -n %s link set va%d up && ip -n %s link set vb%d up",
           ns[1], pid, pid, pid, ns[0], pid, ns[1], ns[0], addr[0], pid, ns[1], addr[1], pid,
           ns[0], ns[1], ns[0], pid, ns[1], pid)) {
        net_down();
        return -1;
    }
    return 0;
}

/* Seed 2: this ConvNet has points where a rounding difference of 1e-7 (the summation order
 * of 4 ranks x 6 images against 1 x 24) flips a ReLU / max-pool decision and the runs part
 * by 1e-3 within 10 steps of SGD with momentum.  About a third of the seeds hit one here
 * (measured on 4 shm ranks against 1 process: seeds 3 and 4 do, 1, 2, 5 and 6 do not; seed
 * 4 also on the code before oneDNN), so the seed is one where a 1e-5 comparison measures
 * DDP, not that chaos.  A DDP error (a missing 1/world, local BatchNorm, a lost bucket)
 * moves losses and weights by far more than 1e-5. */
static const char *common_args(void)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "--quiet --data /usr/share/datasets/fashion-mnist --limit 240 --test-limit 48 "
             "--epochs 1 --lr 0.01 --momentum 0.9 --weight-decay 1e-4 --seed 2 --threads 1 "
             "--timeout 60 --amp off --init \"%s/tests/golden/convnet_init.safetensors\"",
             test_source_dir());
    return buf;
}

/* Start node `node`'s `ddpprof train` in its namespace under host name node<A|B>, output in
 * tmp/<out>.log; extra: more options; env: "NAME=value " words before the command or "".
 * Returns the pid of the node's agent (the ddpprof process itself: every step execs). */
static pid_t node_start(int node, const char *out, const char *extra, const char *env)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "exec env %s ip netns exec %s unshare --uts sh -c 'hostname node%c && exec \"%s\" train "
             "--nnodes 2 --node-rank %d --nproc-per-node 2 --master-addr %s --master-port 29500 "
             "--comm gloo --batch-size 6 %s --out \"%s/%s\" %s' >\"%s/%s.log\" 2>&1",
             env, ns[node], 'A' + node, getenv("DDPPROF"), node, addr[0], common_args(), tmp, out,
             extra, tmp, out);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void show_log(const char *name)
{
    sh("echo '--- %s.log:'; tail -n 15 \"%s/%s.log\" >&2", name, tmp, name);
}

/* Both nodes; 0 when both exited 0 (logs shown otherwise). */
static int run_nodes(const char *out0, const char *out1, const char *extra, const char *env)
{
    pid_t a = node_start(0, out0, extra, "");
    pid_t b = node_start(1, out1, extra, env);
    int ra = test_wait_code(a, 240), rb = test_wait_code(b, 240);
    if (ra || rb) {
        show_log(out0);
        show_log(out1);
    }
    CHECK(ra == 0 && rb == 0, "nodes %s, %s exited %d, %d", out0, out1, ra, rb);
    return ra || rb;
}

/* the loss column of metrics.csv, its rows with a number there */
static int read_losses(const char *out, double *loss)
{
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/%s", tmp, out);
    struct test_csv *t = test_csv_read(dir, "metrics.csv");
    if (!t)
        return 0;
    int n = test_csv_doubles(t, "loss", loss, MAX_STEPS);
    test_csv_free(t);
    return n;
}

/* max over tensors of max|a-b| / max|a| (model tensors; counters must be equal) */
static double weight_diff(const char *pa, const char *pb, int *tensors)
{
    struct st_file *fa = st_open(pa), *fb = st_open(pb);
    CHECK(fa && fb, "checkpoints %s and %s readable", pa, pb);
    double werr = fa && fb ? 0.0 : INFINITY;
    *tensors = 0;
    for (int i = 0; fa && fb && i < st_count(fa); i++) {
        const struct st_tensor *ta = st_get(fa, i), *tb = st_find(fb, ta->name);
        CHECK(tb && tb->nbytes == ta->nbytes, "tensor %s in both", ta->name);
        if (!tb || tb->nbytes != ta->nbytes || strncmp(ta->name, "optimizer.", 10) == 0)
            continue;
        (*tensors)++;
        if (ta->dtype == ST_I64) {
            CHECK(memcmp(ta->data, tb->data, ta->nbytes) == 0, "%s equal", ta->name);
            continue;
        }
        const float *x = ta->data, *y = tb->data;
        double diff = 0.0, scale = 0.0;
        for (int64_t k = 0; k < ta->numel; k++) {
            diff = fmax(diff, fabs((double)x[k] - y[k]));
            scale = fmax(scale, fabs((double)x[k]));
        }
        werr = fmax(werr, scale > 0 ? diff / scale : diff);
    }
    st_close(fa);
    st_close(fb);
    return werr;
}

/* ---- 1. equivalence ---- */

static void test_equivalence(void)
{
    CHECK(sh("\"%s\" train --cpu 1 --mode baseline --batch-size 24 %s --out \"%s/ref\" "
             ">\"%s/ref.log\" 2>&1",
             getenv("DDPPROF"), common_args(), tmp, tmp) == 0,
          "baseline run");
    if (run_nodes("n0", "n1", "", ""))
        return;
    double a[MAX_STEPS], b[MAX_STEPS];
    int na = read_losses("ref", a), nb = read_losses("n0", b), nc = read_losses("n1", b + 32);
    /* 240 samples / global batch 24 = 10 steps; node 1's metrics.csv holds the same losses */
    CHECK(na == 10 && nb == 10 && nc == 10, "%d, %d and %d steps, want 10", na, nb, nc);
    double worst = 0.0;
    for (int i = 0; i < na && i < nb; i++) {
        worst = fmax(worst, fabs(a[i] - b[i]) / fabs(a[i]));
        CHECK(b[i] == b[32 + i], "step %d: node 0 loss %.9g, node 1 %.9g", i + 1, b[i], b[32 + i]);
    }
    /* fp32 sums in another order (per-rank partial sums, Gloo's ring): a few ulps per step
     * (test_ddp_equivalence measured 2e-7 for shm over these 10 steps) */
    CHECK(worst < 1e-5, "losses differ by %.3g relative", worst);
    char pa[2048], pb[2048];
    snprintf(pa, sizeof pa, "%s/ref/checkpoint.safetensors", tmp);
    snprintf(pb, sizeof pb, "%s/n0/checkpoint.safetensors", tmp);
    int tensors = 0;
    double werr = weight_diff(pa, pb, &tensors);
    /* a wrong bucket, scale or SyncBatchNorm statistic is > 1e-3 */
    CHECK(tensors > 0 && werr < 1e-5, "weights differ by %.3g of their magnitude (%d tensors)",
          werr, tensors);
    printf("2 nodes x 2 ranks (gloo) vs 1 rank at 4x batch: max loss diff %.2e, max weight "
           "diff %.2e\n",
           worst, werr);
}

/* ---- 2. merged report ---- */

static void test_merged_report(void)
{
    int rc = sh("\"%s\" report \"%s/n0\" \"%s/n1\" --out \"%s/merged\" >\"%s/merged.log\" 2>&1",
                getenv("DDPPROF"), tmp, tmp, tmp, tmp);
    CHECK(rc == 0, "ddpprof report n0 n1 failed");
    if (rc)
        show_log("merged");
    struct test_csv *ov = test_csv_read(tmp, "merged/overlap.csv");
    CHECK(ov != NULL, "no merged overlap.csv");
    if (!ov)
        return;
    int on_a = 0, on_b = 0;
    int rank_col = test_csv_col(ov, "rank"), host_col = test_csv_col(ov, "host"); /* no host: */
    for (int r = 0; r < ov->nrows; r++) { /* test_csv_col failed, naming the columns */
        int rank = atoi(test_csv_get(ov, r, rank_col));
        const char *host = test_csv_get(ov, r, host_col);
        int a = strcmp(host, "nodeA") == 0, b = strcmp(host, "nodeB") == 0;
        CHECK((rank <= 1 && a) || (rank >= 2 && b), "rank %d on the wrong host: '%s'", rank, host);
        on_a += a;
        on_b += b;
    }
    CHECK(ov->nrows == 4 && on_a == 2 && on_b == 2,
          "merged overlap.csv: %d ranks (want 4), %d on nodeA, %d on nodeB", ov->nrows, on_a,
          on_b);
    test_csv_free(ov);
    char *tl = test_read_file(tmp, "merged/timeline.json");
    CHECK(tl && strstr(tl, "n0 rank 0 (nodeA)") && strstr(tl, "n0 rank 3 (nodeB)"),
          "the merged timeline does not hold every rank with its host");
    free(tl);
    char *log = test_read_file(tmp, "merged.log");
    CHECK(log && strstr(log, "4 ranks on 2 hosts"), "the report does not name 2 hosts");
    CHECK(log && !strstr(log, "warning"), "the merged report warned:\n%s", log ? log : "");
    free(log);
}

/* ---- 3. one clock ---- */

struct ar {
    int rank, step, bucket;
    long long start, end;
};

static long long meta_ll(const char *meta, const char *key, int *found)
{
    char want[128];
    snprintf(want, sizeof want, "\n%s,", key);
    const char *p = strstr(meta, want);
    *found = p != NULL;
    return p ? atoll(p + strlen(want)) : 0;
}

static int load_allreduces(const char *dir, int rank, long long offset, struct ar *out, int n)
{
    char name[64], path[2048];
    snprintf(name, sizeof name, "rank%d.trace.csv", rank);
    snprintf(path, sizeof path, "%s/%s", tmp, dir);
    struct test_csv *t = test_csv_read(path, name);
    if (!t)
        return n;
    int c_step = test_csv_col(t, "step"), c_phase = test_csv_col(t, "phase");
    int c_bucket = test_csv_col(t, "bucket"), c_clock = test_csv_col(t, "clock");
    int c_start = test_csv_col(t, "start_ns"), c_end = test_csv_col(t, "end_ns");
    for (int r = 0; r < t->nrows && n < MAX_ROWS; r++) {
        int bucket = atoi(test_csv_get(t, r, c_bucket));
        if (strcmp(test_csv_get(t, r, c_phase), "allreduce") == 0 &&
            strcmp(test_csv_get(t, r, c_clock), "host") == 0 && bucket >= 0)
            out[n++] = (struct ar){rank, atoi(test_csv_get(t, r, c_step)), bucket,
                                   atoll(test_csv_get(t, r, c_start)) + offset,
                                   atoll(test_csv_get(t, r, c_end)) + offset};
    }
    test_csv_free(t);
    return n;
}

static void test_one_clock(void)
{
    char *meta = test_read_file(tmp, "n0/meta.csv");
    CHECK(meta != NULL, "n0/meta.csv");
    if (!meta)
        return;
    static struct ar rows[MAX_ROWS];
    int n = 0;
    long long max_rtt = 0;
    for (int rank = 0; rank < 4; rank++) {
        char key[64];
        int found = 0, found_rtt = 0;
        snprintf(key, sizeof key, "clock_offset_ns.rank%d", rank);
        long long off = meta_ll(meta, key, &found);
        snprintf(key, sizeof key, "clock_rtt_ns.rank%d", rank);
        long long rtt = meta_ll(meta, key, &found_rtt);
        CHECK(found && found_rtt && (rank == 0 || rtt > 0), "rank %d: offset %d rtt %lld", rank,
              found, rtt);
        if (rtt > max_rtt)
            max_rtt = rtt;
        n = load_allreduces(rank < 2 ? "n0" : "n1", rank, off, rows, n);
    }
    free(meta);
    int groups = 0, bad = 0;
    double worst_gap_us = -1e30;
    for (int i = 0; i < n; i++) {
        if (rows[i].rank != 0)
            continue;
        long long latest_start = 0, earliest_end = 0;
        int ranks = 0;
        for (int j = 0; j < n; j++)
            if (rows[j].step == rows[i].step && rows[j].bucket == rows[i].bucket) {
                latest_start = ranks && latest_start > rows[j].start ? latest_start : rows[j].start;
                earliest_end = ranks && earliest_end < rows[j].end ? earliest_end : rows[j].end;
                ranks++;
            }
        groups++;
        double gap = (double)(latest_start - earliest_end) / 1000.0;
        worst_gap_us = fmax(worst_gap_us, gap);
        if (ranks != 4 || latest_start > earliest_end + max_rtt)
            bad++;
    }
    CHECK(groups >= 10 && bad == 0,
          "%d of %d all-reduces: some rank ended before another started (beyond the RTT "
          "%.1f us), or not on 4 ranks",
          bad, groups, max_rtt / 1000.0);
    printf("one clock: %d bucket all-reduces on 4 ranks, latest start - earliest end at most "
           "%.1f us (max RTT %.1f us)\n",
           groups, worst_gap_us, max_rtt / 1000.0);
}

/* ---- 4. a node killed ---- */

/* ddpprof processes whose command line mentions this test's directory */
static int count_ours(void)
{
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], buf[4096];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0)
            continue;
        for (ssize_t i = 0; i < len; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[len] = '\0';
        n += strstr(buf, tmp) != NULL && strstr(buf, "ddpprof") != NULL &&
             strstr(buf, "unshare") == NULL && strstr(buf, "sh -c") == NULL;
    }
    if (d)
        closedir(d);
    return n;
}

static int metrics_rows(const char *out)
{
    char *m = test_read_file(tmp, out);
    int n = 0;
    for (char *p = m; p && (p = strchr(p, '\n')); p++)
        n++;
    free(m);
    return n;
}

/* /dev/shm entries named ddpprof-<pid>-* whose pid is gone (a leak) and newer than t0 */
static int shm_leaks(time_t t0)
{
    DIR *d = opendir("/dev/shm");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300];
        struct stat st;
        int pid = 0;
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        if (sscanf(e->d_name, "ddpprof-%d-", &pid) == 1 && stat(path, &st) == 0 &&
            st.st_mtime >= t0 && kill(pid, 0) < 0 && errno == ESRCH)
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

static void test_node_killed(void)
{
    time_t t0 = time(NULL);
    pid_t a = node_start(0, "k0", "--limit 4800", "");
    pid_t b = node_start(1, "k1", "--limit 4800", "");
    int rows = 0;
    for (int i = 0; i < 1200 && rows < 6; i++) { /* training under way: 5 steps on disk */
        clock_sleep_ms(50);
        rows = metrics_rows("k0/metrics.csv");
    }
    CHECK(rows >= 6, "node 0 did not get to step 5 (%d rows)", rows);
    double t_kill = clock_now_s();
    kill(b, SIGKILL); /* node 1's agent; its ranks die with it (PR_SET_PDEATHSIG) */
    int rb = test_wait_code(b, 10);
    int ra = test_wait_code(a, 20);
    double dt = clock_now_s() - t_kill;
    CHECK(rb == 128 + SIGKILL, "node 1 exited %d", rb);
    CHECK(ra == 1, "node 0 exited %d after node 1 was killed (want 1)", ra);
    /* 10 s: the bound; measured ~1 s (gloo sees the connections reset at once) */
    CHECK(dt < 10.0, "node 0 took %.2f s to stop", dt);
    char *log = test_read_file(tmp, "k0.log");
    CHECK(log && strstr(log, "node 1 (host nodeB)"), "node 0 does not name node 1:\n%s",
          log ? log : "(no log)");
    printf("node 1 killed: node 0 stopped in %.2f s: %s\n", dt,
           log && strstr(log, "node 1 (host nodeB)") ? strstr(log, "node 1 (host nodeB)") : "?");
    free(log);
    int left = count_ours();
    for (int i = 0; i < 50 && left; i++) {
        clock_sleep_ms(100);
        left = count_ours();
    }
    CHECK(left == 0, "%d ddpprof process(es) left", left);
    CHECK(shm_leaks(t0) == 0, "shm segment(s) left in /dev/shm");
}

/* ---- 5. elastic restart ---- */

static void test_restart(void)
{
    /* a rank of node 1 killed as a step between 4 and 10 begins; a checkpoint every 2 steps,
     * so the restart resumes mid-epoch from an even step before it: every rank finished the
     * previous step's collectives, so rank 0 saved the even step before that for sure, and
     * the previous one unless it was stopped while saving it */
    srand((unsigned)getpid() ^ (unsigned)time(NULL));
    int rank = 2 + rand() % 2, step = 4 + rand() % 7;
    printf("restart: rank %d killed at step %d\n", rank, step);
    char env[64];
    snprintf(env, sizeof env, "DDPPROF_FAULT_KILL_STEP=%d:%d", rank, step);
    if (run_nodes("e0", "e1", "--max-restarts 1 --checkpoint-every 2", env))
        return;
    char *meta = test_read_file(tmp, "e0/meta.csv");
    char want[128];
    snprintf(want, sizeof want, "node 1 (host nodeB): rank %d failed (killed by signal 9", rank);
    CHECK(meta && strstr(meta, "\nrestarts,1\n") && strstr(meta, want),
          "e0/meta.csv does not tell the restart (%s)", want);
    int found = 0;
    long long resumed = meta ? meta_ll(meta, "resumed_step", &found) : -1;
    CHECK(found && (resumed == (step - 1) / 2 * 2 || resumed == (step - 2) / 2 * 2),
          "resumed at step %lld, want %d or %d", resumed, (step - 1) / 2 * 2, (step - 2) / 2 * 2);
    free(meta);
    CHECK(sh("test -f \"%s/e0/attempt-0/rank0.trace.csv\" && test -f "
             "\"%s/e0/attempt-0/meta.csv\" && test -f \"%s/e1/attempt-0/rank%d.trace.csv\" && "
             "test -f \"%s/e1/attempt-0/meta.csv\" && test -f \"%s/e0/rank0.trace.csv\"",
             tmp, tmp, tmp, 5 - rank, tmp, tmp) == 0,
          "the failed attempt's files are not kept beside the new ones");
    CHECK(sh("\"%s\" report \"%s/e0\" \"%s/e1\" --out \"%s/emerged\" 2>&1 | "
             "grep -q 'restart 1 of the job after: node 1'",
             getenv("DDPPROF"), tmp, tmp, tmp) == 0,
          "the report does not show the restart");

    /* the same checkpoint, resumed without a failure */
    char extra[2200];
    snprintf(extra, sizeof extra, "--checkpoint-every 2 --resume \"%s/e0/attempt-0/checkpoint.safetensors\"",
             tmp);
    if (run_nodes("u0", "u1", extra, ""))
        return;
    char pa[2048], pb[2048];
    snprintf(pa, sizeof pa, "%s/e0/checkpoint.safetensors", tmp);
    snprintf(pb, sizeof pb, "%s/u0/checkpoint.safetensors", tmp);
    int tensors = 0;
    double werr = weight_diff(pa, pb, &tensors);
    /* the same ranks, data order, comm and arithmetic from the same state: identical */
    CHECK(tensors > 0 && werr == 0.0, "final weights differ by %.3g of their magnitude", werr);
    printf("restart: final weights equal an uninterrupted run from the same checkpoint "
           "(max diff %.2e over %d tensors)\n",
           werr, tensors);
}

/* Node 1's own --out (not shared with rank 0's) still holds test_equivalence's run: it is
 * refused as rank 0's would be, naming the node, and nothing of it is touched. */
static void test_stale_node_dir(void)
{
    char *before = test_read_file(tmp, "n1/meta.csv");
    pid_t a = node_start(0, "s0", "", "");
    pid_t b = node_start(1, "n1", "", "");
    int ra = test_wait_code(a, 120), rb = test_wait_code(b, 120);
    CHECK(ra != 0 && ra != -1 && rb != 0 && rb != -1, "a reused node directory: exits %d, %d", ra,
          rb);
    CHECK(sh("grep -q \"node 1's run directory: --out %s/n1 is not empty (it holds .*): pass "
             "--overwrite\" \"%s/n1.log\"",
             tmp, tmp) == 0,
          "node 1's log does not say its --out is not empty");
    char *after = test_read_file(tmp, "n1/meta.csv");
    CHECK(before && after && strcmp(before, after) == 0, "n1/meta.csv changed");
    if (ra == 0 || rb == 0) {
        show_log("s0");
        show_log("n1");
    }
    free(before);
    free(after);
}


/* ---- 6. an impostor before node 1 joins ---- */

/* In a child in node 1's namespace: claims to be node 1 at node 0's rendezvous, four times
 * as a ddpprof without secrets (each then setting the attempt's cause), once with a wrong
 * secret.  Exits with the number of claims accepted (0 wanted), 99 when it never reached
 * node 0's port. */
static pid_t impostor_start(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    char path[128];
    snprintf(path, sizeof path, "/var/run/netns/%s", ns[1]);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) < 0)
        _exit(98);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(29500)};
    inet_pton(AF_INET, addr[0], &to.sin_addr);
    int accepted = 0, fds[5], reached = 0;
    for (int i = 0; i < 5; i++) {
        fds[i] = -1;
        for (double end = clock_now_s() + 20; fds[i] < 0 && clock_now_s() < end;) {
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (connect(fd, (struct sockaddr *)&to, sizeof to) == 0) {
                fds[i] = fd;
                break;
            }
            close(fd);
            clock_sleep_ms(20);
        }
        if (fds[i] < 0)
            break;
        reached++;
        struct timeval tv = {.tv_sec = 3};
        setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        uint8_t buf[512], h[STORE_REPLY_HEADER];
        int status = -1;
        uint32_t len = 0;
        if (i < 4) { /* the hello of a ddpprof without secrets, then the cause */
            store_wire_put_request(buf, STORE_OP_HELLO, 0, 8);
            store_wire_put_u32(buf + STORE_REQ_HEADER, 1);
            store_wire_put_u32(buf + STORE_REQ_HEADER + 4, 2);
            ssize_t w = send(fds[i], buf, STORE_REQ_HEADER + 8, MSG_NOSIGNAL);
            for (int k = 0; k < 2 && w > 0; k++) { /* a challenge first, where one comes */
                if (recv(fds[i], h, sizeof h, MSG_WAITALL) != (ssize_t)sizeof h ||
                    store_wire_decode_reply(h, &status, &len) < 0 || len > sizeof buf ||
                    (len && recv(fds[i], buf, len, MSG_WAITALL) != (ssize_t)len)) {
                    status = -1;
                    break;
                }
                if (!(len == STORE_CHALLENGE_BYTES && memcmp(buf, STORE_CHALLENGE_MAGIC, 8) == 0))
                    break;
            }
            if (status == STORE_REPLY_OK && len == 0) {
                accepted++;
                static const char cause[] = "the impostor's words";
                store_wire_put_request(buf, STORE_OP_SET, 8, sizeof cause - 1);
                memcpy(buf + STORE_REQ_HEADER, "a0/cause", 8);
                memcpy(buf + STORE_REQ_HEADER + 8, cause, sizeof cause - 1);
                w = send(fds[i], buf, STORE_REQ_HEADER + 8 + sizeof cause - 1, MSG_NOSIGNAL);
            }
        } else { /* the handshake with a wrong secret */
            uint8_t ch[STORE_CHALLENGE_BYTES], cnonce[32] = {5}, mac[32];
            const uint8_t *snonce;
            int mode;
            struct store_auth a;
            store_auth_from_secret(&a, "not-this-jobs-secret-0123", 25);
            if (recv(fds[i], h, sizeof h, MSG_WAITALL) == (ssize_t)sizeof h &&
                store_wire_decode_reply(h, &status, &len) == 0 && len == sizeof ch &&
                recv(fds[i], ch, sizeof ch, MSG_WAITALL) == (ssize_t)sizeof ch &&
                store_wire_decode_challenge(ch, len, &mode, &snonce) == 0) {
                store_auth_mac(&a, 0, snonce, cnonce, 1, 2, mac);
                store_wire_put_request(buf, STORE_OP_HELLO, 0, STORE_HELLO_VALUE);
                store_wire_put_hello(buf + STORE_REQ_HEADER, 1, 2, cnonce, mac);
                if (send(fds[i], buf, STORE_REQ_HEADER + STORE_HELLO_VALUE, MSG_NOSIGNAL) > 0 &&
                    recv(fds[i], h, sizeof h, MSG_WAITALL) == (ssize_t)sizeof h &&
                    store_wire_decode_reply(h, &status, &len) == 0 && status == STORE_REPLY_OK)
                    accepted++;
            }
        }
    }
    clock_sleep_ms(1500); /* holding whatever it was given while node 1 tries to join */
    _exit(reached == 5 ? accepted : 99);
}

static void test_impostor(void)
{
    pid_t a = node_start(0, "i0", "", "");
    pid_t imp = impostor_start();
    int st = test_wait_code(imp, 60);
    CHECK(st == 0, "the impostor: %d of its claims accepted (99: never reached node 0, 98: "
          "could not enter node 1's namespace)", st);
    pid_t b = node_start(1, "i1", "", "");
    int ra = test_wait_code(a, 240), rb = test_wait_code(b, 240);
    if (ra || rb) {
        show_log("i0");
        show_log("i1");
    }
    CHECK(ra == 0 && rb == 0, "after an impostor, nodes exited %d, %d", ra, rb);
    char *log = test_read_file(tmp, "i0.log");
    char want[96], want2[96];
    snprintf(want, sizeof want, "refused a claim to be rank 1 of 2 from %s:", addr[1]);
    snprintf(want2, sizeof want2, "refused %s:", addr[1]);
    CHECK(log && strstr(log, want) && strstr(log, want2) && !strstr(log, "impostor's words"),
          "node 0's log does not name the impostor (%s, %s):\n%s", want, want2,
          log ? log : "(no log)");
    free(log);
}

static void cleanup(void) { net_down(); }

int main(void)
{
    if (geteuid() != 0)
        test_skip("network namespaces need root (ip netns add)");
    if (!comm_gloo_available())
        test_skip("this build has no Gloo (libgloo-dev not found at configure time)");
    if (sh("command -v ip >/dev/null && command -v unshare >/dev/null"))
        test_skip("ip (iproute2) or unshare (util-linux) is not installed");
    if (net_setup())
        test_skip("cannot make network namespaces here (ip netns add failed: no CAP_SYS_ADMIN, "
                  "or no veth support)");
    atexit(cleanup);
    signal(SIGTERM, SIG_DFL);
    char *d = test_tmpdir();
    snprintf(tmp, sizeof tmp, "%s", d);
    free(d);
    /* the job's secret, as a user passes it to every node: a file only its owner reads */
    char secret[1100];
    snprintf(secret, sizeof secret, "%s/job.secret", tmp);
    FILE *f = fopen(secret, "w");
    if (!f || fprintf(f, "test_multinode-%d-%ld\n", (int)getpid(), (long)time(NULL)) < 0 ||
        fclose(f) != 0 || chmod(secret, 0600) != 0)
        test_skip("cannot write the job's secret file");
    setenv("DDPPROF_JOB_SECRET_FILE", secret, 1);
    unsetenv("DDPPROF_JOB_SECRET");
    test_equivalence();
    test_stale_node_dir();
    test_merged_report();
    test_one_clock();
    test_node_killed();
    test_restart();
    test_impostor();
    if (test_failed == 0)
        sh("rm -rf \"%s\"", tmp);
    return test_finish();
}
