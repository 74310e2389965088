"""The Python API: TF's names, signatures and docstrings; argument handling
(`filters` alias, padding forms, `name`); the four ops in every execution mode;
static shapes in graph mode; the thread-safe library loader (loading at import) and
its error messages; every dtype and NCHW.

Inputs are drawn from a seeded NumPy generator; every numeric failure message
carries the seed."""
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import tensorflow as tf

import tf_conv_backprop as tcb
from tf_conv_backprop import _loader, _ops
from tf_conv_backprop._wrappers import V1_NAMES, V2_NAMES

SEED = 20240607
PKG_DIR = os.path.dirname(os.path.abspath(tcb.__file__))
PYTHON_DIR = os.path.dirname(PKG_DIR)

# (our namespace, TF's namespace, name): the 14 public names.
PUBLIC = ([("nn", "compat.v1.nn", n) for n in V1_NAMES]
          + [("compat.v1.nn", "compat.v1.nn", n) for n in V1_NAMES]
          + [("compat.v2.nn", "compat.v2.nn", n) for n in V2_NAMES])
PUBLIC_IDS = [f"tcb.{ours}.{name}" for ours, _, name in PUBLIC]

# The four ops by their two-letter ids (BI, BF, DI, DF).
OPS = {spec.short: spec for spec in _ops.OPS}
KINDS = tuple(OPS)
DTYPES = tuple(tf.as_dtype(name) for name in _ops.DTYPES)


def _kind_of(name):
    return _ops.BY_NAME[name].short


def _resolve(root, dotted):
    obj = root
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def ours(kind):
    return getattr(tcb.compat.v1.nn, OPS[kind].names[0])


def theirs(kind):
    return OPS[kind].tf_reference


def _order(data_format, n, h, w, c):
    return [n, h, w, c] if data_format == "NHWC" else [n, c, h, w]


class Problem:
    """A small SAME, stride-2 problem for one op, with seeded random values.

    `args` are (sizes-or-tensor, tensor-or-sizes, out_backprop) as numpy arrays
    (float64 values rounded to `dtype`, sizes int32); `kwargs` the attributes."""

    def __init__(self, kind, data_format="NHWC", dtype=tf.float32, seed=SEED,
                 padding="SAME", pads=(0, 0, 0, 0)):
        self.kind, self.data_format, self.dtype, self.seed = kind, data_format, dtype, seed
        rng = np.random.default_rng(seed)
        n, h, w, c, kh, kw, m, s = 2, 5, 6, 3, 3, 2, 2, 2
        out_c = c * m if OPS[kind].depthwise else m
        t, b, l, r = pads
        if padding == "SAME":
            oh, ow = -(-h // s), -(-w // s)
        else:  # explicit
            oh, ow = (h + t + b - kh) // s + 1, (w + l + r - kw) // s + 1
        self.input_shape = _order(data_format, n, h, w, c)
        self.filter_shape = [kh, kw, c, m]
        self.out_backprop_shape = _order(data_format, n, oh, ow, out_c)
        self.reduction_length = OPS[kind].reduction_length(self.filter_shape, n, oh, ow)
        rnd = lambda shape: tf.cast(tf.cast(rng.standard_normal(shape), dtype),  # noqa: E731
                                    tf.float64).numpy()
        x, f, dy = rnd(self.input_shape), rnd(self.filter_shape), rnd(self.out_backprop_shape)
        if OPS[kind].computes == "input":
            self.args = (np.array(self.input_shape, np.int32), f, dy)
            self.out_shape = self.input_shape
        else:
            self.args = (x, np.array(self.filter_shape, np.int32), dy)
            self.out_shape = self.filter_shape
        self.kwargs = dict(strides=_order(data_format, 1, s, s, 1), padding=padding,
                           data_format=data_format)

    def tensors(self):
        return tuple(tf.constant(a) if a.dtype == np.int32 else tf.cast(tf.constant(a), self.dtype)
                     for a in self.args)

    def specs(self, known=True):
        if known:
            return [tf.TensorSpec(a.shape, tf.int32 if a.dtype == np.int32 else self.dtype)
                    for a in self.args]
        return [tf.TensorSpec([None], tf.int32) if a.dtype == np.int32
                else tf.TensorSpec([None] * 4, self.dtype) for a in self.args]

    def __str__(self):
        return (f"{self.kind} {self.dtype.name} {self.data_format} {self.kwargs['padding']} "
                f"in={self.input_shape} filter={self.filter_shape} "
                f"dy={self.out_backprop_shape} seed={self.seed}")


def as_f64(t):
    return tf.cast(t, tf.float64).numpy()


def assert_close(got, want, msg, rtol=1e-5, atol=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{msg}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=msg)


def eager(kind, problem, fn=None, **overrides):
    fn = fn or ours(kind)
    return fn(*problem.tensors(), **{**problem.kwargs, **overrides})


# --------------------------------------------------------------------------------------
# 1. Signatures, names, docstrings
# --------------------------------------------------------------------------------------

def test_public_name_count():
    assert len(PUBLIC) == 14


@pytest.mark.parametrize("our_ns,tf_ns,name", PUBLIC, ids=PUBLIC_IDS)
def test_exists_callable_and_signature(our_ns, tf_ns, name):
    fn = getattr(_resolve(tcb, our_ns), name, None)
    assert fn is not None, f"tf_conv_backprop.{our_ns}.{name} is missing"
    assert callable(fn)
    ref = getattr(_resolve(tf, tf_ns), name)
    assert inspect.signature(fn) == inspect.signature(ref), (
        f"{our_ns}.{name}: {inspect.signature(fn)} != tf.{tf_ns}.{name}{inspect.signature(ref)}")


def _summary(fn):
    lines = [line.strip() for line in (fn.__doc__ or "").strip().splitlines()]
    return lines[0] if lines else ""


@pytest.mark.parametrize("our_ns,tf_ns,name", PUBLIC, ids=PUBLIC_IDS)
def test_docstring_summary(our_ns, tf_ns, name):
    fn = getattr(_resolve(tcb, our_ns), name)
    ref = getattr(_resolve(tf, tf_ns), name)
    assert _summary(fn), f"{our_ns}.{name} has no docstring"
    assert _summary(fn) == _summary(ref)


@pytest.mark.parametrize("our_ns,tf_ns,name", PUBLIC, ids=PUBLIC_IDS)
def test_call_matches_tf(our_ns, tf_ns, name):
    kind = _kind_of(name)
    p = Problem(kind)
    got = eager(kind, p, getattr(_resolve(tcb, our_ns), name))
    want = eager(kind, p, getattr(_resolve(tf, tf_ns), name))
    assert got.dtype == tf.float32
    assert_close(got, want, f"{our_ns}.{name} vs tf.{tf_ns}.{name}: {p}")


def test_no_v2_conv2d_names():
    """TF2 has no conv2d_backprop_input/filter in tf.nn; our compat.v2.nn mirrors that."""
    assert not hasattr(tf.compat.v2.nn, "conv2d_backprop_input")
    assert not hasattr(tcb.compat.v2.nn, "conv2d_backprop_input")
    assert not hasattr(tcb.compat.v2.nn, "conv2d_backprop_filter")


# --------------------------------------------------------------------------------------
# 2. Arguments
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("ns", ["nn", "compat.v1.nn"])
def test_filters_alias(ns):
    fn = _resolve(tcb, ns).conv2d_backprop_input
    p = Problem("BI")
    sizes, f, dy = p.tensors()
    by_filter = fn(sizes, filter=f, out_backprop=dy, **p.kwargs)
    by_filters = fn(sizes, filters=f, out_backprop=dy, **p.kwargs)
    tf_filters = tf.compat.v1.nn.conv2d_backprop_input(sizes, filters=f, out_backprop=dy,
                                                       **p.kwargs)
    np.testing.assert_array_equal(by_filter.numpy(), by_filters.numpy(), err_msg=str(p))
    assert_close(by_filters, tf_filters, str(p))


@pytest.mark.parametrize("ns", ["nn", "compat.v1.nn"])
def test_filter_and_filters_both_given(ns):
    fn = _resolve(tcb, ns).conv2d_backprop_input
    p = Problem("BI")
    sizes, f, dy = p.tensors()
    with pytest.raises(ValueError) as ours_err:
        fn(sizes, filter=f, out_backprop=dy, filters=f, **p.kwargs)
    assert str(ours_err.value) == "Cannot specify both 'filter' and 'filters'."
    with pytest.raises(ValueError) as tf_err:
        tf.compat.v1.nn.conv2d_backprop_input(sizes, filter=f, out_backprop=dy, filters=f,
                                              **p.kwargs)
    assert str(ours_err.value) == str(tf_err.value)


@pytest.mark.parametrize("kind", ["BI", "BF"])
def test_use_cudnn_on_gpu_false(kind):
    p = Problem(kind)
    default = eager(kind, p)
    off = eager(kind, p, use_cudnn_on_gpu=False)
    np.testing.assert_array_equal(default.numpy(), off.numpy(), err_msg=str(p))
    assert_close(off, eager(kind, p, theirs(kind), use_cudnn_on_gpu=False), str(p))


PADS = (1, 2, 0, 1)  # top, bottom, left, right


def _explicit(data_format, pads=PADS, container=list):
    t, b, l, r = pads
    pairs = _order(data_format, [0, 0], [t, b], [l, r], [0, 0])
    return container(container(p) for p in pairs)


@pytest.mark.parametrize("kind", KINDS)
def test_string_padding_matches_tf(kind):
    for padding in ("SAME", "VALID"):
        p = Problem(kind, padding="SAME")
        if padding == "VALID":  # geometry for VALID is the explicit formula with zero pads
            p = Problem(kind, padding="EXPLICIT", pads=(0, 0, 0, 0))
            p.kwargs["padding"] = "VALID"
        assert_close(eager(kind, p), eager(kind, p, theirs(kind)), f"{padding}: {p}")


@pytest.mark.parametrize("container", [list, tuple])
@pytest.mark.parametrize("kind", KINDS)
def test_explicit_padding_nhwc_matches_tf(kind, container):
    p = Problem(kind, padding="EXPLICIT", pads=PADS)
    padding = _explicit("NHWC", container=container)
    assert padding == container(container(x) for x in [[0, 0], [1, 2], [0, 1], [0, 0]])
    got = eager(kind, p, padding=padding)
    want = eager(kind, p, theirs(kind), padding=padding)
    assert_close(got, want, f"{p} padding={padding}")


@pytest.mark.parametrize("kind", KINDS)
def test_explicit_padding_nchw_order(kind):
    """NCHW explicit padding is [[0,0],[0,0],[top,bottom],[left,right]]: the same
    numbers as the NHWC result, transposed."""
    nhwc = Problem(kind, "NHWC", padding="EXPLICIT", pads=PADS)
    nchw = Problem(kind, "NCHW", padding="EXPLICIT", pads=PADS)
    assert list(eager(kind, nchw, padding=_explicit("NCHW")).shape) == nchw.out_shape
    want = eager(kind, nhwc, padding=_explicit("NHWC")).numpy()
    if OPS[kind].computes == "input":
        want = want.transpose(0, 3, 1, 2)
    # The NCHW problem's arrays are different draws: rebuild them from the NHWC ones.
    x, s, dy = nhwc.args
    to_nchw = lambda a: np.ascontiguousarray(a.transpose(0, 3, 1, 2))  # noqa: E731
    if OPS[kind].computes == "input":
        args = (np.array(nchw.input_shape, np.int32), s, to_nchw(dy))
    else:
        args = (to_nchw(x), s, to_nchw(dy))
    args = [tf.constant(a) if a.dtype == np.int32 else tf.constant(a, tf.float32) for a in args]
    got = ours(kind)(*args, **{**nchw.kwargs, "padding": _explicit("NCHW")})
    assert_close(got, want, f"NCHW vs NHWC explicit: {nchw}")


@pytest.mark.parametrize("kind", KINDS)
def test_explicit_string_rejected(kind):
    p = Problem(kind)
    with pytest.raises(ValueError, match="'EXPLICIT' is not a valid value for `padding`"):
        eager(kind, p, padding="EXPLICIT")
    with pytest.raises(ValueError, match="'EXPLICIT' is not a valid value for `padding`"):
        eager(kind, p, theirs(kind), padding="EXPLICIT")


MALFORMED = {
    "three_pairs": [[0, 0], [1, 2], [0, 1]],
    "five_pairs": [[0, 0], [1, 2], [0, 1], [0, 0], [0, 0]],
    "triple": [[0, 0], [1, 2, 3], [0, 1], [0, 0]],
    "single": [[0, 0], [1], [0, 1], [0, 0]],
    "flat": [0, 0, 1, 2, 0, 1, 0, 0],
    "empty": [],
}


@pytest.mark.parametrize("what", list(MALFORMED))
@pytest.mark.parametrize("kind", KINDS)
def test_malformed_padding_list(kind, what):
    p = Problem(kind)
    padding = MALFORMED[what]
    with pytest.raises(ValueError) as ours_err:
        eager(kind, p, padding=padding)
    with pytest.raises(ValueError) as tf_err:
        eager(kind, p, theirs(kind), padding=padding)
    assert str(ours_err.value) == str(tf_err.value)


@pytest.mark.parametrize("kind", KINDS)
def test_name_and_op_type_in_graph(kind):
    p = Problem(kind)
    with tf.Graph().as_default():
        out = ours(kind)(*p.tensors(), **p.kwargs, name="my_grad")
        assert out.op.type == OPS[kind].op_name
        assert out.op.name.startswith("my_grad"), out.op.name
        out2 = ours(kind)(*p.tensors(), **p.kwargs, name="my_grad")
        assert out2.op.name.startswith("my_grad") and out2.op.name != out.op.name
        with tf.name_scope("outer"):
            out3 = ours(kind)(*p.tensors(), **p.kwargs, name="inner")
        assert out3.op.name.startswith("outer/inner"), out3.op.name


# --------------------------------------------------------------------------------------
# 3. Execution modes
# --------------------------------------------------------------------------------------

def _run_session(kind, p, placeholders):
    with tf.Graph().as_default():
        if placeholders:
            phs = [tf.compat.v1.placeholder(tf.int32 if a.dtype == np.int32 else p.dtype,
                                            shape=None) for a in p.args]
            out = ours(kind)(*phs, **p.kwargs)
            feed = dict(zip(phs, p.args))  # values already rounded to p.dtype
        else:
            out = ours(kind)(*p.tensors(), **p.kwargs)
            feed = None
        with tf.compat.v1.Session() as sess:
            return sess.run(out, feed_dict=feed)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("kind", KINDS)
def test_execution_modes_agree(kind, data_format):
    p = Problem(kind, data_format)
    fn = ours(kind)
    want = as_f64(eager(kind, p))
    assert list(want.shape) == p.out_shape

    call = lambda a, b, c: fn(a, b, c, **p.kwargs)  # noqa: E731
    results = {
        "tf.function": tf.function(call)(*p.tensors()),
        "tf.function(jit_compile=False)": tf.function(call, jit_compile=False)(*p.tensors()),
        "tf.function(known signature)": tf.function(call, input_signature=p.specs())(
            *p.tensors()),
        "tf.function(unknown shapes)": tf.function(call, input_signature=p.specs(False))(
            *p.tensors()),
        "v1 Session (constants)": _run_session(kind, p, placeholders=False),
        "v1 Session (placeholders)": _run_session(kind, p, placeholders=True),
    }
    for mode, got in results.items():
        assert_close(as_f64(got), want, f"{mode} vs eager: {p}", rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_tf_function_unknown_shapes_traces_rank4(kind):
    p = Problem(kind)
    seen = {}

    @tf.function(input_signature=p.specs(False))
    def f(a, b, c):
        out = ours(kind)(a, b, c, **p.kwargs)
        seen["shape"] = out.shape
        return out

    out = f(*p.tensors())
    assert seen["shape"].rank == 4
    assert list(out.shape) == p.out_shape


# --------------------------------------------------------------------------------------
# 4. Static shapes (graph mode)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("kind", KINDS)
def test_static_shape_from_constant_sizes(kind, data_format):
    p = Problem(kind, data_format)
    with tf.Graph().as_default():
        out = ours(kind)(*p.tensors(), **p.kwargs)
        assert out.shape.is_fully_defined(), out.shape
        assert out.shape.as_list() == p.out_shape
        # a Python list as the sizes argument works the same
        a, b, c = p.tensors()
        if OPS[kind].computes == "input":
            out = ours(kind)(list(p.out_shape), b, c, **p.kwargs)
        else:
            out = ours(kind)(a, list(p.out_shape), c, **p.kwargs)
        assert out.shape.as_list() == p.out_shape


@pytest.mark.parametrize("data_format,expected", [("NCHW", [5, 2, 7, 9]),
                                                  ("NHWC", [5, 7, 9, 2])])
def test_bi_two_element_sizes(data_format, expected):
    with tf.Graph().as_default():
        f = tf.compat.v1.placeholder(tf.float32, [3, 3, 2, 4])
        dy_shape = [5, 4, None, None] if data_format == "NCHW" else [5, None, None, 4]
        dy = tf.compat.v1.placeholder(tf.float32, dy_shape)
        out = tcb.compat.v1.nn.conv2d_backprop_input(
            [7, 9], f, dy, [1, 1, 1, 1], "SAME", data_format=data_format)
        assert out.shape.as_list() == expected
        # TF's built-in agrees
        ref = tf.compat.v1.nn.conv2d_backprop_input(
            [7, 9], f, dy, [1, 1, 1, 1], "SAME", data_format=data_format)
        assert ref.shape.as_list() == expected
        # unknown batch/filter: only the known parts
        f_u = tf.compat.v1.placeholder(tf.float32, None)
        dy_u = tf.compat.v1.placeholder(tf.float32, None)
        out = tcb.compat.v1.nn.conv2d_backprop_input(
            [7, 9], f_u, dy_u, [1, 1, 1, 1], "SAME", data_format=data_format)
        want = [None, None, 7, 9] if data_format == "NCHW" else [None, 7, 9, None]
        assert out.shape.as_list() == want


def test_bi_two_element_sizes_runs():
    """The (rows, cols) form computes what the 4-element form computes."""
    p = Problem("BI", "NCHW")
    sizes, f, dy = p.tensors()
    two = tcb.compat.v1.nn.conv2d_backprop_input(
        tf.constant(p.input_shape[2:], tf.int32), f, dy, **p.kwargs)
    four = tcb.compat.v1.nn.conv2d_backprop_input(sizes, f, dy, **p.kwargs)
    np.testing.assert_array_equal(two.numpy(), four.numpy(), err_msg=str(p))


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("kind", KINDS)
def test_static_shape_from_tf_shape(kind, data_format):
    """A sizes input from tf.shape(x) of a partially known x gives what is known."""
    p = Problem(kind, data_format)
    partial = [None, p.out_shape[1], None, p.out_shape[3]]
    with tf.Graph().as_default():
        a, b, c = (tf.compat.v1.placeholder(tf.int32 if x.dtype == np.int32 else tf.float32, None)
                   for x in p.args)
        holder = tf.compat.v1.placeholder(tf.float32, partial)
        if OPS[kind].computes == "input":
            out = ours(kind)(tf.shape(holder), b, c, **p.kwargs)
        else:
            out = ours(kind)(a, tf.shape(holder), c, **p.kwargs)
        assert out.shape.as_list() == partial


@pytest.mark.parametrize("kind", KINDS)
def test_static_shape_fully_unknown(kind):
    p = Problem(kind)
    with tf.Graph().as_default():
        phs = [tf.compat.v1.placeholder(tf.int32 if x.dtype == np.int32 else tf.float32, None)
               for x in p.args]
        out = ours(kind)(*phs, **p.kwargs)
        assert out.shape.rank == 4
        assert out.shape.as_list() == [None] * 4
        assert out.op.type == OPS[kind].op_name


INVALID_SIZES = {
    "minus_one": [2, -1, 6, 3],
    "minus_two": [2, -2, 6, 3],
    "minus_seven": [-7, 5, 6, 3],
    "three_values": [2, 5, 6],
    "five_values": [2, 5, 6, 3, 1],
    "two_negative": [-3, 5],
}


def _rejected_while_building(kind, sizes):
    """Like TF's own shape functions, ours read a 4-element sizes vector as a partial
    shape (so tf.shape(x) of a partly known x gives a partly known output), and TF's
    partial-shape conversion rejects values below -1 with a ValueError while the graph
    is built. BI's (rows, cols) form is not a shape and is never rejected."""
    return min(sizes) < -1 and not (kind == "BI" and len(sizes) == 2)


@pytest.mark.parametrize("what", list(INVALID_SIZES))
@pytest.mark.parametrize("kind", KINDS)
def test_invalid_constant_sizes(kind, what):
    """A bad constant sizes vector raises InvalidArgumentError from the kernel in eager
    mode, in a Session and in tf.function; values below -1 are rejected while building
    the graph with TF's ValueError, exactly as for TF's built-in op."""
    sizes = INVALID_SIZES[what]
    p = Problem(kind)
    a, b, c = p.tensors()
    bad = tf.constant(sizes, tf.int32)
    args = (bad, b, c) if OPS[kind].computes == "input" else (a, bad, c)
    with pytest.raises(tf.errors.InvalidArgumentError):
        ours(kind)(*args, **p.kwargs)  # eager
    build_error = ValueError if _rejected_while_building(kind, sizes) else None
    with tf.Graph().as_default():
        a, b, c = p.tensors()
        bad = tf.constant(sizes, tf.int32)
        args = (bad, b, c) if OPS[kind].computes == "input" else (a, bad, c)
        if build_error:
            with pytest.raises(build_error):
                ours(kind)(*args, **p.kwargs)
            with pytest.raises(build_error):
                theirs(kind)(*args, **p.kwargs)
        else:
            out = ours(kind)(*args, **p.kwargs)
            assert out.shape.rank == 4
            with tf.compat.v1.Session() as sess:
                with pytest.raises(tf.errors.InvalidArgumentError):
                    sess.run(out)
    captured = [tf.constant(a) if a.dtype == np.int32 else tf.constant(a, tf.float32)
                for a in p.args]

    @tf.function
    def traced():
        bad = tf.constant(sizes, tf.int32)
        a, b, c = captured
        args = (bad, b, c) if OPS[kind].computes == "input" else (a, bad, c)
        return ours(kind)(*args, **p.kwargs)

    with pytest.raises(build_error or tf.errors.InvalidArgumentError):
        traced()


# --------------------------------------------------------------------------------------
# 5. Loader
# --------------------------------------------------------------------------------------

def _subprocess(code, pythonpath, cwd):
    env = dict(os.environ, PYTHONPATH=pythonpath, TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


_FRESH_IMPORT = """
    import json, threading, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import tf_conv_backprop
    from tf_conv_backprop import _loader
    result = {"file": tf_conv_backprop.__file__}
    result["loaded_at_import"] = _loader._library is not None
    result["import_warnings"] = [w.category.__name__ for w in caught
                                 if "tf_conv_backprop" in str(w.message)]
    result["xla_usable"] = _loader.xla_kernels_usable()
    barrier = threading.Barrier(8)
    got = [None] * 8
    def work(i):
        barrier.wait()
        got[i] = tf_conv_backprop.load_library()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    result["threads_same"] = all(g is got[0] for g in got) and got[0] is not None
    result["threads_cached"] = got[0] is _loader._library
    result["has_op"] = hasattr(got[0], "conv_backprop_conv2d_backprop_input")
    print("RESULT " + json.dumps(result))
"""

_LOAD_ERROR = """
    import json, warnings
    import tensorflow as tf
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import tf_conv_backprop
    result = {"file": tf_conv_backprop.__file__, "tf": tf.__version__,
              "import_warnings": [w.category.__name__ for w in caught
                                  if "tf_conv_backprop" in str(w.message)]}
    try:
        tf_conv_backprop.nn.conv2d_backprop_input([1, 3, 3, 1], tf.ones([1, 1, 1, 1]),
                                                  tf.ones([1, 3, 3, 1]), [1, 1, 1, 1], "SAME")
        result["error"] = None
    except Exception as e:
        result["error"] = type(e).__module__ + "." + type(e).__name__
        result["is_library_load_error"] = isinstance(e, tf_conv_backprop.LibraryLoadError)
        result["is_import_error"] = isinstance(e, ImportError)
        result["message"] = str(e)
    # a second try fails the same way (nothing half-loaded is cached)
    try:
        tf_conv_backprop.load_library()
        result["second"] = None
    except Exception as e:
        result["second"] = type(e).__name__
    print("RESULT " + json.dumps(result))
"""

_LATE_IMPORT = """
    import json, warnings
    import tensorflow as tf
    tf.function(lambda x: x * 2, jit_compile=True)(tf.ones([2]))  # XLA collects kernels
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import tf_conv_backprop
    from tf_conv_backprop import _loader
    ours = [w for w in caught if "tf_conv_backprop" in str(w.message)]
    result = {"file": tf_conv_backprop.__file__,
              "import_warnings": [w.category.__name__ for w in ours],
              "message": " ".join(str(w.message) for w in ours),
              "xla_usable": _loader.xla_kernels_usable()}
    dx = tf_conv_backprop.nn.depthwise_conv2d_backprop_input(
        [1, 3, 3, 1], tf.ones([1, 1, 1, 1]), tf.ones([1, 3, 3, 1]), [1, 1, 1, 1], "SAME")
    result["eager_ok"] = bool(tf.reduce_all(dx == 1.0))
    print("RESULT " + json.dumps(result))
"""

FAKE_BUILT_TF = "9.8.7"


def _copy_package(dst, so, fake_version=True):
    """A copy of the package in `dst`: `so` is None (missing) or 'corrupt' (a text file);
    with `fake_version`, _build_info.json names a TF version that cannot be the running
    one."""
    pkg = os.path.join(dst, "tf_conv_backprop")
    shutil.copytree(PKG_DIR, pkg, ignore=shutil.ignore_patterns(
        _loader.LIBRARY_FILE, "__pycache__"))
    if so == "corrupt":
        with open(os.path.join(pkg, _loader.LIBRARY_FILE), "w") as f:
            f.write("this is not a shared library\n")
    info_path = os.path.join(pkg, "_build_info.json")
    with open(info_path) as f:
        info = json.load(f)
    if fake_version:
        info["tf_version"] = FAKE_BUILT_TF
    with open(info_path, "w") as f:
        json.dump(info, f)
    return pkg


@pytest.fixture(scope="module")
def loader_runs(tmp_path_factory):
    """All loader subprocesses start at once (each pays TF's import time)."""
    missing = str(tmp_path_factory.mktemp("missing"))
    corrupt = str(tmp_path_factory.mktemp("corrupt"))
    corrupt_same = str(tmp_path_factory.mktemp("corrupt_same"))
    _copy_package(missing, None)
    _copy_package(corrupt, "corrupt")
    _copy_package(corrupt_same, "corrupt", fake_version=False)
    procs = {
        "fresh": (_subprocess(_FRESH_IMPORT, PYTHON_DIR, PYTHON_DIR), PKG_DIR),
        "missing": (_subprocess(_LOAD_ERROR, missing, missing), missing),
        "corrupt": (_subprocess(_LOAD_ERROR, corrupt, corrupt), corrupt),
        "corrupt_same": (_subprocess(_LOAD_ERROR, corrupt_same, corrupt_same), corrupt_same),
        "late": (_subprocess(_LATE_IMPORT, PYTHON_DIR, PYTHON_DIR), PKG_DIR),
    }
    results = {}

    def get(key):
        if key not in results:
            proc, where = procs[key]
            out, err = proc.communicate(timeout=120)
            lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
            assert proc.returncode == 0 and lines, (
                f"{key}: rc={proc.returncode}\nstdout:\n{out}\nstderr:\n{err[-3000:]}")
            res = json.loads(lines[-1][len("RESULT "):])
            assert os.path.dirname(os.path.abspath(res["file"])).startswith(where), res["file"]
            results[key] = res
        return results[key]

    yield get
    for proc, _ in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_import_loads_library(loader_runs):
    """XLA collects kernels once per process and SavedModels need the ops: importing the
    package loads the library, quietly, with XLA's kernels for our ops to come."""
    res = loader_runs("fresh")
    assert res["loaded_at_import"], "importing tf_conv_backprop did not load the .so"
    assert res["import_warnings"] == [], res
    assert res["xla_usable"] is True, res


def test_import_after_xla_compilation_warns(loader_runs):
    res = loader_runs("late")
    assert res["import_warnings"] == ["XlaImportOrderWarning"], res
    assert "import tf_conv_backprop before" in res["message"], res["message"]
    assert res["xla_usable"] is False
    assert res["eager_ok"], "our ops must still run outside XLA"


def test_failed_load_warns_at_import_and_raises_at_first_use(loader_runs):
    res = loader_runs("corrupt_same")
    assert res["import_warnings"] == ["LibraryLoadFailedWarning"], res
    assert res["error"] == "tf_conv_backprop._loader.LibraryLoadError", res
    assert res["second"] == "LibraryLoadError"


def test_other_tf_version_warns_and_is_not_loaded_at_import(loader_runs):
    for key in ("missing", "corrupt"):
        res = loader_runs(key)
        assert res["import_warnings"] == ["VersionMismatchWarning"], (key, res)


def test_load_library_from_8_threads(loader_runs):
    res = loader_runs("fresh")
    assert res["threads_same"], "load_library() from 8 threads gave different objects"
    assert res["threads_cached"]
    assert res["has_op"]


def test_load_library_threads_in_process():
    got = [None] * 8
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait()
        got[i] = tcb.load_library()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] is not None and all(g is got[0] for g in got)
    assert tcb.load_library() is got[0]


def test_missing_library(loader_runs):
    res = loader_runs("missing")
    assert res["error"] == "tf_conv_backprop._loader.LibraryLoadError", res
    assert res["is_library_load_error"] and res["is_import_error"]
    assert "make build" in res["message"], res["message"]
    assert _loader.LIBRARY_FILE in res["message"]
    assert res["second"] == "LibraryLoadError"


def test_corrupt_library(loader_runs):
    res = loader_runs("corrupt")
    msg = res["message"]
    assert res["error"] == "tf_conv_backprop._loader.LibraryLoadError", res
    assert res["is_library_load_error"]
    assert f"TensorFlow {FAKE_BUILT_TF}" in msg, msg  # built for (from _build_info.json)
    assert f"TensorFlow {res['tf']}" in msg, msg  # the running one
    assert res["tf"] == tf.__version__
    assert "make clean build" in msg, msg
    assert res["second"] == "LibraryLoadError"


def test_library_path_and_build_info():
    assert tcb.library_path() == os.path.join(PKG_DIR, _loader.LIBRARY_FILE)
    assert os.path.exists(tcb.library_path())
    info = _loader.build_info()
    assert info.get("tf_version") == tf.__version__, info


# --------------------------------------------------------------------------------------
# 6. Every dtype; NCHW
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=[d.name for d in DTYPES])
@pytest.mark.parametrize("kind", KINDS)
def test_every_dtype(kind, dtype):
    p = Problem(kind, dtype=dtype)
    out = eager(kind, p)
    assert out.dtype == dtype, f"{p}: got {out.dtype.name}"
    assert list(out.shape) == p.out_shape
    # same (rounded) values in float64 give the same numbers, within the dtype's precision
    p64 = Problem(kind, dtype=tf.float64)
    p64.args = p.args
    ref = as_f64(eager(kind, p64))
    err = _ops.relative_error(as_f64(out), ref)
    assert _ops.within(err, dtype.name, p.reduction_length), f"{p}: relative error {err}"
    with tf.Graph().as_default():
        g = ours(kind)(*p.tensors(), **p.kwargs)
        assert g.dtype == dtype


@pytest.mark.parametrize("kind", KINDS)
def test_nchw_output_shape(kind):
    p = Problem(kind, "NCHW")
    out = eager(kind, p)
    if OPS[kind].computes == "input":
        n, h, w, c = 2, 5, 6, 3
        assert list(out.shape) == [n, c, h, w]
    else:
        assert list(out.shape) == p.filter_shape  # filters stay HWIO
    # same values as NHWC, transposed
    nhwc = Problem(kind, "NHWC")
    to_nchw = lambda a: np.ascontiguousarray(a.transpose(0, 3, 1, 2))  # noqa: E731
    x, s, dy = nhwc.args
    if OPS[kind].computes == "input":
        args = (tf.constant(p.input_shape, tf.int32), tf.constant(s, tf.float32),
                tf.constant(to_nchw(dy), tf.float32))
        want = eager(kind, nhwc).numpy().transpose(0, 3, 1, 2)
    else:
        args = (tf.constant(to_nchw(x), tf.float32), tf.constant(s), tf.constant(to_nchw(dy),
                                                                                 tf.float32))
        want = eager(kind, nhwc).numpy()
    got = ours(kind)(*args, **p.kwargs)
    assert_close(got, want, f"NCHW vs NHWC: {p}")
