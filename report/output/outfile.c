/* outfile.c — output files written to a temp name and renamed when whole (see
 * outfile.h). */
#include "report/output/outfile.h"

#include "common/error.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Remove path's temp files left by reports that died before their rename (PATH.tmp.PID
 * with no process PID): an interrupted report's leftovers go with the next report that
 * writes the same file.  A live process's temp file is its own, never touched. */
static void outfile_sweep(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[4096];
    if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path) > 0 ? (int)(slash - path) : 1,
                 path);
    else
        snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir);
    if (!d)
        return;
    const size_t blen = strlen(base);
    struct dirent *ent;
    for (int seen = 0; (ent = readdir(d)) != NULL && seen < 100000; seen++) {
        const char *n = ent->d_name;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".tmp.", 5) != 0)
            continue;
        const char *digits = n + blen + 5;
        char *end;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (end == digits || *end || errno || pid <= 0 || pid > 0x7fffffffL ||
            pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or not ours to ask about): its own file */
        char stale[8192];
        snprintf(stale, sizeof stale, "%s/%s", dir, n);
        unlink(stale);
    }
    closedir(d);
}

int outfile_open(struct outfile *o, const char *path)
{
    memset(o, 0, sizeof *o);
    outfile_sweep(path);
    o->path = strdup(path);
    if (!o->path || asprintf(&o->tmp, "%s.tmp.%d", path, (int)getpid()) < 0) {
        free(o->path);
        o->path = o->tmp = NULL;
        return error_set("%s: out of memory", path);
    }
    o->f = fopen(o->tmp, "w");
    if (!o->f) {
        int e = errno;
        free(o->path);
        free(o->tmp);
        o->path = o->tmp = NULL;
        return error_set("%s: cannot create (%s)", path, strerror(e));
    }
    return 0;
}

int outfile_close(struct outfile *o, int ok)
{
    int e = 0;
    if (ok) {
        if (fflush(o->f) != 0 || ferror(o->f))
            e = errno ? errno : EIO;
        else if (fsync(fileno(o->f)) != 0 && errno != EINVAL) /* EINVAL: /dev/null-like */
            e = errno;
    }
    if (fclose(o->f) != 0 && ok && !e)
        e = errno ? errno : EIO;
    if (ok && !e && rename(o->tmp, o->path) != 0)
        e = errno;
    int rc = 0;
    if (!ok || e) {
        unlink(o->tmp);
        rc = ok ? error_set("%s: write failed (%s): check the disk", o->path, strerror(e)) : -1;
    }
    free(o->path);
    free(o->tmp);
    memset(o, 0, sizeof *o);
    return rc;
}

int outfile_mkdirs(const char *dir)
{
    char *p = strdup(dir);
    if (!p)
        return error_set("out of memory creating %s", dir);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                error_set("%s: cannot create the output directory (%s)", p, strerror(errno));
                free(p);
                return -1;
            }
            *s = c;
            if (c == '\0')
                break;
        }
    }
    free(p);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return error_set("%s: not a directory: choose another --out", dir);
    return 0;
}
