/* checkpoint.h — model (and optimizer) state as safetensors, keyed by PyTorch names.
 *
 * The model's tensors are stored under their state_dict names ("layer1.0.weight",
 * "layer1.1.num_batches_tracked" as an I64 scalar, ...), so
 * `model.load_state_dict({k: v for k, v in safetensors.torch.load_file(f).items()
 *  if not k.startswith("optimizer.")})` loads a checkpoint into the seed's PyTorch module.
 * The optimizer's state follows PyTorch's per-parameter state under "optimizer.<param
 * name>.": SGD's "momentum_buffer"; Adam's "exp_avg", "exp_avg_sq" and "step" (an F32
 * scalar, as PyTorch 1.13 keeps it); metadata "optimizer" names the optimizer ("sgd" when
 * absent, as in checkpoints written before Adam).  Files are written atomically (temp
 * file + fsync + rename): a crash never leaves half a checkpoint. */
#ifndef DDPPROF_CHECKPOINT_H
#define DDPPROF_CHECKPOINT_H

#include "nn/params.h"

/* metadata "format" of every checkpoint ddpprof writes; --resume refuses another */
#define CHECKPOINT_FORMAT "ddpprof-checkpoint-1"
/* the largest epoch and step counts a checkpoint may hold (--epochs is at most 1000000) */
#define CHECKPOINT_MAX_EPOCHS 1000000LL
#define CHECKPOINT_MAX_STEPS (1LL << 53)

struct sgd;
struct optim;
struct grad_scaler;

/* Save params (all entries) and, when opt is not NULL, its state, with metadata model,
 * optimizer, epoch (completed epochs), step and, when scaler is not NULL, the GradScaler
 * state (scaler.scale, scaler.growth_tracker, ... as exact decimal text).  0 or -1
 * (error_set naming the path). */
int checkpoint_save_optim(const char *path, const struct param_table *params,
                          const struct optim *opt, const struct grad_scaler *scaler,
                          const char *model, int epoch, long long step);

/* Where in its epoch the run that wrote a checkpoint stood: the world size, the per-rank
 * batch size and the sampler position (samples of this rank's DistributedSampler share
 * already trained in the current epoch; 0 at an epoch's end).  A mid-epoch --resume
 * skips `position` samples, which is right only with the same world and batch size. */
struct checkpoint_run {
    int world_size;
    int batch_size;
    long long position;
};

/* checkpoint_save_optim, with metadata world_size, batch_size and sampler_position from
 * run (run may be NULL: none written) */
int checkpoint_save_run(const char *path, const struct param_table *params,
                        const struct optim *opt, const struct grad_scaler *scaler,
                        const char *model, int epoch, long long step,
                        const struct checkpoint_run *run);

/* The checkpoint_run of the checkpoint at path: 1 with *out filled, 0 when the checkpoint
 * predates these fields (none of them there), -1 (error_set naming the field and value)
 * when one is missing or out of range (world and batch size >= 1, position >= 0). */
int checkpoint_read_run(const char *path, struct checkpoint_run *out);

/* checkpoint_save_optim with SGD's state (opt may be NULL) */
int checkpoint_save(const char *path, const struct param_table *params, const struct sgd *opt,
                    const struct grad_scaler *scaler, const char *model, int epoch,
                    long long step);

/* --resume: load the model, the optimizer's state (an SGD parameter without a momentum
 * buffer starts without, as in PyTorch; Adam's moments and step must be there once it has
 * stepped), the scaler state and the completed epoch and step of a checkpoint written by
 * checkpoint_save_optim for the same model and optimizer.  Every metadata field is checked
 * before anything is loaded: format CHECKPOINT_FORMAT, model and optimizer as given, epoch
 * in [0, CHECKPOINT_MAX_EPOCHS], step in [0, CHECKPOINT_MAX_STEPS], scaler.enabled as
 * scaler->enabled, a finite scale > 0, growth factor in [1, 1e6], backoff in (0, 1],
 * interval >= 1, tracker in [0, interval); every tensor finite (exp_avg_sq >= 0).  0, or -1
 * with one error_set line naming the file, the field and its value (*epoch, *step and
 * *scaler then untouched; params and opt may be partly overwritten). */
int checkpoint_resume(const char *path, struct param_table *params, struct optim *opt,
                      struct grad_scaler *scaler, const char *model, int *epoch,
                      long long *step);

/* Load every entry of params from a safetensors state_dict (a PyTorch one, or our
 * checkpoint).  A missing tensor, a tensor of another shape or dtype, an unexpected
 * tensor (other than optimizer.*), a NaN or infinite value or a negative batch count is
 * one error naming the file and the tensor.  On error params may be partly overwritten
 * (callers start over). */
int checkpoint_load_model(const char *path, struct param_table *params);

#endif
