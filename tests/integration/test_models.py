#!/usr/bin/python3
"""End-to-end tests of the model axis (docs/results.md "The model axis"):
several models in one sweep, each model's cells bit for bit those of a single-model run.

  ckpt     the trained test model's checkpoints (SHARED/models/wp-gpt2-4x3-step100,
           -step400 and wp-gpt2-4x3) as a model axis on War and Peace, 3 ranks, against
           three single-model runs (1 and 2 ranks): tests/lib/sweeptest.py's
           same_model_values, every non-bookkeeping variable; the model coordinates
           (names, paths, sha256, shapes, training_step from config.json)
  resume   the same sweep killed (SIGKILL) while held at a commit inside the second model
           (the store's test hook, no timing), resumed: equal to the uninterrupted file
  extend   two checkpoints, then the list with the third appended: only the new model's
           cells are computed, and the file equals the three-model one; a reordered list
           and a removed model are refused in one line
  merge    two shards of the three-model sweep merged: equal to the single run
  mixed    the trained 4x3 model and a synthetic tiny model (2 layers x 4 heads, its own
           context of 128): union layer/head axes, head_valid, masked values NaN / int fill,
           each model equal to its own single run (ssmax_scale resolved per model)
  sizes    synthetic gpt2 and gpt2-medium (the build's models/gpt2 and models/gpt2-medium),
           L = [32], two layers and heads: runs, each model equal to its single run
  oldfile  an output as attnsweep wrote it before the model axis (journal version 2, no
           model dimension; made here from a current one-model output: the journal header
           set back to version 2, the view rewritten without the model dimension) resumes
           as a one-model sweep (extended by a window), and a second model appended to it
           rewrites its journal in the current version: equal to the same sweep run fresh
The trained assets may be absent (a clone without shared/): those cases print SKIPPED and
exit 77 (ctest: Skipped).

usage: test_models.py ATTNSWEEP ATTNSWEEP_TEST SHARED MODELS SCRATCH case
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
from sweeptest import ENV, check, counts, same_model_values, same_values, summary, wait_for_phase  # noqa: E402

BIN, BIN_TEST, SHARED, MODELS, SCRATCH = (os.path.abspath(p) for p in sys.argv[1:6])
CASE = sys.argv[6]
SKIP = 77
CKPTS = [os.path.join(SHARED, "models", n) for n in
         ("wp-gpt2-4x3-step100", "wp-gpt2-4x3-step400", "wp-gpt2-4x3")]
TEXT = os.path.join(SHARED, "data", "war-and-peace.txt")


def run(args, ranks=1, env=None, binary=None):
    cmd = [binary or BIN, "run"] + args
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + cmd
    return subprocess.run(cmd, env=env or ENV, cwd=SCRATCH, capture_output=True, text=True,
                          timeout=900)


def model_list(dirs):
    return "[" + ", ".join(f'"{d}"' for d in dirs) + "]" if len(dirs) > 1 else f'"{dirs[0]}"'


def write_config(name, dirs, output, text=None, grid=None, windows=3, extra="", offset=None):
    offset = (40000 if text is None else 0) if offset is None else offset  # War and Peace: Book One
    text = text or f'{{ path = "{TEXT}"; }}'
    grid = grid or ('{ L = [16, 32]; N = [1, 2, 4]; T = [1.0, 8.0]; eps = [0.1]; '
                    'normalizer = ["softmax", "sparsemax"]; }')
    with open(os.path.join(SCRATCH, name), "w") as f:
        f.write(f"""model = {model_list(dirs)};
text = {text};
windows = {{ count = {windows}; offset = {offset}; stride = 64; }};
grid = {grid};
output = "{output}";
{extra}""")


def ok(p, what):
    check(p.returncode == 0, f"{what}: exit {p.returncode}: {p.stderr[-600:]}")
    return p.returncode == 0


def need_trained():
    missing = [p for p in CKPTS + [TEXT] if not os.path.exists(p)]
    if missing:
        print(f"SKIPPED: the trained test assets are missing ({', '.join(missing)}); "
              f"they live in the shared/ folder beside the clone")
        sys.exit(SKIP)


def ckpt_reference():
    """The three-model file (3 ranks) and each checkpoint's single-model file."""
    write_config("m3.cfg", CKPTS, "m3.h5")
    if not os.path.exists(os.path.join(SCRATCH, "m3.h5")):
        ok(run(["m3.cfg"], ranks=3), "three checkpoints, 3 ranks")
    for i, d in enumerate(CKPTS):
        name = os.path.basename(d)
        if not os.path.exists(os.path.join(SCRATCH, f"{name}.h5")):
            write_config(f"{name}.cfg", [d], f"{name}.h5")
            ok(run([f"{name}.cfg"], ranks=1 + i % 2), f"single run of {name}")


def case_ckpt():
    need_trained()
    # the reference files the other checkpoint cases reuse: made afresh here
    for n in os.listdir(SCRATCH):
        if n.startswith(("m3.", "wp-gpt2-4x3")):
            os.unlink(os.path.join(SCRATCH, n))
    ckpt_reference()
    for i, d in enumerate(CKPTS):
        name = os.path.basename(d)
        same_model_values(f"{SCRATCH}/m3.h5", i, f"{SCRATCH}/{name}.h5", f"model {i} vs {name} alone")
    # the comparison can fail: model 0 is not the step-400 checkpoint
    before = dict(counts)
    same_model_values(f"{SCRATCH}/m3.h5", 0, f"{SCRATCH}/wp-gpt2-4x3-step400.h5", "(expected to differ)")
    differs = counts["failed"] > before["failed"]
    counts.update(before)  # those failures were the point
    check(differs, "model 0 compared with another checkpoint differs")
    with h5py.File(f"{SCRATCH}/m3.h5", "r") as f:
        names = [n.decode() if isinstance(n, bytes) else n for n in f["model"][()]]
        check(names == [os.path.basename(d) for d in CKPTS], f"model coordinate {names}")
        check(list(f["training_step"][()]) == [100, 400, 700], f"training_step {f['training_step'][()]}")
        check(list(f["model_n_layer"][()]) == [4, 4, 4] and list(f["model_n_head"][()]) == [3, 3, 3],
              "model shapes")
        paths = [p.decode() if isinstance(p, bytes) else p for p in f["model_path"][()]]
        check(paths == CKPTS, f"model_path {paths}")
        shas = [s.decode() if isinstance(s, bytes) else s for s in f["model_sha256"][()]]
        for d, s in zip(CKPTS, shas):
            want = subprocess.run(["sha256sum", os.path.join(d, "model.safetensors")],
                                  capture_output=True, text=True).stdout.split()[0]
            check(s == want, f"model_sha256 of {d}: {s} vs sha256sum {want}")
        check(f["dist_true"].dims[0][0].name == "/model" and f["status"].shape == (3, 3, 2),
              f"model is the first dimension: status {f['status'].shape}")
        check(bool((f["head_valid"][()] == 1).all()), "same shapes: every head present")
        check(f["dist_true"].attrs["coordinates"].split()[0] == "model_path", "CF coordinates attribute")
    st = subprocess.run([BIN, "status", "m3.h5"], cwd=SCRATCH, capture_output=True, text=True)
    check("model 1 wp-gpt2-4x3-step400: 6/6 cells done" in st.stdout, f"status per model: {st.stdout}")


def case_resume():
    need_trained()
    ckpt_reference()
    write_config("kill.cfg", CKPTS, "kill.h5", extra="runtime = { commit_every = 2; };\n")
    # one unit (a window of a model, 2 cells) per commit: the 4th durable commit is the
    # first window of model 1 -- the writer is held there and killed
    phase, release = f"{SCRATCH}/kill.phase", f"{SCRATCH}/kill.release"
    for n in os.listdir(SCRATCH):
        if n.startswith("kill.") and not n.endswith(".cfg"):
            os.unlink(os.path.join(SCRATCH, n))
    held = dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=phase, ATTNSWEEP_TEST_HOLD="journal_synced 4",
                ATTNSWEEP_TEST_RELEASE=release)
    p = subprocess.Popen([BIN_TEST, "run", "kill.cfg"], env=held, cwd=SCRATCH,
                         stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    check(wait_for_phase(phase, "journal_synced", 4, p), "the run reached its 4th commit")
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=600)
    st = subprocess.run([BIN, "status", "kill.h5"], cwd=SCRATCH, capture_output=True, text=True)
    check("model 0 wp-gpt2-4x3-step100: 6/6 cells done" in st.stdout and
          "model 1 wp-gpt2-4x3-step400: 2/6 cells done" in st.stdout,
          f"killed inside model 1: {st.stdout}")
    r = run(["kill.cfg"], ranks=2)
    if ok(r, "resume"):
        out = r.stdout + r.stderr
        check("5 this run" in out, f"the resume computes the 5 windows left: {out}")
    same_values(f"{SCRATCH}/kill.h5", f"{SCRATCH}/m3.h5", "killed + resumed vs uninterrupted")


def case_extend():
    need_trained()
    ckpt_reference()
    for n in ("ext.h5", "ext.h5.journal", "ext.h5.status"):
        if os.path.exists(os.path.join(SCRATCH, n)):
            os.unlink(os.path.join(SCRATCH, n))
    write_config("ext2.cfg", CKPTS[:2], "ext.h5")
    write_config("ext3.cfg", CKPTS, "ext.h5")
    ok(run(["ext2.cfg"]), "two checkpoints")
    r = run(["ext3.cfg"], ranks=2)
    if ok(r, "the third checkpoint appended"):
        out = r.stdout + r.stderr
        check("3 this run" in out and "12 before this run" in out,
              f"only the new model's windows are computed: {out}")
    same_values(f"{SCRATCH}/ext.h5", f"{SCRATCH}/m3.h5", "extended by a model vs all three at once")
    write_config("reorder.cfg", [CKPTS[1], CKPTS[0], CKPTS[2]], "ext.h5")
    for cfg, what in (("reorder.cfg", "reordered models"), ("ext2.cfg", "a model removed")):
        r = run([cfg])
        check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "model (refused" in r.stderr,
              f"{what} refused in one line: exit {r.returncode}: {r.stderr}")
    same_values(f"{SCRATCH}/ext.h5", f"{SCRATCH}/m3.h5", "the refusals changed nothing")


def case_merge():
    need_trained()
    ckpt_reference()
    write_config("sh.cfg", CKPTS, "sh.h5")
    for n in os.listdir(SCRATCH):
        if n.startswith("sh.") and n.endswith((".h5", ".journal", ".status")):
            os.unlink(os.path.join(SCRATCH, n))
    for i in range(2):
        ok(run(["sh.cfg", "--shard", f"{i}/2"], ranks=1 + i), f"shard {i} of 2")
    r = subprocess.run([BIN, "merge", "sh.shard-0-of-2.h5", "sh.shard-1-of-2.h5"], cwd=SCRATCH,
                       capture_output=True, text=True)
    ok(r, "merge")
    same_values(f"{SCRATCH}/sh.h5", f"{SCRATCH}/m3.h5", "merged shards vs one run")


def case_mixed():
    need_trained()
    trained = CKPTS[2]
    tiny = os.path.join(SCRATCH, "tiny")  # its own name: the basename is the model's name
    if not os.path.exists(os.path.join(tiny, "model.safetensors")):
        s = subprocess.run([BIN, "synth", "--preset", "tiny", "--seed", "3", "--force", "--out", tiny,
                            "--vocab", trained], capture_output=True, text=True)
        check(s.returncode == 0, f"synth tiny: {s.stderr}")
    grid = ('{ L = [16, 32]; N = [1, 2, 4]; T = [1.0, 8.0]; eps = [0.1]; '
            'normalizer = ["softmax", "ssmax"]; }')
    write_config("mix.cfg", [trained, tiny], "mix.h5", grid=grid, windows=2)
    write_config("mix_a.cfg", [trained], "mix_a.h5", grid=grid, windows=2)
    write_config("mix_b.cfg", [tiny], "mix_b.h5", grid=grid, windows=2)
    for n in os.listdir(SCRATCH):
        if n.startswith("mix") and not n.endswith(".cfg"):
            os.unlink(os.path.join(SCRATCH, n))
    ok(run(["mix.cfg"], ranks=2), "trained 4x3 + tiny 2x4")
    ok(run(["mix_a.cfg"]), "trained alone")
    ok(run(["mix_b.cfg"], ranks=2), "tiny alone")
    same_model_values(f"{SCRATCH}/mix.h5", 0, f"{SCRATCH}/mix_a.h5", "trained model vs alone")
    same_model_values(f"{SCRATCH}/mix.h5", 1, f"{SCRATCH}/mix_b.h5", "tiny model vs alone")
    with h5py.File(f"{SCRATCH}/mix.h5", "r") as f:
        check(list(f["layer"][()]) == [0, 1, 2, 3] and list(f["head"][()]) == [0, 1, 2, 3],
              f"union axes layer {f['layer'][()]} head {f['head'][()]}")
        hv = f["head_valid"][()]
        want = np.zeros((2, 4, 4), np.uint8)
        want[0, :, :3] = 1  # 4 layers x 3 heads
        want[1, :2, :] = 1  # 2 layers x 4 heads
        check(np.array_equal(hv, want), f"head_valid {hv.tolist()}")
        check(f["head_valid"].attrs["flag_meanings"] == "masked present", "head_valid flags")
        for var in ("dist_true", "entropy", "grad_fd", "sep_ratio"):
            a = f[var][()]  # (model, window, L, ..., layer, head)
            mask = np.broadcast_to(hv.reshape((2,) + (1,) * (a.ndim - 3) + (4, 4)), a.shape)
            check(np.isnan(a[mask == 0]).all(), f"{var}: masked heads NaN")
            check(np.isfinite(a[mask == 1]).mean() > 0.5, f"{var}: present heads hold numbers")
        ru = f["rows_used"][()]
        mask = np.broadcast_to(hv.reshape((2, 1, 1, 1, 1, 1, 4, 4)), ru.shape)
        check((ru[mask == 0] == -2147483647).all(), "rows_used: masked heads hold the int fill")
        check(list(f["model_n_layer"][()]) == [4, 2] and list(f["model_n_head"][()]) == [3, 4],
              "model shapes")
        check(list(f["training_step"][()]) == [700, -1], f"training_step {f['training_step'][()]}")
        kinds = [k.decode() if isinstance(k, bytes) else k for k in f["model_kind"][()]]
        check(kinds == ["other", "synthetic-random"], f"model_kind per model {kinds}")
        check(f.attrs["model_kind"] == "mixed", f"root model_kind {f.attrs['model_kind']!r}")
        check("model_kind" in f["dist_true"].attrs["coordinates"].split(), "model_kind is a coordinate")
    for name, want in (("mix_a", "other"), ("mix_b", "synthetic-random")):
        with h5py.File(f"{SCRATCH}/{name}.h5", "r") as f:
            check(f.attrs["model_kind"] == want, f"{name}: root model_kind {f.attrs['model_kind']!r}")


def case_sizes():
    small, medium = os.path.join(MODELS, "gpt2"), os.path.join(MODELS, "gpt2-medium")
    for d in (small, medium):
        if not os.path.exists(os.path.join(d, "model.safetensors")):
            print(f"SKIPPED: {d} is missing (the synth_gpt2 / synth_gpt2-medium fixtures make it)")
            sys.exit(SKIP)
    rng = np.random.default_rng(5)
    np.save(os.path.join(SCRATCH, "ids.npy"), rng.integers(0, 50257, size=200).astype("<u2"))
    text = '{ path = "ids.npy"; format = "tokens"; }'
    grid = ('{ L = [32]; N = [1, 4]; T = [8.0]; eps = [0.1]; normalizer = ["softmax"]; '
            'layers = [0, 1]; heads = [0, 1]; }')
    write_config("sizes.cfg", [small, medium], "sizes.h5", text=text, grid=grid, windows=2)
    write_config("sizes_s.cfg", [small], "sizes_s.h5", text=text, grid=grid, windows=2)
    write_config("sizes_m.cfg", [medium], "sizes_m.h5", text=text, grid=grid, windows=2)
    for n in os.listdir(SCRATCH):
        if n.startswith("sizes") and not n.endswith(".cfg"):
            os.unlink(os.path.join(SCRATCH, n))
    ok(run(["sizes.cfg"], ranks=2), "gpt2 + gpt2-medium")
    ok(run(["sizes_s.cfg"]), "gpt2 alone")
    ok(run(["sizes_m.cfg"]), "gpt2-medium alone")
    same_model_values(f"{SCRATCH}/sizes.h5", 0, f"{SCRATCH}/sizes_s.h5", "gpt2 vs alone")
    same_model_values(f"{SCRATCH}/sizes.h5", 1, f"{SCRATCH}/sizes_m.h5", "gpt2-medium vs alone")
    with h5py.File(f"{SCRATCH}/sizes.h5", "r") as f:
        check(list(f["model_n_layer"][()]) == [12, 24] and list(f["model_n_embd"][()]) == [768, 1024],
              "gpt2 and gpt2-medium shapes")
        check((f["status"][()] == 1).all(), "every cell done")


def to_old_layout(path):
    """Rewrites a one-model output as attnsweep wrote it before the model axis."""
    import zlib
    jpath = path + ".journal"
    with open(jpath, "r+b") as f:
        head = bytearray(f.read(256))
        head[8:12] = (2).to_bytes(4, "little")
        head[252:256] = zlib.crc32(bytes(head[:252])).to_bytes(4, "little")
        f.seek(0)
        f.write(head)
    old = path + ".old"
    aux = {"model", "model_path", "model_sha256", "model_n_layer", "model_n_head", "model_n_embd",
           "training_step", "head_valid"}
    with h5py.File(path, "r") as src, h5py.File(old, "w") as dst:
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        src.copy("provenance", dst)
        coords = ["window", "L", "N", "T", "eps", "normalizer", "layer", "head"]
        for c in coords:
            d = dst.create_dataset(c, data=src[c][()])
            d.make_scale(c)
        for name, d in src.items():
            if not isinstance(d, h5py.Dataset) or name in aux or name in coords:
                continue
            if name == "window_start":
                n = dst.create_dataset(name, data=d[()])
                n.dims[0].attach_scale(dst["window"])
                continue
            fill = d.fillvalue if "_FillValue" in d.attrs else None
            n = dst.create_dataset(name, data=d[0], chunks=d.chunks[1:] if d.chunks else None,
                                   fillvalue=fill)
            for k, v in d.attrs.items():
                if k not in ("DIMENSION_LIST", "coordinates"):
                    n.attrs[k] = v
            for i in range(1, d.ndim):
                n.dims[i - 1].attach_scale(dst[d.dims[i][0].name.lstrip("/")])
    os.replace(old, path)


def case_oldfile():
    tiny = os.path.join(MODELS, "tiny")
    rng = np.random.default_rng(7)
    np.save(os.path.join(SCRATCH, "old_ids.npy"), rng.integers(0, 50257, size=300).astype("<u2"))
    text = '{ path = "old_ids.npy"; format = "tokens"; }'
    tiny2 = os.path.join(SCRATCH, "tiny-b")
    if not os.path.exists(os.path.join(tiny2, "model.safetensors")):
        s = subprocess.run([BIN, "synth", "--preset", "tiny", "--seed", "9", "--force", "--vocab", "none",
                            "--out", tiny2], capture_output=True, text=True)
        check(s.returncode == 0, f"synth: {s.stderr}")
    for n in os.listdir(SCRATCH):
        if n.startswith(("old.", "fresh")) and not n.endswith(".cfg"):
            os.unlink(os.path.join(SCRATCH, n))
    write_config("old.cfg", [tiny], "old.h5", text=text, windows=2)
    ok(run(["old.cfg"]), "one model")
    to_old_layout(os.path.join(SCRATCH, "old.h5"))
    with h5py.File(f"{SCRATCH}/old.h5", "r") as f:
        check("model" not in f and f["dist_true"].ndim == 7, "the old layout: no model dimension")
    write_config("old3.cfg", [tiny], "old.h5", text=text, windows=3)
    r = run(["old3.cfg"])
    if ok(r, "the old output extended by a window"):
        # its cells come back from the old view (the journal was compacted): only the new
        # window is computed
        out = r.stdout + r.stderr
        check("1 this run" in out and "4 before this run" in out, f"old cells kept: {out}")
    write_config("fresh1.cfg", [tiny], "fresh1.h5", text=text, windows=3)
    ok(run(["fresh1.cfg"]), "fresh one-model run")
    same_values(f"{SCRATCH}/old.h5", f"{SCRATCH}/fresh1.h5", "old output resumed vs fresh")
    to_old_layout(os.path.join(SCRATCH, "old.h5"))
    write_config("oldm.cfg", [tiny, tiny2], "old.h5", text=text, windows=3)
    r = run(["oldm.cfg"], ranks=2)
    if ok(r, "a second model appended to the old output"):
        out = r.stdout + r.stderr
        check("3 this run" in out, f"only the new model's windows computed: {out}")
    with open(f"{SCRATCH}/old.h5.journal", "rb") as f:
        check(int.from_bytes(f.read(12)[8:12], "little") == 4, "the journal was rewritten in the current version (4)")
    write_config("fresh2.cfg", [tiny, tiny2], "fresh2.h5", text=text, windows=3)
    ok(run(["fresh2.cfg"]), "fresh two-model run")
    same_values(f"{SCRATCH}/old.h5", f"{SCRATCH}/fresh2.h5", "old output + a model vs fresh")


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    cases = {n[5:]: f for n, f in globals().items() if n.startswith("case_")}
    if CASE not in cases:
        sys.exit(f"unknown case {CASE}; known: {', '.join(cases)}")
    cases[CASE]()
    return summary(f"test_models {CASE}")


if __name__ == "__main__":
    sys.exit(main())
