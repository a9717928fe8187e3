/* model.c — the model registry. */
#include "nn/model.h"

#include "common/error.h"

#include <string.h>

static struct model *registry_convnet(struct backend *be, uint64_t seed,
                                      const struct model_opts *o)
{
    (void)o;
    return convnet_create(be, seed);
}

/* in_c, in_h, in_w and classes as each model's create sets them (model_input) */
static const struct {
    const char *name;
    struct model *(*create)(struct backend *be, uint64_t seed, const struct model_opts *o);
    int in_c, in_h, in_w, classes;
} model_registry[] = {
    {"convnet", registry_convnet, 1, 28, 28, 10},
    {"resnet18", resnet18_create_opts, 3, 32, 32, 10},
};

int model_input(const char *name, int *c, int *h, int *w, int *classes)
{
    for (size_t i = 0; i < sizeof model_registry / sizeof model_registry[0]; i++)
        if (strcmp(name, model_registry[i].name) == 0) {
            *c = model_registry[i].in_c;
            *h = model_registry[i].in_h;
            *w = model_registry[i].in_w;
            *classes = model_registry[i].classes;
            return 0;
        }
    return error_set("unknown model '%s' (known: %s)", name, model_names());
}

struct model *model_create_opts(const char *name, struct backend *be, uint64_t seed,
                                const struct model_opts *opts)
{
    const struct model_opts dflt = MODEL_OPTS_DEFAULT;
    for (size_t i = 0; i < sizeof model_registry / sizeof model_registry[0]; i++)
        if (strcmp(name, model_registry[i].name) == 0)
            return model_registry[i].create(be, seed, opts ? opts : &dflt);
    return error_set("unknown model '%s' (known: %s)", name, model_names()), NULL;
}

struct model *model_create(const char *name, struct backend *be, uint64_t seed)
{
    return model_create_opts(name, be, seed, NULL);
}

const char *model_names(void) { return "convnet, resnet18"; }
