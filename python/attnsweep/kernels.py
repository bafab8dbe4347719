"""attnsweep.metrics: the sweep's per-head metrics, KS test and crit_N of captured attention,
computed by the C kernels (libattnsweep_kernels.so, attnsweep._native), as an xarray Dataset
with the results file's variable names and dimensions (docs/results.md, docs/metrics.md).

Given the same float32 scores and vectors as a sweep's cell (`attnsweep dump` writes them),
the same axes and options, every value equals the sweep's in double; with stored=True it is
converted to the file's types (float32, int32 with the fill -2147483647, float64) as the
store converts it, and equals the file bit for bit (ctest python_bit_identity).
"""
import ctypes

import numpy as np
import xarray as xr

from . import _native

INT_FILL = -2147483647                      # the file's int32 fill (docs/results.md)
INT_VARS = ("rows_used", "crit_N", "crit_N_censored")   # int32 in the file
F64_VARS = ("ks_stat", "ks_pvalue")          # float64 in the file; the other metrics float32
# cr_shape of include/core/cellresult.h -> the dimensions after L
SHAPE_DIMS = {0: ("N", "T", "normalizer", "layer", "head"), 1: ("T", "normalizer", "layer", "head"),
              2: ("T", "eps", "normalizer", "layer", "head"), 3: ("N", "T", "normalizer"),
              4: ("T", "normalizer")}
ROWS = {"visible": 0, "full_row": 1}
DISTANCE = {"per_token": 0, "aggregate": 1}
LOGITS = ("raw", "scaled")


def _array(x, name):
    """A float32 C-contiguous numpy array of x (numpy, or a torch tensor on any device)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().float().numpy()
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if a.ndim < 2:
        raise ValueError(f"{name}: needs at least [L, L] / [L, dim], got shape {a.shape}")
    return a


def _list(x, dtype, name):
    a = np.ascontiguousarray(np.atleast_1d(np.asarray(x, dtype=dtype)))
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name}: one value or a list of values, got {x!r}")
    return a


def _shapes(scores, vectors):
    """scores as [n_layer, n_head, L, L] and vectors as [n_layer, n_head or 1, L, dim], with
    the layer and head strides of the vectors in floats (head stride 0: one block per layer,
    shared by its heads, as vectors = "resid")."""
    if scores.ndim > 4 or scores.shape[-1] != scores.shape[-2]:
        raise ValueError(f"scores: shape [layer,] [head,] L, L expected, got {scores.shape}")
    s = scores.reshape((1,) * (4 - scores.ndim) + scores.shape)
    n_layer, n_head, L = s.shape[:3]
    dim = vectors.shape[-1]
    if vectors.ndim == scores.ndim and vectors.shape[:-1] == scores.shape[:-1]:
        return s, vectors.reshape(n_layer, n_head, L, dim), n_head * L * dim, L * dim
    if vectors.ndim == scores.ndim - 1 >= 2 and vectors.shape[:-1] == scores.shape[:-3] + (L,):
        return s, vectors.reshape(n_layer, 1, L, dim), L * dim, 0
    raise ValueError(f"vectors: shape {vectors.shape} does not go with scores {scores.shape}: "
                     "give one [L, dim] per head (the same leading shape), or one per layer "
                     "(shared by its heads)")


def _options(lib, N, T, eps, norm, per_N_T, kw):
    """as_abi_options for the call; the arrays it points into are returned with it (alive)."""
    names = [lib.as_abi_normalizer_name(z).decode() for z in range(lib.as_abi_normalizer_count())]
    bad = [z for z in norm if z not in names]
    if bad:
        raise ValueError(f"normalizer {bad[0]!r} is not one of {', '.join(names)}")
    zs = np.array([names.index(z) for z in norm], dtype=np.int32)
    pn = None
    if per_N_T is not None:
        want = set(float(t) for t in np.atleast_1d(per_N_T))
        pn = np.array([float(t) in want for t in T], dtype=np.uint8)
    o = _native.Options(size=ctypes.sizeof(_native.Options), version=_native.ABI_VERSION)
    o.N, o.n_N = N.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), N.size
    o.T, o.n_T = T.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), T.size
    o.eps, o.n_eps = eps.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), eps.size
    o.normalizer, o.n_norm = zs.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), zs.size
    if pn is not None:
        o.per_N_T = pn.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
    for k, v in kw.items():
        setattr(o, k, v)
    return o, (zs, pn)


def _censor(data):
    """crit_N = -1 ("no N of the grid passed") becomes missing, with crit_N_censored = 1 (0 where
    one was found, missing where the KS test was not computed), as the store packs a cell."""
    if "crit_N" not in data:
        return
    dims, c = data["crit_N"]
    data["crit_N"] = (dims, np.where(c == -1, np.nan, c))
    data["crit_N_censored"] = (dims, np.where(np.isnan(c), np.nan, (c == -1).astype(np.float64)))


def _stored(name, x):
    """x converted to the file's type of variable name, as the store converts (src/store/schema.c)."""
    if name in INT_VARS:
        bad = np.isnan(x) | (x > 2147483647.0) | (x < -2147483647.0)
        r = np.where(bad, 0.0, np.sign(x) * np.floor(np.abs(x) + 0.5))  # llround
        return np.where(bad, INT_FILL, r).astype(np.int32)
    return x.astype(np.float64 if name in F64_VARS else np.float32)


def metrics(scores, vectors, *, N, T, eps=(1e-3, 1e-1, 10.0), normalizer="softmax", L=None,
            layer=None, head=None, rows="visible", distance="per_token", logits="raw",
            d_head=None, ssmax_scale=0.0, entmax_alpha=1.5, sigmoid_bias=None, seed=1, window=0,
            ks_alpha=0.01, per_N_T=None, grad_exact=True, dist_expect=True, dist_random=False,
            random_subsets=32, ks_against="expect", stored=False):
    """The metrics of one cell for the given heads.

    scores  [layer,] [head,] L, L: raw logits q_t . k_j, no 1/sqrt(d_head) (j > t never read)
    vectors the same leading shape with [L, dim] (value vectors: metrics.vectors = "value"), or
            one [L, dim] per layer shared by its heads (the ln_1 output: "resid")
    N, T, eps, normalizer: the axes (grid.*), kept in the order given
    L       context lengths: means over the rows t < L (default: the whole window)
    layer, head: the model's layer and head numbers of the inputs (default 0, 1, ...): they
            key grad_fd's random directions with seed and window (docs/metrics.md section 7)
    rows, distance, logits, ssmax_scale, entmax_alpha, sigmoid_bias, seed, ks_alpha, per_N_T,
    grad_exact, dist_expect, dist_random, random_subsets, ks_against: the config's metrics.*
            keys (configs/example.cfg). ssmax_scale
            0 means 1/ln 1024; the sweep resolves 0 to 1/ln n_positions of the model, so pass
            that for a model whose n_positions is not 1024. logits = "scaled" needs d_head when
            the vectors are shared per layer.
    stored  False: values in double (rows_used, crit_N as float, NaN where missing); True:
            the file's types and fills.
    The KS test and crit_N are taken across all given heads, as the sweep does per model.
    Returns an xarray Dataset over (L, N, T, eps, normalizer, layer, head).
    """
    lib = _native.library()
    s, v, layer_stride, head_stride = _shapes(_array(scores, "scores"), _array(vectors, "vectors"))
    n_layer, n_head, Lw, dim = s.shape[0], s.shape[1], s.shape[2], v.shape[3]
    N = _list(N, np.int32, "N")
    T, eps = _list(T, np.float64, "T"), _list(eps, np.float64, "eps")
    norm = [normalizer] if isinstance(normalizer, str) else list(normalizer)
    cuts = _list(Lw if L is None else L, np.uint64, "L")
    lids = _list(np.arange(n_layer) if layer is None else layer, np.int64, "layer")
    hids = _list(np.arange(n_head) if head is None else head, np.int64, "head")
    if lids.size != n_layer or hids.size != n_head:
        raise ValueError(f"layer/head: {lids.size} layer and {hids.size} head numbers for "
                         f"{n_layer} layers x {n_head} heads of scores")
    if rows not in ROWS or distance not in DISTANCE or logits not in LOGITS:
        raise ValueError(f"rows {rows!r} (visible|full_row), distance {distance!r} "
                         f"(per_token|aggregate), logits {logits!r} (raw|scaled): one is unknown")
    if ks_against not in ("expect", "random") or (ks_against == "random" and not dist_random):
        raise ValueError(f"ks_against {ks_against!r}: 'expect', or 'random' with dist_random=True")
    if dist_random and int(random_subsets) < 2:
        raise ValueError(f"random_subsets {random_subsets}: at least 2 (a standard error needs two)")
    if logits == "scaled" and d_head is None and head_stride == 0:
        raise ValueError("logits='scaled' with vectors shared per layer: give d_head")
    opt, keep = _options(lib, N, T, eps, norm, per_N_T, dict(
        ssmax_scale=float(ssmax_scale), entmax_alpha=float(entmax_alpha),
        sigmoid_bias_set=int(sigmoid_bias is not None),
        sigmoid_bias=float(sigmoid_bias or 0.0), full_row=ROWS[rows], aggregate=DISTANCE[distance],
        scaled_d_head=(int(d_head or dim) if logits == "scaled" else 0),
        grad_exact=int(bool(grad_exact)), dist_expect=int(bool(dist_expect)),
        seed=int(seed), window=int(window), ks_alpha=float(ks_alpha),
        random_subsets=int(random_subsets) if dist_random else 0,
        ks_random=int(ks_against == "random")))
    nv = lib.as_abi_nvars()
    offset = (ctypes.c_uint64 * nv)()
    total = lib.as_abi_layout(offset, N.size, T.size, eps.size, len(norm), n_layer, n_head)
    out = np.empty((cuts.size, total), dtype=np.float64)
    err = ctypes.create_string_buffer(1024)
    fp = ctypes.POINTER(ctypes.c_float)
    rc = lib.as_abi_cell(out.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                         s.ctypes.data_as(fp), v.ctypes.data_as(fp), n_layer, n_head, Lw, dim,
                         layer_stride, head_stride,
                         lids.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
                         hids.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
                         cuts.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)), cuts.size,
                         ctypes.byref(opt), err, len(err))
    del keep
    if rc:
        raise ValueError(f"attnsweep.metrics: {err.value.decode(errors='replace')}")
    sizes = {"N": N.size, "T": T.size, "eps": eps.size, "normalizer": len(norm), "layer": n_layer,
             "head": n_head}
    data = {}
    ends = list(offset[1:]) + [total]
    for i in range(nv):
        dims = SHAPE_DIMS.get(lib.as_abi_var_shape(i))
        if dims is None:
            continue  # wall_time, rank: bookkeeping of a sweep
        if ends[i] == offset[i]:
            continue  # a variable of sampled sweeps only (metrics.query_rows): not in this block
        name = lib.as_abi_var_name(i).decode()
        count = int(np.prod([sizes[d] for d in dims]))
        data[name] = (("L",) + dims,
                      out[:, offset[i]:offset[i] + count].reshape((cuts.size,) + tuple(sizes[d] for d in dims)))
    _censor(data)
    for name, (dims, x) in data.items():
        data[name] = (dims, _stored(name, x) if stored else x.copy())
    coords = {"L": cuts.astype(np.int32), "N": N, "T": T, "eps": eps, "normalizer": norm,
              "layer": lids.astype(np.int32), "head": hids.astype(np.int32), "window": int(window)}
    attrs = {"rows": rows, "distance": distance, "logits": logits, "seed": int(seed),
             "ks_alpha": float(ks_alpha), "kernels_library": lib.path,
             "source": "attnsweep.metrics: the sweep's kernels (libattnsweep_kernels.so)"}
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    for name in INT_VARS if stored else ():
        if name in ds:
            ds[name].encoding["_FillValue"] = INT_FILL  # written as the file writes it
    return ds


def _config_value(text):
    """One value of the canonical config: a string, a number, a boolean or a list of them."""
    text = text.strip()
    if text.startswith("["):
        return [_config_value(x) for x in text[1:-1].split(",") if x.strip()]
    if text.startswith('"'):
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    return float(text) if any(c in text for c in ".eEn") else int(text)


def _ssmax_of_model(path, model):
    """The sweep's resolved ssmax scale of model index `model` when the file records one per
    model (0.0 in config_text): 1 / ln n_positions from the model's config.json."""
    import json
    import math
    import os
    import h5py
    with h5py.File(path, "r") as f:
        d = f["model_path"][()] if "model_path" in f else [f.attrs["model_dir"]]
    model_dir = d[model].decode() if isinstance(d[model], bytes) else str(d[model])
    try:
        with open(os.path.join(model_dir, "config.json")) as cf:
            P = int(json.load(cf).get("n_positions", 1024))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: ssmax_scale is per model and {model_dir}/config.json cannot "
                         f"be read ({exc}): pass ssmax_scale= to metrics()") from None
    return 1.0 / math.log(P) if P > 1 else 1.0


def options_of(path, model=0):
    """The metrics() keywords that recompute a cell of model index `model` of the results file
    at path: the file's axes (N, T, eps, normalizer, L, layer, head) and its config's
    metrics.* keys (from the canonical config_text). The window index is the caller's
    (window=); with vectors = "resid" in the config the vectors to pass are the layer's ln_1
    output. Layers and heads are the file's union over its models: pass the model's own."""
    import h5py
    with h5py.File(path, "r") as f:
        def coord(name):
            x = f[name][()]
            return [s.decode() if isinstance(s, bytes) else s for s in x] if x.dtype.kind in "OS" else x
        out = {k: coord(k) for k in ("N", "T", "eps", "normalizer", "L", "layer", "head")}
        text = f.attrs["config_text"]
    text = text.decode() if isinstance(text, bytes) else str(text)
    group = text.split("\nmetrics = {", 1)[1].split("\n};", 1)[0] if "\nmetrics = {" in text else ""
    keys = ("rows", "distance", "logits", "ssmax_scale", "entmax_alpha", "sigmoid_bias", "seed",
            "ks_alpha", "per_N_T", "grad_exact", "dist_expect", "dist_random", "random_subsets",
            "ks_against")
    for line in group.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            if k.strip() in keys:
                out[k.strip()] = _config_value(v.rstrip().rstrip(";"))
    if out.get("ssmax_scale", 0.0) == 0.0:  # models of different n_positions
        out["ssmax_scale"] = _ssmax_of_model(path, model)
    return out


def dump_arrays(path):
    """(scores [layer, head, L, L], values [layer, head, L, d_head], layer numbers) of an
    `attnsweep dump` file (docs/results.md, "The dump file"): what metrics() takes."""
    import h5py
    with h5py.File(path, "r") as g:
        names = sorted(k for k in g if k.startswith("layer_"))
        scores = np.stack([g[k]["scores"][()] for k in names])
        values = np.stack([g[k]["v"][()] for k in names])
    return scores, values, np.array([int(k[len("layer_"):]) for k in names], dtype=np.int64)
