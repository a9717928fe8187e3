/* idx.c — IDX (MNIST-format) loader, plain or gzip through zlib; see idx.h. */
#include "data/idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/error.h"
#include "common/vec.h"

/* Limits past which a header is taken as garbage rather than a data set. */
#define IDX_MAX_N 100000000LL          /* samples */
#define IDX_MAX_SIDE 4096LL            /* rows or cols */
#define IDX_MAX_BYTES (8LL << 30)      /* pixel bytes in one file */
#define IDX_READ_CHUNK (4 << 20)       /* bytes per gzread call while growing the buffer */

/* What a magic number is, for the "wrong magic" message. */
static const char *idx_describe_magic(uint32_t magic)
{
    if (magic == IDX_MAGIC_IMAGES)
        return "an IDX images file";
    if (magic == IDX_MAGIC_LABELS)
        return "an IDX labels file";
    if ((magic >> 16) == 0)
        return "an IDX file of another type or rank";
    if ((magic >> 16) == 0x1f8b)
        return "gzip data inside gzip (compressed twice?)";
    return "not an IDX file";
}

/* Why the last gzread failed or came up short: "" if the stream just ended cleanly.
 * zlib prefixes its message with the path; that prefix is dropped (we print the path). */
static const char *idx_gz_problem(gzFile f, const char *path, int *is_gzip_error)
{
    int errnum = Z_OK;
    const char *msg = gzerror(f, &errnum);
    *is_gzip_error = errnum != Z_OK;
    if (errnum == Z_ERRNO)
        return strerror(errno);
    if (errnum == Z_OK)
        return "";
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0)
        msg += n + 2;
    return msg;
}

/* Read exactly len bytes into buf.  Returns the count read (< len at end of data), or -1
 * with error_set on a read or gzip error. */
static long long idx_read_exact(gzFile f, const char *path, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        size_t want = len - got < IDX_READ_CHUNK ? len - got : IDX_READ_CHUNK;
        int r = gzread(f, (char *)buf + got, (unsigned)want);
        if (r < 0) {
            int gz_err;
            const char *why = idx_gz_problem(f, path, &gz_err);
            return error_set("%s: corrupt gzip data (%s): the file is damaged; delete it and "
                             "reinstall the data set (scripts/setup)",
                             path, why);
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (long long)got;
}

/* Say why a read of an IDX section came up short: a cut-off gzip stream or a short file. */
static int idx_fail_short(gzFile f, const char *path, const char *what, size_t expected,
                          size_t got)
{
    int gz_err;
    const char *why = idx_gz_problem(f, path, &gz_err);
    if (gz_err)
        return error_set("%s: truncated gzip stream (%s) in the %s: expected %zu bytes, got "
                         "%zu; the download was cut off: reinstall the data set "
                         "(scripts/setup)",
                         path, why, what, expected, got);
    return error_set("%s: truncated file: the %s needs %zu bytes, got %zu; the file was cut "
                     "off: reinstall the data set (scripts/setup)",
                     path, what, expected, got);
}

/* Load one IDX file with the given magic and ndim (1 or 3): dims[ndim] and the payload
 * (caller frees *data).  Returns 0 or -1 with error_set. */
static int idx_read_file(const char *path, uint32_t magic, int ndim, int64_t dims[3],
                         uint8_t **data)
{
    *data = NULL;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return error_set("%s: cannot open: %s", path, errno ? strerror(errno) : "out of memory");
    gzbuffer(f, 1 << 17);

    uint8_t head[16];
    size_t head_len = 4 + 4 * (size_t)ndim;
    uint8_t *buf = NULL;
    long long got = idx_read_exact(f, path, head, head_len);
    if (got < 0)
        goto fail;
    if (got < 4) {
        idx_fail_short(f, path, "magic number", 4, (size_t)got);
        goto fail;
    }
    uint32_t found = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 |
                     head[3];
    if (found != magic) {
        error_set("%s: wrong magic number: expected 0x%08x (%s), found 0x%08x (%s); pass "
                  "the matching MNIST-format images/labels file",
                  path, magic, idx_describe_magic(magic), found, idx_describe_magic(found));
        goto fail;
    }
    if ((size_t)got < head_len) {
        idx_fail_short(f, path, "header", head_len, (size_t)got);
        goto fail;
    }
    static const char *const dim_names[3] = {"count", "rows", "cols"};
    int64_t total = 1;
    for (int i = 0; i < ndim; i++) {
        const uint8_t *p = head + 4 + 4 * i;
        dims[i] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                            (uint32_t)p[2] << 8 | p[3]);
        int64_t limit = i == 0 ? IDX_MAX_N : IDX_MAX_SIDE;
        if (dims[i] < 1 || dims[i] > limit) {
            error_set("%s: absurd %s %lld in the header (allowed 1..%lld); the file is "
                      "damaged or not an MNIST-format file",
                      path, dim_names[i], (long long)dims[i], (long long)limit);
            goto fail;
        }
        total *= dims[i];
    }
    if (total > IDX_MAX_BYTES) {
        error_set("%s: absurd size: header says %lld bytes of data (limit %lld); the file is "
                  "damaged or not an MNIST-format file",
                  path, (long long)total, (long long)IDX_MAX_BYTES);
        goto fail;
    }

    /* Grow the buffer as data arrives, so a damaged header claiming gigabytes on a short
     * file fails as "truncated" without allocating them first. */
    size_t want = (size_t)total, have = 0, cap = 0;
    while (have < want) {
        /* fill up to end, which doubles from IDX_READ_CHUNK and stops at want */
        size_t end = have ? have * 2 : (size_t)IDX_READ_CHUNK;
        if (end > want)
            end = want;
        if (VEC_RESERVE(buf, cap, end)) {
            error_set("%s: out of memory for %zu bytes of data", path, end);
            goto fail;
        }
        long long r = idx_read_exact(f, path, buf + have, end - have);
        if (r < 0)
            goto fail;
        have += (size_t)r;
        if (have < end)
            break;
    }
    if (have < want) {
        idx_fail_short(f, path, "data", want, have);
        goto fail;
    }
    /* One more byte must not exist; reading to the end also makes zlib check the gzip
     * trailer (CRC and length). */
    uint8_t extra;
    got = idx_read_exact(f, path, &extra, 1);
    if (got < 0)
        goto fail;
    if (got > 0) {
        error_set("%s: trailing bytes after the %zu bytes of data the header announces; the "
                  "header does not match the file: reinstall the data set",
                  path, head_len + want);
        goto fail;
    }
    int gz_err;
    const char *why = idx_gz_problem(f, path, &gz_err);
    if (gz_err) {
        error_set("%s: truncated gzip stream (%s) after the data: the download was cut off: "
                  "reinstall the data set (scripts/setup)",
                  path, why);
        goto fail;
    }
    gzclose(f);
    *data = buf;
    return 0;
fail:
    free(buf);
    gzclose(f);
    return -1;
}

int idx_load_files(const char *images_path, const char *labels_path, struct idx_dataset *out)
{
    memset(out, 0, sizeof *out);
    int64_t idims[3] = {0}, ldims[3] = {0};
    uint8_t *images = NULL, *labels = NULL;
    if (idx_read_file(images_path, IDX_MAGIC_IMAGES, 3, idims, &images) < 0)
        return -1;
    if (idx_read_file(labels_path, IDX_MAGIC_LABELS, 1, ldims, &labels) < 0) {
        free(images);
        return -1;
    }
    if (idims[0] != ldims[0]) {
        free(images);
        free(labels);
        return error_set("%s: count mismatch: %lld labels but %s has %lld images; the two "
                         "files are not a pair: use the labels file of the same split",
                         labels_path, (long long)ldims[0], images_path, (long long)idims[0]);
    }
    int max_label = 0;
    for (int64_t i = 0; i < ldims[0]; i++)
        if (labels[i] > max_label)
            max_label = labels[i];
    out->n = (int)idims[0];
    out->rows = (int)idims[1];
    out->cols = (int)idims[2];
    out->num_classes = max_label + 1;
    out->images = images;
    out->labels = labels;
    return 0;
}

/* dir/name if it exists, else dir/name.gz if that exists; 0, or -1 with error_set. */
static int idx_find_file(const char *dir, const char *name, char *path, size_t size)
{
    struct stat st;
    snprintf(path, size, "%s/%s", dir, name);
    if (stat(path, &st) == 0)
        return 0;
    snprintf(path, size, "%s/%s.gz", dir, name);
    if (stat(path, &st) == 0)
        return 0;
    return error_set("%s: missing file: neither %s/%s nor %s/%s.gz exists; put the "
                     "MNIST-format files there (Fashion-MNIST: scripts/setup installs "
                     "/usr/share/datasets/fashion-mnist)",
                     dir, dir, name, dir, name);
}

int idx_load_split(const char *dir, int train, struct idx_dataset *out)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(dir, &st) != 0)
        return error_set("%s: missing data directory (%s); install the data set "
                         "(scripts/setup) or pass the directory that holds the IDX files",
                         dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return error_set("%s: not a directory; pass the directory that holds the IDX files",
                         dir);
    const char *prefix = train ? "train" : "t10k";
    char name[64], images[4096], labels[4096];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    if (idx_find_file(dir, name, images, sizeof images) < 0)
        return -1;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    if (idx_find_file(dir, name, labels, sizeof labels) < 0)
        return -1;
    return idx_load_files(images, labels, out);
}

void idx_free(struct idx_dataset *d)
{
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

int idx_to_float(const struct idx_dataset *d, const int64_t *indices, int count, float mean,
                 float std, float *out_nchw, int32_t *out_labels)
{
    if (!(std > 0.0f))
        return error_set("idx_to_float: std = %g; it must be > 0 (1 for no normalisation)",
                         (double)std);
    /* every pixel value maps through ToTensor's x / 255 then Normalize's (x - mean) / std,
     * both in float32 */
    float table[256];
    for (int v = 0; v < 256; v++)
        table[v] = ((float)v / 255.0f - mean) / std;
    size_t plane = (size_t)d->rows * (size_t)d->cols;
    for (int k = 0; k < count; k++) {
        int64_t i = indices ? indices[k] : k;
        if (i < 0 || i >= d->n)
            return error_set("idx_to_float: sample index %lld at position %d is outside the "
                             "data set of %d samples",
                             (long long)i, k, d->n);
        const uint8_t *src = d->images + (size_t)i * plane;
        float *dst = out_nchw + (size_t)k * plane;
        for (size_t p = 0; p < plane; p++)
            dst[p] = table[src[p]];
        if (out_labels)
            out_labels[k] = d->labels[i];
    }
    return 0;
}
