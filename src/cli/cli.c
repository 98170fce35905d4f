/* cli.c — shared error helpers; see cli.h. */
#include "cli.h"

#include <stdio.h>

Status err_set(Err *e, Status code, const char *fmt, ...)
{
    va_list ap;

    e->code = code;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;

    fputs("tubed-cli: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
