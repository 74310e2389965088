"""The wheel, as a user gets it: `make wheel` builds it against the venv's TensorFlow;
a fresh virtual environment installs tensorflow==2.21.0 and the wheel with pip (TF
from pip's cache when it has it, else from the index); there, with no compiler
reachable, build_tools/check_install.py calls all fourteen public names against TF
and `python -m tf_conv_backprop info` runs.

Slow (about a minute, most of it pip installing TensorFlow): `-m "not slow"`
deselects it; `make test` runs it.
"""
import email.parser
import glob
import json
import os
import re
import subprocess
import sys
import zipfile

import pytest
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build_tools"))
import manylinux  # noqa: E402  pylint: disable=wrong-import-position
import tf_matrix  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.slow

WHEEL_RE = re.compile(r"tf_conv_backprop-0\.1\.0-(cp\d+)-(cp\d+)-(manylinux_2_(\d+)_x86_64)\.whl$")


def _run(args, timeout, **kwargs):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert proc.returncode == 0, (f"{' '.join(map(str, args))}: rc={proc.returncode}\n"
                                  f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    dist = tmp_path_factory.mktemp("dist")
    _run(["make", "-s", "wheel", f"DIST={dist}"], timeout=900, cwd=ROOT)
    wheels = glob.glob(os.path.join(dist, "*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv with tensorflow==2.21.0 and the wheel installed by pip."""
    where = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", str(where)], timeout=300)
    python = os.path.join(where, "bin", "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    _run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
          "tensorflow==2.21.0", wheel], timeout=900, env=env, cwd=str(where))
    return str(where)


def _no_compiler_env(venv):
    """Only the venv's bin/ on PATH (checked to hold no compiler), CXX/CC that fail."""
    found = tf_matrix.compilers_in(venv)
    assert not found, f"{found} reachable in {os.path.join(venv, 'bin')}"
    return tf_matrix.no_compiler_env(venv)


def test_wheel_name_and_tag(wheel):
    m = WHEEL_RE.search(os.path.basename(wheel))
    assert m, os.path.basename(wheel)
    assert m.group(1) == f"cp{sys.version_info[0]}{sys.version_info[1]}"
    with zipfile.ZipFile(wheel) as z:
        meta = z.read("tf_conv_backprop-0.1.0.dist-info/WHEEL").decode()
    assert f"Tag: {m.group(1)}-{m.group(2)}-{m.group(3)}" in meta, meta
    assert "Root-Is-Purelib: false" in meta


def test_wheel_tag_matches_library(wheel, tmp_path):
    """The tag is what the library's own symbol versions and links require (and no
    older than TensorFlow's wheel): a manylinux_2_17 label on a cxx11-ABI library
    built with a recent g++ would promise what it cannot keep."""
    with zipfile.ZipFile(wheel) as z:
        z.extract("tf_conv_backprop/_conv_backprop_ops.so", tmp_path)
    library = os.path.join(tmp_path, "tf_conv_backprop", "_conv_backprop_ops.so")
    expected, reasons = manylinux.platform_tag(library)
    assert expected, reasons
    assert expected == WHEEL_RE.search(os.path.basename(wheel)).group(3), reasons
    minor = int(WHEEL_RE.search(os.path.basename(wheel)).group(4))
    assert minor >= (manylinux.tensorflow_glibc() or 17)


def test_wheel_contents(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = json.loads(z.read("tf_conv_backprop/_build_info.json"))
        metadata = email.parser.Parser().parsestr(
            z.read("tf_conv_backprop-0.1.0.dist-info/METADATA").decode())
    source = {os.path.relpath(p, os.path.join(ROOT, "python")) for p in
              glob.glob(os.path.join(ROOT, "python", "tf_conv_backprop", "**", "*.py"),
                        recursive=True)}
    assert source <= names, sorted(source - names)
    assert "tf_conv_backprop/_conv_backprop_ops.so" in names
    assert "tf_conv_backprop/__main__.py" in names
    assert info["tf_version"] == tf.__version__ == "2.21.0"
    assert info["cxx11_abi"] == 1
    # GPU kernels when `make build` found the CUDA toolchain (CUDA=auto), with the CUDA
    # version they were built with; then of TF's CUDA major version.
    assert info["cuda_kernels"] is bool(info["cuda_version"]), info
    if info["cuda_kernels"]:
        assert info["cuda_version"].split(".")[0] == info["tf_cuda_version"].split(".")[0]
    # The minor version it was built against, any patch release of it.
    assert metadata.get_all("Requires-Dist") == ["tensorflow<2.22,>=2.21"], (
        metadata.get_all("Requires-Dist"))


def test_installed_wheel_works_without_compiler(venv, tmp_path):
    env = _no_compiler_env(venv)
    python = os.path.join(venv, "bin", "python")
    proc = _run([python, os.path.join(ROOT, "build_tools", "check_install.py")],
                timeout=600, env=env, cwd=str(tmp_path))
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                timeout=60, env=env, cwd=str(tmp_path)).stdout.strip()
    assert f"14 public names OK from {os.path.join(site, 'tf_conv_backprop')}" in proc.stdout, (
        proc.stdout)
    assert "VersionMismatchWarning" not in proc.stderr, proc.stderr[-2000:]


def test_installed_info(venv, tmp_path):
    env = _no_compiler_env(venv)
    proc = _run([os.path.join(venv, "bin", "python"), "-m", "tf_conv_backprop", "info"],
                timeout=600, env=env, cwd=str(tmp_path))
    assert "match: the library was built for this TensorFlow" in proc.stdout, proc.stdout
    registered, xla = proc.stdout.split("\nXLA kernels", 1)
    assert registered.count("float16 bfloat16 float32 float64") == 4, proc.stdout
    assert xla.count("float16 bfloat16 float32 float64") == 4, proc.stdout
