/* replay.c — the main of fuzz_replay_<name>: run a fuzz target once on every input file
 * given, or on every file of every directory given (sorted by name, dot files skipped), as
 * an ordinary program of the normal build (no clang, no libFuzzer).  A finding aborts
 * inside the target; a clean replay prints how many inputs it ran and exits 0.  No input
 * at all is a failure (a corpus that went missing). */
#include "fuzz/fuzz_util.h"

#include "common/vec.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* the whole file in a buffer of exactly its size (so a sanitizer sees any over-read) */
static uint8_t *replay_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    uint8_t *buf = NULL;
    if (fstat(fileno(f), &st) == 0 && (buf = malloc(st.st_size ? (size_t)st.st_size : 1))) {
        *len = fread(buf, 1, (size_t)st.st_size, f);
        if (*len != (size_t)st.st_size) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

static int replay_one(const char *path)
{
    size_t len = 0;
    uint8_t *buf = replay_read(path, &len);
    if (!buf) {
        fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static int replay_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* every file of dir, sorted; the count, or -1 */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot list %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (VEC_RESERVE(names, cap, n + 1))
            abort();
        if (!(names[n++] = strdup(e->d_name)))
            abort();
    }
    closedir(d);
    qsort(names, n, sizeof *names, replay_cmp);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_one(path) < 0)
                count = -1;
            else if (count >= 0)
                count++;
        }
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    int total = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int n;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            n = -1;
        } else if (S_ISDIR(st.st_mode)) {
            n = replay_dir(argv[i]);
        } else {
            n = replay_one(argv[i]) == 0 ? 1 : -1;
        }
        if (n < 0)
            bad = 1;
        else
            total += n;
    }
    if (bad || total == 0) {
        fprintf(stderr, "replay: %s\n", bad ? "an input could not be read" : "no inputs");
        return 1;
    }
    printf("replay: %d input(s), no finding\n", total);
    return 0;
}
