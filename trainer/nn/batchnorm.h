/* batchnorm.h — nn.BatchNorm2d, and nn.SyncBatchNorm over a comm (layer.h: the grad
 * hook, autocast). */
#ifndef DDPPROF_BATCHNORM_H
#define DDPPROF_BATCHNORM_H

#include "backend/backend.h"
#include "nn/layer.h"
#include "nn/params.h"

struct comm;

/* nn.BatchNorm2d(c) with eps 1e-5, momentum 0.1; SyncBatchNorm when sync != NULL and its
 * world > 1 (set after init, e.g. by DDP). */
struct batchnorm {
    int c;
    float eps, momentum;
    struct param *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
    struct comm *sync;
    /* device scratch: saved mean/invstd (c each), gathered stats, backward sums: sum_dy
     * (c), sum_dy_xmu (c) and the element count per channel (1), all-reduced together
     * under SyncBatchNorm, so the global count stays on the device */
    float *mean, *invstd, *gather, *sums;
    int gather_world;
    float local_count; /* this rank's elements per channel in the last training forward */
    /* the count each device slot holds (uploaded by an earlier step; a negative: unknown),
     * so a step uploads it only when it changed: the gather row's, and the sums' (which
     * SyncBatchNorm's all-reduce turns into the global count) */
    float gather_count, sums_count;
    enum dtype dt; /* activations' type (x, y, dy, dx), set by the model for autocast */
};

int batchnorm_init(struct batchnorm *l, struct param_table *t, const char *prefix, int c);
/* x, y (n, c, hw) of l->dt; y may alias x.  train selects batch statistics (and updates
 * running statistics and num_batches_tracked); eval uses the running statistics. */
int batchnorm_forward(struct backend *be, struct batchnorm *l, int n, int hw, const void *x,
                      void *y, int train);
/* x is the forward input; x, dy, dx of l->dt; dx may alias dy */
int batchnorm_backward(struct backend *be, struct batchnorm *l, int n, int hw, const void *x,
                       const void *dy, void *dx, const struct grad_hook *hook);
void batchnorm_free(struct backend *be, struct batchnorm *l);

#endif
