/* train.h — one rank's training run: its options, and the run itself.
 *
 * train_run() is what `ddpprof train` runs in a single process (the baseline) and what
 * every DDP worker runs with its rank's environment.  Rank 0 alone prints progress and
 * writes meta.csv, metrics.csv and the checkpoint.
 *
 * The options come in one small struct per concern, each read by the code of that concern:
 * the model's (nn/model.h), the data's, the optimiser's, mixed precision's, DDP's, the
 * devices' (device.h) and the run's own.  cli.c's table fills them from the command line.
 *
 * The run is written in one file per responsibility (train_rank.h lists them): train.c
 * (setup, the epochs, teardown), train_session.c (rendezvous, the job's identity, clocks),
 * train_resume.c (--resume), train_meta.c (meta.csv), train_step.c (one epoch's steps),
 * train_eval.c (the test set) and train_faults.c (the failure tests' fault injection). */
#ifndef DDPPROF_TRAIN_H
#define DDPPROF_TRAIN_H

#include "backend/backend.h"
#include "device.h"
#include "nn/model.h"
#include "probes/probe.h"

#include <stdint.h>

struct dist_env;

enum train_mode { TRAIN_BASELINE, TRAIN_DDP };

/* The data set and how it is served (data/dataset.h, data/sampler.h). */
struct data_opts {
    int dataset;             /* enum dataset_kind (data/dataset.h): auto, idx, cifar, synthetic */
    const char *dir;         /* --data: IDX or CIFAR-10 directory */
    int batch_size;          /* per rank */
    int shuffle;
    int drop_last;           /* drop each epoch's last incomplete batch (DataLoader's) */
    long limit;              /* use the first `limit` training samples (0: all) */
    long test_limit;         /* likewise for the test set */
    float norm_mean, norm_std;
};

/* The optimiser (nn/optim.h). */
struct optim_opts {
    int kind;                /* enum optim_kind (nn/optim.h): sgd, adam */
    float lr, momentum, weight_decay; /* momentum: SGD only; weight decay: both */
    int lr_scale_by_world;   /* train with lr * world size (the example's lr * GPUs) */
};

/* Mixed precision: autocast and the GradScaler (nn/scaler.h). */
struct amp_opts {
    enum amp_dtype dtype;    /* --amp fp16|bf16|off */
    float scale_init, scale_growth, scale_backoff; /* GradScaler (fp16 only) */
    int scale_interval;
};

/* DDP's own (ddp/reducer.h, the model's SyncBatchNorm). */
struct ddp_opts {
    double bucket_cap_mb;
    int sync_bn;
};

/* The run: how long, where its files go, what it starts from. */
struct run_opts {
    int epochs;
    const char *out_dir;     /* run directory */
    int overwrite;           /* --overwrite: a non-empty out_dir is reused (runlog_prepare) */
    int quiet;               /* no progress lines (tests) */
    enum probe_mode trace;   /* --trace off|nvtx|kernels|full (probes/probe.h) */
    const char *init_path;   /* safetensors state_dict to start from, or NULL */
    const char *resume_path; /* --resume CKPT: continue that run's state (read by rank 0) */
    long checkpoint_every;   /* --checkpoint-every STEPS: rank 0 also saves every STEPS steps */
    int save_every_epoch;    /* rank 0 also writes epoch_N.safetensors after epoch N */
};

struct train_opts {
    enum train_mode mode;
    const char *model;              /* a model registry name (nn/model.h) */
    struct model_opts model_opts;   /* the model's own options (nn/model.h) */
    uint64_t seed;                  /* shuffling, initialisation, synthetic data */
    struct data_opts data;
    struct optim_opts optim;
    struct amp_opts amp;
    struct ddp_opts ddp;
    struct device_opts dev;
    struct run_opts run;
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
