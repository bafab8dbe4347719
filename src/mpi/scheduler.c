/* scheduler.c -- see scheduler.h.
 *
 * The protocol (all messages on a private duplicate of the communicator):
 *
 *   worker -> master, tag UP, bytes: up_header [+ payload]
 *     READY        first message; the master answers with up to `prefetch` CELLs
 *     RESULT_OK    payload = the block; the master answers with the next CELL
 *     RESULT_FAIL  payload = the error message (text)
 *     SIGNAL       this worker caught a signal; the master starts stopping
 *     ABANDON      this worker caught a signal that abandons the running cells
 *                  (SIGTERM, a second SIGINT): the master cuts the grace short
 *     IDLE         after HALT: nothing runs here any more; cells still queued
 *                  here were never started
 *   master -> worker, tag DOWN, two int64 {kind, value}
 *     CELL  c      compute cell c (queued FIFO behind the ones already given)
 *     HALT         start no new cell; finish the running one, then send IDLE
 *     STOP  r      leave sched_run with result r (the last message a worker gets)
 *
 *   Normal end: the list is empty and a worker has no cell out -> STOP.
 *   Stop: signal on any rank -> master commits, sends HALT to all; each worker
 *   finishes its running cell, sends RESULT then IDLE -> STOP. After the grace
 *   period the master sends STOP to the workers that have not answered and
 *   returns; their late results are dropped (the cells stay pending).
 *
 * Messages between one pair of ranks on one tag arrive in the order sent
 * (MPI non-overtaking), which is what makes "results before IDLE" and
 * "CELLs before HALT" hold without sequence numbers.
 *
 * No rank spins: Open MPI's blocking waits poll at full speed and would eat
 * a core of an oversubscribed node, so every wait is MPI_Test plus, while
 * nothing happens, 4 sched_yield()s (a reply often comes within microseconds:
 * 1 worker moved 4k trivial cells/s without them, 15-50k with) and then a
 * nanosleep that doubles from 20 us to 1 ms. */
#include "scheduler.h"

#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "clock.h"
#include "signals.h"
#include "writer.h"

enum { TAG_UP = 1, TAG_DOWN = 2 };
enum { UP_READY = 1, UP_RESULT_OK, UP_RESULT_FAIL, UP_SIGNAL, UP_IDLE, UP_ABANDON };
enum { DOWN_CELL = 1, DOWN_HALT, DOWN_STOP };
enum { PREFETCH_MAX = 8 };
#define SLEEP_MIN_NS 20000L
#define SLEEP_MAX_NS 1000000L
enum { YIELDS_BEFORE_SLEEP = 4 };
#define QUEUE_BELOW_S 0.05 /* queue a second cell per worker only for cells shorter than this */

typedef struct {
    int64_t cell;
    int32_t kind;
    int32_t signo;         /* a signal this worker caught, or 0 */
    double compute_s;
    int64_t payload_bytes; /* block or message bytes that follow */
} up_header;               /* 32 bytes: the block after it stays 8-byte aligned */

/* ---- small helpers ---- */

typedef struct {
    long ns;
    int yields;
} backoff;

static void backoff_reset(backoff *b) {
    b->ns = SLEEP_MIN_NS;
    b->yields = 0;
}

static void backoff_sleep(backoff *b) {
    if (b->yields < YIELDS_BEFORE_SLEEP) {
        b->yields++;
        sched_yield();
        return;
    }
    struct timespec ts = {0, b->ns};
    nanosleep(&ts, NULL); /* EINTR from a signal is fine: the caller re-checks */
    b->ns = b->ns * 2 > SLEEP_MAX_NS ? SLEEP_MAX_NS : b->ns * 2;
}

/* Waits for a request without spinning. */
static void wait_quietly(MPI_Request *req, MPI_Status *st) {
    backoff b;
    backoff_reset(&b);
    for (;;) {
        int flag = 0;
        MPI_Test(req, &flag, st ? st : MPI_STATUS_IGNORE);
        if (flag) return;
        backoff_sleep(&b);
    }
}

static size_t payload_capacity(size_t block_doubles) {
    size_t block = block_doubles * sizeof(double);
    return block > sizeof(as_err) ? block : sizeof(as_err);
}

typedef struct {
    size_t block_doubles, commit_every, batch_max;
    int prefetch, sync_commit;
    double progress_every_s, grace_usr1_s, grace_term_s;
    FILE *progress;
    const char *unit;
    size_t done_before;
} resolved_opts;

static int resolve_opts(const sched_opts *o, int rank, int size, resolved_opts *r, as_err *err) {
    if (!o) return as_fail(err, "scheduler: no options given");
    r->block_doubles = o->block_doubles;
    r->commit_every = o->commit_every ? o->commit_every : 8;
    r->batch_max = o->batch_max ? o->batch_max : 2 * r->commit_every;
    if (r->batch_max < r->commit_every) r->batch_max = r->commit_every;
    r->sync_commit = o->sync_commit;
    r->prefetch = o->prefetch ? o->prefetch : 2;
    r->progress_every_s = o->progress_every_s != 0 ? o->progress_every_s : 5.0;
    r->grace_usr1_s = o->grace_usr1_s > 0 ? o->grace_usr1_s : 5.0;
    r->grace_term_s = o->grace_term_s > 0 ? o->grace_term_s : 0.5;
    r->progress = o->progress ? o->progress : stderr;
    r->unit = o->unit ? o->unit : "cells";
    r->done_before = o->done_before;
    if (r->prefetch < 1 || r->prefetch > PREFETCH_MAX)
        return as_fail(err, "scheduler: prefetch %d is outside 1..%d", o->prefetch, PREFETCH_MAX);
    if (r->block_doubles > ((size_t)1 << 28))
        return as_fail(err, "scheduler: block of %zu doubles is over one MPI message (2 GiB)",
                       r->block_doubles);
    if ((rank != 0 || size == 1) && !o->compute)
        return as_fail(err, "scheduler: rank %d computes cells but has no compute callback", rank);
    if (rank == 0 && !o->commit)
        return as_fail(err, "scheduler: rank 0 commits cells but has no commit callback");
    return 0;
}

/* The grace a stop begun by signo gives the running cells (signals.h: graceful or not). */
static double grace_for(const resolved_opts *o, int signo) {
    return signals_graceful(signo) ? o->grace_usr1_s : o->grace_term_s;
}

/* Seconds a stop begun at t0 by signo still waits at `now`: its own grace, cut short to the
 * short grace after an abandoning signal (abandon_t0 >= 0). Negative: over. */
static double stop_left(const resolved_opts *o, int signo, double t0, double abandon_t0, double now) {
    double left = t0 + grace_for(o, signo) - now;
    if (abandon_t0 >= 0 && abandon_t0 + o->grace_term_s - now < left) left = abandon_t0 + o->grace_term_s - now;
    return left;
}

/* The hint a Ctrl-C stop adds to its lines (none once abandoning, or for other signals). */
#define AGAIN_HINT "press Ctrl-C again to abandon the running cells"
static int wants_hint(int signo, int abandoning) { return signo == SIGINT && !abandoning; }

/* ---- progress ---- */

static void format_duration(char *out, size_t n, double s) {
    if (!(s >= 0) || s > 1e8) {
        snprintf(out, n, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, n, "%lds", t);
}

/* A grace period for the stop lines: "0.5 s", "30 s", "4m00s". */
static void format_grace(char *out, size_t n, double s) {
    if (s < 60) snprintf(out, n, "%.3g s", s);
    else format_duration(out, n, s);
}

void sched_progress_print(FILE *out, const sched_progress *p) {
    size_t finished = p->done + p->failed;
    double rate = p->elapsed_s > 0 ? (double)finished / p->elapsed_s : 0.0;
    char eta[32], elapsed[32];
    format_duration(eta, sizeof eta, rate > 0 ? (double)(p->total - finished) / rate : -1.0);
    format_duration(elapsed, sizeof elapsed, p->elapsed_s);
    const char *u = p->unit ? p->unit : "cells";
    /* "12/32 windows done, 4 this run" after a resume (totals that stay the same), else "4/32 windows" */
    char count[128];
    if (p->done_before)
        snprintf(count, sizeof count, "%zu/%zu %s done, %zu this run", p->done_before + p->done,
                 p->done_before + p->total, u, p->done);
    else
        snprintf(count, sizeof count, "%zu/%zu %s", finished, p->total, u);
    if (p->final)
        fprintf(out, "sweep %s: %s (%zu failed) in %s, %.3g %s/s, %d worker%s%s%s\n",
                p->signo ? "interrupted" : "finished", count, p->failed, elapsed, rate, u,
                p->workers, p->workers == 1 ? "" : "s", p->signo ? ", signal " : "",
                p->signo ? strsignal(p->signo) : "");
    else if (!p->signo)
        fprintf(out, "sweep: %s (%zu failed, %zu running), %.3g %s/s, ETA %s, elapsed %s\n", count,
                p->failed, p->in_flight, rate, u, eta, elapsed);
    else {
        /* Stopping: no ETA, but what the stop still waits for and for how long at most. */
        char left[32];
        format_grace(left, sizeof left, p->grace_left_s > 0 ? p->grace_left_s : 0);
        fprintf(out, "sweep: %s (%zu failed, %zu running), elapsed %s, stopping: %swaiting up to "
                "%s more for the %zu running %s\n",
                count, p->failed, p->in_flight, elapsed, wants_hint(p->signo, p->abandoning) ? AGAIN_HINT "; " : "", left,
                p->in_flight, u);
    }
    fflush(out);
}

/* ---- state shared with sched_should_stop ---- */

typedef struct worker_state worker_state;
typedef struct master_state master_state;
static worker_state *active_worker; /* set while a worker is inside sched_run */
static master_state *active_alone;  /* set while rank 0 computes alone */
static const resolved_opts *active_opts;
static int worker_poll_master(worker_state *w);
static void alone_stop_begins(master_state *m, int signo);
static void note_abandon(master_state *m, double t);

int sched_should_stop(void) {
    int stop = 0;
    if (active_worker) stop = worker_poll_master(active_worker);
    int signo = signals_caught();
    if (signo && active_alone) alone_stop_begins(active_alone, signo); /* says so, once */
    if (signo && active_alone && signals_abandon_at() >= 0) note_abandon(active_alone, signals_abandon_at());
    /* A worker's grace is the master's to end (its STOP arrives through the poll
     * above): a worker timing its own copy from its own catch of the signal ran
     * out a few ms before the master and gave its cell up unannounced. */
    if (!stop && signo && !active_worker)
        stop = !active_opts || stop_left(active_opts, signo, signals_caught_at(), signals_abandon_at(),
                                         as_monotonic_s()) <= 0;
    return stop;
}

/* ---- the worker ---- */

struct worker_state {
    MPI_Comm comm;
    int64_t down[2];
    MPI_Request down_req;
    int64_t queue[PREFETCH_MAX + 2]; /* FIFO of cells given but not started */
    int qhead, qlen;
    int halted, stopped;
    int64_t stop_result;
};

/* Takes in every message the master has sent so far. Returns w->stopped. */
static int worker_poll_master(worker_state *w) {
    while (!w->stopped) {
        int flag = 0;
        MPI_Test(&w->down_req, &flag, MPI_STATUS_IGNORE);
        if (!flag) break;
        if (w->down[0] == DOWN_CELL) {
            /* The master never has more than prefetch cells out per worker. */
            int cap = (int)(sizeof w->queue / sizeof w->queue[0]);
            if (w->qlen < cap) {
                w->queue[(w->qhead + w->qlen) % cap] = w->down[1];
                w->qlen++;
            }
        } else if (w->down[0] == DOWN_HALT) {
            w->halted = 1;
        } else {
            w->stopped = 1;
            w->stop_result = w->down[1];
            break; /* STOP is the last message: post no new receive */
        }
        MPI_Irecv(w->down, 2, MPI_INT64_T, 0, TAG_DOWN, w->comm, &w->down_req);
    }
    return w->stopped;
}

static void send_small(MPI_Comm comm, int32_t kind, int64_t cell, int signo) {
    up_header h = {.cell = cell, .kind = kind, .signo = signo, .compute_s = 0, .payload_bytes = 0};
    MPI_Send(&h, (int)sizeof h, MPI_BYTE, 0, TAG_UP, comm);
}

/* Waits for a result send to complete; returns 0 if a STOP came first. */
static int worker_wait_send(worker_state *w, MPI_Request *req) {
    backoff b;
    backoff_reset(&b);
    while (*req != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (flag) break;
        if (worker_poll_master(w)) return 0;
        backoff_sleep(&b);
    }
    return 1;
}

static int worker_loop(MPI_Comm comm, const sched_opts *o, const resolved_opts *r, as_err *err) {
    size_t slot_bytes = sizeof(up_header) + payload_capacity(r->block_doubles);
    unsigned char *buf[2];
    buf[0] = malloc(slot_bytes);
    buf[1] = malloc(slot_bytes);
    MPI_Request send_req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    worker_state w;
    memset(&w, 0, sizeof w);
    w.comm = comm;
    int out_of_memory = !buf[0] || !buf[1];

    /* Everyone sends READY and takes part in the protocol even without
     * memory, so the master is never left waiting; such a worker reports
     * every cell failed. */
    MPI_Irecv(w.down, 2, MPI_INT64_T, 0, TAG_DOWN, comm, &w.down_req);
    active_worker = &w;
    active_opts = r;
    send_small(comm, UP_READY, -1, 0);

    int told_signal = 0, told_abandon = 0, sent_idle = 0, next_buf = 0;
    backoff b;
    backoff_reset(&b);
    while (!worker_poll_master(&w)) {
        int signo = signals_caught();
        if (signo && !told_signal) {
            send_small(comm, UP_SIGNAL, -1, signo);
            told_signal = 1;
        }
        if (signo && !told_abandon && signals_abandon_at() >= 0) {
            send_small(comm, UP_ABANDON, -1, signo);
            told_abandon = 1;
        }
        if (w.halted || signo) {
            if (!sent_idle) {
                send_small(comm, UP_IDLE, -1, signo);
                sent_idle = 1;
            }
            backoff_sleep(&b); /* wait for STOP */
            continue;
        }
        if (w.qlen == 0) {
            backoff_sleep(&b);
            continue;
        }
        backoff_reset(&b);
        int cap = (int)(sizeof w.queue / sizeof w.queue[0]);
        int64_t cell = w.queue[w.qhead];
        w.qhead = (w.qhead + 1) % cap;
        w.qlen--;

        /* This buffer's previous result must be out before we overwrite it;
         * the other one may still be travelling while we compute. A master
         * that gave up on us (STOP after the grace period) never receives
         * it: keep listening to it meanwhile. */
        if (!worker_wait_send(&w, &send_req[next_buf])) break;
        unsigned char *slot = buf[next_buf];
        up_header h = {.cell = cell, .kind = UP_RESULT_OK, .signo = 0};
        as_err cerr = {{0}};
        double t0 = as_monotonic_s();
        int rc = out_of_memory
                     ? as_fail(&cerr, "scheduler: no memory for a %zu-byte result buffer", slot_bytes)
                     : o->compute(o->compute_ctx, cell, (double *)(void *)(slot + sizeof h), &cerr);
        h.compute_s = as_monotonic_s() - t0;
        if (worker_poll_master(&w)) break; /* stopped while computing: the result is not wanted */
        if (rc != 0 && (signals_caught() || w.halted) && sched_should_stop())
            continue; /* gave up because of the stop: the cell stays pending, not failed */
        if (rc == 0) {
            h.payload_bytes = (int64_t)(r->block_doubles * sizeof(double));
        } else {
            if (!cerr.msg[0]) snprintf(cerr.msg, sizeof cerr.msg, "compute failed without a message");
            h.kind = UP_RESULT_FAIL;
            h.payload_bytes = (int64_t)strlen(cerr.msg) + 1;
            if (!out_of_memory) memcpy(slot + sizeof h, cerr.msg, (size_t)h.payload_bytes);
        }
        h.signo = signals_caught();
        if (out_of_memory) {
            /* Only the header: the master reads an empty message as this failure. */
            h.payload_bytes = 0;
            MPI_Send(&h, (int)sizeof h, MPI_BYTE, 0, TAG_UP, comm);
            continue;
        }
        memcpy(slot, &h, sizeof h);
        MPI_Isend(slot, (int)(sizeof h + (size_t)h.payload_bytes), MPI_BYTE, 0, TAG_UP, comm,
                  &send_req[next_buf]);
        next_buf ^= 1;
    }
    active_worker = NULL;
    active_opts = NULL;

    /* After a normal STOP the master has received every result we sent. After
     * a stop at the end of the grace period it may not have, and never will:
     * Open MPI cannot cancel an unmatched large send (MPI_Cancel leaves it
     * pending forever), so such a request is released with MPI_Request_free,
     * which lets MPI_Finalize go through, and its buffer is left alone. */
    int abandoned_send = 0;
    for (int i = 0; i < 2; i++) {
        if (send_req[i] == MPI_REQUEST_NULL) continue;
        if (w.stop_result == SCHED_COMPLETE) {
            wait_quietly(&send_req[i], NULL);
            continue;
        }
        int flag = 0;
        MPI_Test(&send_req[i], &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            MPI_Request_free(&send_req[i]);
            abandoned_send = 1;
        }
    }
    if (!abandoned_send) {
        free(buf[0]);
        free(buf[1]);
    }
    if (w.stop_result < 0) return as_fail(err, "scheduler: rank 0 stopped the run after an error");
    return (int)w.stop_result;
}

/* ---- the master ---- */

typedef struct {
    int64_t out[PREFETCH_MAX]; /* cells sent, oldest first */
    int nout;
    int ready, halted, stopped;
} worker_book;

struct master_state {
    MPI_Comm comm;
    const sched_opts *o;
    const resolved_opts *r;
    const int64_t *cells;
    size_t ncells, next;
    int nworkers; /* ranks 1..nworkers */
    worker_book *book;

    /* the receive slots and the commits (writer.h): results are received straight
     * into a slot, which goes to the writer as it is */
    as_writer *wr;
    size_t slot_bytes;
    writer_stats ws;

    MPI_Request recv_req;
    size_t recv_slot;
    int have_slot; /* recv_slot is ours (a receive is posted into it, or will be) */

    double recent_compute_s; /* moving average of cell compute times; -1 before the first */
    int stopping, signo;
    double stop_t0, t_start, next_progress;
    double abandon_t0; /* when a signal cut the grace short (SIGTERM, a second SIGINT); -1 */
    size_t in_flight;
    sched_stats st;
};

static unsigned char *slot_at(master_state *m, size_t i) { return writer_slot(m->wr, i); }

/* Commits what is queued and stops the writer; rc is the run's result so far. The
 * first error wins: after a failed run the finished cells are still kept if the
 * store can (err then keeps the run's message). */
static int master_finish_writer(master_state *m, int rc, as_err *err) {
    as_err werr = {{0}};
    int wrc = writer_finish(m->wr, &m->ws, &werr);
    m->wr = NULL;
    if (rc < 0) return rc;
    if (wrc) {
        *err = werr;
        return -1;
    }
    return rc;
}

static void master_report(master_state *m, int final) {
    double now = as_monotonic_s();
    sched_progress p = {.total = m->st.total, .done = m->st.done, .failed = m->st.failed,
                        .in_flight = m->in_flight, .workers = m->nworkers > 0 ? m->nworkers : 1,
                        .elapsed_s = now - m->t_start, .final = final,
                        .signo = m->signo, .unit = m->r->unit,
                        .grace_left_s = m->signo ? stop_left(m->r, m->signo, m->stop_t0, m->abandon_t0, now) : 0,
                        .abandoning = m->abandon_t0 >= 0,
                        .done_before = m->r->done_before};
    sched_progress_print(m->r->progress, &p);
}

/* The line a stop starts with: what it waits for, and for how long at most. `running` units
 * are being computed; `queued` ones were sent but not started and are dropped (pending). */
static void announce_stop(master_state *m, size_t running, size_t queued) {
    char grace[32];
    format_grace(grace, sizeof grace, grace_for(m->r, m->signo));
    const char *u = m->r->unit;
    if (running == 0)
        fprintf(m->r->progress, "sweep: %s: stopping: no new %s, none running\n", strsignal(m->signo), u);
    else
        fprintf(m->r->progress,
                "sweep: %s: stopping: no new %s; waiting up to %s (stop grace) for the %zu running %s "
                "to finish, then abandoning the rest (they stay pending)%s\n",
                strsignal(m->signo), u, grace, running, u,
                wants_hint(m->signo, m->abandon_t0 >= 0) ? "; " AGAIN_HINT : "");
    if (queued)
        fprintf(m->r->progress, "sweep: %zu queued %s not started (they stay pending)\n", queued, u);
    fflush(m->r->progress);
}

/* A signal that abandons the running cells, noticed once (the grace it cuts short says so;
 * a stop begun by SIGTERM has the short grace already). */
static void note_abandon(master_state *m, double t) {
    if (!m->stopping || m->abandon_t0 >= 0 || !signals_graceful(m->signo)) return;
    m->abandon_t0 = t;
    char grace[32];
    format_grace(grace, sizeof grace, m->r->grace_term_s);
    fprintf(m->r->progress, "sweep: stop signal again: abandoning the %zu running %s within %s (they stay "
            "pending)\n", m->in_flight, m->r->unit, grace);
    fflush(m->r->progress);
}

static void progress_if_due(master_state *m) {
    if (m->r->progress_every_s < 0) return;
    double now = as_monotonic_s();
    if (now < m->next_progress) return;
    master_report(m, 0);
    m->next_progress = now + m->r->progress_every_s;
}

/* Hands a finished cell to the writer (the block is already in its slot). */
static int batch_add(master_state *m, size_t slot, int64_t cell, int status, as_err *err) {
    double *block = (double *)(void *)(slot_at(m, slot) + sizeof(up_header));
    if (status == SCHED_CELL_FAILED)
        for (size_t k = 0; k < m->r->block_doubles; k++) block[k] = NAN;
    if (status == SCHED_CELL_DONE) m->st.done++;
    else m->st.failed++;
    return writer_put_result(m->wr, slot, cell, status, err);
}

static void send_down(master_state *m, int rank, int64_t kind, int64_t value) {
    int64_t msg[2] = {kind, value};
    MPI_Send(msg, 2, MPI_INT64_T, rank, TAG_DOWN, m->comm);
}

static void stop_worker(master_state *m, int rank, int64_t result) {
    worker_book *wb = &m->book[rank - 1];
    if (wb->stopped) return;
    send_down(m, rank, DOWN_STOP, result);
    m->st.abandoned += (size_t)wb->nout;
    m->in_flight -= (size_t)wb->nout;
    wb->nout = 0;
    wb->stopped = 1;
}

/* Tops up a worker's queue. A queued cell waits behind the running one even
 * when another worker frees up first, so cells are queued (up to prefetch)
 * only while recent cells are short -- where the round trip to the master
 * (0.1-2 ms) would otherwise idle the worker -- and not near the end of the
 * list. Measured: 4 workers, cells of 1 s and 0.25 s: always queueing two
 * took 1.5x the greedy makespan. */
static void dispatch_to(master_state *m, int rank) {
    worker_book *wb = &m->book[rank - 1];
    if (m->stopping || !wb->ready || wb->stopped) return;
    int short_cells = m->recent_compute_s >= 0 && m->recent_compute_s < QUEUE_BELOW_S;
    int near_end = m->ncells - m->next <= (size_t)m->nworkers * (size_t)m->r->prefetch;
    int target = short_cells && !near_end ? m->r->prefetch : 1;
    while (wb->nout < target && m->next < m->ncells) {
        int64_t cell = m->cells[m->next++];
        writer_put_dispatch(m->wr, cell, rank);
        send_down(m, rank, DOWN_CELL, cell);
        wb->out[wb->nout++] = cell;
        m->in_flight++;
    }
    if (wb->nout == 0 && m->next == m->ncells) stop_worker(m, rank, SCHED_COMPLETE);
}

static int begin_stop(master_state *m, int signo, as_err *err) {
    if (m->stopping) return 0;
    m->stopping = 1;
    m->signo = signo;
    m->stop_t0 = as_monotonic_s();
    size_t running = 0; /* a worker computes one of its cells; the others wait in its queue */
    for (int rank = 1; rank <= m->nworkers; rank++)
        running += (size_t)(m->book[rank - 1].nout > 0 && !m->book[rank - 1].stopped);
    announce_stop(m, running, m->in_flight - running);
    if (writer_eager(m->wr, err) != 0) return -1; /* save what we have before anything else */
    for (int rank = 1; rank <= m->nworkers; rank++) {
        worker_book *wb = &m->book[rank - 1];
        if (wb->stopped || wb->halted) continue;
        send_down(m, rank, DOWN_HALT, 0);
        wb->halted = 1;
    }
    return 0;
}

static int all_stopped(const master_state *m) {
    for (int i = 0; i < m->nworkers; i++)
        if (!m->book[i].stopped) return 0;
    return 1;
}

/* One message from a worker, sitting in slot m->recv_slot. */
static int handle_up(master_state *m, const MPI_Status *status, as_err *err) {
    int rank = status->MPI_SOURCE;
    if (rank < 1 || rank > m->nworkers) return as_fail(err, "scheduler: message from unknown rank %d", rank);
    worker_book *wb = &m->book[rank - 1];
    up_header h;
    memcpy(&h, slot_at(m, m->recv_slot), sizeof h);
    if (h.signo && !m->stopping && begin_stop(m, h.signo, err) != 0) return -1;
    if (wb->stopped) return 0; /* a late message from a worker already told to stop */

    switch (h.kind) {
    case UP_READY:
        wb->ready = 1;
        dispatch_to(m, rank);
        return 0;
    case UP_SIGNAL:
        return m->stopping ? 0 : begin_stop(m, h.signo ? h.signo : SIGTERM, err);
    case UP_ABANDON:
        note_abandon(m, as_monotonic_s());
        return 0;
    case UP_IDLE:
        stop_worker(m, rank, m->stopping ? SCHED_INTERRUPTED : SCHED_COMPLETE);
        return 0;
    case UP_RESULT_OK:
    case UP_RESULT_FAIL:
        break;
    default:
        return as_fail(err, "scheduler: rank %d sent an unknown message kind %d", rank, (int)h.kind);
    }

    /* Results come back in the order the cells were sent to this worker. */
    if (wb->nout == 0 || wb->out[0] != h.cell)
        return as_fail(err, "scheduler: rank %d returned cell %lld, which it was not computing",
                       rank, (long long)h.cell);
    memmove(wb->out, wb->out + 1, (size_t)(wb->nout - 1) * sizeof wb->out[0]);
    wb->nout--;
    m->in_flight--;

    int count = 0;
    MPI_Get_count(status, MPI_BYTE, &count);
    int cell_status = SCHED_CELL_DONE;
    if (h.kind == UP_RESULT_FAIL) {
        const char *msg = (const char *)slot_at(m, m->recv_slot) + sizeof h;
        if (h.payload_bytes == 0) msg = "no memory on the worker for a result buffer";
        /* the text arrived NUL-terminated; make sure before printing it */
        slot_at(m, m->recv_slot)[m->slot_bytes - 1] = 0;
        fprintf(m->r->progress, "sweep: cell %lld failed on rank %d: %s\n", (long long)h.cell, rank, msg);
        fflush(m->r->progress);
        cell_status = SCHED_CELL_FAILED;
    } else if ((size_t)count != sizeof h + m->r->block_doubles * sizeof(double)) {
        return as_fail(err, "scheduler: rank %d sent %d bytes for cell %lld, expected %zu", rank, count,
                       (long long)h.cell, sizeof h + m->r->block_doubles * sizeof(double));
    }
    m->st.compute_s += h.compute_s;
    m->recent_compute_s = m->recent_compute_s < 0 ? h.compute_s
                                                  : 0.75 * m->recent_compute_s + 0.25 * h.compute_s;
    m->have_slot = 0;
    if (batch_add(m, m->recv_slot, h.cell, cell_status, err) != 0) return -1;
    dispatch_to(m, rank); /* does nothing once stopping */
    return 0;
}

static void master_free(master_state *m) {
    as_err ignored;
    if (m->wr) writer_finish(m->wr, NULL, &ignored);
    free(m->book);
}

/* Alone, the stop begins inside the compute callback (its sched_should_stop) or between
 * cells; either way the line says what the stop waits for. */
static void alone_stop_begins(master_state *m, int signo) {
    if (m->stopping) return;
    m->stopping = 1;
    m->signo = signo;
    m->stop_t0 = signals_caught_at();
    announce_stop(m, m->in_flight, 0);
}

static int master_alone(master_state *m, as_err *err) {
    const sched_opts *o = m->o;
    active_opts = m->r;
    active_alone = m;
    while (m->next < m->ncells) {
        int signo = signals_caught();
        if (signo) {
            alone_stop_begins(m, signo);
            break;
        }
        int64_t cell = m->cells[m->next++];
        writer_put_dispatch(m->wr, cell, 0);
        size_t slot = 0;
        (void)writer_take_slot(m->wr, &slot); /* alone the writer has no thread: one is free */
        double *block = (double *)(void *)(slot_at(m, slot) + sizeof(up_header));
        as_err cerr = {{0}};
        m->in_flight = 1;
        double t0 = as_monotonic_s();
        int rc = o->compute(o->compute_ctx, cell, block, &cerr);
        m->st.compute_s += as_monotonic_s() - t0;
        m->in_flight = 0;
        if (rc != 0 && sched_should_stop()) { /* gave up because of the signal: stays pending */
            char grace[32];
            format_grace(grace, sizeof grace, m->abandon_t0 >= 0 ? m->r->grace_term_s : grace_for(m->r, m->signo));
            fprintf(m->r->progress, "sweep: stop grace of %s over: abandoning 1 running %s (pending "
                    "again)\n", grace, m->r->unit);
            fflush(m->r->progress);
            writer_return_slot(m->wr, slot);
            m->st.abandoned++;
            continue;
        }
        if (rc != 0) {
            fprintf(m->r->progress, "sweep: cell %lld failed on rank 0: %s\n", (long long)cell,
                    cerr.msg[0] ? cerr.msg : "compute failed without a message");
            fflush(m->r->progress);
        }
        if (batch_add(m, slot, cell, rc == 0 ? SCHED_CELL_DONE : SCHED_CELL_FAILED, err) != 0) {
            active_opts = NULL;
            active_alone = NULL;
            return master_finish_writer(m, -1, err);
        }
        progress_if_due(m);
    }
    active_opts = NULL;
    active_alone = NULL;
    return master_finish_writer(m, m->stopping ? SCHED_INTERRUPTED : SCHED_COMPLETE, err);
}

/* Posts the receive into a free slot; with none free (the writer is behind) it
 * stays unposted and the loop tries again: the workers' sends wait meanwhile. */
static void post_receive(master_state *m) {
    if (m->recv_req != MPI_REQUEST_NULL) return;
    if (!m->have_slot && !(m->have_slot = writer_take_slot(m->wr, &m->recv_slot))) return;
    MPI_Irecv(slot_at(m, m->recv_slot), (int)m->slot_bytes, MPI_BYTE, MPI_ANY_SOURCE, TAG_UP, m->comm,
              &m->recv_req);
}

static int master_loop(master_state *m, as_err *err) {
    int failed = 0;
    backoff b;
    backoff_reset(&b);
    while (!all_stopped(m)) {
        int progressed = 0;
        for (;;) {
            post_receive(m);
            if (m->recv_req == MPI_REQUEST_NULL) break;
            int flag = 0;
            MPI_Status status;
            MPI_Test(&m->recv_req, &flag, &status);
            if (!flag) break;
            progressed = 1;
            if (handle_up(m, &status, err) != 0) {
                failed = 1;
                break;
            }
        }
        if (failed || writer_failed(m->wr, err)) {
            failed = 1;
            break;
        }
        int signo = signals_caught();
        if (signo && !m->stopping && begin_stop(m, signo, err) != 0) {
            failed = 1;
            break;
        }
        if (m->stopping && signals_abandon_at() >= 0) note_abandon(m, signals_abandon_at());
        if (m->stopping && !all_stopped(m) &&
            stop_left(m->r, m->signo, m->stop_t0, m->abandon_t0, as_monotonic_s()) < 0) {
            char grace[32];
            format_grace(grace, sizeof grace, m->abandon_t0 >= 0 ? m->r->grace_term_s : grace_for(m->r, m->signo));
            fprintf(m->r->progress, "sweep: stop grace of %s over: abandoning %zu running %s (pending "
                    "again)\n", grace, m->in_flight, m->r->unit);
            fflush(m->r->progress);
            for (int rank = 1; rank <= m->nworkers; rank++) stop_worker(m, rank, SCHED_INTERRUPTED);
        }
        progress_if_due(m);
        if (progressed) backoff_reset(&b);
        else backoff_sleep(&b);
    }
    if (failed) {
        /* Tell everyone to go; a worker in the middle of a cell hears it when done. */
        for (int rank = 1; rank <= m->nworkers; rank++) stop_worker(m, rank, -1);
    }
    if (m->recv_req != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Test(&m->recv_req, &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            MPI_Cancel(&m->recv_req);
            wait_quietly(&m->recv_req, NULL);
        }
    }
    /* After a failure the finished cells are still kept if the store can. */
    return master_finish_writer(m, failed ? -1 : m->stopping ? SCHED_INTERRUPTED : SCHED_COMPLETE, err);
}

static int master_init(master_state *m, MPI_Comm comm, int size, const int64_t *cells, size_t ncells,
                       const sched_opts *o, const resolved_opts *r, as_err *err) {
    memset(m, 0, sizeof *m);
    m->comm = comm;
    m->o = o;
    m->r = r;
    m->cells = cells;
    m->ncells = ncells;
    m->nworkers = size - 1;
    m->st.total = ncells;
    m->slot_bytes = sizeof(up_header) + payload_capacity(r->block_doubles);
    m->slot_bytes = (m->slot_bytes + 7) / 8 * 8;
    m->book = calloc((size_t)(m->nworkers > 0 ? m->nworkers : 1), sizeof *m->book);
    if (!m->book) return as_fail(err, "scheduler: no memory for %d workers", m->nworkers);
    /* A writer thread when MPI allows one (only this thread calls MPI: FUNNELED);
     * else, alone, or asked to (sync_commit), the commit runs here as before. */
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    int threaded = size > 1 && !r->sync_commit && level >= MPI_THREAD_FUNNELED;
    writer_opts wo = {.slot_bytes = m->slot_bytes, .block_offset = sizeof(up_header),
                      .commit_every = r->commit_every,
                      .batch_max = threaded ? r->batch_max : r->commit_every,
                      .max_dispatches = (size_t)(m->nworkers > 0 ? m->nworkers : 1) * PREFETCH_MAX + 16,
                      .threaded = threaded, .commit = o->commit, .dispatched = o->dispatched,
                      .ctx = o->master_ctx};
    wo.nslots = threaded ? writer_slots_for(wo.commit_every, wo.batch_max) : r->commit_every + 1;
    wo.max_dispatches += wo.nslots;
    m->wr = writer_create(&wo, err);
    if (!m->wr) {
        master_free(m);
        return -1;
    }
    m->st.threaded_commit = threaded;
    m->recv_req = MPI_REQUEST_NULL;
    m->recent_compute_s = -1.0;
    m->abandon_t0 = -1.0;
    m->t_start = as_monotonic_s();
    m->next_progress = m->t_start + (r->progress_every_s > 0 ? r->progress_every_s : 0);
    return 0;
}

int sched_run(MPI_Comm comm, const int64_t *cells, size_t ncells, const sched_opts *opts,
              sched_stats *stats, as_err *err) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (stats) memset(stats, 0, sizeof *stats);
    resolved_opts r;
    /* Options are the same on every rank, so every rank fails here alike. */
    if (resolve_opts(opts, rank, size, &r, err) != 0) return -1;
    /* A rank that cannot start (rank 0 given no list, the signal handlers refused) tells the
     * others in the collective call below rather than leaving them in it. */
    int cannot = 0;
    if (rank == 0 && ncells > 0 && !cells) cannot = 1, as_fail(err, "scheduler: %zu cells but no list", ncells);
    else if (signals_install(err) != 0) cannot = 1;

    /* A block size that differs between ranks would truncate a message and
     * abort the job inside MPI; one collective call turns it into an error. */
    long long mine[3] = {(long long)r.block_doubles, -(long long)r.block_doubles, cannot ? rank + 1 : 0};
    long long agreed[3];
    MPI_Allreduce(mine, agreed, 3, MPI_LONG_LONG, MPI_MAX, comm);
    if (agreed[2])
        return cannot ? -1 : as_fail(err, "scheduler: rank %lld could not start the run", agreed[2] - 1);
    if (agreed[0] != -agreed[1])
        return as_fail(err, "scheduler: ranks disagree on the block size (%lld to %lld doubles)", -agreed[1],
                       agreed[0]);

    MPI_Comm priv;
    MPI_Comm_dup(comm, &priv);
    int rc;
    if (rank != 0) {
        rc = worker_loop(priv, opts, &r, err);
    } else {
        master_state m;
        double cpu0 = as_process_cpu_s();
        /* A master that cannot allocate still has to release the workers. */
        if (master_init(&m, priv, size, cells, ncells, opts, &r, err) != 0) {
            for (int w = 1; w < size; w++) {
                int64_t ready[4];
                MPI_Recv(ready, (int)sizeof ready, MPI_BYTE, w, TAG_UP, priv, MPI_STATUS_IGNORE);
                int64_t msg[2] = {DOWN_STOP, -1};
                MPI_Send(msg, 2, MPI_INT64_T, w, TAG_DOWN, priv);
            }
            rc = -1;
        } else {
            rc = size == 1 ? master_alone(&m, err) : master_loop(&m, err);
            m.st.undispatched = m.ncells - m.next;
            m.st.signo = m.signo;
            m.st.elapsed_s = as_monotonic_s() - m.t_start;
            m.st.master_cpu_s = as_process_cpu_s() - cpu0;
            m.st.commit_batches = m.ws.batches;
            m.st.largest_batch = m.ws.largest_batch;
            m.st.commit_s = m.ws.commit_s;
            master_report(&m, 1);
            if (stats) *stats = m.st;
            master_free(&m);
        }
    }
    /* After an error or a stop a worker's last result may still be in flight, never to be
     * received (see worker_loop's MPI_Request_free); freeing priv would let a later
     * sched_run in this process reuse its context id and match that stale message (seen
     * in test_scheduler: a scenario after commit_fails got a cell of the failed run). So
     * priv is freed only after a complete run, when every result was received. */
    if (rc == SCHED_COMPLETE) MPI_Comm_free(&priv);
    return rc;
}
