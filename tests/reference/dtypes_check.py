#!/usr/bin/python3
"""dtypes_check.py -- F16 and BF16 weights against torch (Debian's /usr/bin/python3).

usage: dtypes_check.py ATTNSWEEP TEST_MODEL TEST_MODEL_DTYPES SCRATCH_DIR

1. Widening: our F16 -> float32 and BF16 -> float32 of all 65536 patterns of each
   (test_model_dtypes --widen) equal torch's .to(torch.float32), bit for bit
   (NaN patterns: both NaN; the loader refuses them anyway).
2. Rounding: our float32 -> F16 / BF16 (what synth --dtype writes) equals torch's
   .to(torch.float16 / torch.bfloat16) on every float32 that widens from a 16-bit
   pattern, every tie between two neighbouring 16-bit values and the values
   just beside it, and 2^21 random float32 bit patterns.
3. Files: the tiny preset written by `attnsweep synth --dtype f32|f16|bf16` with
   one seed; every tensor of the 16-bit files equals torch's rounding of the
   F32 file's tensor, and the headers agree in names, order and shapes.
4. Same weights, two dtypes: torch widens each 16-bit file to an F32 file
   (written here, with its own safetensors writer). The C loader's arena of the
   16-bit file equals that of the F32 file byte for byte (test_model --dump),
   and `attnsweep dump` of one window (every layer, L = 128) gives identical
   q, k, v, scores, pattern and logits_last from both.
Exit 0 when everything holds; each failure on one line.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import h5py
import numpy as np
import torch

failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL " + msg, file=sys.stderr)
    return ok


def f32_bits(t):
    return t.contiguous().view(torch.int32).numpy().view(np.uint32)


def u16(t):
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


def as_half(patterns, dtype):
    return torch.from_numpy(patterns.view(np.int16).copy()).view(dtype)


def check_widening(exe, scratch):
    out = os.path.join(scratch, "widen.bin")
    subprocess.run([exe, "--widen", out], check=True)
    ours = np.fromfile(out, dtype="<u4")
    check(ours.size == 2 * 65536, f"widen table has {ours.size} entries")
    patterns = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    for k, (name, dtype) in enumerate((("F16", torch.float16), ("BF16", torch.bfloat16))):
        theirs = f32_bits(as_half(patterns, dtype).to(torch.float32))
        mine = ours[k * 65536:(k + 1) * 65536]
        nan_t = np.isnan(theirs.view(np.float32))
        nan_m = np.isnan(mine.view(np.float32))
        check(np.array_equal(nan_t, nan_m), f"{name}: NaN patterns differ from torch's")
        bad = np.nonzero((mine != theirs) & ~nan_t)[0]
        check(bad.size == 0, f"{name}: {bad.size} of 65536 patterns widen differently from torch "
              f"(first 0x{bad[0] if bad.size else 0:04X}: ours 0x{mine[bad[0]] if bad.size else 0:08X}"
              f" torch 0x{theirs[bad[0]] if bad.size else 0:08X})")
        payload = int(np.sum(mine[nan_t] != theirs[nan_t]))
        subn = int(np.sum((theirs.view(np.float32) != 0) & (np.abs(theirs.view(np.float32)) <
                                                              (6.1035156e-05 if k == 0 else 1.1754944e-38))))
        print(f"widen {name}: 65536 patterns, {bad.size} differ from torch "
              f"({int(nan_t.sum())} NaN, {payload} with another payload; {subn} subnormal inputs)")


def rounding_inputs():
    rng = np.random.default_rng(15)
    parts = []
    pat = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    for dtype in (torch.float16, torch.bfloat16):
        vals = as_half(pat, dtype).to(torch.float32).numpy()
        vals = vals[np.isfinite(vals)]
        s = np.sort(np.unique(vals))
        mid = ((s[1:].astype(np.float64) + s[:-1]) / 2).astype(np.float32)  # exact ties
        parts += [vals, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))]
    parts.append(rng.integers(0, 2 ** 32, size=1 << 21, dtype=np.uint64).astype(np.uint32).view(np.float32))
    parts.append(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.996, 65520, 65536,
                           3.4028235e38, 1e-45, -1e-45], dtype=np.float32))
    return np.concatenate(parts).astype(np.float32)


def check_rounding(exe, scratch):
    x = rounding_inputs()
    inp, out = os.path.join(scratch, "round.in"), os.path.join(scratch, "round.out")
    x.tofile(inp)
    subprocess.run([exe, "--round", inp, out], check=True)
    ours = np.fromfile(out, dtype="<u2")
    n = x.size
    t = torch.from_numpy(x)
    for k, (name, dtype) in enumerate((("F16", torch.float16), ("BF16", torch.bfloat16))):
        theirs = u16(t.to(dtype))
        mine = ours[k * n:(k + 1) * n]
        nan = np.isnan(x)
        half_nan_m = np.isnan(as_half(mine, dtype).to(torch.float32).numpy())
        check(np.array_equal(half_nan_m, nan), f"round {name}: NaN in != NaN out")
        bad = np.nonzero((mine != theirs) & ~nan)[0]
        first = f" (first {x[bad[0]]!r} = 0x{x[bad[0]:bad[0] + 1].view(np.uint32)[0]:08X}: ours 0x{mine[bad[0]]:04X} " \
                f"torch 0x{theirs[bad[0]]:04X})" if bad.size else ""
        check(bad.size == 0, f"round {name}: {bad.size} of {n} float32 values round differently from torch{first}")
        print(f"round {name}: {n} float32 values, {bad.size} differ from torch")


def read_st(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    names = [k for k in header if k != "__metadata__"]
    return header, names, data


def tensor(header, data, name):
    e = header[name]
    a, b = e["data_offsets"]
    raw = data[a:b]
    if e["dtype"] == "F32":
        return torch.from_numpy(raw.view("<f4").copy()).reshape(e["shape"])
    dt = torch.float16 if e["dtype"] == "F16" else torch.bfloat16
    return torch.from_numpy(raw.view("<i2").copy()).view(dt).reshape(e["shape"])


def write_f32(src_dir, dst_dir):
    """dst_dir: src_dir's tensors widened by torch to float32, same names, order, shapes."""
    header, names, data = read_st(os.path.join(src_dir, "model.safetensors"))
    os.makedirs(dst_dir, exist_ok=True)
    out_header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in names:
        t = tensor(header, data, name).to(torch.float32)
        blob = t.numpy().astype("<f4").tobytes()
        out_header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(out_header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(dst_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for blob in blobs:
            f.write(blob)
    with open(os.path.join(src_dir, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("torch_dtype", None)
    with open(os.path.join(dst_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def check_files(attnsweep, test_model, scratch):
    dirs = {}
    for dt in ("f32", "f16", "bf16"):
        dirs[dt] = os.path.join(scratch, "tiny-" + dt)
        subprocess.run([attnsweep, "synth", "--preset", "tiny", "--seed", "5", "--dtype", dt,
                        "--vocab", "none", "--force", "--out", dirs[dt]], check=True, stdout=subprocess.DEVNULL)
    h32, n32, d32 = read_st(os.path.join(dirs["f32"], "model.safetensors"))
    for dt, torch_dt, st_name in (("f16", torch.float16, "F16"), ("bf16", torch.bfloat16, "BF16")):
        h, names, d = read_st(os.path.join(dirs[dt], "model.safetensors"))
        check(names == n32, f"{dt}: tensor names or order differ from the F32 file")
        bad = []
        for name in names:
            e = h[name]
            if e["dtype"] != st_name or e["shape"] != h32[name]["shape"]:
                bad.append(name + " (dtype/shape)")
                continue
            want = u16(tensor(h32, d32, name).to(torch_dt))
            if not np.array_equal(u16(tensor(h, d, name)), want):
                bad.append(name)
        check(not bad, f"{dt}: tensors differ from torch's rounding of the F32 file: {bad[:5]}")
        with open(os.path.join(dirs[dt], "config.json")) as f:
            cfg = json.load(f)
        check(cfg.get("torch_dtype") == {"f16": "float16", "bf16": "bfloat16"}[dt],
              f"{dt}: config.json torch_dtype {cfg.get('torch_dtype')!r}")
        print(f"file {dt}: {len(names)} tensors equal torch's rounding of the F32 file")

        # the same weights as F32: identical arenas and identical forward outputs
        wide = dirs[dt] + "-as-f32"
        write_f32(dirs[dt], wide)
        arenas = []
        for m in (dirs[dt], wide):
            out = m + ".arena"
            r = subprocess.run([test_model, "--dump", m, out], check=True, capture_output=True, text=True)
            arenas.append(out)
        a, b = (np.fromfile(p, dtype=np.uint32) for p in arenas)
        same_arena = check(a.size == b.size and np.array_equal(a, b),
              f"{dt}: arena differs from the F32 file's ({int(np.sum(a != b)) if a.size == b.size else 'size'})")
        tokens = os.path.join(scratch, "tokens.txt")
        if not os.path.exists(tokens):
            rng = np.random.default_rng(3)
            with open(tokens, "w") as f:
                f.write(" ".join(str(i) for i in rng.integers(0, 50257, size=300)) + "\n")
        dumps = []
        for m in (dirs[dt], wide):
            out = m + ".dump.h5"
            subprocess.run([attnsweep, "dump", "--model", m, "--tokens", tokens, "--length", "128",
                            "--window-start", "20", "--out", out], check=True, stdout=subprocess.DEVNULL,
                           env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
            dumps.append(out)
        with h5py.File(dumps[0], "r") as f, h5py.File(dumps[1], "r") as g:
            names16 = []
            f.visit(lambda n: names16.append(n) if isinstance(f[n], h5py.Dataset) else None)
            diff = [n for n in names16 if n not in g or
                    not np.array_equal(f[n][...].view(np.uint8), g[n][...].view(np.uint8))]
            same_dump = check(names16 and not diff, f"{dt}: dump differs from the F32 file's in {diff[:5]}")
        if same_arena and same_dump:
            print(f"{dt} vs its F32 copy: arena {a.size} floats identical; dump {len(names16)} datasets "
                  f"identical ({', '.join(sorted(set(n.split('/')[-1] for n in names16)))})")
    return dirs


def main():
    attnsweep, test_model, test_dtypes, scratch = sys.argv[1:5]
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    torch.set_num_threads(1)
    check_widening(test_dtypes, scratch)
    check_rounding(test_dtypes, scratch)
    check_files(attnsweep, test_model, scratch)
    if not failures:
        shutil.rmtree(scratch, ignore_errors=True)
        print("dtypes_check: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
