"""The gradient cases of TensorFlow's own kernel tests for these ops, as data.

TensorFlow 2.21 tests its convolution gradients in tensorflow/python/kernel_tests/nn_ops/
(not shipped in the wheel): conv_ops_test.py, conv2d_transpose_test.py,
conv2d_backprop_filter_grad_test.py, conv1d_test.py and depthwise_conv_op_base.py (run by
depthwise_conv_op_test.py), and conv1d_transpose_test.py (read from the stored copy of
TF's tree, which may predate 2.21; conv1d_test.py has its VALID case). Their code is not
copied here: only their cases are, one record each, with
what TF's test feeds the op, what it expects, and the TF test it comes from.
tests/test_tf_kernel_cases.py runs them against our ops.

Conventions of the records:
  - Shapes are NHWC ([batch, rows, cols, depth]; filters [rows, cols, in, out or
    multiplier]); `data_formats` says which layouts a case runs in. TF runs NCHW on a
    CUDA GPU only; ours runs it on CPU, so every case TF runs in NCHW on a GPU runs in
    NCHW here, on CPU.
  - strides, dilations: (rows, cols). padding: "SAME", "VALID" or ((top, bottom),
    (left, right)).
  - `expected` is TF's hard-coded result, flattened in NHWC order; for
    conv2d_transpose / conv1d_transpose cases `counts` gives TF's per-position expected
    sums instead: with all-ones inputs the result at (row, col) is
    in_depth * counts[0][row] * counts[1][col] (TF's loops state it per position).
  - `data` names how TF fills the tensors (DATA below), so that values match TF's.

Sampling (TF's loops exhaust these; we keep the file fast):
  - DepthwiseConv2DBase's CPU-vs-GPU comparisons (ConfigsToTest / ConfigsToTestExplicit,
    shapes up to 3x299x299x3) become comparisons against the NumPy reference on the
    configs with at most MAX_COMPARE_ELEMENTS input elements; the larger ones are listed
    in SKIPPED_COMPARE_CONFIGS.
  - TF's finite-difference gradient checker runs on the float32 NHWC variant of each
    gradient-checker case (as TF's float32 pass does); the other dtypes and NCHW compare
    our gradient with the float64 reference (TF compares them with float32's gradient).
"""
import dataclasses
from typing import Any, Optional

CONV = "conv_ops_test.py::Conv2DTest::"
TRANSPOSE = "conv2d_transpose_test.py::Conv2DTransposeTest::"
FILTER_GRAD = "conv2d_backprop_filter_grad_test.py::Conv2DBackpropFilterGradTest::"
CONV1D = "conv1d_test.py::Conv1DTest::"
CONV1D_T = "conv1d_transpose_test.py::Conv1DTransposeTest::"
DEPTHWISE = "depthwise_conv_op_base.py::DepthwiseConv2DBase::"

SOURCE_FILES = ("conv_ops_test.py", "conv2d_transpose_test.py",
                "conv2d_backprop_filter_grad_test.py", "conv1d_test.py",
                "conv1d_transpose_test.py", "depthwise_conv_op_base.py")

# How TF's tests fill their tensors (see test_tf_kernel_cases.make_data):
DATA = {
    "count": "1, 2, ..., n in row-major order (TF's _CreateNumpyTensor, "
             "[f * 1.0 for f in range(1, n + 1)])",
    "ramp": "x / n for x in 0 .. n-1 (TF's gradient checkers)",
    "ones": "all ones (conv2d_transpose / conv1d_transpose tests)",
    "seed1_pm1": "np.random.seed(1), then 2 * random_sample(shape) - 1 for the input, "
                 "then for out_backprop (conv2d_backprop_filter_grad_test)",
    "seed1_unit": "np.random.seed(1), then random_sample(shape) for x, then the filter "
                  "(the transpose tests' testGradient)",
    "random": "uniform [0, 1) from a seeded generator (TF: unseeded np.random.rand)",
}

KINDS = {
    "values": "call the op; check TF's expected values (if any) and the reference",
    "explicit": "explicit padding; TF's expectation is the op with VALID padding on the "
                "padded input, cropped; and the reference",
    "dilated_grad": "tf.gradients of a dilated conv2d w.r.t. input or filter (upstream "
                    "ones); TF compares with tf.nn.convolution's gradient: the reference",
    "grad_check": "gradient of conv2d / depthwise_conv2d: TF's gradient checker (float32 "
                  "NHWC) and the reference, with the graph holding our op",
    "transpose": "conv2d_transpose / conv1d_transpose of ones: TF's per-position sums",
    "transpose_grad": "gradient checker of conv2d_transpose / conv1d_transpose: our "
                      "Conv2DBackpropInput's registered gradient",
    "filter_grad_grad": "gradient checker of conv2d_backprop_filter w.r.t. input and "
                        "out_backprop: our Conv2DBackpropFilter's registered gradient",
    "compare": "TF compares GPU with CPU on random data; we compare with the reference",
    "shape": "static output shape of conv2d_transpose with a partly known output_shape",
}


@dataclasses.dataclass(frozen=True)
class Case:
    source: str                 # TF test "file::Class::test"
    kind: str                   # KINDS
    op: str                     # op table key of the op under test
    input_shape: tuple          # NHWC (NWC for conv1d_transpose cases)
    filter_shape: tuple
    out_shape: Optional[tuple] = None  # out_backprop, where TF states it (checked)
    strides: tuple = (1, 1)
    dilations: tuple = (1, 1)
    padding: Any = "VALID"
    dtypes: tuple = ("float32",)
    data_formats: tuple = ("NHWC", "NCHW")
    data: str = "count"
    expected: Optional[tuple] = None
    counts: Optional[tuple] = None
    max_err: Optional[float] = None    # TF's gradient-checker bound
    input_sizes: Optional[tuple] = None  # TF's input_sizes where not input_shape
    sub: int = 0                # index of the call within the TF test

    @property
    def one_d(self):
        return len(self.input_shape) == 3


@dataclasses.dataclass(frozen=True)
class ErrorCase:
    source: str
    call: str                   # "wrapper": our op's TF-named function; or "conv2d_transpose"
    op: str
    args: dict                  # values: ("ones", shape) = np.ones(shape) (float64, as
                                # TF), ("fill", value, shape, dtype), or a literal
    errors: tuple               # the exception classes TF's test accepts
    match: Optional[str] = None  # TF's regex (assertRaisesRegex), None for assertRaises
    isolated: bool = False      # could crash the process: run in a child process
    sub: int = 0


FLOATS = ("float32", "float16", "float64")   # Conv2DTest._DtypesToTest (CPU, no MKL)
ALL_FLOATS = ("float16", "bfloat16", "float32", "float64")


def _pad(*pairs):
    return tuple(tuple(p) for p in pairs)


# --------------------------------------------------------------------------------------
# conv_ops_test.py :: Conv2DTest
# --------------------------------------------------------------------------------------

def _input_values(name, input_shape, filter_shape, out_shape, expected, strides=(1, 1),
                  padding="VALID", input_sizes=None):
    # _RunAndVerifyBackpropInput: float32 only (no dtype loop); filter and out_backprop
    # are "count" tensors.
    return Case(CONV + name, "values", "conv2d_input", input_shape, filter_shape, out_shape,
                strides, padding=padding, expected=tuple(expected), input_sizes=input_sizes)


def _filter_values(name, input_shape, filter_shape, out_shape, expected, strides=(1, 1),
                   padding="VALID"):
    # _RunAndVerifyBackpropFilter loops over _DtypesToTest.
    return Case(CONV + name, "values", "conv2d_filter", input_shape, filter_shape, out_shape,
                strides, padding=padding, dtypes=FLOATS, expected=tuple(expected))


CONV_VALUES = (
    _input_values("testConv2D2x2Depth1ValidBackpropInput", (1, 2, 3, 1), (2, 2, 1, 1),
                  (1, 1, 2, 1), [1, 4, 4, 3, 10, 8]),
    _input_values("testConv2DEmptyBackpropInput", (0, 2, 3, 1), (2, 2, 1, 1), (0, 1, 2, 1),
                  []),
    _input_values("testConv2D2x2Depth3ValidBackpropInput", (1, 2, 3, 3), (2, 2, 3, 3),
                  (1, 1, 2, 3), [14, 32, 50, 100, 163, 226, 167, 212, 257, 122, 140, 158,
                                 478, 541, 604, 437, 482, 527]),
    _input_values("testConv2D2x2Depth3ValidBackpropInputStride1x2", (1, 3, 6, 1),
                  (2, 2, 1, 1), (1, 2, 3, 1),
                  [1, 2, 2, 4, 3, 6, 7, 12, 11, 18, 15, 24, 12, 16, 15, 20, 18, 24],
                  strides=(1, 2)),
    _input_values("testConv2DStrideTwoFilterOneSameBackpropInput", (1, 4, 4, 1),
                  (1, 1, 1, 1), (1, 2, 2, 1),
                  [1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0], strides=(2, 2),
                  padding="SAME"),
    _input_values("testConv2DKernelSizeMatchesInputSizeBackpropInput", (1, 2, 2, 1),
                  (2, 2, 1, 2), (1, 1, 1, 2), [5, 11, 17, 23]),
    # input_sizes holds only (rows, cols); TF passes the same 2 values in NCHW.
    _input_values("testConv2DInputSizesContainsOnlySpatialDimensionsBackpropInput",
                  (1, 2, 2, 1), (2, 2, 1, 2), (1, 1, 1, 2), [5, 11, 17, 23],
                  input_sizes=(2, 2)),
    _input_values("testConv2DBackpropInputDegenerateBackpropInput", (3, 1, 1, 2),
                  (1, 3, 2, 3), (3, 1, 0, 3), [0] * 6, strides=(1, 2)),
    _filter_values("testConv2D2x2Depth1ValidBackpropFilter", (1, 2, 3, 1), (2, 2, 1, 1),
                   (1, 1, 2, 1), [5, 8, 14, 17]),
    _filter_values("testConv2DEmptyBackpropFilter", (1, 2, 3, 1), (2, 2, 1, 0),
                   (1, 1, 2, 0), []),
    _filter_values("testConv2DBackpropFilterWithEmptyInput", (0, 2, 3, 1), (2, 2, 1, 1),
                   (0, 1, 2, 1), [0, 0, 0, 0]),
    _filter_values("testConv2D2x2Depth3ValidBackpropFilter", (1, 2, 3, 3), (2, 2, 3, 3),
                   (1, 1, 2, 3),
                   [17, 22, 27, 22, 29, 36, 27, 36, 45, 32, 43, 54, 37, 50, 63, 42, 57, 72,
                    62, 85, 108, 67, 92, 117, 72, 99, 126, 77, 106, 135, 82, 113, 144, 87,
                    120, 153]),
    _filter_values("testConv2D2x2Depth3ValidBackpropFilterStride1x2", (1, 3, 6, 1),
                   (2, 2, 1, 1), (1, 2, 3, 1), [161, 182, 287, 308], strides=(1, 2)),
    _filter_values("testConv2DStrideTwoFilterOneSameBackpropFilter", (1, 4, 4, 1),
                   (1, 1, 1, 1), (1, 2, 2, 1), [78], strides=(2, 2), padding="SAME"),
    _filter_values("testConv2DKernelSizeMatchesInputSizeBackpropFilter", (1, 2, 2, 1),
                   (2, 2, 1, 2), (1, 1, 1, 2), [1, 2, 2, 4, 3, 6, 4, 8]),
)

# (input, filter, out_backprop, strides, padding, dilations): the calls of the
# testConv2D2x2Depth1Padding*Backprop{Input,Filter} tests, the same for both ops. TF
# skips the dilated ones on CPU ("Non-default dilations is currently not supported on
# the CPU"); ours run them.
_EXPLICIT = {
    "Padding0x0": [
        ((1, 2, 3, 1), (2, 2, 1, 1), (1, 1, 2, 1), (1, 1), _pad((0, 0), (0, 0)), (1, 1)),
        ((1, 3, 4, 2), (2, 2, 2, 3), (1, 1, 2, 3), (2, 2), _pad((0, 0), (0, 0)), (1, 1)),
    ],
    "Padding1x1": [
        ((1, 2, 3, 1), (2, 2, 1, 2), (1, 3, 4, 2), (1, 1), _pad((1, 1), (1, 1)), (1, 1)),
        ((1, 2, 3, 2), (1, 1, 2, 1), (1, 4, 3, 1), (1, 2), _pad((1, 1), (1, 1)), (1, 1)),
        ((1, 4, 3, 1), (2, 2, 1, 1), (1, 4, 2, 1), (1, 2), _pad((1, 1), (1, 1)), (2, 2)),
    ],
    "Padding2x2": [
        ((2, 3, 1, 1), (2, 1, 1, 1), (2, 2, 5, 1), (3, 1), _pad((2, 2), (2, 2)), (1, 1)),
        ((1, 3, 6, 1), (3, 2, 1, 1), (1, 3, 4, 1), (1, 2), _pad((2, 2), (2, 2)), (2, 3)),
    ],
    "Padding_1_8_4_1_": [
        ((1, 2, 3, 1), (2, 2, 1, 1), (1, 10, 8, 1), (1, 1), _pad((1, 8), (4, 2)), (1, 1)),
        ((1, 5, 3, 1), (3, 2, 1, 1), (1, 4, 8, 1), (3, 1), _pad((1, 8), (4, 2)), (1, 1)),
    ],
    "Padding_5_0_2_2_": [
        ((1, 3, 3, 1), (2, 1, 1, 1), (1, 7, 7, 1), (1, 1), _pad((5, 0), (2, 2)), (1, 1)),
        ((1, 4, 2, 1), (3, 3, 1, 1), (1, 5, 2, 1), (1, 2), _pad((5, 0), (2, 2)), (2, 1)),
    ],
}


def _explicit_name(key, suffix):
    # "Padding_1_8_4_1_" + "BackpropInput": TF's names have the underscore before it.
    return f"testConv2D2x2Depth1{key}{suffix}"


CONV_EXPLICIT = tuple(
    Case(CONV + _explicit_name(key, suffix), "explicit", op, x, w, dy, s, d, p,
         dtypes=dtypes, sub=i)
    for suffix, op, dtypes in (("BackpropInput", "conv2d_input", ("float32",)),
                               ("BackpropFilter", "conv2d_filter", FLOATS))
    for key, calls in _EXPLICIT.items()
    for i, (x, w, dy, s, p, d) in enumerate(calls))

# _RunAndVerifyBackprop{Input,Filter}Dilation: TF runs these on a GPU (or with MKL) only.
# TF's output_sizes are not used by those tests (some are wrong), so none is stated.
_DILATED = (
    ("testConv2D2x2Depth3ValidBackpropFilterStride1x1Dilation2x1", "conv2d_filter",
     (1, 3, 6, 1), (2, 2, 1, 1), (2, 1)),
    ("testConv2D2x2Depth1ValidBackpropFilterDilation1x2", "conv2d_filter",
     (1, 2, 3, 1), (2, 2, 1, 1), (1, 2)),
    ("testConv2DEmptyBackpropFilterDilation1x2", "conv2d_filter",
     (1, 2, 3, 1), (2, 2, 1, 0), (1, 2)),
    ("testConv2D2x2Depth3ValidBackpropFilterDilation2x2", "conv2d_filter",
     (1, 3, 4, 3), (2, 2, 3, 3), (2, 2)),
    ("testConv2DKernelSizeMatchesInputSizeBackpropFilterDilation2x2", "conv2d_filter",
     (1, 3, 3, 1), (2, 2, 1, 2), (2, 2)),
    ("testConv2D2x2Depth3ValidBackpropInputStride1x1Dilation2x1", "conv2d_input",
     (1, 3, 6, 1), (2, 2, 1, 1), (2, 1)),
    ("testConv2D2x2Depth1ValidBackpropInputDilation1x2", "conv2d_input",
     (1, 2, 3, 1), (2, 2, 1, 1), (1, 2)),
    ("testConv2DEmptyBackpropInputDilation1x2", "conv2d_input",
     (0, 2, 3, 1), (2, 2, 1, 1), (1, 2)),
    ("testConv2D2x2Depth3ValidBackpropInputDilation2x1", "conv2d_input",
     (1, 3, 2, 3), (2, 2, 3, 3), (2, 1)),
    ("testConv2DKernelSizeMatchesInputSizeBackpropInputDilation2x2", "conv2d_input",
     (1, 3, 3, 1), (2, 2, 1, 2), (2, 2)),
)
CONV_DILATED = tuple(Case(CONV + name, "dilated_grad", op, x, w, dilations=d)
                     for name, op, x, w, d in _DILATED)

# ConstructAndTestGradient(batch, rows, cols, filter rows, filter cols, in depth,
# out depth, strides, padding, test_input[, max_err]); default max_err 0.003.
_GRADIENTS = (
    ("ValidPaddingStrideOne", True, 2, 5, 4, 3, 3, 2, 3, (1, 1), "VALID", 0.003),
    ("ValidPaddingStrideOne", False, 4, 6, 5, 2, 2, 2, 3, (1, 1), "VALID", 0.003),
    ("ValidPaddingStrideTwo", True, 2, 4, 5, 3, 3, 2, 3, (2, 2), "VALID", 0.003),
    ("ValidPaddingStrideTwo", False, 4, 6, 5, 2, 2, 2, 3, (2, 2), "VALID", 0.003),
    ("ValidPaddingStrideThree", True, 2, 7, 6, 3, 3, 4, 5, (3, 3), "VALID", 0.003),
    ("ValidPaddingStrideThree", False, 2, 8, 7, 4, 4, 2, 3, (3, 3), "VALID", 0.003),
    ("SamePaddingStrideOne", True, 2, 7, 6, 3, 3, 2, 3, (1, 1), "SAME", 0.003),
    ("SamePaddingStrideOne", False, 4, 6, 5, 2, 2, 2, 3, (1, 1), "SAME", 0.003),
    ("SamePaddingStrideTwo", True, 2, 5, 4, 3, 3, 3, 3, (2, 2), "SAME", 0.003),
    ("SamePaddingStrideTwo", False, 4, 6, 5, 2, 2, 2, 3, (2, 2), "SAME", 0.003),
    ("SamePaddingStrideThree", True, 2, 7, 6, 3, 3, 4, 5, (3, 3), "SAME", 0.003),
    ("SamePaddingStrideThree", False, 2, 8, 7, 4, 4, 2, 3, (3, 3), "SAME", 0.003),
    ("SamePaddingStride2x1", False, 2, 8, 7, 4, 4, 2, 3, (2, 1), "SAME", 0.003),
    ("KernelSizeMatchesInputSize", True, 2, 4, 3, 4, 3, 2, 3, (1, 1), "VALID", 0.003),
    ("KernelSizeMatchesInputSize", False, 2, 4, 3, 4, 3, 2, 3, (1, 1), "VALID", 0.003),
    ("1x1PaddingStrideOne", True, 2, 5, 4, 3, 3, 2, 3, (1, 1), _pad((1, 1), (1, 1)), 0.0025),
    ("1x1PaddingStrideOne", False, 2, 5, 4, 3, 3, 2, 3, (1, 1), _pad((1, 1), (1, 1)), 0.003),
    ("1x1PaddingStrideTwo", True, 2, 4, 5, 3, 3, 2, 3, (2, 2), _pad((1, 1), (1, 1)), 0.003),
    ("1x1PaddingStrideTwo", False, 2, 4, 5, 3, 3, 2, 3, (2, 2), _pad((1, 1), (1, 1)), 0.003),
    ("2x2PaddingStrideOne", True, 2, 5, 4, 3, 3, 2, 3, (1, 1), _pad((2, 2), (2, 2)), 0.003),
    ("2x2PaddingStrideOne", False, 2, 5, 4, 3, 3, 2, 3, (1, 1), _pad((2, 2), (2, 2)), 0.005),
    ("1_2_3_4PaddingStride3x2", True, 2, 8, 5, 4, 2, 3, 2, (3, 2), _pad((1, 2), (3, 4)),
     0.003),
    ("1_2_3_4PaddingStride3x2", False, 2, 8, 5, 4, 2, 3, 2, (3, 2), _pad((1, 2), (3, 4)),
     0.003),
    ("4_3_2_1PaddingStride2x1", True, 3, 5, 7, 3, 2, 1, 2, (2, 1), _pad((4, 3), (2, 1)),
     0.003),
    ("4_3_2_1PaddingStride2x1", False, 3, 5, 7, 3, 2, 1, 2, (2, 1), _pad((4, 3), (2, 1)),
     0.003),
    ("0_0_0_5PaddingStride1x2", True, 2, 6, 7, 3, 4, 3, 2, (1, 2), _pad((0, 0), (0, 5)),
     0.003),
    ("0_0_0_5PaddingStride1x2", False, 2, 6, 7, 3, 4, 3, 2, (1, 2), _pad((0, 0), (0, 5)),
     0.003),
)
CONV_GRADIENTS = tuple(
    Case(CONV + ("testInputGradient" if test_input else "testFilterGradient") + name,
         "grad_check", "conv2d_input" if test_input else "conv2d_filter",
         (n, rows, cols, cin), (kr, kc, cin, cout), strides=s, padding=p, dtypes=FLOATS,
         data="ramp", max_err=max_err)
    for name, test_input, n, rows, cols, kr, kc, cin, cout, s, p, max_err in _GRADIENTS)

# testInputGradientGroupConv / testFilterGradientGroupConv (run_cuda_only in TF): 2
# groups, input depth 4, filter [3, 3, 2, 6], VALID, max_err 0.005.
CONV_GROUP_GRADIENTS = tuple(
    Case(CONV + ("testInputGradientGroupConv" if test_input else "testFilterGradientGroupConv"),
         "grad_check", "conv2d_input" if test_input else "conv2d_filter",
         (2, 5, 4, 4), (3, 3, 2, 6), strides=(1, 1), padding="VALID", dtypes=FLOATS,
         data="ramp", max_err=0.005)
    for test_input in (True, False))

CONV_CASES = CONV_VALUES + CONV_EXPLICIT + CONV_DILATED + CONV_GRADIENTS + CONV_GROUP_GRADIENTS

# --------------------------------------------------------------------------------------
# conv2d_transpose_test.py :: Conv2DTransposeTest: x [2, 6, 4, 3] of ones through a
# [3, 3, 2, 3] filter of ones. The op's input is TF's y; its out_backprop is TF's x.
# --------------------------------------------------------------------------------------

# Per-position tap counts, from TF's expected-value loops: stride 1 SAME (3 inside, 2 on
# the border); stride 2 SAME (2 at even positions strictly inside, else 1); stride 2
# VALID (the same inside the 1-wide border, the border copying its neighbour).
_S1_ROWS, _S1_COLS = (2, 3, 3, 3, 3, 2), (2, 3, 3, 2)
_S2_ROWS, _S2_COLS = (1, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1), (1, 1, 2, 1, 2, 1, 2, 1)
_V2_ROWS, _V2_COLS = (1, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 1), (1, 1, 2, 1, 2, 1, 2, 1, 1)


def _transpose(name, y_shape, strides, padding, counts, dtypes, data_formats):
    return Case(TRANSPOSE + name, "transpose", "conv2d_input", y_shape, (3, 3, 2, 3),
                (2, 6, 4, 3), strides, padding=padding, dtypes=dtypes,
                data_formats=data_formats, data="ones", counts=counts)


TRANSPOSE_CASES = (
    # The NHWC tests loop over float32 and int32.
    _transpose("testConv2DTransposeSingleStride", (2, 6, 4, 2), (1, 1), "SAME",
               (_S1_ROWS, _S1_COLS), ("float32", "int32"), ("NHWC",)),
    _transpose("testConv2DTransposeSame", (2, 12, 8, 2), (2, 2), "SAME",
               (_S2_ROWS, _S2_COLS), ("float32", "int32"), ("NHWC",)),
    _transpose("testConv2DTransposeValid", (2, 13, 9, 2), (2, 2), "VALID",
               (_V2_ROWS, _V2_COLS), ("float32", "int32"), ("NHWC",)),
    # The same three in NCHW (TF: CUDA only; x [2, 3, 6, 4]).
    _transpose("testConv2DTransposeSingleStrideNCHW", (2, 6, 4, 2), (1, 1), "SAME",
               (_S1_ROWS, _S1_COLS), ("float32",), ("NCHW",)),
    _transpose("testConv2DTransposeSameNCHW", (2, 12, 8, 2), (2, 2), "SAME",
               (_S2_ROWS, _S2_COLS), ("float32",), ("NCHW",)),
    _transpose("testConv2DTransposeValidNCHW", (2, 13, 9, 2), (2, 2), "VALID",
               (_V2_ROWS, _V2_COLS), ("float32",), ("NCHW",)),
    # TF skips it ("b/262851489: Fix nightly build for GPU"); it runs here.
    Case(TRANSPOSE + "testGradient", "transpose_grad", "conv2d_input", (2, 12, 8, 2),
         (3, 3, 2, 3), (2, 6, 4, 3), (2, 2), padding="SAME", data_formats=("NHWC",),
         data="seed1_unit", max_err=0.0006),
    Case(TRANSPOSE + "testConv2DTransposeShapeInference", "shape", "conv2d_input",
         (3, 10, 5, 5), (3, 3, 5, 1), (3, 10, 5, 1), padding="SAME",
         data_formats=("NHWC",), data="ones"),
)

# --------------------------------------------------------------------------------------
# conv2d_backprop_filter_grad_test.py: in [5, 8, 6, 4], filter [3, 3, 4, 6], float32,
# for padding x stride 1, 2; the dilated test (dilations 2, 2) runs on CUDA only in TF.
# --------------------------------------------------------------------------------------

_FG_PADDINGS = ("SAME", "VALID", _pad((1, 2), (3, 4)), _pad((0, 3), (4, 2)))
_FG_DILATED_PADDINGS = ("SAME", "VALID", _pad((3, 5), (2, 1)), _pad((5, 2), (5, 1)))
FILTER_GRAD_CASES = tuple(
    Case(FILTER_GRAD + name, "filter_grad_grad", "conv2d_filter", (5, 8, 6, 4),
         (3, 3, 4, 6), strides=(s, s), dilations=d, padding=p, data_formats=("NHWC",),
         data="seed1_pm1", max_err=max_err, sub=2 * i + j)
    for name, paddings, d, max_err in (("testGradient", _FG_PADDINGS, (1, 1), 2e-3),
                                       ("testGradientDilatedConv", _FG_DILATED_PADDINGS,
                                        (2, 2), 1e-2))
    for i, p in enumerate(paddings)
    for j, s in enumerate((1, 2)))

# --------------------------------------------------------------------------------------
# conv1d_test.py / conv1d_transpose_test.py: conv1d_transpose of ones; shapes NWC,
# filter [width, out depth, in depth]; counts are (rows, cols) with a single row.
# --------------------------------------------------------------------------------------


def _transpose1d(source, y_shape, stride, padding, cols, data_formats=("NHWC",)):
    return Case(source, "transpose", "conv2d_input", y_shape, (3, 2, 3),
                (2, y_shape[1] // stride, 3), (1, stride), padding=padding,
                data_formats=data_formats, data="ones", counts=((1,), cols))


_W9 = (1, 1, 2, 1, 2, 1, 2, 1, 1)
CONV1D_CASES = (
    _transpose1d(CONV1D + "testConv1DTranspose", (2, 9, 2), 2, "VALID", _W9),
    _transpose1d(CONV1D_T + "testConv1DTransposeSingleStride", (2, 6, 2), 1, "SAME",
                 (2, 3, 3, 3, 3, 2)),
    _transpose1d(CONV1D_T + "testConv1DTransposeSame", (2, 8, 2), 2, "SAME",
                 (1, 1, 2, 1, 2, 1, 2, 1)),
    _transpose1d(CONV1D_T + "testConv1DTransposeValid", (2, 9, 2), 2, "VALID", _W9),
    # NCW (TF: CUDA only); the single-stride one has x [2, 3, 4].
    _transpose1d(CONV1D_T + "testConv1DTransposeSingleStrideNCW", (2, 4, 2), 1, "SAME",
                 (2, 3, 3, 2), ("NCHW",)),
    _transpose1d(CONV1D_T + "testConv1DTransposeSameNCW", (2, 8, 2), 2, "SAME",
                 (1, 1, 2, 1, 2, 1, 2, 1), ("NCHW",)),
    _transpose1d(CONV1D_T + "testConv1DTransposeValidNCW", (2, 9, 2), 2, "VALID", _W9,
                 ("NCHW",)),
    Case(CONV1D_T + "testGradient", "transpose_grad", "conv2d_input", (2, 8, 2), (3, 2, 3),
         (2, 4, 3), (1, 2), padding="SAME", data_formats=("NHWC",), data="seed1_unit",
         max_err=0.0005),
)

# --------------------------------------------------------------------------------------
# depthwise_conv_op_base.py :: DepthwiseConv2DBase. Configs are (input, filter, output,
# stride, padding, dilations) as in TF's config lists; ConfigsToTest /
# ConfigsToTestExplicit feed the CPU-vs-GPU comparisons, CheckGradConfigsToTest[Explicit]
# the gradient checkers.
# --------------------------------------------------------------------------------------

CONFIGS = (
    ((4, 5, 5, 48), (1, 1, 48, 2), (4, 5, 5, 96), 1, "SAME", None),
    ((4, 8, 8, 84), (1, 3, 84, 1), (4, 8, 8, 84), 1, "SAME", None),
    ((4, 17, 17, 48), (3, 1, 48, 4), (4, 17, 17, 192), 1, "SAME", None),
    ((4, 9, 27, 8), (3, 3, 8, 1), (4, 9, 27, 8), 1, "SAME", None),
    ((4, 31, 31, 7), (3, 3, 7, 1), (4, 31, 31, 7), 1, "SAME", None),
    ((4, 35, 35, 2), (5, 5, 2, 1), (4, 35, 35, 2), 1, "SAME", None),
    ((4, 147, 147, 2), (3, 3, 2, 8), (4, 49, 49, 16), 3, "VALID", None),
    ((3, 299, 299, 3), (3, 2, 3, 8), (3, 150, 150, 24), 2, "SAME", None),
    ((5, 183, 183, 1), (5, 5, 1, 2), (5, 92, 92, 2), 2, "SAME", None),
    ((5, 183, 183, 1), (5, 5, 1, 2), (5, 183, 183, 2), 1, "SAME", (2, 2)),
    ((5, 41, 35, 2), (4, 7, 2, 2), (5, 32, 23, 4), 1, "VALID", (3, 2)),
)
CONFIGS_EXPLICIT = (
    ((4, 5, 5, 48), (1, 1, 48, 2), (4, 8, 12, 96), 1, _pad((1, 2), (3, 4)), None),
    ((4, 1, 1, 3), (3, 3, 3, 2), (4, 29, 39, 6), 1, _pad((10, 20), (15, 25)), None),
    ((4, 9, 27, 8), (3, 3, 8, 1), (4, 14, 31, 8), 1, _pad((3, 4), (4, 2)), None),
    ((4, 31, 31, 7), (3, 3, 7, 1), (4, 29, 29, 7), 1, _pad((0, 0), (0, 0)), None),
    ((3, 299, 299, 3), (3, 2, 3, 8), (3, 150, 153, 24), 2, _pad((1, 2), (3, 5)), None),
    ((5, 183, 183, 1), (5, 5, 1, 2), (5, 62, 60, 2), 3, _pad((3, 2), (1, 0)), None),
    ((5, 29, 31, 1), (5, 4, 1, 2), (5, 26, 23, 2), 1, _pad((3, 2), (1, 0)), (2, 3)),
    ((4, 5, 5, 48), (3, 3, 48, 1), (4, 5, 5, 48), 1, _pad((0, 2), (0, 2)), None),
    ((1, 8, 7, 2), (8, 7, 2, 1), (1, 8, 7, 2), 1, _pad((0, 7), (3, 3)), None),
    ((2, 4, 3, 2), (3, 2, 2, 1), (2, 4, 3, 2), 1, _pad((2, 0), (1, 0)), None),
)
GRAD_CONFIGS = (
    ((2, 5, 8, 1), (4, 4, 1, 2), (2, 5, 8, 2), 1, "SAME", None),
    ((4, 5, 5, 1), (2, 2, 1, 2), (4, 2, 2, 2), 2, "VALID", None),
    ((2, 4, 4, 2), (3, 1, 2, 2), (2, 4, 4, 4), 1, "SAME", None),
    ((1, 15, 15, 2), (1, 3, 2, 1), (1, 15, 15, 2), 1, "SAME", None),
    ((2, 15, 16, 1), (3, 3, 1, 2), (2, 5, 5, 2), 3, "VALID", None),
    ((2, 5, 8, 1), (4, 3, 1, 2), (2, 5, 8, 2), 1, "SAME", (1, 2)),
    ((1, 3, 1, 2), (2, 1, 2, 1), (1, 3, 1, 2), 1, "SAME", None),
    ((2, 2, 3, 2), (2, 1, 2, 1), (2, 2, 3, 2), 1, "SAME", None),
    ((2, 2, 3, 1), (2, 2, 1, 1), (2, 2, 3, 1), 1, "SAME", None),
)
GRAD_CONFIGS_EXPLICIT = (
    ((2, 5, 8, 1), (4, 4, 1, 2), (2, 3, 10, 2), 1, _pad((0, 1), (2, 3)), None),
    ((4, 5, 5, 1), (2, 2, 1, 2), (4, 4, 5, 2), 2, _pad((3, 1), (5, 0)), None),
    ((2, 4, 4, 2), (3, 1, 2, 2), (2, 7, 11, 4), 1, _pad((4, 1), (3, 4)), None),
    ((1, 15, 15, 2), (1, 3, 2, 1), (1, 18, 23, 2), 1, _pad((3, 0), (2, 8)), None),
    ((2, 15, 16, 1), (3, 3, 1, 2), (2, 5, 8, 2), 3, _pad((0, 0), (10, 0)), None),
    ((2, 5, 8, 1), (3, 4, 1, 2), (2, 5, 10, 2), 1, _pad((3, 1), (2, 3)), (2, 1)),
    ((2, 4, 3, 2), (3, 2, 2, 1), (2, 4, 3, 2), 1, _pad((2, 0), (1, 0)), None),
)

# Compare tests: configs with more input elements are skipped (see the module docstring).
MAX_COMPARE_ELEMENTS = 60_000


def _elements(shape):
    n = 1
    for s in shape:
        n *= s
    return n


SKIPPED_COMPARE_CONFIGS = tuple(c for c in CONFIGS + CONFIGS_EXPLICIT
                                if c[5] is None and _elements(c[0]) > MAX_COMPARE_ELEMENTS)

# The gradient-checker tests: (name, op, configs, dtypes, data formats, stride-1 only).
# TF's per-dtype bounds (4 for float16, 1 for bfloat16: theirs is the finite-difference
# error) are not ours: our results are held to the op table's tolerance instead.
_DEPTHWISE_GRAD_TESTS = (
    ("testDepthwiseConv2DInputGrad", "depthwise_input", GRAD_CONFIGS,
     ("float32", "float64"), ("NHWC",), False),
    ("testDepthwiseConv2DInputGradFormat", "depthwise_input", GRAD_CONFIGS,
     ("float32", "float64"), ("NCHW",), False),
    ("testDepthwiseConv2DInputGradExplicit", "depthwise_input", GRAD_CONFIGS_EXPLICIT,
     ALL_FLOATS, ("NHWC", "NCHW"), False),
    # cuDNN's depthwise input gradient: NCHW, half types, stride 1.
    ("testDepthwiseConv2DInputGradCudnn", "depthwise_input", GRAD_CONFIGS,
     ("float16", "bfloat16"), ("NCHW",), True),
    ("testDepthwiseConv2DFilterGrad", "depthwise_filter", GRAD_CONFIGS,
     ("float16", "float32", "float64"), ("NHWC",), False),
    ("testDepthwiseConv2DFilterGradFormat", "depthwise_filter", GRAD_CONFIGS,
     ("float32", "float64"), ("NCHW",), False),
    ("testDepthwiseConv2DFilterGradExplicit", "depthwise_filter", GRAD_CONFIGS_EXPLICIT,
     ALL_FLOATS, ("NHWC", "NCHW"), False),
    ("testDepthwiseConv2DFilterGradCudnn", "depthwise_filter", GRAD_CONFIGS,
     ("float16", "bfloat16"), ("NCHW", "NHWC"), False),
)
# TF's float32 gradient-checker bound (the only one that bounds a finite-difference error
# we reproduce).
DEPTHWISE_FLOAT32_MAX_ERR = 8e-4

# The compare tests: (name, op, configs, data formats): float32, bfloat16, float64.
_DEPTHWISE_COMPARE_TESTS = (
    ("testDepthwiseConv2DInputGradCompare", "depthwise_input", CONFIGS, ("NHWC",)),
    ("testDepthwiseConv2DInputGradExplicitCompare", "depthwise_input", CONFIGS_EXPLICIT,
     ("NHWC",)),
    ("testDepthwiseConv2DFilterGradCompare", "depthwise_filter", CONFIGS, ("NHWC", "NCHW")),
    ("testDepthwiseConv2DFilterGradExplicitCompare", "depthwise_filter", CONFIGS_EXPLICIT,
     ("NHWC", "NCHW")),
)


def _depthwise_case(source, kind, op, config, dtypes, data_formats, data, index, max_err=None):
    x, w, y, stride, padding, dilations = config
    return Case(source, kind, op, x, w, y, (stride, stride), dilations or (1, 1), padding,
                dtypes, data_formats, data, max_err=max_err, sub=index)


DEPTHWISE_CASES = tuple(
    _depthwise_case(DEPTHWISE + name, "grad_check", op, config, dtypes, formats, "ramp", i,
                    DEPTHWISE_FLOAT32_MAX_ERR)
    for name, op, configs, dtypes, formats, stride_one in _DEPTHWISE_GRAD_TESTS
    for i, config in enumerate(configs)
    if not (stride_one and config[3] != 1)
) + tuple(
    # TF skips the dilated configs in the comparisons.
    _depthwise_case(DEPTHWISE + name, "compare", op, config,
                    ("float32", "bfloat16", "float64"), formats, "random", i)
    for name, op, configs, formats in _DEPTHWISE_COMPARE_TESTS
    for i, config in enumerate(configs)
    if config[5] is None and _elements(config[0]) <= MAX_COMPARE_ELEMENTS
)

CASES = CONV_CASES + TRANSPOSE_CASES + FILTER_GRAD_CASES + CONV1D_CASES + DEPTHWISE_CASES

# --------------------------------------------------------------------------------------
# Error cases
# --------------------------------------------------------------------------------------

INVALID_ARGUMENT, VALUE_ERROR = "InvalidArgumentError", "ValueError"
ERROR_CASES = (
    # testOpEdgeCases: "Negative padding during backprop."
    ErrorCase(CONV + "testOpEdgeCases", "wrapper", "conv2d_input",
              dict(input_sizes=[32, 20, 20, 3], filter=("ones", (18, 18, 3, 2)),
                   out_backprop=("ones", (32, 3, 2, 2)), strides=[1, 1, 1, 1],
                   padding=[[0, 0], [-1, 0], [0, 0], [0, 0]]),
              (INVALID_ARGUMENT,), "All elements of explicit_paddings must be nonnegative"),
    ErrorCase(CONV + "testOpEdgeCases", "wrapper", "conv2d_filter",
              dict(input=("ones", (32, 20, 20, 3)), filter_sizes=[18, 18, 3, 2],
                   out_backprop=("ones", (32, 3, 2, 2)), strides=[1, 1, 1, 1],
                   padding=[[0, 0], [-1, 0], [0, 0], [0, 0]]),
              (INVALID_ARGUMENT,), "All elements of explicit_paddings must be nonnegative",
              sub=1),
    # A scalar out_backprop with 2-value input_sizes (it crashed TF's kernel once).
    ErrorCase(CONV + "testConv2DBackpropInputInvalidOutBackpropRaiseError", "wrapper",
              "conv2d_input",
              dict(input_sizes=[65534, 65534],
                   filter=("fill", 0.159749106, (3, 3, 2, 2), "float32"),
                   out_backprop=("fill", 0, (), "float32"), strides=[1, 1, 1, 1],
                   padding="SAME", use_cudnn_on_gpu=True, data_format="NHWC",
                   dilations=[1, 1, 1, 1]),
              (VALUE_ERROR, INVALID_ARGUMENT), isolated=True),
    ErrorCase(TRANSPOSE + "testConv2DTransposeInvalidOutputShape", "conv2d_transpose",
              "conv2d_input",
              dict(input=("ones", (1, 1, 1, 1)), filters=("ones", (1, 1, 1, 1)),
                   output_shape=[2, -2], strides=[1]),
              (INVALID_ARGUMENT, VALUE_ERROR), isolated=True),
    # TF runs it on CPU ("On GPU, this test does try to allocate the output tensor").
    ErrorCase(TRANSPOSE + "testConv2DTransposeLargeOutputShape", "conv2d_transpose",
              "conv2d_input",
              dict(input=("ones", (2, 2, 2, 2)), output_shape=[114078056, 179835296],
                   strides=[10], filters=[[[[1]]]]),
              (INVALID_ARGUMENT, VALUE_ERROR), isolated=True),
)

# --------------------------------------------------------------------------------------
# Bookkeeping: every TF test ported, and those deliberately not.
# --------------------------------------------------------------------------------------



def _names(prefix, names):
    return tuple(prefix + name for name in names.split())


# Every TF test a case here comes from, read off TF's files (test_tf_kernel_cases checks
# that each has a case and that no case names another).
PORTED_FROM = (
    _names(CONV, """
        testConv2D2x2Depth1ValidBackpropInput testConv2DEmptyBackpropInput
        testConv2D2x2Depth3ValidBackpropInput testConv2D2x2Depth3ValidBackpropInputStride1x2
        testConv2DStrideTwoFilterOneSameBackpropInput
        testConv2DKernelSizeMatchesInputSizeBackpropInput
        testConv2DInputSizesContainsOnlySpatialDimensionsBackpropInput
        testConv2DBackpropInputDegenerateBackpropInput
        testConv2D2x2Depth1ValidBackpropFilter testConv2DEmptyBackpropFilter
        testConv2DBackpropFilterWithEmptyInput testConv2D2x2Depth3ValidBackpropFilter
        testConv2D2x2Depth3ValidBackpropFilterStride1x2
        testConv2DStrideTwoFilterOneSameBackpropFilter
        testConv2DKernelSizeMatchesInputSizeBackpropFilter
        testConv2D2x2Depth3ValidBackpropFilterStride1x1Dilation2x1
        testConv2D2x2Depth1ValidBackpropFilterDilation1x2
        testConv2DEmptyBackpropFilterDilation1x2
        testConv2D2x2Depth3ValidBackpropFilterDilation2x2
        testConv2DKernelSizeMatchesInputSizeBackpropFilterDilation2x2
        testConv2D2x2Depth3ValidBackpropInputStride1x1Dilation2x1
        testConv2D2x2Depth1ValidBackpropInputDilation1x2
        testConv2DEmptyBackpropInputDilation1x2
        testConv2D2x2Depth3ValidBackpropInputDilation2x1
        testConv2DKernelSizeMatchesInputSizeBackpropInputDilation2x2
        testConv2D2x2Depth1Padding0x0BackpropInput testConv2D2x2Depth1Padding1x1BackpropInput
        testConv2D2x2Depth1Padding2x2BackpropInput
        testConv2D2x2Depth1Padding_1_8_4_1_BackpropInput
        testConv2D2x2Depth1Padding_5_0_2_2_BackpropInput
        testConv2D2x2Depth1Padding0x0BackpropFilter testConv2D2x2Depth1Padding1x1BackpropFilter
        testConv2D2x2Depth1Padding2x2BackpropFilter
        testConv2D2x2Depth1Padding_1_8_4_1_BackpropFilter
        testConv2D2x2Depth1Padding_5_0_2_2_BackpropFilter
        testInputGradientValidPaddingStrideOne testFilterGradientValidPaddingStrideOne
        testInputGradientValidPaddingStrideTwo testFilterGradientValidPaddingStrideTwo
        testInputGradientValidPaddingStrideThree testFilterGradientValidPaddingStrideThree
        testInputGradientSamePaddingStrideOne testFilterGradientSamePaddingStrideOne
        testInputGradientSamePaddingStrideTwo testFilterGradientSamePaddingStrideTwo
        testInputGradientSamePaddingStrideThree testFilterGradientSamePaddingStrideThree
        testFilterGradientSamePaddingStride2x1
        testInputGradientKernelSizeMatchesInputSize testFilterGradientKernelSizeMatchesInputSize
        testInputGradient1x1PaddingStrideOne testFilterGradient1x1PaddingStrideOne
        testInputGradient1x1PaddingStrideTwo testFilterGradient1x1PaddingStrideTwo
        testInputGradient2x2PaddingStrideOne testFilterGradient2x2PaddingStrideOne
        testInputGradient1_2_3_4PaddingStride3x2 testFilterGradient1_2_3_4PaddingStride3x2
        testInputGradient4_3_2_1PaddingStride2x1 testFilterGradient4_3_2_1PaddingStride2x1
        testInputGradient0_0_0_5PaddingStride1x2 testFilterGradient0_0_0_5PaddingStride1x2
        testInputGradientGroupConv testFilterGradientGroupConv
        testOpEdgeCases testConv2DBackpropInputInvalidOutBackpropRaiseError
    """)
    + _names(TRANSPOSE, """
        testConv2DTransposeSingleStride testConv2DTransposeSame testConv2DTransposeValid
        testGradient testConv2DTransposeSingleStrideNCHW testConv2DTransposeSameNCHW
        testConv2DTransposeValidNCHW testConv2DTransposeShapeInference
        testConv2DTransposeInvalidOutputShape testConv2DTransposeLargeOutputShape
    """)
    + _names(FILTER_GRAD, "testGradient testGradientDilatedConv")
    + _names(CONV1D, "testConv1DTranspose")
    + _names(CONV1D_T, """
        testConv1DTransposeSingleStride testConv1DTransposeSame testConv1DTransposeValid
        testGradient testConv1DTransposeSingleStrideNCW testConv1DTransposeSameNCW
        testConv1DTransposeValidNCW
    """)
    + _names(DEPTHWISE, """
        testDepthwiseConv2DInputGrad testDepthwiseConv2DInputGradFormat
        testDepthwiseConv2DInputGradExplicit testDepthwiseConv2DInputGradCudnn
        testDepthwiseConv2DFilterGrad testDepthwiseConv2DFilterGradFormat
        testDepthwiseConv2DFilterGradExplicit testDepthwiseConv2DFilterGradCudnn
        testDepthwiseConv2DInputGradCompare testDepthwiseConv2DInputGradExplicitCompare
        testDepthwiseConv2DFilterGradCompare testDepthwiseConv2DFilterGradExplicitCompare
    """)
)

NOT_PORTED = (
    (CONV + "testInception{Fwd,BackInput,BackFilter}_* (GetShrunkInceptionShapes)",
     "CPU-vs-GPU comparisons on 55 Inception shapes; generated only under __main__"),
    (CONV + "testOpEdgeCases (strides / zero-element filter parts)",
     "forward nn.conv2d checks; only the backprop (negative padding) parts are ported"),
    (CONV + "testConv2D*Filter*, *Padding (forward), testShapeFunctionEdgeCases, "
     "testConv2DGroupConvFwd, testConv2DExpandedBatch, ...",
     "forward convolution only"),
    ("conv_ops_test.py::DepthwiseConv2DTest, SeparableConv2DTest, DeepConv2DTest, "
     "FusedConv2DTest, Conv2DBenchmark", "forward convolutions and benchmarks"),
    (DEPTHWISE + "testDepthwiseConv2D*, testConv2D2x2Filter (hand values), "
     "testDepthwiseConv2DForward*Compare", "forward depthwise convolution only"),
    (DEPTHWISE + "grouped_conv=True variants", "a cuDNN kernel label: TF internals"),
    (CONV1D + "testBasic, testExpandedBatch", "forward conv1d only"),
)
