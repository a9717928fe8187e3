/* checkpoint.c — safetensors checkpoints keyed by PyTorch names (see checkpoint.h). */
#include "io/checkpoint.h"

#include "backend/backend.h"
#include "common/error.h"
#include "io/safetensors.h"
#include "nn/optim.h"
#include "nn/scaler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void param_shape64(const struct param *p, int64_t *shape)
{
    for (int d = 0; d < p->ndim; d++)
        shape[d] = p->shape[d];
}

/* copy a device tensor of p's size to the host and add it to the writer under name */
static int checkpoint_add_device(struct st_writer *w, struct backend *be, const char *name,
                                 const struct param *p, const float *dev)
{
    float *host = malloc(p->numel * sizeof *host + 1);
    if (!host)
        return error_set("checkpoint: out of memory copying %s", name);
    be->download(be, host, dev, p->numel * sizeof *host);
    int64_t shape[PARAM_MAX_DIMS];
    param_shape64(p, shape);
    int rc = st_writer_add(w, name, ST_F32, p->ndim, shape, host);
    free(host);
    return rc;
}

/* the scaler's state as (key, printf value) pairs; floats with %.9g round-trip exactly */
static int checkpoint_scaler_meta(struct st_writer *w, const struct grad_scaler *sc)
{
    char v[64];
    int rc = 0;
    snprintf(v, sizeof v, "%d", sc->enabled);
    rc |= st_writer_metadata(w, "scaler.enabled", v);
    snprintf(v, sizeof v, "%.9g", (double)sc->scale);
    rc |= st_writer_metadata(w, "scaler.scale", v);
    snprintf(v, sizeof v, "%.9g", (double)sc->growth_factor);
    rc |= st_writer_metadata(w, "scaler.growth_factor", v);
    snprintf(v, sizeof v, "%.9g", (double)sc->backoff_factor);
    rc |= st_writer_metadata(w, "scaler.backoff_factor", v);
    snprintf(v, sizeof v, "%d", sc->growth_interval);
    rc |= st_writer_metadata(w, "scaler.growth_interval", v);
    snprintf(v, sizeof v, "%d", sc->growth_tracker);
    rc |= st_writer_metadata(w, "scaler.growth_tracker", v);
    return rc ? -1 : 0;
}

/* the optimizer state of trainable p under "optimizer.<name>.<leaf>"; nothing before the
 * state exists (SGD: no momentum buffer yet; Adam: no step taken) */
static int checkpoint_add_optim(struct st_writer *w, struct backend *be, const struct param *p,
                                const struct optim *opt)
{
    char name[PARAM_NAME_MAX + 40];
    const int k = p->index;
    if (opt->kind == OPTIM_SGD) {
        if (!opt->sgd.started[k])
            return 0;
        snprintf(name, sizeof name, "optimizer.%s.momentum_buffer", p->name);
        return checkpoint_add_device(w, be, name, p, opt->sgd.buf[k]);
    }
    if (opt->adam.step == 0)
        return 0;
    snprintf(name, sizeof name, "optimizer.%s.exp_avg", p->name);
    if (checkpoint_add_device(w, be, name, p, opt->adam.exp_avg[k]))
        return -1;
    snprintf(name, sizeof name, "optimizer.%s.exp_avg_sq", p->name);
    if (checkpoint_add_device(w, be, name, p, opt->adam.exp_avg_sq[k]))
        return -1;
    snprintf(name, sizeof name, "optimizer.%s.step", p->name);
    const float step = (float)opt->adam.step; /* PyTorch 1.13's state: a float32 scalar */
    return st_writer_add(w, name, ST_F32, 0, NULL, &step);
}

int checkpoint_save_optim(const char *path, const struct param_table *params,
                          const struct optim *opt, const struct grad_scaler *scaler,
                          const char *model, int epoch, long long step)
{
    struct st_writer *w = st_writer_create();
    if (!w)
        return error_wrap("checkpoint %s", path);
    int rc = 0;
    for (int i = 0; i < params->count && rc == 0; i++) {
        const struct param *p = params->items[i];
        if (p->kind == PARAM_COUNTER)
            rc = st_writer_add(w, p->name, ST_I64, 0, NULL, &p->counter);
        else
            rc = checkpoint_add_device(w, params->be, p->name, p, p->data);
        if (rc == 0 && opt && p->kind == PARAM_TRAINABLE)
            rc = checkpoint_add_optim(w, params->be, p, opt);
    }
    char value[32];
    if (rc == 0) {
        snprintf(value, sizeof value, "%d", epoch);
        rc = st_writer_metadata(w, "epoch", value);
    }
    if (rc == 0) {
        snprintf(value, sizeof value, "%lld", step);
        rc = st_writer_metadata(w, "step", value);
    }
    if (rc == 0)
        rc = st_writer_metadata(w, "model", model);
    if (rc == 0 && opt)
        rc = st_writer_metadata(w, "optimizer", optim_name(opt->kind));
    if (rc == 0)
        rc = st_writer_metadata(w, "format", "ddpprof-checkpoint-1");
    if (rc == 0 && scaler)
        rc = checkpoint_scaler_meta(w, scaler);
    if (rc == 0)
        rc = st_writer_save(w, path);
    st_writer_free(w);
    return rc ? error_wrap("saving checkpoint") : 0;
}

int checkpoint_save(const char *path, const struct param_table *params, const struct sgd *opt,
                    const struct grad_scaler *scaler, const char *model, int epoch,
                    long long step)
{
    struct optim o = {.kind = OPTIM_SGD};
    if (opt)
        o.sgd = *opt; /* a view: the buffers stay the caller's */
    return checkpoint_save_optim(path, params, opt ? &o : NULL, scaler, model, epoch, step);
}

int checkpoint_load_model(const char *path, struct param_table *params)
{
    struct st_file *st = st_open(path);
    if (!st)
        return -1;
    int rc = 0;
    for (int i = 0; i < params->count && rc == 0; i++) {
        struct param *p = params->items[i];
        const struct st_tensor *t = st_find(st, p->name);
        if (!t) {
            rc = error_set("%s: tensor '%s' is missing (is this a state_dict of this model?)", path,
                           p->name);
            break;
        }
        if (p->kind == PARAM_COUNTER) {
            if (t->dtype != ST_I64 || t->numel != 1)
                rc = error_set("%s: tensor '%s' must be an I64 scalar, found %s with %lld "
                               "elements", path, p->name, st_dtype_name(t->dtype),
                               (long long)t->numel);
            else
                memcpy(&p->counter, t->data, sizeof p->counter);
            continue;
        }
        int64_t shape[PARAM_MAX_DIMS];
        param_shape64(p, shape);
        float *host = malloc(p->numel * sizeof *host + 1);
        if (!host) {
            rc = error_set("loading %s: out of memory", path);
            break;
        }
        rc = st_read_f32(st, p->name, p->ndim, shape, host);
        if (rc == 0)
            params->be->upload(params->be, p->data, host, p->numel * sizeof *host);
        free(host);
    }
    for (int i = 0; i < st_count(st) && rc == 0; i++) {
        const char *name = st_get(st, i)->name;
        if (strncmp(name, "optimizer.", 10) != 0 && !params_find(params, name))
            rc = error_set("%s: unexpected tensor '%s' (not a parameter or buffer of this "
                           "model)", path, name);
    }
    st_close(st);
    return rc;
}

/* a metadata number, or an error naming the key */
static int checkpoint_meta_number(const struct st_file *st, const char *path, const char *key,
                                  double *out)
{
    const char *v = st_metadata_get(st, key);
    char *end;
    if (!v || !*v)
        return error_set("%s: metadata '%s' is missing (not a ddpprof checkpoint?)", path, key);
    *out = strtod(v, &end);
    if (*end)
        return error_set("%s: metadata '%s' = '%s' is not a number", path, key, v);
    return 0;
}

/* the tensor `leaf` of p's optimizer state into dev (p's shape); -1 (error_set) */
static int checkpoint_read_state(const struct st_file *st, struct backend *be,
                                 const struct param *p, const char *leaf, float *dev)
{
    char name[PARAM_NAME_MAX + 40];
    snprintf(name, sizeof name, "optimizer.%s.%s", p->name, leaf);
    float *host = malloc(p->numel * sizeof *host + 1);
    if (!host)
        return error_set("resume: out of memory");
    int64_t shape[PARAM_MAX_DIMS];
    param_shape64(p, shape);
    int rc = st_read_f32(st, name, p->ndim, shape, host);
    if (rc == 0)
        be->upload(be, dev, host, p->numel * sizeof *host);
    free(host);
    return rc;
}

/* SGD: every momentum buffer there is (a parameter without one starts without) */
static int checkpoint_resume_sgd(const struct st_file *st, struct param_table *params,
                                 struct sgd *opt)
{
    for (int i = 0; i < params->count; i++) {
        struct param *p = params->items[i];
        if (p->kind != PARAM_TRAINABLE)
            continue;
        char name[PARAM_NAME_MAX + 40];
        snprintf(name, sizeof name, "optimizer.%s.momentum_buffer", p->name);
        if (!st_find(st, name)) {
            error_clear(); /* no buffer saved: it starts fresh, like PyTorch's lazy state */
            continue;
        }
        int k = p->index;
        if (!opt->buf[k] && !(opt->buf[k] = params->be->alloc(params->be, p->numel * 4)))
            return error_wrap("resume: momentum buffer of %s", p->name);
        if (checkpoint_read_state(st, params->be, p, "momentum_buffer", opt->buf[k]))
            return -1;
        opt->started[k] = 1;
    }
    return 0;
}

/* Adam: no state at all (saved before its first step), or every parameter's moments and
 * one common step count */
static int checkpoint_resume_adam(const struct st_file *st, const char *path,
                                  struct param_table *params, struct adam *opt)
{
    long long step = -1;
    for (int i = 0; i < params->count; i++) {
        struct param *p = params->items[i];
        if (p->kind != PARAM_TRAINABLE)
            continue;
        char name[PARAM_NAME_MAX + 40];
        snprintf(name, sizeof name, "optimizer.%s.step", p->name);
        const struct st_tensor *t = st_find(st, name);
        if (!t && step <= 0) { /* consistently absent so far: a fresh optimizer */
            error_clear();
            step = 0;
            continue;
        }
        if (!t || t->dtype != ST_F32 || t->numel != 1)
            return error_set("%s: Adam state '%s' is %s (want an F32 scalar, as every other "
                             "parameter's)",
                             path, name, t ? "not an F32 scalar" : "missing");
        float v;
        memcpy(&v, t->data, sizeof v);
        if (!(v >= 1.0f) || v != (float)(long long)v || (step >= 0 && (long long)v != step))
            return error_set("%s: Adam state '%s' = %g: steps must be whole, >= 1 and the "
                             "same for every parameter",
                             path, name, (double)v);
        step = (long long)v;
    }
    if (step <= 0)
        return 0;
    if (adam_state_alloc(opt))
        return -1;
    for (int i = 0; i < params->count; i++) {
        struct param *p = params->items[i];
        if (p->kind == PARAM_TRAINABLE &&
            (checkpoint_read_state(st, params->be, p, "exp_avg", opt->exp_avg[p->index]) ||
             checkpoint_read_state(st, params->be, p, "exp_avg_sq",
                                   opt->exp_avg_sq[p->index])))
            return -1;
    }
    opt->step = step;
    return 0;
}

int checkpoint_resume(const char *path, struct param_table *params, struct optim *opt,
                      struct grad_scaler *scaler, const char *model, int *epoch,
                      long long *step)
{
    if (checkpoint_load_model(path, params))
        return -1;
    struct st_file *st = st_open(path);
    if (!st)
        return -1;
    int rc = 0;
    const char *m = st_metadata_get(st, "model");
    if (!m || strcmp(m, model) != 0)
        rc = error_set("%s: a checkpoint of model '%s', not '%s'", path, m ? m : "?", model);
    const char *saved = st_metadata_get(st, "optimizer");
    if (!saved)
        saved = "sgd"; /* checkpoints from before Adam */
    if (rc == 0 && strcmp(saved, optim_name(opt->kind)) != 0)
        rc = error_set("%s: saved with --optimizer %s, resumed with --optimizer %s (keep it as "
                       "it was)",
                       path, saved, optim_name(opt->kind));
    double e = 0, s = 0, v[6] = {0};
    static const char *const keys[6] = {"scaler.enabled", "scaler.scale",
                                        "scaler.growth_factor", "scaler.backoff_factor",
                                        "scaler.growth_interval", "scaler.growth_tracker"};
    if (rc == 0)
        rc = checkpoint_meta_number(st, path, "epoch", &e) ||
             checkpoint_meta_number(st, path, "step", &s);
    for (int k = 0; rc == 0 && k < 6; k++)
        rc = checkpoint_meta_number(st, path, keys[k], &v[k]);
    if (rc == 0 && (int)v[0] != scaler->enabled)
        rc = error_set("%s: saved with the GradScaler %s, resumed with it %s (keep --amp as it "
                       "was)", path, v[0] ? "on" : "off", scaler->enabled ? "on" : "off");
    if (rc == 0) {
        *epoch = (int)e;
        *step = (long long)s;
        scaler->scale = (float)v[1];
        scaler->growth_factor = (float)v[2];
        scaler->backoff_factor = (float)v[3];
        scaler->growth_interval = (int)v[4];
        scaler->growth_tracker = (int)v[5];
    }
    if (rc == 0)
        rc = opt->kind == OPTIM_ADAM ? checkpoint_resume_adam(st, path, params, &opt->adam)
                                     : checkpoint_resume_sgd(st, params, &opt->sgd);
    st_close(st);
    return rc;
}
