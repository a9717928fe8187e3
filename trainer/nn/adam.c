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
    if (params_pack(params)) {
        adam_free(o);
        return error_wrap("adam");
    }
    return 0;
}

int adam_state_alloc(struct adam *o)
{
    struct param_table *t = o->params;
    struct backend *be = t->be;
    if (o->exp_avg_flat || t->flat_numel == 0)
        return 0;
    const size_t bytes = t->flat_numel * sizeof(float);
    if (!(o->exp_avg_flat = be->alloc(be, bytes)) ||
        !(o->exp_avg_sq_flat = be->alloc(be, bytes))) {
        be->free(be, o->exp_avg_flat);
        o->exp_avg_flat = NULL;
        return error_wrap("adam: the moments (2 x %zu elements)", t->flat_numel);
    }
    for (int i = 0; i < t->count; i++) {
        const struct param *p = t->items[i];
        if (p->kind == PARAM_TRAINABLE) {
            o->exp_avg[p->index] = o->exp_avg_flat + p->offset;
            o->exp_avg_sq[p->index] = o->exp_avg_sq_flat + p->offset;
        }
    }
    return 0;
}

int adam_step(struct adam *o)
{
    if (adam_state_alloc(o))
        return -1;
    struct param_table *t = o->params;
    struct backend *be = t->be;
    const long long step = o->step + 1;
    /* one update over every parameter, the gaps between entries included (zeros, and
     * zero moments: they stay zero) */
    if (t->flat_numel)
        be->adam_step(be, t->flat_numel, t->flat_data, t->flat_grad, o->exp_avg_flat,
                      o->exp_avg_sq_flat, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay,
                      step);
    o->step = step;
    return 0;
}

void adam_free(struct adam *o)
{
    if (o->params) {
        struct backend *be = o->params->be;
        be->free(be, o->exp_avg_flat);
        be->free(be, o->exp_avg_sq_flat);
    }
    free(o->exp_avg);
    free(o->exp_avg_sq);
    o->exp_avg_flat = o->exp_avg_sq_flat = NULL;
    o->exp_avg = o->exp_avg_sq = NULL;
}
