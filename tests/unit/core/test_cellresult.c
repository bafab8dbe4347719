/* test_cellresult.c -- the flat layout tiles the block exactly, and the index
 * helpers agree with a brute-force enumeration of each variable's shape. */
#include "cellresult.h"
#include "check.h"

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
    return check_summary("test_cellresult");
}
