"""Random configurations of the four ops and how to run them three ways: our op,
TF's built-in op and the NumPy float64 reference. Shared by the parity tests and
`make report`."""
import dataclasses
import functools
import random

import numpy as np
import tensorflow as tf

import reference
import tf_conv_backprop as tcb
from tf_conv_backprop import _ops
# DTYPES and relative_error are the tests' too: one table, one error measure.
from tf_conv_backprop._ops import BY_KEY, DTYPES, relative_error  # noqa: F401

FORMATS = ("NHWC", "NCHW")
PADDINGS = ("SAME", "VALID", "EXPLICIT")


def our_function(op):
    """Our public function for an op key (TF's canonical name, in tcb.compat.v1.nn)."""
    return getattr(tcb.compat.v1.nn, BY_KEY[op].names[0])


@dataclasses.dataclass
class Case:
    op: str
    dtype: str
    data_format: str
    padding: str
    batch: int
    in_rows: int
    in_cols: int
    in_depth: int
    filter_rows: int
    filter_cols: int
    out_channels: int  # conv2d: out_depth; depthwise: depth multiplier
    strides: tuple = (1, 1)
    dilations: tuple = (1, 1)
    pads: tuple = (0, 0, 0, 0)  # EXPLICIT: top, bottom, left, right
    two_element_sizes: bool = False  # Conv2DBackpropInput's (rows, cols) input_sizes
    seed: int = 0
    groups: int = 1  # conv2d: the filter reads in_depth / groups channels

    @property
    def spec(self):
        return BY_KEY[self.op]

    def _order(self, n, h, w, c):
        return [n, h, w, c] if self.data_format == "NHWC" else [n, c, h, w]

    def _spatial(self, rows, cols):
        return self._order(1, rows, cols, 1)

    @property
    def strides4(self):
        return self._spatial(*self.strides)

    @property
    def dilations4(self):
        return self._spatial(*self.dilations)

    @property
    def out_depth(self):
        return self.in_depth * self.out_channels if self.spec.depthwise else self.out_channels

    @property
    def reduction_length(self):
        return self.spec.reduction_length(self.filter_shape, self.batch, *self.out_size())

    @functools.cached_property
    def cancellation(self):
        """reference.cancellation on this case's inputs (make_arrays)."""
        first, second, dy = call_args(self, make_arrays(self), as_tensor=False)
        return reference.cancellation(self.spec, first, second, dy, self.strides4, self.padding,
                                      self.explicit_paddings, self.data_format, self.dilations4)

    def out_size(self):
        t, b, l, r = self.pads
        rows = reference.output_size(self.in_rows, self.filter_rows, self.strides[0],
                                     self.dilations[0], self.padding, t, b)[0]
        cols = reference.output_size(self.in_cols, self.filter_cols, self.strides[1],
                                     self.dilations[1], self.padding, l, r)[0]
        return rows, cols

    @property
    def input_shape(self):
        return self._order(self.batch, self.in_rows, self.in_cols, self.in_depth)

    @property
    def filter_shape(self):
        return [self.filter_rows, self.filter_cols, self.in_depth // self.groups, self.out_channels]

    @property
    def out_backprop_shape(self):
        return self._order(self.batch, *self.out_size(), self.out_depth)

    @property
    def explicit_paddings(self):
        if self.padding != "EXPLICIT":
            return []
        t, b, l, r = self.pads
        return sum(self._order([0, 0], [t, b], [l, r], [0, 0]), [])

    @property
    def tf_padding(self):
        """The Python `padding` argument: a string, or [before, after] pairs."""
        if self.padding != "EXPLICIT":
            return self.padding
        p = self.explicit_paddings
        return [p[i:i + 2] for i in range(0, 8, 2)]

    def __str__(self):
        return (f"{self.op} {self.dtype} {self.data_format} {self.padding} pads={self.pads} "
                f"in={self.input_shape} filter={self.filter_shape} dy={self.out_backprop_shape} "
                f"strides={self.strides} dilations={self.dilations} "
                f"two_element={self.two_element_sizes} groups={self.groups} seed={self.seed}")


def sample_case(op, dtype, data_format, padding, dilated, seed):
    """A random valid configuration; `dilated` forces a dilation > 1 on some axis."""
    rng = random.Random(seed)
    depthwise = BY_KEY[op].depthwise
    while True:
        dil = (1, 1)
        if dilated:
            dil = (rng.randint(1, 3), rng.randint(1, 3))
            if dil == (1, 1):
                dil = (rng.choice((1, 2)), 2)
        case = Case(
            op=op, dtype=dtype, data_format=data_format, padding=padding,
            batch=rng.randint(1, 3),
            in_rows=rng.randint(1, 11), in_cols=rng.randint(1, 11),
            in_depth=rng.randint(1, 20 if depthwise else 6),
            filter_rows=rng.randint(1, 4), filter_cols=rng.randint(1, 4),
            out_channels=rng.randint(1, 3) if depthwise else rng.randint(1, 6),
            strides=(rng.randint(1, 3), rng.randint(1, 3)), dilations=dil,
            pads=tuple(rng.randint(0, 3) for _ in range(4)) if padding == "EXPLICIT" else (0, 0, 0, 0),
            two_element_sizes=(op == "conv2d_input" and rng.random() < 0.2),
            seed=seed)
        try:
            if min(case.out_size()) >= 1:
                return case
        except ValueError:
            pass  # negative output size: draw again


# Empty-tensor configurations: (what is empty, Case overrides of a small valid case).
EMPTY = [
    ("batch", dict(batch=0)),
    ("rows", dict(in_rows=0, padding="SAME")),
    ("in_depth", dict(in_depth=0)),
    ("out_channels", dict(out_channels=0)),
    ("filter_rows", dict(filter_rows=0, padding="SAME")),
]


def empty_case(op, data_format, overrides):
    base = dict(op=op, dtype="float32", data_format=data_format, padding="VALID", batch=2,
                in_rows=5, in_cols=4, in_depth=3, filter_rows=2, filter_cols=2, out_channels=2)
    return Case(**{**base, **overrides})


def make_arrays(case):
    """float64 inputs already rounded to the case's dtype (the reference sees the
    same values as the ops)."""
    rng = np.random.default_rng(case.seed)
    round_to = lambda a: tf.cast(tf.cast(a, case.dtype), tf.float64).numpy()  # noqa: E731
    return {
        "input": round_to(rng.standard_normal(case.input_shape)),
        "filter": round_to(rng.standard_normal(case.filter_shape)),
        "out_backprop": round_to(rng.standard_normal(case.out_backprop_shape)),
    }


def call_args(case, arrays, as_tensor):
    spec = case.spec
    if spec.computes == "input":
        sizes = case.input_shape
        if case.two_element_sizes:
            sizes = [case.in_rows, case.in_cols]
        first = tf.constant(sizes, tf.int32) if as_tensor else sizes
        second = arrays["filter"]
    else:
        first = arrays["input"]
        second = tf.constant(case.filter_shape, tf.int32) if as_tensor else case.filter_shape
    dy = arrays["out_backprop"]
    if as_tensor:
        cast = lambda a: tf.cast(a, case.dtype) if not isinstance(a, tf.Tensor) else a  # noqa: E731
        first, second, dy = cast(first), cast(second), cast(dy)
    return first, second, dy


def run_with(fn, case, arrays):
    """Calls a function with TF's signature (ours or TF's) and returns float64 numpy."""
    first, second, dy = call_args(case, arrays, as_tensor=True)
    out = fn(first, second, dy, strides=case.strides4, padding=case.tf_padding,
             data_format=case.data_format, dilations=case.dilations4)
    return tf.cast(out, tf.float64).numpy()


def run_ours(case, arrays):
    return run_with(our_function(case.op), case, arrays)


def run_tf(case, arrays):
    return run_with(case.spec.tf_reference, case, arrays)


def run_reference(case, arrays):
    first, second, dy = call_args(case, arrays, as_tensor=False)
    return reference.backprop(case.spec)(first, second, dy, case.strides4, case.padding,
                                         case.explicit_paddings, case.data_format,
                                         case.dilations4)


def budget(case, accumulator=None):
    """The op table's error budget for this case (_ops.tolerance), its sums in
    `accumulator` when not ours."""
    return _ops.tolerance(case.dtype, case.reduction_length, case.cancellation, accumulator)


def within(err, case, factor=1):
    """The op table's judgement for this case's dtype, reduction length and cancellation
    (NaN never passes; factor=2 when neither side is the float64 reference)."""
    return _ops.within(err, case.dtype, case.reduction_length, factor, case.cancellation)


def tf_result_is_garbage(theirs, reference):
    """TF 2.21's oneDNN bfloat16 Conv2DBackpropFilter sometimes returns non-finite values
    from finite inputs (uninitialised memory: conv2d_filter bfloat16 NHWC SAME, 6x1 input,
    2x2 filter, strides (1, 2), dilations (2, 1) gave inf/NaN in 25 of 300 runs). Such a
    result is no oracle; the float64 reference has already judged ours."""
    return (not np.all(np.isfinite(np.asarray(theirs, np.float64)))
            and np.all(np.isfinite(np.asarray(reference, np.float64))))


def tf_is_trusted(case):
    """TF's built-in computes the wrong gradient for dilated depthwise convolutions
    (it ignores `dilations`), so it is no oracle there."""
    return not (case.spec.depthwise and case.dilations != (1, 1))


# Errors with which TF's built-in CPU kernels turn down a configuration they lack.
TF_REJECTS = (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError, tf.errors.AbortedError)


def check_against_oracles(case):
    """Ours against the float64 reference (always), then against TF's built-in wherever
    TF accepts the case and computes the right thing."""
    arrays = make_arrays(case)
    ours = run_ours(case, arrays)
    expected = run_reference(case, arrays)
    err = relative_error(ours, expected)
    assert within(err, case), f"{case}: relative error vs reference {err}"
    if not tf_is_trusted(case):
        return
    try:
        theirs = run_tf(case, arrays)
    except TF_REJECTS:
        return  # TF's CPU kernel lacks this configuration; the reference still judged it
    if tf_result_is_garbage(theirs, expected):
        return
    err_tf = relative_error(ours, theirs)
    tf_vs_reference = relative_error(theirs, expected)
    if case.dtype == "float16" and not within(tf_vs_reference, case):
        # TF 2.21's oneDNN float16 kernels sum in float16 on some CPUs (conv2d filter
        # gradient on an AMD Zen 4 EPYC: 0.0032 off the reference for a 429-term sum,
        # ours 0.0002). Judged as a float16 sum it is still the same function (a
        # different one misses by far more); ours is within TF's error plus our own of it.
        tf_budget = budget(case, accumulator="float16")
        assert tf_vs_reference <= tf_budget, f"{case}: TF's own error vs reference {tf_vs_reference} > {tf_budget}"
        assert err_tf <= tf_vs_reference + 2 * budget(case), \
            f"{case}: relative difference vs TF {err_tf} (TF vs reference {tf_vs_reference})"
        return
    assert within(err_tf, case, factor=2), f"{case}: relative difference vs TF {err_tf}"
