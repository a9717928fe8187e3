/* sgd.c — torch.optim.SGD on the backend (see sgd.h). */
#include "nn/sgd.h"

#include "backend/backend.h"
#include "common/error.h"

#include <stdlib.h>

int sgd_init(struct sgd *o, struct param_table *params, float lr, float momentum,
             float dampening, float weight_decay, int nesterov)
{
    *o = (struct sgd){.lr = lr, .momentum = momentum, .dampening = dampening,
                      .weight_decay = weight_decay, .nesterov = nesterov, .params = params};
    int n = params->trainable;
    o->buf = calloc((size_t)n + 1, sizeof *o->buf);
    o->started = calloc((size_t)n + 1, sizeof *o->started);
    if (!o->buf || !o->started) {
        sgd_free(o);
        return error_set("sgd: out of memory");
    }
    if (params_pack(params)) {
        sgd_free(o);
        return error_wrap("sgd");
    }
    return 0;
}

int sgd_state_alloc(struct sgd *o)
{
    struct param_table *t = o->params;
    if (o->buf_flat || t->flat_numel == 0)
        return 0;
    if (!(o->buf_flat = t->be->alloc(t->be, t->flat_numel * sizeof(float))))
        return error_wrap("sgd: momentum buffers (%zu elements)", t->flat_numel);
    for (int i = 0; i < t->count; i++) {
        const struct param *p = t->items[i];
        if (p->kind == PARAM_TRAINABLE)
            o->buf[p->index] = o->buf_flat + p->offset;
    }
    return 0;
}

int sgd_step(struct sgd *o)
{
    struct param_table *t = o->params;
    struct backend *be = t->be;
    if (o->momentum != 0.0f && sgd_state_alloc(o))
        return -1;
    /* every parameter at the same point (the usual case): one update over them all, the
     * gaps between entries included (zeros: they stay zero) */
    int same = 1;
    for (int k = 1; k < t->trainable; k++)
        same &= o->started[k] == o->started[0];
    if (same && t->flat_numel) {
        be->sgd_step(be, t->flat_numel, t->flat_data, t->flat_grad, o->buf_flat, o->lr,
                     o->momentum, o->dampening, o->weight_decay, o->nesterov, !o->started[0]);
    } else {
        for (int i = 0; i < t->count; i++) {
            struct param *p = t->items[i];
            if (p->kind == PARAM_TRAINABLE)
                be->sgd_step(be, p->numel, p->data, p->grad, o->buf[p->index], o->lr,
                             o->momentum, o->dampening, o->weight_decay, o->nesterov,
                             !o->started[p->index]);
        }
    }
    if (o->momentum != 0.0f)
        for (int k = 0; k < t->trainable; k++)
            o->started[k] = 1;
    return 0;
}

void sgd_free(struct sgd *o)
{
    if (o->params)
        o->params->be->free(o->params->be, o->buf_flat);
    free(o->buf);
    free(o->started);
    o->buf_flat = NULL;
    o->buf = NULL;
    o->started = NULL;
}
