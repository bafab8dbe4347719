"""loader_check.py -- an independent reading of a synth-written model directory.

Parses model.safetensors with only struct + json + numpy (not our C code),
checks the Hugging Face GPT-2 conventions synth must follow, the
initialisation statistics include/model/synth.h documents (including the measured
std of the raw q.k/sqrt(d) scores of layer 0), and finally that the C loader's
arena (dumped by `test_model --dump`) equals the file's tensors in model.h
order, bit for bit, and that its sha256 equals hashlib's.

usage: loader_check.py MODEL_DIR TEST_MODEL_EXE SCRATCH_FILE
"""
import hashlib
import json
import os
import struct
import subprocess
import sys

import numpy as np


def fail(msg):
    print("FAIL", msg)
    sys.exit(1)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    base = 8 + n
    tensors = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, end = e["data_offsets"]
        tensors[name] = np.frombuffer(raw, dtype="<f4", count=(end - b) // 4,
                                      offset=base + b).reshape(e["shape"])
    return raw, n, header, tensors


G = np.uint64(0x9E3779B97F4A7C15)


def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def synth_normals(seed, stream, count):
    """Normals 0..count-1 of stream `stream`: splitmix64 + Box-Muller with the
    series synth.c documents, evaluated in the same order (so bit-exact)."""
    with np.errstate(over="ignore"):
        one = np.ones(1, dtype=np.uint64)
        key = mix64(one * np.uint64(seed) + G) ^ mix64(one * np.uint64(2 * stream + 1) + G)
        k = np.arange((count + 1) // 2, dtype=np.uint64)
        a = mix64(key + (np.uint64(2) * k + np.uint64(1)) * G)
        b = mix64(key + (np.uint64(2) * k + np.uint64(2)) * G)
    u1 = ((a >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0 ** -53
    u2 = (b >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    m, e = np.frexp(u1)
    low = m < 0.70710678118654752
    m = np.where(low, m * 2.0, m)
    e = np.where(low, e - 1, e)
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    acc = np.zeros_like(s)
    for j in range(10, -1, -1):
        acc = acc * s2 + 1.0 / (2 * j + 1)
    log_u1 = e.astype(np.float64) * 0.69314718055994530942 + 2.0 * s * acc
    q4 = u2 * 4.0
    quadrant = np.floor(q4)
    x = (q4 - quadrant) * 1.57079632679489661923
    x2 = x * x
    sn = np.zeros_like(x)
    cs = np.zeros_like(x)
    for j in range(27, 2, -2):
        sn = (sn + 1.0) * (x2 * (-1.0 / (j * (j - 1))))
    sn = x * (1.0 + sn)
    for j in range(26, 1, -2):
        cs = (cs + 1.0) * (x2 * (-1.0 / (j * (j - 1))))
    cs = 1.0 + cs
    q = quadrant.astype(np.int64) & 3
    sin_t = np.choose(q, [sn, cs, -sn, -cs])
    cos_t = np.choose(q, [cs, -sn, -cs, sn])
    r = np.sqrt(-2.0 * log_u1)
    z = np.empty(2 * len(k))
    z[0::2] = r * cos_t
    z[1::2] = r * sin_t
    return z[:count]


def check_generator(cfg, header, t, L, C):
    seed = cfg["attnsweep_seed"]
    names = [k for k in header if k != "__metadata__"]  # stream = position in the file
    proj = 0.02 / np.sqrt(2.0 * L)
    qk = np.sqrt(3.0 / C)
    checked = 0
    for name in ["wte.weight", "wpe.weight", "h.0.attn.c_attn.weight", "h.0.attn.c_proj.weight",
                 "h.0.mlp.c_fc.weight", f"h.{L - 1}.mlp.c_proj.weight"]:
        a = t[name].ravel()
        n = min(a.size, 200000)
        z = synth_normals(seed, names.index(name), n)
        std = np.full(n, 0.02)
        if name.endswith("c_attn.weight"):
            std[np.arange(n) % (3 * C) < 2 * C] = qk
        elif name.endswith("c_proj.weight"):
            std[:] = proj
        want = (std * z).astype(np.float32)
        bad = np.flatnonzero(want.view(np.uint32) != a[:n].view(np.uint32))
        if bad.size:
            i = bad[0]
            fail(f"{name}[{i}] = {a[i]!r}, re-implemented generator gives {want[i]!r} "
                 f"({bad.size} of {n} differ)")
        checked += n
    print(f"generator re-implementation matches {checked} values bit for bit")


def main():
    model_dir, exe, scratch = sys.argv[1:4]
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    L, H, C, P, V = (cfg[k] for k in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size"))
    for key, want in (("model_type", "gpt2"), ("architectures", ["GPT2LMHeadModel"]),
                      ("activation_function", "gelu_new"), ("attnsweep_synthetic", True)):
        if cfg.get(key) != want:
            fail(f"config.json {key} = {cfg.get(key)!r}, want {want!r}")
    if "attnsweep_seed" not in cfg:
        fail("config.json lacks attnsweep_seed")

    path = os.path.join(model_dir, "model.safetensors")
    raw, n, header, t = read_safetensors(path)
    if n % 8:
        fail(f"header length {n} not padded to 8")
    if header.get("__metadata__") != {"format": "pt"}:
        fail(f"__metadata__ {header.get('__metadata__')}")

    # Hugging Face GPT2Model names and Conv1D [in, out] shapes
    want = {"wte.weight": [V, C], "wpe.weight": [P, C], "ln_f.weight": [C], "ln_f.bias": [C]}
    for l in range(L):
        h = f"h.{l}."
        want.update({h + "ln_1.weight": [C], h + "ln_1.bias": [C], h + "attn.bias": [1, 1, P, P],
                     h + "attn.c_attn.weight": [C, 3 * C], h + "attn.c_attn.bias": [3 * C],
                     h + "attn.c_proj.weight": [C, C], h + "attn.c_proj.bias": [C],
                     h + "ln_2.weight": [C], h + "ln_2.bias": [C],
                     h + "mlp.c_fc.weight": [C, 4 * C], h + "mlp.c_fc.bias": [4 * C],
                     h + "mlp.c_proj.weight": [4 * C, C], h + "mlp.c_proj.bias": [C]})
    if set(t) != set(want):
        fail(f"tensor names differ: extra {set(t) - set(want)}, missing {set(want) - set(t)}")
    for k, s in want.items():
        if list(t[k].shape) != s:
            fail(f"{k} shape {list(t[k].shape)} want {s}")
    tril = np.tril(np.ones((P, P), dtype=np.float32))
    for l in range(L):
        if not np.array_equal(t[f"h.{l}.attn.bias"][0, 0], tril):
            fail(f"h.{l}.attn.bias is not the causal mask")

    # initialisation statistics (tolerance: a few standard errors of a std estimate)
    def check_std(name, a, std):
        got = float(np.std(a, dtype=np.float64))
        tol = 5 * std / np.sqrt(2 * a.size) + 1e-12
        if abs(got - std) > tol or abs(float(np.mean(a, dtype=np.float64))) > 5 * std / np.sqrt(a.size):
            fail(f"{name}: std {got:.6g} want {std:.6g} (+-{tol:.2g})")

    qk_std = np.sqrt(3.0 / C)
    if abs(cfg["attnsweep_qk_init_std"] - qk_std) > 1e-8:
        fail(f"attnsweep_qk_init_std {cfg['attnsweep_qk_init_std']} want {qk_std}")
    check_std("wte", t["wte.weight"], 0.02)
    check_std("wpe", t["wpe.weight"], 0.02)
    for l in range(L):
        h = f"h.{l}."
        w = t[h + "attn.c_attn.weight"]
        check_std(h + "q", w[:, :C], qk_std)
        check_std(h + "k", w[:, C:2 * C], qk_std)
        check_std(h + "v", w[:, 2 * C:], 0.02)
        check_std(h + "attn.c_proj", t[h + "attn.c_proj.weight"], 0.02 / np.sqrt(2 * L))
        check_std(h + "mlp.c_fc", t[h + "mlp.c_fc.weight"], 0.02)
        check_std(h + "mlp.c_proj", t[h + "mlp.c_proj.weight"], 0.02 / np.sqrt(2 * L))
        for k in ("ln_1.weight", "ln_2.weight"):
            if not np.all(t[h + k] == 1):
                fail(h + k + " not all ones")
        for k in ("ln_1.bias", "ln_2.bias", "attn.c_attn.bias", "attn.c_proj.bias",
                  "mlp.c_fc.bias", "mlp.c_proj.bias"):
            if not np.all(t[h + k] == 0):
                fail(h + k + " not all zeros")

    # measured std of layer 0's raw scores q.k/sqrt(d) for random tokens (all pairs, all heads)
    rng = np.random.default_rng(0)
    T = min(P, 128)
    stds = []
    for _ in range(4):
        tok = rng.integers(0, V, T)
        x = (t["wte.weight"][tok] + t["wpe.weight"][:T]).astype(np.float64)
        x = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + cfg["layer_norm_epsilon"])
        w = t["h.0.attn.c_attn.weight"].astype(np.float64)
        q, k = x @ w[:, :C], x @ w[:, C:2 * C]
        d = C // H
        for hd in range(H):
            s = q[:, hd * d:(hd + 1) * d] @ k[:, hd * d:(hd + 1) * d].T / np.sqrt(d)
            stds.append(s.std())
    logit_std = float(np.mean(stds))
    print(f"layer-0 raw score std (q.k/sqrt(d)): {logit_std:.3f} (target 3)")
    if not 2.0 < logit_std < 4.5:
        fail(f"layer-0 score std {logit_std} outside (2, 4.5)")

    # the generator, re-implemented from synth.h's description, reproduces the bytes
    check_generator(cfg, header, t, L, C)

    # the C loader's arena equals the file's tensors in model.h's order
    order = ["wte.weight", "wpe.weight"]
    for l in range(L):
        order += [f"h.{l}.{s}" for s in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight",
                                         "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                                         "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                                         "mlp.c_proj.weight", "mlp.c_proj.bias")]
    order += ["ln_f.weight", "ln_f.bias"]
    out = subprocess.run([exe, "--dump", model_dir, scratch], capture_output=True, text=True)
    if out.returncode:
        fail(f"dump failed: {out.stderr}")
    c_sha, c_floats = out.stdout.split()
    arena = np.fromfile(scratch, dtype="<f4")
    os.unlink(scratch)
    if int(c_floats) != arena.size:
        fail("dump size")
    pos = 0
    for name in order:
        a = t[name].ravel()
        if not np.array_equal(arena[pos:pos + a.size].view(np.uint32), a.view(np.uint32)):
            fail(f"arena differs from the file at tensor {name}")
        pos += a.size
    if pos != arena.size:
        fail(f"arena has {arena.size} floats, tensors {pos}")
    if c_sha != hashlib.sha256(raw).hexdigest():
        fail(f"weights_sha256 {c_sha} != hashlib {hashlib.sha256(raw).hexdigest()}")
    print(f"ok: {len(t)} tensors, {pos} parameters, arena matches bit for bit, sha256 {c_sha[:16]}...")


if __name__ == "__main__":
    main()
