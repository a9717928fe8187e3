/* printable.h — a value from outside (a file's field, a name, a key) as a one-line error
 * message or a terminal may show it.  Every error message passes through it (error_set),
 * as do the report's table cells and warnings and everything it prints (text_terminal_stream),
 * so that a value with line breaks or control bytes cannot break the "one clear line" rule,
 * split a table row, or move the cursor, retitle or reprogram the terminal (escape
 * sequences: ESC, CSI, OSC, as C0 bytes or as the C1 controls U+0080..U+009F). */
#ifndef DDPPROF_PRINTABLE_H
#define DDPPROF_PRINTABLE_H

#include <stddef.h>

#include <stdio.h>

/* s on one line: at most max bytes of it (cut at a UTF-8 boundary, then "..."; max
 * SIZE_MAX: all that fits), line breaks and tabs as \n \r \t, other control bytes (DEL
 * and the C1 controls' UTF-8 included) as \xNN, into buf (cap bytes; TEXT_PRINTABLE_MAX
 * holds any max <= 80).  Returns buf. */
#define TEXT_PRINTABLE_MAX 340
const char *text_printable(const char *s, size_t max, char *buf, size_t cap);

/* 1 when s holds a byte text_printable escapes */
int text_has_control(const char *s);

/* A stream that writes to `to` what it is given with its control bytes escaped as
 * text_printable does, but for line breaks and tabs, which pass (text meant for a terminal:
 * the report's).  fclose writes what it holds to `to` and leaves `to` open and
 * unflushed (a write that failed there is `to`'s error: ferror).  NULL when it cannot be
 * made. */
FILE *text_terminal_stream(FILE *to);

#endif
