#!/usr/bin/python3
"""Writes one window's cells of a paper-grid results file as the workers pack them, for
`bench_master --cells FILE` (tests/bench/bench_master.c): for each L of the window, every
metric variable's cell block in cr_var order (include/core/cellresult.h), in its file type,
back to back -- cw_pack_cell's layout (include/core/cellwire.h).

usage: paper_cells.py RESULTS.h5 OUT.cells [WINDOW]

RESULTS.h5 must have the bench's layout (28 N, 22 T, 3 eps, 1 normalizer, 12 layers,
12 heads, 6 L): e.g. the output of tests/bench/bench_paper.sh.
"""
import sys

import h5py
import numpy as np

VARS = ["dist_true", "dist_bound", "dist_expect", "sep_ratio", "sep_lower", "sep_upper",
        "sep_marginal", "rows_used", "entropy", "entropy_norm", "grad_exact", "grad_bound",
        "grad_fd", "ks_stat", "ks_pvalue", "crit_N"]


def main():
    src, dst = sys.argv[1], sys.argv[2]
    w = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    with h5py.File(src, "r") as f, open(dst, "wb") as out:
        shape = f["dist_true"].shape
        if shape[2:] != (6, 28, 22, 1, 12, 12):
            sys.exit(f"paper_cells: {src}: dist_true is {shape}, want (model, window, 6, 28, 22, 1, 12, 12)")
        if not (f["status"][0, w] == 1).all():
            sys.exit(f"paper_cells: {src}: window {w} is not done")
        for l in range(6):
            for v in VARS:
                out.write(np.ascontiguousarray(f[v][0, w, l]).tobytes())


if __name__ == "__main__":
    main()
