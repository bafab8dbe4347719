#!/usr/bin/python3
"""The logit convention is a relabelling of T and eps, bit for bit (docs/multirun.md).

With s = sqrt(d_head) a power of two (4 for the tiny model, 8 for every GPT-2 size), a
sweep with metrics.logits = "scaled" at (T, eps) must store exactly the numbers of a raw
sweep at (s T, s eps): every per-N variable, the KS test, crit_N and the entropy equal, and
grad_exact and grad_fd equal after dividing the scaled ones by s. This is why docs/multirun.md
puts no logit-convention axis in the file; a change that makes the conventions differ
beyond the relabelling (e.g. scaling in another order, or rounding the scaled logits) fails.
Five normalizers, 2 L, 3 T, one window: a few seconds.

usage: test_logits_relabel.py ATTNSWEEP MODEL_DIR SCRATCH
"""
import json
import math
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from sweeptest import BOOKKEEPING, ENV, check, summary  # noqa: E402

BIN, MODEL, SCRATCH = sys.argv[1:4]
SCALED_T, SCALED_EPS = (0.1, 1.0, 10.0), (0.1,)
NORMALIZERS = ("softmax", "sparsemax", "ssmax", "entmax15", "sigmoid")
# not measured: the curve min(1/(4T), sqrt 2) of the T label itself
LABEL_CURVES = {"grad_bound"}
GRADIENTS = {"grad_exact", "grad_fd"}


def run(name, logits, T, eps):
    with open(os.path.join(SCRATCH, name + ".cfg"), "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 1; offset = 0; stride = 64; }};
grid = {{ L = [32, 64]; N = [1, 2, 4, 8]; T = [{", ".join(map(repr, T))}];
         eps = [{", ".join(map(repr, eps))}]; normalizer = {json.dumps(list(NORMALIZERS))}; }};
metrics = {{ logits = "{logits}"; }};
output = "{name}.h5";
""")
    r = subprocess.run([BIN, "run", name + ".cfg"], cwd=SCRATCH, env=ENV, capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"attnsweep run {name} exited {r.returncode}: {r.stderr}")
    return os.path.join(SCRATCH, name + ".h5")


def main():
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    with open(os.path.join(MODEL, "config.json")) as f:
        cfg = json.load(f)
    s = math.sqrt(cfg["n_embd"] // cfg["n_head"])
    if s != 2 ** round(math.log2(s)):
        sys.exit(f"the model's sqrt(d_head) = {s:g} is not a power of two: pick another model")
    np.save(os.path.join(SCRATCH, "tokens.npy"),
            np.random.default_rng(3).integers(0, 50257, size=200).astype("<u2"))
    scaled = run("scaled", "scaled", SCALED_T, SCALED_EPS)
    raw = run("raw", "raw", tuple(s * t for t in SCALED_T), tuple(s * e for e in SCALED_EPS))
    compared = 0
    with h5py.File(scaled, "r") as a, h5py.File(raw, "r") as b:
        check(a.attrs["logits"] == "scaled" and b.attrs["logits"] == "raw", "logits attributes")
        check(np.array_equal(a["T"][()] * s, b["T"][()]) and np.array_equal(a["eps"][()] * s, b["eps"][()]),
              "the raw grid is s times the scaled grid, as doubles")
        for k, d in a.items():
            if (not isinstance(d, h5py.Dataset) or k in BOOKKEEPING or k in LABEL_CURVES
                    or d.dtype.kind not in "fi" or d.ndim < 3):
                continue
            x, y = d[()].astype(np.float64), b[k][()].astype(np.float64)
            if k in GRADIENTS:
                x = x / s   # exact: s is a power of two
            same = np.array_equal(x, y, equal_nan=True)
            if not same:
                diff = np.abs(x - y)[np.isfinite(x) & np.isfinite(y)]
                print(f"  {k}: largest difference {diff.max() if diff.size else float('nan'):.3g}")
            check(same, f"{k}: scaled at (T, eps) differs from raw at (s T, s eps)")
            compared += 1
    check(compared >= 15, f"compared {compared} variables, want every metric")
    print(f"logits_relabel: s = {s:g}, {compared} variables compared bit for bit")
    return summary("test_logits_relabel")


if __name__ == "__main__":
    sys.exit(main())
