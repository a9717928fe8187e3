/* safetensors_write.c — the safetensors writer: the reference implementation's bytes,
 * saved atomically (see safetensors.h). */
#include "io/safetensors.h"

#include "common/error.h"
#include "common/vec.h"
#include "io/json.h"
#include "io/safetensors_format.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct st_entry {
    char *name;
    enum st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    void *data;
    size_t nbytes;
};

struct st_writer {
    struct st_entry *entries;
    int count;
    size_t entries_cap;
    struct st_meta *meta;
    int meta_count;
    size_t meta_cap;
};

struct st_writer *st_writer_create(void)
{
    struct st_writer *w = calloc(1, sizeof *w);
    if (!w)
        error_set("st_writer_create: out of memory");
    return w;
}

void st_writer_free(struct st_writer *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->count; i++) {
        free(w->entries[i].name);
        free(w->entries[i].data);
    }
    free(w->entries);
    for (int i = 0; i < w->meta_count; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->meta);
    free(w);
}

int st_writer_add(struct st_writer *w, const char *name, enum st_dtype dtype, int ndim,
                  const int64_t *shape, const void *data)
{
    if (!name[0] || !json_utf8_valid((const unsigned char *)name, strlen(name)))
        return error_set("safetensors writer: tensor name \"%s\" is empty or not UTF-8", name);
    if (strcmp(name, "__metadata__") == 0)
        return error_set("safetensors writer: \"__metadata__\" is reserved, not a tensor name");
    if ((int)dtype < 0 || (int)dtype >= ST_NUM_DTYPES)
        return error_set("safetensors writer: tensor \"%s\": unknown dtype %d", name,
                         (int)dtype);
    if (ndim < 0 || ndim > ST_MAX_DIMS)
        return error_set("safetensors writer: tensor \"%s\": ndim %d outside 0..%d", name,
                         ndim, ST_MAX_DIMS);
    for (int i = 0; i < w->count; i++)
        if (strcmp(w->entries[i].name, name) == 0)
            return error_set("safetensors writer: tensor \"%s\" added twice", name);
    struct st_entry e = {0};
    int64_t numel;
    if (st_shape_bytes(dtype, ndim, shape, &numel, &e.nbytes) < 0)
        return error_set("safetensors writer: tensor \"%s\": negative or overflowing shape",
                         name);
    if (VEC_RESERVE(w->entries, w->entries_cap, (size_t)w->count + 1))
        return error_set("safetensors writer: out of memory");
    e.name = strdup(name);
    e.data = malloc(e.nbytes ? e.nbytes : 1);
    if (!e.name || !e.data) {
        free(e.name);
        free(e.data);
        return error_set("safetensors writer: out of memory for tensor \"%s\"", name);
    }
    if (e.nbytes)
        memcpy(e.data, data, e.nbytes);
    e.dtype = dtype;
    e.ndim = ndim;
    for (int d = 0; d < ndim; d++)
        e.shape[d] = shape[d];
    w->entries[w->count++] = e;
    return 0;
}

int st_writer_metadata(struct st_writer *w, const char *key, const char *value)
{
    if (!json_utf8_valid((const unsigned char *)key, strlen(key)) ||
        !json_utf8_valid((const unsigned char *)value, strlen(value)))
        return error_set("safetensors writer: metadata \"%s\" is not UTF-8", key);
    char *v = strdup(value);
    if (!v)
        return error_set("safetensors writer: out of memory");
    for (int i = 0; i < w->meta_count; i++) {
        if (strcmp(w->meta[i].key, key) == 0) {
            free(w->meta[i].value);
            w->meta[i].value = v;
            return 0;
        }
    }
    char *k = strdup(key);
    if (!k || VEC_RESERVE(w->meta, w->meta_cap, (size_t)w->meta_count + 1)) {
        free(k);
        free(v);
        return error_set("safetensors writer: out of memory");
    }
    w->meta[w->meta_count].key = k;
    w->meta[w->meta_count].value = v;
    w->meta_count++;
    return 0;
}


/* the reference's write order: dtype (enum position) descending, then name bytewise */
static int st_compare_entries(const void *a, const void *b)
{
    const struct st_entry *ea = *(const struct st_entry *const *)a;
    const struct st_entry *eb = *(const struct st_entry *const *)b;
    int oa = st_dtypes[ea->dtype].order, ob = st_dtypes[eb->dtype].order;
    if (oa != ob)
        return ob - oa;
    return strcmp(ea->name, eb->name);
}

static int st_compare_meta(const void *a, const void *b)
{
    return strcmp(((const struct st_meta *)a)->key, ((const struct st_meta *)b)->key);
}

/* The padded JSON header for the entries in order; NULL if out of memory. */
static char *st_build_header(struct st_writer *w, struct st_entry **order, size_t *len)
{
    struct json_buf b = {0};
    int first = 1;
    json_buf_put(&b, "{", 1);
    if (w->meta_count) {
        qsort(w->meta, (size_t)w->meta_count, sizeof *w->meta, st_compare_meta);
        json_buf_str(&b, "\"__metadata__\":{");
        for (int i = 0; i < w->meta_count; i++) {
            if (i)
                json_buf_put(&b, ",", 1);
            json_buf_string(&b, w->meta[i].key);
            json_buf_put(&b, ":", 1);
            json_buf_string(&b, w->meta[i].value);
        }
        json_buf_put(&b, "}", 1);
        first = 0;
    }
    size_t offset = 0;
    for (int i = 0; i < w->count; i++) {
        const struct st_entry *e = order[i];
        if (!first)
            json_buf_put(&b, ",", 1);
        first = 0;
        json_buf_string(&b, e->name);
        json_buf_str(&b, ":{\"dtype\":\"");
        json_buf_str(&b, st_dtypes[e->dtype].name);
        json_buf_str(&b, "\",\"shape\":[");
        for (int d = 0; d < e->ndim; d++) {
            if (d)
                json_buf_put(&b, ",", 1);
            json_buf_int(&b, (long long)e->shape[d]);
        }
        json_buf_str(&b, "],\"data_offsets\":[");
        json_buf_int(&b, (long long)offset);
        json_buf_put(&b, ",", 1);
        offset += e->nbytes;
        json_buf_int(&b, (long long)offset);
        json_buf_str(&b, "]}");
    }
    json_buf_put(&b, "}", 1);
    while (b.len % 8)
        json_buf_put(&b, " ", 1);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* the process umask, read without changing it (umask(2) would race other threads) */
static mode_t st_current_umask(void)
{
    mode_t mask = 022;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return mask;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned m;
        if (sscanf(line, "Umask: %o", &m) == 1) {
            mask = (mode_t)m;
            break;
        }
    }
    fclose(f);
    return mask;
}

/* Fault injection for the failure tests only: DDPPROF_FAULT_SAVE_PAUSE=N:MS sleeps MS ms in
 * this process's Nth save, with its temp file whole and not yet renamed over the path, so
 * that a test can kill the process in the middle of a checkpoint write. */
static void st_fault_pause(void)
{
    static int saves;
    const char *v = getenv("DDPPROF_FAULT_SAVE_PAUSE");
    int n, ms;
    saves++;
    if (v && sscanf(v, "%d:%d", &n, &ms) == 2 && n == saves && ms > 0)
        nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

int st_writer_save(struct st_writer *w, const char *path)
{
    struct st_entry **order = malloc((size_t)(w->count ? w->count : 1) * sizeof *order);
    char *dir_copy = strdup(path), *base_copy = strdup(path);
    char *tmp = malloc(strlen(path) + 32);
    char *header = NULL;
    FILE *fp = NULL;
    int fd = -1, tmp_exists = 0, rc = -1;
    if (!order || !dir_copy || !base_copy || !tmp) {
        error_set("%s: out of memory while saving", path);
        goto done;
    }
    for (int i = 0; i < w->count; i++)
        order[i] = &w->entries[i];
    qsort(order, (size_t)w->count, sizeof *order, st_compare_entries);
    size_t header_len;
    header = st_build_header(w, order, &header_len);
    if (!header) {
        error_set("%s: out of memory while building the header", path);
        goto done;
    }
    const char *dir = dirname(dir_copy);
    sprintf(tmp, "%s/.%s.tmp-XXXXXX", dir, basename(base_copy));
    fd = mkstemp(tmp);
    if (fd < 0) {
        error_set("%s: cannot create a temp file in %s: %s; check that the directory exists "
                  "and is writable",
                  path, dir, strerror(errno));
        goto done;
    }
    tmp_exists = 1;
    if (fchmod(fd, 0666 & ~st_current_umask()) != 0 || !(fp = fdopen(fd, "wb"))) {
        error_set("%s: cannot set up temp file %s: %s", path, tmp, strerror(errno));
        goto done;
    }
    fd = -1; /* owned by fp now */
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
    int ok = fwrite(lenbuf, 1, 8, fp) == 8 && fwrite(header, 1, header_len, fp) == header_len;
    for (int i = 0; ok && i < w->count; i++)
        ok = fwrite(order[i]->data, 1, order[i]->nbytes, fp) == order[i]->nbytes;
    if (!ok || fflush(fp) != 0) {
        error_set("%s: write to temp file %s failed: %s (disk full?); the old file is "
                  "untouched",
                  path, tmp, strerror(errno));
        goto done;
    }
    st_fault_pause();
    if (fsync(fileno(fp)) != 0) {
        error_set("%s: fsync of temp file %s failed: %s; the old file is untouched", path, tmp,
                  strerror(errno));
        goto done;
    }
    int closed = fclose(fp);
    fp = NULL;
    if (closed != 0) {
        error_set("%s: closing temp file %s failed: %s; the old file is untouched", path, tmp,
                  strerror(errno));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        error_set("%s: cannot rename %s over it: %s; the old file is untouched", path, tmp,
                  strerror(errno));
        goto done;
    }
    tmp_exists = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0 || fsync(dfd) != 0) {
        error_set("%s: saved, but syncing directory %s failed: %s; the new file may not "
                  "survive a crash",
                  path, dir, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        goto done;
    }
    close(dfd);
    rc = 0;
done:
    if (fp)
        fclose(fp);
    if (fd >= 0)
        close(fd);
    if (tmp_exists)
        unlink(tmp);
    free(header);
    free(tmp);
    free(base_copy);
    free(dir_copy);
    free(order);
    return rc;
}
