"""The op table: one row per op, and how a result of each dtype is judged. Wrappers,
tests, the report, the benchmark and the GPU check iterate over it, so a fifth op is a
fifth row.

Nothing here imports TensorFlow or NumPy at import time: the GPU check
(tests/core/gpu_check.py) and the bad-input table load this file by path
(tests/op_table.py), without the package (whose __init__ imports TensorFlow), on
machines that may have neither.
"""
import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class OpSpec:
    key: str            # id in tests, reports and the benchmark
    short: str          # two-letter id in test-case and fuzz-corpus names
    op_name: str        # our registered op
    tf_op_name: str     # TF's built-in op it mirrors
    generated: str      # name of the generated Python function in the loaded module
    names: tuple        # TF's public names for it, all in tf.compat.v1.nn; the first is canonical
    v2_names: tuple     # those also in tf.nn / tf.compat.v2.nn
    sizes_arg: str      # which argument is the int32 sizes vector
    computes: str       # "input" or "filter": what the gradient is taken with respect to
    depthwise: bool
    use_cudnn_on_gpu: bool  # whether the op carries TF's use_cudnn_on_gpu attribute
    exact_dtypes: tuple = ()  # the EXACT_DTYPES it takes too (TF's set for the op)

    @property
    def dtypes(self):
        """Every dtype the op takes: DTYPES, then its exact ones."""
        return DTYPES + self.exact_dtypes

    @property
    def tf_reference(self):
        """TF's public function with the same signature (imports TensorFlow)."""
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        return getattr(tf.compat.v1.nn, self.names[0])

    def reduction_length(self, filter_shape, batch, out_rows, out_cols):
        """How many products one output element sums (at most): the filter taps times the
        filter's last dimension (output depth, or depth multiplier) for an input gradient;
        every output position of the batch for a filter gradient."""
        rows, cols, _, last = filter_shape
        if self.computes == "input":
            return rows * cols * last
        return batch * out_rows * out_cols


# In the core's OpKind order: the GPU check and the fuzz corpus name ops by position.
OPS = (
    OpSpec("conv2d_input", "BI", "ConvBackprop>Conv2DBackpropInput", "Conv2DBackpropInput",
           "conv_backprop_conv2d_backprop_input", ("conv2d_backprop_input",), (),
           "input_sizes", "input", False, True, exact_dtypes=("int32",)),
    OpSpec("conv2d_filter", "BF", "ConvBackprop>Conv2DBackpropFilter", "Conv2DBackpropFilter",
           "conv_backprop_conv2d_backprop_filter", ("conv2d_backprop_filter",), (),
           "filter_sizes", "filter", False, True),
    OpSpec("depthwise_input", "DI", "ConvBackprop>DepthwiseConv2dNativeBackpropInput",
           "DepthwiseConv2dNativeBackpropInput",
           "conv_backprop_depthwise_conv2d_native_backprop_input",
           ("depthwise_conv2d_backprop_input", "depthwise_conv2d_native_backprop_input"),
           ("depthwise_conv2d_backprop_input",), "input_sizes", "input", True, False),
    OpSpec("depthwise_filter", "DF", "ConvBackprop>DepthwiseConv2dNativeBackpropFilter",
           "DepthwiseConv2dNativeBackpropFilter",
           "conv_backprop_depthwise_conv2d_native_backprop_filter",
           ("depthwise_conv2d_backprop_filter", "depthwise_conv2d_native_backprop_filter"),
           ("depthwise_conv2d_backprop_filter",), "filter_sizes", "filter", True, False),
)

BY_KEY = {op.key: op for op in OPS}
BY_NAME = {name: op for op in OPS for name in op.names}

# The floating dtypes, which every op takes, then the integer ones, which only the ops
# listing them in `exact_dtypes` take (TF 2.21: int32 in Conv2DBackpropInput alone).
# ALL_DTYPES is the core's DType order. Each has its unit roundoff u = 2**-(significand
# bits) and the dtype our kernels (CPU, GPU and XLA's lowering) accumulate its sums in;
# int32 sums are exact modulo 2**32 (two's-complement wrap-around, as TF's int32
# kernel), so its u is 0 and so is its tolerance.
DTYPES = ("float16", "bfloat16", "float32", "float64")
EXACT_DTYPES = ("int32",)
ALL_DTYPES = DTYPES + EXACT_DTYPES
UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24,
                 "float64": 2.0 ** -53, "int32": 0.0}
ACCUMULATES_IN = {"float16": "float32", "bfloat16": "float32", "float32": "float32",
                  "float64": "float64", "int32": "int32"}


# The budget over the expected error. A correctly rounded result is within u of the
# exact one; TF's 16-bit kernels land up to 4 u from ours (seen on the wide-channel
# bfloat16 depthwise filter gradient), which twice 2.5 u (two approximations) covers.
SLACK = 2.5


def tolerance(dtype, reduction_length, cancellation=1.0, accumulator=None):
    """The budget for relative_error(result, exact) of a `dtype` gradient whose elements
    each sum `reduction_length` products, `exact` computed in float64 from the same
    (already rounded) inputs. `accumulator`: the dtype the sums run in, when not ours
    (ACCUMULATES_IN; the tests judge some of TF's float16 kernels, which sum in float16).

    Rounding the result to `dtype` costs at most u(dtype) in this norm. Summing n terms
    of random sign in the accumulator costs about sqrt(n) u(accumulator) (probabilistic
    rounding error analysis: Higham and Mary, 2019) times the terms' own size,
    ||sqrt(sum of squared terms)||, which is the result's size unless the sums cancel: `cancellation` is their ratio (reference.cancellation in the tests; about 1
    for random data, the default for problems too big to compute it). The budget is
    SLACK times the sum; the float64 reference's own rounding, which matters only for
    float64 results, is of the same size as ours and well inside it.
    """
    n = max(int(reduction_length), 1)
    # Sums of one sign (all-positive data) have a ratio of about 1/sqrt(n), yet their
    # rounding error still grows about as sqrt(n) u (a random walk over partial sums of
    # one sign): a ratio below 1 budgets as 1.
    cancellation = max(1.0, cancellation)
    accumulation = math.sqrt(n) * cancellation * UNIT_ROUNDOFF[accumulator or ACCUMULATES_IN[dtype]]
    return SLACK * (UNIT_ROUNDOFF[dtype] + accumulation)


def relative_error(got, want):
    """||got - want|| / ||want|| (||got - want|| when want is zero), in float64. A shape
    mismatch gives inf and a non-finite `got` NaN, so neither passes `within`."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    if not np.all(np.isfinite(got)):
        return float("nan")
    denom = np.linalg.norm(want)
    diff = np.linalg.norm(got - want)
    return float(diff / denom) if denom > 0 else float(diff)


def within(err, dtype, reduction_length, factor=1, cancellation=1.0):
    """Whether a relative error is within `factor` tolerances. Two results that are each
    within tolerance of the exact one differ by at most twice it: pass factor=2 when
    neither side is the float64 reference. NaN never passes."""
    return err == err and err <= factor * tolerance(dtype, reduction_length, cancellation)
