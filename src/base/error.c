/*
 * error.c — error messages and the invariant-failure handler.
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const char *eddy_status_name(eddy_status s) {
    switch (s) {
    case EDDY_OK: return "ok";
    case EDDY_ERR_IO: return "i/o error";
    case EDDY_ERR_FORMAT: return "format error";
    case EDDY_ERR_UNSUPPORTED: return "unsupported";
    case EDDY_ERR_NOMEM: return "out of memory";
    case EDDY_ERR_ARG: return "invalid argument";
    case EDDY_ERR_NOT_FOUND: return "not found";
    case EDDY_ERR_CANCELLED: return "cancelled";
    }
    return "unknown status";
}

const char *eddy_version(void) { return EDDY_VERSION_STRING; }

eddy_status eddy_error_set(eddy_error *err, eddy_status code, const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    for (char *p = err->msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return code;
}

void eddy_error_clear(eddy_error *err) {
    if (!err) return;
    err->code = EDDY_OK;
    err->msg[0] = '\0';
}

void eddy_assert_fail(const char *file, int line, const char *expr) {
    fprintf(stderr, "eddy: internal error: %s:%d: assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}
