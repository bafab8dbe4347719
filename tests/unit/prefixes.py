#!/usr/bin/env python3
"""One meaning per prefix: a function's prefix names the layer it belongs to.

usage: prefixes.py NM BUILD_DIR SOURCE_DIR

A prefix is what a global symbol's name holds up to its first underscore, plus it ("st_",
"grid_"). Each library build/libattnsweep_LAYER.a owns the prefixes of the symbols it
defines; a prefix two layers define means two things and fails. Then every function defined
in src/LAYER/ or include/LAYER/ (static ones too) whose prefix another layer owns fails: a
private helper named like another layer's API reads as a call into that layer. A prefix
that is a layer's name (`store_`, `sweep_`, ...) is that layer's alone, even where the layer
itself defines none: `sweep_run` in src/mpi would read as the sweep layer's. `as_` is the
project's own (errors, clock, the config and grid types), so it is no layer's.
"""
import glob
import os
import re
import subprocess
import sys

LAYERS = ["core", "model", "text", "kernels", "config", "store", "sweep", "mpi"]
PROJECT = {"as_"}
DEFINITION = re.compile(r"^(?![ \t#])(?!return\b|typedef\b|else\b)[^\n;=(]*?\b(([a-z][a-z0-9]*_)\w*)\s*\([^;{]*?\)\s*\{",
                        re.M)


def owners(nm, build):
    """prefix -> the set of layers whose library defines a global symbol with it"""
    own = {}
    for layer in LAYERS:
        out = subprocess.run([nm, "-g", "--defined-only", "%s/libattnsweep_%s.a" % (build, layer)],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDRB" and "_" in parts[2]:
                prefix = parts[2].split("_", 1)[0] + "_"
                if prefix not in PROJECT:
                    own.setdefault(prefix, set()).add(layer)
    return own


def main():
    nm, build, src = sys.argv[1:4]
    own = owners(nm, build)
    failures = []
    for prefix, layers in sorted(own.items()):
        if len(layers) > 1:
            failures.append("prefix %s is defined by layers %s" % (prefix, ", ".join(sorted(layers))))
    for layer in LAYERS:
        others = own.get(layer + "_", set()) - {layer}
        if others:
            failures.append("prefix %s_ is layer %s's name, but layer %s defines it" % (layer, layer, "/".join(sorted(others))))
        own[layer + "_"] = {layer}
    files = sorted(glob.glob(os.path.join(src, "src", "*", "*.[ch]")) +
                   glob.glob(os.path.join(src, "include", "*", "*.h")))
    checked = 0
    for path in files:
        rel = os.path.relpath(path, src)
        folder = rel.split(os.sep)[1]
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in DEFINITION.finditer(text):
            name, prefix = m.group(1), m.group(2)
            checked += 1
            layers = own.get(prefix, set())
            if layers and folder not in layers:
                failures.append("%s: %s() has the prefix of layer %s" % (rel, name, "/".join(sorted(layers))))
    for f in failures:
        print("FAIL:", f)
    if checked == 0:
        print("FAIL: no function definitions found under %s" % src)
        return 1
    print("prefixes: %d prefixes, %d definitions checked, %d failures" % (len(own), checked, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
