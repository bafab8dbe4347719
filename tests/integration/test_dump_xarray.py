#!/usr/bin/env python3
"""`attnsweep dump` as an analyst meets it.

usage: test_dump_xarray.py ATTNSWEEP MODEL_DIR SCRATCH

1. --tokens reads the token files `run` reads: .npy, a raw uint16 .bin, a raw uint32 .bin
   with --dtype uint32 -- the dump's tokens equal the window of the file, and whitespace
   ids still work. A bad --dtype is a usage error in one line.
2. The dump opens in xarray with both engines, root group and layer groups, with named
   dimensions (position, key_position, head, d_head, vocab), coordinates 0..n-1, a long_name
   and units on every variable, and values equal to what h5py reads.
"""
import os
import subprocess
import sys

import h5py
import numpy as np
import xarray as xr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, summary  # noqa: E402

BIN, MODEL, SCRATCH = sys.argv[1:4]
os.makedirs(SCRATCH, exist_ok=True)
L, START = 12, 5
ids = np.random.default_rng(41).integers(0, 50257, size=60)


def dump(tokens, out, *extra):
    p = subprocess.run([BIN, "dump", "--model", MODEL, "--tokens", tokens, "--length", str(L),
                        "--window-start", str(START), "--layers", "0,1", "--out", out, *extra],
                       env=ENV, capture_output=True, text=True, errors="replace")
    return p


def tokens_of(path):
    with h5py.File(path, "r") as f:
        return f["tokens"][()]


want = ids[START:START + L]
sources = {
    "npy": (f"{SCRATCH}/t.npy", lambda p: np.save(p, ids.astype("<u2")), []),
    "raw16": (f"{SCRATCH}/t16.bin", lambda p: ids.astype("<u2").tofile(p), []),
    "raw32": (f"{SCRATCH}/t32.bin", lambda p: ids.astype("<u4").tofile(p), ["--dtype", "uint32"]),
    "text": (f"{SCRATCH}/t.txt", lambda p: open(p, "w").write(" ".join(map(str, ids)) + "\n"), []),
}
outs = {}
for name, (path, write, extra) in sources.items():
    write(path)
    out = f"{SCRATCH}/{name}.h5"
    p = dump(path, out, *extra)
    check(p.returncode == 0, f"dump --tokens {name}: exit {p.returncode}: {p.stderr.strip()}")
    if p.returncode == 0:
        check(np.array_equal(tokens_of(out), want), f"dump --tokens {name}: tokens differ from the window")
        outs[name] = out

p = dump(sources["raw16"][0], f"{SCRATCH}/bad.h5", "--dtype", "int8")
check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--dtype" in p.stderr,
      f"bad --dtype: exit {p.returncode}, stderr {p.stderr!r}")
check(not os.path.exists(f"{SCRATCH}/bad.h5"), "bad --dtype wrote a file")

path = outs.get("npy")
if path:
    with h5py.File(path, "r") as f:
        H, D = f["layer_00/q"].shape[0], f["layer_00/q"].shape[2]
        raw = {k: f[k][()] for k in ("tokens", "logits_last", "layer_01/q", "layer_01/scores",
                                     "layer_01/pattern")}
    axes = {"position": L, "key_position": L, "head": H, "d_head": D, "vocab": 50257}
    for engine in ("h5netcdf", "netcdf4"):
        try:
            root = xr.open_dataset(path, engine=engine)
            layer = xr.open_dataset(path, engine=engine, group="layer_01")
        except Exception as e:  # the failure this test exists for: no dimension scales
            check(False, f"{engine}: xr.open_dataset fails: {e}")
            continue
        for name, n in axes.items():
            check(root.sizes.get(name) == n, f"{engine}: dimension {name} is {root.sizes.get(name)}, want {n}")
            if name in root.coords:
                check(np.array_equal(root[name].values, np.arange(n)), f"{engine}: coordinate {name} is not 0..{n - 1}")
            else:
                check(False, f"{engine}: no coordinate {name}")
        check(root.tokens.dims == ("position",), f"{engine}: tokens dims {root.tokens.dims}")
        check(root.logits_last.dims == ("vocab",), f"{engine}: logits_last dims {root.logits_last.dims}")
        for v in ("q", "k", "v"):
            check(layer[v].dims == ("head", "position", "d_head"), f"{engine}: {v} dims {layer[v].dims}")
        for v in ("scores", "pattern"):
            check(layer[v].dims == ("head", "position", "key_position"), f"{engine}: {v} dims {layer[v].dims}")
        for ds in (root, layer):
            for v in ds.data_vars:
                check("long_name" in ds[v].attrs and "units" in ds[v].attrs, f"{engine}: {v} lacks long_name/units")
        check(np.array_equal(root.tokens.values, raw["tokens"]), f"{engine}: tokens values")
        check(root.logits_last.values.tobytes() == raw["logits_last"].tobytes(), f"{engine}: logits values")
        for v in ("q", "scores", "pattern"):
            check(layer[v].values.tobytes() == raw[f"layer_01/{v}"].tobytes(), f"{engine}: layer_01/{v} values")
        # the label-based selection an analyst writes
        sel = layer.pattern.sel(head=1, position=L - 1)
        check(abs(float(sel.sum()) - 1.0) < 1e-5, f"{engine}: pattern row does not sum to 1")
        root.close()
        layer.close()
sys.exit(summary("test_dump_xarray"))
