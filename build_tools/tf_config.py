"""Compiler and linker flags for building against the running TensorFlow.

Used by the Makefile (and so by setup.py): flags come only from tf.sysconfig,
never hardcoded, and the build records what it was built against so the loader
can explain a mismatch.

    python build_tools/tf_config.py cflags|lflags
    python build_tools/tf_config.py build-info OUT.json
"""
import json
import os
import platform
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402


def build_info():
    cflags = tf.sysconfig.get_compile_flags()
    abi = [f.split("=")[1] for f in cflags if f.startswith("-D_GLIBCXX_USE_CXX11_ABI=")]
    info = tf.sysconfig.get_build_info()
    return {
        "tf_version": tf.__version__,
        "cxx11_abi": int(abi[0]) if abi else None,
        "tf_cuda_version": info.get("cuda_version"),
        "cuda_kernels": False,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def main(argv):
    if argv[1] == "cflags":
        # -isystem: warnings inside TF's headers are not ours to fix.
        print(" ".join("-isystem " + f[2:] if f.startswith("-I") else f
                       for f in tf.sysconfig.get_compile_flags()))
    elif argv[1] == "lflags":
        print(" ".join(tf.sysconfig.get_link_flags()))
    elif argv[1] == "build-info":
        with open(argv[2], "w") as f:
            json.dump(build_info(), f, indent=1, sort_keys=True)
            f.write("\n")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
