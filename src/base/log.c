/*
 * log.c — leveled logging. The level comes from eddy_log_set_level or, until that
 * is called, from $EDDY_LOG_LEVEL (error|warn|info|debug); WARN by default.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int current_level = -1; /* -1: not yet read from the environment */

static int level_from_env(void) {
    const char *s = getenv("EDDY_LOG_LEVEL");
    if (!s) return EDDY_LOG_WARN;
    if (!strcmp(s, "error")) return EDDY_LOG_ERROR;
    if (!strcmp(s, "warn")) return EDDY_LOG_WARN;
    if (!strcmp(s, "info")) return EDDY_LOG_INFO;
    if (!strcmp(s, "debug")) return EDDY_LOG_DEBUG;
    return EDDY_LOG_WARN;
}

void eddy_log_set_level(eddy_log_level level) { atomic_store(&current_level, (int)level); }

eddy_log_level eddy_log_get_level(void) {
    int l = atomic_load(&current_level);
    if (l < 0) {
        l = level_from_env();
        atomic_store(&current_level, l);
    }
    return (eddy_log_level)l;
}

void eddy_log(eddy_log_level level, const char *fmt, ...) {
    if (level > eddy_log_get_level()) return;
    static const char *names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "eddy: %s: %s\n", names[level], line);
}
