/* fuzz_config.c -- libFuzzer harness for sweep config validation
 * (config_load: libconfig parsing, --set overrides, key/type/range checks,
 * the grid against the model's config.json, the canonical text).
 *
 * Input format: the config file's text, optionally followed by a line "%%"
 * and then one --set override ("key=value") per line (at most 8), so the
 * fuzzer explores both sources of values. At start a model directory
 * TMP/model with a small config.json (n_layer 3, n_head 4, n_embd 32,
 * n_positions 256) and a text TMP/t.txt are created; the config is written
 * to TMP/c.cfg, so `model = "model";` finds it.
 *
 * On success the documented post-conditions are asserted: every axis is
 * non-empty and sorted strictly ascending (normalizer: softmax first),
 * L <= n_positions, layers < n_layer, heads < n_head, ssmax_scale != 0;
 * and the canonical text, loaded again as a config file, must succeed with
 * the same canonical text and sha256. */
#include "fuzz_util.h"

#include <stdint.h>

#include "config.h"

#define MAX_SETS 8

static void init_once(void) {
    static int done;
    if (done) return;
    done = 1;
    fuzz_mkdir("model");
    static const char model[] =
        "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_head\": 4, \"n_embd\": 32, "
        "\"n_positions\": 256, \"vocab_size\": 100}";
    fuzz_write("model/config.json", model, sizeof model - 1, NULL, 0);
    fuzz_write("t.txt", "some text\n", 10, NULL, 0);
}

static void check_sorted_i32(const int32_t *v, size_t n, const char *axis) {
    FUZZ_ASSERT(n > 0, "axis %s empty", axis);
    for (size_t i = 1; i < n; i++) FUZZ_ASSERT(v[i - 1] < v[i], "axis %s not ascending at %zu", axis, i);
}

static void check_sorted_f64(const double *v, size_t n, const char *axis) {
    FUZZ_ASSERT(n > 0, "axis %s empty", axis);
    for (size_t i = 1; i < n; i++) FUZZ_ASSERT(v[i - 1] < v[i], "axis %s not ascending at %zu", axis, i);
}

static void check_config(const as_config *cfg) {
    const as_axes *a = &cfg->axes;
    check_sorted_i32(a->L, a->n_L, "L");
    check_sorted_i32(a->N, a->n_N, "N");
    check_sorted_f64(a->T, a->n_T, "T");
    check_sorted_f64(a->eps, a->n_eps, "eps");
    check_sorted_i32(a->layer, a->n_layer, "layers");
    check_sorted_i32(a->head, a->n_head, "heads");
    FUZZ_ASSERT(a->n_norm > 0, "no normalizer");
    for (size_t i = 1; i < a->n_norm; i++)
        FUZZ_ASSERT(a->normalizer[i] != MET_SOFTMAX, "softmax not first");
    FUZZ_ASSERT((size_t)a->L[a->n_L - 1] <= cfg->model.n_positions, "L beyond n_positions");
    FUZZ_ASSERT(a->L[0] >= 1 && a->N[0] >= 1, "L or N below 1");
    FUZZ_ASSERT(a->layer[0] >= 0 && (size_t)a->layer[a->n_layer - 1] < cfg->model.n_layer,
                "layer out of range");
    FUZZ_ASSERT(a->head[0] >= 0 && (size_t)a->head[a->n_head - 1] < cfg->model.n_head,
                "head out of range");
    FUZZ_ASSERT(cfg->ssmax_scale != 0, "ssmax_scale unresolved");
    FUZZ_ASSERT(cfg->canonical && strlen(cfg->sha256) == 64, "no canonical text");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init_once();
    char *text = malloc(size + 1);
    FUZZ_ASSERT(text != NULL, "out of memory");
    memcpy(text, data, size);
    text[size] = 0;

    /* Split off the overrides. */
    const char *sets[MAX_SETS];
    size_t n_sets = 0, file_len = size;
    char *sep = strstr(text, "\n%%\n");
    if (sep) {
        file_len = (size_t)(sep - text) + 1;
        char *line = sep + 4;
        sep[1] = 0;
        while (*line && n_sets < MAX_SETS) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            sets[n_sets++] = line;
            if (!nl) break;
            line = nl + 1;
        }
    }
    char path[1100];
    fuzz_write("c.cfg", data, file_len, path, sizeof path);

    as_config cfg;
    as_err err;
    err.msg[0] = 0;
    if (config_load(&cfg, path, sets, n_sets, &err) == 0) {
        check_config(&cfg);
        char canon_path[1100];
        fuzz_write("canonical.cfg", cfg.canonical, strlen(cfg.canonical), canon_path,
                   sizeof canon_path);
        as_config again;
        FUZZ_ASSERT(config_load(&again, canon_path, NULL, 0, &err) == 0,
                    "canonical text does not load: %s\n--- canonical:\n%s", err.msg, cfg.canonical);
        FUZZ_ASSERT(!strcmp(again.canonical, cfg.canonical),
                    "canonical text changed on reload:\n%s\n--- vs ---\n%s", cfg.canonical,
                    again.canonical);
        FUZZ_ASSERT(!strcmp(again.sha256, cfg.sha256), "sha256 changed on reload");
        config_free(&again);
        config_free(&cfg);
    } else {
        /* Not asserted one line: messages quote input values (paths, names) verbatim. */
        FUZZ_ASSERT(err.msg[0], "failure without a message");
    }
    free(text);
    return 0;
}
