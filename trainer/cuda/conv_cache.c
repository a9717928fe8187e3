/* conv_cache.c — the per-machine cache of cuDNN's convolution algorithm choices (see
 * conv_cache.h). */
#include "cuda/conv_cache.h"

#include "common/error.h"
#include "common/vec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file's first two lines: a format line (a file without it is not this code's) and the
 * column names. */
static const char cc_magic[] = "# ddpprof cuDNN algorithm cache, format 1 "
                               "(trainer/cuda/conv_cache.h); delete it to forget the choices";
static const char cc_header[] =
    "gpu\tcudnn\tchoice\tdir\tdtype\tmath\tlayout\tn\tc\th\tw\tk\tr\ts\tpad\tstride\tdilation"
    "\tgroups\talgo\talgo_math\tworkspace_bytes";
#define CC_KEY_COLS 18
#define CC_COLS 21
#define CC_LINE_MAX 512
#define CC_WS_MAX ((size_t)1 << 40) /* no algorithm asks for a TiB of workspace */

static const char *const cc_choice[] = {"heuristics", "find"};
static const char *const cc_layout[] = {"nchw", "nhwc"}; /* backend.h enum layout */
static const char *const cc_dir[] = {"fwd", "bwd_data", "bwd_filter"};
static const char *const cc_dtype[] = {"fp32", "fp16", "bf16"};
static const char *const cc_math[] = {"fma", "tensor_op", "tf32"}; /* enum conv_cache_math */
#define CC_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

struct cc_entry {
    char *key; /* conv_cache_key_text */
    struct conv_cache_value v;
    int mine;  /* put by this process: wins over the file's line when merging */
};

struct conv_cache {
    char *path;
    struct cc_entry *e;
    size_t n, cap;
    int write_warned;
};

/* ------------------------------------------------------------------ the path */

int conv_cache_path(char *buf, size_t cap)
{
    const char *env = getenv("DDPPROF_CUDNN_CACHE");
    int n;
    if (env && *env) {
        if (strcmp(env, "off") == 0)
            return 0;
        n = snprintf(buf, cap, "%s", env);
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0] == '/')
            n = snprintf(buf, cap, "%s/ddpprof/cudnn-algos.tsv", xdg);
        else if (home && *home)
            n = snprintf(buf, cap, "%s/.cache/ddpprof/cudnn-algos.tsv", home);
        else
            return 0;
    }
    return n > 0 && (size_t)n < cap;
}

/* ------------------------------------------------------------------ lines */

int conv_cache_key_text(const struct conv_cache_key *k, char *buf, size_t cap)
{
    if (!k->gpu[0] || strpbrk(k->gpu, "\t\n\r") || k->cudnn < 1 || k->find < 0 ||
        k->find >= CC_COUNT(cc_choice) || k->dir < 0 || k->dir >= CC_COUNT(cc_dir) ||
        k->dtype < 0 || k->dtype >= CC_COUNT(cc_dtype) || k->math < 0 ||
        k->math >= CC_COUNT(cc_math) || k->layout < 0 || k->layout >= CC_COUNT(cc_layout) ||
        k->n < 1 || k->c < 1 || k->h < 1 || k->w < 1 ||
        k->k < 1 || k->r < 1 || k->s < 1 || k->pad < 0 || k->stride < 1 || k->dilation < 1 ||
        k->groups < 1)
        return -1;
    int n = snprintf(buf, cap, "%s\t%ld\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d"
                     "\t%d\t%d", k->gpu, k->cudnn, cc_choice[k->find], cc_dir[k->dir],
                     cc_dtype[k->dtype], cc_math[k->math], cc_layout[k->layout], k->n, k->c, k->h, k->w, k->k, k->r,
                     k->s, k->pad, k->stride, k->dilation, k->groups);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

static int cc_name(const char *s, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* a decimal integer in [lo, hi] and nothing else */
static int cc_long(const char *s, long long lo, long long hi, long long *out)
{
    if (!s[0] || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* One line of the file (no newline, fields split at tabs in place) into key text and
 * value.  The key must read back as conv_cache_key_text writes it, so an edited or
 * foreign line never matches by accident.  0, or -1 with why. */
static int cc_parse_line(char *line, char *key, size_t key_cap, struct conv_cache_value *v,
                         const char **why)
{
    char *f[CC_COLS];
    int nf = 0;
    for (char *p = line;; p++) {
        if (nf == CC_COLS) {
            *why = "more columns than the header";
            return -1;
        }
        f[nf++] = p;
        p = strchr(p, '\t');
        if (!p)
            break;
        *p = '\0';
    }
    if (nf != CC_COLS) {
        *why = "fewer columns than the header";
        return -1;
    }
    struct conv_cache_key k;
    memset(&k, 0, sizeof k);
    long long x[CC_COLS];
    int ints_ok = 1;
    for (int i = 7; i < CC_KEY_COLS; i++)
        ints_ok &= cc_long(f[i], 0, INT_MAX, &x[i]) == 0;
    if (strlen(f[0]) >= sizeof k.gpu || cc_long(f[1], 1, LONG_MAX, &x[1]) || !ints_ok ||
        (k.find = cc_name(f[2], cc_choice, CC_COUNT(cc_choice))) < 0 ||
        (k.dir = cc_name(f[3], cc_dir, CC_COUNT(cc_dir))) < 0 ||
        (k.dtype = cc_name(f[4], cc_dtype, CC_COUNT(cc_dtype))) < 0 ||
        (k.math = cc_name(f[5], cc_math, CC_COUNT(cc_math))) < 0 ||
        (k.layout = cc_name(f[6], cc_layout, CC_COUNT(cc_layout))) < 0) {
        *why = "a key column that this format does not allow";
        return -1;
    }
    snprintf(k.gpu, sizeof k.gpu, "%s", f[0]);
    k.cudnn = (long)x[1];
    int *dims[] = {&k.n, &k.c, &k.h, &k.w, &k.k, &k.r, &k.s, &k.pad, &k.stride, &k.dilation,
                   &k.groups};
    for (int i = 0; i < 11; i++)
        *dims[i] = (int)x[7 + i];
    /* the same text as written: no leading zeros, signs or spaces */
    int same = conv_cache_key_text(&k, key, key_cap) == 0;
    for (int i = 1; same && i < CC_KEY_COLS; i++)
        f[i][-1] = '\t'; /* rejoin the key columns (f[0] runs to the algorithm) */
    same = same && strcmp(f[0], key) == 0;
    long long algo, math, ws;
    if (!same || cc_long(f[18], 0, 63, &algo) || cc_long(f[19], 0, 3, &math) ||
        cc_long(f[20], 0, (long long)CC_WS_MAX, &ws)) {
        *why = same ? "an algorithm, math type or workspace out of range"
                    : "a key not written as this format writes it";
        return -1;
    }
    v->algo = (int)algo;
    v->math = (int)math;
    v->ws = (size_t)ws;
    return 0;
}

static void cc_entries_free(struct cc_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(e[i].key);
    free(e);
}

static long cc_find_key(const struct cc_entry *e, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(e[i].key, key) == 0)
            return (long)i;
    return -1;
}

/* Set key -> v in the list (replacing an equal key, which moves to the end: the newest). */
static int cc_set(struct cc_entry **e, size_t *n, size_t *cap, const char *key,
                  const struct conv_cache_value *v, int mine)
{
    long at = cc_find_key(*e, *n, key);
    char *copy;
    if (at >= 0) {
        copy = (*e)[at].key;
        memmove(*e + at, *e + at + 1, (*n - (size_t)at - 1) * sizeof **e);
        (*n)--;
    } else {
        if (VEC_RESERVE(*e, *cap, *n + 1) || !(copy = strdup(key)))
            return -1;
    }
    (*e)[*n].key = copy;
    (*e)[*n].v = *v;
    (*e)[*n].mine = mine;
    (*n)++;
    return 0;
}

/* Drop the oldest entries past CONV_CACHE_MAX_ENTRIES. */
static void cc_trim(struct cc_entry *e, size_t *n)
{
    if (*n <= CONV_CACHE_MAX_ENTRIES)
        return;
    size_t drop = *n - CONV_CACHE_MAX_ENTRIES;
    for (size_t i = 0; i < drop; i++)
        free(e[i].key);
    memmove(e, e + drop, CONV_CACHE_MAX_ENTRIES * sizeof *e);
    *n = CONV_CACHE_MAX_ENTRIES;
}

/* Read the file at path into *e (its lines in file order).  0 (also for a missing file: no
 * entries), 1 when it is not a cache this code wrote (why says how; no entries), -1 for want
 * of memory (error_set). */
static int cc_read(const char *path, struct cc_entry **e, size_t *n, size_t *cap, char *why,
                   size_t why_cap)
{
    *e = NULL;
    *n = *cap = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        snprintf(why, why_cap, "cannot be read (%s)", strerror(errno));
        return 1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size > CONV_CACHE_MAX_BYTES) {
        snprintf(why, why_cap, "not a regular file of at most %zu bytes", CONV_CACHE_MAX_BYTES);
        fclose(f);
        return 1;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        fclose(f);
        return error_set("cuDNN algorithm cache %s: out of memory reading it", path);
    }
    size_t got = fread(buf, 1, (size_t)st.st_size, f);
    fclose(f);
    buf[got] = '\0';
    int rc = 0;
    const char *bad = NULL;
    long line_no = 0;
    if (got != (size_t)st.st_size || strlen(buf) != got) {
        bad = "not text";
    } else if (got == 0 || buf[got - 1] != '\n') {
        bad = got == 0 ? "empty" : "its last line is cut short";
    } else {
        char *line = buf;
        while (*line && !bad) {
            char *nl = strchr(line, '\n');
            *nl = '\0';
            line_no++;
            char key[CC_LINE_MAX];
            struct conv_cache_value v;
            if (nl - line >= CC_LINE_MAX)
                bad = "a line too long";
            else if (line_no == 1 && strcmp(line, cc_magic) != 0)
                bad = "not a ddpprof cuDNN algorithm cache of this format (its first line)";
            else if (line_no == 2 && strcmp(line, cc_header) != 0)
                bad = "not this format's column names";
            else if (line_no > 2 && (size_t)(line_no - 2) > CONV_CACHE_MAX_ENTRIES)
                bad = "more lines than this format keeps";
            else if (line_no > 2 && cc_parse_line(line, key, sizeof key, &v, &bad) == 0 &&
                     cc_set(e, n, cap, key, &v, 0)) {
                rc = error_set("cuDNN algorithm cache %s: out of memory reading it", path);
                break;
            }
            line = nl + 1;
        }
        if (!bad && line_no < 2)
            bad = "no column names";
    }
    free(buf);
    if (bad && rc == 0) {
        if (line_no > 2)
            snprintf(why, why_cap, "line %ld: %s", line_no, bad);
        else
            snprintf(why, why_cap, "%s", bad);
        rc = 1;
    }
    if (rc) {
        cc_entries_free(*e, *n);
        *e = NULL;
        *n = *cap = 0;
    }
    return rc;
}

/* ------------------------------------------------------------------ the cache */

struct conv_cache *conv_cache_open(const char *path)
{
    struct conv_cache *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        error_set("cuDNN algorithm cache: out of memory");
        return NULL;
    }
    char why[256];
    int rc = cc_read(path, &c->e, &c->n, &c->cap, why, sizeof why);
    if (rc < 0) {
        conv_cache_free(c);
        return NULL;
    }
    if (rc > 0)
        fprintf(stderr, "ddpprof: cuDNN algorithm cache %s: %s: ignored, and rewritten with "
                        "this run's choices (DDPPROF_CUDNN_CACHE=off turns the cache off)\n",
                path, why);
    return c;
}

void conv_cache_free(struct conv_cache *c)
{
    if (!c)
        return;
    cc_entries_free(c->e, c->n);
    free(c->path);
    free(c);
}

const char *conv_cache_file(const struct conv_cache *c) { return c->path; }

int conv_cache_find(const struct conv_cache *c, const struct conv_cache_key *k,
                    struct conv_cache_value *v)
{
    char key[CC_LINE_MAX];
    if (conv_cache_key_text(k, key, sizeof key))
        return 0;
    long at = cc_find_key(c->e, c->n, key);
    if (at < 0)
        return 0;
    *v = c->e[at].v;
    return 1;
}

/* mkdir -p of path's folder; 0 or -1 (errno) */
static int cc_mkdirs(char *dir)
{
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        const char keep = *p;
        *p = '\0';
        int rc = mkdir(dir, 0755);
        *p = keep;
        if (rc && errno != EEXIST)
            return -1;
        if (!keep)
            return 0;
    }
}

/* The file rewritten as the lines now on disk (a foreign or corrupt file counts as none)
 * with this process's choices over them, under an exclusive lock on its folder, through a
 * temporary file renamed over it.  0, or -1 with why. */
static int cc_write(struct conv_cache *c, char *why, size_t why_cap)
{
    char dir[PATH_MAX], tmp[PATH_MAX];
    const char *slash = strrchr(c->path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == c->path)
        snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - c->path) >= sizeof dir) {
        snprintf(why, why_cap, "path too long");
        return -1;
    } else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - c->path), c->path);
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", c->path) >= (int)sizeof tmp) {
        snprintf(why, why_cap, "path too long");
        return -1;
    }
    if (cc_mkdirs(dir)) {
        snprintf(why, why_cap, "creating %s: %s", dir, strerror(errno));
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || flock(dfd, LOCK_EX)) {
        snprintf(why, why_cap, "locking %s: %s", dir, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        return -1;
    }
    struct cc_entry *e = NULL;
    size_t n = 0, cap = 0;
    char ignored[256];
    int rc = -1;
    FILE *f = NULL;
    int tfd = -1;
    if (cc_read(c->path, &e, &n, &cap, ignored, sizeof ignored) < 0) {
        snprintf(why, why_cap, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < c->n; i++)
        if (c->e[i].mine && cc_set(&e, &n, &cap, c->e[i].key, &c->e[i].v, 1)) {
            snprintf(why, why_cap, "out of memory");
            goto out;
        }
    cc_trim(e, &n);
    tfd = mkstemp(tmp);
    if (tfd < 0 || !(f = fdopen(tfd, "w"))) {
        snprintf(why, why_cap, "creating %s: %s", tmp, strerror(errno));
        if (tfd >= 0)
            close(tfd);
        tmp[0] = '\0';
        goto out;
    }
    (void)fchmod(tfd, 0644);
    fprintf(f, "%s\n%s\n", cc_magic, cc_header);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\t%d\t%d\t%zu\n", e[i].key, e[i].v.algo, e[i].v.math, e[i].v.ws);
    const int werr = ferror(f);
    if (fclose(f) || werr) {
        snprintf(why, why_cap, "writing %s: %s", tmp, strerror(errno ? errno : EIO));
        goto out;
    }
    if (rename(tmp, c->path)) {
        snprintf(why, why_cap, "renaming %s: %s", tmp, strerror(errno));
        goto out;
    }
    tmp[0] = '\0';
    rc = 0;
out:
    if (rc && tmp[0] && tfd >= 0)
        unlink(tmp);
    cc_entries_free(e, n);
    flock(dfd, LOCK_UN);
    close(dfd);
    return rc;
}

int conv_cache_put(struct conv_cache *c, const struct conv_cache_key *k,
                   const struct conv_cache_value *v)
{
    char key[CC_LINE_MAX], why[PATH_MAX + 128];
    if (conv_cache_key_text(k, key, sizeof key))
        return -1; /* a key the file cannot hold: not cached */
    if (cc_set(&c->e, &c->n, &c->cap, key, v, 1)) {
        snprintf(why, sizeof why, "out of memory");
    } else {
        cc_trim(c->e, &c->n);
        if (cc_write(c, why, sizeof why) == 0)
            return 0;
    }
    if (!c->write_warned) {
        fprintf(stderr, "ddpprof: cuDNN algorithm cache %s: not written (%s): the next run "
                        "chooses again (DDPPROF_CUDNN_CACHE=PATH puts it elsewhere, =off turns "
                        "it off)\n",
                c->path, why);
        c->write_warned = 1;
    }
    return -1;
}
