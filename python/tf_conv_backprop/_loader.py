"""Loading the op library (at import, thread-safe), and the version guard.

Importing the package loads the `.so` (`load_at_import`): XLA collects its op
kernels once per process, the first time TensorFlow compiles anything, so our XLA
kernels must be registered before that; and a SavedModel that uses our ops loads
after a plain `import tf_conv_backprop`. What lazy loading protected stays: a
library built for another TensorFlow only warns at import and is not loaded, and a
library that fails to load gives one `LibraryLoadFailedWarning` at import and the
`LibraryLoadError` at first use. Every failure says what to do: a missing file says
how to build it, a failed load says which TensorFlow (and C++ ABI) the library was
built for and which is running.

The build writes `_build_info.json` next to the library (build_tools/tf_config.py):
the TensorFlow version, C++11 ABI and CUDA versions it was built against. Importing
the package compares that with the running TensorFlow and warns once
(`VersionMismatchWarning`) when they differ; the library itself is not loaded then.
TensorFlow versions are compared by minor version: patch releases keep the C++ ABI (as
the package's own `tensorflow>=2.X,<2.X+1` requirement assumes).

`TF_CONV_BACKPROP_LIBRARY=/path/to/_conv_backprop_ops.so` loads another build of
the library (e.g. Bazel's `bazel-bin/_conv_backprop_ops.so`); its build info is read
from the same folder.
"""
import ctypes
import json
import os
import threading
import warnings

import tensorflow as tf

LIBRARY_FILE = "_conv_backprop_ops.so"
LIBRARY_ENV = "TF_CONV_BACKPROP_LIBRARY"
_BUILD_INFO_FILE = "_build_info.json"
_HERE = os.path.dirname(os.path.abspath(__file__))
REBUILD_HINT = ("Rebuild it against the running TensorFlow: `make clean build` in a source "
                "checkout, or `pip install --no-build-isolation --force-reinstall .` there "
                "(or install the wheel built for this TensorFlow).")

_lock = threading.Lock()
_library = None
_version_checked = False


class LibraryLoadError(ImportError):
    """The op library is missing or cannot be loaded into this TensorFlow."""


class VersionMismatchWarning(UserWarning):
    """The op library was built for another TensorFlow (version, C++ ABI or CUDA)."""


class LibraryLoadFailedWarning(UserWarning):
    """Importing the package could not load the op library; the first op call raises
    the `LibraryLoadError`."""


class XlaImportOrderWarning(UserWarning):
    """The op library was loaded after XLA had collected its kernels in this process,
    so `jit_compile=True` cannot compile our ops here."""


XLA_IMPORT_ORDER_HINT = (
    "XLA collects its op kernels once per process, the first time TensorFlow compiles "
    "anything with XLA, and this process had already done so before tf_conv_backprop's "
    "op library was loaded. Our ops still run outside XLA, but a tf.function(jit_compile=True) "
    "or a Keras model compiled with XLA that uses them fails in this process. Fix: import "
    "tf_conv_backprop before the first XLA compilation (at the top of the program, right "
    "after `import tensorflow`).")


def library_path():
    override = os.environ.get(LIBRARY_ENV)
    return os.path.abspath(override) if override else os.path.join(_HERE, LIBRARY_FILE)


def build_info():
    """What the library was built against, or {} when unknown."""
    path = os.path.join(os.path.dirname(library_path()), _BUILD_INFO_FILE)
    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def running_abi():
    flags = tf.sysconfig.get_compile_flags()
    abi = [f.split("=", 1)[1] for f in flags if f.startswith("-D_GLIBCXX_USE_CXX11_ABI=")]
    return int(abi[0]) if abi else None


def running_cuda_version():
    """The CUDA version the running TensorFlow was built with (None for a CPU-only TF)."""
    try:
        return tf.sysconfig.get_build_info().get("cuda_version")
    except Exception:  # pylint: disable=broad-except
        return None


def _major(version):
    return str(version).split(".")[0] if version else None


def _minor(version):
    return tuple(str(version).split(".")[:2])


def version_mismatches(info=None):
    """[(what, built for, running)] for every way the library's build differs from
    the running TensorFlow; [] when they agree or nothing was recorded."""
    info = build_info() if info is None else info
    found = []
    built_tf = info.get("tf_version")
    if built_tf and _minor(built_tf) != _minor(tf.__version__):
        found.append(("TensorFlow", built_tf, tf.__version__))
    built_abi, abi = info.get("cxx11_abi"), running_abi()
    if built_abi is not None and abi is not None and built_abi != abi:
        found.append(("C++11 ABI", built_abi, abi))
    # GPU kernels need a CUDA runtime of the same major version as TensorFlow's.
    built_cuda, cuda = info.get("cuda_version"), running_cuda_version()
    if info.get("cuda_kernels") and built_cuda and cuda and _major(built_cuda) != _major(cuda):
        found.append(("CUDA", built_cuda, cuda))
    return found


def _describe_built(info):
    text = (f"TensorFlow {info.get('tf_version', 'unknown')}, C++11 ABI "
            f"{info.get('cxx11_abi', 'unknown')}")
    if info.get("cuda_kernels"):
        text += f", CUDA {info.get('cuda_version', 'unknown')}"
    return text


def _describe_running():
    text = f"TensorFlow {tf.__version__}, C++11 ABI {running_abi()}"
    cuda = running_cuda_version()
    return text + (f", CUDA {cuda}" if cuda else "")


def check_version():
    """Warns (once per process) when the library was built for another TensorFlow.
    Reads only the build info; never loads the library. Returns the mismatches."""
    global _version_checked
    if _version_checked:
        return []
    _version_checked = True
    info = build_info()
    found = version_mismatches(info)
    if found:
        what = "; ".join(f"{name} {built} (running {running})" for name, built, running in found)
        warnings.warn(
            f"tf_conv_backprop: the op library {library_path()} was built for "
            f"{_describe_built(info)}, but this process runs {_describe_running()} ({what}). "
            f"Loading it may fail or misbehave. {REBUILD_HINT}",
            VersionMismatchWarning, stacklevel=2)
    return found


def _load():
    path = library_path()
    if not os.path.exists(path):
        raise LibraryLoadError(
            f"tf_conv_backprop: the op library {path} does not exist. Build it with `make build` "
            "in a source checkout (or install the package with `pip install .`).")
    try:
        module = tf.load_op_library(path)
    except (tf.errors.NotFoundError, tf.errors.OpError, OSError) as e:
        raise LibraryLoadError(
            f"tf_conv_backprop: could not load {path}: {e}\n"
            f"It was built for {_describe_built(build_info())}; this process runs "
            f"{_describe_running()}. Rebuild it against the running TensorFlow with "
            "`make clean build` (or reinstall with `pip install --force-reinstall .`).") from e
    _check_xla_registration(path)
    return module


def xla_kernels_usable(path=None):
    """Whether XLA can compile our ops in this process (the library must be loaded):
    False when XLA had collected its kernels before the library was loaded; None when
    the library cannot say (a build without XLA kernels)."""
    try:
        probe = ctypes.CDLL(path or library_path()).tf_conv_backprop_xla_kernels_usable
    except (OSError, AttributeError):
        return None
    return bool(probe())


def _check_xla_registration(path):
    if xla_kernels_usable(path) is False:
        warnings.warn(f"tf_conv_backprop: {XLA_IMPORT_ORDER_HINT}", XlaImportOrderWarning,
                      stacklevel=4)


def load_library():
    """The loaded op module (generated op functions); loads it on first use."""
    global _library
    if _library is None:
        with _lock:
            if _library is None:
                _library = _load()
    return _library


def load_at_import():
    """What importing the package does: the version guard, then the library, unless it
    was built for another TensorFlow. Never raises; a failure is one warning, and the
    same error comes back at the first op call."""
    if check_version():
        return
    try:
        load_library()
    except LibraryLoadError as e:
        warnings.warn(f"{e}\n(tf_conv_backprop: the op library was not loaded at import; "
                      "the first op call raises this error.)", LibraryLoadFailedWarning,
                      stacklevel=3)
