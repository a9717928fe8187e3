/* sgd.h — torch.optim.SGD over a model's trainable parameters.
 *
 * Momentum buffers are created on the first step, as PyTorch creates them lazily; they
 * live on the model's backend and belong to the optimizer. */
#ifndef DDPPROF_SGD_H
#define DDPPROF_SGD_H

#include "nn/params.h"

struct sgd {
    float lr, momentum, dampening, weight_decay;
    int nesterov;
    struct param_table *params;
    float **buf;   /* per trainable parameter (NULL until its first step) */
    int *started;  /* buffer holds a value (PyTorch: 'momentum_buffer' in state) */
};

/* 0 or -1 (error_set). */
int sgd_init(struct sgd *o, struct param_table *params, float lr, float momentum,
             float dampening, float weight_decay, int nesterov);

/* One step on every trainable parameter from its grad. */
int sgd_step(struct sgd *o);

void sgd_free(struct sgd *o);

#endif
