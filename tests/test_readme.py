"""The README's "Training" examples run as written and compute what they say.
training.py, patching.py and save.py run here and their results are checked against TF's
built-ins or the float64 reference; load.py runs in a fresh process (as the README says
it must) under a time limit. mirrored.py and worker.py run inside test_distribute.py's
processes, before its own checks (they must own a fresh process: device set-up,
TF_CONFIG)."""
import math
import os
import runpy
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import readme
import reference
import tf_conv_backprop as tcb
from tf_conv_backprop._ops import BY_KEY, relative_error, within

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(tcb.__file__)))
TIMEOUT_S = 120


def test_examples_present():
    assert set(readme.training_examples()) == set(readme.NAMES)


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readme")
    return readme.write_examples(tmp, replace=[("/tmp/tcb_net", str(tmp / "tcb_net"))])


def test_training_example(examples):
    """Its first and second order filter gradients (ours, NCHW float64, which TF's CPU
    kernels refuse) are TF's on the NHWC transpose, and the Keras model trains."""
    ran = runpy.run_path(examples["training.py"], run_name="__main__")
    x, w = ran["x"], ran["w"]
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = tf.nn.conv2d(tf.transpose(x, [0, 2, 3, 1]), w, 1, "SAME")
            loss = tf.reduce_sum(y ** 2)
        dw = inner.gradient(loss, w)
        penalty = tf.reduce_sum(dw ** 2)
    d2w = outer.gradient(penalty, w)
    n, _, rows, cols = x.shape
    length = BY_KEY["conv2d_filter"].reduction_length(w.shape, n, rows, cols)
    # Both sides approximate: twice one op's budget for dw; d2w chains two filter
    # gradients (dw's and its own), so twice that.
    err = relative_error(ran["dw"], dw)
    assert within(err, "float64", length, factor=2), f"dw vs TF: relative error {err}"
    err = relative_error(ran["d2w"], d2w)
    assert within(err, "float64", length, factor=4), f"d2w vs TF: relative error {err}"
    model = ran["model"]
    assert isinstance(model.layers[0], tcb.keras.Conv2D)
    assert isinstance(model.layers[1], tcb.keras.DepthwiseConv2D)
    losses = model.history.history["loss"]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses), losses
    assert all(np.all(np.isfinite(v)) for v in model.get_weights())


def test_patching_example(examples):
    """Inside the block TF's name ran ours, the true gradient of the dilated depthwise
    convolution (not what TF's built-in returns); on exit TF's function is back."""
    tf_fn = tf.nn.depthwise_conv2d_backprop_input
    ran = runpy.run_path(examples["patching.py"], run_name="__main__")
    assert tf.nn.depthwise_conv2d_backprop_input is tf_fn
    w, dy, dx = ran["w"], ran["dy"], ran["dx"]
    args = ([1, 7, 7, 2], w, dy, [1, 1, 1, 1], "SAME")
    want = reference.depthwise_backprop_input(*args, dilations=[1, 2, 2, 1])
    length = BY_KEY["depthwise_input"].reduction_length(w.shape, 1, 7, 7)
    err = relative_error(dx, want)
    assert within(err, "float32", length), f"dx vs the float64 reference: relative error {err}"
    tf_err = relative_error(tf_fn(*args, dilations=[1, 2, 2, 1]), want)
    assert not within(tf_err, "float32", length, factor=2), (
        f"TF's built-in now honours the dilation (error {tf_err}): the README's comment is stale")


def test_save_then_load_in_fresh_process(examples):
    runpy.run_path(examples["save.py"], run_name="__main__")
    # Here: the loaded function is the convolution with the saved weights, and its saved
    # gradient (our op) is TF's.
    net = tf.saved_model.load(os.path.join(os.path.dirname(examples["save.py"]), "tcb_net"))
    x = tf.constant(np.random.default_rng(0).standard_normal([2, 16, 16, 3]), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = net(x)
    dx = tape.gradient(y, x)
    np.testing.assert_array_equal(y.numpy(), tf.nn.conv2d(x, net.w, 1, "SAME").numpy())
    want = tf.compat.v1.nn.conv2d_backprop_input(x.shape, net.w, tf.ones_like(y), [1, 1, 1, 1],
                                                 "SAME")
    length = BY_KEY["conv2d_input"].reduction_length(net.w.shape, 2, 16, 16)
    err = relative_error(dx, want)
    assert within(err, "float32", length, factor=2), f"loaded gradient vs TF: {err}"
    # And in a fresh process, as the README runs load.py.
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    proc = subprocess.Popen([sys.executable, examples["load.py"]],
                            cwd=os.path.dirname(examples["load.py"]), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-4000:]
    assert "(1, 16, 16, 8)" in out, out[-2000:]
