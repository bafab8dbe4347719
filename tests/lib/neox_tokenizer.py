#!/usr/bin/python3
"""A small tokenizer in the layout of Pythia's (GPT-NeoX-20B's) hub files, written for tests.

    neox_tokenizer.py DIR [--use-regex true|false|absent]

Writes DIR/tokenizer.json, DIR/tokenizer_config.json and DIR/special_tokens_map.json with
the parts of the real files that matter to an encoder:
  - a byte-level BPE: "<|endoftext|>" 0 and "<|padding|>" 1, then the 256 byte tokens in
    GPT-2's byte-to-unicode alphabet, then the products of a few merges (MERGES), among them
    one that joins a letter with the space after it ("e" + "Ġ"), which only a pre-tokenizer
    without the regex split can reach;
  - the NFC normalizer;
  - runs of 2 to 8 spaces as non-special added tokens with "normalized": true (the release
    has 2 to 24), also in model.vocab under their raw spaces, as the release's vocabulary
    shows them;
  - the ByteLevel pre-tokenizer with add_prefix_space false and trim_offsets true, and
    use_regex as asked ("absent": the key left out, as Pythia's files do; it means true);
  - ByteLevel post-processor and decoder; tokenizer_config.json without add_bos_token.
Nothing of the real vocabulary is copied: the merges are made up here.
"""
import json
import os
import sys

MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("o", "n"),
          ("Ġa", "n"), ("Ġan", "d"), ("e", "Ġ"), ("Ġ", "Ġ"), ("1", "2"), ("Ċ", "Ċ")]
SPACE_RUNS = range(8, 1, -1)   # longest first, as the release lists them


def bytes_to_unicode():
    """GPT-2's byte-level alphabet: the printable Latin-1 bytes stand for themselves, every
    other byte for the code point 256 + its rank among them."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def added(token_id, content, special, normalized):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": normalized, "special": special}


def tokenizer_json(use_regex="absent"):
    """The tokenizer.json document (a dict); use_regex "true", "false" or "absent"."""
    alphabet = bytes_to_unicode()
    vocab = {"<|endoftext|>": 0, "<|padding|>": 1}
    for b in range(256):
        vocab[alphabet[b]] = len(vocab)
    for a, b in MERGES:
        vocab.setdefault(a + b, len(vocab))
    tokens = [added(0, "<|endoftext|>", True, False), added(1, "<|padding|>", True, False)]
    for n in SPACE_RUNS:
        vocab[" " * n] = len(vocab)
        tokens.append(added(vocab[" " * n], " " * n, False, True))
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
    pre = dict(byte_level)
    if use_regex != "absent":
        pre["use_regex"] = use_regex == "true"
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": tokens,
            "normalizer": {"type": "NFC"}, "pre_tokenizer": pre, "post_processor": dict(byte_level),
            "decoder": dict(byte_level),
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "vocab": vocab,
                      "merges": [f"{a} {b}" for a, b in MERGES]}}


def write(out_dir, use_regex="absent"):
    """Writes the three files into out_dir (created); returns their names."""
    os.makedirs(out_dir, exist_ok=True)
    special = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}
    docs = {"tokenizer.json": tokenizer_json(use_regex),
            "tokenizer_config.json": dict(special, add_prefix_space=False, tokenizer_class="GPTNeoXTokenizer",
                                          model_max_length=2048),
            "special_tokens_map.json": special}
    for name, doc in docs.items():
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
    return sorted(docs)


if __name__ == "__main__":
    args = sys.argv[1:]
    regex = "absent"
    if len(args) == 3 and args[1] == "--use-regex" and args[2] in ("true", "false", "absent"):
        regex = args[2]
    elif len(args) != 1:
        sys.exit("usage: neox_tokenizer.py DIR [--use-regex true|false|absent]")
    write(args[0], regex)
