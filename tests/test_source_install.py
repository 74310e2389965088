"""`pip install .` from the source tree: what it builds against and what it builds.

- The isolated build asks for the TensorFlow to build against
  (build_tools/build_backend.py): 2.21.0, or TF_CONV_BACKPROP_TF_VERSION.
- setup.py requires the minor version of the TensorFlow it builds against, under the
  distribution name that provides it.
- A source install builds what `make build` builds: with the CUDA toolchain present or
  installable (CUDA=auto), the GPU-enabled library. Checked where CI expects CUDA
  (TF_CONV_BACKPROP_EXPECT_CUDA=1): `pip install --no-build-isolation --target` with
  `make build`'s objects reused (TF_CONV_BACKPROP_BUILD_DIR, as `make wheel` does), then
  the installed library is loaded in a fresh process and must register GPU kernels.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPECT_CUDA = os.environ.get("TF_CONV_BACKPROP_EXPECT_CUDA") == "1"


def _python(code, env=None, cwd=ROOT, timeout=300):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout, check=False)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("version", [None, "2.18.1"])
def test_isolated_build_requires_the_tensorflow_asked_for(version):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONV_BACKPROP_TF_VERSION"}
    if version:
        env["TF_CONV_BACKPROP_TF_VERSION"] = version
    out = _python("import json, sys; sys.path.insert(0, 'build_tools'); import build_backend; "
                  "print(json.dumps(build_backend.get_requires_for_build_wheel()))", env=env)
    requires = json.loads(out)
    assert f"tensorflow=={version or '2.21.0'}" in requires, requires
    assert sum(r.startswith("tensorflow") for r in requires) == 1, requires


def test_requirement_is_the_building_tensorflows_minor_version():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    major, minor = tf.__version__.split(".")[:2]
    # setup.py's helpers without running setup(): everything above the call.
    code = ("src = open('setup.py').read(); g = {'__file__': 'setup.py'}; "
            "exec(src[:src.index('\\nsetup(')], g); print(g['tensorflow_requirement']())")
    assert _python(code) == f"tensorflow>={major}.{minor},<{major}.{int(minor) + 1}"


@pytest.mark.slow
@pytest.mark.skipif(not EXPECT_CUDA, reason="TF_CONV_BACKPROP_EXPECT_CUDA is not 1 (CI sets it)")
def test_source_install_builds_the_gpu_library(tmp_path):
    target, base = tmp_path / "site", tmp_path / "setuptools"
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CONV_BACKPROP_CUDA", "TF_CONV_BACKPROP_LIBRARY", "PYTHONPATH")}
    env.update(TF_CONV_BACKPROP_BUILD_DIR=os.path.join(ROOT, "build"),
               TF_CONV_BACKPROP_BUILD_BASE=str(base))
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-v", "--no-build-isolation",
                           "--no-deps", "--target", str(target), "."], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=1800, check=False)
    output = proc.stdout + proc.stderr  # pip -v relays the build's output on either
    assert proc.returncode == 0, output[-8000:]
    assert "tf_conv_backprop: built the GPU-enabled library" in output, output[-8000:]
    env = {k: v for k, v in os.environ.items() if k != "TF_CONV_BACKPROP_LIBRARY"}
    env.update(PYTHONPATH=str(target), TF_CPP_MIN_LOG_LEVEL="3")
    out = _python(
        "import json, tensorflow as tf, tf_conv_backprop as tcb\n"
        "from tensorflow.python.framework import kernels\n"
        "from tf_conv_backprop import _loader\n"
        "_loader.load_library()\n"
        "gpu = sorted({op.op_name for op in tcb._ops.OPS\n"
        "              for k in kernels.get_registered_kernels_for_op(op.op_name).kernel\n"
        "              if k.device_type == 'GPU'})\n"
        "print(json.dumps({'file': tcb.__file__, 'info': _loader.build_info(), 'gpu': gpu}))",
        env=env, cwd=str(tmp_path))
    res = json.loads(out)
    assert res["file"].startswith(str(target)), res["file"]
    assert res["info"]["cuda_kernels"] is True, res["info"]
    assert len(res["gpu"]) == 4, res["gpu"]
