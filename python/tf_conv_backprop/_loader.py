"""Lazy, thread-safe loading of the op library.

Importing the package never loads the `.so`; the first op call does. Every
failure says what to do: a missing file says how to build it, a failed load says
which TensorFlow (and C++ ABI) the library was built for and which is running.
"""
import json
import os
import threading

import tensorflow as tf

LIBRARY_FILE = "_conv_backprop_ops.so"
_BUILD_INFO_FILE = "_build_info.json"
_HERE = os.path.dirname(os.path.abspath(__file__))

_lock = threading.Lock()
_library = None


class LibraryLoadError(ImportError):
    """The op library is missing or cannot be loaded into this TensorFlow."""


def library_path():
    return os.path.join(_HERE, LIBRARY_FILE)


def build_info():
    """What the library was built against, or {} when unknown."""
    try:
        with open(os.path.join(_HERE, _BUILD_INFO_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def running_abi():
    flags = tf.sysconfig.get_compile_flags()
    abi = [f.split("=", 1)[1] for f in flags if f.startswith("-D_GLIBCXX_USE_CXX11_ABI=")]
    return int(abi[0]) if abi else None


def _load():
    path = library_path()
    if not os.path.exists(path):
        raise LibraryLoadError(
            f"tf_conv_backprop: the op library {path} does not exist. Build it with `make build` "
            "in a source checkout (or install the package with `pip install .`).")
    try:
        return tf.load_op_library(path)
    except (tf.errors.NotFoundError, tf.errors.OpError, OSError) as e:
        info = build_info()
        built = (f"TensorFlow {info.get('tf_version', 'unknown')}, C++11 ABI "
                 f"{info.get('cxx11_abi', 'unknown')}")
        raise LibraryLoadError(
            f"tf_conv_backprop: could not load {path}: {e}\n"
            f"It was built for {built}; this process runs TensorFlow {tf.__version__}, "
            f"C++11 ABI {running_abi()}. Rebuild it against the running TensorFlow with "
            "`make clean build` (or reinstall with `pip install --force-reinstall .`).") from e


def load_library():
    """The loaded op module (generated op functions); loads it on first use."""
    global _library
    if _library is None:
        with _lock:
            if _library is None:
                _library = _load()
    return _library
