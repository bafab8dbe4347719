/* signals.h -- catching the "please stop" signals of a sweep.
 *
 * SIGTERM, SIGINT and SIGUSR1 (what SLURM's --signal=B:USR1@N, forwarded by
 * the batch script to mpirun, delivers before a time limit) only set a flag:
 * the handler is async-signal-safe and does nothing else. The scheduler polls
 * the flag between cells and turns it into an orderly stop (see scheduler.h).
 *
 * Under mpirun (Open MPI 4.1): SIGUSR1 sent to mpirun is forwarded to every
 * rank and mpirun waits for them; SIGTERM/SIGINT sent to mpirun are forwarded
 * as SIGTERM and followed by SIGKILL about 1-2 s later, and mpirun then exits
 * with status 1 whatever the ranks returned. */
#ifndef ATTNSWEEP_SIGNALS_H
#define ATTNSWEEP_SIGNALS_H

#include "errors.h"

/* Installs the handlers with sigaction (idempotent: a second call does
 * nothing). Returns 0, or -1 with err naming the signal that failed. */
int as_signals_install(as_err *err);

/* Puts back the handlers that were there before as_signals_install and
 * clears the flag (for tests that install and remove repeatedly). */
void as_signals_restore(void);

/* The first signal caught since install (SIGTERM, SIGINT or SIGUSR1), or 0. */
int as_signals_caught(void);

/* Seconds (as_monotonic_s, CLOCK_MONOTONIC) when the first signal arrived (taken in the
 * handler), or a negative value when none was caught. */
double as_signals_caught_at(void);

/* Forgets a caught signal (the handlers stay installed). */
void as_signals_clear(void);

#endif
