/* linear.c — Linear on top of the backend table (see linear.h). */
#include "nn/linear.h"

int linear_init(struct linear *l, struct param_table *t, const char *prefix, int in, int out,
                struct rng *rng)
{
    l->in = in;
    l->out = out;
    int wshape[2] = {out, in};
    if (!(l->weight = params_add(t, prefix, "weight", PARAM_TRAINABLE, 2, wshape)) ||
        !(l->bias = params_add(t, prefix, "bias", PARAM_TRAINABLE, 1, &out)))
        return -1;
    return layer_init_fan_in(l->weight, l->bias, t->be, in, rng);
}

void linear_set_amp(struct linear *l, enum amp_dtype amp) { l->dt = (enum dtype)amp; }

void linear_forward(struct backend *be, const struct linear *l, int n, const void *x, void *y)
{
    be->linear_forward(be, n, l->in, l->out, l->dt, x, layer_weight(l->dt, l->weight),
                       layer_weight(l->dt, l->bias), y);
}

int linear_backward(struct backend *be, const struct linear *l, int n, const void *x,
                    const void *dy, void *dx, const struct grad_hook *hook)
{
    be->linear_backward(be, n, l->in, l->out, l->dt, x, layer_weight(l->dt, l->weight), dy, dx,
                        layer_grad(l->dt, l->weight), layer_grad(l->dt, l->bias));
    if (grad_hook_fire(hook, l->bias))
        return -1;
    return grad_hook_fire(hook, l->weight);
}
