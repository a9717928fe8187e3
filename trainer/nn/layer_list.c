/* layer_list.c — the model's layers and their costs (see layer_list.h; the formulas are
 * report/FORMULAS.md's "Per-layer FLOPs and bytes"). */
#include "nn/layer_list.h"

#include "common/error.h"
#include "common/vec.h"

#include <stdio.h>
#include <stdlib.h>

void layer_costs(const struct layer_info *l, enum layer_dir dir, int n, size_t act_elem_bytes,
                 double *flops, double *bytes)
{
    *flops = l->flops[dir] * n;
    *bytes = (l->act_elems[dir] * (double)act_elem_bytes + l->idx_bytes[dir]) * n +
             l->param_io_bytes[dir];
}

static int layer_list_push(struct layer_list *L, const char *name, const char *type,
                           const struct layer_info *costs)
{
    if (VEC_RESERVE(L->items, L->cap, (size_t)L->count + 1))
        return error_set("layer list: out of memory for layer %s", name);
    struct layer_info *l = &L->items[L->count];
    *l = *costs;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->type = type;
    return L->count++;
}

int layer_list_conv(struct layer_list *L, const char *name, int c, int h, int w, int k, int r,
                    int stride, int pad, int has_bias, int computes_dx, int *p, int *q)
{
    *p = (h + 2 * pad - r) / stride + 1;
    *q = (w + 2 * pad - r) / stride + 1;
    const double in = (double)c * h * w, out = (double)k * *p * *q;
    const double mac = (double)k * c * r * r * *p * *q; /* multiply-adds per sample */
    const double bias = has_bias ? out : 0.0;
    const double pb = 4.0 * ((double)k * c * r * r + (has_bias ? k : 0));
    struct layer_info li = {
        .param_bytes = (uint64_t)pb,
        .flops = {2 * mac + bias, (computes_dx ? 2 * mac : 0.0) + 2 * mac + bias},
        .act_elems = {in + out, out + in + (computes_dx ? in : 0.0)},
        .param_io_bytes = {pb, (computes_dx ? pb : 0.0) + pb},
    };
    return layer_list_push(L, name, "conv", &li);
}

int layer_list_batchnorm(struct layer_list *L, const char *name, int c, int hw)
{
    const double m = (double)c * hw;
    struct layer_info li = {
        .param_bytes = (uint64_t)(8.0 * c),
        .flops = {7 * m, 9 * m},
        .act_elems = {2 * m, 3 * m},
        .param_io_bytes = {8.0 * c, 12.0 * c},
    };
    return layer_list_push(L, name, "batchnorm", &li);
}

int layer_list_relu(struct layer_list *L, const char *name, double elems)
{
    struct layer_info li = {.flops = {elems, elems}, .act_elems = {2 * elems, 3 * elems}};
    return layer_list_push(L, name, "relu", &li);
}

int layer_list_maxpool(struct layer_list *L, const char *name, int c, int h, int w, int kernel)
{
    const double in = (double)c * h * w, out = (double)c * (h / kernel) * (w / kernel);
    struct layer_info li = {.flops = {in, out},
                            .act_elems = {in + out, out + in},
                            .idx_bytes = {4 * out, 4 * out}};
    return layer_list_push(L, name, "maxpool", &li);
}

int layer_list_avgpool(struct layer_list *L, const char *name, int c, int h, int w)
{
    const double in = (double)c * h * w;
    struct layer_info li = {.flops = {in, in}, .act_elems = {in + c, c + in}};
    return layer_list_push(L, name, "avgpool", &li);
}

int layer_list_linear(struct layer_list *L, const char *name, int in, int out, int computes_dx)
{
    const double mac = (double)in * out, pb = 4.0 * ((double)in * out + out);
    struct layer_info li = {
        .param_bytes = (uint64_t)pb,
        .flops = {2 * mac + out, (computes_dx ? 2 * mac : 0.0) + 2 * mac + out},
        .act_elems = {(double)in + out, (double)out + in + (computes_dx ? in : 0)},
        .param_io_bytes = {pb, (computes_dx ? pb : 0.0) + pb},
    };
    return layer_list_push(L, name, "linear", &li);
}

int layer_list_add(struct layer_list *L, const char *name, double elems, double bwd_elems)
{
    struct layer_info li = {.flops = {elems, bwd_elems},
                            .act_elems = {3 * elems, 3 * bwd_elems}};
    return layer_list_push(L, name, "add", &li);
}

void layer_list_free(struct layer_list *L)
{
    free(L->items);
    L->items = NULL;
    L->count = 0;
    L->cap = 0;
}
