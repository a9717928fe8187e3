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

int linear_set_amp(struct backend *be, struct linear *l, enum amp_dtype amp)
{
    void *bufs[4] = {l->w_cast, l->b_cast, l->dw_cast, l->db_cast};
    l->dt = (enum dtype)amp;
    const int rc = layer_cast_buffers_set(be, l->dt, l->weight, l->bias, bufs);
    l->w_cast = bufs[0], l->b_cast = bufs[1], l->dw_cast = bufs[2], l->db_cast = bufs[3];
    return rc;
}

void linear_free(struct backend *be, struct linear *l) { linear_set_amp(be, l, AMP_OFF); }

void linear_forward(struct backend *be, const struct linear *l, int n, const void *x, void *y)
{
    const void *w = layer_cast_weight(be, l->dt, l->weight, l->w_cast);
    const void *b = layer_cast_weight(be, l->dt, l->bias, l->b_cast);
    be->linear_forward(be, n, l->in, l->out, l->dt, x, w, b, y);
}

int linear_backward(struct backend *be, const struct linear *l, int n, const void *x,
                    const void *dy, void *dx, const struct grad_hook *hook)
{
    const int half = l->dt != DT_F32;
    const void *w = half ? l->w_cast : l->weight->data;
    void *dw = half ? l->dw_cast : l->weight->grad;
    void *db = half ? l->db_cast : l->bias->grad;
    be->linear_backward(be, n, l->in, l->out, l->dt, x, w, dy, dx, dw, db);
    layer_cast_grad_back(be, l->dt, l->weight, l->dw_cast);
    layer_cast_grad_back(be, l->dt, l->bias, l->db_cast);
    if (grad_hook_fire(hook, l->bias))
        return -1;
    return grad_hook_fire(hook, l->weight);
}
