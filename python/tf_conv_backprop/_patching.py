"""`patched()`: route TF's own public names for these gradients to ours, for migration
tests.

TF 2.21 exports the six Python names in ten places (`tf.compat.v1.nn`: all six;
`tf.nn` and `tf.compat.v2.nn`: the two TF2 depthwise names) and the four ops as
`tf.raw_ops.*`: fourteen public names in all, listed by `patch_targets()`.

The patch replaces module attributes, so it is process-global and not thread-safe:
every thread sees ours while the block runs, and code that took a reference to TF's
function before the block (`from tensorflow.nn import ...`, or a `tf.function` traced
before) keeps TF's. TF's internal callers (its own gradient registrations,
`tf.nn.conv2d_transpose`, Keras) never call these public names and are not affected.
"""
import contextlib
import inspect

import tensorflow as tf

from tf_conv_backprop import _wrappers
from tf_conv_backprop._loader import load_library
from tf_conv_backprop._ops import OPS


def _raw_op(spec):
    """A stand-in for `tf.raw_ops.<TF op>`: keyword arguments only, TF's signature,
    runs our op."""
    tf_fn = getattr(tf.raw_ops, spec.tf_op_name)
    signature = inspect.signature(tf_fn)

    def raw_op(*args, **kwargs):
        if args:
            raise TypeError(
                f"{spec.tf_op_name} only takes keyword args (possible keys: "
                f"{list(signature.parameters)}). Please pass these args as kwargs instead.")
        return getattr(load_library(), spec.generated)(**kwargs)

    raw_op.__name__ = raw_op.__qualname__ = spec.tf_op_name
    raw_op.__doc__ = (f"tf_conv_backprop's `{spec.op_name}` standing in for "
                      f"`tf.raw_ops.{spec.tf_op_name}`.")
    raw_op.__signature__ = signature
    return raw_op


def patch_targets():
    """(module, dotted module name, attribute, replacement) for each of TF's public names
    that `patched()` replaces, in TF 2.21: 6 in tf.compat.v1.nn, 2 in tf.nn, 2 in
    tf.compat.v2.nn, 4 in tf.raw_ops."""
    targets = []
    namespaces = (("tf.compat.v1.nn", tf.compat.v1.nn, _wrappers.V1_NAMES),
                  ("tf.nn", tf.nn, _wrappers.V2_NAMES),
                  ("tf.compat.v2.nn", tf.compat.v2.nn, _wrappers.V2_NAMES))
    for dotted, module, names in namespaces:
        for name in names:
            if hasattr(module, name):
                targets.append((module, dotted, name, getattr(_wrappers, name)))
    for spec in OPS:
        if hasattr(tf.raw_ops, spec.tf_op_name):
            targets.append((tf.raw_ops, "tf.raw_ops", spec.tf_op_name, _raw_op(spec)))
    return targets


@contextlib.contextmanager
def patched():
    """Within the block, TF's public names for the four convolution gradients run
    tf_conv_backprop's ops:

        with tf_conv_backprop.patched():
            tf.nn.depthwise_conv2d_backprop_input(...)        # ours
            tf.compat.v1.nn.conv2d_backprop_filter(...)       # ours
            tf.raw_ops.Conv2DBackpropInput(...)               # ours

    TF's functions are put back on exit, also when the block raises. Process-global and
    not thread-safe (it swaps module attributes; see the module docstring). Nesting is
    fine.
    """
    saved = []
    try:
        for module, _, name, replacement in patch_targets():
            saved.append((module, name, getattr(module, name)))
            setattr(module, name, replacement)
        yield
    finally:
        for module, name, original in reversed(saved):
            setattr(module, name, original)
