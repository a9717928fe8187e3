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

/* checkpoint_save_optim with SGD's state (opt may be NULL) */
int checkpoint_save(const char *path, const struct param_table *params, const struct sgd *opt,
                    const struct grad_scaler *scaler, const char *model, int epoch,
                    long long step);

/* --resume: load the model, the optimizer's state (an SGD parameter without a momentum
 * buffer starts without, as in PyTorch; Adam's moments and step must be there once it has
 * stepped), the scaler state and the completed epoch and step of a checkpoint written by
 * checkpoint_save_optim for the same model and optimizer.  0 or -1 (error_set). */
int checkpoint_resume(const char *path, struct param_table *params, struct optim *opt,
                      struct grad_scaler *scaler, const char *model, int *epoch,
                      long long *step);

/* Load every entry of params from a safetensors state_dict (a PyTorch one, or our
 * checkpoint).  A missing tensor, a tensor of another shape or dtype, or an unexpected
 * tensor (other than optimizer.*) is one error naming the file and the tensor.  On error
 * params may be partly overwritten (callers start over). */
int checkpoint_load_model(const char *path, struct param_table *params);

#endif
