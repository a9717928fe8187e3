/* cli.c — option parsing for the trainer (see cli.h). */
#include "cli.h"

#include "common/error.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *cli_usage(void)
{
    return "usage: ddpprof train [options]      train on this machine (baseline, or DDP with --mode ddp)\n"
           "       ddpprof worker [options]     one DDP rank, environment from torchrun/mpirun/Slurm\n"
           "       ddpprof [--cpu N | --gpu LIST] [--mode both|baseline|ddp] [options]\n"
           "                                    the main job: fp32 baseline on one device, DDP+AMP\n"
           "                                    on all, then the report (no device: GPUs, else CPU ranks)\n"
           "       ddpprof report RUN_DIR... [--out DIR]   remake the tables from traces\n"
           "       ddpprof --version | --help\n"
           "\n"
           "devices:\n"
           "  --cpu N                 N CPU ranks (default 1)\n"
           "  --gpu LIST              GPUs, e.g. 0,1 (needs a CUDA build and a GPU)\n"
           "  --mode baseline|ddp     single-process fp32 baseline, or DDP over the ranks\n"
           "                          (default: ddp when N > 1, else baseline)\n"
           "training:\n"
           "  --model NAME            convnet (default)\n"
           "  -e, --epochs N          epochs (default 3)\n"
           "  -b, --batch-size N      batch size per rank (default 32)\n"
           "  --lr X                  SGD learning rate (default 1e-4)\n"
           "  --momentum X            SGD momentum (default 0)\n"
           "  --weight-decay X        SGD weight decay (default 0)\n"
           "  --seed N                shuffling and initialisation seed (default 0)\n"
           "  --no-shuffle            keep the data set order\n"
           "  --limit N               train on the first N samples only\n"
           "  --test-limit N          test on the first N samples only\n"
           "  --data DIR              IDX data directory (default /usr/share/datasets/fashion-mnist)\n"
           "  --normalize MEAN,STD    normalise pixels after scaling to [0,1]\n"
           "  --init FILE             start from a safetensors state_dict (PyTorch names)\n"
           "  --threads N             CPU threads per rank (default cores / ranks)\n"
           "output:\n"
           "  --out DIR               run directory (default results/<date>-<time>-<model>)\n"
           "  --quiet                 no progress lines\n"
           "  --trace off|nvtx|full   probes: nothing, NVTX + host trace, + CUDA events/CUPTI\n"
           "                          (default full)\n"
           "mixed precision:\n"
           "  --amp fp16|bf16|off     autocast conv/linear (default: fp16 for ddp, off for baseline)\n"
           "  --loss-scale-init X     GradScaler initial scale (default 65536)\n"
           "  --loss-scale-growth X   growth factor (default 2)\n"
           "  --loss-scale-backoff X  backoff factor (default 0.5)\n"
           "  --loss-scale-interval N clean steps before growing (default 2000)\n"
           "  --resume CKPT           continue from a checkpoint.safetensors of an earlier run\n"
           "DDP:\n"
           "  --bucket-cap-mb X       gradient bucket cap in MiB, fractions allowed (default 25)\n"
           "  --no-sync-bn            keep BatchNorm local (default: SyncBatchNorm)\n"
           "  --timeout S             seconds any collective or rendezvous may wait (default 300)\n"
           "  --master-addr A         rendezvous host (default 127.0.0.1)\n"
           "  --master-port P         rendezvous port (default: a free one)\n";
}

int cli_parse_long(const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < min || v > max)
        return error_set("%s: '%s' is not an integer in [%ld, %ld]", opt, s, min, max);
    *out = v;
    return 0;
}

int cli_parse_double(const char *opt, const char *s, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < min || v > max)
        return error_set("%s: '%s' is not a number in [%g, %g]", opt, s, min, max);
    *out = v;
    return 0;
}

static int cli_parse_normalize(const char *s, float *mean, float *std)
{
    char buf[128];
    const char *comma = strchr(s, ',');
    if (!comma || strlen(s) >= sizeof buf)
        return error_set("--normalize: '%s' is not MEAN,STD (e.g. 0.1307,0.3081)", s);
    memcpy(buf, s, (size_t)(comma - s));
    buf[comma - s] = '\0';
    double m, d;
    if (cli_parse_double("--normalize mean", buf, -1e6, 1e6, &m) ||
        cli_parse_double("--normalize std", comma + 1, 1e-12, 1e6, &d))
        return -1;
    *mean = (float)m;
    *std = (float)d;
    return 0;
}

/* "0,1,3" -> t->gpus; ranges are not supported (nvidia-smi style lists are) */
static int cli_parse_gpu_list(const char *s, struct train_opts *t)
{
    char buf[512];
    if (strlen(s) >= sizeof buf || !*s)
        return error_set("--gpu: '%s' is not a list of device numbers like 0,1", s);
    strcpy(buf, s);
    t->ngpus = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        long id = 0;
        if (t->ngpus == TRAIN_MAX_GPUS)
            return error_set("--gpu: more than %d devices", TRAIN_MAX_GPUS);
        if (cli_parse_long("--gpu", tok, 0, 1023, &id))
            return -1;
        for (int i = 0; i < t->ngpus; i++)
            if (t->gpus[i] == id)
                return error_set("--gpu: device %ld is listed twice in '%s'", id, s);
        t->gpus[t->ngpus++] = (int)id;
    }
    if (t->ngpus == 0)
        return error_set("--gpu: '%s' is not a list of device numbers like 0,1", s);
    return 0;
}

int cli_parse(struct cli *c, int argc, char **argv, int first)
{
    memset(c, 0, sizeof *c);
    train_opts_default(&c->train);
    struct train_opts *t = &c->train;
    c->master_addr = "127.0.0.1";
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        /* flags without a value */
        if (strcmp(a, "--no-shuffle") == 0) {
            t->shuffle = 0;
            continue;
        }
        if (strcmp(a, "--no-sync-bn") == 0) {
            t->sync_bn = 0;
            continue;
        }
        if (strcmp(a, "--quiet") == 0) {
            t->quiet = 1;
            continue;
        }
        if (a[0] != '-')
            return error_set("unexpected argument '%s' (see ddpprof --help)", a);
        if (i + 1 >= argc)
            return error_set("%s needs a value (see ddpprof --help)", a);
        const char *v = argv[++i];
        long n = 0;
        double d = 0.0;
        if (strcmp(a, "--cpu") == 0) {
            if (cli_parse_long(a, v, 1, 1024, &n))
                return -1;
            t->cpu_ranks = (int)n;
        } else if (strcmp(a, "--gpu") == 0) {
            c->gpu_list = v;
            if (cli_parse_gpu_list(v, t))
                return -1;
        } else if (strcmp(a, "--mode") == 0) {
            if (strcmp(v, "baseline") == 0)
                t->mode = TRAIN_BASELINE;
            else if (strcmp(v, "ddp") == 0)
                t->mode = TRAIN_DDP;
            else
                return error_set("--mode: '%s' is not baseline or ddp", v);
            c->mode_given = 1;
        } else if (strcmp(a, "--amp") == 0) {
            if (strcmp(v, "fp16") == 0)
                t->amp = AMP_F16;
            else if (strcmp(v, "bf16") == 0)
                t->amp = AMP_BF16;
            else if (strcmp(v, "off") == 0)
                t->amp = AMP_OFF;
            else
                return error_set("--amp: '%s' is not fp16, bf16 or off", v);
            c->amp_given = 1;
        } else if (strcmp(a, "--loss-scale-init") == 0) {
            if (cli_parse_double(a, v, 1e-30, 1e30, &d))
                return -1;
            t->scale_init = (float)d;
        } else if (strcmp(a, "--loss-scale-growth") == 0) {
            if (cli_parse_double(a, v, 1.0, 1e6, &d))
                return -1;
            t->scale_growth = (float)d;
        } else if (strcmp(a, "--loss-scale-backoff") == 0) {
            if (cli_parse_double(a, v, 1e-6, 1.0, &d))
                return -1;
            t->scale_backoff = (float)d;
        } else if (strcmp(a, "--loss-scale-interval") == 0) {
            if (cli_parse_long(a, v, 1, 0x7fffffffL, &n))
                return -1;
            t->scale_interval = (int)n;
        } else if (strcmp(a, "--trace") == 0) {
            if (probe_mode_parse(v, &t->trace))
                return error_wrap("--trace");
        } else if (strcmp(a, "--resume") == 0) {
            t->resume_path = v;
        } else if (strcmp(a, "--model") == 0) {
            t->model = v;
        } else if (strcmp(a, "--epochs") == 0 || strcmp(a, "-e") == 0) {
            if (cli_parse_long(a, v, 1, 1000000, &n))
                return -1;
            t->epochs = (int)n;
        } else if (strcmp(a, "--batch-size") == 0 || strcmp(a, "-b") == 0) {
            if (cli_parse_long(a, v, 1, 65536, &n))
                return -1;
            t->batch_size = (int)n;
        } else if (strcmp(a, "--lr") == 0) {
            if (cli_parse_double(a, v, 0.0, 1e6, &d))
                return -1;
            t->lr = (float)d;
        } else if (strcmp(a, "--momentum") == 0) {
            if (cli_parse_double(a, v, 0.0, 1.0, &d))
                return -1;
            t->momentum = (float)d;
        } else if (strcmp(a, "--weight-decay") == 0) {
            if (cli_parse_double(a, v, 0.0, 1e6, &d))
                return -1;
            t->weight_decay = (float)d;
        } else if (strcmp(a, "--seed") == 0) {
            if (cli_parse_long(a, v, 0, 0x7fffffffL, &n))
                return -1;
            t->seed = (uint64_t)n;
        } else if (strcmp(a, "--limit") == 0) {
            if (cli_parse_long(a, v, 1, 0x7fffffffL, &n))
                return -1;
            t->limit = n;
        } else if (strcmp(a, "--test-limit") == 0) {
            if (cli_parse_long(a, v, 1, 0x7fffffffL, &n))
                return -1;
            t->test_limit = n;
        } else if (strcmp(a, "--data") == 0) {
            t->data_dir = v;
        } else if (strcmp(a, "--normalize") == 0) {
            if (cli_parse_normalize(v, &t->norm_mean, &t->norm_std))
                return -1;
        } else if (strcmp(a, "--out") == 0) {
            t->out_dir = v;
        } else if (strcmp(a, "--init") == 0) {
            t->init_path = v;
        } else if (strcmp(a, "--threads") == 0) {
            if (cli_parse_long(a, v, 1, 1024, &n))
                return -1;
            t->threads = (int)n;
        } else if (strcmp(a, "--bucket-cap-mb") == 0) {
            if (cli_parse_double(a, v, 1e-6, 1e6, &d))
                return -1;
            t->bucket_cap_mb = d;
        } else if (strcmp(a, "--timeout") == 0) {
            if (cli_parse_double(a, v, 0.001, 1e6, &d))
                return -1;
            t->timeout_ms = (int)(d * 1000.0);
        } else if (strcmp(a, "--master-addr") == 0) {
            c->master_addr = v;
        } else if (strcmp(a, "--master-port") == 0) {
            if (cli_parse_long(a, v, 1, 65535, &n))
                return -1;
            c->master_port = (int)n;
        } else {
            return error_set("unknown option '%s' (see ddpprof --help)", a);
        }
    }
    if (t->cpu_ranks && c->gpu_list)
        return error_set("--cpu and --gpu exclude each other: pick one");
    int ranks = t->ngpus ? t->ngpus : t->cpu_ranks;
    if (!c->mode_given && ranks > 1)
        t->mode = TRAIN_DDP;
    if (!c->amp_given) /* the tutorial: DDP + AMP, the baseline in fp32 */
        t->amp = t->mode == TRAIN_DDP ? AMP_F16 : AMP_OFF;
    if (t->mode == TRAIN_BASELINE && ranks > 1)
        return error_set("--mode baseline runs one process: give one device (or --mode ddp)");
    return 0;
}
