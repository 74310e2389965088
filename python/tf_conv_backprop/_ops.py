"""The op table: one row per op. Wrappers, tests, the report and the benchmark
iterate over it, so a fifth op is a fifth row."""
import collections

import tensorflow as tf

OpSpec = collections.namedtuple("OpSpec", [
    "key",           # short id used in tests and reports
    "op_name",       # our registered op
    "tf_op_name",    # TF's built-in op it mirrors
    "generated",     # name of the generated Python function in the loaded module
    "sizes_arg",     # which argument is the int32 sizes vector
    "computes",      # "input" or "filter": what the gradient is taken with respect to
    "depthwise",
    "use_cudnn_on_gpu",  # whether the op carries TF's use_cudnn_on_gpu attribute
    "tf_reference",  # TF's public function with the same signature
])

DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)

OPS = (
    OpSpec("conv2d_input", "ConvBackprop>Conv2DBackpropInput", "Conv2DBackpropInput",
           "conv_backprop_conv2d_backprop_input", "input_sizes", "input", False, True,
           tf.compat.v1.nn.conv2d_backprop_input),
    OpSpec("conv2d_filter", "ConvBackprop>Conv2DBackpropFilter", "Conv2DBackpropFilter",
           "conv_backprop_conv2d_backprop_filter", "filter_sizes", "filter", False, True,
           tf.compat.v1.nn.conv2d_backprop_filter),
    OpSpec("depthwise_input", "ConvBackprop>DepthwiseConv2dNativeBackpropInput",
           "DepthwiseConv2dNativeBackpropInput",
           "conv_backprop_depthwise_conv2d_native_backprop_input", "input_sizes", "input", True,
           False, tf.nn.depthwise_conv2d_backprop_input),
    OpSpec("depthwise_filter", "ConvBackprop>DepthwiseConv2dNativeBackpropFilter",
           "DepthwiseConv2dNativeBackpropFilter",
           "conv_backprop_depthwise_conv2d_native_backprop_filter", "filter_sizes", "filter",
           True, False, tf.nn.depthwise_conv2d_backprop_filter),
)

BY_KEY = {op.key: op for op in OPS}
