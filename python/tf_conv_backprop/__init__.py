"""TensorFlow's convolution gradients, everywhere: every dtype, NHWC and NCHW,
strides, dilations and explicit padding on CPU, with TF's exact Python API.

    import tf_conv_backprop as tcb
    dx = tcb.compat.v1.nn.conv2d_backprop_input(input_sizes, filter, dy, strides, "SAME")

Importing this package loads the op library, so XLA (jit_compile=True) can compile
our ops and SavedModels that use them load; import it before the first XLA
compilation in the process (see `_loader`).
"""
from tf_conv_backprop import compat, nn  # noqa: F401
from tf_conv_backprop._loader import (LibraryLoadError, LibraryLoadFailedWarning,  # noqa: F401
                                      VersionMismatchWarning, XlaImportOrderWarning,
                                      library_path, load_library)
from tf_conv_backprop import _loader
# Training: gradients registered with TF (registration loads nothing), tf.nn-style
# convolutions with our backward pass, and the migration patch of TF's names.
from tf_conv_backprop import _gradients  # noqa: F401
from tf_conv_backprop._convolution import conv2d, depthwise_conv2d  # noqa: F401
from tf_conv_backprop._patching import patched  # noqa: F401

__version__ = "0.1.0"

_loader.load_at_import()


def __getattr__(name):
    # `tf_conv_backprop.keras` (the Keras layers) imports Keras on first access only.
    if name == "keras":
        import importlib
        return importlib.import_module("tf_conv_backprop.keras")
    raise AttributeError(f"module 'tf_conv_backprop' has no attribute {name!r}")
