"""The op table (python/tf_conv_backprop/_ops.py) against TensorFlow and the loaded
library, and its tolerance rule: a correctly rounded result passes, a result a few
roundings off fails, NaN and a wrong shape never pass, and sums that cancel (measured by
reference.cancellation) get the larger budget their rounding needs."""
import inspect
import math

import numpy as np
import pytest
import tensorflow as tf

import reference
import tf_conv_backprop as tcb
from tf_conv_backprop import _ops

IDS = [spec.key for spec in _ops.OPS]


@pytest.mark.parametrize("spec", _ops.OPS, ids=IDS)
def test_row_matches_tf(spec):
    raw = inspect.signature(getattr(tf.raw_ops, spec.tf_op_name)).parameters
    assert spec.sizes_arg in raw
    assert ("use_cudnn_on_gpu" in raw) == spec.use_cudnn_on_gpu
    assert spec.tf_op_name.endswith("Backprop" + spec.computes.capitalize())
    assert spec.tf_op_name.startswith("Depthwise") == spec.depthwise
    assert spec.op_name == "ConvBackprop>" + spec.tf_op_name
    for name in spec.names:  # TF's aliases are one function
        assert getattr(tf.compat.v1.nn, name) is spec.tf_reference, name
        assert hasattr(tf.compat.v2.nn, name) == (name in spec.v2_names), name
    assert callable(getattr(tcb.load_library(), spec.generated))


def test_keys_names_and_short_ids_are_unique():
    for field in ("key", "short", "op_name", "generated"):
        values = [getattr(spec, field) for spec in _ops.OPS]
        assert len(set(values)) == len(values), field
    names = [name for spec in _ops.OPS for name in spec.names]
    assert len(set(names)) == len(names) == len(_ops.BY_NAME)


@pytest.mark.parametrize("dtype", _ops.DTYPES)
def test_unit_roundoff(dtype):
    """1 + 2u is the next number after 1; 1 + u, halfway, rounds (to even) back to 1."""
    u = _ops.UNIT_ROUNDOFF[dtype]
    assert tf.cast(tf.constant(1 + 2 * u, tf.float64), dtype).numpy() != 1
    assert tf.cast(tf.constant(1 + u, tf.float64), dtype).numpy() == 1
    assert _ops.UNIT_ROUNDOFF[_ops.ACCUMULATES_IN[dtype]] <= u


@pytest.mark.parametrize("dtype", _ops.DTYPES)
def test_a_correctly_rounded_result_passes_and_a_worse_one_fails(dtype):
    rng = np.random.default_rng(0)
    exact = rng.standard_normal(1000)
    rounded = tf.cast(tf.constant(exact), dtype)
    assert _ops.within(_ops.relative_error(rounded, exact), dtype, 1)
    off = exact * (1 + 8 * _ops.UNIT_ROUNDOFF[dtype] * rng.choice([-1, 1], exact.shape))
    assert not _ops.within(_ops.relative_error(off, exact), dtype, 1)


def test_tolerance_grows_with_the_reduction_length():
    for dtype in _ops.DTYPES:
        values = [_ops.tolerance(dtype, n) for n in (0, 1, 10, 1000, 10 ** 6)]
        assert values[0] == values[1] and values == sorted(values), (dtype, values)


def test_nan_inf_and_shape_mismatch_never_pass():
    for dtype in _ops.DTYPES:
        assert not _ops.within(float("nan"), dtype, 10, factor=1000)
        assert not _ops.within(float("inf"), dtype, 10, factor=1000)
    assert math.isnan(_ops.relative_error([1.0, float("nan")], [1.0, 1.0]))
    assert math.isnan(_ops.relative_error([1.0, float("inf")], [1.0, 1.0]))
    assert _ops.relative_error([1.0, 2.0], [1.0, 2.0, 3.0]) == float("inf")
    assert _ops.relative_error([0.0, 0.0], [0.0, 0.0]) == 0.0


def test_cancellation_is_one_for_random_data_and_large_where_sums_cancel():
    spec = _ops.BY_KEY["conv2d_filter"]
    attrs = ([1, 1, 1, 1], "SAME", [], "NHWC", [1, 1, 1, 1])
    rng = np.random.default_rng(1)
    x, dy = rng.standard_normal([2, 8, 8, 3]), rng.standard_normal([2, 8, 8, 4])
    assert 0.7 < reference.cancellation(spec, x, [3, 3, 3, 4], dy, *attrs) < 1.4
    # dw = 1 * 1 + 1 * (-1 + 1e-3): terms of size ~1 summing to 1e-3.
    x, dy = np.ones([1, 1, 2, 1]), np.array([1.0, -1.0 + 1e-3]).reshape([1, 1, 2, 1])
    kappa = reference.cancellation(spec, x, [1, 1, 1, 1], dy, *attrs)
    assert abs(kappa - math.sqrt(1 + (1 - 1e-3) ** 2) / 1e-3) < 1e-6 * kappa
    assert _ops.tolerance("float64", 2, kappa) > 100 * _ops.tolerance("float64", 2)
