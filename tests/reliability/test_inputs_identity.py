#!/usr/bin/python3
"""The inputs' identity: every file a run reads -- each model's model.safetensors and
config.json, the text, and for a text that is tokenized vocab.json and merges.txt -- is
hashed, recorded, and checked on resume, extension, rebuild and merge, through the real
`attnsweep_test` on a synthetic model made here (`attnsweep synth`, byte-level vocabulary),
which the cases edit in place:

  recorded         the file records model_config_sha256 (root attribute and model coordinate)
                   and the journal's config record every input's sha256, each equal to
                   hashlib's sha256 of the file (an independent reference)
  config_extend    config.json edited in place (layer_norm_epsilon) after a run: extending the
                   output is refused in one line naming config.json with both hashes, no file
                   changed (it used to mix old and new numbers silently)
  journal_rebuild  a run killed after a commit (the store's hold hook, src/store/testhook.h),
                   the weights then rewritten in place and the .h5 lost: the rebuild from the
                   journal is refused naming model.safetensors (it used to keep the old-weight
                   cells beside new ones); the same with config.json edited instead
  merge_config     shards made before and after an edit of config.json: merge refuses, one line
                   naming config.json and both hashes, no file changed
  merge_vocab      the same with vocab.json
  old_journal      a journal whose config record predates the inputs (rewritten here without
                   them, as an older attnsweep wrote it): the run is accepted, says once that the
                   inputs could not be checked, and records them, so the next edit is refused

usage: test_inputs_identity.py ATTNSWEEP_TEST SCRATCH [case ...]
"""
import glob
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import time
import zlib

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, run_cases, summary

BIN, SCRATCH = (os.path.abspath(a) for a in sys.argv[1:3])
ONLY = set(sys.argv[3:])
HEADER, RECORD = 256, 80  # include/store/journal.h
JR_CONFIG, JR_SEG_BEGIN = 1, 4
TEXT = ("It was in July, 1805, and the speaker was the well-known Anna Pavlovna Scherer, "
        "maid of honor and favorite of the Empress Marya Fedorovna. ") * 12


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def cli(args, d, env=None):
    return subprocess.run([BIN] + args, cwd=d, env=env or ENV, capture_output=True, text=True, timeout=300)


def setup(name, windows=2):
    """A model of its own (edited in place by the cases), a text and a config."""
    d = os.path.join(SCRATCH, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    p = cli(["synth", "--preset", "tiny", "--seed", "1", "--vocab", "bytelevel", "--out", f"{d}/model"], d)
    check(p.returncode == 0, f"{name}: synth: {p.stderr}")
    with open(f"{d}/text.txt", "w") as f:
        f.write(TEXT)
    write_config(d, windows)
    return d


def write_config(d, windows, output="out.h5"):
    with open(f"{d}/a.cfg", "w") as f:
        f.write(f"""model = "{d}/model";
text = {{ path = "text.txt"; format = "text"; strip_gutenberg = false; }};
windows = {{ count = {windows}; offset = 0; stride = 16; }};
grid = {{ L = [16, 32]; N = [1, 2]; T = [0.1]; eps = [1e-3]; normalizer = ["softmax"]; }};
output = "{output}";
runtime = {{ commit_every = 1; }};
""")


def checksums(d):
    out = {}
    for p in sorted(glob.glob(os.path.join(d, "**"), recursive=True)):
        if os.path.isfile(p):
            out[os.path.relpath(p, d)] = sha(p)
    return out


def refused(p, d, before, needle, hashes, what):
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(p.returncode == 1, f"{what}: exit {p.returncode}, want 1 (stderr {p.stderr.strip()!r})")
    check(len(lines) == 1 and needle in lines[0] and all(h in lines[0] for h in hashes),
          f"{what}: want one line naming {needle} and both hashes {hashes}, got {p.stderr!r}")
    check(checksums(d) == before, f"{what}: files changed")
    print(f"  refused ({what}): {p.stderr.strip()}", flush=True)


def edit_config_json(d, key="layer_norm_epsilon", value=2e-5):
    import json
    path = f"{d}/model/config.json"
    with open(path) as f:
        c = json.load(f)
    c[key] = value
    with open(path, "w") as f:
        json.dump(c, f, indent=2)


def config_payload(journal):
    """The last config record's payload, parsed here from journal.h's layout."""
    data = open(journal, "rb").read()
    at, last = HEADER, None
    while at + RECORD <= len(data):
        (typ,) = struct.unpack_from("<I", data, at + 4)
        (plen,) = struct.unpack_from("<Q", data, at + 64)
        if typ == JR_CONFIG:
            last = data[at + RECORD:at + RECORD + plen]
        at += RECORD + plen
    return last


# ---- cases ----------------------------------------------------------------

def case_recorded():
    d = setup("recorded")
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0, f"run: {p.stderr}")
    want_cfg = sha(f"{d}/model/config.json")
    with h5py.File(f"{d}/out.h5", "r") as f:
        root = f.attrs["model_config_sha256"]
        root = root.decode() if isinstance(root, bytes) else root
        coord = [x.decode() if isinstance(x, bytes) else x for x in f["model_config_sha256"][()]]
        tok = f.attrs["tokenizer_files"]
        tok = tok.decode() if isinstance(tok, bytes) else tok
    check(root == want_cfg, f"root model_config_sha256 {root} != {want_cfg}")
    check(coord == [want_cfg], f"model_config_sha256 coordinate {coord} != [{want_cfg}]")
    check(f"vocab.json sha256={sha(d + '/model/vocab.json')}" in tok, f"tokenizer_files {tok!r}")
    payload = config_payload(f"{d}/out.h5.journal")
    text_end = payload.index(b"\0")
    inputs = payload[text_end + 1:].decode()
    want = {"model 0 model.safetensors": sha(f"{d}/model/model.safetensors"),
            "model 0 config.json": want_cfg, "text": sha(f"{d}/text.txt"),
            "vocab.json": sha(f"{d}/model/vocab.json"), "merges.txt": sha(f"{d}/model/merges.txt")}
    got = dict(line.split(" sha256=") for line in inputs.splitlines())
    check(got == want, f"journal inputs {got} != {want}")
    with h5py.File(f"{d}/out.h5", "r") as f:
        seg = [x.decode() if isinstance(x, bytes) else x for x in f["provenance/inputs"][()]]
    check(seg == [inputs], f"/provenance inputs {seg!r} != the journal's {inputs!r}")


def case_config_extend():
    d = setup("config_extend")
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0, f"first run: {p.stderr}")
    old = sha(f"{d}/model/config.json")
    edit_config_json(d)
    new = sha(f"{d}/model/config.json")
    before = checksums(d)
    p = cli(["run", "out.h5", "--set", "windows.count=3"], d)
    refused(p, d, before, "config.json", (old, new), "extension after config.json changed")
    p = cli(["run", "a.cfg"], d)
    refused(p, d, before, "config.json", (old, new), "resume after config.json changed")


def start_held(d, hold):
    env = dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=f"{d}/phases", ATTNSWEEP_TEST_RELEASE=f"{d}/release",
               ATTNSWEEP_TEST_HOLD=hold)
    return subprocess.Popen([BIN, "run", "a.cfg"], cwd=d, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def killed_after_commit(d):
    """A run SIGKILLed once its second commit is durable (held at the hook's journal_synced)."""
    p = start_held(d, "journal_synced 2")
    while True:
        try:
            with open(f"{d}/phases") as f:
                if sum(1 for l in f if l.split()[1:] == ["journal_synced"]) >= 2:
                    break
        except FileNotFoundError:
            pass
        if p.poll() is not None:
            check(False, f"the held run ended early: {p.stderr.read()}")
            return
        time.sleep(0.02)
    p.kill()
    p.wait()
    os.remove(f"{d}/phases")


def case_journal_rebuild():
    d = setup("journal_rebuild", windows=3)
    killed_after_commit(d)
    os.remove(f"{d}/out.h5")  # the view lost; the journal holds the finished cells
    shutil.copytree(f"{d}/model", f"{d}/model.orig")
    old = sha(f"{d}/model/model.safetensors")
    p = cli(["synth", "--preset", "tiny", "--seed", "2", "--vocab", "bytelevel", "--force",
             "--out", f"{d}/model"], d)
    check(p.returncode == 0, f"synth --seed 2: {p.stderr}")
    new = sha(f"{d}/model/model.safetensors")
    check(old != new, "the rewritten weights hash the same")
    before = checksums(d)
    p = cli(["run", "a.cfg"], d)
    refused(p, d, before, "model.safetensors", (old, new), "rebuild after the weights changed")
    # the weights restored, config.json edited instead
    shutil.rmtree(f"{d}/model")
    shutil.copytree(f"{d}/model.orig", f"{d}/model")
    old = sha(f"{d}/model/config.json")
    edit_config_json(d)
    new = sha(f"{d}/model/config.json")
    before = checksums(d)
    p = cli(["run", "a.cfg"], d)
    refused(p, d, before, "config.json", (old, new), "rebuild after config.json changed")
    # everything restored: the rebuild goes on and finishes
    shutil.rmtree(f"{d}/model")
    shutil.copytree(f"{d}/model.orig", f"{d}/model")
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0, f"rebuild with the inputs restored: exit {p.returncode}: {p.stderr}")


def merge_after_edit(name, edit, needle):
    d = setup(name)
    p = cli(["run", "a.cfg", "--shard", "0/2"], d)
    check(p.returncode == 0, f"shard 0: {p.stderr}")
    path = f"{d}/model/{needle}"
    old = sha(path)
    edit(d)
    new = sha(path)
    p = cli(["run", "a.cfg", "--shard", "1/2"], d)
    check(p.returncode == 0, f"shard 1 (a new shard, nothing to compare with): {p.stderr}")
    before = checksums(d)
    p = cli(["merge", "out.shard-0-of-2.h5", "out.shard-1-of-2.h5"], d)
    refused(p, d, before, needle, (old, new), f"merge across an edit of {needle}")


def case_merge_config():
    merge_after_edit("merge_config", edit_config_json, "config.json")


def append_space(path):
    with open(path, "a") as f:
        f.write("\n")  # the same vocabulary, other bytes


def case_merge_vocab():
    merge_after_edit("merge_vocab", lambda d: append_space(f"{d}/model/vocab.json"), "vocab.json")


def strip_inputs(journal):
    """Rewrites every config and segment record without its inputs (as attnsweep wrote them before),
    fixing the record's payload length and CRCs (src/store/journal.c record_encode: the
    payload's CRC-32 at 72, the fields' over bytes 0..75 at 76, zlib's crc32)."""
    data = bytearray(open(journal, "rb").read())
    out, at = bytearray(data[:HEADER]), HEADER
    while at + RECORD <= len(data):
        rec = bytearray(data[at:at + RECORD])
        (typ,) = struct.unpack_from("<I", rec, 4)
        (plen,) = struct.unpack_from("<Q", rec, 64)
        payload = bytes(data[at + RECORD:at + RECORD + plen])
        old = payload
        if typ == JR_CONFIG and b"\0" in payload:
            payload = payload[:payload.index(b"\0")]
        if typ == JR_SEG_BEGIN and payload.count(b"\0") > 2:  # "hosts\0job\0" as before
            payload = b"\0".join(payload.split(b"\0")[:2]) + b"\0"
        if payload != old:
            struct.pack_into("<Q", rec, 64, len(payload))
            struct.pack_into("<I", rec, 72, zlib.crc32(payload))
            struct.pack_into("<I", rec, 76, zlib.crc32(bytes(rec[:76])))
        out += rec + payload
        at += RECORD + plen
    open(journal, "wb").write(out)


def case_old_journal():
    d = setup("old_journal", windows=3)
    write_config(d, 2)
    env = dict(ENV, ATTNSWEEP_TEST_COMPACT_BYTES="0")  # the values stay whole in the journal
    p = cli(["run", "a.cfg"], d, env)
    check(p.returncode == 0, f"first run: {p.stderr}")
    strip_inputs(f"{d}/out.h5.journal")
    check(b"\0" not in config_payload(f"{d}/out.h5.journal"), "the inputs were not stripped")
    # an old file: no config.json hash in the view either
    os.remove(f"{d}/out.h5")
    write_config(d, 3)
    p = cli(["run", "a.cfg"], d, env)
    check(p.returncode == 0, f"extension of an old journal: exit {p.returncode}: {p.stderr}")
    notes = [l for l in p.stderr.splitlines() if "records no hashes of its inputs" in l]
    check(len(notes) == 1, f"want one note that the inputs could not be checked, got {p.stderr!r}")
    check(b"\0" in config_payload(f"{d}/out.h5.journal"), "the inputs were not recorded by the run")
    p = cli(["run", "a.cfg"], d, env)
    check(p.returncode == 0 and "records no hashes" not in p.stderr,
          f"the next run still notes missing hashes: {p.stderr!r}")
    with h5py.File(f"{d}/out.h5", "r") as f:
        seg = [x.decode() if isinstance(x, bytes) else x for x in f["provenance/inputs"][()]]
    check(len(seg) == 3 and seg[0] == "" and seg[1] and seg[1] == seg[2],
          f"/provenance inputs of an old segment and two new ones: {seg!r}")
    old = sha(f"{d}/model/config.json")
    edit_config_json(d)
    new = sha(f"{d}/model/config.json")
    os.remove(f"{d}/out.h5")
    before = checksums(d)
    p = cli(["run", "a.cfg"], d, env)
    refused(p, d, before, "config.json", (old, new), "rebuild of an upgraded journal after an edit")


if __name__ == "__main__":
    os.makedirs(SCRATCH, exist_ok=True)
    run_cases([case_recorded, case_config_extend, case_journal_rebuild, case_merge_config,
               case_merge_vocab, case_old_journal], ONLY)
    sys.exit(summary("inputs_identity"))
