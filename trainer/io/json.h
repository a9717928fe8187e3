/* json.h — the small JSON reader and writer of the safetensors header.
 *
 * Reading: a cursor over a byte string, with the pieces a strict header parser needs
 * (whitespace, punctuation, strings with every escape, non-negative integers, arrays of
 * them).  Every failure is one error_set line naming the file, the document, the byte
 * offset and, inside an item, that item: "PATH: bad DOC at byte N (KIND "ITEM"): WHAT".
 * Strings are decoded to UTF-8; \u0000 and unpaired surrogates are refused.
 *
 * Writing: a growing, NUL-terminated text buffer; strings are escaped as serde_json does.
 * An allocation failure is sticky (oom), so a writer checks once at the end. */
#ifndef DDPPROF_JSON_H
#define DDPPROF_JSON_H

#include <stddef.h>
#include <stdint.h>

/* 1 if s[0..len) is valid UTF-8 (no overlongs, surrogates or values past U+10FFFF) */
int json_utf8_valid(const unsigned char *s, size_t len);

/* ------------------------------------------------------------------ reading */

struct json_parser {
    const char *path;      /* the file, for messages */
    const char *doc;       /* what the text is, for messages ("safetensors header") */
    const char *s;         /* the text, s[0..len); not owned */
    size_t len, pos;       /* pos: the next byte */
    const char *item_kind; /* "tensor": what item names (below) are */
    const char *item;      /* the item being parsed, for messages; NULL outside one */
};

/* error_set the message above at the current position; returns -1 */
int json_fail(struct json_parser *ps, const char *what);

void json_skip_ws(struct json_parser *ps);

/* skip whitespace, then consume c; -1 (json_fail(what)) if the next byte is another */
int json_expect(struct json_parser *ps, char c, const char *what);

/* skip whitespace; 1 and consume c if it is next, else 0 */
int json_accept(struct json_parser *ps, char c);

/* A JSON string (after whitespace), decoded into a new NUL-terminated buffer the caller
 * frees; NULL after json_fail. */
char *json_read_string(struct json_parser *ps);

/* A non-negative JSON integer (after whitespace) that fits in int64: no sign, leading
 * zero, fraction or exponent.  0 or -1 (json_fail). */
int json_read_uint(struct json_parser *ps, int64_t *out);

/* "[" uint ("," uint)* "]" or "[]" into out[0..*n), at most max entries; what is the
 * message when the '[' is missing.  0 or -1 (json_fail). */
int json_read_uint_array(struct json_parser *ps, int64_t *out, int max, int *n,
                         const char *what);

/* ------------------------------------------------------------------ writing */

struct json_buf {
    char *p; /* NUL-terminated text, owned: free(p) when done */
    size_t len, cap;
    int oom; /* an append failed: p holds what came before it, later appends are ignored */
};

/* append n bytes of s, a NUL-terminated string, a decimal integer */
void json_buf_put(struct json_buf *b, const char *s, size_t n);
void json_buf_str(struct json_buf *b, const char *s);
void json_buf_int(struct json_buf *b, long long v);

/* append s as a quoted JSON string: \" \\ \b \f \n \r \t, other controls \u00xx, every
 * other byte as it is */
void json_buf_string(struct json_buf *b, const char *s);

#endif
