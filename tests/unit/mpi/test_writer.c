/* test_writer.c -- the master's commit queue (src/mpi/writer.c), without MPI.
 *
 * - overlap: while the writer thread is inside a commit, the main thread still takes
 *   slots and queues results (the commit waits for that, event-driven, with a 5 s
 *   fail-safe: without a thread the commit runs inside writer_put_result and the main
 *   thread can never queue, so the wait runs out and the check fails -- run with
 *   TEST_WRITER_SYNC=1 to see it); what queued meanwhile goes in one batch (group
 *   commit); no slot is handed out while all are queued or being written.
 * - order: every result committed once, in the order queued, blocks intact; every
 *   dispatch record run before its cell's commit; batches of commit_every..batch_max
 *   (the last may be short); both callbacks on one thread, not the caller's.
 * - eager and finish commit what waits below commit_every.
 * - a failing commit: reported to the main thread, nothing committed after it, the
 *   error returned by writer_finish, every slot given back. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "writer.h"

enum { BLOCK = 16 };

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t *committed_order; /* cells in commit order */
    size_t ncommitted, cap;
    int *dispatched;          /* per cell: dispatch calls */
    int dispatch_after_commit, bad_blocks, commits, fail_on, other_thread;
    size_t batch_sizes[8192];
    pthread_t thread;
    int have_thread;
    /* overlap test */
    int hold_first;           /* commit 1 waits until queued_meanwhile */
    int queued_meanwhile, in_first, timed_out;
} ctx;

static double block_value(int64_t cell, size_t k) { return (double)cell * 1000.0 + (double)k; }

static void note_thread(ctx *c) {
    if (!c->have_thread) c->thread = pthread_self(), c->have_thread = 1;
    else if (!pthread_equal(c->thread, pthread_self())) c->other_thread++;
}

static int commit(void *vc, const int64_t *cells, double *const *blocks, const int *status, size_t n,
                  as_err *err) {
    ctx *c = vc;
    pthread_mutex_lock(&c->mu);
    note_thread(c);
    c->commits++;
    if ((size_t)c->commits <= sizeof c->batch_sizes / sizeof c->batch_sizes[0]) c->batch_sizes[c->commits - 1] = n;
    int call = c->commits;
    if (c->hold_first && call == 1) {
        c->in_first = 1;
        pthread_cond_broadcast(&c->cv);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        while (!c->queued_meanwhile && !c->timed_out)
            if (pthread_cond_timedwait(&c->cv, &c->mu, &until)) c->timed_out = 1;
    }
    if (c->fail_on && call == c->fail_on) {
        pthread_mutex_unlock(&c->mu);
        return as_fail(err, "synthetic store failure on commit %d", call);
    }
    for (size_t i = 0; i < n; i++) {
        if (c->ncommitted < c->cap) c->committed_order[c->ncommitted] = cells[i];
        c->ncommitted++;
        if (!c->dispatched[cells[i]]) c->dispatch_after_commit++;
        for (size_t k = 0; k < BLOCK && status[i] == 1; k++)
            if (blocks[i][k] != block_value(cells[i], k)) {
                c->bad_blocks++;
                break;
            }
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static void dispatched(void *vc, int64_t cell, int rank) {
    ctx *c = vc;
    (void)rank;
    pthread_mutex_lock(&c->mu);
    note_thread(c);
    c->dispatched[cell]++;
    pthread_mutex_unlock(&c->mu);
}

static void ctx_init(ctx *c, size_t ncells) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->cap = ncells;
    c->committed_order = calloc(ncells, sizeof *c->committed_order);
    c->dispatched = calloc(ncells, sizeof *c->dispatched);
}

static void ctx_free(ctx *c) {
    free(c->committed_order);
    free(c->dispatched);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static as_writer *make(ctx *c, size_t ce, size_t bmax, int threaded) {
    writer_opts o = {.nslots = writer_slots_for(ce, bmax), .slot_bytes = BLOCK * sizeof(double) + 8,
                     .block_offset = 8, .commit_every = ce, .batch_max = bmax, .max_dispatches = 4,
                     .threaded = threaded, .commit = commit, .dispatched = dispatched, .ctx = c};
    as_err err = {{0}};
    as_writer *w = writer_create(&o, &err);
    CHECK(w != NULL, "writer_create: %s", err.msg);
    return w;
}

/* Takes a slot (waiting while the writer is behind), fills the block, queues it. */
static int put(as_writer *w, int64_t cell, int status, as_err *err) {
    size_t slot;
    while (!writer_take_slot(w, &slot)) nanosleep(&(struct timespec){0, 100000}, NULL);
    double *b = (double *)(void *)(writer_slot(w, slot) + 8);
    for (size_t k = 0; k < BLOCK; k++) b[k] = block_value(cell, k);
    writer_put_dispatch(w, cell, 1);
    return writer_put_result(w, slot, cell, status, err);
}

static void test_overlap(int threaded) {
    ctx c;
    ctx_init(&c, 16);
    c.hold_first = 1;
    as_writer *w = make(&c, 1, 2, threaded); /* 3 slots */
    as_err err = {{0}};
    CHECK(put(w, 0, 1, &err) == 0, "put 0: %s", err.msg);
    /* the writer is now in (or about to enter) commit 1, holding slot 0 */
    pthread_mutex_lock(&c.mu);
    while (!c.in_first && !c.timed_out) pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    size_t s1, s2, s3;
    int got1 = writer_take_slot(w, &s1), got2 = got1 && writer_take_slot(w, &s2);
    int got3 = got2 && writer_take_slot(w, &s3);
    CHECK(got1 && got2, "the main thread takes slots while a commit runs");
    CHECK(!got3, "no slot is handed out while every slot is queued or being written");
    if (got1 && got2) {
        for (int i = 0; i < 2; i++) {
            size_t s = i ? s2 : s1;
            double *b = (double *)(void *)(writer_slot(w, s) + 8);
            for (size_t k = 0; k < BLOCK; k++) b[k] = block_value(1 + i, k);
            writer_put_dispatch(w, 1 + i, 1);
            CHECK(writer_put_result(w, s, 1 + i, 1, &err) == 0, "queue %d during the commit", 1 + i);
        }
    }
    pthread_mutex_lock(&c.mu);
    c.queued_meanwhile = 1;
    pthread_cond_broadcast(&c.cv);
    pthread_mutex_unlock(&c.mu);
    writer_stats st;
    CHECK(writer_finish(w, &st, &err) == 0, "finish: %s", err.msg);
    CHECK(!c.timed_out, "the main thread could not queue results while a commit ran%s",
          threaded ? "" : " (no writer thread: the old, synchronous path)");
    CHECK(c.ncommitted == 3 && c.commits == 2 && c.batch_sizes[1] == 2,
          "what queued during commit 1 goes in one batch: %zu cells in %d commits", c.ncommitted, c.commits);
    CHECK(st.batches == 2 && st.largest_batch == 2 && st.results == 3, "stats %zu batches, largest %zu",
          st.batches, st.largest_batch);
    CHECK(c.other_thread == 0 && c.have_thread && !pthread_equal(c.thread, pthread_self()),
          "callbacks on the writer thread only");
    ctx_free(&c);
}

static void test_order(void) {
    size_t n = 5000, ce = 3, bmax = 6;
    ctx c;
    ctx_init(&c, n);
    as_writer *w = make(&c, ce, bmax, 1);
    as_err err = {{0}};
    int put_failed = 0;
    for (size_t i = 0; i < n; i++) put_failed += put(w, (int64_t)i, i % 7 == 3 ? 2 : 1, &err) != 0;
    CHECK(put_failed == 0, "%d puts failed: %s", put_failed, err.msg);
    writer_stats st;
    CHECK(writer_finish(w, &st, &err) == 0, "finish: %s", err.msg);
    int in_order = c.ncommitted == n;
    for (size_t i = 0; in_order && i < n; i++) in_order = c.committed_order[i] == (int64_t)i;
    CHECK(in_order, "every result committed once, in the order queued (%zu of %zu)", c.ncommitted, n);
    CHECK(c.bad_blocks == 0, "%d blocks changed between the queue and the commit", c.bad_blocks);
    CHECK(c.dispatch_after_commit == 0, "%d cells committed before their dispatch record ran",
          c.dispatch_after_commit);
    int sizes_ok = 1;
    for (int i = 0; i < c.commits && i < 8192; i++)
        if (c.batch_sizes[i] > bmax || (i + 1 < c.commits && c.batch_sizes[i] < ce)) sizes_ok = 0;
    CHECK(sizes_ok, "batches of commit_every..batch_max cells, the last may be short (%d commits)", c.commits);
    CHECK(c.other_thread == 0 && !pthread_equal(c.thread, pthread_self()), "callbacks on one thread, the writer's");
    ctx_free(&c);
}

static void test_eager_and_finish(void) {
    ctx c;
    ctx_init(&c, 16);
    as_writer *w = make(&c, 4, 8, 1);
    as_err err = {{0}};
    for (int i = 0; i < 2; i++) put(w, i, 1, &err);
    CHECK(writer_eager(w, &err) == 0, "eager");
    for (int i = 2; i < 3; i++) put(w, i, 1, &err);
    writer_stats st;
    CHECK(writer_finish(w, &st, &err) == 0, "finish");
    CHECK(c.ncommitted == 3, "eager then finish commit what waits below commit_every (%zu of 3)", c.ncommitted);
    ctx_free(&c);

    ctx_init(&c, 16);
    w = make(&c, 4, 8, 1);
    for (int i = 0; i < 3; i++) put(w, i, 1, &err);
    CHECK(writer_finish(w, &st, &err) == 0 && c.ncommitted == 3 && c.commits == 1,
          "finish commits the 3 waiting cells in one batch (%zu in %d)", c.ncommitted, c.commits);
    ctx_free(&c);
}

static void test_failure(int threaded) {
    ctx c;
    ctx_init(&c, 64);
    c.fail_on = 2;
    as_writer *w = make(&c, 1, 2, threaded);
    as_err err = {{0}};
    int first_error_at = -1;
    for (int i = 0; i < 40; i++)
        if (put(w, i, 1, &err) != 0 && first_error_at < 0) first_error_at = i;
    as_err ferr = {{0}};
    int failed = writer_failed(w, &ferr);
    /* every slot came back: the main thread is never left waiting for a failed writer */
    size_t got = 0, slot;
    for (int tries = 0; threaded && got < writer_slots_for(1, 2) && tries < 50000; tries++) {
        if (writer_take_slot(w, &slot)) got++;
        else nanosleep(&(struct timespec){0, 100000}, NULL); /* the writer drops the last one */
    }
    as_err e2 = {{0}};
    int rc = writer_finish(w, NULL, &e2);
    CHECK(failed && strstr(ferr.msg, "synthetic store failure"), "writer_failed reports it: %s", ferr.msg);
    CHECK(first_error_at > 0, "writer_put_result returns -1 after the failure (from put %d)", first_error_at);
    CHECK(rc == -1 && strstr(e2.msg, "commit 2"), "writer_finish returns the first error: %s", e2.msg);
    CHECK(c.commits == 2, "no commit after the failing one (%d calls)", c.commits);
    CHECK(!threaded || got == writer_slots_for(1, 2), "every slot given back (%zu)", got);
    ctx_free(&c);
}

int main(void) {
    int sync = getenv("TEST_WRITER_SYNC") && !strcmp(getenv("TEST_WRITER_SYNC"), "1");
    test_overlap(!sync);
    if (!sync) {
        test_order();
        test_eager_and_finish();
        test_failure(1);
    }
    test_failure(0);
    return check_summary("test_writer");
}
