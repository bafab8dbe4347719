/* writer.c -- see writer.h.
 *
 * One mutex guards the queues; two condition variables: `work` wakes the writer
 * (a dispatch record, enough results, eager, finish), `freed` wakes a main thread
 * that waits for room in the dispatch queue. The main thread never waits for a
 * slot here: it polls writer_take_slot from its own loop, which keeps listening
 * to signals and to MPI meanwhile.
 *
 * The writer takes its work under the lock and runs the callbacks outside it, so
 * the main thread can queue and take slots while a batch is written. */
#include "writer.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

typedef struct {
    int64_t cell;
    int status;
    size_t slot;
} result_item;

typedef struct {
    int64_t cell;
    int rank;
} dispatch_item;

struct as_writer {
    writer_opts o;
    unsigned char *slots;

    pthread_mutex_t mu;
    pthread_cond_t work, freed;
    pthread_t thread;
    int started;

    /* guarded by mu */
    result_item *results;  /* ring of nslots */
    size_t r_head, r_len;
    dispatch_item *disp;   /* ring of max_dispatches */
    size_t d_head, d_len;
    size_t *free_slots, nfree;
    int eager, finishing, failed;
    as_err err;
    writer_stats st;

    /* the writer's own batch (only the committing thread touches these) */
    int64_t *b_cells;
    double **b_blocks;
    int *b_status;
    size_t *b_slot;
    dispatch_item *b_disp;
};

size_t writer_slots_for(size_t commit_every, size_t batch_max) {
    (void)commit_every; /* batch_max >= commit_every: a full batch always fits beside the receive */
    return batch_max + 1;
}

unsigned char *writer_slot(as_writer *w, size_t slot) { return w->slots + slot * w->o.slot_bytes; }

/* Runs the waiting dispatch records and commits up to batch_max waiting results
 * when there are enough of them (or `all`). Called with the lock held; returns
 * with it held. */
static void commit_one_batch(as_writer *w, int all) {
    size_t nd = w->d_len;
    for (size_t i = 0; i < nd; i++) w->b_disp[i] = w->disp[(w->d_head + i) % w->o.max_dispatches];
    w->d_head = (w->d_head + nd) % w->o.max_dispatches;
    w->d_len = 0;
    size_t nr = 0;
    if (!w->failed && w->r_len && (all || w->eager || w->r_len >= w->o.commit_every)) {
        nr = w->r_len < w->o.batch_max ? w->r_len : w->o.batch_max;
        for (size_t i = 0; i < nr; i++) {
            result_item it = w->results[(w->r_head + i) % w->o.nslots];
            w->b_cells[i] = it.cell;
            w->b_status[i] = it.status;
            w->b_slot[i] = it.slot;
            w->b_blocks[i] = (double *)(void *)(writer_slot(w, it.slot) + w->o.block_offset);
        }
        w->r_head = (w->r_head + nr) % w->o.nslots;
        w->r_len -= nr;
    }
    if (nd) pthread_cond_broadcast(&w->freed);
    int failed = w->failed;
    pthread_mutex_unlock(&w->mu);

    /* Dispatch records first: each cell's attempt is journaled before its commit. */
    if (w->o.dispatched && !failed)
        for (size_t i = 0; i < nd; i++) w->o.dispatched(w->o.ctx, w->b_disp[i].cell, w->b_disp[i].rank);
    as_err cerr = {{0}};
    int rc = 0;
    double t0 = as_monotonic_s();
    if (nr) rc = w->o.commit(w->o.ctx, w->b_cells, w->b_blocks, w->b_status, nr, &cerr);
    double dt = as_monotonic_s() - t0;

    pthread_mutex_lock(&w->mu);
    if (nr) {
        w->st.batches++;
        w->st.results += nr;
        w->st.commit_s += dt;
        if (nr > w->st.largest_batch) w->st.largest_batch = nr;
    }
    if (rc && !w->failed) {
        w->failed = 1;
        w->err = cerr;
        if (!w->err.msg[0]) snprintf(w->err.msg, sizeof w->err.msg, "commit failed without a message");
    }
    for (size_t i = 0; i < nr; i++) w->free_slots[w->nfree++] = w->b_slot[i];
    /* After a failure nothing more is committed: queued results give their slots back. */
    while (w->failed && w->r_len) {
        w->free_slots[w->nfree++] = w->results[w->r_head].slot;
        w->r_head = (w->r_head + 1) % w->o.nslots;
        w->r_len--;
    }
}

static int has_work(const as_writer *w) {
    return w->d_len || (w->r_len && (w->failed || w->eager || w->finishing || w->r_len >= w->o.commit_every));
}

static void *writer_main(void *arg) {
    as_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!has_work(w) && !w->finishing) pthread_cond_wait(&w->work, &w->mu);
        if (!has_work(w) && w->finishing) break;
        commit_one_batch(w, w->finishing);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void writer_free(as_writer *w) {
    free(w->slots);
    free(w->results);
    free(w->disp);
    free(w->free_slots);
    free(w->b_cells);
    free(w->b_blocks);
    free(w->b_status);
    free(w->b_slot);
    free(w->b_disp);
    free(w);
}

as_writer *writer_create(const writer_opts *o, as_err *err) {
    if (!o->commit || o->commit_every < 1 || o->batch_max < o->commit_every || o->max_dispatches < 1 ||
        o->nslots < o->commit_every + 1 || o->slot_bytes % 8 || o->block_offset > o->slot_bytes) {
        as_fail(err, "writer: bad options (commit_every %zu, batch_max %zu, %zu slots)", o->commit_every,
                o->batch_max, o->nslots);
        return NULL;
    }
    as_writer *w = calloc(1, sizeof *w);
    if (!w) {
        as_fail(err, "writer: out of memory");
        return NULL;
    }
    w->o = *o;
    w->slots = malloc(o->nslots * o->slot_bytes > 0 ? o->nslots * o->slot_bytes : 1);
    w->results = malloc(o->nslots * sizeof *w->results);
    w->disp = malloc(o->max_dispatches * sizeof *w->disp);
    w->free_slots = malloc(o->nslots * sizeof *w->free_slots);
    w->b_cells = malloc(o->batch_max * sizeof *w->b_cells);
    w->b_blocks = malloc(o->batch_max * sizeof *w->b_blocks);
    w->b_status = malloc(o->batch_max * sizeof *w->b_status);
    w->b_slot = malloc(o->batch_max * sizeof *w->b_slot);
    w->b_disp = malloc(o->max_dispatches * sizeof *w->b_disp);
    if (!w->slots || !w->results || !w->disp || !w->free_slots || !w->b_cells || !w->b_blocks ||
        !w->b_status || !w->b_slot || !w->b_disp) {
        as_fail(err, "scheduler: no memory for %zu result blocks of %zu bytes", o->nslots, o->slot_bytes);
        writer_free(w);
        return NULL;
    }
    for (size_t i = 0; i < o->nslots; i++) w->free_slots[i] = o->nslots - 1 - i;
    w->nfree = o->nslots;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->freed, NULL);
    if (o->threaded) {
        /* The thread blocks every signal, so the handlers (signals.h) run on the main
         * thread, which watches for them, and the writer's I/O never sees EINTR. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        w->started = pthread_create(&w->thread, NULL, writer_main, w) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!w->started) w->o.threaded = 0; /* no thread: commit on the caller's, as before */
    }
    return w;
}

int writer_take_slot(as_writer *w, size_t *slot) {
    pthread_mutex_lock(&w->mu);
    int got = w->nfree > 0;
    if (got) *slot = w->free_slots[--w->nfree];
    pthread_mutex_unlock(&w->mu);
    return got;
}

void writer_return_slot(as_writer *w, size_t slot) {
    pthread_mutex_lock(&w->mu);
    w->free_slots[w->nfree++] = slot;
    pthread_mutex_unlock(&w->mu);
}

static int failed_locked(as_writer *w, as_err *err) {
    if (w->failed && err) *err = w->err;
    return w->failed;
}

int writer_put_result(as_writer *w, size_t slot, int64_t cell, int status, as_err *err) {
    pthread_mutex_lock(&w->mu);
    /* r_len < nslots always: a slot is queued at most once */
    w->results[(w->r_head + w->r_len) % w->o.nslots] = (result_item){cell, status, slot};
    w->r_len++;
    if (w->o.threaded) {
        if (has_work(w)) pthread_cond_signal(&w->work);
    } else {
        while (has_work(w) && !w->failed) commit_one_batch(w, 0);
        if (w->failed) commit_one_batch(w, 0); /* gives the queued slots back */
    }
    int rc = failed_locked(w, err) ? -1 : 0;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void writer_put_dispatch(as_writer *w, int64_t cell, int rank) {
    pthread_mutex_lock(&w->mu);
    if (!w->o.threaded) {
        /* the old order: journaled just before the cell is sent */
        int failed = w->failed;
        pthread_mutex_unlock(&w->mu);
        if (w->o.dispatched && !failed) w->o.dispatched(w->o.ctx, cell, rank);
        return;
    }
    while (w->d_len == w->o.max_dispatches) pthread_cond_wait(&w->freed, &w->mu);
    w->disp[(w->d_head + w->d_len) % w->o.max_dispatches] = (dispatch_item){cell, rank};
    w->d_len++;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
}

int writer_eager(as_writer *w, as_err *err) {
    pthread_mutex_lock(&w->mu);
    w->eager = 1;
    if (w->o.threaded) pthread_cond_signal(&w->work);
    else
        while (has_work(w) && !w->failed) commit_one_batch(w, 1);
    int rc = failed_locked(w, err) ? -1 : 0;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int writer_failed(as_writer *w, as_err *err) {
    pthread_mutex_lock(&w->mu);
    int f = failed_locked(w, err);
    pthread_mutex_unlock(&w->mu);
    return f;
}

void writer_get_stats(as_writer *w, writer_stats *st) {
    pthread_mutex_lock(&w->mu);
    *st = w->st;
    pthread_mutex_unlock(&w->mu);
}

int writer_finish(as_writer *w, writer_stats *st, as_err *err) {
    if (!w) return 0;
    pthread_mutex_lock(&w->mu);
    w->finishing = 1;
    if (w->o.threaded) {
        pthread_cond_signal(&w->work);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        pthread_mutex_lock(&w->mu);
    } else {
        while (has_work(w)) commit_one_batch(w, 1);
    }
    int rc = failed_locked(w, err) ? -1 : 0;
    if (st) *st = w->st;
    pthread_mutex_unlock(&w->mu);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->freed);
    writer_free(w);
    return rc;
}
