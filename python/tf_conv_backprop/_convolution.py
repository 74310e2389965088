"""Training-ready convolutions: TF's forward kernels, our backward ops.

`conv2d` and `depthwise_conv2d` have the signatures of `tf.nn.conv2d` and
`tf.nn.depthwise_conv2d`. Their forward pass runs TF's own `Conv2D` /
`DepthwiseConv2dNative` kernels; their gradient (a `tf.custom_gradient`) runs our
`ConvBackprop>` ops, whose own gradients (registered in `_gradients.py`) come back
here for the forward convolution, so every order of derivative uses our ops.

Two things TF's CPU forward kernels lack are built around them, identically on every
device (a graph traced where a GPU is visible may still run on a CPU, e.g. a
SavedModel served elsewhere):
- NCHW: computed as NHWC between two transposes (the CPU kernels are NHWC-only for
  float64 and half, and for everything without oneDNN).
- Depthwise dilation: `DepthwiseConv2dNative` on CPU rejects dilations > 1, so the
  filter is dilated (zeros between taps) and the op runs undilated with the same
  padding (SAME padding depends only on the effective filter size, so it is
  unchanged). Unequal row/column strides (rejected by TF's CPU depthwise kernel) run
  at stride 1 on an explicitly padded input and are subsampled.
"""
# pylint: disable=redefined-builtin
import tensorflow as tf

from tf_conv_backprop._loader import load_library
from tf_conv_backprop._ops import BY_KEY
from tf_conv_backprop._wrappers import convert_padding


def _op(key):
    return getattr(load_library(), BY_KEY[key].generated)


# --------------------------------------------------------------------------------------
# Attribute helpers
# --------------------------------------------------------------------------------------

def _nchw_to_nhwc_list(values):
    return [values[0], values[2], values[3], values[1]]


def _nchw_to_nhwc_paddings(explicit_paddings):
    if not explicit_paddings:
        return []
    pairs = [list(explicit_paddings[i:i + 2]) for i in range(0, 8, 2)]
    return sum(_nchw_to_nhwc_list(pairs), [])


def _to_nhwc(x):
    return tf.transpose(x, [0, 2, 3, 1])


def _to_nchw(x):
    return tf.transpose(x, [0, 3, 1, 2])


def _attrs(strides, padding, explicit_paddings, data_format, dilations):
    return dict(strides=list(strides), padding=padding,
                explicit_paddings=list(explicit_paddings or []), data_format=data_format,
                dilations=list(dilations))


def _get_sequence(value, channel_index, name):
    """TF's `_get_sequence` for 2 spatial dimensions: None, an int, or a list of 1, 2 or
    4 values become the 4-element list in data_format order."""
    if value is None:
        return [1, 1, 1, 1]
    if isinstance(value, int):
        value = [value]
    else:
        try:
            value = list(value)
        except TypeError:
            value = [value]
    if len(value) == 4:
        return value
    if len(value) == 1:
        value = value * 2
    elif len(value) != 2:
        raise ValueError(f"{name} should be of length 1, 2 or 4. "
                         f"Received: {name}={value} of length {len(value)}")
    return [1, 1] + value if channel_index == 1 else [1] + value + [1]


def _dim(t, i):
    """Static size of axis i when known, else a scalar tensor."""
    static = t.shape[i] if t.shape.rank is not None else None
    return static if static is not None else tf.shape(t)[i]


# --------------------------------------------------------------------------------------
# TF's forward kernels, in every configuration
# --------------------------------------------------------------------------------------

def _tf_conv2d(x, w, strides, padding, explicit_paddings, data_format, dilations,
               use_cudnn_on_gpu=True):
    """TF's Conv2D; NCHW runs as NHWC between transposes."""
    if data_format == "NCHW":
        y = tf.raw_ops.Conv2D(
            input=_to_nhwc(x), filter=w, strides=_nchw_to_nhwc_list(strides), padding=padding,
            use_cudnn_on_gpu=use_cudnn_on_gpu,
            explicit_paddings=_nchw_to_nhwc_paddings(explicit_paddings), data_format="NHWC",
            dilations=_nchw_to_nhwc_list(dilations))
        return _to_nchw(y)
    y = tf.raw_ops.Conv2D(input=x, filter=w, strides=strides, padding=padding,
                          use_cudnn_on_gpu=use_cudnn_on_gpu,
                          explicit_paddings=explicit_paddings, data_format=data_format,
                          dilations=dilations)
    in_depth, filter_in_depth = x.shape[-1], w.shape[2] if w.shape.rank == 4 else None
    if in_depth is None or filter_in_depth is None or in_depth != filter_in_depth:
        # A grouped (or maybe grouped) convolution: Grappler's remapper would fuse it with
        # a following bias add into _FusedConv2D, whose CPU kernel (where oneDNN is off)
        # refuses groups. Snapshot (a copy only when its input has other consumers) keeps
        # the two apart.
        y = tf.raw_ops.Snapshot(input=y)
    return y


def _dilate_filter_axis(w, axis, rate):
    """Inserts rate-1 zeros between the taps of w along axis 0 or 1."""
    k = _dim(w, axis)
    w = tf.expand_dims(w, axis + 1)
    pad = [[0, 0]] * 5
    pad[axis + 1] = [0, rate - 1]
    w = tf.pad(w, pad)
    shape = [_dim(w, i) for i in range(5)]
    merged = shape[:axis] + [k * rate] + shape[axis + 2:]
    w = tf.reshape(w, tf.stack(merged) if any(isinstance(s, tf.Tensor) for s in merged)
                   else merged)
    eff = (k - 1) * rate + 1
    eff = tf.maximum(eff, 0) if isinstance(eff, tf.Tensor) else max(eff, 0)
    return w[:eff] if axis == 0 else w[:, :eff]


def _same_pads(size, k_eff, stride):
    out = (size + stride - 1) // stride
    need = (out - 1) * stride + k_eff - size
    need = tf.maximum(need, 0) if isinstance(need, tf.Tensor) else max(need, 0)
    return [need // 2, need - need // 2]


def _tf_depthwise(x, w, strides, padding, explicit_paddings, data_format, dilations):
    """TF's DepthwiseConv2dNative with true dilation semantics (TF's DepthwiseConv2dNative*
    convention: SAME/EXPLICIT padding computed from the dilated filter extent)."""
    if data_format == "NCHW":
        y = _tf_depthwise(_to_nhwc(x), w, _nchw_to_nhwc_list(strides), padding,
                          _nchw_to_nhwc_paddings(explicit_paddings), "NHWC",
                          _nchw_to_nhwc_list(dilations))
        return _to_nchw(y)
    _, sh, sw, _ = strides
    _, dh, dw, _ = dilations
    if dh != 1:
        w = _dilate_filter_axis(w, 0, dh)
    if dw != 1:
        w = _dilate_filter_axis(w, 1, dw)
    undilated = [1, 1, 1, 1]
    if sh == sw:
        return tf.raw_ops.DepthwiseConv2dNative(
            input=x, filter=w, strides=strides, padding=padding,
            explicit_paddings=explicit_paddings, data_format=data_format, dilations=undilated)
    # Unequal strides: stride 1 on the padded input, then keep every (sh, sw)-th output.
    if padding == "EXPLICIT":
        p = list(explicit_paddings)
        pads = [p[0:2], p[2:4], p[4:6], p[6:8]]
    elif padding == "SAME":
        pads = [[0, 0], _same_pads(_dim(x, 1), _dim(w, 0), sh),
                _same_pads(_dim(x, 2), _dim(w, 1), sw), [0, 0]]
    else:
        pads = None
    if pads is not None:
        x = tf.pad(x, pads)
    y = tf.raw_ops.DepthwiseConv2dNative(input=x, filter=w, strides=undilated, padding="VALID",
                                         explicit_paddings=[], data_format="NHWC",
                                         dilations=undilated)
    return y[:, ::sh, ::sw, :]


# --------------------------------------------------------------------------------------
# Forward ops with our gradients (also used by the gradient registrations)
# --------------------------------------------------------------------------------------

@tf.autograph.experimental.do_not_convert
def conv2d_op(x, w, strides, padding, explicit_paddings, data_format, dilations,
              use_cudnn_on_gpu=True):
    """Conv2D with the op's attributes (4-element strides/dilations, padding string,
    explicit_paddings); forward TF's, gradients ours."""
    attrs = _attrs(strides, padding, explicit_paddings, data_format, dilations)

    @tf.custom_gradient
    def conv(x, w):
        y = _tf_conv2d(x, w, use_cudnn_on_gpu=use_cudnn_on_gpu, **attrs)

        def grad(dy):
            dx = _op("conv2d_input")(tf.shape(x), w, dy, use_cudnn_on_gpu=use_cudnn_on_gpu,
                                     **attrs)
            dw = _op("conv2d_filter")(x, tf.shape(w), dy, use_cudnn_on_gpu=use_cudnn_on_gpu,
                                      **attrs)
            return dx, dw

        return y, grad

    return conv(x, w)


@tf.autograph.experimental.do_not_convert
def depthwise_op(x, w, strides, padding, explicit_paddings, data_format, dilations):
    """DepthwiseConv2dNative with the op's attributes, dilations honoured; forward TF's,
    gradients ours."""
    attrs = _attrs(strides, padding, explicit_paddings, data_format, dilations)

    @tf.custom_gradient
    def conv(x, w):
        y = _tf_depthwise(x, w, **attrs)

        def grad(dy):
            dx = _op("depthwise_input")(tf.shape(x), w, dy, **attrs)
            dw = _op("depthwise_filter")(x, tf.shape(w), dy, **attrs)
            return dx, dw

        return y, grad

    return conv(x, w)


def _squeeze_batch_dims(x, fn):
    """Runs fn on x with all batch dimensions (rank > 4) folded into one, like TF."""
    rank = x.shape.rank
    if rank is None or rank <= 4:
        return fn(x)
    shape = tf.shape(x)
    y = fn(tf.reshape(x, tf.concat([[-1], shape[-3:]], 0)))
    out = tf.reshape(y, tf.concat([shape[:-3], tf.shape(y)[1:]], 0))
    out.set_shape(x.shape[:-3].concatenate(y.shape[1:]))
    return out


# --------------------------------------------------------------------------------------
# Public API (tf.nn signatures)
# --------------------------------------------------------------------------------------

@tf.autograph.experimental.do_not_convert
def conv2d(input, filters, strides, padding, data_format="NHWC", dilations=None, name=None):
    """Computes a 2-D convolution given `input` and 4-D `filters` tensors.

    Same arguments and forward result as `tf.nn.conv2d` (TF's own kernel computes the
    forward pass); the gradients are computed by tf_conv_backprop's ops, so training
    also works where TF's CPU gradients do not (NCHW in float64 or half, dilations
    with float64 or without oneDNN, explicit padding). NCHW runs TF's NHWC forward
    kernel between two transposes on every device.
    """
    padding, explicit_paddings = convert_padding(padding)
    if data_format is None:
        data_format = "NHWC"
    channel_index = 1 if data_format.startswith("NC") else 3
    strides = _get_sequence(strides, channel_index, "strides")
    dilations = _get_sequence(dilations, channel_index, "dilations")
    with tf.name_scope(name or "Conv2D"):
        input = tf.convert_to_tensor(input, name="input")
        filters = tf.convert_to_tensor(filters, dtype_hint=input.dtype, name="filters")
        return _squeeze_batch_dims(
            input, lambda x: conv2d_op(x, filters, strides, padding, explicit_paddings,
                                       data_format, dilations))


@tf.autograph.experimental.do_not_convert
def depthwise_conv2d(input, filter, strides, padding, data_format=None, dilations=None,
                     name=None):
    """Depthwise 2-D convolution.

    Same arguments and forward result as `tf.nn.depthwise_conv2d` (TF's own depthwise
    kernel computes the forward pass); the gradients are tf_conv_backprop's depthwise
    ops. `dilations` is the 2-element rate. Unlike TF, NCHW and unequal row/column
    strides work on CPU. As TF documents, strides must be 1 when a dilation is > 1; TF
    only warns and then computes something else, so this raises a ValueError (the
    Keras layer `tf_conv_backprop.keras.DepthwiseConv2D` does support the combination).
    """
    if data_format is None:
        data_format = "NHWC"
    rate = [1, 1] if dilations is None else list(dilations)
    strides = list(strides)
    if any(r > 1 for r in rate) and any(s != 1 for s in strides):
        raise ValueError(
            "When dilation rate is greater than 1, then all values of strides must be 1. "
            f"Received: `dilation rate` {rate} and `strides` {strides} (TF only warns and "
            "then computes a different function; tf_conv_backprop refuses).")
    if len(rate) != 2:
        raise ValueError(f"dilations should be of length 2. Received: dilations={rate}")
    padding, explicit_paddings = convert_padding(padding)
    dilations4 = [1, 1] + rate if data_format == "NCHW" else [1] + rate + [1]
    with tf.name_scope(name or "depthwise"):
        input = tf.convert_to_tensor(input, name="tensor_in")
        filter = tf.convert_to_tensor(filter, dtype_hint=input.dtype, name="filter_in")
        return depthwise_op(input, filter, strides, padding, explicit_paddings, data_format,
                            dilations4)
