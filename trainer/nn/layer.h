/* layer.h — what the layers the models are built from share: conv.h (Conv2d), batchnorm.h
 * (BatchNorm2d, optionally synchronised across ranks as nn.SyncBatchNorm), linear.h
 * (Linear).
 *
 * A layer registers its tensors in the model's param_table under PyTorch's names and
 * initialises them with PyTorch's default distributions.  Forward and backward call the
 * backend; backward writes the parameter gradients and then reports each one, in reverse
 * parameter order, to the grad hook (the DDP reducer's "gradient ready" signal).
 *
 * Autocast (torch.autocast, *_set_amp): a layer's activations -- its input, output and
 * their gradients -- are of its `dt`, the half type (backend.h enum dtype), stored as the
 * backend stores that type.  Conv and linear compute from half copies of their weights,
 * cast at each forward, and cast their weight gradients back to the fp32 param grads (the
 * cast's backward); batch norm keeps fp32 parameters, statistics and gradients.  The
 * parameters, their gradients and everything the optimizer and DDP touch stay fp32. */
#ifndef DDPPROF_LAYER_H
#define DDPPROF_LAYER_H

#include "backend/backend.h"
#include "nn/params.h"

struct rng;

/* Called once per trainable parameter as soon as its gradient is final. */
struct grad_hook {
    int (*ready)(void *ctx, struct param *p); /* 0 or -1 (error_set) */
    void *ctx;
};

int grad_hook_fire(const struct grad_hook *h, struct param *p);

/* ---- shared by Conv2d and Linear ---- */

/* kaiming_uniform_(a=sqrt(5)) on w and uniform(+-1/sqrt(fan_in)) on b (may be NULL), which
 * is PyTorch's default for both Conv2d and Linear: both bounds come to 1/sqrt(fan_in).
 * 0 or -1 (error_set). */
int layer_init_fan_in(struct param *w, struct param *b, struct backend *be, int fan_in,
                      struct rng *rng);

/* The autocast buffers of a weight and bias (w_cast, b_cast, dw_cast, db_cast, in that
 * order): freed, then for a half type dt allocated.  0 or -1 (error_set). */
int layer_cast_buffers_set(struct backend *be, enum dtype dt, const struct param *w,
                           const struct param *b, void *bufs[4]);

/* The weight p to compute with: the parameter itself, or its copy cast to dt now
 * (PyTorch's autocast casts a weight where an op uses it); NULL for p NULL. */
const void *layer_cast_weight(struct backend *be, enum dtype dt, const struct param *p,
                              void *copy);

/* The gradient of p computed in dt (copy) into its fp32 grad: the cast's backward (nothing
 * for dt DT_F32 or p NULL). */
void layer_cast_grad_back(struct backend *be, enum dtype dt, const struct param *p,
                          const void *copy);

#endif
