/* params.h — a model's named tensors: parameters and buffers in PyTorch state_dict order.
 *
 * One table per model.  Entries appear in the order of the PyTorch module's state_dict()
 * (per module: its parameters, then its buffers), so iterating the trainable entries gives
 * model.parameters() order and iterating all gives state_dict() order.  Tensor memory
 * belongs to the backend the table was created with and is freed by params_free().
 *
 * Packed (params_pack, which every model's create, the optimizers and the DDP reducer
 * call), the trainable entries' data and gradients are views of two flat buffers, one
 * entry after another in parameters() order, as PyTorch's fused optimizers and DDP's
 * gradient_as_bucket_view see them: an optimizer step, the GradScaler's unscale and a DDP
 * bucket are then each one operation over a range of the flat buffer, not one per tensor.
 * A checkpoint still holds one tensor per entry, under its name. */
#ifndef DDPPROF_PARAMS_H
#define DDPPROF_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h" /* enum dtype */

struct rng;

enum param_kind {
    PARAM_TRAINABLE,  /* nn.Parameter: fp32 data + grad */
    PARAM_BUFFER,     /* fp32 buffer (running_mean, running_var) */
    PARAM_COUNTER,    /* int64 scalar buffer kept on the host (num_batches_tracked) */
};

#define PARAM_NAME_MAX 96
#define PARAM_MAX_DIMS 4

struct param {
    char name[PARAM_NAME_MAX]; /* PyTorch name, e.g. "layer1.0.weight" */
    enum param_kind kind;
    int ndim;                  /* 0 for scalars */
    int shape[PARAM_MAX_DIMS];
    size_t numel;
    float *data;               /* device memory (NULL for counters); packed: a view */
    float *grad;               /* device memory, trainable only; packed: a view */
    int64_t counter;           /* PARAM_COUNTER value */
    int index;                 /* position among trainable entries (-1 for buffers) */
    size_t offset;             /* packed: the elements before data in flat_data (and grad
                                  in flat_grad) */
    /* autocast (params_set_amp), trainable only: this entry's views of flat_half and
     * flat_half_grad; grad_in_half: backward left the gradient in grad_half, not yet cast
     * into grad (params_grads_to_f32) */
    void *half, *grad_half;
    int grad_in_half;
};

struct param_table {
    struct backend *be;
    struct param **items;      /* state_dict order; each entry owned by the table */
    int count, trainable;
    size_t cap;                /* items' capacity (common/vec.h) */
    /* packed: every trainable entry's data (grad) in parameters() order, each starting at a
     * multiple of PARAMS_ALIGN elements (the few elements between two entries stay zero);
     * NULL before params_pack or without trainable entries */
    float *flat_data, *flat_grad;
    size_t flat_numel;         /* elements of each flat buffer */
    /* autocast: half_dt (DT_F32: none) copies laid out as flat_data: the parameters cast at
     * each forward, and the gradients conv and linear layers compute in half_dt; a 4-D
     * entry's elements (a conv weight) in the backend's layout of half_dt (backend.h) */
    enum dtype half_dt;
    void *flat_half, *flat_half_grad;
};

/* Entries start 16 bytes apart at least: vector loads and cuDNN/cuBLAS alignment (every
 * tensor of the ConvNet and of ResNet18 but the last bias is a multiple of 4 elements
 * already, so neither has a gap). */
#define PARAMS_ALIGN 4

void params_init(struct param_table *t, struct backend *be);

/* Add an entry named prefix + "." + leaf (prefix may be ""), allocating zeroed device
 * data (and grad when trainable).  Returns the entry (owned by the table) or NULL
 * (error_set; also once the table is packed).  The entry stays valid until params_free,
 * its data and grad pointers until params_pack. */
struct param *params_add(struct param_table *t, const char *prefix, const char *leaf,
                         enum param_kind kind, int ndim, const int *shape);

struct param *params_find(const struct param_table *t, const char *name);

/* The i-th trainable entry in parameters() order. */
struct param *params_trainable(const struct param_table *t, int i);

size_t params_trainable_numel(const struct param_table *t);

/* Move every trainable entry's data and gradient into the table's flat buffers (their
 * values kept) and point the entries at their views there; a packed table is left as it
 * is.  data and grad pointers taken before are stale.  0 or -1 (error_set, the table as
 * it was). */
int params_pack(struct param_table *t);

/* Autocast's half copies: for a half type dt, flat buffers of dt laid out as flat_data
 * (packing first) and every trainable entry's views there (half, grad_half); DT_F32 frees
 * them.  0 or -1 (error_set: none left). */
int params_set_amp(struct param_table *t, enum dtype dt);

/* Autocast: every parameter cast to half_dt into flat_half, one cast over the flat buffer,
 * or, where the backend's layout of half_dt is not that of fp32, one cast_list converting
 * the 4-D entries into it (a model's forward does this first).  PyTorch's autocast casts each weight where an op
 * uses it; no parameter changes within a forward, so the values are the same. */
void params_cast_half(struct param_table *t);

/* The gradients of trainable entries first..last (parameters() indices) that backward left
 * in grad_half cast into grad, in one cast_list (the backend slot): the DDP reducer does it
 * for each bucket as it completes, a model's backward for whatever is left at its end.
 * 0 or -1 (error_set: out of host memory). */
int params_grads_to_f32(struct param_table *t, int first, int last);

/* Fill an entry's data with uniform(-bound, bound) drawn from r (PyTorch's init
 * distributions, not its bits), or with a constant.  0 or -1 (error_set). */
int params_fill_uniform(struct param *p, struct backend *be, float bound, struct rng *r);
int params_fill_const(struct param *p, struct backend *be, float value);

void params_free(struct param_table *t);

#endif
