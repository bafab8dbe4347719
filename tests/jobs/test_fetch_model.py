#!/usr/bin/python3
"""jobs/fetch-model.sh against a local imitation of the Hugging Face hub (range_server.py).

    test_fetch_model.py ATTNSWEEP SCRATCH

What it protects (each case on synthetic models the program writes, nothing from the network):
  series    a Pythia checkpoint series as a researcher fetches one: EleutherAI/pythia-tiny with
            revisions step0, step1000, step2000, each `synth --preset pythia-tiny` (gpt_neox)
            with its attention logits sharpened by the step (q and k scaled: x1, x2, x4, as
            training sharpens attention), with the files Pythia's repositories carry (config.json,
            model.safetensors, tokenizer.json in Pythia's layout -- tests/lib/neox_tokenizer.py
            --, tokenizer_config.json, special_tokens_map.json); fetched with --revisions into
            DIR/REV/, every file equal to the hub's and nothing else asked for; swept on text
            (read with that tokenizer.json) as a model axis: training_step 0, 1000, 2000 from
            the directory names (Pythia's config.json has none), model_family gpt_neox; drawn
            as the checkpoint figure, whose checkpoints.csv names the steps and whose every
            quartile equals the one computed here from the file read with h5py; the entropy
            falls from step to step
  rerun     a second fetch of a complete directory asks the hub nothing; --verify re-hashes
  sharded   model.safetensors.index.json and exactly the shards it names (nothing else)
  pickle    a repository with only pytorch_model.bin: converted to model.safetensors with every
            tensor bit-identical to the original, the pickle removed, --verify still works
  hostile   a pickle that would run code when loaded: refused in one line, nothing ran, nothing
            installed
  errors    bad repository name, bad revision name, unknown repository: one line each; a failed
            download leaves no lock file behind
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
from sweeptest import ENV, check, summary  # noqa: E402

BIN, SCRATCH = (os.path.abspath(p) for p in sys.argv[1:3])
FETCH = os.path.join(REPO, "jobs", "fetch-model.sh")
ROOT = os.path.join(SCRATCH, "hub")
STEPS = ["step0", "step1000", "step2000"]
LOGIT_SCALE = {"step0": 1.0, "step1000": 2.0, "step2000": 4.0}   # q.k grows so with the step
SERIES = "EleutherAI/pythia-tiny"     # a Pythia-style repository of the local hub
PYTHIA_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json")
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import neox_tokenizer  # noqa: E402


def sh(cmd, **kw):
    return subprocess.run(cmd, cwd=SCRATCH, capture_output=True, text=True, env=ENV, timeout=600, **kw)


def fetch(*args):
    return sh(["bash", FETCH] + list(args))


def one_line_error(p, rc, what, pattern):
    lines = p.stderr.strip().splitlines()
    check(p.returncode == rc, f"{what}: exit {p.returncode}, expected {rc}: {p.stderr[-400:]}")
    check(len(lines) == 1 and pattern in p.stderr, f"{what}: want one line with '{pattern}': {p.stderr!r}")


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def tensors(path):
    """name -> (dtype, shape, bytes) of a safetensors file, read here independently."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    return {k: (v["dtype"], tuple(v["shape"]), data[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in header.items()}


def synth(out, seed, dtype="f32"):
    p = sh([BIN, "synth", "--preset", "tiny", "--seed", str(seed), "--dtype", dtype, "--vocab", "bytelevel",
            "--out", out, "--force"])
    check(p.returncode == 0, f"synth {out}: {p.stderr}")


def sharpen(d, scale):
    """Scales the attention logits of the gpt_neox model in d by `scale`: every head's q and k
    rows (and biases) of query_key_value, laid out [head][q, k, v][head_dim], by sqrt(scale)."""
    import numpy as np
    path = os.path.join(d, "model.safetensors")
    heads = json.load(open(os.path.join(d, "config.json")))["num_attention_heads"]
    data = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    for name, v in header.items():
        if not name.endswith(("attention.query_key_value.weight", "attention.query_key_value.bias")):
            continue
        check(v["dtype"] == "F32", f"{name}: F32")
        a, b = (8 + n + o for o in v["data_offsets"])
        w = np.frombuffer(bytes(data[a:b]), dtype="<f4").reshape(heads, 3, -1).copy()
        w[:, :2] *= np.float32(np.sqrt(scale))
        data[a:b] = w.tobytes()
    open(path, "wb").write(bytes(data))


def make_hub():
    shutil.rmtree(ROOT, ignore_errors=True)
    for step in STEPS:   # one initialisation, its attention sharper at each step
        d = os.path.join(ROOT, SERIES, step)
        p = sh([BIN, "synth", "--preset", "pythia-tiny", "--seed", "10", "--vocab", "none", "--out", d, "--force"])
        check(p.returncode == 0, f"synth {d}: {p.stderr}")
        sharpen(d, LOGIT_SCALE[step])
        neox_tokenizer.write(d)
    # a sharded repository: the tiny model's tensors split over two files with an index
    d = os.path.join(ROOT, "Org", "sharded")
    synth(d, 5)
    whole = os.path.join(d, "model.safetensors")
    names = sorted(tensors(whole))
    half = len(names) // 2
    for k, part in enumerate((names[:half], names[half:])):
        open(os.path.join(d, f"model-0000{k + 1}-of-00002.safetensors"), "wb").write(b"shard %d" % k)
    index = {"metadata": {}, "weight_map": {n: f"model-0000{1 + (i >= half)}-of-00002.safetensors"
                                            for i, n in enumerate(names)}}
    json.dump(index, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    os.unlink(whole)
    open(os.path.join(d, "model-00003-of-00002.safetensors"), "wb").write(b"not in the index")
    open(os.path.join(d, "README.md"), "w").write("not fetched\n")
    # PyTorch-only repositories: one with a plain state dict (bf16, to see the dtype kept), one
    # whose pickle would run a command when loaded
    for name, seed, dtype in (("pickled", 7, "bf16"), ("hostile", 8, "f32")):
        d = os.path.join(ROOT, "Org", name)
        synth(d, seed, dtype)
        shutil.copy(os.path.join(d, "model.safetensors"), os.path.join(SCRATCH, f"{name}.orig.safetensors"))
    prog = f"""
import sys, os, torch, struct, json
src, dst, hostile, flag = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
data = open(src, "rb").read(); n = struct.unpack("<Q", data[:8])[0]; h = json.loads(data[8:8 + n])
h.pop("__metadata__", None)
kinds = {{"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}}
sd = {{}}
for k, v in h.items():
    raw = bytearray(data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
    t = torch.frombuffer(raw, dtype=torch.int16 if v["dtype"] != "F32" else torch.float32)
    sd[k] = (t.view(kinds[v["dtype"]]) if v["dtype"] != "F32" else t).reshape(v["shape"]).clone()
class Boom:
    def __reduce__(self):
        return (os.system, ("touch " + flag,))
if hostile:
    sd["boom"] = Boom()
torch.save(sd, dst)
"""
    for name in ("pickled", "hostile"):
        d = os.path.join(ROOT, "Org", name)
        p = subprocess.run(["/usr/bin/python3", "-c", prog, os.path.join(d, "model.safetensors"),
                            os.path.join(d, "pytorch_model.bin"), "1" if name == "hostile" else "0",
                            os.path.join(SCRATCH, "PWNED")], capture_output=True, text=True)
        check(p.returncode == 0, f"writing {name}'s pickle: {p.stderr[-400:]}")
        os.unlink(os.path.join(d, "model.safetensors"))


def start_hub():
    port_file = os.path.join(SCRATCH, "port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    server = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "range_server.py"), ROOT, port_file,
                               os.path.join(SCRATCH, "server.log")])
    for _ in range(100):
        if os.path.exists(port_file):
            break
        time.sleep(0.1)
    port = open(port_file).read().strip()
    ENV.update(ATTNSWEEP_HF_BASE=f"http://127.0.0.1:{port}", ATTNSWEEP_FETCH_RETRY_DELAY="0", NO_PROXY="127.0.0.1",
               no_proxy="127.0.0.1")
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        ENV.pop(k, None)
    return server


def requests():
    log = os.path.join(SCRATCH, "server.log")
    return open(log).read().splitlines() if os.path.exists(log) else []


def case_series():
    mark = len(requests())
    p = fetch("--revisions", ",".join(STEPS), SERIES, "models/pythia-tiny")
    check(p.returncode == 0, f"fetch of the series: {p.stderr[-600:]}")
    for step in STEPS:
        got_dir = os.path.join(SCRATCH, "models/pythia-tiny", step)
        for f in PYTHIA_FILES:
            got, want = os.path.join(got_dir, f), os.path.join(ROOT, SERIES, step, f)
            check(os.path.isfile(got) and sha(got) == sha(want), f"{step}/{f} equals the hub's")
        check(sorted(os.listdir(got_dir)) == sorted(PYTHIA_FILES + (".fetch.sums",)),
              f"{step}: exactly Pythia's files: {sorted(os.listdir(got_dir))}")
        check(not os.path.exists(os.path.join(got_dir, ".fetch.lock")), f"{step}: no lock left")
        sums = open(os.path.join(got_dir, ".fetch.sums")).read()
        check(hashlib.sha1(step.encode()).hexdigest() in sums, f"{step}: the revision's commit is recorded")
        cfg = json.load(open(os.path.join(got_dir, "config.json")))
        check(cfg.get("model_type") == "gpt_neox" and "training_step" not in cfg,
              f"{step}: a gpt_neox config.json without training_step, as Pythia's")
    asked = [r.split()[1] for r in requests()[mark:]]
    check(all(f"/revision/{s}" in " ".join(asked) for s in STEPS), "each revision's file list is asked for")
    # swept as a model axis, on text the tokenizer.json reads (runs of spaces: its added tokens)
    text = os.path.join(SCRATCH, "text.txt")
    with open(text, "w") as f:
        f.write(" ".join("word%d and  the other,   said %d." % (i, i * 7) for i in range(3000)))
    models = ", ".join(f'"models/pythia-tiny/{s}"' for s in STEPS)
    with open(os.path.join(SCRATCH, "series.cfg"), "w") as f:
        f.write(f"""model = [{models}];
text = {{ path = "{text}"; strip_gutenberg = false; }};
windows = {{ count = 2; offset = 0; stride = 64; }};
grid = {{ L = [16, 32]; N = [1, 2, 4]; T = [1.0, 8.0]; eps = [0.1]; }};
output = "series.h5";
""")
    p = sh([BIN, "run", "series.cfg"])
    check(p.returncode == 0, f"sweep of the series: {p.stderr[-600:]}")
    if p.returncode:
        return
    import h5py
    with h5py.File(os.path.join(SCRATCH, "series.h5"), "r") as f:
        steps = list(f["training_step"][()])
        fams = [v.decode() if isinstance(v, bytes) else v for v in f["model_family"][()]]
        tok = f.attrs["tokenizer_files"]
        tok = tok.decode() if isinstance(tok, bytes) else str(tok)
    check(steps == [0, 1000, 2000], f"training_step from the Pythia names: {steps}")
    check(fams == ["gpt_neox"] * 3, f"model_family: {fams}")
    check("tokenizer.json" in tok and "vocab.json" not in tok, f"the text read with tokenizer.json: {tok[:200]}")
    p = sh(["/usr/bin/python3", os.path.join(REPO, "analysis", "figures.py"), "series.h5", "--out", "series-fig"])
    check(p.returncode == 0, f"figures of the series: {p.stderr[-600:]}")
    csv_path = os.path.join(SCRATCH, "series-fig", "checkpoints.csv")
    check(os.path.isfile(os.path.join(SCRATCH, "series-fig", "checkpoints.png")), "the checkpoint figure is drawn")
    check(os.path.isfile(csv_path), "the checkpoint figure's numbers (checkpoints.csv) are written")
    if os.path.isfile(csv_path):
        checkpoint_numbers(csv_path, os.path.join(SCRATCH, "series.h5"))


def cell_values(f, name, m, li, sel):
    """Variable `name` of model m at L index li, the other axes picked by sel {dim: index}, as
    stored (float32) over (window, layer, head); NaN where the cell is not finished or the
    model lacks the head. Read here with h5py, not with the analysis code."""
    import numpy as np
    d = f[name]
    dims = [d.dims[i][0].name.rsplit("/", 1)[-1] for i in range(d.ndim)]
    index = tuple(m if k == "model" else li if k == "L" else sel[k] if k in sel else slice(None) for k in dims)
    a = np.array(d[index])
    a[f["status"][m, :, li] != 1] = np.nan
    a[:, f["head_valid"][m] == 0] = np.nan
    return a


def quartiles(a):
    """(count, q25, median, q75) of the finite values of a, as float64 (numpy's default method)."""
    import numpy as np
    v = np.asarray(a, dtype=float)
    v = v[np.isfinite(v)]
    return (v.size,) + tuple(float(np.percentile(v, q)) if v.size else float("nan") for q in (25, 50, 75))


def checkpoint_numbers(csv_path, h5_path):
    """checkpoints.csv names the steps, its x is the step, and every quartile in it is the one
    of the file's values (analysis/checkpoints.py's definition: T the grid's closest to 8,
    softmax; entropy_norm; max(sep_ratio - sep_marginal, 0) at the middle N below the largest
    L, in the stored float32). Tolerance: relative 1e-12 (the same float64 percentiles of the
    same numbers; only the order of pooling differs)."""
    import csv
    import math
    import h5py
    import numpy as np
    rows = list(csv.DictReader(open(csv_path)))
    check(sorted({r["model"] for r in rows}) == sorted(STEPS), f"checkpoints.csv models {sorted({r['model'] for r in rows})}")
    for r in rows:
        want = int(r["model"][len("step"):])
        check(int(r["training_step"]) == want and float(r["x"]) == want,
              f"{r['model']}: training_step {r['training_step']}, x {r['x']} (want {want})")
    with h5py.File(h5_path, "r") as f:
        Ls, Ns, Ts = list(f["L"][()]), [int(n) for n in f["N"][()]], list(f["T"][()])
        norms = [v.decode() if isinstance(v, bytes) else v for v in f["normalizer"][()]]
        sel = {"T": int(np.argmin(np.abs(np.log(Ts) - np.log(8.0)))), "normalizer": norms.index("softmax")}
        below = [n for n in Ns if n < max(Ls)]
        mid_N = below[len(below) // 2]
        checked, medians = 0, {}
        for r in rows:
            m, li = STEPS.index(r["model"]), Ls.index(int(r["L"]))
            if r["quantity"] == "entropy_norm":
                ref = quartiles(cell_values(f, "entropy_norm", m, li, sel))
            else:
                check(r["quantity"] == "sep_resolvable" and int(r["N"]) == mid_N,
                      f"{r['quantity']} at N = {r['N']}, want sep_resolvable at {mid_N}")
                at_N = dict(sel, N=Ns.index(mid_N))
                ratio, marg = (cell_values(f, k, m, li, at_N) for k in ("sep_ratio", "sep_marginal"))
                ref = quartiles(np.maximum(ratio - marg, np.float32(0)))
            got = (int(r["count"]), float(r["q25"]), float(r["median"]), float(r["q75"]))
            same = got[0] == ref[0] and all(math.isclose(a, b, rel_tol=1e-12, abs_tol=0) or (math.isnan(a) and math.isnan(b))
                                            for a, b in zip(got[1:], ref[1:]))
            check(same, f"{r['model']} {r['quantity']} L {r['L']}: csv {got}, file {ref}")
            checked += 1
            if r["quantity"] == "entropy_norm" and int(r["L"]) == max(Ls):
                medians[r["model"]] = got[2]
        check(checked == 2 * len(STEPS) * len(Ls), f"{checked} rows checked against the file")
        falls = [medians[s] for s in STEPS]
        check(all(a > b for a, b in zip(falls, falls[1:])), f"the entropy falls from step to step: {medians}")


def case_rerun():
    mark = len(requests())
    p = fetch("--revisions", ",".join(STEPS), SERIES, "models/pythia-tiny")
    check(p.returncode == 0 and len(requests()) == mark, f"rerun asked the hub {len(requests()) - mark} times")
    p = fetch("--verify", "--revision", "step1000", SERIES, "models/pythia-tiny/step1000")
    check(p.returncode == 0 and "sha256 verified" in p.stdout, f"--verify: {p.stdout} {p.stderr}")
    path = os.path.join(SCRATCH, "models/pythia-tiny/step1000/model.safetensors")
    with open(path, "r+b") as f:
        f.seek(1000)
        f.write(b"X")
    p = fetch("--verify", "--revision", "step1000", SERIES, "models/pythia-tiny/step1000")
    one_line_error(p, 1, "--verify of a damaged file", "does not match the recorded")


def case_sharded():
    mark = len(requests())
    p = fetch("Org/sharded", "models/sharded")
    check(p.returncode == 0, f"sharded fetch: {p.stderr[-400:]}")
    got = sorted(os.listdir(os.path.join(SCRATCH, "models/sharded")))
    want = sorted([".fetch.sums", "config.json", "merges.txt", "vocab.json", "model.safetensors.index.json",
                   "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"])
    check(got == want, f"sharded: fetched {got}, want {want}")
    asked = "\n".join(requests()[mark:])
    check("README.md" not in asked and "00003" not in asked, "nothing outside the index is asked for")


def case_pickle():
    p = fetch("Org/pickled", "models/pickled")
    check(p.returncode == 0, f"pickle fetch: {p.stdout[-300:]} {p.stderr[-400:]}")
    d = os.path.join(SCRATCH, "models/pickled")
    check(not os.path.exists(os.path.join(d, "pytorch_model.bin")), "the pickle is removed after conversion")
    conv = os.path.join(d, "model.safetensors")
    if os.path.isfile(conv):
        a, b = tensors(conv), tensors(os.path.join(SCRATCH, "pickled.orig.safetensors"))
        check(sorted(a) == sorted(b), "the converted file holds the same tensor names")
        check(all(a[k] == b[k] for k in b), "every tensor bit-identical, dtype (BF16) and shape kept")
        check({v[0] for v in a.values()} == {"BF16"}, "dtype BF16 kept")
        p = fetch("--verify", "Org/pickled", "models/pickled")
        check(p.returncode == 0, f"--verify after conversion: {p.stderr[-300:]}")
        mark = len(requests())
        p = fetch("Org/pickled", "models/pickled")
        check(p.returncode == 0 and len(requests()) == mark, "rerun after conversion is offline")


def case_hostile():
    flag = os.path.join(SCRATCH, "PWNED")
    p = fetch("Org/hostile", "models/hostile")
    one_line_error(p, 1, "a pickle that runs code", "refused by torch.load(weights_only=True)")
    check(not os.path.exists(flag), "the hostile pickle's command did not run")
    check(not os.path.exists(os.path.join(SCRATCH, "models/hostile/model.safetensors")), "nothing installed")


def case_errors():
    one_line_error(fetch("pythia-70m"), 2, "repository without ORG/", "is not a hub repository name")
    one_line_error(fetch("--revisions", "step1,../x", SERIES, "m"), 2, "bad revision", "is not a revision name")
    one_line_error(fetch("Org/missing", "models/missing"), 1, "unknown repository", "cannot list the files")
    check(not os.path.exists(os.path.join(SCRATCH, "models/missing/.fetch.lock")), "a failed fetch leaves no lock")
    one_line_error(fetch("--expect", "x", SERIES), 2, "bad --expect", "write FILE:SIZE:SHA256")


def main():
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    make_hub()
    server = start_hub()
    try:
        for case in (case_series, case_rerun, case_sharded, case_pickle, case_hostile, case_errors):
            print("--", case.__name__[5:], flush=True)
            case()
    finally:
        server.kill()
    return summary("test_fetch_model")


if __name__ == "__main__":
    sys.exit(main())
