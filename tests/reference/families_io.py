#!/usr/bin/python3
"""families_io.py -- model directories and dump checks for the gpt_neox, llama
and qwen2 references (ref_neox.py, ref_llama.py). Debian's /usr/bin/python3
(numpy, h5py, torch). Shares no code with the C side: the safetensors files
are written and read here with json + numpy (BF16 through torch).

  families_io.py make-model --family F --out DIR [shape options] [--tied]
                            [--shards N] [--dtype f32|bf16] [--seed S]
      random weights in the Hugging Face layout of family F (gpt_neox, llama,
      qwen2): config.json with the family's keys, model.safetensors (or N
      shards and model.safetensors.index.json), and DIR/tokens.txt (random ids).
  families_io.py compare --model DIR --dump FILE.h5 [--window-start K]
      recomputes every tensor of an `attnsweep dump` file with the family's
      float64 reference and checks it:
        q, k, v      |d| <= 1e-4 * max|ref| of that layer's tensor
        scores       |d| <= 1e-4 * max|ref visible| on j <= t, NaN above
        pattern      |d| <= 2e-5 absolute (and exactly 0 above the diagonal)
        logits_last  |d| <= 1e-4 * max|ref|
      exit 0 when everything holds, 1 otherwise (each failure on one line).
The tolerances are float32 arithmetic against float64 (the C side rounds
each op; a 4-layer model at L = 4096 stays well inside them).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch


def write_safetensors(path, tensors, dtype):
    """tensors: list of (name, float32 ndarray); dtype 'F32' or 'BF16'."""
    header, blobs, at = {}, [], 0
    for name, arr in tensors:
        a = np.ascontiguousarray(arr, dtype=np.float32)
        if dtype == "BF16":
            t = torch.from_numpy(a.copy()).to(torch.bfloat16).view(torch.int16).numpy()
            raw = t.astype("<i2").tobytes()
        else:
            raw = a.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


class Weights:
    """Every tensor of model.safetensors or of the shards its index names, as float64 (the
    references' precision) or as the dtype asked for (the timing of tests/bench uses float32)."""

    def __init__(self, model_dir, dtype=torch.float64):
        single = os.path.join(model_dir, "model.safetensors")
        if os.path.exists(single):
            files = [single]
        else:
            with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
                names = json.load(f)["weight_map"].values()
            files = [os.path.join(model_dir, n) for n in dict.fromkeys(names)]
        self.t = {}
        for path in files:
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
                data = f.read()
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                a, b = info["data_offsets"]
                raw = np.frombuffer(data[a:b], dtype={"F32": "<f4", "BF16": "<i2", "F16": "<f2"}[info["dtype"]])
                if info["dtype"] == "BF16":
                    x = torch.from_numpy(raw.copy()).view(torch.bfloat16).to(dtype)
                else:
                    x = torch.from_numpy(raw.astype(np.float32 if dtype == torch.float32 else np.float64))
                self.t[name] = x.reshape(info["shape"])

    def __getitem__(self, name):
        return self.t[name]

    def get(self, name):
        return self.t.get(name)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rope(x, inv_freq, rot):
    """x [H, L, D]: the first rot dims rotated, position t by angle t * inv_freq (float64;
    cos and sin then rounded to x's dtype, so a float32 x stays float32)."""
    L = x.shape[1]
    freqs = torch.outer(torch.arange(L, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    xr, xp = x[..., :rot], x[..., rot:]
    return torch.cat((xr * cos + rotate_half(xr) * sin, xp), dim=-1)


def causal_attention(q, k, D):
    """raw scores [H, L, L] and softmax(q.k / sqrt D) over j <= t."""
    L = q.shape[1]
    raw = q @ k.transpose(-1, -2)
    causal = torch.tril(torch.ones(L, L, dtype=torch.bool))
    att = torch.softmax(torch.where(causal, raw / math.sqrt(D), torch.tensor(-math.inf, dtype=torch.float64)), dim=-1)
    return raw, att


def rand(g, shape, std):
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * std).numpy().astype(np.float32)


def make_model(a):
    import ref_llama
    import ref_neox

    g = torch.Generator().manual_seed(a.seed)
    mod = ref_neox if a.family == "gpt_neox" else ref_llama
    cfg, tensors = mod.random_model(a, g, rand)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    dtype = "BF16" if a.dtype == "bf16" else "F32"
    if a.shards <= 1:
        write_safetensors(os.path.join(a.out, "model.safetensors"), tensors, dtype)
    else:
        per = math.ceil(len(tensors) / a.shards)
        weight_map = {}
        for s in range(a.shards):
            name = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
            part = tensors[s * per:(s + 1) * per]
            write_safetensors(os.path.join(a.out, name), part, dtype)
            weight_map.update({n: name for n, _ in part})
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
    rng = np.random.default_rng(a.seed)
    ids = rng.integers(0, cfg["vocab_size"], size=a.tokens)
    with open(os.path.join(a.out, "tokens.txt"), "w") as f:
        f.write(" ".join(str(int(t)) for t in ids) + "\n")


def compare(a):
    import h5py
    import ref_llama
    import ref_neox

    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    mod = ref_neox if cfg["model_type"] == "gpt_neox" else ref_llama
    with h5py.File(a.dump, "r") as f:
        tokens = f["tokens"][()].astype(np.int64)
        layers = sorted(int(k[6:]) for k in f if k.startswith("layer_"))
        got = {l: {n: f[f"layer_{l:02d}/{n}"][()] for n in ("q", "k", "v", "scores", "pattern")} for l in layers}
        logits_got = f["logits_last"][()]
    kept, logits = mod.forward(cfg, Weights(a.model), tokens, set(layers))
    bad = []
    L = len(tokens)
    upper = ~np.tril(np.ones((L, L), dtype=bool))
    for l in layers:
        for n in ("q", "k", "v", "scores", "pattern"):
            ref, g = kept[l][n].numpy(), got[l][n].astype(np.float64)
            if ref.shape != g.shape:
                bad.append(f"layer {l} {n}: shape {g.shape}, reference {ref.shape}")
                continue
            if n == "scores":
                if not np.isnan(g[:, upper]).all():
                    bad.append(f"layer {l} scores: not NaN above the diagonal")
                ref, g = ref[:, ~upper], g[:, ~upper]
            if n == "pattern":
                tol = 2e-5
                if np.any(g[:, upper] != 0):
                    bad.append(f"layer {l} pattern: non-zero above the diagonal")
            else:
                tol = 1e-4 * np.abs(ref).max()
            err = np.abs(g - ref).max()
            if not err <= tol:
                bad.append(f"layer {l} {n}: max |d| {err:.3g} > {tol:.3g}")
    ref = logits.numpy()
    err, tol = np.abs(logits_got - ref).max(), 1e-4 * np.abs(ref).max()
    if not err <= tol:
        bad.append(f"logits_last: max |d| {err:.3g} > {tol:.3g}")
    for b in bad:
        print("FAIL", b)
    print(f"{a.dump}: {cfg['model_type']} L={L} layers {layers}: {'ok' if not bad else f'{len(bad)} failures'}")
    return 1 if bad else 0


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make-model")
    m.add_argument("--family", required=True, choices=("gpt_neox", "llama", "qwen2"))
    m.add_argument("--out", required=True)
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--heads", type=int, default=4)
    m.add_argument("--kv-heads", type=int, default=0, help="llama/qwen2: 0 = heads")
    m.add_argument("--hidden", type=int, default=64)
    m.add_argument("--head-dim", type=int, default=0, help="llama/qwen2: written as head_dim when > 0")
    m.add_argument("--inner", type=int, default=96)
    m.add_argument("--vocab", type=int, default=320)
    m.add_argument("--positions", type=int, default=1024)
    m.add_argument("--rotary-pct", type=float, default=0.25)
    m.add_argument("--sequential", action="store_true", help="gpt_neox: use_parallel_residual false")
    m.add_argument("--rope-scaling", default="", help="llama: JSON of rope_scaling")
    m.add_argument("--tied", action="store_true")
    m.add_argument("--shards", type=int, default=1)
    m.add_argument("--dtype", default="f32", choices=("f32", "bf16"))
    m.add_argument("--tokens", type=int, default=1100)
    m.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("compare")
    c.add_argument("--model", required=True)
    c.add_argument("--dump", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.cmd == "make-model":
        make_model(a)
        return 0
    return compare(a)


if __name__ == "__main__":
    sys.exit(main())
