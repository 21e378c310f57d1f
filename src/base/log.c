/*
 * log.c — leveled logging. The level comes from eddy_log_set_level or, until that
 * is called, from $EDDY_LOG_LEVEL (error|warn|info|debug); WARN by default. Each
 * message goes to the callback a program set with eddy_log_set_callback, else to
 * stderr as one line "eddy: LEVEL: message".
 */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== Level ==== */

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

void eddy_log_set_level(eddy_log_level level) {
    int l = (int)level;
    atomic_store(&current_level, l < EDDY_LOG_ERROR ? EDDY_LOG_ERROR : l > EDDY_LOG_DEBUG ? EDDY_LOG_DEBUG : l);
}

eddy_log_level eddy_log_get_level(void) {
    int l = atomic_load(&current_level);
    if (l < 0) {
        l = level_from_env();
        atomic_store(&current_level, l);
    }
    return (eddy_log_level)l;
}

/* ==== Where messages go ==== */

/* The callback and its pointer change together, under the lock; it is not held
 * while the callback runs. */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static eddy_log_callback sink_fn;
static void *sink_user;

void eddy_log_set_callback(eddy_log_callback fn, void *user) {
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_user = fn ? user : NULL;
    pthread_mutex_unlock(&sink_lock);
}

void eddy_log(eddy_log_level level, const char *fmt, ...) {
    if ((int)level < EDDY_LOG_ERROR || level > eddy_log_get_level()) return;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *p = line; *p; p++) /* one line, whatever the arguments held */
        if (*p == '\n' || *p == '\r') *p = ' ';
    pthread_mutex_lock(&sink_lock);
    eddy_log_callback fn = sink_fn;
    void *user = sink_user;
    pthread_mutex_unlock(&sink_lock);
    if (fn) fn(user, level, line);
    else fprintf(stderr, "eddy: %s: %s\n", names[level], line);
}
