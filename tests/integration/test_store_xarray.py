#!/usr/bin/python3
"""The results file as analysts see it (docs/results.md): a small file written by
the C store (tests/integration/store_xarray_writer.c) opened with xarray (engine h5netcdf
and netcdf4) and h5py; values checked against the fixture formula of
tests/lib/store_fixture.h, recomputed here independently:
    value(v, w, Lv, k) = v*10000 + w*1000 + Lv + k/16  (float variables)
                         v*10000 + w*1000 + Lv + k     (rows_used, crit_N)
with k the C-order flat index over the dims after (model, window, L), v the
variable's position in cellresult.h's enum, and k = 0 of dist_bound NaN. The writer
gives no model axis (store_axes.n_model = 0): the file has one model, named "model",
and the checks below look at ds.isel(model=0) as an analyst of a one-model sweep does.

usage: test_store_xarray.py WRITER WORKDIR [ATTNSWEEP]   (Debian's /usr/bin/python3)
"""
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import xarray as xr

VARS = ["dist_true", "dist_bound", "dist_expect", "sep_ratio", "sep_lower", "sep_upper",
        "sep_marginal", "rows_used", "entropy", "entropy_norm", "grad_exact", "grad_bound", "grad_fd",
        "ks_stat", "ks_pvalue", "crit_N"]
INTS = {"rows_used", "crit_N"}
DIMS = {
    **{v: ("window", "L", "N", "T", "normalizer", "layer", "head")
       for v in ["dist_true", "dist_bound", "dist_expect", "sep_ratio", "sep_lower",
                 "sep_upper", "sep_marginal", "rows_used"]},
    **{v: ("window", "L", "T", "normalizer", "layer", "head")
       for v in ["entropy", "entropy_norm", "grad_exact", "grad_bound"]},
    "grad_fd": ("window", "L", "T", "eps", "normalizer", "layer", "head"),
    "ks_stat": ("window", "L", "N", "T", "normalizer"),
    "ks_pvalue": ("window", "L", "N", "T", "normalizer"),
    "crit_N": ("window", "L", "T", "normalizer"),
}
AXES = {"window": [0, 1, 2], "L": [16, 32], "N": [1, 2, 4], "T": [1.0, 8.0],
        "eps": [1e-3, 1e-2], "normalizer": ["softmax", "sparsemax"], "layer": [0, 1],
        "head": [0, 1, 2]}
# (window, L index) -> status written by the writer
STATUS = np.array([[1, 1], [2, 1], [1, 0]])

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def expected(name):
    """The full array the writer should have produced (NaN / fill elsewhere)."""
    v = VARS.index(name)
    inner = [len(AXES[d]) for d in DIMS[name][2:]]
    k = np.arange(int(np.prod(inner))).reshape(inner)
    out = np.full([3, 2] + inner, np.nan)
    for w in range(3):
        for li, Lv in enumerate(AXES["L"]):
            if STATUS[w, li] != 1:
                continue
            base = v * 10000.0 + w * 1000.0 + Lv
            vals = base + (k if name in INTS else k / 16.0)
            if name == "dist_bound":
                vals = vals.astype(float)
                vals.flat[0] = np.nan
            out[w, li] = vals
    return out


def main():
    writer, work = sys.argv[1], sys.argv[2]
    attnsweep = sys.argv[3] if len(sys.argv) > 3 else None
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out = os.path.join(work, "sweep.h5")
    subprocess.run([writer, out], check=True)

    for engine in ["h5netcdf", "netcdf4"]:
        ds = xr.open_dataset(out, engine=engine)
        for d, vals in AXES.items():
            check(list(ds[d].values) == vals, f"{engine}: axis {d} = {list(ds[d].values)}")
        # the model axis (docs/results.md): first dimension, its coordinates decoded by xarray
        check(ds.sizes["model"] == 1 and list(ds.model.values) == ["model"], f"{engine}: model {ds.model.values}")
        for c in ("model_path", "model_sha256", "model_n_layer", "model_n_head", "model_n_embd",
                  "training_step"):
            check(c in ds.coords and ds[c].dims == ("model",), f"{engine}: {c} is a model coordinate")
        check(str(ds.model_path.values[0]) == "/models/gpt2" and int(ds.training_step[0]) == -1,
              f"{engine}: model_path {ds.model_path.values}, training_step {ds.training_step.values}")
        check(ds.head_valid.dims == ("model", "layer", "head") and bool((ds.head_valid == 1).all()),
              f"{engine}: head_valid {ds.head_valid.values}")
        for name in VARS:
            check(ds[name].dims == ("model",) + DIMS[name], f"{engine}: {name} dims {ds[name].dims}")
        full = ds
        ds = ds.isel(model=0)
        for name in VARS:
            got = ds[name].values.astype(float)
            check(np.array_equal(got, expected(name), equal_nan=True),
                  f"{engine}: {name} values differ from the formula")
            check("long_name" in ds[name].attrs, f"{engine}: {name} has long_name")
        check(ds.dist_true.dtype == np.float32 and ds.ks_stat.dtype == np.float64,
              f"{engine}: metric dtypes {ds.dist_true.dtype} {ds.ks_stat.dtype}")
        check(ds.window_start.dtype == np.int64 and list(ds.window_start.values) == [0, 512, 1024],
              f"{engine}: window_start {ds.window_start.values}")
        check(ds.status.dtype == np.uint8 and np.array_equal(ds.status.values, STATUS),
              f"{engine}: status {ds.status.values}")
        check(list(ds.status.attrs["flag_values"]) == [0, 1, 2] and
              ds.status.attrs["flag_meanings"] == "pending done failed", f"{engine}: status flags")
        check(np.array_equal(ds.attempts.values, (STATUS != 0).astype(int)),
              f"{engine}: attempts {ds.attempts.values}")
        wall = ds.wall_time.values
        check(wall[0, 0] == 1.5 and wall[2, 0] == 3.5 and np.isnan(wall[2, 1]) and
              wall[1, 0] == 1.5, f"{engine}: wall_time {wall}")
        rank = ds["rank"].values  # ds.rank is xarray's Dataset.rank method
        check(rank[0, 0] == 1 + 16 % 3 and rank[1, 0] == 1 and np.isnan(rank[2, 1]),
              f"{engine}: rank {rank}")

        # The analyst's idioms of docs/results.md.
        sel = ds.dist_true.sel(T=8.0, N=2).mean(("layer", "head"))
        e = expected("dist_true")[:, :, 1, 1].mean(axis=(-2, -1))  # N=2 -> 1, T=8 -> 1
        check(np.allclose(sel.values, e, equal_nan=True), f"{engine}: sel(T=8, N=2).mean")
        one = float(ds.dist_true.sel(window=2, L=16, N=4, T=1.0, normalizer="sparsemax",
                                     layer=1, head=2))
        k = np.ravel_multi_index((2, 0, 1, 1, 2), (3, 2, 2, 2, 3))
        check(one == 0 * 10000 + 2 * 1000 + 16 + k / 16.0, f"{engine}: one labelled value {one}")
        done = ds.where(ds.status == 1)
        check(int(done.dist_true.isel(N=0, T=0, normalizer=0, layer=0, head=0).count()) == 4,
              f"{engine}: where(status == 1) keeps 4 cells")
        df = ds.dist_true.to_dataframe()
        check(len(df) == 3 * 2 * 3 * 2 * 2 * 2 * 3, f"{engine}: dataframe rows {len(df)}")
        row = df.loc[(0, 32, 1, 8.0, "softmax", 0, 1), "dist_true"]
        k = np.ravel_multi_index((0, 1, 0, 0, 1), (3, 2, 2, 2, 3))
        check(row == 1000 * 0 + 32 + k / 16.0, f"{engine}: dataframe row {row}")

        for key in ["program_version", "git_commit", "git_dirty", "config_text", "config_sha256",
                    "model_dir", "weights_sha256", "text_path", "text_sha256", "tokenizer_files",
                    "created", "hdf5_version", "mpi_library", "openblas_config", "vectors",
                    "rows", "ks_alpha", "seed", "dist_bound_note", "separability_bounds_note"]:
            check(key in ds.attrs, f"{engine}: root attribute {key}")
        check(ds.attrs["config_text"] == 'model = "gpt2";\n', f"{engine}: config_text")
        check(ds.attrs["vectors"] == "value" and ds.attrs["rows"] == "visible" and
              ds.attrs["seed"] == 12345 and ds.attrs["ks_alpha"] == 0.05, f"{engine}: options")
        check("reconstruct" in ds.attrs["dist_bound_note"], f"{engine}: reconstruction noted")
        prov = xr.open_dataset(out, engine=engine, group="provenance")
        check(prov.sizes["segment"] == 1 and int(prov.cells_done[0]) == 5 and
              int(prov.mpi_size[0]) == 4 and str(prov.hosts.values[0]) == "testhost",
              f"{engine}: provenance {prov}")
        check(not np.isnat(prov.end.values[0]), f"{engine}: segment end recorded")
        prov.close()
        full.close()

    with h5py.File(out, "r") as f:
        check(f["dist_true"].dims[0][0].name == "/model", f"h5py dims[0] {f['dist_true'].dims[0][0]}")
        check(f["dist_true"].dims[1][0].name == "/window", f"h5py dims[1] {f['dist_true'].dims[1][0]}")
        check(f["dist_true"].dims[7][0].name == "/head", "h5py dims[7]")
        check(f["grad_fd"].dims[4][0].name == "/eps", "h5py grad_fd eps")
        check(f["status"].dims[2][0].name == "/L", "h5py status L")
        check(np.isnan(f["dist_true"].fillvalue) and np.isnan(f["dist_true"].attrs["_FillValue"]),
              "NaN fill and _FillValue")
        check(f["dist_true"].chunks == (1, 1, 1, 3, 2, 2, 2, 3), f"chunks {f['dist_true'].chunks}")
        check(f["normalizer"].dtype.kind == "O", "normalizer is a vlen string")

    if attnsweep:
        r = subprocess.run([attnsweep, "status", out], capture_output=True, text=True)
        check(r.returncode == 3 and "1/3 windows done" in r.stdout and "cells (window x L) 4/6 done, 1 failed" in r.stdout,
              f"status command: rc {r.returncode}: {r.stdout} {r.stderr}")
        for side in [".journal", ".status"]:
            os.unlink(out + side)
        r = subprocess.run([attnsweep, "status", out], capture_output=True, text=True)
        check(r.returncode == 3 and "cells (window x L) 4/6 done" in r.stdout,
              f"status from HDF5 only: rc {r.returncode}: {r.stdout} {r.stderr}")

    shutil.rmtree(work, ignore_errors=True)
    print(f"test_store_xarray: {'FAILED ' + str(len(failures)) if failures else 'all passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
