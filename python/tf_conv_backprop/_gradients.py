"""Gradients of the four ops, registered with TF when the package is imported.

The formulas are the ones TF registers for its built-ins (`nn_grad.py`): each op is
bilinear in its two tensor inputs, so for an upstream gradient `g` (shaped like the
op's output)

    Conv2DBackpropInput(sizes, W, dy):   d/dW = Conv2DBackpropFilter(g, shape(W), dy)
                                         d/dy = Conv2D(g, W)
    Conv2DBackpropFilter(x, sizes, dy):  d/dx = Conv2DBackpropInput(shape(x), g, dy)
                                         d/dy = Conv2D(x, g)

and the same for the depthwise pair with DepthwiseConv2dNative; the sizes input gets
None. Every attribute is forwarded. The backprops are ours; the forward convolution is
TF's kernel wrapped so that its own gradient is ours again (see `_convolution.py`), so
`tf.GradientTape` works to any order, also in NCHW, with dilations (depthwise
included: TF's forward rejects them on CPU and TF's gradients ignore them) and with
explicit padding.

Registering a gradient only records a function under the op's name: it neither needs
nor loads the op library.
"""
import tensorflow as tf

from tf_conv_backprop._convolution import conv2d_op, depthwise_op
from tf_conv_backprop._loader import load_library
from tf_conv_backprop._ops import BY_KEY


def _str(value):
    return value.decode() if isinstance(value, bytes) else value


def _attrs(op):
    return dict(strides=list(op.get_attr("strides")), padding=_str(op.get_attr("padding")),
                explicit_paddings=list(op.get_attr("explicit_paddings")),
                data_format=_str(op.get_attr("data_format")),
                dilations=list(op.get_attr("dilations")))


def _ours(key):
    return getattr(load_library(), BY_KEY[key].generated)


def _conv2d_backprop_input_grad(op, grad):
    attrs, cudnn = _attrs(op), op.get_attr("use_cudnn_on_gpu")
    filter, out_backprop = op.inputs[1], op.inputs[2]  # pylint: disable=redefined-builtin
    return [
        None,
        _ours("conv2d_filter")(grad, tf.shape(filter), out_backprop, use_cudnn_on_gpu=cudnn,
                               **attrs),
        conv2d_op(grad, filter, use_cudnn_on_gpu=cudnn, **attrs),
    ]


def _conv2d_backprop_filter_grad(op, grad):
    attrs, cudnn = _attrs(op), op.get_attr("use_cudnn_on_gpu")
    input, out_backprop = op.inputs[0], op.inputs[2]  # pylint: disable=redefined-builtin
    return [
        _ours("conv2d_input")(tf.shape(input), grad, out_backprop, use_cudnn_on_gpu=cudnn,
                              **attrs),
        None,
        conv2d_op(input, grad, use_cudnn_on_gpu=cudnn, **attrs),
    ]


def _depthwise_backprop_input_grad(op, grad):
    attrs = _attrs(op)
    filter, out_backprop = op.inputs[1], op.inputs[2]  # pylint: disable=redefined-builtin
    return [
        None,
        _ours("depthwise_filter")(grad, tf.shape(filter), out_backprop, **attrs),
        depthwise_op(grad, filter, **attrs),
    ]


def _depthwise_backprop_filter_grad(op, grad):
    attrs = _attrs(op)
    input, out_backprop = op.inputs[0], op.inputs[2]  # pylint: disable=redefined-builtin
    return [
        _ours("depthwise_input")(tf.shape(input), grad, out_backprop, **attrs),
        None,
        depthwise_op(input, grad, **attrs),
    ]


GRADIENTS = {
    BY_KEY["conv2d_input"].op_name: _conv2d_backprop_input_grad,
    BY_KEY["conv2d_filter"].op_name: _conv2d_backprop_filter_grad,
    BY_KEY["depthwise_input"].op_name: _depthwise_backprop_input_grad,
    BY_KEY["depthwise_filter"].op_name: _depthwise_backprop_filter_grad,
}


def _register():
    for op_name, fn in GRADIENTS.items():
        try:
            tf.RegisterGradient(op_name)(fn)
        except KeyError:
            # Already registered: a second copy of this package imported under another
            # path. TF keeps the first registration; both copies compute the same thing.
            pass


_register()
