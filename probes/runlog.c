/* runlog.c — meta.csv and metrics.csv of a run directory (see runlog.h). */
#include "probes/runlog.h"

#include "common/error.h"
#include "probes/trace_format.h"

#include <csv.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

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

#define RUNLOG_LOCK_PREFIX ".ddpprof-node"
#define RUNLOG_LOCK_SUFFIX ".lock"

int runlog_fresh_dir(char *buf, size_t cap, const char *base)
{
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", base);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        if (mkdir_parents(parent))
            return -1;
    }
    for (int k = 1; k <= 1000; k++) {
        char name[4200];
        int n = k == 1 ? snprintf(name, sizeof name, "%s", base)
                       : snprintf(name, sizeof name, "%s-%d", base, k);
        if (n < 0 || (size_t)n >= sizeof name || (size_t)n >= cap)
            return error_set("output directory '%s': too long a path", base);
        if (mkdir(name, 0777) == 0) {
            memcpy(buf, name, (size_t)n + 1);
            return 0;
        }
        if (errno != EEXIST)
            return error_set("cannot create directory '%s': %s (choose an --out)", name,
                             strerror(errno));
    }
    return error_set("'%s' and 999 more like it exist already: choose an --out", base);
}

int runlog_claim(const char *dir, int node_rank)
{
    if (mkdir_parents(dir))
        return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/" RUNLOG_LOCK_PREFIX "%d" RUNLOG_LOCK_SUFFIX, dir,
             node_rank < 0 ? 0 : node_rank);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return error_set("--out %s: cannot create its lock file %s: %s (choose another --out)",
                         dir, path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            return error_set("--out %s is in use by another ddpprof job (pid %s): wait for it "
                             "to end, or choose another --out",
                             dir, pid[0] ? pid : "?");
        return error_set("--out %s: cannot lock %s: %s", dir, path, strerror(e));
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    ssize_t w = ftruncate(fd, 0) == 0 ? pwrite(fd, pid, (size_t)n, 0) : -1;
    (void)w; /* the pid is only for a second job's message: the lock holds without it */
    return fd;
}

/* a job's claim on the directory (runlog_claim): not a run file, and no sign of a run */
static int runlog_is_lock(const char *name)
{
    size_t n = strlen(name), p = strlen(RUNLOG_LOCK_PREFIX), x = strlen(RUNLOG_LOCK_SUFFIX);
    return n > p + x && strncmp(name, RUNLOG_LOCK_PREFIX, p) == 0 &&
           strcmp(name + n - x, RUNLOG_LOCK_SUFFIX) == 0;
}

/* a file a run writes into its directory (runlog_prepare removes them): also the temporary
 * of a checkpoint whose writer was killed before its rename (".NAME.safetensors.tmp-XXXXXX",
 * io/safetensors_write.c) */
static int runlog_is_run_file(const char *name)
{
    if (name[0] == '.' && strstr(name, ".safetensors.tmp-"))
        return 1;
    return strcmp(name, "meta.csv") == 0 || strcmp(name, "metrics.csv") == 0 ||
           trace_file_rank(name) >= 0;
}

int runlog_prepare(const char *dir, int overwrite)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : error_set("--out %s: cannot list it: %s", dir, strerror(errno));
    struct dirent *e;
    char first[256] = "";
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            runlog_is_lock(e->d_name))
            continue;
        const int run_file = runlog_is_run_file(e->d_name);
        if (!overwrite) {
            /* name a run file if there is one: it says what is there best */
            if (!first[0] || run_file)
                snprintf(first, sizeof first, "%s", e->d_name);
            if (run_file)
                break;
            continue;
        }
        if (!run_file)
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0 && errno != ENOENT)
            rc = error_set("--overwrite: cannot remove %s: %s", path, strerror(errno));
    }
    closedir(d);
    if (rc == 0 && first[0])
        rc = error_set("--out %s is not empty (it holds %s): pass --overwrite to replace the run "
                       "there, or choose another --out",
                       dir, first);
    return rc;
}

void runlog_host_usage(struct host_usage *u)
{
    memset(u, 0, sizeof *u);
    double load[1];
    if (getloadavg(load, 1) == 1)
        u->load1 = load[0];
    /* cpu  user nice system idle iowait irq softirq steal guest guest_nice (clock ticks;
     * guest time is inside user) */
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (f) {
        int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                       &v[3], &v[4], &v[5], &v[6], &v[7]);
        fclose(f);
        long hz = sysconf(_SC_CLK_TCK);
        if (n >= 7 && hz > 0) {
            u->have_stat = 1;
            u->busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)hz;
            u->steal_s = n == 8 ? (double)v[7] / (double)hz : 0.0;
        }
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        u->cpu_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                   (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
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
    else /* unbuffered: nothing of a row that failed stays behind to be written later */
        setvbuf(f, NULL, _IONBF, 0);
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
    r->meta_good = ftello(r->meta);
    r->metrics_good = ftello(r->metrics);
    return 0;
}

/* flush the row just written to f (dir/name; *good: where its last whole row ends); a row
 * that did not reach the disk is counted, the first failure kept for runlog_close, and the
 * part of it that did is cut off, so the file stays whole rows (a full disk) */
static int runlog_check(struct runlog *r, FILE *f, off_t *good, const char *name)
{
    if (fflush(f) == 0 && !ferror(f)) {
        *good = ftello(f);
        return 0;
    }
    int e = errno ? errno : EIO;
    clearerr(f);
    if (ftruncate(fileno(f), *good) != 0 || fseeko(f, *good, SEEK_SET) != 0)
        clearerr(f); /* left as it is: the row is counted as lost either way */
    if (r->lost++ == 0)
        snprintf(r->why, sizeof r->why, "%s: %s", name, strerror(e));
    return error_set("writing %s/%s: %s", r->dir, name, strerror(e));
}

static int runlog_meta_row(struct runlog *r, const char *key, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static int runlog_meta_row(struct runlog *r, const char *key, const char *fmt, va_list ap)
{
    char value[2048];
    vsnprintf(value, sizeof value, fmt, ap);
    csv_field_write(r->meta, key);
    fputc(',', r->meta);
    csv_field_write(r->meta, value);
    fputc('\n', r->meta);
    return runlog_check(r, r->meta, &r->meta_good, "meta.csv");
}

int runlog_meta(struct runlog *r, enum run_meta_key key, const char *fmt, ...)
{
    const char *name = run_meta_key_name(key);
    if (!r->meta || !name)
        return 0;
    va_list ap;
    va_start(ap, fmt);
    int rc = runlog_meta_row(r, name, fmt, ap);
    va_end(ap);
    return rc;
}

int runlog_meta_at(struct runlog *r, enum run_meta_indexed key, int index, const char *fmt, ...)
{
    if (!r->meta || (int)key < 0 || key >= RUN_META_INDEXED_COUNT)
        return 0;
    char name[128];
    run_meta_key_at(name, sizeof name, key, index);
    va_list ap;
    va_start(ap, fmt);
    int rc = runlog_meta_row(r, name, fmt, ap);
    va_end(ap);
    return rc;
}

int runlog_metrics(struct runlog *r, const struct step_metrics *m)
{
    if (!r->metrics)
        return 0;
    fprintf(r->metrics, "%lld,%d,%.9g,%.9g,%.9g,%lld,%d\n", (long long)m->step, m->epoch,
            m->loss, m->loss_scale, m->lr, (long long)m->images, m->found_inf);
    return runlog_check(r, r->metrics, &r->metrics_good, "metrics.csv");
}

int runlog_close(struct runlog *r)
{
    int rc = 0;
    if (r->meta && fclose(r->meta) != 0)
        rc = error_set("closing %s/meta.csv: %s", r->dir, strerror(errno));
    if (r->metrics && fclose(r->metrics) != 0)
        rc = error_set("closing %s/metrics.csv: %s", r->dir, strerror(errno));
    r->meta = r->metrics = NULL;
    if (r->lost)
        rc = error_set("%s: %ld row(s) of the run's files did not reach the disk (first: %s); "
                       "free disk space and run again",
                       r->dir, r->lost, r->why);
    return rc;
}
