"""The CPU kernel-variant table of the loaded op library (tf_ops/cpu/variants.def), read
through ctypes: for `python -m tf_conv_backprop info`, the benchmark and the tests.

TF must have loaded the library first (importing the package does): a plain dlopen of
an unloaded library would run its op registrations where TF does not look for them.
"""
import ctypes
import functools

from tf_conv_backprop import _loader, _ops

FIELDS = ("name", "op", "dtypes", "layouts", "isa", "features", "declines", "why")
# Environment variable that puts one variant first wherever it applies.
FORCE_ENV = "TF_CONV_BACKPROP_CPU_KERNEL"


@functools.lru_cache(maxsize=None)  # one handle, its signatures set once
def _library():
    try:
        lib = ctypes.CDLL(_loader.library_path())
        lib.tf_conv_backprop_cpu_variant_count.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    for name, restype, args in (
            ("tf_conv_backprop_cpu_variant_row", ctypes.c_char_p, [ctypes.c_int]),
            ("tf_conv_backprop_cpu_last_variant", ctypes.c_char_p, [ctypes.c_int]),
            ("tf_conv_backprop_cpu_active_isa", ctypes.c_char_p, []),
            ("tf_conv_backprop_cpu_forced_variant", ctypes.c_char_p, []),
            ("tf_conv_backprop_scratch_peak_bytes", ctypes.c_int64, [ctypes.c_int]),
            ("tf_conv_backprop_fma_peak_gflops", ctypes.c_double, [ctypes.c_int])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, args
    return lib


def table():
    """The rows in selection order, as dicts of FIELDS; [] without the library."""
    lib = _library()
    if lib is None:
        return []
    rows = []
    for i in range(lib.tf_conv_backprop_cpu_variant_count()):
        values = lib.tf_conv_backprop_cpu_variant_row(i).decode().split("|", len(FIELDS) - 1)
        rows.append(dict(zip(FIELDS, values)))
    return rows


def active_isa():
    lib = _library()
    return lib.tf_conv_backprop_cpu_active_isa().decode() if lib else None


def forced():
    """The variant TF_CONV_BACKPROP_CPU_KERNEL names ('' when none), as the library read it."""
    lib = _library()
    return lib.tf_conv_backprop_cpu_forced_variant().decode() if lib else None


def last_run(op_key):
    """The variant the last CPU call of the op ran ('' before one)."""
    lib = _library()
    index = [op.key for op in _ops.OPS].index(op_key)
    return lib.tf_conv_backprop_cpu_last_variant(index).decode() if lib else None


def scratch_peak_bytes(reset):
    """The library's peak scratch bytes since the last reset (resetting it when asked);
    None without the library."""
    lib = _library()
    return lib.tf_conv_backprop_scratch_peak_bytes(1 if reset else 0) if lib else None


def fma_peak_gflops(threads):
    """float32 GFLOP/s of the library's register-only multiply-add loop at the active ISA
    on `threads` threads: the FMA peak `make bench` measures conv2d rows against; None
    without the library."""
    lib = _library()
    return lib.tf_conv_backprop_fma_peak_gflops(threads) if lib else None
