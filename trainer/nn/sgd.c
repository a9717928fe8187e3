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
    return 0;
}

int sgd_step(struct sgd *o)
{
    struct backend *be = o->params->be;
    for (int i = 0; i < o->params->count; i++) {
        struct param *p = o->params->items[i];
        if (p->kind != PARAM_TRAINABLE)
            continue;
        int k = p->index;
        if (o->momentum != 0.0f && !o->buf[k] &&
            !(o->buf[k] = be->alloc(be, p->numel * sizeof(float))))
            return error_wrap("sgd: momentum buffer of %s", p->name);
        be->sgd_step(be, p->numel, p->data, p->grad, o->buf[k], o->lr, o->momentum,
                     o->dampening, o->weight_decay, o->nesterov, !o->started[k]);
        if (o->momentum != 0.0f)
            o->started[k] = 1;
    }
    return 0;
}

void sgd_free(struct sgd *o)
{
    if (o->buf && o->params)
        for (int k = 0; k < o->params->trainable; k++)
            o->params->be->free(o->params->be, o->buf[k]);
    free(o->buf);
    free(o->started);
    o->buf = NULL;
    o->started = NULL;
}
