#!/usr/bin/python3
"""A Hydra-style multirun: one ordinary attnsweep sweep per combination of config values,
into an organised tree with an index, and a loader that stacks the runs for xarray.

usage: multirun.py CONFIG -m KEY=V1,V2 [-m KEY=V1,V2 ...] [--set KEY=VALUE ...]
                   [--root DIR] [--launcher 'CMD'] [--dry-run]

Each combination of the -m values (their cross product, in the order given) is one
`attnsweep run CONFIG --set KEY=VALUE ... --set output=...` into ROOT/KEY=VALUE,.../results.h5
(default ROOT: results/multirun-CONFIGNAME beside the repository's results folder).
ROOT/index.csv has one row per run (dir, each swept value, output, exit code, cells done and
total), rewritten after every run. Running the same command again resumes each run, as
`attnsweep run` does. Values are written as Hydra writes them: a bare word becomes a config
string (per_token -> "per_token"), numbers, booleans, quoted strings and [lists] pass as they
are; a value list splits at top-level commas only (grid.T=[8.0],[1.0,8.0] is two values).
Why a multirun and not an axis of the file: docs/multirun.md.

In Python: multirun.load(ROOT) stacks every finished run along a `run` dimension, each swept
key a coordinate of `run` named by its last part (metrics.distance -> distance).
"""
import argparse
import csv
import itertools
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
INDEX = "index.csv"
# a config literal that passes as written: number, boolean, quoted string, list, group
LITERAL = re.compile(r'^(-?[0-9.][0-9.eE+-]*|true|false|".*"|\[.*\]|\{.*\})$', re.S)


def split_values(text):
    """'a,b' -> ['a', 'b']; commas inside [] {} or "" do not split."""
    out, depth, quoted, cur = [], 0, False, ""
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "[{":
            depth += 1
        elif not quoted and ch in "]}":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [v.strip() for v in out]


def literal(value):
    """The config literal of a Hydra-style value (bare words become strings)."""
    return value if LITERAL.match(value) else '"' + value.replace('"', '\\"') + '"'


def parse_sweeps(specs):
    """['KEY=V1,V2', ...] -> [(KEY, [V1, V2]), ...]; ValueError naming a bad spec."""
    sweeps = []
    for spec in specs:
        key, eq, values = spec.partition("=")
        key = key.strip()
        if not eq or not re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", key):
            raise ValueError(f"-m '{spec}': want KEY=V1,V2 (e.g. metrics.distance=per_token,aggregate)")
        vals = split_values(values)
        if any(not v for v in vals):
            raise ValueError(f"-m '{spec}': an empty value")
        if len(set(vals)) != len(vals):
            raise ValueError(f"-m '{spec}': a value given twice")
        if key in (k for k, _ in sweeps) or key == "output":
            raise ValueError(f"-m '{spec}': {key} is swept twice or is the output")
        sweeps.append((key, vals))
    if not sweeps:
        raise ValueError("no -m KEY=V1,V2: nothing to sweep (use attnsweep run for one run)")
    return sweeps


def run_dir(combo):
    """Directory name of one run: KEY=VALUE pairs joined by ','; inside a value, brackets,
    braces, quotes, blanks and '/' are dropped and ',' becomes '+' (a name a shell takes
    without quotes: grid.T=[1.0,8.0] -> grid.T=1.0+8.0)."""
    return ",".join(f"{k}=" + re.sub(r'[\[\]{}"\s/]', "", v).replace(",", "+") for k, v in combo)


def cells(path):
    """(done, total) cells of a results file, (0, 0) when it cannot be read."""
    try:
        import h5py
        with h5py.File(path, "r") as f:
            status = f["status"][()]
            return int((status == 1).sum()), int(status.size)
    except (OSError, KeyError, ImportError):
        return 0, 0


def write_index(root, keys, rows):
    """index.csv of the runs so far, replaced whole (a reader never sees half a file)."""
    tmp = os.path.join(root, INDEX + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dir"] + keys + ["output", "exit_code", "cells_done", "cells_total"])
        w.writerows(rows)
    os.replace(tmp, os.path.join(root, INDEX))


def multirun(config, sweeps, sets, root, launcher, dry_run=False, out=sys.stdout):
    """Run every combination; returns the worst exit code (0 when every run finished)."""
    keys = [k for k, _ in sweeps]
    rows, worst = [], 0
    os.makedirs(root, exist_ok=True)
    seen = set()
    for values in itertools.product(*(v for _, v in sweeps)):
        combo = list(zip(keys, values))
        name = run_dir(combo)
        if name in seen:   # two values that differ only in dropped characters
            raise ValueError(f"two runs would share the folder {name}: give the values apart")
        seen.add(name)
        d = os.path.join(root, name)
        output = os.path.join(d, "results.h5")
        cmd = shlex.split(launcher) + ["run", config]
        for s in sets:
            cmd += ["--set", s]
        cmd += [a for k, v in combo for a in ("--set", f"{k}={literal(v)}")]
        cmd += ["--set", f'output="{output}"']
        print("multirun: $ " + " ".join(shlex.quote(c) for c in cmd), file=out, flush=True)
        if dry_run:
            continue
        os.makedirs(d, exist_ok=True)
        rc = subprocess.run(cmd).returncode
        done, total = cells(output)
        rows.append([os.path.basename(d)] + list(values) + [os.path.relpath(output, root), rc, done, total])
        write_index(root, keys, rows)
        worst = max(worst, rc)
    if not dry_run:
        print(f"multirun: {len(rows)} runs, index {os.path.join(root, INDEX)}", file=out)
    return worst


def load(root):
    """Every finished run of ROOT's index (exit code 0) stacked along a `run` dimension, each
    swept key a coordinate of `run` named by its last part; ValueError naming the run whose
    axes differ from the first run's."""
    import xarray as xr
    sys.path.insert(0, HERE)
    import attnsweep_results as ar
    with open(os.path.join(root, INDEX), newline="") as f:
        rows = list(csv.DictReader(f))
    keys = [k for k in (rows[0].keys() if rows else [])
            if k not in ("dir", "output", "exit_code", "cells_done", "cells_total")]
    runs = [r for r in rows if r["exit_code"] == "0"]
    if not runs:
        raise ValueError(f"{root}: no finished run in {INDEX}")
    dss = []
    for r in runs:
        ds = ar.load(os.path.join(root, r["output"]))
        if dss and any(ds.sizes[d] != dss[0].sizes.get(d) or
                       not (ds[d].values == dss[0][d].values).all() for d in ds.dims):
            raise ValueError(f"{root}: run {r['dir']} has other axes than {runs[0]['dir']}: "
                             "load() stacks runs of one grid (sweep metrics.* keys)")
        dss.append(ds)
    out = xr.concat(dss, dim="run", combine_attrs="drop_conflicts")
    coords = {k.rsplit(".", 1)[-1]: ("run", [r[k] for r in runs]) for k in keys}
    return out.assign_coords(run=[r["dir"] for r in runs], **coords)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", help="a config file (or a results file: its stored config)")
    p.add_argument("-m", "--multirun", action="append", default=[], metavar="KEY=V1,V2",
                   help="a key and its values; several -m: their cross product")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="passed to every run, as attnsweep run's --set")
    p.add_argument("--root", default=None, help="the tree (default results/multirun-CONFIGNAME)")
    p.add_argument("--launcher", default=os.path.join(REPO, "build", "attnsweep"),
                   help="the command before 'run' (default build/attnsweep; e.g. "
                        "'mpirun -np 3 --oversubscribe build/attnsweep')")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = p.parse_args(argv)
    try:
        sweeps = parse_sweeps(args.multirun)
    except ValueError as exc:
        print(f"multirun: {exc}", file=sys.stderr)
        return 2
    if not os.path.exists(args.config):
        print(f"multirun: {args.config}: no such config", file=sys.stderr)
        return 1
    name = os.path.splitext(os.path.basename(args.config))[0]
    root = os.path.abspath(args.root or os.path.join(REPO, "results", "multirun-" + name))
    try:
        return multirun(args.config, sweeps, args.set, root, args.launcher, args.dry_run)
    except ValueError as exc:
        print(f"multirun: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
