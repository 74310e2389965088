from tf_conv_backprop.compat.v1 import nn  # noqa: F401
