/*
 * error.h — recoverable errors and always-on invariant checks.
 *
 * Owns: filling an eddy_error with one formatted line, status names, EDDY_ASSERT.
 * Untrusted input is reported with eddy_error_set and a return code; EDDY_ASSERT is
 * only for eddy's own invariants and stays on in release builds.
 */
#ifndef EDDY_BASE_ERROR_H
#define EDDY_BASE_ERROR_H

#include "eddy.h"

#if defined(__GNUC__)
#define EDDY_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define EDDY_NORETURN __attribute__((noreturn))
#else
#define EDDY_PRINTF(a, b)
#define EDDY_NORETURN
#endif

/* Sets err (if non-NULL) to code and the formatted message; returns code. Newlines
 * in the message are replaced so that it stays one line. */
eddy_status eddy_error_set(eddy_error *err, eddy_status code, const char *fmt, ...)
    EDDY_PRINTF(3, 4);

/* Clears err to EDDY_OK with an empty message. */
void eddy_error_clear(eddy_error *err);

EDDY_NORETURN void eddy_assert_fail(const char *file, int line, const char *expr);

#define EDDY_ASSERT(cond)                                                  \
    do {                                                                   \
        if (!(cond)) eddy_assert_fail(__FILE__, __LINE__, #cond);          \
    } while (0)

#endif
