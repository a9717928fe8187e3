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
 * backend stores that type.  Conv and linear compute from half copies of their weights
 * (the table's, params.h params_set_amp: all cast in one operation at the start of each
 * forward) and write their weight gradients in the half type (grad_half), to be cast
 * back to the fp32 param grads -- the cast's backward -- a DDP bucket at a time or at the
 * end of backward (params_grads_to_f32); batch norm keeps fp32 parameters, statistics and
 * gradients.  The parameters, their gradients and everything the optimizer and DDP touch
 * stay fp32. */
#ifndef DDPPROF_LAYER_H
#define DDPPROF_LAYER_H

#include "backend/backend.h"
#include "nn/params.h"

struct rng;

/* Called once per trainable parameter as soon as its gradient is final: in p->grad, or,
 * computed under autocast (p->grad_in_half), in p->grad_half until params_grads_to_f32. */
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

/* The weight p to compute with in dt: the parameter itself (DT_F32), or its half copy cast
 * by this forward (params_cast_half); NULL for p NULL. */
const void *layer_weight(enum dtype dt, const struct param *p);

/* Where backward writes p's gradient computed in dt: grad, or for a half type grad_half
 * (then marked grad_in_half, for params_grads_to_f32); NULL for p NULL. */
void *layer_grad(enum dtype dt, struct param *p);

#endif
