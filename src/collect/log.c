/* log.c -- one line to stderr per condition (see log.h). */
#define _POSIX_C_SOURCE 200809L
#include "collect/log.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static atomic_bool quiet;

void pt_collect_log_quiet(bool q)
{
    atomic_store(&quiet, q);
}

void pt_collect_log(pt_log_level level, const char *fmt, ...)
{
    if (level == PT_LOG_INFO && atomic_load(&quiet))
        return;
    char line[1024];
    int head = snprintf(line, sizeof line, "[perftracker] ");
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + head, sizeof line - (size_t)head - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)head + (n < 0 ? 0 : PT_MIN((size_t)n, sizeof line - (size_t)head - 2));
    line[len++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, len);
    (void)ignored;
}
