"""The bad-input corpus for the four ops: inputs that crashed or misled TF's kernels (S1-S16:
TF's security advisories for these ops; F1-F10: public fuzzer crash reports; N1-N5: found by
fuzzing TF ourselves; 2-D analogs where the report is for Conv3D or the forward Conv2D)
and the bad-input classes they imply, each with the outcome we require.

Each case is one call of a public wrapper (or, with `raw=True`, of the generated op, to
reach attribute values the wrapper cannot produce). The expectation is one of
  - an error: the exception class(es) and substrings of which the message must contain
    at least one (the backticked argument name). `stage` says where it is raised:
    "kernel" (our op: a tf.errors class), "wrapper" (our Python wrapper: ValueError) or
    "framework" (TF's op construction / eager dispatch, before our kernel runs; the
    class may differ between eager and tf.function);
  - "zeros": a legal, empty-reduction input: a finite, all-zero result of that shape;
  - "ok": a legal input: a finite result of that shape, checked against the NumPy
    reference (reference.py).

`run_case(case_id, mode)` runs one case eagerly or inside a tf.function and returns a
small JSON-able dict; the test runs it in a child process, so crashes are contained.
TensorFlow is imported lazily: building the table needs only NumPy (and the op table,
read without the package: build_tools/gen_fuzz_corpus.py runs without TensorFlow's import).
"""
import dataclasses
import os
from typing import Any, Optional

import numpy as np

from op_table import ops as _ops

OPS = tuple(spec.key for spec in _ops.OPS)
SHORT = {spec.key: spec.short for spec in _ops.OPS}
# "xla": inside a tf.function(jit_compile=True); expected as in a tf.function unless a
# case says otherwise.
MODES = ("eager", "function", "xla")
BIG = 1879048192  # the S9 value: 4 or 13 of them overflow int64 as an element count
TF_ERRORS = ("InvalidArgumentError", "UnimplementedError")


# --------------------------------------------------------------------------------------
# Expectations
# --------------------------------------------------------------------------------------
@dataclasses.dataclass
class Expect:
    kind: str                        # "error", "zeros" or "ok"
    classes: Any = ()                # error: tuple of class names, or {mode: tuple}
    names: Any = ()                  # error: the message must contain one of these, or {mode: ...}
    stage: str = "kernel"            # error: "kernel", "wrapper" or "framework"
    shape: Optional[list] = None     # zeros / ok
    reference: bool = False          # ok: compare with reference.py

    @staticmethod
    def _for(value, mode):
        if not isinstance(value, dict):
            return value
        return value[mode] if mode in value or mode != "xla" else value["function"]

    def classes_for(self, mode):
        c = self._for(self.classes, mode)
        return (c,) if isinstance(c, str) else tuple(c)

    def names_for(self, mode):
        return tuple(self._for(self.names, mode))


def err(classes, *names):
    """An error raised by our kernel (eager and tf.function alike)."""
    return Expect("error", classes=classes, names=names, stage="kernel")


def inval(*names):
    return err("InvalidArgumentError", *names)


def unimpl(*names):
    return err("UnimplementedError", *names)


def wrapper_err(classes, *names):
    """Raised by our Python wrapper before any op is built."""
    return Expect("error", classes=classes, names=names, stage="wrapper")


def framework_err(classes, *names):
    """Raised by TF's op construction/dispatch before our kernel runs."""
    return Expect("error", classes=classes, names=names, stage="framework")


REFINER_MESSAGE = "Invalid value in tensor used for shape"


def refiner_negative(expect):
    """A sizes input holding a constant value below -1. Eagerly our kernel must reject it
    as `expect` says. While a graph is built (tf.function), TF's shape refiner may reject
    it first with ValueError "Invalid value in tensor used for shape: -4": our shape
    function reads the sizes input as a partial shape (MakeShapeFromShapeTensor), and the
    refiner then refuses values below -1, as it does for TF's built-in ops. This is a
    documented exception (tf_ops/tf/ops.cc), so it is allowed here, and only here."""
    eager = expect.classes_for("eager")
    return Expect("error", classes={"eager": eager, "function": eager + ("ValueError",)},
                  names={"eager": expect.names_for("eager"),
                         "function": expect.names_for("function") + (REFINER_MESSAGE,)},
                  stage="framework")


def zeros(shape):
    return Expect("zeros", shape=list(shape))


def ok(shape):
    return Expect("ok", shape=list(shape), reference=True)


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------
@dataclasses.dataclass
class Case:
    id: str
    op: str
    sizes: Any                 # value of the int32 sizes input (input_sizes / filter_sizes)
    data_shape: Any            # shape of `filter` (input-grad ops) or `input` (filter-grad ops)
    dy_shape: Any              # shape of `out_backprop`
    expect: Expect
    strides: Any = dataclasses.field(default_factory=lambda: [1, 1, 1, 1])
    padding: Any = "VALID"     # a string, or [before, after] pairs (explicit padding)
    data_format: str = "NHWC"
    dilations: Any = dataclasses.field(default_factory=lambda: [1, 1, 1, 1])
    dtype: str = "float32"     # dtype of the data tensor
    dy_dtype: Optional[str] = None  # dtype of out_backprop; default: dtype
    sizes_dtype: str = "int32"
    raw: bool = False          # call the generated op: `padding` a string, explicit_paddings below
    explicit_paddings: Any = dataclasses.field(default_factory=list)
    pass_filters_too: bool = False  # conv2d_input: pass both `filter` and `filters`
    note: str = ""

    @property
    def spec(self):
        return _ops.BY_KEY[self.op]

    @property
    def computes_input(self):
        return self.spec.computes == "input"

    @property
    def depthwise(self):
        return self.spec.depthwise

    @property
    def reduction_length(self):
        """Products summed per output element (see the op table), for a valid case."""
        filter_shape = self.data_shape if self.computes_input else self.sizes
        n, *hw = [self.dy_shape[i] for i in ((0, 1, 2) if self.data_format == "NHWC" else (0, 2, 3))]
        return self.spec.reduction_length(filter_shape, n, *hw)

    @property
    def sizes_name(self):
        return "`input_sizes`" if self.computes_input else "`filter_sizes`"

    @property
    def data_name(self):
        return "`filter`" if self.computes_input else "`input`"


def _tdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _out_size(n_in, k, s, d, padding, pb=0, pa=0):
    eff = (k - 1) * d + 1
    if padding == "VALID":
        return _tdiv(n_in - eff + s, s)
    if padding == "EXPLICIT":
        return _tdiv(n_in + pb + pa - eff + s, s)
    return _tdiv(n_in + s - 1, s)


def _order(fmt, n, h, w, c):
    return [n, h, w, c] if fmt == "NHWC" else [n, c, h, w]


def geometry(op, fmt="NHWC", n=2, h=5, w=4, c=3, kh=2, kw=2, m=2, sh=1, sw=1, dh=1, dw=1,
             padding="VALID", pads=(0, 0, 0, 0)):
    """A consistent (valid) set of Case fields; `m` is out channels or the depth multiplier."""
    spec = _ops.BY_KEY[op]
    top, bottom, left, right = pads
    oh = _out_size(h, kh, sh, dh, padding, top, bottom)
    ow = _out_size(w, kw, sw, dw, padding, left, right)
    input_shape = _order(fmt, n, h, w, c)
    filter_shape = [kh, kw, c, m]
    dy_shape = _order(fmt, n, oh, ow, c * m if spec.depthwise else m)
    computes_input = spec.computes == "input"
    fields = dict(
        sizes=input_shape if computes_input else filter_shape,
        data_shape=filter_shape if computes_input else input_shape,
        dy_shape=dy_shape,
        strides=_order(fmt, 1, sh, sw, 1),
        dilations=_order(fmt, 1, dh, dw, 1),
        data_format=fmt,
        padding=padding,
    )
    if padding == "EXPLICIT":
        fields["padding"] = _order(fmt, [0, 0], [top, bottom], [left, right], [0, 0])
    return fields


CASES = []


def add(case_id, op, expect, geo=None, **fields):
    """Adds a case: the valid `geo` (geometry() kwargs) overridden by `fields`."""
    base = geometry(op, **(geo or {}))
    base.update(fields)
    CASES.append(Case(id=case_id, op=op, expect=expect, **base))


def _result_shape(op, fields):
    """Shape of the gradient for a valid geometry: the sizes vector."""
    return list(fields["sizes"])


# ---- S: advisories -------------------------------------------------------------------
# S1: BF, empty input [0,0,1,0] (depth 0) vs filter_sizes depth 1, strides [1,66,18,1], SAME.
# Input depth 0 vs filter depth 1 is a channel mismatch (0 groups); the project's rule
# "input depth a multiple of filter depth -> Unimplemented" also covers 0 literally, so
# either class is accepted here, but the message must name `filter_sizes`.
add("S1_BF_empty_input_depth0_strides66x18", "conv2d_filter",
    err(TF_ERRORS, "`filter_sizes`"),
    sizes=[1, 1, 1, 1], data_shape=[0, 0, 1, 0], dy_shape=[0, 0, 1, 1],
    strides=[1, 66, 18, 1], padding="SAME")
add("S1_DF_analog", "depthwise_filter", inval("`filter_sizes`"),
    sizes=[1, 1, 1, 1], data_shape=[0, 0, 1, 0], dy_shape=[0, 0, 1, 1],
    strides=[1, 66, 18, 1], padding="SAME")
# S2: BI, empty filter [0,1,5,0]: zero gradient of shape input_sizes.
add("S2_BI_empty_filter", "conv2d_input", zeros([52, 1, 1, 5]),
    sizes=[52, 1, 1, 5], data_shape=[0, 1, 5, 0], dy_shape=[52, 1, 1, 0], padding="SAME")
add("S2_DI_analog", "depthwise_input", zeros([52, 1, 1, 5]),
    sizes=[52, 1, 1, 5], data_shape=[0, 1, 5, 0], dy_shape=[52, 1, 1, 0], padding="SAME")
# S3 (Conv2D forward, all shapes [0,0,0,0], SAME) and S6 (the same in graph mode: the
# function mode of each case runs our shape function): 2-D gradient analogs.
add("S3_BI_all_empty", "conv2d_input", zeros([0, 0, 0, 0]),
    sizes=[0, 0, 0, 0], data_shape=[0, 0, 0, 0], dy_shape=[0, 0, 0, 0], padding="SAME")
add("S3_DI_all_empty", "depthwise_input", zeros([0, 0, 0, 0]),
    sizes=[0, 0, 0, 0], data_shape=[0, 0, 0, 0], dy_shape=[0, 0, 0, 0], padding="SAME")
# S4: BF, every shape [0,0,0,0], SAME, use_cudnn_on_gpu False.
add("S4_BF_all_empty", "conv2d_filter", zeros([0, 0, 0, 0]),
    sizes=[0, 0, 0, 0], data_shape=[0, 0, 0, 0], dy_shape=[0, 0, 0, 0], padding="SAME")
add("S6_DF_all_empty", "depthwise_filter", zeros([0, 0, 0, 0]),
    sizes=[0, 0, 0, 0], data_shape=[0, 0, 0, 0], dy_shape=[0, 0, 0, 0], padding="SAME")
add("S6_BI_all_empty_NCHW", "conv2d_input", zeros([0, 0, 0, 0]),
    sizes=[0, 0, 0, 0], data_shape=[0, 0, 0, 0], dy_shape=[0, 0, 0, 0], padding="SAME",
    data_format="NCHW")
# S5: BF heap overflow: filter_sizes depth 1, input depth 2: 2 groups, which the output
# depth 1 cannot hold (TF's oneDNN text: "output depth must be evenly divisible by number
# of groups: 1 vs 2").
add("S5a_BF_grouped_filter_sizes", "conv2d_filter", inval("`filter_sizes`"),
    sizes=[1, 1, 1, 1], data_shape=[1, 1, 1, 2], dy_shape=[1, 1, 1, 1],
    strides=[1, 66, 49, 1])
add("S5a_BF_filter_sizes_depth_not_dividing", "conv2d_filter", inval("`filter_sizes`"),
    sizes=[1, 1, 3, 1], data_shape=[1, 1, 1, 2], dy_shape=[1, 1, 1, 1],
    strides=[1, 66, 49, 1])
# Grouped depths and a spatial mismatch (TF's text: "Size of out_backprop doesn't match
# computed").
add("S5b_BF_empty_batch_grouped", "conv2d_filter", inval("`out_backprop`"),
    sizes=[3, 8, 1, 1], data_shape=[0, 1, 1, 5], dy_shape=[0, 1, 1, 1],
    strides=[1, 66, 49, 1])
add("S5b_BF_empty_batch_spatial_mismatch", "conv2d_filter", inval("`out_backprop`"),
    sizes=[3, 8, 5, 1], data_shape=[0, 1, 1, 5], dy_shape=[0, 1, 1, 1],
    strides=[1, 66, 49, 1])
add("S5_DF_analog_depth_mismatch", "depthwise_filter", inval("`filter_sizes`"),
    sizes=[1, 1, 1, 1], data_shape=[1, 1, 1, 2], dy_shape=[1, 1, 1, 1],
    strides=[1, 66, 66, 1])
# S7: "empty filter tensor arguments".
add("S7_BI_empty_filter_out_depth0", "conv2d_input", zeros([1, 4, 4, 3]),
    sizes=[1, 4, 4, 3], data_shape=[3, 3, 3, 0], dy_shape=[1, 4, 4, 0], padding="SAME")
add("S7_DI_empty_filter_multiplier0", "depthwise_input", zeros([1, 4, 4, 3]),
    sizes=[1, 4, 4, 3], data_shape=[3, 3, 3, 0], dy_shape=[1, 4, 4, 0], padding="SAME")
# S8/S9: element-count overflow of the sizes vector.
for _op in OPS:
    _sz = f"`{_ops.BY_KEY[_op].sizes_arg}`"
    add(f"S8_{SHORT[_op]}_sizes_overflow_4x{BIG}", _op, inval(_sz), sizes=[BIG] * 4)
add("S9_DF_filter_sizes_13x1879048192", "depthwise_filter", inval("`filter_sizes`"),
    sizes=[BIG] * 13, data_shape=[1, 4, 4, 3], dy_shape=[1, 4, 4, 3], padding="SAME")
add("S9_DI_twin_input_sizes_13x1879048192", "depthwise_input", inval("`input_sizes`"),
    sizes=[BIG] * 13, data_shape=[1, 1, 48, 2], dy_shape=[1, 1, 48, 2], padding="SAME")
add("S9_BI_input_sizes_13x1879048192", "conv2d_input", inval("`input_sizes`"),
    sizes=[BIG] * 13)
add("S9_BF_filter_sizes_13x1879048192", "conv2d_filter", inval("`filter_sizes`"),
    sizes=[BIG] * 13)
# S10: a stride of 0 inside tf.function (Grappler's cost model divided by it), NCHW.
for _op in OPS:
    add(f"S10_{SHORT[_op]}_stride0_W_NCHW", _op, inval("`strides`"),
        geo=dict(fmt="NCHW"), strides=[1, 1, 1, 0])
# S11: BI, 2-element input_sizes, out_backprop a scalar.
add("S11_BI_2elem_sizes_scalar_out_backprop", "conv2d_input", inval("`out_backprop`"),
    sizes=[65534, 65534], data_shape=[3, 3, 2, 2], dy_shape=[], padding="SAME")
# S12: BI float64, out_backprop [3,1,0,3] (empty): zeros [3,1,1,2].
add("S12_BI_empty_out_backprop_f64", "conv2d_input", zeros([3, 1, 1, 2]),
    sizes=[3, 1, 1, 2], data_shape=[1, 3, 2, 3], dy_shape=[3, 1, 0, 3],
    strides=[1, 1, 2, 1], dtype="float64")
add("S12_DI_analog_f64", "depthwise_input", zeros([3, 1, 1, 2]),
    sizes=[3, 1, 1, 2], data_shape=[1, 3, 2, 3], dy_shape=[3, 1, 0, 6],
    strides=[1, 1, 2, 1], dtype="float64")
# S13: Conv2D forward, input [1,0,2,1], EXPLICIT [0,0,1,1,1,1,0,0]: gradient analogs.
_S13_PAD = [[0, 0], [1, 1], [1, 1], [0, 0]]
add("S13_BI_empty_rows_explicit", "conv2d_input", zeros([1, 0, 2, 1]),
    sizes=[1, 0, 2, 1], data_shape=[1, 1, 1, 1], dy_shape=[1, 2, 4, 1], padding=_S13_PAD)
add("S13_BF_empty_rows_explicit", "conv2d_filter", zeros([1, 1, 1, 1]),
    sizes=[1, 1, 1, 1], data_shape=[1, 0, 2, 1], dy_shape=[1, 2, 4, 1], padding=_S13_PAD)
add("S13_DI_empty_rows_explicit", "depthwise_input", zeros([1, 0, 2, 1]),
    sizes=[1, 0, 2, 1], data_shape=[1, 1, 1, 1], dy_shape=[1, 2, 4, 1], padding=_S13_PAD)
add("S13_DF_empty_rows_explicit", "depthwise_filter", zeros([1, 1, 1, 1]),
    sizes=[1, 1, 1, 1], data_shape=[1, 0, 2, 1], dy_shape=[1, 2, 4, 1], padding=_S13_PAD)
# S14: the three ranks disagree (Conv3D heap overflow): 2-D analogs.
add("S14a_BI_filter_rank5", "conv2d_input", inval("`filter`"),
    sizes=[1, 1, 1, 2], data_shape=[4, 1, 6, 1, 1], dy_shape=[1, 1, 1, 1],
    strides=[1, 89, 29, 1], padding="SAME")
add("S14b_BF_input_rank5", "conv2d_filter", inval("`input`"),
    sizes=[7, 7, 7, 1], data_shape=[7, 7, 7, 7, 7], dy_shape=[7, 1, 1, 1],
    strides=[1, 37, 65, 1])
add("S14_DI_out_backprop_rank5", "depthwise_input", inval("`out_backprop`"),
    sizes=[1, 1, 1, 2], data_shape=[4, 1, 2, 1], dy_shape=[1, 1, 1, 1, 2],
    strides=[1, 89, 89, 1], padding="SAME")
add("S14_DF_input_rank5", "depthwise_filter", inval("`input`"),
    sizes=[7, 7, 7, 1], data_shape=[7, 7, 7, 7, 7], dy_shape=[7, 1, 1, 7],
    strides=[1, 37, 37, 1])
# S15: all-empty shapes with filter in-depth 1 (input depth 0, see S1 on the class).
add("S15_BI_empty_filter_depth1", "conv2d_input", err(TF_ERRORS, "`filter`"),
    sizes=[0, 0, 0, 0], data_shape=[0, 0, 1, 0], dy_shape=[0, 0, 0, 0], padding="SAME")
add("S15_DI_empty_filter_depth1", "depthwise_input", inval("`filter`"),
    sizes=[0, 0, 0, 0], data_shape=[0, 0, 1, 0], dy_shape=[0, 0, 0, 0], padding="SAME")
# S16: a scalar filter_sizes (float16).
add("S16_BF_scalar_filter_sizes_f16", "conv2d_filter", inval("`filter_sizes`"),
    sizes=0, data_shape=[2, 2, 2, 1], dy_shape=[2, 1, 1, 1], dtype="float16")
add("S16_DF_scalar_filter_sizes_f16", "depthwise_filter", inval("`filter_sizes`"),
    sizes=0, data_shape=[2, 2, 2, 1], dy_shape=[2, 1, 1, 1], dtype="float16")

# ---- F: fuzzer crash reports ---------------------------------------------------------
add("F1_DI_stride0_dilations5", "depthwise_input", refiner_negative(inval("`strides`")),
    sizes=[-1024, 7, 1024], data_shape=[16, 3, 3, 5], dy_shape=[1, 0, 0, 1],
    strides=[1, 0, 1, 1], dilations=[1, 0, 77, 1, 64], dtype="bfloat16")
add("F1b_DI_dilations5", "depthwise_input", refiner_negative(inval("`dilations`")),
    sizes=[-1024, 7, 1024], data_shape=[16, 3, 3, 5], dy_shape=[1, 0, 0, 1],
    dilations=[1, 0, 77, 1, 64], dtype="bfloat16")
add("F2_DI_strides2_filter_rank1", "depthwise_input", inval("`strides`"),
    sizes=[1, 2, 2, 1], data_shape=[1], dy_shape=[1], strides=[1, 1], padding="SAME")
add("F2b_DI_filter_rank1", "depthwise_input", inval("`filter`"),
    sizes=[1, 2, 2, 1], data_shape=[1], dy_shape=[1], padding="SAME")
add("F2c_DI_filter_1d_out_backprop_2d", "depthwise_input", inval("`filter`"),
    sizes=[1, 2, 2, 1], data_shape=[4], dy_shape=[1, 1], padding="SAME")
add("F3_BI_strides3", "conv2d_input", inval("`strides`"),
    sizes=[1, 1, 1, 1], data_shape=[1, 1, 1, 1], dy_shape=[1, 1, 1, 1], strides=[1, 1, 1])
# 333333333 groups for an output depth of 2.
add("F4a_BI_huge_depth_grouped", "conv2d_input", inval("`filter`"),
    sizes=[1, 5, 5, 999999999], data_shape=[3, 3, 3, 2], dy_shape=[1, 5, 5, 2],
    padding="SAME")
add("F4a_BI_huge_depth_mismatch", "conv2d_input", inval("`filter`"),
    sizes=[1, 5, 5, 999999998], data_shape=[3, 3, 3, 2], dy_shape=[1, 5, 5, 2],
    padding="SAME")
add("F4b_BI_2elem_sizes_filter_rank1", "conv2d_input", inval("`filter`"),
    sizes=[1, 1], data_shape=[1], dy_shape=[1, 5, 5, 2], padding="SAME")
add("F5_BI_input_sizes_3elem", "conv2d_input", inval("`input_sizes`"),
    sizes=[8, 8, 3], data_shape=[3, 3, 3, 3], dy_shape=[1, 4, 4, 3],
    strides=[1, 2, 2, 1], padding="SAME")
add("F5b_BI_input_sizes_rank0", "conv2d_input", inval("`input_sizes`"),
    sizes=8, data_shape=[3, 3, 3, 3], dy_shape=[1, 4, 4, 3],
    strides=[1, 2, 2, 1], padding="SAME")
add("F6_BF_strides3", "conv2d_filter", inval("`strides`"), strides=[1, 1, 1])
add("F7_BF_strides5", "conv2d_filter", inval("`strides`"), strides=[1, 1, 1, 1, 1])
add("F7_DF_strides5", "depthwise_filter", inval("`strides`"), strides=[1, 1, 1, 1, 1])
add("F7_DI_strides5", "depthwise_input", inval("`strides`"), strides=[1, 1, 1, 1, 1])
# F8: GPU empty-launch hazard (Conv3D), 2-D analogs: zero batch.
add("F8_BI_zero_batch", "conv2d_input", zeros([0, 6, 1, 2]),
    sizes=[0, 6, 1, 2], data_shape=[3, 1, 2, 3], dy_shape=[0, 4, 1, 3])
add("F8_BF_zero_batch", "conv2d_filter", zeros([3, 1, 2, 3]),
    sizes=[3, 1, 2, 3], data_shape=[0, 6, 1, 2], dy_shape=[0, 4, 1, 3])
add("F8_DI_zero_batch", "depthwise_input", zeros([0, 6, 1, 2]),
    sizes=[0, 6, 1, 2], data_shape=[3, 1, 2, 3], dy_shape=[0, 4, 1, 6])
add("F8_DF_zero_batch", "depthwise_filter", zeros([3, 1, 2, 3]),
    sizes=[3, 1, 2, 3], data_shape=[0, 6, 1, 2], dy_shape=[0, 4, 1, 6])
# F9: aborts with oneDNN on.
add("F9_BI_negative_input_sizes", "conv2d_input", refiner_negative(inval("`input_sizes`")),
    sizes=[1, -4, 4, 2], data_shape=[1, 1, 2, 2], dy_shape=[1, 4, 4, 2])
add("F9_DI_negative_input_sizes", "depthwise_input", refiner_negative(inval("`input_sizes`")),
    sizes=[1, -4, 4, 2], data_shape=[1, 1, 2, 1], dy_shape=[1, 4, 4, 2])
add("F9_BF_input_rank3", "conv2d_filter", inval("`input`"),
    sizes=[1, 1, 2, 2], data_shape=[4, 4, 2], dy_shape=[1, 4, 4, 2])
add("F9_DI_input_sizes_rank0", "depthwise_input", inval("`input_sizes`"),
    sizes=4, data_shape=[1, 1, 2, 1], dy_shape=[1, 4, 4, 2])
# F10: VALID, a 4x4 filter on a 1x1 input (negative output size -2). Which argument is
# "wrong" is a matter of view, so any of the ones involved is accepted, but one must be named.
_NEG_NAMES = {
    "conv2d_input": ("`filter`", "`input_sizes`", "`out_backprop`", "`padding`"),
    "conv2d_filter": ("`filter_sizes`", "`input`", "`out_backprop`", "`padding`"),
    "depthwise_input": ("`filter`", "`input_sizes`", "`out_backprop`", "`padding`"),
    "depthwise_filter": ("`filter_sizes`", "`input`", "`out_backprop`", "`padding`"),
}
add("F10_BI_valid_filter_4x4_on_1x1", "conv2d_input", inval(*_NEG_NAMES["conv2d_input"]),
    sizes=[1, 1, 1, 2], data_shape=[4, 4, 2, 3], dy_shape=[1, 1, 1, 3])

# ---- N: our own fuzzing of TF ---------------------------------------------------------
for _op in OPS:
    add(f"N1_{SHORT[_op]}_stride_2pow40", _op, inval("`strides`"), strides=[1, 2**40, 1, 1])
add("N2_DF_stride0_W_NHWC", "depthwise_filter", inval("`strides`"), strides=[1, 1, 0, 1])
add("N2_DI_stride0_W_NHWC", "depthwise_input", inval("`strides`"), strides=[1, 1, 0, 1])
add("N3_DF_zero_batch_NHWC", "depthwise_filter", zeros([2, 2, 3, 2]), geo=dict(n=0))
add("N3_DF_zero_batch_NCHW", "depthwise_filter", zeros([2, 2, 3, 2]), geo=dict(n=0, fmt="NCHW"))
add("N3_DF_zero_batch_NCHW_bf16", "depthwise_filter", zeros([2, 2, 3, 2]),
    geo=dict(n=0, fmt="NCHW"), dtype="bfloat16")
add("N5_DI_input_sizes_rank0", "depthwise_input", inval("`input_sizes`"), sizes=0)
add("N5_DI_input_sizes_negative", "depthwise_input", refiner_negative(inval("`input_sizes`")),
    sizes=[2, -5, 4, 3])

# ---- Bad-input classes, generated for every op ----------------------------------------
_DTYPES = ("float32", "float64", "float16", "bfloat16")


def _shape_of_rank(r):
    return [2, 3, 2, 3, 2][:r] if r != 5 else [1, 2, 2, 2, 2]


for _i, _op in enumerate(OPS):
    S = SHORT[_op]
    _dw = _ops.BY_KEY[_op].depthwise
    _ci = _ops.BY_KEY[_op].computes == "input"
    SN = f"`{_ops.BY_KEY[_op].sizes_arg}`"
    DN = "`filter`" if _ci else "`input`"
    _g = geometry(_op)

    # Wrong ranks (0,1,2,3,5) of the data tensor and of out_backprop; rank 0/2 sizes.
    for _r in (0, 1, 2, 3, 5):
        add(f"{S}_rank{_r}_{DN.strip('`')}", _op, inval(DN), data_shape=_shape_of_rank(_r))
        add(f"{S}_rank{_r}_out_backprop", _op, inval("`out_backprop`"),
            dy_shape=_shape_of_rank(_r))
    add(f"{S}_sizes_rank0", _op, inval(SN), sizes=4)
    add(f"{S}_sizes_rank2", _op, inval(SN), sizes=[_g["sizes"][:2], _g["sizes"][2:]])

    # Sizes of the wrong length (length 2 is Conv2DBackpropInput's legal (rows, cols) form).
    if _op == "conv2d_input":
        add("BI_sizes_len2_rows_cols_NHWC", _op, ok([2, 5, 4, 3]), sizes=[5, 4])
        add("BI_sizes_len2_rows_cols_NCHW", _op, ok([2, 3, 5, 4]), geo=dict(fmt="NCHW"),
            sizes=[5, 4])
        add("BI_sizes_len2_negative", _op, inval("`input_sizes`"), sizes=[-5, 4])
        add("BI_sizes_len2_rows_mismatch", _op, inval("`out_backprop`"), sizes=[7, 4])
    else:
        add(f"{S}_sizes_len2", _op, inval(SN), sizes=_g["sizes"][:2])
    add(f"{S}_sizes_len3", _op, inval(SN), sizes=_g["sizes"][:3])
    add(f"{S}_sizes_len5", _op, inval(SN), sizes=_g["sizes"] + [1])
    add(f"{S}_sizes_len13", _op, inval(SN), sizes=[1] * 13)
    add(f"{S}_sizes_negative", _op, inval(SN), sizes=[-1 if j == 1 else v
                                                      for j, v in enumerate(_g["sizes"])])
    add(f"{S}_sizes_int32_min", _op, refiner_negative(inval(SN)), sizes=[-2**31] * 4)

    # Huge explicit paddings.
    add(f"{S}_explicit_pad_2pow62_both", _op,
        inval("`explicit_paddings`", "`padding`", "`out_backprop`"),
        padding=[[0, 0], [2**62, 2**62], [0, 0], [0, 0]])
    add(f"{S}_explicit_pad_2pow62_one", _op,
        inval("`explicit_paddings`", "`padding`", "`out_backprop`"),
        padding=[[0, 0], [0, 0], [2**62, 0], [0, 0]])
    add(f"{S}_explicit_pad_int64max", _op,
        inval("`explicit_paddings`", "`padding`", "`out_backprop`"),
        padding=[[0, 0], [2**63 - 1, 2**63 - 1], [0, 0], [0, 0]])

    # Strides and dilations.
    _nonbd = err("UnimplementedError" if _op == "conv2d_input" else "InvalidArgumentError",
                 "`strides`")
    _nonbd_d = err("UnimplementedError" if _op == "conv2d_input" else "InvalidArgumentError",
                   "`dilations`")
    for _attr, _nb in (("strides", _nonbd), ("dilations", _nonbd_d)):
        _n = f"`{_attr}`"
        add(f"{S}_{_attr}_len2", _op, inval(_n), **{_attr: [1, 1]})
        add(f"{S}_{_attr}_len3", _op, inval(_n), **{_attr: [1, 1, 1]})
        add(f"{S}_{_attr}_len5", _op, inval(_n), **{_attr: [1, 1, 1, 1, 1]})
        add(f"{S}_{_attr}_zero_rows", _op, inval(_n), **{_attr: [1, 0, 1, 1]})
        add(f"{S}_{_attr}_negative_cols", _op, inval(_n), **{_attr: [1, 1, -1, 1]})
        add(f"{S}_{_attr}_2pow40_cols", _op, inval(_n), **{_attr: [1, 1, 2**40, 1]})
        add(f"{S}_{_attr}_batch2_NHWC", _op, _nb, **{_attr: [2, 1, 1, 1]})
        add(f"{S}_{_attr}_depth2_NHWC", _op, _nb, **{_attr: [1, 1, 1, 2]})
        add(f"{S}_{_attr}_depth2_NCHW", _op, _nb, geo=dict(fmt="NCHW"), **{_attr: [1, 2, 1, 1]})
        add(f"{S}_{_attr}_batch2_NCHW", _op, _nb, geo=dict(fmt="NCHW"), **{_attr: [2, 1, 1, 1]})
        # NHWC-position values in an NCHW call: 2 lands on the depth dimension.
        add(f"{S}_{_attr}_nhwc_order_in_NCHW", _op, _nb, geo=dict(fmt="NCHW"),
            **{_attr: [1, 2, 2, 1]})
    add(f"{S}_strides_zero_NCHW_rows", _op, inval("`strides`"), geo=dict(fmt="NCHW"),
        strides=[1, 1, 0, 1])

    # Bad explicit paddings.
    add(f"{S}_explicit_pad_negative", _op, inval("`explicit_paddings`"),
        padding=[[0, 0], [-1, 0], [0, 0], [0, 0]])
    add(f"{S}_explicit_pad_batch_NHWC", _op, inval("`explicit_paddings`"),
        padding=[[1, 0], [0, 0], [0, 0], [0, 0]])
    add(f"{S}_explicit_pad_depth_NHWC", _op, inval("`explicit_paddings`"),
        padding=[[0, 0], [0, 0], [0, 0], [0, 1]])
    add(f"{S}_explicit_pad_depth_NCHW", _op, inval("`explicit_paddings`"),
        geo=dict(fmt="NCHW"), padding=[[0, 0], [1, 1], [0, 0], [0, 0]])
    add(f"{S}_explicit_paddings_len6_raw", _op, inval("`explicit_paddings`"),
        raw=True, padding="EXPLICIT", explicit_paddings=[0, 0, 0, 0, 0, 0])
    add(f"{S}_explicit_paddings_with_SAME_raw", _op, inval("`explicit_paddings`"),
        raw=True, geo=dict(padding="SAME"), padding="SAME",
        explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0])
    add(f"{S}_explicit_paddings_empty_with_EXPLICIT_raw", _op, inval("`explicit_paddings`"),
        raw=True, padding="EXPLICIT", explicit_paddings=[])

    # Mismatches between the three tensors.
    _in_shape = _g["sizes"] if _ci else _g["data_shape"]
    _f_shape = _g["data_shape"] if _ci else _g["sizes"]
    _io = "sizes" if _ci else "data_shape"   # the field holding the input shape
    _fo = "data_shape" if _ci else "sizes"   # the field holding the filter shape
    add(f"{S}_batch_mismatch", _op,
        inval("`input_sizes`" if _ci else "`input`", "`out_backprop`"),
        dy_shape=[3] + _g["dy_shape"][1:])
    # Channels: filter in-depth 2 vs input depth 3 (not a divisor).
    add(f"{S}_channel_mismatch", _op, inval(DN if _ci else SN),
        **{_fo: [2, 2, 2, 2]})
    if not _dw:
        # Grouped: input depth 6 a multiple of filter depth 3 (2 groups of the 2 outputs).
        _gi = list(_in_shape)
        _gi[3] = 6
        add(f"{S}_grouped_input_depth_6_filter_depth_3", _op,
            ok(_gi if _ci else _f_shape), **{_io: _gi})
        # 2 groups cannot share 3 output channels.
        add(f"{S}_grouped_out_depth_not_multiple", _op,
            inval(DN if _ci else SN), **{_io: _gi, _fo: _f_shape[:3] + [3],
                                         "dy_shape": _g["dy_shape"][:3] + [3]})
        # Zero groups: no input channels under a filter that reads three.
        _zi = list(_in_shape)
        _zi[3] = 0
        add(f"{S}_grouped_zero_groups", _op, inval(DN if _ci else SN), **{_io: _zi})
        add(f"{S}_out_depth_mismatch", _op, inval(DN if _ci else SN, "`out_backprop`"),
            dy_shape=_g["dy_shape"][:3] + [5])
        add(f"{S}_filter_depth0_input_depth3", _op, inval(DN if _ci else SN),
            **{_fo: [2, 2, 0, 2]})
    else:
        add(f"{S}_depth_multiplier_mismatch", _op, inval("`out_backprop`"),
            dy_shape=_g["dy_shape"][:3] + [5])
        add(f"{S}_depth_multiplier_mismatch_multiple", _op, inval("`out_backprop`"),
            dy_shape=_g["dy_shape"][:3] + [3])
        add(f"{S}_filter_in_depth_is_out_depth", _op, inval(DN if _ci else SN),
            **{_fo: [2, 2, 6, 1]})
    add(f"{S}_out_backprop_rows_mismatch", _op, inval("`out_backprop`"),
        dy_shape=[2, 5, 3, _g["dy_shape"][3]])
    add(f"{S}_out_backprop_cols_mismatch_NCHW", _op, inval("`out_backprop`"),
        geo=dict(fmt="NCHW"), dy_shape=[2, 6 if _dw else 2, 4, 2])
    add(f"{S}_out_backprop_rows_mismatch_SAME_stride2", _op, inval("`out_backprop`"),
        geo=dict(padding="SAME", sh=2, sw=2), dy_shape=[2, 2, 2, _g["dy_shape"][3]])
    add(f"{S}_out_backprop_rows_mismatch_dilated", _op, inval("`out_backprop`"),
        geo=dict(dh=2, dw=2), dy_shape=_g["dy_shape"])   # dilation 2 shrinks it to 3x2
    # VALID with the filter larger than the input: negative output size.
    add(f"{S}_valid_filter_larger_than_input", _op, inval(*_NEG_NAMES[_op]),
        geo=dict(h=1, w=1, kh=4, kw=4), dy_shape=[2, 1, 1, _g["dy_shape"][3]])
    # ... while a truncated-to-zero output is legal (in=1, k=4, s=2: out 0): zeros.
    add(f"{S}_valid_filter_larger_output_truncates_to_0", _op,
        zeros(_result_shape(_op, geometry(_op, h=1, w=1, kh=4, kw=4))),
        geo=dict(h=1, w=1, kh=4, kw=4, sh=2, sw=2))

    # Empty tensors in every position, NHWC and NCHW (SAME where a 0 would make VALID
    # negative). The data tensors hold nonzero values, so zeros are a real check.
    for _fmt in ("NHWC", "NCHW"):
        for _what, _kw in (("batch0", dict(n=0)),
                           ("rows0", dict(h=0, padding="SAME")),
                           ("cols0", dict(w=0, padding="SAME")),
                           ("in_depth0", dict(c=0)),
                           ("multiplier0" if _dw else "out_depth0",
                            dict(m=0)),
                           ("filter_rows0", dict(kh=0, padding="SAME")),
                           ("filter_cols0_stride2", dict(kw=0, padding="SAME", sh=2, sw=2))):
            _geo = dict(fmt=_fmt, **_kw)
            _j = len(CASES)
            add(f"{S}_empty_{_what}_{_fmt}", _op,
                zeros(_result_shape(_op, geometry(_op, **_geo))), geo=_geo,
                dtype=_DTYPES[_j % 4])

    # Legal but extreme: every tap of a huge dilation lands in the SAME padding: zeros.
    add(f"{S}_huge_dilation_all_taps_in_padding", _op,
        zeros(_result_shape(_op, geometry(_op, h=1, w=1, dh=2**31 - 1, dw=2**31 - 1,
                                          padding="SAME"))),
        geo=dict(h=1, w=1, dh=2**31 - 1, dw=2**31 - 1, padding="SAME"))
    # A huge stride that leaves one output pixel: a normal result.
    add(f"{S}_stride_int32max", _op,
        ok(_result_shape(_op, geometry(_op, sh=2**31 - 1, sw=2**31 - 1))),
        geo=dict(sh=2**31 - 1, sw=2**31 - 1))

    # Python-level errors (our wrapper).
    add(f"{S}_padding_string_EXPLICIT", _op, wrapper_err("ValueError", "padding"),
        padding="EXPLICIT")
    add(f"{S}_padding_list_3_pairs", _op, wrapper_err("ValueError", "padding"),
        padding=[[0, 0], [1, 1], [0, 0]])
    add(f"{S}_padding_list_bad_pair", _op, wrapper_err("ValueError", "padding"),
        padding=[[0, 0], [1, 1, 1], [0, 0], [0, 0]])

    # Framework-level errors (TF's op construction / eager dispatch).
    _eager_or = lambda fn_cls: {"eager": ("InvalidArgumentError",), "function": fn_cls}  # noqa: E731
    if _i % 2 == 0:
        # Conv2DBackpropInput takes int32 (as TF's does); neither takes int64.
        _dt = "int64" if _op == "conv2d_input" else "int32"
        add(f"{S}_dtype_{_dt}", _op, framework_err(_eager_or(("TypeError",)), "T"), dtype=_dt)
        add(f"{S}_sizes_int64", _op, framework_err(_eager_or(("TypeError",)), "int32"),
            sizes_dtype="int64")
    else:
        add(f"{S}_mixed_dtypes", _op, framework_err(_eager_or(("TypeError",)), "double", "float64"),
            dy_dtype="float64")
        add(f"{S}_sizes_float32", _op, framework_err(_eager_or(("TypeError",)), "int32"),
            sizes_dtype="float32")
    add(f"{S}_data_format_NCWH", _op,
        framework_err(_eager_or(("ValueError",)), "data_format"), data_format="NCWH")
    add(f"{S}_padding_FOO", _op, framework_err(_eager_or(("ValueError",)), "padding"),
        padding="FOO")
    add(f"{S}_strides_int", _op, framework_err(("TypeError",), "strides"), strides=1)
    add(f"{S}_explicit_pad_2pow63", _op,
        framework_err({"eager": ("OverflowError", "ValueError", "TypeError"),
                       "function": ("ValueError", "TypeError", "OverflowError")}),
        padding=[[0, 0], [2**63, 0], [0, 0], [0, 0]])

# A few single ones.
add("BI_strides_None", "conv2d_input",
    Expect("error", classes={"eager": ("InvalidArgumentError",), "function": ("TypeError",)},
           names=("strides",), stage="framework"), strides=None)
add("BI_filter_and_filters", "conv2d_input", wrapper_err("ValueError", "filters"),
    pass_filters_too=True)
# The (rows, cols) form of input_sizes whose full shape overflows int64 (batch 3 from
# out_backprop, depth 3 from the filter, 3 * 3 * (2**31-1)**2 elements).
add("BI_sizes_len2_element_count_overflow", "conv2d_input", inval("`input_sizes`"),
    sizes=[2**31 - 1, 2**31 - 1], data_shape=[1, 1, 3, 2], dy_shape=[3, 1, 1, 2],
    strides=[1, 2**31 - 1, 2**31 - 1, 1])
# Empty, but invalid: the shapes must be validated before the zero-fill shortcut (TF with
# oneDNN returns zeros for S5b and F10 without validating).
add("BI_empty_batch_but_channel_mismatch", "conv2d_input", inval("`filter`"),
    geo=dict(n=0), data_shape=[2, 2, 2, 2])
add("BF_empty_batch_but_out_depth_mismatch", "conv2d_filter",
    inval("`filter_sizes`", "`out_backprop`"), geo=dict(n=0), dy_shape=[0, 4, 3, 5])
add("DI_empty_out_backprop_but_rows_mismatch", "depthwise_input", inval("`out_backprop`"),
    geo=dict(m=0), dy_shape=[2, 5, 3, 0])
add("DF_empty_batch_but_rows_mismatch_NCHW", "depthwise_filter", inval("`out_backprop`"),
    geo=dict(n=0, fmt="NCHW"), dy_shape=[0, 6, 5, 3])
add("DF_empty_input_depth_but_multiplier_mismatch", "depthwise_filter", inval("`out_backprop`"),
    geo=dict(c=0), dy_shape=[2, 4, 3, 1])
# EXPLICIT padding whose padded size is near INT64_MAX with an empty filter and a huge
# dilation (effective filter size 2 - 2**31): the output-size arithmetic must not overflow.
add("BI_explicit_pad_near_int64max_empty_filter_huge_dilation", "conv2d_input",
    inval("`explicit_paddings`", "`padding`", "`out_backprop`"),
    sizes=[1, 1, 1, 1], data_shape=[0, 1, 1, 1], dy_shape=[1, 1, 1, 1],
    dilations=[1, 2**31 - 1, 1, 1], padding=[[0, 0], [2**62, 2**62 - 2], [0, 0], [0, 0]])
# Not in the table: a legal output too big to allocate (e.g. BF, filter_sizes
# [2**31-1, 2**31-1, 1, 1], input/out_backprop [1,1,1,1], SAME) gives a clean
# ResourceExhaustedError, but only after TF's allocator retries for 10 s (20 s in a
# tf.function, where Grappler's constant folding tries first), too slow for this file.

CASES_BY_ID = {c.id: c for c in CASES}
assert len(CASES_BY_ID) == len(CASES), "duplicate case ids"
CASE_IDS = [c.id for c in CASES]


# --------------------------------------------------------------------------------------
# Running a case (in the worker process)
# --------------------------------------------------------------------------------------
def _values(shape, dtype):
    """Deterministic nonzero values in (0, 1], so a missing zero-fill shows."""
    shape = list(shape)
    n = int(np.prod(shape)) if shape else 1
    v = ((np.arange(n, dtype=np.int64) * 37) % 11 + 1) / 11.0
    return v.reshape(shape)


def _rounded(tf, shape, dtype):
    """_values in `dtype`: what the op is given (and the reference too)."""
    return _values(shape, dtype).astype(tf.as_dtype(dtype).as_numpy_dtype)


def _tensor(tf, shape, dtype):
    return tf.constant(_rounded(tf, shape, dtype), dtype=tf.as_dtype(dtype))


def _sizes_tensor(tf, case):
    dt = tf.as_dtype(case.sizes_dtype)
    return tf.constant(np.array(case.sizes, dtype=dt.as_numpy_dtype), dtype=dt)


def _invoke(case, sizes, data, dy, builtin=False):
    """Calls our op, or with `builtin` TF's own op with the same arguments."""
    import tensorflow as tf
    import tf_conv_backprop as tcb
    from tf_conv_backprop._loader import load_library

    first, second = (sizes, data) if case.computes_input else (data, sizes)
    if builtin:
        if case.raw:
            names = ("input_sizes", "filter") if case.computes_input else ("input", "filter_sizes")
            return getattr(tf.raw_ops, case.spec.tf_op_name)(
                **{names[0]: first, names[1]: second}, out_backprop=dy, strides=case.strides,
                padding=case.padding, explicit_paddings=case.explicit_paddings,
                data_format=case.data_format, dilations=case.dilations)
        extra = {"filters": second} if case.pass_filters_too else {}
        return case.spec.tf_reference(first, second, dy, case.strides, case.padding,
                                      data_format=case.data_format, dilations=case.dilations,
                                      **extra)
    if case.raw:
        fn = getattr(load_library(), case.spec.generated)
        return fn(first, second, dy, strides=case.strides, padding=case.padding,
                  explicit_paddings=case.explicit_paddings, data_format=case.data_format,
                  dilations=case.dilations)
    fn = getattr(tcb.compat.v1.nn, case.spec.names[0])
    extra = {"filters": second} if case.pass_filters_too else {}
    return fn(first, second, dy, case.strides, case.padding, data_format=case.data_format,
              dilations=case.dilations, **extra)


def _reference_error(case, result):
    """The op table's relative error of ours against the float64 reference, which is
    given the same (rounded to the case's dtype) inputs as the op."""
    import reference
    import tensorflow as tf

    fn = reference.backprop(case.spec)
    sizes = list(case.sizes)
    if case.op == "conv2d_input" and len(sizes) == 2:
        n = case.dy_shape[0]
        c = case.data_shape[2]
        sizes = [n, sizes[0], sizes[1], c] if case.data_format == "NHWC" else [n, c, *sizes]
    padding, explicit = case.padding, []
    if isinstance(padding, (list, tuple)):
        padding, explicit = "EXPLICIT", [p for pair in case.padding for p in pair]
    data = _rounded(tf, case.data_shape, case.dtype)
    dy = _rounded(tf, case.dy_shape, case.dy_dtype or case.dtype)
    ref = fn(sizes, data, dy, case.strides, padding, explicit_paddings=explicit,
             data_format=case.data_format, dilations=case.dilations) if case.computes_input \
        else fn(data, sizes, dy, case.strides, padding, explicit_paddings=explicit,
                data_format=case.data_format, dilations=case.dilations)
    return _ops.relative_error(result, ref)


def run_case(case_id, mode, builtin=False):
    """Runs one case eagerly or in a tf.function (with `builtin`, on TF's own op);
    returns a JSON-able dict."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    case = CASES_BY_ID[case_id]
    dy_dtype = case.dy_dtype or case.dtype

    def build_and_call():
        return _invoke(case, _sizes_tensor(tf, case), _tensor(tf, case.data_shape, case.dtype),
                       _tensor(tf, case.dy_shape, dy_dtype), builtin=builtin)

    try:
        if mode == "eager":
            out = build_and_call()
        elif mode == "function":
            # Constants created inside: the shape functions see their values, and
            # Grappler may constant-fold the op (running the kernel) while optimizing.
            out = tf.function(build_and_call, autograph=False)()
        elif mode == "xla":
            out = tf.function(build_and_call, autograph=False, jit_compile=True)()
        else:
            raise ValueError(f"unknown mode {mode!r}")
        arr = np.asarray(out.numpy()).astype(np.float64)
    except Exception as e:  # noqa: BLE001 - every exception is a result here
        return {"outcome": "error", "class": type(e).__name__, "message": str(e)[:4000]}
    result = {"outcome": "ok", "shape": list(arr.shape), "all_zero": bool(not np.any(arr)),
              "finite": bool(np.all(np.isfinite(arr)))}
    if case.expect.reference:
        try:
            result["ref_error"] = _reference_error(case, arr)
        except Exception as e:  # noqa: BLE001
            result["ref_error"] = f"reference failed: {type(e).__name__}: {e}"
    return result


def warm_up():
    """Imports TensorFlow and loads the op library (the slow part of a fresh worker)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # noqa: F401
    from tf_conv_backprop._loader import load_library
    load_library()
    return os.getpid()


def abort_worker():
    """Kills the calling process with SIGABRT: used to prove the crash isolation."""
    os.abort()


def hang_worker(seconds):
    """Sleeps: used to prove the per-call timeout."""
    import time
    time.sleep(seconds)
    return "woke up"
