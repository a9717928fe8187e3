/* parse.c — the strict whole-number parser (see parse.h). */
#include "common/parse.h"

int parse_i64(const char *s, size_t len, int64_t *out)
{
    const int neg = len > 0 && s[0] == '-';
    size_t i = (size_t)neg;
    if (i == len)
        return -1; /* empty, or a lone '-' */
    const uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    for (; i < len; i++) {
        const unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9 || v > (limit - d) / 10) /* not a digit, or past the limit */
            return -1;
        v = v * 10 + d;
    }
    /* -v without overflow, INT64_MIN (v = 2^63) included */
    *out = neg && v ? -(int64_t)(v - 1) - 1 : (int64_t)v;
    return 0;
}
