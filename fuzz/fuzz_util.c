/* fuzz_util.c — checks, in-memory files and the scratch directory of the fuzz targets
 * (see fuzz_util.h). */
#include "fuzz/fuzz_util.h"

#include "common/error.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUZZ_SLOTS 8

void fuzz_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz: %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

int fuzz_status(int rc, const char *what)
{
    FUZZ_CHECK(rc == 0 || rc == -1, "%s returned %d, not 0 or -1", what, rc);
    if (rc == -1) {
        const char *msg = error_get();
        FUZZ_CHECK(msg[0] != '\0', "%s failed without a message", what);
        FUZZ_CHECK(!strchr(msg, '\n') && !strchr(msg, '\r'),
                   "%s: the error is not one line: '%s'", what, msg);
    }
    return rc;
}

const char *fuzz_memfile(int slot, const uint8_t *data, size_t size)
{
    static int fds[FUZZ_SLOTS] = {-1, -1, -1, -1, -1, -1, -1, -1};
    static char paths[FUZZ_SLOTS][40];
    FUZZ_CHECK(slot >= 0 && slot < FUZZ_SLOTS, "memfile slot %d", slot);
    if (fds[slot] < 0) {
        char name[16];
        snprintf(name, sizeof name, "fuzz%d", slot);
        fds[slot] = memfd_create(name, MFD_CLOEXEC);
        FUZZ_CHECK(fds[slot] >= 0, "memfd_create failed");
        snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d", fds[slot]);
    }
    int fd = fds[slot];
    FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate failed");
    for (size_t off = 0; off < size;) {
        ssize_t n = pwrite(fd, data + off, size - off, (off_t)off);
        FUZZ_CHECK(n > 0, "writing the in-memory file failed");
        off += (size_t)n;
    }
    return paths[slot];
}

static char fuzz_dir_path[4096];

static void fuzz_dir_remove(void)
{
    DIR *d = opendir(fuzz_dir_path);
    if (!d)
        return;
    struct dirent *e;
    char path[4400];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(path, sizeof path, "%s/%s", fuzz_dir_path, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(fuzz_dir_path);
}

const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/ddpprof-fuzz-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        FUZZ_CHECK(mkdtemp(fuzz_dir_path), "cannot create %s", fuzz_dir_path);
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

void fuzz_write(const char *name, const uint8_t *data, size_t size)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f, "cannot write %s", path);
    FUZZ_CHECK(fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", path);
}

void fuzz_remove(const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    unlink(path);
}

int fuzz_split(const uint8_t *data, size_t size, size_t *at, const char *sep,
               const uint8_t **piece, size_t *len)
{
    if (*at > size)
        return 0;
    size_t n = strlen(sep);
    const uint8_t *start = data + *at;
    size_t left = size - *at;
    const uint8_t *hit = n && left >= n ? memmem(start, left, sep, n) : NULL;
    *piece = start;
    *len = hit ? (size_t)(hit - start) : left;
    *at = hit ? (size_t)(hit - data) + n : size + 1;
    return 1;
}
