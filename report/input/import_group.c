/* import_group.c — the runs in one directory of trace files, by file name (see
 * import_group.h). */
#include "report/input/import_group.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"

int import_group_name_rank(const char *path, char *name, size_t cap, int *rank)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *tok = NULL, *tok_end = NULL;
    for (const char *c = base; *c; c++) {
        if (strncasecmp(c, "rank", 4) != 0)
            continue;
        const char *d = c + 4;
        if (*d == '_' || *d == '-' || *d == '.')
            d++;
        long v = 0;
        int digits = 0;
        for (; *d >= '0' && *d <= '9' && v < 65536; d++, digits++)
            v = v * 10 + (*d - '0');
        if (digits > 0 && v < 65536 && !(*d >= '0' && *d <= '9')) {
            *rank = (int)v; /* the last one wins */
            tok = c;
            tok_end = d;
        }
    }
    if (!tok)
        return 0;
    if (!name || cap == 0)
        return 1;
    if (tok > base && (tok[-1] == '.' || tok[-1] == '_' || tok[-1] == '-'))
        tok--; /* its separator goes with it */
    size_t k = 0;
    for (const char *c = base; *c && k + 1 < cap; c++) {
        if (c == tok)
            c = tok_end;
        if (!*c)
            break;
        name[k++] = *c;
    }
    name[k] = '\0';
    char *dot = strchr(name, '.');
    if (dot)
        *dot = '\0'; /* the extensions: .nsys-rep, .sqlite, .pt.trace.json, ... */
    return 1;
}

int import_group_dotted_rank(const char *path, char *name, size_t cap, int *rank)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    const char *e = dot && dot != base ? dot : base + strlen(base);
    const char *d = e;
    while (d > base && d[-1] >= '0' && d[-1] <= '9')
        d--;
    if (d == e || d == base || e - d > 5 || d[-1] != '.')
        return 0;
    const long v = strtol(d, NULL, 10);
    if (v >= 65536)
        return 0;
    *rank = (int)v;
    if (name && cap > 0) {
        size_t k = 0;
        for (const char *c = base; c < d - 1 && *c != '.' && k + 1 < cap; c++)
            name[k++] = *c; /* up to the first '.': the stem without ".N" and extensions */
        name[k] = '\0';
    }
    return 1;
}

/* the main job's order: baseline, ddp, then by name */
static int group_order(const char *x, const char *y)
{
    int rx = strcmp(x, "baseline") == 0 ? 0 : strcmp(x, "ddp") == 0 ? 1 : 2;
    int ry = strcmp(y, "baseline") == 0 ? 0 : strcmp(y, "ddp") == 0 ? 1 : 2;
    return rx != ry ? rx - ry : strcmp(x, y);
}

int import_group_by_name(char *const *paths, int n, int **group, char ***names, int *ngroups)
{
    *group = calloc((size_t)n + 1, sizeof **group);
    *names = NULL;
    *ngroups = 1;
    char (*stem)[128] = calloc((size_t)n + 1, sizeof *stem);
    int *rank = calloc((size_t)n + 1, sizeof *rank);
    char **v = calloc((size_t)n + 1, sizeof *v);
    int rc = 0, nv = 0;
    if (!*group || !stem || !rank || !v) {
        rc = error_set("report: out of memory grouping %d trace files", n);
        goto out;
    }
    int repeated = 0, every = 1;
    for (int i = 0; i < n; i++) {
        every &= import_group_name_rank(paths[i], stem[i], sizeof stem[i], &rank[i]) ||
                 import_group_dotted_rank(paths[i], stem[i], sizeof stem[i], &rank[i]);
        for (int k = 0; k < i && every; k++)
            repeated |= rank[k] == rank[i];
    }
    if (!every || !repeated)
        goto out; /* one run */
    for (int i = 0; i < n && rc == 0; i++) {
        int g = 0;
        while (g < nv && strcmp(v[g], stem[i]) != 0)
            g++;
        if (g == nv && !(v[nv++] = strdup(stem[i])))
            rc = error_set("report: out of memory grouping %d trace files", n);
    }
    /* sort the names (insertion: a handful), then each file's index */
    for (int i = 1; i < nv; i++)
        for (int k = i; k > 0 && group_order(v[k - 1], v[k]) > 0; k--) {
            char *t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
    for (int i = 0; i < n && rc == 0; i++) {
        int g = 0;
        while (strcmp(v[g], stem[i]) != 0)
            g++;
        (*group)[i] = g;
        for (int k = 0; k < i; k++)
            if ((*group)[k] == g && rank[k] == rank[i])
                rc = error_set("%s and %s both name rank %d and run '%s': give each run's files "
                               "on their own",
                               paths[k], paths[i], rank[i], v[g]);
    }
    if (rc == 0 && nv > 1) {
        *names = v;
        *ngroups = nv;
        v = NULL;
        nv = 0;
    } else if (rc == 0) {
        memset(*group, 0, (size_t)n * sizeof **group);
    }
out:
    for (int i = 0; i < nv; i++)
        free(v[i]);
    free(v);
    free(stem);
    free(rank);
    if (rc < 0) {
        free(*group);
        *group = NULL;
    }
    return rc;
}
