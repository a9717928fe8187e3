/* main.c — the ddpprof command: the main job, train, worker and report, and the exit code.
 *
 * Library code returns status codes with a one-line message (error.h); this is the only
 * place that prints it and exits. */
#include "backend/cpu_isa.h"
#include "cli.h"
#include "launch/dist_env.h"
#include "common/error.h"
#include "common/printable.h"
#include "common/sha256.h"
#include "device.h"
#include "launch/agent.h"
#include "launch/launcher.h"
#include "launch/worker_link.h"
#include "report/report.h"
#include "probes/runlog.h"
#include "train.h"
#include "tune.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fail(void)
{
    fprintf(stderr, "ddpprof: %s\n", error_get());
    return 1;
}

/* DDPPROF_WORKER_WRAPPER="prog args..." (scripts/nsys-profile sets it): every training
 * process (each DDP worker, the main job's baseline) is started as `prog args... ddpprof
 * ...`.  prog must be a path.  Returns a NULL-terminated argv of the wrapper's words
 * followed by argv (caller frees the array and *words), or argv itself when unset. */
static char **wrap_argv(char **argv, char **words)
{
    const char *w = getenv("DDPPROF_WORKER_WRAPPER");
    *words = NULL;
    if (!w || !*w)
        return argv;
    int n = 0, k = 0;
    while (argv[n])
        n++;
    char *copy = strdup(w);
    char **out = calloc((size_t)n + strlen(w) / 2 + 2, sizeof *out);
    if (!copy || !out) {
        free(copy);
        free(out);
        return argv;
    }
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
        out[k++] = t;
    for (int i = 0; i < n; i++)
        out[k++] = argv[i];
    *words = copy;
    return out;
}

/* results/<date>-<time>-<model> (a name: runlog_fresh_dir makes it the job's own) */
static void default_out_dir(char *buf, size_t cap, const char *model)
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(buf, cap, "results/%s-%s", stamp, model);
}

/* this program's own path (to re-exec it); 0 or -1 (error_set) */
static int self_path(char *buf, size_t cap)
{
    ssize_t len = readlink("/proc/self/exe", buf, cap - 1);
    if (len <= 0)
        return error_set("cannot find this program's path in /proc/self/exe");
    buf[len] = '\0';
    return 0;
}

/* One attempt of this node's workers: re-exec ourselves as its ranks under the launcher,
 * hooked to the node agent.  Their command line is train's own, argv[2..argc), word for word
 * (cli_child_argv: each worker parses the user's text, as train did, rather than options
 * printed back from train's parse), less what the launcher decides: the options a worker
 * does not take (the node options), the run directory train claimed and the checkpoint this
 * attempt resumes from (at->resume), said after it, and the rendezvous, which is in the
 * workers' environment (MASTER_ADDR, MASTER_PORT: this attempt's worker store; on the
 * command line it would win).  The launcher's status (0, 1, 128+signal) or -1 (error_set). */
static int launch_attempt(const struct cli *c, int argc, char **argv, struct agent *agent,
                          const struct agent_attempt *at, struct launch_result *res)
{
    char self[PATH_MAX];
    if (self_path(self, sizeof self))
        return -1;
    static const char *const own[] = {"--out", "--resume", "--master-addr", "--master-port",
                                      NULL};
    const char *add[] = {"--out", c->train.run.out_dir, at->resume[0] ? "--resume" : NULL,
                         at->resume, NULL};
    char **wargv = cli_child_argv(CLI_TRAIN, argc, argv, 2, CLI_WORKER, own, add, self);
    if (!wargv)
        return -1;
    char *words;
    char **run = wrap_argv(wargv, &words);
    /* rank 0 records why the earlier attempts failed in meta.csv */
    char *causes = NULL;
    if (asprintf(&causes, "DDPPROF_RESTART_CAUSES=%s", at->causes) < 0)
        causes = NULL;
    char *env[] = {causes, NULL};
    int nproc = device_ranks(&c->train.dev);
    struct launch_opts lo = {
        .nprocs = nproc,
        .master_addr = c->master_addr,
        .master_port = at->worker_port,
        .argv = run,
        .env = causes ? env : NULL,
        .rendezvous_ms = c->train.dev.timeout_ms,
        .progress = !c->train.run.quiet,
        .flight_dir = c->train.run.out_dir,
        .rank_base = c->node_rank * nproc,
        .world = cli_world(c),
        .node_rank = c->node_rank,
        .nnodes = c->nnodes,
        .restart_count = at->attempt,
        .max_restarts = c->max_restarts,
        .run_id = at->run_id,
        .secret = at->secret,
        .on_failure = agent_on_failure,
        .on_stop_state = agent_on_stop_state,
        .should_stop = c->nnodes > 1 ? agent_should_stop : NULL,
        .hook_ctx = agent,
        .result = res,
    };
    int rc = launcher_run(&lo);
    free(causes);
    if (run != wargv)
        free(run);
    free(words);
    cli_argv_free(wargv);
    return rc;
}

/* `ddpprof train --cpu N --mode ddp [--nnodes N --node-rank R] [--max-restarts K]` (its
 * command line argv[2..argc), which c holds): this node's ranks, attempt after attempt:
 * join the other nodes (agent.h), run the workers, and when a rank on any node failed,
 * restart every node's ranks from the latest checkpoint while restarts are left.  The exit
 * status: 0, 1 (failed), 128+signal. */
static int train_nodes(const struct cli *c, int argc, char **argv)
{
    struct agent_opts ao = {
        .nnodes = c->nnodes,
        .node_rank = c->node_rank,
        .nproc = device_ranks(&c->train.dev),
        .master_addr = c->master_addr,
        .master_port = c->nnodes > 1 && !c->master_port ? DIST_ENV_DEFAULT_PORT : c->master_port,
        .timeout_ms = c->train.dev.timeout_ms,
        .out_dir = c->train.run.out_dir,
        .resume = c->train.run.resume_path,
    };
    struct agent *agent = agent_create(&ao);
    if (!agent)
        return fail();
    int rc = 1;
    for (int attempt = 0;; attempt++) {
        struct agent_attempt at;
        struct launch_result res;
        if (agent_join(agent, attempt, &at)) {
            rc = fail();
            break;
        }
        if (attempt > 0)
            fprintf(stderr, "ddpprof: restart %d of %d: every node's ranks start again%s%s\n",
                    attempt, c->max_restarts, at.resume[0] ? " from " : " from scratch",
                    at.resume);
        rc = launch_attempt(c, argc, argv, agent, &at, &res);
        mem_wipe(at.secret, sizeof at.secret);
        if (rc < 0) {
            rc = fail();
            break;
        }
        if (rc == 0) {
            if (agent_finish(agent)) {
                fprintf(stderr, "ddpprof: this node's ranks finished, but %s\n", error_get());
                rc = 1;
            }
            break;
        }
        if (rc > 1) /* interrupted: no restart */
            break;
        char cause[512];
        int restartable = agent_cause(agent, &res, cause, sizeof cause);
        if (!restartable || attempt >= c->max_restarts) {
            if (c->nnodes > 1 || c->max_restarts > 0)
                fprintf(stderr, "ddpprof: the job failed: %s%s\n", cause,
                        !restartable ? "" : c->max_restarts ? "; no restarts left" : "");
            break;
        }
        if (agent_archive(agent, attempt)) {
            rc = fail();
            break;
        }
        fprintf(stderr, "ddpprof: %s; restarting (the failed attempt's files are in "
                "%s/attempt-%d)\n", cause, c->train.run.out_dir, attempt);
    }
    agent_destroy(agent);
    return rc;
}

/* More CPU ranks on this node than it has cores only thrash: refused before anything
 * starts, unless --oversubscribe (launcher_check_fit).  0 or -1 (error_set). */
static int check_fit(const struct cli *c, enum cli_command cmd)
{
    if (c->train.dev.ngpus)
        return 0; /* one rank per GPU, whose count device_check bounds */
    char what[64];
    int n = device_ranks(&c->train.dev);
    snprintf(what, sizeof what, "%s %d",
             cli_is_given(c, "--nproc-per-node", cmd) ? "--nproc-per-node" : "--cpu", n);
    return launcher_check_fit(n, c->oversubscribe, what);
}

/* --threads T for each of `ranks` ranks on this node: more threads than its cores only
 * thrash, refused like too many --cpu ranks unless --oversubscribe.  0 or -1 (error_set). */
static int check_threads(const struct cli *c, enum cli_command cmd, int ranks)
{
    if (!cli_is_given(c, "--threads", cmd) || c->oversubscribe)
        return 0;
    cpu_set_t allowed;
    long cores = sched_getaffinity(0, sizeof allowed, &allowed) == 0
                     ? CPU_COUNT(&allowed)
                     : sysconf(_SC_NPROCESSORS_ONLN);
    long long want = (long long)ranks * c->train.dev.threads;
    if (cores < 1 || want <= cores)
        return 0;
    long most = cores / ranks > 0 ? cores / ranks : 1;
    return error_set("--threads %d: %d rank%s x %d threads on %ld core%s would only thrash: "
                     "give --threads %ld at most, or add --oversubscribe to run them anyway",
                     c->train.dev.threads, ranks, ranks == 1 ? "" : "s", c->train.dev.threads,
                     cores, cores == 1 ? "" : "s", most);
}

/* Whether everything printed on stdout reached it (a full disk, a closed pipe, /dev/full
 * fail only at the flush): 0, or -1 (error_set naming the cause). */
static int check_stdout(const char *what)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    return error_set("writing %s to stdout failed (%s); the files in the run directory are "
                     "whole: read them there, or give stdout room",
                     what, errno ? strerror(errno) : "a full disk or device, or a closed pipe?");
}

/* "ddpprof: run written to DIR; its tables: ddpprof report DIR" on stdout (DIR quoted for
 * a shell where it needs it), after a run that succeeded */
static void say_run_written(const char *raw)
{
    char q[4200], dir[4200];
    text_printable(raw, (size_t)-1, dir, sizeof dir); /* a path is shown, not obeyed */
    size_t at = 0;
    const int plain = dir[0] && strspn(dir, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
                                            "vwxyz0123456789/._-+,:@%=") == strlen(dir);
    if (!plain)
        q[at++] = '\'';
    for (const char *p = dir; *p && at + 6 < sizeof q; p++) {
        if (*p == '\'' && !plain) {
            memcpy(q + at, "'\\''", 4);
            at += 4;
        } else {
            q[at++] = *p;
        }
    }
    if (!plain)
        q[at++] = '\'';
    q[at] = '\0';
    printf("ddpprof: run written to %s; its tables: ddpprof report %s\n", q, q);
    fflush(stdout);
}

/* The job's run directory, claimed before anything is written or started (runlog_claim:
 * a second job given the same --out is refused while this one runs): *dir, or when it is
 * NULL a fresh default one of this job's own (into buf, then *dir).  The claim's
 * descriptor, held until the process ends, or -1 (error_set). */
static int claim_out(const char **dir, char *buf, size_t cap, const char *model, int node_rank)
{
    if (!*dir) {
        char base[4096];
        default_out_dir(base, sizeof base, model);
        if (runlog_fresh_dir(buf, cap, base))
            return -1;
        *dir = buf;
    }
    return runlog_claim(*dir, node_rank);
}

static int cmd_train(int argc, char **argv)
{
    struct cli c;
    if (cli_parse(&c, CLI_TRAIN, argc, argv, 2))
        return fail();
    if (c.help)
        return cli_usage(stdout), 0;
    if (device_check(&c.train.dev) || (c.train.mode == TRAIN_DDP && check_fit(&c, CLI_TRAIN)) ||
        check_threads(&c, CLI_TRAIN, c.train.mode == TRAIN_DDP ? device_ranks(&c.train.dev) : 1) ||
        train_check_inputs(&c.train))
        return fail();
    char out[4096];
    if (claim_out(&c.train.run.out_dir, out, sizeof out, c.train.model, c.node_rank) < 0)
        return fail();
    if (c.train.mode == TRAIN_DDP) {
        int rc = train_nodes(&c, argc, argv);
        if (rc == 0 && !c.train.run.quiet)
            say_run_written(c.train.run.out_dir);
        return rc;
    }
    if (train_run(&c.train, NULL))
        return fail();
    if (!c.train.run.quiet)
        say_run_written(c.train.run.out_dir);
    return 0;
}

/* The main job owns its runs: a SIGINT or SIGTERM sent to it alone (kill, a batch
 * scheduler) is passed on to the run in progress, which stops its ranks and exits; one from
 * the terminal (^C, si_code SI_KERNEL) reached the run already, as it is in the same
 * foreground process group.  The run dies with the main job (PR_SET_PDEATHSIG: SIGTERM, so
 * that a `train` launcher still stops its ranks), also after kill -9. */
static volatile sig_atomic_t main_child;  /* the run in progress, 0 between runs */
static volatile sig_atomic_t main_signal; /* the first SIGINT or SIGTERM the main job got */

static void main_on_signal(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    if (!main_signal)
        main_signal = sig;
    pid_t child = (pid_t)main_child;
    if (child > 0 && info->si_code != SI_KERNEL)
        kill(child, sig);
}

/* Install (on) or remove main_on_signal for SIGINT and SIGTERM. */
static void main_own_signals(int on)
{
    static const int sigs[] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        struct sigaction sa = {.sa_flags = SA_RESTART | (on ? SA_SIGINFO : 0)};
        if (on)
            sa.sa_sigaction = main_on_signal;
        else
            sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

/* run args (args[0] is this program; under DDPPROF_WORKER_WRAPPER when wrap) with
 * DDPPROF_PHASE=phase, and wait; the child's exit status (128 + signal when it was killed),
 * or -1 (error_set) */
static int run_self(char **args, const char *phase, int wrap)
{
    fflush(stdout);
    fflush(stderr);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old); /* main_child is set before a signal is handled */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
            _exit(128 + SIGTERM); /* the main job is already gone */
        sigprocmask(SIG_SETMASK, &old, NULL);
        char *words;
        char **run = wrap ? wrap_argv(args, &words) : args;
        setenv("DDPPROF_PHASE", phase, 1); /* names the nsys reports of each phase */
        execv(run[0], run);
        fprintf(stderr, "ddpprof: cannot execute %s\n", run[0]);
        _exit(127);
    }
    int fork_errno = errno;
    if (pid > 0)
        main_child = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0)
        return error_set("fork: cannot start %s %s: %s", args[0], args[1], strerror(fork_errno));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            main_child = 0;
            return error_set("waiting for the %s run (pid %d): %s", phase, (int)pid,
                             strerror(errno));
        }
    main_child = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* `ddpprof [--cpu N | --gpu LIST] --model M [train options]`: the fp32 baseline on one
 * device, the DDP+AMP run on all of them, then the report; one run directory.  With
 * --repeat N both runs are made N times, alternately (baseline, ddp, baseline, ddp, ...):
 * repeat 1 in DIR/baseline and DIR/ddp, repeat k >= 2 in DIR/repeat-k/baseline and
 * DIR/repeat-k/ddp, where `ddpprof report DIR` finds them again. */
static int cmd_main(int argc, char **argv)
{
    struct cli c;
    if (cli_parse(&c, CLI_MAIN, argc, argv, 1))
        return fail();
    if (c.help)
        return cli_usage(stdout), 0;
    if (device_check(&c.train.dev))
        return fail();
    char note[512];
    if (device_pick(&c.train.dev, note, sizeof note))
        printf("%s\n", note);
    if (c.runs != CLI_RUNS_BASELINE && check_fit(&c, CLI_MAIN))
        return fail();
    if (c.repeat > 1 && c.nnodes > 1) {
        error_set("--repeat %d with --nnodes %d: repeats are made on one node only (run the "
                  "job again for another measurement)", c.repeat, c.nnodes);
        return fail();
    }
    if (check_threads(&c, CLI_MAIN, c.runs != CLI_RUNS_BASELINE ? device_ranks(&c.train.dev) : 1) ||
        train_check_inputs(&c.train))
        return fail();
    char self[PATH_MAX];
    if (self_path(self, sizeof self))
        return fail();

    char out[4096], sub[4200];
    const char *dir = c.train.run.out_dir;
    if (claim_out(&dir, out, sizeof out, c.train.model, c.node_rank) < 0)
        return fail();
    if (dir != out)
        snprintf(out, sizeof out, "%s", dir);
    struct stat stale;
    snprintf(sub, sizeof sub, "%s/repeat-%d", out, c.repeat + 1);
    if (c.node_rank == 0 && stat(sub, &stale) == 0) { /* the report reads repeat-2, 3, ... */
        error_set("%s is from an earlier --repeat: the report would count it as a repeat of "
                  "this job; remove it or choose another --out", sub);
        return fail();
    }

    /* on several nodes every node makes the DDP run first, together; then node 0 alone
     * makes the one-process baseline and the report */
    int nodes = c.nnodes > 1;
    const enum train_mode modes[2] = {nodes ? TRAIN_DDP : TRAIN_BASELINE,
                                      nodes ? TRAIN_BASELINE : TRAIN_DDP};
    int rc = 0;
    main_own_signals(1);
    for (int it = 0; it < 2 * c.repeat && rc == 0 && !main_signal; it++) {
        int ph = it % 2, k = it / 2 + 1; /* run ph of repeat k */
        enum train_mode mode = modes[ph];
        const char *phase = mode == TRAIN_BASELINE ? "baseline" : "ddp";
        if ((mode == TRAIN_BASELINE && (c.runs == CLI_RUNS_DDP || c.node_rank > 0)) ||
            (mode == TRAIN_DDP && c.runs == CLI_RUNS_BASELINE))
            continue;
        struct cli run;
        char **args, devices[320];
        if (k == 1)
            snprintf(sub, sizeof sub, "%s/%s", out, phase);
        else
            snprintf(sub, sizeof sub, "%s/repeat-%d/%s", out, k, phase);
        /* the run's `train`: the user's words, less the main job's own, and the run's (cli.h) */
        if (cli_main_run(&c, argc, argv, 1, mode, sub, self, &run, &args))
            return fail();
        device_describe(&run.train.dev, devices, sizeof devices);
        char shown[4300];
        text_printable(sub, (size_t)-1, shown, sizeof shown);
        if (mode == TRAIN_DDP && nodes)
            printf("ddpprof: ddp run on %s, node %d of %d -> %s\n", devices, c.node_rank,
                   c.nnodes, shown);
        else if (c.repeat > 1)
            printf("ddpprof: repeat %d of %d: %s run on %s -> %s\n", k, c.repeat, phase,
                   devices, shown);
        else
            printf("ddpprof: %s run on %s -> %s\n", phase, devices, shown);
        rc = run_self(args, phase, mode == TRAIN_BASELINE);
        cli_argv_free(args);
        if (rc < 0)
            return fail();
        if (rc != 0)
            fprintf(stderr, "ddpprof: the %s run failed (exit status %d); no report\n", phase,
                    rc);
    }
    main_own_signals(0);
    if (rc == 0 && main_signal) {
        fprintf(stderr, "ddpprof: interrupted by %s; no report\n",
                main_signal == SIGINT ? "SIGINT" : "SIGTERM");
        rc = 128 + main_signal;
    }
    if (rc != 0)
        return rc;
    char shown[4300];
    text_printable(out, (size_t)-1, shown, sizeof shown);
    if (c.node_rank > 0) { /* node 0 reports; its directory holds this node's ranks if shared */
        printf("ddpprof: node %d's ranks are in %s/ddp; for one report of every node: ddpprof "
               "report NODE0_DIR/ddp NODE1_DIR/ddp ... (node 0 reports its own)\n",
               c.node_rank, shown);
        return 0;
    }
    const char *dirs[1] = {out};
    struct report_opts ro = {.out_dir = out,
                             .warmup_given = c.warmup_steps >= 0,
                             .warmup_steps = c.warmup_steps,
                             .diff = REPORT_DIFF_AUTO}; /* diff.csv: baseline vs ddp */
    /* said before the report, whose verdict and recommendations end the job's output */
    printf("\nddpprof: run directory %s (tables *.csv, timeline.json for Perfetto, report.html)\n",
           shown);
    if (report_run_opts(dirs, 1, &ro, stdout))
        return fail();
    return check_stdout("the report") ? fail() : 0;
}

static int cmd_worker(int argc, char **argv)
{
    struct cli c;
    struct dist_env env;
    /* under ddpprof train its launcher says where the run went; else rank 0 does */
    const int launched = getenv(WORKER_LINK_ENV) != NULL;
    worker_link_open(); /* its launcher's (ddpprof train's) link, if any */
    if (cli_parse(&c, CLI_WORKER, argc, argv, 2)) {
        worker_link_say("failed %s", error_get());
        return fail();
    }
    if (c.help)
        return cli_usage(stdout), 0;
    if (dist_env_read(&env)) {
        worker_link_say("failed %s", error_get());
        return fail();
    }
    /* the command line wins over the environment: rank 0's store is where it says */
    if (cli_is_given(&c, "--master-addr", CLI_WORKER))
        snprintf(env.master_addr, sizeof env.master_addr, "%s", c.master_addr);
    if (cli_is_given(&c, "--master-port", CLI_WORKER)) {
        env.master_port = c.master_port;
        env.agent_store = 0;
    }
    char out[4096];
    if (!c.train.run.out_dir) {
        default_out_dir(out, sizeof out, c.train.model);
        c.train.run.out_dir = out;
    }
    if (train_run(&c.train, &env)) {
        /* the rank once: a comm's own message may open with it already */
        char who[32];
        snprintf(who, sizeof who, "rank %d: ", env.rank);
        const char *msg = error_get();
        fprintf(stderr, "ddpprof: %s%s\n", strncmp(msg, who, strlen(who)) ? who : "", msg);
        worker_link_say("failed %s", error_get());
        return 1;
    }
    if (env.rank == 0 && !launched && !c.train.run.quiet)
        say_run_written(c.train.run.out_dir);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0) {
        char comms[64];
        device_comms(comms, sizeof comms);
        printf("ddpprof %s (%s)\ncomms: %s\n", DDPPROF_VERSION, DDPPROF_GIT_REV, comms);
        enum cpu_isa isa;
        if (cpu_isa_get(&isa))
            return fail();
        /* the CPU backend's own loops (cpu_isa.h); oneDNN's kernels follow the same cap */
        printf("cpu loops: %s (this machine: %s%s)\n", cpu_isa_name(isa),
               cpu_isa_name(cpu_isa_machine()), isa < cpu_isa_machine() ? ", DDPPROF_MAX_CPU_ISA" : "");
        return 0;
    }
    if (strcmp(argv[1], "train") == 0)
        return cmd_train(argc, argv);
    if (strcmp(argv[1], "worker") == 0)
        return cmd_worker(argc, argv);
    if (strcmp(argv[1], "report") == 0 || strcmp(argv[1], "diff") == 0)
        return report_main(argc - 1, argv + 1) || check_stdout("the report") ? fail() : 0;
    if (strcmp(argv[1], "tune") == 0)
        return tune_main(argc, argv) ? fail() : 0;
    if (strcmp(argv[1], "predict") == 0)
        return predict_main(argc - 1, argv + 1) || check_stdout("the prediction") ? fail() : 0;
    if (argv[1][0] == '-')
        return cmd_main(argc, argv);
    error_set("unknown command '%s' (commands: train, worker, report, diff, predict, tune; see "
              "ddpprof --help)",
              argv[1]);
    return fail();
}
