/* import.c — the report's inputs other than a ddpprof run directory given by name (see
 * import.h): each path to the importer that claims it most surely (report/input/importers.c), a
 * directory's trace files as one run or as the runs their names say, over one import core
 * (report/input/import_core.h). */
#include "report/input/import.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/vec.h"
#include "report/input/import_core.h"
#include "report/input/import_group.h"
#include "report/input/importer.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int import_dir_traces(const char *dir, char ***paths, int *n)
{
    *paths = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return error_set("%s: cannot list the directory (%s)", dir, strerror(errno));
    char **v = NULL;
    enum import_claim *lv = NULL;
    size_t cap = 0, cap_lv = 0;
    int count = 0, rc = 0;
    enum import_claim top = IMPORT_CLAIM_YES;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *p = NULL;
        struct stat st;
        if (asprintf(&p, "%s/%s", dir, e->d_name) < 0 || VEC_RESERVE(v, cap, (size_t)count + 1) ||
            VEC_RESERVE(lv, cap_lv, (size_t)count + 1)) {
            free(p);
            rc = error_set("report: out of memory listing %s", dir);
            break;
        }
        enum import_claim level = IMPORT_CLAIM_NO;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            importer_for(p, 0, &level);
        if (level < IMPORT_CLAIM_YES) {
            free(p);
            continue;
        }
        if (level > top)
            top = level;
        lv[count] = level;
        v[count++] = p;
    }
    closedir(d);
    if (rc == 0) { /* the surest claims only (tensorboard_trace_handler's files when any) */
        int k = 0;
        for (int i = 0; i < count; i++) {
            if (lv[i] == top)
                v[k++] = v[i];
            else
                free(v[i]);
        }
        count = k;
    }
    free(lv);
    if (rc < 0) {
        for (int i = 0; i < count; i++)
            free(v[i]);
        free(v);
        return -1;
    }
    if (count > 1)
        qsort(v, (size_t)count, sizeof *v, cmp_str);
    *paths = v;
    *n = count;
    return 0;
}

int import_run(struct runset *rs, const char *where, char *const *paths, int n)
{
    if (n < 1)
        return error_set("%s: no trace files in it", where);
    struct import_sink sink;
    import_sink_init(&sink, rs, where, 0);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        enum import_claim level;
        const struct importer *imp = importer_for(paths[i], 0, &level);
        rc = imp ? imp->load(paths[i], &sink)
                 : error_set("%s: not a trace file the report reads", paths[i]);
    }
    if (rc == 0)
        rc = import_sink_finish(&sink);
    import_sink_free(&sink);
    return rc;
}

/* The trace files of dir as one run, or as several where their names say so
 * (import_group.h: scripts/nsys-profile's baseline.rank0 beside ddp.rank0), each named
 * dir/NAME as a main job's runs are. */
static int import_dir_runs(struct runset *rs, const char *dir, char **paths, int np)
{
    int *group = NULL, ngroups = 1;
    char **names = NULL;
    int rc = import_group_by_name(paths, np, &group, &names, &ngroups);
    if (rc == 0 && ngroups == 1)
        rc = import_run(rs, dir, paths, np);
    char **sub = ngroups > 1 ? malloc((size_t)np * sizeof *sub) : NULL;
    if (rc == 0 && ngroups > 1 && !sub)
        rc = error_set("report: out of memory");
    for (int g = 0; rc == 0 && g < ngroups && sub; g++) {
        int k = 0;
        for (int i = 0; i < np; i++)
            if (group[i] == g)
                sub[k++] = paths[i];
        char *where = NULL;
        if (asprintf(&where, "%s/%s", dir, names[g]) < 0)
            rc = error_set("report: out of memory");
        else
            rc = import_run(rs, where, sub, k);
        free(where);
    }
    free(sub);
    for (int g = 0; names && g < ngroups; g++)
        free(names[g]);
    free(names);
    free(group);
    return rc;
}

int import_dir(struct runset *rs, const char *dir)
{
    enum import_claim level;
    const struct importer *whole = importer_for(dir, 1, &level);
    if (whole && level >= IMPORT_CLAIM_YES) {
        struct import_sink sink;
        import_sink_init(&sink, rs, dir, 0);
        int rc = whole->load(dir, &sink);
        if (rc == 0)
            rc = import_sink_finish(&sink);
        import_sink_free(&sink);
        return rc;
    }
    char **paths = NULL;
    int np = 0, rc = import_dir_traces(dir, &paths, &np);
    if (rc == 0 && np > 0) {
        if (!rs->default_out && !(rs->default_out = strdup(dir)))
            rc = error_set("report: out of memory");
        if (rc == 0)
            rc = import_dir_runs(rs, dir, paths, np);
    } else if (rc == 0 && whole) {
        struct import_sink sink;
        import_sink_init(&sink, rs, dir, 0);
        rc = whole->load(dir, &sink);
        if (rc == 0)
            rc = import_sink_finish(&sink);
        import_sink_free(&sink);
    } else if (rc == 0) {
        rc = error_set("%s: no run or trace file in it that the report reads", dir);
    }
    for (int k = 0; k < np; k++)
        free(paths[k]);
    free(paths);
    return rc;
}

/* The directory of a file path ("a/b.json" -> "a", "b.json" -> "."). */
static char *dirname_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *d = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!d)
        error_set("report: out of memory");
    return d;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int import_inputs(struct runset *rs, const char *const *inputs, int n)
{
    if (!is_dir(inputs[0]) && !(rs->default_out = dirname_of(inputs[0])))
        return -1;
    char **loose = calloc((size_t)n + 1, sizeof *loose);
    int nloose = 0, rc = 0;
    if (!loose)
        return error_set("report: out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        const char *in = inputs[i];
        struct stat st;
        if (stat(in, &st) != 0) {
            rc = error_set("%s: no such run directory or trace file (%s)", in, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            rc = import_dir(rs, in);
        } else if (S_ISREG(st.st_mode)) {
            loose[nloose++] = (char *)in;
        } else {
            rc = error_set("%s: not a run directory or a trace file", in);
        }
    }
    if (rc == 0 && nloose > 0)
        rc = import_run(rs, loose[0], loose, nloose);
    free(loose);
    return rc;
}
