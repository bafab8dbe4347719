#!/usr/bin/python3
"""ref_gpt2.py -- an independent float32 GPT-2 reference in plain PyTorch ops.

Run with Debian's /usr/bin/python3 (numpy, h5py, torch 1.13). It reads the
model directory itself (config.json + model.safetensors parsed with json and
numpy: 8-byte little-endian header length, JSON header, raw data; F32, F16 and
BF16 widened to float32 by numpy/torch) and shares no code with the C forward
pass.

  ref_gpt2.py make-tokens --model DIR --count N --seed S --out FILE
      N random token ids for a test: whitespace-separated text, or raw
      little-endian uint16 when FILE ends in .bin.
  ref_gpt2.py compare --model DIR --dump FILE.h5 [--tokens FILE --window-start K]
      recomputes every tensor of an `attnsweep dump` file and checks it:
        pattern      |d| <= 1e-5 absolute (and exactly 0 above the diagonal)
        q, k, v      |d| <= 1e-4 * max|ref| of that layer's tensor
        scores       |d| <= 1e-4 * max|ref visible| on j <= t, NaN above
        logits_last  |d| <= 1e-3 absolute
      exit 0 when everything holds, 1 otherwise (each failure on one line).
  ref_gpt2.py time --model DIR --length L[,L...] --threads T [--repeat R]
      prints "L seconds" per length: the best of R reference forwards after a
      warm-up (all layers' attention kept, logits at the last position only --
      the work the C forward does for a dump).
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np

torch = None  # imported in main() by the commands that need it (make-tokens stays fast)

DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2"}


class LazyWeights:
    """The tensors of a safetensors file, memory-mapped (never read whole: gpt2-xl is
    6 GB in F32) and converted to float32 torch tensors when looked up; nothing is
    cached, so a forward pass holds one layer's converted weights at a time. BF16
    (which numpy lacks) is widened by torch itself: the 16 bits become the top half
    of a float32."""

    def __init__(self, path):
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        self.data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
        self.info = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if name.startswith("transformer."):
                name = name[len("transformer."):]
            self.info[name] = info

    def dtype(self, name):
        return self.info[name]["dtype"]

    def shape(self, name):
        return tuple(self.info[name]["shape"])

    def __getitem__(self, name):
        info = self.info[name]
        a, b = info["data_offsets"]
        arr = self.data[a:b].view(DTYPES[info["dtype"]]).reshape(info["shape"])
        if info["dtype"] == "BF16":
            return torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16).to(torch.float32)
        return torch.from_numpy(arr.astype(np.float32))


class Reference:
    """The forward pass. hook_scores[l] and hook_v[l] are identity modules the raw scores
    [H, L, L] and the values [H, L, D] of layer l pass through: register_forward_hook on them
    captures a layer's attention (python/examples/torch_hooks.py does, for attnsweep.metrics)."""

    def __init__(self, model_dir):
        global torch
        if torch is None:  # imported as a module (not through main)
            import torch
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = json.load(f)
        self.n_layer = self.cfg.get("n_layer", 12)
        self.n_head = self.cfg.get("n_head", 12)
        self.eps = self.cfg.get("layer_norm_epsilon", 1e-5)
        self.w = LazyWeights(os.path.join(model_dir, "model.safetensors"))
        self.V, self.C = self.w.shape("wte.weight")
        self.hook_scores = torch.nn.ModuleList(torch.nn.Identity() for _ in range(self.n_layer))
        self.hook_v = torch.nn.ModuleList(torch.nn.Identity() for _ in range(self.n_layer))

    def forward(self, tokens, keep_layers=None):
        """Returns ({layer: dict of q,k,v,scores,pattern as [H, L, *]}, logits_last)."""
        w, H, C = self.w, self.n_head, self.C
        D = C // H
        ids = torch.as_tensor(np.asarray(tokens, dtype=np.int64))
        L = ids.shape[0]
        wte = w["wte.weight"]
        x = wte[ids] + w["wpe.weight"][:L]
        causal = torch.tril(torch.ones(L, L, dtype=torch.bool))
        neg = torch.finfo(torch.float32).min
        kept = {}
        for l in range(self.n_layer):
            p = f"h.{l}."
            h = torch.nn.functional.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], self.eps)
            qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            q, k, v = qkv.split(C, dim=1)
            q, k, v = (t.reshape(L, H, D).permute(1, 0, 2) for t in (q, k, v))
            v = self.hook_v[l](v)
            raw = self.hook_scores[l](q @ k.transpose(-1, -2))
            att = raw / math.sqrt(D)
            att = torch.where(causal, att, torch.tensor(neg))
            att = torch.softmax(att, dim=-1)
            if keep_layers is None or l in keep_layers:
                kept[l] = {"q": q, "k": k, "v": v, "scores": raw, "pattern": att}
            o = (att @ v).permute(1, 0, 2).reshape(L, C)
            x = x + (o @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"])
            h = torch.nn.functional.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], self.eps)
            f = h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
            f = 0.5 * f * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (f + 0.044715 * torch.pow(f, 3.0))))
            x = x + (f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"])
        last = torch.nn.functional.layer_norm(x[-1:], (C,), w["ln_f.weight"], w["ln_f.bias"], self.eps)
        logits = (last @ wte.T)[0]
        return kept, logits


def read_token_file(path):
    """whitespace-separated integers, or raw little-endian uint16 for *.bin"""
    if path.endswith(".bin"):
        return np.fromfile(path, dtype="<u2").astype(np.int64)
    with open(path) as f:
        return np.array([int(t) for t in f.read().split()], dtype=np.int64)


def cmd_make_tokens(a):
    with open(os.path.join(a.model, "config.json")) as f:
        vocab = json.load(f).get("vocab_size", 50257)
    rng = np.random.default_rng(a.seed)
    ids = rng.integers(0, vocab, size=a.count)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    if a.out.endswith(".bin"):
        ids.astype("<u2").tofile(a.out)
        return 0
    with open(a.out, "w") as f:
        f.write(" ".join(str(i) for i in ids) + "\n")
    return 0


def cmd_compare(a):
    import h5py
    torch.set_num_threads(1)
    ref = Reference(a.model)
    failures = []
    with h5py.File(a.dump, "r") as f:
        tokens = f["tokens"][...]
        L = tokens.shape[0]
        if a.tokens:
            want = read_token_file(a.tokens)[a.window_start:a.window_start + L]
            if not np.array_equal(want, tokens):
                failures.append("tokens: dump differs from the token file window")
        layers = sorted(int(k[len("layer_"):]) for k in f.keys() if k.startswith("layer_"))
        kept, logits = ref.forward(tokens, set(layers))
        upper = ~np.tril(np.ones((L, L), dtype=bool))
        worst = {}

        def note(name, err, tol):
            worst[name] = max(worst.get(name, (0.0, tol))[0], err), tol
            if not err <= tol:
                failures.append(f"{name}: max |diff| {err:.3g} > tolerance {tol:.3g}")

        for l in layers:
            g, r = f[f"layer_{l:02d}"], kept[l]
            for name in ("q", "k", "v"):
                got, want = g[name][...], r[name].numpy()
                if got.shape != want.shape:
                    failures.append(f"layer {l} {name}: shape {got.shape} want {want.shape}")
                    continue
                note(f"layer {l} {name}", float(np.max(np.abs(got - want))), 1e-4 * float(np.max(np.abs(want))))
            got, want = g["scores"][...], r["scores"].numpy()
            if not np.all(np.isnan(got[:, upper])):
                failures.append(f"layer {l} scores: not NaN above the diagonal")
            vis = ~upper
            note(f"layer {l} scores", float(np.max(np.abs(got[:, vis] - want[:, vis]))),
                 1e-4 * float(np.max(np.abs(want[:, vis]))))
            got, want = g["pattern"][...], r["pattern"].numpy()
            if np.any(got[:, upper] != 0):
                failures.append(f"layer {l} pattern: non-zero above the diagonal")
            note(f"layer {l} pattern", float(np.max(np.abs(got - want))), 1e-5)
        got = f["logits_last"][...]
        note("logits_last", float(np.max(np.abs(got - logits.numpy()))), 1e-3)
    by_kind = {}
    for name, (err, tol) in worst.items():
        kind = name.split()[-1]
        if kind not in by_kind or err / tol > by_kind[kind][0] / by_kind[kind][1]:
            by_kind[kind] = (err, tol)
    print(f"L={L} layers={layers}: " + ", ".join(
        f"{k} max|d| {e:.2e} (tol {t:.2e})" for k, (e, t) in sorted(by_kind.items())))
    for line in failures:
        print("FAIL " + line, file=sys.stderr)
    return 1 if failures else 0


def cmd_time(a):
    torch.set_num_threads(a.threads)
    ref = Reference(a.model)
    rng = np.random.default_rng(1)
    for length in (int(x) for x in a.length.split(",")):
        tokens = rng.integers(0, ref.V, size=length)
        ref.forward(tokens)  # warm-up
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            ref.forward(tokens)
            best = min(best, time.perf_counter() - t0)
        print(f"{length} {best:.6f}", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make-tokens")
    p.add_argument("--model", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    p = sub.add_parser("compare")
    p.add_argument("--model", required=True)
    p.add_argument("--dump", required=True)
    p.add_argument("--tokens")
    p.add_argument("--window-start", type=int, default=0)
    p = sub.add_parser("time")
    p.add_argument("--model", required=True)
    p.add_argument("--length", required=True, help="one length or a comma-separated list")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    if a.cmd == "make-tokens":
        return cmd_make_tokens(a)
    global torch
    import torch
    with torch.no_grad():
        return {"make-tokens": cmd_make_tokens, "compare": cmd_compare, "time": cmd_time}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
