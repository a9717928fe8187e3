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

int conv2d_set_amp(struct backend *be, struct conv2d *l, enum amp_dtype amp)
{
    void *bufs[4] = {l->w_cast, l->b_cast, l->dw_cast, l->db_cast};
    l->dt = (enum dtype)amp;
    const int rc = layer_cast_buffers_set(be, l->dt, l->weight, l->bias, bufs);
    l->w_cast = bufs[0], l->b_cast = bufs[1], l->dw_cast = bufs[2], l->db_cast = bufs[3];
    return rc;
}

void conv2d_free(struct backend *be, struct conv2d *l) { conv2d_set_amp(be, l, AMP_OFF); }

void conv2d_forward(struct backend *be, const struct conv2d *l, const struct conv2d_shape *cs,
                    const void *x, void *y)
{
    const void *w = layer_cast_weight(be, l->dt, l->weight, l->w_cast);
    const void *b = layer_cast_weight(be, l->dt, l->bias, l->b_cast);
    be->conv2d_forward(be, cs, l->dt, x, w, b, y);
}

int conv2d_backward(struct backend *be, const struct conv2d *l, const struct conv2d_shape *cs,
                    const void *x, const void *dy, void *dx, const struct grad_hook *hook)
{
    const int half = l->dt != DT_F32;
    const void *w = half ? l->w_cast : l->weight->data; /* as cast by the forward */
    void *dw = half ? l->dw_cast : l->weight->grad;
    void *db = !l->bias ? NULL : half ? l->db_cast : l->bias->grad;
    be->conv2d_backward(be, cs, l->dt, x, w, dy, dx, dw, db);
    layer_cast_grad_back(be, l->dt, l->weight, l->dw_cast);
    layer_cast_grad_back(be, l->dt, l->bias, l->db_cast);
    if (l->bias && grad_hook_fire(hook, l->bias))
        return -1;
    return grad_hook_fire(hook, l->weight);
}
