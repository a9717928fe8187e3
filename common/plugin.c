/* plugin.c — shared objects loaded on first use, found next to the program (see plugin.h). */
#include "common/plugin.h"

#include "common/error.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int plugin_path(const char *file, char *path, size_t cap)
{
    const char *dir = getenv("DDPPROF_LIB_DIR");
    char exe[PATH_MAX];
    if (!dir || !dir[0]) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return error_set("cannot find %s: /proc/self/exe is unreadable (%s); set "
                             "DDPPROF_LIB_DIR to the directory that holds it",
                             file, n < 0 ? strerror(errno) : "empty");
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            slash[slash == exe] = '\0'; /* "/ddpprof" keeps its "/" */
        dir = exe;
    }
    int w = snprintf(path, cap, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", file);
    if (w < 0 || (size_t)w >= cap)
        return error_set("cannot find %s: the path in %s is too long", file, dir);
    return 0;
}

const void *plugin_load(const char *file, const char *table, int abi)
{
    char path[PATH_MAX + 256];
    if (plugin_path(file, path, sizeof path))
        return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* dlerror names the path when the file itself is missing: say it once */
        const char *why = dlerror();
        size_t n = strlen(path);
        if (why && strncmp(why, path, n) == 0 && why[n] == ':')
            why += n + 1 + (why[n + 1] == ' ');
        return error_set("%s: %s", path, why ? why : "dlopen failed"), NULL;
    }
    const void *sym = dlsym(h, table);
    if (!sym) {
        error_set("%s has no symbol %s: not a ddpprof module of this build; rebuild", path,
                  table);
        dlclose(h);
        return NULL;
    }
    int got;
    memcpy(&got, sym, sizeof got); /* the table's first member, int abi */
    if (got != abi) {
        error_set("%s is from another build (table %d, this program %d): rebuild", path, got,
                  abi);
        dlclose(h);
        return NULL;
    }
    return sym;
}
