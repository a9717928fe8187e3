/* model.c — the model registry. */
#include "nn/model.h"

#include "common/error.h"

#include <string.h>

static const struct {
    const char *name;
    struct model *(*create)(struct backend *be, uint64_t seed);
} model_registry[] = {
    {"convnet", convnet_create},
};

struct model *model_create(const char *name, struct backend *be, uint64_t seed)
{
    for (size_t i = 0; i < sizeof model_registry / sizeof model_registry[0]; i++)
        if (strcmp(name, model_registry[i].name) == 0)
            return model_registry[i].create(be, seed);
    return error_set("unknown model '%s' (known: %s)", name, model_names()), NULL;
}

const char *model_names(void) { return "convnet"; }
