/* layer_list.h — a model's layers in forward order, with what each one costs, and the one
 * hook that sees each layer's forward and backward run.
 *
 * Every model registers its layers here at creation (conv, batchnorm, relu, maxpool,
 * avgpool, linear, add; parameterless ones too), named by their PyTorch module name (the
 * state_dict prefix: "layer1.0", "conv2.0.residual_function.1", "dense_layer"; a layer
 * that is no module, ResNet18's residual add and the ReLU after it, "conv2.0.add" and
 * "conv2.0.relu").  Its FLOPs and tensor bytes per sample are fixed by the model's input
 * size, so layer_costs gives them for any batch (report/FORMULAS.md "Per-layer FLOPs and
 * bytes" states every formula).  The models wrap each layer's forward and backward in
 * layer_enter / layer_leave: with an observer set (the trainer's probes under --trace full)
 * each becomes a range; without one each call is one NULL test.  A backward range ends
 * after the layer reported its parameter gradients to the grad hook (layer.h). */
#ifndef DDPPROF_LAYER_LIST_H
#define DDPPROF_LAYER_LIST_H

#include "nn/params.h"

#include <stddef.h>
#include <stdint.h>

enum layer_dir { LAYER_FORWARD = 0, LAYER_BACKWARD = 1 };

struct layer_info {
    char name[PARAM_NAME_MAX]; /* PyTorch module name */
    const char *type;          /* "conv", "batchnorm", "relu", "maxpool", "avgpool",
                                  "linear", "add" */
    uint64_t param_bytes;      /* its trainable parameters' fp32 bytes (= gradient bytes) */
    /* per sample, at the model's input size, [LAYER_FORWARD] and [LAYER_BACKWARD]: */
    double flops[2];
    double act_elems[2];       /* activation elements read + written (of the activation type) */
    double idx_bytes[2];       /* other bytes per sample (max pooling's int32 argmax) */
    /* per step, whatever the batch: parameter bytes read + written (fp32) */
    double param_io_bytes[2];
};

struct layer_observer {
    void (*enter)(void *ctx, const struct layer_info *l, enum layer_dir dir);
    void (*leave)(void *ctx, const struct layer_info *l, enum layer_dir dir);
    void *ctx;
};

struct layer_list {
    struct layer_info *items; /* forward order */
    int count;
    size_t cap;
    const struct layer_observer *obs; /* NULL: not observed (the default) */
};

/* the layer's FLOPs and bytes of direction dir for a batch of n, activations of
 * act_elem_bytes bytes each (4 for fp32, 2 under autocast) */
void layer_costs(const struct layer_info *l, enum layer_dir dir, int n, size_t act_elem_bytes,
                 double *flops, double *bytes);

/* ---- registration: each returns the layer's index, or -1 (error_set: out of memory) ---- */

/* Conv2d(c -> k, kernel r, stride, pad) on (c,h,w); *p, *q its output plane.  has_bias;
 * computes_dx 0 for a first layer (its backward computes no input gradient). */
int layer_list_conv(struct layer_list *L, const char *name, int c, int h, int w, int k, int r,
                    int stride, int pad, int has_bias, int computes_dx, int *p, int *q);
/* BatchNorm2d(c) on (c, hw), training mode */
int layer_list_batchnorm(struct layer_list *L, const char *name, int c, int hw);
/* ReLU on elems elements */
int layer_list_relu(struct layer_list *L, const char *name, double elems);
/* MaxPool2d(kernel, stride kernel) on (c,h,w) */
int layer_list_maxpool(struct layer_list *L, const char *name, int c, int h, int w, int kernel);
/* AdaptiveAvgPool2d((1,1)) on (c,h,w) */
int layer_list_avgpool(struct layer_list *L, const char *name, int c, int h, int w);
/* Linear(in -> out) with bias */
int layer_list_linear(struct layer_list *L, const char *name, int in, int out, int computes_dx);
/* an elementwise sum of elems elements in forward; backward sums bwd_elems (the two
 * gradients of a residual block's input) */
int layer_list_add(struct layer_list *L, const char *name, double elems, double bwd_elems);

void layer_list_free(struct layer_list *L);

static inline void layer_enter(const struct layer_list *L, int id, enum layer_dir dir)
{
    if (L && L->obs && id >= 0 && id < L->count)
        L->obs->enter(L->obs->ctx, &L->items[id], dir);
}

static inline void layer_leave(const struct layer_list *L, int id, enum layer_dir dir)
{
    if (L && L->obs && id >= 0 && id < L->count)
        L->obs->leave(L->obs->ctx, &L->items[id], dir);
}

#endif
