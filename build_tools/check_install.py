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

SIX = ("conv2d_backprop_input", "conv2d_backprop_filter", "depthwise_conv2d_backprop_input",
       "depthwise_conv2d_backprop_filter", "depthwise_conv2d_native_backprop_input",
       "depthwise_conv2d_native_backprop_filter")
NAMES = ([(tcb.nn, "nn", n) for n in SIX] + [(tcb.compat.v1.nn, "compat.v1.nn", n) for n in SIX]
         + [(tcb.compat.v2.nn, "compat.v2.nn", n) for n in SIX[2:4]])


def main():
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal([2, 6, 6, 3]), tf.float32)
    w = tf.constant(rng.standard_normal([3, 3, 3, 2]), tf.float32)
    for module, namespace, name in NAMES:
        depthwise = "depthwise" in name
        dy = tf.constant(rng.standard_normal([2, 3, 3, 6 if depthwise else 2]), tf.float32)
        args = ((x.shape.as_list(), w, dy) if "input" in name else (x, w.shape.as_list(), dy))
        errs = []
        for jit in (False, True):
            def call(fn):
                return tf.function(lambda: fn(*args, strides=[1, 2, 2, 1], padding="SAME"),
                                   jit_compile=jit)() if jit else fn(*args, strides=[1, 2, 2, 1],
                                                                     padding="SAME")
            ours = call(getattr(module, name))
            theirs = call(getattr(tf.compat.v1.nn, name))
            errs.append(float(tf.norm(ours - theirs) / tf.norm(theirs)))
            assert errs[-1] < 1e-5, f"{namespace}.{name} (XLA: {jit}): relative difference {errs[-1]}"
        print(f"ok  tf_conv_backprop.{namespace}.{name}  rel diff vs TF {errs[0]:.1e}, "
              f"under XLA {errs[1]:.1e}")
    print(f"{len(NAMES)} public names OK from {os.path.dirname(tcb.__file__)}")


if __name__ == "__main__":
    main()
