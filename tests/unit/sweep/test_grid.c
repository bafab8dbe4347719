/* test_grid.c -- cell enumeration (bijection), dispatch order, cell lookup,
 * window starts, the cost model's FLOPs and the block/output sizes, each
 * against an independent formula or a brute-force enumeration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cellresult.h"
#include "check.h"
#include "config_fixture.h"
#include "grid.h"
#include "plan.h"

static char dir[256];

static int load(as_config *c, const char *model_json, const char *extra) {
    return fx_load_config(c, dir, model_json, extra);
}

static void test_cells(void) {
    as_config c;
    if (load(&c, fx_tiny_model_json,
             "windows = { count = 5; offset = 7; stride = 33; };\n"
             "grid = { L = [128, 16, 64, 32]; N = [1, 2]; T = [1.0]; };\n"))
        return;
    as_grid g;
    as_err err;
    CHECK(grid_init(&g, &c, &err) == 0, "grid_init: %s", err.msg);
    CHECK(g.n_cells == 20 && g.n_L == 4 && g.n_windows == 5, "sizes");

    /* bijection: every (w, l) gets a distinct index in range, and back */
    int *seen = calloc(g.n_cells, sizeof *seen);
    for (size_t w = 0; w < g.n_windows; w++)
        for (size_t l = 0; l < g.n_L; l++) {
            size_t cell = grid_cell_index(&g, w, l), w2, l2;
            CHECK(cell < g.n_cells, "index in range");
            if (cell < g.n_cells) seen[cell]++;
            grid_cell_of(&g, cell, &w2, &l2);
            CHECK(w2 == w && l2 == l, "cell_of inverts cell_index (%zu, %zu)", w, l);
            CHECK(grid_cell_find(&g, w, c.axes.L[l]) == (long)cell, "find (w, L value)");
        }
    for (size_t k = 0; k < g.n_cells; k++) CHECK(seen[k] == 1, "cell %zu hit %d times", k, seen[k]);
    CHECK(grid_cell_find(&g, 0, 48) == -1 && grid_cell_find(&g, 5, 16) == -1, "find misses");

    /* dispatch order: a permutation; brute force: the expected sequence is,
     * for each L from the largest down, every window ascending */
    memset(seen, 0, g.n_cells * sizeof *seen);
    static const int32_t L_desc[] = {128, 64, 32, 16};
    size_t k = 0;
    for (size_t li = 0; li < 4; li++)
        for (size_t w = 0; w < 5; w++, k++) {
            size_t ww, ll;
            grid_cell_of(&g, g.dispatch[k], &ww, &ll);
            CHECK(ww == w && c.axes.L[ll] == L_desc[li], "dispatch[%zu] = (w %zu, L %d)", k, ww,
                  (int)c.axes.L[ll]);
            seen[g.dispatch[k]]++;
        }
    for (size_t j = 0; j < g.n_cells; j++) CHECK(seen[j] == 1, "dispatch is a permutation");
    free(seen);

    for (size_t w = 0; w < 5; w++) CHECK(g.window_start[w] == 7 + 33 * (int64_t)w, "window_start");

    /* cost grows with L; cells of equal L cost the same */
    for (size_t j = 1; j < g.n_cells; j++)
        CHECK(grid_cell_cost(&g, g.dispatch[j]) <= grid_cell_cost(&g, g.dispatch[j - 1]),
              "dispatch is by non-increasing cost");
    CHECK(grid_cell_cost(&g, grid_cell_index(&g, 0, 3)) > grid_cell_cost(&g, grid_cell_index(&g, 0, 0)),
          "longer L costs more");

    /* block size: cellresult.h's shapes, counted by hand (11 per-N variables: with sep_marginal
     * and dist_random's three; crit_N and crit_N_censored) */
    size_t H = c.axes.n_norm * c.axes.n_layer * c.axes.n_head, n_N = 2, n_T = 1, nE = 3, nZ = 1;
    size_t want = 11 * n_N * n_T * H + 4 * n_T * H + n_T * nE * H + 2 * n_N * n_T * nZ + 2 * n_T * nZ + 2;
    CHECK(grid_block_doubles(&c) == want, "block doubles %zu want %zu", grid_block_doubles(&c), want);
    double want_out = (double)g.n_cells * (4.0 * (11 * n_N * n_T * H + 4 * n_T * H + n_T * nE * H + 2 * n_T * nZ) +
                                           8.0 * 2 * n_N * n_T * nZ + 17.0);
    double out = grid_output_bytes(&g);
    CHECK(out >= want_out && out < want_out + 4096, "output bytes %.0f vs cells-only %.0f", out, want_out);

    as_rank_memory m;
    grid_rank_memory(&m, &g);
    CHECK(m.weights == model_param_count(&c.model) * 4, "weights bytes");
    CHECK(m.cell_block == want * 8, "cell block bytes");
    CHECK(m.unit_block == c.axes.n_L * m.cell_block, "a unit holds the window's nL cells");
    CHECK(m.worker == AS_MEM_PROCESS_BYTES + m.activations + m.metrics + 2 * m.unit_block,
          "worker: activations, metrics, two unit buffers, the process");
    CHECK(m.total == m.weights + m.worker, "memory total");
    /* per node, 5 windows: the weights once; with 2 workers each gets a second window
     * and touches both unit buffers; with 8, five compute one window and three idle */
    CHECK(m.master >= AS_MEM_PROCESS_BYTES + 2 * m.unit_block &&
              m.master <= AS_MEM_PROCESS_BYTES + 5 * m.unit_block,
          "master: 2..5 receive buffers");
    CHECK(grid_node_memory(&g, 1) == m.weights + m.worker, "1 rank computes alone");
    CHECK(grid_node_memory(&g, 3) == m.weights + m.master + 2 * m.worker, "3 ranks");
    CHECK(grid_node_memory(&g, 9) == m.weights + m.master + 5 * (m.worker - m.unit_block) +
                                         3 * AS_MEM_PROCESS_BYTES,
          "9 ranks: five windows, three idle workers");
    grid_free(&g);
    config_free(&c);
}

/* GPT-2 small shapes: the forward FLOPs the platform notes quote (193 GFLOP at L = 1024). */
static void test_flops(void) {
    as_config c;
    if (load(&c, "{\"n_layer\": 12, \"n_head\": 12, \"n_embd\": 768, \"n_positions\": 1024, "
                 "\"vocab_size\": 50257}",
             "grid = { L = [1024]; N = [1]; T = [8.0]; };\n"))
        return;
    double C = 768, L = 1024;
    double want = 2.0 * 12 * (12 * C * C + 13 * C) * L + 2.0 * 12 * L * L * C;
    CHECK_CLOSE(grid_forward_flops(&c, 1024), want, 0, 1e-12, "forward flops");
    CHECK_CLOSE(grid_forward_flops(&c, 1024), 193e9, 0, 0.01, "docs/scaling.md: 193 GFLOP");
    as_grid g;
    as_err err;
    if (!grid_init(&g, &c, &err)) {
        CHECK_CLOSE(grid_forward_seconds(&g, 1024), want / (AS_COST_SGEMM_GFLOPS * 1e9), 0, 1e-12,
                    "at the default forward rate");
        grid_free(&g);
    }
    config_free(&c);
    /* layers [0, 2]: the forward pass stops after block 2 (3 of 12 blocks) */
    if (load(&c, "{\"n_layer\": 12, \"n_head\": 12, \"n_embd\": 768, \"n_positions\": 1024, "
                 "\"vocab_size\": 50257}",
             "grid = { L = [1024]; N = [1]; T = [8.0]; layers = [0, 2]; };\n"))
        return;
    CHECK_CLOSE(grid_forward_flops(&c, 1024), want * 3 / 12, 0, 1e-12, "forward to layer 2");
    config_free(&c);
}

/* The metrics switches in the cost model (plan.h), against a row-by-row sum of its definition:
 * a row of n keys costs n * (d + n_T (n_eps + row_ops) + per walked T (#{grid N < n} +
 * walk_step min(N_max, n - 1)) - the WALK_OPS a T not walked skips - the grad_exact and
 * dist_expect steps switched off), one normalizer (softmax). */
static void test_switch_cost(void) {
    const char *gpt2 = "{\"n_layer\": 12, \"n_head\": 12, \"n_embd\": 768, \"n_positions\": 1024, "
                       "\"vocab_size\": 50257}";
    const char *grid = "grid = { L = [1024]; N = [1, 2, 4]; T = [0.1, 1.0, 8.0]; eps = [0.1]; };\n";
    const char *sw[] = {"", "metrics = { per_N_T = [8.0]; };\n", "metrics = { grad_exact = false; };\n",
                        "metrics = { dist_expect = false; };\n",
                        "metrics = { per_N_T = [1.0, 8.0]; dist_expect = false; grad_exact = false; };\n"};
    const int n_walked[] = {3, 1, 3, 3, 2}, ge_on[] = {1, 1, 0, 1, 0}, de_on[] = {1, 1, 1, 0, 0};
    const int N[] = {1, 2, 4};
    for (int k = 0; k < 5; k++) {
        char extra[512];
        snprintf(extra, sizeof extra, "%s%s", grid, sw[k]);
        as_config c;
        if (load(&c, gpt2, extra)) continue;
        as_grid g;
        as_err err;
        if (!grid_init(&g, &c, &err)) {
            double steps = 0;
            for (int n = 1; n <= 1024; n++) {
                int below = 0;
                for (int i = 0; i < 3; i++) below += N[i] < n;
                double walk = n - 1 < 4 ? n - 1 : 4;
                double per_key = 64 + 3 * (1 + AS_COST_ROW_OPS) - (3 - n_walked[k]) * AS_COST_WALK_OPS +
                                 n_walked[k] * (below + AS_COST_WALK_STEP * walk) -
                                 (de_on[k] ? 0 : n_walked[k] * AS_COST_DIST_EXPECT_OPS) -
                                 (ge_on[k] ? 0 : 3 * AS_COST_GRAD_EXACT_OPS);
                steps += (double)n * per_key;
            }
            double want = AS_COST_METRIC_NS * 1e-9 * 144 * steps;
            char what[64];
            snprintf(what, sizeof what, "metric seconds, switches case %d", k);
            CHECK_CLOSE(grid_metric_seconds(&g, 1024), want, 0, 1e-12, what);
            grid_free(&g);
        }
        config_free(&c);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_grid.%d", (int)getpid());
    mkdir(dir, 0777);
    test_cells();
    test_flops();
    test_switch_cost();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("test_grid");
}
