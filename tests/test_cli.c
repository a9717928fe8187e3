/* test_cli.c — the command line table (trainer/cli.c), without running anything:
 *
 * 1. a rich command line parses to the values it spells, and the argv a child gets
 *    (cli_argv) parses back to exactly the same options, for train -> worker, the main
 *    job -> train and main -> main, GPU lists included;
 * 2. the defaults that depend on others: ddp with more than one rank, amp fp16 for ddp
 *    and off for baseline, an explicit --amp off on 2 ranks kept through the child argv,
 *    a worker always ddp;
 * 3. the main job's runs: the baseline on the first device in fp32 whatever --amp says,
 *    the DDP run on all devices with --amp;
 * 4. strict parsing: one error line naming the option and the value, as before;
 * 5. --help text: every option, the defaults of train_opts_default, --resume under
 *    training, the main job's --mode listed;
 * 6. the ResNet18 recipe's options (--model resnet18, --resnet-width, --dataset,
 *    --optimizer, --lr-scale-by-world, --drop-last, --save-every-epoch) through the main
 *    job's train argv and train's worker argv. */
#include "cli.h"
#include "common/error.h"
#include "device.h"
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
    CHECK(same_str(x->data_dir, y->data_dir), "%s: data %s vs %s", what, x->data_dir,
          y->data_dir);
    CHECK(x->epochs == y->epochs && x->batch_size == y->batch_size,
          "%s: epochs %d/%d batch %d/%d", what, x->epochs, y->epochs, x->batch_size,
          y->batch_size);
    CHECK(x->lr == y->lr && x->momentum == y->momentum && x->weight_decay == y->weight_decay,
          "%s: lr %.9g/%.9g momentum %.9g/%.9g wd %.9g/%.9g", what, (double)x->lr,
          (double)y->lr, (double)x->momentum, (double)y->momentum, (double)x->weight_decay,
          (double)y->weight_decay);
    CHECK(x->seed == y->seed && x->shuffle == y->shuffle, "%s: seed/shuffle differ", what);
    CHECK(x->limit == y->limit && x->test_limit == y->test_limit, "%s: limits %ld/%ld %ld/%ld",
          what, x->limit, y->limit, x->test_limit, y->test_limit);
    CHECK(x->norm_mean == y->norm_mean && x->norm_std == y->norm_std,
          "%s: normalize %.9g,%.9g vs %.9g,%.9g", what, (double)x->norm_mean,
          (double)x->norm_std, (double)y->norm_mean, (double)y->norm_std);
    CHECK(same_str(x->out_dir, y->out_dir), "%s: out %s vs %s", what, x->out_dir, y->out_dir);
    CHECK(same_str(x->init_path, y->init_path), "%s: init differs", what);
    CHECK(same_str(x->resume_path, y->resume_path), "%s: resume differs", what);
    CHECK(x->threads == y->threads, "%s: threads %d vs %d", what, x->threads, y->threads);
    CHECK(x->mode == y->mode, "%s: mode %d vs %d", what, (int)x->mode, (int)y->mode);
    CHECK(x->bucket_cap_mb == y->bucket_cap_mb, "%s: bucket cap %.17g vs %.17g", what,
          x->bucket_cap_mb, y->bucket_cap_mb);
    CHECK(x->sync_bn == y->sync_bn && x->quiet == y->quiet, "%s: sync_bn/quiet differ", what);
    CHECK(x->timeout_ms == y->timeout_ms, "%s: timeout %d vs %d ms", what, x->timeout_ms,
          y->timeout_ms);
    CHECK(x->amp == y->amp, "%s: amp %d vs %d", what, (int)x->amp, (int)y->amp);
    CHECK(x->scale_init == y->scale_init && x->scale_growth == y->scale_growth &&
              x->scale_backoff == y->scale_backoff && x->scale_interval == y->scale_interval,
          "%s: GradScaler options differ", what);
    CHECK(x->trace == y->trace, "%s: trace %d vs %d", what, (int)x->trace, (int)y->trace);
    CHECK(x->cpu_ranks == y->cpu_ranks, "%s: cpu %d vs %d", what, x->cpu_ranks, y->cpu_ranks);
    CHECK(x->ngpus == y->ngpus, "%s: %d vs %d GPUs", what, x->ngpus, y->ngpus);
    for (int i = 0; i < x->ngpus && i < y->ngpus; i++)
        CHECK(x->gpus[i] == y->gpus[i], "%s: gpu %d: %d vs %d", what, i, x->gpus[i], y->gpus[i]);
    CHECK(x->comm == y->comm && x->checkpoint_every == y->checkpoint_every,
          "%s: comm %d/%d checkpoint-every %ld/%ld", what, (int)x->comm, (int)y->comm,
          x->checkpoint_every, y->checkpoint_every);
    CHECK(a->runs == b->runs, "%s: runs %d vs %d", what, (int)a->runs, (int)b->runs);
    CHECK(same_str(a->master_addr, b->master_addr) && a->master_port == b->master_port,
          "%s: master %s:%d vs %s:%d", what, a->master_addr, a->master_port, b->master_addr,
          b->master_port);
}

static int parse(struct cli *c, enum cli_command cmd, char **args)
{
    return cli_parse(c, cmd, argv_count(args), args, 0);
}

/* parse(argv(c)) as `to` equals c; also prints the child command line */
static void check_round_trip(const struct cli *c, enum cli_command to, const char *what)
{
    char **child = cli_argv(c, to, "ddpprof");
    CHECK(child != NULL, "%s: cli_argv: %s", what, error_get());
    if (!child)
        return;
    printf("%s:", what);
    for (char **p = child; *p; p++)
        printf(" %s", *p);
    printf("\n");
    int first = to == CLI_MAIN ? 1 : 2;
    CHECK(strcmp(child[0], "ddpprof") == 0, "%s: argv[0] is '%s'", what, child[0]);
    if (to != CLI_MAIN)
        CHECK(strcmp(child[1], to == CLI_TRAIN ? "train" : "worker") == 0,
              "%s: argv[1] is '%s'", what, child[1]);
    struct cli back;
    int rc = cli_parse(&back, to, argv_count(child), child, first);
    CHECK(rc == 0, "%s: the child's argv does not parse: %s", what, error_get());
    if (to != CLI_MAIN)
        back.runs = c->runs; /* the main job's --mode is not train's or worker's */
    if (rc == 0)
        check_same(c, &back, what);
    cli_argv_free(child);
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
    CHECK(t->cpu_ranks == 3 && t->ngpus == 0, "cpu %d gpus %d", t->cpu_ranks, t->ngpus);
    CHECK(t->epochs == 5 && t->batch_size == 17, "-e/-b: %d %d", t->epochs, t->batch_size);
    CHECK(t->lr == 0.0123f && t->momentum == 0.9f && t->weight_decay == 1e-4f, "SGD options");
    CHECK(t->seed == 42 && t->shuffle == 0, "seed %llu shuffle %d",
          (unsigned long long)t->seed, t->shuffle);
    CHECK(t->limit == 1234 && t->test_limit == 99, "limits %ld %ld", t->limit, t->test_limit);
    CHECK(strcmp(t->data_dir, "/tmp/data dir") == 0, "data '%s'", t->data_dir);
    CHECK(t->norm_mean == 0.1307f && t->norm_std == 0.3081f, "normalize");
    CHECK(t->threads == 3 && t->quiet == 1 && t->trace == PROBE_NVTX, "threads/quiet/trace");
    CHECK(t->mode == TRAIN_DDP, "3 ranks without --mode: mode %d, want ddp", (int)t->mode);
    CHECK(t->amp == AMP_BF16, "--amp bf16: %d", (int)t->amp);
    CHECK(t->scale_init == 1024.0f && t->scale_growth == 3.0f && t->scale_backoff == 0.25f &&
              t->scale_interval == 7,
          "GradScaler options");
    CHECK(t->bucket_cap_mb == 0.02 && t->sync_bn == 0, "DDP options");
    /* 4.35 * 1000 is 4349.999... in doubles: rounded, not truncated */
    CHECK(t->timeout_ms == 4350, "--timeout 4.35: %d ms", t->timeout_ms);
    CHECK(strcmp(c.master_addr, "10.0.0.1") == 0 && c.master_port == 29501, "master");
    check_round_trip(&c, CLI_WORKER, "train -> worker");
    check_round_trip(&c, CLI_TRAIN, "train -> train");

    char *gpus[] = {"--gpu", "3,1", "--lr", "0.3", "--bucket-cap-mb", "1e-6",
                    "--mode", "baseline", NULL};
    CHECK(parse(&c, CLI_MAIN, gpus) == 0, "main job with GPUs: %s", error_get());
    CHECK(c.train.ngpus == 2 && c.train.gpus[0] == 3 && c.train.gpus[1] == 1,
          "--gpu 3,1: %d GPUs %d %d", c.train.ngpus, c.train.gpus[0], c.train.gpus[1]);
    CHECK(c.runs == CLI_RUNS_BASELINE, "main --mode baseline: runs %d", (int)c.runs);
    check_round_trip(&c, CLI_MAIN, "main -> main");
    check_round_trip(&c, CLI_TRAIN, "main -> train");

    /* a GPU listed twice: two ranks share it (host-staged collectives, device.c) */
    char *shared[] = {"--gpu", "0,0", "--mode", "ddp", NULL};
    CHECK(parse(&c, CLI_TRAIN, shared) == 0, "--gpu 0,0: %s", error_get());
    CHECK(c.train.ngpus == 2 && c.train.gpus[0] == 0 && c.train.gpus[1] == 0,
          "--gpu 0,0: %d ranks on GPUs %d %d", c.train.ngpus, c.train.gpus[0], c.train.gpus[1]);
    check_round_trip(&c, CLI_WORKER, "shared GPU: train -> worker");
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
    CHECK(c.train.cpu_ranks == 2 && cli_world(&c) == 4 && c.train.mode == TRAIN_DDP,
          "--nproc-per-node 2 on 2 nodes: cpu %d world %d mode %d", c.train.cpu_ranks,
          cli_world(&c), (int)c.train.mode);
    CHECK(c.train.comm == device_comm_index("gloo") && c.train.checkpoint_every == 5,
          "--comm gloo --checkpoint-every 5: %d %ld", (int)c.train.comm,
          c.train.checkpoint_every);
    CHECK(cli_is_given(&c, "--master-port", CLI_TRAIN) &&
              !cli_is_given(&c, "--seed", CLI_TRAIN),
          "cli_is_given");
    check_round_trip(&c, CLI_WORKER, "nodes: train -> worker");
    char **child = cli_argv(&c, CLI_TRAIN, "ddpprof");
    struct cli back;
    CHECK(child && cli_parse(&back, CLI_TRAIN, argv_count(child), child, 2) == 0 &&
              back.nnodes == 2 && back.node_rank == 1 && back.nproc_per_node == 2 &&
              back.max_restarts == 3,
          "nodes: train -> train keeps the node options: %s", error_get());
    cli_argv_free(child);
    child = cli_argv(&c, CLI_WORKER, "ddpprof");
    int has_nodes = 0;
    for (char **p = child; p && *p; p++)
        has_nodes |= strcmp(*p, "--nnodes") == 0 || strcmp(*p, "--max-restarts") == 0;
    CHECK(child && !has_nodes, "a worker's argv has no node options");
    cli_argv_free(child);

    struct cli main_c, run;
    CHECK(cli_parse(&main_c, CLI_MAIN, 12, nodes, 0) == 0, "main nodes line: %s", error_get());
    CHECK(cli_main_run(&main_c, TRAIN_BASELINE, "/tmp/b", &run) == 0 && run.nnodes == 1 &&
              run.max_restarts == 0 && run.train.cpu_ranks == 1 && cli_world(&run) == 1,
          "the baseline of a 2-node main job: %s nnodes %d cpu %d", error_get(), run.nnodes,
          run.train.cpu_ranks);
    CHECK(cli_main_run(&main_c, TRAIN_DDP, "/tmp/d", &run) == 0 && run.nnodes == 2 &&
              cli_world(&run) == 4,
          "the DDP run of a 2-node main job: %s", error_get());

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
}

static void test_defaults_round_trip(void)
{
    char *none[] = {NULL};
    struct cli c;
    CHECK(parse(&c, CLI_TRAIN, none) == 0, "empty train line: %s", error_get());
    struct train_opts want;
    train_opts_default(&want);
    CHECK(c.train.epochs == want.epochs && c.train.batch_size == want.batch_size &&
              c.train.lr == want.lr && c.train.timeout_ms == want.timeout_ms,
          "defaults are train_opts_default's");
    CHECK(c.train.mode == TRAIN_BASELINE && c.train.amp == AMP_OFF,
          "one rank: baseline without AMP (mode %d amp %d)", (int)c.train.mode,
          (int)c.train.amp);
    char **child = cli_argv(&c, CLI_WORKER, "ddpprof");
    CHECK(child != NULL, "cli_argv: %s", error_get());
    if (child) {
        /* prog, worker, --mode X, --amp Y: only the options whose default depends on others */
        CHECK(argv_count(child) == 6, "defaults gave %d words, want 6", argv_count(child));
        cli_argv_free(child);
    }
    check_round_trip(&c, CLI_TRAIN, "defaults");
}

static void test_mode_defaults(void)
{
    struct cli c;
    char *two[] = {"--cpu", "2", NULL};
    CHECK(parse(&c, CLI_TRAIN, two) == 0 && c.train.mode == TRAIN_DDP &&
              c.train.amp == AMP_F16,
          "--cpu 2: mode %d amp %d, want ddp fp16", (int)c.train.mode, (int)c.train.amp);
    char *two_off[] = {"--cpu", "2", "--amp", "off", NULL};
    CHECK(parse(&c, CLI_TRAIN, two_off) == 0 && c.train.mode == TRAIN_DDP &&
              c.train.amp == AMP_OFF,
          "--cpu 2 --amp off: mode %d amp %d", (int)c.train.mode, (int)c.train.amp);
    check_round_trip(&c, CLI_WORKER, "--amp off on 2 ranks");
    char *one_ddp[] = {"--cpu", "1", "--mode", "ddp", NULL};
    CHECK(parse(&c, CLI_TRAIN, one_ddp) == 0 && c.train.mode == TRAIN_DDP &&
              c.train.amp == AMP_F16,
          "--cpu 1 --mode ddp: mode %d amp %d", (int)c.train.mode, (int)c.train.amp);
    char *worker_base[] = {"--mode", "baseline", NULL};
    CHECK(parse(&c, CLI_WORKER, worker_base) == 0 && c.train.mode == TRAIN_DDP &&
              c.train.amp == AMP_F16,
          "a worker is ddp: mode %d amp %d", (int)c.train.mode, (int)c.train.amp);
    char *order[] = {"--amp", "bf16", "--epochs", "2", "--epochs", "4", NULL};
    CHECK(parse(&c, CLI_TRAIN, order) == 0 && c.train.epochs == 4 && c.train.amp == AMP_BF16,
          "a later option wins: epochs %d", c.train.epochs);
}

static void test_main_runs(void)
{
    struct cli c, run;
    char *line[] = {"--cpu", "3", "--amp", "bf16", "--epochs", "2", "--out", "/tmp/x", NULL};
    CHECK(parse(&c, CLI_MAIN, line) == 0, "main line: %s", error_get());
    CHECK(c.runs == CLI_RUNS_BOTH, "main --mode default: %d", (int)c.runs);
    CHECK(cli_main_run(&c, TRAIN_BASELINE, "/tmp/x/baseline", &run) == 0, "baseline: %s",
          error_get());
    CHECK(run.train.cpu_ranks == 1 && run.train.mode == TRAIN_BASELINE &&
              run.train.amp == AMP_OFF && run.train.epochs == 2 &&
              strcmp(run.train.out_dir, "/tmp/x/baseline") == 0,
          "baseline run: cpu %d mode %d amp %d (want 1 baseline off)", run.train.cpu_ranks,
          (int)run.train.mode, (int)run.train.amp);
    check_round_trip(&run, CLI_TRAIN, "main baseline run");
    CHECK(cli_main_run(&c, TRAIN_DDP, "/tmp/x/ddp", &run) == 0, "ddp: %s", error_get());
    CHECK(run.train.cpu_ranks == 3 && run.train.mode == TRAIN_DDP && run.train.amp == AMP_BF16,
          "ddp run: cpu %d mode %d amp %d (want 3 ddp bf16)", run.train.cpu_ranks,
          (int)run.train.mode, (int)run.train.amp);
    check_round_trip(&run, CLI_TRAIN, "main ddp run");

    char *gpus[] = {"--gpu", "2,0", NULL};
    CHECK(parse(&c, CLI_MAIN, gpus) == 0, "main --gpu 2,0: %s", error_get());
    CHECK(cli_main_run(&c, TRAIN_BASELINE, "b", &run) == 0 && run.train.ngpus == 1 &&
              run.train.gpus[0] == 2 && run.train.amp == AMP_OFF,
          "baseline on GPU %d of %d", run.train.gpus[0], run.train.ngpus);
    CHECK(cli_main_run(&c, TRAIN_DDP, "d", &run) == 0 && run.train.ngpus == 2 &&
              run.train.amp == AMP_F16,
          "ddp on %d GPUs, amp %d (want fp16 without --amp)", run.train.ngpus,
          (int)run.train.amp);
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
    check_error(CLI_TRAIN, m, "--trace: 'all' is not off, nvtx or full");

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
        "--out DIR", "--quiet", "--trace off|nvtx|full", "--amp fp16|bf16|off",
        "--loss-scale-init X", "--loss-scale-growth X", "--loss-scale-backoff X",
        "--loss-scale-interval N", "--bucket-cap-mb X", "--no-sync-bn", "--timeout S",
        "--master-addr A", "--master-port P", "-h, --help"};
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        CHECK(strstr(text, options[i]) != NULL, "usage lacks '%s'", options[i]);
    /* defaults come from train_opts_default */
    struct train_opts d;
    train_opts_default(&d);
    char want[128];
    snprintf(want, sizeof want, "epochs (default %d)", d.epochs);
    CHECK(strstr(text, want) != NULL, "usage lacks '%s'", want);
    snprintf(want, sizeof want, "(default %d)\n  --master-addr", d.timeout_ms / 1000);
    CHECK(strstr(text, want) != NULL, "usage lacks the --timeout default '%s'", want);
    snprintf(want, sizeof want, "(default %s)", d.data_dir);
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
    CHECK(strcmp(t->model, "resnet18") == 0 && t->resnet_width == 8 && t->dataset == 3 &&
              t->optimizer == 1 && t->lr_scale_by_world == 1 && t->drop_last == 1 &&
              t->save_every_epoch == 1,
          "model %s width %d dataset %d optimizer %d scale %d drop %d save %d", t->model,
          t->resnet_width, t->dataset, t->optimizer, t->lr_scale_by_world, t->drop_last,
          t->save_every_epoch);
    struct cli run, back;
    char **child[2] = {NULL, NULL}; /* back's strings point into the last one */
    CHECK(cli_main_run(&c, TRAIN_DDP, "/tmp/run/ddp", &run) == 0, "main run: %s", error_get());
    for (int hop = 0; hop < 2; hop++) {
        const enum cli_command to = hop == 0 ? CLI_TRAIN : CLI_WORKER;
        child[hop] = cli_argv(hop == 0 ? &run : &back, to, "ddpprof");
        CHECK(child[hop] != NULL, "cli_argv: %s", error_get());
        if (!child[hop])
            break;
        const int rc = cli_parse(&back, to, argv_count(child[hop]), child[hop], 2);
        CHECK(rc == 0, "child argv: %s", error_get());
        const struct train_opts *b = &back.train;
        CHECK(rc == 0 && strcmp(b->model, "resnet18") == 0 && b->resnet_width == 8 &&
                  b->dataset == t->dataset && b->optimizer == t->optimizer &&
                  b->lr_scale_by_world && b->drop_last && b->save_every_epoch &&
                  b->lr == t->lr && strcmp(b->data_dir, t->data_dir) == 0,
              "%s argv lost a recipe option", hop == 0 ? "train" : "worker");
    }
    cli_argv_free(child[0]);
    cli_argv_free(child[1]);
    char *bad[] = {"--optimizer", "lamb", NULL};
    CHECK(parse(&c, CLI_TRAIN, bad) == -1 && strstr(error_get(), "sgd or adam"),
          "--optimizer lamb: '%s'", error_get());
    char *bad2[] = {"--dataset", "imagenet", NULL};
    CHECK(parse(&c, CLI_TRAIN, bad2) == -1 && strstr(error_get(), "synthetic"),
          "--dataset imagenet: '%s'", error_get());
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
    return test_finish();
}
