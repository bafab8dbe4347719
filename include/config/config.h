/* config.h -- a sweep's config file (libconfig), validated, with --set overrides.
 *
 * The key names are a contract (keys may be added, never renamed); configs/example.cfg
 * documents every key and its default. config_load() does all the work that
 * can be done before touching a text or a weight:
 *   1. parse the file (syntax errors: "FILE:LINE: TEXT");
 *   2. merge the --set overrides ("grid.L=[64,128]", libconfig value syntax;
 *      a bare word such as `grid.layers=all` or `grid.N=1:64` is taken as a string);
 *   3. refuse unknown keys at any level (naming the closest known key) and
 *      wrong types; fill defaults (every key has one but model, text.path, output);
 *   4. read each model's config.json (model_config_read; `model` is one
 *      directory or a list, config_models.c) and check the grid against them
 *      (L <= n_positions of every model, layers < the largest n_layer, heads <
 *      the largest n_head); the models must share one tokenizer;
 *   5. build the axes (sorted ascending; T generated and merged), resolve
 *      relative paths and build the canonical text and its sha256.
 * Every error is one line naming the key, prefixed by "FILE:LINE: " when the
 * key came from the file or by "--set " when it came from the command line.
 *
 * Decisions (documented in configs/example.cfg too):
 * - L, N, T, eps, layers and heads are sorted ascending; an explicit duplicate
 *   is an error; T.include values that coincide with generated ones (relative
 *   difference < 1e-9) are merged silently (the include value is kept, so
 *   ds.sel(T=8.0) finds it exactly).
 * - normalizer: softmax is moved to the front when present (docs/metrics.md section 10),
 *   the others keep the user's order; softmax need not be present.
 * - An N >= every L is allowed (rows with n <= N are skipped); only a grid
 *   whose smallest N is >= its largest L (no row could ever be used) is refused.
 * - Relative paths in the file resolve against the file's folder; relative
 *   paths given with --set resolve against the current directory.
 * - `@include "FILE"` (a line of its own) is expanded here, not by libconfig:
 *   a relative FILE resolves against the folder of the file that includes it,
 *   an absolute one is used as it is; every file must be a regular file of at
 *   most 16 MiB; errors name FILE:LINE of the file they are in; includes nest
 *   at most 10 deep. One --set value is one value: text after it is an error.
 * - ssmax_scale = 0 resolves to 1 / ln(n_positions) of each model (as_model_spec);
 *   the canonical text holds the resolved value when every model resolves alike,
 *   else 0.0 (resolved again per model when the text is loaded).
 * - `model` as a list of one is the same sweep as the string (canonical: a string).
 * - The scalar form of an axis (`grid.L = 64;`) is a one-element list.
 *
 * Knows libconfig and the model's config.json; nothing of MPI or HDF5. */
#ifndef ATTNSWEEP_CONFIG_H
#define ATTNSWEEP_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "metrics.h"
#include "model.h"

#define AS_PATH_MAX 4096
/* runtime.stop_grace: long enough for one window of the paper's grid on one core (~65 CPU s,
 * docs/performance.md, "One window of the paper's grid"; ~100 s when this was chosen) on a
 * shared node (x2), so a stop loses no normal window; the SLURM job script passes its
 * warning time minus a margin instead. */
#define AS_STOP_GRACE_DEFAULT_S 240.0
#define AS_STOP_GRACE_MAX_S 604800.0 /* a week: beyond any time limit */

typedef enum { AS_TEXT_PLAIN, AS_TEXT_TOKENS } as_text_format;
/* text.add_bos: absent (the model tokenizer's own rule), true, false; the values of textsrc_bos */
typedef enum { AS_BOS_MODEL = 0, AS_BOS_ON = 1, AS_BOS_OFF = 2 } as_bos;
typedef enum { AS_VECTORS_VALUE, AS_VECTORS_RESID } as_vectors;
typedef enum { AS_ROWS_VISIBLE, AS_ROWS_FULL_ROW } as_rows;
/* metrics.logits: the logits the metrics see. raw = q.k (metrics.md section 1,
 * GPT-2's own attention is then T = sqrt(d_head)); scaled = q.k / sqrt(d_head)
 * (GPT-2's own attention is T = 1). */
typedef enum { AS_LOGITS_RAW, AS_LOGITS_SCALED } as_logits;
typedef enum { AS_DISTANCE_PER_TOKEN, AS_DISTANCE_AGGREGATE } as_distance;
/* metrics.ks_against: the expectation the KS test and crit_N compare dist_true with */
typedef enum { AS_KS_EXPECT, AS_KS_RANDOM } as_ks_against;

/* The grid axes as plain arrays, all sorted ascending except normalizer
 * (softmax first, then the user's order). Owned by the as_config. */
typedef struct {
    int32_t *L;       size_t n_L;
    int32_t *N;       size_t n_N;
    double *T;        size_t n_T;
    double *eps;      size_t n_eps;
    met_normalizer *normalizer; size_t n_norm; /* the kernels' enum (metrics.h) */
    int32_t *layer;   size_t n_layer;   /* "all" resolved against the model */
    int32_t *head;    size_t n_head;
    /* metrics.per_N_T: [n_T] 1 where the per-N family (distances, separability, rows_used,
     * ks_*, crit_N) is computed, 0 where it is stored as missing; NULL: at every T */
    uint8_t *per_N_at;
} as_axes;

/* One model of the sweep's model axis (key `model`: a directory or a list of them).
 * The models share one tokenizer (vocab.json and merges.txt identical by sha256)
 * and every L of the grid fits each model's context. */
#define AS_MODEL_MAX 1024 /* the journal keeps a model index in 16 bits (journal.h) */
typedef struct {
    char dir[AS_PATH_MAX];        /* absolute, as the canonical text holds it */
    char name[256];               /* the directory's basename: unique in the sweep */
    gpt2_config cfg;              /* dir/config.json */
    int64_t training_step;        /* config.json "training_step", else the stepN / checkpoint-N of the name; -1: neither */
    double ssmax_scale;           /* metrics.ssmax_scale resolved for this model (never 0) */
} as_model_spec;

typedef struct {
    /* where the config came from */
    char path[AS_PATH_MAX];       /* the config file as given */
    char dir[AS_PATH_MAX];        /* its folder, absolute */
    char *file_text;              /* the file's bytes, for provenance (NUL-terminated) */

    /* paths, absolute after resolution */
    char model_dir[AS_PATH_MAX];
    char text_path[AS_PATH_MAX];
    char output[AS_PATH_MAX];

    as_text_format text_format;
    int strip_gutenberg;
    /* text.start_at: the text source begins at the start of the
     * start_occurrence-th (1-based) occurrence of this string, after
     * strip_gutenberg and before tokenizing ("" = from the beginning). */
    char start_at[256];
    int64_t start_occurrence;
    as_bos add_bos; /* text.add_bos (format "text"): the BOS first, by the model's rule unless set */

    /* window w starts at windows_offset + w * windows_stride tokens */
    int64_t windows_count, windows_offset, windows_stride;

    as_axes axes;

    as_vectors vectors;
    as_rows rows;
    as_logits logits;
    as_distance distance; /* metrics.distance: "per_token" | "aggregate" */
    int grad_exact;       /* metrics.grad_exact (default 1): 0 skips it (stored as missing) */
    int dist_expect;      /* metrics.dist_expect (default 1): 0 skips it and the KS test */
    double ks_alpha;
    int dist_random;              /* metrics.dist_random (default 0): E||Z|| of random N-subsets */
    int random_subsets;           /* metrics.random_subsets (default 32): K draws per row, >= 2 */
    as_ks_against ks_against;     /* metrics.ks_against: "expect" (default, the paper's) | "random" */
    double ssmax_scale;           /* resolved: never 0 */
    double entmax_alpha;          /* metrics.entmax_alpha: entmax15's alpha, in (1, 2], 1.5 default */
    int sigmoid_bias_set;         /* metrics.sigmoid_bias given: sigmoid's b; else b = -ln n */
    double sigmoid_bias;
    int64_t seed;
    /* metrics.query_rows: 0 = "all", K = "sample:K" (K query rows per head and cut, drawn by
     * docs/metrics.md section 9.1's rule; K >= a cut's rows takes them all) */
    int64_t query_rows;

    int blas_threads;             /* per rank */
    int commit_every;             /* cells per commit batch */
    int compress;                 /* shuffle + deflate the results' chunks (default 1) */
    double stop_grace;            /* runtime.stop_grace: seconds a SIGUSR1 stop waits for the
                                     running windows before abandoning them (not in canonical) */

    gpt2_config model;            /* model_dir/config.json (model_dir = models[0].dir) */

    /* The model axis: n_model >= 1 models in the config's order (models[0] is model_dir).
     * grid.layers/heads "all" and their range checks use the largest n_layer / n_head. */
    as_model_spec *models;
    size_t n_model;
    size_t max_n_layer, max_n_head;
    double ssmax_given;           /* metrics.ssmax_scale as configured (0 = per model) */

    char *canonical;              /* canonical text: sorted keys, resolved values, a valid config */
    char sha256[65];              /* hex sha256 of canonical */
} as_config;

/* Loads, overrides, validates. sets: n_sets strings "key=value". On failure
 * nothing is left allocated and err holds one line. */
int config_load(as_config *cfg, const char *path, const char *const *sets, size_t n_sets,
                as_err *err);

/* The same from a config's text (e.g. the canonical config stored in a
 * results file); origin names it in messages and in cfg->path; relative
 * paths resolve against the current directory. */
int config_load_text(as_config *cfg, const char *text, const char *origin,
                     const char *const *sets, size_t n_sets, as_err *err);

void config_free(as_config *cfg);

/* The model of index m (0 <= m < n_model). */
static inline const as_model_spec *config_model(const as_config *cfg, size_t m) { return &cfg->models[m]; }

/* First token of window w (no bounds check). */
int64_t config_window_start(const as_config *cfg, int64_t w);

/* Tokens the text must hold for the last window at the largest L:
 * offset + (count - 1) * stride + max L. The text-source module compares it
 * with the text's length before any work. */
int64_t config_tokens_needed(const as_config *cfg);

int32_t config_max_L(const as_config *cfg);

/* The ONE table of each config enum's names (the normalizers' is met_normalizer_name,
 * metrics.h): the config's values, the canonical text, plan's summary and the results
 * file's attributes spell them through these ("?" for a value outside the enum). */
const char *config_text_format_name(as_text_format f); /* text.format: "text" | "tokens" */
const char *config_vectors_name(as_vectors v);         /* metrics.vectors: "value" | "resid" */
const char *config_rows_name(as_rows r);               /* metrics.rows: "visible" | "full_row" */
const char *config_logits_name(as_logits l);           /* metrics.logits: "raw" | "scaled" */
const char *config_ks_against_name(as_ks_against k); /* metrics.ks_against: "expect" | "random" */
const char *config_distance_name(as_distance d);       /* metrics.distance: "per_token" | "aggregate" */

/* "a:b" or "a:b:step" (integers, a <= b, step >= 1; b is included when the
 * step lands on it: "1:10:4" = 1, 5, 9). Allocates *values. */
int config_parse_range(int32_t **values, size_t *count, const char *text, as_err *err);

/* The T axis of a { min, max, count, spacing, include } group, sorted:
 * log spacing T_i = 10^(log10 min + i (log10 max - log10 min) / (count - 1)),
 * linear T_i = min + i (max - min) / (count - 1), endpoints exact; include
 * values within 1e-9 (relative) of a generated value replace it, the others
 * are added; a duplicate inside include is an error. Allocates *values. */
int config_make_T(double **values, size_t *count, double min, double max, int64_t n,
                  int log_spacing, const double *include, size_t n_include, as_err *err);

/* The leaf key names the config accepts, NULL-terminated ("grid.L", ...). */
extern const char *const config_known_keys[];

/* --- comparing two configs (resume check) ------------------------------- */

/* Ordered from harmless to worst: the verdict of a diff is its worst item, so
 * a moved path or a refused key is never hidden by an extension next to it. */
typedef enum {
    AS_DIFF_HARMLESS,  /* output, runtime.*: results do not depend on it */
    AS_DIFF_EXTEND,    /* windows.count grew, grid.L gained values and kept all old ones, or
                          models were appended to the end of the model list */
    AS_DIFF_PATH,      /* model, text.path moved (a model's path changed in place) */
    AS_DIFF_REFUSED,   /* anything else: the stored results would mean something else */
} as_diff_kind;

#define AS_DIFF_MAX 64
typedef struct {
    size_t n;
    struct {
        char key[128];
        as_diff_kind kind;
        char old_value[96], new_value[96]; /* config syntax, shortened; "(absent)" */
    } item[AS_DIFF_MAX];
    as_diff_kind verdict;  /* the worst kind among the items; HARMLESS when n == 0 */
} as_config_diff;

/* Compares two canonical texts (as_config.canonical, e.g. the one stored in a
 * results file and the one of today's config). A resume may go on when
 * verdict != AS_DIFF_REFUSED (after the sha256 check for AS_DIFF_PATH).
 * Note that after an L extension the L indices shift (L stays sorted): the
 * store must map old cells by (window, L value), see grid_cell_find(). */
int config_diff(as_config_diff *out, const char *old_canonical, const char *new_canonical,
                as_err *err);

/* "grid.L (extension: stored [64], now [64, 128]); metrics.seed (refused: stored 1, now 2)" into buf. */
void config_diff_describe(const as_config_diff *d, char *buf, size_t size);

/* 1 when the diff stops a resume (a refused key or a moved path), with what blocks it
 * described into buf (harmless keys such as output and runtime.* left out: they would only
 * crowd the one-line error); 0 when the output may go on (buf empty). */
int config_diff_blocks(const as_config_diff *d, char *buf, size_t size);

const char *config_diff_kind_name(as_diff_kind k);

#endif
