/* conv.c — Conv2d on top of the backend table (see conv.h). */
#include "nn/conv.h"

int conv2d_init(struct conv2d *l, struct param_table *t, const char *prefix, int in, int out,
                int kernel, int stride, int pad, int bias, struct rng *rng)
{
    l->in = in;
    l->out = out;
    l->kernel = kernel;
    l->stride = stride;
    l->pad = pad;
    int wshape[4] = {out, in, kernel, kernel};
    l->weight = params_add(t, prefix, "weight", PARAM_TRAINABLE, 4, wshape);
    if (!l->weight)
        return -1;
    l->bias = NULL;
    if (bias && !(l->bias = params_add(t, prefix, "bias", PARAM_TRAINABLE, 1, &out)))
        return -1;
    return layer_init_fan_in(l->weight, l->bias, t->be, in * kernel * kernel, rng);
}

int conv2d_shape_for(const struct conv2d *l, int n, int h, int w, struct conv2d_shape *cs)
{
    *cs = (struct conv2d_shape){.n = n, .c = l->in, .h = h, .w = w, .k = l->out,
                                .r = l->kernel, .s = l->kernel, .pad = l->pad,
                                .stride = l->stride};
    return conv2d_shape_init(cs);
}

void conv2d_set_amp(struct conv2d *l, enum amp_dtype amp) { l->dt = (enum dtype)amp; }

void conv2d_forward(struct backend *be, const struct conv2d *l, const struct conv2d_shape *cs,
                    const void *x, void *y)
{
    be->conv2d_forward(be, cs, l->dt, x, layer_weight(l->dt, l->weight),
                       layer_weight(l->dt, l->bias), y);
}

int conv2d_backward(struct backend *be, const struct conv2d *l, const struct conv2d_shape *cs,
                    const void *x, const void *dy, void *dx, const struct grad_hook *hook)
{
    be->conv2d_backward(be, cs, l->dt, x, layer_weight(l->dt, l->weight), dy, dx,
                        layer_grad(l->dt, l->weight), layer_grad(l->dt, l->bias));
    if (l->bias && grad_hook_fire(hook, l->bias))
        return -1;
    return grad_hook_fire(hook, l->weight);
}
