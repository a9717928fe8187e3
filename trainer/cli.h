/* cli.h — the trainer's command line, described once.
 *
 * One table in cli.c (name, short alias, kind, field, bounds, default, help, group, meta.csv
 * key), read by the parser every command shares (common/options.h), drives parsing, the
 * --help text (defaults printed from cli_defaults, not written by hand), which options a
 * child process is given (cli_child_argv: the main job starts `train` runs, `train` starts
 * `worker` ranks, tune starts `train` trials; each gets the user's own words) and the
 * options' lines of meta.csv that the run does not compute itself (cli_write_meta).
 *
 * Commands: the main job (`ddpprof [options]`), `ddpprof train` and `ddpprof worker` take
 * the same options, except --mode: the main job's says which runs to make
 * (both|baseline|ddp), train's and worker's how to train (baseline|ddp).
 *
 * Strict: every number must parse completely and lie in range, every option must be known
 * to the command; a bad one is one error line naming the option, the value and what is
 * allowed.  The defaults that depend on others (mode ddp with more than one rank; amp fp16
 * for ddp, off for baseline; a worker is always ddp) are applied in one place, after every
 * option was read. */
#ifndef DDPPROF_CLI_H
#define DDPPROF_CLI_H

#include "train.h"

#include <stdint.h>
#include <stdio.h>

struct runlog;

/* the commands that take options from the table; tune takes train's options and its own */
enum cli_command { CLI_MAIN = 1, CLI_TRAIN = 2, CLI_WORKER = 4, CLI_TUNE = 8 };

/* the main job's --mode: which runs it makes */
enum cli_runs { CLI_RUNS_BOTH, CLI_RUNS_BASELINE, CLI_RUNS_DDP };

struct cli {
    struct train_opts train;
    enum cli_runs runs;      /* main job --mode both|baseline|ddp */
    const char *master_addr; /* --master-addr: rank 0's host; with --nnodes > 1 node 0's */
    int master_port;         /* --master-port: the rendezvous store's port (0: a free one,
                                one node only); with --nnodes > 1 the node agents' store */
    int nnodes, node_rank;   /* --nnodes N --node-rank R (torchrun's): this node of N */
    int nproc_per_node;      /* --nproc-per-node P: ranks on this node (0: not given; resolved
                                into --cpu P unless --gpu names the devices) */
    int max_restarts;        /* --max-restarts K: restart every node's workers up to K times */
    int oversubscribe;       /* --oversubscribe: start more CPU ranks than this node has cores */
    int repeat;              /* main job --repeat N: baseline and DDP run N times, alternately */
    int warmup_steps;        /* main job --warmup-steps N for its report (-1: detected) */
    int tune_rounds;         /* tune --rounds N: interleaved A/B rounds */
    int tune_steps;          /* tune --tune-steps S: measured steps a trial */
    const char *tune_candidates; /* tune --candidates "NAME=ARGS;...", or NULL: the defaults */
    int help;                /* -h or --help was given: print cli_usage, do nothing else */
    uint64_t given;          /* bit i: option i of the table was on the command line */
};

/* Every option at its default (train_opts_default for the training options). */
void cli_defaults(struct cli *c);

/* Parse argv[first..argc) as command cmd into c: defaults, then every option in order (a
 * later one wins), then the defaults that depend on others.  0 or -1 (error_set).  Strings
 * point into argv. */
int cli_parse(struct cli *c, enum cli_command cmd, int argc, char **argv, int first);

/* 1 when the option spelt name (e.g. "--master-port") was on c's command line for cmd. */
int cli_is_given(const struct cli *c, const char *name, enum cli_command cmd);

/* The field of struct cli that train's option spelt word (a name or alias) sets, as its
 * offset, and in *takes_value (may be NULL) whether a value word follows it; -1 (and 0) when
 * word is no option of train's.  Two spellings of one setting give one field: tune calls
 * candidates that set none in common compatible (trainer/tune.c). */
long cli_option_field(const char *word, int *takes_value);

/* The job's ranks: --nnodes times the ranks on this node (device_ranks). */
int cli_world(const struct cli *c);

/* How an option reaches a child process (the main job starts a `train` run for its baseline
 * and for its DDP run; train starts its `worker` ranks; tune its `train` trials): the child
 * gets the user's command line, word for word, less the options it does not take and those
 * its parent decides itself, then the parent's decisions spelt as options.  Each process
 * parses the user's own text: no option is formatted back from a parsed value and parsed
 * again (a number printed anew, a default made explicit).  Not the parsed struct: a child is
 * exec'd (under DDPPROF_WORKER_WRAPPER, nsys for one), and torchrun, mpirun or Slurm start a
 * worker from a command line anyway.
 *
 * cli_child_argv: {prog, "train" or "worker", the words of argv[first..argc) (a command line
 * cli_parse(from) accepted) whose option `to` takes too, as given, less the options named in
 * own (NULL-terminated, may be NULL), then the words of add (NULL-terminated, may be NULL),
 * NULL}.  Strings are copies; free with cli_argv_free.  NULL + error_set when out of
 * memory. */
char **cli_child_argv(enum cli_command from, int argc, char **argv, int first,
                      enum cli_command to, const char *const *own, const char *const *add,
                      const char *prog);

/* One run of the main job (mode TRAIN_BASELINE or TRAIN_DDP) whose command line,
 * argv[first..argc), c holds: its `train` command line into *args (cli_child_argv: the
 * main job's own options left out, then --mode, --out out and, for the baseline, c's first
 * device only, no node options and no --amp: the baseline stays fp32, the tutorial's
 * baseline, which the speedup table compares with; the devices the main job picked, where
 * none was given), and that parsed as train parses it into run, whose strings point into
 * *args (free it with cli_argv_free after run).  0 or -1 (error_set). */
int cli_main_run(const struct cli *c, int argc, char **argv, int first, enum train_mode mode,
                 const char *out, const char *prog, struct cli *run, char ***args);

void cli_argv_free(char **argv);

/* meta.csv's lines of the options the table records (those with a meta key; one that
 * applies to one model only when o->model is that one), in table order, each value as the
 * command line spells it (a flag as 0 or 1).  The run writes them after the model's line. */
void cli_write_meta(const struct train_opts *o, struct runlog *log);

/* The usage text, with every option of the table and its default. */
void cli_usage(FILE *out);

#endif
