/* model.c — the model registry: one line per model, each pointing to the model's own row
 * (struct model_spec, model.h) in its file. */
#include "nn/model.h"

#include "common/error.h"

#include <stdio.h>
#include <string.h>

static const struct model_spec *const registry[] = {
    &convnet_spec, /* the first: the default model */
    &resnet18_spec,
    NULL,
};

const struct model_spec *const *model_specs(void) { return registry; }

const struct model_spec *model_spec(const char *name)
{
    for (const struct model_spec *const *s = registry; *s; s++)
        if (name && strcmp(name, (*s)->name) == 0)
            return *s;
    return error_set("unknown model '%s' (known: %s)", name ? name : "", model_names()), NULL;
}

int model_input(const char *name, int *c, int *h, int *w, int *classes)
{
    const struct model_spec *s = model_spec(name);
    if (!s)
        return -1;
    *c = s->in_c;
    *h = s->in_h;
    *w = s->in_w;
    *classes = s->classes;
    return 0;
}

struct model *model_create_opts(const char *name, struct backend *be, uint64_t seed,
                                const struct model_opts *opts)
{
    const struct model_opts dflt = MODEL_OPTS_DEFAULT;
    const struct model_spec *s = model_spec(name);
    return s ? s->create(be, seed, opts ? opts : &dflt) : NULL;
}

struct model *model_create(const char *name, struct backend *be, uint64_t seed)
{
    return model_create_opts(name, be, seed, NULL);
}

const char *model_names(void)
{
    static char names[256];
    if (!names[0]) {
        size_t at = 0;
        for (const struct model_spec *const *s = registry; *s && at < sizeof names; s++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s",
                                   s == registry ? "" : ", ", (*s)->name);
    }
    return names;
}

const char *model_help(void)
{
    static char help[512];
    if (!help[0]) {
        size_t at = (size_t)snprintf(help, sizeof help, "the model to train:");
        for (const struct model_spec *const *s = registry; *s && at < sizeof help; s++)
            at += (size_t)snprintf(help + at, sizeof help - at, "%s %s (%s)",
                                   s == registry ? "" : s[1] ? "," : " or", (*s)->name,
                                   (*s)->about);
    }
    return help;
}

int model_option_applies(const char *name, const char *option)
{
    for (const struct model_spec *const *s = registry; *s; s++)
        if ((*s)->option && strcmp((*s)->option, option) == 0 &&
            !(name && strcmp(name, (*s)->name) == 0))
            return 0;
    return 1;
}
