"""Training with tf_conv_backprop.keras' layers (and tcb.conv2d / depthwise_conv2d):

- where TF's built-ins work, a small CNN trained for 20 SGD steps ends at the same
  weights as the same CNN built from Keras' own layers;
- where TF's built-in CPU gradients fail, it still trains: NCHW in float64 (TF's CPU
  Conv2D kernels reject it) ends at the same weights as the NHWC run, and dilated
  depthwise convolutions get the true gradient (TF's DepthwiseConv2dNative gradients
  ignore the dilation);
- the layers are drop-in subclasses: same arguments, configs, serialization.

The CNN, its seeded weights and data are in cnn.py."""
import inspect

import numpy as np
import pytest
import tensorflow as tf

import cnn
import reference
import tf_conv_backprop as tcb
import tf_conv_backprop.keras as tcb_keras

TF_ERRORS = (tf.errors.UnimplementedError, tf.errors.InvalidArgumentError)

# id -> (build arguments, atol on the final weights)
SUPPORTED_BY_TF = {
    "nhwc-float32": (dict(), 2e-5),
    "nhwc-float64": (dict(dtype="float64"), 1e-10),
    "dilated-float64": (dict(dtype="float64", dilation=2), 1e-10),
    "strided-depthwise-float32": (dict(dw_strides=2), 2e-5),
    "strided-dilated-depthwise-float64": (dict(dtype="float64", dilation=2, dw_strides=2), 1e-10),
}


def _assert_same_weights(got, want, atol, msg):
    assert len(got) == len(want), msg
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, f"{msg}: weight {i} shape {a.shape} != {b.shape}"
        np.testing.assert_allclose(a, b, rtol=atol, atol=atol, err_msg=f"{msg}: weight {i}")


def _train(ours, data_format="channels_last", **build_args):
    x, y = cnn.data(data_format, build_args.get("dtype", "float32"))
    return cnn.train(cnn.build(ours, data_format, **build_args), x, y)


@pytest.mark.parametrize("config", list(SUPPORTED_BY_TF))
def test_same_weights_as_keras(config):
    build_args, atol = SUPPORTED_BY_TF[config]
    losses, ours = _train(True, **build_args)
    keras_losses, theirs = _train(False, **build_args)
    assert losses[-1] < 0.75 * losses[0], f"{config}: did not train: {losses}"
    np.testing.assert_allclose(losses, keras_losses, rtol=max(atol, 1e-6))
    _assert_same_weights(ours, theirs, atol, config)


@pytest.mark.parametrize("dilation", [1, 2])
def test_nchw_float64_trains_where_tf_fails(dilation):
    """Keras' own channels_first Conv2D cannot even run forward in float64 on CPU; ours
    trains, and ends where the NHWC run ends (conv kernels are HWIO in both layouts)."""
    x, y = cnn.data("channels_first", "float64")
    keras_model = cnn.build(False, "channels_first", "float64", dilation=dilation)
    try:
        cnn.train(keras_model, x, y, steps=1)
    except TF_ERRORS as e:
        assert "NHWC" in str(e) or "support" in str(e), str(e)[:500]
    else:  # a TF that runs it: fine, the comparison below still holds
        pass
    losses, nchw = cnn.train(cnn.build(True, "channels_first", "float64", dilation=dilation), x, y)
    assert losses[-1] < 0.75 * losses[0], losses
    _, nhwc = _train(False, dtype="float64", dilation=dilation)
    _assert_same_weights(nchw, nhwc, 1e-10, f"NCHW (ours) vs NHWC (Keras), dilation {dilation}")


def test_dilated_depthwise_where_tf_gradients_fail():
    """TF's DepthwiseConv2dNative with dilations: its forward is rejected on CPU (or runs
    through oneDNN) and its registered gradient ignores the dilation. Ours is the true
    gradient (NumPy reference) and its forward equals TF's."""
    rng = np.random.default_rng(5)
    x = tf.constant(rng.standard_normal([2, 9, 8, 3]), tf.float32)
    w = tf.constant(rng.standard_normal([3, 3, 3, 2]), tf.float32)
    dy = rng.standard_normal([2, 9, 8, 6])
    attrs = dict(strides=[1, 1, 1, 1], padding="SAME", dilations=[1, 2, 2, 1])
    want_dx = reference.depthwise_backprop_input(x.shape, w.numpy(), dy, **attrs)
    want_dw = reference.depthwise_backprop_filter(x.numpy(), w.shape, dy, **attrs)
    rel = lambda a, b: np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b)  # noqa: E731

    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, w])
        ours = tcb.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME", dilations=[2, 2])
        loss = tf.reduce_sum(ours * dy)
    dx, dw = tape.gradient(loss, [x, w])
    assert rel(dx, want_dx) < 1e-5 and rel(dw, want_dw) < 1e-5

    try:
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            theirs = tf.raw_ops.DepthwiseConv2dNative(input=x, filter=w, **attrs)
            loss = tf.reduce_sum(theirs * dy)
        tf_dx, tf_dw = tape.gradient(loss, [x, w])
    except TF_ERRORS:
        return  # TF's CPU kernel rejects the dilation outright (oneDNN off)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)
    assert rel(tf_dx, want_dx) > 0.1 or rel(tf_dw, want_dw) > 0.1, (
        "TF's dilated depthwise gradient is now right: update this test and the README")


def test_dilated_depthwise_nchw_float64():
    """Dilated depthwise (and conv) in NCHW float64: ours ends where Keras' NHWC run ends."""
    x, y = cnn.data("channels_first", "float64")
    model = cnn.build(True, "channels_first", "float64", dilation=2, dw_strides=2)
    _, nchw = cnn.train(model, x, y)
    _, nhwc = _train(False, dtype="float64", dilation=2, dw_strides=2)
    _assert_same_weights(nchw, nhwc, 1e-10, "NCHW dilated strided (ours) vs NHWC (Keras)")


# --------------------------------------------------------------------------------------
# Drop-in layers
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["Conv2D", "DepthwiseConv2D"])
def test_layers_are_drop_in(name):
    ours, theirs = getattr(tcb_keras, name), getattr(tf.keras.layers, name)
    assert issubclass(ours, theirs)
    assert inspect.signature(ours.__init__) == inspect.signature(theirs.__init__)
    assert tcb.keras is tcb_keras
    layer = ours(4 if name == "Conv2D" else 2, 3, padding="same", name="layer")
    config = layer.get_config()
    assert type(ours.from_config(config)) is ours
    assert tf.keras.utils.get_registered_name(ours) == f"tf_conv_backprop>{name}"
    clone = tf.keras.layers.deserialize(tf.keras.layers.serialize(layer))
    assert type(clone) is ours


def test_layers_run_our_gradient_ops():
    model = cnn.build(True, dilation=2)
    x, y = cnn.data()

    @tf.function
    def grads(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x) ** 2)
        return tape.gradient(loss, model.trainable_variables)

    graph = grads.get_concrete_function(x).graph
    types = {op.type for op in graph.get_operations()}
    for fn in graph.as_graph_def().library.function:
        types |= {node.op for node in fn.node_def}
    assert {op.op_name for op in tcb._ops.OPS} <= types, sorted(types)
    assert not {t for t in types if "Backprop" in t and not t.startswith("ConvBackprop>")}


# Keras' own numpy conversion warns under NumPy 2 (keras/src/backend/tensorflow/core.py).
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_model_fit_and_keras_save(tmp_path):
    """compile/fit work, and a saved .keras model reloads with our layers."""
    x, y = cnn.data()
    model = cnn.build(True)
    model.compile(optimizer=tf.keras.optimizers.SGD(cnn.LEARNING_RATE), loss="mse")
    history = model.fit(x, y, batch_size=cnn.BATCH, epochs=3, verbose=0, shuffle=False)
    assert history.history["loss"][-1] < history.history["loss"][0]
    path = str(tmp_path / "cnn.keras")
    model.save(path)
    loaded = tf.keras.models.load_model(path)
    assert [type(layer) for layer in loaded.layers] == [type(layer) for layer in model.layers]
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), rtol=1e-6, atol=1e-6)
