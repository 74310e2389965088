"""`with tf_conv_backprop.patched():` routes TF's public names for the four gradients to
ours (10 Python names in tf.nn / tf.compat.v1.nn / tf.compat.v2.nn and the 4
tf.raw_ops) and restores TF's on exit, also when the block raises."""
import inspect

import numpy as np
import pytest
import tensorflow as tf

import tf_conv_backprop as tcb
from tf_conv_backprop._patching import patch_targets

EXPECTED = sorted(
    [("tf.compat.v1.nn", n) for n in (
        "conv2d_backprop_input", "conv2d_backprop_filter",
        "depthwise_conv2d_backprop_input", "depthwise_conv2d_backprop_filter",
        "depthwise_conv2d_native_backprop_input", "depthwise_conv2d_native_backprop_filter")]
    + [(ns, n) for ns in ("tf.nn", "tf.compat.v2.nn")
       for n in ("depthwise_conv2d_backprop_input", "depthwise_conv2d_backprop_filter")]
    + [("tf.raw_ops", n) for n in (
        "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter")])
MODULES = {"tf.nn": tf.nn, "tf.compat.v1.nn": tf.compat.v1.nn,
           "tf.compat.v2.nn": tf.compat.v2.nn, "tf.raw_ops": tf.raw_ops}


def _current():
    return {(ns, name): getattr(MODULES[ns], name) for ns, name in EXPECTED}


ORIGINAL = _current()


def _op_type(ns, name):
    """The op type a call of TF's public name creates (in a graph)."""
    fn = getattr(MODULES[ns], name)
    depthwise = "depthwise" in name.lower()
    inputs = "input" in name.lower()
    x = tf.ones([1, 5, 5, 2])
    w = tf.ones([3, 3, 2, 1 if depthwise else 3])
    dy = tf.ones([1, 5, 5, 2 if depthwise else 3])
    if inputs:
        first, second = tf.constant([1, 5, 5, 2]), w
    else:
        first, second = x, tf.constant(w.shape.as_list())
    if ns == "tf.raw_ops":
        key = "input_sizes" if inputs else "input"
        other = "filter" if inputs else "filter_sizes"
        out = fn(**{key: first, other: second}, out_backprop=dy, strides=[1, 1, 1, 1],
                 padding="SAME")
    else:
        out = fn(first, second, dy, strides=[1, 1, 1, 1], padding="SAME")
    return out.op.type


def test_fourteen_targets():
    got = sorted((ns, name) for _, ns, name, _ in patch_targets())
    assert got == EXPECTED
    assert len(got) == 14


def test_routes_every_name_and_restores():
    with tf.Graph().as_default():
        before = {key: _op_type(*key) for key in EXPECTED}
        with tcb.patched():
            during = {key: _op_type(*key) for key in EXPECTED}
            for (ns, name), fn in _current().items():
                if ns != "tf.raw_ops":
                    assert fn is getattr(tcb.compat.v1.nn, name), (ns, name)
        after = {key: _op_type(*key) for key in EXPECTED}
    for key in EXPECTED:
        assert not before[key].startswith("ConvBackprop>"), (key, before[key])
        assert during[key] == "ConvBackprop>" + before[key], (key, during[key])
        assert after[key] == before[key], key
    assert _current() == ORIGINAL


def test_restores_when_block_raises():
    with pytest.raises(KeyError, match="boom"):
        with tcb.patched():
            assert tf.nn.depthwise_conv2d_backprop_input is tcb.nn.depthwise_conv2d_backprop_input
            raise KeyError("boom")
    assert _current() == ORIGINAL


def test_nested():
    with tcb.patched():
        with tcb.patched():
            pass
        assert tf.compat.v1.nn.conv2d_backprop_filter is tcb.nn.conv2d_backprop_filter
    assert _current() == ORIGINAL


def test_patched_results_are_ours_eager():
    """Where TF is wrong (dilated depthwise gradient), the patched TF name gives ours."""
    rng = np.random.default_rng(11)
    w = tf.constant(rng.standard_normal([3, 3, 2, 2]), tf.float64)
    dy = tf.constant(rng.standard_normal([1, 7, 7, 4]), tf.float64)
    kwargs = dict(strides=[1, 1, 1, 1], padding="SAME", dilations=[1, 2, 2, 1])
    ours = tcb.nn.depthwise_conv2d_backprop_input([1, 7, 7, 2], w, dy, **kwargs)
    with tcb.patched():
        patched = tf.nn.depthwise_conv2d_backprop_input([1, 7, 7, 2], w, dy, **kwargs)
        raw = tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
            input_sizes=[1, 7, 7, 2], filter=w, out_backprop=dy, **kwargs)
    theirs = tf.nn.depthwise_conv2d_backprop_input([1, 7, 7, 2], w, dy, **kwargs)
    np.testing.assert_array_equal(patched.numpy(), ours.numpy())
    np.testing.assert_array_equal(raw.numpy(), ours.numpy())
    assert not np.allclose(theirs.numpy(), ours.numpy())  # TF ignores the dilation


@pytest.mark.parametrize("name", [n for ns, n in EXPECTED if ns == "tf.raw_ops"])
def test_raw_op_stand_ins(name):
    stand_in = {n: fn for _, ns, n, fn in patch_targets() if ns == "tf.raw_ops"}[name]
    assert inspect.signature(stand_in) == inspect.signature(getattr(tf.raw_ops, name))
    with pytest.raises(TypeError, match="only takes keyword args"):
        stand_in(tf.constant([1, 5, 5, 2]))


def test_documented_as_process_global():
    doc = tcb.patched.__doc__
    assert "process-global" in doc.lower() and "not thread-safe" in doc.lower()
