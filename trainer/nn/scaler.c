/* scaler.c — GradScaler (see scaler.h). */
#include "nn/scaler.h"

#include "backend/backend.h"
#include "comm/comm.h"
#include "common/error.h"

#include <stdlib.h>

void scaler_init(struct grad_scaler *s, int enabled)
{
    *s = (struct grad_scaler){.enabled = enabled, .scale = enabled ? 65536.0f : 1.0f,
                              .growth_factor = 2.0f, .backoff_factor = 0.5f,
                              .growth_interval = 2000};
}

int scaler_unscale(struct grad_scaler *s, struct param_table *params, struct comm *comm,
                   float *scratch, int *found_inf)
{
    *found_inf = 0;
    if (!s->enabled)
        return 0;
    struct backend *be = params->be;
    const int count = params->trainable;
    float **grads = malloc(((size_t)count + 1) * sizeof *grads);
    size_t *numels = malloc(((size_t)count + 1) * sizeof *numels);
    float *flag = scratch ? scratch : be->alloc(be, sizeof(float));
    int rc = -1;
    if (!grads || !numels || !flag) {
        error_wrap("GradScaler: out of memory for the unscale of %d gradients", count);
        goto out;
    }
    int k = 0;
    if (params->flat_grad) { /* packed: the one flat buffer (its gaps are zeros) */
        grads[k] = params->flat_grad;
        numels[k++] = params->flat_numel;
    } else {
        for (int i = 0; i < params->count; i++) {
            struct param *p = params->items[i];
            if (p->kind == PARAM_TRAINABLE && k < count) {
                grads[k] = p->grad;
                numels[k++] = p->numel;
            }
        }
    }
    be->unscale(be, k, grads, numels, 1.0f / s->scale, flag); /* 1/scale: exact, a power of 2 */
    /* all-reduced on the device (stream-ordered), then read once: the step's one host sync
     * for found_inf, as PyTorch's GradScaler; settle first bounds that read by the comm's
     * timeout (a collective that never completes is an error, not a hang) */
    if (comm && comm->world > 1 &&
        (comm_allreduce_join(comm, flag, 1, COMM_F32) || comm_settle(comm))) {
        error_wrap("GradScaler: all-reducing found_inf");
        goto out;
    }
    float host = 0.0f;
    be->download(be, &host, flag, sizeof host);
    *found_inf = host != 0.0f;
    rc = 0;
out:
    if (flag != scratch)
        be->free(be, flag);
    free(grads);
    free(numels);
    return rc;
}

void scaler_update(struct grad_scaler *s, int found_inf)
{
    if (!s->enabled)
        return;
    if (found_inf) {
        s->scale *= s->backoff_factor;
        s->growth_tracker = 0;
    } else if (++s->growth_tracker == s->growth_interval) {
        s->scale *= s->growth_factor;
        s->growth_tracker = 0;
    }
}
