/* clock.h -- the one clock every timing in attnsweep reads.
 *
 * Wall-clock time (time(), gettimeofday) jumps when NTP corrects it; a cell's
 * wall_time, the scheduler's stop grace and the progress rate must not: they
 * take differences of as_monotonic_s(). as_wall_s() is only for timestamps a
 * person reads (provenance, status, the lock's start time). The CPU clocks
 * measure work on a shared machine, where wall time counts the neighbours too.
 * (The stop-signal handler reads CLOCK_MONOTONIC itself: it may call only
 * async-signal-safe functions.) */
#ifndef ATTNSWEEP_CLOCK_H
#define ATTNSWEEP_CLOCK_H

/* CLOCK_MONOTONIC in seconds since an arbitrary start (differences only). */
double as_monotonic_s(void);
/* CLOCK_REALTIME: seconds since 1970 (timestamps, not durations). */
double as_wall_s(void);
/* CPU seconds of the whole process (user + system, every thread). */
double as_process_cpu_s(void);
/* CPU seconds of the calling thread. */
double as_thread_cpu_s(void);

#endif
