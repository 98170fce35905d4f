#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int log_verbosity;

static const char *const level_names[] = {
    [LOG_ERR] = "error", [LOG_WARN] = "warning", [LOG_INFO] = "info",
    [LOG_CONN] = "conn", [LOG_CMD] = "cmd",
};

static int enabled(int level)
{
    if (level <= LOG_INFO)
        return 1;
    return level - LOG_INFO <= log_verbosity;
}

void log_msg(int level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n, m;

    if (!enabled(level))
        return;
    n = snprintf(line, sizeof line, "tubed: %s: ", level_names[level]);
    va_start(ap, fmt);
    m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if ((size_t)n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    /* One write per line: the journal sees whole lines. A failed write to
     * stderr has nowhere to be reported, so it is deliberately ignored. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}
