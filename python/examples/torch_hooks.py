#!/usr/bin/env python3
"""Measure a PyTorch model's attention with attnsweep's kernels: forward hooks capture each
layer's raw scores q.k and value vectors, attnsweep.metrics computes the sweep's metrics of
them (the same variables as a results file).

The model here is the project's PyTorch GPT-2 reference (tests/reference/ref_gpt2.py), whose
identity modules hook_scores[l] and hook_v[l] carry those tensors. For another model, hook
whatever module sees q and k (or compute q @ k^T in the hook) and pass the values: scores
[layer, head, L, L] WITHOUT the 1/sqrt(d_head) (or logits="scaled"), vectors [layer, head, L,
d_head].

  torch_hooks.py --model MODEL_DIR [--tokens FILE | --length L --seed S] [--out FILE.nc]

prints the head mean of dist_true and entropy per (N, T); --out writes the Dataset (netCDF,
h5netcdf). Needs torch, numpy, xarray and the kernels library (python/README.md).
"""
import argparse
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import ref_gpt2  # noqa: E402

try:
    import attnsweep
except ImportError:  # not installed: this checkout's package
    sys.path.insert(0, os.path.join(HERE, ".."))
    import attnsweep


def capture(ref, tokens):
    """Runs the model once; returns scores [layer, head, L, L] and values [layer, head, L, D]
    as captured by forward hooks (removed afterwards)."""
    got = {}
    handles = []
    for layer in range(ref.n_layer):
        for name, point in (("scores", ref.hook_scores[layer]), ("v", ref.hook_v[layer])):
            def hook(module, inputs, output, key=(name, layer)):
                got[key] = output.detach()
            handles.append(point.register_forward_hook(hook))
    try:
        with torch.no_grad():
            ref.forward(tokens)
    finally:
        for h in handles:
            h.remove()
    layers = range(ref.n_layer)
    return (torch.stack([got["scores", l] for l in layers]), torch.stack([got["v", l] for l in layers]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory (config.json, model.safetensors)")
    ap.add_argument("--tokens", help="whitespace-separated token ids (default: random ones)")
    ap.add_argument("--length", type=int, default=32, help="window length L (default 32)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random tokens")
    ap.add_argument("--out", help="write the Dataset here (netCDF)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ref = ref_gpt2.Reference(a.model)
    if a.tokens:
        tokens = ref_gpt2.read_token_file(a.tokens)[:a.length]
    else:
        tokens = np.random.default_rng(a.seed).integers(0, ref.V, size=a.length)
    scores, v = capture(ref, tokens)
    ds = attnsweep.metrics(scores, v, N=[1, 2, 4, 8], T=[1.0, 8.0], eps=[1e-3],
                           normalizer=["softmax", "sparsemax"])
    table = ds[["dist_true", "entropy"]].sel(L=len(tokens)).mean(("layer", "head"))
    print(table.to_dataframe().to_string())
    if a.out:
        ds.to_netcdf(a.out, engine="h5netcdf")
    return 0


if __name__ == "__main__":
    sys.exit(main())
