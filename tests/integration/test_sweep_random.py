#!/usr/bin/python3
"""dist_random and metrics.ks_against end to end (docs/metrics.md section 4.6), on the tiny
synthetic model, in both readings of the distance.

What it protects:
- metrics.dist_random = true adds dist_random, dist_random_se and dist_random_upper and changes
  no other value (bit for bit against the run without it, ks_against = "expect");
- in the file: dist_expect <= dist_random <= dist_random_upper (Jensen, and the second-moment
  bound; 1e-6 relative for the float32 rounding, and 6 standard errors where dist_random is an
  estimate), se >= 0 and exactly 0 where every row is
  enumerated (N = 1: n subsets, n <= random_subsets at L = 16; aggregate N = 1 always);
- ks_against = "random": ks_pvalue is scipy's exact two-sample p-value of dist_true against
  dist_random across heads (where the float32 values have no ties: 1e-9), crit_N the
  smallest N whose p-value exceeds ks_alpha, and the root attributes say which;
- the same values from 2 ranks (the subsets are keyed by the cell's coordinates);
- distance_ratio (analysis/figures.py) draws the median of dist_true / dist_random;
- one-line refusals: ks_against = "random" without dist_random, random_subsets below 2.

usage: test_sweep_random.py ATTNSWEEP MODEL_DIR SCRATCH
"""
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, import_analysis, same_values, summary

BIN, MODEL, SCRATCH = sys.argv[1:4]
VARS = ("dist_random", "dist_random_se", "dist_random_upper")


def config(name, distance, metrics):
    with open(f"{SCRATCH}/{name}.cfg", "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 2; offset = 0; stride = 64; }};
grid = {{ L = [16, 32]; N = [1, 2, 4, 8]; T = [1.0, 8.0]; eps = [0.1];
         normalizer = ["softmax", "sparsemax"]; }};
metrics = {{ distance = "{distance}"; {metrics} }};
output = "{name}.h5";
""")


def run(name, ranks=1):
    cmd = [BIN, "run", f"{name}.cfg"]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + cmd
    return subprocess.run(cmd, env=ENV, cwd=SCRATCH, capture_output=True, text=True)


def load(name):
    with h5py.File(f"{SCRATCH}/{name}.h5", "r") as f:
        return {k: d[()] for k, d in f.items() if isinstance(d, h5py.Dataset)}, dict(f.attrs)


def check_reading(distance):
    off, exp, rnd = f"{distance}_off", f"{distance}_exp", f"{distance}_rnd"
    config(off, distance, "")
    config(exp, distance, "dist_random = true;")
    config(rnd, distance, "dist_random = true; ks_against = \"random\";")
    for name in (off, exp, rnd):
        p = run(name)
        check(p.returncode == 0, f"{name}: exit {p.returncode}: {p.stderr[-400:]}")
    v_off, a_off = load(off)
    v_exp, a_exp = load(exp)
    v_rnd, a_rnd = load(rnd)
    for k, x in v_off.items():
        if k in VARS or k in ("wall_time", "rank", "attempts"):
            continue
        same = x.tobytes() == v_exp[k].tobytes() if x.dtype.kind == "f" else np.array_equal(x, v_exp[k])
        check(same, f"{distance}: dist_random on leaves {k} as it was")
    check(all(np.isnan(v_off[k]).all() for k in VARS), f"{distance}: off: dist_random* NaN")
    check(a_off["random_subsets"] == 0 and a_exp["random_subsets"] == 32,
          f"{distance}: random_subsets attribute {a_off['random_subsets']}, {a_exp['random_subsets']}")
    check(a_exp["ks_against"] == "expect" and a_rnd["ks_against"] == "random",
          f"{distance}: ks_against attributes {a_exp['ks_against']}, {a_rnd['ks_against']}")
    used = v_exp["rows_used"] > 0
    de, dr, se, up = (v_exp[k].astype(np.float64) for k in ("dist_expect",) + VARS)
    check(np.isfinite(dr[used]).all() and np.isnan(dr[~used]).all(),
          f"{distance}: dist_random finite exactly where rows are used")
    # the order holds for E||Z||; an estimate may cross by its own noise (6 standard errors)
    slack = 6 * se[used] + 1e-6 * dr[used] + 1e-30
    check((de[used] <= dr[used] + slack).all(), f"{distance}: dist_expect <= dist_random")
    check((dr[used] <= up[used] + slack).all(), f"{distance}: dist_random <= upper")
    check((de[used] <= up[used] * (1 + 1e-6) + 1e-30).all(), f"{distance}: dist_expect <= upper")
    check((se[used] >= 0).all() and (se[used] > 0).any(), f"{distance}: se >= 0, some MC")
    with h5py.File(f"{SCRATCH}/{exp}.h5", "r") as f:
        iN1, iL16 = list(f["N"][()]).index(1), list(f["L"][()]).index(16)
    # dims: model, window, L, N, T, normalizer, layer, head
    check((se[:, :, iL16, iN1][used[:, :, iL16, iN1]] == 0).all(), f"{distance}: N = 1, L = 16 exact")
    if distance == "aggregate":
        check((se[:, :, :, iN1][used[:, :, :, iN1]] == 0).all(), "aggregate: N = 1 exact at every L")
    # the KS test against dist_random
    for k in VARS:
        check(v_rnd[k].tobytes() == v_exp[k].tobytes(), f"{distance}: {k} independent of ks_against")
    p_rnd, p_exp = v_rnd["ks_pvalue"], v_exp["ks_pvalue"]
    check(not np.array_equal(p_rnd, p_exp, equal_nan=True), f"{distance}: ks_against moves ks_pvalue")
    dt, drr = v_rnd["dist_true"].astype(np.float64), v_rnd["dist_random"].astype(np.float64)
    compared = 0
    for idx in np.ndindex(p_rnd.shape):
        x, y = dt[idx].ravel(), drr[idx].ravel()
        x, y = x[np.isfinite(x)], y[np.isfinite(y)]
        if len(x) == 0 or len(np.unique(np.concatenate([x, y]))) < len(x) + len(y):
            continue
        want = stats.ks_2samp(x, y, method="exact").pvalue
        check(abs(p_rnd[idx] - want) <= 1e-9 * max(want, 1e-300) + 1e-300,
              f"{distance}: ks_pvalue {idx} {p_rnd[idx]} scipy {want}")
        compared += 1
    check(compared > 0, f"{distance}: some KS samples compared with scipy")
    Ns = [1, 2, 4, 8]
    alpha = float(a_rnd["ks_alpha"])
    for idx in np.ndindex(v_rnd["crit_N"].shape):  # model, window, L, T, normalizer
        m, w, l, t, z = idx
        ps = p_rnd[m, w, l, :, t, z]
        passing = [N for N, p in zip(Ns, ps) if p > alpha]
        want = passing[0] if passing else None
        got = v_rnd["crit_N"][idx]
        cens = v_rnd["crit_N_censored"][idx]
        ok = (got == want and cens == 0) if want is not None else cens == 1
        check(ok, f"{distance}: crit_N {idx} = {got} (censored {cens}), from the p-values {want}")
    check_figure(rnd, v_rnd)
    return rnd


def check_figure(name, v):
    """distance_ratio draws dist_true / dist_random's median beside dist_expect's (the file's
    values, docs/critical-n.md section 5.1)."""
    import matplotlib
    matplotlib.use("Agg")
    ar, figures = import_analysis("attnsweep_results", "figures")
    ds = ar.select_model(ar.load(f"{SCRATCH}/{name}.h5"), 0)
    opt = figures.Options(ds, T=8.0, normalizer="softmax")
    os.makedirs(f"{SCRATCH}/fig-{name}", exist_ok=True)
    fig = figures.fig_distance_ratio(ds, opt, f"{SCRATCH}/fig-{name}", "png")
    iT, iZ = 1, 0  # T = 8, softmax
    ratio = v["dist_true"][0, :, :, :, iT, iZ] / v["dist_random"][0, :, :, :, iT, iZ]
    pooled = np.moveaxis(ratio.astype(np.float64), (1, 2), (0, 1)).reshape(ratio.shape[1], ratio.shape[2], -1)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.nanpercentile(pooled, 50, axis=2)
    got = fig["median_random"]
    check(got is not None and np.allclose(got, want, rtol=1e-6, equal_nan=True),
          f"{name}: distance_ratio median_random = the file's median of dist_true / dist_random")


def main():
    if os.path.exists(SCRATCH):
        shutil.rmtree(SCRATCH)
    os.makedirs(SCRATCH)
    rng = np.random.default_rng(5)
    np.save(f"{SCRATCH}/tokens.npy", rng.integers(0, 50257, size=400).astype("<u2"))
    for distance in ("per_token", "aggregate"):
        last = check_reading(distance)
    # two ranks: the same values
    config("r2", "aggregate", "dist_random = true; ks_against = \"random\";")
    p = run("r2", ranks=2)
    check(p.returncode == 0, f"2 ranks: exit {p.returncode}: {p.stderr[-400:]}")
    if p.returncode == 0:
        same_values(f"{SCRATCH}/{last}.h5", f"{SCRATCH}/r2.h5", "1 vs 2 ranks")
    # refusals: one line naming the key
    for name, metrics, key in (("bad1", "ks_against = \"random\";", "metrics.ks_against"),
                               ("bad2", "dist_random = true; random_subsets = 1;", "metrics.random_subsets")):
        config(name, "per_token", metrics)
        p = run(name)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        check(p.returncode != 0 and len(lines) == 1 and key in lines[0],
              f"{name}: refused in one line naming {key}: rc {p.returncode} {lines}")
        check(not os.path.exists(f"{SCRATCH}/{name}.h5"), f"{name}: no output written")
    return summary("test_sweep_random")


if __name__ == "__main__":
    sys.exit(main())
