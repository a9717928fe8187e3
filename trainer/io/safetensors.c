/* safetensors.c — safetensors reader (with its own strict JSON header parser) and atomic
 * writer; see safetensors.h. */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c reads and writes tensor bytes as they are in memory: little-endian only"
#endif

#define ST_MAX_HEADER (100u * 1000u * 1000u) /* the reference implementation's limit */
#define ST_DATA_ALIGN 64                      /* alignment of the data section in memory */

/* ------------------------------------------------------------------ dtypes */

struct st_dtype_info {
    const char *name;
    size_t size;
    int order; /* position in the reference Dtype enum: the writer sorts by it, descending */
};

static const struct st_dtype_info st_dtypes[] = {
    [ST_F32] = {"F32", 4, 11}, [ST_F16] = {"F16", 2, 7}, [ST_BF16] = {"BF16", 2, 8},
    [ST_I64] = {"I64", 8, 13}, [ST_I32] = {"I32", 4, 9}, [ST_U8] = {"U8", 1, 1},
};
#define ST_NUM_DTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

size_t st_dtype_size(enum st_dtype dtype) { return st_dtypes[dtype].size; }

const char *st_dtype_name(enum st_dtype dtype) { return st_dtypes[dtype].name; }

static int st_dtype_parse(const char *s)
{
    for (int i = 0; i < ST_NUM_DTYPES; i++)
        if (strcmp(s, st_dtypes[i].name) == 0)
            return i;
    return -1;
}

/* numel and nbytes of a shape, or -1 on overflow (beyond 2^62 bytes) */
static int st_shape_bytes(enum st_dtype dtype, int ndim, const int64_t *shape, int64_t *numel,
                          size_t *nbytes)
{
    const int64_t limit = (int64_t)1 << 62;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] != 0 && n > limit / shape[i])
            return -1;
        n *= shape[i];
    }
    if (n > limit / (int64_t)st_dtypes[dtype].size)
        return -1;
    *numel = n;
    *nbytes = (size_t)n * st_dtypes[dtype].size;
    return 0;
}

/* 1 if s[0..len) is valid UTF-8 (no overlongs, surrogates or values past U+10FFFF) */
static int st_utf8_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t extra;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            extra = 1, min = 0x80, c &= 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            extra = 2, min = 0x800, c &= 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            extra = 3, min = 0x10000, c &= 0x07;
        } else {
            return 0;
        }
        if (len - i <= extra)
            return 0;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            c = c << 6 | (s[i + k] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            return 0;
        i += extra + 1;
    }
    return 1;
}

/* ------------------------------------------------------------------ reader */

struct st_meta {
    char *key, *value;
};

struct st_file {
    char *path;
    unsigned char *raw;      /* malloc'd block holding the file, shifted for alignment */
    struct st_tensor *tensors;
    int count, cap;
    struct st_meta *meta;
    int meta_count, meta_cap;
    void **copies;           /* aligned copies of tensors whose offsets were misaligned */
    int copy_count;
};

/* The JSON header parser: a cursor over header[0..len) plus what is needed for messages. */
struct st_parser {
    const char *path;
    const char *s;
    size_t len, pos;
    const char *tensor; /* the tensor being parsed, for messages; NULL outside one */
};

static int st_parse_fail(struct st_parser *ps, const char *what)
{
    if (ps->tensor)
        return error_set("%s: bad safetensors header at byte %zu (tensor \"%s\"): %s",
                         ps->path, ps->pos, ps->tensor, what);
    return error_set("%s: bad safetensors header at byte %zu: %s", ps->path, ps->pos, what);
}

static void st_skip_ws(struct st_parser *ps)
{
    while (ps->pos < ps->len && (ps->s[ps->pos] == ' ' || ps->s[ps->pos] == '\t' ||
                                 ps->s[ps->pos] == '\n' || ps->s[ps->pos] == '\r'))
        ps->pos++;
}

/* skip whitespace, then consume c; -1 with error if the next byte is something else */
static int st_expect(struct st_parser *ps, char c, const char *what)
{
    st_skip_ws(ps);
    if (ps->pos >= ps->len || ps->s[ps->pos] != c)
        return st_parse_fail(ps, what);
    ps->pos++;
    return 0;
}

/* skip whitespace; 1 and consume c if it is next, else 0 */
static int st_accept(struct st_parser *ps, char c)
{
    st_skip_ws(ps);
    if (ps->pos < ps->len && ps->s[ps->pos] == c) {
        ps->pos++;
        return 1;
    }
    return 0;
}

static int st_hex4(struct st_parser *ps, unsigned *out)
{
    unsigned v = 0;
    if (ps->len - ps->pos < 4)
        return st_parse_fail(ps, "unterminated \\u escape");
    for (int i = 0; i < 4; i++) {
        char c = ps->s[ps->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return st_parse_fail(ps, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

/* A JSON string (after whitespace) into a new NUL-terminated buffer (caller frees). */
static char *st_parse_string(struct st_parser *ps)
{
    if (st_expect(ps, '"', "expected a string") < 0)
        return NULL;
    /* the decoded string is never longer than its encoding */
    size_t start = ps->pos, n = 0;
    while (ps->pos < ps->len && ps->s[ps->pos] != '"')
        ps->pos += ps->s[ps->pos] == '\\' ? 2 : 1;
    if (ps->pos >= ps->len) {
        ps->pos = start;
        st_parse_fail(ps, "unterminated string");
        return NULL;
    }
    size_t end = ps->pos;
    char *out = malloc(end - start + 1);
    if (!out) {
        st_parse_fail(ps, "out of memory");
        return NULL;
    }
    ps->pos = start;
    while (ps->pos < end) {
        unsigned char c = (unsigned char)ps->s[ps->pos++];
        if (c < 0x20) {
            ps->pos--;
            st_parse_fail(ps, "control character inside a string");
            goto fail;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        char e = ps->s[ps->pos++];
        unsigned cp;
        switch (e) {
        case '"': out[n++] = '"'; continue;
        case '\\': out[n++] = '\\'; continue;
        case '/': out[n++] = '/'; continue;
        case 'b': out[n++] = '\b'; continue;
        case 'f': out[n++] = '\f'; continue;
        case 'n': out[n++] = '\n'; continue;
        case 'r': out[n++] = '\r'; continue;
        case 't': out[n++] = '\t'; continue;
        case 'u':
            if (st_hex4(ps, &cp) < 0)
                goto fail;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned lo;
                if (ps->pos + 2 > end || ps->s[ps->pos] != '\\' || ps->s[ps->pos + 1] != 'u') {
                    st_parse_fail(ps, "unpaired UTF-16 surrogate in \\u escape");
                    goto fail;
                }
                ps->pos += 2;
                if (st_hex4(ps, &lo) < 0)
                    goto fail;
                if (lo < 0xdc00 || lo > 0xdfff) {
                    st_parse_fail(ps, "unpaired UTF-16 surrogate in \\u escape");
                    goto fail;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                st_parse_fail(ps, "unpaired UTF-16 surrogate in \\u escape");
                goto fail;
            } else if (cp == 0) {
                st_parse_fail(ps, "\\u0000 (NUL) inside a string is not supported");
                goto fail;
            }
            /* a \uXXXX (or pair) is 6 or 12 bytes of input and at most 4 of UTF-8 */
            if (cp < 0x80) {
                out[n++] = (char)cp;
            } else if (cp < 0x800) {
                out[n++] = (char)(0xc0 | cp >> 6);
                out[n++] = (char)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                out[n++] = (char)(0xe0 | cp >> 12);
                out[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[n++] = (char)(0x80 | (cp & 0x3f));
            } else {
                out[n++] = (char)(0xf0 | cp >> 18);
                out[n++] = (char)(0x80 | ((cp >> 12) & 0x3f));
                out[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[n++] = (char)(0x80 | (cp & 0x3f));
            }
            continue;
        default:
            ps->pos -= 2;
            st_parse_fail(ps, "unknown escape in string");
            goto fail;
        }
    }
    out[n] = '\0';
    ps->pos = end + 1;
    return out;
fail:
    free(out);
    return NULL;
}

/* A non-negative JSON integer (after whitespace) that fits in int64. */
static int st_parse_uint(struct st_parser *ps, int64_t *out)
{
    st_skip_ws(ps);
    size_t start = ps->pos;
    if (ps->pos < ps->len && ps->s[ps->pos] == '-')
        return st_parse_fail(ps, "negative number where a size or offset is expected");
    uint64_t v = 0;
    while (ps->pos < ps->len && ps->s[ps->pos] >= '0' && ps->s[ps->pos] <= '9') {
        unsigned d = (unsigned)(ps->s[ps->pos] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return st_parse_fail(ps, "integer too large");
        v = v * 10 + d;
        ps->pos++;
    }
    if (ps->pos == start)
        return st_parse_fail(ps, "expected a non-negative integer");
    if (ps->s[start] == '0' && ps->pos - start > 1) {
        ps->pos = start;
        return st_parse_fail(ps, "integer with a leading zero");
    }
    if (ps->pos < ps->len &&
        (ps->s[ps->pos] == '.' || ps->s[ps->pos] == 'e' || ps->s[ps->pos] == 'E'))
        return st_parse_fail(ps, "expected an integer, found a fraction or exponent");
    *out = (int64_t)v;
    return 0;
}

/* "[" int ("," int)* "]" or "[]" into out[0..*n), at most max */
static int st_parse_int_array(struct st_parser *ps, int64_t *out, int max, int *n,
                              const char *what)
{
    *n = 0;
    if (st_expect(ps, '[', what) < 0)
        return -1;
    if (st_accept(ps, ']'))
        return 0;
    do {
        int64_t v = 0;
        if (*n >= max) {
            char msg[128];
            snprintf(msg, sizeof msg, "more than %d entries in an array", max);
            return st_parse_fail(ps, msg);
        }
        if (st_parse_uint(ps, &v) < 0)
            return -1;
        out[(*n)++] = v;
    } while (st_accept(ps, ','));
    return st_expect(ps, ']', "expected ',' or ']' in an array");
}

static int st_add_meta(struct st_file *st, char *key, char *value)
{
    if (st->meta_count == st->meta_cap) {
        int cap = st->meta_cap ? 2 * st->meta_cap : 8;
        struct st_meta *m = realloc(st->meta, (size_t)cap * sizeof *m);
        if (!m)
            return -1;
        st->meta = m;
        st->meta_cap = cap;
    }
    st->meta[st->meta_count].key = key;
    st->meta[st->meta_count].value = value;
    st->meta_count++;
    return 0;
}

/* "__metadata__": {"key": "value", ...} */
static int st_parse_metadata(struct st_parser *ps, struct st_file *st)
{
    if (st_expect(ps, '{', "__metadata__ must be an object of strings") < 0)
        return -1;
    if (st_accept(ps, '}'))
        return 0;
    do {
        char *key = st_parse_string(ps);
        if (!key)
            return -1;
        if (st_metadata_get(st, key)) {
            free(key);
            return st_parse_fail(ps, "duplicate key in __metadata__");
        }
        if (st_expect(ps, ':', "expected ':' after a __metadata__ key") < 0) {
            free(key);
            return -1;
        }
        char *value = st_parse_string(ps);
        if (!value) {
            free(key);
            return -1;
        }
        if (st_add_meta(st, key, value) < 0) {
            free(key);
            free(value);
            return st_parse_fail(ps, "out of memory");
        }
    } while (st_accept(ps, ','));
    return st_expect(ps, '}', "expected ',' or '}' in __metadata__");
}

/* {"dtype": "...", "shape": [...], "data_offsets": [b, e]} for tensor t; offsets[2] out */
static int st_parse_tensor(struct st_parser *ps, struct st_tensor *t, int64_t offsets[2])
{
    int have_dtype = 0, have_shape = 0, have_offsets = 0;
    if (st_expect(ps, '{', "a tensor entry must be an object") < 0)
        return -1;
    if (!st_accept(ps, '}')) {
        do {
            char *key = st_parse_string(ps);
            if (!key)
                return -1;
            if (st_expect(ps, ':', "expected ':' after a key") < 0) {
                free(key);
                return -1;
            }
            int rc = 0, n;
            if (strcmp(key, "dtype") == 0 && !have_dtype) {
                size_t at = (st_skip_ws(ps), ps->pos);
                char *name = st_parse_string(ps);
                if (!name) {
                    rc = -1;
                } else {
                    int d = st_dtype_parse(name);
                    if (d < 0) {
                        char msg[160];
                        snprintf(msg, sizeof msg,
                                 "unsupported dtype \"%.40s\" (supported: F32 F16 BF16 I64 I32 "
                                 "U8)",
                                 name);
                        ps->pos = at;
                        rc = st_parse_fail(ps, msg);
                    }
                    else
                        t->dtype = (enum st_dtype)d;
                    free(name);
                }
                have_dtype = 1;
            } else if (strcmp(key, "shape") == 0 && !have_shape) {
                rc = st_parse_int_array(ps, t->shape, ST_MAX_DIMS, &t->ndim,
                                        "shape must be an array of integers");
                have_shape = 1;
            } else if (strcmp(key, "data_offsets") == 0 && !have_offsets) {
                rc = st_parse_int_array(ps, offsets, 2, &n,
                                        "data_offsets must be an array of 2 integers");
                if (rc == 0 && n != 2)
                    rc = st_parse_fail(ps, "data_offsets must have exactly 2 entries");
                have_offsets = 1;
            } else {
                char msg[160];
                snprintf(msg, sizeof msg, "unexpected or repeated key \"%.60s\" in a tensor entry",
                         key);
                rc = st_parse_fail(ps, msg);
            }
            free(key);
            if (rc < 0)
                return -1;
        } while (st_accept(ps, ','));
        if (st_expect(ps, '}', "expected ',' or '}' in a tensor entry") < 0)
            return -1;
    }
    if (!have_dtype || !have_shape || !have_offsets)
        return st_parse_fail(ps, !have_dtype   ? "tensor entry has no \"dtype\""
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

/* Parse the whole header into st; begin/end offsets of tensor i go to (*offsets)[2i..]. */
static int st_parse_header(struct st_parser *ps, struct st_file *st, int64_t **offsets)
{
    int have_meta = 0;
    *offsets = NULL;
    if (st_expect(ps, '{', "the header must be a JSON object starting with '{'") < 0)
        return -1;
    if (!st_accept(ps, '}')) {
        do {
            st_skip_ws(ps);
            size_t key_at = ps->pos;
            char *key = st_parse_string(ps);
            if (!key)
                return -1;
            if (st_expect(ps, ':', "expected ':' after a key") < 0) {
                free(key);
                return -1;
            }
            if (strcmp(key, "__metadata__") == 0) {
                free(key);
                if (have_meta) {
                    ps->pos = key_at;
                    return st_parse_fail(ps, "__metadata__ appears twice");
                }
                have_meta = 1;
                if (st_parse_metadata(ps, st) < 0)
                    return -1;
                continue;
            }
            if (st_find_index(st, key) >= 0) {
                ps->pos = key_at;
                ps->tensor = key;
                st_parse_fail(ps, "tensor name appears twice");
                free(key);
                return -1;
            }
            if (st->count == st->cap) {
                int cap = st->cap ? 2 * st->cap : 16;
                struct st_tensor *t = realloc(st->tensors, (size_t)cap * sizeof *t);
                if (t)
                    st->tensors = t;
                int64_t *o = t ? realloc(*offsets, (size_t)cap * 2 * sizeof *o) : NULL;
                if (o)
                    *offsets = o;
                if (!t || !o) {
                    free(key);
                    return st_parse_fail(ps, "out of memory");
                }
                st->cap = cap;
            }
            struct st_tensor *t = &st->tensors[st->count];
            memset(t, 0, sizeof *t);
            t->name = key;
            st->count++; /* owned by st from here on, so st_close frees the name */
            ps->tensor = key;
            if (st_parse_tensor(ps, t, *offsets + 2 * (st->count - 1)) < 0)
                return -1;
            ps->tensor = NULL;
        } while (st_accept(ps, ','));
        if (st_expect(ps, '}', "expected ',' or '}' after a header entry") < 0)
            return -1;
    }
    st_skip_ws(ps);
    if (ps->pos != ps->len)
        return st_parse_fail(ps, "unexpected bytes after the header object");
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
        if (st_shape_bytes(t->dtype, t->ndim, t->shape, &t->numel, &t->nbytes) < 0)
            return error_set("%s: tensor \"%s\": shape overflows (more than 2^62 bytes)",
                             st->path, t->name);
        if (e < b)
            return error_set("%s: tensor \"%s\": data_offsets [%lld, %lld] end before they "
                             "begin",
                             st->path, t->name, (long long)b, (long long)e);
        if ((uint64_t)e > data_len)
            return error_set("%s: tensor \"%s\": data_offsets [%lld, %lld] out of range: the "
                             "file has %zu bytes of data; the file is truncated or damaged",
                             st->path, t->name, (long long)b, (long long)e, data_len);
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
                             st->path, t->name, (long long)b, (long long)e,
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
            if (b < expect)
                rc = error_set("%s: tensor \"%s\": data_offsets [%lld, %lld] overlap tensor "
                               "\"%s\" (which ends at %lld)",
                               st->path, t->name, (long long)b, (long long)e, prev,
                               (long long)expect);
            else
                rc = error_set("%s: tensor \"%s\": data_offsets [%lld, %lld] leave a gap "
                               "after byte %lld of the data",
                               st->path, t->name, (long long)b, (long long)e,
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
    st->cap = st->count;

    /* Element-aligned data for every tensor, copying those whose offset is not. */
    for (int k = 0; k < st->count; k++) {
        struct st_tensor *t = &st->tensors[k];
        if ((uintptr_t)t->data % st_dtypes[t->dtype].size == 0)
            continue;
        void **c = realloc(st->copies, (size_t)(st->copy_count + 1) * sizeof *c);
        if (!c)
            return error_set("%s: out of memory", st->path);
        st->copies = c;
        void *copy = malloc(t->nbytes);
        if (!copy)
            return error_set("%s: out of memory for tensor \"%s\"", st->path, t->name);
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

struct st_file *st_open(const char *path)
{
    struct st_file *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        error_set("%s: out of memory", path);
        return NULL;
    }
    int64_t *offsets = NULL;
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
    if (size < 8) {
        error_set("%s: %zu bytes is too small for a safetensors file (8-byte header length "
                  "first); the file is truncated or not safetensors",
                  path, size);
        goto fail;
    }
    if (st_read_all(f, lenbuf, 8) < 0) {
        error_set("%s: read error: %s", path, strerror(errno));
        goto fail;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | lenbuf[i];
    if (n > size - 8) {
        error_set("%s: header length %llu is larger than the file (%zu bytes); the file is "
                  "truncated or not safetensors",
                  path, (unsigned long long)n, size);
        goto fail;
    }
    if (n > ST_MAX_HEADER) {
        error_set("%s: header length %llu exceeds the 100 MB limit; not a safetensors file",
                  path, (unsigned long long)n);
        goto fail;
    }
    /* place the file so that its data section starts ST_DATA_ALIGN-aligned */
    st->raw = malloc(size + ST_DATA_ALIGN);
    if (!st->raw) {
        error_set("%s: out of memory for %zu bytes", path, size);
        goto fail;
    }
    size_t shift = (ST_DATA_ALIGN - ((uintptr_t)(st->raw + 8 + n) % ST_DATA_ALIGN)) %
                   ST_DATA_ALIGN;
    unsigned char *file = st->raw + shift;
    memcpy(file, lenbuf, 8);
    if (st_read_all(f, file + 8, size - 8) < 0) {
        error_set("%s: read error or file shrank while reading", path);
        goto fail;
    }
    fclose(f);
    f = NULL;

    if (!st_utf8_valid(file + 8, (size_t)n)) {
        error_set("%s: bad safetensors header: not valid UTF-8", path);
        goto fail;
    }
    struct st_parser ps = {path, (const char *)file + 8, (size_t)n, 0, NULL};
    if (st_parse_header(&ps, st, &offsets) < 0)
        goto fail;
    if (st_validate(st, offsets, file + 8 + n, size - 8 - (size_t)n) < 0)
        goto fail;
    free(offsets);
    return st;
fail:
    if (f)
        fclose(f);
    free(offsets);
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
        error_set("%s: no tensor named \"%s\"", st->path, name);
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

/* exact widening of IEEE half and bfloat16 bit patterns */
static float st_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | man << 13;
    } else if (exp != 0) {
        bits = sign | (exp + 112) << 23 | man << 13;
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal half: normalise */
        int e = 113;
        while (!(man & 0x400)) {
            man <<= 1;
            e--;
        }
        bits = sign | (uint32_t)e << 23 | (man & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float st_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

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
            out[i] = st_half_to_float(h[i]);
        return 0;
    case ST_BF16:
        for (int64_t i = 0; i < t->numel; i++)
            out[i] = st_bf16_to_float(h[i]);
        return 0;
    default:
        return error_set("%s: tensor \"%s\" has dtype %s, expected a float (F32, F16 or BF16)",
                         st->path, name, st_dtypes[t->dtype].name);
    }
}

/* ------------------------------------------------------------------ writer */

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
    int count, cap;
    struct st_meta *meta;
    int meta_count, meta_cap;
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
    if (!name[0] || !st_utf8_valid((const unsigned char *)name, strlen(name)))
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
    if (w->count == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        struct st_entry *n = realloc(w->entries, (size_t)cap * sizeof *n);
        if (!n)
            return error_set("safetensors writer: out of memory");
        w->entries = n;
        w->cap = cap;
    }
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
    if (!st_utf8_valid((const unsigned char *)key, strlen(key)) ||
        !st_utf8_valid((const unsigned char *)value, strlen(value)))
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
    if (!k || w->meta_count == w->meta_cap) {
        int cap = w->meta_cap ? 2 * w->meta_cap : 8;
        struct st_meta *m = k ? realloc(w->meta, (size_t)cap * sizeof *m) : NULL;
        if (!m) {
            free(k);
            free(v);
            return error_set("safetensors writer: out of memory");
        }
        w->meta = m;
        w->meta_cap = cap;
    }
    w->meta[w->meta_count].key = k;
    w->meta[w->meta_count].value = v;
    w->meta_count++;
    return 0;
}

/* A growing byte buffer for the header. */
struct st_buf {
    char *p;
    size_t len, cap;
    int oom;
};

static void st_buf_put(struct st_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void st_buf_str(struct st_buf *b, const char *s) { st_buf_put(b, s, strlen(s)); }

static void st_buf_int(struct st_buf *b, long long v)
{
    char tmp[24];
    st_buf_put(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "%lld", v));
}

/* a JSON string escaped as serde_json does: \" \\ \b \f \n \r \t, other controls \u00xx */
static void st_buf_json_string(struct st_buf *b, const char *s)
{
    st_buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        const char *e = NULL;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                e = esc;
            }
        }
        if (e)
            st_buf_str(b, e);
        else
            st_buf_put(b, (const char *)&c, 1);
    }
    st_buf_put(b, "\"", 1);
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
    struct st_buf b = {0};
    int first = 1;
    st_buf_put(&b, "{", 1);
    if (w->meta_count) {
        qsort(w->meta, (size_t)w->meta_count, sizeof *w->meta, st_compare_meta);
        st_buf_str(&b, "\"__metadata__\":{");
        for (int i = 0; i < w->meta_count; i++) {
            if (i)
                st_buf_put(&b, ",", 1);
            st_buf_json_string(&b, w->meta[i].key);
            st_buf_put(&b, ":", 1);
            st_buf_json_string(&b, w->meta[i].value);
        }
        st_buf_put(&b, "}", 1);
        first = 0;
    }
    size_t offset = 0;
    for (int i = 0; i < w->count; i++) {
        const struct st_entry *e = order[i];
        if (!first)
            st_buf_put(&b, ",", 1);
        first = 0;
        st_buf_json_string(&b, e->name);
        st_buf_str(&b, ":{\"dtype\":\"");
        st_buf_str(&b, st_dtypes[e->dtype].name);
        st_buf_str(&b, "\",\"shape\":[");
        for (int d = 0; d < e->ndim; d++) {
            if (d)
                st_buf_put(&b, ",", 1);
            st_buf_int(&b, (long long)e->shape[d]);
        }
        st_buf_str(&b, "],\"data_offsets\":[");
        st_buf_int(&b, (long long)offset);
        st_buf_put(&b, ",", 1);
        offset += e->nbytes;
        st_buf_int(&b, (long long)offset);
        st_buf_str(&b, "]}");
    }
    st_buf_put(&b, "}", 1);
    while (b.len % 8)
        st_buf_put(&b, " ", 1);
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
