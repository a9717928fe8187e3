/* layer.h — the layers the models are built from: Conv2d, BatchNorm2d (optionally
 * synchronised across ranks, as nn.SyncBatchNorm), Linear.
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

struct comm;
struct rng;

/* Called once per trainable parameter as soon as its gradient is final. */
struct grad_hook {
    int (*ready)(void *ctx, struct param *p); /* 0 or -1 (error_set) */
    void *ctx;
};

int grad_hook_fire(const struct grad_hook *h, struct param *p);

/* nn.Conv2d(in, out, kernel, stride, padding, bias) */
struct conv2d {
    int in, out, kernel, stride, pad;
    struct param *weight, *bias; /* bias NULL without bias */
    enum dtype dt;               /* activations' type: DT_F32, or autocast's half type */
    void *w_cast, *b_cast;       /* autocast: the weights cast to dt by the last forward */
    void *dw_cast, *db_cast;     /* autocast: their gradients in dt, before the fp32 cast */
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

/* nn.Linear(in, out) */
struct linear {
    int in, out;
    struct param *weight, *bias;
    enum dtype dt;           /* as struct conv2d's */
    void *w_cast, *b_cast;
    void *dw_cast, *db_cast;
};

int linear_init(struct linear *l, struct param_table *t, const char *prefix, int in, int out,
                struct rng *rng);
/* x (n,in) -> y (n,out), both of l->dt */
void linear_forward(struct backend *be, const struct linear *l, int n, const void *x, void *y);
/* x, dy, dx of l->dt; dx may be NULL */
int linear_backward(struct backend *be, const struct linear *l, int n, const void *x,
                    const void *dy, void *dx, const struct grad_hook *hook);

/* Autocast for conv and linear: dt = (enum dtype)amp, and the buffers of the weights'
 * half copies and their gradients allocated (AMP_OFF: freed).  0 or -1 (error_set). */
int conv2d_set_amp(struct backend *be, struct conv2d *l, enum amp_dtype amp);
int linear_set_amp(struct backend *be, struct linear *l, enum amp_dtype amp);
void conv2d_free(struct backend *be, struct conv2d *l);
void linear_free(struct backend *be, struct linear *l);

#endif
