#!/usr/bin/python3
"""tests/reliability/fuzz/gen_corpus.py -- (re)writes the seed corpora in tests/reliability/fuzz/corpus/.

Small valid and near-valid inputs for each harness, a few KB per harness.
Deterministic: running it twice gives identical files. The corpus files are
committed; rerun this only to change them."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(harness, name, data):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, raw bytes), laid out in order."""
    header, blobs, at = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def f16(n, seed):
    # small deterministic halves in (-1, 1): sign, exponent 13..14, mantissa from an LCG
    out, x = [], seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(struct.pack("<H", ((x >> 8) & 0x8000) | ((13 + (x & 1)) << 10) | (x >> 16) & 0x3FF))
    return b"".join(out)


# --- safetensors: the harness's model is n_layer 1, n_embd 4, vocab 8, n_positions 4
C, V, P = 4, 8, 4
shapes = [("wte.weight", [V, C]), ("wpe.weight", [P, C])]
for suffix, shape in [("ln_1.weight", [C]), ("ln_1.bias", [C]), ("attn.c_attn.weight", [C, 3 * C]),
                      ("attn.c_attn.bias", [3 * C]), ("attn.c_proj.weight", [C, C]),
                      ("attn.c_proj.bias", [C]), ("ln_2.weight", [C]), ("ln_2.bias", [C]),
                      ("mlp.c_fc.weight", [C, 4 * C]), ("mlp.c_fc.bias", [4 * C]),
                      ("mlp.c_proj.weight", [4 * C, C]), ("mlp.c_proj.bias", [C])]:
    shapes.append(("h.0." + suffix, shape))
shapes += [("ln_f.weight", [C]), ("ln_f.bias", [C])]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


model = [("transformer." + n, "F16", s, f16(numel(s), i + 1)) for i, (n, s) in enumerate(shapes)]
put("safetensors", "model_f16", safetensors(model, {"format": "pt"}))
put("safetensors", "model_f16_truncated", safetensors(model)[:-2])
one = [("x", "F32", [2, 2], struct.pack("<4f", 1.0, -2.0, 0.5, 3.0))]
put("safetensors", "one_f32", safetensors(one))
put("safetensors", "one_f32_unpadded", safetensors(one, pad=False))
put("safetensors", "one_bf16_nan", safetensors([("y", "BF16", [2], struct.pack("<2H", 0x3F80, 0x7FC0))]))
put("safetensors", "mixed_dtypes", safetensors([("a", "I64", [1], struct.pack("<q", 7)),
                                                ("b", "U8", [3], b"abc"),
                                                ("c", "F64", [], struct.pack("<d", 2.5)),
                                                ("d", "F32", [0, 3], b"")]))
put("safetensors", "empty_header", struct.pack("<Q", 2) + b"{}")
gap = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'
put("safetensors", "gap", struct.pack("<Q", len(gap)) + gap + b"\0" * 8)

# --- model_config: config.json files
base = {"model_type": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024,
        "vocab_size": 50257, "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new",
        "n_inner": None, "n_ctx": 1024, "architectures": ["GPT2LMHeadModel"],
        "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}}}
put("model_config", "gpt2", json.dumps(base, indent=2))
put("model_config", "tiny", '{"n_layer": 1, "n_head": 2, "n_embd": 4, "n_positions": 4, "vocab_size": 8}')
put("model_config", "n_ctx_only", '{"n_ctx": 512, "n_embd": 64, "n_head": 4}')
put("model_config", "bad_divisible", '{"n_embd": 10, "n_head": 3}')
put("model_config", "escapes", '{"s": "a\\u00e9\\ud83d\\ude00\\n\\"\\\\\\/", "n": [-0, 1.5e-3, 2E+2, true, false, null], "e": {}}')
put("model_config", "dup_key", '{"n_layer": 1, "n_layer": 2}')
put("model_config", "trailing_comma", '{"a": [1, 2,]}')
put("model_config", "nested", "[" * 20 + "{\"k\": 1}" + "]" * 20)

# --- config: sweep configs (model dir "model" next to the file); "%%" starts --set lines
cfg = '''model = "model";
text = { path = "t.txt"; format = "text"; strip_gutenberg = true; };
windows = { count = 2; offset = 0; stride = 64; };
grid = {
  L = [16, 32, 64];
  N = [1, 2, 4, 8];
  T = { min = 1e-3; max = 1e2; count = 5; spacing = "log"; include = [8.0]; };
  eps = [1e-3, 0.1];
  normalizer = ["sparsemax", "softmax", "ssmax"];
  layers = "all";
  heads = [0, 3];
};
metrics = { vectors = "resid"; rows = "visible"; ks_alpha = 0.05; ssmax_scale = 0.0; seed = 7; };
runtime = { blas_threads = 1; commit_every = 4; };
output = "out.h5";
'''
put("config", "full", cfg)
put("config", "minimal", 'model = "model";\ntext = { path = "t.txt"; };\noutput = "out.h5";\n')
put("config", "with_sets", 'model = "model";\ntext = { path = "t.txt"; };\noutput = "o.h5";\n%%\n'
    'grid.L=[8,128]\ngrid.layers=all\ngrid.N=1:8\ngrid.T={min=0.5;max=4.0;count=3;spacing="linear";}\n')
put("config", "tokens_lists", 'model = "model"; text = { path = "t.txt"; format = "tokens"; };\n'
    'output = "o.h5"; grid = { T = [0.5, 2.0, 1.0]; L = 256; eps = 1e-2; normalizer = "ssmax"; };\n'
    'metrics = { rows = "full_row"; vectors = "value"; };\n')
put("config", "unknown_key", 'model = "model"; text = { path = "t.txt"; }; output = "o.h5";\n'
    'grid = { Lx = [1]; };\n')
put("config", "bad_range", 'model = "model"; text = { path = "t.txt"; }; output = "o.h5";\n'
    'grid = { L = [512]; layers = [5]; };\n%%\nwindows.count=-1\n')
put("config", "syntax_error", 'model = "model"\ntext = { path = ; };\n')

# --- tokenizer: arbitrary bytes
put("tokenizer", "english", "Hello world! It's a test: don't stop, we'll see. 1234 + 5678\n\n  tabs\there")
put("tokenizer", "unicode", "naïve café — 日本語のテキスト 😀👍🏽 Ελληνικά русский текст\u00a0nbsp")
put("tokenizer", "invalid_utf8", b"ok \xff\xfe \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82 end\x00nul")
put("tokenizer", "spaces", "a" * 40 + " " * 30 + "\n" * 5 + "\r\n\t " + "b" * 3)
put("tokenizer", "gutenberg", "*** START OF THE PROJECT GUTENBERG EBOOK ***\n\nCHAPTER I.\n\n\u201cWell, Prince,\u201d said she.")
put("tokenizer", "special", "<|endoftext|>The end.<|endoftext|>")

# --- hf_tokenizer: the same bytes, and added tokens, "▁", NFC, digit runs
for name in ("english", "unicode", "invalid_utf8", "spaces", "gutenberg", "special"):
    with open(os.path.join(HERE, "corpus", "tokenizer", name), "rb") as f:
        put("hf_tokenizer", name, f.read())
put("hf_tokenizer", "specials_nfc", "<|im_start|>user\ne\u0301<s>\u2581 a\u0323\u0301 12345678<|endoftext|>")
