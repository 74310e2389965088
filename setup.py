"""`pip install .` builds the op library with the Makefile (flags from the building
interpreter's tf.sysconfig) and installs it next to the Python package.

Wheels get a manylinux platform tag computed from the built library's symbol
versions (build_tools/manylinux.py), never older than the TensorFlow wheel's own;
`--plat-name` still overrides it. `make wheel` builds one against the venv's
TensorFlow without build isolation and reuses the Makefile's objects
(TF_CONV_BACKPROP_BUILD_DIR), with setuptools' own folders in a fresh temporary one
(TF_CONV_BACKPROP_BUILD_BASE).
"""
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

LIBRARY = "tf_conv_backprop/_conv_backprop_ops.so"
BUILD_INFO = "tf_conv_backprop/_build_info.json"


class MakeBuildExt(build_ext):
    def build_extension(self, ext):
        build_dir = (os.environ.get("TF_CONV_BACKPROP_BUILD_DIR")
                     or os.path.abspath(os.path.join(self.build_temp, "make")))
        subprocess.check_call(["make", "-C", HERE, f"-j{os.cpu_count() or 1}", "so",
                               f"TF_PY={sys.executable}", f"BUILD_DIR={build_dir}"])
        dest = os.path.join(os.path.abspath(self.build_lib), "tf_conv_backprop")
        os.makedirs(dest, exist_ok=True)
        for path in (LIBRARY, BUILD_INFO):
            shutil.copy(os.path.join(HERE, "python", path), dest)


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
    install_requires=["tensorflow==2.21.0"],
    python_requires=">=3.9",
    zip_safe=False,
    options=OPTIONS,
)
