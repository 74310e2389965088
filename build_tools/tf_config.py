"""Compiler and linker flags for building against the running TensorFlow.

Used by the Makefile (and so by setup.py) and by the Bazel repository rule
(build_tools/bazel/tf_configure.bzl): flags come only from tf.sysconfig, never
hardcoded, and the build records what it was built against so the loader can
explain a mismatch.

    python build_tools/tf_config.py cflags|lflags|xla-cflags
    python build_tools/tf_config.py sysconfig            # JSON, for Bazel
    python build_tools/tf_config.py build-info OUT.json [--builder make|bazel]
        [--cxx CXX] [--cxxflags FLAGS] [--isas "baseline avx2 ..."]
        [--cuda-version X.Y]

`--cuda-version` is the hook for the CUDA build: pass the version of the CUDA
toolkit the GPU kernels were compiled with, and the build info records
`cuda_kernels: true` with that version. Without it the library is CPU-only.
"""
import argparse
import glob
import json
import os
import platform
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402


def version_defines():
    """TF_MAJOR_VERSION and TF_MINOR_VERSION are Bazel-time defines from TF 2.20 on (its
    pip headers no longer carry them), so the binding's version checks
    (tf_ops/tf/tf_version_compat.h) read ours, taken from the TF being built against."""
    major, minor = tf.__version__.split(".")[:2]
    return [f"-DTCB_TF_MAJOR={int(major)}", f"-DTCB_TF_MINOR={int(minor)}"]


def compile_flags():
    return tf.sysconfig.get_compile_flags() + version_defines()


def cxx11_abi(cflags):
    abi = [f.split("=", 1)[1] for f in cflags if f.startswith("-D_GLIBCXX_USE_CXX11_ABI=")]
    return int(abi[0]) if abi else None


def compiler_version(cxx):
    """First line of `CXX --version`, or None when it cannot be run."""
    if not cxx:
        return None
    try:
        out = subprocess.run(cxx.split() + ["--version"], capture_output=True, text=True,
                             timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


def build_info(builder="make", cxx=None, cxxflags=None, isas=None, cuda_version=None):
    cflags = compile_flags()
    info = tf.sysconfig.get_build_info()
    return {
        "tf_version": tf.__version__,
        "cxx11_abi": cxx11_abi(cflags),
        # The CUDA / cuDNN TensorFlow itself was built with (None for CPU-only TF).
        "tf_cuda_version": info.get("cuda_version"),
        "tf_cudnn_version": info.get("cudnn_version"),
        # Whether this library has GPU kernels, and the CUDA toolkit they were built with.
        "cuda_kernels": bool(cuda_version),
        "cuda_version": cuda_version or None,
        "builder": builder,
        "compiler": compiler_version(cxx),
        "cxxflags": cxxflags.split() if cxxflags else None,
        "cpu_isas": isas.split() if isas else None,
        # Flags from tf.sysconfig (paths are those of the building environment).
        "tf_compile_flags": cflags,
        "tf_link_flags": link_flags(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


# XLA's headers (tensorflow/compiler/tf2xla, xla/) include these two third-party
# folders by their own roots, which tf.sysconfig's flags do not name.
XLA_INCLUDE_SUBDIRS = ("external/highwayhash", "external/farmhash_archive/src")


def xla_include_dirs():
    return [os.path.join(tf.sysconfig.get_include(), d) for d in XLA_INCLUDE_SUBDIRS] + llvm_include_dirs()


def llvm_include_dirs():
    """TF 2.19's XLA headers include LLVM's ADT headers, which its wheel does not ship
    (tensorflow/tensorflow#90026); the XLA kernels only need them to parse, so any LLVM's
    will do: $TCB_LLVM_INCLUDE, `llvm-config --includedir`, or Debian's /usr/lib/llvm-*."""
    include = tf.sysconfig.get_include()
    user = os.path.join(include, "xla/stream_executor/gpu/tma_metadata.h")
    if not os.path.exists(user) or os.path.exists(os.path.join(include, "llvm/ADT/ArrayRef.h")):
        return []
    with open(user, encoding="utf-8") as f:
        if "llvm/ADT/ArrayRef.h" not in f.read():
            return []
    candidates = [os.environ.get("TCB_LLVM_INCLUDE", "")]
    try:
        candidates.append(subprocess.run(["llvm-config", "--includedir"], capture_output=True,
                                         text=True, timeout=30, check=False).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    candidates += sorted(glob.glob("/usr/lib/llvm-*/include"), reverse=True)
    for d in candidates:
        if d and os.path.exists(os.path.join(d, "llvm/ADT/SmallVector.h")):
            return [d]
    sys.exit(f"tf_config: TensorFlow {tf.__version__}'s XLA headers need LLVM's headers, which its "
             "wheel lacks (tensorflow/tensorflow#90026): install them (Debian: apt-get install "
             "llvm-dev) or point TCB_LLVM_INCLUDE at an LLVM include folder")


def framework_library():
    libs = [f[len("-l:"):] for f in tf.sysconfig.get_link_flags() if f.startswith("-l:")]
    return libs[0] if libs else "libtensorflow_framework.so.2"


def cc_library():
    """libtensorflow_cc, which exports XLA's op registry and builder (the XLA kernels
    link it; tf.sysconfig's link flags name only the framework library)."""
    return framework_library().replace("tensorflow_framework", "tensorflow_cc")


def link_flags():
    return tf.sysconfig.get_link_flags() + ["-l:" + cc_library()]


def sysconfig():
    """What a Bazel repository rule needs to wrap the pip-installed TensorFlow."""
    cflags = compile_flags()
    return {
        "tf_version": tf.__version__,
        "include": tf.sysconfig.get_include(),
        "lib": tf.sysconfig.get_lib(),
        "framework_library": framework_library(),
        "cc_library": cc_library(),
        "xla_includes": ["include/" + d for d in XLA_INCLUDE_SUBDIRS],
        "defines": [f[2:] for f in cflags if f.startswith("-D")],
        "copts": [f for f in cflags if not f.startswith(("-D", "-I"))],
    }


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["cflags", "lflags", "xla-cflags", "sysconfig", "build-info"])
    parser.add_argument("out", nargs="?", help="output file (build-info)")
    parser.add_argument("--builder", default="make")
    parser.add_argument("--cxx")
    parser.add_argument("--cxxflags")
    parser.add_argument("--isas")
    parser.add_argument("--cuda-version")
    args = parser.parse_args(argv[1:])
    if args.what == "cflags":
        # -isystem: warnings inside TF's headers are not ours to fix.
        print(" ".join("-isystem " + f[2:] if f.startswith("-I") else f
                       for f in compile_flags()))
    elif args.what == "lflags":
        print(" ".join(link_flags()))
    elif args.what == "xla-cflags":
        print(" ".join("-isystem " + d for d in xla_include_dirs()))
    elif args.what == "sysconfig":
        print(json.dumps(sysconfig()))
    else:
        if not args.out:
            parser.error("build-info needs OUT.json")
        info = build_info(args.builder, args.cxx, args.cxxflags, args.isas, args.cuda_version)
        with open(args.out, "w") as f:
            json.dump(info, f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
