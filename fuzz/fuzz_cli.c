/* fuzz_cli.c — the command line (trainer/cli.c): the bytes split at NUL into arguments,
 * parsed as the main job's, train's and worker's options.
 *
 * What cli.h promises is checked on every accepted command line: the child argv it makes
 * (cli_argv) parses back, and gives the same argv again, for the command itself and, from
 * the main job, for each run's `train` child (cli_main_run). */
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

/* c (parsed as cmd) -> its child argv for `to` -> parsed back -> the same argv again */
static void fuzz_round_trip(const struct cli *c, enum cli_command to)
{
    char **a = cli_argv(c, to, "ddpprof");
    FUZZ_CHECK(a, "cli_argv: %s", "out of memory");
    struct cli back;
    int first = to == CLI_MAIN ? 1 : 2;
    int n = fuzz_argc(a);
    FUZZ_CHECK(fuzz_status(cli_parse(&back, to, n, a, first), "cli_parse of cli_argv") == 0,
               "a child argv does not parse back");
    char **b = cli_argv(&back, to, "ddpprof");
    FUZZ_CHECK(b && fuzz_argc(b) == n, "the argv changed length in a round trip");
    for (int i = 0; i < n; i++)
        FUZZ_CHECK(strcmp(a[i], b[i]) == 0, "argument %d: '%s' became '%s'", i, a[i], b[i]);
    cli_argv_free(a);
    cli_argv_free(b);
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
    static const enum cli_command cmds[] = {CLI_MAIN, CLI_TRAIN, CLI_WORKER};
    for (int k = 0; k < 3; k++) {
        /* {"ddpprof", args...} for the main job, {"ddpprof", "train", args...} otherwise */
        int first = cmds[k] == CLI_MAIN ? 1 : 2;
        char **av = argv + 2 - first;
        av[0] = "ddpprof";
        if (first == 2)
            av[1] = cmds[k] == CLI_TRAIN ? "train" : "worker";
        struct cli c;
        if (fuzz_status(cli_parse(&c, cmds[k], first + nargs, av, first), "cli_parse") != 0 ||
            c.help)
            continue;
        fuzz_round_trip(&c, cmds[k]);
        if (cmds[k] != CLI_MAIN)
            continue;
        for (int mode = TRAIN_BASELINE; mode <= TRAIN_DDP; mode++) {
            struct cli run;
            if (fuzz_status(cli_main_run(&c, (enum train_mode)mode, "out", &run),
                            "cli_main_run") == 0)
                fuzz_round_trip(&run, CLI_TRAIN);
        }
    }
    free(text);
    return 0;
}
