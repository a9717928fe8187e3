/* error.c — thread-local one-line error messages (see error.h).  Every message is kept
 * with its control bytes escaped (common/printable.h): a name or path from outside cannot
 * split it or reach the terminal as an escape sequence, wherever it is printed. */
#include "common/error.h"

#include "common/printable.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char error_message[1024];

int error_set(const char *fmt, ...)
{
    char raw[sizeof error_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    if (text_has_control(raw))
        text_printable(raw, (size_t)-1, error_message, sizeof error_message);
    else
        memcpy(error_message, raw, strlen(raw) + 1);
    return -1;
}

int error_wrap(const char *fmt, ...)
{
    char raw[512], prefix[512], old[sizeof error_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    text_printable(raw, (size_t)-1, prefix, sizeof prefix);
    memcpy(old, error_message, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof error_message - 3)
        n = sizeof error_message - 3;
    memcpy(error_message, prefix, n);
    memcpy(error_message + n, ": ", 2);
    size_t room = sizeof error_message - n - 3, len = strlen(old);
    if (len > room)
        len = room;
    memcpy(error_message + n + 2, old, len);
    error_message[n + 2 + len] = '\0';
    return -1;
}

const char *error_get(void) { return error_message; }

void error_clear(void) { error_message[0] = '\0'; }
