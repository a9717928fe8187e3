/* cli.c — the option table, and the parsing, usage text and child argv it drives (see
 * cli.h). */
#include "cli.h"

#include "common/error.h"
#include "data/dataset.h"
#include "device.h"
#include "launch/dist_env.h"
#include "launch/launcher.h"
#include "nn/optim.h"
#include "probes/runlog.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum cli_kind {
    CLI_FLAG,   /* no value: sets an int field to flag_value */
    CLI_INT,    /* an integer in [min, max] into an int, long or uint64_t field */
    CLI_DOUBLE, /* a number in [min, max] into a float or double field; with scale, into an
                   int field as round(value * scale) */
    CLI_STRING, /* a const char * pointing into argv */
    CLI_ENUM,   /* one of choices, into an int-sized enum field */
    CLI_LIST,   /* device numbers "0,1,3" into an int array, their count into field2 */
    CLI_PAIR,   /* "MEAN,STD" into two float fields (field and field2) */
};

struct cli_choice {
    const char *name;
    int value;
};

#define CLI_ALL (CLI_MAIN | CLI_TRAIN | CLI_WORKER)

struct cli_option {
    const char *name;     /* "--epochs" */
    const char *alias;    /* "-e", or NULL */
    enum cli_kind kind;
    unsigned commands;    /* the commands that take it: CLI_MAIN | CLI_TRAIN | CLI_WORKER */
    size_t offset, size;  /* the field in struct cli */
    size_t offset2;       /* CLI_LIST: the count (int); CLI_PAIR: the second float */
    double min, max;      /* CLI_INT, CLI_DOUBLE */
    double scale;         /* CLI_DOUBLE into an int field: stored units per 1 (0: none) */
    int flag_value;       /* CLI_FLAG */
    const struct cli_choice *choices; /* CLI_ENUM, ended by a NULL name */
    const char *(*choice_at)(int i); /* CLI_ENUM without choices: the i-th name (value i),
                                        NULL past the end (a registry elsewhere) */
    const char *metavar;  /* "N", "DIR" (CLI_ENUM: made from the choices) */
    const char *dflt;     /* the default in words where the value alone would mislead;
                             NULL: the value in cli_defaults; "": no default shown */
    enum run_meta_key meta; /* its row of meta.csv (probes/run_format.h), written by
                               cli_write_meta (RUN_META_NONE: none there, or written by the
                               run itself) */
    const char *(*help_fn)(void); /* the help made at run time (--model: the registry's), or NULL */
    int always;           /* in every child argv: its default depends on other options */
    int local;            /* never in a child argv (--help) */
    const char *group;
    const char *help;
};

#define FIELD(f) .offset = offsetof(struct cli, f), .size = sizeof(((struct cli *)0)->f)
#define FIELD2(f) .offset2 = offsetof(struct cli, f)

static const struct cli_choice runs_choices[] = {
    {"both", CLI_RUNS_BOTH}, {"baseline", CLI_RUNS_BASELINE}, {"ddp", CLI_RUNS_DDP}, {NULL, 0}};
static const struct cli_choice mode_choices[] = {
    {"baseline", TRAIN_BASELINE}, {"ddp", TRAIN_DDP}, {NULL, 0}};
static const struct cli_choice amp_choices[] = {
    {"fp16", AMP_F16}, {"bf16", AMP_BF16}, {"off", AMP_OFF}, {NULL, 0}};
static const struct cli_choice trace_choices[] = {
    {"off", PROBE_OFF}, {"nvtx", PROBE_NVTX}, {"kernels", PROBE_KERNELS}, {"full", PROBE_FULL},
    {NULL, 0}};
static const struct cli_choice dataset_choices[] = {
    {"auto", DATASET_AUTO}, {"idx", DATASET_IDX}, {"cifar", DATASET_CIFAR},
    {"synthetic", DATASET_SYNTHETIC}, {NULL, 0}};
static const struct cli_choice optimizer_choices[] = {
    {"sgd", OPTIM_SGD}, {"adam", OPTIM_ADAM}, {NULL, 0}};
static const struct cli_choice on_off_choices[] = {{"off", 0}, {"on", 1}, {NULL, 0}};
static const struct cli_choice conv_algo_choices[] = {{"auto", CONV_ALGO_AUTO},
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
static const struct cli_option cli_options[] = {
    {"--cpu", NULL, CLI_INT, CLI_ALL, FIELD(train.dev.cpu_ranks), .min = 1, .max = 1024,
     .metavar = "N", .group = G_DEV,
     .dflt = "1 for train; the main job takes every GPU, else 2 CPU ranks, 1 on one core",
     .help = "N CPU ranks"},
    {"--gpu", NULL, CLI_LIST, CLI_ALL, FIELD(train.dev.gpus), FIELD2(train.dev.ngpus), .max = 1023,
     .metavar = "LIST", .group = G_DEV,
     .help = "GPUs, one rank each, e.g. 0,1 (needs a CUDA build and a GPU); a GPU listed "
             "twice, e.g. 0,0, runs two ranks on it with host-staged shm collectives "
             "instead of NCCL"},
    {"--oversubscribe", NULL, CLI_FLAG, CLI_MAIN | CLI_TRAIN, FIELD(oversubscribe),
     .flag_value = 1, .group = G_DEV,
     .help = "start more CPU ranks than this machine has cores (refused without it: every "
             "rank computes flat out, so they only thrash)"},
    {"--mode", NULL, CLI_ENUM, CLI_MAIN, FIELD(runs), .choices = runs_choices, .group = G_DEV,
     .help = "the fp32 baseline on one device, the DDP run on all of them, or both"},
    {"--repeat", NULL, CLI_INT, CLI_MAIN, FIELD(repeat), .min = 1, .max = 100, .metavar = "N",
     .group = G_DEV,
     .help = "make the baseline and the DDP run N times, alternately (repeat 1 in baseline/ and "
             "ddp/, repeat k in repeat-k/); the report gives the median and the spread "
             "(min-max) of wall time, throughput and speedup"},
    {"--mode", NULL, CLI_ENUM, CLI_TRAIN | CLI_WORKER, FIELD(train.mode),
     .choices = mode_choices, .always = 1, .group = G_DEV,
     .dflt = "ddp when N > 1, else baseline; a worker is always ddp",
     .help = "single-process fp32 baseline, or DDP over the ranks"},

    {"--model", NULL, CLI_STRING, CLI_ALL, FIELD(train.model), .metavar = "NAME",
     .group = G_TRAIN, .help_fn = model_help},
    {"--resnet-width", NULL, CLI_INT, CLI_ALL, FIELD(train.model_opts.width), .min = 1,
     .max = 4096, .metavar = "N", .group = G_TRAIN, .meta = RUN_META_resnet_width,
     .help = "resnet18: channels of its first stage, doubled at each of the next three (64 is "
             "the example's network; smaller ones keep its structure and names)"},
    {"--epochs", "-e", CLI_INT, CLI_ALL, FIELD(train.run.epochs), .min = 1, .max = 1000000,
     .metavar = "N", .group = G_TRAIN, .help = "epochs"},
    {"--batch-size", "-b", CLI_INT, CLI_ALL, FIELD(train.data.batch_size), .min = 1, .max = 65536,
     .metavar = "N", .group = G_TRAIN, .help = "batch size per rank"},
    {"--optimizer", NULL, CLI_ENUM, CLI_ALL, FIELD(train.optim.kind),
     .choices = optimizer_choices, .group = G_TRAIN,
     .help = "torch.optim.SGD, or Adam with PyTorch's defaults (betas 0.9, 0.999, eps 1e-8)"},
    {"--lr", NULL, CLI_DOUBLE, CLI_ALL, FIELD(train.optim.lr), .min = 0.0, .max = 1e6,
     .metavar = "X", .group = G_TRAIN, .help = "learning rate"},
    {"--lr-scale-by-world", NULL, CLI_FLAG, CLI_ALL, FIELD(train.optim.lr_scale_by_world),
     .flag_value = 1, .group = G_TRAIN,
     .help = "train with the learning rate times the number of ranks (the example's "
             "lr * GPUs)"},
    {"--momentum", NULL, CLI_DOUBLE, CLI_ALL, FIELD(train.optim.momentum), .min = 0.0, .max = 1.0,
     .metavar = "X", .group = G_TRAIN, .help = "SGD momentum"},
    {"--weight-decay", NULL, CLI_DOUBLE, CLI_ALL, FIELD(train.optim.weight_decay), .min = 0.0,
     .max = 1e6, .metavar = "X", .group = G_TRAIN, .help = "weight decay (SGD and Adam)"},
    {"--seed", NULL, CLI_INT, CLI_ALL, FIELD(train.seed), .min = 0, .max = 0x7fffffff,
     .metavar = "N", .group = G_TRAIN, .help = "shuffling and initialisation seed"},
    {"--no-shuffle", NULL, CLI_FLAG, CLI_ALL, FIELD(train.data.shuffle), .flag_value = 0,
     .group = G_TRAIN, .help = "keep the data set order"},
    {"--limit", NULL, CLI_INT, CLI_ALL, FIELD(train.data.limit), .min = 1, .max = 0x7fffffff,
     .metavar = "N", .dflt = "all", .group = G_TRAIN,
     .help = "train on the first N samples only"},
    {"--test-limit", NULL, CLI_INT, CLI_ALL, FIELD(train.data.test_limit), .min = 1,
     .max = 0x7fffffff, .metavar = "N", .dflt = "all", .group = G_TRAIN,
     .help = "test on the first N samples only"},
    {"--drop-last", NULL, CLI_FLAG, CLI_ALL, FIELD(train.data.drop_last), .flag_value = 1,
     .group = G_TRAIN, .help = "drop each epoch's last incomplete batch (DataLoader's "
                               "drop_last)"},
    {"--dataset", NULL, CLI_ENUM, CLI_ALL, FIELD(train.data.dataset), .choices = dataset_choices,
     .group = G_TRAIN,
     .help = "the data: IDX files (train-images-idx3-ubyte, ...) or CIFAR-10 binary batches "
             "(cifar-10-batches-bin: data_batch_1.bin .. data_batch_5.bin, test_batch.bin) in "
             "--data, or 5000 training and 1000 test synthetic images from --seed (accuracy on "
             "them is meaningless); auto: IDX for convnet, for resnet18 CIFAR-10 when --data "
             "holds data_batch_1.bin, else synthetic. Nothing is downloaded"},
    {"--data", NULL, CLI_STRING, CLI_ALL, FIELD(train.data.dir), .metavar = "DIR",
     .group = G_TRAIN,
     .help = "data directory"},
    {"--normalize", NULL, CLI_PAIR, CLI_ALL, FIELD(train.data.norm_mean),
     FIELD2(train.data.norm_std), .metavar = "MEAN,STD", .group = G_TRAIN,
     .help = "normalise 1-channel pixels after scaling to [0,1] (3x32x32 images always use "
             "CIFAR-10's per-channel statistics)"},
    {"--init", NULL, CLI_STRING, CLI_ALL, FIELD(train.run.init_path), .metavar = "FILE",
     .group = G_TRAIN, .help = "start from a safetensors state_dict (PyTorch names)"},
    {"--resume", NULL, CLI_STRING, CLI_ALL, FIELD(train.run.resume_path), .metavar = "CKPT",
     .group = G_TRAIN,
     .help = "continue from a checkpoint.safetensors (or epoch_N.safetensors) of an earlier "
             "run"},
    {"--checkpoint-every", NULL, CLI_INT, CLI_ALL, FIELD(train.run.checkpoint_every), .min = 1,
     .max = 0x7fffffff, .metavar = "STEPS", .dflt = "every epoch only", .group = G_TRAIN,
     .help = "rank 0 also saves checkpoint.safetensors every STEPS steps (resumable "
             "mid-epoch with the same ranks and batch size)"},
    {"--threads", NULL, CLI_INT, CLI_ALL, FIELD(train.dev.threads), .min = 1, .max = 1024,
     .metavar = "N", .dflt = "cores / ranks", .group = G_TRAIN,
     .help = "CPU threads per rank"},
    {"--conv-algo", NULL, CLI_ENUM, CLI_ALL, FIELD(train.dev.conv_algo),
     .choices = conv_algo_choices, .group = G_TRAIN,
     .help = "CPU ranks' convolution algorithms: auto, the fastest within PyTorch's accuracy "
             "(per op within 4x of PyTorch float32's error against float64: direct, GEMM and "
             "the own Winograd F(2x2,3x3)); direct, no Winograd at all; winograd, auto plus "
             "oneDNN's Winograd F(4x4,3x3) on AVX-512 machines, faster and less exact "
             "(docs/USAGE.md, Convolution algorithms). GPU ranks: cuDNN chooses"},
    {"--tf32", NULL, CLI_ENUM, CLI_ALL, FIELD(train.dev.tf32), .choices = on_off_choices,
     .group = G_TRAIN,
     .help = "GPU ranks' fp32 convolutions: on, cuDNN may run them on TF32 tensor cores "
             "(PyTorch's defaults: torch.backends.cudnn.allow_tf32 True; matmuls stay fp32, "
             "torch.backends.cuda.matmul.allow_tf32 False); off, strict fp32 everywhere, the "
             "CPU oracle's precision. Recorded in meta.csv as tf32"},

    {"--out", NULL, CLI_STRING, CLI_ALL, FIELD(train.run.out_dir), .metavar = "DIR",
     .dflt = "results/<date>-<time>-<model>", .group = G_OUT, .help = "run directory"},
    {"--overwrite", NULL, CLI_FLAG, CLI_ALL, FIELD(train.run.overwrite), .flag_value = 1,
     .group = G_OUT,
     .help = "reuse a non-empty run directory: its run files (meta.csv, metrics.csv, every "
             "rankN.trace.csv, a killed checkpoint writer's temporary) are removed first; "
             "without it a non-empty --out is refused"},
    {"--quiet", NULL, CLI_FLAG, CLI_ALL, FIELD(train.run.quiet), .flag_value = 1, .group = G_OUT,
     .help = "no progress lines"},
    {"--save-every-epoch", NULL, CLI_FLAG, CLI_ALL, FIELD(train.run.save_every_epoch),
     .flag_value = 1, .group = G_OUT,
     .help = "rank 0 also writes epoch_N.safetensors (model and optimizer state, for "
             "--resume) after each epoch N"},
    {"--trace", NULL, CLI_ENUM, CLI_ALL, FIELD(train.run.trace), .choices = trace_choices,
     .group = G_OUT, .help = "probes: nothing; NVTX + host trace; + CUPTI's kernel times (the "
                             "GPU's, no CUDA event); + CUDA events and per-layer ranges"},
    {"--warmup-steps", NULL, CLI_INT, CLI_MAIN, FIELD(warmup_steps), .min = 0, .max = 1000000,
     .metavar = "N", .group = G_OUT,
     .dflt = "until the step time settles, at most 10 (report/FORMULAS.md)",
     .help = "the report leaves each run's first N steps out of the per-step statistics "
             "(phases, overlap, buckets, stragglers) and of the throughput and speedup; 0 "
             "keeps them all"},

    {"--amp", NULL, CLI_ENUM, CLI_ALL, FIELD(train.amp.dtype), .choices = amp_choices, .always = 1,
     .dflt = "fp16 for ddp, off for baseline", .group = G_AMP,
     .help = "autocast conv/linear; in the main job it applies to the DDP run, the baseline "
             "stays fp32"},
    {"--loss-scale-init", NULL, CLI_DOUBLE, CLI_ALL, FIELD(train.amp.scale_init), .min = 1e-30,
     .max = 1e30, .metavar = "X", .group = G_AMP, .help = "GradScaler initial scale"},
    {"--loss-scale-growth", NULL, CLI_DOUBLE, CLI_ALL, FIELD(train.amp.scale_growth), .min = 1.0,
     .max = 1e6, .metavar = "X", .group = G_AMP, .help = "growth factor"},
    {"--loss-scale-backoff", NULL, CLI_DOUBLE, CLI_ALL, FIELD(train.amp.scale_backoff),
     .min = 1e-6, .max = 1.0, .metavar = "X", .group = G_AMP, .help = "backoff factor"},
    {"--loss-scale-interval", NULL, CLI_INT, CLI_ALL, FIELD(train.amp.scale_interval), .min = 1,
     .max = 0x7fffffff, .metavar = "N", .group = G_AMP,
     .help = "clean steps before growing"},

    {"--bucket-cap-mb", NULL, CLI_DOUBLE, CLI_ALL, FIELD(train.ddp.bucket_cap_mb), .min = 1e-6,
     .max = 1e6, .metavar = "X", .group = G_DDP,
     .help = "gradient bucket cap in MiB, fractions allowed"},
    {"--no-sync-bn", NULL, CLI_FLAG, CLI_ALL, FIELD(train.ddp.sync_bn), .flag_value = 0,
     .group = G_DDP, .help = "keep BatchNorm local instead of SyncBatchNorm"},
    {"--comm", NULL, CLI_ENUM, CLI_ALL, FIELD(train.dev.comm), .choice_at = device_comm_name,
     .group = G_DDP,
     .help = "collectives: auto is nccl on GPUs, shm when every CPU rank is on one host, "
             "gloo otherwise"},
    {"--timeout", NULL, CLI_DOUBLE, CLI_ALL, FIELD(train.dev.timeout_ms), .min = 0.001,
     .max = 1e6, .scale = 1000.0, .metavar = "S", .group = G_DDP,
     .help = "seconds any collective or rendezvous may wait"},
    {"--master-addr", NULL, CLI_STRING, CLI_ALL, FIELD(master_addr), .metavar = "A",
     .group = G_DDP,
     .help = "rendezvous host: rank 0's (node 0's); for worker it wins over MASTER_ADDR"},
    {"--master-port", NULL, CLI_INT, CLI_ALL, FIELD(master_port), .min = 1, .max = 65535,
     .metavar = "P", .dflt = "a free one on one node, else 29500", .group = G_DDP,
     .help = "rendezvous port (with --nnodes > 1 the node agents' store, as torchrun's); for "
             "worker it wins over MASTER_PORT"},

    {"--nnodes", NULL, CLI_INT, CLI_MAIN | CLI_TRAIN, FIELD(nnodes), .min = 1, .max = 4096,
     .metavar = "N", .group = G_NODES,
     .help = "nodes in the job; start ddpprof on each with the same options"},
    {"--node-rank", NULL, CLI_INT, CLI_MAIN | CLI_TRAIN, FIELD(node_rank), .min = 0,
     .max = 4095, .metavar = "R", .group = G_NODES,
     .help = "this node (0 hosts the rendezvous at --master-addr:--master-port)"},
    {"--nproc-per-node", NULL, CLI_INT, CLI_MAIN | CLI_TRAIN, FIELD(nproc_per_node), .min = 1,
     .max = 1024, .metavar = "P", .dflt = "--cpu N, or the GPUs of --gpu", .group = G_NODES,
     .help = "ranks on this node (CPU ranks unless --gpu names P GPUs)"},
    {"--max-restarts", NULL, CLI_INT, CLI_MAIN | CLI_TRAIN, FIELD(max_restarts), .min = 0,
     .max = 1000, .metavar = "K", .group = G_NODES,
     .help = "when a rank fails, stop every node's ranks and restart them all from the latest "
             "checkpoint, up to K times"},

    {"--rounds", NULL, CLI_INT, CLI_TUNE, FIELD(tune_rounds), .min = 2, .max = 100,
     .metavar = "N", .group = G_TUNE,
     .help = "interleaved A/B rounds: each runs the given configuration, the same again (the "
             "noise) and every candidate once, in an order rotated a round"},
    {"--tune-steps", NULL, CLI_INT, CLI_TUNE, FIELD(tune_steps), .min = 5, .max = 100000,
     .metavar = "S", .group = G_TUNE,
     .help = "measured steps a trial, after its 5 warm-up steps"},
    {"--candidates", NULL, CLI_STRING, CLI_TUNE, FIELD(tune_candidates),
     .metavar = "NAME=ARGS;...", .dflt = "the changes the advice ranks: one bucket, smaller "
     "buckets, --no-sync-bn, AMP on or off, the other host comm", .group = G_TUNE,
     .help = "the changes to measure, each options added to the given ones (a word NAME=VALUE "
             "in capitals sets the trial's environment)"},

    {"--help", "-h", CLI_FLAG, CLI_ALL | CLI_TUNE, FIELD(help), .flag_value = 1, .local = 1,
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

static int cli_takes(const struct cli_option *o, enum cli_command cmd)
{
    /* tune's trials are train runs: it takes train's options besides its own */
    const unsigned as = cmd == CLI_TUNE ? CLI_TUNE | CLI_TRAIN : (unsigned)cmd;
    return (o->commands & as) != 0;
}

/* the index of the option spelt a (name or alias) that cmd takes, or -1 */
static int cli_find(const char *a, enum cli_command cmd)
{
    for (int i = 0; i < CLI_NOPTIONS; i++) {
        const struct cli_option *o = &cli_options[i];
        if (cli_takes(o, cmd) &&
            (strcmp(a, o->name) == 0 || (o->alias && strcmp(a, o->alias) == 0)))
            return i;
    }
    return -1;
}

static int cli_given(const struct cli *c, const char *name, enum cli_command cmd)
{
    int i = cli_find(name, cmd);
    return i >= 0 && (c->given >> i & 1);
}

int cli_is_given(const struct cli *c, const char *name, enum cli_command cmd)
{
    return cli_given(c, name, cmd);
}

int cli_world(const struct cli *c)
{
    return c->nnodes * device_ranks(&c->train.dev);
}

static void cli_mark(struct cli *c, const char *name, enum cli_command cmd, int given)
{
    int i = cli_find(name, cmd);
    if (i < 0)
        return;
    if (given)
        c->given |= (uint64_t)1 << i;
    else
        c->given &= ~((uint64_t)1 << i);
}

static void *cli_field(struct cli *c, size_t offset) { return (char *)c + offset; }

static const void *cli_cfield(const struct cli *c, size_t offset)
{
    return (const char *)c + offset;
}

static int64_t cli_get_int(const struct cli *c, const struct cli_option *o)
{
    if (o->size == sizeof(int)) {
        int v;
        memcpy(&v, cli_cfield(c, o->offset), sizeof v);
        return v;
    }
    int64_t v; /* long or uint64_t, never above 0x7fffffff here */
    memcpy(&v, cli_cfield(c, o->offset), sizeof v);
    return v;
}

static void cli_set_int(struct cli *c, const struct cli_option *o, int64_t v)
{
    if (o->size == sizeof(int)) {
        int w = (int)v;
        memcpy(cli_field(c, o->offset), &w, sizeof w);
    } else {
        memcpy(cli_field(c, o->offset), &v, sizeof v);
    }
}

/* a CLI_DOUBLE field without scale */
static double cli_get_real(const struct cli *c, const struct cli_option *o)
{
    if (o->size == sizeof(float)) {
        float f;
        memcpy(&f, cli_cfield(c, o->offset), sizeof f);
        return f;
    }
    double d;
    memcpy(&d, cli_cfield(c, o->offset), sizeof d);
    return d;
}

/* ------------------------------------------------------------------ parsing */

static int cli_parse_long(const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < min || v > max)
        return error_set("%s: '%s' is not an integer in [%ld, %ld]", opt, s, min, max);
    *out = v;
    return 0;
}

static int cli_parse_double(const char *opt, const char *s, double min, double max,
                            double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < min || v > max)
        return error_set("%s: '%s' is not a number in [%g, %g]", opt, s, min, max);
    *out = v;
    return 0;
}

/* "MEAN,STD" */
static int cli_parse_pair(const char *opt, const char *s, float *mean, float *std)
{
    char buf[128], what[160];
    const char *comma = strchr(s, ',');
    if (!comma || strlen(s) >= sizeof buf)
        return error_set("%s: '%s' is not MEAN,STD (e.g. 0.1307,0.3081)", opt, s);
    memcpy(buf, s, (size_t)(comma - s));
    buf[comma - s] = '\0';
    double m = 0.0, d = 1.0;
    snprintf(what, sizeof what, "%s mean", opt);
    if (cli_parse_double(what, buf, -1e6, 1e6, &m))
        return -1;
    snprintf(what, sizeof what, "%s std", opt);
    if (cli_parse_double(what, comma + 1, 1e-12, 1e6, &d))
        return -1;
    *mean = (float)m;
    *std = (float)d;
    return 0;
}

/* "0,1,3" -> list, *n; ranges are not supported (nvidia-smi style lists are).  A device
 * may be listed more than once: one rank per entry, so "0,0" runs two ranks on device 0
 * (they share it through host-staged collectives, trainer/device.c). */
static int cli_parse_list(const char *opt, const char *s, long max, int *list, int *n)
{
    char buf[512];
    if (strlen(s) >= sizeof buf || !*s)
        return error_set("%s: '%s' is not a list of device numbers like 0,1", opt, s);
    strcpy(buf, s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        long id = 0;
        if (*n == TRAIN_MAX_GPUS)
            return error_set("%s: more than %d devices", opt, TRAIN_MAX_GPUS);
        if (cli_parse_long(opt, tok, 0, max, &id))
            return -1;
        list[(*n)++] = (int)id;
    }
    if (*n == 0)
        return error_set("%s: '%s' is not a list of device numbers like 0,1", opt, s);
    return 0;
}

/* "a, b or c" */
/* option o's i-th choice (its value in *value), NULL past the end */
static const char *cli_choice(const struct cli_option *o, int i, int *value)
{
    if (o->choice_at) {
        *value = i;
        return o->choice_at(i);
    }
    *value = o->choices[i].value;
    return o->choices[i].name;
}

static void cli_choice_list(const struct cli_option *o, const char *sep, const char *last,
                            char *buf, size_t cap)
{
    size_t at = 0;
    int n = 0, value;
    while (cli_choice(o, n, &value))
        n++;
    buf[0] = '\0';
    for (int i = 0; i < n && at < cap; i++) {
        int w = snprintf(buf + at, cap - at, "%s%s", i == 0 ? "" : i == n - 1 ? last : sep,
                         cli_choice(o, i, &value));
        if (w < 0)
            break;
        at += (size_t)w;
    }
}

/* option o, spelt opt, takes the value v (NULL for a flag) */
static int cli_set(struct cli *c, const struct cli_option *o, const char *opt, const char *v)
{
    long n = 0;
    double d = 0.0;
    switch (o->kind) {
    case CLI_FLAG:
        cli_set_int(c, o, o->flag_value);
        return 0;
    case CLI_INT:
        if (cli_parse_long(opt, v, (long)o->min, (long)o->max, &n))
            return -1;
        cli_set_int(c, o, n);
        return 0;
    case CLI_DOUBLE:
        if (cli_parse_double(opt, v, o->min, o->max, &d))
            return -1;
        if (o->scale > 0.0) {
            cli_set_int(c, o, llround(d * o->scale));
        } else if (o->size == sizeof(float)) {
            float f = (float)d;
            memcpy(cli_field(c, o->offset), &f, sizeof f);
        } else {
            memcpy(cli_field(c, o->offset), &d, sizeof d);
        }
        return 0;
    case CLI_STRING:
        memcpy(cli_field(c, o->offset), &v, sizeof v);
        return 0;
    case CLI_ENUM: {
        int value;
        const char *name;
        for (int i = 0; (name = cli_choice(o, i, &value)); i++)
            if (strcmp(v, name) == 0) {
                cli_set_int(c, o, value);
                return 0;
            }
        char names[128];
        cli_choice_list(o, ", ", " or ", names, sizeof names);
        return error_set("%s: '%s' is not %s", opt, v, names);
    }
    case CLI_LIST:
        return cli_parse_list(opt, v, (long)o->max, cli_field(c, o->offset),
                              cli_field(c, o->offset2));
    case CLI_PAIR:
        return cli_parse_pair(opt, v, cli_field(c, o->offset), cli_field(c, o->offset2));
    }
    return error_set("%s: option kind %d unknown", opt, (int)o->kind);
}

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
    if (cmd == CLI_TRAIN && t->mode == TRAIN_BASELINE && ranks > 1)
        return error_set("--mode baseline runs one process: give one device (or --mode ddp)");
    return 0;
}

int cli_parse(struct cli *c, enum cli_command cmd, int argc, char **argv, int first)
{
    cli_defaults(c);
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        int k = cli_find(a, cmd);
        if (k < 0) {
            if (a[0] != '-')
                return error_set("unexpected argument '%s' (see ddpprof --help)", a);
            return error_set("unknown option '%s' (see ddpprof --help)", a);
        }
        const struct cli_option *o = &cli_options[k];
        const char *v = NULL;
        if (o->kind != CLI_FLAG) {
            if (i + 1 >= argc)
                return error_set("%s needs a value (see ddpprof --help)", a);
            v = argv[++i];
        }
        if (cli_set(c, o, a, v))
            return -1;
        c->given |= (uint64_t)1 << k;
    }
    if (c->help)
        return 0;
    if (c->train.dev.cpu_ranks && c->train.dev.ngpus)
        return error_set("--cpu and --gpu exclude each other: pick one");
    return cli_resolve(c, cmd);
}

int cli_main_run(const struct cli *c, enum train_mode mode, const char *out, struct cli *run)
{
    *run = *c;
    if (mode == TRAIN_BASELINE) {
        device_keep_first(&run->train.dev);
        cli_mark(run, "--amp", CLI_TRAIN, 0); /* the baseline stays fp32 */
        /* one process on this node (node 0's main job makes it), nothing to restart */
        run->nnodes = 1;
        run->node_rank = 0;
        run->nproc_per_node = 0;
        run->max_restarts = 0;
    }
    run->train.mode = mode;
    cli_mark(run, "--mode", CLI_TRAIN, 1);
    run->train.run.out_dir = out;
    return cli_resolve(run, CLI_TRAIN);
}

/* ------------------------------------------------------------------ values as text */

/* The shortest text that reads back as v: as a float when is_float, as round(x * scale)
 * when scale > 0 (v is then that integer), else as the double v.  A float or a scaled
 * value that is a whole number is exact in the double x, so "%.0f" reads back as it. */
static void cli_format_real(char *buf, size_t cap, double v, int is_float, double scale)
{
    double x = scale > 0.0 ? v / scale : v;
    if (x == floor(x) && fabs(x) < 1e15) { /* whole numbers without an exponent: 300 */
        snprintf(buf, cap, "%.0f", x);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, x);
        double back = strtod(buf, NULL);
        if (scale > 0.0 ? (double)llround(back * scale) == v
                        : is_float ? (float)back == (float)v : back == v)
            return;
    }
}

/* The value of option o in c as the command line spells it; 0 when it has none (an unset
 * string, an empty list) and for flags. */
static int cli_format(const struct cli *c, const struct cli_option *o, char *buf, size_t cap)
{
    buf[0] = '\0';
    switch (o->kind) {
    case CLI_FLAG:
        return 0;
    case CLI_INT:
        snprintf(buf, cap, "%lld", (long long)cli_get_int(c, o));
        return 1;
    case CLI_DOUBLE:
        if (o->scale > 0.0)
            cli_format_real(buf, cap, (double)cli_get_int(c, o), 0, o->scale);
        else
            cli_format_real(buf, cap, cli_get_real(c, o), o->size == sizeof(float), 0.0);
        return 1;
    case CLI_STRING: {
        const char *s;
        memcpy(&s, cli_cfield(c, o->offset), sizeof s);
        if (!s)
            return 0;
        snprintf(buf, cap, "%s", s);
        return 1;
    }
    case CLI_ENUM: {
        int64_t v = cli_get_int(c, o);
        int value;
        const char *name;
        for (int i = 0; (name = cli_choice(o, i, &value)); i++)
            if (value == v) {
                snprintf(buf, cap, "%s", name);
                return 1;
            }
        snprintf(buf, cap, "%lld", (long long)v);
        return 1;
    }
    case CLI_LIST: {
        const int *list = cli_cfield(c, o->offset);
        int n;
        memcpy(&n, cli_cfield(c, o->offset2), sizeof n);
        size_t at = 0;
        for (int i = 0; i < n && at < cap; i++) {
            int w = snprintf(buf + at, cap - at, "%s%d", i ? "," : "", list[i]);
            if (w < 0)
                break;
            at += (size_t)w;
        }
        return n > 0;
    }
    case CLI_PAIR: {
        float a, b;
        char ta[40], tb[40];
        memcpy(&a, cli_cfield(c, o->offset), sizeof a);
        memcpy(&b, cli_cfield(c, o->offset2), sizeof b);
        cli_format_real(ta, sizeof ta, a, 1, 0.0);
        cli_format_real(tb, sizeof tb, b, 1, 0.0);
        snprintf(buf, cap, "%s,%s", ta, tb);
        return 1;
    }
    }
    return 0;
}

/* 1 when o has another value in c than in the defaults d */
static int cli_differs(const struct cli *c, const struct cli *d, const struct cli_option *o)
{
    if (o->kind == CLI_FLAG)
        return cli_get_int(c, o) != cli_get_int(d, o);
    char a[1024], b[1024];
    int ha = cli_format(c, o, a, sizeof a), hb = cli_format(d, o, b, sizeof b);
    return ha != hb || strcmp(a, b) != 0;
}

/* ------------------------------------------------------------------ meta.csv */

void cli_write_meta(const struct train_opts *o, struct runlog *log)
{
    struct cli c;
    cli_defaults(&c);
    c.train = *o;
    for (int i = 0; i < CLI_NOPTIONS; i++) {
        const struct cli_option *opt = &cli_options[i];
        char value[1024];
        if (opt->meta == RUN_META_NONE || !model_option_applies(o->model, opt->name))
            continue;
        if (opt->kind == CLI_FLAG)
            snprintf(value, sizeof value, "%lld", (long long)cli_get_int(&c, opt));
        else
            cli_format(&c, opt, value, sizeof value);
        runlog_meta(log, opt->meta, "%s", value);
    }
}

/* ------------------------------------------------------------------ child argv */

char **cli_args_without(const struct cli *c, enum cli_command cmd, int argc, char **argv,
                        int first, int *n)
{
    (void)c;
    char **out = malloc(sizeof *out * (size_t)(argc + 1));
    if (!out)
        return error_set("out of memory copying the command line"), NULL;
    *n = 0;
    for (int i = first; i < argc; i++) {
        int k = cli_find(argv[i], cmd);
        if (k >= 0 && cli_options[k].commands == (unsigned)cmd) { /* cmd's own: left out */
            if (cli_options[k].kind != CLI_FLAG)
                i++;
            continue;
        }
        out[(*n)++] = argv[i];
    }
    out[*n] = NULL;
    return out;
}

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

char **cli_argv(const struct cli *c, enum cli_command to, const char *prog)
{
    struct cli d;
    cli_defaults(&d);
    char **argv = calloc(2 * (size_t)CLI_NOPTIONS + 3, sizeof *argv);
    int n = 0, bad = !argv || cli_push(argv, &n, prog);
    if (!bad && to != CLI_MAIN)
        bad = cli_push(argv, &n, to == CLI_TRAIN ? "train" : "worker");
    for (int i = 0; i < CLI_NOPTIONS && !bad; i++) {
        const struct cli_option *o = &cli_options[i];
        char value[1024];
        if (!cli_takes(o, to) || o->local || (!o->always && !cli_differs(c, &d, o)))
            continue;
        if (o->kind == CLI_FLAG) {
            if (cli_get_int(c, o) == o->flag_value)
                bad = cli_push(argv, &n, o->name);
        } else if (cli_format(c, o, value, sizeof value)) {
            bad = cli_push(argv, &n, o->name) || cli_push(argv, &n, value);
        }
    }
    if (bad) {
        cli_argv_free(argv);
        error_set("out of memory for a command line of %d options", CLI_NOPTIONS);
        return NULL;
    }
    return argv;
}

/* ------------------------------------------------------------------ usage */

#define USAGE_INDENT 26
#define USAGE_WIDTH 92

/* text from column col on, words wrapped at USAGE_WIDTH onto lines indented USAGE_INDENT */
static void cli_usage_wrap(FILE *out, const char *text, int col)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        if (!len)
            break;
        if (col > USAGE_INDENT && col + 1 + (int)len > USAGE_WIDTH) {
            fprintf(out, "\n%*s", USAGE_INDENT, "");
            col = USAGE_INDENT;
        } else if (col > USAGE_INDENT) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", (int)len, p);
        col += (int)len;
        p += len;
    }
    fputc('\n', out);
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
    const char *group = NULL;
    for (int i = 0; i < CLI_NOPTIONS; i++) {
        const struct cli_option *o = &cli_options[i];
        if (!group || strcmp(group, o->group) != 0)
            fprintf(out, "%s:\n", group = o->group);
        char meta[128], left[192], text[512], value[1024];
        if (o->kind == CLI_ENUM)
            cli_choice_list(o, "|", "|", meta, sizeof meta);
        else
            snprintf(meta, sizeof meta, "%s", o->metavar ? o->metavar : "");
        snprintf(left, sizeof left, "  %s%s%s%s%s", o->alias ? o->alias : "",
                 o->alias ? ", " : "", o->name, meta[0] ? " " : "", meta);
        int col = (int)strlen(left);
        fputs(left, out);
        if (col < USAGE_INDENT) {
            fprintf(out, "%*s", USAGE_INDENT - col, "");
        } else {
            fprintf(out, "\n%*s", USAGE_INDENT, "");
        }
        const char *who = o->commands == CLI_TUNE                  ? "tune: "
                          : o->commands == CLI_MAIN                  ? "main job: "
                          : o->commands == (CLI_TRAIN | CLI_WORKER) ? "train, worker: "
                          : o->commands == (CLI_MAIN | CLI_TRAIN)   ? "main job, train: "
                                                                    : "";
        size_t at = (size_t)snprintf(text, sizeof text, "%s%s", who,
                                     o->help_fn ? o->help_fn() : o->help);
        if (o->dflt && o->dflt[0])
            snprintf(text + at, sizeof text - at, " (default: %s)", o->dflt);
        else if (!o->dflt && cli_format(&d, o, value, sizeof value))
            snprintf(text + at, sizeof text - at, " (default %s)", value);
        cli_usage_wrap(out, text, USAGE_INDENT);
    }
}
