/* scaler.c — GradScaler (see scaler.h). */
#include "nn/scaler.h"

#include "backend/backend.h"
#include "comm/comm.h"
#include "common/error.h"

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
    float inv_scale = 1.0f / s->scale; /* exact: the scale is a power of two */
    int found = 0;
    for (int i = 0; i < params->count; i++) {
        struct param *p = params->items[i];
        if (p->kind == PARAM_TRAINABLE && be->unscale_check(be, p->numel, p->grad, inv_scale))
            found = 1;
    }
    if (comm && comm->world > 1) {
        float flag = (float)found;
        be->upload(be, scratch, &flag, sizeof flag);
        if (comm_allreduce(comm, scratch, 1, COMM_F32))
            return error_wrap("GradScaler: all-reducing found_inf");
        be->download(be, &flag, scratch, sizeof flag);
        found = flag != 0.0f;
    }
    *found_inf = found;
    return 0;
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
