/* scaler.h — torch.cuda.amp.GradScaler: dynamic loss scaling for fp16 training.
 *
 * The loss (here: its gradient, dlogits) is multiplied by `scale` before backward; after
 * the gradients are all-reduced, scaler_unscale divides them by the scale and checks them
 * for inf/nan.  If any rank found one the optimizer step is skipped on every rank (the
 * flag is all-reduced, so the decision is the same everywhere) and the scale is backed
 * off; after growth_interval clean steps in a row it grows.  Defaults are PyTorch's. */
#ifndef DDPPROF_SCALER_H
#define DDPPROF_SCALER_H

#include "nn/params.h"

struct comm;

struct grad_scaler {
    int enabled;          /* fp16 autocast only: bf16 and fp32 run unscaled, as in PyTorch */
    float scale;          /* init 65536 (2^16) */
    float growth_factor;  /* 2 */
    float backoff_factor; /* 0.5 */
    int growth_interval;  /* 2000 */
    int growth_tracker;   /* clean steps since the last growth or backoff */
};

void scaler_init(struct grad_scaler *s, int enabled);

/* Unscale every trainable gradient in place and set *found_inf (1: some gradient is inf
 * or nan, on this rank or, with comm, on any rank).  One fused pass over all gradients
 * (the backend's unscale slot: over the flat gradient buffer of a packed table, params.h,
 * else over the list of them) writes the flag into scratch, one device float; with comm
 * it is all-reduced there; reading it back is the step's one host wait, as GradScaler's
 * found_inf.item().  scratch NULL: a float is allocated for the call (and freed, which
 * waits on a device: pass one in a training loop).  0 or -1 (error_set).  Disabled:
 * *found_inf = 0 and nothing is touched. */
int scaler_unscale(struct grad_scaler *s, struct param_table *params, struct comm *comm,
                   float *scratch, int *found_inf);

/* GradScaler.update(): back off on found_inf, else count towards growth. */
void scaler_update(struct grad_scaler *s, int found_inf);

#endif
