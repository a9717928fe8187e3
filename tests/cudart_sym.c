/* cudart_sym.c — the loaded libcudart's entry points (see cudart_sym.h). */
#include "cudart_sym.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

static char found_path[4096];

static int find_cudart(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *name = info->dlpi_name;
    const char *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (base && strncmp(base, "libcudart.so", strlen("libcudart.so")) == 0) {
        snprintf(found_path, sizeof found_path, "%s", name);
        return 1;
    }
    return 0;
}

const char *cudart_path(void)
{
    found_path[0] = '\0';
    dl_iterate_phdr(find_cudart, NULL);
    return found_path[0] ? found_path : NULL;
}

void *cudart_sym(const char *name)
{
    const char *path = cudart_path();
    if (!path)
        return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return NULL;
    void *sym = dlsym(h, name);
    dlclose(h); /* drops the reference NOLOAD took; the module keeps it mapped */
    return sym;
}
