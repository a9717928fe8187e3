/* resblock.h — the residual block of the distributed-training example's ResNet18:
 *
 *   residual_function = Conv2d(in, out, 3, stride, pad 1, no bias) BatchNorm2d(out) ReLU
 *                       Conv2d(out, out, 3, pad 1, no bias) BatchNorm2d(out)
 *   shortcut          = Conv2d(in, out, 1, stride, no bias) BatchNorm2d(out)
 *                       when stride != 1 or in != out, else the identity
 *   y = ReLU(residual_function(x) + shortcut(x))
 *
 * with PyTorch's names under the block's prefix (residual_function.0.weight,
 * residual_function.1.running_mean, ..., shortcut.0.weight, shortcut.1.bias).  The block
 * owns its activations (grown to the largest batch seen, of its dt); the input of the last
 * forward is borrowed and must stay untouched until its backward. */
#ifndef DDPPROF_RESBLOCK_H
#define DDPPROF_RESBLOCK_H

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/layer_list.h"

struct rng;

struct resblock {
    int in, out, stride;
    int projection;                  /* 1: conv + BN shortcut; 0: identity */
    struct conv2d conv1, conv2, conv_sc;  /* residual_function.0, .3; shortcut.0 */
    struct batchnorm bn1, bn2, bn_sc;     /* residual_function.1, .4; shortcut.1 */
    enum dtype dt;                   /* activations' type (resblock_set_amp) */
    int n, h, w, p, q;               /* the last forward: input (n,in,h,w), output (n,out,p,q) */
    struct conv2d_shape cs1, cs2, cs_sc;
    const void *x;                   /* the last forward's input (borrowed) */
    size_t cap;                      /* elements each buffer below holds */
    /* (n,out,p,q) each, of dt: conv1 out, its BN+ReLU, conv2 out, the output (bn2 + shortcut,
     * ReLU, in place); with a projection the shortcut's conv and BN outputs */
    void *c1, *a1, *c2, *y, *c_sc, *b_sc;
    /* its layers in the model's list (resblock_list_layers; NULL: none): residual_function
     * .0-.4, shortcut.0-.1 (-1 without a projection), the sum and the ReLU after it */
    const struct layer_list *layers;
    int l_conv1, l_bn1, l_relu1, l_conv2, l_bn2, l_conv_sc, l_bn_sc, l_add, l_relu;
};

/* Register the block's parameters under prefix ("conv3.0") and initialise them as
 * PyTorch does.  0 or -1 (error_set). */
int resblock_init(struct resblock *b, struct param_table *t, const char *prefix, int in,
                  int out, int stride, struct rng *rng);

/* Register the block's layers in L, in forward order, for an input plane of h x w (*p, *q:
 * its output plane), named under prefix ("conv3.0.residual_function.0", ...,
 * "conv3.0.add", "conv3.0.relu"); L must outlive the block.  0 or -1 (error_set). */
int resblock_list_layers(struct resblock *b, struct layer_list *L, const char *prefix, int h,
                         int w, int *p, int *q);

/* x (n,in,h,w) of b->dt -> *y (n,out,p,q) of b->dt, owned by the block, valid until its
 * next forward.  train: batch statistics (see batchnorm_forward).  0 or -1 (error_set). */
int resblock_forward(struct backend *be, struct resblock *b, const void *x, int n, int h, int w,
                     int train, const void **y);

/* Backward of the last forward.  dy (n,out,p,q) is the gradient of the output and is
 * overwritten; dx (n,in,h,w) receives the input's gradient; s0 and s1 are scratch, each at
 * least max(n*in*h*w, n*out*p*q) elements of dt; dy, dx, s0, s1 are distinct.  Gradients
 * reach hook in reverse parameter order (shortcut first).  0 or -1 (error_set). */
int resblock_backward(struct backend *be, struct resblock *b, void *dy, void *dx, void *s0,
                      void *s1, const struct grad_hook *hook);

/* SyncBatchNorm over comm for the block's three batch norms (NULL: local) */
void resblock_set_sync_bn(struct resblock *b, struct comm *comm);

/* autocast (see layer.h): activations of (enum dtype)amp from the next forward on (the
 * weights' half copies are the model's table's: params_set_amp) */
void resblock_set_amp(struct backend *be, struct resblock *b, enum amp_dtype amp);

void resblock_free(struct backend *be, struct resblock *b);

#endif
