/* runlog.c — meta.csv and metrics.csv of a run directory (see runlog.h). */
#include "probes/runlog.h"

#include "common/error.h"

#include <csv.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

int mkdir_parents(const char *path)
{
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf)
        return error_set("output directory '%s': empty or too long a path", path);
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return error_set("cannot create directory '%s': %s (choose another --out)",
                                 buf, strerror(errno));
            struct stat st;
            if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
                return error_set("'%s' exists and is not a directory (choose another --out)",
                                 buf);
            *p = c;
            if (c == '\0')
                break;
        }
    }
    return 0;
}

void csv_field_write(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\r\n"))
        csv_fwrite(f, s, strlen(s));
    else
        fputs(s, f);
}

static FILE *runlog_create_file(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        error_set("cannot write '%s': %s (choose another --out)", path, strerror(errno));
    return f;
}

int runlog_open(struct runlog *r, const char *dir)
{
    memset(r, 0, sizeof *r);
    if (!dir)
        return 0;
    if (strlen(dir) >= sizeof r->dir)
        return error_set("output directory path is too long: %s", dir);
    strcpy(r->dir, dir);
    if (mkdir_parents(dir))
        return -1;
    if (!(r->meta = runlog_create_file(dir, "meta.csv")))
        return -1;
    if (!(r->metrics = runlog_create_file(dir, "metrics.csv"))) {
        fclose(r->meta);
        r->meta = NULL;
        return -1;
    }
    fputs("key,value\n", r->meta);
    fputs("step,epoch,loss,loss_scale,lr,images,found_inf\n", r->metrics);
    fflush(r->metrics);
    return 0;
}

int runlog_meta(struct runlog *r, const char *key, const char *fmt, ...)
{
    if (!r->meta)
        return 0;
    char value[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    csv_field_write(r->meta, key);
    fputc(',', r->meta);
    csv_field_write(r->meta, value);
    fputc('\n', r->meta);
    return fflush(r->meta) == 0 ? 0 : error_set("writing %s/meta.csv: %s", r->dir, strerror(errno));
}

int runlog_metrics(struct runlog *r, const struct step_metrics *m)
{
    if (!r->metrics)
        return 0;
    fprintf(r->metrics, "%lld,%d,%.9g,%.9g,%.9g,%lld,%d\n", (long long)m->step, m->epoch,
            m->loss, m->loss_scale, m->lr, (long long)m->images, m->found_inf);
    return fflush(r->metrics) == 0 ? 0
                                   : error_set("writing %s/metrics.csv: %s", r->dir,
                                               strerror(errno));
}

int runlog_close(struct runlog *r)
{
    int rc = 0;
    if (r->meta && fclose(r->meta) != 0)
        rc = error_set("closing %s/meta.csv: %s", r->dir, strerror(errno));
    if (r->metrics && fclose(r->metrics) != 0)
        rc = error_set("closing %s/metrics.csv: %s", r->dir, strerror(errno));
    r->meta = r->metrics = NULL;
    return rc;
}
