/* clock.c -- see clock.h. */
#include "clock.h"

#include <time.h>

static double read_clock(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double as_monotonic_s(void) { return read_clock(CLOCK_MONOTONIC); }
double as_wall_s(void) { return read_clock(CLOCK_REALTIME); }
double as_process_cpu_s(void) { return read_clock(CLOCK_PROCESS_CPUTIME_ID); }
double as_thread_cpu_s(void) { return read_clock(CLOCK_THREAD_CPUTIME_ID); }
