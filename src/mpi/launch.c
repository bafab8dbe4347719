/* launch.c -- see launch.h: the collectives of a run. The run itself (its steps, what they
 * check and write) is include/sweep/run.h's; this file broadcasts what rank 0 found, keeps
 * one model's weights per node (weights.h) and hands the units to the scheduler. */
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "scheduler.h"
#include "signals.h"
#include "weights.h"

_Static_assert((int)SCHED_CELL_DONE == (int)RUN_UNIT_DONE, "run_commit_units reads the scheduler's status");
_Static_assert((int)SCHED_INTERRUPTED == (int)RUN_INTERRUPTED, "run_close reads the scheduler's outcome");

typedef struct {
    run r;
    node_weights w;      /* the model being computed (w.index), one copy per node */
    MPI_Comm comm;
    int size;
} launch;

/* Every rank learns whether all ranks succeeded. */
static int all_ok(MPI_Comm comm, int ok) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    return all;
}

/* Every rank leaves a sched_run with the same outcome: an error anywhere (rank 0's last
 * commit can fail after it told the workers the run was complete), else an interruption,
 * else complete. A rank that went on alone would wait for ever in the next model's load. */
static int agreed_outcome(MPI_Comm comm, int srun) {
    int mine = srun < 0 ? 2 : srun == SCHED_INTERRUPTED ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, comm);
    return all == 2 ? -1 : all == 1 ? SCHED_INTERRUPTED : SCHED_COMPLETE;
}

/* Bytes from rank 0 to every rank, in pieces (a count argument is an int). */
static void bcast_bytes(void *p, size_t n, MPI_Comm comm) {
    for (size_t at = 0; at < n; at += (size_t)1 << 30) {
        size_t k = n - at < ((size_t)1 << 30) ? n - at : ((size_t)1 << 30);
        MPI_Bcast((char *)p + at, (int)k, MPI_BYTE, 0, comm);
    }
}

/* Step 1: every rank loads the config (for `run OUT.h5`, the text rank 0 read from it). */
static int share_config(launch *l, as_err *err) {
    run *r = &l->r;
    if (!r->opts->from_output) return all_ok(l->comm, run_config(r, NULL, err) == 0) ? 0 : -1;
    char *text = NULL;
    int64_t len = -1;
    if (r->rank == 0 && run_stored_config(r->opts->from_output, &text, err) == 0) len = (int64_t)strlen(text);
    MPI_Bcast(&len, 1, MPI_INT64_T, 0, l->comm);
    if (len < 0) return free(text), -1;
    if (r->rank != 0) text = calloc((size_t)len + 1, 1);
    if (!all_ok(l->comm, text != NULL)) {
        free(text);
        return as_fail(err, "out of memory for a stored config of %lld bytes", (long long)len);
    }
    bcast_bytes(text, (size_t)len, l->comm);
    int ok = run_config(r, text, err) == 0;
    free(text);
    return all_ok(l->comm, ok) ? 0 : -1;
}

/* Step 1, before any work: the ranks on rank 0's node against its memory (run_check_memory),
 * decided by rank 0 alone so that every rank has the one answer. */
static int check_node_memory(launch *l, as_err *err) {
    MPI_Comm node;
    int node_ranks = 1;
    if (MPI_Comm_split_type(l->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &node_ranks);
        MPI_Comm_free(&node);
    }
    int ok = l->r.rank != 0 || run_check_memory(&l->r, (size_t)node_ranks, err) == 0;
    return all_ok(l->comm, ok) ? 0 : -1;
}

/* Step 2: rank 0 loads the text; every rank gets the token ids. */
static int share_text(launch *l, as_err *err) {
    run *r = &l->r;
    int ok = r->rank != 0 || run_load_text(r, err) == 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, l->comm);
    if (!ok) return -1;
    MPI_Bcast(&r->n_tokens, 1, MPI_INT64_T, 0, l->comm);
    if (r->rank != 0) r->tokens = malloc((size_t)r->n_tokens * sizeof(int32_t));
    if (!all_ok(l->comm, r->tokens != NULL))
        return as_fail(err, "out of memory for %lld token ids", (long long)r->n_tokens);
    bcast_bytes(r->tokens, (size_t)r->n_tokens * sizeof(int32_t), l->comm);
    return 0;
}

/* Model m into the node's shared copy (weights.h), then on rank 0 the run's check of
 * what was loaded (run_model_loaded); every rank learns the result. */
static int load_model(launch *l, size_t m, as_err *err) {
    run *r = &l->r;
    if (weights_load(&l->w, l->comm, r->cfg.models[m].dir, (long)m, err)) return -1;
    return all_ok(l->comm, r->rank != 0 || run_model_loaded(r, m, &l->w.model, err) == 0) ? 0 : -1;
}

/* Step 3: the models checked (rank 0) and model 0 loaded, one copy per node; the others
 * are loaded when their cells run. */
static int load_first_model(launch *l, as_err *err) {
    run *r = &l->r;
    double t = as_monotonic_s();
    if (!all_ok(l->comm, r->rank != 0 || run_check_models(r, err) == 0) || load_model(l, 0, err)) return -1;
    r->timing[TM_LOAD] = as_monotonic_s() - t;
    return 0;
}

/* The ranks' host names gathered on rank 0, for the provenance (run_hosts_list). */
static void hosts_list(char *out, size_t size, MPI_Comm comm, int rank, int nranks) {
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    char *all = rank == 0 ? calloc((size_t)nranks, MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               comm);
    if (rank != 0) return;
    run_hosts_list(out, size, all, MPI_MAX_PROCESSOR_NAME, all ? (size_t)nranks : 0);
    free(all);
}

/* Step 4: rank 0 opens the output and plans the units; every rank gets them. */
static int share_units(launch *l, run_summary *sum, size_t *before, as_err *err) {
    run *r = &l->r;
    char hosts[4096], mpi_lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    hosts_list(hosts, sizeof hosts, l->comm, r->rank, l->size);
    MPI_Get_library_version(mpi_lib, &len);
    run_env env = {.hosts = hosts, .mpi_library = mpi_lib, .size = l->size};
    int ok = r->rank != 0 || run_open_output(r, &env, err) == 0;
    if (!all_ok(l->comm, ok)) return -1;
    ok = r->rank != 0 || run_plan_units(r, sum, before, err) == 0;
    MPI_Bcast(&r->deflate, 1, MPI_INT, 0, l->comm);
    if (!all_ok(l->comm, ok)) return -1;
    uint64_t n = r->n_units;
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, l->comm);
    ok = r->rank == 0 || run_alloc_units(r, (size_t)n, err) == 0;
    if (!all_ok(l->comm, ok)) return as_fail(err, "out of memory for %zu units", (size_t)n);
    bcast_bytes(r->units, (size_t)n * sizeof *r->units, l->comm);
    bcast_bytes(r->model_units, (r->cfg.n_model + 1) * sizeof *r->model_units, l->comm);
    run_layout(r);
    return 0;
}

/* --- the scheduler's callbacks ---------------------------------------------------- */

static int compute_cb(void *ctx, int64_t unit, double *out, as_err *err) {
    return run_compute_unit(ctx, unit, out, err);
}
static int commit_cb(void *ctx, const int64_t *units, double *const *blocks, const int *status,
                     size_t n, as_err *err) {
    return run_commit_units(ctx, units, blocks, status, n, err);
}
static void dispatched_cb(void *ctx, int64_t unit, int worker) { run_unit_dispatched(ctx, unit, worker); }

static void add_stats(sched_stats *t, const sched_stats *ms) {
    t->total += ms->total, t->done += ms->done, t->failed += ms->failed;
    t->abandoned += ms->abandoned, t->undispatched += ms->undispatched;
    t->elapsed_s += ms->elapsed_s, t->compute_s += ms->compute_s;
    t->master_cpu_s += ms->master_cpu_s;
    t->threaded_commit |= ms->threaded_commit;
    t->commit_batches += ms->commit_batches, t->commit_s += ms->commit_s;
    if (ms->largest_batch > t->largest_batch) t->largest_batch = ms->largest_batch;
    if (ms->signo) t->signo = ms->signo;
}

/* Step 5 for model m: a model switch is collective (every rank has finished the previous
 * model's units), then the node frees that model's shared window and maps the next
 * (weights_load, weights.h) and the cell worker is re-made for it. Models without pending
 * units are never loaded. */
static int launch_model(launch *l, size_t m, const int64_t *unit_ids, size_t before,
                         sched_stats *stats, as_err *err) {
    run *r = &l->r;
    size_t lo = r->model_units[m], hi = r->model_units[m + 1];
    if (hi == lo) return SCHED_COMPLETE;
    double tl = as_monotonic_s();
    int ok = l->w.index == (long)m || load_model(l, m, err) == 0;
    r->timing[TM_LOAD] += as_monotonic_s() - tl;
    if (!ok) return -1;
    int computes = l->size == 1 || r->rank != 0;
    ok = run_start_model(r, m, &l->w.model, computes, sched_should_stop, err) == 0;
    if (!all_ok(l->comm, ok)) {
        if (r->rank == 0 && !err->msg[0]) as_fail(err, "a worker rank could not allocate its memory");
        return -1;
    }
    char unit[300];
    run_unit_name(r, m, unit, sizeof unit);
    const char *sync_env = getenv("ATTNSWEEP_SYNC_COMMIT");
    sched_opts so = {.block_doubles = r->unit_cells * r->slot_doubles, .compute = compute_cb,
                     .compute_ctx = r, .commit = commit_cb, .dispatched = dispatched_cb,
                     .master_ctx = r, .commit_every = run_units_per_commit(r),
                     .progress_every_s = r->opts->progress_every_s, .unit = unit,
                     .grace_usr1_s = r->cfg.stop_grace,
                     /* the commit on the receiving thread, as before the writer thread:
                      * for benchmarks against the old path (docs/performance.md,
                      * "The writer thread under real MPI") */
                     .sync_commit = sync_env && !strcmp(sync_env, "1"),
                     .done_before = r->rank == 0 ? before : 0};
    sched_stats ms = {0};
    int srun = sched_run(l->comm, r->rank == 0 ? unit_ids + lo : NULL, r->rank == 0 ? hi - lo : 0, &so,
                         &ms, err);
    add_stats(stats, &ms);
    return agreed_outcome(l->comm, srun);
}

/* ATTNSWEEP_TIMINGS=1: every rank's row to rank 0, which prints the table. */
static void print_timings(launch *l, const sched_stats *s) {
    run *r = &l->r;
    if (!run_timings_row(r)) return;
    double *all = r->rank == 0 ? malloc((size_t)l->size * TM_N * sizeof(double)) : NULL;
    MPI_Gather(r->timing, TM_N, MPI_DOUBLE, all, TM_N, MPI_DOUBLE, 0, l->comm);
    run_sched_totals t = {.elapsed_s = s->elapsed_s, .master_cpu_s = s->master_cpu_s,
                          .commit_batches = s->commit_batches, .largest_batch = s->largest_batch,
                          .threaded_commit = s->threaded_commit};
    if (all) run_print_timings(r, all, l->size, &t);
    free(all);
}

int launch_run(MPI_Comm comm, const run_opts *opts, run_summary *sum, as_err *err) {
    double t0 = as_wall_s();
    launch l = {.comm = comm};
    int rank;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &l.size);
    run_init(&l.r, opts, rank);
    weights_init(&l.w);
    memset(sum, 0, sizeof *sum);
    as_err local = {{0}};
    as_err *e = rank == 0 ? err : &local;
    run *r = &l.r;
    int rc = -1, srun = SCHED_COMPLETE;
    sched_stats stats = {0};
    int64_t *ids = NULL;
    size_t *before = NULL;
    if (share_config(&l, e)) goto out;
    snprintf(sum->output, sizeof sum->output, "%s", r->out_path);
    if (check_node_memory(&l, e) || share_text(&l, e) || load_first_model(&l, e)) goto out;
    before = calloc(r->cfg.n_model, sizeof *before);
    if (!all_ok(comm, before != NULL)) srun = as_fail(e, "out of memory");
    else if (share_units(&l, sum, before, e)) srun = -1;
    ids = malloc((r->n_units ? r->n_units : 1) * sizeof *ids);
    for (size_t i = 0; ids && i < r->n_units; i++) ids[i] = (int64_t)i;
    if (srun == 0 && !all_ok(comm, ids != NULL)) srun = as_fail(e, "out of memory for the unit list");
    double t_sched = as_monotonic_s();
    for (size_t m = 0; m < r->cfg.n_model && srun == SCHED_COMPLETE; m++)
        srun = launch_model(&l, m, ids, rank == 0 ? before[m] : 0, &stats, e);
    r->timing[TM_SCHED] = as_monotonic_s() - t_sched;
    /* Step 6. Rank 0's outcome, its close included, is every rank's: the workers wait for
     * it in the broadcast whatever happened (a close that fails -- a disk full in the
     * journal's compaction -- must not leave them there for ever). */
    if (rank == 0) rc = run_close(r, srun, stats.failed, stats.signo, sum, e);
    MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
    if (rc >= 0) r->timing[TM_RUN] = as_wall_s() - t0, print_timings(&l, &stats);
out:
    sum->elapsed_s = as_wall_s() - t0;
    free(ids);
    free(before);
    cell_worker_free(r->worker), r->worker = NULL; /* before its model's weights */
    weights_free(&l.w);
    run_free(r);
    return rc;
}

int launch_main(int *argc, char ***argv, const run_opts *opts, run_summary *sum, int *rank, as_err *err) {
    int thread_level = MPI_THREAD_SINGLE;
    store_library_init(); /* before MPI: a full disk must not crash the exit (store.h) */
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &thread_level);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    memset(sum, 0, sizeof *sum);
    int rc = -1;
    if (all_ok(MPI_COMM_WORLD, signals_install(err) == 0)) rc = launch_run(MPI_COMM_WORLD, opts, sum, err);
    else if (*rank == 0 && !err->msg[0]) as_fail(err, "a rank could not install its stop signal handlers");
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
