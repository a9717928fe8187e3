/* printable.c — a value from outside as a one-line message shows it (see printable.h). */
#include "common/printable.h"

#include <string.h>

const char *text_printable(const char *s, size_t max, char *buf, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i = 0;
    if (cap == 0)
        return buf;
    for (; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[5] = {(char)c, 0, 0, 0, 0};
        if (c == '\n' || c == '\r' || c == '\t') {
            esc[0] = '\\';
            esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20 || c == 0x7f) {
            esc[0] = '\\', esc[1] = 'x', esc[2] = hex[c >> 4], esc[3] = hex[c & 15];
        }
        size_t n = strlen(esc);
        if (o + n + 4 > cap) /* room for "..." and the NUL */
            break;
        memcpy(buf + o, esc, n);
        o += n;
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
