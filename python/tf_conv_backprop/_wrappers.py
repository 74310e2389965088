"""Public functions with TensorFlow's exact names, signatures and defaults.

Each wrapper normalises its arguments the way TF's own wrapper does (the
`filters` alias, padding given as a string or an explicit list) and calls our
op; all validation of values happens in the op, so errors are the same in eager
mode, in tf.function and in a v1 Session.
"""
# pylint: disable=redefined-builtin,dangerous-default-value
import tensorflow as tf

from tf_conv_backprop._loader import load_library
from tf_conv_backprop._ops import BY_KEY, OPS


def convert_padding(padding, expected_length=4):
    """(padding, explicit_paddings) attributes from the Python `padding` argument,
    with TF's rules and messages: a string passes through, a list of `expected_length`
    [before, after] pairs becomes EXPLICIT padding."""
    if padding == "EXPLICIT":
        raise ValueError("'EXPLICIT' is not a valid value for `padding`. To use explicit "
                         "padding, `padding` must be a list.")
    if not isinstance(padding, (list, tuple)):
        return padding, []
    explicit_paddings = []
    for i, pair in enumerate(padding):
        if not isinstance(pair, (list, tuple)):
            problem = f"of type {type(pair)}"
        elif len(pair) != 2:
            problem = f"of size {len(pair)}"
        else:
            explicit_paddings.extend(pair)
            continue
        raise ValueError("When `padding` is a list, each element of `padding` must be a "
                         f"list/tuple of size 2. Received: padding={padding} with element at "
                         f"index {i} {problem}")
    if len(padding) != expected_length:
        raise ValueError(f"When padding is a list, it must be of size {expected_length}. "
                         f"Received: padding={padding} of size {len(padding)}")
    return "EXPLICIT", explicit_paddings


# Not converted by AutoGraph: it would try (and warn) to convert the library load
# when the first call happens while a tf.function is being traced.
@tf.autograph.experimental.do_not_convert
def _call(key, first, second, out_backprop, strides, padding, data_format, dilations, name,
          **extra_attrs):
    spec = BY_KEY[key]
    padding, explicit_paddings = convert_padding(padding)
    op = getattr(load_library(), spec.generated)
    return op(first, second, out_backprop, strides=strides, padding=padding,
              explicit_paddings=explicit_paddings, data_format=data_format,
              dilations=dilations, name=name, **extra_attrs)


def conv2d_backprop_input(input_sizes, filter=None, out_backprop=None, strides=None,
                          padding=None, use_cudnn_on_gpu=True, data_format="NHWC",
                          dilations=[1, 1, 1, 1], name=None, filters=None):
    """Computes the gradients of convolution with respect to the input.

    Same arguments as `tf.compat.v1.nn.conv2d_backprop_input`; also runs NCHW,
    dilations > 1 and explicit padding on CPU. `filters` is an alias of `filter`.
    """
    if filters is not None:
        if filter is not None:
            raise ValueError("Cannot specify both 'filter' and 'filters'.")
        filter = filters
    return _call("conv2d_input", input_sizes, filter, out_backprop, strides, padding,
                 data_format, dilations, name, use_cudnn_on_gpu=use_cudnn_on_gpu)


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                           use_cudnn_on_gpu=True, data_format="NHWC",
                           dilations=[1, 1, 1, 1], name=None):
    """Computes the gradients of convolution with respect to the filter.

    Same arguments as `tf.compat.v1.nn.conv2d_backprop_filter`; also runs NCHW,
    dilations > 1 and explicit padding on CPU.
    """
    return _call("conv2d_filter", input, filter_sizes, out_backprop, strides, padding,
                 data_format, dilations, name, use_cudnn_on_gpu=use_cudnn_on_gpu)


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                                           data_format="NHWC", dilations=[1, 1, 1, 1],
                                           name=None):
    """Computes the gradients of depthwise convolution with respect to the input.

    Same arguments as `tf.nn.depthwise_conv2d_backprop_input`. Unlike TF's built-in,
    `dilations` is honoured (the true gradient of `tf.nn.depthwise_conv2d` with that
    dilation), and NCHW and unequal strides run on CPU.
    """
    return _call("depthwise_input", input_sizes, filter, out_backprop, strides, padding,
                 data_format, dilations, name)


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                                            data_format="NHWC", dilations=[1, 1, 1, 1],
                                            name=None):
    """Computes the gradients of depthwise convolution with respect to the filter.

    Same arguments as `tf.nn.depthwise_conv2d_backprop_filter`. Unlike TF's built-in,
    `dilations` is honoured, and NCHW and unequal strides run on CPU.
    """
    return _call("depthwise_filter", input, filter_sizes, out_backprop, strides, padding,
                 data_format, dilations, name)


# TF exports the depthwise gradients under both names.
depthwise_conv2d_backprop_input = depthwise_conv2d_native_backprop_input
depthwise_conv2d_backprop_filter = depthwise_conv2d_native_backprop_filter

# The public names of each namespace, as TF 2.21 exports them: all in tf.compat.v1.nn,
# the TF2 ones also in tf.nn and tf.compat.v2.nn.
V1_NAMES = tuple(name for spec in OPS for name in spec.names)
V2_NAMES = tuple(name for spec in OPS for name in spec.v2_names)
