/* test_scheduler.c -- the master/worker protocol, run under mpirun with 1, 2
 * and 4 ranks (tests/integration/scheduler.cmake), and alone as a singleton.
 *
 * The compute callback derives every double of a block from the cell id
 * alone (reference_value), so the master can check each committed block
 * bit for bit against its own recomputation: a block delivered to the wrong
 * cell, truncated, or mixed with another shows up as a mismatch.
 *
 * Without arguments: every normal scenario (exit 0 when all pass).
 * --signal: the run the signal tests drive from outside
 *   (tests/integration/scheduler_signal.sh): slow cells, the commit callback verifies
 *   every block it sees, each rank prints "rank R pid P" at start and
 *   "rank R result interrupted|complete|error" and "rank R exit CODE" at the
 *   end; the code is 3 when interrupted with all checks passing.
 *   --hold FILE: every cell prints "rank R started cell C" and then waits until
 *   FILE exists (an event the script controls, not a duration), ignoring the
 *   stop; --grace S sets the SIGUSR1 grace (default 1 s). */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "errors.h"
#include "scheduler.h"
#include "clock.h"
#include "signals.h"

static int my_rank, n_ranks;

/* A value no other (cell, k) pair produces, with a fractional part so a
 * float truncation would show. */
static double reference_value(int64_t cell, size_t k) {
    return (double)cell * 1048576.0 + (double)k + 1.0 / (double)(cell + 3) + sin((double)(cell * 31 + (int64_t)k));
}

typedef struct {
    size_t block_doubles;
    int fail_mod;            /* cells with cell % fail_mod == fail_rem fail (0: none) */
    int fail_rem;
    double cost_s;           /* sleep per cell */
    int honour_stop;         /* poll sched_should_stop while "computing" */
    const char *hold;        /* wait until this file exists (NULL: no wait) */
    /* cells this rank computed (to show none was computed twice) */
    int64_t *computed;
    size_t ncomputed, cap;
} compute_ctx;

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static int compute_cell(void *vctx, int64_t cell, double *block, as_err *err) {
    compute_ctx *c = vctx;
    if (c->ncomputed < c->cap) c->computed[c->ncomputed++] = cell;
    if (c->hold) {
        printf("rank %d started cell %lld\n", my_rank, (long long)cell);
        fflush(stdout);
        /* A held cell polls the stop as a long compute does between layers: alone, that
         * is where the stop begins and says so. */
        while (access(c->hold, F_OK) != 0) {
            if (c->honour_stop && sched_should_stop())
                return as_fail(err, "cell %lld: interrupted while held", (long long)cell);
            sleep_s(0.01);
        }
    }
    if (c->cost_s > 0) {
        if (c->honour_stop) {
            double end = as_monotonic_s() + c->cost_s;
            while (as_monotonic_s() < end) {
                if (sched_should_stop()) return as_fail(err, "cell %lld: interrupted", (long long)cell);
                sleep_s(0.01);
            }
        } else {
            sleep_s(c->cost_s);
        }
    }
    if (c->fail_mod && cell % c->fail_mod == c->fail_rem)
        return as_fail(err, "cell %lld: synthetic failure for the test", (long long)cell);
    for (size_t k = 0; k < c->block_doubles; k++) block[k] = reference_value(cell, k);
    return 0;
}

typedef struct {
    size_t block_doubles, commit_every;
    int64_t ncells_total;       /* ids are 0..ncells_total-1 */
    int *committed;             /* per id: times committed */
    int *status_seen;
    int *dispatched;            /* per id: times dispatched */
    int *dispatch_rank;
    int commit_calls, bad_blocks, bad_batch, out_of_range, committed_before_dispatch;
    size_t batch_sizes[4096];
    int fail_on_call;           /* commit returns -1 on this call (1-based; 0: never) */
    size_t batch_max;           /* the most a commit may get (2 x commit_every with the writer thread) */
    pthread_t callback_thread;  /* the thread of the first callback; every later one must match */
    int have_thread, other_thread;
} master_ctx;

/* The store is not thread-safe: commit and dispatched must always run on one thread. */
static void note_thread(master_ctx *m) {
    if (!m->have_thread) m->callback_thread = pthread_self(), m->have_thread = 1;
    else if (!pthread_equal(m->callback_thread, pthread_self())) m->other_thread++;
}

static int commit_cells(void *vctx, const int64_t *cells, double *const *blocks, const int *status,
                        size_t n, as_err *err) {
    master_ctx *m = vctx;
    note_thread(m);
    m->commit_calls++;
    if (m->fail_on_call && m->commit_calls == m->fail_on_call)
        return as_fail(err, "store: synthetic commit failure on call %d", m->commit_calls);
    if ((size_t)m->commit_calls <= sizeof m->batch_sizes / sizeof m->batch_sizes[0])
        m->batch_sizes[m->commit_calls - 1] = n;
    if (n == 0 || n > m->batch_max) m->bad_batch++;
    for (size_t i = 0; i < n; i++) {
        int64_t c = cells[i];
        if (c < 0 || c >= m->ncells_total) {
            m->out_of_range++;
            continue;
        }
        m->committed[c]++;
        m->status_seen[c] = status[i];
        if (!m->dispatched[c]) m->committed_before_dispatch++;
        for (size_t k = 0; k < m->block_doubles; k++) {
            double want = status[i] == SCHED_CELL_DONE ? reference_value(c, k) : NAN;
            double got = blocks[i][k];
            int same = status[i] == SCHED_CELL_DONE ? memcmp(&got, &want, sizeof got) == 0 : isnan(got);
            if (!same) {
                m->bad_blocks++;
                break;
            }
        }
    }
    return 0;
}

static void note_dispatch(void *vctx, int64_t cell, int worker_rank) {
    master_ctx *m = vctx;
    note_thread(m);
    if (cell < 0 || cell >= m->ncells_total) {
        m->out_of_range++;
        return;
    }
    m->dispatched[cell]++;
    m->dispatch_rank[cell] = worker_rank;
}

/* Gathers every rank's computed list on rank 0 and counts, per cell, how
 * many times it was computed anywhere. */
static int *gather_compute_counts(const compute_ctx *c, int64_t ncells) {
    int mine = (int)c->ncomputed;
    int *counts = my_rank == 0 ? calloc((size_t)n_ranks, sizeof *counts) : NULL;
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int *displs = NULL;
    int64_t *all = NULL;
    int total = 0;
    if (my_rank == 0) {
        displs = calloc((size_t)n_ranks, sizeof *displs);
        for (int r = 0; r < n_ranks; r++) {
            displs[r] = total;
            total += counts[r];
        }
        all = malloc((size_t)(total > 0 ? total : 1) * sizeof *all);
    }
    MPI_Gatherv(c->computed, mine, MPI_INT64_T, all, counts, displs, MPI_INT64_T, 0, MPI_COMM_WORLD);
    int *per_cell = NULL;
    if (my_rank == 0) {
        per_cell = calloc((size_t)ncells, sizeof *per_cell);
        for (int i = 0; i < total; i++)
            if (all[i] >= 0 && all[i] < ncells) per_cell[all[i]]++;
    }
    free(counts);
    free(displs);
    free(all);
    return per_cell;
}

typedef struct {
    const char *name;
    int64_t ncells;
    size_t block_doubles, commit_every;
    int prefetch;
    int fail_mod, fail_rem;
    int fail_commit_call;
    int sync_commit; /* set by main: each scenario runs with the writer thread and without */
} scenario;

/* Dispatch order: largest id first with a stride, so it is neither sorted
 * nor the identity. */
static int64_t *make_order(int64_t n) {
    int64_t *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    int64_t k = 0;
    for (int64_t start = 0; start < 3; start++)
        for (int64_t c = n - 1 - start; c >= 0; c -= 3) order[k++] = c;
    return order;
}

static void run_scenario(const scenario *s0) {
    scenario named = *s0;
    char name[96];
    snprintf(name, sizeof name, "%s%s", s0->name, s0->sync_commit ? " (sync commit)" : "");
    named.name = name;
    const scenario *s = &named;
    compute_ctx cc = {.block_doubles = s->block_doubles, .fail_mod = s->fail_mod, .fail_rem = s->fail_rem};
    cc.cap = (size_t)s->ncells + 1;
    cc.computed = malloc(cc.cap * sizeof *cc.computed);
    int threaded = n_ranks > 1 && !s->sync_commit;
    size_t ce0 = s->commit_every ? s->commit_every : 8;
    master_ctx mc = {.block_doubles = s->block_doubles,
                     .commit_every = ce0,
                     .batch_max = threaded ? 2 * ce0 : ce0,
                     .ncells_total = s->ncells,
                     .fail_on_call = s->fail_commit_call};
    size_t nc = (size_t)(s->ncells > 0 ? s->ncells : 1);
    mc.committed = calloc(nc, sizeof(int));
    mc.status_seen = calloc(nc, sizeof(int));
    mc.dispatched = calloc(nc, sizeof(int));
    mc.dispatch_rank = calloc(nc, sizeof(int));
    int64_t *order = my_rank == 0 ? make_order(s->ncells) : NULL;

    char *log_text = NULL;
    size_t log_len = 0;
    FILE *log = open_memstream(&log_text, &log_len);
    sched_opts o = {.block_doubles = s->block_doubles,
                    .compute = compute_cell,
                    .compute_ctx = &cc,
                    .commit = commit_cells,
                    .dispatched = note_dispatch,
                    .master_ctx = &mc,
                    .commit_every = s->commit_every,
                    .sync_commit = s->sync_commit,
                    .prefetch = s->prefetch,
                    .progress_every_s = -1,
                    .progress = log};
    sched_stats st;
    as_err err = {{0}};
    int rc = sched_run(MPI_COMM_WORLD, order, my_rank == 0 ? (size_t)s->ncells : 0, &o, &st, &err);
    fclose(log);

    if (s->fail_commit_call) {
        CHECK(rc == -1, "%s: rank %d: a failing commit gives -1 everywhere, got %d", s->name, my_rank, rc);
        if (my_rank == 0)
            CHECK(strstr(err.msg, "synthetic commit failure") != NULL, "%s: master error names the cause: %s",
                  s->name, err.msg);
        else
            CHECK(strstr(err.msg, "rank 0") != NULL, "%s: worker error says the master stopped: %s", s->name,
                  err.msg);
    } else {
        CHECK(rc == SCHED_COMPLETE, "%s: rank %d: rc %d (%s)", s->name, my_rank, rc, err.msg);
    }

    int *computed_count = gather_compute_counts(&cc, s->ncells);
    if (my_rank == 0 && !s->fail_commit_call) {
        size_t want_failed = 0;
        int never_twice = 1, exactly_once = 1, dispatched_once = 1, status_ok = 1, rank_ok = 1;
        for (int64_t c = 0; c < s->ncells; c++) {
            int fails = s->fail_mod && c % s->fail_mod == s->fail_rem;
            want_failed += (size_t)fails;
            if (computed_count[c] != 1) never_twice = 0;
            if (mc.committed[c] != 1) exactly_once = 0;
            if (mc.dispatched[c] != 1) dispatched_once = 0;
            if (mc.status_seen[c] != (fails ? SCHED_CELL_FAILED : SCHED_CELL_DONE)) status_ok = 0;
            int want_rank_lo = n_ranks == 1 ? 0 : 1;
            if (mc.dispatch_rank[c] < want_rank_lo || mc.dispatch_rank[c] >= n_ranks) rank_ok = 0;
        }
        CHECK(never_twice, "%s: every cell computed exactly once over all ranks", s->name);
        CHECK(exactly_once, "%s: every cell committed exactly once", s->name);
        CHECK(dispatched_once, "%s: every cell dispatched exactly once", s->name);
        CHECK(status_ok, "%s: status 1 for good cells, 2 for failed ones", s->name);
        CHECK(rank_ok, "%s: dispatched to a worker rank (0 only when alone)", s->name);
        CHECK(mc.bad_blocks == 0, "%s: %d blocks differ from the reference", s->name, mc.bad_blocks);
        CHECK(mc.out_of_range == 0, "%s: %d unknown cell ids", s->name, mc.out_of_range);
        CHECK(mc.committed_before_dispatch == 0, "%s: commit before dispatch", s->name);
        CHECK(mc.bad_batch == 0, "%s: a batch was empty or over commit_every", s->name);
        CHECK(st.done + st.failed == (size_t)s->ncells && st.failed == want_failed,
              "%s: stats %zu done %zu failed, want %zu failed of %lld", s->name, st.done, st.failed, want_failed,
              (long long)s->ncells);
        /* Batching: without the writer thread full batches, then one partial at the end;
         * with it at least commit_every per batch but the last, at most 2 x commit_every. */
        size_t ce = ce0;
        size_t want_calls = ((size_t)s->ncells + ce - 1) / ce;
        if (threaded)
            CHECK((size_t)mc.commit_calls <= want_calls && (size_t)mc.commit_calls * mc.batch_max >= (size_t)s->ncells,
                  "%s: %d commit calls for %lld cells in batches of %zu..%zu", s->name, mc.commit_calls,
                  (long long)s->ncells, ce, mc.batch_max);
        else
            CHECK((size_t)mc.commit_calls == want_calls, "%s: %d commit calls, want %zu", s->name,
                  mc.commit_calls, want_calls);
        int batches_full = 1;
        for (int i = 0; i + 1 < mc.commit_calls && i < 4096; i++)
            if (threaded ? mc.batch_sizes[i] < ce : mc.batch_sizes[i] != ce) batches_full = 0;
        CHECK(batches_full, "%s: every batch but the last has %s commit_every cells", s->name,
              threaded ? "at least" : "exactly");
        CHECK(st.threaded_commit == threaded, "%s: writer thread %d, want %d", s->name, st.threaded_commit,
              threaded);
        CHECK(mc.other_thread == 0, "%s: commit and dispatched ran on %d other threads", s->name,
              mc.other_thread);
        CHECK(!mc.have_thread || pthread_equal(mc.callback_thread, pthread_self()) == !threaded,
              "%s: the callbacks run %s", s->name, threaded ? "on the writer thread" : "on the main thread");
        /* Each failure logged exactly once, with its message. */
        int logged_ok = 1;
        for (int64_t c = 0; c < s->ncells && s->fail_mod; c++) {
            if (c % s->fail_mod != s->fail_rem) continue;
            char needle[128];
            snprintf(needle, sizeof needle, "sweep: cell %lld failed on rank ", (long long)c);
            char *hit = strstr(log_text, needle);
            char msg[96];
            snprintf(msg, sizeof msg, "cell %lld: synthetic failure for the test\n", (long long)c);
            if (!hit || !strstr(hit, msg) || strstr(hit + 1, needle)) logged_ok = 0;
        }
        CHECK(logged_ok, "%s: each failed cell logged once with its message; log:\n%s", s->name, log_text);
        CHECK(strstr(log_text, "sweep finished") != NULL, "%s: final summary line; log:\n%s", s->name, log_text);
    }
    if (my_rank == 0 && s->fail_commit_call) {
        CHECK(mc.other_thread == 0, "%s: callbacks on one thread", s->name);
        CHECK(mc.commit_calls == s->fail_commit_call, "%s: no commit after the failing one (%d calls)", s->name,
              mc.commit_calls);
    }
    free(computed_count);
    free(log_text);
    free(order);
    free(cc.computed);
    free(mc.committed);
    free(mc.status_seen);
    free(mc.dispatched);
    free(mc.dispatch_rank);
}

static void test_progress_line(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    sched_progress p = {.total = 100, .done = 20, .failed = 5, .in_flight = 3, .workers = 3, .elapsed_s = 50};
    sched_progress_print(f, &p);
    p.final = 1;
    sched_progress_print(f, &p);
    sched_progress stopping = {.total = 100, .done = 20, .failed = 5, .in_flight = 3, .workers = 3,
                               .elapsed_s = 50, .signo = SIGUSR1, .unit = "windows", .grace_left_s = 192};
    sched_progress_print(f, &stopping);
    sched_progress ctrl_c = stopping; /* the first Ctrl-C says what a second one does; then not */
    ctrl_c.signo = SIGINT;
    sched_progress_print(f, &ctrl_c);
    ctrl_c.abandoning = 1, ctrl_c.done = 21;
    sched_progress_print(f, &ctrl_c);
    fclose(f);
    CHECK(strstr(text, "25/100 windows (5 failed, 3 running), elapsed 50s, stopping: press Ctrl-C again "
                       "to abandon the running cells; waiting up to 3m12s") != NULL,
          "progress line after Ctrl-C says a second one abandons: %s", text);
    CHECK(strstr(text, "26/100 windows (5 failed, 3 running), elapsed 50s, stopping: waiting up to") != NULL,
          "progress line after the second Ctrl-C drops the hint: %s", text);
    CHECK(strstr(text, "25/100 windows (5 failed, 3 running), elapsed 50s, stopping: waiting up to 3m12s "
                       "more for the 3 running windows") != NULL,
          "progress line while stopping says what it waits for: %s", text);
    /* 25 cells in 50 s: 0.5 cells/s, 75 left: 150 s = 2m30s. */
    CHECK(strstr(text, "25/100 cells (5 failed, 3 running), 0.5 cells/s, ETA 2m30s, elapsed 50s") != NULL,
          "progress line: %s", text);
    CHECK(strstr(text, "sweep finished: 25/100 cells (5 failed) in 50s") != NULL, "summary line: %s", text);
    free(text);
}

static int run_signal_mode(int argc, char **argv) {
    /* Enough cells that the run outlasts any delay before the script's signal. */
    int64_t ncells = 4000;
    double cost = 0.05, grace = 1.0;
    int honour = 1;
    const char *hold = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cells") && i + 1 < argc) ncells = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cost") && i + 1 < argc) cost = atof(argv[++i]);
        else if (!strcmp(argv[i], "--grace") && i + 1 < argc) grace = atof(argv[++i]);
        else if (!strcmp(argv[i], "--hold") && i + 1 < argc) hold = argv[++i];
        else if (!strcmp(argv[i], "--ignore-stop")) honour = 0;
    }
    printf("rank %d pid %ld\n", my_rank, (long)getpid());
    fflush(stdout);
    size_t block = 1000;
    compute_ctx cc = {.block_doubles = block, .cost_s = cost, .honour_stop = honour, .hold = hold};
    cc.cap = (size_t)ncells;
    cc.computed = malloc(cc.cap * sizeof *cc.computed);
    master_ctx mc = {.block_doubles = block, .commit_every = 4, .batch_max = 8, .ncells_total = ncells};
    mc.committed = calloc((size_t)ncells, sizeof(int));
    mc.status_seen = calloc((size_t)ncells, sizeof(int));
    mc.dispatched = calloc((size_t)ncells, sizeof(int));
    mc.dispatch_rank = calloc((size_t)ncells, sizeof(int));
    int64_t *order = my_rank == 0 ? make_order(ncells) : NULL;
    sched_opts o = {.block_doubles = block, .compute = compute_cell, .compute_ctx = &cc,
                    .commit = commit_cells, .dispatched = note_dispatch, .master_ctx = &mc,
                    .commit_every = 4, .progress_every_s = 1.0, .grace_usr1_s = grace, .grace_term_s = 0.5};
    sched_stats st;
    as_err err = {{0}};
    int rc = sched_run(MPI_COMM_WORLD, order, my_rank == 0 ? (size_t)ncells : 0, &o, &st, &err);
    if (my_rank == 0) {
        size_t ncommitted = 0, twice = 0;
        for (int64_t c = 0; c < ncells; c++) {
            ncommitted += (size_t)(mc.committed[c] > 0);
            twice += (size_t)(mc.committed[c] > 1);
        }
        CHECK(mc.bad_blocks == 0, "signal: %d committed blocks differ from the reference", mc.bad_blocks);
        CHECK(twice == 0, "signal: %zu cells committed twice", twice);
        CHECK(mc.out_of_range == 0, "signal: unknown cell ids");
        printf("master: committed %zu cells (%zu done, %zu failed), abandoned %zu, undispatched %zu, "
               "bad blocks %d, signal %d\n",
               ncommitted, st.done, st.failed, st.abandoned, st.undispatched, mc.bad_blocks, st.signo);
        CHECK(st.done + st.failed + st.abandoned + st.undispatched == (size_t)ncells,
              "signal: every cell accounted for");
    }
    const char *what = rc == SCHED_INTERRUPTED ? "interrupted" : rc == SCHED_COMPLETE ? "complete" : "error";
    printf("rank %d result %s%s%s\n", my_rank, what, rc < 0 ? ": " : "", rc < 0 ? err.msg : "");
    fflush(stdout);
    int checks_failed = check_failed;
    free(order);
    free(cc.computed);
    free(mc.committed);
    free(mc.status_seen);
    free(mc.dispatched);
    free(mc.dispatch_rank);
    int code = checks_failed ? AS_EXIT_ERROR
               : rc == SCHED_INTERRUPTED ? AS_EXIT_RESUMABLE
               : rc == SCHED_COMPLETE ? AS_EXIT_OK : AS_EXIT_ERROR;
    /* Printed before MPI_Finalize: once the first rank exits non-zero, mpirun
     * kills the others, possibly before they print anything afterwards. */
    printf("rank %d exit %d\n", my_rank, code);
    fflush(stdout);
    MPI_Finalize();
    return code;
}

int main(int argc, char **argv) {
    int level = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &level);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    if (argc > 1 && !strcmp(argv[1], "--signal")) return run_signal_mode(argc, argv);

    const scenario scenarios[] = {
        {"basic", 500, 37, 8, 0, 0, 0, 0, 0},
        {"failures", 300, 11, 5, 2, 7, 3, 0, 0},
        {"commit_every_1", 57, 5, 1, 1, 0, 0, 0, 0},
        {"commit_every_3_prefetch_3", 100, 3, 3, 3, 0, 0, 0, 0},
        {"zero_block", 40, 0, 8, 0, 0, 0, 0, 0},
        {"big_block_rendezvous", 24, 300000, 4, 2, 5, 1, 0, 0},
        {"empty_list", 0, 10, 8, 0, 0, 0, 0, 0},
        {"more_ranks_than_cells", 2, 4, 8, 2, 0, 0, 0, 0},
        {"commit_fails", 200, 9, 4, 2, 0, 0, 3, 0},
    };
    for (int sync = 0; sync < 2; sync++)
        for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
            scenario s = scenarios[i];
            s.sync_commit = sync;
            run_scenario(&s);
        }

    /* Bad options fail the same way on every rank, without talking. */
    sched_opts bad = {.block_doubles = 4, .compute = compute_cell, .commit = commit_cells, .prefetch = 99};
    as_err err = {{0}};
    CHECK(sched_run(MPI_COMM_WORLD, NULL, 0, &bad, NULL, &err) == -1 && strstr(err.msg, "prefetch"),
          "bad prefetch rejected: %s", err.msg);
    if (n_ranks > 1) {
        sched_opts uneven = {.block_doubles = 4 + (size_t)my_rank, .compute = compute_cell,
                             .commit = commit_cells};
        CHECK(sched_run(MPI_COMM_WORLD, NULL, 0, &uneven, NULL, &err) == -1 &&
                  strstr(err.msg, "disagree on the block size"),
              "block sizes that differ between ranks rejected on rank %d: %s", my_rank, err.msg);
        /* rank 0 without its list fails, and so does every worker (they used to wait in the
         * block-size check for ever) */
        sched_opts fine = {.block_doubles = 4, .compute = compute_cell, .commit = commit_cells};
        CHECK(sched_run(MPI_COMM_WORLD, NULL, 3, &fine, NULL, &err) == -1 &&
                  strstr(err.msg, my_rank == 0 ? "but no list" : "rank 0 could not start"),
              "rank 0 without a cell list: every rank fails (rank %d: %s)", my_rank, err.msg);
    }
    if (my_rank == 0) test_progress_line();

    int mine = check_failed, total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    char name[64];
    snprintf(name, sizeof name, "test_scheduler rank %d/%d", my_rank, n_ranks);
    int rc = check_summary(name);
    MPI_Finalize();
    return total ? 1 : rc;
}
