#!/usr/bin/python3
"""Tests of the Python package (python/): attnsweep.metrics equals the sweep bit for bit on
the same dump, the package installs offline into a clean venv and works there, a missing
kernels library is one line, and the PyTorch hooks example runs on a synthetic model.

usage: test_python.py ATTNSWEEP MODEL_DIR LIBRARY SCRATCH [case ...]
(AS_TEST_SHARED: the shared/ assets folder, default ../shared beside the checkout)
"""
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
sys.path.insert(0, os.path.join(REPO, "python"))
from sweeptest import ENV, check, run_cases, summary  # noqa: E402

BIN, MODEL, LIB, SCRATCH = sys.argv[1:5]
ONLY = set(sys.argv[5:])
PYENV = dict(ENV, ATTNSWEEP_LIB=LIB)
ALL_NORMS = '["softmax", "sparsemax", "ssmax", "sa_softmax", "sa_softmax_norm", "entmax15", ' \
            '"sigmoid", "softmax1"]'


TINY_GRID = "L = [16, 32]; N = [1, 2, 4, 8, 31]; T = [0.01, 1.0, 8.0]; eps = [1e-3, 0.1];"
TOKENS = '{ path = "tokens.npy"; format = "tokens"; }'
SHARED = os.environ.get("AS_TEST_SHARED") or os.path.normpath(os.path.join(REPO, "..", "shared"))
TRAINED = os.path.join(SHARED, "models", "wp-gpt2-4x3")
BOOK = os.path.join(SHARED, "data", "war-and-peace.txt")
START_AT = "\u201cWell, Prince, so Genoa and Lucca"  # Chapter I's first words


def sweep(name, metrics="", model=None, text=TOKENS, grid=TINY_GRID, stride=64):
    """A two-window sweep into NAME.h5 (model: the config's value, quoted; the tiny model on
    random tokens by default)."""
    with open(f"{SCRATCH}/{name}.cfg", "w") as f:
        f.write(f"""model = {model or f'"{MODEL}"'};
text = {text};
windows = {{ count = 2; offset = 0; stride = {stride}; }};
grid = {{ {grid} normalizer = {ALL_NORMS}; }};
output = "{name}.h5";
{metrics}
""")
    p = subprocess.run([BIN, "run", f"{name}.cfg"], env=ENV, cwd=SCRATCH, capture_output=True, text=True)
    check(p.returncode == 0, f"sweep {name}: exit {p.returncode}: {p.stderr[-400:]}")
    return f"{SCRATCH}/{name}.h5"


def run_dump(args, out):
    """`attnsweep dump ARGS --out OUT`: [layer, head, L, *] scores and values, stacked here."""
    d = subprocess.run([BIN, "dump"] + args + ["--out", out], env=ENV, capture_output=True, text=True)
    check(d.returncode == 0, f"dump: {d.stderr}")
    with h5py.File(out, "r") as g:
        layers = sorted(k for k in g if k.startswith("layer_"))
        return (np.stack([g[k]["scores"][()] for k in layers]), np.stack([g[k]["v"][()] for k in layers]))


def dump(window, length=32):
    """The tiny model's dump of window `window` of the random tokens (start 64 * window)."""
    toks = np.load(f"{SCRATCH}/tokens.npy")[64 * window:64 * window + length]
    np.savetxt(f"{SCRATCH}/w{window}.txt", toks[None, :], fmt="%d")
    return run_dump(["--model", MODEL, "--tokens", f"{SCRATCH}/w{window}.txt", "--length", str(length)],
                    f"{SCRATCH}/w{window}.h5")


def compare_file(path, dump_of=None, model=0):
    """Every metric of both windows of model index `model` of the file against
    attnsweep.metrics(stored=True) on the dump of the same window, with the file's axes and
    options (attnsweep.options_of) over the model's own layers and heads: equal bytes (NaN
    payloads too), and the same set of variables."""
    import attnsweep
    options = attnsweep.options_of(path, model)
    cells = 0
    with h5py.File(path, "r") as f:
        def dims(d):
            return [d.dims[i][0].name.rsplit("/", 1)[-1] if len(d.dims[i]) else "" for i in range(d.ndim)]
        # the per-cell metrics: over (model, window, L, ...), bookkeeping aside
        metric_vars = {k for k, d in f.items() if isinstance(d, h5py.Dataset) and d.ndim > 3
                       and dims(d)[:3] == ["model", "window", "L"]
                       and k not in ("wall_time", "rank", "attempts")}
        own = {"layer": np.flatnonzero(f["layer"][()] < f["model_n_layer"][model]),
               "head": np.flatnonzero(f["head"][()] < f["model_n_head"][model])}
        options["layer"], options["head"] = f["layer"][()][own["layer"]], f["head"][()][own["head"]]
        for w in (0, 1):
            scores, v = dump(w) if dump_of is None else dump_of(w, int(f["window_start"][w]))
            ds = attnsweep.metrics(scores, v, window=w, stored=True, **options)
            check(set(ds.data_vars) == metric_vars,
                  f"{path}: variables {sorted(set(ds.data_vars) ^ metric_vars)} differ from the file's")
            for k in sorted(metric_vars & set(ds.data_vars)):
                want = f[k][model, w]
                for axis, name in enumerate(dims(f[k])[2:]):
                    if name in own:
                        want = np.take(want, own[name], axis=axis)
                got = ds[k].values
                same = want.dtype == got.dtype and want.shape == got.shape and want.tobytes() == got.tobytes()
                if not same and want.shape == got.shape:
                    eq = want == got
                    if want.dtype.kind == "f":
                        eq |= np.isnan(want) & np.isnan(got)
                    detail = f"{int((~eq).sum())} of {want.size} differ, first at {np.argwhere(~eq)[:1]}"
                else:
                    detail = f"{want.dtype}{want.shape} vs {got.dtype}{got.shape}"
                check(same, f"{os.path.basename(path)} model {model} window {w} {k}: not bit-identical ({detail})")
                cells += want.size
    print(f"{os.path.basename(path)} model {model}: {cells} values compared", flush=True)


def case_bit_identity():
    """The default reading with all eight normalizers, and every option changed at once
    (full_row, aggregate, scaled logits, sigmoid_bias, entmax_alpha, per_N_T, grad_exact off,
    seed, ks_alpha, ssmax_scale, dist_random with the KS test against it), and dist_random in
    the default reading: the second window checks the window keys of grad_fd and dist_random."""
    os.environ["ATTNSWEEP_LIB"] = LIB
    compare_file(sweep("plain"))
    compare_file(sweep("odd", 'metrics = { rows = "full_row"; distance = "aggregate"; logits = "scaled"; '
                       'sigmoid_bias = -1.5; entmax_alpha = 1.25; per_N_T = [8.0]; grad_exact = false; '
                       'seed = 7; ks_alpha = 0.05; ssmax_scale = 0.3; dist_random = true; '
                       'random_subsets = 8; ks_against = "random"; };'))
    compare_file(sweep("random", 'metrics = { dist_random = true; ks_against = "random"; };'))


def case_bit_identity_trained():
    """The same on trained attention and the book (SHARED/models/wp-gpt2-4x3 on War and Peace,
    L up to 256, N up to 128, T from 1e-3 to 100), and each model of a two-model file (the tiny
    and the trained model): skipped when the assets are absent."""
    missing = [p for p in (os.path.join(TRAINED, "model.safetensors"), BOOK) if not os.path.exists(p)]
    if missing:
        print(f"SKIPPED: trained-model test asset not found: {missing[0]}", flush=True)
        sys.exit(77)
    os.environ["ATTNSWEEP_LIB"] = LIB
    text = f'{{ path = "{BOOK}"; format = "text"; strip_gutenberg = true; start_at = "{START_AT}"; }}'
    grid = "L = [64, 256]; N = [1, 2, 4, 8, 16, 32, 64, 128]; T = [1e-3, 0.1, 1.0, 8.0, 100.0]; eps = [1e-3, 0.1];"

    def dump_of(w, start):
        return run_dump(["--model", TRAINED, "--text", BOOK, "--strip-gutenberg", "--start-at", START_AT,
                         "--window-start", str(start), "--length", "256"], f"{SCRATCH}/t{w}.h5")
    compare_file(sweep("trained", model=f'"{TRAINED}"', text=text, grid=grid, stride=256), dump_of)
    # a model axis of two models with different n_positions (128, 1024): ssmax_scale is
    # resolved per model, and the trained model's 3 heads are its own of the union's 4
    both = sweep("both", model=f'["{MODEL}", "{TRAINED}"]')

    def dump_trained(w, start):
        return run_dump(["--model", TRAINED, "--tokens", f"{SCRATCH}/w{w}.txt", "--length", "32"],
                        f"{SCRATCH}/b{w}.h5")
    compare_file(both, None, 0)
    compare_file(both, dump_trained, 1)


PROBE = r"""
import sys, numpy as np, attnsweep
assert attnsweep.__file__.startswith(sys.prefix), attnsweep.__file__
rng = np.random.default_rng(0)
s = rng.standard_normal((2, 16, 16)).astype(np.float32)
v = rng.standard_normal((2, 16, 8)).astype(np.float32)
ds = attnsweep.metrics(s, v, N=[1, 2], T=[1.0], eps=[1e-3])
assert ds.dist_true.dims == ("L", "N", "T", "normalizer", "layer", "head"), ds.dist_true.dims
r = attnsweep.open(sys.argv[1])
print(ds.attrs["kernels_library"], int(np.isfinite(ds.dist_true).sum()), dict(r.sizes)["model"])
"""


def copy_package(dest):
    shutil.copytree(os.path.join(REPO, "python"), dest,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.so"))


def case_install():
    """pip install --no-index --no-build-isolation into a fresh venv (numpy, xarray, pandas,
    h5netcdf and setuptools from the system's site-packages), every proxy pointing at a closed
    port so that any network access fails; then, from another folder and without
    ATTNSWEEP_LIB, the installed package runs the library it packaged and opens a results file."""
    pkg, venv = f"{SCRATCH}/pkg", f"{SCRATCH}/venv"
    copy_package(pkg)
    p = subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"venv: {p.stderr[-300:]}")
    closed = "http://127.0.0.1:9"
    env = dict(PYENV, http_proxy=closed, https_proxy=closed, HTTP_PROXY=closed, HTTPS_PROXY=closed,
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_CONFIG_FILE=os.devnull)
    env.pop("PIP_FIND_LINKS", None)  # no local wheel folder either: what the venv has, only
    p = subprocess.run([f"{venv}/bin/python", "-m", "pip", "install", "--no-index", "--no-build-isolation",
                        pkg], env=env, capture_output=True, text=True)
    check(p.returncode == 0, f"pip install: exit {p.returncode}: {p.stdout[-600:]} {p.stderr[-600:]}")
    results = sweep("inst")
    env = dict(ENV)
    env.pop("ATTNSWEEP_LIB", None)
    env.pop("PYTHONPATH", None)
    p = subprocess.run([f"{venv}/bin/python", "-c", PROBE, results], env=env, cwd="/",
                       capture_output=True, text=True)
    check(p.returncode == 0, f"installed package: {p.stderr[-800:]}")
    out = p.stdout.split()
    check(len(out) == 3 and out[0].startswith(venv) and out[1] == "4" and out[2] == "1",
          f"installed package: library packaged in the venv, 4 finite dist_true (2 heads x N 1, 2), a model axis: {p.stdout!r}")


def case_missing_library():
    """Without ATTNSWEEP_LIB and with no library beside the package or in its build/: one
    line naming where it looked and how to build it."""
    copy_package(f"{SCRATCH}/bare/python")
    env = dict(ENV, PYTHONPATH=f"{SCRATCH}/bare/python")
    env.pop("ATTNSWEEP_LIB", None)
    code = "import attnsweep, numpy as np; attnsweep.metrics(np.zeros((4, 4)), np.zeros((4, 2)), N=1, T=1.0)"
    p = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True, text=True)
    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
    check(p.returncode != 0 and last.startswith("OSError: attnsweep: libattnsweep_kernels.so not found")
          and "cmake --build build --target attnsweep_kernels_shared" in last,
          f"missing library: {p.stderr[-500:]!r}")
    code = "import attnsweep; print(attnsweep.open.__doc__ is not None)"
    p = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True, text=True)
    check(p.returncode == 0, f"reading results needs no library: {p.stderr[-300:]}")


def case_example():
    """python/examples/torch_hooks.py on the tiny synthetic model: its hooks capture PyTorch's
    scores and values, and its Dataset agrees with attnsweep.metrics on the C forward pass's
    dump of the same window within 1e-3 relative (dist_true, entropy; the two forward passes
    differ in float32 round-off, about 1e-6 relative in the scores)."""
    import attnsweep
    import xarray as xr
    scores, v = dump(0)
    s2, v2, layers = attnsweep.dump_arrays(f"{SCRATCH}/w0.h5")
    check(np.array_equal(s2, scores, equal_nan=True) and np.array_equal(v2, v) and list(layers) == [0, 1],
          "attnsweep.dump_arrays: the dump's layers stacked")
    out = f"{SCRATCH}/example.nc"
    p = subprocess.run(["/usr/bin/python3", os.path.join(REPO, "python", "examples", "torch_hooks.py"),
                        "--model", MODEL, "--tokens", f"{SCRATCH}/w0.txt", "--length", "32", "--out", out],
                       env=PYENV, capture_output=True, text=True)
    check(p.returncode == 0 and "dist_true" in p.stdout, f"example: {p.stdout[-300:]} {p.stderr[-800:]}")
    if p.returncode:
        return
    got = xr.open_dataset(out, engine="h5netcdf").load()
    want = attnsweep.metrics(scores, v, N=[1, 2, 4, 8], T=[1.0, 8.0], eps=[1e-3],
                             normalizer=["softmax", "sparsemax"])
    worst = 0.0
    for k in ("dist_true", "entropy"):
        a, b = got[k].values, want[k].values
        fin = np.isfinite(b)
        check(np.array_equal(fin, np.isfinite(a)) and fin.any(), f"example {k}: the same values defined")
        rel = np.abs(a[fin] - b[fin]) / np.maximum(np.abs(b[fin]), 1e-6)
        worst = max(worst, float(rel.max()))
        check(rel.max() <= 1e-3, f"example {k}: max relative difference {rel.max():.2e} > 1e-3")
    print(f"example: worst relative difference to the C forward pass {worst:.2e}", flush=True)


def case_library_symbols():
    """libattnsweep_kernels.so exports the C ABI of include/kernels/abi.h and nothing else
    (hidden visibility: calls inside bind as in the static build) and needs nothing of MPI,
    HDF5 or libconfig (the kernels layer's rule, for a library a notebook loads)."""
    nm = shutil.which("nm") or "nm"
    out = subprocess.run([nm, "-D", LIB], capture_output=True, text=True, check=True).stdout
    defined = [l.split()[-1] for l in out.splitlines() if len(l.split()) == 3 and l.split()[1] == "T"]
    undefined = [l.split()[-1] for l in out.splitlines() if len(l.split()) == 2 and l.split()[0] == "U"]
    check(defined and all(d.startswith("as_abi_") for d in defined),
          f"exported: only as_abi_* (got {[d for d in defined if not d.startswith('as_abi_')][:5]})")
    bad = [u for u in undefined if u.startswith(("MPI_", "PMPI_", "ompi_", "H5", "config_"))]
    check(not bad, f"the library references MPI, HDF5 or libconfig: {bad[:5]}")


def main():
    if os.path.exists(SCRATCH):
        shutil.rmtree(SCRATCH)
    os.makedirs(SCRATCH)
    rng = np.random.default_rng(5)
    np.save(f"{SCRATCH}/tokens.npy", rng.integers(0, 50257, size=200).astype("<u2"))
    run_cases([case_bit_identity, case_bit_identity_trained, case_install, case_missing_library, case_example,
               case_library_symbols], ONLY, label="case ")
    sys.exit(summary("test_python"))


main()
