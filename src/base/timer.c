/*
 * timer.c — CLOCK_MONOTONIC timestamps.
 */
#define _POSIX_C_SOURCE 200809L
#include "timer.h"

#include <time.h>

uint64_t timer_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double timer_s(void) { return (double)timer_ns() * 1e-9; }
