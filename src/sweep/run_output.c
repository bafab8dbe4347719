/* run_output.c -- step 3 of a run: the output. Rank 0 opens or creates the results store
 * after checking what must not change under results already written (the config, the
 * inputs' hashes) and that the disk can hold the sweep; see run.h. */
#include "run.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "journal.h"
#include "model.h"
#include "plan.h"
#include "sha256.h"

void run_hosts_list(char *out, size_t size, const char *names, size_t stride, size_t n) {
    out[0] = 0;
    for (size_t q = 0; names && q < n; q++) {
        const char *h = names + q * stride;
        int seen = 0;
        for (size_t p = 0; p < q && !seen; p++) seen = !strcmp(h, names + p * stride);
        if (seen) continue;
        if (out[0]) strncat(out, ",", size - strlen(out) - 1);
        strncat(out, h, size - strlen(out) - 1);
    }
}

/* A changed config may resume only when it adds windows, L values or models (config_diff). */
static int check_config_change(const as_config *cfg, const char *path, int *flags, as_err *err) {
    char *old_text = NULL, *old_sha = NULL;
    int found = store_peek_config_to_write(path, &old_text, &old_sha, err);
    if (found < 0) return -1;
    int rc = 0;
    if (found && strcmp(old_sha, cfg->sha256)) {
        as_config_diff d;
        char what[800];
        if (config_diff(&d, old_text, cfg->canonical, err)) {
            rc = -1;
        } else if (config_diff_blocks(&d, what, sizeof what)) {
            rc = as_fail(err,
                         "%s was made with another config (%s); only added windows, L values or "
                         "models appended to the model list can extend it: restore the config, "
                         "resume with the one stored in the file (attnsweep run %s), or choose a "
                         "new output",
                         path, what, path);
        } else {
            *flags |= STORE_ALLOW_CONFIG_CHANGE;
        }
    }
    free(old_text);
    free(old_sha);
    return rc;
}

/* The sha256 recorded as "NAME sha256=HEX" in a tokenizer_files attribute, or NULL. */
static const char *recorded_sha(const char *files, const char *name, char hex[65]) {
    char key[64];
    snprintf(key, sizeof key, "%s sha256=", name);
    const char *p = files ? strstr(files, key) : NULL;
    if (!p) return NULL;
    p += strlen(key);
    size_t n = strspn(p, "0123456789abcdef");
    if (n != 64) return NULL;
    memcpy(hex, p, 64);
    hex[64] = 0;
    return hex;
}

static int input_changed(const char *out, const char *file, const char *now, const char *then, as_err *err) {
    return as_fail(err, "%s: changed since %s was written (sha256 now %s, recorded %s); mixing its "
                   "results with the old ones is refused: restore the file, or choose a new output",
                   file, out, now, then);
}

/* The inputs' identity as the journal's config record keeps it (store.h, store_provenance
 * inputs): one "KEY sha256=HEX" line per file the run reads -- each model's
 * model.safetensors and config.json, the text, and for a text that is tokenized vocab.json
 * and merges.txt. NULL when out of memory. */
static char *inputs_text(const run *st, char (*cfg_sha)[65]) {
    const as_config *c = &st->cfg;
    size_t cap = (c->n_model * 2 + 3) * 120 + 1, at = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = 0;
    for (size_t m = 0; m < c->n_model; m++)
        at += (size_t)snprintf(out + at, cap - at, "model %zu model.safetensors sha256=%s\n"
                               "model %zu config.json sha256=%s\n", m, st->model_sha[m], m, cfg_sha[m]);
    at += (size_t)snprintf(out + at, cap - at, "text sha256=%s\n", st->text_sha);
    if (c->text_format != AS_TEXT_TOKENS)
        snprintf(out + at, cap - at, "%s sha256=%s\n%s%s%s%s", st->vocab_name, st->vocab_sha, st->merges_name,
                 st->merges_sha[0] ? " sha256=" : "", st->merges_sha, st->merges_sha[0] ? "\n" : "");
    return out;
}

/* The file an inputs key (inputs_text) stands for, in the current config. */
static void input_path(char *out, size_t size, const as_config *c, const char *key) {
    size_t m;
    char file[32];
    if (sscanf(key, "model %zu %31s", &m, file) == 2 && m < c->n_model)
        snprintf(out, size, "%s/%s", c->models[m].dir, file);
    else if (!strcmp(key, "text"))
        snprintf(out, size, "%s", c->text_path);
    else
        snprintf(out, size, "%s/%s", c->model_dir, key);
}

/* Every input the journal recorded must hash as it did: this holds also when the HDF5
 * view is gone and would be rebuilt from the journal (a killed run, the weights changed in
 * place, the .h5 lost), where the view's attributes cannot be compared. Inputs recorded
 * only now (models appended) or no longer read (a config change, refused or allowed by
 * check_config_change) are not compared. A journal from before the inputs were kept
 * records none: said once, and this run records them (store.c, append_config). */
static int check_journal_inputs(const run *st, const char *now, as_err *err) {
    char *then = NULL;
    int found = store_peek_inputs(st->out_path, &then, err);
    if (found < 0) return -1;
    char jpath[4200];
    snprintf(jpath, sizeof jpath, "%s.journal", st->out_path);
    struct stat sb;
    if (!found) {
        if (stat(jpath, &sb) == 0)
            fprintf(stderr, "attnsweep run: note: %s records no hashes of its inputs (written by an "
                    "older attnsweep): config.json and the tokenizer files are checked against the "
                    "results file only this time; they are recorded from now on\n", jpath);
        return 0;
    }
    int rc = 0;
    for (const char *p = then; *p && rc == 0;) {
        const char *eq = strstr(p, " sha256="), *eol = strchr(p, '\n');
        if (!eq || (eol && eq > eol)) break;
        char key[64], hex_then[65], hex_now[65], path[AS_PATH_MAX + 128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
        if (store_inputs_lookup(then, key, hex_then) && store_inputs_lookup(now, key, hex_now) &&
            strcmp(hex_then, hex_now)) {
            input_path(path, sizeof path, &st->cfg, key);
            rc = input_changed(jpath, path, hex_now, hex_then, err);
        }
        p = eol ? eol + 1 : p + strlen(p);
    }
    free(then);
    return rc;
}

/* Inputs rewritten in place: the weights, each model's config.json, the text (and, for a
 * text that is tokenized, vocab.json and merges.txt) must hash as the results file
 * recorded them (its root attributes and model coordinates). A file whose view cannot be
 * read is rebuilt by the store from the journal: check_journal_inputs compares with it. A
 * file of an older version without a tokenizer or config.json hash is compared on what it
 * has. */
static int check_inputs_unchanged(const run *st, const char *tok_files, char (*cfg_sha)[65],
                                  as_err *err) {
    struct stat sb;
    if (stat(st->out_path, &sb) != 0) return 0;
    store_description d;
    as_err ignored;
    if (store_describe(st->out_path, &d, &ignored)) return 0;
    const as_config *c = &st->cfg;
    char path[AS_PATH_MAX + 32];
    int rc = 0;
    /* every model's weights (a file from before the model axis: model 0, in weights_sha256) */
    size_t stored = d.axes.n_model ? d.axes.n_model : 1;
    for (size_t m = 0; m < stored && m < c->n_model && rc == 0; m++) {
        const char *w = d.axes.n_model ? d.axes.model_sha256[m] : d.prov.weights_sha256;
        if (w && w[0] && strcmp(w, st->model_sha[m])) {
            snprintf(path, sizeof path, "%s/model.safetensors", c->models[m].dir);
            rc = input_changed(st->out_path, path, st->model_sha[m], w, err);
        }
        /* each config.json (a file from before the model axis: the root attribute) */
        const char *cs = d.axes.n_model ? (d.axes.model_config_sha256 ? d.axes.model_config_sha256[m] : NULL)
                                        : d.prov.model_config_sha256;
        if (rc == 0 && cs && cs[0] && strcmp(cs, cfg_sha[m])) {
            snprintf(path, sizeof path, "%s/config.json", c->models[m].dir);
            rc = input_changed(st->out_path, path, cfg_sha[m], cs, err);
        }
    }
    const char *t = d.prov.text_sha256;
    if (rc == 0 && t && t[0] && strcmp(t, st->text_sha))
        rc = input_changed(st->out_path, c->text_path, st->text_sha, t, err);
    static const char *const names[] = {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"};
    for (int k = 0; k < 4 && rc == 0; k++) {
        char then[65], now[65];
        if (!recorded_sha(d.prov.tokenizer_files, names[k], then)) continue;
        if (!recorded_sha(tok_files, names[k], now)) {
            rc = as_fail(err, "%s: the text was tokenized with %s/%s (sha256 %s) and is now %s; choose a new output",
                         st->out_path, c->model_dir, names[k], then,
                         c->text_format == AS_TEXT_TOKENS ? "pre-tokenized" : "tokenized with other files");
        } else if (strcmp(now, then)) {
            snprintf(path, sizeof path, "%s/%s", c->model_dir, names[k]);
            rc = input_changed(st->out_path, path, now, then, err);
        }
    }
    store_description_free(&d);
    return rc;
}

static double file_bytes(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (double)sb.st_size : 0.0;
}

/* Refuses, before anything is written, a run whose output cannot fit: the
 * bytes of a complete file and journal (this shard's share) less what the
 * existing ones already take, against the free space of the output's file
 * system. */
static int check_disk_space(const run *st, as_err *err) {
    const run_opts *opts = st->opts;
    /* an existing output keeps its own form (compressed or not), whatever the config says */
    int compressed = st->cfg.compress;
    if (file_bytes(st->out_path) > 0 && !opts->fresh) {
        int fc = store_file_compressed(st->out_path);
        if (fc >= 0) compressed = fc;
    }
    double need = grid_disk_bytes(&st->grid, compressed);
    if (opts->shard_count > 0) need /= opts->shard_count;
    char jpath[4200];
    snprintf(jpath, sizeof jpath, "%s.journal", st->out_path);
    double have = file_bytes(st->out_path) + file_bytes(jpath);
    double more = need - have, avail = fileio_free_bytes(st->out_path);
    if (avail < 0 || more <= avail) return 0;
    char a[32], b[32];
    fileio_format_size(a, sizeof a, more);
    fileio_format_size(b, sizeof b, avail);
    return as_fail(err, "%s: the sweep needs about %s more disk space (results file + journal) but its "
                   "file system has %s free; free some space, choose another output, shrink the grid, "
                   "or run with --ignore-disk-space", st->out_path, a, b);
}

unsigned char *run_existing_done(const run *st, size_t *held) {
    const run_opts *opts = st->opts;
    *held = 0;
    if (opts->shard_count <= 0) return NULL;
    const char *out = st->cfg.output;
    char *text = NULL, *sha = NULL, jpath[4200];
    as_err err;
    int same = store_peek_config(out, &text, &sha, &err) > 0 && !strcmp(sha, st->cfg.sha256);
    free(text);
    free(sha);
    if (!same || store_sidecar(jpath, sizeof jpath, out, ".journal")) return NULL;
    journal *j = journal_open(jpath, JOURNAL_SKIP_PAYLOAD_CRC, NULL, NULL, &err);
    if (!j) return NULL;
    const as_grid *g = &st->grid;
    size_t per = g->n_cells, nm = st->cfg.n_model;
    unsigned char *done = calloc(per * nm + 1, 1);
    journal_record r;
    /* the last commit of a cell decides, as the store's replay does */
    while (done && journal_next(j, &r, &err) == 1) {
        if (r.type != JR_COMMIT || r.window < 0 || r.model >= nm) continue;
        long c = grid_cell_find(g, (size_t)r.window, r.L);
        if (c >= 0 && g->window_start[r.window] == r.window_start)
            done[r.model * per + (size_t)c] = r.status == STORE_DONE;
    }
    journal_close(j);
    for (size_t i = 0; done && i < per * nm; i++) *held += done[i];
    return done;
}

/* The model axis as the store takes it (store_axes): names, paths, sha256s, shapes;
 * head_valid over the union axes. */
typedef struct {
    const char **name, **path, **sha, **kind, **cfg_sha_p, **family;
    char (*cfg_sha)[65];     /* each model's config.json: part of the inputs' identity */
    int32_t *nl, *nh, *ne;
    int64_t *step;
    uint8_t *hv;
} axis_of_models;

static void axis_of_models_free(axis_of_models *x) {
    free(x->name), free(x->path), free(x->sha), free(x->kind), free(x->cfg_sha_p), free(x->cfg_sha);
    free(x->family);
    free(x->nl), free(x->nh), free(x->ne), free(x->step), free(x->hv);
}

static int axis_of_models_make(axis_of_models *x, const run *st, as_err *err) {
    const as_config *c = &st->cfg;
    const as_axes *a = &c->axes;
    size_t nm = c->n_model;
    memset(x, 0, sizeof *x);
    x->name = calloc(nm, sizeof *x->name), x->path = calloc(nm, sizeof *x->path);
    x->sha = calloc(nm, sizeof *x->sha), x->kind = calloc(nm, sizeof *x->kind);
    x->cfg_sha_p = calloc(nm, sizeof *x->cfg_sha_p), x->cfg_sha = calloc(nm, sizeof *x->cfg_sha);
    x->nl = calloc(nm, sizeof *x->nl), x->nh = calloc(nm, sizeof *x->nh), x->ne = calloc(nm, sizeof *x->ne);
    x->step = calloc(nm, sizeof *x->step), x->family = calloc(nm, sizeof *x->family);
    x->hv = calloc(nm * a->n_layer * a->n_head + 1, 1);
    if (!x->name || !x->path || !x->sha || !x->kind || !x->cfg_sha_p || !x->cfg_sha || !x->nl ||
        !x->nh || !x->ne || !x->step || !x->family || !x->hv)
        return as_fail(err, "out of memory");
    for (size_t m = 0; m < nm; m++) {
        char path[AS_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/config.json", c->models[m].dir);
        if (sha256_file_hex(x->cfg_sha[m], path, err)) return -1;
        x->cfg_sha_p[m] = x->cfg_sha[m];
        const as_model_spec *ms = &c->models[m];
        x->name[m] = ms->name, x->path[m] = ms->dir, x->sha[m] = st->model_sha[m];
        x->kind[m] = model_kind(ms->dir);
        x->family[m] = model_family_name(ms->cfg.family);
        x->nl[m] = (int32_t)ms->cfg.n_layer, x->nh[m] = (int32_t)ms->cfg.n_head;
        x->ne[m] = (int32_t)ms->cfg.n_embd;
        x->step[m] = ms->training_step;
        for (size_t il = 0; il < a->n_layer; il++)
            for (size_t ih = 0; ih < a->n_head; ih++)
                x->hv[(m * a->n_layer + il) * a->n_head + ih] =
                    (size_t)a->layer[il] < ms->cfg.n_layer && (size_t)a->head[ih] < ms->cfg.n_head;
    }
    return 0;
}

/* The checks that protect results already written, then the store. */
static int open_checked(run *st, const store_axes *ax, const store_provenance *prov,
                        const char *tok_files, char (*cfg_sha)[65], as_err *err) {
    const run_opts *opts = st->opts;
    const as_config *c = &st->cfg;
    int flags = 0;
    if (!opts->fresh && check_config_change(c, st->out_path, &flags, err)) return -1;
    if (!opts->fresh && check_inputs_unchanged(st, tok_files, cfg_sha, err)) return -1;
    if (!opts->fresh && check_journal_inputs(st, prov->inputs, err)) return -1;
    if (!opts->ignore_disk_space && check_disk_space(st, err)) return -1;
    if (c->compress) flags |= STORE_COMPRESSED;
    st->out = store_open(st->out_path, ax, prov, opts->fresh ? STORE_NEW : STORE_RESUME, flags, err);
    if (!st->out) return -1;
    /* Damage in the middle of the journal is not an error (its cells are computed
     * again) but must not pass unnoticed: one line, also kept in /provenance. */
    if (store_journal_damage(st->out)[0])
        fprintf(stderr, "attnsweep run: warning: %s\n", store_journal_damage(st->out));
    return 0;
}

int run_open_output(run *st, const run_env *env, as_err *err) {
    const as_config *c = &st->cfg;
    const as_axes *a = &c->axes;
    const char *norm_names[MET_N_NORMALIZERS]; /* the axis holds each normalizer at most once */
    for (size_t z = 0; z < a->n_norm && z < MET_N_NORMALIZERS; z++) norm_names[z] = met_normalizer_name(a->normalizer[z]);
    size_t nm = c->n_model;
    axis_of_models x;
    if (axis_of_models_make(&x, st, err)) {
        axis_of_models_free(&x);
        return -1;
    }
    /* the root model_kind: the models' common kind, or "mixed" (then only the per-model
     * model_kind coordinate says whose numbers each model's are) */
    const char *root_kind = nm ? x.kind[0] : "unknown";
    for (size_t m = 1; m < nm; m++)
        if (strcmp(x.kind[m], root_kind)) root_kind = "mixed";
    store_axes ax = {.n_model = nm, .model_name = x.name, .model_path = x.path, .model_sha256 = x.sha,
                     .model_kind = x.kind, .model_config_sha256 = x.cfg_sha_p, .model_family = x.family,
                     .model_n_layer = x.nl, .model_n_head = x.nh, .model_n_embd = x.ne,
                     .training_step = x.step, .head_valid = x.hv,
                     .n_window = st->grid.n_windows, .window_start = st->grid.window_start,
                     .n_L = a->n_L, .L = a->L, .n_N = a->n_N, .N = a->N, .n_T = a->n_T, .T = a->T,
                     .n_eps = a->n_eps, .eps = a->eps, .n_norm = a->n_norm, .normalizer = norm_names,
                     .n_layer = a->n_layer, .layer = a->layer, .n_head = a->n_head, .head = a->head,
                     .sampled = c->query_rows != 0};
    char query_rows[40] = "all"; /* the root attribute query_rows (docs/results.md) */
    if (c->query_rows) snprintf(query_rows, sizeof query_rows, "sample:%lld", (long long)c->query_rows);
    char tok_files[1024];
    if (c->text_format == AS_TEXT_TOKENS)
        snprintf(tok_files, sizeof tok_files, "(pre-tokenized text)");
    else
        snprintf(tok_files, sizeof tok_files, "%s", st->tok_files);
    char *inputs = inputs_text(st, x.cfg_sha);
    store_provenance prov = {
        .model_config_sha256 = x.cfg_sha[0], .inputs = inputs,
        .config_text = c->canonical, .config_sha256 = c->sha256, .model_dir = c->model_dir,
        .weights_sha256 = st->model_sha[0], .text_path = c->text_path,
        .text_sha256 = st->text_sha, .tokenizer_files = tok_files, .vectors = c->vectors,
        .rows = c->rows, .vectors_name = config_vectors_name(c->vectors),
        .rows_name = config_rows_name(c->rows),
        .logits_name = config_logits_name(c->logits), .query_rows_name = query_rows,
        .model_kind = root_kind, .ks_alpha = c->ks_alpha,
        .seed = (uint64_t)c->seed,
        .ks_random = c->ks_against == AS_KS_RANDOM, .random_subsets = c->dist_random ? c->random_subsets : 0,
        .distance_name = config_distance_name(c->distance),
        .mpi_library = env->mpi_library, .openblas_config = openblas_get_config(), .hosts = env->hosts,
        .mpi_size = env->size, .slurm_job_id = getenv("SLURM_JOB_ID")};
    int rc = inputs ? open_checked(st, &ax, &prov, tok_files, x.cfg_sha, err) : as_fail(err, "out of memory");
    axis_of_models_free(&x);
    free(inputs);
    return rc;
}
