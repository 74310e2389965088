"""int32 Conv2DBackpropInput, bit for bit. TF 2.21 takes int32 in that op alone (it is
what tf.nn.conv2d_transpose runs on integer tensors), and its int32 sums wrap around
(two's complement). Values span +-2**30, so nearly every sum wraps.

Oracles: TF's built-in CPU kernel where it runs (NHWC without dilations), a NumPy
reference summing modulo 2**32 everywhere (itself checked against TF's kernel), and TF's
XLA lowering, which runs NCHW and dilations too. Ours runs in eager mode, in tf.function
and with jit_compile=True, through the raw op, the v1 wrapper and `patched()`. Also: the
kernel registrations of TF's four ops against ours, per device and dtype.
"""
import numpy as np
import pytest
import tensorflow as tf
# Private, test-only: TF has no public API that lists the kernels registered for an op.
from tensorflow.python.framework import kernels as tf_kernels

import tf_conv_backprop as tcb
from tf_conv_backprop import _loader, _ops

MODES = ("eager", "function", "xla")
VALUE_RANGE = 2 ** 30


def _pads(size, k, stride, dilation, padding):
    """(out, pad_before) of one spatial axis, TF's rules; padding is "SAME", "VALID" or
    an explicit (before, after) pair."""
    eff = (k - 1) * dilation + 1
    if isinstance(padding, tuple):
        before, after = padding
        return (size + before + after - eff) // stride + 1, before
    if padding == "VALID":
        return -(-(size - eff + 1) // stride), 0
    out = -(-size // stride)
    return out, max((out - 1) * stride + eff - size, 0) // 2


class Case:
    """One call, in NHWC terms: dx of shape (n, h, w, cin) from filter (k, k, cin, cout)."""

    def __init__(self, n, h, w, cin, cout, k, strides=(1, 1), dilations=(1, 1),
                 padding="SAME", seed=0):
        self.n, self.h, self.w, self.cin, self.cout, self.k = n, h, w, cin, cout, k
        self.strides, self.dilations, self.padding, self.seed = strides, dilations, padding, seed
        rows = _pads(h, k, strides[0], dilations[0], padding[:2] if isinstance(padding, tuple)
                     else padding)
        cols = _pads(w, k, strides[1], dilations[1], padding[2:] if isinstance(padding, tuple)
                     else padding)
        (self.out_h, self.pad_top), (self.out_w, self.pad_left) = rows, cols

    def __repr__(self):
        return (f"n{self.n} {self.h}x{self.w}x{self.cin} k{self.k} cout{self.cout} "
                f"s{self.strides} d{self.dilations} {self.padding} seed{self.seed}")

    def arrays(self):
        rng = np.random.default_rng(self.seed)
        return tuple(rng.integers(-VALUE_RANGE, VALUE_RANGE, shape).astype(np.int32)
                     for shape in ((self.k, self.k, self.cin, self.cout),
                                   (self.n, self.out_h, self.out_w, self.cout)))

    def attrs(self, data_format):
        def order(rows, cols):
            return [1, rows, cols, 1] if data_format == "NHWC" else [1, 1, rows, cols]
        attrs = dict(strides=order(*self.strides), dilations=order(*self.dilations),
                     data_format=data_format)
        if isinstance(self.padding, tuple):
            t, b, l, r = self.padding
            pairs = [[0, 0], [t, b], [l, r], [0, 0]]
            if data_format == "NCHW":
                pairs = [pairs[0], pairs[3], pairs[1], pairs[2]]
            attrs.update(padding="EXPLICIT", explicit_paddings=sum(pairs, []))
        else:
            attrs.update(padding=self.padding, explicit_paddings=[])
        return attrs

    def input_sizes(self, data_format):
        if data_format == "NHWC":
            return [self.n, self.h, self.w, self.cin]
        return [self.n, self.cin, self.h, self.w]


def to_nchw(x):
    return np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)))


def to_nhwc(x):
    return np.ascontiguousarray(np.transpose(x, (0, 2, 3, 1)))


def reference(case, w, dy):
    """dx (NHWC) summed in int64 and reduced modulo 2**32 after every tap (NumPy's int64
    arithmetic wraps modulo 2**64, so no step loses the low 32 bits)."""
    dx = np.zeros((case.n, case.h, case.w, case.cin), np.int64)
    w64, dy64 = w.astype(np.int64), dy.astype(np.int64)
    for kh in range(case.k):
        ih = np.arange(case.out_h) * case.strides[0] - case.pad_top + kh * case.dilations[0]
        rows = (ih >= 0) & (ih < case.h)
        for kw in range(case.k):
            iw = np.arange(case.out_w) * case.strides[1] - case.pad_left + kw * case.dilations[1]
            cols = (iw >= 0) & (iw < case.w)
            part = np.einsum("nabo,io->nabi", dy64[:, rows][:, :, cols], w64[kh, kw])
            dx[:, ih[rows][:, None], iw[cols][None, :]] += part
            dx &= 0xFFFFFFFF
    return dx.astype(np.uint32).view(np.int32)


def run_raw(op, case, w, dy, data_format, mode, sizes=None):
    """tf.raw_ops-style `op` on (w, dy) in `mode`; sizes default to the 4-element form.
    The compiled modes take w and dy as arguments: XLA folds compile-time constants with
    TF's own evaluators, which is not what runs at run time."""
    attrs = case.attrs(data_format)
    sizes = case.input_sizes(data_format) if sizes is None else sizes

    def call(w, dy):
        return op(input_sizes=sizes, filter=w, out_backprop=dy, **attrs)
    if mode == "eager":
        return call(tf.constant(w), tf.constant(dy)).numpy()
    return tf.function(call, jit_compile=mode == "xla")(tf.constant(w), tf.constant(dy)).numpy()


def ours_raw(**kwargs):
    return tcb.load_library().conv_backprop_conv2d_backprop_input(**kwargs)


def assert_same(got, want, what):
    assert got.dtype == np.int32 and got.shape == want.shape, (what, got.dtype, got.shape,
                                                               want.shape)
    diff = np.argwhere(got != want)
    assert diff.size == 0, (f"{what}: {len(diff)} of {got.size} elements differ, first at "
                            f"{tuple(diff[0])}: {got[tuple(diff[0])]} != {want[tuple(diff[0])]}")


# NHWC without dilations: TF's CPU kernel runs these.
TF_CASES = [
    Case(2, 6, 6, 5, 7, 3, (1, 1), padding="SAME", seed=1),
    Case(2, 7, 6, 5, 7, 3, (2, 2), padding="SAME", seed=2),
    Case(1, 9, 8, 3, 4, 3, (3, 3), padding="VALID", seed=3),
    Case(2, 8, 7, 4, 6, 5, (2, 3), padding="VALID", seed=4),
    Case(1, 6, 7, 8, 3, 3, (1, 2), padding=(1, 2, 0, 1), seed=5),
    Case(3, 5, 5, 2, 9, 1, (1, 1), padding="VALID", seed=6),
    Case(1, 10, 10, 16, 16, 3, (2, 2), padding=(2, 0, 1, 1), seed=7),
]
# What TF's CPU kernel refuses: dilations (and, in the layout test, NCHW).
DILATED_CASES = [
    Case(2, 9, 8, 5, 7, 3, (1, 1), (2, 2), "SAME", seed=11),
    Case(1, 11, 10, 3, 4, 3, (2, 1), (2, 3), "VALID", seed=12),
    Case(2, 8, 9, 4, 5, 2, (3, 2), (3, 1), (1, 0, 2, 1), seed=13),
]
ALL_CASES = TF_CASES + DILATED_CASES


@pytest.mark.parametrize("case", TF_CASES, ids=repr)
def test_reference_matches_tf(case):
    w, dy = case.arrays()
    want = run_raw(tf.raw_ops.Conv2DBackpropInput, case, w, dy, "NHWC", "eager")
    assert_same(reference(case, w, dy), want, f"{case}: NumPy reference vs TF")
    # The values are large enough that the exact sums leave int32: they wrapped.
    exact = tf.raw_ops.Conv2DBackpropInput(
        input_sizes=case.input_sizes("NHWC"), filter=w.astype(np.float64),
        out_backprop=dy.astype(np.float64), **case.attrs("NHWC")).numpy()
    assert np.abs(exact).max() > 2.0 ** 31, case


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", TF_CASES, ids=repr)
def test_nhwc_matches_tf_builtin(case, mode):
    w, dy = case.arrays()
    want = run_raw(tf.raw_ops.Conv2DBackpropInput, case, w, dy, "NHWC", "eager")
    assert_same(run_raw(ours_raw, case, w, dy, "NHWC", mode), want, f"{case} {mode}")
    if mode == "xla":  # TF's XLA lowering of its own op agrees too
        assert_same(run_raw(tf.raw_ops.Conv2DBackpropInput, case, w, dy, "NHWC", "xla"), want,
                    f"{case}: TF's XLA vs TF's kernel")


# NHWC without dilations is checked against TF's kernel above.
REFERENCE_CELLS = ([(case, "NCHW") for case in ALL_CASES]
                   + [(case, "NHWC") for case in DILATED_CASES])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case,data_format", REFERENCE_CELLS,
                         ids=[f"{c!r}-{f}" for c, f in REFERENCE_CELLS])
def test_layouts_and_dilations_match_reference(case, data_format, mode):
    w, dy = case.arrays()
    want = reference(case, w, dy)
    nchw = data_format == "NCHW"
    got = run_raw(ours_raw, case, w, to_nchw(dy) if nchw else dy, data_format, mode)
    assert_same(to_nhwc(got) if nchw else got, want, f"{case} {data_format} {mode}")
    if mode == "xla":
        theirs = run_raw(tf.raw_ops.Conv2DBackpropInput, case, w, to_nchw(dy) if nchw else dy,
                         data_format, "xla")
        assert_same(theirs, got, f"{case} {data_format}: TF's XLA vs ours")


def test_tf_cpu_kernel_refuses_nchw_and_dilations():
    """Why the reference, not TF, is the oracle there (TF 2.21's int32 CPU kernel)."""
    case = DILATED_CASES[0]
    w, dy = case.arrays()
    with pytest.raises(tf.errors.InvalidArgumentError, match="dilation"):
        run_raw(tf.raw_ops.Conv2DBackpropInput, case, w, dy, "NHWC", "eager")
    case = TF_CASES[0]
    w, dy = case.arrays()
    with pytest.raises(tf.errors.InvalidArgumentError, match="NHWC"):
        run_raw(tf.raw_ops.Conv2DBackpropInput, case, w, to_nchw(dy), "NCHW", "eager")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("data_format", ("NHWC", "NCHW"))
def test_two_element_sizes(data_format, mode):
    case = TF_CASES[1]
    w, dy = case.arrays()
    nchw = data_format == "NCHW"
    got = run_raw(ours_raw, case, w, to_nchw(dy) if nchw else dy, data_format, mode,
                  sizes=[case.h, case.w])
    assert_same(to_nhwc(got) if nchw else got, reference(case, w, dy), f"{data_format} {mode}")


EMPTY = {  # (input sizes, filter shape, out_backprop shape), NHWC
    "batch": ([0, 5, 5, 3], [3, 3, 3, 4], [0, 5, 5, 4]),
    "in_depth": ([2, 5, 5, 0], [3, 3, 0, 4], [2, 5, 5, 4]),
    "out_depth": ([2, 5, 5, 3], [3, 3, 3, 0], [2, 5, 5, 0]),
    "rows": ([2, 0, 5, 3], [3, 3, 3, 4], [2, 0, 5, 4]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("data_format", ("NHWC", "NCHW"))
@pytest.mark.parametrize("which", sorted(EMPTY))
def test_empty_tensors(which, data_format, mode):
    sizes, w_shape, dy_shape = EMPTY[which]
    w = np.ones(w_shape, np.int32)
    dy = np.ones(dy_shape, np.int32)
    if data_format == "NCHW":
        sizes = [sizes[0], sizes[3], sizes[1], sizes[2]]
        dy = to_nchw(dy)
    attrs = dict(strides=[1, 1, 1, 1], padding="SAME", data_format=data_format)

    def call(w, dy):
        return ours_raw(input_sizes=sizes, filter=w, out_backprop=dy, **attrs)
    if mode == "eager":
        got = call(tf.constant(w), tf.constant(dy)).numpy()
    else:
        got = tf.function(call, jit_compile=mode == "xla")(tf.constant(w), tf.constant(dy)).numpy()
    assert_same(got, np.zeros(sizes, np.int32), f"empty {which} {data_format} {mode}")
    # TF's kernel refuses a filter of depth 0 (ours gives the zeros, as for float).
    if data_format == "NHWC" and mode == "eager" and which != "in_depth":
        want = tf.raw_ops.Conv2DBackpropInput(input_sizes=sizes, filter=w, out_backprop=dy,
                                              **attrs).numpy()
        assert_same(got, want, f"empty {which}: vs TF")


def test_v1_wrapper_and_conv2d_transpose():
    """tcb's v1 wrapper takes int32 and gives what tf.nn.conv2d_transpose (TF's op) gives
    on integer tensors; `patched()` routes TF's v1 name and raw op to ours."""
    case = TF_CASES[4]
    w, dy = case.arrays()
    want = reference(case, w, dy)
    t, b, l, r = case.padding
    padding = [[0, 0], [t, b], [l, r], [0, 0]]
    sizes = case.input_sizes("NHWC")
    ours = tcb.compat.v1.nn.conv2d_backprop_input(sizes, w, dy, [1, *case.strides, 1], padding)
    assert_same(ours.numpy(), want, "tcb.compat.v1.nn.conv2d_backprop_input")
    transpose = tf.nn.conv2d_transpose(dy, w, sizes, [1, *case.strides, 1], padding)
    assert_same(transpose.numpy(), want, "tf.nn.conv2d_transpose")

    def graph_ops(fn):
        graph = tf.function(fn).get_concrete_function().graph
        return {op.type for op in graph.get_operations()}
    with tcb.patched():
        v1 = lambda: tf.compat.v1.nn.conv2d_backprop_input(  # noqa: E731
            sizes, w, dy, [1, *case.strides, 1], padding)
        raw = lambda: tf.raw_ops.Conv2DBackpropInput(  # noqa: E731
            input_sizes=sizes, filter=w, out_backprop=dy, **case.attrs("NHWC"))
        for name, fn in (("tf.compat.v1.nn.conv2d_backprop_input", v1),
                         ("tf.raw_ops.Conv2DBackpropInput", raw)):
            assert "ConvBackprop>Conv2DBackpropInput" in graph_ops(fn), name
            assert_same(fn().numpy(), want, f"patched {name}")
            assert_same(tf.function(fn, jit_compile=True)().numpy(), want,
                        f"patched {name}, jit_compile=True")


def test_no_gradient_for_integers():
    """As for TF's op: the tape records nothing through int32 tensors."""
    case = TF_CASES[0]
    w, dy = (tf.constant(a) for a in case.arrays())
    sizes = case.input_sizes("NHWC")
    for fn in (tf.compat.v1.nn.conv2d_backprop_input, tcb.compat.v1.nn.conv2d_backprop_input):
        with tf.GradientTape() as tape:
            tape.watch([w, dy])
            y = fn(sizes, w, dy, [1, 1, 1, 1], "SAME")
        assert tape.gradient(y, [w, dy]) == [None, None], fn


@pytest.mark.parametrize("spec", [op for op in _ops.OPS if "int32" not in op.dtypes],
                         ids=lambda op: op.key)
def test_other_ops_refuse_int32_as_tf_does(spec):
    x = tf.ones([1, 4, 4, 2], tf.int32)
    w_shape = [3, 3, 2, 1 if spec.depthwise else 4]
    dy = tf.ones([1, 4, 4, 2 if spec.depthwise else 4], tf.int32)
    first, second = ([1, 4, 4, 2], tf.ones(w_shape, tf.int32)) if spec.computes == "input" \
        else (x, w_shape)
    for fn in (spec.tf_reference, getattr(tcb.compat.v1.nn, spec.names[0])):
        with pytest.raises((tf.errors.InvalidArgumentError, TypeError),
                           match="int32 is not in the list of allowed values"):
            fn(first, second, dy, [1, 1, 1, 1], "SAME")


# TF's kernels with a label are alternatives picked by attribute, not more dtypes.
LABELS_IGNORED = ("custom", "eigen_tensor", "cudnn_grouped_convolution")


def _registered(op_name):
    """{device type: set of dtype names} of op_name's unlabelled kernels."""
    found = {}
    for kernel in tf_kernels.get_registered_kernels_for_op(op_name).kernel:
        if kernel.label in LABELS_IGNORED:
            continue
        for c in kernel.constraint:
            if c.name == "T":
                found.setdefault(kernel.device_type, set()).update(
                    tf.dtypes.as_dtype(t).name for t in c.allowed_values.list.type)
    return found


@pytest.mark.parametrize("device", ("CPU", "GPU"))
@pytest.mark.parametrize("spec", _ops.OPS, ids=lambda op: op.key)
def test_registrations_match_tf(spec, device):
    """TF's wheel is built with CUDA, so its GPU kernels are listed without a GPU."""
    _loader.load_library()
    if device == "GPU" and not _loader.build_info().get("cuda_kernels"):
        pytest.skip("CPU-only build of the library: it registers no GPU kernels to compare")
    theirs = _registered(spec.tf_op_name).get(device, set())
    ours = _registered(spec.op_name).get(device, set())
    assert theirs, f"TF registers no {device} kernel for {spec.tf_op_name}"
    assert theirs <= ours, f"{spec.op_name} on {device} lacks TF's {sorted(theirs - ours)}"
    assert ours == theirs == set(spec.dtypes), (spec.op_name, device, sorted(ours),
                                                sorted(theirs))
