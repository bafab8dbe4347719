#!/usr/bin/python3
"""A model axis mixing families (docs/families.md): a synthetic GPT-2 (2 layers x 4 heads),
a gpt_neox (3 x 4, rotary 25 %) and a llama (2 x 6 over 2 kv heads), random weights, on
pre-tokenized text (ids below every vocabulary), swept as one results file.

  models   writes the three model directories and a qwen2 (2 x 2) for `extend` (fixture),
           the qwen2 in two shards (model.safetensors.index.json)
  axis     the three models, 2 ranks: each model's cells bit for bit those of its own
           single run; union layer/head axes with head_valid; model_n_layer/n_head; each
           model's family (model_family, a coordinate xarray reads through
           analysis/attnsweep_results.py and selects by)
  resume   the same sweep killed (SIGKILL) while held at a commit inside the second model
           (the store's test hook, no timing) and resumed: equal to the uninterrupted file,
           the families kept
  extend   the three models, then the list with the qwen2 appended: only its cells are
           computed, and model 3 equals its single run (a sharded model after the first is
           checked and hashed from its shards, as its load hashes it); its family is added
  merge    two shards of the three-model sweep merged: equal to the one run, the families kept
  sampled  metrics.query_rows = "sample:8" (docs/metrics.md 9.1) on the three models, 2 ranks:
           each model's cells bit for bit its single sampled run's (the rows do not depend
           on the model or the rank); K >= the rows keeps the llama's all-rows values; the
           llama's and the gpt_neox's sampled means and standard errors (dist_true,
           dist_random and its row SE beside the Monte-Carlo dist_random_se, entropy)
           against numpy's, from per-row values of an all-rows run at every L

usage: test_family_axis.py ATTNSWEEP ATTNSWEEP_TEST FAMILIES_IO SCRATCH case
"""
import os
import shutil
import signal
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "analysis"))
from sweeptest import ENV, check, same_model_values, same_values, summary, values, wait_for_phase  # noqa: E402
import bruteforce  # noqa: E402

BIN, BIN_TEST, FAMILIES_IO, SCRATCH = (os.path.abspath(p) for p in sys.argv[1:5])
CASE = sys.argv[5]
PY = "/usr/bin/python3"
MODELS = [os.path.join(SCRATCH, n) for n in ("gpt2tiny", "neox", "llama")]
QWEN = os.path.join(SCRATCH, "qwen")
TOKENS = os.path.join(SCRATCH, "tokens.npy")
GRID = ('{ L = [16, 32]; N = [1, 2, 4]; T = [1.0, 8.0]; eps = [0.1]; '
        'normalizer = ["softmax", "sparsemax"]; }')


def run(args, ranks=1, env=None, binary=None):
    cmd = [binary or BIN, "run"] + args
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + cmd
    return subprocess.run(cmd, env=env or ENV, cwd=SCRATCH, capture_output=True, text=True, timeout=900)


def ok(p, what):
    check(p.returncode == 0, f"{what}: exit {p.returncode}: {p.stderr[-600:]}")
    return p.returncode == 0


def write_config(name, dirs, output, extra=""):
    models = "[" + ", ".join(f'"{d}"' for d in dirs) + "]" if len(dirs) > 1 else f'"{dirs[0]}"'
    with open(os.path.join(SCRATCH, name), "w") as f:
        f.write(f"""model = {models};
text = {{ path = "{TOKENS}"; format = "tokens"; }};
windows = {{ count = 3; offset = 0; stride = 64; }};
grid = {GRID};
output = "{output}";
{extra}""")


FAMILIES = ["gpt2", "gpt_neox", "llama"]


def families(path, want, what):
    """The file's model_family, read with h5py, is `want`, and a CF coordinate of the data."""
    with h5py.File(path, "r") as f:
        got = [v.decode() if isinstance(v, bytes) else v for v in f["model_family"][()]] \
            if "model_family" in f else None
        check(got == want, f"{what}: model_family {got}, want {want}")
        coords = f["dist_true"].attrs.get("coordinates", b"")
        coords = coords.decode() if isinstance(coords, bytes) else str(coords)
        check("model_family" in coords.split(), f"{what}: model_family is a coordinate of dist_true")


def clean(prefix):
    for n in os.listdir(SCRATCH):
        if n.startswith(prefix) and n.endswith((".h5", ".journal", ".status", ".phase", ".release")):
            os.unlink(os.path.join(SCRATCH, n))


def case_models():
    os.makedirs(SCRATCH, exist_ok=True)
    s = subprocess.run([BIN, "synth", "--preset", "tiny", "--seed", "5", "--force", "--vocab", "none",
                        "--out", MODELS[0]], capture_output=True, text=True)
    check(s.returncode == 0, f"synth tiny: {s.stderr}")
    for d, args in ((MODELS[1], ["--family", "gpt_neox", "--layers", "3", "--positions", "128"]),
                    (MODELS[2], ["--family", "llama", "--layers", "2", "--heads", "6", "--kv-heads", "2",
                                 "--hidden", "48", "--positions", "128"]),
                    (QWEN, ["--family", "qwen2", "--layers", "2", "--heads", "2", "--hidden", "32",
                            "--positions", "128", "--tied", "--shards", "2"])):
        shutil.rmtree(d, ignore_errors=True)  # no file of an earlier layout left behind
        m = subprocess.run([PY, FAMILIES_IO, "make-model", "--out", d, "--tokens", "8"] + args,
                           capture_output=True, text=True)
        check(m.returncode == 0, f"make-model {d}: {m.stderr}")
    ids = np.random.default_rng(11).integers(0, 320, size=400).astype("<u2")  # make-model's vocab: 320
    np.save(TOKENS, ids)
    write_config("fa3.cfg", MODELS, "fa3.h5")
    clean("fa3.")
    ok(run(["fa3.cfg"], ranks=2), "gpt2 + gpt_neox + llama, 2 ranks")
    for i, d in enumerate(MODELS + [QWEN]):
        name = os.path.basename(d)
        write_config(f"{name}.cfg", [d], f"{name}.h5")
        clean(f"{name}.")
        ok(run([f"{name}.cfg"]), f"single run of {name}")


def case_axis():
    for i, d in enumerate(MODELS):
        name = os.path.basename(d)
        same_model_values(f"{SCRATCH}/fa3.h5", i, f"{SCRATCH}/{name}.h5", f"model {i} ({name}) vs alone")
    with h5py.File(f"{SCRATCH}/fa3.h5", "r") as f:
        check(list(f["model_n_layer"][()]) == [2, 3, 2] and list(f["model_n_head"][()]) == [4, 4, 6],
              f"model shapes {f['model_n_layer'][()]} {f['model_n_head'][()]}")
        check(list(f["layer"][()]) == [0, 1, 2] and list(f["head"][()]) == list(range(6)),
              f"union axes layer {f['layer'][()]} head {f['head'][()]}")
        hv = f["head_valid"][()]
        want = np.zeros((3, 3, 6), np.uint8)
        want[0, :2, :4] = want[1, :3, :4] = want[2, :2, :6] = 1
        check(np.array_equal(hv, want), f"head_valid {hv.tolist()}")
        a = f["dist_true"][()]
        mask = np.broadcast_to(hv.reshape((3,) + (1,) * (a.ndim - 3) + (3, 6)), a.shape)
        check(np.isnan(a[mask == 0]).all() and np.isfinite(a[mask == 1]).mean() > 0.5,
              "dist_true: masked heads NaN, present heads numbers")
    families(f"{SCRATCH}/fa3.h5", FAMILIES, "three families")
    for i, d in enumerate(MODELS):
        families(f"{SCRATCH}/{os.path.basename(d)}.h5", FAMILIES[i:i + 1], f"{os.path.basename(d)} alone")
    import attnsweep_results as ar
    ds = ar.load(f"{SCRATCH}/fa3.h5")
    check("model_family" in ds.coords and ar.model_families(ds) == FAMILIES,
          f"xarray: model_family a coordinate {list(ds.coords)}, families {ar.model_families(ds)}")
    neox = ds.sel(model=ds.model_family == "gpt_neox")
    check([str(v) for v in neox.model.values] == ["neox"], f"sel by family: {neox.model.values}")
    check("family gpt_neox" in ar.summary(ds), "the summary names each model's family")


def case_resume():
    write_config("fakill.cfg", MODELS, "fakill.h5", extra="runtime = { commit_every = 2; };\n")
    clean("fakill.")
    # one window of a model (2 cells) per commit: the 4th durable commit is model 1's first
    phase, release = f"{SCRATCH}/fakill.phase", f"{SCRATCH}/fakill.release"
    held = dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=phase, ATTNSWEEP_TEST_HOLD="journal_synced 4",
                ATTNSWEEP_TEST_RELEASE=release)
    p = subprocess.Popen([BIN_TEST, "run", "fakill.cfg"], env=held, cwd=SCRATCH,
                         stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    check(wait_for_phase(phase, "journal_synced", 4, p), "the run reached its 4th commit")
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=600)
    st = subprocess.run([BIN, "status", "fakill.h5"], cwd=SCRATCH, capture_output=True, text=True)
    check("model 0 gpt2tiny: 6/6 cells done" in st.stdout and "model 1 neox: 2/6 cells done" in st.stdout,
          f"killed inside model 1: {st.stdout}")
    r = run(["fakill.cfg"], ranks=2)
    if ok(r, "resume"):
        check("5 this run" in r.stdout + r.stderr, f"the resume computes the 5 windows left: {r.stdout}")
    same_values(f"{SCRATCH}/fakill.h5", f"{SCRATCH}/fa3.h5", "killed + resumed vs uninterrupted")
    families(f"{SCRATCH}/fakill.h5", FAMILIES, "killed + resumed")


def case_extend():
    write_config("faext3.cfg", MODELS, "faext.h5")
    write_config("faext4.cfg", MODELS + [QWEN], "faext.h5")
    clean("faext.")
    ok(run(["faext3.cfg"]), "three families")
    r = run(["faext4.cfg"], ranks=2)
    if ok(r, "qwen2 appended"):
        out = r.stdout + r.stderr
        check("3 this run" in out and "(cells 24/24, 18 before this run)" in out, f"only the new model's windows: {out}")
    same_model_values(f"{SCRATCH}/faext.h5", 3, f"{SCRATCH}/qwen.h5", "the appended qwen2 vs alone")
    families(f"{SCRATCH}/faext.h5", FAMILIES + ["qwen2"], "qwen2 appended")
    for i, d in enumerate(MODELS):
        same_model_values(f"{SCRATCH}/faext.h5", i, f"{SCRATCH}/{os.path.basename(d)}.h5",
                          f"model {i} after the extension vs alone")


def case_merge():
    write_config("fash.cfg", MODELS, "fash.h5")
    clean("fash.")
    for i in range(2):
        ok(run(["fash.cfg", "--shard", f"{i}/2"], ranks=1 + i), f"shard {i} of 2")
    r = subprocess.run([BIN, "merge", "fash.shard-0-of-2.h5", "fash.shard-1-of-2.h5"], cwd=SCRATCH,
                       capture_output=True, text=True)
    ok(r, "merge")
    same_values(f"{SCRATCH}/fash.h5", f"{SCRATCH}/fa3.h5", "merged shards vs one run")
    families(f"{SCRATCH}/fash.h5", FAMILIES, "merged shards")


def prefix_rows(mean, counts):
    """Per-row values from prefix means: mean[c] over counts[c] rows of cuts c = 0, 1, ...
    (one more row each, in order): row values S(c) - S(c - 1), S = mean * count (0 where the
    count is 0; NaN where the row is not in the mean)."""
    S = np.where(counts > 0, np.nan_to_num(mean) * counts, 0.0)
    prev, prev_cnt = np.concatenate([[0.0], S[:-1]]), np.concatenate([[0], counts[:-1]])
    return np.where(counts > prev_cnt, S - prev, np.nan)


def case_sampled():
    extra = 'metrics = { query_rows = "sample:8"; dist_random = true; random_subsets = 4; };\n'
    write_config("fas.cfg", MODELS, "fas.h5", extra=extra)
    clean("fas.")
    ok(run(["fas.cfg"], ranks=2), "three families sampled, 2 ranks")
    for i, d in enumerate(MODELS):
        name = os.path.basename(d)
        write_config(f"{name}_s.cfg", [d], f"{name}_s.h5", extra=extra)
        clean(f"{name}_s.")
        ok(run([f"{name}_s.cfg"]), f"single sampled run of {name}")
        same_model_values(f"{SCRATCH}/fas.h5", i, f"{SCRATCH}/{name}_s.h5", f"sampled: model {i} ({name}) vs alone")
    with h5py.File(f"{SCRATCH}/fas.h5", "r") as f:
        check(f.attrs["query_rows"] == "sample:8", f"root attribute query_rows {f.attrs['query_rows']}")
        rs = f["rows_sampled"][()]
        check((rs == 8).all(), f"rows_sampled {np.unique(rs)} (8 of the 15 and 31 rows)")
        for v in ("dist_true_se", "entropy_se", "dist_random_rows_se", "dist_random_upper_se", "dist_random_se"):
            check(v in f and np.nanmax(f[v][()]) > 0, f"{v} present and nonzero")
    # K >= the rows (sample:64 at L <= 32): the all-rows values, bit for bit
    write_config("llama_k64.cfg", [MODELS[2]], "llama_k64.h5", extra='metrics = { query_rows = "sample:64"; };\n')
    clean("llama_k64.")
    ok(run(["llama_k64.cfg"]), "llama, sample:64")
    va, vk = values(f"{SCRATCH}/llama.h5"), values(f"{SCRATCH}/llama_k64.h5")
    for k, x in va.items():
        same = x.tobytes() == vk[k].tobytes() if x.dtype.kind == "f" else np.array_equal(x, vk[k])
        check(same, f"sample:64 = all rows: {k} bit for bit")
    for name in ("llama", "neox"):
        check_against_rows(name, extra)


def check_against_rows(name, extra):
    """name's sampled file (L = 16, 32) against the rule of section 9.1 applied in numpy to
    the per-row values of an all-rows run at every L = 2 .. 32 of the same windows."""
    d = os.path.join(SCRATCH, name)
    every_L = extra.replace('query_rows = "sample:8"; ', "")
    write_config(f"{name}_rows.cfg", [d], f"{name}_rows.h5", extra=every_L)
    with open(os.path.join(SCRATCH, f"{name}_rows.cfg")) as f:
        cfg = f.read().replace("L = [16, 32];", "L = [" + ", ".join(str(x) for x in range(2, 33)) + "];")
    with open(os.path.join(SCRATCH, f"{name}_rows.cfg"), "w") as f:
        f.write(cfg)
    clean(f"{name}_rows.")
    if not ok(run([f"{name}_rows.cfg"]), f"{name}: all rows at L = 2 .. 32"):
        return
    f, g = h5py.File(f"{SCRATCH}/{name}_s.h5", "r"), h5py.File(f"{SCRATCH}/{name}_rows.h5", "r")
    Ns, seed, worst, n = list(f["N"][()]), int(f.attrs["seed"]), 0.0, 0
    Lrows = np.arange(2, 33)
    for w in range(3):
        for iL, L in enumerate(f["L"][()]):
            rows = bruteforce.sample_rows(8, 1, int(L), seed, w)
            for var, se_name, per_n in (("dist_true", "dist_true_se", True), ("dist_random", "dist_random_rows_se", True),
                                        ("dist_random_upper", "dist_random_upper_se", True),
                                        ("entropy", "entropy_se", False)):
                a, s_ = f[var][0, w, iL], f[se_name][0, w, iL]
                b = g[var][0, w]  # [L = 2..32, ...]
                for idx in np.ndindex(a.shape):
                    iN = idx[0] if per_n else None
                    N = Ns[iN] if per_n else 0
                    cnt = np.maximum(Lrows - N, 0) if per_n else Lrows - 1
                    r = np.concatenate([[np.nan], prefix_rows(b[(slice(None),) + idx], cnt)])  # row t at r[t]
                    m, se, k = bruteforce.sampled_mean_se(r[:L], rows, L - N if per_n else L - 1)
                    if np.isnan(m):
                        check(np.isnan(a[idx]), f"{name} w{w} L{L} {var}{idx}: {a[idx]} where numpy has no rows")
                        continue
                    scale = max(abs(m), 1e-3)
                    err = max(abs(a[idx] - m), abs(s_[idx] - se)) / scale
                    if err > worst:
                        worst_at = (var, w, int(L), idx, float(a[idx]), float(m), float(s_[idx]), float(se))
                    worst, n = max(worst, err), n + 1
                    check(err < 2e-4, f"{name} w{w} L{L} {var}{idx}: {a[idx]} +- {s_[idx]} vs numpy {m} +- {se}")
                    if per_n:
                        check(f["rows_used"][0, w, iL][idx] == k, f"{name} rows_used {f['rows_used'][0, w, iL][idx]} vs {k}")
    mc = f["dist_random_se"][()]
    check(np.isfinite(mc).any() and (mc[np.isfinite(mc)] >= 0).all(), f"{name}: dist_random_se, the Monte-Carlo SE")
    print(f"{name}: {n} sampled means and SE against numpy, worst relative difference {worst:.2e} {worst_at}", flush=True)


{"models": case_models, "axis": case_axis, "resume": case_resume, "extend": case_extend,
 "merge": case_merge, "sampled": case_sampled}[CASE]()
sys.exit(summary(f"test_family_axis {CASE}"))
