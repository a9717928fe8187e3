/* optim.h — the optimizer a run trains with: torch.optim.SGD or torch.optim.Adam.
 *
 * A tagged pair, so the training loop and checkpoints handle either through one type;
 * the state of the chosen one lives in its member (sgd.h, adam.h). */
#ifndef DDPPROF_OPTIM_H
#define DDPPROF_OPTIM_H

#include "nn/adam.h"
#include "nn/params.h"
#include "nn/sgd.h"

enum optim_kind { OPTIM_SGD = 0, OPTIM_ADAM = 1 };

struct optim_config {
    enum optim_kind kind;
    double lr, weight_decay;
    double momentum;     /* SGD */
    double beta1, beta2, eps; /* Adam */
};

struct optim {
    enum optim_kind kind;
    struct sgd sgd;   /* kind OPTIM_SGD */
    struct adam adam; /* kind OPTIM_ADAM */
};

/* cfg's optimizer over params' trainable entries.  0 or -1 (error_set). */
int optim_init(struct optim *o, struct param_table *params, const struct optim_config *cfg);
/* one step of the chosen optimizer.  0 or -1 (error_set). */
int optim_step(struct optim *o);
void optim_free(struct optim *o);

/* "sgd", "adam" */
const char *optim_name(enum optim_kind kind);

#endif
