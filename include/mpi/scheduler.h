/* scheduler.h -- hands the cells of a sweep to MPI ranks and collects their
 * result blocks (the mpi layer of docs/hacking.md, "Layout: one library per layer").
 *
 * Contract. Every rank of `comm` calls sched_run with the same options.
 * Rank 0 is the master: it owns the list of cells (dispatch order, largest L
 * first, cells already done left out), hands them to idle workers on request
 * (dynamic pull), receives each result block and passes batches of finished
 * cells to `commit`. Ranks 1..P-1 are workers: they call `compute` for each
 * cell they get and send the block back. With one rank the same process
 * computes and commits. The scheduler knows MPI, cells and signals; what a
 * cell means and where results go are the callbacks' business.
 *
 * - A block is `block_doubles` doubles, the same size on every rank (the
 *   cellresult.h layout). The master delivers it to commit bit for bit as
 *   compute wrote it; commit sees cells in completion order.
 * - compute returning -1 marks the cell failed (status SCHED_CELL_FAILED): the
 *   master logs "cell C failed on rank R: <message>" once on the progress
 *   stream, hands commit a block of NaN for it, and the run goes on.
 * - commit is called (status SCHED_CELL_DONE or SCHED_CELL_FAILED) once
 *   commit_every cells have finished, with all that have by then, at most
 *   batch_max (group commit: under load the batches grow), and with what is left
 *   at the end or at a stop; without the writer thread (below) with exactly
 *   commit_every. When it returns -1 the run stops with an error on every rank.
 * - dispatched(cell, worker_rank) is called on the master for each cell sent, in
 *   order, before the commit of that cell (so the store can journal the attempt);
 *   may be NULL.
 * - Threads (writer.h): when MPI granted MPI_THREAD_FUNNELED or more and there are
 *   workers, a writer thread of the master makes every commit and dispatched call
 *   while the calling thread keeps receiving (results land straight in the slots
 *   the writer commits from) and alone calls MPI. Both callbacks then run on that
 *   one thread, never concurrently. Otherwise (MPI_Init, one rank, sync_commit)
 *   they run on the calling thread, as before.
 * - Signals (signals.h): SIGTERM, SIGINT or SIGUSR1 caught on any rank make
 *   the master stop dispatching, commit what it holds, tell every worker to
 *   start no new cell, wait for the cells being computed (at most grace_usr1_s
 *   after SIGUSR1 -- the stop SLURM's warning triggers, so it should let a
 *   normal cell finish -- or a first SIGINT (Ctrl-C), and grace_term_s after SIGTERM,
 *   which mpirun follows with SIGKILL within about 2 s; a SIGTERM or a second SIGINT
 *   during a graceful stop cuts it to grace_term_s from then), commit them, tell every
 *   worker to stop,
 *   and return SCHED_INTERRUPTED on every rank (the caller exits with
 *   AS_EXIT_RESUMABLE). Cells not finished by then are "abandoned": never
 *   committed, so the store still sees them as pending. A compute that runs
 *   long should poll sched_should_stop() between steps and return -1 when it
 *   says so; otherwise MPI_Finalize waits for it.
 * - Progress goes to `progress` (stderr when NULL) from the master every
 *   progress_every_s seconds and once at the end (sched_progress_print). A
 *   stop says when it begins what it waits for ("waiting up to 4m00s (stop
 *   grace) for the 2 running windows ..."), each progress line while stopping
 *   how much of the grace is left, and a grace that runs out how many units
 *   it abandons.
 *
 * Messages (all on a private duplicate of comm; the one-screen protocol is
 * at the top of scheduler.c): worker -> master READY / RESULT / SIGNAL / IDLE,
 * master -> worker CELL / HALT / STOP.
 *
 * Memory, allocated once per call: the master holds batch_max + 1 blocks with the
 * writer thread (2 x commit_every + 1 by default), commit_every + 1 without; each
 * worker 2 (one being computed while the previous one is sent). */
#ifndef ATTNSWEEP_SCHEDULER_H
#define ATTNSWEEP_SCHEDULER_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "errors.h"

/* Cell status values handed to commit (docs/results.md: 1 done, 2 failed). */
enum { SCHED_CELL_DONE = 1, SCHED_CELL_FAILED = 2 };

/* What sched_run returns (-1 is an error, message in err). */
enum { SCHED_COMPLETE = 0, SCHED_INTERRUPTED = 1 };

/* Worker: fill block_out[0 .. block_doubles) for `cell`, from the cell id
 * alone (never from the rank or order). Return 0, or -1 with err filled. */
typedef int (*sched_compute_fn)(void *ctx, int64_t cell, double *block_out, as_err *err);

/* Master: store n finished cells. blocks[i] holds block_doubles doubles and
 * is valid only during the call. Return 0, or -1 with err filled. */
typedef int (*sched_commit_fn)(void *ctx, const int64_t *cells, double *const *blocks,
                               const int *status, size_t n, as_err *err);

/* Master: `cell` is about to be sent to worker_rank (0 when running alone). */
typedef void (*sched_dispatched_fn)(void *ctx, int64_t cell, int worker_rank);

typedef struct {
    size_t block_doubles;          /* doubles per result block (may be 0) */
    sched_compute_fn compute;      /* needed on workers, and on rank 0 when alone */
    void *compute_ctx;
    sched_commit_fn commit;        /* needed on rank 0 */
    sched_dispatched_fn dispatched; /* optional */
    void *master_ctx;              /* passed to commit and dispatched */
    size_t commit_every;           /* cells per commit call in normal running; 0 means 8 */
    size_t batch_max;              /* at most this many per call when more wait (the
                                      writer thread is behind); 0 means 2 * commit_every */
    int sync_commit;               /* 1: commit on the receiving thread, as before the
                                      writer thread (the benches' baseline) */
    int prefetch;                  /* cells queued per worker (1..8) while cells are
                                      short (< 50 ms), else 1; 0 means 2 */
    double progress_every_s;       /* 0 means 5; negative turns periodic lines off */
    double grace_usr1_s;           /* 0 means 5; attnsweep run passes runtime.stop_grace */
    double grace_term_s;           /* 0 means 0.5 */
    FILE *progress;                /* NULL means stderr */
    const char *unit;              /* what a dispatched item is called in progress lines;
                                      NULL means "cells" */
    size_t done_before;            /* items finished by earlier runs: progress lines count
                                      them in (done and total), so totals stay the same
                                      across resumes ("12/32 windows done, 4 this run") */
} sched_opts;

typedef struct {
    size_t total;        /* cells in the master's list */
    size_t done;         /* committed with SCHED_CELL_DONE */
    size_t failed;       /* committed with SCHED_CELL_FAILED */
    size_t abandoned;    /* dispatched but not finished at a stop */
    size_t undispatched; /* never sent (a stop came first) */
    int signo;           /* the signal that stopped the run, or 0 */
    double elapsed_s;
    double compute_s;    /* sum of the compute callbacks' wall times, as the workers measured them */
    double master_cpu_s; /* CPU time the master process used (rank 0 only) */
    int threaded_commit; /* 1: a writer thread committed (writer.h) */
    size_t commit_batches, largest_batch; /* commit calls, and the most cells in one */
    double commit_s;     /* wall time inside commit */
} sched_stats;

/* Runs the sweep. On rank 0, cells[0..ncells) is the dispatch order; other
 * ranks may pass NULL, 0. Installs the signal handlers (signals.h) if the
 * caller has not. Returns SCHED_COMPLETE, SCHED_INTERRUPTED or -1 (err
 * filled) on every rank; stats (may be NULL) are meaningful on rank 0. */
int sched_run(MPI_Comm comm, const int64_t *cells, size_t ncells, const sched_opts *opts,
              sched_stats *stats, as_err *err);

/* For a compute callback: nonzero once its work will be thrown away -- the
 * master said stop, or this rank caught a signal longer ago than the grace
 * period. Cheap (one MPI_Test) but not free: call it between layers, not in
 * inner loops. Outside sched_run it reports caught signals only. */
int sched_should_stop(void);

/* What the progress line needs. */
typedef struct {
    size_t total, done, failed, in_flight;
    int workers;
    double elapsed_s;
    int final; /* the summary line at the end */
    int signo; /* nonzero once stopping */
    const char *unit; /* NULL means "cells" */
    double grace_left_s; /* while stopping: how much longer the stop waits at most */
    int abandoning; /* a second signal cut the grace short (no "press Ctrl-C again" hint) */
    size_t done_before; /* finished by earlier runs (not in total, done or the rate) */
} sched_progress;

/* The progress line: "sweep: 120/4096 cells (2 failed, 3 running), 3.1 cells/s,
 * ETA 21m23s, elapsed 38s"; while stopping "sweep: 120/4096 cells (2 failed,
 * 3 running), elapsed 38s, stopping: waiting up to 3m12s more for the 3
 * running cells". One function so it can be restyled in one place. */
void sched_progress_print(FILE *out, const sched_progress *p);

#endif
