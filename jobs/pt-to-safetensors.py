#!/usr/bin/python3
"""pt-to-safetensors.py -- turn a model directory's PyTorch pickles into safetensors files.

    jobs/pt-to-safetensors.py [--remove] DIR

Older hub repositories (Stanford CRFM's GPT-2 runs, early checkpoint series) hold only
pytorch_model.bin, or pytorch_model.bin.index.json and pytorch_model-0000K-of-0000N.bin shards.
attnsweep reads safetensors only, because a pickle can run code when it is loaded. This script
loads each pickle with torch.load(weights_only=True) -- PyTorch's restricted unpickler, which
refuses every object but tensors and plain containers -- checks that the result is a flat mapping
of names to tensors (anything else is refused, naming it), and writes:
  pytorch_model.bin                 -> model.safetensors
  pytorch_model-K-of-N.bin + index  -> model-K-of-N.safetensors + model.safetensors.index.json
Tensors keep their dtype (F32, F16, BF16) and their values bit for bit; tensors that share
storage (a tied LM head) are written once each, as separate copies. Each output is written to
NAME.part, synced and renamed, so an interrupted run leaves nothing half-written under a final
name. With --remove the pickles are deleted after every output is in place.
Needs Debian's python3-torch (1.13 or newer). Exit codes: 0 converted, 1 error (one line), 2 usage.
"""
import json
import os
import struct
import sys

DTYPES = {}   # torch dtype -> safetensors dtype name, filled once torch is imported


def fail(msg, code=1):
    sys.stderr.write("pt-to-safetensors.py: %s\n" % msg)
    sys.exit(code)


def load_tensors(torch, path):
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:    # the restricted unpickler's refusals come as several types
        why = " ".join(str(e).split()) or type(e).__name__
        if "Unpickler error:" in why:   # PyTorch's own advice precedes the reason: keep the reason
            why = why.split("Unpickler error:", 1)[1].strip()
        fail("%s: refused by torch.load(weights_only=True): %s -- it holds more than tensors "
             "(do not load it with weights_only=False unless you trust its source)" % (path, why))
    if not isinstance(obj, dict):
        fail("%s: holds a %s, not a mapping of tensor names to tensors" % (path, type(obj).__name__))
    for name, t in obj.items():
        if not isinstance(name, str):
            fail("%s: a key of type %s, not a tensor name" % (path, type(name).__name__))
        if not isinstance(t, torch.Tensor):
            fail("%s: entry %s is a %s, not a tensor" % (path, name, type(t).__name__))
        if t.dtype not in DTYPES:
            fail("%s: tensor %s has dtype %s (only float32, float16 and bfloat16 are converted)"
                 % (path, name, t.dtype))
    return obj


def tensor_bytes(torch, t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:   # numpy has no bfloat16: move the same 16 bits as int16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_safetensors(torch, tensors, out):
    """The safetensors layout: u64 little-endian header size, the JSON header (name -> dtype,
    shape, [begin, end) offsets into the data), padded with spaces to 8 bytes, then the data."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        data = tensor_bytes(torch, t)
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt", "converted_by": "attnsweep jobs/pt-to-safetensors.py"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    part = out + ".part"
    with open(part, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.rename(part, out)


def main(argv):
    remove = "--remove" in argv
    args = [a for a in argv if a != "--remove"]
    if len(args) == 1 and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        fail("usage: pt-to-safetensors.py [--remove] DIR", 2)
    d = args[0]
    try:
        import torch
    except ImportError:
        fail("needs PyTorch (Debian: apt-get install python3-torch) to read pytorch_model.bin")
    DTYPES.update({torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"})
    index = os.path.join(d, "pytorch_model.bin.index.json")
    single = os.path.join(d, "pytorch_model.bin")
    pickles = []
    if os.path.isfile(index):
        try:
            wm = json.load(open(index))["weight_map"]
        except (ValueError, KeyError, OSError) as e:
            fail("%s: not a weights index (%s)" % (index, e))
        shards = sorted(set(wm.values()))
        rename = {s: s[:-len(".bin")].replace("pytorch_model", "model", 1) + ".safetensors"
                  for s in shards}
        for s in shards:
            out = os.path.join(d, rename[s])
            if os.path.isfile(out) and not os.path.isfile(os.path.join(d, s)):
                continue        # converted by an earlier run, pickle already removed
            tensors = load_tensors(torch, os.path.join(d, s))
            missing = [n for n, f in wm.items() if f == s and n not in tensors]
            if missing:
                fail("%s: the index names %s in this shard but it is not there" % (s, missing[0]))
            write_safetensors(torch, tensors, out)
            pickles.append(os.path.join(d, s))
            print("pt-to-safetensors.py: %s -> %s (%d tensors)" % (s, rename[s], len(tensors)))
        new_index = {"metadata": {"converted_by": "attnsweep jobs/pt-to-safetensors.py"},
                     "weight_map": {n: rename[f] for n, f in sorted(wm.items())}}
        out = os.path.join(d, "model.safetensors.index.json")
        with open(out + ".part", "w") as f:
            json.dump(new_index, f, indent=1)
        os.rename(out + ".part", out)
        pickles.append(index)
    elif os.path.isfile(single):
        tensors = load_tensors(torch, single)
        write_safetensors(torch, tensors, os.path.join(d, "model.safetensors"))
        pickles.append(single)
        print("pt-to-safetensors.py: pytorch_model.bin -> model.safetensors (%d tensors)" % len(tensors))
    else:
        fail("%s: no pytorch_model.bin or pytorch_model.bin.index.json to convert" % d)
    if remove:
        for p in pickles:
            os.remove(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
