"""Copies a built libattnsweep_kernels.so into the package when one is found, so the installed
package carries its kernels (a Jupyter kernel or conda env elsewhere on the same machine type
needs no checkout): $ATTNSWEEP_LIB (the file or its folder), else ../build of this checkout.
Without one the package installs all the same; attnsweep.metrics then says where it looked."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

LIB = "libattnsweep_kernels.so"


def built_library():
    here = os.path.dirname(os.path.abspath(__file__))
    env = os.environ.get("ATTNSWEEP_LIB")
    for p in ([os.path.join(env, LIB) if os.path.isdir(env) else env] if env else []) + \
            [os.path.join(here, "..", "build", LIB)]:
        if os.path.isfile(p):
            return p
    return None


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = built_library()
        if lib:
            shutil.copyfile(lib, os.path.join(self.build_lib, "attnsweep", LIB))
            print(f"attnsweep: packaged {lib}")
        else:
            print(f"attnsweep: no {LIB} found (set ATTNSWEEP_LIB): metrics() will look for it at run time")


setup(cmdclass={"build_py": BuildPy})
