/* adam.h — torch.optim.Adam (amsgrad off) over a model's trainable parameters.
 *
 * The moments exp_avg and exp_avg_sq are created zero-filled at the first step, as PyTorch
 * creates its state lazily; they live on the model's backend and belong to the optimizer.
 * PyTorch keeps a step count per parameter; every parameter here steps together, so one
 * count serves all (a checkpoint writes it per parameter, as PyTorch's state_dict).  The
 * table is packed (params.h): the moments are flat buffers laid out as the parameters',
 * and a step is one backend adam_step over all of them (PyTorch's fused Adam). */
#ifndef DDPPROF_ADAM_H
#define DDPPROF_ADAM_H

#include "nn/params.h"

/* PyTorch's defaults */
#define ADAM_BETA1 0.9
#define ADAM_BETA2 0.999
#define ADAM_EPS 1e-8

struct adam {
    double lr, beta1, beta2, eps, weight_decay; /* as PyTorch's Python floats */
    struct param_table *params;
    float *exp_avg_flat, *exp_avg_sq_flat; /* as params->flat_data (NULL before the first
                                              step) */
    float **exp_avg, **exp_avg_sq; /* per trainable parameter: its views of those */
    long long step;                /* steps taken; the next one is step + 1 */
};

/* Packs params.  0 or -1 (error_set). */
int adam_init(struct adam *o, struct param_table *params, double lr, double beta1,
              double beta2, double eps, double weight_decay);

/* One step on every trainable parameter from its grad (the backend's adam_step slot). */
int adam_step(struct adam *o);

/* Allocate the zeroed moments, if not there yet (adam_step does this at the first step;
 * --resume does it before loading them).  0 or -1 (error_set). */
int adam_state_alloc(struct adam *o);

void adam_free(struct adam *o);

#endif
