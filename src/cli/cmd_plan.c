/* cmd_plan.c -- attnsweep plan: what a sweep config would do, without doing it.
 *
 * Prints the grid (each axis with its values), the number of cells, the
 * estimated compute time, memory per rank and the output size. No MPI, no
 * weights: the config, the model's config.json and, when it can be read, the
 * text (to show where window 0 starts and its first words). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "fileio.h"
#include "grid.h"
#include "journal.h"
#include "model.h"
#include "store.h"
#include "textsrc.h"
#include "tokenizer.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: attnsweep plan CONFIG|OUT.h5 [--set KEY=VALUE]... [--check] [--list]\n"
            "                      [--sgemm-gflops X] [--metric-ns Y] [--ranks P]\n\n"
            "Validates CONFIG and prints the sweep's axes, cells (one cell = one text\n"
            "window at one context length L), estimated compute time per window (one\n"
            "forward pass serves all its L), memory (the weights once per node, each\n"
            "worker, the master, the node's total for 1..16 ranks) and results file\n"
            "size. Reads the config, MODEL/config.json and, when it is there, the text:\n"
            "it prints where window 0 starts and its first words. When the output exists\n"
            "it says how many windows are left. Given a results file (OUT.h5), it plans\n"
            "with the config stored in it (as `run OUT.h5` does).\n\n"
            "  --set KEY=VALUE   override a config key, libconfig value syntax\n"
            "                    (--set grid.L=[64,128] --set output=\"x.h5\"); repeatable\n"
            "  --check           also check the model's tensors against config.json and the\n"
            "                    config against an existing output's, and require the text:\n"
            "                    fails (exit 1) on what `run` would fail on before computing\n"
            "  --list            also list the cells in dispatch order (largest L first)\n"
            "  --sgemm-gflops X  measured forward-pass rate per BLAS thread (default %.0f)\n"
            "  --metric-ns Y     measured nanoseconds per metric step (default %.2f)\n"
            "  --ranks P         also the time and node memory of P ranks on one node\n"
            "  --help            this text\n",
            AS_COST_SGEMM_GFLOPS, AS_COST_METRIC_NS);
}

static void human_bytes(char *buf, size_t size, double b) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024 && u < 5) b /= 1024, u++;
    snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

/* This machine's memory (MemTotal of /proc/meminfo) in bytes; -1 when unknown. */
static double machine_memory(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    double kib = -1;
    while (kib < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %lf kB", &kib) != 1) kib = -1;
    fclose(f);
    return kib < 0 ? -1 : kib * 1024;
}

static void human_seconds(char *buf, size_t size, double s) {
    if (s < 1) snprintf(buf, size, "%.3g s", s);
    else if (s < 120) snprintf(buf, size, "%.1f s", s);
    else if (s < 7200) snprintf(buf, size, "%.1f min", s / 60);
    else if (s < 2 * 86400) snprintf(buf, size, "%.1f h", s / 3600);
    else snprintf(buf, size, "%.1f days", s / 86400);
}

/* An axis on one line: every value when few, else the first four and the last two. */
#define SHOW_ALL 10
static void print_int_axis(const char *name, const int32_t *v, size_t n) {
    printf("  %-11s %6zu: ", name, n);
    int contiguous = n > 2;
    for (size_t i = 1; i < n && contiguous; i++) contiguous = v[i] == v[i - 1] + 1;
    if (contiguous && n > SHOW_ALL) {
        printf("%d..%d\n", (int)v[0], (int)v[n - 1]);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (n > SHOW_ALL && i == 4) {
            printf(", ...");
            i = n - 3;
            continue;
        }
        printf("%s%d", i ? ", " : "", (int)v[i]);
    }
    printf("\n");
}

static void print_double_axis(const char *name, const double *v, size_t n) {
    printf("  %-11s %6zu: ", name, n);
    for (size_t i = 0; i < n; i++) {
        if (n > SHOW_ALL && i == 4) {
            printf(", ...");
            i = n - 3;
            continue;
        }
        printf("%s%.6g", i ? ", " : "", v[i]);
    }
    printf("\n");
}

/* Loads the text as `run` would and prints where window 0 starts and its first
 * words. A text that cannot be opened is a note (plan also runs where the
 * inputs are not); any other failure (e.g. text.start_at not found) is the
 * error `run` would stop with: -1 with err. */
static int print_window0(const as_config *cfg, as_err *err) {
    textsrc ts;
    textsrc_spec spec = {.path = cfg->text_path,
                         .format = cfg->text_format == AS_TEXT_TOKENS ? TEXTSRC_TOKENS : TEXTSRC_TEXT,
                         .strip_gutenberg = cfg->strip_gutenberg, .start_at = cfg->start_at,
                         .start_occurrence = cfg->start_occurrence};
    FILE *probe = fopen(cfg->text_path, "rb");
    if (!probe) {
        printf("window 0  (text not readable here: not shown)\n");
        return 0;
    }
    fclose(probe);
    if (textsrc_load(&ts, &spec, cfg->model_dir, cfg->model.vocab_size, err)) return -1;
    int64_t start = config_window_start(cfg, 0);
    printf("text has  %zu tokens (%s)", ts.n_tokens, ts.kind);
    if (cfg->start_at[0])
        printf("; starts at byte %zu of the file: occurrence %lld of text.start_at \"%s\"", ts.text_begin,
               (long long)cfg->start_occurrence, cfg->start_at);
    printf("\n");
    if ((uint64_t)start >= ts.n_tokens) {
        printf("window 0  token offset %lld: past the end of the text\n", (long long)start);
        textsrc_free(&ts);
        return 0;
    }
    size_t n = ts.n_tokens - (size_t)start < 24 ? ts.n_tokens - (size_t)start : 24;
    char words[512] = "";
    size_t len = 0;
    if (cfg->text_format == AS_TEXT_PLAIN) {
        tokenizer *tok = tokenizer_load(cfg->model_dir, err);
        if (!tok) return textsrc_free(&ts), -1;
        if (tokenizer_decode(tok, ts.tokens + start, n, words, sizeof words - 1, &len, err)) len = 0;
        tokenizer_free(tok);
    }
    words[len] = 0;
    for (size_t i = 0; i < len; i++)
        if (words[i] == '\n' || words[i] == '\r' || words[i] == '\t') words[i] = ' ';
    printf("window 0  token offset %lld", (long long)start);
    if (len) printf(", first words: \"%s...\"\n", words);
    else {
        printf(", first ids:");
        for (size_t i = 0; i < n && i < 12; i++) printf(" %d", (int)ts.tokens[start + (int64_t)i]);
        printf("\n");
    }
    textsrc_free(&ts);
    return 0;
}

/* Windows of the grid with every cell done, per model (done[m]), from an existing
 * output's journal (the truth); -1 when there is no journal. */
static long windows_done(const char *output, const as_grid *g, long *done) {
    char jpath[4200];
    if (store_sidecar(jpath, sizeof jpath, output, ".journal")) return -1;
    as_err err;
    journal *j = journal_open(jpath, JOURNAL_SKIP_PAYLOAD_CRC, NULL, NULL, &err);
    if (!j) return -1;
    size_t per = g->n_cells ? g->n_cells : 1;
    unsigned char *st = calloc(per * g->n_models, 1);
    journal_record r;
    while (st && journal_next(j, &r, &err) == 1) {
        if (r.type != JR_COMMIT || r.window < 0 || r.model >= g->n_models) continue;
        long c = grid_cell_find(g, (size_t)r.window, r.L);
        if (c >= 0) st[r.model * per + (size_t)c] = (unsigned char)r.status;
    }
    journal_close(j);
    if (!st) return -1;
    long total = 0;
    for (size_t m = 0; m < g->n_models; m++) {
        done[m] = 0;
        for (size_t w = 0; w < g->n_windows; w++) {
            int all = 1;
            for (size_t li = 0; li < g->n_L && all; li++)
                all = st[m * per + grid_cell_index(g, w, li)] == STORE_DONE;
            done[m] += all;
        }
        total += done[m];
    }
    free(st);
    return total;
}

/* --check: what run does before its first cell, without MPI or the weights' values. */
static int check_inputs(const as_config *cfg, as_err *err) {
    textsrc ts;
    textsrc_spec spec = {.path = cfg->text_path,
                         .format = cfg->text_format == AS_TEXT_TOKENS ? TEXTSRC_TOKENS : TEXTSRC_TEXT,
                         .strip_gutenberg = cfg->strip_gutenberg, .start_at = cfg->start_at,
                         .start_occurrence = cfg->start_occurrence};
    if (textsrc_load(&ts, &spec, cfg->model_dir, cfg->model.vocab_size, err)) return -1;
    int rc = textsrc_check_fit(&ts, cfg->windows_count, cfg->windows_offset, cfg->windows_stride,
                               config_max_L(cfg), err);
    size_t n_tokens = ts.n_tokens;
    textsrc_free(&ts);
    if (rc) return -1;
    printf("check     text: %zu tokens, enough for the windows\n", n_tokens);
    /* the tensors against config.json, every model: an arena of the right size is
     * only reserved, never written (fill = 0 reads no weight) */
    for (size_t k = 0; k < cfg->n_model; k++) {
        const as_model_spec *ms = &cfg->models[k];
        size_t bytes = model_arena_bytes(&ms->cfg);
        float *arena = aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!arena) return as_fail(err, "out of memory for the model check");
        gpt2_model m;
        rc = model_load_into(&m, ms->dir, arena, 0, err);
        if (rc == 0) model_free(&m);
        free(arena);
        if (rc) return -1;
        printf("check     model: every tensor of %s/model.safetensors matches config.json\n", ms->dir);
    }
    char *old_text = NULL, *old_sha = NULL;
    int found = store_peek_config(cfg->output, &old_text, &old_sha, err);
    if (found < 0) return -1;
    if (found && strcmp(old_sha, cfg->sha256)) {
        as_config_diff d;
        char what[800];
        rc = config_diff(&d, old_text, cfg->canonical, err);
        if (rc == 0 && config_diff_blocks(&d, what, sizeof what)) {
            rc = as_fail(err, "%s was made with another config (%s); only added windows, L "
                              "values or models appended to the model list can extend it",
                         cfg->output, what);
        }
    }
    free(old_text);
    free(old_sha);
    if (rc) return -1;
    printf("check     output: %s\n", found ? "resumes the existing output" : "new");
    return 0;
}

/* plan OUT.h5: the config stored in the results file. */
static int load_stored(as_config *cfg, const char *out, const char *const *sets, size_t n_sets,
                       as_err *err) {
    char *text = NULL, *sha = NULL;
    int found = store_peek_config(out, &text, &sha, err);
    free(sha);
    if (found < 0) return -1;
    if (!found) {
        store_description d;
        if (store_describe(out, &d, err)) return -1;
        if (d.prov.config_text && d.prov.config_text[0]) text = strdup(d.prov.config_text);
        store_description_free(&d);
        if (!text) return as_fail(err, "%s: holds no stored config", out);
    }
    char *abs = realpath(out, NULL);
    char out_set[4200];
    snprintf(out_set, sizeof out_set, "output=\"%s\"", abs ? abs : out);
    free(abs);
    const char **all = calloc(n_sets + 1, sizeof *all);
    int rc = -1;
    if (all) {
        all[0] = out_set;
        for (size_t i = 0; i < n_sets; i++) all[i + 1] = sets[i];
        char origin[4200];
        snprintf(origin, sizeof origin, "%s (stored config)", out);
        rc = config_load_text(cfg, text, origin, all, n_sets + 1, err);
    }
    free(all);
    free(text);
    return rc;
}

static int parse_positive(const char *opt, const char *text, double *out) {
    char *end;
    double v = strtod(text, &end);
    if (*end || !(v > 0)) {
        fprintf(stderr, "attnsweep plan: %s: '%s' is not a positive number\n", opt, text);
        return -1;
    }
    *out = v;
    return 0;
}

int cmd_plan(int argc, char **argv) {
    const char *path = NULL;
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    size_t n_sets = 0;
    int list = 0, check = 0;
    double gflops = AS_COST_SGEMM_GFLOPS, metric_ns = AS_COST_METRIC_NS, ranks = 0;
    if (!sets) {
        fprintf(stderr, "attnsweep plan: out of memory\n");
        return AS_EXIT_ERROR;
    }
    int rc = AS_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(sets);
            return AS_EXIT_OK;
        } else if (!strcmp(a, "--list")) {
            list = 1;
        } else if (!strcmp(a, "--check")) {
            check = 1;
        } else if (!strcmp(a, "--set") || !strcmp(a, "--sgemm-gflops") || !strcmp(a, "--metric-ns") ||
                   !strcmp(a, "--ranks")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "attnsweep plan: %s needs a value\n", a);
                goto out;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--set")) sets[n_sets++] = v;
            else if (parse_positive(a, v, !strcmp(a, "--metric-ns") ? &metric_ns
                                          : !strcmp(a, "--ranks")    ? &ranks
                                                                     : &gflops))
                goto out;
            if (!strcmp(a, "--ranks") && (ranks != (double)(size_t)ranks || ranks > 1e6)) {
                fprintf(stderr, "attnsweep plan: --ranks: '%s' is not a whole number of ranks\n", v);
                goto out;
            }
        } else if (!strncmp(a, "--set=", 6)) {
            sets[n_sets++] = a + 6;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "attnsweep plan: unknown option '%s' (try --help)\n", a);
            goto out;
        } else if (path) {
            fprintf(stderr, "attnsweep plan: one CONFIG only ('%s' and '%s')\n", path, a);
            goto out;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "attnsweep plan: missing CONFIG (try --help)\n");
        goto out;
    }

    as_config cfg;
    as_grid g;
    as_err err = {{0}};
    size_t plen = strlen(path);
    int stored = plen > 3 && (!strcmp(path + plen - 3, ".h5") || !strcmp(path + plen - 3, ".nc"));
    if (stored ? load_stored(&cfg, path, sets, n_sets, &err)
               : config_load(&cfg, path, sets, n_sets, &err)) {
        fprintf(stderr, "attnsweep plan: %s\n", err.msg);
        rc = AS_EXIT_ERROR;
        goto out;
    }
    if (grid_init(&g, &cfg, &err)) {
        fprintf(stderr, "attnsweep plan: %s\n", err.msg);
        config_free(&cfg);
        rc = AS_EXIT_ERROR;
        goto out;
    }
    g.cost.sgemm_gflops = gflops;
    g.cost.metric_ns = metric_ns;
    const as_axes *a = &cfg.axes;
    const gpt2_config *mc = &cfg.model;
    char b1[32], b2[32], b3[32], b4[32], b5[32];

    printf("config    %s (sha256 %.16s...)\n", cfg.path, cfg.sha256);
    (void)mc;
    for (size_t k = 0; k < cfg.n_model; k++) {
        const as_model_spec *ms = &cfg.models[k];
        char step[48] = "";
        if (ms->training_step >= 0) snprintf(step, sizeof step, ", training_step %lld", (long long)ms->training_step);
        if (cfg.n_model == 1)
            printf("model     %s: n_layer %zu, n_head %zu, n_embd %zu, n_positions %zu, %.1f M params%s\n",
                   ms->dir, ms->cfg.n_layer, ms->cfg.n_head, ms->cfg.n_embd, ms->cfg.n_positions,
                   (double)model_param_count(&ms->cfg) / 1e6, step);
        else
            printf("%s %zu %s (%s): n_layer %zu, n_head %zu, n_embd %zu, n_positions %zu, %.1f M "
                   "params%s\n", k ? "         " : "models   ", k, ms->name, ms->dir, ms->cfg.n_layer,
                   ms->cfg.n_head, ms->cfg.n_embd, ms->cfg.n_positions,
                   (double)model_param_count(&ms->cfg) / 1e6, step);
    }
    printf("text      %s (%s%s); needs >= %lld tokens\n", cfg.text_path,
           cfg.text_format == AS_TEXT_PLAIN ? "text" : "tokens",
           cfg.text_format == AS_TEXT_PLAIN ? (cfg.strip_gutenberg ? ", strip_gutenberg" : "") : "",
           (long long)config_tokens_needed(&cfg));
    printf("windows   count %lld, offset %lld, stride %lld\n", (long long)cfg.windows_count,
           (long long)cfg.windows_offset, (long long)cfg.windows_stride);
    if (print_window0(&cfg, &err)) {
        fprintf(stderr, "attnsweep plan: %s\n", err.msg);
        grid_free(&g);
        config_free(&cfg);
        rc = AS_EXIT_ERROR;
        goto out;
    }
    char ssmax[64];
    snprintf(ssmax, sizeof ssmax, "%.6g", cfg.ssmax_scale);
    for (size_t k = 1; k < cfg.n_model; k++)
        if (cfg.models[k].ssmax_scale != cfg.ssmax_scale) snprintf(ssmax, sizeof ssmax, "1/ln(n_positions) per model");
    printf("metrics   vectors %s, rows %s, logits %s, ks_alpha %g, ssmax_scale %s, seed %lld\n",
           cfg.vectors == AS_VECTORS_VALUE ? "value" : "resid",
           cfg.rows == AS_ROWS_VISIBLE ? "visible" : "full_row", config_logits_name(cfg.logits),
           cfg.ks_alpha, ssmax, (long long)cfg.seed);
    printf("output    %s\n", cfg.output);
    printf("runtime   blas_threads %d per rank, commit_every %d cells\n\n", cfg.blas_threads,
           cfg.commit_every);

    printf("axes\n");
    printf("  %-11s %6zu: ", "window", g.n_windows);
    if (g.n_windows <= 4)
        for (size_t w = 0; w < g.n_windows; w++) printf("%s%zu", w ? ", " : "", w);
    else
        printf("0..%zu", g.n_windows - 1);
    if (g.n_windows == 1)
        printf("  (first token %lld)\n", (long long)g.window_start[0]);
    else
        printf("  (first tokens %lld, %lld, ..., %lld)\n", (long long)g.window_start[0],
               (long long)g.window_start[1], (long long)g.window_start[g.n_windows - 1]);
    print_int_axis("L", a->L, a->n_L);
    print_int_axis("N", a->N, a->n_N);
    print_double_axis("T", a->T, a->n_T);
    print_double_axis("eps", a->eps, a->n_eps);
    printf("  %-11s %6zu: ", "normalizer", a->n_norm);
    for (size_t i = 0; i < a->n_norm; i++)
        printf("%s%s", i ? ", " : "", met_normalizer_name(a->normalizer[i]));
    printf("\n");
    print_int_axis("layer", a->layer, a->n_layer);
    print_int_axis("head", a->head, a->n_head);
    size_t useless = 0;
    for (size_t i = 0; i < a->n_N; i++) useless += a->N[i] >= config_max_L(&cfg);
    if (useless)
        printf("  note: %zu N value(s) >= the largest L (%d): always NaN (no row has n > N)\n",
               useless, (int)config_max_L(&cfg));

    /* one unit of work = one window of one model: a pass at the largest L, the metrics
     * of every L; the models run one after the other (time: the sum over the models) */
    size_t Lmax = (size_t)config_max_L(&cfg), nm = g.n_models;
    double total = 0, window = 0, *per_model = calloc(nm, sizeof *per_model);
    if (!per_model) {
        fprintf(stderr, "attnsweep plan: out of memory\n");
        grid_free(&g);
        config_free(&cfg);
        rc = AS_EXIT_ERROR;
        goto out;
    }
    if (nm > 1)
        /* "(W windows x" first, as for one model: jobs/make-sbatch.sh reads it */
        printf("\ncells     %zu (%zu windows x %zu L x %zu models); each: up to %zu heads x %zu N x "
               "%zu T x %zu normalizer\n", g.n_cells * nm, g.n_windows, g.n_L, nm,
               a->n_layer * a->n_head, a->n_N, a->n_T, a->n_norm);
    else
        printf("\ncells     %zu (%zu windows x %zu L); each: %zu heads x %zu N x %zu T"
               " x %zu normalizer\n",
               g.n_cells, g.n_windows, g.n_L, a->n_layer * a->n_head, a->n_N, a->n_T, a->n_norm);
    for (size_t k = 0; k < nm; k++) {
        grid_set_model(&g, k);
        double fwd = grid_forward_seconds(&g, Lmax);
        per_model[k] = grid_window_cost(&g);
        total += per_model[k] * (double)g.n_windows;
        human_seconds(b1, sizeof b1, per_model[k]);
        human_seconds(b2, sizeof b2, fwd);
        human_seconds(b3, sizeof b3, per_model[k] - fwd);
        if (nm > 1) printf("%s %zu %s: ", k ? "         " : "time     ", k, cfg.models[k].name);
        else printf("time      ");
        printf("%s per window (forward pass at L = %zu %s + metrics of %zu L %s)\n", b1, Lmax, b2,
               g.n_L, b3);
    }
    grid_set_model(&g, 0);
    window = total / (double)(g.n_windows * nm); /* the mean window, for the rank estimates */
    human_seconds(b1, sizeof b1, total);
    printf("          %s of rank time for %zu window%s%s\n", b1, g.n_windows * nm,
           g.n_windows * nm > 1 ? "s" : "", nm > 1 ? " (every model's)" : "");
    long *done_m = calloc(nm, sizeof *done_m);
    long done = done_m ? windows_done(cfg.output, &g, done_m) : -1;
    if (done >= 0) {
        double to_go = 0;
        for (size_t k = 0; k < nm; k++) to_go += per_model[k] * (double)(g.n_windows - (size_t)done_m[k]);
        size_t left = g.n_windows * nm - (size_t)done;
        human_seconds(b1, sizeof b1, to_go);
        printf("progress  %zu of %zu windows left (%ld done in %s): %s of rank time to go\n", left,
               g.n_windows * nm, done, cfg.output, b1);
    }
    free(done_m);
    free(per_model);
    size_t want = (size_t)ranks;
    /* the scheduler deals one model's windows at a time: rounds per model, summed */
    for (size_t P = 2; P <= 64; P *= 4) {
        double rounds = (double)(nm * ((g.n_windows + P - 2) / (P - 1)));
        human_seconds(b1, sizeof b1, rounds * window);
        printf("          %zu ranks (%zu workers): ~%s\n", P, P - 1, b1);
    }
    if (want >= 2 && want != 2 && want != 8 && want != 32) {
        double rounds = (double)(nm * ((g.n_windows + want - 2) / (want - 1)));
        human_seconds(b1, sizeof b1, rounds * window);
        printf("          %zu ranks (%zu workers, --ranks): ~%s\n", want, want - 1, b1);
    }
    printf("          model: forward %.0f GFLOP/s per BLAS thread (x%d threads, %.2f per extra),"
           " metrics %.3g ns/step, row_ops %.0f\n"
           "          (on an idle core; re-measure and pass --sgemm-gflops / --metric-ns;"
           " see include/sweep/grid.h)\n",
           g.cost.sgemm_gflops, cfg.blas_threads, g.cost.thread_scale, g.cost.metric_ns,
           g.cost.row_ops);

    as_rank_memory mem;
    grid_rank_memory(&mem, &g);
    human_bytes(b1, sizeof b1, (double)mem.weights);
    human_bytes(b2, sizeof b2, (double)mem.activations);
    human_bytes(b3, sizeof b3, (double)mem.metrics);
    human_bytes(b4, sizeof b4, (double)mem.unit_block);
    human_bytes(b5, sizeof b5, (double)mem.worker);
    if (nm > 1)
        printf("memory    weights %s (the largest model's), once per node (shared by its ranks): one "
               "model is resident at a time, each loaded once; a switch frees the last model first\n", b1);
    else
        printf("memory    weights %s, once per node (shared by its ranks)\n", b1);
    printf("          a worker %s = activations %s (L = %zu) + metrics %s + 2 x %s of results"
           " (%zu cells) + process\n",
           b5, b2, Lmax, b3, b4, mem.unit_block / (mem.cell_block ? mem.cell_block : 1));
    human_bytes(b1, sizeof b1, (double)mem.master);
    printf("          the master %s\n", b1);
    printf("          node total (sum of PSS):");
    for (size_t P = 1; P <= 16; P *= 2) {
        human_bytes(b1, sizeof b1, (double)grid_node_memory(&g, P));
        printf(" %zu rank%s %s%s", P, P > 1 ? "s" : "", b1, P < 16 ? "," : "\n");
    }
    if (ranks >= 1) {
        human_bytes(b1, sizeof b1, (double)grid_node_memory(&g, (size_t)ranks));
        printf("          node total for %zu rank%s (--ranks): %s (%.0f MB)\n", (size_t)ranks,
               ranks > 1 ? "s" : "", b1, (double)grid_node_memory(&g, (size_t)ranks) / 1e6);
    }

    double out_bytes = grid_output_bytes(&g);
    human_bytes(b1, sizeof b1, out_bytes);
    human_bytes(b2, sizeof b2, out_bytes / (double)(g.n_cells * nm));
    printf("output    %s (%s per cell x %zu cells; float32 metrics)\n", b1, b2, g.n_cells * nm);
    double disk = grid_disk_bytes(&g, cfg.compress), avail = fileio_free_bytes(cfg.output);
    human_bytes(b1, sizeof b1, disk);
    if (avail >= 0) {
        human_bytes(b2, sizeof b2, avail);
        printf("disk      %s with the journal%s; %s free where the output goes\n", b1,
               cfg.compress ? " (compressed: estimated at 1.4x)" : "", b2);
    } else {
        printf("disk      %s with the journal%s; free space unknown (the output's folder cannot be asked)\n",
               b1, cfg.compress ? " (compressed: estimated at 1.4x)" : "");
    }
    /* The write bandwidth the master needs (README, Performance): every byte goes to the
     * view and, until compaction, the journal; compressed cells are ~2.4x smaller on the
     * paper grid (measured, not a bound: values decide). */
    if (window > 0 && g.n_windows) {
        double per_window = 2.0 * out_bytes / (double)(g.n_windows * nm) / (cfg.compress ? 2.4 : 1.0);
        size_t wk = ranks >= 2 ? (size_t)ranks - 1 : 2000;
        human_bytes(b1, sizeof b1, per_window);
        human_bytes(b2, sizeof b2, per_window * (double)wk / window);
        human_seconds(b3, sizeof b3, window);
        printf("bandwidth ~%s written per window (view + journal%s); %zu workers at %s per window "
               "need ~%s/s of sustained writes\n", b1,
               cfg.compress ? "; compressed ~2.4x, as paper cells" : "; plain chunks", wk, b3, b2);
    }
    /* Warnings go to stderr, one line each; plan still exits 0 (it only describes). */
    if (avail >= 0 && disk > avail)
        fprintf(stderr, "attnsweep plan: warning: %s: the output and its journal (%s) will not fit in the "
                        "%s free on its file system; `attnsweep run` refuses to start unless given "
                        "--ignore-disk-space\n", cfg.output, b1, b2);
    if (disk > GRID_SANE_DISK_BYTES) {
        human_bytes(b3, sizeof b3, GRID_SANE_DISK_BYTES);
        fprintf(stderr, "attnsweep plan: warning: %s: the output and its journal would take %s, more than %s: "
                        "check windows.count and the grid axes\n", cfg.output, b1, b3);
    }
    /* rank 0 holds 2 x commit_every + 1 result blocks (grid_rank_memory): more than the
     * machine has, and `run` fails once they are touched (or is killed by the OOM killer) */
    double ram = machine_memory();
    if (ram > 0 && (double)mem.master > ram) {
        human_bytes(b1, sizeof b1, (double)mem.master);
        human_bytes(b2, sizeof b2, ram);
        fprintf(stderr, "attnsweep plan: warning: %s: the master (rank 0) needs %s, more than the %s "
                        "of memory of this machine (MemTotal); lower runtime.commit_every (%d: it "
                        "holds 2 x commit_every + 1 results)\n", cfg.path, b1, b2, cfg.commit_every);
    }
    double wall64 = (double)(nm * ((g.n_windows + 62) / 63)) * window; /* windows are the units */
    if (wall64 > 365.0 * 86400) {
        human_seconds(b3, sizeof b3, wall64);
        fprintf(stderr, "attnsweep plan: warning: %s: the sweep would take %s even on 64 ranks: "
                        "check windows.count and the grid axes\n", cfg.path, b3);
    }

    if (check && check_inputs(&cfg, &err)) {
        fprintf(stderr, "attnsweep plan: %s\n", err.msg);
        grid_free(&g);
        config_free(&cfg);
        rc = AS_EXIT_ERROR;
        goto out;
    }

    if (list) {
        printf("\ndispatch  cell  window  first_token      L  est_seconds (of the cell alone)\n");
        for (size_t k = 0; k < g.n_cells; k++) {
            size_t c = g.dispatch[k], w, li;
            grid_cell_of(&g, c, &w, &li);
            printf("%8zu %5zu %7zu %12lld %6d  %.3g\n", k, c, w, (long long)g.window_start[w],
                   (int)a->L[li], grid_cell_cost(&g, c));
        }
    }
    grid_free(&g);
    config_free(&cfg);
    rc = AS_EXIT_OK;
out:
    free(sets);
    return rc;
}
