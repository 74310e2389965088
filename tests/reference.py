"""Independent NumPy (float64) oracle for Conv2D / DepthwiseConv2dNative and their
input/filter gradients, following TensorFlow's semantics: its output-size and padding
rules (GetWindowedOutputSizeVerbose), NHWC/NCHW layouts, HWIO filters and the
depthwise channel order.

Everything is computed in NHWC internally; NCHW arguments are transposed in and out.
Filters are [KH, KW, Cin, Cout] (depthwise [KH, KW, C, M], output channel c*M + m).
The only loops are over the KH*KW filter taps: for every tap the inputs it touches
form one strided slice of a zero-padded buffer.
"""
import functools

import numpy as np

__all__ = [
    "output_size", "forward_conv2d", "backprop", "cancellation",
    "conv2d_backprop_input", "conv2d_backprop_filter",
    "depthwise_backprop_input", "depthwise_backprop_filter",
]


def _tdiv(a, b):
    """C++ integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def output_size(in_size, k, stride, dilation, padding, pad_before=0, pad_after=0):
    """TF's GetWindowedOutputSizeVerbose: returns (out, pad_before, pad_after)."""
    if stride <= 0:
        raise ValueError(f"Stride must be > 0, but got {stride}")
    if dilation < 1:
        raise ValueError(f"Dilation rate must be >= 1, but got {dilation}")
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        out, pad_before, pad_after = _tdiv(in_size - eff + stride, stride), 0, 0
    elif padding == "EXPLICIT":
        if pad_before < 0 or pad_after < 0:
            raise ValueError("explicit paddings must be non-negative")
        out = _tdiv(in_size + pad_before + pad_after - eff + stride, stride)
    elif padding == "SAME":
        out = _tdiv(in_size + stride - 1, stride)
        need = max(0, (out - 1) * stride + eff - in_size)
        pad_before = need // 2
        pad_after = need - pad_before
    else:
        raise ValueError(f"unknown padding {padding!r}")
    if out < 0:
        raise ValueError(f"Computed output size would be negative: {out} [input_size: "
                         f"{in_size}, effective_filter_size: {eff}, stride: {stride}]")
    return out, pad_before, pad_after


# ----------------------------------------------------------------------------- helpers

def _f64(a):
    return np.asarray(a, dtype=np.float64)


def _to_nhwc(a, data_format):
    return a if data_format == "NHWC" else np.transpose(a, (0, 2, 3, 1))


def _from_nhwc(a, data_format):
    return a if data_format == "NHWC" else np.transpose(a, (0, 3, 1, 2))


def _nhwc_shape(shape, data_format):
    n, a, b, c = (int(s) for s in shape)
    return (n, a, b, c) if data_format == "NHWC" else (n, b, c, a)


def _geometry(in_hw, k_hw, strides, padding, explicit_paddings, data_format, dilations):
    """Per spatial dim (H, W): (in, k, stride, dilation, out, pad_before)."""
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"unknown data_format {data_format!r}")
    if len(strides) != 4 or len(dilations) != 4:
        raise ValueError("strides and dilations must have 4 elements")
    sp = (1, 2) if data_format == "NHWC" else (2, 3)       # spatial dims in data_format order
    nc = (0, 3) if data_format == "NHWC" else (0, 1)
    if any(strides[i] != 1 for i in nc) or any(dilations[i] != 1 for i in nc):
        raise ValueError("strides/dilations in the batch and depth dimensions must be 1")
    if padding == "EXPLICIT":
        ep = [int(p) for p in explicit_paddings]
        if len(ep) != 8:
            raise ValueError("explicit_paddings must have 8 elements")
        if any(ep[2 * i] or ep[2 * i + 1] for i in nc):
            raise ValueError("explicit padding of the batch and depth dimensions must be 0")
    elif len(explicit_paddings):
        raise ValueError("explicit_paddings is only allowed with EXPLICIT padding")
    geo = []
    for j, d in enumerate(sp):
        pb, pa = (ep[2 * d], ep[2 * d + 1]) if padding == "EXPLICIT" else (0, 0)
        out, pb, _ = output_size(in_hw[j], k_hw[j], strides[d], dilations[d], padding, pb, pa)
        geo.append((in_hw[j], k_hw[j], strides[d], dilations[d], out, pb))
    return geo


def _buffer_len(g):
    """Length of a zero-padded buffer covering the input and every tap position."""
    n_in, k, s, d, out, pb = g
    return max(pb + n_in, (out - 1) * s + (k - 1) * d + 1 if out > 0 else 0)


def _tap_slice(g, t):
    """Slice into the padded buffer of the positions filter tap t touches, one per output."""
    _, _, s, d, out, _ = g
    if out == 0:
        return slice(0, 0)
    return slice(t * d, t * d + (out - 1) * s + 1, s)


def _taps(geo):
    gh, gw = geo
    for kh in range(gh[1]):
        for kw in range(gw[1]):
            yield kh, kw, (slice(None), _tap_slice(gh, kh), _tap_slice(gw, kw), slice(None))


def _padded(x, geo):
    gh, gw = geo
    n, h, w, c = x.shape
    buf = np.zeros((n, _buffer_len(gh), _buffer_len(gw), c))
    buf[:, gh[5]:gh[5] + h, gw[5]:gw[5] + w, :] = x
    return buf


def _check_dy(dy, n, geo, out_c):
    want = (n, geo[0][4], geo[1][4], out_c)
    if dy.shape != want:
        raise ValueError(f"out_backprop has shape {dy.shape} (NHWC), expected {want}")


def _input_shape(input_sizes, dy_nhwc, w, data_format):
    sizes = [int(s) for s in np.asarray(input_sizes).reshape(-1)]
    if len(sizes) == 2:                      # (H, W) form
        return (dy_nhwc.shape[0], sizes[0], sizes[1], w.shape[2])
    if len(sizes) != 4:
        raise ValueError("input_sizes must have 2 or 4 elements")
    return _nhwc_shape(sizes, data_format)


def _groups(c, ci, m, depthwise):
    """Groups of a conv2d whose input has c channels and whose filter is [.., ci, m]
    (a grouped convolution when ci is a proper divisor of c); 1 for depthwise."""
    if depthwise or ci == c:
        if ci != c:
            raise ValueError(f"input depth {c} != filter in depth {ci}")
        return 1
    if ci <= 0 or c % ci or m % (c // ci) or c == 0:
        raise ValueError(f"input depth {c} is not a multiple of filter in depth {ci} "
                         f"with out depth {m} a multiple of the groups")
    return c // ci


# ----------------------------------------------------------------------------- ops

def forward_conv2d(x, w, strides, padding, explicit_paddings=(), data_format="NHWC",
                   dilations=(1, 1, 1, 1), depthwise=False):
    x = _to_nhwc(_f64(x), data_format)
    w = _f64(w)
    n, h, wd, c = x.shape
    kh_, kw_, ci, m = w.shape
    g = _groups(c, ci, m, depthwise)
    geo = _geometry((h, wd), (kh_, kw_), strides, padding, explicit_paddings, data_format, dilations)
    out_c = c * m if depthwise else m
    y = np.zeros((n, geo[0][4], geo[1][4], out_c))
    xp = _padded(x, geo)
    for kh, kw, sl in _taps(geo):
        patch = xp[sl]                                          # (N, OH, OW, C)
        if depthwise:
            y += (patch[..., :, None] * w[kh, kw]).reshape(y.shape)
        elif g > 1:
            y += np.einsum("nhwgc,cgo->nhwgo", patch.reshape(patch.shape[:3] + (g, ci)),
                           w[kh, kw].reshape(ci, g, m // g)).reshape(y.shape)
        else:
            y += np.einsum("nhwc,co->nhwo", patch, w[kh, kw])
    return _from_nhwc(y, data_format)


def _backprop_input(input_sizes, w, dy, strides, padding, explicit_paddings, data_format,
                    dilations, depthwise):
    w = _f64(w)
    dy = _to_nhwc(_f64(dy), data_format)
    n, h, wd, c = _input_shape(input_sizes, dy, w, data_format)
    kh_, kw_, ci, m = w.shape
    g = _groups(c, ci, m, depthwise)
    geo = _geometry((h, wd), (kh_, kw_), strides, padding, explicit_paddings, data_format, dilations)
    _check_dy(dy, n, geo, c * m if depthwise else m)
    dxp = np.zeros((n, _buffer_len(geo[0]), _buffer_len(geo[1]), c))
    if depthwise:
        dy = dy.reshape(dy.shape[:3] + (c, m))
    elif g > 1:
        dy = dy.reshape(dy.shape[:3] + (g, m // g))
    for kh, kw, sl in _taps(geo):
        # Within one tap the touched positions are distinct, so += on the view is exact.
        if depthwise:
            dxp[sl] += np.einsum("nhwcm,cm->nhwc", dy, w[kh, kw])
        elif g > 1:
            dxp[sl] += np.einsum("nhwgo,cgo->nhwgc", dy, w[kh, kw].reshape(ci, g, m // g)).reshape(
                dy.shape[:3] + (c,))
        else:
            dxp[sl] += np.einsum("nhwo,co->nhwc", dy, w[kh, kw])
    ph, pw = geo[0][5], geo[1][5]
    return _from_nhwc(dxp[:, ph:ph + h, pw:pw + wd, :], data_format)


def _backprop_filter(x, filter_sizes, dy, strides, padding, explicit_paddings, data_format,
                     dilations, depthwise):
    x = _to_nhwc(_f64(x), data_format)
    dy = _to_nhwc(_f64(dy), data_format)
    kh_, kw_, ci, m = (int(s) for s in np.asarray(filter_sizes).reshape(-1))
    n, h, wd, c = x.shape
    g = _groups(c, ci, m, depthwise)
    geo = _geometry((h, wd), (kh_, kw_), strides, padding, explicit_paddings, data_format, dilations)
    _check_dy(dy, n, geo, c * m if depthwise else m)
    dw = np.zeros((kh_, kw_, ci, m))
    xp = _padded(x, geo)
    if depthwise:
        dy = dy.reshape(dy.shape[:3] + (c, m))
    elif g > 1:
        dy = dy.reshape(dy.shape[:3] + (g, m // g))
    for kh, kw, sl in _taps(geo):
        if depthwise:
            dw[kh, kw] = np.einsum("nhwc,nhwcm->cm", xp[sl], dy)
        elif g > 1:
            patch = xp[sl]
            dw[kh, kw] = np.einsum("nhwgc,nhwgo->cgo", patch.reshape(patch.shape[:3] + (g, ci)),
                                   dy).reshape(ci, m)
        else:
            dw[kh, kw] = np.einsum("nhwc,nhwo->co", xp[sl], dy)
    return dw


def conv2d_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                          explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1)):
    return _backprop_input(input_sizes, filter, out_backprop, strides, padding,
                           explicit_paddings, data_format, dilations, depthwise=False)


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                           explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1)):
    return _backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                            explicit_paddings, data_format, dilations, depthwise=False)


def depthwise_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                             explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1)):
    return _backprop_input(input_sizes, filter, out_backprop, strides, padding,
                           explicit_paddings, data_format, dilations, depthwise=True)


def depthwise_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                              explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1)):
    return _backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                            explicit_paddings, data_format, dilations, depthwise=True)


def backprop(spec):
    """The reference for a row of the op table (tf_conv_backprop._ops.OpSpec), with TF's
    argument order: (sizes or tensor, tensor or sizes, out_backprop, strides, padding,
    explicit_paddings, data_format, dilations)."""
    fn = _backprop_input if spec.computes == "input" else _backprop_filter
    return functools.partial(fn, depthwise=spec.depthwise)


def cancellation(spec, first, second, out_backprop, *attrs):
    """How much the op's sums cancel on these inputs: ||sqrt(sum of squared terms)|| /
    ||sum of terms|| over the output (about 1 for data of random sign; see
    tf_conv_backprop._ops.tolerance). Every term is one element of the data tensor times
    one of out_backprop, so the squared terms sum to the op applied to squared inputs.
    `attrs` as for backprop(spec); 1.0 for an all-zero result."""
    fn = backprop(spec)
    result = np.linalg.norm(fn(first, second, out_backprop, *attrs))
    if result == 0:
        return 1.0
    if spec.computes == "input":
        squares = fn(first, np.square(_f64(second)), np.square(_f64(out_backprop)), *attrs)
    else:
        squares = fn(np.square(_f64(first)), second, np.square(_f64(out_backprop)), *attrs)
    return float(np.sqrt(np.sum(squares)) / result)
