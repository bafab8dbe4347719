#!/usr/bin/python3
"""bench_families.py -- the PyTorch side of tests/bench/bench_families.sh: the independent
reference forward of a model directory (tests/reference/ref_gpt2.py, ref_neox.py,
ref_llama.py: plain PyTorch ops, sharing no code with the C side), timed in float32 without
autograd, and the forward's FLOP count derived from the weights' shapes.

  bench_families.py time --model DIR [--length 1024] [--threads 1] [--repeat 5]
      loads every tensor as float32 (not timed), runs one warm-up forward and R timed
      ones over L token ids, and prints one line of "key value" pairs:
        family F flops X torch_med s torch_min s torch_max s torch_cpu_med s
      (torch_cpu_med: the process's CPU seconds per forward, all threads)
      The forward is the references' own: all layers' q.k, softmax and pattern @ v, the
      logits at the last position. Run it with OPENBLAS_NUM_THREADS=T as well (torch's
      matmuls go to the system BLAS, which set_num_threads does not reach): the script sets
      it before torch loads when the caller has not.

FLOP count (docs/performance.md, "Forward pass per family"), each multiply-add two FLOPs:
every 2-D weight of a block, [out, in] or [in, out], is one [L, in] x [in, out] matmul:
2 L in out; the attention products q k^T and pattern v over the L (L + 1) / 2 visible (t, j)
pairs of every query head: 2 * 2 H D L (L + 1) / 2; the LM head at the last position:
2 C V. Elementwise work (norms, rotary, softmax, activations) is not counted.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REFS = os.path.join(HERE, "..", "reference")


def block_prefix(family, name):
    """the layer index of a per-block tensor name, or None (embeddings, final norm, head)"""
    prefix = {"gpt2": "h.", "gpt_neox": "gpt_neox.layers.", "llama": "model.layers.",
              "qwen2": "model.layers."}[family]
    name = name[len("transformer."):] if name.startswith("transformer.") else name
    if not name.startswith(prefix):
        return None
    return int(name[len(prefix):].split(".")[0])


def flop_count(family, cfg, shapes, L):
    """shapes: {tensor name: shape} of the whole model"""
    matmul = 0
    for name, shape in shapes.items():
        if block_prefix(family, name) is not None and len(shape) == 2 and name.endswith(".weight"):
            matmul += 2 * L * shape[0] * shape[1]
    if family == "gpt2":
        H, C, V = cfg.get("n_head", 12), cfg.get("n_embd", 768), cfg.get("vocab_size", 50257)
        D, n_layer = C // H, cfg.get("n_layer", 12)
    else:
        H, C, V = cfg["num_attention_heads"], cfg["hidden_size"], cfg["vocab_size"]
        D, n_layer = cfg.get("head_dim") or C // H, cfg["num_hidden_layers"]
    attention = n_layer * 2 * 2 * H * D * L * (L + 1) // 2
    return matmul + attention + 2 * C * V


def load(model_dir, torch):
    """(family, config, forward(tokens) -> logits at the last position, tensor shapes)"""
    sys.path.insert(0, REFS)
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    family = cfg.get("model_type", "gpt2")
    if family == "gpt2":
        import ref_gpt2
        ref_gpt2.torch = torch
        ref = ref_gpt2.Reference(model_dir)
        lazy = ref.w
        shapes = {n: lazy.shape(n) for n in lazy.info}
        ref.w = {n: lazy[n] for n in lazy.info}  # converted once, outside the timing
        return family, cfg, (lambda tokens: ref.forward(tokens, keep_layers=set())[1]), shapes
    import families_io
    mod = __import__("ref_neox" if family == "gpt_neox" else "ref_llama")
    w = families_io.Weights(model_dir, dtype=torch.float32)
    shapes = {n: tuple(t.shape) for n, t in w.t.items()}
    return family, cfg, (lambda tokens: mod.forward(cfg, w, tokens, set())[1]), shapes


def cmd_time(a):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
    import numpy as np
    import torch

    torch.set_num_threads(a.threads)
    family, cfg, forward, shapes = load(a.model, torch)
    V = cfg.get("vocab_size", 50257)
    tokens = np.random.default_rng(1).integers(0, V, size=a.length)
    seconds, cpu = [], []
    with torch.no_grad():
        for r in range(a.repeat + 1):  # r = 0 warms up
            t0, c0 = time.perf_counter(), time.process_time()
            logits = forward(tokens)
            if r:
                seconds.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
    if logits.dtype != torch.float32 or logits.shape != (V,) or not torch.isfinite(logits).all():
        print(f"bench_families.py: {a.model}: the reference forward gave {logits.dtype} logits "
              f"of shape {tuple(logits.shape)} (float32 [{V}], finite expected)", file=sys.stderr)
        return 1
    print(f"family {family} flops {flop_count(family, cfg, shapes, a.length):.6e} "
          f"torch_med {statistics.median(seconds):.6f} torch_min {min(seconds):.6f} "
          f"torch_max {max(seconds):.6f} torch_cpu_med {statistics.median(cpu):.6f}", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("time")
    p.add_argument("--model", required=True)
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    if a.length < 1 or a.threads < 1 or a.repeat < 1:
        ap.error("--length, --threads and --repeat must be at least 1")
    return cmd_time(a)


if __name__ == "__main__":
    sys.exit(main())
