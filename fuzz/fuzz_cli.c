/* fuzz_cli.c — the command line (trainer/cli.c over common/options.c): the bytes split at
 * NUL into arguments, parsed as the main job's, train's, worker's and tune's options.
 *
 * What cli.h promises is checked on every accepted command line: each child's command line
 * (cli_child_argv: the user's words, less what the child does not take and what its parent
 * decides, then the parent's words) parses, to the options its parent parsed: train's
 * workers, tune's train trials, and, from the main job, each run's `train` child
 * (cli_main_run) and that run's workers. */
#include "fuzz/fuzz_util.h"

#include "cli.h"

#include <stdlib.h>
#include <string.h>

#define FUZZ_CLI_MAX_ARGS 256

static int fuzz_argc(char **argv)
{
    int n = 0;
    while (argv[n])
        n++;
    return n;
}

static int fuzz_same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* the options a child gets from its parent's words, the same in both */
static void fuzz_same(const struct train_opts *a, const struct train_opts *b)
{
    FUZZ_CHECK(fuzz_same_str(a->model, b->model) && fuzz_same_str(a->data.dir, b->data.dir) &&
                   fuzz_same_str(a->run.init_path, b->run.init_path),
               "%s", "a string option changed on its way to a child");
    FUZZ_CHECK(a->run.epochs == b->run.epochs && a->data.batch_size == b->data.batch_size &&
                   a->data.limit == b->data.limit && a->seed == b->seed &&
                   a->optim.lr == b->optim.lr && a->optim.momentum == b->optim.momentum &&
                   a->ddp.bucket_cap_mb == b->ddp.bucket_cap_mb &&
                   a->dev.timeout_ms == b->dev.timeout_ms && a->dev.threads == b->dev.threads &&
                   a->data.norm_mean == b->data.norm_mean &&
                   a->data.norm_std == b->data.norm_std && a->ddp.sync_bn == b->ddp.sync_bn &&
                   a->dev.ngpus == b->dev.ngpus,
               "%s", "a number option changed on its way to a child");
}

/* the workers of train command line args (parsed as c): their command line parses */
static void fuzz_workers(const struct cli *c, char **args)
{
    static const char *const own[] = {"--out", "--resume", "--master-addr", "--master-port",
                                      NULL};
    char **w = cli_child_argv(CLI_TRAIN, fuzz_argc(args), args, 2, CLI_WORKER, own, NULL,
                              "ddpprof");
    FUZZ_CHECK(w, "cli_child_argv: %s", "out of memory");
    struct cli back;
    FUZZ_CHECK(fuzz_status(cli_parse(&back, CLI_WORKER, fuzz_argc(w), w, 2), "worker parse") == 0,
               "%s", "a worker's command line does not parse");
    if (c->train.mode == TRAIN_DDP) /* a worker is always ddp */
        fuzz_same(&c->train, &back.train);
    cli_argv_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    char *argv[FUZZ_CLI_MAX_ARGS + 3];
    FUZZ_CHECK(text, "out of memory");
    memcpy(text, data, size);
    text[size] = '\0';
    /* an argument's own line break would be echoed in the one-line error: not a finding */
    for (size_t i = 0; i < size; i++)
        if (text[i] == '\n' || text[i] == '\r')
            text[i] = ' ';
    int nargs = 0;
    for (size_t at = 0; at < size && nargs < FUZZ_CLI_MAX_ARGS; at += strlen(text + at) + 1)
        argv[2 + nargs++] = text + at;
    argv[2 + nargs] = NULL;
    static const enum cli_command cmds[] = {CLI_MAIN, CLI_TRAIN, CLI_WORKER, CLI_TUNE};
    static const char *const names[] = {NULL, "train", "worker", "tune"};
    for (int k = 0; k < 4; k++) {
        /* {"ddpprof", args...} for the main job, {"ddpprof", "train", args...} otherwise */
        int first = cmds[k] == CLI_MAIN ? 1 : 2;
        char **av = argv + 2 - first;
        av[0] = "ddpprof";
        if (first == 2)
            av[1] = (char *)names[k];
        struct cli c;
        if (fuzz_status(cli_parse(&c, cmds[k], first + nargs, av, first), "cli_parse") != 0 ||
            c.help)
            continue;
        if (cmds[k] == CLI_TRAIN)
            fuzz_workers(&c, av);
        if (cmds[k] == CLI_TUNE) {
            static const char *const own[] = {"--out", NULL};
            char **t = cli_child_argv(CLI_TUNE, first + nargs, av, first, CLI_TRAIN, own, NULL,
                                      "ddpprof");
            FUZZ_CHECK(t, "cli_child_argv: %s", "out of memory");
            struct cli back;
            FUZZ_CHECK(fuzz_status(cli_parse(&back, CLI_TRAIN, fuzz_argc(t), t, 2),
                                   "trial parse") == 0,
                       "%s", "a tune trial's command line does not parse");
            fuzz_same(&c.train, &back.train);
            cli_argv_free(t);
        }
        if (cmds[k] != CLI_MAIN)
            continue;
        for (int mode = TRAIN_BASELINE; mode <= TRAIN_DDP; mode++) {
            struct cli run;
            char **args = NULL;
            FUZZ_CHECK(fuzz_status(cli_main_run(&c, first + nargs, av, first,
                                                (enum train_mode)mode, "out", "ddpprof", &run,
                                                &args),
                                   "cli_main_run") == 0,
                       "%s", "a command line the main job took gives a run train refuses");
            if (mode == TRAIN_DDP) {
                fuzz_same(&c.train, &run.train);
                fuzz_workers(&run, args);
            }
            cli_argv_free(args);
        }
    }
    free(text);
    return 0;
}
