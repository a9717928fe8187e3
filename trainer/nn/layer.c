/* layer.c — what Conv2d, BatchNorm2d and Linear share (see layer.h). */
#include "nn/layer.h"

#include "common/error.h"

#include <math.h>

int grad_hook_fire(const struct grad_hook *h, struct param *p)
{
    return h && h->ready ? h->ready(h->ctx, p) : 0;
}

/* kaiming_uniform_(a=sqrt(5)) on weights and uniform(+-1/sqrt(fan_in)) on biases, which
 * is PyTorch's default for both Conv2d and Linear: both bounds come to 1/sqrt(fan_in). */
int layer_init_fan_in(struct param *w, struct param *b, struct backend *be, int fan_in,
                      struct rng *rng)
{
    float bound = 1.0f / sqrtf((float)fan_in);
    if (params_fill_uniform(w, be, bound, rng))
        return -1;
    return b ? params_fill_uniform(b, be, bound, rng) : 0;
}

/* The autocast buffers of a weight and bias (w_cast, b_cast, dw_cast, db_cast, in that
 * order): freed, then for a half type allocated. */
int layer_cast_buffers_set(struct backend *be, enum dtype dt, const struct param *w,
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
const void *layer_cast_weight(struct backend *be, enum dtype dt, const struct param *p,
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
void layer_cast_grad_back(struct backend *be, enum dtype dt, const struct param *p,
                          const void *copy)
{
    if (p && dt != DT_F32)
        be->cast(be, p->numel, dt, copy, DT_F32, p->grad);
}
