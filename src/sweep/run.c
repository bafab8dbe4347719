/* run.c -- see run.h: the config, the text, the models' checks, the units, a unit's
 * compute and commit, the close and the timings table. Opening the output is
 * run_output.c's. */
#include "run.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "plan.h"

void run_init(run *r, const run_opts *opts, int rank) {
    memset(r, 0, sizeof *r);
    r->opts = opts;
    r->rank = rank;
}

void run_free(run *r) {
    cell_worker_free(r->worker);
    free(r->units);
    free(r->model_units);
    free(r->model_sha);
    free(r->scratch);
    free(r->pack_buf), free(r->dz_scratch);
    free(r->tokens);
    if (r->grid_ok) grid_free(&r->grid);
    if (r->cfg_ok) config_free(&r->cfg);
    r->grid_ok = r->cfg_ok = 0;
    r->worker = NULL, r->units = NULL, r->model_units = NULL, r->model_sha = NULL, r->scratch = NULL;
    r->pack_buf = r->dz_scratch = NULL, r->tokens = NULL;
}

int run_shard_path(char *out, size_t size, const char *output, int shard_index, int shard_count) {
    size_t n = strlen(output);
    size_t stem = n;
    if (n > 3 && !strcmp(output + n - 3, ".h5")) stem = n - 3;
    else if (n > 3 && !strcmp(output + n - 3, ".nc")) stem = n - 3;
    int w = snprintf(out, size, "%.*s.shard-%d-of-%d%s", (int)stem, output, shard_index,
                     shard_count, output + stem);
    return w < 0 || (size_t)w >= size ? -1 : 0;
}

/* --- step 1: the config ------------------------------------------------------ */

int run_stored_config(const char *path, char **text, as_err *err) {
    char *sha = NULL;
    *text = NULL;
    int found = store_peek_config_to_write(path, text, &sha, err);
    free(sha);
    if (found < 0) return -1;
    if (found) return 0;
    store_description d;
    if (store_describe(path, &d, err)) return -1;
    if (d.prov.config_text && d.prov.config_text[0]) *text = strdup(d.prov.config_text);
    else as_fail(err, "%s: holds no stored config (config_text); run it with its CONFIG file", path);
    store_description_free(&d);
    return *text ? 0 : -1;
}

/* The stored config with output = the file it came from (the file may have moved), then
 * the --set overrides. */
static int load_stored(run *r, const char *text, as_err *err) {
    const run_opts *o = r->opts;
    char *abs = realpath(o->from_output, NULL);
    char out_set[4200], origin[4200];
    snprintf(out_set, sizeof out_set, "output=\"%s\"", abs ? abs : o->from_output);
    free(abs);
    const char **sets = calloc(o->n_sets + 1, sizeof *sets);
    if (!sets) return as_fail(err, "out of memory");
    sets[0] = out_set;
    for (size_t i = 0; i < o->n_sets; i++) sets[i + 1] = o->sets[i];
    snprintf(origin, sizeof origin, "%s (stored config)", o->from_output);
    int rc = config_load_text(&r->cfg, text, origin, sets, o->n_sets + 1, err);
    free(sets);
    return rc;
}

int run_config(run *r, const char *stored_text, as_err *err) {
    const run_opts *o = r->opts;
    if (stored_text) r->cfg_ok = load_stored(r, stored_text, err) == 0;
    else r->cfg_ok = config_load(&r->cfg, o->config_path, o->sets, o->n_sets, err) == 0;
    if (!r->cfg_ok) return -1;
    r->grid_ok = grid_init(&r->grid, &r->cfg, err) == 0;
    if (!r->grid_ok) return -1;
    snprintf(r->out_path, sizeof r->out_path, "%s", r->cfg.output);
    if (o->shard_count > 0 &&
        run_shard_path(r->out_path, sizeof r->out_path, r->cfg.output, o->shard_index, o->shard_count))
        return as_fail(err, "output: '%s' is too long for a shard name", r->cfg.output);
    openblas_set_num_threads(r->cfg.blas_threads);
    return 0;
}

int run_check_memory(const run *r, size_t node_ranks, as_err *err) {
    const char *source;
    double limit = plan_memory_limit(r->opts->mem_limit, &source);
    return plan_memory_check(&r->grid, node_ranks, limit, source, err);
}

/* --- step 2: the text --------------------------------------------------------- */

textsrc_spec run_text_spec(const as_config *c) {
    return (textsrc_spec){.path = c->text_path,
                          .format = c->text_format == AS_TEXT_TOKENS ? TEXTSRC_TOKENS : TEXTSRC_TEXT,
                          .strip_gutenberg = c->strip_gutenberg,
                          .start_at = c->start_at,
                          .start_occurrence = c->start_occurrence,
                          .add_bos = (textsrc_bos)c->add_bos};
}

int run_load_text(run *r, as_err *err) {
    const as_config *c = &r->cfg;
    textsrc ts;
    textsrc_spec spec = run_text_spec(c);
    if (textsrc_load(&ts, &spec, c->model_dir, c->model.vocab_size, err)) return -1;
    int rc = textsrc_check_fit(&ts, c->windows_count, c->windows_offset, c->windows_stride,
                               config_max_L(c), err);
    /* digests of the bytes just loaded, not of a second read */
    snprintf(r->text_sha, sizeof r->text_sha, "%s", ts.sha256);
    snprintf(r->vocab_sha, sizeof r->vocab_sha, "%s", ts.vocab_sha256);
    snprintf(r->merges_sha, sizeof r->merges_sha, "%s", ts.merges_sha256);
    snprintf(r->vocab_name, sizeof r->vocab_name, "%s", ts.vocab_name);
    snprintf(r->merges_name, sizeof r->merges_name, "%s", ts.merges_name);
    snprintf(r->tok_files, sizeof r->tok_files, "%s", ts.tokenizer_files);
    r->tokens = ts.tokens, r->n_tokens = (int64_t)ts.n_tokens;
    ts.tokens = NULL;
    textsrc_free(&ts);
    return rc;
}

/* --- step 3: the models ---------------------------------------------------------- */

/* Model m's tensors against its config.json: model_load_into without filling, so the
 * arena is reserved, never touched. */
static int probe_model(const as_model_spec *ms, as_err *err) {
    void *arena = malloc(model_arena_bytes(&ms->cfg) + 64);
    if (!arena) return as_fail(err, "%s: out of memory", ms->dir);
    gpt2_model probe;
    float *aligned = (float *)(void *)((char *)arena + (64 - (uintptr_t)arena % 64) % 64);
    int rc = model_load_into(&probe, ms->dir, aligned, 0, err);
    if (rc == 0) model_free(&probe);
    free(arena);
    return rc;
}

int run_check_models(run *r, as_err *err) {
    r->model_sha = calloc(r->cfg.n_model, sizeof *r->model_sha);
    if (!r->model_sha) return as_fail(err, "out of memory");
    for (size_t m = 1; m < r->cfg.n_model; m++)
        if (model_weights_sha256(r->cfg.models[m].dir, r->model_sha[m], err) || probe_model(&r->cfg.models[m], err))
            return -1;
    return 0;
}

int run_model_loaded(run *r, size_t m, const gpt2_model *model, as_err *err) {
    char *want = r->model_sha[m];
    if (!want[0]) {
        memcpy(want, model->weights_sha256, sizeof r->model_sha[m]);
        return 0;
    }
    /* the weights computed with must be the ones the store recorded at its open */
    if (model->weights_sha256[0] && strcmp(model->weights_sha256, want))
        return as_fail(err, "%s/model.safetensors: changed during the run (sha256 %s, recorded %s at "
                       "the start); restore it and resume", r->cfg.models[m].dir, model->weights_sha256, want);
    return 0;
}

/* --- step 4: the units ---------------------------------------------------------- */

/* Groups the pending cells (model-major, then in dispatch order, largest L first;
 * todo[i] = model * n_cells + cell) into one unit per window of a model (per
 * GRID_UNIT_MAX_CUTS L values), ordered by model and then by their largest L. */
static int build_units(run *r, const int64_t *todo, size_t ntodo, as_err *err) {
    const as_grid *g = &r->grid;
    size_t chunks = grid_units_per_window(g), nm = r->cfg.n_model;
    r->model_units = calloc(nm + 1, sizeof *r->model_units);
    if (!r->model_units) return as_fail(err, "out of memory");
    int64_t *unit_of = malloc(nm * g->n_windows * chunks * sizeof *unit_of);
    r->units = malloc((ntodo ? ntodo : 1) * sizeof *r->units);
    if (!unit_of || !r->units) {
        free(unit_of);
        return as_fail(err, "out of memory for the list of %zu cells", ntodo);
    }
    for (size_t i = 0; i < nm * g->n_windows * chunks; i++) unit_of[i] = -1;
    r->n_units = 0;
    for (size_t i = 0; i < ntodo; i++) {
        size_t w, li, m = (size_t)todo[i] / g->n_cells;
        grid_cell_of(g, (size_t)todo[i] % g->n_cells, &w, &li);
        size_t key = (m * g->n_windows + w) * chunks + li / GRID_UNIT_MAX_CUTS;
        if (unit_of[key] < 0) {
            unit_of[key] = (int64_t)r->n_units;
            r->model_units[m + 1] = r->n_units + 1;
            r->units[r->n_units++] = (grid_unit){.model = (int64_t)m, .window = (int64_t)w,
                                                 .l_lo = (int64_t)(li / GRID_UNIT_MAX_CUTS * GRID_UNIT_MAX_CUTS),
                                                 .l_mask = 0};
        }
        grid_unit *u = &r->units[unit_of[key]];
        u->l_mask |= 1ull << (li - (size_t)u->l_lo);
    }
    free(unit_of);
    /* todo is model-major, so each model's units are contiguous: fill the gaps of
     * models with no unit */
    for (size_t m = 1; m <= nm; m++)
        if (r->model_units[m] < r->model_units[m - 1]) r->model_units[m] = r->model_units[m - 1];
    return 0;
}

/* Is position i of the dispatch order this shard's? */
static int in_shard(const run_opts *o, size_t i) {
    return o->shard_count <= 0 || (int)(i % (size_t)o->shard_count) == o->shard_index;
}

/* Model m's pending cells appended to todo; seen[w]: 1 the window has a cell in this
 * shard, 2 one still to do. Cells the config's own output holds done (existing) are
 * skipped and counted. */
static size_t pending_cells(const run *r, size_t m, const unsigned char *existing, int64_t *todo,
                         unsigned char *seen, size_t *skipped) {
    const as_grid *g = &r->grid;
    size_t n = 0;
    memset(seen, 0, g->n_windows ? g->n_windows : 1);
    for (size_t i = 0; i < g->n_cells; i++) {
        size_t cell = g->dispatch[i], w, li;
        if (!in_shard(r->opts, i)) continue;
        grid_cell_of(g, cell, &w, &li);
        seen[w] |= 1;
        if (store_cell_status(r->out, m, w, li) == STORE_DONE) continue;
        if (existing && existing[m * g->n_cells + cell]) {
            (*skipped)++;
            continue;
        }
        todo[n++] = (int64_t)(m * g->n_cells + cell);
        seen[w] |= 2;
    }
    return n;
}

int run_plan_units(run *r, run_summary *sum, size_t *model_windows_before, as_err *err) {
    const as_grid *g = &r->grid;
    size_t nm = r->cfg.n_model, ntodo = 0, mine = 0, held = 0, skipped = 0, cells = nm * g->n_cells;
    for (size_t i = 0; i < g->n_cells; i++) mine += in_shard(r->opts, i);
    sum->total = mine * nm;
    int64_t *todo = malloc((cells ? cells : 1) * sizeof *todo);
    unsigned char *seen = calloc(g->n_windows ? g->n_windows : 1, 1);
    unsigned char *existing = run_existing_done(r, &held);
    for (size_t m = 0; todo && seen && m < nm; m++) {
        ntodo += pending_cells(r, m, existing, todo + ntodo, seen, &skipped);
        /* windows: those with a cell in this shard, per model; done before = none pending */
        for (size_t w = 0; w < g->n_windows; w++) {
            sum->windows_total += seen[w] & 1;
            sum->windows_done_before += seen[w] == 1;
            model_windows_before[m] += seen[w] == 1;
        }
    }
    sum->done_before = sum->total - ntodo;
    if (skipped)
        fprintf(stderr, "attnsweep run: %zu cells of this shard are done in %s already: skipped "
                        "(`attnsweep merge` joins them from it)\n", skipped, r->cfg.output);
    free(existing);
    /* the model list, in the order the models run (one line each) */
    for (size_t m = 0; nm > 1 && m < nm; m++)
        fprintf(stderr, "attnsweep run: model %zu %s (%s): %zu of %zu windows to do\n", m,
                r->cfg.models[m].name, r->cfg.models[m].dir, g->n_windows - model_windows_before[m],
                g->n_windows);
    int rc = !todo || !seen ? as_fail(err, "out of memory for the cell list") : build_units(r, todo, ntodo, err);
    free(seen);
    free(todo);
    /* how the output stores cells (its own datasets decide, store_compressed) */
    if (r->out) r->deflate = store_compressed(r->out) ? 1 + store_checksummed(r->out) : 0;
    return rc;
}

int run_alloc_units(run *r, size_t n, as_err *err) {
    r->n_units = n;
    r->units = malloc((n ? n : 1) * sizeof *r->units);
    r->model_units = calloc(r->cfg.n_model + 1, sizeof *r->model_units);
    return r->units && r->model_units ? 0 : as_fail(err, "out of memory for %zu units", n);
}

/* A unit's message holds one slot per cell: wall_time and rank as doubles, then the
 * cell packed as the file stores it (cw_pack_cell: float32 means, int32 counts,
 * float64 KS), padded to a double. When the output is compressed the packed cell is then
 * deflated (cw_deflate_cell: the chunk bytes HDF5's shuffle + deflate stores), so the
 * master writes it with no filter work of its own (docs/performance.md, "Compressed results
 * at no cost to the master"); the slot is
 * then sized for the worst case and zero past the payload. The metrics are accumulated in
 * double and narrowed here once, by the same code the master used before, so the file's
 * bytes are the same; the master receives half the bytes and writes them without converting. */
static size_t slot_doubles(const cr_layout *lay, int deflate) {
    size_t bytes = cw_pack_bytes(lay), dz = cw_deflate_bound(lay);
    if (deflate && dz > bytes) bytes = dz;
    return 2 + (bytes + sizeof(double) - 1) / sizeof(double);
}

void run_layout(run *r) {
    r->unit_cells = grid_unit_cells(&r->grid);
    /* the master's block layout: the union axes, the same for every model (and the
     * sampled variables of metrics.query_rows = "sample:K") */
    grid_block_layout(&r->layout, &r->cfg);
    r->slot_doubles = slot_doubles(&r->layout, r->deflate);
}

/* --- step 5: a unit ------------------------------------------------------------- */

void run_unit_name(const run *r, size_t m, char *out, size_t size) {
    if (r->cfg.n_model > 1) snprintf(out, size, "windows of %s", r->cfg.models[m].name);
    else snprintf(out, size, "windows");
}

size_t run_units_per_commit(const run *r) {
    size_t per_commit = (size_t)r->cfg.commit_every / r->unit_cells;
    return per_commit ? per_commit : 1;
}

int run_start_model(run *r, size_t m, const gpt2_model *model, int computes,
                    int (*should_stop)(void), as_err *err) {
    /* the previous model's worker goes first, so the peak is the largest model's */
    if (r->worker) run_add_worker_timings(r), cell_worker_free(r->worker), r->worker = NULL;
    if (!computes) return 0;
    cell_spec spec = cell_spec_of_model(&r->cfg, m);
    /* Every cut comes from a pass at the grid's largest L, however the cuts
     * are grouped into units (a resume regroups them). */
    r->worker = cell_worker_new(model, &spec, r->rank, (size_t)config_max_L(&r->cfg), should_stop, err);
    return r->worker ? 0 : -1;
}

/* The L values of unit u, ascending; returns how many. */
static size_t unit_cuts(const run *r, const grid_unit *u, size_t *cuts, size_t *l_index) {
    size_t n = 0;
    for (size_t k = 0; k < GRID_UNIT_MAX_CUTS; k++)
        if (u->l_mask >> k & 1) {
            size_t li = (size_t)u->l_lo + k;
            if (l_index) l_index[n] = li;
            cuts[n++] = (size_t)r->cfg.axes.L[li];
        }
    return n;
}

/* One computed block into its slot's payload: packed, or packed and deflated. */
static int pack_slot(run *r, const double *block, unsigned char *out, as_err *err) {
    if (!r->deflate) {
        cw_pack_cell(&r->layout, block, out);
        return 0;
    }
    size_t pb = cw_pack_bytes(&r->layout), room = (r->slot_doubles - 2) * sizeof(double);
    if (!r->pack_buf && (!(r->pack_buf = malloc(pb ? pb : 1)) || !(r->dz_scratch = malloc(pb ? pb : 1))))
        return as_fail(err, "out of memory for deflating a cell (%zu bytes)", pb);
    double tz = as_monotonic_s();
    size_t len = 0;
    cw_pack_cell(&r->layout, block, r->pack_buf);
    int rc = cw_deflate_cell(&r->layout, r->pack_buf, out, room, &len, r->dz_scratch,
                                r->deflate == 2, err);
    if (rc == 0) memset(out + len, 0, room - len);
    r->timing[TM_DEFLATE] += as_monotonic_s() - tz;
    r->timing[TM_DEFLATE_IN] += (double)pb, r->timing[TM_DEFLATE_OUT] += (double)len;
    return rc;
}

int run_compute_unit(run *r, int64_t unit, double *block_out, as_err *err) {
    const grid_unit *u = &r->units[unit];
    size_t cuts[GRID_UNIT_MAX_CUTS];
    double *blocks[GRID_UNIT_MAX_CUTS];
    size_t n = unit_cuts(r, u, cuts, NULL), total = r->layout.total;
    if (!r->scratch && !(r->scratch = malloc(r->unit_cells * total * sizeof *r->scratch)))
        return as_fail(err, "out of memory for a unit's %zu blocks", r->unit_cells);
    for (size_t k = 0; k < n; k++) blocks[k] = r->scratch + k * total;
    double t0 = as_monotonic_s();
    int rc = cell_compute(r->worker, u->window, r->tokens + r->grid.window_start[u->window], cuts,
                          n, blocks, err);
    for (size_t k = 0; k < n && rc == 0; k++) {
        double *slot = block_out + k * r->slot_doubles;
        slot[0] = blocks[k][r->layout.offset[CR_WALL_TIME]];
        slot[1] = blocks[k][r->layout.offset[CR_RANK]];
        slot[r->slot_doubles - 1] = 0; /* the padding, so a message is deterministic */
        rc = pack_slot(r, blocks[k], (unsigned char *)(slot + 2), err);
    }
    r->timing[TM_COMPUTE] += as_monotonic_s() - t0;
    r->timing[TM_UNITS] += 1;
    return rc;
}

/* Up to STORE_BATCH cells go to the store in one call (one journal write +
 * fsync and one HDF5 flush), so a commit costs about its bytes, not its
 * count; a unit's cells stay together in one call. */
enum { STORE_BATCH = 64 };

static int commit_held(run *r, const store_cell *sc, const unsigned char *const *pk, size_t n,
                       as_err *err) {
    return r->deflate ? store_commit_deflated(r->out, sc, pk, n, err)
                      : store_commit_packed(r->out, sc, pk, n, err);
}

int run_commit_units(run *r, const int64_t *units, double *const *blocks, const int *status,
                     size_t n, as_err *err) {
    double t0 = as_monotonic_s(), c0 = as_thread_cpu_s();
    store_cell sc[STORE_BATCH];
    const unsigned char *pk[STORE_BATCH];
    size_t held = 0;
    for (size_t i = 0; i < n; i++) {
        const grid_unit *u = &r->units[units[i]];
        size_t cuts[GRID_UNIT_MAX_CUTS], lis[GRID_UNIT_MAX_CUTS];
        size_t k = unit_cuts(r, u, cuts, lis);
        if (held + k > STORE_BATCH) {
            if (commit_held(r, sc, pk, held, err)) return -1;
            held = 0;
        }
        int ok = status[i] == RUN_UNIT_DONE;
        double now = as_wall_s();
        for (size_t c = 0; c < k; c++) {
            const double *b = blocks[i] + c * r->slot_doubles;
            double wall = ok ? b[0] : NAN, rk = ok ? b[1] : NAN;
            sc[held] = (store_cell){.model = (size_t)u->model, .window = (size_t)u->window, .l_index = lis[c],
                                    .status = ok ? STORE_DONE : STORE_FAILED,
                                    .rank = isnan(rk) || rk < 0 || rk > 2147483647.0 ? -1 : (int)rk,
                                    .t_start = ok ? now - wall * (double)k : now, .t_end = now,
                                    .wall_time = wall};
            pk[held++] = ok ? (const unsigned char *)(b + 2) : NULL;
        }
        if (ok) r->cells_done += k, r->units_done++;
        else r->cells_failed += k, r->units_failed++;
        r->timing[TM_COMMIT_CELLS] += (double)k;
    }
    if (held && commit_held(r, sc, pk, held, err)) return -1;
    r->timing[TM_COMMIT] += as_monotonic_s() - t0;
    r->timing[TM_COMMIT_CPU] += as_thread_cpu_s() - c0;
    return 0;
}

void run_unit_dispatched(run *r, int64_t unit, int worker) {
    const grid_unit *u = &r->units[unit];
    size_t cuts[GRID_UNIT_MAX_CUTS], lis[GRID_UNIT_MAX_CUTS];
    size_t k = unit_cuts(r, u, cuts, lis);
    double now = as_wall_s();
    as_err ignored;
    /* An attempt that fails to journal is only a miscount; the commit that
     * follows reports real I/O trouble. */
    for (size_t c = 0; c < k; c++)
        (void)store_mark_dispatched(r->out, (size_t)u->model, (size_t)u->window, lis[c], worker, now,
                                    &ignored);
}

/* --- step 6: the close, the timings ------------------------------------------------ */

int run_close(run *r, int srun, size_t failed_units, int signo, run_summary *sum, as_err *err) {
    sum->done = r->cells_done;
    sum->failed = r->cells_failed;
    sum->windows_this_run = r->units_done;
    sum->windows_failed = r->units_failed;
    const char *state = srun < 0 ? "failed" : srun == RUN_INTERRUPTED ? "interrupted" : "finished";
    as_err close_err;
    if (r->out) store_set_stop_signal(r->out, signo); /* /provenance: "stopped by signal NAME" */
    if (r->out && store_close(r->out, state, srun < 0 ? &close_err : err) && srun >= 0) srun = -1;
    r->out = NULL;
    return srun < 0 ? -1 : srun == RUN_INTERRUPTED ? RUN_INTERRUPTED
           : failed_units ? RUN_CELLS_FAILED : RUN_COMPLETE;
}

void run_add_worker_timings(run *r) {
    if (!r->worker) return;
    cell_timings t = cell_worker_take_timings(r->worker);
    r->timing[TM_FORWARD] += t.forward_s;
    r->timing[TM_METRICS] += t.metrics_s;
    r->timing[TM_KS] += t.ks_s;
    r->timing[TM_FORWARD_CPU] += t.forward_cpu_s;
    r->timing[TM_METRICS_CPU] += t.metrics_cpu_s;
}

int run_timings_row(run *r) {
    const char *on = getenv("ATTNSWEEP_TIMINGS");
    if (!on || on[0] != '1') return 0;
    run_add_worker_timings(r); /* the last model's worker (the earlier ones at their switch) */
    r->timing[TM_CPU] = as_process_cpu_s();
    return 1;
}

/* Worker "waiting" is its time in the scheduler outside compute: sending results,
 * receiving work and idling at the end. */
void run_print_timings(const run *r, const double *all, int size, const run_sched_totals *st) {
    double fw = 0, me = 0, ks = 0, co = 0, fwc = 0, mec = 0, dz = 0, dz_in = 0, dz_out = 0;
    for (int k = 0; k < size; k++) {
        const double *t = all + (size_t)k * TM_N;
        fprintf(stderr,
                "timings: rank %d: run %.2f s (model load %.2f), in scheduler %.2f: compute %.2f "
                "[forward %.2f, metrics %.2f, ks %.2f, deflate %.3f] in %.0f units, waiting/transfer %.2f; "
                "cpu %.2f s [forward %.2f, metrics %.2f]\n",
                k, t[TM_RUN], t[TM_LOAD], t[TM_SCHED], t[TM_COMPUTE], t[TM_FORWARD], t[TM_METRICS],
                t[TM_KS], t[TM_DEFLATE], t[TM_UNITS], t[TM_SCHED] - t[TM_COMPUTE], t[TM_CPU], t[TM_FORWARD_CPU],
                t[TM_METRICS_CPU]);
        dz += t[TM_DEFLATE], dz_in += t[TM_DEFLATE_IN], dz_out += t[TM_DEFLATE_OUT];
        fw += t[TM_FORWARD], me += t[TM_METRICS], ks += t[TM_KS], co += t[TM_COMPUTE];
        fwc += t[TM_FORWARD_CPU], mec += t[TM_METRICS_CPU];
    }
    const double *m = all;
    double bytes = m[TM_COMMIT_CELLS] * (double)r->slot_doubles * sizeof(double);
    fprintf(stderr,
            "timings: master: commit %.3f s (cpu %.3f) for %.0f cells (%.1f MB of blocks, %.0f MB/s) "
            "%s in %zu batches (largest %zu windows), master cpu %.2f s; scheduler elapsed %.2f s\n",
            m[TM_COMMIT], m[TM_COMMIT_CPU], m[TM_COMMIT_CELLS], bytes / 1e6,
            m[TM_COMMIT] > 0 ? bytes / 1e6 / m[TM_COMMIT] : 0.0,
            st->threaded_commit ? "on the writer thread" : "synchronous", st->commit_batches,
            st->largest_batch, st->master_cpu_s, st->elapsed_s);
    double windows = (double)r->grid.n_windows;
    fprintf(stderr,
            "timings: per window (%.0f windows, %.0f cells): scheduler wall %.2f s; compute %.2f s "
            "= forward %.2f + metrics %.2f + ks %.2f; commit %.3f s; cpu: forward %.2f, metrics %.2f\n",
            windows, m[TM_COMMIT_CELLS], st->elapsed_s / windows, co / windows, fw / windows,
            me / windows, ks / windows, m[TM_COMMIT] / windows, fwc / windows, mec / windows);
    if (r->deflate)
        fprintf(stderr, "timings: deflate on the workers: %.3f s per window, %.1f MB -> %.1f MB per "
                "window (%.2fx)\n", dz / windows, dz_in / windows / 1e6, dz_out / windows / 1e6,
                dz_out > 0 ? dz_in / dz_out : 0.0);
}
