/* test_launcher.c — the local launcher (launcher.h) and the worker-side environment
 * reader (dist_env.h).
 *
 * launcher_run runs in a forked child whose stdout and stderr go to temp files, with
 * /bin/sh workers: the environment each rank gets, the "[rank N] " prefixes on both
 * streams, and every failure path: a worker exiting 3, one killed by signal 9, workers
 * that ignore SIGTERM (SIGKILL after the grace), SIGTERM/SIGINT to the launcher, SIGKILL
 * to the launcher (PR_SET_PDEATHSIG).  After each, no worker may remain: each worker's
 * command line carries a marker unique to this test run, and /proc is searched for it.
 * This process is a child subreaper, so orphans would land here and be counted, not lost.
 * dist_env_read is checked on a table of environments.
 *
 * The link (worker_link.h): a worker that says it timed out waiting for a rank that is
 * stopped (SIGSTOP) gets that rank, the collective and the signal named in the summary,
 * and the stopped rank is stopped at once (SIGCONT after SIGTERM); the rendezvous bound
 * names a rank that never joins and one that never gets ready; worker_link_blame reads the
 * collective and the missing ranks out of every comm's words (a real shm timeout among
 * them); the job's progress bar.  The job's store secret: in every worker's environment,
 * fresh per launch unless given. */
#include "launch/dist_env.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/vec.h"
#include "comm/comm.h"
#include "comm/comm_shm.h"
#include "launch/launcher.h"
#include "launch/worker_link.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char *tmp;       /* this run's temp directory */
static char marker[64]; /* "60.<pid>": `sleep 60.<pid>` and every worker's sh -c line */

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup("");
    char *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (VEC_RESERVE(buf, cap, len + 4096))
            abort();
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        if (!n)
            break;
        len += n;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmp, name);
}

/* Live (non-zombie) processes whose command line contains the marker; with kill_them,
 * SIGKILL them (cleanup after a failed check). */
static int count_marked(int kill_them)
{
    int found = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == getpid())
            continue;
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) /* zombies have an empty command line */
            continue;
        if (memmem(buf, (size_t)n, marker, strlen(marker))) {
            found++;
            if (kill_them)
                kill((pid_t)pid, SIGKILL);
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* Reap whatever was orphaned onto us (we are a subreaper). */
static void reap_orphans(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* No marked process may remain: they get up to settle_s to vanish (SIGKILL delivery). */
static void check_none_left(const char *what, double settle_s)
{
    double end = clock_now_s() + settle_s;
    int n;
    while ((n = count_marked(0)) > 0 && clock_now_s() < end)
        clock_sleep_ms(20);
    CHECK(n == 0, "%s: %d worker process(es) still running", what, n);
    if (n)
        count_marked(1);
    clock_sleep_ms(20);
    reap_orphans();
}

/* Start launcher_run(o) in a child with stdout/stderr to out.txt/err.txt in tmp, and
 * stdin from a file with a line in it (the workers must not see it). */
static pid_t launcher_start(const struct launch_opts *o)
{
    char out[512], err[512], in[512];
    path_of(out, sizeof out, "out.txt");
    path_of(err, sizeof err, "err.txt");
    path_of(in, sizeof in, "in.txt");
    FILE *f = fopen(in, "w");
    if (f) {
        fputs("not-devnull\n", f);
        fclose(f);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fi = open(in, O_RDONLY);
        if (fo < 0 || fe < 0 || fi < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0 || dup2(fi, 0) < 0)
            _exit(99);
        close(fo);
        close(fe);
        close(fi);
        int rc = launcher_run(o);
        if (rc < 0)
            fprintf(stderr, "launcher_run: %s\n", error_get());
        exit(rc < 0 ? 98 : rc);
    }
    return pid;
}

static int exit_code(int status)
{
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Run to completion; out/err get the launcher's streams (caller frees). */
static int launcher_run_captured(const struct launch_opts *o, char **out, char **err,
                                 double *elapsed_s)
{
    double t0 = clock_now_s();
    int st = test_wait_status(launcher_start(o), 20.0);
    *elapsed_s = clock_now_s() - t0;
    char p[512];
    path_of(p, sizeof p, "out.txt");
    *out = read_text(p);
    path_of(p, sizeof p, "err.txt");
    *err = read_text(p);
    return st;
}

/* Wait until tmp/pid.<rank> exists for each listed rank (the workers are up). */
static int wait_pid_files(const int *ranks, int n, double limit_s)
{
    double end = clock_now_s() + limit_s;
    for (int i = 0; i < n; i++) {
        char p[512], name[32];
        snprintf(name, sizeof name, "pid.%d", ranks[i]);
        path_of(p, sizeof p, name);
        struct stat sb;
        while (stat(p, &sb) < 0 || sb.st_size == 0) {
            if (clock_now_s() > end)
                return -1;
            clock_sleep_ms(10);
        }
    }
    return 0;
}

static void clear_pid_files(void)
{
    for (int r = 0; r < 8; r++) {
        char p[512], name[32];
        snprintf(name, sizeof name, "pid.%d", r);
        path_of(p, sizeof p, name);
        unlink(p);
    }
}

/* ---------------------------------------------------------------- launcher */

static void check_env_and_output(void)
{
    setenv("WORLD_SIZE", "77", 1); /* the launcher's values must win over the caller's */
    setenv("DDPPROF_TEST_INHERITED", "yes", 1);
    char *const env[] = {"DDPPROF_TEST_EXTRA=hello", "RANK=99", NULL};
    char *const argv[] = {
        "/bin/sh", "-c",
        "echo \"env RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK "
        "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT "
        "EXTRA=$DDPPROF_TEST_EXTRA INH=$DDPPROF_TEST_INHERITED\"; "
        "echo \"to stderr $RANK\" >&2; read x; echo \"stdin=[$x]\"; printf \"partial $RANK\"",
        NULL};
    struct launch_opts o = {.nprocs = 3, .argv = argv, .env = env};
    char *out, *err;
    double dt;
    int st = launcher_run_captured(&o, &out, &err, &dt);
    CHECK(exit_code(st) == 0, "launcher status 0x%x; stderr:\n%s", st, err);

    int port = -1;
    const char *p = strstr(out, "MASTER_PORT=");
    if (p)
        port = atoi(p + strlen("MASTER_PORT="));
    CHECK(port > 0 && port < 65536, "a free port was chosen: %d", port);
    for (int r = 0; r < 3; r++) {
        char want[512];
        snprintf(want, sizeof want,
                 "[rank %d] env RANK=%d WORLD_SIZE=3 LOCAL_RANK=%d LOCAL_WORLD_SIZE=3 "
                 "MASTER_ADDR=127.0.0.1 MASTER_PORT=%d EXTRA=hello INH=yes\n",
                 r, r, r, port);
        CHECK(strstr(out, want), "missing line: %s--- stdout:\n%s", want, out);
        snprintf(want, sizeof want, "[rank %d] stdin=[]\n", r);
        CHECK(strstr(out, want), "stdin is /dev/null: missing %s", want);
        snprintf(want, sizeof want, "[rank %d] partial %d\n", r, r);
        CHECK(strstr(out, want), "unfinished last line ended at exit: missing %s", want);
        snprintf(want, sizeof want, "[rank %d] to stderr %d\n", r, r);
        CHECK(strstr(err, want) && !strstr(out, want), "stderr line on stderr only: %s", want);
    }
    int lines = 0, prefixed = 0;
    for (char *q = out; *q; q = strchr(q, '\n') + 1) {
        lines++;
        prefixed += strncmp(q, "[rank ", 6) == 0;
        if (!strchr(q, '\n'))
            break;
    }
    CHECK(lines == 9 && prefixed == 9, "stdout: %d lines, %d prefixed (want 9, 9)", lines,
          prefixed);
    free(out);
    free(err);
    unsetenv("WORLD_SIZE");
    unsetenv("DDPPROF_TEST_INHERITED");
}

/* The job's store secret (comm/store_auth.h): every worker of a launch has the same, 64 hex
 * digits in DDPPROF_JOB_SECRET, a fresh one per launch, in place of the caller's variable
 * and file; a secret given (every node's agent has one) is the one passed on. */
static void check_secret(void)
{
    setenv("DDPPROF_JOB_SECRET", "the-callers-secret-0123456789", 1);
    setenv("DDPPROF_JOB_SECRET_FILE", "/nonexistent/secret", 1);
    char *const argv[] = {"/bin/sh", "-c", "echo \"S=$DDPPROF_JOB_SECRET F=$DDPPROF_JOB_SECRET_FILE.\"",
                          NULL};
    struct launch_opts o = {.nprocs = 2, .argv = argv};
    char *out[2], *err;
    char secret[2][80] = {"", ""};
    double dt;
    for (int k = 0; k < 2; k++) {
        int st = launcher_run_captured(&o, &out[k], &err, &dt);
        CHECK(exit_code(st) == 0, "launch %d: status 0x%x: %s", k, st, err);
        free(err);
        const char *p = strstr(out[k], "[rank 0] S=");
        if (p)
            sscanf(p + strlen("[rank 0] S="), "%79s", secret[k]);
        char want[200];
        snprintf(want, sizeof want, "[rank 1] S=%s F=.\n", secret[k]);
        CHECK(strlen(secret[k]) == 64 && strspn(secret[k], "0123456789abcdef") == 64 &&
                  strstr(out[k], want),
              "launch %d: no 64-hex secret shared by both ranks in place of the caller's:\n%s",
              k, out[k]);
        free(out[k]);
    }
    CHECK(strcmp(secret[0], secret[1]) != 0, "two launches had the same secret %s", secret[0]);
    o.secret = "given-by-the-agent-0123456789";
    int st = launcher_run_captured(&o, &out[0], &err, &dt);
    CHECK(exit_code(st) == 0 && strstr(out[0], "[rank 0] S=given-by-the-agent-0123456789 F=.\n") &&
              strstr(out[0], "[rank 1] S=given-by-the-agent-0123456789 F=.\n"),
          "a given secret was not passed on: %s", out[0]);
    free(out[0]);
    free(err);
    unsetenv("DDPPROF_JOB_SECRET");
    unsetenv("DDPPROF_JOB_SECRET_FILE");
}

static void check_explicit_address(void)
{
    char *const argv[] = {"/bin/sh", "-c", "echo $MASTER_ADDR:$MASTER_PORT", NULL};
    struct launch_opts o = {
        .nprocs = 1, .argv = argv, .master_addr = "10.1.2.3", .master_port = 12345};
    char *out, *err;
    double dt;
    int st = launcher_run_captured(&o, &out, &err, &dt);
    CHECK(exit_code(st) == 0 && strcmp(out, "[rank 0] 10.1.2.3:12345\n") == 0,
          "status 0x%x, stdout '%s'", st, out);
    free(out);
    free(err);
}

/* Node 1 of 2 with 2 local ranks: torchrun's variables hold the global ranks and the node;
 * the output prefix is the global rank. */
static void check_second_node_env(void)
{
    char *const argv[] = {"/bin/sh", "-c",
                          "echo \"R=$RANK W=$WORLD_SIZE L=$LOCAL_RANK LW=$LOCAL_WORLD_SIZE "
                          "G=$GROUP_RANK GW=$GROUP_WORLD_SIZE RR=$ROLE_RANK "
                          "RC=$TORCHELASTIC_RESTART_COUNT MR=$TORCHELASTIC_MAX_RESTARTS "
                          "ID=$TORCHELASTIC_RUN_ID AS=$TORCHELASTIC_USE_AGENT_STORE\"",
                          NULL};
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1); /* ours say False: rank 0 hosts */
    struct launch_opts o = {.nprocs = 2, .argv = argv, .master_port = 12345, .rank_base = 2,
                            .world = 4, .node_rank = 1, .nnodes = 2, .restart_count = 1,
                            .max_restarts = 3, .run_id = "job7"};
    char *out, *err;
    double dt;
    int st = launcher_run_captured(&o, &out, &err, &dt);
    unsetenv("TORCHELASTIC_USE_AGENT_STORE");
    CHECK(exit_code(st) == 0, "status 0x%x: %s", st, err);
    for (int l = 0; l < 2; l++) {
        char want[256];
        snprintf(want, sizeof want,
                 "[rank %d] R=%d W=4 L=%d LW=2 G=1 GW=2 RR=%d RC=1 MR=3 ID=job7 AS=False\n",
                 2 + l, 2 + l, l, 2 + l);
        CHECK(strstr(out, want), "missing line: %s--- stdout:\n%s", want, out);
    }
    free(out);
    free(err);
}

/* The agent's hooks: should_stop ends healthy workers with its reason; on_failure hears of
 * a failed worker (global rank, status in words) before the others are stopped. */
static int hook_polls;

static int stop_after_polls(void *ctx, char *why, size_t cap)
{
    (void)ctx;
    if (++hook_polls < 3)
        return 0;
    snprintf(why, cap, "node 0 failed (test)");
    return 1;
}

static void print_failure(void *ctx, struct launch_result *f)
{
    (void)ctx;
    printf("hook: rank %d failed, status 0x%x, %s\n", f->failed_rank, f->failed_status,
           f->cause);
    fflush(stdout);
}

static void check_hooks(void)
{
    char *const sleeper[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
    hook_polls = 0;
    struct launch_opts o = {.nprocs = 2, .argv = sleeper, .rank_base = 2, .world = 4,
                            .nnodes = 2, .node_rank = 1, .should_stop = stop_after_polls};
    char *out, *err;
    double dt;
    int st = launcher_run_captured(&o, &out, &err, &dt);
    /* asked every 100 ms: stopped after about 0.3 s, sleep dies of SIGTERM at once */
    CHECK(exit_code(st) == 1 && dt < 3.0 &&
              strstr(err, "ddpprof: node 0 failed (test); stopped the 2 rank(s) on this node"),
          "should_stop: status 0x%x after %.2f s, stderr: %s", st, dt, err);
    free(out);
    free(err);

    char *const failing[] = {"/bin/sh", "-c", "[ $RANK = 3 ] && exit 5; exec sleep 30", NULL};
    struct launch_opts f = {.nprocs = 2, .argv = failing, .rank_base = 2, .world = 4,
                            .nnodes = 2, .node_rank = 1, .on_failure = print_failure};
    st = launcher_run_captured(&f, &out, &err, &dt);
    CHECK(exit_code(st) == 1 && strstr(out, "hook: rank 3 failed, status 0x500, exit status 5") &&
              strstr(err, "ddpprof: rank 3 failed (exit status 5); stopped the other 1 rank(s) "
                          "on this node"),
          "on_failure: status 0x%x, stdout: %s, stderr: %s", st, out, err);
    free(out);
    free(err);
}

static void check_long_line(void)
{
    /* 100000 bytes without a newline: split at the 64 KiB line buffer, then ended at exit */
    char *const argv[] = {"/bin/sh", "-c",
                          "i=0; while [ $i -lt 1000 ]; do printf "
                          "%0100d 0; i=$((i+1)); done",
                          NULL};
    struct launch_opts o = {.nprocs = 1, .argv = argv};
    char *out, *err;
    double dt;
    int st = launcher_run_captured(&o, &out, &err, &dt);
    size_t len = strlen(out), prefix = strlen("[rank 0] ");
    CHECK(exit_code(st) == 0 && len == 100000 + 2 * (prefix + 1) &&
              strncmp(out, "[rank 0] 0", 10) == 0 && out[len - 1] == '\n',
          "long line: status 0x%x, %zu bytes", st, len);
    free(out);
    free(err);
}

/* A worker script: rank `bad` runs `bad_cmd` after the others are up; the others write
 * their pid and exec a long sleep carrying the marker (`pre` runs before, e.g. a trap). */
static void script(char *buf, size_t cap, int bad, const char *bad_cmd, const char *pre)
{
    snprintf(buf, cap,
             "if [ \"$RANK\" = %d ]; then %s; fi; %s echo $$ > %s/pid.$RANK; exec sleep %s", bad,
             bad_cmd, pre, tmp, marker);
}

static void check_worker_fails(const char *what, int nprocs, int bad, const char *bad_cmd,
                               const char *pre, int grace_ms, const char *want_line, double min_s,
                               double max_s)
{
    char cmd[1024];
    script(cmd, sizeof cmd, bad, bad_cmd, pre);
    char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct launch_opts o = {.nprocs = nprocs, .argv = argv, .grace_ms = grace_ms};
    clear_pid_files();
    char *out, *err;
    double dt;
    int st = launcher_run_captured(&o, &out, &err, &dt);
    CHECK(exit_code(st) == 1, "%s: launcher status 0x%x (want exit 1); stderr:\n%s", what, st, err);
    CHECK(dt < max_s && dt >= min_s, "%s: returned after %.2f s (want %.1f..%.1f)", what, dt, min_s,
          max_s);
    CHECK(strstr(err, want_line), "%s: stderr lacks '%s':\n%s", what, want_line, err);
    check_none_left(what, 0.5);
    free(out);
    free(err);
}

/* A worker that forked a child of its own (held in `wait`): stopping the worker must stop
 * that child too (the worker's process group), or it would outlive the run. */
static void check_grandchildren(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "if [ \"$RANK\" = 0 ]; then sleep 0.3; exit 5; fi; sleep %s & echo $$ > %s/pid.$RANK; "
             "wait",
             marker, tmp);
    char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct launch_opts o = {.nprocs = 3, .argv = argv};
    clear_pid_files();
    char *out, *err;
    double dt;
    int st = launcher_run_captured(&o, &out, &err, &dt);
    CHECK(exit_code(st) == 1 && dt < 2.0 && strstr(err, "rank 0 failed (exit status 5)"),
          "grandchildren: status 0x%x after %.2f s; stderr:\n%s", st, dt, err);
    check_none_left("grandchildren", 0.5);
    free(out);
    free(err);
}

static void check_launcher_signalled(int sig, int want_code)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "echo $$ > %s/pid.$RANK; exec sleep %s", tmp, marker);
    char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct launch_opts o = {.nprocs = 3, .argv = argv};
    clear_pid_files();
    pid_t pid = launcher_start(&o);
    static const int ranks[] = {0, 1, 2};
    CHECK(wait_pid_files(ranks, 3, 5.0) == 0, "workers did not start within 5 s");
    double t0 = clock_now_s();
    kill(pid, sig);
    int st = test_wait_status(pid, 10.0);
    double dt = clock_now_s() - t0;
    CHECK(exit_code(st) == want_code && dt < 5.0, "signal %d: launcher status 0x%x after %.2f s",
          sig, st, dt);
    char p[512];
    path_of(p, sizeof p, "err.txt");
    char *err = read_text(p);
    CHECK(strstr(err, sig == SIGINT ? "interrupted by SIGINT; stopped 3 rank(s)"
                                    : "interrupted by SIGTERM; stopped 3 rank(s)"),
          "stderr: %s", err);
    free(err);
    check_none_left(sig == SIGINT ? "SIGINT to launcher" : "SIGTERM to launcher", 0.5);
}

/* SIGKILL to the launcher: the workers die by PR_SET_PDEATHSIG; being the subreaper we
 * inherit and reap them, and see how they died. */
static void check_launcher_killed(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "echo $$ > %s/pid.$RANK; exec sleep %s", tmp, marker);
    char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct launch_opts o = {.nprocs = 2, .argv = argv};
    clear_pid_files();
    pid_t pid = launcher_start(&o);
    static const int ranks[] = {0, 1};
    CHECK(wait_pid_files(ranks, 2, 5.0) == 0, "workers did not start within 5 s");
    pid_t workers[2];
    for (int r = 0; r < 2; r++) {
        char p[512], name[32];
        snprintf(name, sizeof name, "pid.%d", r);
        path_of(p, sizeof p, name);
        char *text = read_text(p);
        workers[r] = (pid_t)atoi(text);
        free(text);
    }
    kill(pid, SIGKILL);
    int st = test_wait_status(pid, 5.0);
    CHECK(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "launcher status 0x%x", st);
    for (int r = 0; r < 2; r++) {
        int wst = -1;
        double end = clock_now_s() + 3.0;
        pid_t got = 0;
        while ((got = waitpid(workers[r], &wst, WNOHANG)) == 0 && clock_now_s() < end)
            clock_sleep_ms(10);
        CHECK(got == workers[r] && WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL,
              "orphaned rank %d (pid %d): waitpid %d, status 0x%x (want killed by 9)", r,
              (int)workers[r], (int)got, wst);
    }
    check_none_left("SIGKILL to launcher", 0.5);
}

static void check_exec_failure(void)
{
    char *const argv[] = {"/nonexistent/ddpprof-worker", "--flag", NULL};
    struct launch_opts o = {.nprocs = 2, .argv = argv};
    char *out, *err;
    double dt;
    int st = launcher_run_captured(&o, &out, &err, &dt);
    CHECK(exit_code(st) == 1 && dt < 5.0, "exec failure: status 0x%x after %.2f s", st, dt);
    CHECK(strstr(err, "] ddpprof: cannot execute /nonexistent/ddpprof-worker: No such file") &&
              strstr(err, "failed (exit status 127)"),
          "exec failure: stderr:\n%s", err);
    free(out);
    free(err);
}

static void check_bad_options(void)
{
    char *const argv[] = {"/bin/true", NULL};
    struct launch_opts o = {.nprocs = 0, .argv = argv};
    CHECK(launcher_run(&o) == -1 && strstr(error_get(), "at least 1 worker"), "nprocs 0: %s",
          error_get());
    int port = launcher_free_port();
    CHECK(port > 0 && port < 65536, "free port %d: %s", port, error_get());
}

/* ---------------------------------------------------------------- dist_env */

static const char *const all_vars[] = {"RANK",
                                       "WORLD_SIZE",
                                       "LOCAL_RANK",
                                       "LOCAL_WORLD_SIZE",
                                       "MASTER_ADDR",
                                       "MASTER_PORT",
                                       "OMPI_COMM_WORLD_RANK",
                                       "OMPI_COMM_WORLD_SIZE",
                                       "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "OMPI_COMM_WORLD_LOCAL_SIZE",
                                       "SLURM_PROCID",
                                       "SLURM_NTASKS",
                                       "SLURM_LOCALID",
                                       "SLURM_NTASKS_PER_NODE"};

struct env_case {
    const char *vars;  /* "NAME=value NAME=value" */
    const char *error; /* substring of the error, or NULL for success */
    int rank, world, local_rank, local_world, port;
    const char *addr, *source;
};

static const struct env_case env_cases[] = {
    {"", NULL, 0, 1, 0, 1, 29500, "127.0.0.1", "default"},
    {"RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=node1 MASTER_PORT=1234", NULL,
     2, 4, 0, 2, 1234, "node1", "torchrun"},
    {"RANK=1 WORLD_SIZE=2", NULL, 1, 2, 1, 2, 29500, "127.0.0.1", "torchrun"},
    {"OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=1 "
     "OMPI_COMM_WORLD_LOCAL_SIZE=2 MASTER_ADDR=10.0.0.1",
     NULL, 3, 4, 1, 2, 29500, "10.0.0.1", "openmpi"},
    {"SLURM_PROCID=5 SLURM_NTASKS=8 SLURM_LOCALID=1 SLURM_NTASKS_PER_NODE=2(x4) MASTER_PORT=4000",
     NULL, 5, 8, 1, 8, 4000, "127.0.0.1", "slurm"},
    {"SLURM_PROCID=5 SLURM_NTASKS=8 SLURM_LOCALID=1 SLURM_NTASKS_PER_NODE=4", NULL, 5, 8, 1, 4,
     29500, "127.0.0.1", "slurm"},
    {"RANK=0 WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2", NULL, 0, 1, 0, 1, 29500,
     "127.0.0.1", "torchrun"},
    {"OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=1", NULL, 1, 2, 1,
     2, 29500, "127.0.0.1", "openmpi"},
    {"RANK=abc WORLD_SIZE=2", "RANK='abc'", 0, 0, 0, 0, 0, NULL, NULL},
    {"RANK=-1 WORLD_SIZE=2", "RANK='-1'", 0, 0, 0, 0, 0, NULL, NULL},
    {"RANK=1x WORLD_SIZE=2", "RANK='1x'", 0, 0, 0, 0, 0, NULL, NULL},
    {"RANK=2 WORLD_SIZE=2", "RANK=2 is not below WORLD_SIZE=2", 0, 0, 0, 0, 0, NULL, NULL},
    {"RANK=0 WORLD_SIZE=0", "WORLD_SIZE=0 must be at least 1", 0, 0, 0, 0, 0, NULL, NULL},
    {"RANK=0 WORLD_SIZE=99999999999", "WORLD_SIZE='99999999999'", 0, 0, 0, 0, 0, NULL, NULL},
    {"RANK=1", "RANK is set but WORLD_SIZE is not", 0, 0, 0, 0, 0, NULL, NULL},
    {"WORLD_SIZE=2", "WORLD_SIZE is set but RANK is not", 0, 0, 0, 0, 0, NULL, NULL},
    {"RANK=0 WORLD_SIZE=2 LOCAL_RANK=2 LOCAL_WORLD_SIZE=2", "LOCAL_RANK=2", 0, 0, 0, 0, 0, NULL,
     NULL},
    {"RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=3", "LOCAL_WORLD_SIZE=3", 0, 0, 0, 0, 0, NULL, NULL},
    {"RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2(x1)", "LOCAL_WORLD_SIZE='2(x1)'", 0, 0, 0, 0, 0, NULL,
     NULL},
    {"RANK=0 WORLD_SIZE=2 MASTER_PORT=70000", "MASTER_PORT='70000'", 0, 0, 0, 0, 0, NULL, NULL},
    {"MASTER_PORT=http", "MASTER_PORT='http'", 0, 0, 0, 0, 0, NULL, NULL},
    {"OMPI_COMM_WORLD_RANK=4 OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=4", 0, 0, 0, 0, 0, NULL,
     NULL},
    {"SLURM_PROCID=0 SLURM_NTASKS=x", "SLURM_NTASKS='x'", 0, 0, 0, 0, 0, NULL, NULL},
};

static void check_dist_env(void)
{
    for (size_t c = 0; c < sizeof env_cases / sizeof env_cases[0]; c++) {
        const struct env_case *k = &env_cases[c];
        for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
            unsetenv(all_vars[i]);
        char vars[512];
        snprintf(vars, sizeof vars, "%s", k->vars);
        for (char *save, *tok = strtok_r(vars, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(tok, '=');
            *eq = '\0';
            setenv(tok, eq + 1, 1);
        }
        struct dist_env e;
        error_clear();
        int rc = dist_env_read(&e);
        if (k->error) {
            CHECK(rc == -1 && strstr(error_get(), k->error) &&
                      strncmp(error_get(), "dist_env: ", 10) == 0,
                  "[%s]: rc %d, error '%s' (want '%s')", k->vars, rc, error_get(), k->error);
        } else {
            CHECK(rc == 0 && e.rank == k->rank && e.world == k->world &&
                      e.local_rank == k->local_rank && e.local_world == k->local_world &&
                      e.master_port == k->port && strcmp(e.master_addr, k->addr) == 0 &&
                      strcmp(e.source, k->source) == 0,
                  "[%s]: rc %d (%s) -> rank %d/%d local %d/%d %s:%d from %s", k->vars, rc,
                  error_get(), e.rank, e.world, e.local_rank, e.local_world, e.master_addr,
                  e.master_port, e.source);
        }
    }
    for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
        unsetenv(all_vars[i]);
}

/* rank 1 stops itself; rank 0 then says it timed out waiting for rank 1 and exits 1 */
static void check_culprit(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "if [ $RANK = 1 ]; then kill -STOP $$; exec sleep %s; fi; sleep 0.5; "
             "printf 'failed epoch 1 step 3: comm shm: rank 0 timed out after 3.0 s in "
             "all-gather #7 (count 3): rank 1 did not arrive (did a rank skip a collective or "
             "die?)' >&3; exit 1",
             marker);
    char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct launch_opts o = {.nprocs = 2, .argv = argv};
    char *out, *err;
    double dt;
    int st = launcher_run_captured(&o, &out, &err, &dt);
    /* the stopped rank goes with the SIGTERM (and SIGCONT): well under the 3 s grace */
    CHECK(exit_code(st) == 1 && dt < 2.5 &&
              strstr(err, "ddpprof: rank 1 did not arrive in all-gather #7 (stopped by "
                          "SIGSTOP); rank 0 failed waiting for it (exit status 1); stopped the "
                          "other 1 rank(s)\n"),
          "culprit: status 0x%x after %.2f s, stderr:\n%s", st, dt, err);
    check_none_left("culprit", 0.5);
    free(out);
    free(err);

    /* rank 1 exits first, having lost rank 0's store; rank 0 fails with its own error just
     * after: rank 0 is named */
    snprintf(cmd, sizeof cmd,
             "if [ $RANK = 1 ]; then sleep 0.3; printf \"failed store: lost the connection to "
             "rank 0's store at 127.0.0.1:1 during get of key 'x' (rank 1 of 2; did rank 0 "
             "exit?)\" >&3; exit 1; fi; sleep 0.4; exit 3");
    o.argv = argv;
    st = launcher_run_captured(&o, &out, &err, &dt);
    CHECK(exit_code(st) == 1 && strstr(err, "ddpprof: rank 0 failed (exit status 3)\n"),
          "the first cause: status 0x%x, stderr:\n%s", st, err);
    check_none_left("first cause", 0.5);
    free(out);
    free(err);
}

/* rendezvous_ms: rank 1 never joins / joins but is never ready */
static void check_rendezvous_bound(void)
{
    static const char *const body[2] = {
        "if [ $RANK = 1 ]; then exec sleep %s; fi; printf joining >&3; printf ready >&3; "
        "exec sleep %s",
        "printf joining >&3; if [ $RANK = 1 ]; then exec sleep %s; fi; printf ready >&3; "
        "exec sleep %s"};
    static const char *const want[2] = {
        "ddpprof: rank 1 did not join the rendezvous within 0.5 s (--timeout) of the first "
        "rank; stopped the 2 rank(s)\n",
        "ddpprof: rank 1 did not finish the rendezvous within 0.5 s (--timeout) of the last "
        "rank joining; stopped the 2 rank(s)\n"};
    for (int k = 0; k < 2; k++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, body[k], marker, marker);
        char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
        struct launch_opts o = {.nprocs = 2, .argv = argv, .rendezvous_ms = 500};
        char *out, *err;
        double dt;
        int st = launcher_run_captured(&o, &out, &err, &dt);
        CHECK(exit_code(st) == 1 && dt >= 0.45 && dt < 3.0 && strstr(err, want[k]),
              "rendezvous %d: status 0x%x after %.2f s, stderr:\n%s", k, st, dt, err);
        check_none_left("rendezvous", 0.5);
        free(out);
        free(err);
    }
}

/* A real shm timeout: rank 1 attached but never calls the all-reduce rank 0 waits in. */
struct shm_rank {
    int rank;
    char segment[64];
    char error[1024];
    int rc;
};

static void *shm_rank_main(void *arg)
{
    struct shm_rank *r = arg;
    struct comm *c = comm_shm_create(r->rank, 2, r->segment, 1 << 16, 300);
    if (!c) {
        snprintf(r->error, sizeof r->error, "%s", error_get());
        r->rc = -2;
        return NULL;
    }
    float x[4] = {1, 2, 3, 4};
    if (r->rank == 0) {
        r->rc = comm_allreduce(c, x, 4, COMM_F32);
        snprintf(r->error, sizeof r->error, "%s", error_get());
    } else {
        clock_sleep_ms(1000); /* rank 0 gives up after 300 ms */
    }
    c->destroy(c);
    return NULL;
}

static void check_blame(void)
{
    static const struct {
        const char *message, *collective;
        int ranks[3], n, gone;
    } cases[] = {
        {"epoch 1 step 228: SyncBatchNorm layer2.1.weight forward: comm shm: rank 0 timed out "
         "after 3.0 s in all-gather #1607 (count 65): rank 1 did not arrive (did a rank skip a "
         "collective or die?)",
         "all-gather #1607", {1}, 1, 0},
        {"comm shm: rank 0 timed out after 3.0 s in all-reduce #12 (count 5): ranks 2, 3 did "
         "not arrive (did a rank skip a collective or die?)",
         "all-reduce #12", {2, 3}, 2, 0},
        {"comm shm: rank 0 in broadcast #3 (count 10): rank 2 (pid 4242) died (did it crash or "
         "get killed?)",
         "broadcast #3", {2}, 1, 1},
        {"epoch 1 step 4: comm shm: rank 1 in all-reduce #5 (count 3): rank 0 gave up on the "
         "communicator first: comm shm: rank 0 timed out",
         "all-reduce #5", {0}, 1, 1},
        {"rendezvous at 127.0.0.1:4000: store: lost the connection to rank 0's store at "
         "127.0.0.1:4000 during get of key 'shm_name' (rank 1 of 2; did rank 0 exit?)",
         "", {0}, 1, 1},
        {"comm gloo: rank 0 of 4: all-reduce #818 (32 f32) failed: Connection closed by peer "
         "[10.0.0.2]:41234; the peer is rank 3 (host 10.0.0.2) (a peer rank died, gave up, or "
         "is on another collective; timeout 3.0 s)",
         "all-reduce #818", {3}, 1, 0},
        {"comm gloo: rank 0 of 4: barrier #2 failed: Timed out [10.0.0.2]:1; the peer is one of "
         "ranks 2, 3 (host 10.0.0.2) (a peer rank died, gave up, or is on another collective; "
         "timeout 3.0 s)",
         "barrier #2", {2, 3}, 2, 0},
        {"comm gloo: rank 0 of 2: all-reduce #958 (32 f32) failed: Timed out waiting 3000ms for "
         "recv operation to complete (a peer rank died, gave up, or is on another collective; "
         "timeout 3.0 s)",
         "all-reduce #958", {0}, 0, 0},
        {"rank 0: nccl all-reduce #12 (100 elements) did not complete within 3000 ms",
         "all-reduce #12", {0}, 0, 0},
        {"--resume: cannot read /x: No such file or directory", "", {0}, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct worker_blame b;
        int found = worker_link_blame(cases[i].message, &b);
        int same = found == (cases[i].collective[0] || cases[i].n) && b.nranks == cases[i].n &&
                   b.gone == cases[i].gone && strcmp(b.collective, cases[i].collective) == 0;
        for (int k = 0; same && k < b.nranks; k++)
            same = b.ranks[k] == cases[i].ranks[k];
        CHECK(same, "blame %zu: found %d, '%s', %d rank(s) (first %d) from: %s", i, found,
              b.collective, b.nranks, b.nranks ? b.ranks[0] : -1, cases[i].message);
    }
    /* the words of the shm comm itself, so a change of them cannot go unnoticed */
    struct shm_rank r[2] = {{.rank = 0}, {.rank = 1}};
    pthread_t t[2];
    for (int k = 0; k < 2; k++) {
        snprintf(r[k].segment, sizeof r[k].segment, "/ddpprof-test-blame-%d", (int)getpid());
        pthread_create(&t[k], NULL, shm_rank_main, &r[k]);
    }
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    struct worker_blame b;
    CHECK(r[0].rc == -1 && worker_link_blame(r[0].error, &b) && b.nranks == 1 &&
              b.ranks[0] == 1 && strncmp(b.collective, "all-reduce #", 12) == 0,
          "a real shm timeout (rc %d): '%s' gives collective '%s', %d rank(s)", r[0].rc,
          r[0].error, b.collective, b.nranks);

    struct worker_msg m;
    char msg[] = "progress 2 3 31200 60000 0.61";
    CHECK(worker_link_parse(msg, strlen(msg), &m) == WORKER_MSG_PROGRESS &&
              m.progress.epoch == 2 && m.progress.total == 60000,
          "progress message: kind %d", (int)m.kind);
    char bar[256];
    launcher_format_bar(bar, sizeof bar, &m.progress);
    CHECK(strcmp(bar, "  epoch 2/3 [###############               ]  52% 31200/60000 images, "
                      "loss 0.6100") == 0,
          "bar: '%s'", bar);
}

int main(void)
{
    tmp = test_tmpdir();
    if (!tmp)
        test_skip("no temp directory");
    snprintf(marker, sizeof marker, "60.%d", (int)getpid());
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    check_dist_env(); /* first: the launcher checks change the environment */
    check_bad_options();
    check_env_and_output();
    check_secret();
    check_explicit_address();
    check_second_node_env();
    check_hooks();
    check_long_line();
    /* sleeping workers die of the SIGTERM at once: well under the 3 s grace (2 s bound
     * leaves slack for a loaded machine), at least the 0.3 s before the failure */
    check_worker_fails("exit 3", 3, 1, "sleep 0.3; exit 3", "", 0,
                       "ddpprof: rank 1 failed (exit status 3); stopped the other 2 rank(s)", 0.25,
                       2.0);
    check_worker_fails("signal 9", 2, 0, "sleep 0.3; kill -9 $$", "", 0,
                       "ddpprof: rank 0 failed (killed by signal 9: Killed); stopped the other "
                       "1 rank(s)",
                       0.25, 2.0);
    /* workers that ignore SIGTERM need the SIGKILL after the default 3 s grace: at least
     * 0.3 + 3 s, and the whole stop must stay under 5 s */
    check_worker_fails("SIGTERM ignored", 3, 2, "sleep 0.3; exit 3", "trap '' TERM;", 0,
                       "ddpprof: rank 2 failed (exit status 3); stopped the other 2 rank(s)", 3.2,
                       5.0);
    /* a shorter grace is honoured */
    check_worker_fails("grace 500 ms", 2, 0, "sleep 0.3; exit 4", "trap '' TERM;", 500,
                       "ddpprof: rank 0 failed (exit status 4); stopped the other 1 rank(s)", 0.7,
                       2.5);
    check_exec_failure();
    check_grandchildren();
    check_launcher_signalled(SIGTERM, 143);
    check_launcher_signalled(SIGINT, 130);
    check_launcher_killed();
    check_culprit();
    check_rendezvous_bound();
    check_blame();

    check_none_left("end", 0.0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    free(tmp);
    return test_finish();
}
