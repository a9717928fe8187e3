/* safetensors_read.c — the safetensors reader: the whole file in one aligned block, its
 * header parsed strictly (json.h) and checked against the data section (see
 * safetensors.h). */
#include "io/safetensors.h"

#include "common/error.h"
#include "common/half.h"
#include "common/printable.h"
#include "common/vec.h"
#include "io/json.h"
#include "io/safetensors_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ST_MAX_HEADER (100u * 1000u * 1000u) /* the reference implementation's limit */
#define ST_DATA_ALIGN 64                      /* alignment of the data section in memory */

struct st_file {
    char *path;
    unsigned char *raw;      /* malloc'd block holding the file, shifted for alignment */
    struct st_tensor *tensors;
    int count;
    size_t tensors_cap;
    struct st_meta *meta;
    int meta_count;
    size_t meta_cap;
    void **copies;           /* aligned copies of tensors whose offsets were misaligned */
    int copy_count;
    size_t copies_cap;
};

static int st_add_meta(struct st_file *st, char *key, char *value)
{
    if (VEC_RESERVE(st->meta, st->meta_cap, (size_t)st->meta_count + 1))
        return -1;
    st->meta[st->meta_count].key = key;
    st->meta[st->meta_count].value = value;
    st->meta_count++;
    return 0;
}

/* "__metadata__": {"key": "value", ...} */
static int st_parse_metadata(struct json_parser *ps, struct st_file *st)
{
    if (json_expect(ps, '{', "__metadata__ must be an object of strings") < 0)
        return -1;
    if (json_accept(ps, '}'))
        return 0;
    do {
        char *key = json_read_string(ps);
        if (!key)
            return -1;
        if (st_metadata_get(st, key)) {
            free(key);
            return json_fail(ps, "duplicate key in __metadata__");
        }
        if (json_expect(ps, ':', "expected ':' after a __metadata__ key") < 0) {
            free(key);
            return -1;
        }
        char *value = json_read_string(ps);
        if (!value) {
            free(key);
            return -1;
        }
        if (st_add_meta(st, key, value) < 0) {
            free(key);
            free(value);
            return json_fail(ps, "out of memory");
        }
    } while (json_accept(ps, ','));
    return json_expect(ps, '}', "expected ',' or '}' in __metadata__");
}

/* {"dtype": "...", "shape": [...], "data_offsets": [b, e]} for tensor t; offsets[2] out */
static int st_parse_tensor(struct json_parser *ps, struct st_tensor *t, int64_t offsets[2])
{
    int have_dtype = 0, have_shape = 0, have_offsets = 0;
    if (json_expect(ps, '{', "a tensor entry must be an object") < 0)
        return -1;
    if (!json_accept(ps, '}')) {
        do {
            char *key = json_read_string(ps);
            if (!key)
                return -1;
            if (json_expect(ps, ':', "expected ':' after a key") < 0) {
                free(key);
                return -1;
            }
            int rc = 0, n;
            if (strcmp(key, "dtype") == 0 && !have_dtype) {
                size_t at = (json_skip_ws(ps), ps->pos);
                char *name = json_read_string(ps);
                if (!name) {
                    rc = -1;
                } else {
                    int d = st_dtype_parse(name);
                    if (d < 0) {
                        char msg[TEXT_PRINTABLE_MAX + 80], shown[TEXT_PRINTABLE_MAX];
                        snprintf(msg, sizeof msg,
                                 "unsupported dtype \"%s\" (supported: F32 F16 BF16 I64 I32 "
                                 "U8)",
                                 text_printable(name, 40, shown, sizeof shown));
                        ps->pos = at;
                        rc = json_fail(ps, msg);
                    }
                    else
                        t->dtype = (enum st_dtype)d;
                    free(name);
                }
                have_dtype = 1;
            } else if (strcmp(key, "shape") == 0 && !have_shape) {
                rc = json_read_uint_array(ps, t->shape, ST_MAX_DIMS, &t->ndim,
                                        "shape must be an array of integers");
                have_shape = 1;
            } else if (strcmp(key, "data_offsets") == 0 && !have_offsets) {
                rc = json_read_uint_array(ps, offsets, 2, &n,
                                        "data_offsets must be an array of 2 integers");
                if (rc == 0 && n != 2)
                    rc = json_fail(ps, "data_offsets must have exactly 2 entries");
                have_offsets = 1;
            } else {
                char msg[TEXT_PRINTABLE_MAX + 80], shown[TEXT_PRINTABLE_MAX];
                snprintf(msg, sizeof msg, "unexpected or repeated key \"%s\" in a tensor entry",
                         text_printable(key, 60, shown, sizeof shown));
                rc = json_fail(ps, msg);
            }
            free(key);
            if (rc < 0)
                return -1;
        } while (json_accept(ps, ','));
        if (json_expect(ps, '}', "expected ',' or '}' in a tensor entry") < 0)
            return -1;
    }
    if (!have_dtype || !have_shape || !have_offsets)
        return json_fail(ps, !have_dtype   ? "tensor entry has no \"dtype\""
                                 : !have_shape ? "tensor entry has no \"shape\""
                                               : "tensor entry has no \"data_offsets\"");
    return 0;
}

static int st_find_index(const struct st_file *st, const char *name)
{
    for (int i = 0; i < st->count; i++)
        if (strcmp(st->tensors[i].name, name) == 0)
            return i;
    return -1;
}

/* Parse the whole header into st; begin/end offsets of tensor i go to (*offsets)[2i..]
 * (a growable array, capacity *offsets_cap: the caller frees it, also after a failure). */
static int st_parse_header(struct json_parser *ps, struct st_file *st, int64_t **offsets,
                           size_t *offsets_cap)
{
    int have_meta = 0;
    if (json_expect(ps, '{', "the header must be a JSON object starting with '{'") < 0)
        return -1;
    if (!json_accept(ps, '}')) {
        do {
            json_skip_ws(ps);
            size_t key_at = ps->pos;
            char *key = json_read_string(ps);
            if (!key)
                return -1;
            if (json_expect(ps, ':', "expected ':' after a key") < 0) {
                free(key);
                return -1;
            }
            if (strcmp(key, "__metadata__") == 0) {
                free(key);
                if (have_meta) {
                    ps->pos = key_at;
                    return json_fail(ps, "__metadata__ appears twice");
                }
                have_meta = 1;
                if (st_parse_metadata(ps, st) < 0)
                    return -1;
                continue;
            }
            if (st_find_index(st, key) >= 0) {
                ps->pos = key_at;
                ps->item = key;
                json_fail(ps, "tensor name appears twice");
                free(key);
                return -1;
            }
            const size_t count = (size_t)st->count + 1;
            if (VEC_RESERVE(st->tensors, st->tensors_cap, count) ||
                VEC_RESERVE(*offsets, *offsets_cap, 2 * count)) {
                free(key);
                return json_fail(ps, "out of memory");
            }
            struct st_tensor *t = &st->tensors[st->count];
            memset(t, 0, sizeof *t);
            t->name = key;
            st->count++; /* owned by st from here on, so st_close frees the name */
            ps->item = key;
            if (st_parse_tensor(ps, t, *offsets + 2 * (st->count - 1)) < 0)
                return -1;
            ps->item = NULL;
        } while (json_accept(ps, ','));
        if (json_expect(ps, '}', "expected ',' or '}' after a header entry") < 0)
            return -1;
    }
    json_skip_ws(ps);
    if (ps->pos != ps->len)
        return json_fail(ps, "unexpected bytes after the header object");
    return 0;
}

/* order[0..n) sorted by (begin, end) offset: data order.  Tensor counts are small
 * (hundreds), so insertion sort is plenty. */
static void st_sort_by_offset(int *order, int n, const int64_t *offsets)
{
    for (int i = 1; i < n; i++) {
        int v = order[i], j = i;
        const int64_t *ov = offsets + 2 * v;
        while (j > 0) {
            const int64_t *oj = offsets + 2 * order[j - 1];
            if (oj[0] < ov[0] || (oj[0] == ov[0] && oj[1] <= ov[1]))
                break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
}

/* Check sizes and offsets against the data section, attach data pointers and put the
 * tensors in data order. */
static int st_validate(struct st_file *st, const int64_t *offsets, unsigned char *data,
                       size_t data_len)
{
    for (int i = 0; i < st->count; i++) {
        struct st_tensor *t = &st->tensors[i];
        int64_t b = offsets[2 * i], e = offsets[2 * i + 1];
        char name[TEXT_PRINTABLE_MAX];
        text_printable(t->name, 80, name, sizeof name);
        if (st_shape_bytes(t->dtype, t->ndim, t->shape, &t->numel, &t->nbytes) < 0)
            return error_set("%s: tensor \"%s\": shape overflows (more than 2^62 bytes)",
                             st->path, name);
        if (e < b)
            return error_set("%s: tensor \"%s\": data_offsets [%lld, %lld] end before they "
                             "begin",
                             st->path, name, (long long)b, (long long)e);
        if ((uint64_t)e > data_len)
            return error_set("%s: tensor \"%s\": data_offsets [%lld, %lld] out of range: the "
                             "file has %zu bytes of data; the file is truncated or damaged",
                             st->path, name, (long long)b, (long long)e, data_len);
        if ((uint64_t)(e - b) != t->nbytes) {
            char shape[ST_MAX_DIMS * 22 + 4];
            size_t k = 0;
            shape[k++] = '[';
            for (int d = 0; d < t->ndim; d++)
                k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", d ? ", " : "",
                                      (long long)t->shape[d]);
            snprintf(shape + k, sizeof shape - k, "]");
            return error_set("%s: tensor \"%s\": data_offsets [%lld, %lld] hold %lld bytes "
                             "but dtype %s and shape %s need %zu",
                             st->path, name, (long long)b, (long long)e,
                             (long long)(e - b), st_dtypes[t->dtype].name, shape, t->nbytes);
        }
    }
    int *order = malloc((size_t)(st->count ? st->count : 1) * sizeof *order);
    struct st_tensor *sorted = malloc((size_t)(st->count ? st->count : 1) * sizeof *sorted);
    if (!order || !sorted) {
        free(order);
        free(sorted);
        return error_set("%s: out of memory", st->path);
    }
    for (int i = 0; i < st->count; i++)
        order[i] = i;
    st_sort_by_offset(order, st->count, offsets);
    int64_t expect = 0;
    const char *prev = NULL;
    for (int k = 0; k < st->count; k++) {
        const struct st_tensor *t = &st->tensors[order[k]];
        int64_t b = offsets[2 * order[k]], e = offsets[2 * order[k] + 1];
        if (b != expect) {
            int rc;
            char name[TEXT_PRINTABLE_MAX], before[TEXT_PRINTABLE_MAX];
            text_printable(t->name, 80, name, sizeof name);
            text_printable(prev ? prev : "", 80, before, sizeof before);
            if (b < expect)
                rc = error_set("%s: tensor \"%s\": data_offsets [%lld, %lld] overlap tensor "
                               "\"%s\" (which ends at %lld)",
                               st->path, name, (long long)b, (long long)e, before,
                               (long long)expect);
            else
                rc = error_set("%s: tensor \"%s\": data_offsets [%lld, %lld] leave a gap "
                               "after byte %lld of the data",
                               st->path, name, (long long)b, (long long)e,
                               (long long)expect);
            free(order);
            free(sorted);
            return rc;
        }
        expect = e;
        prev = t->name;
    }
    if ((uint64_t)expect != data_len) {
        free(order);
        free(sorted);
        return error_set("%s: the tensors cover %lld bytes of data but the file has %zu after "
                         "the header; the file is damaged",
                         st->path, (long long)expect, data_len);
    }
    for (int k = 0; k < st->count; k++) {
        sorted[k] = st->tensors[order[k]];
        sorted[k].data = data + offsets[2 * order[k]];
    }
    free(order);
    free(st->tensors);
    st->tensors = sorted;
    st->tensors_cap = (size_t)st->count;

    /* Element-aligned data for every tensor, copying those whose offset is not. */
    for (int k = 0; k < st->count; k++) {
        struct st_tensor *t = &st->tensors[k];
        if ((uintptr_t)t->data % st_dtypes[t->dtype].size == 0)
            continue;
        if (VEC_RESERVE(st->copies, st->copies_cap, (size_t)st->copy_count + 1))
            return error_set("%s: out of memory", st->path);
        void *copy = malloc(t->nbytes);
        if (!copy)
            return error_set("%s: out of memory for a %zu-byte tensor", st->path, t->nbytes);
        memcpy(copy, t->data, t->nbytes);
        st->copies[st->copy_count++] = copy;
        t->data = copy;
    }
    return 0;
}

static int st_read_all(FILE *f, void *buf, size_t len)
{
    return fread(buf, 1, len, f) == len ? 0 : -1;
}

/* A new, empty handle for a file called path (messages name it); NULL + error_set. */
static struct st_file *st_new(const char *path)
{
    struct st_file *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        error_set("%s: out of memory", path);
        return NULL;
    }
    return st;
}

/* The header length n of a size-byte file whose first 8 bytes are lenbuf: 0, or -1 with
 * error_set when the file is too small for it or it passes the reference limit. */
static int st_header_len(const char *path, const unsigned char *lenbuf, size_t size,
                         uint64_t *n)
{
    *n = 0;
    for (int i = 7; i >= 0; i--)
        *n = *n << 8 | lenbuf[i];
    if (*n > size - 8)
        return error_set("%s: header length %llu is larger than the file (%zu bytes); the file "
                         "is truncated or not safetensors",
                         path, (unsigned long long)*n, size);
    if (*n > ST_MAX_HEADER)
        return error_set("%s: header length %llu exceeds the 100 MB limit; not a safetensors "
                         "file",
                         path, (unsigned long long)*n);
    return 0;
}

/* st->raw for a size-byte file with an n-byte header, placed so that its data section
 * starts ST_DATA_ALIGN-aligned; returns where the file's first byte goes, or NULL +
 * error_set. */
static unsigned char *st_alloc_raw(struct st_file *st, size_t size, uint64_t n)
{
    st->raw = malloc(size + ST_DATA_ALIGN);
    if (!st->raw) {
        error_set("%s: out of memory for %zu bytes", st->path, size);
        return NULL;
    }
    size_t shift = (ST_DATA_ALIGN - ((uintptr_t)(st->raw + 8 + n) % ST_DATA_ALIGN)) %
                   ST_DATA_ALIGN;
    return st->raw + shift;
}

/* Parse and check the whole file at file[0..size) (inside st->raw, header length n). */
static int st_parse_file(struct st_file *st, unsigned char *file, size_t size, uint64_t n)
{
    if (!json_utf8_valid(file + 8, (size_t)n))
        return error_set("%s: bad safetensors header: not valid UTF-8", st->path);
    struct json_parser ps = {.path = st->path, .doc = "safetensors header",
                             .s = (const char *)file + 8, .len = (size_t)n,
                             .item_kind = "tensor"};
    int64_t *offsets = NULL;
    size_t offsets_cap = 0;
    int rc = st_parse_header(&ps, st, &offsets, &offsets_cap);
    if (rc == 0)
        rc = st_validate(st, offsets, file + 8 + n, size - 8 - (size_t)n);
    free(offsets);
    return rc;
}

static const char st_too_small[] =
    "%s: %zu bytes is too small for a safetensors file (8-byte header length first); the "
    "file is truncated or not safetensors";

struct st_file *st_open(const char *path)
{
    struct st_file *st = st_new(path);
    if (!st)
        return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        error_set("%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        error_set("%s: not a regular file", path);
        goto fail;
    }
    size_t size = (size_t)sb.st_size;
    unsigned char lenbuf[8];
    uint64_t n;
    if (size < 8) {
        error_set(st_too_small, path, size);
        goto fail;
    }
    if (st_read_all(f, lenbuf, 8) < 0) {
        error_set("%s: read error: %s", path, strerror(errno));
        goto fail;
    }
    if (st_header_len(path, lenbuf, size, &n) < 0)
        goto fail;
    unsigned char *file = st_alloc_raw(st, size, n);
    if (!file)
        goto fail;
    memcpy(file, lenbuf, 8);
    if (st_read_all(f, file + 8, size - 8) < 0) {
        error_set("%s: read error or file shrank while reading", path);
        goto fail;
    }
    fclose(f);
    f = NULL;
    if (st_parse_file(st, file, size, n) < 0)
        goto fail;
    return st;
fail:
    if (f)
        fclose(f);
    st_close(st);
    return NULL;
}

struct st_file *st_parse(const void *buf, size_t len, const char *name)
{
    struct st_file *st = st_new(name);
    if (!st)
        return NULL;
    uint64_t n;
    unsigned char *file;
    if (len < 8) {
        error_set(st_too_small, name, len);
    } else if (st_header_len(name, buf, len, &n) == 0 && (file = st_alloc_raw(st, len, n))) {
        memcpy(file, buf, len);
        if (st_parse_file(st, file, len, n) == 0)
            return st;
    }
    st_close(st);
    return NULL;
}

void st_close(struct st_file *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->count; i++)
        free((char *)st->tensors[i].name);
    free(st->tensors);
    for (int i = 0; i < st->meta_count; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->meta);
    for (int i = 0; i < st->copy_count; i++)
        free(st->copies[i]);
    free(st->copies);
    free(st->raw);
    free(st->path);
    free(st);
}

int st_count(const struct st_file *st) { return st->count; }

const struct st_tensor *st_get(const struct st_file *st, int i)
{
    return i >= 0 && i < st->count ? &st->tensors[i] : NULL;
}

const struct st_tensor *st_find(const struct st_file *st, const char *name)
{
    int i = st_find_index(st, name);
    if (i < 0) {
        char shown[TEXT_PRINTABLE_MAX];
        error_set("%s: no tensor named \"%s\"", st->path,
                  text_printable(name, 80, shown, sizeof shown));
        return NULL;
    }
    return &st->tensors[i];
}

const char *st_metadata_get(const struct st_file *st, const char *key)
{
    for (int i = 0; i < st->meta_count; i++)
        if (strcmp(st->meta[i].key, key) == 0)
            return st->meta[i].value;
    return NULL;
}

/* F16 and BF16 are widened exactly by common/half.h */
int st_read_f32(const struct st_file *st, const char *name, int ndim, const int64_t *shape,
                float *out)
{
    const struct st_tensor *t = st_find(st, name);
    if (!t)
        return -1;
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        char want[ST_MAX_DIMS * 22 + 4], have[ST_MAX_DIMS * 22 + 4];
        const int64_t *shapes[2] = {shape, t->shape};
        int ndims[2] = {ndim, t->ndim};
        char *bufs[2] = {want, have};
        for (int s = 0; s < 2; s++) {
            size_t k = 0;
            bufs[s][k++] = '[';
            for (int d = 0; d < ndims[s] && d < ST_MAX_DIMS; d++)
                k += (size_t)snprintf(bufs[s] + k, sizeof want - k, "%s%lld", d ? ", " : "",
                                      (long long)shapes[s][d]);
            snprintf(bufs[s] + k, sizeof want - k, "]");
        }
        return error_set("%s: tensor \"%s\" has shape %s, expected %s; the file belongs to "
                         "another model",
                         st->path, name, have, want);
    }
    const uint16_t *h = t->data;
    switch (t->dtype) {
    case ST_F32:
        memcpy(out, t->data, t->nbytes);
        return 0;
    case ST_F16:
        for (int64_t i = 0; i < t->numel; i++)
            out[i] = half_f16_to_f32(h[i]);
        return 0;
    case ST_BF16:
        for (int64_t i = 0; i < t->numel; i++)
            out[i] = half_bf16_to_f32(h[i]);
        return 0;
    default:
        return error_set("%s: tensor \"%s\" has dtype %s, expected a float (F32, F16 or BF16)",
                         st->path, name, st_dtypes[t->dtype].name);
    }
}
