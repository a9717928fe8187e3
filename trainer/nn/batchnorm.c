/* batchnorm.c — BatchNorm2d and SyncBatchNorm on top of the backend table (see
 * batchnorm.h). */
#include "nn/batchnorm.h"

#include "comm/comm.h"
#include "common/error.h"

int batchnorm_init(struct batchnorm *l, struct param_table *t, const char *prefix, int c)
{
    *l = (struct batchnorm){.c = c, .eps = 1e-5f, .momentum = 0.1f, .gather_count = -1.0f,
                            .sums_count = -1.0f};
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
    l->gather_count = -1.0f;
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
    if (l->gather_count != local_count) { /* the batch's shape changed (or the first step) */
        be->upload(be, send + 2 * c, &local_count, sizeof local_count);
        l->gather_count = local_count;
    }
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
     * no host wait, no host read); uploaded only when the slot holds another value */
    if (l->sums_count != l->local_count) {
        be->upload(be, l->sums + 2 * c, &l->local_count, sizeof l->local_count);
        l->sums_count = l->local_count;
    }
    if (l->sync && l->sync->world > 1) {
        l->sums_count = -1.0f; /* the sum over the ranks from here on */
        if (comm_allreduce_join(l->sync, l->sums, 2 * (size_t)c + 1, COMM_F32))
            return error_wrap("SyncBatchNorm %s backward", l->weight->name);
    }
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
