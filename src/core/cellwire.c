/* cellwire.c -- the type table and the packing of a cell (cellwire.h). */
#include "cellwire.h"

#include <math.h>
#include <string.h>

/* The variables not float32 (the rest are: CW_F32 is 0). */
const cw_type cw_var_type[CW_N_VARS] = {
    [CR_ROWS_USED] = CW_I32, [CR_KS_STAT] = CW_F64, [CR_KS_PVALUE] = CW_F64,
    [CR_CRIT_N] = CW_I32, [CR_CRIT_N_CENSORED] = CW_I32, [CR_ROWS_SAMPLED] = CW_I32,
};

size_t cw_pack_bytes(const cr_layout *lay) {
    size_t at = 0;
    for (int v = 0; v < cw_nvars(lay); v++) at += lay->count[v] * cw_type_size(cw_var_type[v]);
    return at;
}

/* The packed value of an int32 variable's element i. The cell says "no N of the grid
 * passed" with crit_N = -1; stored as a number, a mean over windows would mix it with
 * the critical Ns found, so crit_N is missing there and crit_N_censored says why (NaN:
 * the KS test was not computed, so neither is known). */
static double packed_int(const cr_layout *lay, const double *block, int v, size_t i) {
    if (v == CR_CRIT_N_CENSORED) {
        double c = block[lay->offset[CR_CRIT_N] + i];
        return isnan(c) ? NAN : c == -1 ? 1 : 0;
    }
    double x = block[lay->offset[v] + i];
    return v == CR_CRIT_N && x == -1 ? NAN : x;
}

void cw_pack_cell(const cr_layout *lay, const double *block, unsigned char *out) {
    for (int v = 0; v < cw_nvars(lay); v++) {
        const double *src = block + lay->offset[v];
        unsigned char *dst = out;
        size_t n = lay->count[v];
        switch (cw_var_type[v]) {
        case CW_F32:
            for (size_t i = 0; i < n; i++) {
                float f = (float)src[i];
                memcpy(dst + 4 * i, &f, 4);
            }
            break;
        case CW_I32:
            for (size_t i = 0; i < n; i++) {
                double x = packed_int(lay, block, v, i);
                int32_t k = isnan(x) || x > 2147483647.0 || x < -2147483647.0
                                ? CW_INT_FILL : (int32_t)llround(x);
                memcpy(dst + 4 * i, &k, 4);
            }
            break;
        case CW_F64: memcpy(dst, src, 8 * n); break;
        }
        out += n * cw_type_size(cw_var_type[v]);
    }
}
