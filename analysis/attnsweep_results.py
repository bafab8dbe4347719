#!/usr/bin/python3
"""The results reader, for the scripts of this folder: python/attnsweep/results.py is the one
copy (the pip package's attnsweep.open), imported from this checkout's python/ folder so that
the figures read files with the tree's own reader, installed or not.

    import sys; sys.path.insert(0, "analysis")
    import attnsweep_results as ar        # the module attnsweep.results itself
    ds = ar.load("sweep.h5")

CLI: python3 analysis/attnsweep_results.py RESULTS.h5  -- prints a summary.
"""
import os
import sys

# restart under /usr/bin/python3 when this interpreter lacks the packages (debian_python.py)
if __name__ == "__main__":
    import debian_python
    debian_python.require("matplotlib", "xarray", "h5netcdf")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import attnsweep.results as _results  # noqa: E402

if __name__ == "__main__":
    sys.exit(_results.main())
# `import attnsweep_results` yields the package's module, not a copy of its names: a test that
# sets ar.NATIVE_T changes what load() and the figures see.
sys.modules[__name__] = _results
