/* train.h — one rank's training run: data, model, optimizer, DDP, evaluation, run files.
 *
 * train_run() is what `ddpprof train` runs in a single process (the baseline) and what
 * every DDP worker runs with its rank's environment.  Rank 0 alone prints progress and
 * writes meta.csv, metrics.csv and the checkpoint. */
#ifndef DDPPROF_TRAIN_H
#define DDPPROF_TRAIN_H

#include "backend/backend.h"
#include "probes/probe.h"

#include <stdint.h>

struct dist_env;

enum train_mode { TRAIN_BASELINE, TRAIN_DDP };

#define TRAIN_MAX_GPUS 64

struct train_opts {
    const char *model;       /* "convnet", "resnet18" */
    int resnet_width;        /* resnet18: channels of its first stage (the example's 64) */
    const char *data_dir;    /* IDX or CIFAR-10 directory */
    int dataset;             /* enum dataset_kind (data/dataset.h): auto, idx, cifar, synthetic */
    int epochs, batch_size;  /* batch per rank */
    int optimizer;           /* enum optim_kind (nn/optim.h): sgd, adam */
    float lr, momentum, weight_decay; /* momentum: SGD only; weight decay: both */
    int lr_scale_by_world;   /* train with lr * world size (the example's lr * GPUs) */
    int drop_last;           /* drop each epoch's last incomplete batch (DataLoader's) */
    int save_every_epoch;    /* rank 0 also writes epoch_N.safetensors after epoch N */
    uint64_t seed;
    int shuffle;
    long limit;              /* use the first `limit` training samples (0: all) */
    long test_limit;         /* likewise for the test set */
    float norm_mean, norm_std;
    const char *out_dir;     /* run directory */
    const char *init_path;   /* safetensors state_dict to start from, or NULL */
    int threads;             /* CPU backend threads per rank (0: cores / ranks) */
    enum train_mode mode;
    double bucket_cap_mb;
    int sync_bn;
    int timeout_ms;
    int quiet;               /* no progress lines (tests) */
    int overwrite;           /* --overwrite: a non-empty out_dir is reused (runlog_prepare) */
    enum amp_dtype amp;      /* autocast (--amp fp16|bf16|off) */
    float scale_init, scale_growth, scale_backoff; /* GradScaler (fp16 only) */
    int scale_interval;
    const char *resume_path; /* --resume CKPT: continue that run's state (read by rank 0) */
    long checkpoint_every;   /* --checkpoint-every STEPS: rank 0 also saves every STEPS steps */
    int comm;                /* --comm: device_comm_name's index (0: auto, device.c decides) */
    enum probe_mode trace;   /* --trace off|nvtx|full */
    int cpu_ranks;           /* --cpu N: CPU ranks (0: not given) */
    int ngpus;               /* --gpu LIST: 0 for CPU ranks; local rank i uses gpus[i] */
    int gpus[TRAIN_MAX_GPUS];
};

/* Default options (the seed's: convnet, 3 epochs, batch 32, lr 1e-4, SGD without momentum,
 * Fashion-MNIST (--dataset auto), shuffled with seed 0; resnet18 at width 64). */
void train_opts_default(struct train_opts *o);

/* --model and --data checked before anything is written: the model is one there is and
 * its data set loads and fits it (loaded once, then freed).  0, or -1 with the error the
 * run itself would give. */
int train_check_inputs(const struct train_opts *o);

/* Run training as described by o on this rank (env NULL: world 1).  0 or -1 (error_set). */
int train_run(const struct train_opts *o, const struct dist_env *env);

#endif
