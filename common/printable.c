/* printable.c — a value from outside as a one-line message or a terminal shows it (see
 * printable.h). */
#include "common/printable.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The escape of the control at s[0] into esc (NUL-terminated), and the bytes it takes (1,
 * or 2 for a C1 control in UTF-8); 0 when s[0] is no control. */
static size_t text_control(const unsigned char *s, char esc[9])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c = s[0];
    if (c == '\n' || c == '\r' || c == '\t') {
        esc[0] = '\\';
        esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        esc[2] = '\0';
        return 1;
    }
    if (c < 0x20 || c == 0x7f) {
        esc[0] = '\\', esc[1] = 'x', esc[2] = hex[c >> 4], esc[3] = hex[c & 15], esc[4] = 0;
        return 1;
    }
    if (c == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f) { /* U+0080..U+009F: CSI is U+009B */
        memcpy(esc, "\\xc2\\x", 6);
        esc[6] = hex[s[1] >> 4], esc[7] = hex[s[1] & 15], esc[8] = 0;
        return 2;
    }
    return 0;
}

int text_has_control(const char *s)
{
    char esc[9];
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (text_control(p, esc))
            return 1;
    return 0;
}

const char *text_printable(const char *s, size_t max, char *buf, size_t cap)
{
    size_t o = 0, i = 0;
    if (cap == 0)
        return buf;
    while (s[i] && i < max) {
        char esc[9] = {s[i], 0};
        size_t take = text_control((const unsigned char *)s + i, esc);
        if (take == 2 && i + 1 >= max)
            break; /* the control's second byte is past max */
        size_t n = strlen(esc);
        if (o + n + 4 > cap) /* room for "..." and the NUL */
            break;
        memcpy(buf + o, esc, n);
        o += n;
        i += take ? take : 1;
    }
    if (s[i]) { /* cut: not inside a UTF-8 sequence, then "..." */
        if (((unsigned char)s[i] & 0xc0) == 0x80) { /* s[i] continues a character: drop */
            while (o > 0 && ((unsigned char)buf[o - 1] & 0xc0) == 0x80) /* its copied part */
                o--;
            if (o > 0 && ((unsigned char)buf[o - 1] & 0xc0) == 0xc0)
                o--;
        }
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

/* ---------------------------------------------------------------- the terminal stream */

struct text_stream {
    FILE *to;
    int pending_c2; /* the last byte given was 0xc2: what follows may make a C1 control */
};

static ssize_t text_stream_write(void *cookie, const char *buf, size_t size)
{
    struct text_stream *t = cookie;
    char out[4096 + 16];
    size_t o = 0;
    for (size_t i = 0; i < size; i++) {
        unsigned char c = (unsigned char)buf[i];
        char esc[9] = {0};
        if (t->pending_c2) {
            t->pending_c2 = 0;
            unsigned char two[2] = {0xc2, c};
            if (text_control(two, esc) == 2)
                memcpy(out + o, esc, strlen(esc)), o += strlen(esc);
            else
                out[o++] = (char)0xc2, out[o++] = (char)c;
        } else if (c == 0xc2) {
            t->pending_c2 = 1;
        } else if (c != '\n' && c != '\t' && text_control(&c, esc) == 1) {
            memcpy(out + o, esc, strlen(esc));
            o += strlen(esc);
        } else {
            out[o++] = (char)c;
        }
        if (o >= 4096 || i + 1 == size) {
            if (o && fwrite(out, 1, o, t->to) != o)
                return -1;
            o = 0;
        }
    }
    return (ssize_t)size;
}

static int text_stream_close(void *cookie)
{
    struct text_stream *t = cookie;
    int rc = t->pending_c2 && fputc(0xc2, t->to) == EOF ? -1 : 0;
    free(t);
    return rc;
}

FILE *text_terminal_stream(FILE *to)
{
    struct text_stream *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->to = to;
    cookie_io_functions_t io = {.write = text_stream_write, .close = text_stream_close};
    FILE *f = fopencookie(t, "w", io);
    if (!f)
        free(t);
    return f;
}
