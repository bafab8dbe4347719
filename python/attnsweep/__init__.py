"""attnsweep for notebooks: read a sweep's results file, and measure any attention you can
capture with the sweep's own kernels (python/README.md).

    import attnsweep
    ds = attnsweep.open("results/quickstart.h5")        # xarray Dataset, unfinished cells NaN
    m = attnsweep.metrics(scores, v, N=[1, 2, 4], T=[1.0, 8.0])   # the results file's variables

open() is attnsweep.results.load (model axis, head_valid masking; tidy frames through
xarray's to_dataframe); metrics() runs libattnsweep_kernels.so through ctypes (attnsweep.kernels)
and loads the library only when first called, so reading results needs no build.
"""
from . import results
from .results import (cells_done, default_normalizer, head_mean, load, model_names,  # noqa: F401
                      native_T, provenance_segments, select_model, summary, window_spread)

__version__ = "0.1.0"


def options_of(path, model=0):
    """The metrics() keywords that recompute a cell of model index `model` of the results
    file at path (its axes and metrics.* options; attnsweep.kernels.options_of)."""
    from . import kernels
    return kernels.options_of(path, model)


def dump_arrays(path):
    """(scores, values, layer numbers) of an `attnsweep dump` file, shaped for metrics()."""
    from . import kernels
    return kernels.dump_arrays(path)


def open(path):  # noqa: A001 -- the package's verb, as xarray's open_dataset
    """The results file at path as an xarray Dataset: every metric NaN where its cell is not
    finished (status != 1) or its (layer, head) is masked (head_valid == 0); always with the
    model dimension (attnsweep.results.load)."""
    return results.load(path)


def metrics(scores, vectors, **options):
    """The sweep's metrics of captured attention (attnsweep.kernels.metrics documents the
    arguments): an xarray Dataset with the results file's variable names and dimensions."""
    from . import kernels
    return kernels.metrics(scores, vectors, **options)
