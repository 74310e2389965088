"""The library's CUDA build (GPU_BUILD.md) on a machine that may have no GPU: the
GPU-enabled library loads into TensorFlow (also a CPU-only one), registers a CPU and
a GPU kernel for every op and dtype, with the sizes input in host memory, links no
CUDA runtime of its own, and its CPU kernels still compute the right thing.

`make pytest CUDA=1` (CI) sets TF_CONV_BACKPROP_EXPECT_CUDA=1: then a CPU-only build
is a failure, not a skip.
"""
import os
import shutil
import subprocess

import numpy as np
import pytest
import tensorflow as tf
# Private, test-only: TF has no public API that lists the kernels registered for an op.
from tensorflow.python.framework import kernels as tf_kernels

from cases import Case, make_arrays, rel_error, run_ours, run_reference, within
from tf_conv_backprop import _loader
from tf_conv_backprop._ops import DTYPES, OPS

INFO = _loader.build_info()
EXPECT_CUDA = os.environ.get("TF_CONV_BACKPROP_EXPECT_CUDA") == "1"
needs_cuda_build = pytest.mark.skipif(
    not INFO.get("cuda_kernels"),
    reason="CPU-only build of the library (`make build CUDA=1` builds the CUDA one)")


def test_cuda_build_when_expected():
    if EXPECT_CUDA:
        assert INFO.get("cuda_kernels"), (
            f"CUDA=1 but {_loader.library_path()} was built without CUDA kernels: {INFO}")


@needs_cuda_build
def test_build_info_records_the_cuda_version():
    version = INFO.get("cuda_version")
    assert version and version.count(".") == 1, INFO
    tf_cuda = tf.sysconfig.get_build_info().get("cuda_version")
    if tf_cuda:  # the kernels run on TF's CUDA runtime: same major version
        assert version.split(".")[0] == tf_cuda.split(".")[0], (version, tf_cuda)


@needs_cuda_build
@pytest.mark.parametrize("spec", OPS, ids=[op.key for op in OPS])
def test_cpu_and_gpu_kernels_registered(spec):
    _loader.load_library()
    registered = tf_kernels.get_registered_kernels_for_op(spec.op_name).kernel
    found = {}
    for k in registered:
        dtypes = [tf.dtypes.as_dtype(t) for c in k.constraint if c.name == "T"
                  for t in c.allowed_values.list.type]
        for dtype in dtypes:
            found[(k.device_type, dtype)] = list(k.host_memory_arg)
    for dtype in DTYPES:
        assert ("CPU", dtype) in found, f"{spec.op_name}: no CPU kernel for {dtype.name}: {found}"
        assert ("GPU", dtype) in found, f"{spec.op_name}: no GPU kernel for {dtype.name}: {found}"
        assert found[("GPU", dtype)] == [spec.sizes_arg], (
            f"{spec.op_name}: the GPU kernel must keep `{spec.sizes_arg}` in host memory")


@needs_cuda_build
def test_no_cuda_runtime_linked():
    """The CUDA runtime comes from libtensorflow_framework.so.2 (TF's stub), so the
    library loads wherever TF does, with or without CUDA installed."""
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("no readelf")
    out = subprocess.run([readelf, "-d", _loader.library_path()], capture_output=True, text=True,
                         check=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
    assert "libtensorflow_framework.so.2" in needed, needed
    assert not [n for n in needed if n.startswith(("libcudart", "libcublas", "libcuda."))], needed


@needs_cuda_build
@pytest.mark.parametrize("spec", OPS, ids=[op.key for op in OPS])
def test_cpu_kernel_of_the_cuda_build(spec):
    case = Case(op=spec.key, dtype="float32", data_format="NHWC", padding="SAME", batch=2,
                in_rows=7, in_cols=6, in_depth=4, filter_rows=3, filter_cols=2, out_channels=2,
                strides=(2, 1), seed=7)
    arrays = make_arrays(case)
    with tf.device("/CPU:0"):
        ours = run_ours(case, arrays)
    err = rel_error(ours, run_reference(case, arrays))
    assert within(err, "float32"), f"{case}: relative error {err}"
    assert np.all(np.isfinite(ours))
