"""Calls all fourteen public names of an installed tf_conv_backprop and compares
each with TF's built-in on a small case, eagerly and compiled with XLA
(jit_compile=True) on both sides. Run it with the interpreter of the
environment to check, from outside the source tree:

    cd /tmp && /path/to/venv/bin/python /path/to/check_install.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_conv_backprop as tcb  # noqa: E402
from tf_conv_backprop._ops import BY_NAME, relative_error, within  # noqa: E402
from tf_conv_backprop._wrappers import V1_NAMES, V2_NAMES  # noqa: E402

NAMES = ([(tcb.nn, "nn", n) for n in V1_NAMES]
         + [(tcb.compat.v1.nn, "compat.v1.nn", n) for n in V1_NAMES]
         + [(tcb.compat.v2.nn, "compat.v2.nn", n) for n in V2_NAMES])


def main():
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal([2, 6, 6, 3]), tf.float32)
    w = tf.constant(rng.standard_normal([3, 3, 3, 2]), tf.float32)
    assert len(NAMES) == 14, f"expected TF's fourteen public names, the table gives {NAMES}"
    for module, namespace, name in NAMES:
        spec = BY_NAME[name]
        dy = tf.constant(rng.standard_normal([2, 3, 3, 6 if spec.depthwise else 2]), tf.float32)
        args = ((x.shape.as_list(), w, dy) if spec.computes == "input"
                else (x, w.shape.as_list(), dy))
        errs = []
        for jit in (False, True):
            def call(fn):
                return tf.function(lambda: fn(*args, strides=[1, 2, 2, 1], padding="SAME"),
                                   jit_compile=jit)() if jit else fn(*args, strides=[1, 2, 2, 1],
                                                                     padding="SAME")
            ours = call(getattr(module, name))
            theirs = call(getattr(tf.compat.v1.nn, name))
            errs.append(relative_error(ours, theirs))
            assert within(errs[-1], "float32", spec.reduction_length(w.shape, 2, 3, 3), factor=2), (
                f"{namespace}.{name} (XLA: {jit}): relative difference {errs[-1]}")
        print(f"ok  tf_conv_backprop.{namespace}.{name}  rel diff vs TF {errs[0]:.1e}, "
              f"under XLA {errs[1]:.1e}")
    print(f"{len(NAMES)} public names OK from {os.path.dirname(tcb.__file__)}")


if __name__ == "__main__":
    main()
