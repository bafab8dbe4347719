/* clock.h -- the one clock every timing in attnsweep reads.
 *
 * Wall-clock time (time(), gettimeofday) jumps when NTP corrects it; a cell's
 * wall_time, the scheduler's stop grace and the progress rate must not. */
#ifndef ATTNSWEEP_CLOCK_H
#define ATTNSWEEP_CLOCK_H

/* CLOCK_MONOTONIC in seconds since an arbitrary start (differences only). */
double as_monotonic_s(void);

#endif
