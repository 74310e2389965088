from tf_conv_backprop.compat.v2 import nn  # noqa: F401
