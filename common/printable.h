/* printable.h — a value from outside (a file's field, a name, a key) as a one-line error
 * message may show it.  Every layer's messages quote such values through it, so that a
 * value with line breaks or control bytes cannot break the "one clear line" rule. */
#ifndef DDPPROF_PRINTABLE_H
#define DDPPROF_PRINTABLE_H

#include <stddef.h>

/* s on one line: at most max bytes of it (cut at a UTF-8 boundary, then "..."), line
 * breaks and tabs as \n \r \t, other control bytes as \xNN, into buf (cap bytes;
 * TEXT_PRINTABLE_MAX holds any max <= 80).  Returns buf. */
#define TEXT_PRINTABLE_MAX 340
const char *text_printable(const char *s, size_t max, char *buf, size_t cap);

#endif
