"""The names `tf.compat.v1.nn` exports for these gradients."""
from tf_conv_backprop._wrappers import (  # noqa: F401
    conv2d_backprop_filter,
    conv2d_backprop_input,
    depthwise_conv2d_backprop_filter,
    depthwise_conv2d_backprop_input,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
)
