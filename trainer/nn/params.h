/* params.h — a model's named tensors: parameters and buffers in PyTorch state_dict order.
 *
 * One table per model.  Entries appear in the order of the PyTorch module's state_dict()
 * (per module: its parameters, then its buffers), so iterating the trainable entries gives
 * model.parameters() order and iterating all gives state_dict() order.  Tensor memory
 * belongs to the backend the table was created with and is freed by params_free(). */
#ifndef DDPPROF_PARAMS_H
#define DDPPROF_PARAMS_H

#include <stddef.h>
#include <stdint.h>

struct backend;
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
    float *data;               /* device memory (NULL for counters) */
    float *grad;               /* device memory, trainable only */
    int64_t counter;           /* PARAM_COUNTER value */
    int index;                 /* position among trainable entries (-1 for buffers) */
};

struct param_table {
    struct backend *be;
    struct param **items;      /* state_dict order; each entry owned by the table */
    int count, trainable;
    size_t cap;                /* items' capacity (common/vec.h) */
};

void params_init(struct param_table *t, struct backend *be);

/* Add an entry named prefix + "." + leaf (prefix may be ""), allocating zeroed device
 * data (and grad when trainable).  Returns the entry (owned by the table) or NULL
 * (error_set).  Pointers stay valid until params_free. */
struct param *params_add(struct param_table *t, const char *prefix, const char *leaf,
                         enum param_kind kind, int ndim, const int *shape);

struct param *params_find(const struct param_table *t, const char *name);

/* The i-th trainable entry in parameters() order. */
struct param *params_trainable(const struct param_table *t, int i);

size_t params_trainable_numel(const struct param_table *t);

/* Fill an entry's data with uniform(-bound, bound) drawn from r (PyTorch's init
 * distributions, not its bits), or with a constant.  0 or -1 (error_set). */
int params_fill_uniform(struct param *p, struct backend *be, float bound, struct rng *r);
int params_fill_const(struct param *p, struct backend *be, float value);

void params_free(struct param_table *t);

#endif
