/* linear.h — nn.Linear on the backend's GEMM (layer.h: the grad hook, autocast). */
#ifndef DDPPROF_LINEAR_H
#define DDPPROF_LINEAR_H

#include "backend/backend.h"
#include "nn/layer.h"
#include "nn/params.h"

struct rng;

/* nn.Linear(in, out) */
struct linear {
    int in, out;
    struct param *weight, *bias;
    enum dtype dt;           /* as struct conv2d's */
};

int linear_init(struct linear *l, struct param_table *t, const char *prefix, int in, int out,
                struct rng *rng);
/* x (n,in) -> y (n,out), both of l->dt */
void linear_forward(struct backend *be, const struct linear *l, int n, const void *x, void *y);
/* x, dy, dx of l->dt; dx may be NULL */
int linear_backward(struct backend *be, const struct linear *l, int n, const void *x,
                    const void *dy, void *dx, const struct grad_hook *hook);

/* Autocast, as conv2d_set_amp: dt = (enum dtype)amp */
void linear_set_amp(struct linear *l, enum amp_dtype amp);

#endif
