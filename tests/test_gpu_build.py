"""The library's CUDA build on a machine that may have no GPU: the GPU-enabled library
loads into TensorFlow (also a CPU-only one), registers a CPU and a GPU kernel for every
op and dtype, with the sizes input in host memory, links no CUDA runtime of its own, and
its CPU kernels still compute the right thing. A CPU-only build registers no GPU kernel,
as its build info says, and links no CUDA library either.

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

from cases import Case, make_arrays, relative_error, run_ours, run_reference, within
from tf_conv_backprop import _loader
from tf_conv_backprop._ops import OPS

INFO = _loader.build_info()
EXPECT_CUDA = os.environ.get("TF_CONV_BACKPROP_EXPECT_CUDA") == "1"
needs_cuda_build = pytest.mark.skipif(
    not INFO.get("cuda_kernels"),
    reason="CPU-only build of the library (`make build CUDA=1` builds the CUDA one)")


@pytest.mark.skipif(not EXPECT_CUDA, reason="TF_CONV_BACKPROP_EXPECT_CUDA is not 1")
def test_cuda_build_when_expected():
    assert INFO.get("cuda_kernels"), (
        f"CUDA=1 but {_loader.library_path()} was built without CUDA kernels: {INFO}")


def _registered_kernels(spec):
    """{(device type, dtype name): host-memory arguments} of the op's kernels."""
    _loader.load_library()
    found = {}
    for k in tf_kernels.get_registered_kernels_for_op(spec.op_name).kernel:
        for c in k.constraint:
            if c.name == "T":
                for t in c.allowed_values.list.type:
                    found[(k.device_type, tf.dtypes.as_dtype(t).name)] = list(k.host_memory_arg)
    return found


@pytest.mark.parametrize("spec", OPS, ids=[op.key for op in OPS])
def test_registered_kernels_match_the_build_info(spec):
    """Every build has a CPU kernel per dtype. The GPU kernels, with the sizes input in
    host memory (the kernel reads it to size its output), exist exactly when the build
    info says `cuda_kernels`: what `info` reports must be what TF will place."""
    found = _registered_kernels(spec)
    for dtype in spec.dtypes:
        assert ("CPU", dtype) in found, f"{spec.op_name}: no CPU kernel for {dtype}: {found}"
    gpu = {dtype: args for (device, dtype), args in found.items() if device == "GPU"}
    if INFO.get("cuda_kernels"):
        assert sorted(gpu) == sorted(spec.dtypes), f"{spec.op_name}: GPU kernels for {sorted(gpu)}"
        for dtype, host_memory in gpu.items():
            assert host_memory == [spec.sizes_arg], (
                f"{spec.op_name} ({dtype}): the GPU kernel must keep `{spec.sizes_arg}` in "
                f"host memory, has {host_memory}")
    else:
        assert not gpu, (f"{spec.op_name}: the build info says cuda_kernels="
                         f"{INFO.get('cuda_kernels')!r}, yet GPU kernels are registered for "
                         f"{sorted(gpu)}")


@needs_cuda_build
def test_build_info_records_the_cuda_version():
    version = INFO.get("cuda_version")
    assert version and version.count(".") == 1, INFO
    tf_cuda = tf.sysconfig.get_build_info().get("cuda_version")
    if tf_cuda:  # the kernels run on TF's CUDA runtime: same major version
        assert version.split(".")[0] == tf_cuda.split(".")[0], (version, tf_cuda)


def test_no_cuda_runtime_linked():
    """Neither build links a CUDA library: the CUDA build's runtime calls go to
    libtensorflow_framework.so.2 (TF's stub), so the library loads wherever TF does, with
    or without CUDA installed."""
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
    err = relative_error(ours, run_reference(case, arrays))
    assert within(err, case), f"{case}: relative error {err}"
    assert np.all(np.isfinite(ours))
