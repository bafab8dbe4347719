/* writer.h -- the master's commit queue: results are received on one thread and
 * committed on another (one master for 2,000 workers).
 *
 * The master's main thread owns MPI: it receives every result straight into a
 * slot of this queue (preallocated once: no allocation per message), hands the
 * slot over with writer_put_result and takes a free slot for the next receive.
 * The writer thread is the only thread that calls the commit and dispatched
 * callbacks, so the only one that touches the store and HDF5 (Debian's HDF5 is not
 * thread-safe), and the only one that never calls MPI.
 *
 * Group commit: the writer commits as soon as commit_every results wait (or any
 * number, once writer_eager was called or at writer_finish), and then takes
 * everything that waits, up to batch_max: under load the batches grow and the
 * flushes, fsyncs and status files per result shrink. Each batch goes through the
 * store's commit protocol unchanged (store.h); a cell is done only when its batch's
 * commit returned, exactly as before.
 *
 * Dispatch records (writer_put_dispatch) queue in order too; the writer runs every
 * waiting one before it commits the results it took, so a cell's attempt is
 * journaled before its commit (the attempt is made durable with the next batch, as
 * store_mark_dispatched says).
 *
 * A failed commit: the writer keeps the first error, commits nothing more (the run
 * stops, as it did when the commit was synchronous) and returns every slot it is
 * given, so the main thread never waits for it; writer_failed reports it.
 *
 * Without a thread (threaded = 0: MPI granted less than MPI_THREAD_FUNNELED, a
 * master alone, or the synchronous baseline the benches measure against) the same
 * calls commit on the caller's thread inside writer_put_result: the old path.
 *
 * Memory: nslots blocks of slot_bytes, allocated by writer_create. */
#ifndef ATTNSWEEP_WRITER_H
#define ATTNSWEEP_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "scheduler.h"

typedef struct as_writer as_writer;

typedef struct {
    size_t nslots, slot_bytes;   /* receive slots; slot_bytes a multiple of 8 */
    size_t block_offset;         /* where the block starts in a slot (after a header) */
    size_t commit_every;         /* results per batch in normal running (>= 1) */
    size_t batch_max;            /* at most this many per batch (>= commit_every) */
    size_t max_dispatches;       /* dispatch records that may wait (>= 1) */
    int threaded;                /* 1: a writer thread commits; 0: the caller does */
    sched_commit_fn commit;
    sched_dispatched_fn dispatched; /* may be NULL */
    void *ctx;
} writer_opts;

/* The slot count a master needs: a batch being written (up to batch_max) and one
 * receiving; while the writer holds fewer, the rest fill up behind it. */
size_t writer_slots_for(size_t commit_every, size_t batch_max);

/* Allocates the slots (all free) and starts the thread. NULL with err on failure. */
as_writer *writer_create(const writer_opts *o, as_err *err);

unsigned char *writer_slot(as_writer *w, size_t slot);

/* A free slot for the next receive: 1 and *slot, or 0 when every slot is queued or
 * being written (the caller retries later: back-pressure). Without a thread a slot
 * is always free (writer_put_result commits before it returns). */
int writer_take_slot(as_writer *w, size_t *slot);

/* Gives back a slot taken but not used. */
void writer_return_slot(as_writer *w, size_t slot);

/* Hands over a received result (status SCHED_CELL_DONE or _FAILED; the block sits
 * at block_offset in the slot). Returns -1 with err once a commit has failed. */
int writer_put_result(as_writer *w, size_t slot, int64_t cell, int status, as_err *err);

/* Queues the dispatched callback for (cell, rank). */
void writer_put_dispatch(as_writer *w, int64_t cell, int rank);

/* From now on every result is committed as soon as the writer is free (a stop:
 * save what has arrived before anything else). */
int writer_eager(as_writer *w, as_err *err);

/* 1 (err filled) once a commit has failed, else 0. */
int writer_failed(as_writer *w, as_err *err);

/* What the writer did so far (for benches and the timings line). */
typedef struct {
    size_t batches, results, largest_batch;
    double commit_s; /* wall time inside the commit callback */
} writer_stats;
void writer_get_stats(as_writer *w, writer_stats *st);

/* Commits everything queued, stops the thread and frees w; *st (may be NULL) gets the
 * final counters. 0, or -1 with the first commit error (then the queued results were
 * dropped, not committed). */
int writer_finish(as_writer *w, writer_stats *st, as_err *err);

#endif
