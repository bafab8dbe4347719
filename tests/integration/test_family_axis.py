#!/usr/bin/python3
"""A model axis mixing families (docs/families.md): a synthetic GPT-2 (2 layers x 4 heads),
a gpt_neox (3 x 4, rotary 25 %) and a llama (2 x 6 over 2 kv heads), random weights, on
pre-tokenized text (ids below every vocabulary), swept as one results file.

  models   writes the three model directories and a qwen2 (2 x 2) for `extend` (fixture)
  axis     the three models, 2 ranks: each model's cells bit for bit those of its own
           single run; union layer/head axes with head_valid; model_n_layer/n_head; each
           model's family (model_family, a coordinate xarray reads through
           analysis/attnsweep_results.py and selects by)
  resume   the same sweep killed (SIGKILL) while held at a commit inside the second model
           (the store's test hook, no timing) and resumed: equal to the uninterrupted file,
           the families kept
  extend   the three models, then the list with the qwen2 appended: only its cells are
           computed, and model 3 equals its single run; its family is added
  merge    two shards of the three-model sweep merged: equal to the one run, the families kept

usage: test_family_axis.py ATTNSWEEP ATTNSWEEP_TEST FAMILIES_IO SCRATCH case
"""
import os
import signal
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "analysis"))
from sweeptest import ENV, check, same_model_values, same_values, summary, wait_for_phase  # noqa: E402

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
                            "--positions", "128", "--tied"])):
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


{"models": case_models, "axis": case_axis, "resume": case_resume, "extend": case_extend,
 "merge": case_merge}[CASE]()
sys.exit(summary(f"test_family_axis {CASE}"))
