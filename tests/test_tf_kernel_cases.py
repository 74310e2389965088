"""TensorFlow's own kernel-test cases for the four gradients (tf_kernel_cases.py), run
against our ops: through our TF-named wrappers, through conv2d_transpose /
conv1d_transpose argument handling as TF's functions do it, and through TF's gradient
machinery (tf.gradients over tcb.conv2d / tcb.depthwise_conv2d, whose registered
gradients are ours: the graph must hold our ops).

Every result is checked against the float64 NumPy reference (reference.py) with the op
table's tolerance, and against TF's hard-coded values where the TF test has them (exact
for int32).

Random data is seeded per case (the seed is in every failure message).
"""
import builtins
import dataclasses
import json
import os
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest
import tensorflow as tf

import reference
import tf_conv_backprop as tcb
import tf_kernel_cases as K
from tf_conv_backprop._ops import BY_KEY, relative_error, tolerance, within

_HERE = os.path.dirname(os.path.abspath(__file__))
_PYTHON_DIR = os.path.join(os.path.dirname(_HERE), "python")
CHILD_TIMEOUT_S = 300

# Ids: TF's file (less "_test.py") and test name, with the call's index where the TF test
# makes several calls: "conv_ops.testConv2D2x2Depth1Padding1x1BackpropInput[2]".
_CALLS = {}
for _c in K.CASES + K.ERROR_CASES:
    _CALLS[_c.source] = _CALLS.get(_c.source, 0) + 1


def case_id(case):
    path, _, name = case.source.split("::")
    name = f"{path.replace('_test.py', '').replace('.py', '')}.{name}"
    return f"{name}[{case.sub}]" if _CALLS[case.source] > 1 else name


def _seed(case):
    return zlib.crc32(case.source.encode() + bytes([case.sub]))


def _params(kinds):
    return [pytest.param(c, dtype, fmt, id=f"{case_id(c)}-{dtype}-{fmt}")
            for c in K.CASES if c.kind in kinds
            for dtype in c.dtypes for fmt in c.data_formats]


# --------------------------------------------------------------------------------------
# Geometry, data and attributes of a case (all arrays NHWC, float64)
# --------------------------------------------------------------------------------------

def shapes(case):
    """(input, filter, out_backprop) shapes, NHWC; 1-D cases as a single row."""
    x, w = case.input_shape, case.filter_shape
    if case.one_d:
        x, w = (x[0], 1, x[1], x[2]), (1,) + tuple(w)
    n, rows, cols, depth = x
    kr, kc, _, last = w
    spec = BY_KEY[case.op]
    if isinstance(case.padding, str):
        mode, pads = case.padding, ((0, 0), (0, 0))
    else:
        mode, pads = "EXPLICIT", case.padding
    out = [reference.output_size(size, k, s, d, mode, *p)[0]
           for size, k, s, d, p in zip((rows, cols), (kr, kc), case.strides, case.dilations,
                                       pads)]
    return tuple(x), tuple(w), (n, out[0], out[1], depth * last if spec.depthwise else last)


def ref_attrs(case):
    """The attributes after (first, second, out_backprop) for reference.py, NHWC."""
    (sr, sc), (dr, dc) = case.strides, case.dilations
    if isinstance(case.padding, str):
        padding, explicit = case.padding, ()
    else:
        (t, b), (l, r) = case.padding
        padding, explicit = "EXPLICIT", (0, 0, t, b, l, r, 0, 0)
    return (1, sr, sc, 1), padding, explicit, "NHWC", (1, dr, dc, 1)


def _order(fmt, values):
    """[N, H, W, C] values in the data format's order."""
    n, h, w, c = values
    return [n, h, w, c] if fmt == "NHWC" else [n, c, h, w]


def op_attrs(case, fmt):
    """strides, padding (a list of pairs for explicit padding), data_format, dilations for
    our TF-named functions."""
    (sr, sc), (dr, dc) = case.strides, case.dilations
    padding = case.padding
    if not isinstance(padding, str):
        padding = _order(fmt, [[0, 0], list(padding[0]), list(padding[1]), [0, 0]])
    return dict(strides=_order(fmt, (1, sr, sc, 1)), padding=padding, data_format=fmt,
                dilations=_order(fmt, (1, dr, dc, 1)))


def to_fmt(a, fmt):
    return a if fmt == "NHWC" else np.transpose(a, (0, 3, 1, 2))


def from_fmt(a, fmt):
    a = np.asarray(a)
    return a if fmt == "NHWC" else np.transpose(a, (0, 2, 3, 1))


def _count(shape):
    return np.arange(1, int(np.prod(shape)) + 1, dtype=np.float64).reshape(shape)


def _ramp(shape):
    size = int(np.prod(shape))
    return (np.arange(size, dtype=np.float64) / size).reshape(shape)


def make_data(case):
    """x (input), w (filter), dy (out_backprop of the op under test, or the upstream
    gradient of a forward convolution) and g (upstream gradient of the op under test),
    NHWC float64, filled as TF's test fills them; None where unused."""
    x_shape, w_shape, dy_shape = shapes(case)
    rng = np.random.default_rng(_seed(case))
    computes = BY_KEY[case.op].computes
    x = w = dy = g = None
    if case.data == "count":
        if case.kind == "dilated_grad":           # conv2d(count, count), upstream ones
            x, w, dy = _count(x_shape), _count(w_shape), np.ones(dy_shape)
        elif computes == "input":
            w, dy = _count(w_shape), _count(dy_shape)
        else:
            x, dy = _count(x_shape), _count(dy_shape)
    elif case.data == "ramp":                      # gradient checkers: upstream is ours
        x, w, dy = _ramp(x_shape), _ramp(w_shape), rng.uniform(-1, 1, dy_shape)
    elif case.data == "ones":
        w, dy = np.ones(w_shape), np.ones(dy_shape)
    elif case.data == "seed1_unit":                # x, then the filter; TF's 1-D shapes
        legacy = np.random.RandomState(1)
        dy = legacy.random_sample(case.out_shape).reshape(dy_shape)
        w = legacy.random_sample(case.filter_shape).reshape(w_shape)
        g = rng.uniform(-1, 1, x_shape)
    elif case.data == "seed1_pm1":
        legacy = np.random.RandomState(1)
        x = 2 * legacy.random_sample(x_shape) - 1
        dy = 2 * legacy.random_sample(dy_shape) - 1
        g = rng.uniform(-1, 1, w_shape)
    elif case.data == "random":
        if computes == "input":
            w, dy = rng.random(w_shape), rng.random(dy_shape)
        else:
            x, dy = rng.random(x_shape), rng.random(dy_shape)
    else:
        raise ValueError(f"unknown data {case.data!r}")
    return x, w, dy, g


def _tensor(a, dtype):
    return tf.cast(tf.constant(a, tf.float64), dtype)


def rounded(a, dtype):
    """`a` as the op sees it in `dtype`, back in float64 (for the reference)."""
    return None if a is None else _tensor(a, dtype).numpy().astype(np.float64)


def _sequence(value, n, channel_index):
    """tf.nn's _get_sequence: an int, 1, n or n + 2 values as n + 2 values."""
    if value is None:
        return [1] * (n + 2)
    value = [value] if isinstance(value, int) else list(value)
    if len(value) == n + 2:
        return value
    if len(value) == 1:
        value = value * n
    if len(value) != n:
        raise ValueError(f"expected 1, {n} or {n + 2} values, got {value}")
    return [1, 1] + value if channel_index == 1 else [1] + value + [1]


def conv2d_transpose(input, filters, output_shape, strides, padding="SAME",  # noqa: A002
                     data_format="NHWC", dilations=None):
    """tf.nn.conv2d_transpose's argument handling (TF 2.21), then the op it calls,
    Conv2DBackpropInput: ours."""
    channel_index = 1 if data_format.startswith("NC") else 3
    return tcb.compat.v1.nn.conv2d_backprop_input(
        output_shape, filters, input, strides=_sequence(strides, 2, channel_index),
        padding=padding, data_format=data_format,
        dilations=_sequence(dilations, 2, channel_index))


def conv1d_transpose(input, filters, output_shape, strides, padding="SAME",  # noqa: A002
                     data_format="NWC", dilations=None):
    """tf.nn.conv1d_transpose's argument handling (TF 2.21): a single-row
    conv2d_transpose."""
    axis, channel_index = (1, 2) if data_format == "NWC" else (2, 1)
    output_shape = list(output_shape)
    y = tcb.compat.v1.nn.conv2d_backprop_input(
        output_shape[:axis] + [1] + output_shape[axis:], tf.expand_dims(filters, 0),
        tf.expand_dims(input, axis), strides=[1] + _sequence(strides, 1, channel_index),
        padding=padding, data_format="NHWC" if data_format == "NWC" else "NCHW",
        dilations=[1] + _sequence(dilations, 1, channel_index))
    return tf.squeeze(y, axis)


# --------------------------------------------------------------------------------------
# Judging a result
# --------------------------------------------------------------------------------------

def _forward_cancellation(x, w, attrs, depthwise):
    exact = np.linalg.norm(reference.forward_conv2d(x, w, *attrs, depthwise=depthwise))
    if exact == 0:
        return 1.0
    squares = reference.forward_conv2d(np.square(x), np.square(w), *attrs, depthwise=depthwise)
    return max(1.0, float(np.sqrt(np.sum(squares)) / exact))  # as in Judge


def assert_close(got, want, dtype, reduction_length, cancellation, what, factor=1):
    got = np.asarray(got)
    if dtype == "int32":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    err = relative_error(got, want)
    budget = factor * tolerance(dtype, reduction_length, cancellation)
    assert within(err, dtype, reduction_length, factor, cancellation), (
        f"{what}: relative error {err:.3g} > {budget:.3g} ({factor} x the {dtype} tolerance "
        f"for sums of {reduction_length} terms, cancellation {cancellation:.3g})")


class Judge:
    """The reference result of the op under test for a case, and its tolerance."""

    def __init__(self, case, dtype, first, second, dy):
        self.case, self.dtype = case, dtype
        self.spec = BY_KEY[case.op]
        self.attrs = ref_attrs(case)
        x_shape, w_shape, dy_shape = shapes(case)
        self.length = self.spec.reduction_length(w_shape, x_shape[0], *dy_shape[1:3])
        # TF's data are mostly all-positive ("count", "ramp", "random"): the op table's
        # tolerance budgets their one-sign sums.
        self.cancellation = reference.cancellation(self.spec, first, second, dy, *self.attrs)
        self.want = reference.backprop(self.spec)(first, second, dy, *self.attrs)

    def check(self, got, what="vs the float64 reference", want=None, factor=1):
        assert_close(got, self.want if want is None else want, self.dtype, self.length,
                     self.cancellation, f"{case_id(self.case)} {self.dtype}: {what} "
                     f"(seed {_seed(self.case)})", factor)


def run_op(case, dtype, fmt, x=None, w=None, dy=None, explicit=None):
    """Our op for the case, NHWC arrays in, NHWC result out."""
    spec = BY_KEY[case.op]
    fn = getattr(tcb.compat.v1.nn, spec.names[0])
    x_shape, w_shape, _ = shapes(case)
    attrs = op_attrs(case, fmt) if explicit is None else explicit
    dy_t = _tensor(to_fmt(dy, fmt), dtype)
    if spec.computes == "input":
        sizes = list(case.input_sizes or _order(fmt, x_shape))
        return from_fmt(fn(sizes, _tensor(w, dtype), dy_t, **attrs), fmt)
    return np.asarray(fn(_tensor(to_fmt(x, fmt), dtype), list(w_shape), dy_t, **attrs))


def _graph_types(graph):
    return {op.type for op in graph.get_operations()}


def assert_ours_in(types, *specs):
    for spec in specs:
        assert spec.op_name in types, f"graph lacks {spec.op_name}: {sorted(types)}"
        assert spec.tf_op_name not in types, f"graph holds TF's {spec.tf_op_name}"


# --------------------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("case,dtype,fmt", _params({"values", "compare"}))
def test_values(case, dtype, fmt):
    x, w, dy, _ = make_data(case)
    x, w, dy = rounded(x, dtype), rounded(w, dtype), rounded(dy, dtype)
    first, second = (shapes(case)[0], w) if case.op.endswith("input") else (x, shapes(case)[1])
    judge = Judge(case, dtype, first, second, dy)
    got = run_op(case, dtype, fmt, x, w, dy)
    assert got.shape == judge.want.shape
    judge.check(got)
    if case.expected is not None:
        judge.check(got.ravel(), "vs TF's expected values",
                    want=np.asarray(case.expected, np.float64))


@pytest.mark.parametrize("case,dtype,fmt", _params({"explicit"}))
def test_explicit_padding(case, dtype, fmt):
    """TF's expectation: the op with VALID padding on the zero-padded input (cropped
    back for the input gradient)."""
    x, w, dy, _ = make_data(case)
    x, w, dy = rounded(x, dtype), rounded(w, dtype), rounded(dy, dtype)
    (t, b), (l, r) = case.padding
    x_shape, w_shape, _ = shapes(case)
    first, second = (x_shape, w) if case.op.endswith("input") else (x, w_shape)
    judge = Judge(case, dtype, first, second, dy)
    got = run_op(case, dtype, fmt, x, w, dy)
    judge.check(got)
    n, rows, cols, depth = x_shape
    valid = dict(op_attrs(case, "NHWC"), padding="VALID")
    if case.op.endswith("input"):
        padded = dataclasses.replace(
            case, input_shape=(n, rows + t + b, cols + l + r, depth), padding="VALID")
        want = run_op(padded, dtype, "NHWC", w=w, dy=dy, explicit=valid)
        want = want[:, t:t + rows, l:l + cols, :]
    else:
        padded_x = np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)))
        padded = dataclasses.replace(case, input_shape=padded_x.shape, padding="VALID")
        want = run_op(padded, dtype, "NHWC", x=padded_x, dy=dy, explicit=valid)
    judge.check(got, "vs our op with VALID padding on the padded input", want=want, factor=2)


def _forward(case, fmt):
    """tcb's forward convolution for the case (its gradients are our ops)."""
    attrs = op_attrs(case, fmt)
    if BY_KEY[case.op].depthwise:
        return lambda x, w: tcb.depthwise_conv2d(
            x, w, attrs["strides"], attrs["padding"], data_format=fmt,
            dilations=list(case.dilations))
    return lambda x, w: tcb.conv2d(x, w, attrs["strides"], attrs["padding"],
                                   data_format=fmt, dilations=attrs["dilations"])


@pytest.mark.parametrize("case,dtype,fmt", _params({"dilated_grad", "grad_check"}))
def test_conv_gradients(case, dtype, fmt):
    """tf.gradients of tcb.conv2d / tcb.depthwise_conv2d w.r.t. the input or the filter:
    our op in the graph, the reference's values; and, for the float32 NHWC gradient
    checkers, TF's finite-difference gradient checker within TF's bound."""
    spec = BY_KEY[case.op]
    x, w, dy, _ = make_data(case)
    x, w, dy = rounded(x, dtype), rounded(w, dtype), rounded(dy, dtype)
    forward = _forward(case, fmt)
    graph = tf.Graph()
    with graph.as_default():
        xt, wt = _tensor(to_fmt(x, fmt), dtype), _tensor(w, dtype)
        y = forward(xt, wt)
        target = xt if spec.computes == "input" else wt
        grad, = tf.gradients(y, [target], grad_ys=_tensor(to_fmt(dy, fmt), dtype))
        with tf.compat.v1.Session() as sess:
            got = sess.run(grad)
    assert_ours_in(_graph_types(graph), spec)
    x_shape, w_shape, _ = shapes(case)
    first, second = (x_shape, w) if spec.computes == "input" else (x, w_shape)
    judge = Judge(case, dtype, first, second, dy)
    judge.check(from_fmt(got, fmt) if spec.computes == "input" else got)

    if case.kind == "grad_check" and dtype == "float32" and fmt == "NHWC":
        if spec.computes == "input":
            args, fn = [_tensor(x, dtype)], lambda t: forward(t, _tensor(w, dtype))
        else:
            args, fn = [_tensor(w, dtype)], lambda t: forward(_tensor(x, dtype), t)
        theoretical, numerical = tf.test.compute_gradient(fn, args)
        err = float(np.max(np.abs(theoretical[0] - numerical[0]))) if theoretical[0].size else 0
        assert err < case.max_err, f"{case_id(case)}: gradient checker error {err:.3g}"


def _counts_expected(case):
    rows, cols = case.counts
    depth = case.out_shape[-1]
    per_position = depth * np.outer(rows, cols)
    x_shape, _, _ = shapes(case)
    return np.broadcast_to(per_position[None, :, :, None], x_shape).astype(np.float64)


@pytest.mark.parametrize("case,dtype,fmt", _params({"transpose"}))
def test_transpose(case, dtype, fmt):
    """conv2d_transpose / conv1d_transpose of ones: TF's per-position sums (exact for
    int32) and the reference."""
    _, w, dy, _ = make_data(case)
    x_shape, _, _ = shapes(case)
    if case.one_d:
        ncw = fmt == "NCHW"
        value = np.transpose(dy[:, 0], (0, 2, 1)) if ncw else dy[:, 0]
        out = list(case.input_shape)
        out = [out[0], out[2], out[1]] if ncw else out
        got = conv1d_transpose(_tensor(value, dtype), _tensor(w[0], dtype), out,
                               case.strides[1], case.padding, "NCW" if ncw else "NWC")
        got = np.asarray(got)
        got = (np.transpose(got, (0, 2, 1)) if ncw else got)[:, None]
    else:
        got = conv2d_transpose(_tensor(to_fmt(dy, fmt), dtype), _tensor(w, dtype),
                               _order(fmt, x_shape), list(case.strides), case.padding, fmt)
        got = from_fmt(got, fmt)
    judge = Judge(case, "float32" if dtype == "int32" else dtype, x_shape, w, dy)
    if dtype == "int32":
        np.testing.assert_array_equal(got, judge.want, err_msg="vs the reference")
    judge.check(got)
    assert_close(got, _counts_expected(case), dtype, judge.length, 1.0,
                 f"{case_id(case)} {dtype}: vs TF's per-position sums")


@pytest.mark.parametrize("case,dtype,fmt", _params({"transpose_grad"}))
def test_transpose_gradient(case, dtype, fmt):
    """The gradient of conv2d_transpose (our Conv2DBackpropInput) w.r.t. x and the
    filter: our Conv2DBackpropFilter in the graph, the reference's values, and TF's
    gradient checker within TF's bound."""
    _, w, dy, g = make_data(case)
    x_shape, w_shape, _ = shapes(case)
    attrs = ref_attrs(case)
    w_r, dy_r, g_r = rounded(w, dtype), rounded(dy, dtype), rounded(g, dtype)

    def transpose(value, filters):
        if case.one_d:
            return conv1d_transpose(value, filters, case.input_shape, case.strides[1],
                                    case.padding)
        return conv2d_transpose(value, filters, list(x_shape), list(case.strides),
                                case.padding)

    squeeze = (lambda a: a[:, 0]) if case.one_d else (lambda a: a)
    value, filters = squeeze(dy_r), (w_r[0] if case.one_d else w_r)
    graph = tf.Graph()
    with graph.as_default():
        vt, ft = _tensor(value, dtype), _tensor(filters, dtype)
        y = transpose(vt, ft)
        grads = tf.gradients(y, [vt, ft], grad_ys=_tensor(squeeze(g_r), dtype))
        with tf.compat.v1.Session() as sess:
            got_value, got_filter = sess.run(grads)
    assert_ours_in(_graph_types(graph), BY_KEY["conv2d_input"], BY_KEY["conv2d_filter"])
    # d/dfilter = Conv2DBackpropFilter(g, shape(filter), x); d/dx = Conv2D(g, filter).
    filter_judge = Judge(dataclasses.replace(case, op="conv2d_filter"), dtype, g_r, w_shape,
                         dy_r)
    filter_judge.check(got_filter.reshape(w_shape), "d/dfilter vs the reference")
    want_value = reference.forward_conv2d(g_r, w_r, *attrs)
    assert_close(got_value, squeeze(want_value), dtype, int(np.prod(w_shape[:3])),
                 _forward_cancellation(g_r, w_r, attrs, False),
                 f"{case_id(case)}: d/dx vs the reference", factor=2)

    args = [_tensor(value, dtype), _tensor(filters, dtype)]
    theoretical, numerical = tf.test.compute_gradient(transpose, args)
    err = max(float(np.max(np.abs(t - n))) for t, n in zip(theoretical, numerical))
    assert err < case.max_err, f"{case_id(case)}: gradient checker error {err:.3g}"


@pytest.mark.parametrize("case,dtype,fmt", _params({"filter_grad_grad"}) + [
    pytest.param(c, "float64", "NHWC", id=f"{case_id(c)}-float64-NHWC")
    for c in K.FILTER_GRAD_CASES])
def test_filter_gradient_gradient(case, dtype, fmt):
    """The gradient of conv2d_backprop_filter w.r.t. input and out_backprop: our
    Conv2DBackpropInput in the graph and the reference's values. TF's finite-difference
    checker on 2400 inputs is too slow here; in float64 a central difference along a
    random direction checks the same consistency (the op is linear in each input)."""
    x, _, dy, g = make_data(case)
    x_shape, w_shape, _ = shapes(case)
    attrs = ref_attrs(case)
    x_r, dy_r, g_r = rounded(x, dtype), rounded(dy, dtype), rounded(g, dtype)
    kwargs = op_attrs(case, fmt)

    def op(xt, dyt):
        return tcb.compat.v1.nn.conv2d_backprop_filter(xt, list(w_shape), dyt, **kwargs)

    graph = tf.Graph()
    with graph.as_default():
        xt, dyt = _tensor(x_r, dtype), _tensor(dy_r, dtype)
        grads = tf.gradients(op(xt, dyt), [xt, dyt], grad_ys=_tensor(g_r, dtype))
        with tf.compat.v1.Session() as sess:
            got_x, got_dy = sess.run(grads)
    assert_ours_in(_graph_types(graph), BY_KEY["conv2d_filter"], BY_KEY["conv2d_input"])
    # d/dx = Conv2DBackpropInput(shape(x), g, dy); d/ddy = Conv2D(x, g).
    input_judge = Judge(dataclasses.replace(case, op="conv2d_input"), dtype, x_shape, g_r, dy_r)
    input_judge.check(got_x, "d/dinput vs the reference")
    assert_close(got_dy, reference.forward_conv2d(x_r, g_r, *attrs), dtype,
                 int(np.prod(w_shape[:3])), _forward_cancellation(x_r, g_r, attrs, False),
                 f"{case_id(case)}: d/dout_backprop vs the reference", factor=2)

    if dtype == "float64":
        rng = np.random.default_rng(_seed(case) + 1)
        for name, got, arg in (("input", got_x, 0), ("out_backprop", got_dy, 1)):
            v = rng.uniform(-1, 1, got.shape)
            args = [x_r, dy_r]
            plus, minus = list(args), list(args)
            plus[arg], minus[arg] = args[arg] + v, args[arg] - v
            numeric = np.sum(g_r * (op(*plus).numpy() - op(*minus).numpy())) / 2
            theoretical = np.sum(got * v)
            assert abs(numeric - theoretical) <= 1e-9 * np.sum(np.abs(got * v)), (
                f"{case_id(case)}: d/d{name}: directional derivative {numeric} vs "
                f"{theoretical} (seed {_seed(case) + 1})")


@pytest.mark.parametrize("case", [c for c in K.CASES if c.kind == "shape"], ids=case_id)
def test_transpose_shape_inference(case):
    """A graph-time output_shape of stack([shape(x)[0], 10, 5, 5]): the static shape is
    inferred (TF issue 8972), and the values are the reference's."""
    _, w, dy, _ = make_data(case)
    x_shape, _, _ = shapes(case)
    graph = tf.Graph()
    with graph.as_default():
        value = tf.compat.v1.placeholder(tf.float32, case.out_shape)
        output_shape = tf.stack([tf.shape(value)[0]] + list(x_shape[1:]))
        y = conv2d_transpose(value, tf.constant(w, tf.float32), output_shape,
                             [1, 1, 1, 1], case.padding)
        assert y.shape.as_list() == list(x_shape)
        with tf.compat.v1.Session() as sess:
            got = sess.run(y, {value: dy})
    Judge(case, "float32", x_shape, w, dy).check(got)


# --------------------------------------------------------------------------------------
# Error cases
# --------------------------------------------------------------------------------------

def _value(v):
    if isinstance(v, tuple) and v and v[0] == "ones":
        return np.ones(v[1])
    if isinstance(v, tuple) and v and v[0] == "fill":
        return tf.constant(v[1], shape=v[2], dtype=v[3])
    return v


def call_error_case(case):
    args = {k: _value(v) for k, v in case.args.items()}
    if case.call == "conv2d_transpose":
        return conv2d_transpose(**args)
    return getattr(tcb.compat.v1.nn, BY_KEY[case.op].names[0])(**args)


def _run_mode(case, mode):
    if mode == "eager":
        return call_error_case(case)
    return tf.function(lambda: call_error_case(case))()


def _error_classes(names):
    return tuple(getattr(tf.errors, n, None) or getattr(builtins, n) for n in names)


ERROR_MODES = ("eager", "function")
_ERROR_PARAMS = [pytest.param(c, mode, id=f"{case_id(c)}-{mode}")
                 for c in K.ERROR_CASES for mode in ERROR_MODES]


@pytest.mark.parametrize("case,mode", [p for p in _ERROR_PARAMS if not p.values[0].isolated])
def test_errors(case, mode):
    with pytest.raises(_error_classes(case.errors), match=case.match):
        _run_mode(case, mode)


def child_main(index):
    """In a child process: run error case `index` in each mode, one RESULT line each."""
    case = K.ERROR_CASES[index]
    for mode in ERROR_MODES:
        try:
            _run_mode(case, mode)
            result = {"mode": mode, "raised": None, "message": ""}
        except Exception as e:  # pylint: disable=broad-except
            result = {"mode": mode, "raised": type(e).__name__, "message": str(e)}
        print("RESULT " + json.dumps(result), flush=True)


@pytest.fixture(scope="module")
def isolated_results():
    """Every isolated error case, each in its own child process, all at once."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([_PYTHON_DIR, _HERE, os.environ.get("PYTHONPATH", "")]))
    procs = {}
    for i, case in enumerate(K.ERROR_CASES):
        if case.isolated:
            code = f"import test_tf_kernel_cases as t; t.child_main({i})"
            procs[i] = subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = {}
    for i, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        by_mode = {}
        for line in out.splitlines():
            if line.startswith("RESULT "):
                r = json.loads(line[len("RESULT "):])
                by_mode[r["mode"]] = r
        results[i] = (proc.returncode, by_mode, err[-4000:])
    return results


@pytest.mark.parametrize("case,mode", [p for p in _ERROR_PARAMS if p.values[0].isolated])
def test_errors_isolated(case, mode, isolated_results):
    returncode, by_mode, stderr = isolated_results[K.ERROR_CASES.index(case)]
    assert mode in by_mode, (f"{case_id(case)}: the child process died in mode {mode} "
                             f"(exit status {returncode}):\n{stderr}")
    result = by_mode[mode]
    assert result["raised"] in case.errors, (
        f"{case_id(case)} {mode}: raised {result['raised']}, TF expects one of "
        f"{case.errors}: {result['message'][:2000]}")
    if case.match:
        assert re.search(case.match, result["message"]), (
            f"{case_id(case)} {mode}: the message does not match {case.match!r}: "
            f"{result['message'][:2000]}")


# --------------------------------------------------------------------------------------
# Bookkeeping
# --------------------------------------------------------------------------------------

MIN_CASES = 200


def test_stated_shapes_match_the_geometry():
    """Where TF states out_backprop's shape, it is the one the geometry gives (catches a
    mistyped case)."""
    for case in K.CASES:
        if case.out_shape is not None:
            stated = case.out_shape
            if case.one_d:
                stated = (stated[0], 1) + tuple(stated[1:])
            assert shapes(case)[2] == tuple(stated), case_id(case)


def test_case_count():
    """How many TF cases were ported, per TF file; every TF test of PORTED_FROM has a case
    and every case comes from one of them."""
    sources = [c.source for c in K.CASES + K.ERROR_CASES]
    missing = sorted(set(K.PORTED_FROM) - set(sources))
    unknown = sorted(set(sources) - set(K.PORTED_FROM))
    assert not missing, f"TF tests without a case: {missing}"
    assert not unknown, f"cases from TF tests not in PORTED_FROM: {unknown}"
    print(f"\nTF kernel-test cases ported: {len(sources)} calls from "
          f"{len(K.PORTED_FROM)} TF tests")
    for name in K.SOURCE_FILES:
        calls = sum(s.startswith(name + "::") for s in sources)
        tests = sum(s.startswith(name + "::") for s in K.PORTED_FROM)
        print(f"  {name}: {calls} cases from {tests} tests")
        assert calls, name
    assert len(sources) >= MIN_CASES
