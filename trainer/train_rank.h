/* train_rank.h — one rank's run, shared by the files that write it (train.h is the public
 * side).  One file per responsibility:
 *   train.c          setup, the epochs (train, evaluate, checkpoint, print), teardown
 *   train_session.c  DDP's session: the rendezvous store, the job's identity, the comm,
 *                    the reducer, the clock offsets
 *   train_resume.c   --resume: the checkpoint read (in DDP by rank 0, sent to the others),
 *                    what is left to train, where the first epoch starts
 *   train_meta.c     meta.csv: the run's description, clocks, per-epoch figures, host usage
 *   train_step.c     one epoch's steps: batches, the step, mid-epoch checkpoints, progress
 *   train_eval.c     the test set's accuracy and loss
 *   train_faults.c   the failure tests' fault injection (DDPPROF_FAULT_*)
 * Every function returns 0 or -1 (error_set) unless it says otherwise. */
#ifndef DDPPROF_TRAIN_RANK_H
#define DDPPROF_TRAIN_RANK_H

#include "train.h"

#include "data/dataset.h"
#include "io/checkpoint.h"
#include "nn/layer_list.h"
#include "nn/optim.h"
#include "nn/scaler.h"
#include "probes/clock_offset.h"
#include "probes/runlog.h"

#include <stdint.h>

struct dist_env;
struct reducer;
struct store;

/* Test fault injection (train_faults.c): the step each fault strikes on this rank, 0: none */
struct rank_faults {
    long long skip_step; /* DDPPROF_FAULT_SKIP_STEP: this rank skips the step entirely */
    long long inf_step;  /* DDPPROF_FAULT_INF_STEP: an inf in the loss gradient */
    long long kill_step; /* DDPPROF_FAULT_KILL_STEP: SIGKILL itself (first attempt only) */
    long long kill_after_ms; /* DDPPROF_FAULT_KILL_AFTER_MS: the same at the first step that
                                begins this long after this rank's first step began */
    int64_t first_step_ns;   /* when this rank's first step began (0: not yet) */
    long long delay_ms;      /* DDPPROF_FAULT_DELAY_MS plus DDPPROF_FAULT_DELAY2_MS: sleep
                                this long in every step (a planted straggler, every
                                attempt) */
};

/* Where training starts: epoch 0, or a --resume checkpoint's state */
struct rank_resume {
    int resumed;                /* state came from --resume: start_epoch and the rank's step
                                   are the checkpoint's */
    int start_epoch;            /* epochs already done */
    int has_run;                /* the checkpoint recorded run */
    struct checkpoint_run run;  /* its world, batch size and sampler position */
};

/* One batch's buffers: on the host, and on the device */
struct rank_batch {
    float *x_host, *x_dev, *dlogits, *scalars; /* scalars: 3 floats on the device */
    int32_t *y_host, *y_dev;
    int64_t *indices;                          /* the sampler's, of either data set */
};

struct rank {
    const struct train_opts *o;
    int rank, world, local_rank, local_world;
    int node_rank;     /* GROUP_RANK, else rank / local_world */
    int restart_count; /* TORCHELASTIC_RESTART_COUNT: the attempt of an elastic job */
    char run_id[160];  /* the job's id (and attempt), the same on every rank */
    struct device dev; /* backend, comm, CPU binding */
    struct comm *coll; /* dev.comm recording each collective (comm_probe.h): every
                          collective but the reducer's buckets goes through it */
    struct store *store;
    struct reducer *red;
    struct model *m;
    struct optim opt;
    float lr;          /* the learning rate trained with (--lr, times the world size with
                          --lr-scale-by-world) */
    struct grad_scaler scaler;
    struct dataset train, test;
    enum dataset_kind dataset; /* the kind loaded (auto resolved) */
    struct rank_batch batch;
    struct rank_resume resume;
    struct rank_faults faults;
    struct runlog log;
    struct probe *probe;
    struct layer_observer layer_obs; /* the model's layers as probe ranges (train_layers.c) */
    struct clock_offset clock;  /* this rank's offset to rank 0 */
    long long step;
    long long epoch_steps, epoch_skipped; /* this epoch's steps; those the scaler skipped */
    struct host_usage usage0;  /* the host's load and this process's CPU time at the start */
    int tty;                   /* stderr is a terminal: draw the progress bar here */
    int cpu_share;             /* 1: each step writes its other threads' CPU time (kind cpu
                                  rows, probes/TRACE.md): a traced CPU rank of 1 compute
                                  thread (train_step.c) */
};

/* train.c: a line on stdout from rank 0, unless --quiet */
void rank_say(const struct rank *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* train.c: the rank's probe (rank<N>.trace.csv in --out, or an off one without --out) */
int rank_open_probe(struct rank *r);

/* train_faults.c: the faults the environment asks of this rank */
void rank_faults_read(struct rank *r);

/* train_session.c: DDP's session, after the model and optimizer exist: join the
 * rendezvous, agree on the job's identity, open the comm, take --resume from rank 0,
 * broadcast the state, SyncBatchNorm, the reducer, the clock offset */
int rank_session_open(struct rank *r, const struct dist_env *env);
/* the reducer's buckets as probe ranges (after the probes exist) */
void rank_session_observe(struct rank *r);
/* train_calib.c: DDP setup's short all-reduce microbenchmark (a few sizes within a 250 ms
 * budget), recorded as calib.allreduce rows for `ddpprof predict` (probes/TRACE.md); a
 * no-op for one rank or without a trace */
int rank_calibrate_comm(struct rank *r);

/* train_resume.c */
int rank_resume_local(struct rank *r); /* one process: read --resume */
int rank_resume_ddp(struct rank *r);   /* DDP: rank 0 reads --resume, every rank loads it */
int rank_resume_check(const struct rank *r); /* epochs left, and a mid-epoch one fits */
/* the first sample of this rank's share of epoch (0 unless resumed in it mid-epoch), of
 * count samples in batches of the run's batch size; -1 (error_set) when past them */
int64_t rank_resume_first(const struct rank *r, int epoch, int64_t count);

/* train_meta.c: meta.csv (rank 0 and node leaders only; elsewhere no-ops) */
void rank_meta_write(struct rank *r);        /* the run's description, once set up */
int rank_meta_clocks(struct rank *r);        /* every rank's clock offset and host */
void rank_meta_epoch(struct rank *r, int epoch, double train_s, double train_loss,
                     double accuracy, double val_loss);
int rank_meta_usage(struct rank *r, double wall_s); /* every rank publishes, rank 0 writes */
void rank_meta_end(struct rank *r, double accuracy, double wall_s);

/* train_step.c: train epoch (0-based) on this rank's share; *mean_loss of its steps */
int rank_train_epoch(struct rank *r, int epoch, double *mean_loss);
/* load n samples at idx of d into the batch buffers (the device's copies too) */
int rank_load_batch(struct rank *r, const struct dataset *d, const int64_t *idx, int n);

/* train_eval.c: the test set's accuracy and mean loss per sample, reduced to rank 0 */
int rank_evaluate(struct rank *r, double *accuracy, double *mean_loss);
/* one warning line on stderr: a val loss of nan or inf under AMP, and why */
void rank_warn_val_loss(const struct rank *r, int epoch, double val_loss);

#endif
