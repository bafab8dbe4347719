/* test_cellresult.c -- the flat layout tiles the block exactly, and the index
 * helpers agree with a brute-force enumeration of each variable's shape. A sampled layout
 * (metrics.query_rows, docs/metrics.md 9.1) only appends its variables: every other one
 * keeps its offset, so an unsampled block is the one before sampling existed; each SE has
 * its mean's shape, and the names stay unique (dist_random_se is the Monte-Carlo SE, so
 * dist_random's row-sampling SE is dist_random_rows_se). */
#include <stdio.h>
#include <string.h>

#include "cellresult.h"
#include "check.h"

static void sampled_layout(void) {
    cr_layout u, s;
    cr_layout_init(&u, 3, 4, 2, 2, 5, 6);
    cr_layout_init(&s, 3, 4, 2, 2, 5, 6);
    cr_layout_sample(&s, 1);
    for (int v = 0; v < CR_FIRST_SAMPLED; v++)
        CHECK(u.offset[v] == s.offset[v] && u.count[v] == s.count[v], "%s moved", cr_var_name(v));
    size_t added = 0;
    for (int v = CR_FIRST_SAMPLED; v < CR_WALL_TIME; v++) {
        CHECK(u.count[v] == 0 && !cr_var_in(&u, v) && cr_var_in(&s, v), "%s in the unsampled layout",
              cr_var_name(v));
        added += s.count[v];
    }
    CHECK(u.offset[CR_WALL_TIME] == u.offset[CR_FIRST_SAMPLED] && s.total == u.total + added,
          "the sampled variables are appended before the scalars");
    int means = 0;
    for (int v = 0; v < CR_FIRST_SAMPLED; v++) {
        cr_var se = cr_var_se((cr_var)v);
        if (se == CR_NVARS) continue;
        means++;
        char want[64];
        snprintf(want, sizeof want, v == CR_DIST_RANDOM ? "%s_rows_se" : "%s_se", cr_var_name(v));
        CHECK(se >= CR_FIRST_SAMPLED && se < CR_WALL_TIME && s.count[se] == s.count[v] &&
              cr_var_shape(se) == cr_var_shape(v) && !strcmp(cr_var_name(se), want),
              "SE of %s: %s", cr_var_name(v), cr_var_name(se));
    }
    CHECK(means == CR_ROWS_SAMPLED - CR_FIRST_SAMPLED, "%d means with an SE", means);
    CHECK(cr_var_se(CR_DIST_RANDOM_SE) == CR_NVARS && cr_var_se(CR_ROWS_USED) == CR_NVARS &&
          cr_var_se(CR_GRAD_BOUND) == CR_NVARS, "no SE of the Monte-Carlo SE, a count or a curve");
    for (int a = 0; a < CR_NVARS; a++)
        for (int b = a + 1; b < CR_NVARS; b++)
            CHECK(strcmp(cr_var_name(a), cr_var_name(b)), "%s twice", cr_var_name(a));
}

int main(void) {
    cr_layout y;
    cr_layout_init(&y, 3, 4, 2, 2, 5, 6);
    size_t at = 0;
    for (int v = 0; v < CR_NVARS; v++) {
        CHECK(y.offset[v] == at, "var %s starts at %zu, expected %zu", cr_var_name(v), y.offset[v], at);
        at += y.count[v];
    }
    CHECK(at == y.total, "total %zu vs %zu", y.total, at);
    size_t k = y.offset[CR_SEP_UPPER];
    int ok = 1;
    for (size_t n = 0; n < 3; n++) for (size_t t = 0; t < 4; t++) for (size_t z = 0; z < 2; z++)
        for (size_t l = 0; l < 5; l++) for (size_t h = 0; h < 6; h++)
            ok &= cr_at_per_n(&y, CR_SEP_UPPER, n, t, z, l, h) == k++;
    CHECK(ok && k == y.offset[CR_SEP_UPPER] + y.count[CR_SEP_UPPER], "per-N walk");
    k = y.offset[CR_GRAD_FD], ok = 1;
    for (size_t t = 0; t < 4; t++) for (size_t e = 0; e < 2; e++) for (size_t z = 0; z < 2; z++)
        for (size_t l = 0; l < 5; l++) for (size_t h = 0; h < 6; h++)
            ok &= cr_at_grad_fd(&y, t, e, z, l, h) == k++;
    CHECK(ok && k == y.offset[CR_GRAD_FD] + y.count[CR_GRAD_FD], "grad_fd walk");
    CHECK(cr_at_crit(&y, 3, 1) == y.offset[CR_CRIT_N] + 7, "crit index");
    CHECK(y.count[CR_WALL_TIME] == 1 && y.offset[CR_RANK] == y.total - 1, "scalars last");
    sampled_layout();
    return check_summary("test_cellresult");
}
