/* cli.c — the trainer's option table (common/options.h parses it and prints its usage),
 * the defaults that depend on other options, and the child argv (see cli.h). */
#include "cli.h"

#include "common/error.h"
#include "common/options.h"
#include "data/dataset.h"
#include "device.h"
#include "launch/dist_env.h"
#include "launch/launcher.h"
#include "nn/optim.h"
#include "probes/runlog.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define CLI_ALL (CLI_MAIN | CLI_TRAIN | CLI_WORKER)

#define FIELD(f) OPT_FIELD(struct cli, f)

static int cli_parse_pair(void *base, const struct opt *o, const char *opt, const char *s);
static int cli_format_pair(const void *base, const struct opt *o, char *buf, size_t cap);

static const struct opt_choice runs_choices[] = {
    {"both", CLI_RUNS_BOTH}, {"baseline", CLI_RUNS_BASELINE}, {"ddp", CLI_RUNS_DDP}, {NULL, 0}};
static const struct opt_choice mode_choices[] = {
    {"baseline", TRAIN_BASELINE}, {"ddp", TRAIN_DDP}, {NULL, 0}};
static const struct opt_choice amp_choices[] = {
    {"fp16", AMP_F16}, {"bf16", AMP_BF16}, {"off", AMP_OFF}, {NULL, 0}};
static const struct opt_choice trace_choices[] = {
    {"off", PROBE_OFF}, {"nvtx", PROBE_NVTX}, {"kernels", PROBE_KERNELS}, {"full", PROBE_FULL},
    {NULL, 0}};
static const struct opt_choice dataset_choices[] = {
    {"auto", DATASET_AUTO}, {"idx", DATASET_IDX}, {"cifar", DATASET_CIFAR},
    {"synthetic", DATASET_SYNTHETIC}, {NULL, 0}};
static const struct opt_choice optimizer_choices[] = {
    {"sgd", OPTIM_SGD}, {"adam", OPTIM_ADAM}, {NULL, 0}};
static const struct opt_choice on_off_choices[] = {{"off", 0}, {"on", 1}, {NULL, 0}};
static const struct opt_choice conv_algo_choices[] = {{"auto", CONV_ALGO_AUTO},
                                                      {"direct", CONV_ALGO_DIRECT},
                                                      {"winograd", CONV_ALGO_WINOGRAD},
                                                      {NULL, 0}};

_Static_assert(sizeof(enum cli_runs) == sizeof(int) && sizeof(enum train_mode) == sizeof(int) &&
                   sizeof(enum amp_dtype) == sizeof(int) &&
                   sizeof(enum probe_mode) == sizeof(int) &&
                   sizeof(enum conv_algo) == sizeof(int),
               "CLI_ENUM stores an int");
_Static_assert(sizeof(((struct train_opts *)0)->data.dataset) == sizeof(int) &&
                   sizeof(((struct train_opts *)0)->optim.kind) == sizeof(int),
               "--dataset and --optimizer are ints");

#define G_DEV "devices"
#define G_TRAIN "training"
#define G_OUT "output"
#define G_AMP "mixed precision"
#define G_DDP "DDP"
#define G_NODES "several nodes and restarts (torchrun's flags)"
#define G_OTHER "other"
#define G_TUNE "tune (candidate changes measured: ddpprof tune)"

/* in --help order, grouped */
static const struct opt cli_options[] = {
    {"--cpu", NULL, OPT_INT, CLI_ALL, FIELD(train.dev.cpu_ranks), .min = 1, .max = 1024,
     .metavar = "N", .group = G_DEV,
     .dflt = "1 for train; the main job takes every GPU, else 2 CPU ranks, 1 on one core",
     .help = "N CPU ranks"},
    {"--gpu", NULL, OPT_LIST, CLI_ALL, OPT_LIST_FIELD(struct cli, train.dev.gpus, train.dev.ngpus),
     .item = OPT_INT, .max = 1023,
     .metavar = "LIST", .group = G_DEV,
     .help = "GPUs, one rank each, e.g. 0,1 (needs a CUDA build and a GPU); a GPU listed "
             "twice, e.g. 0,0, runs two ranks on it with host-staged shm collectives "
             "instead of NCCL"},
    {"--oversubscribe", NULL, OPT_FLAG, CLI_MAIN | CLI_TRAIN, FIELD(oversubscribe),
     .flag_value = 1, .group = G_DEV,
     .help = "start more CPU ranks than this machine has cores (refused without it: every "
             "rank computes flat out, so they only thrash)"},
    {"--mode", NULL, OPT_ENUM, CLI_MAIN, FIELD(runs), .choices = runs_choices, .group = G_DEV,
     .help = "the fp32 baseline on one device, the DDP run on all of them, or both"},
    {"--repeat", NULL, OPT_INT, CLI_MAIN, FIELD(repeat), .min = 1, .max = 100, .metavar = "N",
     .group = G_DEV,
     .help = "make the baseline and the DDP run N times, alternately (repeat 1 in baseline/ and "
             "ddp/, repeat k in repeat-k/); the report gives the median and the spread "
             "(min-max) of wall time, throughput and speedup"},
    {"--mode", NULL, OPT_ENUM, CLI_TRAIN | CLI_WORKER, FIELD(train.mode),
     .choices = mode_choices, .group = G_DEV,
     .dflt = "ddp when N > 1, else baseline; a worker is always ddp",
     .help = "single-process fp32 baseline, or DDP over the ranks"},

    {"--model", NULL, OPT_STRING, CLI_ALL, FIELD(train.model), .metavar = "NAME",
     .group = G_TRAIN, .help_fn = model_help},
    {"--resnet-width", NULL, OPT_INT, CLI_ALL, FIELD(train.model_opts.width), .min = 1,
     .max = 4096, .metavar = "N", .group = G_TRAIN, .tag = RUN_META_resnet_width,
     .help = "resnet18: channels of its first stage, doubled at each of the next three (64 is "
             "the example's network; smaller ones keep its structure and names)"},
    {"--epochs", "-e", OPT_INT, CLI_ALL, FIELD(train.run.epochs), .min = 1, .max = 1000000,
     .metavar = "N", .group = G_TRAIN, .help = "epochs"},
    {"--batch-size", "-b", OPT_INT, CLI_ALL, FIELD(train.data.batch_size), .min = 1, .max = 65536,
     .metavar = "N", .group = G_TRAIN, .help = "batch size per rank"},
    {"--optimizer", NULL, OPT_ENUM, CLI_ALL, FIELD(train.optim.kind),
     .choices = optimizer_choices, .group = G_TRAIN,
     .help = "torch.optim.SGD, or Adam with PyTorch's defaults (betas 0.9, 0.999, eps 1e-8)"},
    {"--lr", NULL, OPT_DOUBLE, CLI_ALL, FIELD(train.optim.lr), .min = 0.0, .max = 1e6,
     .metavar = "X", .group = G_TRAIN, .help = "learning rate"},
    {"--lr-scale-by-world", NULL, OPT_FLAG, CLI_ALL, FIELD(train.optim.lr_scale_by_world),
     .flag_value = 1, .group = G_TRAIN,
     .help = "train with the learning rate times the number of ranks (the example's "
             "lr * GPUs)"},
    {"--momentum", NULL, OPT_DOUBLE, CLI_ALL, FIELD(train.optim.momentum), .min = 0.0, .max = 1.0,
     .metavar = "X", .group = G_TRAIN, .help = "SGD momentum"},
    {"--weight-decay", NULL, OPT_DOUBLE, CLI_ALL, FIELD(train.optim.weight_decay), .min = 0.0,
     .max = 1e6, .metavar = "X", .group = G_TRAIN, .help = "weight decay (SGD and Adam)"},
    {"--seed", NULL, OPT_INT, CLI_ALL, FIELD(train.seed), .min = 0, .max = 0x7fffffff,
     .metavar = "N", .group = G_TRAIN, .help = "shuffling and initialisation seed"},
    {"--no-shuffle", NULL, OPT_FLAG, CLI_ALL, FIELD(train.data.shuffle), .flag_value = 0,
     .group = G_TRAIN, .help = "keep the data set order"},
    {"--limit", NULL, OPT_INT, CLI_ALL, FIELD(train.data.limit), .min = 1, .max = 0x7fffffff,
     .metavar = "N", .dflt = "all", .group = G_TRAIN,
     .help = "train on the first N samples only"},
    {"--test-limit", NULL, OPT_INT, CLI_ALL, FIELD(train.data.test_limit), .min = 1,
     .max = 0x7fffffff, .metavar = "N", .dflt = "all", .group = G_TRAIN,
     .help = "test on the first N samples only"},
    {"--drop-last", NULL, OPT_FLAG, CLI_ALL, FIELD(train.data.drop_last), .flag_value = 1,
     .group = G_TRAIN, .help = "drop each epoch's last incomplete batch (DataLoader's "
                               "drop_last)"},
    {"--dataset", NULL, OPT_ENUM, CLI_ALL, FIELD(train.data.dataset), .choices = dataset_choices,
     .group = G_TRAIN,
     .help = "the data: IDX files (train-images-idx3-ubyte, ...) or CIFAR-10 binary batches "
             "(cifar-10-batches-bin: data_batch_1.bin .. data_batch_5.bin, test_batch.bin) in "
             "--data, or 5000 training and 1000 test synthetic images from --seed (accuracy on "
             "them is meaningless); auto: IDX for convnet, for resnet18 CIFAR-10 when --data "
             "holds data_batch_1.bin, else synthetic. Nothing is downloaded"},
    {"--data", NULL, OPT_STRING, CLI_ALL, FIELD(train.data.dir), .metavar = "DIR",
     .group = G_TRAIN,
     .help = "data directory"},
    {"--normalize", NULL, OPT_CUSTOM, CLI_ALL, FIELD(train.data.norm_mean),
     .offset2 = offsetof(struct cli, train.data.norm_std), .parse = cli_parse_pair,
     .format = cli_format_pair, .metavar = "MEAN,STD", .group = G_TRAIN,
     .help = "normalise 1-channel pixels after scaling to [0,1] (3x32x32 images always use "
             "CIFAR-10's per-channel statistics)"},
    {"--init", NULL, OPT_STRING, CLI_ALL, FIELD(train.run.init_path), .metavar = "FILE",
     .group = G_TRAIN, .help = "start from a safetensors state_dict (PyTorch names)"},
    {"--resume", NULL, OPT_STRING, CLI_ALL, FIELD(train.run.resume_path), .metavar = "CKPT",
     .group = G_TRAIN,
     .help = "continue from a checkpoint.safetensors (or epoch_N.safetensors) of an earlier "
             "run"},
    {"--checkpoint-every", NULL, OPT_INT, CLI_ALL, FIELD(train.run.checkpoint_every), .min = 1,
     .max = 0x7fffffff, .metavar = "STEPS", .dflt = "every epoch only", .group = G_TRAIN,
     .help = "rank 0 also saves checkpoint.safetensors every STEPS steps (resumable "
             "mid-epoch with the same ranks and batch size)"},
    {"--threads", NULL, OPT_INT, CLI_ALL, FIELD(train.dev.threads), .min = 1, .max = 1024,
     .metavar = "N", .dflt = "cores / ranks", .group = G_TRAIN,
     .help = "CPU threads per rank"},
    {"--conv-algo", NULL, OPT_ENUM, CLI_ALL, FIELD(train.dev.conv_algo),
     .choices = conv_algo_choices, .group = G_TRAIN,
     .help = "CPU ranks' convolution algorithms: auto, the fastest within PyTorch's accuracy "
             "(per op within 4x of PyTorch float32's error against float64: direct, GEMM and "
             "the own Winograd F(2x2,3x3)); direct, no Winograd at all; winograd, auto plus "
             "oneDNN's Winograd F(4x4,3x3) on AVX-512 machines, faster and less exact "
             "(docs/USAGE.md, Convolution algorithms). GPU ranks: cuDNN chooses"},
    {"--tf32", NULL, OPT_ENUM, CLI_ALL, FIELD(train.dev.tf32), .choices = on_off_choices,
     .group = G_TRAIN,
     .help = "GPU ranks' fp32 convolutions: on, cuDNN may run them on TF32 tensor cores "
             "(PyTorch's defaults: torch.backends.cudnn.allow_tf32 True; matmuls stay fp32, "
             "torch.backends.cuda.matmul.allow_tf32 False); off, strict fp32 everywhere, the "
             "CPU oracle's precision. Recorded in meta.csv as tf32"},

    {"--out", NULL, OPT_STRING, CLI_ALL, FIELD(train.run.out_dir), .metavar = "DIR",
     .dflt = "results/<date>-<time>-<model>", .group = G_OUT, .help = "run directory"},
    {"--overwrite", NULL, OPT_FLAG, CLI_ALL, FIELD(train.run.overwrite), .flag_value = 1,
     .group = G_OUT,
     .help = "reuse a non-empty run directory: its run files (meta.csv, metrics.csv, every "
             "rankN.trace.csv, a killed checkpoint writer's temporary) are removed first; "
             "without it a non-empty --out is refused"},
    {"--quiet", NULL, OPT_FLAG, CLI_ALL, FIELD(train.run.quiet), .flag_value = 1, .group = G_OUT,
     .help = "no progress lines"},
    {"--save-every-epoch", NULL, OPT_FLAG, CLI_ALL, FIELD(train.run.save_every_epoch),
     .flag_value = 1, .group = G_OUT,
     .help = "rank 0 also writes epoch_N.safetensors (model and optimizer state, for "
             "--resume) after each epoch N"},
    {"--trace", NULL, OPT_ENUM, CLI_ALL, FIELD(train.run.trace), .choices = trace_choices,
     .group = G_OUT, .help = "probes: nothing; NVTX + host trace; + CUPTI's kernel times (the "
                             "GPU's, no CUDA event); + CUDA events and per-layer ranges"},
    {"--warmup-steps", NULL, OPT_INT, CLI_MAIN, FIELD(warmup_steps), .min = 0, .max = 1000000,
     .metavar = "N", .group = G_OUT,
     .dflt = "until the step time settles, at most 10 (report/FORMULAS.md)",
     .help = "the report leaves each run's first N steps out of the per-step statistics "
             "(phases, overlap, buckets, stragglers) and of the throughput and speedup; 0 "
             "keeps them all"},

    {"--amp", NULL, OPT_ENUM, CLI_ALL, FIELD(train.amp.dtype), .choices = amp_choices,
     .dflt = "fp16 for ddp, off for baseline", .group = G_AMP,
     .help = "autocast conv/linear; in the main job it applies to the DDP run, the baseline "
             "stays fp32"},
    {"--loss-scale-init", NULL, OPT_DOUBLE, CLI_ALL, FIELD(train.amp.scale_init), .min = 1e-30,
     .max = 1e30, .metavar = "X", .group = G_AMP, .help = "GradScaler initial scale"},
    {"--loss-scale-growth", NULL, OPT_DOUBLE, CLI_ALL, FIELD(train.amp.scale_growth), .min = 1.0,
     .max = 1e6, .metavar = "X", .group = G_AMP, .help = "growth factor"},
    {"--loss-scale-backoff", NULL, OPT_DOUBLE, CLI_ALL, FIELD(train.amp.scale_backoff),
     .min = 1e-6, .max = 1.0, .metavar = "X", .group = G_AMP, .help = "backoff factor"},
    {"--loss-scale-interval", NULL, OPT_INT, CLI_ALL, FIELD(train.amp.scale_interval), .min = 1,
     .max = 0x7fffffff, .metavar = "N", .group = G_AMP,
     .help = "clean steps before growing"},

    {"--bucket-cap-mb", NULL, OPT_DOUBLE, CLI_ALL, FIELD(train.ddp.bucket_cap_mb), .min = 1e-6,
     .max = 1e6, .metavar = "X", .group = G_DDP,
     .help = "gradient bucket cap in MiB, fractions allowed"},
    {"--no-sync-bn", NULL, OPT_FLAG, CLI_ALL, FIELD(train.ddp.sync_bn), .flag_value = 0,
     .group = G_DDP, .help = "keep BatchNorm local instead of SyncBatchNorm"},
    {"--comm", NULL, OPT_ENUM, CLI_ALL, FIELD(train.dev.comm), .choice_at = device_comm_name,
     .group = G_DDP,
     .help = "collectives: auto is nccl on GPUs, shm when every CPU rank is on one host, "
             "gloo otherwise"},
    {"--timeout", NULL, OPT_DOUBLE, CLI_ALL, FIELD(train.dev.timeout_ms), .min = 0.001,
     .max = 1e6, .scale = 1000.0, .metavar = "S", .group = G_DDP,
     .help = "seconds any collective or rendezvous may wait"},
    {"--master-addr", NULL, OPT_STRING, CLI_ALL, FIELD(master_addr), .metavar = "A",
     .group = G_DDP,
     .help = "rendezvous host: rank 0's (node 0's); for worker it wins over MASTER_ADDR"},
    {"--master-port", NULL, OPT_INT, CLI_ALL, FIELD(master_port), .min = 1, .max = 65535,
     .metavar = "P", .dflt = "a free one on one node, else 29500", .group = G_DDP,
     .help = "rendezvous port (with --nnodes > 1 the node agents' store, as torchrun's); for "
             "worker it wins over MASTER_PORT"},

    {"--nnodes", NULL, OPT_INT, CLI_MAIN | CLI_TRAIN, FIELD(nnodes), .min = 1, .max = 4096,
     .metavar = "N", .group = G_NODES,
     .help = "nodes in the job; start ddpprof on each with the same options"},
    {"--node-rank", NULL, OPT_INT, CLI_MAIN | CLI_TRAIN, FIELD(node_rank), .min = 0,
     .max = 4095, .metavar = "R", .group = G_NODES,
     .help = "this node (0 hosts the rendezvous at --master-addr:--master-port)"},
    {"--nproc-per-node", NULL, OPT_INT, CLI_MAIN | CLI_TRAIN, FIELD(nproc_per_node), .min = 1,
     .max = 1024, .metavar = "P", .dflt = "--cpu N, or the GPUs of --gpu", .group = G_NODES,
     .help = "ranks on this node (CPU ranks unless --gpu names P GPUs)"},
    {"--max-restarts", NULL, OPT_INT, CLI_MAIN | CLI_TRAIN, FIELD(max_restarts), .min = 0,
     .max = 1000, .metavar = "K", .group = G_NODES,
     .help = "when a rank fails, stop every node's ranks and restart them all from the latest "
             "checkpoint, up to K times"},

    {"--rounds", NULL, OPT_INT, CLI_TUNE, FIELD(tune_rounds), .min = 2, .max = 100,
     .metavar = "N", .group = G_TUNE,
     .help = "interleaved A/B rounds: each runs the given configuration, the same again (the "
             "noise) and every candidate once, in an order rotated a round"},
    {"--tune-steps", NULL, OPT_INT, CLI_TUNE, FIELD(tune_steps), .min = 5, .max = 100000,
     .metavar = "S", .group = G_TUNE,
     .help = "measured steps a trial, after its 5 warm-up steps"},
    {"--candidates", NULL, OPT_STRING, CLI_TUNE, FIELD(tune_candidates),
     .metavar = "NAME=ARGS;...", .dflt = "the changes the advice ranks: one bucket, smaller "
     "buckets, --no-sync-bn, AMP on or off, the other host comm", .group = G_TUNE,
     .help = "the changes to measure, each options added to the given ones (a word NAME=VALUE "
             "in capitals sets the trial's environment)"},

    {"--help", "-h", OPT_FLAG, CLI_ALL | CLI_TUNE, FIELD(help), .flag_value = 1,
     .group = G_OTHER,
     .help = "this text, also after train, worker, report or tune"},
};

#define CLI_NOPTIONS ((int)(sizeof cli_options / sizeof cli_options[0]))
_Static_assert(sizeof cli_options / sizeof cli_options[0] <= 64, "struct cli.given has 64 bits");

void cli_defaults(struct cli *c)
{
    memset(c, 0, sizeof *c);
    train_opts_default(&c->train);
    c->runs = CLI_RUNS_BOTH;
    c->master_addr = DIST_ENV_DEFAULT_ADDR;
    c->nnodes = 1;
    c->repeat = 1;
    c->warmup_steps = -1; /* detected by the report */
    c->tune_rounds = 5;
    c->tune_steps = 30;
}

/* ------------------------------------------------------------------ the table */

/* cmd's view of the table: tune's trials are train runs, so it takes train's options
 * besides its own */
static struct opt_parser cli_parser(enum cli_command cmd)
{
    return (struct opt_parser){.opts = cli_options, .nopts = CLI_NOPTIONS,
                               .takes = cmd == CLI_TUNE ? CLI_TUNE | CLI_TRAIN : (unsigned)cmd};
}

static int cli_takes(const struct opt *o, enum cli_command cmd)
{
    const struct opt_parser p = cli_parser(cmd);
    return opt_takes(&p, o);
}

/* the index of the option spelt a (name or alias) that cmd takes, or -1 */
static int cli_find(const char *a, enum cli_command cmd)
{
    const struct opt_parser p = cli_parser(cmd);
    return opt_find(&p, a);
}

static int cli_given(const struct cli *c, const char *name, enum cli_command cmd)
{
    const struct opt_parser p = cli_parser(cmd);
    return opt_given(&p, c->given, name);
}

long cli_option_field(const char *word, int *takes_value)
{
    const int k = cli_find(word, CLI_TRAIN);
    if (takes_value)
        *takes_value = k >= 0 && cli_options[k].kind != OPT_FLAG;
    return k < 0 ? -1 : (long)cli_options[k].offset;
}

int cli_is_given(const struct cli *c, const char *name, enum cli_command cmd)
{
    return cli_given(c, name, cmd);
}

int cli_world(const struct cli *c)
{
    return c->nnodes * device_ranks(&c->train.dev);
}

/* ------------------------------------------------------------------ --normalize */

/* "MEAN,STD" into the two floats at o->offset and o->offset2 */
static int cli_parse_pair(void *base, const struct opt *o, const char *opt, const char *s)
{
    char buf[128], what[160];
    const char *comma = strchr(s, ',');
    if (!comma || strlen(s) >= sizeof buf)
        return error_set("%s: '%s' is not MEAN,STD (e.g. 0.1307,0.3081)", opt, s);
    memcpy(buf, s, (size_t)(comma - s));
    buf[comma - s] = '\0';
    double m = 0.0, d = 1.0;
    snprintf(what, sizeof what, "%s mean", opt);
    if (opt_parse_number(what, buf, NULL, -1e6, 1e6, &m))
        return -1;
    snprintf(what, sizeof what, "%s std", opt);
    if (opt_parse_number(what, comma + 1, NULL, 1e-12, 1e6, &d))
        return -1;
    float fm = (float)m, fd = (float)d;
    memcpy((char *)base + o->offset, &fm, sizeof fm);
    memcpy((char *)base + o->offset2, &fd, sizeof fd);
    return 0;
}

static int cli_format_pair(const void *base, const struct opt *o, char *buf, size_t cap)
{
    float a, b;
    memcpy(&a, (const char *)base + o->offset, sizeof a);
    memcpy(&b, (const char *)base + o->offset2, sizeof b);
    const struct opt one = {.kind = OPT_DOUBLE, .size = sizeof(float)};
    char ta[40], tb[40];
    opt_format(&one, &a, ta, sizeof ta);
    opt_format(&one, &b, tb, sizeof tb);
    snprintf(buf, cap, "%s,%s", ta, tb);
    return 1;
}

/* ------------------------------------------------------------------ parsing */

/* The defaults that depend on other options, once every option is known. */
static int cli_resolve(struct cli *c, enum cli_command cmd)
{
    struct train_opts *t = &c->train;
    if (c->node_rank >= c->nnodes)
        return error_set("--node-rank %d is not below --nnodes %d (nodes count from 0)",
                         c->node_rank, c->nnodes);
    if (c->nproc_per_node && t->dev.ngpus && c->nproc_per_node != t->dev.ngpus)
        return error_set("--nproc-per-node %d but --gpu lists %d GPU%s: one rank per GPU",
                         c->nproc_per_node, t->dev.ngpus, t->dev.ngpus == 1 ? "" : "s");
    if (c->nproc_per_node && t->dev.cpu_ranks && c->nproc_per_node != t->dev.cpu_ranks)
        return error_set("--nproc-per-node %d and --cpu %d disagree: give one of them",
                         c->nproc_per_node, t->dev.cpu_ranks);
    if (c->nproc_per_node && !t->dev.ngpus)
        t->dev.cpu_ranks = c->nproc_per_node;
    int ranks = cli_world(c);
    if (cmd == CLI_WORKER)
        t->mode = TRAIN_DDP; /* one rank of a DDP job */
    else if (!cli_given(c, "--mode", CLI_TRAIN) && ranks > 1)
        t->mode = TRAIN_DDP;
    if (!cli_given(c, "--amp", cmd)) /* the tutorial: DDP + AMP, the baseline in fp32 */
        t->amp.dtype = t->mode == TRAIN_DDP ? AMP_F16 : AMP_OFF;
    /* (tune's trials are train runs: it refuses what they would) */
    if ((cmd == CLI_TRAIN || cmd == CLI_TUNE) && t->mode == TRAIN_BASELINE && ranks > 1)
        return error_set("--mode baseline runs one process: give one device (or --mode ddp)");
    return 0;
}

int cli_parse(struct cli *c, enum cli_command cmd, int argc, char **argv, int first)
{
    cli_defaults(c);
    const struct opt_parser p = cli_parser(cmd);
    if (opt_parse(&p, c, argc, argv, first, &c->given))
        return -1;
    if (c->help)
        return 0;
    if (c->train.dev.cpu_ranks && c->train.dev.ngpus)
        return error_set("--cpu and --gpu exclude each other: pick one");
    return cli_resolve(c, cmd);
}

/* ------------------------------------------------------------------ meta.csv */

void cli_write_meta(const struct train_opts *o, struct runlog *log)
{
    struct cli c;
    cli_defaults(&c);
    c.train = *o;
    for (int i = 0; i < CLI_NOPTIONS; i++) {
        const struct opt *opt = &cli_options[i];
        char value[1024];
        if (opt->tag == RUN_META_NONE || !model_option_applies(o->model, opt->name))
            continue;
        if (opt->kind == OPT_FLAG)
            snprintf(value, sizeof value, "%lld", (long long)opt_int(opt, &c));
        else
            opt_format(opt, &c, value, sizeof value);
        runlog_meta(log, (enum run_meta_key)opt->tag, "%s", value);
    }
}

/* ------------------------------------------------------------------ child argv */

void cli_argv_free(char **argv)
{
    if (!argv)
        return;
    for (char **p = argv; *p; p++)
        free(*p);
    free(argv);
}

static int cli_push(char **argv, int *n, const char *s)
{
    if (!(argv[*n] = strdup(s)))
        return -1;
    (*n)++;
    return 0;
}

/* 1 when option o is one of the names in own (NULL-terminated, may be NULL) */
static int cli_owned(const struct opt *o, const char *const *own)
{
    for (; own && *own; own++)
        if (strcmp(o->name, *own) == 0)
            return 1;
    return 0;
}

char **cli_child_argv(enum cli_command from, int argc, char **argv, int first,
                      enum cli_command to, const char *const *own, const char *const *add,
                      const char *prog)
{
    int nadd = 0;
    while (add && add[nadd])
        nadd++;
    char **out = calloc((size_t)(argc - first + nadd + 3), sizeof *out);
    int n = 0, bad = !out || cli_push(out, &n, prog) ||
                     cli_push(out, &n, to == CLI_TRAIN ? "train" : "worker");
    for (int i = first; i < argc && !bad; i++) {
        int k = cli_find(argv[i], from); /* NULL: an input the table does not know (none) */
        const struct opt *o = k >= 0 ? &cli_options[k] : NULL;
        const int words = o && o->kind != OPT_FLAG && i + 1 < argc ? 2 : 1;
        if (o && (!cli_takes(o, to) || cli_owned(o, own))) { /* to's parent decides it */
            i += words - 1;
            continue;
        }
        for (int w = 0; w < words && !bad; w++)
            bad = cli_push(out, &n, argv[i + w]);
        i += words - 1;
    }
    for (int i = 0; i < nadd && !bad; i++)
        bad = cli_push(out, &n, add[i]);
    if (bad) {
        cli_argv_free(out);
        error_set("out of memory for a command line of %d words", argc - first + nadd);
        return NULL;
    }
    return out;
}

int cli_main_run(const struct cli *c, int argc, char **argv, int first, enum train_mode mode,
                 const char *out, const char *prog, struct cli *run, char ***args)
{
    /* the devices: the baseline's is the first; the DDP run's the user's words, or, where
     * none were given, those the main job picked (device_pick) */
    struct device_opts dev = c->train.dev;
    if (mode == TRAIN_BASELINE)
        device_keep_first(&dev);
    const int picked = !cli_given(c, "--cpu", CLI_MAIN) && !cli_given(c, "--gpu", CLI_MAIN) &&
                       !cli_given(c, "--nproc-per-node", CLI_MAIN);
    char gpus[TRAIN_MAX_GPUS * 6], cpus[16];
    device_format_gpus(gpus, sizeof gpus, dev.gpus, dev.ngpus);
    snprintf(cpus, sizeof cpus, "%d", dev.cpu_ranks);
    const char *add[7] = {"--mode", mode == TRAIN_BASELINE ? "baseline" : "ddp", "--out", out};
    if ((mode == TRAIN_BASELINE || picked) && (dev.ngpus || dev.cpu_ranks)) {
        add[4] = dev.ngpus ? "--gpu" : "--cpu";
        add[5] = dev.ngpus ? gpus : cpus;
    }
    /* the baseline is one process of node 0, in fp32: the main job's devices, node options
     * and --amp are not its */
    static const char *const own_baseline[] = {
        "--out", "--cpu", "--gpu", "--nproc-per-node", "--nnodes", "--node-rank",
        "--max-restarts", "--amp", NULL};
    static const char *const own_ddp[] = {"--out", NULL};
    const char *const *own = mode == TRAIN_BASELINE ? own_baseline : own_ddp;
    if (!(*args = cli_child_argv(CLI_MAIN, argc, argv, first, CLI_TRAIN, own, add, prog)))
        return -1;
    int n = 0;
    while ((*args)[n])
        n++;
    if (cli_parse(run, CLI_TRAIN, n, *args, 2)) {
        cli_argv_free(*args);
        *args = NULL;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ usage */

/* the commands an option is marked with in --help, when not all of them */
static const char *cli_usage_who(const struct opt *o)
{
    return o->commands == CLI_TUNE                   ? "tune: "
           : o->commands == CLI_MAIN                 ? "main job: "
           : o->commands == (CLI_TRAIN | CLI_WORKER) ? "train, worker: "
           : o->commands == (CLI_MAIN | CLI_TRAIN)   ? "main job, train: "
                                                     : "";
}

void cli_usage(FILE *out)
{
    fputs("usage: ddpprof train [options]      train on this machine (baseline, or DDP with "
          "--mode ddp)\n"
          "       ddpprof worker [options]     one DDP rank, environment from "
          "torchrun/mpirun/Slurm\n"
          "       ddpprof [--cpu N | --gpu LIST] [--mode both|baseline|ddp] [options]\n"
          "                                    the main job: fp32 baseline on one device, "
          "DDP+AMP\n"
          "                                    on all, then the report (no device: GPUs, else "
          "CPU ranks)\n"
          "       ddpprof report INPUT... [--out DIR] [--kineto]\n"
          "                                    the tables from run directories or PyTorch profiler\n"
          "                                    traces (see ddpprof report --help)\n"
          "       ddpprof diff A B | ddpprof diff MAIN_JOB_DIR [--out DIR]\n"
          "                                    where the step-time change between two runs\n"
          "                                    comes from: diff.csv (ddpprof report --help)\n"
          "       ddpprof predict RUN_DIR [--world N] [--bucket-cap-mb X] ...\n"
          "                                    a run's step in another configuration, replayed\n"
          "                                    (see ddpprof predict --help)\n"
          "       ddpprof tune [train options] [--rounds N] [--candidates LIST]\n"
          "                                    candidate changes measured against the given\n"
          "                                    configuration in interleaved A/B trials\n"
          "       ddpprof --version | --help\n"
          "\n"
          "options (the main job, train and worker take them all, except where marked):\n",
          out);
    struct cli d;
    cli_defaults(&d);
    /* every option of the table, whichever command takes it */
    const struct opt_parser all = {.opts = cli_options, .nopts = CLI_NOPTIONS, .takes = ~0u};
    opt_usage(out, &all, &d, cli_usage_who);
}
