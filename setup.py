"""`pip install .` builds the op library with the Makefile (flags from the building
interpreter's tf.sysconfig) and installs it next to the Python package."""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = "tf_conv_backprop/_conv_backprop_ops.so"
BUILD_INFO = "tf_conv_backprop/_build_info.json"


class MakeBuildExt(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.abspath(os.path.join(self.build_temp, "make"))
        subprocess.check_call(["make", "-C", HERE, f"-j{os.cpu_count() or 1}", "so",
                               f"TF_PY={sys.executable}", f"BUILD_DIR={build_dir}"])
        dest = os.path.join(os.path.abspath(self.build_lib), "tf_conv_backprop")
        os.makedirs(dest, exist_ok=True)
        for path in (LIBRARY, BUILD_INFO):
            shutil.copy(os.path.join(HERE, "python", path), dest)


setup(
    name="tf-conv-backprop",
    version="0.1.0",
    description="TensorFlow's convolution-gradient ops in every configuration, with TF's API",
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[Extension("tf_conv_backprop._conv_backprop_ops", sources=[])],
    cmdclass={"build_ext": MakeBuildExt},
    install_requires=["tensorflow==2.21.0"],
    python_requires=">=3.9",
    zip_safe=False,
)
