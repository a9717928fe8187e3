/* json.c — the small JSON reader and writer of the safetensors header (see json.h). */
#include "io/json.h"

#include "common/error.h"
#include "common/printable.h"
#include "common/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int json_utf8_valid(const unsigned char *s, size_t len)
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

/* ------------------------------------------------------------------ reading */

int json_fail(struct json_parser *ps, const char *what)
{
    char item[TEXT_PRINTABLE_MAX];
    if (ps->item)
        return error_set("%s: bad %s at byte %zu (%s \"%s\"): %s", ps->path, ps->doc, ps->pos,
                         ps->item_kind, text_printable(ps->item, 80, item, sizeof item), what);
    return error_set("%s: bad %s at byte %zu: %s", ps->path, ps->doc, ps->pos, what);
}

void json_skip_ws(struct json_parser *ps)
{
    while (ps->pos < ps->len && (ps->s[ps->pos] == ' ' || ps->s[ps->pos] == '\t' ||
                                 ps->s[ps->pos] == '\n' || ps->s[ps->pos] == '\r'))
        ps->pos++;
}

/* skip whitespace, then consume c; -1 with error if the next byte is something else */
int json_expect(struct json_parser *ps, char c, const char *what)
{
    json_skip_ws(ps);
    if (ps->pos >= ps->len || ps->s[ps->pos] != c)
        return json_fail(ps, what);
    ps->pos++;
    return 0;
}

/* skip whitespace; 1 and consume c if it is next, else 0 */
int json_accept(struct json_parser *ps, char c)
{
    json_skip_ws(ps);
    if (ps->pos < ps->len && ps->s[ps->pos] == c) {
        ps->pos++;
        return 1;
    }
    return 0;
}

static int json_hex4(struct json_parser *ps, unsigned *out)
{
    unsigned v = 0;
    if (ps->len - ps->pos < 4)
        return json_fail(ps, "unterminated \\u escape");
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
            return json_fail(ps, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

/* A JSON string (after whitespace) into a new NUL-terminated buffer (caller frees). */
char *json_read_string(struct json_parser *ps)
{
    if (json_expect(ps, '"', "expected a string") < 0)
        return NULL;
    /* the decoded string is never longer than its encoding */
    size_t start = ps->pos, n = 0;
    while (ps->pos < ps->len && ps->s[ps->pos] != '"')
        ps->pos += ps->s[ps->pos] == '\\' ? 2 : 1;
    if (ps->pos >= ps->len) {
        ps->pos = start;
        json_fail(ps, "unterminated string");
        return NULL;
    }
    size_t end = ps->pos;
    char *out = malloc(end - start + 1);
    if (!out) {
        json_fail(ps, "out of memory");
        return NULL;
    }
    ps->pos = start;
    while (ps->pos < end) {
        unsigned char c = (unsigned char)ps->s[ps->pos++];
        if (c < 0x20) {
            ps->pos--;
            json_fail(ps, "control character inside a string");
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
            if (json_hex4(ps, &cp) < 0)
                goto fail;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned lo;
                if (ps->pos + 2 > end || ps->s[ps->pos] != '\\' || ps->s[ps->pos + 1] != 'u') {
                    json_fail(ps, "unpaired UTF-16 surrogate in \\u escape");
                    goto fail;
                }
                ps->pos += 2;
                if (json_hex4(ps, &lo) < 0)
                    goto fail;
                if (lo < 0xdc00 || lo > 0xdfff) {
                    json_fail(ps, "unpaired UTF-16 surrogate in \\u escape");
                    goto fail;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                json_fail(ps, "unpaired UTF-16 surrogate in \\u escape");
                goto fail;
            } else if (cp == 0) {
                json_fail(ps, "\\u0000 (NUL) inside a string is not supported");
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
            json_fail(ps, "unknown escape in string");
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
int json_read_uint(struct json_parser *ps, int64_t *out)
{
    json_skip_ws(ps);
    size_t start = ps->pos;
    if (ps->pos < ps->len && ps->s[ps->pos] == '-')
        return json_fail(ps, "negative number where a size or offset is expected");
    uint64_t v = 0;
    while (ps->pos < ps->len && ps->s[ps->pos] >= '0' && ps->s[ps->pos] <= '9') {
        unsigned d = (unsigned)(ps->s[ps->pos] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return json_fail(ps, "integer too large");
        v = v * 10 + d;
        ps->pos++;
    }
    if (ps->pos == start)
        return json_fail(ps, "expected a non-negative integer");
    if (ps->s[start] == '0' && ps->pos - start > 1) {
        ps->pos = start;
        return json_fail(ps, "integer with a leading zero");
    }
    if (ps->pos < ps->len &&
        (ps->s[ps->pos] == '.' || ps->s[ps->pos] == 'e' || ps->s[ps->pos] == 'E'))
        return json_fail(ps, "expected an integer, found a fraction or exponent");
    *out = (int64_t)v;
    return 0;
}

/* "[" int ("," int)* "]" or "[]" into out[0..*n), at most max */
int json_read_uint_array(struct json_parser *ps, int64_t *out, int max, int *n,
                              const char *what)
{
    *n = 0;
    if (json_expect(ps, '[', what) < 0)
        return -1;
    if (json_accept(ps, ']'))
        return 0;
    do {
        int64_t v = 0;
        if (*n >= max) {
            char msg[128];
            snprintf(msg, sizeof msg, "more than %d entries in an array", max);
            return json_fail(ps, msg);
        }
        if (json_read_uint(ps, &v) < 0)
            return -1;
        out[(*n)++] = v;
    } while (json_accept(ps, ','));
    return json_expect(ps, ']', "expected ',' or ']' in an array");
}

/* ------------------------------------------------------------------ writing */

void json_buf_put(struct json_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (VEC_RESERVE(b->p, b->cap, b->len + n + 1)) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void json_buf_str(struct json_buf *b, const char *s) { json_buf_put(b, s, strlen(s)); }

void json_buf_int(struct json_buf *b, long long v)
{
    char tmp[24];
    json_buf_put(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "%lld", v));
}

/* a JSON string escaped as serde_json does: \" \\ \b \f \n \r \t, other controls \u00xx */
void json_buf_string(struct json_buf *b, const char *s)
{
    json_buf_put(b, "\"", 1);
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
            json_buf_str(b, e);
        else
            json_buf_put(b, (const char *)&c, 1);
    }
    json_buf_put(b, "\"", 1);
}
