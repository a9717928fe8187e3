/* optim.c — SGD or Adam behind one type (see optim.h). */
#include "nn/optim.h"

#include <string.h>

int optim_init(struct optim *o, struct param_table *params, const struct optim_config *cfg)
{
    memset(o, 0, sizeof *o);
    o->kind = cfg->kind;
    if (cfg->kind == OPTIM_ADAM)
        return adam_init(&o->adam, params, cfg->lr, cfg->beta1, cfg->beta2, cfg->eps,
                         cfg->weight_decay);
    return sgd_init(&o->sgd, params, (float)cfg->lr, (float)cfg->momentum, 0.0f,
                    (float)cfg->weight_decay, 0);
}

int optim_step(struct optim *o)
{
    return o->kind == OPTIM_ADAM ? adam_step(&o->adam) : sgd_step(&o->sgd);
}

void optim_free(struct optim *o)
{
    if (o->kind == OPTIM_ADAM)
        adam_free(&o->adam);
    else
        sgd_free(&o->sgd);
}

const char *optim_name(enum optim_kind kind) { return kind == OPTIM_ADAM ? "adam" : "sgd"; }
