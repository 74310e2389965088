"""Gradients of the four ops (registered when the package is imported) and the
training-ready convolutions `tcb.conv2d` / `tcb.depthwise_conv2d`.

- every op's registered gradient against numeric gradients (`tf.test.compute_gradient`,
  float64), in NHWC and NCHW, SAME / VALID / EXPLICIT, strides and dilations;
- second order (gradients of gradients) through `tf.GradientTape` against numeric
  gradients in the same configurations, and against TF's built-in second-order
  gradients where TF's CPU kernels support the configuration;
- the forward convolutions used by the gradients against the NumPy reference;
- `tcb.conv2d` / `tcb.depthwise_conv2d`: TF's signatures, TF's forward results, our
  gradients, in eager mode, tf.function and a v1 graph.

Inputs come from seeded NumPy generators; failure messages carry the seed."""
import inspect

import numpy as np
import pytest
import tensorflow as tf

import reference
import tf_conv_backprop as tcb
from tf_conv_backprop._convolution import (_get_sequence, _tf_conv2d, _tf_depthwise, conv2d_op,
                                           depthwise_op)
from tf_conv_backprop import _ops
from tf_conv_backprop._ops import BY_KEY, OPS
from tf_conv_backprop._wrappers import convert_padding

SEED = 5005

# id -> (data_format, padding, (top, bottom, left, right), (stride_h, stride_w),
#        (dilation_h, dilation_w))
CONFIGS = {
    "nhwc-same-s2": ("NHWC", "SAME", None, (2, 2), (1, 1)),
    "nchw-explicit-d2": ("NCHW", "EXPLICIT", (1, 0, 2, 1), (1, 1), (2, 2)),
    "nhwc-valid-s12-d21": ("NHWC", "VALID", None, (1, 2), (2, 1)),
    "nchw-same-s2-d2": ("NCHW", "SAME", None, (2, 2), (2, 2)),
}
KINDS = tuple(op.key for op in OPS)


def _computes_input(kind):
    return BY_KEY[kind].computes == "input"


def _order(data_format, n, h, w, c):
    return [n, h, w, c] if data_format == "NHWC" else [n, c, h, w]


class Geometry:
    """A small problem: input N=2, 5x6, C=2; filter 3x2; conv2d out depth 3, depthwise
    multiplier 2. `attrs` are the op attributes (4-element lists)."""

    def __init__(self, config, depthwise, seed=SEED, dtype=np.float64):
        spec = CONFIGS[config] if isinstance(config, str) else config
        fmt, padding, pads, strides, dilations = spec
        self.config, self.depthwise, self.seed = spec, depthwise, seed
        n, h, w, c, kh, kw = 2, 5, 6, 2, 3, 2
        m = 2 if depthwise else 3
        t, b, l, r = pads or (0, 0, 0, 0)
        oh = reference.output_size(h, kh, strides[0], dilations[0], padding, t, b)[0]
        ow = reference.output_size(w, kw, strides[1], dilations[1], padding, l, r)[0]
        self.input_shape = _order(fmt, n, h, w, c)
        self.filter_shape = [kh, kw, c, m]
        self.out_shape = _order(fmt, n, oh, ow, c * m if depthwise else m)
        explicit = sum(_order(fmt, [0, 0], [t, b], [l, r], [0, 0]), []) if pads else []
        self.attrs = dict(strides=_order(fmt, 1, *strides, 1), padding=padding,
                          explicit_paddings=explicit, data_format=fmt,
                          dilations=_order(fmt, 1, *dilations, 1))
        rng = np.random.default_rng(seed)
        self.x = tf.constant(rng.standard_normal(self.input_shape), dtype)
        self.w = tf.constant(rng.standard_normal(self.filter_shape), dtype)
        self.dy = tf.constant(rng.standard_normal(self.out_shape), dtype)

    def __str__(self):
        return (f"{self.config} depthwise={self.depthwise} in={self.input_shape} "
                f"filter={self.filter_shape} dy={self.out_shape} attrs={self.attrs} "
                f"seed={self.seed}")


def _raw(kind):
    """Our generated op function (op attributes, no argument conversion)."""
    return getattr(tcb.load_library(), BY_KEY[kind].generated)


def _op_call(kind, g):
    """(f, tensor inputs): f(a, b) runs our op on its two tensor inputs."""
    op = _raw(kind)
    if _computes_input(kind):
        sizes = tf.constant(g.input_shape, tf.int32)
        return (lambda w, dy: op(sizes, w, dy, **g.attrs)), [g.w, g.dy]
    sizes = tf.constant(g.filter_shape, tf.int32)
    return (lambda x, dy: op(x, sizes, dy, **g.attrs)), [g.x, g.dy]


def _assert_jacobians(theoretical, numerical, msg, tol=1e-7):
    for i, (t, n) in enumerate(zip(theoretical, numerical)):
        assert t.shape == n.shape, f"{msg}: input {i}: shape {t.shape} != {n.shape}"
        scale = max(1.0, float(np.abs(n).max()))
        err = float(np.abs(t - n).max()) / scale
        assert err < tol, f"{msg}: input {i}: max |analytic - numeric| / scale = {err}"


# --------------------------------------------------------------------------------------
# 1. First order: each op's registered gradient vs numeric gradients
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("kind", KINDS)
def test_registered_gradient_vs_numeric(kind, config):
    g = Geometry(config, BY_KEY[kind].depthwise)
    f, inputs = _op_call(kind, g)
    theoretical, numerical = tf.test.compute_gradient(tf.function(f), inputs)
    _assert_jacobians(theoretical, numerical, f"{kind}: {g}")


@pytest.mark.parametrize("kind", KINDS)
def test_sizes_input_gets_no_gradient(kind):
    g = Geometry("nhwc-same-s2", BY_KEY[kind].depthwise)
    op = _raw(kind)
    sizes = tf.constant(g.input_shape if _computes_input(kind) else g.filter_shape, tf.int32)
    tensor = g.w if _computes_input(kind) else g.x
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([sizes, tensor, g.dy])
        args = (sizes, tensor, g.dy) if _computes_input(kind) else (tensor, sizes, g.dy)
        loss = tf.reduce_sum(op(*args, **g.attrs) ** 2)
    assert tape.gradient(loss, sizes) is None
    d_tensor, d_dy = tape.gradient(loss, [tensor, g.dy])
    assert d_tensor.shape == tensor.shape and d_dy.shape == g.dy.shape, str(g)


# --------------------------------------------------------------------------------------
# 2. Second order through tf.GradientTape vs numeric gradients
# --------------------------------------------------------------------------------------

def _first_order(forward, x, w):
    """Gradients of 0.5 * sum(forward(x, w)^2) w.r.t. x and w, flattened and joined:
    these run both backprop ops, with out_backprop depending on x and w."""
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        y = forward(x, w)
        loss = 0.5 * tf.reduce_sum(y * y)
    gx, gw = tape.gradient(loss, [x, w])
    return tf.concat([tf.reshape(gx, [-1]), tf.reshape(gw, [-1])], 0)


def _forward(g):
    fn = depthwise_op if g.depthwise else conv2d_op
    return lambda x, w: fn(x, w, **g.attrs)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
def test_second_order_vs_numeric(depthwise, config):
    g = Geometry(config, depthwise)
    forward = _forward(g)
    # One graph per test: compute_gradient calls the function hundreds of times.
    first_order = tf.function(lambda x, w: _first_order(forward, x, w))
    theoretical, numerical = tf.test.compute_gradient(first_order, [g.x, g.w])
    _assert_jacobians(theoretical, numerical, f"second order: {g}", tol=1e-6)


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
def test_third_order_runs_our_ops(depthwise):
    """The forward convolution inside a gradient has our gradients too: third order
    works in NCHW with dilations (TF's own CPU gradients reject or ignore these)."""
    g = Geometry("nchw-same-s2-d2", depthwise)
    forward = _forward(g)
    with tf.GradientTape() as t3:
        t3.watch(g.w)
        with tf.GradientTape() as t2:
            t2.watch(g.w)
            with tf.GradientTape() as t1:
                t1.watch(g.w)
                y = forward(g.x, g.w)
                loss = tf.reduce_sum(y ** 2)
            d1 = t1.gradient(loss, g.w)
            s1 = tf.reduce_sum(d1 ** 2)
        d2 = t2.gradient(s1, g.w)
        s2 = tf.reduce_sum(d2 * g.w)
    d3 = t3.gradient(s2, g.w)
    # loss is quadratic in w: d1 = 2 A w (A symmetric), s1 = 4 w'A'Aw, d2 = 8 A'A w,
    # s2 = 8 w'A'Aw = 2 s1, d3 = 16 A'A w = 2 d2.
    np.testing.assert_allclose(d3.numpy(), 2 * d2.numpy(), rtol=1e-10, atol=1e-10,
                               err_msg=str(g))


# --------------------------------------------------------------------------------------
# 3. Against TF's built-in second-order gradients (configurations TF's CPU supports)
# --------------------------------------------------------------------------------------

TF_CONFIGS = {  # NHWC, equal strides, no dilation: TF's float64 CPU kernels run these
    "same-s2": ("SAME", None, 2),
    "valid-s1": ("VALID", None, 1),
    "explicit-s2": ("EXPLICIT", (1, 0, 2, 1), 2),
}


def _tf_geometry(config, depthwise):
    padding, pads, s = TF_CONFIGS[config]
    return Geometry(("NHWC", padding, pads, (s, s), (1, 1)), depthwise)


def _hvp(first_order_fn, inputs, seed):
    """Gradients, and gradients of <gradients, random directions>, w.r.t. inputs."""
    rng = np.random.default_rng(seed)
    with tf.GradientTape() as outer:
        outer.watch(inputs)
        with tf.GradientTape() as inner:
            inner.watch(inputs)
            loss = first_order_fn(*inputs)
        grads = inner.gradient(loss, inputs)
        dirs = [tf.constant(rng.standard_normal(t.shape), t.dtype) for t in grads]
        s = tf.add_n([tf.reduce_sum(a * b) for a, b in zip(grads, dirs)])
    second = outer.gradient(s, inputs)
    return [t.numpy() for t in grads + second]


def _tf_builtin(kind):
    return BY_KEY[kind].tf_reference


def _public_ours(kind):
    return getattr(tcb.compat.v1.nn, BY_KEY[kind].names[0])


def _python_padding(g):
    if g.attrs["padding"] != "EXPLICIT":
        return g.attrs["padding"]
    p = g.attrs["explicit_paddings"]
    return [p[i:i + 2] for i in range(0, 8, 2)]


@pytest.mark.parametrize("config", list(TF_CONFIGS))
@pytest.mark.parametrize("kind", KINDS)
def test_op_second_order_matches_tf(kind, config):
    """Through each op to second order: our op + our registered gradients vs TF's op +
    TF's registered gradients."""
    g = _tf_geometry(config, BY_KEY[kind].depthwise)
    kwargs = dict(strides=g.attrs["strides"], padding=_python_padding(g),
                  data_format="NHWC")
    rng = np.random.default_rng(g.seed + 1)

    def loss_fn(fn):
        if _computes_input(kind):
            sizes = tf.constant(g.input_shape, tf.int32)
            c = tf.constant(rng.standard_normal(g.input_shape))
            return lambda w, dy: tf.reduce_sum(fn(sizes, w, dy, **kwargs) ** 2 * c)
        sizes = tf.constant(g.filter_shape, tf.int32)
        c = tf.constant(rng.standard_normal(g.filter_shape))
        return lambda x, dy: tf.reduce_sum(fn(x, sizes, dy, **kwargs) ** 2 * c)

    inputs = [g.w, g.dy] if _computes_input(kind) else [g.x, g.dy]
    rng = np.random.default_rng(g.seed + 1)
    ours = _hvp(loss_fn(_public_ours(kind)), inputs, g.seed)
    rng = np.random.default_rng(g.seed + 1)
    theirs = _hvp(loss_fn(_tf_builtin(kind)), inputs, g.seed)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10,
                                   err_msg=f"{kind} result {i}: {g}")


@pytest.mark.parametrize("config", list(TF_CONFIGS))
@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
def test_convolution_second_order_matches_tf(depthwise, config):
    """tcb.conv2d / tcb.depthwise_conv2d to second order vs tf.nn's."""
    g = _tf_geometry(config, depthwise)
    kwargs = dict(strides=g.attrs["strides"], padding=_python_padding(g))
    ours = tcb.depthwise_conv2d if depthwise else tcb.conv2d
    theirs = tf.nn.depthwise_conv2d if depthwise else tf.nn.conv2d

    def loss_fn(fn):
        return lambda x, w: 0.5 * tf.reduce_sum(fn(x, w, **kwargs) ** 2)

    got = _hvp(loss_fn(ours), [g.x, g.w], g.seed)
    want = _hvp(loss_fn(theirs), [g.x, g.w], g.seed)
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10, err_msg=f"result {i}: {g}")


def test_dilated_depthwise_second_order_matches_tf():
    """tf.nn.depthwise_conv2d dilates with space_to_batch around undilated kernels, so
    its autodiff is right to every order at stride 1: ours agrees."""
    g = Geometry(("NHWC", "SAME", None, (1, 1), (2, 2)), True)

    def loss_fn(fn):
        return lambda x, w: 0.5 * tf.reduce_sum(
            fn(x, w, [1, 1, 1, 1], "SAME", dilations=[2, 2]) ** 2)

    got = _hvp(loss_fn(tcb.depthwise_conv2d), [g.x, g.w], g.seed)
    want = _hvp(loss_fn(tf.nn.depthwise_conv2d), [g.x, g.w], g.seed)
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10, err_msg=f"result {i}: {g}")


def test_second_order_in_tf_function_and_graph():
    g = Geometry("nchw-same-s2-d2", False)
    forward = _forward(g)
    eager = _first_order(forward, g.x, g.w)

    @tf.function
    def hessian_vector(x, w, v):
        with tf.GradientTape() as tape:
            tape.watch(x)
            first = _first_order(forward, x, w)
            s = tf.reduce_sum(first * v)
        return first, tape.gradient(s, x)

    v = tf.ones_like(eager)
    first, second = hessian_vector(g.x, g.w, v)
    np.testing.assert_allclose(first.numpy(), eager.numpy(), rtol=1e-12, atol=1e-12)
    assert second.shape == g.x.shape
    graph = tf.Graph()
    with graph.as_default():
        x, w = tf.constant(g.x.numpy()), tf.constant(g.w.numpy())
        y = forward(x, w)
        gx, = tf.gradients(0.5 * tf.reduce_sum(y * y), [x])
        ggw, = tf.gradients(tf.reduce_sum(gx), [w])
        types = {op.type for op in graph.get_operations()}
        with tf.compat.v1.Session() as sess:
            graph_first, graph_second = sess.run([gx, ggw])
    assert "ConvBackprop>Conv2DBackpropInput" in types
    assert "ConvBackprop>Conv2DBackpropFilter" in types
    np.testing.assert_allclose(graph_first.reshape(-1), eager.numpy()[:graph_first.size],
                               rtol=1e-12, atol=1e-12)
    assert graph_second.shape == tuple(g.filter_shape)


# --------------------------------------------------------------------------------------
# 4. The forward convolutions the gradients use, against the NumPy reference
# --------------------------------------------------------------------------------------

FORWARD_CONFIGS = [
    # data_format, padding, pads, strides, dilations
    ("NHWC", "SAME", None, (1, 1), (1, 1)),
    ("NCHW", "VALID", None, (2, 2), (1, 1)),
    ("NHWC", "SAME", None, (1, 2), (2, 1)),       # unequal strides + dilation
    ("NCHW", "EXPLICIT", (1, 2, 0, 1), (2, 1), (2, 3)),
    ("NHWC", "SAME", None, (2, 2), (2, 2)),       # strided + dilated
    ("NCHW", "SAME", None, (3, 1), (1, 2)),
]


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
@pytest.mark.parametrize("i", range(len(FORWARD_CONFIGS)))
def test_forward_matches_reference(i, depthwise):
    g = Geometry(FORWARD_CONFIGS[i], depthwise, seed=SEED + i)
    fn = _tf_depthwise if depthwise else _tf_conv2d
    got = fn(g.x, g.w, **g.attrs).numpy()
    want = reference.forward_conv2d(g.x.numpy(), g.w.numpy(), depthwise=depthwise, **g.attrs)
    assert got.shape == want.shape, str(g)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=str(g))


# --------------------------------------------------------------------------------------
# 5. tcb.conv2d / tcb.depthwise_conv2d: TF's API and forward, our gradients
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["conv2d", "depthwise_conv2d"])
def test_signature_and_summary(name):
    ours, theirs = getattr(tcb, name), getattr(tf.nn, name)
    assert inspect.signature(ours) == inspect.signature(theirs)
    summary = lambda f: f.__doc__.strip().splitlines()[0]  # noqa: E731
    assert summary(ours) == summary(theirs)


CONV2D_ARGS = [
    # (id, data_format, strides, padding, dilations)
    ("int-strides", "NHWC", 2, "SAME", None),
    ("pair-strides", "NHWC", [1, 2], "VALID", None),
    ("explicit", "NHWC", [1, 2, 1, 1], [[0, 0], [1, 2], [0, 1], [0, 0]], 1),
    ("dilated", "NHWC", 1, "SAME", [2, 1]),
    ("nchw", "NCHW", [1, 1, 2, 2], "SAME", None),
]


def _conv_arrays(data_format, seed, dtype, depthwise=False, batch=(2,)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(list(batch) + ([7, 6, 3] if data_format == "NHWC" else [3, 7, 6]))
    w = rng.standard_normal([3, 2, 3, 2 if depthwise else 4])
    return tf.constant(x, dtype), tf.constant(w, dtype)


@pytest.mark.parametrize("case", CONV2D_ARGS, ids=[c[0] for c in CONV2D_ARGS])
def test_conv2d_forward_and_gradients(case):
    _, fmt, strides, padding, dilations = case
    x, w = _conv_arrays(fmt, SEED, tf.float32)
    kwargs = dict(strides=strides, padding=padding, data_format=fmt, dilations=dilations)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, w])
        y = tcb.conv2d(x, w, **kwargs)
        loss = tf.reduce_sum(tf.sin(y))
    # forward: TF's kernel (NCHW: TF's NHWC kernel between transposes)
    if fmt == "NHWC":
        np.testing.assert_array_equal(y.numpy(), tf.nn.conv2d(x, w, **kwargs).numpy())
    else:
        s = tf.nn.conv2d(tf.transpose(x, [0, 2, 3, 1]), w, strides[:1] + strides[2:] + [1],
                         padding)
        np.testing.assert_array_equal(y.numpy(), tf.transpose(s, [0, 3, 1, 2]).numpy())
    gx, gw = tape.gradient(loss, [x, w])
    # gradients: ours, against the float64 reference
    x64, w64, dy = (a.numpy().astype(np.float64) for a in (x, w, tf.cos(y)))
    padding_s, explicit = convert_padding(padding)
    ci = 1 if fmt == "NCHW" else 3
    s4 = _get_sequence(strides, ci, "strides")
    d4 = _get_sequence(dilations, ci, "dilations")
    want_gx = reference.conv2d_backprop_input(x64.shape, w64, dy, s4, padding_s, explicit, fmt, d4)
    want_gw = reference.conv2d_backprop_filter(x64, w64.shape, dy, s4, padding_s, explicit, fmt,
                                               d4)
    batch, rows, cols = (dy.shape[i] for i in ((0, 1, 2) if fmt == "NHWC" else (0, 2, 3)))
    for got, want, key in ((gx, want_gx, "conv2d_input"), (gw, want_gw, "conv2d_filter")):
        err = _ops.relative_error(got.numpy(), want)
        length = BY_KEY[key].reduction_length(w64.shape, batch, rows, cols)
        assert _ops.within(err, "float32", length), f"{case}: {key} relative error {err}"


def test_conv2d_extra_batch_dims():
    x, w = _conv_arrays("NHWC", SEED, tf.float64, batch=(2, 3))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tcb.conv2d(x, w, 1, "SAME")
        loss = tf.reduce_sum(y ** 2)
    np.testing.assert_allclose(y.numpy(), tf.nn.conv2d(x, w, 1, "SAME").numpy(), rtol=1e-12)
    gx = tape.gradient(loss, x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        want = tape.gradient(tf.reduce_sum(tf.nn.conv2d(x, w, 1, "SAME") ** 2), x)
    np.testing.assert_allclose(gx.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)


DEPTHWISE_ARGS = [
    # (id, data_format, strides, padding, dilations)
    ("same", "NHWC", [1, 2, 2, 1], "SAME", None),
    ("explicit", "NHWC", [1, 1, 1, 1], [[0, 0], [1, 2], [0, 1], [0, 0]], None),
    ("dilated", "NHWC", [1, 1, 1, 1], "SAME", [2, 2]),
    ("nchw-dilated", "NCHW", [1, 1, 1, 1], "VALID", [1, 2]),
    ("unequal-strides", "NHWC", [1, 2, 1, 1], "SAME", None),
]


@pytest.mark.parametrize("case", DEPTHWISE_ARGS, ids=[c[0] for c in DEPTHWISE_ARGS])
def test_depthwise_forward_and_gradients(case):
    _, fmt, strides, padding, dilations = case
    x, w = _conv_arrays(fmt, SEED, tf.float64, depthwise=True)
    kwargs = dict(strides=strides, padding=padding, data_format=fmt, dilations=dilations)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, w])
        y = tcb.depthwise_conv2d(x, w, **kwargs)
        loss = tf.reduce_sum(tf.sin(y))
    padding_s, explicit = convert_padding(padding)
    rate = dilations or [1, 1]
    d4 = [1, 1] + rate if fmt == "NCHW" else [1] + rate + [1]
    want = reference.forward_conv2d(x.numpy(), w.numpy(), strides, padding_s, explicit, fmt, d4,
                                    depthwise=True)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12, atol=1e-12, err_msg=str(case))
    if fmt == "NHWC" and strides[1] == strides[2]:  # TF's CPU forward runs these
        np.testing.assert_allclose(y.numpy(), tf.nn.depthwise_conv2d(x, w, **kwargs).numpy(),
                                   rtol=1e-12, atol=1e-12)
    gx, gw = tape.gradient(loss, [x, w])
    dy = tf.cos(y).numpy()
    want_gx = reference.depthwise_backprop_input(x.shape, w.numpy(), dy, strides, padding_s,
                                                 explicit, fmt, d4)
    want_gw = reference.depthwise_backprop_filter(x.numpy(), w.shape, dy, strides, padding_s,
                                                  explicit, fmt, d4)
    np.testing.assert_allclose(gx.numpy(), want_gx, rtol=1e-11, atol=1e-11, err_msg=str(case))
    np.testing.assert_allclose(gw.numpy(), want_gw, rtol=1e-11, atol=1e-11, err_msg=str(case))


def test_depthwise_rejects_strides_with_dilation():
    x, w = _conv_arrays("NHWC", SEED, tf.float32, depthwise=True)
    with pytest.raises(ValueError, match="strides must be 1"):
        tcb.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME", dilations=[2, 2])


def test_gradients_use_our_ops_in_graph():
    """The backward graph of tcb.conv2d / depthwise_conv2d holds our ops, and no TF
    backprop op."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 7, 6, 3])
        w = tf.constant(np.ones([3, 2, 3, 2], np.float32))
        y = tcb.depthwise_conv2d(tcb.conv2d(x, tf.ones([1, 1, 3, 3]), 1, "SAME"), w,
                                 [1, 1, 1, 1], "SAME", dilations=[2, 2])
        tf.gradients(tf.reduce_sum(y), [x, w])
    types = {op.type for op in graph.get_operations()}
    assert {op.op_name for op in OPS} <= types, types
    assert not {t for t in types if "Backprop" in t and not t.startswith("ConvBackprop>")}


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16, tf.float32])
def test_low_precision_gradients(dtype):
    x, w = _conv_arrays("NCHW", SEED, dtype)
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        loss = tf.reduce_sum(tf.cast(tcb.conv2d(x, w, 1, "SAME", data_format="NCHW"),
                                     tf.float32) ** 2)
    gx, gw = tape.gradient(loss, [x, w])
    assert gx.dtype == dtype and gw.dtype == dtype
    x64, w64 = (tf.cast(a, tf.float64) for a in (x, w))
    with tf.GradientTape() as tape:
        tape.watch([x64, w64])
        loss = tf.reduce_sum(tcb.conv2d(x64, w64, 1, "SAME", data_format="NCHW") ** 2)
    want = tape.gradient(loss, [x64, w64])
    # Three roundings to `dtype` in a row (TF's forward result, the incoming gradient,
    # our result): three times one op's budget.
    oh, ow = x.shape[2], x.shape[3]  # SAME, stride 1
    for got, ref, key in zip((gx, gw), want, ("conv2d_input", "conv2d_filter")):
        err = _ops.relative_error(tf.cast(got, tf.float64), ref)
        length = BY_KEY[key].reduction_length(w.shape, x.shape[0], oh, ow)
        assert _ops.within(err, dtype.name, length, factor=3), f"{dtype.name}: relative error {err}"


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
def test_unknown_shapes_in_tf_function(depthwise):
    """Shapes unknown while tracing (dilated filter, SAME pads for unequal strides and the
    sizes inputs are then computed in the graph): same values as eager."""
    g = Geometry(("NCHW", "SAME", None, (1, 2), (2, 1)), depthwise)
    forward = _forward(g)
    spec = tf.TensorSpec([None] * 4, tf.float64)

    @tf.function(input_signature=[spec, spec])
    def traced(x, w):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            y = forward(x, w)
            loss = tf.reduce_sum(y ** 2)
        return [y] + tape.gradient(loss, [x, w])

    with tf.GradientTape() as tape:
        tape.watch([g.x, g.w])
        y = forward(g.x, g.w)
        loss = tf.reduce_sum(y ** 2)
    eager = [y] + tape.gradient(loss, [g.x, g.w])
    for got, want in zip(traced(g.x, g.w), eager):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12,
                                   err_msg=str(g))
