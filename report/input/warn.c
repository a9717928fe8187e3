/* warn.c — report_warn (see warn.h). */
#include "report/input/warn.h"

#include <stdarg.h>
#include <stdio.h>

#include "common/printable.h"

void report_warn(const char *fmt, ...)
{
    char raw[2048], shown[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* one line, whatever names from the traces it quotes (common/printable.h) */
    fprintf(stderr, "ddpprof report: warning: %s\n",
            text_printable(raw, (size_t)-1, shown, sizeof shown));
}
