/* layer.c — Conv2d, BatchNorm2d/SyncBatchNorm and Linear on top of the backend table. */
#include "nn/layer.h"

#include "comm/comm.h"
#include "common/error.h"

#include <math.h>
#include <stdlib.h>

int grad_hook_fire(const struct grad_hook *h, struct param *p)
{
    return h && h->ready ? h->ready(h->ctx, p) : 0;
}

/* kaiming_uniform_(a=sqrt(5)) on weights and uniform(+-1/sqrt(fan_in)) on biases, which
 * is PyTorch's default for both Conv2d and Linear: both bounds come to 1/sqrt(fan_in). */
static int init_fan_in(struct param *w, struct param *b, struct backend *be, int fan_in,
                       struct rng *rng)
{
    float bound = 1.0f / sqrtf((float)fan_in);
    if (params_fill_uniform(w, be, bound, rng))
        return -1;
    return b ? params_fill_uniform(b, be, bound, rng) : 0;
}

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
    return init_fan_in(l->weight, l->bias, t->be, in * kernel * kernel, rng);
}

int conv2d_shape_for(const struct conv2d *l, int n, int h, int w, struct conv2d_shape *cs)
{
    *cs = (struct conv2d_shape){.n = n, .c = l->in, .h = h, .w = w, .k = l->out,
                                .r = l->kernel, .s = l->kernel, .pad = l->pad,
                                .stride = l->stride};
    return conv2d_shape_init(cs);
}

/* The autocast buffers of a weight and bias (w_cast, b_cast, dw_cast, db_cast, in that
 * order): freed, then for a half type allocated. */
static int cast_buffers_set(struct backend *be, enum dtype dt, const struct param *w,
                            const struct param *b, void *bufs[4])
{
    for (int i = 0; i < 4; i++) {
        be->free(be, bufs[i]);
        bufs[i] = NULL;
    }
    if (dt == DT_F32)
        return 0;
    for (int i = 0; i < 4; i++) {
        const struct param *p = i % 2 ? b : w;
        if (p && !(bufs[i] = backend_alloc_elems(be, p->numel, dt)))
            return error_wrap("autocast copy of %s", p->name);
    }
    return 0;
}

/* the weight to compute with: the parameter itself, or its copy cast to dt now (PyTorch's
 * autocast casts a weight where an op uses it) */
static const void *cast_weight(struct backend *be, enum dtype dt, const struct param *p,
                               void *copy)
{
    if (!p)
        return NULL;
    if (dt == DT_F32)
        return p->data;
    be->cast(be, p->numel, DT_F32, p->data, dt, copy);
    return copy;
}

/* the gradient of a weight computed in dt (copy) into its fp32 grad: the cast's backward */
static void cast_grad_back(struct backend *be, enum dtype dt, const struct param *p,
                           const void *copy)
{
    if (p && dt != DT_F32)
        be->cast(be, p->numel, dt, copy, DT_F32, p->grad);
}

int conv2d_set_amp(struct backend *be, struct conv2d *l, enum amp_dtype amp)
{
    void *bufs[4] = {l->w_cast, l->b_cast, l->dw_cast, l->db_cast};
    l->dt = (enum dtype)amp;
    const int rc = cast_buffers_set(be, l->dt, l->weight, l->bias, bufs);
    l->w_cast = bufs[0], l->b_cast = bufs[1], l->dw_cast = bufs[2], l->db_cast = bufs[3];
    return rc;
}

void conv2d_free(struct backend *be, struct conv2d *l) { conv2d_set_amp(be, l, AMP_OFF); }

void conv2d_forward(struct backend *be, const struct conv2d *l, const struct conv2d_shape *cs,
                    const void *x, void *y)
{
    const void *w = cast_weight(be, l->dt, l->weight, l->w_cast);
    const void *b = cast_weight(be, l->dt, l->bias, l->b_cast);
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
    cast_grad_back(be, l->dt, l->weight, l->dw_cast);
    cast_grad_back(be, l->dt, l->bias, l->db_cast);
    if (l->bias && grad_hook_fire(hook, l->bias))
        return -1;
    return grad_hook_fire(hook, l->weight);
}

int batchnorm_init(struct batchnorm *l, struct param_table *t, const char *prefix, int c)
{
    *l = (struct batchnorm){.c = c, .eps = 1e-5f, .momentum = 0.1f};
    if (!(l->weight = params_add(t, prefix, "weight", PARAM_TRAINABLE, 1, &c)) ||
        !(l->bias = params_add(t, prefix, "bias", PARAM_TRAINABLE, 1, &c)) ||
        !(l->running_mean = params_add(t, prefix, "running_mean", PARAM_BUFFER, 1, &c)) ||
        !(l->running_var = params_add(t, prefix, "running_var", PARAM_BUFFER, 1, &c)) ||
        !(l->num_batches_tracked =
              params_add(t, prefix, "num_batches_tracked", PARAM_COUNTER, 0, NULL)))
        return -1;
    struct backend *be = t->be;
    if (params_fill_const(l->weight, be, 1.0f) || params_fill_const(l->running_var, be, 1.0f))
        return -1;
    l->mean = be->alloc(be, (size_t)c * sizeof(float));
    l->invstd = be->alloc(be, (size_t)c * sizeof(float));
    l->sums = be->alloc(be, (2 * (size_t)c + 1) * sizeof(float));
    if (!l->mean || !l->invstd || !l->sums)
        return error_wrap("batchnorm %s", prefix);
    return 0;
}

/* Gather area for `world` ranks: send row (2c+1), received rows world*(2c+1), then the
 * same regrouped as means (world*c), invstds (world*c), counts (world). */
static int batchnorm_gather_reserve(struct backend *be, struct batchnorm *l, int world)
{
    if (l->gather && l->gather_world == world)
        return 0;
    be->free(be, l->gather);
    size_t row = 2 * (size_t)l->c + 1;
    l->gather = be->alloc(be, (row + 2 * row * (size_t)world) * sizeof(float));
    l->gather_world = l->gather ? world : 0;
    return l->gather ? 0 : error_wrap("batchnorm: gather buffer for %d ranks", world);
}

int batchnorm_forward(struct backend *be, struct batchnorm *l, int n, int hw, const void *x,
                      void *y, int train)
{
    int c = l->c;
    if (!train) {
        be->batchnorm_forward_eval(be, n, c, hw, l->dt, x, l->running_mean->data,
                                   l->running_var->data, l->eps, l->weight->data,
                                   l->bias->data, y);
        return 0;
    }
    int world = l->sync ? l->sync->world : 1;
    if (batchnorm_gather_reserve(be, l, world))
        return -1;
    size_t row = 2 * (size_t)c + 1;
    float *send = l->gather, *recv = send + row, *means = recv + row * (size_t)world;
    float *invstds = means + (size_t)world * c, *counts = invstds + (size_t)world * c;
    float local_count = (float)n * (float)hw;

    be->batchnorm_stats(be, n, c, hw, l->dt, x, l->eps, send, send + c);
    be->upload(be, send + 2 * c, &local_count, sizeof local_count);
    if (world > 1) {
        if (comm_allgather_join(l->sync, send, recv, row, COMM_F32))
            return error_wrap("SyncBatchNorm %s forward", l->weight->name);
        /* regrouped on the device; the counts are never read on the host (PyTorch's
         * SyncBatchNorm neither): the global count reaches backward by its all-reduce */
        for (int r = 0; r < world; r++) {
            const float *src = recv + row * (size_t)r;
            be->copy(be, means + (size_t)r * c, src, (size_t)c * sizeof(float));
            be->copy(be, invstds + (size_t)r * c, src + c, (size_t)c * sizeof(float));
            be->copy(be, counts + r, src + 2 * c, sizeof(float));
        }
    } else {
        means = send;
        invstds = send + c;
        counts = send + 2 * c;
    }
    l->local_count = local_count;
    be->batchnorm_gather_stats(be, world, c, means, invstds, counts, l->momentum, l->eps,
                               l->running_mean->data, l->running_var->data, l->mean,
                               l->invstd);
    l->num_batches_tracked->counter++;
    be->batchnorm_elemt(be, n, c, hw, l->dt, x, l->mean, l->invstd, l->weight->data,
                        l->bias->data, y);
    return 0;
}

int batchnorm_backward(struct backend *be, struct batchnorm *l, int n, int hw, const void *x,
                       const void *dy, void *dx, const struct grad_hook *hook)
{
    int c = l->c;
    be->batchnorm_backward_reduce(be, n, c, hw, l->dt, dy, x, l->mean, l->invstd, l->sums,
                                  l->sums + c, l->weight->grad, l->bias->grad);
    /* sums[2c]: this rank's count, summed over the ranks with the sums (stream-ordered:
     * no host wait, no host read) */
    be->upload(be, l->sums + 2 * c, &l->local_count, sizeof l->local_count);
    if (l->sync && l->sync->world > 1 &&
        comm_allreduce_join(l->sync, l->sums, 2 * (size_t)c + 1, COMM_F32))
        return error_wrap("SyncBatchNorm %s backward", l->weight->name);
    be->batchnorm_backward_elemt(be, n, c, hw, l->dt, dy, x, l->mean, l->invstd,
                                 l->weight->data, l->sums, l->sums + c, l->sums + 2 * c, dx);
    if (grad_hook_fire(hook, l->bias))
        return -1;
    return grad_hook_fire(hook, l->weight);
}

void batchnorm_free(struct backend *be, struct batchnorm *l)
{
    be->free(be, l->mean);
    be->free(be, l->invstd);
    be->free(be, l->sums);
    be->free(be, l->gather);
    l->mean = l->invstd = l->sums = l->gather = NULL;
}

int linear_init(struct linear *l, struct param_table *t, const char *prefix, int in, int out,
                struct rng *rng)
{
    l->in = in;
    l->out = out;
    int wshape[2] = {out, in};
    if (!(l->weight = params_add(t, prefix, "weight", PARAM_TRAINABLE, 2, wshape)) ||
        !(l->bias = params_add(t, prefix, "bias", PARAM_TRAINABLE, 1, &out)))
        return -1;
    return init_fan_in(l->weight, l->bias, t->be, in, rng);
}

int linear_set_amp(struct backend *be, struct linear *l, enum amp_dtype amp)
{
    void *bufs[4] = {l->w_cast, l->b_cast, l->dw_cast, l->db_cast};
    l->dt = (enum dtype)amp;
    const int rc = cast_buffers_set(be, l->dt, l->weight, l->bias, bufs);
    l->w_cast = bufs[0], l->b_cast = bufs[1], l->dw_cast = bufs[2], l->db_cast = bufs[3];
    return rc;
}

void linear_free(struct backend *be, struct linear *l) { linear_set_amp(be, l, AMP_OFF); }

void linear_forward(struct backend *be, const struct linear *l, int n, const void *x, void *y)
{
    const void *w = cast_weight(be, l->dt, l->weight, l->w_cast);
    const void *b = cast_weight(be, l->dt, l->bias, l->b_cast);
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
    cast_grad_back(be, l->dt, l->weight, l->dw_cast);
    cast_grad_back(be, l->dt, l->bias, l->db_cast);
    if (grad_hook_fire(hook, l->bias))
        return -1;
    return grad_hook_fire(hook, l->weight);
}
