"""ctypes binding of libattnsweep_kernels.so (include/kernels/abi.h is the contract).

Where the library is looked for, first found wins:
  1. $ATTNSWEEP_LIB: the library file itself, or the folder that holds it;
  2. next to this module (pip install copies a built library into the package);
  3. build/ of the checkout this package sits in (python/attnsweep -> ../../build).
Missing: one line naming the places and how to build it. A library of another ABI version
is refused the same way (the options struct would be misread).
"""
import ctypes
import os

ABI_VERSION = 2
LIBNAME = "libattnsweep_kernels.so"
_HERE = os.path.dirname(os.path.abspath(__file__))
_lib = None


class Options(ctypes.Structure):
    """as_abi_options of include/kernels/abi.h, field for field."""
    _fields_ = [
        ("size", ctypes.c_uint32), ("version", ctypes.c_uint32),
        ("N", ctypes.POINTER(ctypes.c_int32)), ("n_N", ctypes.c_uint64),
        ("T", ctypes.POINTER(ctypes.c_double)), ("n_T", ctypes.c_uint64),
        ("eps", ctypes.POINTER(ctypes.c_double)), ("n_eps", ctypes.c_uint64),
        ("normalizer", ctypes.POINTER(ctypes.c_int32)), ("n_norm", ctypes.c_uint64),
        ("per_N_T", ctypes.POINTER(ctypes.c_uint8)),
        ("ssmax_scale", ctypes.c_double), ("entmax_alpha", ctypes.c_double),
        ("sigmoid_bias", ctypes.c_double), ("sigmoid_bias_set", ctypes.c_int32),
        ("full_row", ctypes.c_int32), ("aggregate", ctypes.c_int32),
        ("scaled_d_head", ctypes.c_int32), ("grad_exact", ctypes.c_int32),
        ("dist_expect", ctypes.c_int32),
        ("seed", ctypes.c_uint64), ("window", ctypes.c_int64), ("ks_alpha", ctypes.c_double),
        ("random_subsets", ctypes.c_uint32), ("ks_random", ctypes.c_int32),
    ]


def candidates():
    """The places looked in, in order."""
    out = []
    env = os.environ.get("ATTNSWEEP_LIB")
    if env:
        out.append(os.path.join(env, LIBNAME) if os.path.isdir(env) else env)
    out.append(os.path.join(_HERE, LIBNAME))
    out.append(os.path.normpath(os.path.join(_HERE, "..", "..", "build", LIBNAME)))
    return out


def _declare(lib):
    u64, i32, i64, dp = ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64, ctypes.POINTER
    lib.as_abi_version.restype = ctypes.c_uint32
    lib.as_abi_nvars.restype = i32
    lib.as_abi_var_name.restype, lib.as_abi_var_name.argtypes = ctypes.c_char_p, [i32]
    lib.as_abi_var_shape.restype, lib.as_abi_var_shape.argtypes = i32, [i32]
    lib.as_abi_normalizer_name.restype, lib.as_abi_normalizer_name.argtypes = ctypes.c_char_p, [i32]
    lib.as_abi_normalizer_count.restype = i32
    lib.as_abi_layout.restype = u64
    lib.as_abi_layout.argtypes = [dp(u64)] + [u64] * 6
    lib.as_abi_cell.restype = i32
    lib.as_abi_cell.argtypes = [dp(ctypes.c_double), dp(ctypes.c_float), dp(ctypes.c_float),
                                u64, u64, u64, u64, u64, u64, dp(i64), dp(i64), dp(u64), u64,
                                dp(Options), ctypes.c_char_p, u64]


def library():
    """The loaded library (once per process); OSError in one line when it cannot be had."""
    global _lib
    if _lib is not None:
        return _lib
    tried = candidates()
    path = next((p for p in tried if os.path.isfile(p)), None)
    if path is None:
        raise OSError(f"attnsweep: {LIBNAME} not found (looked at {', '.join(tried)}): build it "
                      "with `cmake --build build --target attnsweep_kernels_shared` and set "
                      "ATTNSWEEP_LIB to build/ (or reinstall the package after building)")
    try:
        lib = ctypes.CDLL(path)
        _declare(lib)
    except (OSError, AttributeError) as exc:
        raise OSError(f"attnsweep: {path} cannot be loaded as the kernels library: "
                      f"{str(exc).splitlines()[0]}") from None
    if lib.as_abi_version() != ABI_VERSION:
        raise OSError(f"attnsweep: {path} has ABI version {lib.as_abi_version()}, this package "
                      f"needs {ABI_VERSION}: rebuild the library and reinstall the package together")
    lib.path = path
    _lib = lib
    return lib
