"""The names `tf.compat.v2.nn` (= TF2's `tf.nn`) exports for these gradients."""
from tf_conv_backprop._wrappers import (  # noqa: F401
    depthwise_conv2d_backprop_filter,
    depthwise_conv2d_backprop_input,
)
