"""Keras layers whose backward pass runs tf_conv_backprop's ops.

`Conv2D` and `DepthwiseConv2D` subclass `tf.keras.layers.Conv2D` / `DepthwiseConv2D`
(Keras 3 with TF 2.21) with the same arguments, weights, configs and forward results;
only the convolution is routed through `tf_conv_backprop.conv2d` /
`tf_conv_backprop.depthwise_conv2d`. They are registered as Keras serializables under
the package name "tf_conv_backprop", so a saved model loads after
`import tf_conv_backprop.keras`.

Imported on first access of `tf_conv_backprop.keras` (importing the package does not
import Keras).
"""
import tensorflow as tf

from tf_conv_backprop._convolution import conv2d, depthwise_conv2d, depthwise_op

_layers = tf.keras.layers
_register = tf.keras.utils.register_keras_serializable(package="tf_conv_backprop")

__all__ = ["Conv2D", "DepthwiseConv2D"]


def _tf_format(data_format):
    return "NCHW" if data_format == "channels_first" else "NHWC"


@_register
class Conv2D(_layers.Conv2D):
    """2D convolution layer: `tf.keras.layers.Conv2D`, gradients by tf_conv_backprop.

    Same arguments as `tf.keras.layers.Conv2D`. The forward pass is TF's Conv2D kernel
    (NCHW runs it between transposes, so `channels_first` also works on CPU in float64);
    the input and kernel gradients are tf_conv_backprop's ops, grouped convolutions
    (`groups > 1`, a kernel of in_channels / groups inputs) included.
    """

    def convolution_op(self, inputs, kernel):
        return conv2d(inputs, kernel, strides=list(self.strides),
                      padding=self.padding.upper(), data_format=_tf_format(self.data_format),
                      dilations=list(self.dilation_rate))


@_register
class DepthwiseConv2D(_layers.DepthwiseConv2D):
    """2D depthwise convolution layer: `tf.keras.layers.DepthwiseConv2D`, gradients by
    tf_conv_backprop.

    Same arguments as `tf.keras.layers.DepthwiseConv2D`, including strides > 1 together
    with dilation_rate > 1 (computed as one strided, dilated depthwise convolution).
    """

    def call(self, inputs):
        kernel = getattr(self, "depthwise_kernel", None)  # tf_keras (Keras 2) name
        if kernel is None:
            kernel = self.kernel
        data_format = _tf_format(self.data_format)
        strides, rate = list(self.strides), list(self.dilation_rate)
        strides4 = [1, 1] + strides if data_format == "NCHW" else [1] + strides + [1]
        padding = self.padding.upper()
        if max(strides) > 1 and max(rate) > 1:
            dilations4 = [1, 1] + rate if data_format == "NCHW" else [1] + rate + [1]
            inputs = tf.convert_to_tensor(inputs)
            outputs = depthwise_op(inputs, tf.convert_to_tensor(kernel, dtype_hint=inputs.dtype),
                                   strides4, padding, [], data_format, dilations4)
        else:
            outputs = depthwise_conv2d(inputs, kernel, strides4, padding,
                                       data_format=data_format, dilations=rate)
        if self.use_bias:
            shape = [1, -1, 1, 1] if data_format == "NCHW" else [1, 1, 1, -1]
            outputs = outputs + tf.reshape(tf.cast(self.bias, outputs.dtype), shape)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
