/*
 * log.h — leveled logging (eddy_log, eddy_log_get_level and the callback are
 * declared in include/eddy.h): to stderr, or to the program's callback.
 */
#ifndef EDDY_BASE_LOG_H
#define EDDY_BASE_LOG_H

#include "error.h"

#define LOG_ERROR(...) eddy_log(EDDY_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) eddy_log(EDDY_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) eddy_log(EDDY_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) eddy_log(EDDY_LOG_DEBUG, __VA_ARGS__)

#endif
