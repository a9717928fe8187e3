/* test_cli.c — the command line table (trainer/cli.c), without running anything:
 *
 * 1. a rich command line parses to the values it spells, and a child's command line
 *    (cli_child_argv) is the user's words as given, less what the child does not take and
 *    what its parent decides, then the parent's words, and parses to the same options:
 *    train -> worker, tune -> train, the main job -> train, GPU lists included;
 * 2. the defaults that depend on others: ddp with more than one rank, amp fp16 for ddp
 *    and off for baseline, an explicit --amp off on 2 ranks kept in the worker's words,
 *    a worker always ddp;
 * 3. the main job's runs (cli_main_run): the baseline on the first device in fp32 whatever
 *    --amp says, the DDP run on all devices with --amp, the devices the main job picked
 *    where none was given;
 * 4. strict parsing: one error line naming the option and the value, as before;
 * 5. --help text: every option, the defaults of train_opts_default, --resume under
 *    training, the main job's --mode listed;
 * 6. the ResNet18 recipe's options (--model resnet18, --resnet-width, --dataset,
 *    --optimizer, --lr-scale-by-world, --drop-last, --save-every-epoch) through the main
 *    job's train argv and train's worker argv;
 * 7. the options the table records in meta.csv (cli_write_meta): --resnet-width for
 *    resnet18 only. */
#include "cli.h"
#include "common/error.h"
#include "device.h"
#include "probes/runlog.h"
#include "testutil.h"
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int argv_count(char **argv)
{
    int n = 0;
    while (argv[n])
        n++;
    return n;
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* every option value, field by field (independent of the table in cli.c) */
static void check_same(const struct cli *a, const struct cli *b, const char *what)
{
    const struct train_opts *x = &a->train, *y = &b->train;
    CHECK(same_str(x->model, y->model), "%s: model %s vs %s", what, x->model, y->model);
    CHECK(same_str(x->data.dir, y->data.dir), "%s: data %s vs %s", what, x->data.dir,
          y->data.dir);
    CHECK(x->run.epochs == y->run.epochs && x->data.batch_size == y->data.batch_size,
          "%s: epochs %d/%d batch %d/%d", what, x->run.epochs, y->run.epochs, x->data.batch_size,
          y->data.batch_size);
    CHECK(x->optim.lr == y->optim.lr && x->optim.momentum == y->optim.momentum &&
              x->optim.weight_decay == y->optim.weight_decay,
          "%s: lr %.9g/%.9g momentum %.9g/%.9g wd %.9g/%.9g", what, (double)x->optim.lr,
          (double)y->optim.lr, (double)x->optim.momentum, (double)y->optim.momentum,
          (double)x->optim.weight_decay, (double)y->optim.weight_decay);
    CHECK(x->seed == y->seed && x->data.shuffle == y->data.shuffle, "%s: seed/shuffle differ",
          what);
    CHECK(x->data.limit == y->data.limit && x->data.test_limit == y->data.test_limit,
          "%s: limits %ld/%ld %ld/%ld", what, x->data.limit, y->data.limit, x->data.test_limit,
          y->data.test_limit);
    CHECK(x->data.norm_mean == y->data.norm_mean && x->data.norm_std == y->data.norm_std,
          "%s: normalize %.9g,%.9g vs %.9g,%.9g", what, (double)x->data.norm_mean,
          (double)x->data.norm_std, (double)y->data.norm_mean, (double)y->data.norm_std);
    CHECK(same_str(x->run.out_dir, y->run.out_dir), "%s: out %s vs %s", what, x->run.out_dir,
          y->run.out_dir);
    CHECK(same_str(x->run.init_path, y->run.init_path), "%s: init differs", what);
    CHECK(same_str(x->run.resume_path, y->run.resume_path), "%s: resume differs", what);
    CHECK(x->dev.threads == y->dev.threads, "%s: threads %d vs %d", what, x->dev.threads,
          y->dev.threads);
    CHECK(x->mode == y->mode, "%s: mode %d vs %d", what, (int)x->mode, (int)y->mode);
    CHECK(x->ddp.bucket_cap_mb == y->ddp.bucket_cap_mb, "%s: bucket cap %.17g vs %.17g", what,
          x->ddp.bucket_cap_mb, y->ddp.bucket_cap_mb);
    CHECK(x->ddp.sync_bn == y->ddp.sync_bn && x->run.quiet == y->run.quiet,
          "%s: sync_bn/quiet differ", what);
    CHECK(x->dev.timeout_ms == y->dev.timeout_ms, "%s: timeout %d vs %d ms", what,
          x->dev.timeout_ms, y->dev.timeout_ms);
    CHECK(x->amp.dtype == y->amp.dtype, "%s: amp %d vs %d", what, (int)x->amp.dtype,
          (int)y->amp.dtype);
    CHECK(x->amp.scale_init == y->amp.scale_init && x->amp.scale_growth == y->amp.scale_growth &&
              x->amp.scale_backoff == y->amp.scale_backoff &&
              x->amp.scale_interval == y->amp.scale_interval,
          "%s: GradScaler options differ", what);
    CHECK(x->run.trace == y->run.trace, "%s: trace %d vs %d", what, (int)x->run.trace,
          (int)y->run.trace);
    CHECK(x->dev.cpu_ranks == y->dev.cpu_ranks, "%s: cpu %d vs %d", what, x->dev.cpu_ranks,
          y->dev.cpu_ranks);
    CHECK(x->dev.ngpus == y->dev.ngpus, "%s: %d vs %d GPUs", what, x->dev.ngpus, y->dev.ngpus);
    for (int i = 0; i < x->dev.ngpus && i < y->dev.ngpus; i++)
        CHECK(x->dev.gpus[i] == y->dev.gpus[i], "%s: gpu %d: %d vs %d", what, i, x->dev.gpus[i],
              y->dev.gpus[i]);
    CHECK(x->dev.comm == y->dev.comm && x->run.checkpoint_every == y->run.checkpoint_every,
          "%s: comm %d/%d checkpoint-every %ld/%ld", what, (int)x->dev.comm, (int)y->dev.comm,
          x->run.checkpoint_every, y->run.checkpoint_every);
    CHECK(a->runs == b->runs, "%s: runs %d vs %d", what, (int)a->runs, (int)b->runs);
    CHECK(same_str(a->master_addr, b->master_addr) && a->master_port == b->master_port,
          "%s: master %s:%d vs %s:%d", what, a->master_addr, a->master_port, b->master_addr,
          b->master_port);
}

static int parse(struct cli *c, enum cli_command cmd, char **args)
{
    return cli_parse(c, cmd, argv_count(args), args, 0);
}

/* what train's launcher decides for its workers (trainer/main.c, launch_attempt) */
static const char *const worker_own[] = {"--out", "--resume", "--master-addr", "--master-port",
                                         NULL};

/* child's words from argv[2] on are want's (NULL-terminated) */
static void check_words(char **child, const char *const *want, const char *what)
{
    int i = 0;
    for (; child[i + 2] && want[i]; i++)
        CHECK(strcmp(child[i + 2], want[i]) == 0, "%s: word %d is '%s', want '%s'", what, i,
              child[i + 2], want[i]);
    CHECK(!child[i + 2] && !want[i], "%s: %s words than wanted ('%s')", what,
          child[i + 2] ? "more" : "fewer", child[i + 2] ? child[i + 2] : want[i]);
}

/* The command line of a `to` child of the command line args (parsed as `from` into
 * parent), with own and add as cli_child_argv takes them: printed, its words checked
 * against want (when not NULL), parsed as `to` into *back (its strings point into the
 * returned argv: free it after back) and compared with parent, but for what the parent
 * decides (the run directory, --resume, the rendezvous) and what `to` does not take. */
static char **check_child(const struct cli *parent, enum cli_command from, char **args,
                          enum cli_command to, const char *const *own, const char *const *add,
                          const char *const *want, struct cli *back, const char *what)
{
    char **child = cli_child_argv(from, argv_count(args), args, 0, to, own, add, "ddpprof");
    CHECK(child != NULL, "%s: cli_child_argv: %s", what, error_get());
    if (!child)
        return NULL;
    printf("%s:", what);
    for (char **p = child; *p; p++)
        printf(" %s", *p);
    printf("\n");
    CHECK(strcmp(child[0], "ddpprof") == 0, "%s: argv[0] is '%s'", what, child[0]);
    CHECK(strcmp(child[1], to == CLI_TRAIN ? "train" : "worker") == 0, "%s: argv[1] is '%s'",
          what, child[1]);
    if (want)
        check_words(child, want, what);
    int rc = cli_parse(back, to, argv_count(child), child, 2);
    CHECK(rc == 0, "%s: the child's argv does not parse: %s", what, error_get());
    if (rc != 0)
        return child;
    struct cli same = *back; /* back, with what the parent decides put back */
    same.runs = parent->runs; /* the main job's --mode is not train's or worker's */
    same.train.run.out_dir = parent->train.run.out_dir;
    same.train.run.resume_path = parent->train.run.resume_path;
    if (to == CLI_WORKER) { /* its rendezvous is in its environment */
        CHECK(!cli_is_given(back, "--master-addr", CLI_WORKER) &&
                  !cli_is_given(back, "--master-port", CLI_WORKER),
              "%s: the worker's command line names a rendezvous", what);
        same.master_addr = parent->master_addr;
        same.master_port = parent->master_port;
        same.train.dev.cpu_ranks = parent->train.dev.cpu_ranks; /* --nproc-per-node's */
    }
    check_same(parent, &same, what);
    return child;
}

static void test_rich_round_trip(void)
{
    char *rich[] = {"--cpu", "3", "--model", "convnet", "-e", "5", "-b", "17", "--lr",
                    "0.0123", "--momentum", "0.9", "--weight-decay", "1e-4", "--seed", "42",
                    "--no-shuffle", "--limit", "1234", "--test-limit", "99", "--data",
                    "/tmp/data dir", "--normalize", "0.1307,0.3081", "--init", "/tmp/i.st",
                    "--resume", "/tmp/ck.st", "--threads", "3", "--out", "/tmp/run",
                    "--quiet", "--trace", "nvtx", "--amp", "bf16", "--loss-scale-init",
                    "1024", "--loss-scale-growth", "3", "--loss-scale-backoff", "0.25",
                    "--loss-scale-interval", "7", "--bucket-cap-mb", "0.02", "--no-sync-bn",
                    "--timeout", "4.35", "--master-addr", "10.0.0.1", "--master-port",
                    "29501", NULL};
    struct cli c;
    CHECK(parse(&c, CLI_TRAIN, rich) == 0, "rich train line: %s", error_get());
    const struct train_opts *t = &c.train;
    CHECK(t->dev.cpu_ranks == 3 && t->dev.ngpus == 0, "cpu %d gpus %d", t->dev.cpu_ranks,
          t->dev.ngpus);
    CHECK(t->run.epochs == 5 && t->data.batch_size == 17, "-e/-b: %d %d", t->run.epochs,
          t->data.batch_size);
    CHECK(t->optim.lr == 0.0123f && t->optim.momentum == 0.9f && t->optim.weight_decay == 1e-4f,
          "SGD options");
    CHECK(t->seed == 42 && t->data.shuffle == 0, "seed %llu shuffle %d",
          (unsigned long long)t->seed, t->data.shuffle);
    CHECK(t->data.limit == 1234 && t->data.test_limit == 99, "limits %ld %ld", t->data.limit,
          t->data.test_limit);
    CHECK(strcmp(t->data.dir, "/tmp/data dir") == 0, "data '%s'", t->data.dir);
    CHECK(t->data.norm_mean == 0.1307f && t->data.norm_std == 0.3081f, "normalize");
    CHECK(t->dev.threads == 3 && t->run.quiet == 1 && t->run.trace == PROBE_NVTX,
          "threads/quiet/trace");
    CHECK(t->mode == TRAIN_DDP, "3 ranks without --mode: mode %d, want ddp", (int)t->mode);
    CHECK(t->amp.dtype == AMP_BF16, "--amp bf16: %d", (int)t->amp.dtype);
    CHECK(t->amp.scale_init == 1024.0f && t->amp.scale_growth == 3.0f &&
              t->amp.scale_backoff == 0.25f && t->amp.scale_interval == 7,
          "GradScaler options");
    CHECK(t->ddp.bucket_cap_mb == 0.02 && t->ddp.sync_bn == 0, "DDP options");
    /* 4.35 * 1000 is 4349.999... in doubles: rounded, not truncated */
    CHECK(t->dev.timeout_ms == 4350, "--timeout 4.35: %d ms", t->dev.timeout_ms);
    CHECK(strcmp(c.master_addr, "10.0.0.1") == 0 && c.master_port == 29501, "master");
    /* train -> worker: the user's words as given (-e, -b, 0.0123, "/tmp/data dir"), less
     * the launcher's own, then its run directory and checkpoint */
    static const char *const add[] = {"--out", "/tmp/run", "--resume", "/tmp/ck.st", NULL};
    static const char *const worker_words[] = {
        "--cpu", "3", "--model", "convnet", "-e", "5", "-b", "17", "--lr", "0.0123",
        "--momentum", "0.9", "--weight-decay", "1e-4", "--seed", "42", "--no-shuffle",
        "--limit", "1234", "--test-limit", "99", "--data", "/tmp/data dir", "--normalize",
        "0.1307,0.3081", "--init", "/tmp/i.st", "--threads", "3", "--quiet", "--trace", "nvtx",
        "--amp", "bf16", "--loss-scale-init", "1024", "--loss-scale-growth", "3",
        "--loss-scale-backoff", "0.25", "--loss-scale-interval", "7", "--bucket-cap-mb",
        "0.02", "--no-sync-bn", "--timeout", "4.35", "--out", "/tmp/run", "--resume",
        "/tmp/ck.st", NULL};
    struct cli back;
    char **child = check_child(&c, CLI_TRAIN, rich, CLI_WORKER, worker_own, add, worker_words,
                               &back, "train -> worker");
    CHECK(back.master_port == 0 && strcmp(back.master_addr, "127.0.0.1") == 0,
          "a worker's rendezvous: %s:%d, want its environment's", back.master_addr,
          back.master_port);
    cli_argv_free(child);

    /* tune -> train: the user's words, tune's own options and --out left out */
    char *tune[] = {"--rounds", "3", "--cpu", "2", "--lr", "0.50", "--out", "/tmp/t",
                    "--tune-steps", "9", "--bucket-cap-mb", "1", NULL};
    static const char *const tune_own[] = {"--out", NULL};
    static const char *const tune_words[] = {"--cpu", "2", "--lr", "0.50", "--bucket-cap-mb",
                                             "1", NULL};
    CHECK(cli_parse(&c, CLI_TUNE, argv_count(tune), tune, 0) == 0 && c.tune_rounds == 3 &&
              c.tune_steps == 9,
          "tune line: %s", error_get());
    cli_argv_free(check_child(&c, CLI_TUNE, tune, CLI_TRAIN, tune_own, NULL, tune_words, &back,
                              "tune -> train"));

    /* main -> train: the main job's --mode is its own */
    char *gpus[] = {"--gpu", "3,1", "--lr", "0.3", "--bucket-cap-mb", "1e-6",
                    "--mode", "baseline", NULL};
    CHECK(parse(&c, CLI_MAIN, gpus) == 0, "main job with GPUs: %s", error_get());
    CHECK(c.train.dev.ngpus == 2 && c.train.dev.gpus[0] == 3 && c.train.dev.gpus[1] == 1,
          "--gpu 3,1: %d GPUs %d %d", c.train.dev.ngpus, c.train.dev.gpus[0], c.train.dev.gpus[1]);
    CHECK(c.runs == CLI_RUNS_BASELINE, "main --mode baseline: runs %d", (int)c.runs);
    static const char *const main_words[] = {"--gpu", "3,1", "--lr", "0.3", "--bucket-cap-mb",
                                             "1e-6", NULL};
    cli_argv_free(check_child(&c, CLI_MAIN, gpus, CLI_TRAIN, NULL, NULL, main_words, &back,
                              "main -> train"));

    /* a GPU listed twice: two ranks share it (host-staged collectives, device.c) */
    char *shared[] = {"--gpu", "0,0", "--mode", "ddp", NULL};
    CHECK(parse(&c, CLI_TRAIN, shared) == 0, "--gpu 0,0: %s", error_get());
    CHECK(c.train.dev.ngpus == 2 && c.train.dev.gpus[0] == 0 && c.train.dev.gpus[1] == 0,
          "--gpu 0,0: %d ranks on GPUs %d %d", c.train.dev.ngpus, c.train.dev.gpus[0],
          c.train.dev.gpus[1]);
    cli_argv_free(check_child(&c, CLI_TRAIN, shared, CLI_WORKER, worker_own, NULL, NULL, &back,
                              "shared GPU: train -> worker"));
}

/* torchrun's launch flags: the world is nodes x ranks per node; --nproc-per-node is --cpu
 * on CPU ranks; the node options reach train (not worker, which reads the environment);
 * the main job's baseline is one process on one node without restarts. */
static void test_nodes(void)
{
    char *nodes[] = {"--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "2",
                     "--master-addr", "10.9.0.1", "--master-port", "29511", "--max-restarts",
                     "3", "--comm", "gloo", "--checkpoint-every", "5", "--threads", "1", NULL};
    struct cli c;
    CHECK(parse(&c, CLI_TRAIN, nodes) == 0, "nodes line: %s", error_get());
    CHECK(c.nnodes == 2 && c.node_rank == 1 && c.nproc_per_node == 2 && c.max_restarts == 3,
          "nnodes %d node-rank %d nproc %d restarts %d", c.nnodes, c.node_rank,
          c.nproc_per_node, c.max_restarts);
    CHECK(c.train.dev.cpu_ranks == 2 && cli_world(&c) == 4 && c.train.mode == TRAIN_DDP,
          "--nproc-per-node 2 on 2 nodes: cpu %d world %d mode %d", c.train.dev.cpu_ranks,
          cli_world(&c), (int)c.train.mode);
    CHECK(c.train.dev.comm == device_comm_index("gloo") && c.train.run.checkpoint_every == 5,
          "--comm gloo --checkpoint-every 5: %d %ld", c.train.dev.comm,
          c.train.run.checkpoint_every);
    CHECK(cli_is_given(&c, "--master-port", CLI_TRAIN) &&
              !cli_is_given(&c, "--seed", CLI_TRAIN),
          "cli_is_given");
    /* the node options are train's (its launcher's), not a worker's: the launcher gives
     * it its rank and world in its environment */
    static const char *const nodes_worker[] = {"--comm", "gloo", "--checkpoint-every", "5",
                                               "--threads", "1", NULL};
    struct cli back;
    cli_argv_free(check_child(&c, CLI_TRAIN, nodes, CLI_WORKER, worker_own, NULL, nodes_worker,
                              &back, "nodes: train -> worker"));

    struct cli main_c, run;
    char **args = NULL;
    CHECK(cli_parse(&main_c, CLI_MAIN, 12, nodes, 0) == 0, "main nodes line: %s", error_get());
    CHECK(cli_main_run(&main_c, 12, nodes, 0, TRAIN_BASELINE, "/tmp/b", "ddpprof", &run,
                       &args) == 0 &&
              run.nnodes == 1 && run.max_restarts == 0 && run.train.dev.cpu_ranks == 1 &&
              cli_world(&run) == 1,
          "the baseline of a 2-node main job: %s nnodes %d cpu %d", error_get(), run.nnodes,
          run.train.dev.cpu_ranks);
    cli_argv_free(args);
    CHECK(cli_main_run(&main_c, 12, nodes, 0, TRAIN_DDP, "/tmp/d", "ddpprof", &run, &args) == 0 &&
              run.nnodes == 2 && run.node_rank == 1 && run.nproc_per_node == 2 &&
              run.max_restarts == 3 && cli_world(&run) == 4,
          "the DDP run of a 2-node main job: %s", error_get());
    cli_argv_free(args);

    char *bad_rank[] = {"--nnodes", "2", "--node-rank", "2", NULL};
    CHECK(parse(&c, CLI_TRAIN, bad_rank) == -1 && strstr(error_get(), "--node-rank 2") &&
              strstr(error_get(), "--nnodes 2"),
          "--node-rank 2 of 2: %s", error_get());
    char *disagree[] = {"--nproc-per-node", "2", "--cpu", "3", NULL};
    CHECK(parse(&c, CLI_TRAIN, disagree) == -1 && strstr(error_get(), "disagree"),
          "--nproc-per-node 2 --cpu 3: %s", error_get());
    char *worker_nodes[] = {"--nnodes", "2", NULL};
    CHECK(parse(&c, CLI_WORKER, worker_nodes) == -1 && strstr(error_get(), "--nnodes"),
          "a worker takes no --nnodes (its environment says): %s", error_get());
    char *bad_comm[] = {"--comm", "mpi", NULL};
    CHECK(parse(&c, CLI_TRAIN, bad_comm) == -1 && strstr(error_get(), "shm") &&
              strstr(error_get(), "gloo"),
          "--comm mpi: %s", error_get());

    /* --conv-algo: auto by default, reaches the workers, refuses what it does not know */
    char *none[] = {NULL};
    CHECK(parse(&c, CLI_TRAIN, none) == 0 && c.train.dev.conv_algo == CONV_ALGO_AUTO,
          "--conv-algo defaults to auto: %d", (int)c.train.dev.conv_algo);
    char *wino[] = {"--cpu", "2", "--conv-algo", "winograd", NULL};
    CHECK(parse(&c, CLI_TRAIN, wino) == 0 && c.train.dev.conv_algo == CONV_ALGO_WINOGRAD,
          "--conv-algo winograd: %s", error_get());
    args = check_child(&c, CLI_TRAIN, wino, CLI_WORKER, worker_own, NULL, NULL, &back,
                       "--conv-algo winograd: train -> worker");
    CHECK(args && back.train.dev.conv_algo == CONV_ALGO_WINOGRAD,
          "--conv-algo winograd reaches a worker: %s", error_get());
    cli_argv_free(args);
    char *bad_algo[] = {"--conv-algo", "fft", NULL};
    CHECK(parse(&c, CLI_TRAIN, bad_algo) == -1 && strstr(error_get(), "direct") &&
              strstr(error_get(), "winograd"),
          "--conv-algo fft: %s", error_get());

    /* --tf32: off by default (strict fp32, the oracle's), on reaches the workers */
    CHECK(parse(&c, CLI_TRAIN, none) == 0 && c.train.dev.tf32 == 0, "--tf32 defaults to off: %d",
          c.train.dev.tf32);
    char *tf32[] = {"--cpu", "2", "--tf32", "on", NULL};
    CHECK(parse(&c, CLI_TRAIN, tf32) == 0 && c.train.dev.tf32 == 1, "--tf32 on: %s", error_get());
    args = check_child(&c, CLI_TRAIN, tf32, CLI_WORKER, worker_own, NULL, NULL, &back,
                       "--tf32 on: train -> worker");
    CHECK(args && back.train.dev.tf32 == 1, "--tf32 on reaches a worker: %s", error_get());
    cli_argv_free(args);
    char *bad_tf32[] = {"--tf32", "yes", NULL};
    CHECK(parse(&c, CLI_TRAIN, bad_tf32) == -1 && strstr(error_get(), "on") &&
              strstr(error_get(), "off"),
          "--tf32 yes: %s", error_get());
}

static void test_defaults_round_trip(void)
{
    char *none[] = {NULL};
    struct cli c;
    CHECK(parse(&c, CLI_TRAIN, none) == 0, "empty train line: %s", error_get());
    struct train_opts want;
    train_opts_default(&want);
    CHECK(c.train.run.epochs == want.run.epochs &&
              c.train.data.batch_size == want.data.batch_size &&
              c.train.optim.lr == want.optim.lr && c.train.dev.timeout_ms == want.dev.timeout_ms,
          "defaults are train_opts_default's");
    CHECK(c.train.mode == TRAIN_BASELINE && c.train.amp.dtype == AMP_OFF,
          "one rank: baseline without AMP (mode %d amp %d)", (int)c.train.mode,
          (int)c.train.amp.dtype);
    /* a worker of it gets nothing the user did not say, but its launcher's --out; it
     * resolves its own defaults (ddp, fp16) */
    static const char *const add[] = {"--out", "/tmp/d", NULL};
    char **child = cli_child_argv(CLI_TRAIN, 0, none, 0, CLI_WORKER, worker_own, add, "ddpprof");
    CHECK(child != NULL, "cli_child_argv: %s", error_get());
    if (child) {
        check_words(child, add, "defaults: train -> worker");
        struct cli back;
        CHECK(cli_parse(&back, CLI_WORKER, argv_count(child), child, 2) == 0 &&
                  back.train.mode == TRAIN_DDP && back.train.amp.dtype == AMP_F16 &&
                  back.train.run.epochs == want.run.epochs,
              "defaults: the worker's options (mode %d amp %d): %s", (int)back.train.mode,
              (int)back.train.amp.dtype, error_get());
        cli_argv_free(child);
    }
}

static void test_mode_defaults(void)
{
    struct cli c;
    char *two[] = {"--cpu", "2", NULL};
    CHECK(parse(&c, CLI_TRAIN, two) == 0 && c.train.mode == TRAIN_DDP &&
              c.train.amp.dtype == AMP_F16,
          "--cpu 2: mode %d amp %d, want ddp fp16", (int)c.train.mode, (int)c.train.amp.dtype);
    char *two_off[] = {"--cpu", "2", "--amp", "off", NULL};
    CHECK(parse(&c, CLI_TRAIN, two_off) == 0 && c.train.mode == TRAIN_DDP &&
              c.train.amp.dtype == AMP_OFF,
          "--cpu 2 --amp off: mode %d amp %d", (int)c.train.mode, (int)c.train.amp.dtype);
    static const char *const off_words[] = {"--cpu", "2", "--amp", "off", NULL};
    struct cli back;
    cli_argv_free(check_child(&c, CLI_TRAIN, two_off, CLI_WORKER, worker_own, NULL, off_words,
                              &back, "--amp off on 2 ranks: train -> worker"));
    char *one_ddp[] = {"--cpu", "1", "--mode", "ddp", NULL};
    CHECK(parse(&c, CLI_TRAIN, one_ddp) == 0 && c.train.mode == TRAIN_DDP &&
              c.train.amp.dtype == AMP_F16,
          "--cpu 1 --mode ddp: mode %d amp %d", (int)c.train.mode, (int)c.train.amp.dtype);
    char *worker_base[] = {"--mode", "baseline", NULL};
    CHECK(parse(&c, CLI_WORKER, worker_base) == 0 && c.train.mode == TRAIN_DDP &&
              c.train.amp.dtype == AMP_F16,
          "a worker is ddp: mode %d amp %d", (int)c.train.mode, (int)c.train.amp.dtype);
    char *order[] = {"--amp", "bf16", "--epochs", "2", "--epochs", "4", NULL};
    CHECK(parse(&c, CLI_TRAIN, order) == 0 && c.train.run.epochs == 4 &&
              c.train.amp.dtype == AMP_BF16,
          "a later option wins: epochs %d", c.train.run.epochs);
}

/* one run of the main job from the command line args: its train words checked against
 * want, its parse into *run; the argv to free after run */
static char **main_run(const struct cli *c, char **args, enum train_mode mode, const char *out,
                       const char *const *want, struct cli *run, const char *what)
{
    char **child = NULL;
    int rc = cli_main_run(c, argv_count(args), args, 0, mode, out, "ddpprof", run, &child);
    CHECK(rc == 0, "%s: %s", what, error_get());
    if (rc != 0)
        return NULL;
    printf("%s:", what);
    for (char **p = child; *p; p++)
        printf(" %s", *p);
    printf("\n");
    check_words(child, want, what);
    CHECK(strcmp(run->train.run.out_dir, out) == 0, "%s: out %s", what, run->train.run.out_dir);
    return child;
}

static void test_main_runs(void)
{
    struct cli c, run;
    char *line[] = {"--cpu", "3", "--amp", "bf16", "--epochs", "2", "--out", "/tmp/x", NULL};
    CHECK(parse(&c, CLI_MAIN, line) == 0, "main line: %s", error_get());
    CHECK(c.runs == CLI_RUNS_BOTH, "main --mode default: %d", (int)c.runs);
    static const char *const base_words[] = {"--epochs", "2", "--mode", "baseline", "--out",
                                             "/tmp/x/baseline", "--cpu", "1", NULL};
    char **args = main_run(&c, line, TRAIN_BASELINE, "/tmp/x/baseline", base_words, &run,
                           "main baseline run");
    CHECK(args && run.train.dev.cpu_ranks == 1 && run.train.mode == TRAIN_BASELINE &&
              run.train.amp.dtype == AMP_OFF && run.train.run.epochs == 2,
          "baseline run: cpu %d mode %d amp %d (want 1 baseline off)", run.train.dev.cpu_ranks,
          (int)run.train.mode, (int)run.train.amp.dtype);
    cli_argv_free(args);
    static const char *const ddp_words[] = {"--cpu", "3", "--amp", "bf16", "--epochs", "2",
                                            "--mode", "ddp", "--out", "/tmp/x/ddp", NULL};
    args = main_run(&c, line, TRAIN_DDP, "/tmp/x/ddp", ddp_words, &run, "main ddp run");
    CHECK(args && run.train.dev.cpu_ranks == 3 && run.train.mode == TRAIN_DDP &&
              run.train.amp.dtype == AMP_BF16,
          "ddp run: cpu %d mode %d amp %d (want 3 ddp bf16)", run.train.dev.cpu_ranks,
          (int)run.train.mode, (int)run.train.amp.dtype);
    cli_argv_free(args);

    char *gpus[] = {"--gpu", "2,0", NULL};
    CHECK(parse(&c, CLI_MAIN, gpus) == 0, "main --gpu 2,0: %s", error_get());
    static const char *const gpu_base[] = {"--mode", "baseline", "--out", "b", "--gpu", "2",
                                           NULL};
    args = main_run(&c, gpus, TRAIN_BASELINE, "b", gpu_base, &run, "main --gpu 2,0 baseline");
    CHECK(args && run.train.dev.ngpus == 1 && run.train.dev.gpus[0] == 2 &&
              run.train.amp.dtype == AMP_OFF,
          "baseline on GPU %d of %d", run.train.dev.gpus[0], run.train.dev.ngpus);
    cli_argv_free(args);
    static const char *const gpu_ddp[] = {"--gpu", "2,0", "--mode", "ddp", "--out", "d", NULL};
    args = main_run(&c, gpus, TRAIN_DDP, "d", gpu_ddp, &run, "main --gpu 2,0 ddp");
    CHECK(args && run.train.dev.ngpus == 2 && run.train.amp.dtype == AMP_F16,
          "ddp on %d GPUs, amp %d (want fp16 without --amp)", run.train.dev.ngpus,
          (int)run.train.amp.dtype);
    cli_argv_free(args);

    /* no devices given: the runs get those the main job picked (device_pick) */
    char *none[] = {"--nproc-per-node", "2", "--epochs", "1", NULL};
    CHECK(parse(&c, CLI_MAIN, none + 2) == 0, "main --epochs 1: %s", error_get());
    c.train.dev.ngpus = 2;
    c.train.dev.gpus[0] = 0;
    c.train.dev.gpus[1] = 1;
    static const char *const picked_base[] = {"--epochs", "1", "--mode", "baseline", "--out",
                                              "b", "--gpu", "0", NULL};
    cli_argv_free(main_run(&c, none + 2, TRAIN_BASELINE, "b", picked_base, &run,
                           "picked GPUs: baseline"));
    static const char *const picked_ddp[] = {"--epochs", "1", "--mode", "ddp", "--out", "d",
                                             "--gpu", "0,1", NULL};
    args = main_run(&c, none + 2, TRAIN_DDP, "d", picked_ddp, &run, "picked GPUs: ddp");
    CHECK(args && run.train.dev.ngpus == 2, "picked GPUs: the DDP run has %d",
          run.train.dev.ngpus);
    cli_argv_free(args);
    /* --nproc-per-node is the DDP run's (train's); the baseline is one CPU rank */
    CHECK(parse(&c, CLI_MAIN, none) == 0 && c.train.dev.cpu_ranks == 2, "main --nproc: %s",
          error_get());
    static const char *const nproc_base[] = {"--epochs", "1", "--mode", "baseline", "--out",
                                             "b", "--cpu", "1", NULL};
    cli_argv_free(main_run(&c, none, TRAIN_BASELINE, "b", nproc_base, &run,
                           "--nproc-per-node 2: baseline"));
    static const char *const nproc_ddp[] = {"--nproc-per-node", "2", "--epochs", "1", "--mode",
                                            "ddp", "--out", "d", NULL};
    args = main_run(&c, none, TRAIN_DDP, "d", nproc_ddp, &run, "--nproc-per-node 2: ddp");
    CHECK(args && run.train.dev.cpu_ranks == 2 && cli_world(&run) == 2,
          "--nproc-per-node 2: the DDP run's ranks: %d", cli_world(&run));
    cli_argv_free(args);
}

/* parse fails with one line containing want */
static void check_error(enum cli_command cmd, char **args, const char *want)
{
    struct cli c;
    error_clear();
    int rc = parse(&c, cmd, args);
    const char *msg = error_get();
    CHECK(rc == -1 && strstr(msg, want) && !strchr(msg, '\n'),
          "%s %s...: rc %d, error '%s', want '%s'", cmd == CLI_MAIN ? "main" : "train",
          args[0], rc, msg, want);
}

static void test_errors(void)
{
    char *a[] = {"--lr", NULL};
    check_error(CLI_TRAIN, a, "--lr needs a value (see ddpprof --help)");
    char *b[] = {"--bogus", "1", NULL};
    check_error(CLI_TRAIN, b, "unknown option '--bogus'");
    char *c[] = {"-b", "0", NULL};
    check_error(CLI_TRAIN, c, "-b: '0' is not an integer in [1, 65536]");
    char *d[] = {"--lr", "-1", NULL};
    check_error(CLI_TRAIN, d, "--lr: '-1' is not a number in [0, 1e+06]");
    char *e[] = {"--mode", "both", NULL};
    check_error(CLI_TRAIN, e, "--mode: 'both' is not baseline or ddp");
    char *f[] = {"--mode", "bogus", NULL};
    check_error(CLI_MAIN, f, "--mode: 'bogus' is not both, baseline or ddp");
    char *g[] = {"--amp", "fp8", NULL};
    check_error(CLI_TRAIN, g, "--amp: 'fp8' is not fp16, bf16 or off");
    char *h[] = {"--cpu", "2", "--gpu", "0", NULL};
    check_error(CLI_TRAIN, h, "--cpu and --gpu exclude each other");
    char *i[] = {"--cpu", "2", "--mode", "baseline", NULL};
    check_error(CLI_TRAIN, i, "--mode baseline runs one process");
    char *j[] = {"--gpu", "0,x", NULL};
    check_error(CLI_TRAIN, j, "--gpu: 'x' is not an integer in [0, 1023]");
    char *k[] = {"--normalize", "0.5", NULL};
    check_error(CLI_TRAIN, k, "--normalize: '0.5' is not MEAN,STD");
    char *l[] = {"stray", NULL};
    check_error(CLI_TRAIN, l, "unexpected argument 'stray'");
    char *m[] = {"--trace", "all", NULL};
    check_error(CLI_TRAIN, m, "--trace: 'all' is not off, nvtx, kernels or full");

    struct cli cl;
    char *help[] = {"--epochs", "2", "-h", NULL};
    CHECK(parse(&cl, CLI_TRAIN, help) == 0 && cl.help == 1, "-h sets help");
    char *help2[] = {"--help", NULL};
    CHECK(parse(&cl, CLI_WORKER, help2) == 0 && cl.help == 1, "worker --help sets help");
}

static void test_usage(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL, "open_memstream");
    if (!f)
        return;
    cli_usage(f);
    fclose(f);
    static const char *const options[] = {
        "--cpu N", "--gpu LIST", "--mode both|baseline|ddp", "--mode baseline|ddp",
        "--model NAME", "-e, --epochs N", "-b, --batch-size N", "--lr X", "--momentum X",
        "--weight-decay X", "--seed N", "--no-shuffle", "--limit N", "--test-limit N",
        "--data DIR", "--normalize MEAN,STD", "--init FILE", "--resume CKPT", "--threads N",
        "--out DIR", "--quiet", "--trace off|nvtx|kernels|full", "--amp fp16|bf16|off",
        "--loss-scale-init X", "--loss-scale-growth X", "--loss-scale-backoff X",
        "--loss-scale-interval N", "--bucket-cap-mb X", "--no-sync-bn", "--timeout S",
        "--master-addr A", "--master-port P", "-h, --help"};
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        CHECK(strstr(text, options[i]) != NULL, "usage lacks '%s'", options[i]);
    /* defaults come from train_opts_default */
    struct train_opts d;
    train_opts_default(&d);
    char want[128];
    snprintf(want, sizeof want, "epochs (default %d)", d.run.epochs);
    CHECK(strstr(text, want) != NULL, "usage lacks '%s'", want);
    snprintf(want, sizeof want, "(default %d)\n  --master-addr", d.dev.timeout_ms / 1000);
    CHECK(strstr(text, want) != NULL, "usage lacks the --timeout default '%s'", want);
    snprintf(want, sizeof want, "(default %s)", d.data.dir);
    CHECK(strstr(text, want) != NULL, "usage lacks '%s'", want);
    /* --resume is a training option, not a mixed-precision one */
    const char *training = strstr(text, "\ntraining:\n"), *output = strstr(text, "\noutput:\n"),
               *resume = strstr(text, "--resume");
    CHECK(training && output && resume && training < resume && resume < output,
          "--resume is not under training:");
    CHECK(strstr(text, "applies to the DDP run") != NULL, "--amp: the main job's rule missing");
    CHECK(strstr(text, "1 for train") != NULL, "--cpu: train's default missing");
    free(text);
}

/* the ResNet18 recipe's options (issue 12): parsed, and through the main job's train argv
 * and train's worker argv unchanged */
static void test_recipe_options(void)
{
    char *line[] = {"--cpu", "2", "--model", "resnet18", "--resnet-width", "8", "--dataset",
                    "synthetic", "--optimizer", "adam", "--lr", "0.01", "--lr-scale-by-world",
                    "--drop-last", "--save-every-epoch", "--data", "/tmp/cifar-10-batches-bin",
                    NULL};
    struct cli c;
    CHECK(parse(&c, CLI_MAIN, line) == 0, "recipe line: %s", error_get());
    const struct train_opts *t = &c.train;
    CHECK(strcmp(t->model, "resnet18") == 0 && t->model_opts.width == 8 && t->data.dataset == 3 &&
              t->optim.kind == 1 && t->optim.lr_scale_by_world == 1 && t->data.drop_last == 1 &&
              t->run.save_every_epoch == 1,
          "model %s width %d dataset %d optimizer %d scale %d drop %d save %d", t->model,
          t->model_opts.width, t->data.dataset, t->optim.kind, t->optim.lr_scale_by_world,
          t->data.drop_last, t->run.save_every_epoch);
    /* main -> train (the DDP run) -> worker */
    struct cli run, back;
    char **child[2] = {NULL, NULL}; /* back's strings point into the last one */
    const int n = argv_count(line);
    CHECK(cli_main_run(&c, n, line, 0, TRAIN_DDP, "/tmp/run/ddp", "ddpprof", &run, &child[0]) ==
              0,
          "main run: %s", error_get());
    if (child[0])
        child[1] = cli_child_argv(CLI_TRAIN, argv_count(child[0]), child[0], 2, CLI_WORKER,
                                  worker_own, NULL, "ddpprof");
    for (int hop = 0; hop < 2 && child[hop]; hop++) {
        const enum cli_command to = hop == 0 ? CLI_TRAIN : CLI_WORKER;
        const int rc = cli_parse(&back, to, argv_count(child[hop]), child[hop], 2);
        CHECK(rc == 0, "child argv: %s", error_get());
        const struct train_opts *b = &back.train;
        CHECK(rc == 0 && strcmp(b->model, "resnet18") == 0 && b->model_opts.width == 8 &&
                  b->data.dataset == t->data.dataset && b->optim.kind == t->optim.kind &&
                  b->optim.lr_scale_by_world && b->data.drop_last && b->run.save_every_epoch &&
                  b->optim.lr == t->optim.lr && strcmp(b->data.dir, t->data.dir) == 0,
              "%s argv lost a recipe option", hop == 0 ? "train" : "worker");
    }
    CHECK(child[1] != NULL, "worker argv: %s", error_get());
    cli_argv_free(child[0]);
    cli_argv_free(child[1]);
    char *bad[] = {"--optimizer", "lamb", NULL};
    CHECK(parse(&c, CLI_TRAIN, bad) == -1 && strstr(error_get(), "sgd or adam"),
          "--optimizer lamb: '%s'", error_get());
    char *bad2[] = {"--dataset", "imagenet", NULL};
    CHECK(parse(&c, CLI_TRAIN, bad2) == -1 && strstr(error_get(), "synthetic"),
          "--dataset imagenet: '%s'", error_get());
}

/* the meta.csv that cli_write_meta writes for c's options, into buf */
static void meta_of(const struct cli *c, char *buf, size_t cap)
{
    char dir[] = "/tmp/test_cli_meta_XXXXXX", path[64];
    buf[0] = '\0';
    struct runlog log = {0};
    CHECK(mkdtemp(dir) != NULL && runlog_open(&log, dir) == 0, "run log in %s", dir);
    cli_write_meta(&c->train, &log);
    CHECK(runlog_close(&log) == 0, "closing the run log: %s", error_get());
    snprintf(path, sizeof path, "%s/meta.csv", dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/meta.csv", dir);
    remove(path);
    remove(dir);
}

static void test_meta(void)
{
    struct cli c;
    char meta[4096];
    char *resnet[] = {"--model", "resnet18", "--resnet-width", "8", NULL};
    CHECK(parse(&c, CLI_TRAIN, resnet) == 0, "resnet18 options: %s", error_get());
    meta_of(&c, meta, sizeof meta);
    CHECK(strcmp(meta, "key,value\nresnet_width,8\n") == 0, "resnet18's options in meta.csv: '%s'",
          meta);
    char *convnet[] = {"--resnet-width", "8", NULL};
    CHECK(parse(&c, CLI_TRAIN, convnet) == 0, "convnet options: %s", error_get());
    meta_of(&c, meta, sizeof meta);
    CHECK(strcmp(meta, "key,value\n") == 0, "convnet's meta.csv records a resnet18 option: '%s'",
          meta);
}

int main(void)
{
    test_rich_round_trip();
    test_nodes();
    test_defaults_round_trip();
    test_mode_defaults();
    test_main_runs();
    test_errors();
    test_usage();
    test_recipe_options();
    test_meta();
    return test_finish();
}
