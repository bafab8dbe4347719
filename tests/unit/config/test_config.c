/* test_config.c -- config loading, defaults, validation messages, --set,
 * ranges, T generation, paths, canonical hash and config_diff. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "config_fixture.h"

static char dir[256];        /* temp dir holding cfg files and a model */
static char model_dir[300];  /* dir/model: n_layer 3, n_head 4, n_embd 32, n_positions 256 */

static void write_model(const char *mdir, int n_positions) {
    mkdir(mdir, 0777);
    char path[512], json[256];
    snprintf(path, sizeof path, "%s/config.json", mdir);
    snprintf(json, sizeof json,
             "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_head\": 4, \"n_embd\": 32, "
             "\"n_positions\": %d, \"vocab_size\": 100}",
             n_positions);
    fx_write_file(path, json);
}

/* The three required keys plus `extra`, in dir/NAME. */
#define BASE "model = \"model\";\ntext = { path = \"t.txt\"; };\noutput = \"out.h5\";\n"

static char last_path[512];

static int load(as_config *cfg, as_err *err, const char *text, const char *const *sets,
                size_t n_sets) {
    static int counter;
    snprintf(last_path, sizeof last_path, "%s/c%d.cfg", dir, counter++);
    fx_write_file(last_path, text);
    err->msg[0] = 0;
    return config_load(cfg, last_path, sets, n_sets, err);
}

/* Loads BASE + extra; expects failure with every `needle` (NULL-terminated) in the message. */
static void expect_error(const char *label, const char *extra, const char *const *sets,
                         size_t n_sets, ...) {
    char text[4096];
    snprintf(text, sizeof text, BASE "%s", extra);
    as_config cfg;
    as_err err;
    int rc = load(&cfg, &err, text, sets, n_sets);
    CHECK(rc == -1, "%s: expected an error, got success", label);
    if (rc == 0) {
        config_free(&cfg);
        return;
    }
    CHECK(strchr(err.msg, '\n') == NULL, "%s: message is not one line: %s", label, err.msg);
    va_list ap;
    va_start(ap, n_sets);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        CHECK(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", label, err.msg,
              needle);
    va_end(ap);
}

static int load_ok(as_config *cfg, const char *extra, const char *const *sets, size_t n_sets,
                   const char *label) {
    char text[4096];
    snprintf(text, sizeof text, BASE "%s", extra);
    as_err err;
    int rc = load(cfg, &err, text, sets, n_sets);
    CHECK(rc == 0, "%s: %s", label, err.msg);
    return rc;
}

static void test_defaults(void) {
    as_config c;
    if (load_ok(&c, "", NULL, 0, "defaults")) return;
    const as_axes *a = &c.axes;
    /* L: 32, 64, ... up to n_positions = 256 */
    CHECK(a->n_L == 4 && a->L[0] == 32 && a->L[3] == 256, "default L: n %zu", a->n_L);
    CHECK(a->n_N == 128 && a->N[0] == 1 && a->N[127] == 128, "default N \"1:128\"");
    CHECK(a->n_T == 22, "default T: 21 log values + 8.0, got %zu", a->n_T);
    int has8 = 0;
    for (size_t i = 0; i < a->n_T; i++) has8 |= a->T[i] == 8.0;
    CHECK(has8, "default T includes 8.0 exactly");
    CHECK(a->T[0] == 1e-3 && a->T[a->n_T - 1] == 1e2, "default T endpoints");
    CHECK(a->n_eps == 3 && a->eps[0] == 1e-3 && a->eps[1] == 1e-1 && a->eps[2] == 10.0, "eps");
    CHECK(a->n_norm == 1 && a->normalizer[0] == MET_SOFTMAX, "normalizer");
    CHECK(a->n_layer == 3 && a->layer[2] == 2, "layers all");
    CHECK(a->n_head == 4 && a->head[3] == 3, "heads all");
    CHECK(c.windows_count == 1 && c.windows_offset == 0 && c.windows_stride == 256, "windows");
    CHECK(c.vectors == AS_VECTORS_VALUE && c.rows == AS_ROWS_VISIBLE, "vectors/rows");
    CHECK_CLOSE(c.ks_alpha, 0.01, 0, 0, "ks_alpha");
    CHECK_CLOSE(c.ssmax_scale, 1.0 / log(256.0), 0, 1e-15, "ssmax_scale = 1/ln(n_positions)");
    CHECK(c.seed == 1 && c.blas_threads == 1 && c.commit_every == 8, "seed/runtime");
    CHECK(c.stop_grace == AS_STOP_GRACE_DEFAULT_S && c.stop_grace >= 200,
          "runtime.stop_grace default lets a paper-grid window finish: %g", c.stop_grace);
    CHECK(c.text_format == AS_TEXT_PLAIN && c.strip_gutenberg == 1, "text defaults");
    CHECK(c.model.n_layer == 3 && c.model.n_positions == 256, "model config read");
    CHECK(c.file_text && !strcmp(c.file_text, BASE), "file_text holds the file");
    CHECK(strlen(c.sha256) == 64, "sha256 hex");
    CHECK(config_tokens_needed(&c) == 256, "tokens needed");
    config_free(&c);

    if (!load_ok(&c, "windows = { count = 3; offset = 10; stride = 100; };\ngrid = { L = [8, 128]; };\n",
                 NULL, 0, "windows")) {
        CHECK(config_window_start(&c, 2) == 210, "window start");
        CHECK(config_tokens_needed(&c) == 10 + 2 * 100 + 128, "tokens needed %lld",
              (long long)config_tokens_needed(&c));
        config_free(&c);
    }
}

static void test_paths(void) {
    as_config c;
    char sub[300], text[1024], want[600];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0777);
    snprintf(text, sizeof text,
             "model = \"../model\";\ntext = { path = \"./data/../t.txt\"; };\noutput = \"/abs/o.h5\";\n");
    char path[400];
    snprintf(path, sizeof path, "%s/c.cfg", sub);
    fx_write_file(path, text);
    as_err err;
    int rc = config_load(&c, path, NULL, 0, &err);
    CHECK(rc == 0, "paths: %s", err.msg);
    if (rc) return;
    char *real = realpath(dir, NULL);
    snprintf(want, sizeof want, "%s/model", real);
    CHECK(!strcmp(c.model_dir, want), "model resolves against the config's folder: %s", c.model_dir);
    snprintf(want, sizeof want, "%s/sub/t.txt", real);
    CHECK(!strcmp(c.text_path, want), "text.path normalized: %s", c.text_path);
    CHECK(!strcmp(c.output, "/abs/o.h5"), "absolute path kept: %s", c.output);
    config_free(&c);

    /* --set paths resolve against the current directory */
    const char *sets[] = {"output=\"rel/o.h5\""};
    rc = config_load(&c, path, sets, 1, &err);
    CHECK(rc == 0, "paths --set: %s", err.msg);
    if (!rc) {
        char cwd[512];
        CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
        snprintf(want, sizeof want, "%s/rel/o.h5", cwd);
        CHECK(!strcmp(c.output, want), "--set output relative to cwd: %s", c.output);
        config_free(&c);
    }
    free(real);
}

static void test_syntax_and_unknown(void) {
    /* syntax error on line 4 (BASE has 3 lines) */
    expect_error("syntax", "grid = { L = [32, 64 };\n", NULL, 0, ".cfg:4:", NULL);
    expect_error("mixed array", "grid = { eps = [1e-3, 2]; };\n", NULL, 0, ".cfg:4:", NULL);
    /* libconfig's "mismatched element type in array" gets the fix spelled out */
    expect_error("mixed T list", "grid = { T = [0.5, 1, 8.0]; };\n", NULL, 0, ".cfg:4:",
                 "mismatched element type", "write every number of it as a float", "[0.5, 1.0, 8.0]", NULL);
    expect_error("mixed --set list", "", (const char *[]){"grid.T=[0.5, 1, 8.0]"}, 1, "--set grid.T",
                 "write every number of it as a float", NULL);
    expect_error("unknown top", "modle_x = 1;\n", NULL, 0, ":4:", "modle_x", "unknown", NULL);
    expect_error("unknown nested", "metrics = { sead = 3; };\n", NULL, 0, ":4:", "metrics.sead",
                 "did you mean metrics.seed", NULL);
    expect_error("unknown misplaced", "seed = 3;\n", NULL, 0, "seed", "did you mean metrics.seed",
                 NULL);
    expect_error("unknown in T group", "grid = {\n T = { mn = 1.0; };\n};\n", NULL, 0, ":5:",
                 "grid.T.mn", "did you mean grid.T.min", NULL);
    expect_error("unknown grid key", "grid = { layer = [0]; };\n", NULL, 0, "grid.layer",
                 "did you mean grid.layers", NULL);
    /* words for a symbol-named key: spelling alone would suggest text.path for temperature */
    expect_error("temperature", "", (const char *[]){"grid.temperature=[1.0]"}, 1, "grid.temperature",
                 "did you mean grid.T?", NULL);
    expect_error("context length", "grid = { context_length = [64]; };\n", NULL, 0,
                 "did you mean grid.L?", NULL);
}

static void test_types(void) {
    expect_error("L string", "grid = { L = \"abc\"; };\n", NULL, 0, ":4:", "grid.L", "is not a range", NULL);
    /* L takes ranges as N does */
    {
        as_config c;
        as_err err;
        int rc = load(&c, &err, BASE "grid = { L = \"16:64:16\"; N = [1, 2]; };\n", NULL, 0);
        CHECK(rc == 0 && c.axes.n_L == 4 && c.axes.L[0] == 16 && c.axes.L[1] == 32 && c.axes.L[3] == 64,
              "grid.L = \"16:64:16\": rc %d n_L %zu (%s)", rc, rc ? 0 : c.axes.n_L, rc ? err.msg : "");
        if (!rc) config_free(&c);
        rc = load(&c, &err, BASE, (const char *[]){"grid.L=\"32:64:32\"", "grid.N=[1]"}, 2);
        CHECK(rc == 0 && c.axes.n_L == 2 && c.axes.L[0] == 32 && c.axes.L[1] == 64,
              "--set grid.L=\"32:64:32\": %s", rc ? err.msg : "");
        if (!rc) config_free(&c);
    }
    expect_error("L range backwards", "grid = { L = \"64:16\"; };\n", NULL, 0, "grid.L", "below start", NULL);
    expect_error("count float", "windows = { count = 1.5; };\n", NULL, 0, "windows.count",
                 "integer", NULL);
    expect_error("bool int", "", (const char *[]){"text.strip_gutenberg=1"}, 1,
                 "--set text.strip_gutenberg", "true or false", NULL);
    /* BASE already has text; use a fresh file for a non-group text */
    as_config c;
    as_err err;
    int rc = load(&c, &err, "model = \"model\";\ntext = \"t.txt\";\noutput = \"o\";\n", NULL, 0);
    CHECK(rc == -1 && strstr(err.msg, "text") && strstr(err.msg, "group") && strstr(err.msg, ":2:"),
          "text not a group: %s", err.msg);
    if (!rc) config_free(&c);
    expect_error("metrics not group", "metrics = 3;\n", NULL, 0, "metrics", "group", NULL);
    expect_error("model type", "", (const char *[]){"model=5"}, 1, "model", "string", NULL);
    expect_error("T element", "grid = { T = (1.0, \"x\"); };\n", NULL, 0, "grid.T", NULL);
    expect_error("vectors", "metrics = { vectors = \"val\"; };\n", NULL, 0, "metrics.vectors",
                 "value", NULL);
    expect_error("rows", "metrics = { rows = 1; };\n", NULL, 0, "metrics.rows", NULL);
    expect_error("format", "", (const char *[]){"text.format=npy"}, 1, "--set text.format",
                 "\"npy\" is not one of", NULL);
    expect_error("spacing", "grid = { T = { spacing = \"geom\"; }; };\n", NULL, 0,
                 "grid.T.spacing", NULL);
    expect_error("layers word", "grid = { layers = \"some\"; };\n", NULL, 0, "grid.layers", NULL);

    /* a float key takes an integer literal */
    if (!load_ok(&c, "grid = { T = { min = 1; max = 100; count = 3; }; eps = [1, 2]; };\n"
                     "metrics = { ssmax_scale = 1; };\n",
                 NULL, 0, "int for float")) {
        CHECK(c.axes.n_T == 3 && c.axes.T[0] == 1.0 && c.axes.T[2] == 100.0, "T from ints");
        CHECK_CLOSE(c.axes.T[1], 10.0, 0, 1e-14, "T middle");
        CHECK(c.axes.n_eps == 2 && c.axes.eps[1] == 2.0, "eps from ints");
        CHECK(c.ssmax_scale == 1.0, "ssmax_scale from int");
        config_free(&c);
    }
}

static void test_values(void) {
    as_config c;
    as_err err;
    int rc = load(&c, &err, "text = { path = \"t\"; };\noutput = \"o\";\n", NULL, 0);
    CHECK(rc == -1 && strstr(err.msg, "missing key model"), "missing model: %s", err.msg);
    rc = load(&c, &err, "model = \"model\";\noutput = \"o\";\n", NULL, 0);
    CHECK(rc == -1 && strstr(err.msg, "text.path"), "missing text: %s", err.msg);
    rc = load(&c, &err, "model = \"model\";\ntext = { path = \"t\"; };\n", NULL, 0);
    CHECK(rc == -1 && strstr(err.msg, "missing key output"), "missing output: %s", err.msg);
    rc = load(&c, &err, "model = \"nomodel\";\ntext = { path = \"t\"; };\noutput = \"o\";\n", NULL, 0);
    CHECK(rc == -1 && strstr(err.msg, "model") && strstr(err.msg, "config.json"),
          "model dir without config.json: %s", err.msg);

    expect_error("empty L", "grid = { L = []; };\n", NULL, 0, "grid.L", "empty", NULL);
    expect_error("empty eps", "grid = { eps = []; };\n", NULL, 0, "grid.eps", "empty", NULL);
    expect_error("empty normalizer", "grid = { normalizer = []; };\n", NULL, 0, "grid.normalizer",
                 "empty", NULL);
    expect_error("empty layers", "grid = { layers = []; };\n", NULL, 0, "grid.layers", "empty", NULL);
    expect_error("dup L", "grid = { L = [64, 32, 64]; };\n", NULL, 0, ":4:", "grid.L", "duplicate",
                 NULL);
    expect_error("dup N", "grid = { N = [1, 5, 5]; };\n", NULL, 0, "grid.N", "duplicate", NULL);
    expect_error("dup T", "grid = { T = [1.0, 8.0, 1.0]; };\n", NULL, 0, "grid.T", "duplicate", NULL);
    expect_error("dup eps", "grid = { eps = [0.1, 0.1]; };\n", NULL, 0, "grid.eps", "duplicate", NULL);
    expect_error("dup norm", "grid = { normalizer = [\"ssmax\", \"ssmax\"]; };\n", NULL, 0,
                 "grid.normalizer", "duplicate", NULL);
    expect_error("dup heads", "grid = { heads = [1, 1]; };\n", NULL, 0, "grid.heads", "duplicate",
                 NULL);
    expect_error("dup include", "grid = { T = { include = [8.0, 8.0]; }; };\n", NULL, 0,
                 "grid.T.include", "duplicate", NULL);
    expect_error("N < 1", "grid = { N = [0, 5]; };\n", NULL, 0, "grid.N", ">= 1", NULL);
    expect_error("N range < 1", "grid = { N = \"0:5\"; };\n", NULL, 0, "grid.N", ">= 1", NULL);
    expect_error("bad range", "grid = { N = \"1:x\"; };\n", NULL, 0, "grid.N", "range", NULL);
    expect_error("T <= 0", "grid = { T = [0.0, 1.0]; };\n", NULL, 0, "grid.T", "> 0", NULL);
    expect_error("T neg", "grid = { T = -1.0; };\n", NULL, 0, "grid.T", "> 0", NULL);
    expect_error("T.min <= 0", "grid = { T = { min = 0.0; }; };\n", NULL, 0, "grid.T.min", NULL);
    expect_error("T.max < min", "grid = { T = { min = 2.0; max = 1.0; }; };\n", NULL, 0,
                 "grid.T.max", NULL);
    expect_error("T.count", "grid = { T = { count = 0; }; };\n", NULL, 0, "grid.T.count", NULL);
    expect_error("T include <= 0", "grid = { T = { include = [-1.0]; }; };\n", NULL, 0,
                 "grid.T.include", NULL);
    expect_error("eps <= 0", "grid = { eps = [0.0, 1.0]; };\n", NULL, 0, "grid.eps", "> 0", NULL);
    expect_error("L < 2", "grid = { L = [1, 64]; };\n", NULL, 0, "grid.L", ">= 2", NULL);
    expect_error("L > context", "grid = { L = [64, 512]; };\n", NULL, 0, "grid.L", "512",
                 "n_positions = 256", NULL);
    expect_error("layers range", "grid = { layers = [0, 3]; };\n", NULL, 0, "grid.layers", "3",
                 "n_layer", NULL);
    expect_error("heads range", "grid = { heads = [-1]; };\n", NULL, 0, "grid.heads", "-1", NULL);
    expect_error("N all >= L", "grid = { L = [32, 64]; N = [64, 100]; };\n", NULL, 0, "grid.N",
                 "largest L", NULL);
    expect_error("windows.count", "windows = { count = 0; };\n", NULL, 0, "windows.count", NULL);
    expect_error("windows.stride", "windows = { stride = 0; };\n", NULL, 0, "windows.stride", NULL);
    expect_error("windows.offset", "windows = { offset = -1; };\n", NULL, 0, "windows.offset", NULL);
    expect_error("ks_alpha 0", "metrics = { ks_alpha = 0.0; };\n", NULL, 0, "metrics.ks_alpha", NULL);
    expect_error("ks_alpha 1", "metrics = { ks_alpha = 1; };\n", NULL, 0, "metrics.ks_alpha", NULL);
    expect_error("ssmax neg", "metrics = { ssmax_scale = -1.0; };\n", NULL, 0,
                 "metrics.ssmax_scale", NULL);
    expect_error("blas_threads", "runtime = { blas_threads = 0; };\n", NULL, 0,
                 "runtime.blas_threads", NULL);
    expect_error("commit_every", "runtime = { commit_every = 0; };\n", NULL, 0,
                 "runtime.commit_every", NULL);
    expect_error("stop_grace 0", "runtime = { stop_grace = 0; };\n", NULL, 0, "runtime.stop_grace", NULL);
    expect_error("stop_grace neg", "", (const char *[]){"runtime.stop_grace=-5"}, 1,
                 "--set runtime.stop_grace", NULL);
    expect_error("stop_grace string", "runtime = { stop_grace = \"long\"; };\n", NULL, 0,
                 "runtime.stop_grace", "expected a number", NULL);
    expect_error("normalizer unknown", "grid = { normalizer = [\"softmx\"]; };\n", NULL, 0,
                 "grid.normalizer", "did you mean softmax", NULL);

    /* some N >= some L is fine; N sorted; L sorted */
    if (!load_ok(&c, "grid = { L = [64, 32]; N = [100, 1, 40]; };\n", NULL, 0, "N >= some L")) {
        CHECK(c.axes.L[0] == 32 && c.axes.L[1] == 64, "L sorted");
        CHECK(c.axes.N[0] == 1 && c.axes.N[1] == 40 && c.axes.N[2] == 100, "N sorted");
        config_free(&c);
    }
    /* softmax moved first, the others keep the user's order */
    if (!load_ok(&c, "grid = { normalizer = [\"ssmax\", \"softmax\", \"sparsemax\"]; };\n", NULL, 0,
                 "norm order")) {
        CHECK(c.axes.n_norm == 3 && c.axes.normalizer[0] == MET_SOFTMAX &&
                  c.axes.normalizer[1] == MET_SSMAX && c.axes.normalizer[2] == MET_SPARSEMAX,
              "softmax first, then user order");
        config_free(&c);
    }
    if (!load_ok(&c, "grid = { normalizer = [\"sparsemax\", \"ssmax\"]; };\n", NULL, 0, "norm no softmax")) {
        CHECK(c.axes.n_norm == 2 && c.axes.normalizer[0] == MET_SPARSEMAX, "user order kept");
        config_free(&c);
    }
    /* docs/metrics.md section 10.1: every name of the one table parses, with its keys */
    if (!load_ok(&c, "grid = { normalizer = [\"softmax1\", \"sigmoid\", \"entmax15\", "
                     "\"sa_softmax_norm\", \"sa_softmax\", \"ssmax\", \"sparsemax\", \"softmax\"]; };\n"
                     "metrics = { entmax_alpha = 1.25; sigmoid_bias = -2; };\n",
                 NULL, 0, "eight normalizers")) {
        CHECK(c.axes.n_norm == 8 && c.axes.normalizer[0] == MET_SOFTMAX &&
                  c.axes.normalizer[1] == MET_SOFTMAX1 && c.axes.normalizer[3] == MET_ENTMAX15,
              "all eight, softmax first");
        CHECK(c.entmax_alpha == 1.25 && c.sigmoid_bias_set && c.sigmoid_bias == -2.0,
              "entmax_alpha, sigmoid_bias read");
        config_free(&c);
    }
    if (!load_ok(&c, "", NULL, 0, "section 10.1 defaults")) {
        CHECK(c.entmax_alpha == 1.5 && !c.sigmoid_bias_set, "entmax_alpha 1.5, sigmoid b = -ln n");
        config_free(&c);
    }
    expect_error("entmax_alpha 1", "metrics = { entmax_alpha = 1.0; };\n", NULL, 0,
                 "metrics.entmax_alpha", NULL);
    expect_error("entmax_alpha 3", "metrics = { entmax_alpha = 3.0; };\n", NULL, 0,
                 "metrics.entmax_alpha", NULL);
    expect_error("sigmoid_bias string", "metrics = { sigmoid_bias = \"x\"; };\n", NULL, 0,
                 "metrics.sigmoid_bias", NULL);
    expect_error("normalizer typo", "grid = { normalizer = [\"entmax\"]; };\n", NULL, 0,
                 "entmax15", NULL);
}

static void test_set(void) {
    as_config c;
    const char *sets[] = {"grid.L=[64,128]", "output=\"x.h5\"", "metrics.seed=3",
                          "grid.layers=all", "grid.N=1:64:8", " windows.count = 4 "};
    if (!load_ok(&c, "grid = { L = [32]; layers = [1]; N = [1]; };\nmetrics = { seed = 1; };\n",
                 sets, 6, "--set")) {
        CHECK(c.axes.n_L == 2 && c.axes.L[0] == 64 && c.axes.L[1] == 128, "--set grid.L");
        CHECK(strstr(c.output, "/x.h5") != NULL, "--set output: %s", c.output);
        CHECK(c.seed == 3, "--set metrics.seed");
        CHECK(c.axes.n_layer == 3, "--set grid.layers=all (bare word)");
        CHECK(c.axes.n_N == 8 && c.axes.N[7] == 57, "--set grid.N=1:64:8 (bare word range)");
        CHECK(c.windows_count == 4, "--set with spaces");
        config_free(&c);
    }
    /* creating a key (and its group) absent from the file */
    const char *create[] = {"runtime.commit_every=2", "grid.T.include=[3.0]"};
    if (!load_ok(&c, "", create, 2, "--set creates")) {
        CHECK(c.commit_every == 2, "--set created runtime.commit_every");
        /* the stop grace is no part of the stored config: a job may pass another each segment */
        as_config g;
        const char *grace[] = {"runtime.commit_every=2", "grid.T.include=[3.0]", "runtime.stop_grace=30.5"};
        if (!load_ok(&g, "", grace, 3, "--set runtime.stop_grace")) {
            CHECK(g.stop_grace == 30.5, "--set runtime.stop_grace=30.5: %g", g.stop_grace);
            CHECK(!strcmp(g.sha256, c.sha256) && !strstr(g.canonical, "stop_grace"),
                  "runtime.stop_grace leaves the canonical config and its sha256 alone");
            config_free(&g);
        }
        int has3 = 0;
        for (size_t i = 0; i < c.axes.n_T; i++) has3 |= c.axes.T[i] == 3.0;
        CHECK(has3 && c.axes.n_T == 22, "--set created grid.T.include (replaces the default 8.0)");
        config_free(&c);
    }
    expect_error("--set unknown", "", (const char *[]){"grid.temps=[1.0]"}, 1, "--set grid.temps",
                 "unknown", "did you mean", NULL);
    expect_error("--set no =", "", (const char *[]){"grid.L"}, 1, "--set grid.L", "key=value", NULL);
    expect_error("--set bad value", "", (const char *[]){"grid.L=[64,"}, 1, "--set grid.L",
                 "libconfig", NULL);
    expect_error("--set bad type", "", (const char *[]){"grid.L=true"}, 1, "--set grid.L",
                 "bool", NULL);
    expect_error("--set value error", "", (const char *[]){"windows.count=0"}, 1,
                 "--set windows.count", NULL);
    expect_error("--set into non-group", "grid = { T = [1.0]; };\n",
                 (const char *[]){"grid.T.min=1.0"}, 1, "--set grid.T.min", "not a group", NULL);
}

static void test_range(void) {
    int32_t *v;
    size_t n;
    as_err err;
    CHECK(config_parse_range(&v, &n, "1:128", &err) == 0, "1:128: %s", err.msg);
    if (n == 128) {
        int ok = 1;
        for (size_t i = 0; i < n; i++) ok &= v[i] == (int32_t)(i + 1);
        CHECK(ok, "1:128 values");
    } else CHECK(0, "1:128 count %zu", n);
    free(v);
    CHECK(config_parse_range(&v, &n, "1:128:4", &err) == 0, "1:128:4: %s", err.msg);
    /* independent count: values 1 + 4k <= 128 -> k <= 31 */
    CHECK(n == 32 && v[0] == 1 && v[31] == 125, "1:128:4 gives 1..125 step 4 (n %zu)", n);
    free(v);
    CHECK(config_parse_range(&v, &n, " 5 : 5 ", &err) == 0 && n == 1 && v[0] == 5, "5:5");
    free(v);
    const char *bad[] = {"1", "1:", ":5", "a:b", "5:1", "1:10:0", "1:10:-1", "1:2:3:4",
                         "1.5:3", "", "1::2", "1:99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        CHECK(config_parse_range(&v, &n, bad[i], &err) == -1 && err.msg[0], "bad range '%s' accepted",
              bad[i]);
    }
}

static void test_T(void) {
    double *T;
    size_t n;
    as_err err;
    /* log spacing against exp(ln min + f ln(max/min)) */
    CHECK(config_make_T(&T, &n, 1e-3, 1e2, 21, 1, NULL, 0, &err) == 0, "log T: %s", err.msg);
    CHECK(n == 21, "log T count");
    for (size_t i = 0; i < n && n == 21; i++) {
        double want = exp(log(1e-3) + (double)i / 20.0 * log(1e2 / 1e-3));
        char label[64];
        snprintf(label, sizeof label, "log T[%zu]", i);
        CHECK_CLOSE(T[i], want, 0, 1e-12, label);
    }
    free(T);
    CHECK(config_make_T(&T, &n, 0.5, 2.0, 4, 0, NULL, 0, &err) == 0 && n == 4, "linear T");
    for (size_t i = 0; i < n; i++) CHECK_CLOSE(T[i], 0.5 + 0.5 * (double)i, 0, 1e-15, "linear T");
    free(T);
    /* include: 1.0 coincides with generated 10^0 (merged), 8.0 is new, 200 beyond max */
    const double inc[] = {8.0, 1.0, 200.0};
    CHECK(config_make_T(&T, &n, 1e-3, 1e2, 21, 1, inc, 3, &err) == 0, "include: %s", err.msg);
    CHECK(n == 23, "include merged: 21 + 8.0 + 200, got %zu", n);
    int has1 = 0, has8 = 0, sorted = 1;
    for (size_t i = 0; i < n; i++) {
        has1 += T[i] == 1.0, has8 += T[i] == 8.0;
        if (i) sorted &= T[i] > T[i - 1];
    }
    CHECK(has1 == 1 && has8 == 1 && sorted && T[n - 1] == 200.0, "include values exact, sorted");
    free(T);
    CHECK(config_make_T(&T, &n, 1.0, 1.0, 1, 1, NULL, 0, &err) == 0 && n == 1 && T[0] == 1.0,
          "count 1");
    free(T);
    CHECK(config_make_T(&T, &n, 1.0, 2.0, 1, 1, NULL, 0, &err) == -1, "count 1 with min != max");
    CHECK(config_make_T(&T, &n, 1.0, 1.0, 3, 1, NULL, 0, &err) == -1, "min == max with count 3");
}

/* Same config written twice (keys reordered, other whitespace, comments) hashes the same. */
static void test_canonical(void) {
    as_config a, b, c;
    as_err err;
    int ra = load(&a, &err,
                  "model = \"model\"; text = { path = \"t.txt\"; format = \"text\"; };\n"
                  "output = \"out.h5\";\ngrid = { L = [32, 64]; N = \"1:16\"; eps = [0.1, 1.0]; };\n"
                  "metrics = { seed = 7; ks_alpha = 0.05; };\n",
                  NULL, 0);
    CHECK(ra == 0, "canonical a: %s", err.msg);
    int rb = load(&b, &err,
                  "# comment\nmetrics = {\n  ks_alpha = 5e-2;\n  seed = 7;\n};\n"
                  "grid = {\n  eps = (1, 0.1);\n  N = [16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1];\n"
                  "  L = [64, 32];\n};\noutput   =   \"./out.h5\";\n"
                  "text = { path = \"t.txt\"; };\nmodel = \"model/\";\n",
                  NULL, 0);
    CHECK(rb == 0, "canonical b: %s", err.msg);
    const char *sets[] = {"metrics.seed=8"};
    int rc = load(&c, &err,
                  "model = \"model\"; text = { path = \"t.txt\"; };\noutput = \"out.h5\";\n"
                  "grid = { L = [32, 64]; N = \"1:16\"; eps = [0.1, 1.0]; };\n"
                  "metrics = { seed = 7; ks_alpha = 0.05; };\n",
                  sets, 1);
    CHECK(rc == 0, "canonical c: %s", err.msg);
    if (ra || rb || rc) return;
    CHECK(!strcmp(a.sha256, b.sha256), "hash stable under reordering:\n%s\n---\n%s", a.canonical,
          b.canonical);
    CHECK(strcmp(a.sha256, c.sha256) != 0, "hash changes with a value");
    CHECK(strcmp(a.file_text, b.file_text) != 0, "file texts differ (provenance keeps each)");

    /* the canonical text is itself a valid config that loads to the same canonical text */
    char path[400];
    snprintf(path, sizeof path, "%s/canon.cfg", dir);
    fx_write_file(path, a.canonical);
    as_config d;
    CHECK(config_load(&d, path, NULL, 0, &err) == 0, "canonical reloads: %s", err.msg);
    if (d.canonical) {
        CHECK(!strcmp(d.sha256, a.sha256), "canonical is a fixed point");
        config_free(&d);
    }
    as_config_diff diff;
    CHECK(config_diff(&diff, a.canonical, b.canonical, &err) == 0 && diff.n == 0 &&
              diff.verdict == AS_DIFF_HARMLESS,
          "no diff between equal configs (n %zu)", diff.n);
    config_free(&a);
    config_free(&b);
    config_free(&c);
}

static as_diff_kind diff_of(const char *old_extra, const char *new_extra, const char *const *sets,
                            size_t n_sets, as_config_diff *d, const char *label) {
    as_config a, b;
    memset(d, 0, sizeof *d);
    if (load_ok(&a, old_extra, NULL, 0, label)) return AS_DIFF_REFUSED;
    if (load_ok(&b, new_extra, sets, n_sets, label)) {
        config_free(&a);
        return AS_DIFF_REFUSED;
    }
    as_err err;
    int rc = config_diff(d, a.canonical, b.canonical, &err);
    CHECK(rc == 0, "%s: %s", label, err.msg);
    config_free(&a);
    config_free(&b);
    return d->verdict;
}

static int has_item(const as_config_diff *d, const char *key, as_diff_kind k) {
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->item[i].key, key) && d->item[i].kind == k) return 1;
    return 0;
}

static void test_diff(void) {
    as_config_diff d;
    const char *base = "grid = { L = [32, 64]; N = [1, 4]; };\n";
    CHECK(diff_of(base, "grid = { L = [32, 64]; N = [1, 4]; };\nwindows = { count = 3; stride = 64; };\n",
                  NULL, 0, &d, "count grew") == AS_DIFF_EXTEND &&
              d.n == 1 && has_item(&d, "windows.count", AS_DIFF_EXTEND),
          "windows.count grew -> extension (n %zu)", d.n);
    CHECK(diff_of("grid = { L = [32, 64]; N = [1, 4]; };\nwindows = { count = 3; };\n", base, NULL, 0,
                  &d, "count shrank") == AS_DIFF_REFUSED,
          "windows.count shrank -> refused");
    CHECK(diff_of(base, "grid = { L = [32, 64, 128]; N = [1, 4]; };\nwindows = { stride = 64; };\n",
                  NULL, 0, &d, "L grew") == AS_DIFF_EXTEND &&
              has_item(&d, "grid.L", AS_DIFF_EXTEND),
          "grid.L grew -> extension");
    CHECK(diff_of(base, "grid = { L = [32, 128]; N = [1, 4]; };\nwindows = { stride = 64; };\n",
                  NULL, 0, &d, "L changed") == AS_DIFF_REFUSED &&
              has_item(&d, "grid.L", AS_DIFF_REFUSED),
          "grid.L lost a value -> refused");
    CHECK(diff_of(base, base, (const char *[]){"output=\"other.h5\"", "runtime.blas_threads=2"}, 2, &d,
                  "harmless") == AS_DIFF_HARMLESS &&
              d.n == 2,
          "output/runtime -> harmless (n %zu)", d.n);
    CHECK(diff_of(base, base, (const char *[]){"metrics.seed=2"}, 1, &d, "seed") == AS_DIFF_REFUSED &&
              has_item(&d, "metrics.seed", AS_DIFF_REFUSED),
          "seed -> refused");
    CHECK(diff_of(base, base, (const char *[]){"grid.T=[1.0]"}, 1, &d, "T") == AS_DIFF_REFUSED,
          "T -> refused");
    /* both extensions at once, and an extension with a refused change */
    CHECK(diff_of(base, "grid = { L = [32, 64, 128]; N = [1, 4]; };\nwindows = { count = 2; stride = 64; };\n",
                  NULL, 0, &d, "both") == AS_DIFF_EXTEND && d.n == 2,
          "L and count grew -> extension");
    CHECK(diff_of(base, "grid = { L = [32, 64, 128]; N = [1, 4]; };\nwindows = { stride = 64; };\n",
                  (const char *[]){"metrics.seed=5"}, 1, &d, "ext+seed") == AS_DIFF_REFUSED,
          "extension + seed -> refused");
    /* a moved model dir (same contents) -> path */
    char moved[400];
    snprintf(moved, sizeof moved, "%s/model2", dir);
    write_model(moved, 256);
    /* --set paths resolve against cwd: set an absolute one */
    char set_model[450];
    snprintf(set_model, sizeof set_model, "model=\"%s\"", moved);
    CHECK(diff_of(base, base, (const char *[]){set_model}, 1, &d, "path") == AS_DIFF_PATH &&
              has_item(&d, "model", AS_DIFF_PATH),
          "model moved -> path");
    /* an extension next to a moved path must not hide it */
    CHECK(diff_of(base, "grid = { L = [32, 64]; N = [1, 4]; };\nwindows = { count = 3; stride = 64; };\n",
                  (const char *[]){set_model}, 1, &d, "path+count") == AS_DIFF_PATH &&
              has_item(&d, "model", AS_DIFF_PATH) && has_item(&d, "windows.count", AS_DIFF_EXTEND),
          "model moved + windows.count grew -> path, not extension (verdict %s)",
          config_diff_kind_name(d.verdict));
    CHECK(diff_of(base, "grid = { L = [32, 64, 128]; N = [1, 4]; };\nwindows = { stride = 64; };\n",
                  (const char *[]){"text.path=\"/elsewhere/t.txt\""}, 1, &d, "text+L") == AS_DIFF_PATH &&
              has_item(&d, "text.path", AS_DIFF_PATH),
          "text.path moved + grid.L grew -> path, not extension (verdict %s)",
          config_diff_kind_name(d.verdict));
    CHECK(diff_of(base, "grid = { L = [32, 64, 128]; N = [1, 4]; };\nwindows = { stride = 64; };\n",
                  (const char *[]){set_model, "metrics.seed=5"}, 2, &d, "path+ext+seed") == AS_DIFF_REFUSED,
          "model moved + extension + seed -> refused");
    char desc[512];
    diff_of(base, "grid = { L = [32, 64, 128]; N = [1, 4]; };\nwindows = { stride = 64; };\n",
            (const char *[]){"metrics.seed=5"}, 1, &d, "describe");
    config_diff_describe(&d, desc, sizeof desc);
    CHECK(strstr(desc, "grid.L (extension: stored [32, 64], now [32, 64, 128])") &&
              strstr(desc, "metrics.seed (refused: stored 1, now 5)"),
          "describe: %s", desc);
    as_err err;
    CHECK(config_diff(&d, "x = ", "y = 1;", &err) == -1 && strstr(err.msg, "stored config"),
          "unparsable stored text: %s", err.msg);
}

/* @include with an absolute path, a relative one, a
 * missing one (named), a FIFO (refused at once, never waited on); issue
 * 12.10: --set with text after its value. */
static void test_include(void) {
    char inc_dir[400], inc[500], text[1200];
    snprintf(inc_dir, sizeof inc_dir, "%s/incs", dir);
    mkdir(inc_dir, 0777);
    snprintf(inc, sizeof inc, "%s/grid.inc", inc_dir);
    fx_write_file(inc, "grid = { L = [32, 64]; N = [1, 3];\n  T = [2.0]; };\n");
    as_config cfg;
    snprintf(text, sizeof text, BASE "@include \"%s\"\nwindows = { count = 2; };\n", inc);
    as_err err;
    int rc = load(&cfg, &err, text, NULL, 0);
    CHECK(rc == 0, "absolute @include: %s", err.msg);
    if (rc == 0) {
        CHECK(cfg.axes.n_N == 2 && cfg.axes.N[1] == 3 && cfg.axes.n_T == 1 && cfg.axes.T[0] == 2.0 &&
                  cfg.windows_count == 2,
              "absolute @include: values not read (nN %zu)", cfg.axes.n_N);
        config_free(&cfg);
    }
    rc = load(&cfg, &err, BASE "@include \"incs/grid.inc\"\n", NULL, 0);
    CHECK(rc == 0 && cfg.axes.n_T == 1, "relative @include: %s", err.msg);
    if (rc == 0) config_free(&cfg);
    /* an error inside the included file names it and its line */
    char bad[500];
    snprintf(bad, sizeof bad, "%s/bad.inc", inc_dir);
    fx_write_file(bad, "grid = {\n  L = [32, 64];\n  bogus = 1;\n};\n");
    snprintf(text, sizeof text, BASE "@include \"%s\"\n", bad);
    rc = load(&cfg, &err, text, NULL, 0);
    CHECK(rc == -1 && strstr(err.msg, "bad.inc:3:") && strstr(err.msg, "bogus"),
          "key error in an include names FILE:LINE: %s", err.msg);
    /* a line number after an include still names the right line of the top file */
    snprintf(text, sizeof text, BASE "@include \"%s\"\nwindows = { count = \"x\"; };\n", inc);
    rc = load(&cfg, &err, text, NULL, 0);
    CHECK(rc == -1 && strstr(err.msg, ".cfg:5:") && strstr(err.msg, "windows.count"),
          "line after an include: %s", err.msg);
    snprintf(text, sizeof text, BASE "@include \"%s/nothere.inc\"\n", inc_dir);
    rc = load(&cfg, &err, text, NULL, 0);
    CHECK(rc == -1 && strstr(err.msg, "nothere.inc") && !strstr(err.msg, "//"),
          "missing absolute include named (no CFGDIR//path): %s", err.msg);
    char fifo[500];
    snprintf(fifo, sizeof fifo, "%s/fifo.inc", inc_dir);
    CHECK(mkfifo(fifo, 0666) == 0, "mkfifo %s", fifo);
    snprintf(text, sizeof text, BASE "@include \"%s\"\n", fifo);
    rc = load(&cfg, &err, text, NULL, 0); /* would block forever in open() before */
    CHECK(rc == -1 && strstr(err.msg, "fifo.inc") && strstr(err.msg, "not a regular file"),
          "FIFO include refused: %s", err.msg);
    /* a commented-out include is not read */
    rc = load(&cfg, &err, BASE "/*\n@include \"nothere.inc\"\n*/\n", NULL, 0);
    CHECK(rc == 0, "include inside a comment: %s", err.msg);
    if (rc == 0) config_free(&cfg);
    /* an include loop ends in an error */
    char loop[500];
    snprintf(loop, sizeof loop, "%s/loop.inc", inc_dir);
    fx_write_file(loop, "@include \"loop.inc\"\n");
    snprintf(text, sizeof text, BASE "@include \"%s\"\n", loop);
    rc = load(&cfg, &err, text, NULL, 0);
    CHECK(rc == -1 && strstr(err.msg, "loop.inc") && strstr(err.msg, "deep"), "include loop: %s", err.msg);

    expect_error("--set with trailing text", "", (const char *[]){"grid.T=[1.0]; output=\"x.h5\""}, 1,
                 "--set grid.T", "more than one value", NULL);
    expect_error("--set with a second key", "", (const char *[]){"grid.T=1.0; metrics.seed=3"}, 1,
                 "--set grid.T", NULL);
}

/* text.start_at / start_occurrence and metrics.logits */
static void test_start_at_and_logits(void) {
    as_config c, d;
    if (!load_ok(&c, "", NULL, 0, "defaults for the new keys")) {
        CHECK(c.logits == AS_LOGITS_RAW && c.start_at[0] == 0 && c.start_occurrence == 1,
              "defaults: logits raw, no start_at, occurrence 1");
        /* defaults leave the canonical text as it was before the keys existed */
        CHECK(!strstr(c.canonical, "logits") && !strstr(c.canonical, "start_"),
              "canonical text without the default new keys:\n%s", c.canonical);
        config_free(&c);
    }
    if (!load_ok(&c, "metrics = { logits = \"scaled\"; };\n",
                 (const char *[]){"text.start_at=\"BOOK ONE: 1805\"", "text.start_occurrence=2"}, 2,
                 "new keys set")) {
        CHECK(c.logits == AS_LOGITS_SCALED && !strcmp(config_logits_name(c.logits), "scaled"), "logits");
        CHECK(!strcmp(c.start_at, "BOOK ONE: 1805") && c.start_occurrence == 2, "start_at");
        CHECK(strstr(c.canonical, "logits = \"scaled\"") && strstr(c.canonical, "start_at = \"BOOK ONE: 1805\"") &&
                  strstr(c.canonical, "start_occurrence = 2"),
              "canonical records them:\n%s", c.canonical);
        if (!load_ok(&d, "", NULL, 0, "defaults")) {
            as_config_diff diff;
            as_err err;
            CHECK(config_diff(&diff, d.canonical, c.canonical, &err) == 0 && diff.verdict == AS_DIFF_REFUSED,
                  "switching logits or start_at refuses a resume");
            char buf[512];
            config_diff_describe(&diff, buf, sizeof buf);
            CHECK(strstr(buf, "metrics.logits") && strstr(buf, "text.start_at"), "diff names them: %s", buf);
            config_free(&d);
        }
        config_free(&c);
    }
    expect_error("logits value", "metrics = { logits = \"sqrt\"; };\n", NULL, 0, "metrics.logits",
                 "\"raw\" | \"scaled\"", NULL);
    expect_error("occurrence without start_at", "", (const char *[]){"text.start_occurrence=2"}, 1,
                 "text.start_occurrence", "needs text.start_at", NULL);
    expect_error("occurrence 0", "", (const char *[]){"text.start_at=\"X\"", "text.start_occurrence=0"}, 2,
                 "text.start_occurrence", NULL);
    expect_error("start_at on tokens", "", (const char *[]){"text.start_at=\"X\"", "text.format=\"tokens\""}, 2,
                 "text.start_at", "format = \"text\" only", NULL);
}

/* Each config enum's spellings are a contract (results files and their canonical text hold
 * them): config_*_name gives each value its spelling, the parser reads the spelling back to
 * the same value, and the canonical text of a config carries it and reloads to it. */
static void test_enum_names(void) {
    static const struct {
        const char *key; /* the --set key; the canonical text's member name is its last part */
        int value;
        const char *name;
    } spell[] = {
        {"text.format", AS_TEXT_PLAIN, "text"},           {"text.format", AS_TEXT_TOKENS, "tokens"},
        {"metrics.vectors", AS_VECTORS_VALUE, "value"},   {"metrics.vectors", AS_VECTORS_RESID, "resid"},
        {"metrics.rows", AS_ROWS_VISIBLE, "visible"},     {"metrics.rows", AS_ROWS_FULL_ROW, "full_row"},
        {"metrics.logits", AS_LOGITS_RAW, "raw"},         {"metrics.logits", AS_LOGITS_SCALED, "scaled"},
        {"metrics.distance", AS_DISTANCE_PER_TOKEN, "per_token"},
        {"metrics.distance", AS_DISTANCE_AGGREGATE, "aggregate"},
    };
    for (size_t i = 0; i < sizeof spell / sizeof spell[0]; i++) {
        const char *key = spell[i].key;
        int is = !strcmp(key, "text.format") ? 0 : !strcmp(key, "metrics.vectors") ? 1
                 : !strcmp(key, "metrics.rows") ? 2 : !strcmp(key, "metrics.logits") ? 3 : 4;
        const char *named = is == 0   ? config_text_format_name((as_text_format)spell[i].value)
                            : is == 1 ? config_vectors_name((as_vectors)spell[i].value)
                            : is == 2 ? config_rows_name((as_rows)spell[i].value)
                            : is == 3 ? config_logits_name((as_logits)spell[i].value)
                                      : config_distance_name((as_distance)spell[i].value);
        CHECK(!strcmp(named, spell[i].name), "%s %d is spelled \"%s\", not \"%s\"", key,
              spell[i].value, named, spell[i].name);
        char set[128], member[128];
        snprintf(set, sizeof set, "%s=\"%s\"", key, spell[i].name);
        snprintf(member, sizeof member, "%s = \"%s\"", strchr(key, '.') + 1, spell[i].name);
        as_config c, d;
        if (load_ok(&c, "", (const char *[]){set}, 1, set)) continue;
        const as_config *cc[2] = {&c, &d};
        as_err err;
        int reloaded = config_load_text(&d, c.canonical, "canonical", NULL, 0, &err) == 0;
        CHECK(reloaded, "%s: the canonical text does not reload: %s", set, err.msg);
        for (int k = 0; k < 1 + reloaded; k++) {
            int got = is == 0 ? (int)cc[k]->text_format : is == 1 ? (int)cc[k]->vectors
                      : is == 2 ? (int)cc[k]->rows : is == 3 ? (int)cc[k]->logits
                                : (int)cc[k]->distance;
            CHECK(got == spell[i].value, "%s %s reads as %d, not %d", k ? "canonical" : "--set", set,
                  got, spell[i].value);
        }
        /* logits and distance appear only off their default (older files keep their sha256) */
        int omitted = (is == 3 || is == 4) && spell[i].value == 0;
        CHECK(omitted ? !strstr(c.canonical, strchr(key, '.') + 1) : strstr(c.canonical, member) != NULL,
              "%s: canonical text %s '%s':\n%s", set, omitted ? "holds" : "lacks", member, c.canonical);
        if (reloaded) config_free(&d);
        config_free(&c);
    }
    CHECK(!strcmp(config_rows_name((as_rows)7), "?") && !strcmp(config_vectors_name((as_vectors)-1), "?"),
          "a value outside the enum is spelled \"?\"");
}

/* metrics.per_N_T, metrics.grad_exact, metrics.dist_expect: defaults keep the canonical text
 * as before the keys; set, they are recorded (resolved to the grid's T) and refuse a resume;
 * per_N_T must name grid T values. */
static void test_metric_switches(void) {
    as_config c, d;
    if (!load_ok(&c, "", NULL, 0, "switch defaults")) {
        CHECK(c.grad_exact == 1 && c.dist_expect == 1 && c.axes.per_N_at == NULL, "defaults: all on");
        CHECK(!strstr(c.canonical, "per_N_T") && !strstr(c.canonical, "grad_exact") &&
                  !strstr(c.canonical, "dist_expect"),
              "canonical text without the default switches:\n%s", c.canonical);
        config_free(&c);
    }
    const char *grid = "grid = { T = [0.5, 1.0, 8.0]; };\n";
    char text[512];
    snprintf(text, sizeof text, "%smetrics = { per_N_T = [8.0000000001]; grad_exact = false; "
             "dist_expect = false; };\n", grid);
    if (!load_ok(&c, text, NULL, 0, "switches set")) {
        CHECK(c.grad_exact == 0 && c.dist_expect == 0, "switches read");
        CHECK(c.axes.per_N_at && !c.axes.per_N_at[0] && !c.axes.per_N_at[1] && c.axes.per_N_at[2],
              "per_N_T marks T = 8 (within 1e-9) only");
        CHECK(strstr(c.canonical, "per_N_T = [8.0]") && strstr(c.canonical, "grad_exact = false") &&
                  strstr(c.canonical, "dist_expect = false"),
              "canonical records them:\n%s", c.canonical);
        snprintf(text, sizeof text, "%s", grid);
        if (!load_ok(&d, text, NULL, 0, "same grid, switches off")) {
            as_config_diff diff;
            as_err err;
            CHECK(config_diff(&diff, d.canonical, c.canonical, &err) == 0 && diff.verdict == AS_DIFF_REFUSED,
                  "switching a family off refuses a resume");
            config_free(&d);
        }
        /* the canonical text loads back to the same switches */
        as_err err;
        if (config_load_text(&d, c.canonical, "canonical", NULL, 0, &err) == 0) {
            CHECK(!strcmp(d.sha256, c.sha256), "canonical round trip keeps the sha256");
            config_free(&d);
        } else {
            CHECK(0, "canonical text does not load: %s", err.msg);
        }
        config_free(&c);
    }
    snprintf(text, sizeof text, "%smetrics = { per_N_T = [8.0, 1.0, 0.5]; };\n", grid);
    if (!load_ok(&c, text, NULL, 0, "per_N_T naming every T")) {
        CHECK(c.axes.per_N_at == NULL && !strstr(c.canonical, "per_N_T"), "every T is the default");
        config_free(&c);
    }
    snprintf(text, sizeof text, "%smetrics = { per_N_T = [7.0]; };\n", grid);
    expect_error("per_N_T off the grid", text, NULL, 0, "metrics.per_N_T", "7 is not a value of grid.T", NULL);
    snprintf(text, sizeof text, "%smetrics = { per_N_T = [8.0, 8.0]; };\n", grid);
    expect_error("per_N_T twice", text, NULL, 0, "metrics.per_N_T", "listed twice", NULL);
    expect_error("grad_exact type", "metrics = { grad_exact = 0; };\n", NULL, 0, "metrics.grad_exact",
                 "true or false", NULL);
}

/* A model directory of the given shape; step < 0: no training_step. */
static void write_model_shape(const char *mdir, int n_layer, int n_head, int n_positions, int step) {
    mkdir(mdir, 0777);
    char path[512], json[320], st[48] = "";
    if (step >= 0) snprintf(st, sizeof st, ", \"training_step\": %d", step);
    snprintf(path, sizeof path, "%s/config.json", mdir);
    snprintf(json, sizeof json,
             "{\"model_type\": \"gpt2\", \"n_layer\": %d, \"n_head\": %d, \"n_embd\": %d, "
             "\"n_positions\": %d, \"vocab_size\": 100%s}",
             n_layer, n_head, 8 * n_head, n_positions, st);
    fx_write_file(path, json);
}

/* A checkpoint series fetched with jobs/fetch-model.sh --revisions lies in DIR/step0,
 * DIR/step1000, ... with Pythia's config.json, which has no training_step: the step is the
 * name's. A config.json training_step wins over the name; other names state no step. */
static void test_training_step_names(void) {
    static const struct { const char *name; int json_step; int64_t want; } cases[] = {
        {"step0", -1, 0},           {"step1000", -1, 1000},      {"step143000", -1, 143000},
        {"checkpoint-10000", -1, 10000}, {"step2000", 7, 7},    {"step12a", -1, -1},
        {"steps", -1, -1},          {"step", -1, -1},            {"run-step100", -1, -1},
        {"step1234567890123456789", -1, -1},
    };
    enum { N_CASES = sizeof cases / sizeof cases[0] };
    char set[N_CASES * 340 + 16] = "model=[";
    for (size_t k = 0; k < N_CASES; k++) {
        char mdir[320];
        snprintf(mdir, sizeof mdir, "%s/%s", dir, cases[k].name);
        write_model_shape(mdir, 3, 4, 256, cases[k].json_step);
        snprintf(set + strlen(set), sizeof set - strlen(set), "%s\"%s\"", k ? ", " : "", mdir);
    }
    strcat(set, "]");
    const char *sets[] = {set};
    as_config c;
    if (load_ok(&c, "", sets, 1, "the checkpoints' names") != 0) return;
    for (size_t k = 0; k < N_CASES && k < c.n_model; k++)
        CHECK(c.models[k].training_step == cases[k].want, "%s: training_step %lld, want %lld", cases[k].name,
              (long long)c.models[k].training_step, (long long)cases[k].want);
    config_free(&c);
}

/* The model axis: `model` as a list (config_models.c). */
static void test_models(void) {
    char big[320], small[320], dup[340], set_two[1200], set_one[600], set_bad[1200], set_dup[1200];
    snprintf(big, sizeof big, "%s/big", dir);
    snprintf(small, sizeof small, "%s/ctx64", dir);
    snprintf(dup, sizeof dup, "%s/other/model", dir);
    write_model_shape(big, 5, 6, 256, 300);
    write_model_shape(small, 2, 2, 64, -1);
    char other[330];
    snprintf(other, sizeof other, "%s/other", dir);
    mkdir(other, 0777);
    write_model_shape(dup, 3, 4, 256, -1);
    snprintf(set_two, sizeof set_two, "model=[\"%s\", \"%s\"]", model_dir, big);
    snprintf(set_one, sizeof set_one, "model=[\"%s\"]", model_dir);
    snprintf(set_bad, sizeof set_bad, "model=[\"%s\", \"%s\"]", model_dir, small);
    snprintf(set_dup, sizeof set_dup, "model=[\"%s\", \"%s\"]", model_dir, dup);
    as_config c, one, plain;
    const char *sets[] = {set_two};
    if (load_ok(&c, "grid = { L = [32, 64]; };\n", sets, 1, "two models") == 0) {
        CHECK(c.n_model == 2 && !strcmp(c.models[0].name, "model") && !strcmp(c.models[1].name, "big"),
              "two models: names %s, %s", c.models[0].name, c.n_model > 1 ? c.models[1].name : "?");
        CHECK(c.models[0].training_step == -1 && c.models[1].training_step == 300, "training_step");
        CHECK(c.max_n_layer == 5 && c.max_n_head == 6 && c.axes.n_layer == 5 && c.axes.n_head == 6,
              "layers/heads \"all\" of the largest model: %zu x %zu", c.axes.n_layer, c.axes.n_head);
        CHECK(!strcmp(c.model_dir, model_dir) && c.model.n_layer == 3, "model_dir is model 0");
        CHECK(strstr(c.canonical, "model = [\"") != NULL, "canonical: a list");
        as_config r;
        as_err err;
        CHECK(config_load_text(&r, c.canonical, "canonical", NULL, 0, &err) == 0 && r.n_model == 2 &&
                  !strcmp(r.sha256, c.sha256), "the canonical text reloads to itself: %s", err.msg);
        if (r.n_model) config_free(&r);
        config_free(&c);
    }
    const char *sets1[] = {set_one};
    if (load_ok(&one, "", sets1, 1, "a list of one") == 0 && load_ok(&plain, "", NULL, 0, "a string") == 0) {
        CHECK(one.n_model == 1 && !strcmp(one.sha256, plain.sha256), "a list of one is the string");
        config_free(&one);
        config_free(&plain);
    }
    const char *setsb[] = {set_bad};
    expect_error("L beyond the second model's context", "grid = { L = [32, 128]; };\n", setsb, 1,
                 "grid.L", "n_positions = 64", small, NULL);
    /* ssmax_scale = 0 resolves per model; the canonical text keeps 0 when they differ */
    if (load_ok(&c, "grid = { L = [32]; };\n", setsb, 1, "ssmax per model") == 0) {
        CHECK(fabs(c.models[0].ssmax_scale - 1.0 / log(256.0)) < 1e-15 &&
                  fabs(c.models[1].ssmax_scale - 1.0 / log(64.0)) < 1e-15,
              "ssmax_scale per model: %g %g", c.models[0].ssmax_scale, c.models[1].ssmax_scale);
        CHECK(strstr(c.canonical, "ssmax_scale = 0.0;") != NULL, "canonical ssmax_scale 0 (per model)");
        config_free(&c);
    }
    const char *setsd[] = {set_dup};
    expect_error("two models of one name", "", setsd, 1, "two models are named model", model_dir, dup, NULL);
    expect_error("an empty list", "", (const char *const[]){"model=[]"}, 1, "model", "empty list", NULL);
    expect_error("not a directory", "", (const char *const[]){"model=3"}, 1, "model", "expected a string",
                 NULL);
    /* diff: appended = extension; removed, reordered = refused; a changed path = moved.
     * The models share model's shape (a larger one would grow the layer/head axes: refused) */
    char same[320], same2[320];
    snprintf(same, sizeof same, "%s/same", dir);
    snprintf(same2, sizeof same2, "%s/same2", dir);
    write_model_shape(same, 3, 4, 256, 10);
    write_model_shape(same2, 3, 4, 256, 20);
    char s_a[600], s_ab[1200], s_ba[1200], s_ac[1200];
    snprintf(s_a, sizeof s_a, "model=\"%s\"", model_dir);
    snprintf(s_ab, sizeof s_ab, "model=[\"%s\", \"%s\"]", model_dir, same);
    snprintf(s_ba, sizeof s_ba, "model=[\"%s\", \"%s\"]", same, model_dir);
    snprintf(s_ac, sizeof s_ac, "model=[\"%s\", \"%s\"]", model_dir, same2);
    as_config a, b;
    struct { const char *from, *to; as_diff_kind want; const char *key, *label; } cases[] = {
        {s_a, s_ab, AS_DIFF_EXTEND, "model", "a model appended"},
        {s_a, set_two, AS_DIFF_REFUSED, "grid.layers", "a larger model appended (the layer axis grows)"},
        {s_ab, s_a, AS_DIFF_REFUSED, "model", "a model removed"},
        {s_ab, s_ba, AS_DIFF_REFUSED, "model", "models reordered"},
        {s_ab, s_ac, AS_DIFF_PATH, "model", "a model's path changed"},
    };
    /* a model of another context appended: the canonical ssmax_scale goes from the one
     * resolved value to 0.0 (per model), an extension since the stored model keeps its own */
    {
        const char *sa[] = {s_a}, *sb[] = {set_bad};
        const char *grid = "grid = { L = [32]; layers = [0, 1]; heads = [0, 1]; };\n";
        if (load_ok(&a, grid, sa, 1, "ctx") == 0) {
            if (load_ok(&b, grid, sb, 1, "ctx") == 0) {
                as_config_diff d;
                as_err err;
                CHECK(config_diff(&d, a.canonical, b.canonical, &err) == 0 && d.verdict == AS_DIFF_EXTEND &&
                          has_item(&d, "metrics.ssmax_scale", AS_DIFF_EXTEND),
                      "a model of another context appended: verdict %s", config_diff_kind_name(d.verdict));
                config_free(&b);
            }
            config_free(&a);
        }
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *sa[] = {cases[i].from}, *sb[] = {cases[i].to};
        if (load_ok(&a, "grid = { L = [32]; };\n", sa, 1, cases[i].label)) continue;
        if (load_ok(&b, "grid = { L = [32]; };\n", sb, 1, cases[i].label)) {
            config_free(&a);
            continue;
        }
        as_config_diff d;
        as_err err;
        CHECK(config_diff(&d, a.canonical, b.canonical, &err) == 0 && d.verdict == cases[i].want &&
                  has_item(&d, cases[i].key, cases[i].want),
              "%s: verdict %s", cases[i].label, config_diff_kind_name(d.verdict));
        config_free(&a);
        config_free(&b);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_config.%d", (int)getpid());
    mkdir(dir, 0777);
    snprintf(model_dir, sizeof model_dir, "%s/model", dir);
    write_model(model_dir, 256);
    test_defaults();
    test_paths();
    test_syntax_and_unknown();
    test_types();
    test_values();
    test_set();
    test_range();
    test_T();
    test_canonical();
    test_diff();
    test_include();
    test_start_at_and_logits();
    test_enum_names();
    test_metric_switches();
    test_models();
    test_training_step_names();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("test_config");
}
