/* main.c — the ddpprof command: dispatches to train / worker, and decides the exit code.
 *
 * Library code returns status codes with a one-line message (error.h); this is the only
 * place that prints it and exits. */
#include "cli.h"
#include "dist_env.h"
#include "error.h"
#include "launcher.h"
#include "runlog.h"
#include "train.h"

#include <limits.h>
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

/* `ddpprof train --cpu N --mode ddp`: re-exec ourselves as N workers under the launcher */
static int launch_workers(struct cli *c, int argc, char **argv, const char *out_dir)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return error_set("cannot find this program's path in /proc/self/exe");
    self[len] = '\0';
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
    struct launch_opts lo = {
        .nprocs = c->cpu_ranks > 0 ? c->cpu_ranks : 1,
        .master_addr = c->master_addr,
        .master_port = c->master_port,
        .argv = wargv,
    };
    int rc = launcher_run(&lo);
    free(wargv);
    return rc;
}

static int cmd_train(int argc, char **argv)
{
    struct cli c;
    if (cli_parse(&c, argc, argv, 2))
        return fail();
    if (c.gpu_list) {
        error_set("--gpu %s: this build has no CUDA backend yet; use --cpu N", c.gpu_list);
        return fail();
    }
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
    error_set("unknown command '%s' (commands: train, worker; see ddpprof --help)", argv[1]);
    return fail();
}
