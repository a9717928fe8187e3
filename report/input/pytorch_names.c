/* pytorch_names.c — PyTorch's names for the parts of a training step, as tables (see
 * pytorch_names.h).  Every rule is one line; the first that matches wins. */
#include "report/input/pytorch_names.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum pt_match {
    PT_EXACT,       /* the whole name */
    PT_PREFIX,      /* the name starts with text */
    PT_BACKEND_OP,  /* "<backend>:" then text at the start: nccl:all_reduce, gloo:all_reduce */
    PT_DESCRIBED,   /* the whole name, the collective from the "Collective name" arg */
    PT_BACKEND_ANY, /* "<backend>:" then a collective's word (pt_coll_words): gloo:broadcast */
    PT_SCOPE_ANY    /* text, then a collective's word: c10d::broadcast_ */
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
    {PT_PREFIX, PT_STEP_PREFIX, PT_BOTH, IMPORT_STEP, 0},
    /* ddpprof's own export (report/output/kineto.c): the all-reduces that carry no gradients, and
     * evaluation, which PyTorch has no name for */
    {PT_EXACT, "ddpprof.comm.allreduce", PT_BOTH, IMPORT_COLL, IMPORT_COLL_ALL_REDUCE_OTHER},
    {PT_EXACT, "ddpprof.eval", PT_BOTH, IMPORT_EVAL, 0},
    {PT_EXACT, "DistributedDataParallel.forward", PT_BOTH, IMPORT_FORWARD, 0},
    {PT_PREFIX, "Optimizer.step#", PT_BOTH, IMPORT_OPTIMIZER, 0},
    {PT_PREFIX, "Optimizer.zero_grad#", PT_BOTH, IMPORT_OPTIMIZER, 0},
    {PT_PREFIX, "enumerate(DataLoader)#", PT_BOTH, IMPORT_DATA, 0},
    {PT_BACKEND_OP, "all_reduce", PT_BOTH, IMPORT_COLL, IMPORT_COLL_ALL_REDUCE},
    {PT_DESCRIBED, "record_param_comms", PT_HOST, IMPORT_PARAMS, 0},
    {PT_BACKEND_ANY, "", PT_HOST, IMPORT_COLL, 0},
    {PT_SCOPE_ANY, "c10d::", PT_HOST, IMPORT_ISSUE, 0},
};

/* The word of a collective other than all-reduce as PyTorch names them (op suffixes,
 * record_param_comms' Collective name, NCCL kernel infixes), matched whole in any case once
 * leading and trailing underscores and one of pt_coll_tails are taken off:
 * _allgather_base, all_gather_into_tensor, reduce_scatter_tensor, broadcast_, ... */
static const struct {
    const char *word;
    enum import_coll coll;
} pt_coll_words[] = {
    {"broadcast", IMPORT_COLL_BROADCAST},
    {"allgather", IMPORT_COLL_ALL_GATHER},
    {"all_gather", IMPORT_COLL_ALL_GATHER},
    {"reducescatter", IMPORT_COLL_REDUCE_SCATTER},
    {"reduce_scatter", IMPORT_COLL_REDUCE_SCATTER},
    {"reduce", IMPORT_COLL_REDUCE},
    {"barrier", IMPORT_COLL_BARRIER},
};
static const char *const pt_coll_tails[] = {"_coalesced", "_into_tensor", "_tensor", "_base"};

/* A "Collective name" arg (record_param_comms, NCCL kernels) of an all-reduce: any case,
 * anywhere in it (else the arg is a collective's word, pt_coll_words). */
static const struct {
    const char *text;
    enum import_coll coll;
} pt_coll_arg_rules[] = {
    {"allreduce", IMPORT_COLL_ALL_REDUCE},
    {"all_reduce", IMPORT_COLL_ALL_REDUCE},
};

/* NCCL's kernel name schemes, and the all-reduce their names carry (anywhere in the name;
 * other collectives: the word after the scheme, pt_coll_words). */
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

/* The collective a word s[0..len) names (pt_coll_words), IMPORT_COLL_NONE for any other. */
static enum import_coll pt_coll_of_word(const char *s, size_t len)
{
    while (len > 0 && s[0] == '_')
        s++, len--;
    while (len > 0 && s[len - 1] == '_')
        len--;
    for (size_t t = 0; t < PT_COUNT(pt_coll_tails); t++) {
        size_t n = strlen(pt_coll_tails[t]);
        if (len > n && strncasecmp(s + len - n, pt_coll_tails[t], n) == 0)
            len -= n;
    }
    for (size_t k = 0; k < PT_COUNT(pt_coll_words); k++)
        if (strlen(pt_coll_words[k].word) == len &&
            strncasecmp(s, pt_coll_words[k].word, len) == 0)
            return pt_coll_words[k].coll;
    return IMPORT_COLL_NONE;
}

/* The collective of a "Collective name" arg: an all-reduce's (pt_coll_arg_rules), else the
 * word's; IMPORT_COLL_NONE when it names none. */
static enum import_coll pt_coll_of_arg(const char *arg)
{
    for (size_t i = 0; arg[0] && i < PT_COUNT(pt_coll_arg_rules); i++)
        if (strcasestr(arg, pt_coll_arg_rules[i].text))
            return pt_coll_arg_rules[i].coll;
    return pt_coll_of_word(arg, strlen(arg));
}

/* "nccl:...", "gloo:...", "shm-staged:..." (a ddpprof comm, in its export): the length of
 * the backend's name and its colon, 0 when none */
static size_t pt_backend_len(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
                       (i > 0 && (s[i] == '-' || s[i] == '_'))))
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
        case PT_BACKEND_ANY: /* not "c10d::" */
            b = pt_backend_len(name, len);
            if (b == 0 || b == len || name[b] == ':' ||
                (c = pt_coll_of_word(name + b, len - b)) == IMPORT_COLL_NONE)
                continue;
            break;
        case PT_SCOPE_ANY:
            b = strlen(r->text);
            if (!pt_starts_with(name, len, r->text) ||
                (c = pt_coll_of_word(name + b, len - b)) == IMPORT_COLL_NONE)
                continue;
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
    for (size_t i = 0; *coll == IMPORT_COLL_NONE && coll_arg[0] &&
                       i < PT_COUNT(pt_coll_arg_rules);
         i++)
        if (strcasestr(coll_arg, pt_coll_arg_rules[i].text))
            *coll = pt_coll_arg_rules[i].coll;
    if (*coll == IMPORT_COLL_NONE && *known) { /* the word after the scheme */
        size_t i = 0, j;
        for (size_t k = 0; k < PT_COUNT(pt_nccl_schemes) && i == 0; k++)
            if (pt_starts_with(name, len, pt_nccl_schemes[k]))
                i = strlen(pt_nccl_schemes[k]);
        for (j = i; j < len && name[j] != '_' && name[j] != '('; j++)
            ;
        if (j > i)
            *coll = pt_coll_of_word(name + i, j - i);
    }
    if (*coll == IMPORT_COLL_NONE && coll_arg[0])
        *coll = pt_coll_of_word(coll_arg, strlen(coll_arg));
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
