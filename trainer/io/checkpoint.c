/* checkpoint.c — safetensors checkpoints keyed by PyTorch names (see checkpoint.h). */
#include "io/checkpoint.h"

#include "backend/backend.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/printable.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "nn/optim.h"
#include "nn/scaler.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
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

int checkpoint_save_run(const char *path, const struct param_table *params,
                        const struct optim *opt, const struct grad_scaler *scaler,
                        const char *model, int epoch, long long step,
                        const struct checkpoint_run *run)
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
        rc = st_writer_metadata(w, "format", CHECKPOINT_FORMAT);
    if (rc == 0 && scaler)
        rc = checkpoint_scaler_meta(w, scaler);
    if (rc == 0 && run) {
        snprintf(value, sizeof value, "%d", run->world_size);
        rc |= st_writer_metadata(w, "world_size", value);
        snprintf(value, sizeof value, "%d", run->batch_size);
        rc |= st_writer_metadata(w, "batch_size", value);
        snprintf(value, sizeof value, "%lld", run->position);
        rc |= st_writer_metadata(w, "sampler_position", value);
    }
    if (rc == 0)
        rc = st_writer_save(w, path);
    st_writer_free(w);
    return rc ? error_wrap("saving checkpoint") : 0;
}

int checkpoint_save_optim(const char *path, const struct param_table *params,
                          const struct optim *opt, const struct grad_scaler *scaler,
                          const char *model, int epoch, long long step)
{
    return checkpoint_save_run(path, params, opt, scaler, model, epoch, step, NULL);
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

/* every value of a tensor read from path finite (and >= 0 when nonneg): 0, or -1 naming
 * the tensor, the element and the value */
static int checkpoint_check_finite(const char *path, const char *name, const float *v, size_t n,
                                   int nonneg)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || (nonneg && v[i] < 0.0f))
            return error_set("%s: tensor '%s' holds %g at element %zu (of %zu): %s; the file is "
                             "damaged, or the run that saved it diverged",
                             path, name, (double)v[i], i, n,
                             isfinite(v[i]) ? "it cannot be negative" : "values must be finite");
    return 0;
}

/* checkpoint_load_model on the open file st */
static int checkpoint_load_params(const struct st_file *st, const char *path,
                                  struct param_table *params)
{
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
            if (rc == 0 && p->counter < 0)
                rc = error_set("%s: tensor '%s' = %lld: a count of batches cannot be negative; "
                               "the file is damaged",
                               path, p->name, (long long)p->counter);
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
            rc = checkpoint_check_finite(path, p->name, host, p->numel, 0);
        if (rc == 0)
            params->be->upload(params->be, p->data, host, p->numel * sizeof *host);
        free(host);
    }
    for (int i = 0; i < st_count(st) && rc == 0; i++) {
        const char *name = st_get(st, i)->name;
        char shown[TEXT_PRINTABLE_MAX];
        if (strncmp(name, "optimizer.", 10) != 0 && !params_find(params, name))
            rc = error_set("%s: unexpected tensor '%s' (not a parameter or buffer of this "
                           "model)", path, text_printable(name, 80, shown, sizeof shown));
    }
    return rc;
}

int checkpoint_load_model(const char *path, struct param_table *params)
{
    struct st_file *st = st_open(path);
    if (!st)
        return -1;
    int rc = checkpoint_load_params(st, path, params);
    st_close(st);
    return rc;
}

/* a metadata value as a message shows it: one line, at most 40 bytes (one message holds
 * one such value) */
static const char *checkpoint_shown(const char *v)
{
    static _Thread_local char buf[TEXT_PRINTABLE_MAX];
    return text_printable(v, 40, buf, sizeof buf);
}

/* the metadata value of key, or NULL after an error naming it */
static const char *checkpoint_meta(const struct st_file *st, const char *path, const char *key)
{
    const char *v = st_metadata_get(st, key);
    if (!v || !*v)
        error_set("%s: metadata '%s' is missing (not a ddpprof checkpoint?)", path, key);
    return v && *v ? v : NULL;
}

/* a whole decimal number in [min, max] (an optional '-', digits, nothing else) */
static int checkpoint_meta_int(const struct st_file *st, const char *path, const char *key,
                               long long min, long long max, long long *out)
{
    const char *v = checkpoint_meta(st, path, key);
    if (!v)
        return -1;
    int64_t x;
    if (parse_i64(v, strlen(v), &x) < 0 || x < min || x > max)
        return error_set("%s: metadata '%s' = '%s' is not a whole number in [%lld, %lld]; "
                         "the checkpoint is damaged or was edited",
                         path, key, checkpoint_shown(v), min, max);
    *out = x;
    return 0;
}

/* a finite number in [min, max] (min_open: above min); range says so in words */
static int checkpoint_meta_real(const struct st_file *st, const char *path, const char *key,
                                double min, int min_open, double max, const char *range,
                                double *out)
{
    const char *v = checkpoint_meta(st, path, key);
    if (!v)
        return -1;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (*end || !isfinite(x) || x < min || (min_open && x == min) || x > max)
        return error_set("%s: metadata '%s' = '%s' is not %s; the checkpoint is damaged or "
                         "was edited",
                         path, key, checkpoint_shown(v), range);
    *out = x;
    return 0;
}

int checkpoint_read_run(const char *path, struct checkpoint_run *out)
{
    struct st_file *st = st_open(path);
    if (!st)
        return -1;
    int rc = 0;
    if (!st_metadata_get(st, "world_size") && !st_metadata_get(st, "batch_size") &&
        !st_metadata_get(st, "sampler_position")) {
        st_close(st); /* written before these fields */
        return 0;
    }
    long long world, batch, position;
    if (checkpoint_meta_int(st, path, "world_size", 1, INT_MAX, &world) ||
        checkpoint_meta_int(st, path, "batch_size", 1, INT_MAX, &batch) ||
        checkpoint_meta_int(st, path, "sampler_position", 0, CHECKPOINT_MAX_STEPS, &position))
        rc = -1;
    st_close(st);
    if (rc)
        return -1;
    out->world_size = (int)world;
    out->batch_size = (int)batch;
    out->position = position;
    return 1;
}

/* The run state in a checkpoint's metadata, every field range-checked before any of it is
 * used: format, model, optimizer, epoch, step and the GradScaler's state. */
static int checkpoint_read_meta(const struct st_file *st, const char *path, const char *model,
                                enum optim_kind kind, const struct grad_scaler *want,
                                int *epoch, long long *step, struct grad_scaler *out)
{
    const char *format = checkpoint_meta(st, path, "format");
    if (!format)
        return -1;
    if (strcmp(format, CHECKPOINT_FORMAT) != 0)
        return error_set("%s: format '%s' is not %s: a checkpoint of another program or "
                         "version",
                         path, checkpoint_shown(format), CHECKPOINT_FORMAT);
    const char *m = checkpoint_meta(st, path, "model");
    if (!m)
        return -1;
    if (strcmp(m, model) != 0)
        return error_set("%s: a checkpoint of model '%s', not '%s'", path, checkpoint_shown(m),
                         model);
    const char *saved = st_metadata_get(st, "optimizer");
    if (!saved)
        saved = "sgd"; /* checkpoints from before Adam */
    if (strcmp(saved, optim_name(OPTIM_SGD)) != 0 && strcmp(saved, optim_name(OPTIM_ADAM)) != 0)
        return error_set("%s: metadata 'optimizer' = '%s' is not sgd or adam; the checkpoint "
                         "is damaged or was edited",
                         path, checkpoint_shown(saved));
    if (strcmp(saved, optim_name(kind)) != 0)
        return error_set("%s: saved with --optimizer %s, resumed with --optimizer %s (keep it "
                         "as it was)",
                         path, saved, optim_name(kind));
    long long e, enabled, interval, tracker;
    double scale, growth, backoff;
    if (checkpoint_meta_int(st, path, "epoch", 0, CHECKPOINT_MAX_EPOCHS, &e) ||
        checkpoint_meta_int(st, path, "step", 0, CHECKPOINT_MAX_STEPS, step) ||
        checkpoint_meta_int(st, path, "scaler.enabled", 0, 1, &enabled))
        return -1;
    if ((int)enabled != want->enabled)
        return error_set("%s: saved with the GradScaler %s, resumed with it %s (keep --amp as "
                         "it was)",
                         path, enabled ? "on" : "off", want->enabled ? "on" : "off");
    /* the bounds of the --loss-scale-* options; the scale is any positive float */
    if (checkpoint_meta_real(st, path, "scaler.scale", 0.0, 1, FLT_MAX,
                             "a finite number above 0", &scale) ||
        checkpoint_meta_real(st, path, "scaler.growth_factor", 1.0, 0, 1e6,
                             "a number in [1, 1e6]", &growth) ||
        checkpoint_meta_real(st, path, "scaler.backoff_factor", 0.0, 1, 1.0,
                             "a number in (0, 1]", &backoff) ||
        checkpoint_meta_int(st, path, "scaler.growth_interval", 1, INT_MAX, &interval) ||
        checkpoint_meta_int(st, path, "scaler.growth_tracker", 0, interval - 1, &tracker))
        return -1;
    if ((float)scale <= 0.0f)
        return error_set("%s: metadata 'scaler.scale' = %g is 0 as a float; the checkpoint is "
                         "damaged",
                         path, scale);
    *epoch = (int)e;
    *out = *want;
    out->scale = (float)scale;
    out->growth_factor = (float)growth;
    out->backoff_factor = (float)backoff;
    out->growth_interval = (int)interval;
    out->growth_tracker = (int)tracker;
    return 0;
}

/* the tensor `leaf` of p's optimizer state into dev (p's shape); -1 (error_set) */
static int checkpoint_read_state(const struct st_file *st, const char *path, struct backend *be,
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
        rc = checkpoint_check_finite(path, name, host, p->numel,
                                     strcmp(leaf, "exp_avg_sq") == 0);
    if (rc == 0)
        be->upload(be, dev, host, p->numel * sizeof *host);
    free(host);
    return rc;
}

/* SGD: every momentum buffer there is (a parameter without one starts without) */
static int checkpoint_resume_sgd(const struct st_file *st, const char *path,
                                 struct param_table *params, struct sgd *opt)
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
        if (sgd_state_alloc(opt))
            return error_wrap("resume: momentum buffer of %s", p->name);
        if (checkpoint_read_state(st, path, params->be, p, "momentum_buffer", opt->buf[k]))
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
        /* a float counts steps exactly up to 2^24; test the range before any cast */
        if (!(v >= 1.0f && v <= 16777216.0f) || v != floorf(v) ||
            (step >= 0 && (long long)v != step))
            return error_set("%s: Adam state '%s' = %g: steps must be whole numbers in [1, "
                             "16777216] and the same for every parameter",
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
            (checkpoint_read_state(st, path, params->be, p, "exp_avg", opt->exp_avg[p->index]) ||
             checkpoint_read_state(st, path, params->be, p, "exp_avg_sq",
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
    struct st_file *st = st_open(path);
    if (!st)
        return -1;
    /* the metadata first: nothing is loaded from a checkpoint whose state is out of range */
    int e = 0;
    long long s = 0;
    struct grad_scaler sc;
    int rc = checkpoint_read_meta(st, path, model, opt->kind, scaler, &e, &s, &sc);
    if (rc == 0)
        rc = checkpoint_load_params(st, path, params);
    if (rc == 0)
        rc = opt->kind == OPTIM_ADAM ? checkpoint_resume_adam(st, path, params, &opt->adam)
                                     : checkpoint_resume_sgd(st, path, params, &opt->sgd);
    st_close(st);
    if (rc == 0) {
        *epoch = e;
        *step = s;
        *scaler = sc;
    }
    return rc;
}
