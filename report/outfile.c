/* outfile.c — output files written to a temp name and renamed when whole (see
 * outfile.h). */
#include "report/outfile.h"

#include "common/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int outfile_open(struct outfile *o, const char *path)
{
    memset(o, 0, sizeof *o);
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
