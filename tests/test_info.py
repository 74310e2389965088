"""`python -m tf_conv_backprop info` and the version guard.

Each case runs in its own interpreter (all started at once: each pays TF's import
time): `info` as a user runs it; the package copied with a build info that names
another TensorFlow (or C++ ABI), to see the import warn once without loading the
library, and a failed load name both versions and the rebuild command; the
TF_CONV_BACKPROP_LIBRARY override that loads a library built elsewhere (Bazel).
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from tf_conv_backprop import _loader
from tf_conv_backprop._ops import OPS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_DIR = os.path.join(ROOT, "python")
PKG_DIR = os.path.join(PYTHON_DIR, "tf_conv_backprop")
# Another minor version than the running one (the guard ignores patch releases).
OTHER_TF = "2.20.0" if not tf.__version__.startswith("2.20.") else "2.19.0"


def _start(args, pythonpath, cwd, extra_env=None):
    env = dict(os.environ, PYTHONPATH=pythonpath, TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    env.pop(_loader.LIBRARY_ENV, None)
    env.update(extra_env or {})
    return subprocess.Popen([sys.executable] + args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _copy_package(dst, **build_info_changes):
    """The package copied to dst/tf_conv_backprop, its build info changed; with a
    corrupt library when build_info_changes has corrupt=True."""
    corrupt = build_info_changes.pop("corrupt", False)
    pkg = os.path.join(dst, "tf_conv_backprop")
    shutil.copytree(PKG_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    info_path = os.path.join(pkg, "_build_info.json")
    with open(info_path) as f:
        info = json.load(f)
    info.update(build_info_changes)
    with open(info_path, "w") as f:
        json.dump(info, f)
    if corrupt:
        with open(os.path.join(pkg, _loader.LIBRARY_FILE), "w") as f:
            f.write("not a shared library\n")
    return dst


_GUARD = """
    import json, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import tf_conv_backprop
        from tf_conv_backprop import _loader
        again = _loader.check_version()  # a second check stays quiet
        import importlib
        importlib.import_module("tf_conv_backprop")  # so does a second import
    with open("/proc/self/maps") as f:
        mapped = _loader.LIBRARY_FILE in f.read()
    result = {
        "warnings": [[w.category.__name__, str(w.message)] for w in caught],
        "is_subclass": all(issubclass(w.category, tf_conv_backprop.VersionMismatchWarning)
                           for w in caught),
        "second_check": again, "loaded_after_import": _loader._library is not None,
        "mapped_after_import": mapped, "file": tf_conv_backprop.__file__,
    }
    try:
        tf_conv_backprop.load_library()
        result["load"] = "ok"
    except tf_conv_backprop.LibraryLoadError as e:
        result["load"] = str(e)
    print("RESULT " + json.dumps(result))
"""

_OVERRIDE = """
    import json, warnings
    import tensorflow as tf
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import tf_conv_backprop as tcb
    lib = tcb.load_library()
    dx = tcb.nn.conv2d_backprop_input([1, 3, 3, 1], tf.ones([1, 1, 1, 1]), tf.ones([1, 3, 3, 1]),
                                      [1, 1, 1, 1], "VALID")
    print("RESULT " + json.dumps({"path": tcb.library_path(), "sum": float(tf.reduce_sum(dx)),
                                  "info_tf": tcb._loader.build_info().get("tf_version"),
                                  "warnings": [str(w.message) for w in caught]}))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    other_tf = _copy_package(str(tmp_path_factory.mktemp("other_tf")), tf_version=OTHER_TF,
                             corrupt=True)
    other_abi = _copy_package(str(tmp_path_factory.mktemp("other_abi")), cxx11_abi=7)
    elsewhere = str(tmp_path_factory.mktemp("bazel_bin"))
    for name in (_loader.LIBRARY_FILE, "_build_info.json"):
        shutil.copy(os.path.join(PKG_DIR, name), elsewhere)
    outside = str(tmp_path_factory.mktemp("cwd"))
    procs = {
        "info": _start(["-m", "tf_conv_backprop", "info"], PYTHON_DIR, outside),
        "info_json": _start(["-m", "tf_conv_backprop", "info", "--json"], PYTHON_DIR, outside),
        "info_other_tf": _start(["-m", "tf_conv_backprop", "info"], other_tf, other_tf),
        "guard_other_tf": _start(["-c", textwrap.dedent(_GUARD)], other_tf, other_tf),
        "guard_other_abi": _start(["-c", textwrap.dedent(_GUARD)], other_abi, other_abi),
        "override": _start(["-c", textwrap.dedent(_OVERRIDE)], PYTHON_DIR, outside,
                           {_loader.LIBRARY_ENV: os.path.join(elsewhere, _loader.LIBRARY_FILE)}),
    }
    done = {}

    def get(key):
        if key not in done:
            out, err = procs[key].communicate(timeout=300)
            done[key] = (procs[key].returncode, out, err)
        return done[key]

    yield get
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _result(run):
    rc, out, err = run
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert rc == 0 and lines, f"rc={rc}\nstdout:\n{out}\nstderr:\n{err[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def test_info_text(runs):
    rc, out, err = runs("info")
    assert rc == 0, f"stdout:\n{out}\nstderr:\n{err[-3000:]}"
    assert out.startswith("tf_conv_backprop 0.1.0"), out
    assert "match: the library was built for this TensorFlow" in out, out
    assert f"TensorFlow             {tf.__version__}" in out, out
    for heading in ("Versions", "Build", "Registered kernels", "Support matrix"):
        assert f"\n{heading}" in out, heading
    # the build flags the library was really built with
    assert "compiler:" in out and "-O3" in out and "--std=c++17" in out, out
    built = _loader.build_info()
    if built.get("cuda_kernels"):
        assert f"GPU kernels:   yes, CUDA {built['cuda_version']}" in out, out
    else:
        assert "GPU kernels:   no (CPU-only build" in out, out
    # TF's default TF32 setting (on), and the determinism statement
    assert "GPU float32:   TF32 tensor cores" in out and "enable_op_determinism" in out, out
    registered, xla = out.split("\nXLA kernels", 1)
    for spec in OPS:
        row = [line for line in registered.splitlines()
               if line.strip().startswith(spec.op_name + " ")]
        assert len(row) == 1, (spec.op_name, out)
        assert " ".join(spec.dtypes) in row[0], row[0]
        assert "(no GPU visible)" in row[0], row[0]
        xla_row = [line for line in xla.split("\nSupport matrix")[0].splitlines()
                   if line.strip().startswith(spec.op_name + " ")]
        assert len(xla_row) == 1 and xla_row[0].split()[1:] == list(spec.dtypes), (spec, out)
    assert "depthwise gradients, dilations > 1" in out and "wrong numbers" in out


def test_info_json(runs):
    rc, out, err = runs("info_json")
    assert rc == 0, f"stdout:\n{out}\nstderr:\n{err[-3000:]}"
    report = json.loads(out)
    assert report["package"]["location"] == PKG_DIR
    assert report["tensorflow"]["version"] == tf.__version__
    assert report["build_info"]["tf_version"] == tf.__version__
    assert report["build_info"]["cuda_kernels"] is bool(report["build_info"]["cuda_version"])
    assert report["version_mismatches"] == []
    assert report["load_error"] is None
    assert report["gpu_visible"] is False
    assert sorted(report["kernels"]) == sorted(spec.op_name for spec in OPS)
    for spec in OPS:
        assert report["kernels"][spec.op_name] == {"CPU": list(spec.dtypes)}, spec
    assert report["xla_usable"] is True
    assert report["xla_kernels"] == {spec.op_name: list(spec.dtypes) for spec in OPS}
    assert len(report["support_matrix"]) >= 8
    assert report["gpu_numerics"]["tf32_enabled"] is True  # TF's default
    assert report["gpu_numerics"]["deterministic"] is True


def test_info_reports_mismatch_and_load_error(runs):
    rc, out, err = runs("info_other_tf")
    assert rc == 1, f"a library that does not load must fail `info`\n{out}\n{err[-2000:]}"
    assert f"MISMATCH: TensorFlow built {OTHER_TF}, running {tf.__version__}" in out, out
    assert "the library did not load" in out and "make clean build" in out, out


def test_other_tf_warns_once_without_loading(runs):
    res = _result(runs("guard_other_tf"))
    assert len(res["warnings"]) == 1, res["warnings"]
    category, message = res["warnings"][0]
    assert category == "VersionMismatchWarning" and res["is_subclass"]
    assert f"built for TensorFlow {OTHER_TF}" in message, message
    assert f"runs TensorFlow {tf.__version__}" in message, message
    assert "make clean build" in message and "pip install" in message, message
    assert res["second_check"] == []
    assert not res["loaded_after_import"] and not res["mapped_after_import"], res


def test_failed_load_names_both_versions_and_rebuild(runs):
    res = _result(runs("guard_other_tf"))
    msg = res["load"]
    assert msg != "ok"
    assert f"It was built for TensorFlow {OTHER_TF}" in msg, msg
    assert f"this process runs TensorFlow {tf.__version__}" in msg, msg
    assert "make clean build" in msg, msg


def test_other_abi_warns(runs):
    res = _result(runs("guard_other_abi"))
    assert len(res["warnings"]) == 1, res["warnings"]
    message = res["warnings"][0][1]
    assert "C++11 ABI 7 (running 1)" in message, message
    assert not res["loaded_after_import"]


def test_library_override(runs):
    """TF_CONV_BACKPROP_LIBRARY loads a library built elsewhere (Bazel's bazel-bin) with
    the build info beside it; it matches the running TF, so the import is quiet."""
    res = _result(runs("override"))
    assert res["warnings"] == [], res
    assert res["path"].endswith(os.path.join("bazel_bin0", _loader.LIBRARY_FILE)), res
    assert res["info_tf"] == tf.__version__
    assert res["sum"] == 9.0


def test_version_mismatches_unit():
    running = {"tf_version": tf.__version__, "cxx11_abi": _loader.running_abi()}
    assert _loader.version_mismatches(running) == []
    assert _loader.version_mismatches({}) == []
    assert _loader.version_mismatches(dict(running, tf_version="1.0.0")) == [
        ("TensorFlow", "1.0.0", tf.__version__)]
    # Another patch release of the same minor version keeps the ABI; another minor does not.
    major, minor, _ = tf.__version__.split(".", 2)
    assert _loader.version_mismatches(dict(running, tf_version=f"{major}.{minor}.99")) == []
    next_minor = f"{major}.{int(minor) + 1}.0"
    assert _loader.version_mismatches(dict(running, tf_version=next_minor)) == [
        ("TensorFlow", next_minor, tf.__version__)]
    cuda = _loader.running_cuda_version()
    if cuda:
        other = str(int(cuda.split(".")[0]) + 1) + ".0"
        assert _loader.version_mismatches(dict(running, cuda_kernels=True, cuda_version=other)) \
            == [("CUDA", other, cuda)]
        # no GPU kernels: TF's CUDA does not matter
        assert _loader.version_mismatches(dict(running, cuda_kernels=False,
                                               cuda_version=other)) == []
