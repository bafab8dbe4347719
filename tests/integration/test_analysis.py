#!/usr/bin/python3
"""Tests of analysis/: attnsweep_results.load() masks unfinished
cells, and every figure of analysis/figures.py draws exactly the values of the
results file, recomputed here straight from h5py with numpy (not through the
module). The results file comes from a real `attnsweep run` on the tiny model;
a copy with some cells marked pending / failed (h5py edit of `status`, metric
values left in place) checks the masking.

The checkpoint figure: three real runs (the tiny model and two more
seeds of it) stacked with h5py into one file of the model-axis layout
(docs/results.md; stack_models below), one model holding a masked head with a
huge value; the figure's medians and quartiles must be numpy's over the present
heads, and every per-model figure must equal that model's single-model figure.
Works on files with and without the model dimension (Ref.lead).

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
from sweeptest import ENV, check, summary

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
         eps = [1e-3, 0.1]; normalizer = ["softmax", "sparsemax", "sa_softmax"]; }};
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
    lead = Ref(full).lead
    with h5py.File(partial, "r+") as f:
        status = f["status"][()]
        status[lead + (1, 2)] = 0
        status[lead + (2, 0)] = 2
        status[lead + (0, 1)] = 0
        f["status"][...] = status
    return full, partial


# -- independent reference: plain h5py + numpy -----------------------------------------------

class Ref:
    """The file's arrays of one model, with the axis positions the figures use. A file
    with the model dimension (first in every cell variable) is read at model index
    `model`; `lead` is the index prefix into the raw file ((model,) or ())."""

    def __init__(self, path, model=0):
        with h5py.File(path, "r") as f:
            self.v = {k: f[k][()] for k in f if isinstance(f[k], h5py.Dataset)}
            # the axis order of every variable, from its dimension scales
            self.dims = {k: [f[k].dims[i][0].name.lstrip("/") for i in range(f[k].ndim)]
                         for k in f if isinstance(f[k], h5py.Dataset) and f[k].ndim > 0
                         and len(f[k].dims[0])}
        self.lead = (model,) if self.dims["status"][0] == "model" else ()
        for k, dims in self.dims.items():
            if dims[0] == "model" and k != "model" and self.lead:
                self.v[k], self.dims[k] = self.v[k][model], dims[1:]
        self.norms = [n.decode() if isinstance(n, bytes) else n for n in self.v["normalizer"]]
        self.done = self.v["status"] == 1
        self.iT = int(np.argmin(np.abs(np.log(self.v["T"]) - np.log(8.0))))
        self.iL = int(np.argmax(self.v["L"]))
        self.isoft = self.norms.index("softmax")

    def metric(self, name):
        """float64 copy with the fill value as NaN and unfinished cells as NaN."""
        a = self.v[name].astype(float)
        if name in ("crit_N", "crit_N_censored", "rows_used"):
            a[self.v[name] == np.iinfo(np.int32).min + 1] = np.nan
        assert self.dims[name][:2] == ["window", "L"], self.dims[name]
        a[~self.done] = np.nan
        return a


# -- a multi-model results file in the model axis's layout (docs/results.md) ---------
MODEL_COORDS = ("model_path", "model_sha256", "model_config_sha256", "model_kind", "model_family",
                "model_n_layer", "model_n_head", "model_n_embd", "training_step")
CELL_DIMS = ("window", "L")


def _scale_names(dset):
    return [dset.dims[i][0].name.lstrip("/") if len(dset.dims[i]) else None
            for i in range(dset.ndim)]


def stack_models(singles, dst, models, masked=()):
    """Writes dst: the single-model files `singles` (same grid) as one file with a leading
    `model` dimension, laid out as src/store/schema.c lays out a file (dimension scales
    attached per axis, _FillValue, long_name, units) plus the model axis: the `model`
    coordinate (vlen UTF-8), the auxiliary coordinates MODEL_COORDS over (model) named in
    every data variable's CF `coordinates` attribute, and head_valid (model, layer, head).
    models: one dict per file with keys name, path, sha256, n_layer, n_head, n_embd,
    training_step (and kind and family, default: the single files' model_kind / model_family). masked: (model, layer, head) triples marked absent (head_valid 0) whose
    values are set to 1e6 in every float variable over (layer, head). A single file that
    already has the model axis (size 1) is read at model 0. The root model_dir and
    weights_sha256 are left out, so the analysis cannot lean on them for several models."""
    srcs = [h5py.File(p, "r") for p in singles]
    first = srcs[0]
    own = set(MODEL_COORDS) | {"model", "head_valid"}     # written here, never copied
    with h5py.File(dst, "w") as out:
        for k, v in first.attrs.items():
            if k not in ("model_dir", "weights_sha256"):
                out.attrs[k] = v
        # axis coordinates: dimension scales, as create_coord() writes them
        axes = [k for k in first if isinstance(first[k], h5py.Dataset) and k not in own
                and first[k].attrs.get("CLASS") == b"DIMENSION_SCALE"]
        for k in axes:
            d = out.create_dataset(k, data=first[k][()], dtype=first[k].dtype)
            for a, v in first[k].attrs.items():
                if a not in ("CLASS", "NAME", "REFERENCE_LIST"):
                    d.attrs[a] = v
            d.make_scale(k)
        str_t = h5py.string_dtype("utf-8")
        d = out.create_dataset("model", data=[m["name"] for m in models], dtype=str_t)
        d.attrs["long_name"] = "model name (its directory's basename)"
        d.make_scale("model")
        kind = first.attrs.get("model_kind", "unknown")
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        family = first["model_family"][0] if "model_family" in first else ""
        family = family.decode() if isinstance(family, bytes) else str(family)
        for m in models:          # a model's kind and family: given, else the single files' own
            m.setdefault("kind", kind)
            m.setdefault("family", family)
            m.setdefault("config_sha256", "")  # "": not recorded (docs/results.md)
        aux = {"model_path": (str_t, "path"), "model_sha256": (str_t, "sha256"),
               "model_config_sha256": (str_t, "config_sha256"),
               "model_kind": (str_t, "kind"), "model_family": (str_t, "family"),
               "model_n_layer": ("<i4", "n_layer"), "model_n_head": ("<i4", "n_head"),
               "model_n_embd": ("<i4", "n_embd"), "training_step": ("<i8", "training_step")}
        for k, (t, key) in aux.items():
            d = out.create_dataset(k, data=[m[key] for m in models], dtype=t)
            d.attrs["long_name"] = k.replace("_", " ")
            if t != str_t:
                d.attrs["units"] = "1"
            d.dims[0].attach_scale(out["model"])
        nl, nh = first["layer"].shape[0], first["head"].shape[0]
        valid = np.ones((len(models), nl, nh), dtype="u1")
        for m, l, h in masked:
            valid[m, l, h] = 0
        d = out.create_dataset("head_valid", data=valid)
        d.attrs["flag_values"] = np.array([0, 1], dtype="u1")
        d.attrs["flag_meanings"] = "masked present"
        d.attrs["long_name"] = "the model has this (layer, head)"
        coords_attr = " ".join(MODEL_COORDS)
        d.attrs["coordinates"] = coords_attr
        for i, k in enumerate(("model", "layer", "head")):
            d.dims[i].attach_scale(out[k])
        for k in first:
            src = first[k]
            if not isinstance(src, h5py.Dataset) or k in axes or k in own:
                continue
            dims = _scale_names(src)
            lead = dims[:1] == ["model"]                # a single file with the model axis
            dims = dims[1:] if lead else dims
            if dims[:2] != list(CELL_DIMS):            # window_start stays (window)
                d = out.create_dataset(k, data=src[()], dtype=src.dtype)
                for a, v in src.attrs.items():
                    if a != "DIMENSION_LIST":
                        d.attrs[a] = v
                for i, name in enumerate(dims):
                    d.dims[i].attach_scale(out[name])
                continue
            data = np.stack([f[k][0] if lead else f[k][()] for f in srcs])
            for m, l, h in masked:
                if data.dtype.kind == "f" and dims[-2:] == ["layer", "head"]:
                    data[m, ..., l, h] = 1e6
            fill = src.fillvalue if "_FillValue" in src.attrs else None
            chunks = (1,) + (src.chunks[1:] if lead else src.chunks) if src.chunks else None
            d = out.create_dataset(k, data=data, dtype=src.dtype, chunks=chunks, fillvalue=fill)
            for a, v in src.attrs.items():
                if a != "DIMENSION_LIST":
                    d.attrs[a] = v
            d.attrs["coordinates"] = coords_attr
            for i, name in enumerate(["model"] + dims):
                d.dims[i].attach_scale(out[name])
        if "provenance" in first:
            first.copy("provenance", out)
    for f in srcs:
        f.close()


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
    ds = ar.select_model(ar.load(partial), 0)
    raw_status = ref.v["status"]
    check(int((raw_status != 1).sum()) == 3, "partial copy has 3 unfinished cells")
    for name in ("dist_true", "dist_bound", "dist_expect", "sep_ratio", "sep_lower",
                 "sep_upper", "sep_marginal", "rows_used", "entropy", "entropy_norm", "grad_fd", "grad_exact",
                 "grad_bound", "ks_stat", "ks_pvalue", "crit_N", "crit_N_censored"):
        got = ds[name].transpose(*ref.dims[name]).values.astype(float)
        raw = ref.v[name].astype(float)
        masked = got[~ref.done]
        check(np.isnan(masked).all(), f"load(): {name} is NaN in every unfinished cell")
        # the raw file still holds numbers there, so the NaN comes from the mask
        check(np.isfinite(raw[~ref.done]).any(), f"{name}: partial copy has values to mask")
        close(got[ref.done], ref.metric(name)[ref.done], f"load(): {name} unchanged where done")
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
    # the resolvable part max(sep_ratio - sep_marginal, 0), clipped per cell, then
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

    # the guideline's figure: resolvable separability at N against grad_fd, one curve per
    # normalizer across T
    fig = drawn["selectivity_vs_gradient"]
    jN = int(np.flatnonzero(N == fig["N"])[0])
    for k, name in enumerate(ref.norms):
        res = np.maximum(ref.metric("sep_ratio")[:, iL, jN, :, k] -
                         ref.metric("sep_marginal")[:, iL, jN, :, k], 0)
        close(fig["resolvable"][name], nanmean(res, (0, 2, 3)),
              f"{label}: selectivity_vs_gradient {name} resolvable separability")
        close(fig["grad_fd"][name], nanmean(ref.metric("grad_fd")[:, iL, :, ie, k], (0, 2, 3)),
              f"{label}: selectivity_vs_gradient {name} grad_fd")
    check(len(ref.norms) >= 2 and sorted(fig["grad_fd"]) == sorted(ref.norms),
          f"{label}: selectivity_vs_gradient has one curve per normalizer {ref.norms}")
    check(fig["L"] == L[iL] and fig["eps"] == v["eps"][ie], f"{label}: selectivity_vs_gradient at "
          f"L = {fig['L']}, eps = {fig['eps']} (want the longest L, eps nearest 1e-3)")
    # its CSV beside the PNG: every (normalizer, T) with the file's numbers, read back as text
    csv_path = os.path.join(os.path.dirname(fig["path"]), "selectivity_vs_gradient.csv")
    check(fig.get("csv_path") == csv_path and os.path.exists(csv_path),
          f"{label}: selectivity_vs_gradient.csv beside the figure")
    if os.path.exists(csv_path):
        with open(csv_path) as f:
            rows = list(csv.DictReader(f))
        check(len(rows) == len(ref.norms) * len(T), f"{label}: CSV has {len(rows)} rows, want "
              f"{len(ref.norms)} normalizers x {len(T)} T")
        for k, name in enumerate(ref.norms):
            mine = [r for r in rows if r["normalizer"] == name]
            close([float(r["T"]) for r in mine], T, f"{label}: CSV {name} T = the file's T axis")
            check(all(int(r["N"]) == fig["N"] and int(r["L"]) == L[iL] for r in mine),
                  f"{label}: CSV {name} rows at N = {fig['N']}, L = {L[iL]}")
            sep = ref.metric("sep_ratio")[:, iL, jN, :, k]
            marg = ref.metric("sep_marginal")[:, iL, jN, :, k]
            for key, want in (("grad_fd", nanmean(ref.metric("grad_fd")[:, iL, :, ie, k], (0, 2, 3))),
                              ("sep_ratio", nanmean(sep, (0, 2, 3))),
                              ("sep_marginal", nanmean(marg, (0, 2, 3))),
                              ("resolvable", nanmean(np.maximum(sep - marg, 0), (0, 2, 3)))):
                close([float(r[key]) for r in mine], want, f"{label}: CSV {name} {key} = file mean")

    # headline numbers: plateau = mean sep_ratio over N >= 16 (here the last N); slope by
    # an independent least-squares fit
    rows = {(r[1], r[2]): r[3] for r in drawn["summary"]}
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
    check(all(r[5] in ("agrees", "differs", "n.a.") for r in drawn["summary"]),
          f"{label}: verdicts {[r[5] for r in drawn['summary']]}")
    check(drawn["summary"][0][1] == "model" and drawn["summary"][0][3] != "GPT-2"
          and "not GPT-2" in drawn["summary"][0][3],
          f"{label}: the summary says the tiny model is not GPT-2: {drawn['summary'][0]}")
    with open(drawn["summary_path"]) as f:
        table = list(csv.reader(f))
    check(table[0] == ["model", "quantity", "where", "ours", "paper", "verdict"]
          and len(table) == len(drawn["summary"]) + 1
          and {r[0] for r in table[1:]} == {os.path.basename(MODEL.rstrip("/"))},
          f"{label}: summary.csv has the table, its model column names the model")
    check(drawn["checkpoints"] is None, f"{label}: no checkpoint figure for one model")

    # the images: present, non-trivial, not blank
    import matplotlib.image as mpimg
    for name, fig in drawn.items():
        if not isinstance(fig, dict) or "path" not in fig:
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
        f["dist_true"][ref.lead + (0, 0, iN, ref.iT, ref.isoft, 0, 0)] += 1.0
    ds = ar.select_model(ar.load(mutated), 0)
    os.makedirs(os.path.join(SCRATCH, "mut"), exist_ok=True)
    drawn = figures.fig_distance_vs_L(ds, figures.Options(ds), os.path.join(SCRATCH, "mut"), "png")
    diff = drawn["true"] - drawn_full["distance_vs_L"]["true"]
    n_heads = ref.v["dist_true"].shape[5] * ref.v["dist_true"].shape[6]
    close(diff, [1.0 / n_heads / 3, 0, 0], "a +1 in one head of window 0 moves the L=16 point by 1/(heads*windows)")


def test_crit_censored(path, drawn):
    """crit_N where no N of the grid passes the KS test is censored, never a number: the file
    holds the fill there and crit_N_censored = 1, against crit_N recomputed from the file's own
    ks_pvalue by its definition (the smallest N with p > ks_alpha; NaN never passes); load()
    gives an older file's -1 the same form; the figure draws those windows at the largest N
    tested; the headline table says they are censored."""
    ref = Ref(path)
    fill = np.iinfo(np.int32).min + 1
    alpha = float(h5py.File(path, "r").attrs["ks_alpha"])
    crit, cens, p, N = ref.v["crit_N"], ref.v["crit_N_censored"], ref.v["ks_pvalue"], ref.v["N"]
    check(not (crit == -1).any(), "file: no crit_N = -1 (a number a mean would mix in)")
    bad = n_cens = n_found = 0
    for w, l, t, z in np.ndindex(crit.shape):
        if not ref.done[w, l]:
            continue
        pv = p[w, l, :, t, z]
        passing = N[pv > alpha]
        if passing.size:
            want, want_cens, n_found = int(passing.min()), 0, n_found + 1
        elif np.isfinite(pv).any():
            want, want_cens, n_cens = fill, 1, n_cens + 1
        else:
            want, want_cens = fill, fill
        bad += (int(crit[w, l, t, z]), int(cens[w, l, t, z])) != (want, want_cens)
    check(bad == 0, f"file: crit_N and crit_N_censored follow ks_pvalue in every done entry ({bad} differ)")
    check(n_cens > 0 and n_found > 0, f"the fixture has censored ({n_cens}) and found ({n_found}) entries")
    ds = ar.select_model(ar.load(path), 0)
    c, z = ds["crit_N"].values, ds["crit_N_censored"].values
    check(np.isnan(c[z == 1]).all() and np.isfinite(c[z == 0]).all(),
          "load(): crit_N is NaN exactly where censored")
    mean = ds["crit_N"].mean("window").values
    by_hand = nanmean(np.where(cens == 1, np.nan, ref.metric("crit_N")), 0)
    close(mean, by_hand, "a mean over windows is of the found crit_N only")
    # an older file: -1 in crit_N and no crit_N_censored -> the same Dataset
    old = os.path.join(SCRATCH, "old-crit.h5")
    shutil.copy(path, old)
    with h5py.File(old, "r+") as f:
        a = f["crit_N"][...]
        a[f["crit_N_censored"][...] == 1] = -1
        f["crit_N"][...] = a
        del f["crit_N_censored"]
    od = ar.select_model(ar.load(old), 0)
    close(od["crit_N"].values, c, "old file: crit_N = -1 becomes NaN")
    close(od["crit_N_censored"].values, z, "old file: crit_N_censored derived from -1")
    fig = drawn["critical_N"]
    iT, isoft = ref.iT, ref.isoft
    tested = np.where(np.isfinite(p[:, :, :, iT, isoft]), N[None, None, :], -1).max(axis=2)
    want = np.where(cens[:, :, iT, isoft] == 1, tested, np.nan)
    close(fig["lower_bound"], want, "critical_N: censored windows drawn at the largest N tested")
    check(np.array_equal(fig["none_found"], (cens[:, :, iT, isoft] == 1).sum(axis=0)),
          "critical_N: censored windows counted per L")
    rows = [r for r in drawn["summary"] if r[1] == "critical N / L"]
    for r, k in zip(rows, (cens[:, :, iT, isoft] == 1).sum(axis=0)):
        check(("censored" in r[3]) == (k > 0), f"headline {r[2]}: censoring said iff present: {r[3]}")
    return ds


def test_verdicts(one):
    """The headline table judges against the paper only a GPT-2: for any other model every
    verdict is n.a.; each paper cell states the tolerance its verdict allows."""
    one = one.copy()
    check(one.attrs.get("model_kind") != "gpt2", "the fixture model is not GPT-2")
    rows = figures.headline(one, figures.Options(one))
    check(rows[0][0] == "model" and "n.a." in rows[0][3], f"model row says verdicts are n.a.: {rows[0]}")
    check(all(r[4] == "n.a." for r in rows[1:]), f"not GPT-2: every verdict n.a.: {[r[4] for r in rows]}")
    one.attrs["model_kind"] = "gpt2"
    as_gpt2 = figures.headline(one, figures.Options(one))
    judged = [r for r in as_gpt2[1:] if r[0] in figures.VERDICT_RULES and r[3] != "(not reported)"]
    check(any(r[4] in ("agrees", "differs") for r in judged), "GPT-2: the rules judge")
    for r in judged:
        lo, hi = figures.VERDICT_RULES[r[0]]
        check(f"agrees: {lo:g} to {hi:g}" in r[3], f"paper cell states its tolerance: {r[3]}")
        ours = re.match(r"-?[0-9.]+", r[2])
        if ours and r[0] != "critical N / L":   # the numbers these rules read directly
            want = "agrees" if lo <= float(ours.group()) <= hi else "differs"
            check(r[4] == want, f"GPT-2 verdict {r[4]} for {r[0]} = {r[2]} in [{lo}, {hi}]")


def test_readability(caught):
    """What the figures' readers struggled with: titles of at most three lines (what, then
    the paper figure with the model and readings), the separability legend beside the boxes
    rather than over them and its mean and bound lines drawn over the boxes (a mean inside a
    box was hidden), a log N axis, the T line of the gradient figure labelled, and no
    RuntimeWarning (an empty slice) while drawing (files with empty slices:
    test_figures_empty.py)."""
    layout = figures.LAYOUT
    for name, panels in layout.items():
        for p in panels:
            check(len(p["title"].split("\n")) <= 3, f"{name}: title of {len(p['title'].splitlines())} lines: {p['title']!r}")
    sep = layout.get("separability", [{}])[0]
    check(sep.get("legend_inside") is False, "separability: the legend sits beside the axes, not over the boxes")
    boxes = [z for label, z in sep.get("lines", []) if label.startswith("_")]
    means = [(label, z) for label, z in sep.get("lines", []) if not label.startswith("_")]
    check(boxes and len(means) >= 3 and all(z > max(boxes) for _, z in means),
          f"separability: the mean and bound lines are drawn over the boxes: {means}, boxes at {sorted(set(boxes))}")
    check(layout.get("distance_vs_N", [{}])[0].get("xscale") == "log", "distance_vs_N: log N axis")
    grad = layout.get("gradient_vs_T", [{}])[0]
    check(any(t.startswith("T = ") for t in grad.get("legend", [])), f"gradient_vs_T: the T line is labelled: {grad}")
    sel = layout.get("selectivity_vs_gradient", [{}])[0]
    check(len(sel.get("legend", [])) >= 2 and len(sel.get("T_labels", [])) >= 2 * len(sel.get("legend", [])),
          f"selectivity_vs_gradient: a legend entry per normalizer and T labels along each curve: {sel}")
    runtime = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    check(not runtime, f"no RuntimeWarning while drawing: {runtime[:3]}")


def test_skips():
    """One L and one N: the figures that need more skip with a note instead of failing."""
    ds = ar.load(os.path.join(SCRATCH, "results.h5")).isel(L=[1], N=[2], normalizer=[0])
    drawn = figures.draw_all(ds, os.path.join(SCRATCH, "figs-skip"), "png")
    for name in ("distance_vs_L", "distance_vs_N", "critical_N", "separability", "normalizers"):
        check(drawn[name] is None, f"skip: {name} skipped on a one-L, one-N, one-normalizer file")
    for name in ("gradient_vs_T", "entropy_heatmap"):
        check(drawn[name] is not None, f"skip: {name} still drawn")
    check(any(r[1] == "separability plateau" and "upper half" in r[2] for r in drawn["summary"]),
          "skip: plateau falls back to the upper half of the N axis")


def test_old_file():
    """A file without sep_marginal (older runs) still draws the separability figure."""
    ds = ar.select_model(ar.load(os.path.join(SCRATCH, "results.h5")), 0).drop_vars("sep_marginal")
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


# -- the checkpoint figure -------------------------------------------------------

CKPT_STEPS = (100, 400, 1000)
MASKED = (1, 1, 3)          # (model, layer, head): marked absent, 1e6 in every float value


def make_checkpoints(full):
    """Three real single-model runs (the tiny model, seeds 2 and 3 of it) and their stack
    into one three-model file with a masked head. Returns (multi path, single paths, models)."""
    singles = [full]
    for seed in (2, 3):
        model = os.path.join(SCRATCH, f"tiny-seed{seed}")
        subprocess.run([BIN, "synth", "--preset", "tiny", "--seed", str(seed), "--out", model,
                        "--force"], env=ENV, check=True, capture_output=True)
        cfg = os.path.join(SCRATCH, f"seed{seed}.cfg")
        write_config(cfg, f"results-seed{seed}.h5")
        with open(cfg) as f:
            text = f.read().replace(f'model = "{MODEL}";', f'model = "{model}";')
        with open(cfg, "w") as f:
            f.write(text)
        run = subprocess.run([BIN, "run", cfg], cwd=SCRATCH, env=ENV, capture_output=True,
                             text=True, timeout=240)
        if run.returncode != 0:
            print(run.stdout, run.stderr)
            sys.exit(f"attnsweep run (seed {seed}) failed with exit {run.returncode}")
        singles.append(os.path.join(SCRATCH, f"results-seed{seed}.h5"))
    models = [dict(name=f"tiny-step{step}", path=f"models/tiny-step{step}", sha256=f"{m:064x}",
                   n_layer=2, n_head=4, n_embd=64, training_step=step)
              for m, step in enumerate(CKPT_STEPS)]
    multi = os.path.join(SCRATCH, "checkpoints.h5")
    stack_models(singles, multi, models, masked=[MASKED])
    return multi, singles, models


def ckpt_reference(multi, masked_too=False):
    """entropy_norm and max(sep_ratio - sep_marginal, 0) pooled over (window, layer, head) of
    finished cells and present heads, straight from h5py: [model, L, pool]."""
    with h5py.File(multi, "r") as f:
        T, N, L = f["T"][()], f["N"][()], f["L"][()]
        norms = [n.decode() if isinstance(n, bytes) else n for n in f["normalizer"][()]]
        iT = int(np.argmin(np.abs(np.log(T) - np.log(8.0))))
        below = N[N < L.max()]
        iN = int(np.flatnonzero(N == below[len(below) // 2])[0])
        isoft = norms.index("softmax")
        done = f["status"][()] == 1                                   # [model, window, L]
        valid = f["head_valid"][()] == 1                              # [model, layer, head]
        ent = f["entropy_norm"][:, :, :, iT, isoft].astype(float)     # [m, w, L, layer, head]
        sep = f["sep_ratio"][:, :, :, iN, iT, isoft].astype(float)
        marg = f["sep_marginal"][:, :, :, iN, iT, isoft].astype(float)
    res = np.maximum(sep - marg, 0)
    res[np.isnan(sep) | np.isnan(marg)] = np.nan
    keep = done[:, :, :, None, None] & (valid[:, None, None] | masked_too)
    out = {}
    for key, a in (("entropy_norm", ent), ("sep", res)):
        a = np.where(keep, a, np.nan)
        out[key] = np.moveaxis(a, 2, 1).reshape(a.shape[0], a.shape[2], -1)
    return out, int(N[iN])


def test_checkpoints(multi, singles, models):
    ds = ar.load(multi)
    out = os.path.join(SCRATCH, "figs-ckpt")
    drawn = figures.draw_all(ds, out, "png")
    fig = drawn["checkpoints"]
    check(fig is not None and os.path.getsize(fig["path"]) > 8000,
          "checkpoints: figure drawn for a three-model file")
    if fig is None:
        return
    import matplotlib.image as mpimg
    check(float(np.var(mpimg.imread(fig["path"]))) > 1e-4, "checkpoints: image is not blank")
    close(fig["x"], CKPT_STEPS, "checkpoints: x = training_step")
    check(fig["x_kind"] == "step", f"checkpoints: x kind {fig['x_kind']} == step")
    ref, N = ckpt_reference(multi)
    check(fig["N"] == N, f"checkpoints: separability at the middle N {N} (got {fig['N']})")
    check(fig["T"] == 8.0, "checkpoints: T closest to 8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for key in ("entropy_norm", "sep"):
            for name, q in (("q25", 25), ("median", 50), ("q75", 75)):
                close(fig[key][name], np.nanpercentile(ref[key], q, axis=2),
                      f"checkpoints: {key} {name} = numpy over present heads x windows")
            check(np.array_equal(fig[key]["count"], np.isfinite(ref[key]).sum(axis=2)),
                  f"checkpoints: {key} pooled counts {fig[key]['count'].tolist()}")
        # the masked head holds 1e6: counted, it would move the quartiles (the check can fail)
        loud, _ = ckpt_reference(multi, masked_too=True)
        m = MASKED[0]
        check(not np.allclose(np.nanpercentile(loud["entropy_norm"][m], 75, axis=1),
                              fig["entropy_norm"]["q75"][m]),
              "checkpoints: the masked head would move q75 if it were counted")
    check(np.nanmax(fig["entropy_norm"]["q75"]) <= 1.0, "checkpoints: no masked 1e6 drawn")
    # the CSV beside the figure holds the same numbers
    with open(fig["csv_path"]) as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == 2 * len(models) * len(fig["L"]), f"checkpoints.csv has {len(rows)} rows")
    for row in rows:
        m = [d["name"] for d in models].index(row["model"])
        i = list(fig["L"]).index(float(row["L"]))
        key = "entropy_norm" if row["quantity"] == "entropy_norm" else "sep"
        for name in ("q25", "median", "q75"):
            got, want = float(row[name]), fig[key][name][m, i]
            check(got == want or (np.isnan(got) and np.isnan(want)),
                  f"checkpoints.csv {row['model']} {row['quantity']} L={row['L']} {name}")
        check(int(row["training_step"]) == CKPT_STEPS[m], "checkpoints.csv training_step")
    # the title names the models and their kind, and calls none of them GPT-2
    title = fig["title"]
    check(all(d["name"] in title for d in models) and "synthetic-random" in title
          and "not GPT-2" in title, f"checkpoints: title names the models and kind: {title!r}")
    # every per-model figure equals the figure of that model's single-model file (for the
    # masked model: that file with the masked head made NaN, as a model without it reads)
    for m, d in enumerate(models):
        got = drawn["models"][d["name"]]
        single = ar.load(singles[m])
        if m == MASKED[0]:
            gone = (single["layer"] == MASKED[1]) & (single["head"] == MASKED[2])
            for name in ar.metric_names(single):
                if "layer" in single[name].dims:
                    single[name] = single[name].where(~gone)
        want = figures.draw_all(single, os.path.join(SCRATCH, f"figs-single{m}"), "png")
        for fname in ("distance_vs_L", "distance_vs_N", "critical_N", "distance_ratio",
                      "separability", "gradient_vs_T", "entropy_heatmap", "normalizers"):
            a, b = got[fname], want[fname]
            check(os.path.dirname(a["path"]) == os.path.join(out, d["name"]),
                  f"checkpoints: {d['name']} {fname} in its own folder")
            for key, val in b.items():
                if key == "path":
                    continue
                if isinstance(val, dict):
                    for k2 in val:
                        close(a[key][k2], val[k2], f"per-model {d['name']} {fname} {key} {k2}")
                elif isinstance(val, list):
                    for x, y in zip(a[key], val):
                        close(np.sort(x), np.sort(y), f"per-model {d['name']} {fname} {key}")
                else:
                    close(a[key], val, f"per-model {d['name']} {fname} {key}")
    heat = drawn["models"][models[MASKED[0]]["name"]]["entropy_heatmap"]["entropy_norm"]
    check(np.isnan(heat[MASKED[1], MASKED[2]]) and np.isfinite(heat).sum() == heat.size - 1,
          "per-model: the masked head is blank in its model's entropy heatmap")
    with open(drawn["summary_path"]) as f:
        table = list(csv.reader(f))
    check(table[0][0] == "model" and [r[0] for r in table[1:] if r[1] == "model"]
          == [d["name"] for d in models], "summary.csv: a model row per model, model column")


def test_checkpoint_axes(multi):
    """x falls back to the model size, then to the names; one-model files get no figure."""
    import checkpoints
    variant = os.path.join(SCRATCH, "ckpt-variant.h5")
    shutil.copy(multi, variant)
    with h5py.File(variant, "r+") as f:
        f["training_step"][1] = -1
    x, _, kind, why = checkpoints.x_axis(ar.load(variant))
    check(kind == "name" and np.array_equal(x, [0, 1, 2]) and "training_step" in why,
          f"x axis: a model without a step and one size -> names ({kind}, {why})")
    with h5py.File(variant, "r+") as f:
        f["model_n_embd"][...] = [64, 128, 256]
        f["model_n_layer"][...] = [2, 4, 6]
    x, _, kind, _ = checkpoints.x_axis(ar.load(variant))
    d, n = np.array([64, 128, 256]), np.array([2, 4, 6])
    close(x, n * (12 * d * d + 13 * d), "x axis: model size = GPT-2 non-embedding parameters")
    check(kind == "size", f"x axis: sizes differ -> size ({kind})")
    py = sys.executable
    fig_py = os.path.join(ANALYSIS, "figures.py")
    one = os.path.join(SCRATCH, "one-model.h5")
    stack_models([os.path.join(SCRATCH, "results.h5")], one,
                 [dict(name="tiny", path=MODEL, sha256="0" * 64, n_layer=2, n_head=4, n_embd=64,
                       training_step=-1)])
    for path, what in ((os.path.join(SCRATCH, "results.h5"), "file without a model axis"),
                       (one, "model axis of size 1"), (multi, "--model tiny-step400")):
        args = [py, fig_py, path, "--out", os.path.join(SCRATCH, "figs-one")]
        if path == multi:
            args += ["--model", "tiny-step400"]
        out = subprocess.run(args, capture_output=True, text=True)
        why = [ln for ln in out.stdout.splitlines() if ln.startswith("note: checkpoints")]
        check(out.returncode == 0 and len(why) == 1 and "one model" in why[0]
              and not os.path.exists(os.path.join(SCRATCH, "figs-one", "checkpoints.png")),
              f"{what}: no checkpoint figure, one line says why: {why} {out.stderr[-300:]}")
    out = subprocess.run([py, fig_py, multi, "--out", os.path.join(SCRATCH, "x"), "--model", "nope"],
                         capture_output=True, text=True)
    check(out.returncode == 2 and "nope" in out.stderr and out.stderr.count("\n") == 1,
          f"--model nope: exit {out.returncode}, {out.stderr!r}")
    return one


def test_per_N_T(drawn_full):
    """metrics.per_N_T = [8.0]: at T = 8 the per-N figures draw what the full file draws there;
    at another T they are skipped with a note (not drawn as missing values), the summary says
    "not computed at this T", and the per-T figures are drawn at every T."""
    write_config(os.path.join(SCRATCH, "pn.cfg"), "pn.h5")
    with open(os.path.join(SCRATCH, "pn.cfg"), "a") as f:
        f.write("metrics = { per_N_T = [8.0]; };\n")
    run = subprocess.run([BIN, "run", "pn.cfg"], cwd=SCRATCH, env=ENV, capture_output=True, text=True,
                         timeout=240)
    check(run.returncode == 0, f"per_N_T: run: {run.stderr[-300:]}")
    if run.returncode:
        return
    ds = ar.load(os.path.join(SCRATCH, "pn.h5"))
    at8 = figures.draw_all(ds, os.path.join(SCRATCH, "figs-pn8"), "png")
    for name in ("distance_vs_L", "distance_vs_N", "critical_N", "separability"):
        check(at8[name] is not None, f"per_N_T: {name} drawn at T = 8")
    for key in ("true", "expect", "bound"):
        close(at8["distance_vs_L"][key], drawn_full["distance_vs_L"][key], f"per_N_T: dist_{key} at T = 8 as in the full file")
    at1 = figures.draw_all(ds, os.path.join(SCRATCH, "figs-pn1"), "png", T=1.0)
    for name in ("distance_vs_L", "distance_vs_N", "critical_N", "separability", "distance_ratio"):
        check(at1.get(name) is None, f"per_N_T: {name} skipped at T = 1")
    check(at1["gradient_vs_T"] is not None and np.isfinite(at1["gradient_vs_T"]["grad_exact"]).all(),
          "per_N_T: the gradient figure is drawn over every T")
    rows = [r for r in at1["summary"] if r[1] in ("separability plateau", "critical N / L")]
    check(rows and all("not computed at this T" in r[3] for r in rows),
          f"per_N_T: the summary says not computed at T = 1: {rows}")


def main():
    full, partial = make_results()
    test_load_masks(partial)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        drawn_full = test_figures(full, os.path.join(SCRATCH, "figs-full"), "full")
    test_readability(caught)
    test_figures(partial, os.path.join(SCRATCH, "figs-partial"), "partial")
    test_sensitivity(full, drawn_full)
    test_per_N_T(drawn_full)
    test_verdicts(test_crit_censored(full, drawn_full))
    test_skips()
    test_old_file()
    test_cli(full, partial)
    multi, singles, models = make_checkpoints(full)
    test_checkpoints(multi, singles, models)
    one = test_checkpoint_axes(multi)
    # the whole suite above on the model-axis layout (one model): same numbers
    test_figures(one, os.path.join(SCRATCH, "figs-one-layout"), "one-model layout")
    return summary("test_analysis")


if __name__ == "__main__":
    sys.exit(main())
