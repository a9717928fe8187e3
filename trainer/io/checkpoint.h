/* checkpoint.h — model (and optimizer) state as safetensors, keyed by PyTorch names.
 *
 * The model's tensors are stored under their state_dict names ("layer1.0.weight",
 * "layer1.1.num_batches_tracked" as an I64 scalar, ...), so
 * `model.load_state_dict({k: v for k, v in safetensors.torch.load_file(f).items()
 *  if not k.startswith("optimizer.")})` loads a checkpoint into the seed's PyTorch module.
 * SGD momentum buffers are stored as "optimizer.<param name>.momentum_buffer".  Files are
 * written atomically (temp file + fsync + rename): a crash never leaves half a checkpoint. */
#ifndef DDPPROF_CHECKPOINT_H
#define DDPPROF_CHECKPOINT_H

#include "nn/params.h"

struct sgd;
struct grad_scaler;

/* Save params (all entries) and, when opt is not NULL, its momentum buffers, with
 * metadata model, epoch (completed epochs), step and, when scaler is not NULL, the
 * GradScaler state (scaler.scale, scaler.growth_tracker, ... as exact decimal text).
 * 0 or -1 (error_set naming the path). */
int checkpoint_save(const char *path, const struct param_table *params, const struct sgd *opt,
                    const struct grad_scaler *scaler, const char *model, int epoch,
                    long long step);

/* --resume: load the model, the momentum buffers (a parameter without one starts without,
 * as in PyTorch), the scaler state and the completed epoch and step of a checkpoint
 * written by checkpoint_save for the same model.  0 or -1 (error_set). */
int checkpoint_resume(const char *path, struct param_table *params, struct sgd *opt,
                      struct grad_scaler *scaler, const char *model, int *epoch,
                      long long *step);

/* Load every entry of params from a safetensors state_dict (a PyTorch one, or our
 * checkpoint).  A missing tensor, a tensor of another shape or dtype, or an unexpected
 * tensor (other than optimizer.*) is one error naming the file and the tensor.  On error
 * params may be partly overwritten (callers start over). */
int checkpoint_load_model(const char *path, struct param_table *params);

#endif
