#!/usr/bin/python3
"""Tests of analysis/ (issue 6): attnsweep_results.load() masks unfinished
cells, and every figure of analysis/figures.py draws exactly the values of the
results file, recomputed here straight from h5py with numpy (not through the
module). The results file comes from a real `attnsweep run` on the tiny model;
a copy with some cells marked pending / failed (h5py edit of `status`, metric
values left in place) checks the masking.

usage: test_analysis.py ATTNSWEEP MODEL_DIR SCRATCH
"""
import csv
import warnings
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, has_model_dim, summary

BIN, MODEL, SCRATCH = sys.argv[1:4]
ANALYSIS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis")
sys.path.insert(0, ANALYSIS)
import attnsweep_results as ar  # noqa: E402
import figures  # noqa: E402

# xarray reduces float32 data in float32; the reference reduces in float64
RTOL, ATOL = 1e-5, 1e-7


def close(got, want, what):
    got, want = np.asarray(got, float), np.asarray(want, float)
    ok = got.shape == want.shape and np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
    if not ok:
        print(f"  got  {got}\n  want {want}")
    check(ok, what)


def write_config(path, output):
    with open(path, "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 3; offset = 0; stride = 64; }};
grid = {{ L = [16, 32, 64]; N = [1, 2, 4, 6, 8, 16]; T = [0.01, 0.03, 0.09, 1.0, 8.0, 100.0];
         eps = [1e-3, 0.1]; normalizer = ["softmax", "sparsemax"]; }};
output = "{output}";
""")


def make_results():
    os.makedirs(SCRATCH, exist_ok=True)
    for name in os.listdir(SCRATCH):
        path = os.path.join(SCRATCH, name)
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    rng = np.random.default_rng(11)
    np.save(os.path.join(SCRATCH, "tokens.npy"), rng.integers(0, 50257, size=600).astype("<u2"))
    write_config(os.path.join(SCRATCH, "sweep.cfg"), "results.h5")
    run = subprocess.run([BIN, "run", "sweep.cfg"], cwd=SCRATCH, env=ENV, capture_output=True,
                         text=True, timeout=240)
    if run.returncode != 0:
        print(run.stdout, run.stderr)
        sys.exit(f"attnsweep run failed with exit {run.returncode}")
    full = os.path.join(SCRATCH, "results.h5")
    # partial copy: window 1 at the longest L pending, window 2 at the shortest L failed,
    # window 0 at the middle L pending; their metric values stay in the file, so only
    # load()'s masking can hide them
    partial = os.path.join(SCRATCH, "partial.h5")
    shutil.copy(full, partial)
    with h5py.File(partial, "r+") as f:
        status = f["status"][()]  # (model, window, L): one model
        status[0, 1, 2] = 0
        status[0, 2, 0] = 2
        status[0, 0, 1] = 0
        f["status"][...] = status
    return full, partial


# -- independent reference: plain h5py + numpy -----------------------------------------------

class Ref:
    """The file's arrays, with the axis positions the figures use."""

    def __init__(self, path):
        with h5py.File(path, "r") as f:
            # one model: isel(model=0), so every variable is (window, L, ...) as the figures see it
            self.v = {k: f[k][0] if has_model_dim(f[k]) else f[k][()] for k in f
                      if isinstance(f[k], h5py.Dataset)}
            # the axis order of every variable, from its dimension scales
            self.dims = {k: [f[k].dims[i][0].name.lstrip("/") for i in range(f[k].ndim)]
                         [1 if has_model_dim(f[k]) else 0:]
                         for k in f if isinstance(f[k], h5py.Dataset) and f[k].ndim > 0
                         and len(f[k].dims[0])}
        self.norms = [n.decode() if isinstance(n, bytes) else n for n in self.v["normalizer"]]
        self.done = self.v["status"] == 1
        self.iT = int(np.argmin(np.abs(np.log(self.v["T"]) - np.log(8.0))))
        self.iL = int(np.argmax(self.v["L"]))
        self.isoft = self.norms.index("softmax")

    def metric(self, name):
        """float64 copy with the fill value as NaN and unfinished cells as NaN."""
        a = self.v[name].astype(float)
        if name in ("crit_N", "rows_used"):
            a[self.v[name] == np.iinfo(np.int32).min + 1] = np.nan
        assert self.dims[name][:2] == ["window", "L"], self.dims[name]
        a[~self.done] = np.nan
        return a


def nanmean(a, axis):
    with np.errstate(invalid="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(a, axis=axis)


def nanstd(a, axis):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanstd(a, axis=axis)


# -- checks ----------------------------------------------------------------------------------

def test_load_masks(partial):
    ref = Ref(partial)
    ds = ar.load(partial)
    raw_status = ref.v["status"]
    check(int((raw_status != 1).sum()) == 3, "partial copy has 3 unfinished cells")
    for name in ("dist_true", "dist_bound", "dist_expect", "sep_ratio", "sep_lower",
                 "sep_upper", "sep_marginal", "rows_used", "entropy", "entropy_norm", "grad_fd", "grad_exact",
                 "grad_bound", "ks_stat", "ks_pvalue", "crit_N"):
        got = ds[name].transpose(*ref.dims[name]).values.astype(float)
        raw = ref.v[name].astype(float)
        masked = got[~ref.done]
        check(np.isnan(masked).all(), f"load(): {name} is NaN in every unfinished cell")
        # the raw file still holds numbers there, so the NaN comes from the mask
        check(np.isfinite(raw[~ref.done]).any(), f"{name}: partial copy has values to mask")
        close(got[ref.done], ref.metric(name)[ref.done], f"load(): {name} unchanged where done")
    raw_minus_one = int(((ref.v["crit_N"] == -1) & ref.done[:, :, None, None]).sum())
    check(int((ds["crit_N"].values == -1).sum()) == raw_minus_one,
          f"crit_N keeps its {raw_minus_one} entries of -1 (no N qualifies) as values")
    done, bad, total = ar.cells_done(ds)
    check((done, bad, total) == (6, 1, 9), f"cells_done {(done, bad, total)} == (6, 1, 9)")
    check(ar.native_T(ds) == 8.0, "native_T picks 8")
    check(ar.nearest(ds, "T", 7.0) == 8.0 and ar.nearest(ds, "T", 0.02) == 0.03,
          "nearest T in log space")
    check(ar.nearest(ds, "N", 5) in (4, 6), "nearest N to 5 is a neighbour")


def test_figures(path, out_dir, label):
    ref = Ref(path)
    ds = ar.load(path)
    drawn = figures.draw_all(ds, out_dir, "png")
    v, iT, iL, isoft = ref.v, ref.iT, ref.iL, ref.isoft
    L, N, T = v["L"], v["N"], v["T"]
    iN = int(np.argmin(np.abs(N - 5)))
    check(drawn["options"].N == N[iN], f"{label}: N closest to 5 chosen ({N[iN]})")

    # distance vs L: per window mean over (layer, head), then over finished windows
    fig = drawn["distance_vs_L"]
    close(fig["L"], L, f"{label}: distance_vs_L x = L axis")
    for key in ("true", "expect", "bound"):
        per_window = nanmean(ref.metric("dist_" + key)[:, :, iN, iT, isoft], (2, 3))  # [w, L]
        close(fig[key], nanmean(per_window, 0), f"{label}: distance_vs_L {key} = file mean")
        std = nanstd(per_window, 0)
        close(fig[key + "_lo"], nanmean(per_window, 0) - std, f"{label}: {key} band low")
        close(fig[key + "_hi"], nanmean(per_window, 0) + std, f"{label}: {key} band high")
    check(np.all(fig["bound"] >= fig["true"]), f"{label}: plotted bound >= true")

    fig = drawn["distance_vs_N"]
    for key in ("true", "expect", "bound"):
        want = nanmean(nanmean(ref.metric("dist_" + key)[:, iL, :, iT, isoft], (2, 3)), 0)
        close(fig[key], want, f"{label}: distance_vs_N {key} = file mean at longest L")
    # N = 16 at L = 16 has no usable row: NaN, never a number
    check(np.isnan(drawn["distance_vs_N"]["true"]).sum() == 0,
          f"{label}: longest L has rows for every N")

    fig = drawn["critical_N"]
    close(fig["crit_N"], ref.metric("crit_N")[:, :, iT, isoft], f"{label}: crit_N points = file")
    close(fig["reference"], 0.06 * L, f"{label}: 0.06 L reference")

    # dist_true / dist_expect per (window, layer, head): median and quartiles against N / L
    fig = drawn["distance_ratio"]
    ratio = ref.metric("dist_true")[:, :, :, iT, isoft] / ref.metric("dist_expect")[:, :, :, iT, isoft]
    pooled = np.moveaxis(ratio, (1, 2), (0, 1)).reshape(len(L), len(N), -1)  # [L, N, window*layer*head]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for key, q in (("q25", 25), ("median", 50), ("q75", 75)):
            close(fig[key], np.nanpercentile(pooled, q, axis=2), f"{label}: distance_ratio {key} = file")
    close(fig["x"], N[None, :] / L[:, None], f"{label}: distance_ratio x = N / L")
    finite = np.isfinite(fig["median"])
    check(finite.any() and np.all(fig["q25"][finite] <= fig["median"][finite])
          and np.all(fig["median"][finite] <= fig["q75"][finite]), f"{label}: quartiles ordered")

    fig = drawn["separability"]
    per_head = nanmean(ref.metric("sep_ratio")[:, iL, :, iT, isoft], 0)  # [N, layer, head]
    check(len(fig["boxes"]) == len(N), f"{label}: one box per N")
    for k in range(len(N)):
        want = per_head[k].ravel()
        close(np.sort(fig["boxes"][k]), np.sort(want[np.isfinite(want)]),
              f"{label}: separability box N={N[k]} = sep_ratio over heads")
    for key in ("sep_lower", "sep_upper"):
        close(fig[key], nanmean(ref.metric(key)[:, iL, :, iT, isoft], (0, 2, 3)),
              f"{label}: {key} mean line")
    # issue 16: the resolvable part max(sep_ratio - sep_marginal, 0), clipped per cell, then
    # the mean over (window, layer, head) like the sep_ratio mean line beside it
    sep = ref.metric("sep_ratio")[:, iL, :, iT, isoft]
    marg = ref.metric("sep_marginal")[:, iL, :, iT, isoft]
    close(fig["sep_ratio_mean"], nanmean(sep, (0, 2, 3)), f"{label}: sep_ratio mean line")
    close(fig["resolvable"], nanmean(np.maximum(sep - marg, 0), (0, 2, 3)),
          f"{label}: resolvable = mean of max(sep_ratio - sep_marginal, 0)")
    check(np.all(fig["resolvable"][np.isfinite(fig["resolvable"])]
                 <= fig["sep_ratio_mean"][np.isfinite(fig["resolvable"])] + 1e-7),
          f"{label}: resolvable <= sep_ratio")
    mh = nanmean(marg, 0)
    close(fig["sep_marginal_max"], np.nanmax(mh), f"{label}: sep_marginal max over heads = file")

    fig = drawn["gradient_vs_T"]
    close(fig["T"], T, f"{label}: gradient x = T axis")
    for ie, eps in enumerate(v["eps"]):
        want = nanmean(ref.metric("grad_fd")[:, iL, :, ie, isoft], (0, 2, 3))
        close(fig["grad_fd"][float(eps)], want, f"{label}: grad_fd eps={eps:g} = file mean")
        # the paper's statistic: max over heads of the token mean, then the window mean
        g = ref.metric("grad_fd")[:, iL, :, ie, isoft]
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want_max = np.nanmean(np.nanmax(g, axis=(2, 3)), axis=0)
        close(fig["grad_fd_max"][float(eps)], want_max, f"{label}: grad_fd eps={eps:g} max over heads")
    for key in ("grad_exact", "grad_bound"):
        close(fig[key], nanmean(ref.metric(key)[:, iL, :, isoft], (0, 2, 3)),
              f"{label}: {key} = file mean")
    # the bound curve is the formula min(1/(4T), sqrt 2) of docs/metrics.md section 7
    close(fig["grad_bound"], np.minimum(1 / (4 * T), np.sqrt(2)), f"{label}: grad_bound formula")

    fig = drawn["entropy_heatmap"]
    close(fig["entropy_norm"], nanmean(ref.metric("entropy_norm")[:, iL, iT, isoft], 0),
          f"{label}: entropy heatmap = file")

    fig = drawn["normalizers"]
    ie = int(np.argmin(np.abs(np.log(v["eps"]) - np.log(1e-3))))
    for k, name in enumerate(ref.norms):
        close(fig["sep_ratio"][name], nanmean(ref.metric("sep_ratio")[:, iL, :, iT, k], (0, 2, 3)),
              f"{label}: normalizer {name} sep_ratio")
        close(fig["grad_fd"][name], nanmean(ref.metric("grad_fd")[:, iL, :, ie, k], (0, 2, 3)),
              f"{label}: normalizer {name} grad_fd")

    # headline numbers: plateau = mean sep_ratio over N >= 16 (here the last N); slope by
    # an independent least-squares fit
    rows = {(r[0], r[1]): r[2] for r in drawn["summary"]}
    plateau = [val for (q, _), val in rows.items() if q == "separability plateau"]
    want = nanmean(ref.metric("sep_ratio")[:, iL, N >= 16, iT, isoft].ravel(), 0)
    check(len(plateau) == 1 and abs(float(plateau[0]) - want) < 5e-4,
          f"{label}: plateau {plateau} = {want:.4f}")
    low = T < 0.1
    y = nanmean(ref.metric("grad_fd")[:, iL, :, 0, isoft], (0, 2, 3))[low]
    from scipy.stats import linregress
    slope = linregress(np.log(T[low]), np.log(y)).slope
    got = [val for (q, w), val in rows.items()
           if q == "grad_fd log-log slope" and w.startswith("T<0.1") and "eps=0.001" in w]
    check(len(got) == 1 and abs(float(got[0]) - slope) < 1e-3, f"{label}: slope {got} = {slope:.4f}")
    high = T >= 1
    y = nanmean(ref.metric("grad_fd")[:, iL, :, 0, isoft], (0, 2, 3))[high]
    slope = linregress(np.log(T[high]), np.log(y)).slope
    got = [val for (q, w), val in rows.items()
           if q == "grad_fd log-log slope" and w.startswith("T>=1") and "eps=0.001" in w]
    check(len(got) == 1 and abs(float(got[0]) - slope) < 1e-3,
          f"{label}: high-T slope {got} = {slope:.4f}")
    check(all(r[4] in ("agrees", "differs", "n.a.") for r in drawn["summary"]),
          f"{label}: verdicts {[r[4] for r in drawn['summary']]}")
    check(drawn["summary"][0][0] == "model" and drawn["summary"][0][2] != "GPT-2",
          f"{label}: the summary says the tiny model is not GPT-2: {drawn['summary'][0]}")
    with open(drawn["summary_path"]) as f:
        table = list(csv.reader(f))
    check(table[0] == ["quantity", "where", "ours", "paper", "verdict"] and len(table) == len(drawn["summary"]) + 1,
          f"{label}: summary.csv has the table")

    # the images: present, non-trivial, not blank
    import matplotlib.image as mpimg
    for name, fig in drawn.items():
        if not isinstance(fig, dict):
            continue
        path = fig["path"]
        size = os.path.getsize(path) if os.path.exists(path) else 0
        check(size > 8000, f"{label}: {os.path.basename(path)} is {size} bytes (> 8 KB)")
        if size:
            check(float(np.var(mpimg.imread(path))) > 1e-4, f"{label}: {name} image is not blank")
    return drawn


def test_sensitivity(full, drawn_full):
    """The comparison can fail: one changed value in the file changes the plotted curve."""
    mutated = os.path.join(SCRATCH, "mutated.h5")
    shutil.copy(full, mutated)
    ref = Ref(full)
    iN = int(np.argmin(np.abs(ref.v["N"] - 5)))
    with h5py.File(mutated, "r+") as f:
        f["dist_true"][0, 0, 0, iN, ref.iT, ref.isoft, 0, 0] += 1.0  # model 0
    ds = ar.load(mutated)
    os.makedirs(os.path.join(SCRATCH, "mut"), exist_ok=True)
    drawn = figures.fig_distance_vs_L(ds, figures.Options(ds), os.path.join(SCRATCH, "mut"), "png")
    diff = drawn["true"] - drawn_full["distance_vs_L"]["true"]
    n_heads = ref.v["dist_true"].shape[5] * ref.v["dist_true"].shape[6]
    close(diff, [1.0 / n_heads / 3, 0, 0], "a +1 in one head of window 0 moves the L=16 point by 1/(heads*windows)")


def test_skips():
    """One L and one N: the figures that need more skip with a note instead of failing."""
    ds = ar.load(os.path.join(SCRATCH, "results.h5")).isel(L=[1], N=[2], normalizer=[0])
    drawn = figures.draw_all(ds, os.path.join(SCRATCH, "figs-skip"), "png")
    for name in ("distance_vs_L", "distance_vs_N", "critical_N", "separability", "normalizers"):
        check(drawn[name] is None, f"skip: {name} skipped on a one-L, one-N, one-normalizer file")
    for name in ("gradient_vs_T", "entropy_heatmap"):
        check(drawn[name] is not None, f"skip: {name} still drawn")
    check(any(r[0] == "separability plateau" and "upper half" in r[1] for r in drawn["summary"]),
          "skip: plateau falls back to the upper half of the N axis")


def test_old_file():
    """A file without sep_marginal (older runs) still draws the separability figure."""
    ds = ar.load(os.path.join(SCRATCH, "results.h5")).drop_vars("sep_marginal")
    opt = figures.Options(ds)
    os.makedirs(os.path.join(SCRATCH, "figs-old"), exist_ok=True)
    fig = figures.fig_separability(ds, opt, os.path.join(SCRATCH, "figs-old"), "png")
    check(fig is not None and "resolvable" not in fig and os.path.getsize(fig["path"]) > 8000,
          "old file: separability drawn without the resolvable curve")


def test_cli(full, partial):
    py = sys.executable
    out = subprocess.run([py, os.path.join(ANALYSIS, "attnsweep_results.py"), partial],
                         capture_output=True, text=True)
    check(out.returncode == 0 and "6 done, 1 failed, 2 pending, 9 total" in out.stdout,
          f"summary CLI: {out.stdout[-400:]} {out.stderr}")
    out = subprocess.run([py, os.path.join(ANALYSIS, "figures.py"), full, "--out",
                          os.path.join(SCRATCH, "figs-cli"), "--format", "pdf", "--T", "1"],
                         capture_output=True, text=True)
    check(out.returncode == 0 and os.path.getsize(os.path.join(SCRATCH, "figs-cli",
                                                               "gradient_vs_T.pdf")) > 5000,
          f"figures CLI pdf: {out.stderr[-300:]}")
    check(re.search(r"critical N / L\s+L=\d+, T=1\s", out.stdout) is not None,
          "figures CLI --T 1 selects T = 1")
    out = subprocess.run([py, os.path.join(ANALYSIS, "figures.py"), full, "--out",
                          os.path.join(SCRATCH, "x"), "--normalizer", "bogus"],
                         capture_output=True, text=True)
    check(out.returncode == 2 and "bogus" in out.stderr and out.stderr.count("\n") == 1,
          f"figures CLI bad normalizer: exit {out.returncode}, {out.stderr!r}")
    out = subprocess.run([py, os.path.join(ANALYSIS, "figures.py"), "/nonexistent.h5", "--out",
                          os.path.join(SCRATCH, "x")], capture_output=True, text=True)
    check(out.returncode == 1 and "/nonexistent.h5" in out.stderr and out.stderr.count("\n") == 1,
          f"figures CLI missing file: exit {out.returncode}, {out.stderr!r}")


def main():
    full, partial = make_results()
    test_load_masks(partial)
    drawn_full = test_figures(full, os.path.join(SCRATCH, "figs-full"), "full")
    test_figures(partial, os.path.join(SCRATCH, "figs-partial"), "partial")
    test_sensitivity(full, drawn_full)
    test_skips()
    test_old_file()
    test_cli(full, partial)
    return summary("test_analysis")


if __name__ == "__main__":
    sys.exit(main())
