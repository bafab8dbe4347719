/* cmd_plan.c -- attnsweep plan: what a sweep config would do, without doing it.
 *
 * Prints the grid (each axis with its values), the number of cells, the
 * estimated compute time, memory per rank and the output size. No MPI, no
 * weights: the config, the model's config.json and, when it can be read, the
 * text (to show where window 0 starts and its first words). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "config.h"
#include "fileio.h"
#include "grid.h"
#include "plan.h"
#include "run.h"
#include "journal.h"
#include "model.h"
#include "store.h"
#include "textsrc.h"
#include "tokenizer.h"

static const char plan_about[] =
    "Validates CONFIG and prints the sweep's axes, cells (one cell = one text\n"
    "window at one context length L), estimated compute time per window (one\n"
    "forward pass serves all its L), memory (the weights once per node, each\n"
    "worker, the master, the node's total for 1..16 ranks) and results file\n"
    "size. Reads the config, MODEL/config.json and, when it is there, the text:\n"
    "it prints where window 0 starts and its first words. When the output exists\n"
    "it says how many windows are left. Given a results file (OUT.h5), it plans\n"
    "with the config stored in it (as `run OUT.h5` does).\n";

static const char plan_porcelain_keys[] =
    "--porcelain keys: config, config_sha256, output, models, windows, L_values, cells, L_max;\n"
    "model.K.name, model.K.window_seconds, model.K.forward_seconds, model.K.metrics_seconds;\n"
    "window_seconds (the mean window), rank_seconds (all windows); progress = new | resumes |\n"
    "refused (an output run refuses), with an output: windows_done, windows_left, cells_left,\n"
    "rank_seconds_to_go; ranks.P.seconds (P = 2, 8, 32, --ranks); memory.weights, memory.worker,\n"
    "memory.master, memory.activations, memory.metrics (a worker's two largest parts),\n"
    "memory.limit (--mem, SLURM_MEM_PER_NODE or MemTotal; 0 unknown), node.P.memory (P = 1, 2, 4, 8, 16, --ranks; bytes); output_bytes,\n"
    "disk_bytes, free_bytes (-1: unknown), compressed, deflate_ratio, write_bytes_per_window,\n"
    "write_bytes_per_second, write_workers; warning.disk_short, warning.disk_huge,\n"
    "warning.too_long (0 or 1); check=passed last, with --check. Errors: stderr, exit 1.\n";

static void human_bytes(char *buf, size_t size, double b) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024 && u < 5) b /= 1024, u++;
    snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
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
    textsrc_spec spec = run_text_spec(cfg);
    FILE *probe = fopen(cfg->text_path, "rb");
    if (!probe) {
        printf("window 0  (text not readable here: not shown)\n");
        return 0;
    }
    fclose(probe);
    if (textsrc_load(&ts, &spec, cfg->model_dir, cfg->model.vocab_size, err)) return -1;
    int64_t start = config_window_start(cfg, 0);
    printf("text has  %zu tokens (%s%s)", ts.n_tokens, ts.kind, ts.add_bos ? ", BOS first" : "");
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

/* The cells of the grid an existing output holds done, [n_models * n_cells], from its
 * journal (the truth); NULL when there is no journal. */
static unsigned char *read_done(const char *output, const as_grid *g) {
    char jpath[4200];
    if (store_sidecar(jpath, sizeof jpath, output, ".journal")) return NULL;
    as_err err;
    journal *j = journal_open(jpath, JOURNAL_SKIP_PAYLOAD_CRC, NULL, NULL, &err);
    if (!j) return NULL;
    size_t per = g->n_cells;
    unsigned char *st = calloc(per * g->n_models + 1, 1);
    journal_record r;
    while (st && journal_next(j, &r, &err) == 1) {
        if (r.type != JR_COMMIT || r.window < 0 || r.model >= g->n_models) continue;
        long c = grid_cell_find(g, (size_t)r.window, r.L);
        if (c >= 0) st[r.model * per + (size_t)c] = (unsigned char)r.status;
    }
    journal_close(j);
    for (size_t i = 0; st && i < per * g->n_models; i++) st[i] = st[i] == STORE_DONE;
    return st;
}

/* Whether run would take the existing output for this config: 0 no output, 1 it resumes
 * or extends it, 2 it refuses it (what differs in `what`), -1 with err. */
enum { OUTPUT_NEW, OUTPUT_RESUMES, OUTPUT_REFUSED };
static int output_state(const as_config *cfg, char *what, size_t size, as_err *err) {
    char *old_text = NULL, *old_sha = NULL;
    int found = store_peek_config(cfg->output, &old_text, &old_sha, err), rc = 0;
    if (found > 0 && strcmp(old_sha, cfg->sha256)) {
        as_config_diff d;
        rc = config_diff(&d, old_text, cfg->canonical, err);
        if (rc == 0) rc = config_diff_blocks(&d, what, size) ? 1 : 0;
    }
    free(old_text);
    free(old_sha);
    if (found < 0 || rc < 0) return -1;
    return !found ? OUTPUT_NEW : rc ? OUTPUT_REFUSED : OUTPUT_RESUMES;
}

/* The line run refuses an output of another config with. */
static int refused(as_err *err, const as_config *cfg, const char *what) {
    return as_fail(err, "%s was made with another config (%s); only added windows, L "
                        "values or models appended to the model list can extend it",
                   cfg->output, what);
}

/* --check: what run does before its first cell, without MPI or the weights' values.
 * Each check passed is a line on out (NULL: none). */
static int check_inputs(const as_config *cfg, FILE *out, as_err *err) {
    textsrc ts;
    textsrc_spec spec = run_text_spec(cfg);
    if (textsrc_load(&ts, &spec, cfg->model_dir, cfg->model.vocab_size, err)) return -1;
    int rc = textsrc_check_fit(&ts, cfg->windows_count, cfg->windows_offset, cfg->windows_stride,
                               config_max_L(cfg), err);
    size_t n_tokens = ts.n_tokens;
    textsrc_free(&ts);
    if (rc) return -1;
    if (out) fprintf(out, "check     text: %zu tokens, enough for the windows\n", n_tokens);
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
        if (out) fprintf(out, "check     model: every tensor of %s/model.safetensors matches config.json\n", ms->dir);
    }
    char what[800];
    rc = output_state(cfg, what, sizeof what, err);
    if (rc < 0) return -1;
    if (rc == OUTPUT_REFUSED) return refused(err, cfg, what);
    if (out) fprintf(out, "check     output: %s\n", rc == OUTPUT_RESUMES ? "resumes the existing output" : "new");
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

/* The command line of plan. */
typedef struct {
    const char *path;
    arg_list sets;
    int list, check, porcelain;
    double gflops, metric_ns;
    long long ranks;
    double mem; /* --mem SIZE: the memory limit (0: SLURM's or MemTotal, plan.h) */
} plan_args;

/* --mem SIZE of plan and run (cli.h). */
int cli_parse_mem(const arg_opt *o, const char *v, const char **why) {
    double b = plan_parse_bytes(v);
    if (!(b > 0)) {
        *why = "is not a size such as 4G, 512M or 2.5GiB";
        return -1;
    }
    *(double *)o->value = b;
    return 0;
}

/* 0 to go on, else 1 with *code; p->sets is freed by the caller. */
static int parse_plan_args(plan_args *p, int argc, char **argv, int *code) {
    *p = (plan_args){.gflops = AS_COST_SGEMM_GFLOPS, .metric_ns = AS_COST_METRIC_NS};
    char gflops_help[96], ns_help[96];
    snprintf(gflops_help, sizeof gflops_help, "measured forward-pass rate per BLAS thread (default %.0f)",
             AS_COST_SGEMM_GFLOPS);
    snprintf(ns_help, sizeof ns_help, "measured nanoseconds per metric step (default %.2f)", AS_COST_METRIC_NS);
    arg_list pos = {0};
    const arg_opt opts[] = {
        OPT_LIST("set", "KEY=VALUE", &p->sets,
                 "override a config key, libconfig value syntax\n"
                 "(--set grid.L=[64,128] --set output=\"x.h5\"); repeatable"),
        OPT_FLAG("check", &p->check,
                 "also check the model's tensors against config.json and the\n"
                 "config against an existing output's, and require the text:\n"
                 "fails (exit 1) on what `run` would fail on before computing"),
        OPT_FLAG("list", &p->list, "also list the cells in dispatch order (largest L first)"),
        OPT_FLAG("porcelain", &p->porcelain,
                 "print the plan as key=value lines for scripts (jobs/make-sbatch.sh),\n"
                 "nothing else on stdout (the keys: below)"),
        OPT_POSITIVE("sgemm-gflops", "X", &p->gflops, gflops_help),
        OPT_POSITIVE("metric-ns", "Y", &p->metric_ns, ns_help),
        OPT_INT("ranks", "P", &p->ranks, 1, 1000000, "also the time and node memory of P ranks on one node"),
        OPT_CALLBACK("mem", "SIZE", &p->mem, cli_parse_mem,
                     "the memory of a node (4G, 512M); default SLURM_MEM_PER_NODE,\n"
                     "else MemTotal: --check fails when the node would not fit"),
        OPT_END()};
    arg_spec spec = {.prog = "attnsweep plan", .positional = "CONFIG|OUT.h5", .min_pos = 1, .max_pos = 1,
                     .pos = &pos, .description = plan_about, .epilogue = plan_porcelain_keys,
                     .opts = opts};
    if (args_parse(&spec, argc, argv, code)) return 1;
    p->path = pos.v[0];
    free(pos.v);
    return 0;
}

/* The config, its models, text, windows, metrics and output (plan's first lines). */
static void print_config(const as_config *cfg) {
    printf("config    %s (sha256 %.16s...)\n", cfg->path, cfg->sha256);
    for (size_t k = 0; k < cfg->n_model; k++) {
        const as_model_spec *ms = &cfg->models[k];
        char step[48] = "";
        if (ms->training_step >= 0) snprintf(step, sizeof step, ", training_step %lld", (long long)ms->training_step);
        if (cfg->n_model == 1)
            printf("model     %s: n_layer %zu, n_head %zu, n_embd %zu, n_positions %zu, %.1f M params%s\n",
                   ms->dir, ms->cfg.n_layer, ms->cfg.n_head, ms->cfg.n_embd, ms->cfg.n_positions,
                   (double)model_param_count(&ms->cfg) / 1e6, step);
        else
            printf("%s %zu %s (%s): n_layer %zu, n_head %zu, n_embd %zu, n_positions %zu, %.1f M "
                   "params%s\n", k ? "         " : "models   ", k, ms->name, ms->dir, ms->cfg.n_layer,
                   ms->cfg.n_head, ms->cfg.n_embd, ms->cfg.n_positions,
                   (double)model_param_count(&ms->cfg) / 1e6, step);
    }
    printf("text      %s (%s%s); needs >= %lld tokens\n", cfg->text_path,
           config_text_format_name(cfg->text_format),
           cfg->text_format == AS_TEXT_PLAIN ? (cfg->strip_gutenberg ? ", strip_gutenberg" : "") : "",
           (long long)config_tokens_needed(cfg));
    printf("windows   count %lld, offset %lld, stride %lld\n", (long long)cfg->windows_count,
           (long long)cfg->windows_offset, (long long)cfg->windows_stride);
}

static void print_settings(const as_config *cfg) {
    char ssmax[64];
    snprintf(ssmax, sizeof ssmax, "%.6g", cfg->ssmax_scale);
    for (size_t k = 1; k < cfg->n_model; k++)
        if (cfg->models[k].ssmax_scale != cfg->ssmax_scale) snprintf(ssmax, sizeof ssmax, "1/ln(n_positions) per model");
    printf("metrics   vectors %s, rows %s, logits %s, ks_alpha %g, ssmax_scale %s, seed %lld\n",
           config_vectors_name(cfg->vectors), config_rows_name(cfg->rows),
           config_logits_name(cfg->logits),
           cfg->ks_alpha, ssmax, (long long)cfg->seed);
    printf("output    %s\n", cfg->output);
    printf("runtime   blas_threads %d per rank, commit_every %d cells\n\n", cfg->blas_threads,
           cfg->commit_every);
}

static void print_axes(const as_config *cfg, const as_grid *g) {
    const as_axes *a = &cfg->axes;
    printf("axes\n");
    printf("  %-11s %6zu: ", "window", g->n_windows);
    if (g->n_windows <= 4)
        for (size_t w = 0; w < g->n_windows; w++) printf("%s%zu", w ? ", " : "", w);
    else
        printf("0..%zu", g->n_windows - 1);
    if (g->n_windows == 1)
        printf("  (first token %lld)\n", (long long)g->window_start[0]);
    else
        printf("  (first tokens %lld, %lld, ..., %lld)\n", (long long)g->window_start[0],
               (long long)g->window_start[1], (long long)g->window_start[g->n_windows - 1]);
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
    for (size_t i = 0; i < a->n_N; i++) useless += a->N[i] >= config_max_L(cfg);
    if (useless)
        printf("  note: %zu N value(s) >= the largest L (%d): always NaN (no row has n > N)\n",
               useless, (int)config_max_L(cfg));
}

/* The cells line and the time lines: per model, the total, what is left, the rank counts. */
static void print_time(const as_config *cfg, const as_plan *p, const char *refused_what) {
    const as_axes *a = &cfg->axes;
    size_t nm = p->n_models;
    char b1[32], b2[32], b3[32];
    if (nm > 1)
        /* "(W windows x" first, as for one model */
        printf("\ncells     %zu (%zu windows x %zu L x %zu models); each: up to %zu heads x %zu N x "
               "%zu T x %zu normalizer\n", p->n_cells, p->n_windows, p->n_L, nm,
               a->n_layer * a->n_head, a->n_N, a->n_T, a->n_norm);
    else
        printf("\ncells     %zu (%zu windows x %zu L); each: %zu heads x %zu N x %zu T"
               " x %zu normalizer\n",
               p->n_cells, p->n_windows, p->n_L, a->n_layer * a->n_head, a->n_N, a->n_T, a->n_norm);
    for (size_t k = 0; k < nm; k++) {
        human_seconds(b1, sizeof b1, p->model[k].window_s);
        human_seconds(b2, sizeof b2, p->model[k].forward_s);
        human_seconds(b3, sizeof b3, p->model[k].metrics_s);
        if (nm > 1) printf("%s %zu %s: ", k ? "         " : "time     ", k, cfg->models[k].name);
        else printf("time      ");
        printf("%s per window (forward pass at L = %zu %s + metrics of %zu L %s)\n", b1, p->L_max, b2,
               p->n_L, b3);
    }
    human_seconds(b1, sizeof b1, p->total_s);
    printf("          %s of rank time for %zu window%s%s\n", b1, p->n_windows * nm,
           p->n_windows * nm > 1 ? "s" : "", nm > 1 ? " (every model's)" : "");
    if (refused_what) {
        printf("progress  none: %s holds another config's cells (%s); `attnsweep run` refuses it\n",
               cfg->output, refused_what);
    } else if (p->have_progress) {
        human_seconds(b1, sizeof b1, p->to_go_s);
        printf("progress  %zu of %zu windows left (%zu done in %s): %s of rank time to go", p->windows_left,
               p->n_windows * nm, p->windows_done, cfg->output, b1);
        if (p->cells_left < p->windows_left * p->n_L) printf(" (%zu cells left)", p->cells_left);
        printf("\n");
    }
    for (size_t i = 0; i < p->n_rounds; i++) {
        human_seconds(b1, sizeof b1, p->rounds[i].seconds);
        printf("          %zu ranks (%zu workers%s): ~%s\n", p->rounds[i].ranks, p->rounds[i].workers,
               i >= PLAN_RANK_ROWS ? ", --ranks" : "", b1);
    }
    printf("          model: forward %.0f GFLOP/s per BLAS thread (x%d threads, %.2f per extra),"
           " metrics %.3g ns/step, row_ops %.0f\n"
           "          (on an idle core; re-measure and pass --sgemm-gflops / --metric-ns;"
           " see include/sweep/plan.h)\n",
           p->grid->cost.sgemm_gflops, cfg->blas_threads, p->grid->cost.thread_scale,
           p->grid->cost.metric_ns, p->grid->cost.row_ops);
}

static void print_memory(const as_plan *p, size_t ranks, double limit, const char *source) {
    const as_rank_memory *mem = &p->mem;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    human_bytes(b1, sizeof b1, (double)mem->weights);
    human_bytes(b2, sizeof b2, (double)mem->activations);
    human_bytes(b3, sizeof b3, (double)mem->metrics);
    human_bytes(b4, sizeof b4, (double)mem->unit_block);
    human_bytes(b5, sizeof b5, (double)mem->worker);
    if (p->n_models > 1)
        printf("memory    weights %s (the largest model's), once per node (shared by its ranks): one "
               "model is resident at a time, each loaded once; a switch frees the last model first\n", b1);
    else
        printf("memory    weights %s, once per node (shared by its ranks)\n", b1);
    printf("          a worker %s = activations %s (L = %zu) + metrics %s + 2 x %s of results"
           " (%zu cells) + process\n",
           b5, b2, p->L_max, b3, b4, mem->unit_block / (mem->cell_block ? mem->cell_block : 1));
    human_bytes(b1, sizeof b1, (double)mem->master);
    printf("          the master %s\n", b1);
    printf("          node total (sum of PSS):");
    for (size_t i = 0; i < PLAN_NODE_ROWS; i++) {
        human_bytes(b1, sizeof b1, (double)p->node_bytes[i]);
        printf(" %zu rank%s %s%s", p->node_ranks[i], p->node_ranks[i] > 1 ? "s" : "", b1,
               i + 1 < PLAN_NODE_ROWS ? "," : "\n");
    }
    if (ranks >= 1) {
        human_bytes(b1, sizeof b1, (double)p->node_bytes[PLAN_NODE_ROWS]);
        printf("          node total for %zu rank%s (--ranks): %s (%.0f MB)\n", ranks, ranks > 1 ? "s" : "",
               b1, (double)p->node_bytes[PLAN_NODE_ROWS] / 1e6);
    }
    if (limit > 0) {
        human_bytes(b1, sizeof b1, limit);
        printf("          limit %s (%s): run and plan --check refuse a node that does not fit\n", b1, source);
    }
    /* within the limit but beyond what is free now: not refused (other processes come and
     * go), but the run may swap or meet the OOM killer */
    size_t P = ranks ? ranks : 1, need = grid_node_memory(p->grid, P);
    double avail = plan_meminfo("MemAvailable");
    if (avail > 0 && (double)need > avail && !(limit > 0 && (double)need > limit)) {
        human_bytes(b1, sizeof b1, (double)need);
        human_bytes(b2, sizeof b2, avail);
        fprintf(stderr, "attnsweep plan: warning: %zu rank%s on a node need %s, more than the %s free now "
                        "(MemAvailable): other processes hold the rest\n", P, P > 1 ? "s" : "", b1, b2);
    }
}

/* The output, disk and bandwidth lines, then the warnings (stderr, one line each; plan
 * still exits 0: it only describes). */
static void print_output(const as_config *cfg, const as_plan *p) {
    char b1[32], b2[32], b3[32], ratio[64] = "";
    human_bytes(b1, sizeof b1, p->output_bytes);
    human_bytes(b2, sizeof b2, p->cell_bytes);
    printf("output    %s (%s per cell x %zu cells; float32 metrics)\n", b1, b2, p->n_cells);
    if (cfg->compress) snprintf(ratio, sizeof ratio, " (compressed: estimated at %.1fx)", p->deflate_ratio);
    human_bytes(b1, sizeof b1, p->disk_bytes);
    if (p->free_bytes >= 0) {
        human_bytes(b2, sizeof b2, p->free_bytes);
        printf("disk      %s with the journal%s; %s free where the output goes\n", b1, ratio, b2);
    } else {
        printf("disk      %s with the journal%s; free space unknown (the output's folder cannot be asked)\n",
               b1, ratio);
    }
    if (p->write_per_window > 0) {
        human_bytes(b1, sizeof b1, p->write_per_window);
        human_bytes(b2, sizeof b2, p->write_rate);
        human_seconds(b3, sizeof b3, p->window_s);
        printf("bandwidth ~%s written per window (view + journal%s); %zu workers at %s per window "
               "need ~%s/s of sustained writes\n", b1,
               ratio[0] ? "; compressed, at the disk line's ratio" : "; plain chunks", p->write_workers, b3, b2);
    }
    human_bytes(b1, sizeof b1, p->disk_bytes);
    human_bytes(b2, sizeof b2, p->free_bytes);
    if (p->disk_short)
        fprintf(stderr, "attnsweep plan: warning: %s: the output and its journal (%s) will not fit in the "
                        "%s free on its file system; `attnsweep run` refuses to start unless given "
                        "--ignore-disk-space\n", cfg->output, b1, b2);
    if (p->disk_huge) {
        human_bytes(b3, sizeof b3, GRID_SANE_DISK_BYTES);
        fprintf(stderr, "attnsweep plan: warning: %s: the output and its journal would take %s, more than %s: "
                        "check windows.count and the grid axes\n", cfg->output, b1, b3);
    }
    /* rank 0 holds 2 x commit_every + 1 result blocks (grid_rank_memory): more than the
     * machine has, and `run` fails once they are touched (or is killed by the OOM killer) */
    double ram = plan_meminfo("MemTotal");
    if (ram > 0 && (double)p->mem.master > ram) {
        human_bytes(b1, sizeof b1, (double)p->mem.master);
        human_bytes(b2, sizeof b2, ram);
        fprintf(stderr, "attnsweep plan: warning: %s: the master (rank 0) needs %s, more than the %s "
                        "of memory of this machine (MemTotal); lower runtime.commit_every (%d: it "
                        "holds 2 x commit_every + 1 results)\n", cfg->path, b1, b2, cfg->commit_every);
    }
    if (p->too_long) {
        human_seconds(b3, sizeof b3, p->wall64_s);
        fprintf(stderr, "attnsweep plan: warning: %s: the sweep would take %s even on 64 ranks: "
                        "check windows.count and the grid axes\n", cfg->path, b3);
    }
}

static void print_list(const as_grid *g) {
    const as_axes *a = &g->cfg->axes;
    printf("\ndispatch  cell  window  first_token      L  est_seconds (of the cell alone)\n");
    for (size_t k = 0; k < g->n_cells; k++) {
        size_t c = g->dispatch[k], w, li;
        grid_cell_of(g, c, &w, &li);
        printf("%8zu %5zu %7zu %12lld %6d  %.3g\n", k, c, w, (long long)g->window_start[w],
               (int)a->L[li], grid_cell_cost(g, c));
    }
}

/* --porcelain: the plan as key=value lines (the keys: plan_porcelain_keys). Numbers are
 * plain (seconds and bytes, %.6g or whole), never humanised; one key per line. */
static void print_porcelain(const as_config *cfg, const as_plan *p, const char *refused_what,
                            double mem_limit) {
    printf("config=%s\nconfig_sha256=%s\noutput=%s\n", cfg->path, cfg->sha256, cfg->output);
    printf("models=%zu\nwindows=%zu\nL_values=%zu\ncells=%zu\nL_max=%zu\n", p->n_models, p->n_windows,
           p->n_L, p->n_cells, p->L_max);
    for (size_t k = 0; k < p->n_models; k++)
        printf("model.%zu.name=%s\nmodel.%zu.window_seconds=%.6g\nmodel.%zu.forward_seconds=%.6g\n"
               "model.%zu.metrics_seconds=%.6g\n", k, k < cfg->n_model ? cfg->models[k].name : "", k, p->model[k].window_s, k,
               p->model[k].forward_s, k, p->model[k].metrics_s);
    printf("window_seconds=%.6g\nrank_seconds=%.6g\n", p->window_s, p->total_s);
    printf("progress=%s\n", refused_what ? "refused" : p->have_progress ? "resumes" : "new");
    if (p->have_progress && !refused_what)
        printf("windows_done=%zu\nwindows_left=%zu\ncells_left=%zu\nrank_seconds_to_go=%.6g\n",
               p->windows_done, p->windows_left, p->cells_left, p->to_go_s);
    for (size_t i = 0; i < p->n_rounds; i++)
        printf("ranks.%zu.seconds=%.6g\n", p->rounds[i].ranks, p->rounds[i].seconds);
    printf("memory.weights=%zu\nmemory.worker=%zu\nmemory.master=%zu\nmemory.activations=%zu\n"
           "memory.metrics=%zu\nmemory.limit=%.0f\n", p->mem.weights, p->mem.worker, p->mem.master,
           p->mem.activations, p->mem.metrics, mem_limit);
    for (size_t i = 0; i < p->n_node; i++) printf("node.%zu.memory=%zu\n", p->node_ranks[i], p->node_bytes[i]);
    printf("output_bytes=%.0f\ndisk_bytes=%.0f\nfree_bytes=%.0f\ncompressed=%d\ndeflate_ratio=%g\n",
           p->output_bytes, p->disk_bytes, p->free_bytes, cfg->compress ? 1 : 0, p->deflate_ratio);
    printf("write_bytes_per_window=%.0f\nwrite_bytes_per_second=%.0f\nwrite_workers=%zu\n",
           p->write_per_window, p->write_rate, p->write_workers);
    printf("warning.disk_short=%d\nwarning.disk_huge=%d\nwarning.too_long=%d\n", p->disk_short,
           p->disk_huge, p->too_long);
}

int cmd_plan(int argc, char **argv) {
    plan_args pa;
    int rc;
    if (parse_plan_args(&pa, argc, argv, &rc)) return rc;
    as_config cfg;
    as_grid g;
    as_plan plan = {0};
    as_err err = {{0}};
    unsigned char *done = NULL;
    int have_cfg = 0, have_grid = 0;
    rc = AS_EXIT_ERROR;
    size_t plen = strlen(pa.path);
    int stored = plen > 3 && (!strcmp(pa.path + plen - 3, ".h5") || !strcmp(pa.path + plen - 3, ".nc"));
    if (stored ? load_stored(&cfg, pa.path, pa.sets.v, pa.sets.n, &err)
               : config_load(&cfg, pa.path, pa.sets.v, pa.sets.n, &err))
        goto fail;
    have_cfg = 1;
    if (grid_init(&g, &cfg, &err)) goto fail;
    have_grid = 1;
    g.cost.sgemm_gflops = pa.gflops;
    g.cost.metric_ns = pa.metric_ns;
    if (!pa.porcelain) {
        print_config(&cfg);
        if (print_window0(&cfg, &err)) goto fail;
        print_settings(&cfg);
        print_axes(&cfg, &g);
    }
    /* An existing output: what is left of it, unless run would refuse it (then its
     * journal's cells are another config's and count for nothing). */
    char what[800];
    int out_state = output_state(&cfg, what, sizeof what, &err);
    if (out_state < 0) goto fail;
    if (out_state != OUTPUT_REFUSED) done = read_done(cfg.output, &g);
    plan_opts po = {.ranks = (size_t)pa.ranks, .done = done};
    if (plan_compute(&plan, &g, &po, &err)) goto fail;
    const char *mem_source;
    double mem_limit = plan_memory_limit(pa.mem, &mem_source);
    const char *refused_what = out_state == OUTPUT_REFUSED ? what : NULL;
    if (pa.porcelain) {
        print_porcelain(&cfg, &plan, refused_what, mem_limit);
    } else {
        print_time(&cfg, &plan, refused_what);
        print_memory(&plan, (size_t)pa.ranks, mem_limit, mem_source);
        print_output(&cfg, &plan);
        if (refused_what)
            fprintf(stderr, "attnsweep plan: warning: %s was made with another config (%s): `attnsweep run` "
                            "refuses it (plan --check fails)\n", cfg.output, what);
    }
    if (pa.check && check_inputs(&cfg, pa.porcelain ? NULL : stdout, &err)) goto fail;
    /* what run refuses before its first cell: a node of --ranks P ranks (1) that cannot fit */
    if (pa.check && plan_memory_check(&g, pa.ranks ? (size_t)pa.ranks : 1, mem_limit, mem_source, &err))
        goto fail;
    if (pa.check && !pa.porcelain && mem_limit > 0)
        printf("check     memory: %zu rank%s on a node fit the limit (%s)\n", pa.ranks ? (size_t)pa.ranks : 1,
               pa.ranks > 1 ? "s" : "", mem_source);
    if (pa.porcelain && pa.check) printf("check=passed\n");
    if (pa.list && !pa.porcelain) print_list(&g);
    rc = AS_EXIT_OK;
fail:
    if (rc != AS_EXIT_OK) fprintf(stderr, "attnsweep plan: %s\n", err.msg);
    plan_free(&plan);
    free(done);
    if (have_grid) grid_free(&g);
    if (have_cfg) config_free(&cfg);
    free(pa.sets.v);
    return rc;
}
