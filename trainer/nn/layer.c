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

const void *layer_weight(enum dtype dt, const struct param *p)
{
    return !p ? NULL : dt == DT_F32 ? (const void *)p->data : p->half;
}

void *layer_grad(enum dtype dt, struct param *p)
{
    if (!p)
        return NULL;
    if (dt == DT_F32)
        return p->grad;
    p->grad_in_half = 1;
    return p->grad_half;
}
