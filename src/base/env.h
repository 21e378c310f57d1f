/*
 * env.h — reading eddy's on/off environment variables (EDDY_NO_PACK, EDDY_NO_MMAP,
 * EDDY_FORCE_REF, EDDY_NO_HUGEPAGES, ...): one rule for all of them.
 */
#ifndef EDDY_BASE_ENV_H
#define EDDY_BASE_ENV_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* True when the variable is set to anything but "" or "0". */
static inline bool env_flag(const char *name) {
    const char *s = getenv(name);
    return s && *s && strcmp(s, "0") != 0;
}

#endif
