/* sgd.h — torch.optim.SGD over a model's trainable parameters.
 *
 * Momentum buffers are created on the first step, as PyTorch creates them lazily; they
 * live on the model's backend and belong to the optimizer.  The table is packed
 * (params.h): the buffers are one flat buffer laid out as the parameters', and a step is
 * one backend sgd_step over all of them (PyTorch's fused SGD), unless some parameters
 * have a buffer and others not yet (a checkpoint that held only some): then one per
 * parameter. */
#ifndef DDPPROF_SGD_H
#define DDPPROF_SGD_H

#include "nn/params.h"

struct sgd {
    float lr, momentum, dampening, weight_decay;
    int nesterov;
    struct param_table *params;
    float *buf_flat; /* every momentum buffer, as params->flat_data (NULL until needed) */
    float **buf;     /* per trainable parameter: its view of buf_flat (NULL until then) */
    int *started;    /* buffer holds a value (PyTorch: 'momentum_buffer' in state) */
};

/* Packs params.  0 or -1 (error_set). */
int sgd_init(struct sgd *o, struct param_table *params, float lr, float momentum,
             float dampening, float weight_decay, int nesterov);

/* The zeroed momentum buffers, if not there yet (sgd_step does this at the first step with
 * momentum; --resume before loading them).  0 or -1 (error_set). */
int sgd_state_alloc(struct sgd *o);

/* One step on every trainable parameter from its grad. */
int sgd_step(struct sgd *o);

void sgd_free(struct sgd *o);

#endif
