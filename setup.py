"""`pip install .` builds the op library with the Makefile (flags from the building
interpreter's tf.sysconfig) and installs it next to the Python package.

It builds against the TensorFlow of the building environment and leaves it as it is:
with `--no-build-isolation` the user's own (2.16 to 2.21), in an isolated build the one
build_tools/build_backend.py asks for (TF_CONV_BACKPROP_TF_VERSION, default 2.21.0). The
package then requires that TensorFlow's minor version (`tensorflow>=2.X,<2.X+1`, under the
distribution name that provides it, e.g. tensorflow-cpu).

Like `make build`, it builds the GPU kernels when the CUDA toolchain is present or
installable (TF_CONV_BACKPROP_CUDA=auto, the default) and says which library it built;
TF_CONV_BACKPROP_CUDA=1 requires them, =0 builds the CPU-only library.

Wheels get a manylinux platform tag computed from the built library's symbol
versions (build_tools/manylinux.py), never older than the TensorFlow wheel's own;
`--plat-name` still overrides it. `make wheel` builds one against the venv's
TensorFlow without build isolation and reuses the Makefile's objects
(TF_CONV_BACKPROP_BUILD_DIR), with setuptools' own folders in a fresh temporary one
(TF_CONV_BACKPROP_BUILD_BASE).
"""
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import warnings

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:  # older setuptools: the `wheel` package's command
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "build_tools"))
import manylinux  # noqa: E402  pylint: disable=wrong-import-position
from tf_matrix import VERSIONS as TESTED_TF  # noqa: E402  pylint: disable=wrong-import-position

LIBRARY = "tf_conv_backprop/_conv_backprop_ops.so"
BUILD_INFO = "tf_conv_backprop/_build_info.json"
# Oldest and newest minor versions it builds against: those `make tf-matrix` checks.
SUPPORTED_TF = tuple(tuple(int(p) for p in v.split(".")[:2]) for v in (TESTED_TF[0], TESTED_TF[-1]))


def building_tensorflow():
    """(distribution name, version) of the TensorFlow in the building environment, read
    from its metadata (importing TF here would cost seconds at every setup.py call)."""
    names = importlib.metadata.packages_distributions().get("tensorflow", [])
    # Other distributions may also install into tensorflow/; TF's own names come first.
    names = sorted(names, key=lambda n: (not n.lower().startswith(("tensorflow", "tf-nightly")), n))
    for name in names:
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None, None


def tensorflow_requirement():
    name, version = building_tensorflow()
    if version is None:
        # No TF to build against (e.g. an sdist): any supported one.
        (lo_major, lo_minor), (hi_major, hi_minor) = SUPPORTED_TF
        return f"tensorflow>={lo_major}.{lo_minor},<{hi_major}.{hi_minor + 1}"
    major, minor = (int(p) for p in version.split(".")[:2])
    if not SUPPORTED_TF[0] <= (major, minor) <= SUPPORTED_TF[1]:
        sys.exit(f"tf_conv_backprop builds against TensorFlow "
                 f"{'.'.join(map(str, SUPPORTED_TF[0]))} to {'.'.join(map(str, SUPPORTED_TF[1]))}; "
                 f"this environment has {name} {version}")
    return f"{name}>={major}.{minor},<{major}.{minor + 1}"


class MakeBuildExt(build_ext):
    def build_extension(self, ext):
        build_dir = (os.environ.get("TF_CONV_BACKPROP_BUILD_DIR")
                     or os.path.abspath(os.path.join(self.build_temp, "make")))
        built = {path: os.path.join(build_dir, os.path.basename(path)) for path in (LIBRARY, BUILD_INFO)}
        # `make build`: the CUDA decision (toolchain found, installed or not) and the library,
        # into the build folder (the source tree's own library stays as it is).
        subprocess.check_call(["make", "-C", HERE, "build", f"JOBS={os.cpu_count() or 1}",
                               f"TF_PY={sys.executable}", f"BUILD_DIR={build_dir}",
                               f"CUDA={os.environ.get('TF_CONV_BACKPROP_CUDA', 'auto')}",
                               f"SO={built[LIBRARY]}", f"BUILD_INFO={built[BUILD_INFO]}"])
        with open(built[BUILD_INFO], encoding="utf-8") as f:
            info = json.load(f)
        print(f"tf_conv_backprop: built the {describe_library(info)} against TensorFlow "
              f"{info['tf_version']}", flush=True)
        dest = os.path.join(os.path.abspath(self.build_lib), "tf_conv_backprop")
        os.makedirs(dest, exist_ok=True)
        for path in (LIBRARY, BUILD_INFO):
            shutil.copy(built[path], os.path.join(dest, os.path.basename(path)))


def describe_library(info):
    if info.get("cuda_kernels"):
        return f"GPU-enabled library (CPU and CUDA {info.get('cuda_version')} kernels)"
    return "CPU-only library (no CUDA kernels; TF_CONV_BACKPROP_CUDA=1 requires them)"


class ManylinuxWheel(bdist_wheel):
    """The platform tag the built library qualifies for (see build_tools/manylinux.py);
    the plain `linux_<arch>` tag when it qualifies for none or this machine cannot
    install it."""

    def get_tag(self):
        if self.plat_name_supplied:
            return super().get_tag()
        build_lib = self.get_finalized_command("build").build_lib
        library = os.path.join(build_lib, LIBRARY)
        tag, reasons = (manylinux.platform_tag(library) if os.path.exists(library)
                        else (None, [f"{library} not built"]))
        if tag is None:
            print(f"tf_conv_backprop: no manylinux tag: {'; '.join(reasons)}")
            return super().get_tag()
        saved = self.plat_name, self.plat_name_supplied
        self.plat_name, self.plat_name_supplied = tag, True
        try:
            return super().get_tag()
        except AssertionError:  # newer than this machine's glibc: keep the plain tag
            print(f"tf_conv_backprop: {tag} is not installable here; using the plain tag")
        finally:
            self.plat_name, self.plat_name_supplied = saved
        return super().get_tag()


# TF_CONV_BACKPROP_BUILD_BASE: setuptools' build/ and egg-info folders go there instead
# of the source tree (`make wheel` gives each run its own, so runs can overlap).
BUILD_BASE = os.environ.get("TF_CONV_BACKPROP_BUILD_BASE")
OPTIONS = {}
if BUILD_BASE:
    os.makedirs(BUILD_BASE, exist_ok=True)
    OPTIONS = {"build": {"build_base": os.path.join(BUILD_BASE, "build")},
               "egg_info": {"egg_base": BUILD_BASE}}

setup(
    name="tf-conv-backprop",
    version="0.1.0",
    description="TensorFlow's convolution-gradient ops in every configuration, with TF's API",
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[Extension("tf_conv_backprop._conv_backprop_ops", sources=[])],
    cmdclass={"build_ext": MakeBuildExt, "bdist_wheel": ManylinuxWheel},
    install_requires=[tensorflow_requirement()],
    python_requires=">=3.9",
    zip_safe=False,
    options=OPTIONS,
)
