#!/usr/bin/env python3
"""Link-time purity of the layers: what each library's objects may reference.

usage: purity.py NM BUILD_DIR

For each static library build/libattnsweep_LAYER.a, every undefined symbol must be
either defined by the layer itself or by a layer below it (the arrows of the house),
or come from outside the project -- and then not from a library the layer must not
know: MPI (MPI_*, PMPI_*, ompi_*), HDF5 (H5*), libconfig (config_*), OpenBLAS (cblas_*).
A kernel object that calls MPI_Comm_rank, or a store object that calls MPI, fails here
even though the final program would link.
"""
import subprocess
import sys

# layer -> (layers it may use, outside libraries it may use)
ALLOWED = {
    "core": ([], []),
    "model": (["core"], []),
    "text": (["core"], []),
    "kernels": (["core", "model"], ["openblas"]),
    "config": (["core", "model", "kernels"], ["libconfig"]),
    "store": (["core", "kernels"], ["hdf5"]),
    "sweep": (["core", "model", "text", "kernels", "config", "store"], ["openblas"]),
    "mpi": (["core", "model", "text", "kernels", "config", "sweep", "store"], ["openblas", "libconfig", "hdf5", "mpi"]),
}
OUTSIDE = {
    "mpi": ("MPI_", "PMPI_", "ompi_", "mpi_"),
    "hdf5": ("H5",),
    "libconfig": ("config_",),
    "openblas": ("cblas_", "openblas_", "goto_"),
}


def symbols(nm, lib):
    out = subprocess.run([nm, "-g", lib], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCVWG" and parts[1] != "U":
            defined.add(parts[2])
    return defined, undefined - defined


def main():
    nm, build = sys.argv[1], sys.argv[2]
    tables = {layer: symbols(nm, "%s/libattnsweep_%s.a" % (build, layer)) for layer in ALLOWED}
    owner = {}
    for layer, (defined, _) in tables.items():
        for s in defined:
            owner[s] = layer
    failures = 0
    for layer, (below, outside) in ALLOWED.items():
        _, undefined = tables[layer]
        bad = []
        for s in sorted(undefined):
            if s in owner:
                if owner[s] not in below:
                    bad.append("%s (defined in layer %s, above or beside it)" % (s, owner[s]))
                continue
            for lib, prefixes in OUTSIDE.items():
                if lib not in outside and s.startswith(prefixes):
                    bad.append("%s (from %s)" % (s, lib))
        print("%-8s %4d undefined symbols, %s" % (layer, len(undefined), "ok" if not bad else "%d forbidden" % len(bad)))
        for b in bad:
            print("  FAIL: libattnsweep_%s.a references %s" % (layer, b))
        failures += len(bad)
    if failures:
        print("purity: %d forbidden references" % failures)
        return 1
    print("purity: every layer references only the layers below it and its own libraries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
