/* pytorch_names.c — PyTorch's names for the parts of a training step, as tables (see
 * pytorch_names.h).  Every rule is one line; the first that matches wins. */
#include "report/pytorch_names.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum pt_match {
    PT_EXACT,      /* the whole name */
    PT_PREFIX,     /* the name starts with text */
    PT_BACKEND_OP, /* "<backend>:" then text at the start: nccl:all_reduce, gloo:all_reduce */
    PT_DESCRIBED   /* the whole name, the collective from the "Collective name" arg */
};

enum { PT_HOST = 1, PT_DEVICE = 2, PT_BOTH = 3 };

/* Host ops and gpu_user_annotation ranges. */
static const struct pt_name_rule {
    enum pt_match match;
    const char *text;
    unsigned where; /* PT_HOST: host ops; PT_DEVICE: gpu_user_annotation ranges */
    enum import_kind kind;
    enum import_coll coll;
} pt_name_rules[] = {
    {PT_PREFIX, "autograd::engine::evaluate_function: ", PT_BOTH, IMPORT_BACKWARD, 0},
    {PT_PREFIX, PT_STEP_PREFIX, PT_HOST, IMPORT_STEP, 0},
    {PT_EXACT, "DistributedDataParallel.forward", PT_BOTH, IMPORT_FORWARD, 0},
    {PT_PREFIX, "Optimizer.step#", PT_BOTH, IMPORT_OPTIMIZER, 0},
    {PT_PREFIX, "Optimizer.zero_grad#", PT_BOTH, IMPORT_OPTIMIZER, 0},
    {PT_PREFIX, "enumerate(DataLoader)#", PT_BOTH, IMPORT_DATA, 0},
    {PT_BACKEND_OP, "all_reduce", PT_BOTH, IMPORT_COLL, IMPORT_COLL_ALL_REDUCE},
    {PT_DESCRIBED, "record_param_comms", PT_HOST, IMPORT_PARAMS, 0},
};

/* A "Collective name" arg (record_param_comms, NCCL kernels): any case, anywhere in it. */
static const struct {
    const char *text;
    enum import_coll coll;
} pt_coll_arg_rules[] = {
    {"allreduce", IMPORT_COLL_ALL_REDUCE},
    {"all_reduce", IMPORT_COLL_ALL_REDUCE},
};

/* NCCL's kernel name schemes, and the collective their names carry (anywhere in the name). */
static const char *const pt_nccl_schemes[] = {"ncclKernel_", "ncclDevKernel_"};
static const struct {
    const char *text;
    enum import_coll coll;
} pt_nccl_kernel_rules[] = {
    {"AllReduce", IMPORT_COLL_ALL_REDUCE},
};

#define PT_COUNT(a) (sizeof(a) / sizeof *(a))

static int pt_starts_with(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

static enum import_coll pt_coll_of_arg(const char *arg)
{
    for (size_t i = 0; arg[0] && i < PT_COUNT(pt_coll_arg_rules); i++)
        if (strcasestr(arg, pt_coll_arg_rules[i].text))
            return pt_coll_arg_rules[i].coll;
    return IMPORT_COLL_NONE;
}

/* "nccl:...", "gloo:...": the length of the backend's name and its colon, 0 when none */
static size_t pt_backend_len(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
        i++;
    return i > 0 && i < len && s[i] == ':' ? i + 1 : 0;
}

int pt_name_span(const char *name, size_t len, const char *coll_arg, int device_span,
                 enum import_kind *kind, enum import_coll *coll)
{
    unsigned where = device_span ? PT_DEVICE : PT_HOST;
    for (size_t i = 0; i < PT_COUNT(pt_name_rules); i++) {
        const struct pt_name_rule *r = &pt_name_rules[i];
        if (!(r->where & where))
            continue;
        size_t b;
        enum import_coll c = r->coll;
        switch (r->match) {
        case PT_EXACT:
            if (len != strlen(r->text) || memcmp(name, r->text, len) != 0)
                continue;
            break;
        case PT_PREFIX:
            if (!pt_starts_with(name, len, r->text))
                continue;
            break;
        case PT_BACKEND_OP:
            b = pt_backend_len(name, len);
            if (b == 0 || !pt_starts_with(name + b, len - b, r->text))
                continue;
            break;
        case PT_DESCRIBED:
            if (len != strlen(r->text) || memcmp(name, r->text, len) != 0)
                continue;
            if ((c = pt_coll_of_arg(coll_arg)) == IMPORT_COLL_NONE)
                return -1; /* a description of no collective known here */
            break;
        }
        *kind = r->kind;
        *coll = c;
        return 1;
    }
    return 0;
}

int pt_name_step(const char *name, size_t len, int64_t *n)
{
    const size_t p = sizeof PT_STEP_PREFIX - 1;
    if (!pt_starts_with(name, len, PT_STEP_PREFIX))
        return 0;
    char *stop;
    long long v = strtoll(name + p, &stop, 10);
    if (stop == name + p || *stop || v < 0 || v > 1000000000)
        return 0;
    *n = v;
    return 1;
}

int pt_name_kernel(const char *name, size_t len, const char *coll_arg, enum import_coll *coll,
                   int *known)
{
    if (!strcasestr(name, "nccl"))
        return 0;
    *known = 0;
    for (size_t i = 0; i < PT_COUNT(pt_nccl_schemes) && !*known; i++)
        *known = pt_starts_with(name, len, pt_nccl_schemes[i]);
    *coll = IMPORT_COLL_NONE;
    for (size_t i = 0; *known && i < PT_COUNT(pt_nccl_kernel_rules); i++)
        if (strstr(name, pt_nccl_kernel_rules[i].text)) {
            *coll = pt_nccl_kernel_rules[i].coll;
            break;
        }
    if (*coll == IMPORT_COLL_NONE)
        *coll = pt_coll_of_arg(coll_arg);
    return 1;
}

int64_t pt_dtype_bytes(const char *t)
{
    static const struct {
        const char *name;
        int bytes;
    } types[] = {{"Float", 4},        {"float", 4},        {"float32", 4},  {"f32", 4},
                 {"Double", 8},       {"double", 8},       {"float64", 8},  {"Half", 2},
                 {"half", 2},         {"float16", 2},      {"BFloat16", 2}, {"bfloat16", 2},
                 {"Int", 4},          {"int", 4},          {"int32", 4},    {"Long", 8},
                 {"long", 8},         {"int64", 8},        {"Short", 2},    {"int16", 2},
                 {"Char", 1},         {"Byte", 1},         {"Bool", 1},     {"int8", 1},
                 {"uint8", 1},        {"ComplexFloat", 8}, {"ComplexDouble", 16}};
    for (size_t i = 0; i < PT_COUNT(types); i++)
        if (strcmp(t, types[i].name) == 0)
            return types[i].bytes;
    return 0;
}
