/* main.c — the ddpprof command: dispatches to train / worker, and decides the exit code.
 *
 * Library code returns status codes with a one-line message (error.h); this is the only
 * place that prints it and exits. */
#include "cli.h"
#include "launch/dist_env.h"
#include "common/error.h"
#include "cuda/cuda_api.h"
#include "launch/launcher.h"
#include "report/report.h"
#include "probes/runlog.h"
#include "train.h"

#include <limits.h>
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

/* results/<date>-<time>-<model> */
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

/* `ddpprof train --cpu N --mode ddp`: re-exec ourselves as N workers under the launcher */
static int launch_workers(struct cli *c, int argc, char **argv, const char *out_dir)
{
    char self[PATH_MAX];
    if (self_path(self, sizeof self))
        return -1;
    /* worker argv: self worker <original options> --out DIR */
    char **wargv = calloc((size_t)argc + 4, sizeof *wargv);
    if (!wargv)
        return error_set("out of memory");
    int k = 0;
    wargv[k++] = self;
    wargv[k++] = "worker";
    for (int i = 2; i < argc; i++)
        wargv[k++] = argv[i];
    wargv[k++] = "--out";
    wargv[k++] = (char *)out_dir;
    wargv[k] = NULL;
    char *words;
    char **run = wrap_argv(wargv, &words);
    struct launch_opts lo = {
        .nprocs = c->train.ngpus ? c->train.ngpus : c->cpu_ranks > 0 ? c->cpu_ranks : 1,
        .master_addr = c->master_addr,
        .master_port = c->master_port,
        .argv = run,
    };
    int rc = launcher_run(&lo);
    if (run != wargv)
        free(run);
    free(words);
    free(wargv);
    return rc;
}

static int cmd_train(int argc, char **argv)
{
    struct cli c;
    if (cli_parse(&c, argc, argv, 2))
        return fail();
    if (c.train.ngpus && train_check_gpus(&c.train))
        return fail();
    char out[4096];
    if (!c.train.out_dir) {
        default_out_dir(out, sizeof out, c.train.model);
        c.train.out_dir = out;
    }
    if (c.train.mode == TRAIN_DDP) {
        /* the run directory must be usable before any worker starts */
        if (mkdir_parents(c.train.out_dir))
            return fail();
        int rc = launch_workers(&c, argc, argv, c.train.out_dir);
        if (rc < 0)
            return fail();
        return rc;
    }
    if (train_run(&c.train, NULL))
        return fail();
    return 0;
}

/* run `self args...` (under DDPPROF_WORKER_WRAPPER when wrap) with DDPPROF_PHASE=phase,
 * and wait; the child's exit status, or -1 (error_set) */
static int run_self(char **args, const char *phase, int wrap)
{
    char self[PATH_MAX];
    if (self_path(self, sizeof self))
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return error_set("fork: cannot start %s %s", self, args[1]);
    if (pid == 0) {
        args[0] = self;
        char *words;
        char **run = wrap ? wrap_argv(args, &words) : args;
        setenv("DDPPROF_PHASE", phase, 1); /* names the nsys reports of each phase */
        execv(run[0], run);
        fprintf(stderr, "ddpprof: cannot execute %s\n", run[0]);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* "0,1,3" */
static void format_gpu_list(char *buf, size_t cap, const int *gpus, int n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at < cap; i++) {
        int w = snprintf(buf + at, cap - at, "%s%d", i ? "," : "", gpus[i]);
        if (w < 0)
            break;
        at += (size_t)w;
    }
}

/* options of the main job that it sets itself for each phase */
static int main_job_owned(const char *a)
{
    return strcmp(a, "--cpu") == 0 || strcmp(a, "--gpu") == 0 || strcmp(a, "--mode") == 0 ||
           strcmp(a, "--out") == 0;
}

/* `ddpprof [--cpu N | --gpu LIST] --model M [train options]`: the fp32 baseline on one
 * device, the DDP+AMP run on all of them, then the report; one run directory. */
static int cmd_main(int argc, char **argv)
{
    /* --mode both|baseline|ddp belongs to the main job; the rest is train's */
    int do_base = 1, do_ddp = 1;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--mode") == 0) {
            const char *m = argv[i + 1];
            if (strcmp(m, "both") && strcmp(m, "baseline") && strcmp(m, "ddp")) {
                error_set("--mode: '%s' is not both, baseline or ddp", m);
                return fail();
            }
            do_base = strcmp(m, "ddp") != 0;
            do_ddp = strcmp(m, "baseline") != 0;
        }
    struct cli c;
    /* parse everything (with --mode stripped) to validate before anything starts */
    char **check = calloc((size_t)argc + 1, sizeof *check);
    int nc = 0;
    check[nc++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            i++;
            continue;
        }
        check[nc++] = argv[i];
    }
    int bad = cli_parse(&c, nc, check, 1);
    free(check);
    if (bad)
        return fail();
    if (c.train.ngpus && train_check_gpus(&c.train))
        return fail();

    char devices[256];
    if (c.train.ngpus) {
        format_gpu_list(devices, sizeof devices, c.train.gpus, c.train.ngpus);
    } else if (c.cpu_ranks) {
        snprintf(devices, sizeof devices, "%d", c.cpu_ranks);
    } else {
        int count = cuda_device_count();
        error_clear();
        if (count > 0) {
            c.train.ngpus = count < TRAIN_MAX_GPUS ? count : TRAIN_MAX_GPUS;
            for (int i = 0; i < c.train.ngpus; i++)
                c.train.gpus[i] = i;
            format_gpu_list(devices, sizeof devices, c.train.gpus, c.train.ngpus);
            printf("ddpprof: using GPU%s %s (no --gpu or --cpu given)\n", count > 1 ? "s" : "",
                   devices);
        } else {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            c.cpu_ranks = cores >= 2 ? 2 : 1;
            snprintf(devices, sizeof devices, "%d", c.cpu_ranks);
            printf("ddpprof: no GPU found: using %d CPU rank%s (no --gpu or --cpu given)\n",
                   c.cpu_ranks, c.cpu_ranks > 1 ? "s" : "");
        }
    }
    const char *dev_opt = c.train.ngpus ? "--gpu" : "--cpu";
    char first_dev[32];
    if (c.train.ngpus)
        snprintf(first_dev, sizeof first_dev, "%d", c.train.gpus[0]);
    else
        snprintf(first_dev, sizeof first_dev, "1");

    char out[4096], sub[4200];
    if (c.train.out_dir)
        snprintf(out, sizeof out, "%s", c.train.out_dir);
    else
        default_out_dir(out, sizeof out, c.train.model);
    if (mkdir_parents(out))
        return fail();

    /* child argv: self train <train options> --mode M <device> --out DIR */
    char **args = calloc((size_t)argc + 12, sizeof *args);
    int base = 0;
    args[base++] = NULL; /* self, filled by run_self */
    args[base++] = "train";
    for (int i = 1; i < argc; i++) {
        if (main_job_owned(argv[i])) {
            i++;
            continue;
        }
        args[base++] = argv[i];
    }
    int rc = 0;
    const char *phases[2] = {"baseline", "ddp"};
    for (int ph = 0; ph < 2 && rc == 0; ph++) {
        if ((ph == 0 && !do_base) || (ph == 1 && !do_ddp))
            continue;
        int k = base;
        args[k++] = "--mode";
        args[k++] = (char *)phases[ph];
        args[k++] = (char *)dev_opt;
        args[k++] = ph == 0 ? first_dev : devices;
        snprintf(sub, sizeof sub, "%s/%s", out, phases[ph]);
        args[k++] = "--out";
        args[k++] = sub;
        args[k] = NULL;
        printf("ddpprof: %s run on %s %s -> %s\n", phases[ph], c.train.ngpus ? "GPU" : "CPU ranks:",
               args[base + 3], sub);
        rc = run_self(args, phases[ph], ph == 0);
        if (rc < 0) {
            free(args);
            return fail();
        }
        if (rc != 0)
            fprintf(stderr, "ddpprof: the %s run failed (exit status %d); no report\n",
                    phases[ph], rc);
    }
    free(args);
    if (rc != 0)
        return rc;
    const char *dirs[1] = {out};
    printf("\n");
    if (report_run(dirs, 1, out, stdout))
        return fail();
    printf("\nddpprof: run directory %s (tables *.csv, timeline.json for Perfetto, report.html)\n",
           out);
    return 0;
}

static int cmd_report(int argc, char **argv)
{
    const char **dirs = calloc((size_t)argc, sizeof *dirs);
    const char *out = NULL;
    int n = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0) {
            if (i + 1 >= argc) {
                free(dirs);
                error_set("--out needs a directory");
                return fail();
            }
            out = argv[++i];
        } else if (argv[i][0] == '-') {
            free(dirs);
            error_set("report: unknown option '%s' (usage: ddpprof report RUN_DIR... [--out DIR])",
                      argv[i]);
            return fail();
        } else {
            dirs[n++] = argv[i];
        }
    }
    if (n == 0) {
        free(dirs);
        error_set("report: no run directory given (usage: ddpprof report RUN_DIR... [--out DIR])");
        return fail();
    }
    int rc = report_run(dirs, n, out, stdout);
    free(dirs);
    return rc ? fail() : 0;
}

static int cmd_worker(int argc, char **argv)
{
    struct cli c;
    struct dist_env env;
    if (cli_parse(&c, argc, argv, 2) || dist_env_read(&env))
        return fail();
    c.train.mode = TRAIN_DDP;
    if (!c.amp_given)
        c.train.amp = AMP_F16;
    char out[4096];
    if (!c.train.out_dir) {
        default_out_dir(out, sizeof out, c.train.model);
        c.train.out_dir = out;
    }
    if (train_run(&c.train, &env)) {
        fprintf(stderr, "ddpprof: rank %d: %s\n", env.rank, error_get());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(cli_usage(), argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ddpprof %s (%s)\n", DDPPROF_VERSION, DDPPROF_GIT_REV);
        return 0;
    }
    if (strcmp(argv[1], "train") == 0)
        return cmd_train(argc, argv);
    if (strcmp(argv[1], "worker") == 0)
        return cmd_worker(argc, argv);
    if (strcmp(argv[1], "report") == 0)
        return (void)cmd_report, report_main(argc - 1, argv + 1) ? fail() : 0;
    if (argv[1][0] == '-')
        return cmd_main(argc, argv);
    error_set("unknown command '%s' (commands: train, worker; see ddpprof --help)", argv[1]);
    return fail();
}
