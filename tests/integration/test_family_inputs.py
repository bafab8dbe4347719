#!/usr/bin/python3
"""Bad model directories of the rotary families, each refused in one line that says what
to fix (docs/families.md): `attnsweep dump` exits 1 with one line on stderr naming the key,
file or tensor, and `attnsweep run` refuses a sliding window inside the grid's L the same
way, leaving an existing results file byte for byte as it was.

usage: test_family_inputs.py ATTNSWEEP FAMILIES_IO SCRATCH
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from sweeptest import ENV, check, summary  # noqa: E402

BIN, FAMILIES_IO, SCRATCH = (os.path.abspath(p) for p in sys.argv[1:4])
PY = "/usr/bin/python3"


def make(name, *args):
    d = os.path.join(SCRATCH, name)
    shutil.rmtree(d, ignore_errors=True)
    m = subprocess.run([PY, FAMILIES_IO, "make-model", "--out", d, "--layers", "1", "--tokens", "80"] + list(args),
                       capture_output=True, text=True)
    check(m.returncode == 0, f"make-model {name}: {m.stderr}")
    return d


def patched(base, name, **keys):
    """A copy of model base with config.json's keys replaced (None deletes one)."""
    d = os.path.join(SCRATCH, name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(base, d)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    for k, v in keys.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


def refused(d, want, what, length=16):
    if os.path.exists(os.path.join(SCRATCH, "bad.h5")):
        os.unlink(os.path.join(SCRATCH, "bad.h5"))
    p = subprocess.run([BIN, "dump", "--model", d, "--tokens", os.path.join(d, "tokens.txt"), "--length",
                        str(length), "--out", os.path.join(SCRATCH, "bad.h5")], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and all(w in p.stderr for w in want),
          f"{what}: exit {p.returncode}, want 1 and one line with {want}: {p.stderr!r}")
    check(not os.path.exists(os.path.join(SCRATCH, "bad.h5")), f"{what}: no dump file left")


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    llama = make("llama", "--family", "llama", "--heads", "4", "--kv-heads", "2")
    neox = make("neox", "--family", "gpt_neox")
    sharded = make("sharded", "--family", "qwen2", "--shards", "2")
    # the good ones dump
    for d in (llama, neox, sharded):
        p = subprocess.run([BIN, "dump", "--model", d, "--tokens", os.path.join(d, "tokens.txt"), "--length", "16",
                            "--out", os.path.join(SCRATCH, "good.h5")], capture_output=True, text=True)
        check(p.returncode == 0, f"{d} dumps: {p.stderr}")

    refused(patched(llama, "bert", model_type="bert"), ['"bert"', '"gpt_neox"', '"llama"', '"qwen2"'],
            "unknown model_type")
    refused(patched(llama, "dynamic", rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
            ['rope_scaling type "dynamic"', '"linear"', '"llama3"'], "unknown rope_scaling")
    refused(patched(llama, "nodiv", hidden_size=66), ['"hidden_size" (66)', '"num_attention_heads" (4)'],
            "hidden_size that the heads do not divide, no head_dim")
    refused(patched(llama, "oddhd", head_dim=15), ["head_dim 15 is odd"], "odd head_dim")
    refused(patched(llama, "kv3", num_key_value_heads=3), ['"num_key_value_heads" (3) does not divide'],
            "kv heads that do not divide the heads")
    refused(patched(neox, "rotodd", rotary_pct=0.2), ['"rotary_pct"', "even"], "odd rotary dims")
    refused(patched(neox, "gelunew", hidden_act="gelu_new"), ['"hidden_act" is "gelu_new"'], "another activation")
    refused(patched(llama, "shape", intermediate_size=100),
            ["model.layers.0.mlp.gate_proj.weight", "[96, 64]", "expected [100, 64]"], "a tensor of the wrong shape")
    refused(patched(llama, "untied", tie_word_embeddings=True, vocab_size=321),
            ["model.embed_tokens.weight", "[320, 64]", "[321, 64]"], "a vocabulary the embedding lacks")
    missing = patched(sharded, "missing")
    os.unlink(os.path.join(missing, "model-00002-of-00002.safetensors"))
    refused(missing, ["model-00002-of-00002.safetensors", "model.safetensors.index.json"], "a missing shard")
    window = patched(sharded, "window", use_sliding_window=True, sliding_window=32, max_window_layers=0)
    refused(window, ["sliding_window 32", "L = 64"], "a sliding window inside L", length=64)
    p = subprocess.run([BIN, "dump", "--model", window, "--tokens", os.path.join(window, "tokens.txt"),
                        "--length", "32", "--out", os.path.join(SCRATCH, "w32.h5")], capture_output=True, text=True)
    check(p.returncode == 0, f"L = 32 within the window dumps: {p.stderr}")

    # a sweep: the window inside grid.L refused at once; the results file already there untouched
    out = os.path.join(SCRATCH, "sw.h5")
    for n in ("sw.h5", "sw.h5.journal", "sw.h5.status"):
        if os.path.exists(os.path.join(SCRATCH, n)):
            os.unlink(os.path.join(SCRATCH, n))

    def cfg(name, L):
        with open(os.path.join(SCRATCH, name), "w") as f:
            f.write(f'model = "{window}";\ntext = {{ path = "{window}/tokens.npy"; format = "tokens"; }};\n'
                    f'windows = {{ count = 1; offset = 0; stride = 64; }};\n'
                    f'grid = {{ L = [{L}]; N = [1, 2]; T = [1.0]; eps = [0.1]; normalizer = ["softmax"]; }};\n'
                    f'output = "{out}";\n')
    import numpy as np
    with open(os.path.join(window, "tokens.txt")) as f:
        np.save(os.path.join(window, "tokens.npy"), np.array(f.read().split(), dtype="<u2"))
    cfg("sw16.cfg", 16)
    cfg("sw64.cfg", 64)
    r = subprocess.run([BIN, "run", "sw16.cfg"], cwd=SCRATCH, env=ENV, capture_output=True, text=True)
    check(r.returncode == 0, f"a sweep within the window runs: {r.stderr[-400:]}")
    before = hashlib.sha256(open(out, "rb").read()).hexdigest() if os.path.exists(out) else None
    r = subprocess.run([BIN, "run", "sw64.cfg"], cwd=SCRATCH, env=ENV, capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    check(r.returncode != 0 and len(lines) == 1 and "sliding_window = 32" in r.stderr and "grid.L" in r.stderr,
          f"grid.L beyond the window refused in one line: exit {r.returncode}: {r.stderr!r}")
    after = hashlib.sha256(open(out, "rb").read()).hexdigest() if os.path.exists(out) else None
    check(before is not None and before == after, "the results file is untouched")
    return summary("test_family_inputs")


sys.exit(main())
