/* grid.c -- see grid.h (the costs of a grid: plan.c). */
#include "grid.h"

#include <stdlib.h>
#include <string.h>


/* qsort has no context argument: the L axis of the grid being sorted. */
static const as_grid *sorting_grid;

static int by_dispatch_order(const void *pa, const void *pb) {
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb, wa, la, wb, lb;
    grid_cell_of(sorting_grid, a, &wa, &la);
    grid_cell_of(sorting_grid, b, &wb, &lb);
    if (la != lb) return la > lb ? -1 : 1; /* L is sorted ascending: larger index = larger L */
    return (wa > wb) - (wa < wb);
}

int grid_init(as_grid *g, const as_config *cfg, as_err *err) {
    memset(g, 0, sizeof *g);
    g->cfg = cfg;
    g->n_windows = (size_t)cfg->windows_count;
    g->n_L = cfg->axes.n_L;
    g->n_cells = g->n_windows * g->n_L;
    g->n_models = cfg->n_model ? cfg->n_model : 1;
    g->model = cfg->models ? &cfg->models[0].cfg : &cfg->model;
    g->cost = (as_cost_model){AS_COST_SGEMM_GFLOPS, AS_COST_THREAD_SCALE, AS_COST_METRIC_NS,
                              AS_COST_ROW_OPS};
    g->window_start = malloc(g->n_windows * sizeof *g->window_start);
    g->dispatch = malloc(g->n_cells * sizeof *g->dispatch);
    if (!g->window_start || !g->dispatch) {
        size_t cells = g->n_cells; /* grid_free clears g */
        grid_free(g);
        return as_fail(err, "windows.count: %lld windows x %zu L values = %zu cells do not fit in "
                       "memory", (long long)cfg->windows_count, cfg->axes.n_L, cells);
    }
    for (size_t w = 0; w < g->n_windows; w++)
        g->window_start[w] = config_window_start(cfg, (int64_t)w);
    for (size_t c = 0; c < g->n_cells; c++) g->dispatch[c] = c;
    sorting_grid = g;
    qsort(g->dispatch, g->n_cells, sizeof *g->dispatch, by_dispatch_order);
    sorting_grid = NULL;
    return 0;
}

void grid_free(as_grid *g) {
    if (!g) return;
    free(g->window_start);
    free(g->dispatch);
    memset(g, 0, sizeof *g);
}

long grid_cell_find(const as_grid *g, size_t window, int32_t L) {
    if (window >= g->n_windows) return -1;
    const int32_t *ax = g->cfg->axes.L;
    size_t lo = 0, hi = g->n_L;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ax[mid] < L) lo = mid + 1;
        else hi = mid;
    }
    if (lo == g->n_L || ax[lo] != L) return -1;
    return (long)grid_cell_index(g, window, lo);
}

void grid_set_model(as_grid *g, size_t m) {
    g->model = g->cfg->models && m < g->cfg->n_model ? &g->cfg->models[m].cfg : &g->cfg->model;
}

void grid_block_layout(cr_layout *lay, const as_config *cfg) {
    const as_axes *a = &cfg->axes;
    cr_layout_init(lay, a->n_N, a->n_T, a->n_eps, a->n_norm, a->n_layer, a->n_head);
    cr_layout_sample(lay, cfg->query_rows != 0);
}
