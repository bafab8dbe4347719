#!/usr/bin/python3
"""Load an attnsweep results file (docs/results.md) for analysis.

    import sys; sys.path.insert(0, "analysis")
    import attnsweep_results as ar
    ds = ar.load("sweep.h5")      # xarray Dataset, unfinished cells masked to NaN

load() is the one entry point the figures use: every metric variable is NaN
wherever the (model, window, L) cell is not finished (status != 1) and at every
(layer, head) a model does not have (head_valid == 0), so a partial or resumed
sweep can be plotted at any time without mixing in stale numbers. Every
Dataset it returns has the `model` dimension first (docs/results.md): a file
written before the model axis existed gets one of size 1, named after its
model_dir. The helpers below pick the slices the paper's figures need (one
model, native temperature, mean over heads, spread across windows).

CLI: python3 analysis/attnsweep_results.py RESULTS.h5  -- prints a summary.
"""
import argparse
import os
import sys

# restart under /usr/bin/python3 when this interpreter lacks the packages (debian_python.py)
if __name__ == "__main__":
    import debian_python
    debian_python.require("matplotlib", "xarray", "h5netcdf")

import numpy as np
import xarray as xr

STATUS_DONE = 1
NATIVE_T = 8.0  # GPT-2 attends with softmax(q.k / sqrt(64)): T = 8 on raw logits

# Per-cell bookkeeping: kept as written (they describe the attempt, not the
# science), so status != 1 cells still show which rank tried and how long.
BOOKKEEPING = ("status", "wall_time", "rank", "attempts", "window_start", "head_valid")

HEAD_DIMS = ("layer", "head")

# The model axis (docs/results.md): per-model auxiliary coordinates, and which (layer, head)
# each model has (head_valid: 1 present, 0 masked -- the union of the models' heads is stored)
MODEL_COORDS = ("model_path", "model_sha256", "model_config_sha256", "model_kind", "model_family",
                "model_n_layer", "model_n_head", "model_n_embd", "training_step")
HEAD_PRESENT = 1

# What the file's model_kind attribute says, in words (figure titles, summary.csv): a
# synthetic or trained model is never called GPT-2
MODEL_KINDS = {"synthetic-random": "SYNTHETIC model with random weights (not GPT-2)",
               "gpt2": "GPT-2",
               "other": "a trained model, not GPT-2",
               "mixed": "models of different kinds (each model's kind is in its figures)"}


def _open(path):
    """Open with h5netcdf (the engine docs/results.md promises), else netCDF4."""
    errors = []
    for engine in ("h5netcdf", "netcdf4"):
        try:
            return xr.open_dataset(path, engine=engine)
        except Exception as exc:  # noqa: BLE001 -- report both engines' reasons
            errors.append(f"{engine}: {exc}")
    raise OSError(f"{path}: cannot open as a results file ({'; '.join(errors)})")


def metric_names(ds):
    """Variables that hold per-cell results (everything over window x L but bookkeeping)."""
    return [name for name, var in ds.data_vars.items()
            if "window" in var.dims and "L" in var.dims and name not in BOOKKEEPING]


def _model_name(model_dir):
    """A model's name: its directory's basename (what the program stores in `model`)."""
    return os.path.basename(str(model_dir).rstrip("/")) or "model"


def _add_model_axis(ds):
    """A file from before the model axis, as a one-model file of today's layout: every cell
    variable gets a leading `model` dimension of size 1, the model coordinates come from the
    root attributes (training_step -1: not given), every head is present."""
    model_dir = str(ds.attrs.get("model_dir", ""))
    for name, var in list(ds.data_vars.items()):
        if "window" in var.dims and "L" in var.dims:
            ds[name] = var.expand_dims("model", axis=0)
    ds = ds.assign_coords(model=("model", [_model_name(model_dir)]),
                          model_path=("model", [model_dir]),
                          model_sha256=("model", [str(ds.attrs.get("weights_sha256", ""))]),
                          training_step=("model", np.array([-1], dtype="int64")))
    shape = (1, ds.sizes.get("layer", 1), ds.sizes.get("head", 1))
    ds["head_valid"] = (("model", "layer", "head"), np.full(shape, HEAD_PRESENT, dtype="uint8"))
    return ds


def load(path):
    """Dataset of the results file with every metric NaN where status != 1 and where
    head_valid == 0 (a (layer, head) that model does not have).

    Always has the `model` dimension (size 1 for an old file without it) and the model
    coordinates of MODEL_COORDS that the file holds, decoded as coordinates.
    Integer metrics (crit_N, rows_used) become float so they can hold NaN.
    crit_N is NaN where no N of the grid passed the KS test, and crit_N_censored is 1
    there (0 where crit_N was found): a file from before crit_N_censored, which stored -1,
    gets the same form (censored_crit_N; docs/results.md).
    The data are read into memory and the file is closed.
    """
    with _open(path) as raw:
        ds = raw.load()
    if "status" not in ds:
        raise ValueError(f"{path}: no 'status' variable: not an attnsweep results file")
    if "model" not in ds["status"].dims:
        ds = _add_model_axis(ds)
    # coordinates even when a writer left them out of a variable's CF `coordinates` attribute
    ds = ds.set_coords([c for c in MODEL_COORDS if c in ds.data_vars])
    done = ds["status"] == STATUS_DONE
    present = ds["head_valid"] == HEAD_PRESENT if "head_valid" in ds.variables else None
    for name in metric_names(ds):
        var = ds[name]
        if var.dtype.kind != "f":
            var = var.astype("float64")
        keep = done  # broadcasts the (model, window, L) mask over the other dims
        if present is not None and all(d in var.dims for d in ("model",) + HEAD_DIMS):
            keep = keep & present
        ds[name] = var.where(keep)
    ds = censored_crit_N(ds)
    ds.attrs["source_path"] = str(path)
    return ds


def censored_crit_N(ds):
    """crit_N with "no N of the grid passed" as a censoring flag, never as a number: NaN in
    crit_N and 1 in crit_N_censored (0: found, NaN: not computed). Files written before
    crit_N_censored existed held -1 in crit_N; those become the same form."""
    if "crit_N" not in ds:
        return ds
    crit = ds["crit_N"]
    if "crit_N_censored" not in ds:
        flag = xr.where(crit == -1, 1.0, 0.0).where(np.isfinite(crit))
        ds["crit_N_censored"] = flag.assign_attrs(
            long_name="1 where no N of the grid passed the Kolmogorov-Smirnov test, 0 where "
                      "crit_N was found (derived from crit_N = -1 of an older file)", units="1")
    ds["crit_N"] = crit.where(crit >= 0)
    return ds


def crit_N_lower_bound(ds):
    """Per censored entry, the largest N whose KS p-value was computed: the critical N is at
    least that (N of the grid at or above L have no p-value). NaN where crit_N was found or
    not computed."""
    tested = ds["N"].where(np.isfinite(ds["ks_pvalue"])).max("N")
    return tested.where(ds["crit_N_censored"] == 1)


def model_names(ds):
    """The names on the model axis, in file order."""
    return [str(v) for v in ds["model"].values]


def model_kinds(ds):
    """model_kind per model: a per-model variable when the file has one, else the root
    attribute (one kind for every model); "unknown" when neither says."""
    if "model_kind" in ds.variables and "model" in ds["model_kind"].dims:
        return [str(v) for v in ds["model_kind"].values]
    return [str(ds.attrs.get("model_kind", "unknown"))] * ds.sizes["model"]


def model_families(ds):
    """model_family per model (gpt2, gpt_neox, llama, qwen2: config.json's model_type);
    "unknown" for a file that does not record it (written before the families)."""
    if "model_family" not in ds.variables:
        return ["unknown"] * ds.sizes["model"]
    return [str(v) or "unknown" for v in ds["model_family"].values]


def training_steps(ds):
    """training_step per model (-1: not given), as int64."""
    if "training_step" not in ds.variables:
        return np.full(ds.sizes["model"], -1, dtype="int64")
    return np.asarray(ds["training_step"].values, dtype="int64")


def select_model(ds, m):
    """The one-model Dataset of model index m, as a single-model file of it would read:
    no model dimension, only the layers and heads it has (head_valid), and its root
    attributes model_dir / weights_sha256 / model_kind / model_family set from the model coordinates."""
    one = ds.isel(model=m)
    if "head_valid" in one.variables:
        valid = np.asarray(one["head_valid"].values) == HEAD_PRESENT
        one = one.isel(layer=np.flatnonzero(valid.any(axis=1)),
                       head=np.flatnonzero(valid.any(axis=0)))
    one.attrs = dict(ds.attrs)
    if "model_path" in one.variables:
        one.attrs["model_dir"] = str(one["model_path"].values)
    if "model_sha256" in one.variables:
        one.attrs["weights_sha256"] = str(one["model_sha256"].values)
    one.attrs["model_kind"] = model_kinds(ds)[m]
    one.attrs["model_family"] = model_families(ds)[m]
    one.attrs["model_name"] = model_names(ds)[m]
    return one


def nearest(ds, dim, value):
    """The coordinate value of `dim` closest to `value` (in log space for T and eps)."""
    coords = np.asarray(ds[dim].values, dtype=float)
    if dim in ("T", "eps") and value > 0 and np.all(coords > 0):
        idx = int(np.argmin(np.abs(np.log(coords) - np.log(value))))
    else:
        idx = int(np.argmin(np.abs(coords - value)))
    return ds[dim].values[idx]


def native_T(ds, target=NATIVE_T):
    """The T of the grid closest to GPT-2's native temperature 8."""
    return float(nearest(ds, "T", target))


def default_normalizer(ds):
    """softmax when the axis has it (the paper's setting), else the first entry."""
    names = [str(v) for v in ds["normalizer"].values]
    return "softmax" if "softmax" in names else names[0]


def head_mean(da):
    """Mean over every (layer, head) present, skipping NaN heads."""
    dims = [d for d in HEAD_DIMS if d in da.dims]
    return da.mean(dims, skipna=True)


def window_spread(da, band="std"):
    """(mean, low, high) over the window axis.

    band "std": mean -+ one standard deviation (ddof 0); "quantile": the
    10% and 90% quantiles. NaN windows (unfinished cells) are skipped.
    """
    mean = da.mean("window", skipna=True)
    if band == "std":
        std = da.std("window", skipna=True)
        return mean, mean - std, mean + std
    if band == "quantile":
        return (mean, da.quantile(0.1, dim="window", skipna=True).drop_vars("quantile"),
                da.quantile(0.9, dim="window", skipna=True).drop_vars("quantile"))
    raise ValueError(f"window_spread: band '{band}' is neither 'std' nor 'quantile'")


def cells_done(ds):
    """(finished, failed, total) count of (model, window, L) cells."""
    status = np.asarray(ds["status"].values)
    return int((status == STATUS_DONE).sum()), int((status == 2).sum()), int(status.size)


def _axis_text(ds, dim):
    vals = ds[dim].values
    if vals.dtype.kind == "f":
        shown = ", ".join(f"{v:g}" for v in vals)
    else:
        shown = ", ".join(str(v) for v in vals)
    return f"{dim:<10} [{len(vals)}] {shown}"


PROVENANCE_KEYS = ("program_version", "git_commit", "git_dirty", "created", "model_dir",
                   "weights_sha256", "text_path", "text_sha256", "config_sha256",
                   "vectors", "rows", "logits", "model_kind", "ks_alpha", "seed", "hdf5_version", "mpi_library")


def summary(ds):
    """Multi-line text: axes, cells done / total, provenance highlights."""
    done, failed, total = cells_done(ds)
    lines = [f"results file: {ds.attrs.get('source_path', '?')}", "axes:"]
    lines += ["  " + _axis_text(ds, d) for d in
              ("model", "window", "L", "N", "T", "eps", "normalizer", "layer", "head")
              if d in ds.coords]
    steps = training_steps(ds)
    for m, name in enumerate(model_names(ds)):
        size = ", ".join(f"{k[6:]} {int(ds[k].values[m])}" for k in
                         ("model_n_layer", "model_n_head", "model_n_embd") if k in ds.variables)
        lines.append(f"  model {m}: {name}" + (f", step {steps[m]}" if steps[m] >= 0 else "")
                     + (f", {size}" if size else "") + f", kind {model_kinds(ds)[m]}"
                     + f", family {model_families(ds)[m]}")
    status = ds["status"].transpose("model", "window", "L")
    lines.append(f"cells (model x window x L): {done} done, {failed} failed, "
                 f"{total - done - failed} pending, {total} total")
    pending = list(zip(*np.nonzero(np.asarray(status.values) != STATUS_DONE)))
    if pending:
        multi = ds.sizes["model"] > 1
        shown = ", ".join((f"({ds.model.values[m]}, " if multi else "(")
                          + f"w{ds.window.values[w]}, L{ds.L.values[L]})"
                          for m, w, L in pending[:8])
        lines.append(f"  unfinished: {shown}{' ...' if len(pending) > 8 else ''}")
    lines.append("provenance:")
    for key in PROVENANCE_KEYS:
        if key in ds.attrs:
            lines.append(f"  {key:<16} {ds.attrs[key]}")
    return "\n".join(lines)


def provenance_segments(path):
    """The /provenance group (one row per run segment) as a pandas DataFrame, or None."""
    import h5py
    import pandas as pd
    with h5py.File(path, "r") as f:
        if "provenance" not in f:
            return None
        grp = f["provenance"]
        cols = {}
        for key in grp:
            vals = grp[key][()]
            if vals.dtype.kind in "OS":
                vals = [v.decode() if isinstance(v, bytes) else str(v) for v in vals]
            cols[key] = vals
    df = pd.DataFrame(cols)
    # start / end as readable UTC times (the file holds seconds since the epoch; NaN: the
    # segment never ended, e.g. it was killed)
    for key in ("start", "end"):
        if key in df and df[key].dtype.kind == "f":
            df[key] = pd.to_datetime(df[key], unit="s", utc=True).dt.round("s")
    return df


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Print a summary of an attnsweep results file: axes, cells done, provenance.")
    parser.add_argument("results", help="results file written by `attnsweep run`")
    args = parser.parse_args(argv)
    try:
        ds = load(args.results)
    except (OSError, ValueError) as exc:
        print(f"attnsweep_results: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    print(summary(ds))
    segments = provenance_segments(args.results)
    if segments is not None and len(segments):
        print("run segments:")
        print(segments.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
