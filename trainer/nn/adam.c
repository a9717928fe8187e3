/* adam.c — torch.optim.Adam on the backend (see adam.h). */
#include "nn/adam.h"

#include "backend/backend.h"
#include "common/error.h"

#include <stdlib.h>

int adam_init(struct adam *o, struct param_table *params, double lr, double beta1,
              double beta2, double eps, double weight_decay)
{
    *o = (struct adam){.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps,
                       .weight_decay = weight_decay, .params = params};
    if (!(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0 && eps >= 0.0 &&
          lr >= 0.0 && weight_decay >= 0.0))
        return error_set("adam: lr %g, betas (%g, %g), eps %g, weight decay %g: need betas in "
                         "[0, 1) and the rest >= 0",
                         lr, beta1, beta2, eps, weight_decay);
    const size_t n = (size_t)params->trainable + 1;
    o->exp_avg = calloc(n, sizeof *o->exp_avg);
    o->exp_avg_sq = calloc(n, sizeof *o->exp_avg_sq);
    if (!o->exp_avg || !o->exp_avg_sq) {
        adam_free(o);
        return error_set("adam: out of memory");
    }
    return 0;
}

int adam_state_alloc(struct adam *o)
{
    struct backend *be = o->params->be;
    for (int i = 0; i < o->params->count; i++) {
        const struct param *p = o->params->items[i];
        if (p->kind != PARAM_TRAINABLE)
            continue;
        const int k = p->index;
        if ((!o->exp_avg[k] && !(o->exp_avg[k] = be->alloc(be, p->numel * sizeof(float)))) ||
            (!o->exp_avg_sq[k] &&
             !(o->exp_avg_sq[k] = be->alloc(be, p->numel * sizeof(float)))))
            return error_wrap("adam: moments of %s", p->name);
    }
    return 0;
}

int adam_step(struct adam *o)
{
    if (adam_state_alloc(o))
        return -1;
    struct backend *be = o->params->be;
    const long long step = o->step + 1;
    for (int i = 0; i < o->params->count; i++) {
        struct param *p = o->params->items[i];
        if (p->kind != PARAM_TRAINABLE)
            continue;
        const int k = p->index;
        be->adam_step(be, p->numel, p->data, p->grad, o->exp_avg[k], o->exp_avg_sq[k], o->lr,
                      o->beta1, o->beta2, o->eps, o->weight_decay, step);
    }
    o->step = step;
    return 0;
}

void adam_free(struct adam *o)
{
    if (o->params) {
        struct backend *be = o->params->be;
        for (int k = 0; k < o->params->trainable; k++) {
            if (o->exp_avg)
                be->free(be, o->exp_avg[k]);
            if (o->exp_avg_sq)
                be->free(be, o->exp_avg_sq[k]);
        }
    }
    free(o->exp_avg);
    free(o->exp_avg_sq);
    o->exp_avg = o->exp_avg_sq = NULL;
}
