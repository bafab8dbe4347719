/* cellresult.c -- see cellresult.h. */
#include "cellresult.h"

static const struct {
    const char *name;
    cr_shape shape;
} vars[CR_NVARS] = {
    [CR_DIST_TRUE] = {"dist_true", CR_SHAPE_PER_N},
    [CR_DIST_BOUND] = {"dist_bound", CR_SHAPE_PER_N},
    [CR_DIST_EXPECT] = {"dist_expect", CR_SHAPE_PER_N},
    [CR_SEP_RATIO] = {"sep_ratio", CR_SHAPE_PER_N},
    [CR_SEP_LOWER] = {"sep_lower", CR_SHAPE_PER_N},
    [CR_SEP_UPPER] = {"sep_upper", CR_SHAPE_PER_N},
    [CR_SEP_MARGINAL] = {"sep_marginal", CR_SHAPE_PER_N},
    [CR_ROWS_USED] = {"rows_used", CR_SHAPE_PER_N},
    [CR_ENTROPY] = {"entropy", CR_SHAPE_PER_T},
    [CR_ENTROPY_NORM] = {"entropy_norm", CR_SHAPE_PER_T},
    [CR_GRAD_EXACT] = {"grad_exact", CR_SHAPE_PER_T},
    [CR_GRAD_BOUND] = {"grad_bound", CR_SHAPE_PER_T},
    [CR_GRAD_FD] = {"grad_fd", CR_SHAPE_PER_T_EPS},
    [CR_KS_STAT] = {"ks_stat", CR_SHAPE_KS},
    [CR_KS_PVALUE] = {"ks_pvalue", CR_SHAPE_KS},
    [CR_CRIT_N] = {"crit_N", CR_SHAPE_CRIT},
    [CR_CRIT_N_CENSORED] = {"crit_N_censored", CR_SHAPE_CRIT},
    [CR_DIST_RANDOM] = {"dist_random", CR_SHAPE_PER_N},
    [CR_DIST_RANDOM_SE] = {"dist_random_se", CR_SHAPE_PER_N},
    [CR_DIST_RANDOM_UPPER] = {"dist_random_upper", CR_SHAPE_PER_N},
    [CR_DIST_TRUE_SE] = {"dist_true_se", CR_SHAPE_PER_N},
    [CR_DIST_BOUND_SE] = {"dist_bound_se", CR_SHAPE_PER_N},
    [CR_DIST_EXPECT_SE] = {"dist_expect_se", CR_SHAPE_PER_N},
    [CR_SEP_RATIO_SE] = {"sep_ratio_se", CR_SHAPE_PER_N},
    [CR_SEP_LOWER_SE] = {"sep_lower_se", CR_SHAPE_PER_N},
    [CR_SEP_UPPER_SE] = {"sep_upper_se", CR_SHAPE_PER_N},
    [CR_SEP_MARGINAL_SE] = {"sep_marginal_se", CR_SHAPE_PER_N},
    [CR_ENTROPY_SE] = {"entropy_se", CR_SHAPE_PER_T},
    [CR_ENTROPY_NORM_SE] = {"entropy_norm_se", CR_SHAPE_PER_T},
    [CR_GRAD_EXACT_SE] = {"grad_exact_se", CR_SHAPE_PER_T},
    [CR_GRAD_FD_SE] = {"grad_fd_se", CR_SHAPE_PER_T_EPS},
    [CR_DIST_RANDOM_ROWS_SE] = {"dist_random_rows_se", CR_SHAPE_PER_N},
    [CR_DIST_RANDOM_UPPER_SE] = {"dist_random_upper_se", CR_SHAPE_PER_N},
    [CR_ROWS_SAMPLED] = {"rows_sampled", CR_SHAPE_SCALAR},
    [CR_WALL_TIME] = {"wall_time", CR_SHAPE_SCALAR},
    [CR_RANK] = {"rank", CR_SHAPE_SCALAR},
};

const char *cr_var_name(cr_var v) { return vars[v].name; }
cr_shape cr_var_shape(cr_var v) { return vars[v].shape; }

cr_var cr_var_se(cr_var mean) {
    if (mean >= CR_DIST_TRUE && mean <= CR_SEP_MARGINAL) return (cr_var)(CR_DIST_TRUE_SE + (mean - CR_DIST_TRUE));
    if (mean >= CR_ENTROPY && mean <= CR_GRAD_EXACT) return (cr_var)(CR_ENTROPY_SE + (mean - CR_ENTROPY));
    switch (mean) {
    case CR_GRAD_FD: return CR_GRAD_FD_SE;
    case CR_DIST_RANDOM: return CR_DIST_RANDOM_ROWS_SE; /* dist_random_se: the Monte-Carlo SE */
    case CR_DIST_RANDOM_UPPER: return CR_DIST_RANDOM_UPPER_SE;
    default: return CR_NVARS; /* rows_used, grad_bound, dist_random_se, the KS family */
    }
}

void cr_layout_init(cr_layout *lay, size_t n_N, size_t n_T, size_t n_eps, size_t n_norm,
                    size_t n_layer, size_t n_head) {
    lay->n_N = n_N, lay->n_T = n_T, lay->n_eps = n_eps, lay->n_norm = n_norm;
    lay->n_layer = n_layer, lay->n_head = n_head;
    cr_layout_sample(lay, 0);
}

void cr_layout_sample(cr_layout *lay, int sampled) {
    size_t n_N = lay->n_N, n_T = lay->n_T, n_eps = lay->n_eps, n_norm = lay->n_norm;
    size_t heads = n_norm * lay->n_layer * lay->n_head;
    size_t at = 0;
    lay->sampled = sampled != 0;
    for (int v = 0; v < CR_NVARS; v++) {
        size_t c = 1;
        switch (vars[v].shape) {
        case CR_SHAPE_PER_N: c = n_N * n_T * heads; break;
        case CR_SHAPE_PER_T: c = n_T * heads; break;
        case CR_SHAPE_PER_T_EPS: c = n_T * n_eps * heads; break;
        case CR_SHAPE_KS: c = n_N * n_T * n_norm; break;
        case CR_SHAPE_CRIT: c = n_T * n_norm; break;
        case CR_SHAPE_SCALAR: c = 1; break;
        }
        if (!cr_var_in(lay, v)) c = 0;
        lay->offset[v] = at;
        lay->count[v] = c;
        at += c;
    }
    lay->total = at;
}
