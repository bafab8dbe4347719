#!/usr/bin/python3
"""dist_random's accuracy and cost against metrics.random_subsets (K), the table behind the
default in docs/critical-n.md section 5.1 (not run by ctest).

For windows of a results file (their window_start), the model's scores and values are dumped
once; attnsweep.metrics then computes the cell at L, T = 8 on raw logits, every N of the grid
below L, in both readings, with dist_random off and at each K. The reference is K = KREF.
Per K it prints, over the (window, N, layer, head) means that are Monte-Carlo estimates: the
median and 95th percentile of |dist_random - reference| / reference, the share within 2 of
their own standard errors, the median se / dist_random, and the process CPU time relative to
the run without dist_random (CPU time of this process, measured in the same run: a ratio,
not a wall time); and with the KS test against dist_random (ks_against = "random", the
window's heads as the sample), the share of (window, N) verdicts p > 0.01 and of crit_N that
equal the reference's.

usage: random_subsets.py ATTNSWEEP LIBRARY MODEL_DIR TEXT RESULTS.h5 [L] [K ...]
"""
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(REPO, "python"))
START_AT = "\u201cWell, Prince, so Genoa and Lucca"
KREF = 4096
GRID = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 24, 28, 32, 40, 48, 56, 64,
        80, 96, 112, 128]


def dump(binary, model, text, start, L, out):
    subprocess.run([binary, "dump", "--model", model, "--text", text, "--strip-gutenberg",
                    "--start-at", START_AT, "--window-start", str(start), "--length", str(L),
                    "--out", out], check=True, capture_output=True)
    with h5py.File(out, "r") as g:
        layers = sorted(k for k in g if k.startswith("layer_"))
        return np.stack([g[k]["scores"][()] for k in layers]), np.stack([g[k]["v"][()] for k in layers])


def main():
    binary, lib, model, text, results = sys.argv[1:6]
    L = int(sys.argv[6]) if len(sys.argv) > 6 else 64
    Ks = [int(k) for k in sys.argv[7:]] or [4, 8, 16, 32, 64, 128]
    os.environ["ATTNSWEEP_LIB"] = lib
    import attnsweep
    with h5py.File(results, "r") as f:
        starts = [int(s) for s in f["window_start"][()]]
    N = [n for n in GRID if n < L]
    with tempfile.TemporaryDirectory() as tmp:
        heads = [dump(binary, model, text, s, L, f"{tmp}/w{w}.h5") for w, s in enumerate(starts)]
    print(f"{len(starts)} windows, L = {L}, T = 8 (raw logits), N = {N[0]}..{N[-1]} ({len(N)} values), "
          f"reference K = {KREF}")
    for distance in ("per_token", "aggregate"):
        def cell(w, **kw):
            s, v = heads[w]
            return attnsweep.metrics(s, v, N=N, T=[8.0], eps=[0.1], window=w, distance=distance, **kw)

        def timed(**kw):
            t0 = time.process_time()
            out = [cell(w, **kw) for w in range(len(heads))]
            return out, time.process_time() - t0

        _, t_off = timed()
        ref, t_ref = timed(dist_random=True, random_subsets=KREF, ks_against="random")
        r = np.stack([d.dist_random.values for d in ref])
        pass_ref = np.stack([d.ks_pvalue.values for d in ref]) > 0.01
        crit_ref = np.stack([d.crit_N.values for d in ref])
        print(f"\n{distance}: without dist_random {t_off:.2f} s CPU; K = {KREF}: {t_ref / t_off:.1f}x")
        print("| K | median rel. error | 95th pct | within 2 se | median se / value | KS verdicts as K = %d | crit_N as K = %d | CPU vs off |" % (KREF, KREF))
        print("|---|---|---|---|---|---|---|---|")
        for K in Ks:
            est, t = timed(dist_random=True, random_subsets=K, ks_against="random")
            same_v = np.mean((np.stack([d.ks_pvalue.values for d in est]) > 0.01) == pass_ref)
            same_c = np.mean(np.stack([d.crit_N.values for d in est]) == crit_ref)
            x = np.stack([d.dist_random.values for d in est])
            se = np.stack([d.dist_random_se.values for d in est])
            mc = np.isfinite(x) & (se > 0)
            rel = np.abs(x - r)[mc] / np.abs(r[mc])
            within = np.mean(np.abs(x - r)[mc] <= 2 * se[mc])
            print(f"| {K} | {np.median(rel):.2e} | {np.percentile(rel, 95):.2e} | {within:.2f} | "
                  f"{np.median(se[mc] / x[mc]):.2e} | {same_v:.3f} | {same_c:.2f} | {t / t_off:.1f}x |")
        exact = np.isfinite(r) & (np.stack([d.dist_random_se.values for d in ref]) == 0)
        print(f"(exact at K = {KREF}: {exact.sum()} of {np.isfinite(r).sum()} means)")


if __name__ == "__main__":
    main()
