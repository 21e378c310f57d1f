/*
 * log.h — leveled logging to stderr.
 */
#ifndef EDDY_BASE_LOG_H
#define EDDY_BASE_LOG_H

#include "error.h"

void eddy_log(eddy_log_level level, const char *fmt, ...) EDDY_PRINTF(2, 3);
eddy_log_level eddy_log_get_level(void);

#define LOG_ERROR(...) eddy_log(EDDY_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) eddy_log(EDDY_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) eddy_log(EDDY_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) eddy_log(EDDY_LOG_DEBUG, __VA_ARGS__)

#endif
