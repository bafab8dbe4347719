#!/usr/bin/python3
"""Load an attnsweep results file (docs/results.md) for analysis.

    import sys; sys.path.insert(0, "analysis")
    import attnsweep_results as ar
    ds = ar.load("sweep.h5")      # xarray Dataset, unfinished cells masked to NaN
    ds = ar.load("sweep.h5", model="wp-gpt2-4x3-step400")  # one model of a model axis
    ds = ar.load("sweep.h5", model=None)  # every model (the `model` dimension kept)

load() is the one entry point the figures use: every metric variable is NaN
wherever the (window, L) cell is not finished (status != 1), so a partial or
resumed sweep can be plotted at any time without mixing in stale numbers.
The helpers below pick the slices the paper's figures need (native
temperature, mean over heads, spread across windows).

CLI: python3 analysis/attnsweep_results.py RESULTS.h5  -- prints a summary.
"""
import argparse
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
BOOKKEEPING = ("status", "wall_time", "rank", "attempts", "window_start")

HEAD_DIMS = ("layer", "head")


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


def select_model(ds, model):
    """ds.isel(model=...) for an index, ds.sel(model=...) for a name; the masked
    (layer, head) of a smaller model (head_valid == 0) are dropped from its layer and
    head axes when whole rows of them are masked."""
    if "model" not in ds.dims:
        return ds
    if isinstance(model, str):
        names = [str(v) for v in ds["model"].values]
        if model not in names:
            raise ValueError(f"model {model!r} is not in the file (models: {', '.join(names)})")
        ds = ds.sel(model=model)
    else:
        ds = ds.isel(model=int(model))
    if "head_valid" in ds:
        valid = np.asarray(ds["head_valid"].values) == 1
        ds = ds.isel(layer=np.nonzero(valid.any(axis=1))[0], head=np.nonzero(valid.any(axis=0))[0])
    return ds


def load(path, model=0):
    """Dataset of the results file with every metric NaN where status != 1.

    Integer metrics (crit_N, rows_used) become float so they can hold NaN;
    crit_N keeps -1 for "no N of the grid qualifies" (docs/metrics.md section 5).
    The data are read into memory and the file is closed.
    model: which model of the file's model axis (docs/results.md): an index or a name,
    selected so the result has no `model` dimension (the figures' view of one model);
    None keeps every model.
    """
    with _open(path) as raw:
        ds = raw.load()
    if "status" not in ds:
        raise ValueError(f"{path}: no 'status' variable: not an attnsweep results file")
    if model is not None:
        ds = select_model(ds, model)
    done = ds["status"] == STATUS_DONE
    for name in metric_names(ds):
        var = ds[name]
        if var.dtype.kind != "f":
            var = var.astype("float64")
        ds[name] = var.where(done)  # broadcasts the (window, L) mask over the other dims
    ds.attrs["source_path"] = str(path)
    return ds


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
    """(finished, failed, total) count of (window, L) cells."""
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
    lines = [f"results file: {ds.attrs.get('source_path', '?')}"]
    if "model" in ds.coords:  # one model selected (load's default) or the whole model axis
        names = [str(v) for v in np.atleast_1d(ds["model"].values)]
        lines.append(f"model{'s' if len(names) > 1 else ''}: {', '.join(names)}")
    lines.append("axes:")
    lines += ["  " + _axis_text(ds, d) for d in
              ("window", "L", "N", "T", "eps", "normalizer", "layer", "head") if d in ds.coords]
    lines.append(f"cells (window x L): {done} done, {failed} failed, "
                 f"{total - done - failed} pending, {total} total")
    status = np.asarray(ds["status"].values)
    status = status.reshape((-1,) + status.shape[-2:])  # (model, window, L) -> rows of (window, L)
    pending = sorted({(int(w), int(L)) for _m, w, L in zip(*np.nonzero(status != STATUS_DONE))})
    if pending:
        shown = ", ".join(f"(w{ds.window.values[w]}, L{ds.L.values[L]})" for w, L in pending[:8])
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
