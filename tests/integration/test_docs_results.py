#!/usr/bin/python3
"""docs/results.md describes the files attnsweep writes, and nothing else.

Runs a small sweep (with metrics.query_rows = "sample:8", so that the variables only a sampled
file has are there too) and a dump on the tiny model, then compares each file with the tables of
docs/results.md, in both directions: every coordinate, variable, root attribute, /provenance
variable and dump dataset/attribute in the file must have a row, every row must exist in the
file, and the type, dimensions, fill value and units in the row must be the file's.

The tables are found by their first header cell (`coordinate`, `variable`, `root attribute`,
`provenance variable`, `dump dataset`, `dump attribute`); a cell `--` means "none".

Case `selftest` proves the comparison can fail: it adds a fake row to a copy of the doc,
removes a real one, and changes a unit, and checks that each is reported.

usage: test_docs_results.py ATTNSWEEP MODEL_DIR SCRATCH DOC [results] [dump] [selftest]
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, run_cases, summary  # noqa: E402

BIN, MODEL, SCRATCH, DOC = sys.argv[1:5]
ONLY = set(sys.argv[5:])

TABLES = ("coordinate", "variable", "root attribute", "provenance variable", "dump dataset",
          "dump attribute")
# attributes the HDF5 dimension-scale API writes by itself; never documented per variable
SCALE_ATTRS = {"CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid",
               "_Netcdf4Coordinates"}


# ---------------- the doc ----------------

def parse_tables(text):
    """{table kind: {name: {column: cell}}} from the markdown tables of the doc. Fails loudly
    (ValueError) on a table kind seen twice or a name listed twice in one table."""
    tables = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not (lines[i].startswith("|") and i + 1 < len(lines)
                and re.match(r"^\|[\s:|-]+\|\s*$", lines[i + 1])):
            i += 1
            continue
        header = [c.strip() for c in lines[i].strip().strip("|").split("|")]
        kind = header[0]
        i += 2
        rows = {}
        while i < len(lines) and lines[i].startswith("|"):
            cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            name = cells[0].strip("`")
            if name in rows:
                raise ValueError(f"table '{kind}': {name} listed twice")
            rows[name] = dict(zip(header[1:], cells[1:]))
            i += 1
        if kind in TABLES:
            if kind in tables:
                raise ValueError(f"two tables of kind '{kind}'")
            tables[kind] = rows
    return tables


def doc_list(cell):
    """'window, L, N' -> ['window', 'L', 'N']"""
    return [x.strip(" `()") for x in cell.split(",") if x.strip(" `()")]


# ---------------- the file ----------------

def type_name(dtype):
    if h5py.check_string_dtype(dtype) is not None or dtype.kind in "SOU":
        return "string"
    return np.dtype(dtype).name


def attr_type(obj, name):
    return type_name(obj.attrs.get_id(name).dtype)


def text_attr(obj, name):
    v = obj.attrs.get(name)
    if v is None:
        return None
    if isinstance(v, bytes):
        v = v.decode()
    return str(v)


def fill_of(ds):
    if "_FillValue" not in ds.attrs:
        return "--"
    v = ds.attrs["_FillValue"]
    v = v.item() if hasattr(v, "item") else v
    return "NaN" if isinstance(v, float) and math.isnan(v) else str(v)


def dims_of(ds):
    """Dimension names from the attached scales; a scale is its own (only) dimension."""
    if is_scale(ds):
        return [text_attr(ds, "NAME")] * ds.ndim
    return [d[0].name.rsplit("/", 1)[-1] if len(d) else "?" for d in ds.dims]


def is_scale(ds):
    return text_attr(ds, "CLASS") == "DIMENSION_SCALE"


def compare_set(problems, what, in_file, in_doc):
    for n in sorted(set(in_file) - set(in_doc)):
        problems.append(f"{what} `{n}` is in the file but not in docs/results.md")
    for n in sorted(set(in_doc) - set(in_file)):
        problems.append(f"{what} `{n}` is in docs/results.md but not in the file")


def compare_field(problems, what, name, field, file_value, doc_value):
    if file_value != doc_value:
        problems.append(f"{what} `{name}`: {field} is {file_value!r} in the file, "
                        f"{doc_value!r} in docs/results.md")


def compare_datasets(problems, what, datasets, rows, with_dims=True, with_fill=True):
    """datasets: {name: h5py.Dataset}; rows: the doc table."""
    compare_set(problems, what, datasets, rows)
    for name in sorted(set(datasets) & set(rows)):
        ds, row = datasets[name], rows[name]
        compare_field(problems, what, name, "type", type_name(ds.dtype), row.get("type"))
        if with_dims:
            compare_field(problems, what, name, "dimensions", dims_of(ds),
                          doc_list(row.get("dimensions", "")))
        if with_fill:
            compare_field(problems, what, name, "fill", fill_of(ds), row.get("fill"))
        compare_field(problems, what, name, "units", text_attr(ds, "units") or "--",
                      row.get("units"))
        if not text_attr(ds, "long_name"):
            problems.append(f"{what} `{name}` has no long_name")


def compare_attrs(problems, what, obj, rows):
    names = [k for k in obj.attrs.keys() if k not in SCALE_ATTRS]
    compare_set(problems, what, names, rows)
    for name in sorted(set(names) & set(rows)):
        compare_field(problems, what, name, "type", attr_type(obj, name), rows[name].get("type"))


def results_problems(path, tables):
    problems = []
    for kind in ("coordinate", "variable", "root attribute", "provenance variable"):
        if kind not in tables:
            problems.append(f"docs/results.md has no table whose first header cell is '{kind}'")
    if problems:
        return problems
    with h5py.File(path, "r") as f:
        groups = sorted(k for k, v in f.items() if isinstance(v, h5py.Group))
        if groups != ["provenance"]:
            problems.append(f"root groups are {groups}, docs/results.md describes ['provenance']")
        root = {k: v for k, v in f.items() if isinstance(v, h5py.Dataset)}
        coords = {k: v for k, v in root.items() if is_scale(v)}
        variables = {k: v for k, v in root.items() if not is_scale(v)}
        compare_datasets(problems, "coordinate", coords, tables["coordinate"], with_dims=False,
                         with_fill=False)
        for name, ds in coords.items():
            if ds.ndim != 1 or text_attr(ds, "NAME") != name:
                problems.append(f"coordinate `{name}` is not a 1-D scale of its own name")
        compare_datasets(problems, "variable", variables, tables["variable"])
        compare_attrs(problems, "root attribute", f, tables["root attribute"])
        if "provenance" in f:
            prov = {k: v for k, v in f["provenance"].items() if isinstance(v, h5py.Dataset)}
            compare_datasets(problems, "provenance variable", prov,
                             tables["provenance variable"])
    return problems


def dump_problems(path, tables, sizes):
    """sizes: the shape symbols of the doc (L, H, d_head, vocab) -> numbers."""
    problems = []
    for kind in ("dump dataset", "dump attribute"):
        if kind not in tables:
            problems.append(f"docs/results.md has no table whose first header cell is '{kind}'")
    if problems:
        return problems
    found = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                found.setdefault(re.sub(r"^layer_\d\d/", "layer_ll/", name), []).append(obj)
        f.visititems(visit)
        rows = tables["dump dataset"]
        compare_set(problems, "dump dataset", found, rows)
        for name in sorted(set(found) & set(rows)):
            want_shape = [sizes.get(s, s) for s in doc_list(rows[name].get("shape", ""))]
            for ds in found[name]:
                compare_field(problems, "dump dataset", ds.name, "type", type_name(ds.dtype),
                              rows[name].get("type"))
                compare_field(problems, "dump dataset", ds.name, "shape", list(ds.shape),
                              want_shape)
        compare_attrs(problems, "dump attribute", f, tables["dump attribute"])
    return problems


# ---------------- producing the files ----------------

def make_results():
    path = f"{SCRATCH}/docs.h5"
    if os.path.exists(path):
        return path
    np.save(f"{SCRATCH}/tokens.npy",
            np.random.default_rng(13).integers(0, 50257, size=400).astype("<u2"))
    with open(f"{SCRATCH}/docs.cfg", "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 2; offset = 0; stride = 32; }};
grid = {{ L = [16, 32]; N = [1, 4]; T = [0.5, 8.0]; eps = [1e-3, 0.1];
         normalizer = ["softmax", "sparsemax", "ssmax"]; }};
metrics = {{ query_rows = "sample:8"; }};
output = "docs.h5";
""")
    p = subprocess.run([BIN, "run", "docs.cfg"], env=ENV, cwd=SCRATCH, capture_output=True,
                       text=True)
    check(p.returncode == 0, f"attnsweep run: exit {p.returncode}: {p.stderr[-400:]}")
    return path


def make_dump():
    path = f"{SCRATCH}/dump.h5"
    toks = np.random.default_rng(14).integers(0, 50257, size=16)
    with open(f"{SCRATCH}/dump-tokens.txt", "w") as f:
        f.write(" ".join(str(int(t)) for t in toks) + "\n")
    p = subprocess.run([BIN, "dump", "--model", MODEL, "--tokens", f"{SCRATCH}/dump-tokens.txt",
                        "--length", "16", "--out", path], env=ENV, capture_output=True,
                       text=True)
    check(p.returncode == 0, f"attnsweep dump: exit {p.returncode}: {p.stderr[-400:]}")
    cfg = json.load(open(f"{MODEL}/config.json"))
    sizes = {"L": 16, "H": cfg["n_head"], "d_head": cfg["n_embd"] // cfg["n_head"],
             "vocab": cfg["vocab_size"]}
    return path, sizes


def doc_tables(text=None):
    return parse_tables(open(DOC).read() if text is None else text)


def report(problems, what):
    for p in problems:
        print("  -", p, flush=True)
    check(not problems, f"{what}: {len(problems)} difference(s) between the file and {DOC}")


# ---------------- cases ----------------

def case_results():
    path = make_results()
    if os.path.exists(path):
        report(results_problems(path, doc_tables()), "results file")


def case_cf():
    """CF conventions as an analyst meets them: xarray plots label themselves from long_name and
    units, and `history` has one line per /provenance segment, each starting with an ISO 8601
    UTC time."""
    path = make_results()
    if not os.path.exists(path):
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import xarray as xr
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        check(ds.attrs.get("Conventions") == "CF-1.8", f"Conventions is {ds.attrs.get('Conventions')!r}")
        for name in ("dist_true", "sep_ratio", "entropy", "grad_fd", "crit_N"):
            da = ds[name]
            line = da.isel({d: 0 for d in da.dims if d != "T"})  # a curve over T
            plt.figure()
            line.plot()
            label = plt.gca().get_ylabel().replace("\n", " ")
            plt.close()
            want = f"{da.attrs['long_name']} [{da.attrs['units']}]"
            check(label == want, f"{name}.plot() labels its axis {label!r}, want {want!r}")
        history = ds.attrs.get("history", "").splitlines()
        with h5py.File(path, "r") as f:
            segments = len(f["provenance/segment"])
        check(len(history) == segments and segments > 0,
              f"history has {len(history)} lines for {segments} segments")
        for line in history:
            check(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ attnsweep run: segment \d+", line) is not None,
                  f"history line {line!r} does not start with an ISO 8601 time")


def all_text_attrs(path):
    """{where: text} of every string attribute of the file (root, variables, groups)."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            for k in obj.attrs:
                t = text_attr(obj, k)
                if t:
                    out[f"{name}@{k}"] = t
        visit("/", f)
        f.visititems(visit)
    return out


def case_readings():
    """Every variable's metadata follows the reading the file was computed in: the aggregate
    distance's variables are not described as the per-token ones or by the Theorem 1 bound,
    and the scaled logits' T does not say raw logits."""
    per_token = make_results()
    if not os.path.exists(per_token):
        return
    p = subprocess.run([BIN, "run", "docs.cfg", "--set", 'metrics.distance="aggregate"',
                        "--set", 'metrics.logits="scaled"', "--set", 'output="docs-agg.h5"'],
                       env=ENV, cwd=SCRATCH, capture_output=True, text=True)
    check(p.returncode == 0, f"aggregate run: exit {p.returncode}: {p.stderr[-400:]}")
    agg = f"{SCRATCH}/docs-agg.h5"
    if p.returncode:
        return
    report(results_problems(agg, doc_tables()), "aggregate results file")
    texts = all_text_attrs(agg)
    check(texts.get("/@distance") == "aggregate" and texts.get("/@logits") == "scaled",
          f"the aggregate file says its reading: {texts.get('/@distance')}, {texts.get('/@logits')}")
    base = all_text_attrs(per_token)
    wrong = {k: v for k, v in texts.items() if k != "/@config_text" and "raw logits" in v}
    check(not wrong, f"scaled file: metadata of raw logits: {wrong}")
    for key in ("dist_true@long_name", "dist_bound@long_name", "dist_expect@long_name",
                "/@dist_bound_note", "grad_exact@long_name", "T@long_name"):
        check(texts.get(key) and texts.get(key) != base.get(key),
              f"{key}: the aggregate/scaled file does not keep the per-token, raw description {base.get(key)!r}")
    for name in ("dist_true", "dist_bound", "dist_expect"):
        check("aggregate" in texts.get(f"{name}@long_name", ""),
              f"{name} long_name names the aggregate reading: {texts.get(name + '@long_name')!r}")
    check("T = 1" in texts.get("T@long_name", ""), f"T long_name (scaled): {texts.get('T@long_name')!r}")
    check("section 4.5" in texts.get("/@dist_bound_note", ""), "dist_bound_note cites section 4.5")
    check("Theorem 1" in base.get("dist_bound@long_name", "") and "T = 8" in base.get("T@long_name", "")
          and "aggregate" not in base.get("dist_true@long_name", ""),
          "the per-token, raw-logits file keeps its own descriptions")


def flat(text):
    """text with every line break (and a C comment's leading star) and run of spaces as one
    space"""
    return re.sub(r"\s+", " ", re.sub(r"\n\s*\*(?!/)", " ", text))


def case_texts():
    """What the docs say about the stored numbers and the gradients' reading, against the
    facts (no sweep): docs/results.md's float32 floor is float32's (tests/unit/store/test_store.c
    checks the packing behaves so); docs/metrics.md section 1 says that with scaled logits the
    gradients are taken with respect to the scaled logits, with the relation ctest
    logits_relabel checks bit for bit; and two sentences that were stale stay fixed:
    docs/critical-n.md section 5 cites docs/metrics.md section 4.5 for the aggregate reading
    (which once "described only the per-token reading"), and include/kernels/metrics.h's
    aggregate dist_bound sums U over the unselected weights (it once said U = 1 - A)."""
    root = os.path.dirname(os.path.abspath(DOC))
    results = flat(open(DOC).read())
    f32 = np.finfo(np.float32)
    m = re.search(r"float32 holds magnitudes down to about ([0-9.]+e-\d+): a mean below that .*? "
                  r"is stored as 0, and one below ([0-9.]+e-\d+) with fewer digits", results)
    check(m is not None, "docs/results.md states the float32 floor (stored as 0, fewer digits)")
    if m:
        for got, want, what in ((m.group(1), f32.smallest_subnormal, "smallest subnormal"),
                                (m.group(2), f32.tiny, "smallest normal")):
            check(got == f"{float(want):.1e}", f"docs/results.md's {got} is float32's {what} {float(want):.1e}")
    metrics = flat(open(os.path.join(root, "metrics.md")).read())
    sec1 = metrics[metrics.find("## 1. "):metrics.find("## 2. ")]
    check("The gradients of section 7 (`grad_exact`, `grad_fd`, its `eps`) are then taken with "
          "respect to the scaled logits" in sec1,
          "docs/metrics.md section 1: gradients on scaled logits are w.r.t. the scaled logits")
    check("times the raw-logit value at `T * sqrt(d_head)`" in sec1,
          "docs/metrics.md section 1: grad_exact = sqrt(d_head) x the raw value at T sqrt(d_head)")
    crit = flat(open(os.path.join(root, "critical-n.md")).read())
    sec5 = crit[crit.find("## 5. "):crit.find("### 5.1")]
    check('With `metrics.distance = "aggregate"` (docs/metrics.md section 4.5)' in sec5
          and "describes only the per-token reading" not in crit,
          "docs/critical-n.md section 5 cites section 4.5 for the aggregate reading")
    header = flat(open(os.path.join(root, "..", "include", "kernels", "metrics.h")).read())
    check("U the unselected mass, summed over its weights" in header and "U = 1 - A" not in header,
          "metrics.h: the aggregate dist_bound's U is summed over the unselected weights")


def case_dump():
    path, sizes = make_dump()
    if os.path.exists(path):
        report(dump_problems(path, doc_tables(), sizes), "dump file")


def case_selftest():
    """The comparison must notice a fake row, a missing row and a wrong unit."""
    path = make_results()
    if not os.path.exists(path):
        return
    text = open(DOC).read()
    check(not results_problems(path, doc_tables(text)), "selftest: the real doc passes")
    fake = text.replace("| `dist_true` |",
                        "| `dist_fake` | float32 | window, L | NaN | -- | not in any file |\n"
                        "| `dist_true` |", 1)
    pr = results_problems(path, doc_tables(fake))
    check(any("`dist_fake` is in docs/results.md but not in the file" in p for p in pr),
          f"selftest: a fake variable row is reported: {pr}")
    missing = re.sub(r"^\| `sep_upper` \|.*\n", "", text, count=1, flags=re.M)
    check(missing != text, "selftest: the doc has a sep_upper row to remove")
    pr = results_problems(path, doc_tables(missing))
    check(any("`sep_upper` is in the file but not in docs/results.md" in p for p in pr),
          f"selftest: a missing variable row is reported: {pr}")
    missing_attr = re.sub(r"^\| `ks_alpha` \|.*\n", "", text, count=1, flags=re.M)
    pr = results_problems(path, doc_tables(missing_attr))
    check(any("root attribute `ks_alpha` is in the file" in p for p in pr),
          f"selftest: a missing root attribute row is reported: {pr}")
    wrong_unit = re.sub(r"^(\| `wall_time` \|[^|]*\|[^|]*\|[^|]*\|) s \|", r"\1 min |", text,
                        count=1, flags=re.M)
    check(wrong_unit != text, "selftest: the doc has a wall_time row with units s")
    pr = results_problems(path, doc_tables(wrong_unit))
    check(any("`wall_time`: units" in p for p in pr), f"selftest: a wrong unit is reported: {pr}")


def main():
    if os.path.exists(SCRATCH):
        shutil.rmtree(SCRATCH)
    os.makedirs(SCRATCH)
    run_cases([case_results, case_cf, case_readings, case_texts, case_dump, case_selftest], ONLY, label="case ")
    sys.exit(summary("test_docs_results"))


main()
