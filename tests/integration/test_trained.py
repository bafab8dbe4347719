#!/usr/bin/python3
"""End-to-end tests on trained attention: a small GPT-2 trained on
War and Peace (SHARED/models/wp-gpt2-4x3: 4 layers x 3 heads, d_head 64; real learned
attention, weakly trained -- its numbers are not GPT-2's) reading the paper's text
(SHARED/data/war-and-peace.txt, from Book One, Chapter I).

  setup      one sweep (L 64/256/1024, N 1..128, T 1e-3..1e2, softmax/sparsemax/ssmax,
             every head), one with metrics.logits = "scaled", and a dump of the same window
  forward    the dump's q, k, v, scores, pattern and logits against the PyTorch reference
             (tests/reference/ref_gpt2.py) on the trained weights
  softmax    the sweep's per-head means against tests/lib/bruteforce.py (float64, every
             head, every N, T and L of the grid): dist_true, dist_expect, dist_bound,
             entropy, entropy_norm, rows_used, grad_exact
  sparse     the same for sparsemax and ssmax
  scaled     metrics.logits = "scaled" against the brute force on q.k / sqrt(d_head)
  window0    configs/paper.cfg's window 0 is Chapter I's prose (plan shows it); a
             text.start_at that is not found is a one-line error naming the key
  sep_ratio  sep_ratio against the brute force's exact rule (see bruteforce.py). Today's
             kernel decides D_i < r by round-off: this case fails until that is fixed, so
             its ctest test is DISABLED (tests/integration/trained.cmake)

usage: test_trained.py ATTNSWEEP SHARED SCRATCH case
SHARED is the shared/ folder beside the clone; when its assets are missing every case
prints that it skipped and exits 77 (ctest: Skipped).
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import bruteforce  # noqa: E402
from sweeptest import ENV, check, has_model_dim, summary  # noqa: E402

BIN, SHARED, SCRATCH = (os.path.abspath(p) for p in sys.argv[1:4])
CASE = sys.argv[4]
MODEL = os.path.join(SHARED, "models", "wp-gpt2-4x3")
TEXT = os.path.join(SHARED, "data", "war-and-peace.txt")
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SKIP = 77

# Chapter I's first words: the window every case measures starts here
START_AT = "\u201cWell, Prince, so Genoa and Lucca"
L_GRID = [64, 256, 1024]
N_GRID = [1, 2, 4, 8, 16, 32, 64, 128]
T_GRID = [1e-3, 1e-2, 0.1, 1.0, 8.0, 100.0]
T_SCALED = [0.125, 1.0, 8.0]
L_SCALED = 256
SPARSE_T = [1e-3, 1.0, 100.0]  # sparsemax, ssmax: both ends of the T range and the middle
GRAD_L = 64            # grad_exact is checked on the rows of this cut (an eigensolve per row)

# Tolerances, relative to the brute force (the kernel stores float32 means of double
# sums; the forward pass is float32 in both; the worst seen is ~7e-8, the float32
# rounding of the stored mean). A value below FLOOR counts as FLOOR.
RTOL = {"dist_true": 1e-6, "dist_expect": 1e-6, "dist_bound": 1e-6, "entropy": 1e-6,
        "entropy_norm": 1e-6, "grad_exact": 1e-6}
FLOOR = 1e-6


def skip_if_missing():
    missing = [p for p in (os.path.join(MODEL, "model.safetensors"), TEXT) if not os.path.exists(p)]
    if missing:
        print(f"SKIPPED: trained-model test asset not found: {missing[0]} "
              f"(CI puts shared/ beside the clone)", flush=True)
        sys.exit(SKIP)


def sh(cmd, **kw):
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True, **kw)


def write_config(path, output, L, T, normalizers, extra=""):
    with open(path, "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "{TEXT}"; format = "text"; strip_gutenberg = true; start_at = "{START_AT}"; }};
windows = {{ count = 1; offset = 0; }};
grid = {{ L = {L}; N = {N_GRID}; T = {T}; eps = [1e-3];
         normalizer = {json.dumps(normalizers)}; }};
metrics = {{ {extra} }};
output = "{output}";
runtime = {{ commit_every = 1; }};
""")


def case_setup():
    os.makedirs(SCRATCH, exist_ok=True)
    for name in os.listdir(SCRATCH):
        os.remove(os.path.join(SCRATCH, name))
    runs = (("raw", L_GRID, T_GRID, ["softmax", "sparsemax", "ssmax"], ""),
            ("scaled", [L_SCALED], T_SCALED, ["softmax"], 'logits = "scaled";'))
    for name, L, T, norms, extra in runs:
        cfg = os.path.join(SCRATCH, f"{name}.cfg")
        write_config(cfg, f"{name}.h5", L, T, norms, extra)
        t0 = time.time()
        p = sh([BIN, "run", cfg], cwd=SCRATCH, timeout=600)
        check(p.returncode == 0, f"run {name}: exit {p.returncode}: {p.stderr[-600:]}")
        print(f"setup: sweep {name} {time.time() - t0:.1f} s", flush=True)
    t0 = time.time()
    p = sh([BIN, "dump", "--model", MODEL, "--text", TEXT, "--strip-gutenberg", "--start-at", START_AT,
            "--length", str(max(L_GRID)), "--out", os.path.join(SCRATCH, "window0.h5")])
    check(p.returncode == 0, f"dump: {p.stderr}")
    print(f"setup: dump {time.time() - t0:.1f} s", flush=True)
    import h5py
    with h5py.File(os.path.join(SCRATCH, "raw.h5"), "r") as f:
        kind = f.attrs.get("model_kind")
        check(kind == "other", f"model_kind of the trained model is 'other', got {kind!r}")
        check(f.attrs.get("logits") == "raw", f"logits attribute raw: {f.attrs.get('logits')!r}")
        check((f["status"][()] == 1).all(), "every cell done")
    with h5py.File(os.path.join(SCRATCH, "scaled.h5"), "r") as f:
        check(f.attrs.get("logits") == "scaled", f"logits attribute scaled: {f.attrs.get('logits')!r}")


def case_forward():
    ref = os.path.join(REPO, "tests", "reference", "ref_gpt2.py")
    p = sh([sys.executable, ref, "compare", "--model", MODEL, "--dump", os.path.join(SCRATCH, "window0.h5")],
           timeout=600)
    print(p.stdout.strip(), flush=True)
    check(p.returncode == 0, f"ref_gpt2.py compare: {p.stderr.strip()}")
    check("L=1024 layers=[0, 1, 2, 3]" in p.stdout, "the whole window and every layer were compared")


class Results:
    """A results file's variables and axes (h5py, no analysis module)."""

    def __init__(self, path):
        import h5py
        with h5py.File(path, "r") as f:
            # one model: its cells (isel(model=0)), indexed (window, L, ...) as before the model axis
            self.v = {k: f[k][0] if has_model_dim(f[k]) else f[k][()] for k in f
                      if isinstance(f[k], h5py.Dataset)}
            self.attrs = dict(f.attrs)
        self.norms = [n.decode() if isinstance(n, bytes) else n for n in self.v["normalizer"]]


def ssmax_scale_of(res):
    for line in res.attrs["config_text"].splitlines():
        if "ssmax_scale" in line:
            return float(line.split("=")[1].strip(" ;"))
    raise ValueError("no ssmax_scale in config_text")


def compare_file(res, norms, scale=1.0, what="", variables=("dist_true", "dist_expect", "dist_bound"),
                 only_T=None):
    """Checks every (L, N, T, normalizer, layer, head) of res for the given normalizers
    (and the T values in only_T when given) against the brute force on the dump's window;
    returns the worst relative differences."""
    import h5py
    Ls, Ns, Ts = list(res.v["L"]), [int(n) for n in res.v["N"]], list(res.v["T"])
    layers, heads = list(res.v["layer"]), list(res.v["head"])
    ssmax = ssmax_scale_of(res)
    worst = {}
    g = h5py.File(os.path.join(SCRATCH, "window0.h5"), "r")
    Lmax = max(Ls)

    def cmp(var, got, want, where):
        err = abs(float(got) - want) / max(abs(want), FLOOR)
        if not np.isfinite(want):
            err = 0.0 if not np.isfinite(got) else np.inf
        if err > worst.get(var, (-1, ""))[0]:
            worst[var] = (err, where)
        check(err <= RTOL[var], f"{what}{where} {var}: file {got!r} vs brute force {want!r} (rel {err:.2e})")

    for il, layer in enumerate(layers):
        sc = g[f"layer_{layer:02d}/scores"][()][:, :Lmax, :Lmax].astype(float) * scale
        v = g[f"layer_{layer:02d}/v"][()][:, :Lmax]
        for ih, head in enumerate(heads):
            bf = bruteforce.Head(sc[head], v[head])
            for norm in norms:
                iz = res.norms.index(norm)
                for iT, T in enumerate(Ts):
                    if only_T is not None and T not in only_T:
                        continue
                    rows = bf.rows(Ns, T, norm, ssmax_scale=ssmax, sep=False)
                    for iL, Lc in enumerate(Ls):
                        where = f"L{Lc} layer {layer} head {head} T={T:g} {norm}"
                        for var in ("entropy", "entropy_norm"):
                            want, _ = bruteforce.cut_mean(rows[var], Lc)
                            cmp(var, res.v[var][0, iL, iT, iz, il, ih], float(want), where)
                        for iN, N in enumerate(Ns):
                            for var in variables:
                                want, cnt = bruteforce.cut_mean(rows[var][iN], Lc)
                                cmp(var, res.v[var][0, iL, iN, iT, iz, il, ih], float(want),
                                    f"{where} N={N}")
                            got_rows = res.v["rows_used"][0, iL, iN, iT, iz, il, ih]
                            check(got_rows == cnt, f"{where} N={N} rows_used {got_rows} vs {cnt}")
                    if norm == "softmax" and GRAD_L in Ls:
                        want = float(np.nanmean(bf.grad_exact(T, GRAD_L)))
                        cmp("grad_exact", res.v["grad_exact"][0, Ls.index(GRAD_L), iT, iz, il, ih],
                            want, f"L{GRAD_L} layer {layer} head {head} T={T:g}")
    g.close()
    for var, (err, where) in sorted(worst.items()):
        print(f"{what}worst {var}: {err:.2e} at {where}", flush=True)
    return worst


def case_softmax():
    compare_file(Results(os.path.join(SCRATCH, "raw.h5")), ["softmax"], what="softmax: ")


def case_sparse():
    compare_file(Results(os.path.join(SCRATCH, "raw.h5")), ["sparsemax", "ssmax"], what="sparse: ",
                 only_T=SPARSE_T)


def case_scaled():
    res = Results(os.path.join(SCRATCH, "scaled.h5"))
    check(res.attrs.get("logits") == "scaled", "file says logits = scaled")
    compare_file(res, ["softmax"], scale=1 / np.sqrt(64.0), what="scaled: ")
    # GPT-2's own attention is T = 1 on scaled logits: its weights are the dump's pattern
    import h5py
    with h5py.File(os.path.join(SCRATCH, "window0.h5"), "r") as g:
        sc = g["layer_00/scores"][()][0, :L_SCALED, :L_SCALED].astype(float) / 8.0
        pat = g["layer_00/pattern"][()][0, :L_SCALED, :L_SCALED]
    a = bruteforce.weights(np.where(np.tril(np.ones_like(sc, bool)), sc, 0.0), 1.0, "softmax")
    err = float(np.abs(a - pat).max())
    print(f"scaled: T = 1 weights vs the model's own attention pattern: max |d| {err:.1e}", flush=True)
    check(err < 1e-5, f"T = 1 on scaled logits is GPT-2's own attention (max |d| {err:.2e})")


def case_window0():
    sets = ["--set", f'model="{MODEL}"', "--set", f'text.path="{TEXT}"']
    paper = os.path.join(REPO, "configs", "paper.cfg")
    p = sh([BIN, "plan", paper] + sets)
    check(p.returncode == 0, f"plan paper.cfg: {p.stderr}")
    line = [x for x in p.stdout.splitlines() if x.startswith("window 0")]
    print(line[0] if line else p.stdout, flush=True)
    check(len(line) == 1 and "token offset 0" in line[0], f"plan prints window 0's offset: {line}")
    check(len(line) == 1 and '"\u201cWell, Prince, so Genoa and Lucca are now just family estates' in line[0],
          f"window 0 begins with Chapter I's first words: {line}")
    for cmd, name in ((["plan", paper], "plan"), (["run", paper, "--set", f'output="{SCRATCH}/never.h5"'], "run")):
        q = sh([BIN] + cmd + sets + ["--set", 'text.start_at="CHAPTER MMM"'])
        err = q.stderr.strip()
        check(q.returncode == 1, f"{name}: a marker not found exits 1 (got {q.returncode})")
        check(len(err.splitlines()) == 1 and "text.start_at" in err and "CHAPTER MMM" in err,
              f"{name}: one line naming the key: {err!r}")
    q = sh([BIN, "plan", paper] + sets + ["--set", 'text.start_at="BOOK ONE: 1805"',
                                          "--set", "text.start_occurrence=2"])
    line = [x for x in q.stdout.splitlines() if x.startswith("window 0")]
    import re
    check(q.returncode == 0 and line and re.search('"BOOK ONE: 1805 +CHAPTER I +\u201cWell, Prince', line[0]),
          f"the second BOOK ONE: 1805 is Chapter I's heading: {line} {q.stderr}")


def case_sep_ratio():
    """Today's sep_ratio against the exact rule; also prints how far the plain float64
    comparison is from it, to show the difference is round-off, not the kernel alone."""
    import h5py
    res = Results(os.path.join(SCRATCH, "raw.h5"))
    Ls, Ns, Ts = list(res.v["L"]), [int(n) for n in res.v["N"]], list(res.v["T"])
    g = h5py.File(os.path.join(SCRATCH, "window0.h5"), "r")
    worst = {}
    ssmax = ssmax_scale_of(res)
    for il, layer in enumerate(res.v["layer"]):
        sc = g[f"layer_{layer:02d}/scores"][()].astype(float)
        v = g[f"layer_{layer:02d}/v"][()]
        for ih, head in enumerate(res.v["head"]):
            bf = bruteforce.Head(sc[head], v[head])
            for iz, norm in enumerate(res.norms):
                for iT, T in enumerate(Ts):
                    if norm != "softmax" and T not in SPARSE_T:
                        continue
                    rows = bf.rows(Ns, T, norm, ssmax_scale=ssmax, bound=False)
                    for iL, Lc in enumerate(Ls):
                        for iN, N in enumerate(Ns):
                            want, _ = bruteforce.cut_mean(rows["sep_ratio"][iN], Lc)
                            naive, _ = bruteforce.cut_mean(rows["sep_ratio_naive"][iN], Lc)
                            amb, _ = bruteforce.cut_mean(rows["sep_ambiguous"][iN], Lc)
                            got = float(res.v["sep_ratio"][0, iL, iN, iT, iz, il, ih])
                            if not np.isfinite(want):
                                check(not np.isfinite(got), "sep_ratio NaN where no row is used")
                                continue
                            d = abs(got - float(want))
                            key = (norm, T)
                            where = f"L{Lc} layer {layer} head {head} N={N}"
                            if d > worst.get(key, (-1,))[0]:
                                worst[key] = (d, where, got, float(want), float(naive))
                            # a decision within 1e-9 of the radius may go either way
                            check(d <= float(amb) + 1e-6, f"sep_ratio {where} T={T:g} {norm}: file {got:.4f} vs exact "
                                             f"{float(want):.4f} (plain float64: {float(naive):.4f})")
    g.close()
    for (norm, T), (d, where, got, want, naive) in sorted(worst.items()):
        print(f"sep_ratio {norm:9s} T={T:<6g} worst |file - exact| {d:.3f} at {where}: file {got:.3f}, "
              f"exact {want:.3f}, plain float64 {naive:.3f}", flush=True)


def main():
    skip_if_missing()
    t0 = time.time()
    cases = {"setup": case_setup, "forward": case_forward, "softmax": case_softmax, "sparse": case_sparse,
             "scaled": case_scaled, "window0": case_window0, "sep_ratio": case_sep_ratio}
    if CASE not in cases:
        sys.exit(f"unknown case {CASE}; one of {sorted(cases)}")
    if CASE != "setup" and CASE != "window0" and not os.path.exists(os.path.join(SCRATCH, "window0.h5")):
        sys.exit(f"{SCRATCH}/window0.h5 is missing: run the trained_setup test first")
    cases[CASE]()
    print(f"case {CASE}: {time.time() - t0:.1f} s", flush=True)
    sys.exit(summary(f"test_trained {CASE}"))


main()
