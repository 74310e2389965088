"""`tf.compat`-style namespaces: `compat.v1.nn` and `compat.v2.nn`."""
from tf_conv_backprop.compat import v1, v2  # noqa: F401
