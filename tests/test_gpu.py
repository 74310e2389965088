"""The GPU kernels through TensorFlow, where TF sees a GPU (skipped elsewhere): the
configuration matrix against the NumPy float64 reference and against TF's own GPU
kernels (TF32 off), placement on the GPU, bitwise determinism, empty tensors, NCHW.

The TF-free check of the same kernels (`make gpu-check`, tests/core/gpu_check.py)
covers many more configurations with NaN-filled outputs; this file checks the
binding: HostMemory sizes, TF's stream, TF's allocator for scratch.
"""
import itertools

import numpy as np
import pytest
import tensorflow as tf

from cases import (DTYPES, EMPTY, FORMATS, PADDINGS, Case, empty_case, make_arrays, our_function,
                   relative_error, run_ours, run_reference, run_tf, sample_case, tf_is_trusted, within)
from tf_conv_backprop import _loader
from tf_conv_backprop import _ops
from tf_conv_backprop._ops import BY_KEY, OPS

GPUS = tf.config.list_physical_devices("GPU")
pytestmark = [
    pytest.mark.skipif(not GPUS, reason="TensorFlow sees no GPU"),
    pytest.mark.skipif(bool(GPUS) and not _loader.build_info().get("cuda_kernels"),
                       reason="the library was built without CUDA kernels"),
]
if GPUS:
    # TF's float32 GPU convolutions would otherwise use TF32 (10-bit mantissa).
    tf.config.experimental.enable_tensor_float_32_execution(False)

GPU = "/GPU:0"
CASES_PER_CELL = 2
CELLS = list(itertools.product([op.key for op in OPS], DTYPES, FORMATS, PADDINGS, (False, True)))
PARAMS = [(5000 + cell_index * 100 + i, *cell) for cell_index, cell in enumerate(CELLS)
          for i in range(CASES_PER_CELL)]
TF_REJECTS = (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError, tf.errors.AbortedError,
              tf.errors.NotFoundError)


@pytest.mark.parametrize("seed,op,dtype,data_format,padding,dilated", PARAMS)
def test_gpu_parity(seed, op, dtype, data_format, padding, dilated):
    case = sample_case(op, dtype, data_format, padding, dilated, seed)
    arrays = make_arrays(case)
    with tf.device(GPU):
        ours = run_ours(case, arrays)
    err = relative_error(ours, run_reference(case, arrays))
    assert within(err, case), f"{case}: relative error vs reference {err}"
    if not tf_is_trusted(case):
        return
    try:
        with tf.device(GPU):
            theirs = run_tf(case, arrays)
    except TF_REJECTS:
        return  # TF's GPU kernel lacks this configuration; the reference judged it
    err_tf = relative_error(ours, theirs)
    assert within(err_tf, case, factor=2), f"{case}: relative difference vs TF's GPU kernel {err_tf}"


def _big_case(op, dtype="float32", data_format="NHWC"):
    """Large enough for several tiles and a split filter-gradient reduction."""
    depthwise = BY_KEY[op].depthwise
    return Case(op=op, dtype=dtype, data_format=data_format, padding="SAME", batch=4,
                in_rows=33, in_cols=31, in_depth=96 if depthwise else 72, filter_rows=3,
                filter_cols=3, out_channels=2 if depthwise else 80, strides=(1, 1), seed=11)


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("op", [op.key for op in OPS])
def test_gpu_placement_and_determinism(op, data_format):
    case = _big_case(op, data_format=data_format)
    arrays = make_arrays(case)
    spec = case.spec
    sizes = tf.constant(case.input_shape if spec.computes == "input" else case.filter_shape, tf.int32)
    results = []
    with tf.device(GPU):
        data = tf.constant(arrays["filter" if spec.computes == "input" else "input"], tf.float32)
        dy = tf.constant(arrays["out_backprop"], tf.float32)
        args = (sizes, data, dy) if spec.computes == "input" else (data, sizes, dy)
        for _ in range(2):
            out = our_function(op)(*args, strides=case.strides4, padding=case.tf_padding,
                                   data_format=case.data_format, dilations=case.dilations4)
            assert "GPU" in out.device, f"{case}: ran on {out.device}"
            results.append(out.numpy())
    np.testing.assert_array_equal(results[0], results[1], err_msg=f"{case}: not deterministic")
    err = relative_error(results[0], run_reference(case, arrays))
    assert within(err, case), f"{case}: relative error {err}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [op.key for op in OPS])
def test_gpu_large_all_dtypes(op, dtype):
    case = _big_case(op, dtype=dtype, data_format="NCHW")
    arrays = make_arrays(case)
    with tf.device(GPU):
        ours = run_ours(case, arrays)
    err = relative_error(ours, run_reference(case, arrays))
    assert within(err, case), f"{case}: relative error {err}"


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("op", [op.key for op in OPS])
@pytest.mark.parametrize("what,overrides", EMPTY, ids=[e[0] for e in EMPTY])
def test_gpu_empty_tensors(what, overrides, op, data_format):
    case = empty_case(op, data_format, overrides)
    arrays = make_arrays(case)
    with tf.device(GPU):
        ours = run_ours(case, arrays)
    expected = case.input_shape if case.spec.computes == "input" else case.filter_shape
    assert list(ours.shape) == expected, f"{case}"
    assert not np.any(ours), f"{case}: expected zeros"


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("op", ["conv2d_input", "conv2d_filter"])
def test_gpu_float32_follows_tf32_policy(op, data_format):
    """float32 conv2d gradients run in TF32 while TF allows it (its GPU default), read at
    each call: within TF32's tolerance of the float64 reference, and not the exact result
    (so TF32 really ran); exact float32 once the user turns it off again, both bitwise
    reproducible."""
    case = _big_case(op, data_format=data_format)
    arrays = make_arrays(case)
    reference = run_reference(case, arrays)
    results = {}
    try:
        for allowed in (True, False, True):
            tf.config.experimental.enable_tensor_float_32_execution(allowed)
            with tf.device(GPU):
                out = run_ours(case, arrays)
            if allowed in results:
                np.testing.assert_array_equal(out, results[allowed], err_msg=f"{case}: TF32 not reproducible")
            results[allowed] = out
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(False)
    err_tf32 = relative_error(results[True], reference)
    err_exact = relative_error(results[False], reference)
    # TF32 keeps float16's 10-bit mantissa and sums in float.
    assert _ops.within(err_tf32, "float16", case.reduction_length), f"{case}: TF32 error {err_tf32}"
    assert within(err_exact, case), f"{case}: exact float32 error {err_exact}"
    assert err_tf32 > 10 * err_exact, f"{case}: TF32 allowed but the result is exact ({err_tf32} vs {err_exact})"
