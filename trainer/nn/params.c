/* params.c — the named-tensor table of a model (see params.h). */
#include "nn/params.h"

#include "backend/backend.h"
#include "common/error.h"
#include "common/rng.h"
#include "common/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void params_init(struct param_table *t, struct backend *be)
{
    memset(t, 0, sizeof *t);
    t->be = be;
}

struct param *params_add(struct param_table *t, const char *prefix, const char *leaf,
                         enum param_kind kind, int ndim, const int *shape)
{
    if (t->flat_data)
        return error_set("params: %s.%s added to a packed table", prefix, leaf), NULL;
    if (ndim < 0 || ndim > PARAM_MAX_DIMS)
        return error_set("params: %s.%s has %d dimensions (at most %d)", prefix, leaf, ndim,
                         PARAM_MAX_DIMS),
               NULL;
    if (VEC_RESERVE(t->items, t->cap, (size_t)t->count + 1))
        return error_set("params: out of memory"), NULL;
    struct param *p = calloc(1, sizeof *p);
    if (!p)
        return error_set("params: out of memory"), NULL;
    int len = snprintf(p->name, sizeof p->name, "%s%s%s", prefix, *prefix ? "." : "", leaf);
    if (len < 0 || (size_t)len >= sizeof p->name) {
        free(p);
        return error_set("params: name %s.%s is too long", prefix, leaf), NULL;
    }
    p->kind = kind;
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= (size_t)shape[i];
    }
    p->index = -1;
    if (kind != PARAM_COUNTER) {
        p->data = t->be->alloc(t->be, p->numel * sizeof(float));
        if (!p->data) {
            error_wrap("params: allocating %s", p->name);
            free(p);
            return NULL;
        }
    }
    if (kind == PARAM_TRAINABLE) {
        p->grad = t->be->alloc(t->be, p->numel * sizeof(float));
        if (!p->grad) {
            error_wrap("params: allocating the gradient of %s", p->name);
            t->be->free(t->be, p->data);
            free(p);
            return NULL;
        }
        p->index = t->trainable++;
    }
    t->items[t->count++] = p;
    return p;
}

struct param *params_find(const struct param_table *t, const char *name)
{
    for (int i = 0; i < t->count; i++)
        if (strcmp(t->items[i]->name, name) == 0)
            return t->items[i];
    return NULL;
}

struct param *params_trainable(const struct param_table *t, int i)
{
    for (int j = 0; j < t->count; j++)
        if (t->items[j]->index == i)
            return t->items[j];
    return NULL;
}

size_t params_trainable_numel(const struct param_table *t)
{
    size_t n = 0;
    for (int i = 0; i < t->count; i++)
        if (t->items[i]->kind == PARAM_TRAINABLE)
            n += t->items[i]->numel;
    return n;
}

static size_t params_align(size_t n) { return (n + PARAMS_ALIGN - 1) / PARAMS_ALIGN * PARAMS_ALIGN; }

int params_pack(struct param_table *t)
{
    if (t->flat_data)
        return 0;
    size_t total = 0;
    for (int i = 0; i < t->count; i++)
        if (t->items[i]->kind == PARAM_TRAINABLE)
            total = params_align(total) + t->items[i]->numel;
    if (total == 0)
        return 0;
    struct backend *be = t->be;
    float *data = be->alloc(be, total * sizeof(float));
    float *grad = data ? be->alloc(be, total * sizeof(float)) : NULL;
    if (!grad) {
        be->free(be, data);
        return error_wrap("params: the flat parameters and gradients (%zu elements)", total);
    }
    size_t at = 0;
    for (int i = 0; i < t->count; i++) {
        struct param *p = t->items[i];
        if (p->kind != PARAM_TRAINABLE)
            continue;
        at = params_align(at);
        be->copy(be, data + at, p->data, p->numel * sizeof(float));
        be->copy(be, grad + at, p->grad, p->numel * sizeof(float));
        be->free(be, p->data);
        be->free(be, p->grad);
        p->data = data + at;
        p->grad = grad + at;
        p->offset = at;
        at += p->numel;
    }
    t->flat_data = data;
    t->flat_grad = grad;
    t->flat_numel = total;
    return 0;
}

int params_set_amp(struct param_table *t, enum dtype dt)
{
    struct backend *be = t->be;
    if (t->half_dt == dt && (dt == DT_F32 || t->flat_half))
        return 0;
    be->free(be, t->flat_half);
    be->free(be, t->flat_half_grad);
    t->flat_half = t->flat_half_grad = NULL;
    t->half_dt = DT_F32;
    for (int i = 0; i < t->count; i++) {
        t->items[i]->half = t->items[i]->grad_half = NULL;
        t->items[i]->grad_in_half = 0;
    }
    if (dt == DT_F32)
        return 0;
    if (params_pack(t))
        return -1;
    if (t->flat_numel == 0) {
        t->half_dt = dt;
        return 0;
    }
    if (!(t->flat_half = backend_alloc_elems(be, t->flat_numel, dt)) ||
        !(t->flat_half_grad = backend_alloc_elems(be, t->flat_numel, dt))) {
        be->free(be, t->flat_half);
        t->flat_half = NULL;
        return error_wrap("params: autocast copies (2 x %zu elements)", t->flat_numel);
    }
    const size_t size = be->dtype_size(be, dt);
    for (int i = 0; i < t->count; i++) {
        struct param *p = t->items[i];
        if (p->kind == PARAM_TRAINABLE) {
            p->half = (char *)t->flat_half + p->offset * size;
            p->grad_half = (char *)t->flat_half_grad + p->offset * size;
        }
    }
    t->half_dt = dt;
    return 0;
}

/* dims[4i..4i+3] for cast_list: a 4-D entry's shape, else 0 */
static void params_dims(const struct param *p, int *dims)
{
    for (int k = 0; k < 4; k++)
        dims[k] = p->ndim == 4 ? p->shape[k] : 0;
}

void params_cast_half(struct param_table *t)
{
    struct backend *be = t->be;
    if (!t->flat_half)
        return;
    if (be->layout(be, t->half_dt) == be->layout(be, DT_F32)) {
        be->cast(be, t->flat_numel, DT_F32, t->flat_data, t->half_dt, t->flat_half);
        return;
    }
    /* the conv weights' copies in the half type's layout: one cast_list of every entry */
    const int count = t->trainable;
    const void **srcs = malloc((size_t)count * sizeof *srcs);
    void **dsts = malloc((size_t)count * sizeof *dsts);
    size_t *numels = malloc((size_t)count * sizeof *numels);
    int *dims = malloc((size_t)count * 4 * sizeof *dims);
    if (srcs && dsts && numels && dims) {
        int k = 0;
        for (int i = 0; i < t->count; i++) {
            const struct param *p = t->items[i];
            if (p->kind != PARAM_TRAINABLE)
                continue;
            srcs[k] = p->data;
            dsts[k] = p->half;
            numels[k] = p->numel;
            params_dims(p, dims + 4 * k++);
        }
        be->cast_list(be, k, DT_F32, srcs, t->half_dt, dsts, numels, dims);
    } else { /* out of host memory: the flat cast, and each 4-D entry converted alone */
        be->cast(be, t->flat_numel, DT_F32, t->flat_data, t->half_dt, t->flat_half);
        for (int i = 0; i < t->count; i++) {
            const struct param *p = t->items[i];
            if (p->kind == PARAM_TRAINABLE && p->ndim == 4)
                be->convert(be, p->shape, DT_F32, LAYOUT_NCHW, p->data, t->half_dt,
                            be->layout(be, t->half_dt), p->half);
        }
    }
    free(srcs);
    free(dsts);
    free(numels);
    free(dims);
}

int params_grads_to_f32(struct param_table *t, int first, int last)
{
    int count = 0;
    for (int i = 0; i < t->count; i++) {
        const struct param *p = t->items[i];
        count += p->grad_in_half && p->index >= first && p->index <= last;
    }
    if (count == 0)
        return 0;
    const void **srcs = malloc((size_t)count * sizeof *srcs);
    void **dsts = malloc((size_t)count * sizeof *dsts);
    size_t *numels = malloc((size_t)count * sizeof *numels);
    int *dims = malloc((size_t)count * 4 * sizeof *dims);
    int rc = 0;
    if (!srcs || !dsts || !numels || !dims) {
        rc = error_set("params: out of memory casting %d gradients to fp32", count);
    } else {
        int k = 0;
        for (int i = 0; i < t->count; i++) {
            struct param *p = t->items[i];
            if (p->grad_in_half && p->index >= first && p->index <= last) {
                srcs[k] = p->grad_half;
                dsts[k] = p->grad;
                numels[k] = p->numel;
                params_dims(p, dims + 4 * k++);
                p->grad_in_half = 0;
            }
        }
        /* a conv weight's gradient from the half type's layout back to (k,c,r,s) */
        t->be->cast_list(t->be, count, t->half_dt, srcs, DT_F32, dsts, numels, dims);
    }
    free(dims);
    free(srcs);
    free(dsts);
    free(numels);
    return rc;
}

int params_fill_uniform(struct param *p, struct backend *be, float bound, struct rng *r)
{
    float *host = malloc(p->numel * sizeof *host);
    if (!host)
        return error_set("params: out of memory initialising %s", p->name);
    rng_fill_uniform(r, host, p->numel, -bound, bound);
    be->upload(be, p->data, host, p->numel * sizeof *host);
    free(host);
    return 0;
}

int params_fill_const(struct param *p, struct backend *be, float value)
{
    float *host = malloc(p->numel * sizeof *host);
    if (!host)
        return error_set("params: out of memory initialising %s", p->name);
    for (size_t i = 0; i < p->numel; i++)
        host[i] = value;
    be->upload(be, p->data, host, p->numel * sizeof *host);
    free(host);
    return 0;
}

void params_free(struct param_table *t)
{
    for (int i = 0; i < t->count; i++) {
        struct param *p = t->items[i];
        if (!(t->flat_data && p->kind == PARAM_TRAINABLE)) { /* not a view */
            t->be->free(t->be, p->data);
            t->be->free(t->be, p->grad);
        }
        free(p);
    }
    t->be->free(t->be, t->flat_data);
    t->be->free(t->be, t->flat_grad);
    t->be->free(t->be, t->flat_half);
    t->be->free(t->be, t->flat_half_grad);
    t->flat_data = t->flat_grad = NULL;
    t->flat_half = t->flat_half_grad = NULL;
    t->half_dt = DT_F32;
    t->flat_numel = 0;
    free(t->items);
    t->items = NULL;
    t->count = t->trainable = 0;
    t->cap = 0;
}
