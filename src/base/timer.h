/*
 * timer.h — monotonic time.
 */
#ifndef EDDY_BASE_TIMER_H
#define EDDY_BASE_TIMER_H

#include <stdint.h>

/* Nanoseconds from an arbitrary fixed point; never goes backwards. */
uint64_t timer_ns(void);
/* Seconds as a double, same clock. */
double timer_s(void);

#endif
