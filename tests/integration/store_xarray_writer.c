/* store_xarray_writer.c -- writes a small results file for
 * tests/integration/test_store_xarray.py: 3 windows x 2 L values (16, 32), every cell done
 * except (window 1, L 16) failed and (window 2, L 32) pending.
 * usage: store_xarray_writer OUT.h5 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "store_fixture.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: store_xarray_writer OUT.h5\n");
        return 2;
    }
    as_err err = {{0}};
    store_axes ax = fx_axes(3, 2);
    store_provenance prov = fx_prov("model = \"gpt2\";\n", "feedface");
    store *s = store_open(argv[1], &ax, &prov, STORE_NEW, 0, &err);
    if (!s) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    cr_layout lay;
    cr_layout_init(&lay, 3, 2, 2, 2, 2, 3);
    double *block = malloc(lay.total * sizeof *block);
    for (size_t w = 0; w < 3; w++)
        for (size_t l = 0; l < 2; l++) {
            if (w == 2 && l == 1) continue;
            store_cell c = {w, l, STORE_DONE, 1, 100.0, 101.5, 1.5, .model = 0};
            const double *b = block;
            if (w == 1 && l == 0) {
                /* as the scheduler hands over a failed cell: a block of NaN */
                c.status = STORE_FAILED;
                for (size_t i = 0; i < lay.total; i++) block[i] = NAN;
            } else {
                fx_fill_block(block, &lay, (int)w, fx_L[l]);
            }
            if (store_commit_batch(s, &c, &b, 1, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
        }
    free(block);
    if (store_close(s, "finished", &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    return 0;
}
