"""TensorFlow's convolution gradients, everywhere: every dtype, NHWC and NCHW,
strides, dilations and explicit padding on CPU, with TF's exact Python API.

    import tf_conv_backprop as tcb
    dx = tcb.compat.v1.nn.conv2d_backprop_input(input_sizes, filter, dy, strides, "SAME")

Importing this package loads TensorFlow but not the op library; the first op call
does (see `load_library`).
"""
from tf_conv_backprop import compat, nn  # noqa: F401
from tf_conv_backprop._loader import LibraryLoadError, library_path, load_library  # noqa: F401

__version__ = "0.1.0"
