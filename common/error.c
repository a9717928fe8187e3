/* error.c — thread-local one-line error messages (see error.h). */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char error_message[1024];

int error_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    return -1;
}

int error_wrap(const char *fmt, ...)
{
    char prefix[512], old[sizeof error_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
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
