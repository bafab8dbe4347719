/* signals.h -- catching the "please stop" signals of a sweep.
 *
 * SIGTERM, SIGINT and SIGUSR1 (what SLURM's --signal=B:USR1@N, forwarded by
 * the batch script to mpirun, delivers before a time limit) only set a flag:
 * the handler is async-signal-safe and does nothing else. The scheduler polls
 * the flag between cells and turns it into an orderly stop (see scheduler.h).
 *
 * Two kinds of stop: SIGUSR1 and a first SIGINT (Ctrl-C) are graceful -- the running cells
 * may finish within the long grace and are committed; SIGTERM, and a SIGINT once a stop is
 * under way (the second Ctrl-C), abandon them after the short grace (the committed work is
 * kept, the abandoned cells stay pending). A later SIGUSR1 changes nothing.
 *
 * Under mpirun (Open MPI 4.1): SIGUSR1 sent to mpirun is forwarded to every
 * rank and mpirun waits for them; SIGTERM/SIGINT sent to mpirun are forwarded
 * as SIGTERM and followed by SIGKILL about 1-2 s later, and mpirun then exits
 * with status 1 whatever the ranks returned. Ctrl-C at mpirun's terminal is that SIGINT
 * (the ranks are in process groups of their own), so only a SIGINT that reaches a rank
 * itself -- `attnsweep run` without a launcher, or kill -INT of a rank -- stops gracefully
 * (docs/usage.md, "Stopping a run"). */
#ifndef ATTNSWEEP_SIGNALS_H
#define ATTNSWEEP_SIGNALS_H

#include "errors.h"

/* Installs the handlers with sigaction (idempotent: a second call does
 * nothing). Returns 0, or -1 with err naming the signal that failed. */
int signals_install(as_err *err);

/* Puts back the handlers that were there before signals_install and
 * clears the flag (for tests that install and remove repeatedly). */
void signals_restore(void);

/* The first signal caught since install (SIGTERM, SIGINT or SIGUSR1), or 0. */
int signals_caught(void);

/* Seconds (as_monotonic_s, CLOCK_MONOTONIC) when the first signal arrived (taken in the
 * handler), or a negative value when none was caught. */
double signals_caught_at(void);

/* Seconds (as above) when a signal asked to abandon the running cells (SIGTERM, or SIGINT
 * after any stop signal), or a negative value. */
double signals_abandon_at(void);

/* 1 when a stop begun by signo lets the running cells finish (SIGUSR1, SIGINT). */
int signals_graceful(int signo);

/* Forgets a caught signal (the handlers stay installed). */
void signals_clear(void);

#endif
