/* conv.h — nn.Conv2d on the backend's convolution (layer.h: the grad hook, autocast). */
#ifndef DDPPROF_CONV_H
#define DDPPROF_CONV_H

#include "backend/backend.h"
#include "nn/layer.h"
#include "nn/params.h"

struct rng;

/* nn.Conv2d(in, out, kernel, stride, padding, bias) */
struct conv2d {
    int in, out, kernel, stride, pad;
    struct param *weight, *bias; /* bias NULL without bias */
    enum dtype dt;               /* activations' type: DT_F32, or autocast's half type */
};

int conv2d_init(struct conv2d *l, struct param_table *t, const char *prefix, int in, int out,
                int kernel, int stride, int pad, int bias, struct rng *rng);
/* the shape of this layer applied to x (n, in, h, w); -1 (error_set) if it does not fit */
int conv2d_shape_for(const struct conv2d *l, int n, int h, int w, struct conv2d_shape *cs);
/* x (n,in,h,w) -> y (n,out,p,q), both of l->dt */
void conv2d_forward(struct backend *be, const struct conv2d *l, const struct conv2d_shape *cs,
                    const void *x, void *y);
/* x, dy, dx of l->dt; dx may be NULL (first layer) */
int conv2d_backward(struct backend *be, const struct conv2d *l, const struct conv2d_shape *cs,
                    const void *x, const void *dy, void *dx, const struct grad_hook *hook);

/* Autocast: dt = (enum dtype)amp (the weights' half copies are the table's:
 * params_set_amp) */
void conv2d_set_amp(struct conv2d *l, enum amp_dtype amp);

#endif
