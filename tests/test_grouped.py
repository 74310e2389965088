"""Grouped conv2d gradients (input depth = groups x the filter's in-depth), which TF's
CPU kernels refuse ("Gradients for grouped convolutions are not supported on CPU";
"filter_size does not have enough elements") and TF's GPU kernels run.

- both ops over groups (2, 3, 4, one channel per group, 32 narrow groups) x 1x1 / 3x3
  x every dtype x both layouts, with strides, dilations and explicit padding, against
  the float64 reference (which sums group by group) and TF's built-in wherever TF's
  CPU kernel runs the case (oneDNN does some);
- int32 Conv2DBackpropInput grouped, exactly;
- under XLA: ours against TF's own XLA lowering of its built-ins (which takes grouped
  shapes on every device), and the compiled HLO is one convolution;
- tcb.conv2d with a grouped filter to second order against tf.nn.conv2d's gradients
  under XLA;
- a ResNeXt-style block of tcb.keras.Conv2D(groups > 1) trains on CPU to the weights of
  the same Keras model trained under XLA, also with TF's oneDNN off (Grappler must not
  fuse a grouped forward with its bias: TF's Eigen _FusedConv2D refuses groups).
Bad grouped shapes (a depth that does not divide, an output depth the groups cannot
share, zero groups) are in the bad-input corpus (tests/bad_inputs.py), run in a child
process."""
import itertools
import json
import sys

import numpy as np
import pytest
import tensorflow as tf

import cases
import tf_conv_backprop as tcb
from cases import DTYPES, FORMATS, Case, make_arrays
from child_process import run_child

# (groups, in_depth, out_channels): two groups, three, four, one channel per group,
# ResNeXt's narrow groups (32 of 4: the CPU merges them 4 to a 16-channel slice),
# RegNet's 7 groups of 8 (2 a slice, the last slice half zeros), 6 groups of 4 -> 16.
GROUPINGS = ((2, 4, 6), (3, 6, 9), (4, 8, 4), (5, 5, 10), (32, 128, 128), (7, 56, 56),
             (6, 24, 96))
KERNELS = ((1, 1), (3, 3))
# (strides, dilations, padding, pads), taken in turn so each grouping meets each.
GEOMETRIES = (((1, 1), (1, 1), "SAME", (0, 0, 0, 0)),
              ((2, 2), (1, 1), "VALID", (0, 0, 0, 0)),
              ((1, 2), (2, 1), "EXPLICIT", (1, 2, 0, 1)),
              ((2, 1), (2, 2), "SAME", (0, 0, 0, 0)))
OPS = ("conv2d_input", "conv2d_filter")


def grouped_case(op, dtype, data_format, grouping, kernel, geometry, seed=0):
    groups, in_depth, out_channels = grouping
    strides, dilations, padding, pads = geometry
    rows = 7 if in_depth < 64 else 5
    return Case(op=op, dtype=dtype, data_format=data_format, padding=padding, batch=2,
                in_rows=rows, in_cols=rows + 1, in_depth=in_depth, filter_rows=kernel[0],
                filter_cols=kernel[1], out_channels=out_channels, strides=strides,
                dilations=dilations, pads=pads, groups=groups, seed=seed)


def _params():
    for i, (op, grouping, kernel, dtype, fmt) in enumerate(
            itertools.product(OPS, GROUPINGS, KERNELS, DTYPES, FORMATS)):
        yield pytest.param(op, dtype, fmt, grouping, kernel, GEOMETRIES[i % len(GEOMETRIES)],
                           id=f"{op}-g{grouping[0]}-{kernel[0]}x{kernel[1]}-{dtype}-{fmt}-{i}")


@pytest.mark.parametrize("op,dtype,data_format,grouping,kernel,geometry", list(_params()))
def test_grouped_against_oracles(op, dtype, data_format, grouping, kernel, geometry):
    cases.check_against_oracles(grouped_case(op, dtype, data_format, grouping, kernel,
                                             geometry, seed=len(grouping) + kernel[0]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("grouping", ((2, 16, 16), (4, 64, 64), (2, 32, 32)))
def test_grouped_input_gradient_with_an_infinite_filter_tap(dtype, data_format, grouping):
    """The direct tiles decline a non-finite filter, and for groups of whole vectors they
    are the only row that takes a grouped call: the engine must then run it as dense
    slices (this raised InternalError "no CPU kernel variant accepted the call"). inf and
    NaN land exactly where the reference has them: no padding zero meets the inf."""
    case = grouped_case("conv2d_input", dtype, data_format, grouping, (3, 3), GEOMETRIES[0])
    arrays = make_arrays(case)
    arrays["filter"][0, 0, 3, 5] = np.inf
    ours, expected = cases.run_ours(case, arrays), cases.run_reference(case, arrays)
    finite = np.isfinite(expected)
    assert finite.any() and not finite.all()
    for kind in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(kind(ours), kind(expected))
    err = cases.relative_error(ours[finite], expected[finite])
    assert cases.within(err, case), f"{case}: relative error vs reference {err}"


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("grouping", GROUPINGS[:4])
def test_grouped_int32_exact(data_format, grouping):
    case = grouped_case("conv2d_input", "int32", data_format, grouping, (3, 3), GEOMETRIES[2])
    rng = np.random.default_rng(3)
    w = rng.integers(-9, 10, case.filter_shape)
    dy = rng.integers(-9, 10, case.out_backprop_shape)
    arrays = {"filter": w.astype(np.float64), "out_backprop": dy.astype(np.float64)}
    got = tcb.nn.conv2d_backprop_input(case.input_shape, tf.constant(w, tf.int32),
                                       tf.constant(dy, tf.int32), case.strides4, case.tf_padding,
                                       data_format=data_format, dilations=case.dilations4)
    assert got.dtype == tf.int32
    np.testing.assert_array_equal(got.numpy(), cases.run_reference(case, arrays).astype(np.int64))


def _xla(fn, case, arrays):
    first, second, dy = cases.call_args(case, arrays, as_tensor=True)

    def call(a, b, d):
        return fn(a, b, d, strides=case.strides4, padding=case.tf_padding,
                  data_format=case.data_format, dilations=case.dilations4)

    f = tf.function(call, jit_compile=True, autograph=False)
    return f, (first, second, dy), tf.cast(f(first, second, dy), tf.float64).numpy()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("grouping", (GROUPINGS[1], GROUPINGS[4]))
def test_grouped_xla(op, dtype, data_format, grouping):
    case = grouped_case(op, dtype, data_format, grouping, (3, 3), GEOMETRIES[3], seed=5)
    arrays = cases.make_arrays(case)
    f, args, ours = _xla(cases.our_function(op), case, arrays)
    err = cases.relative_error(ours, cases.run_reference(case, arrays))
    assert cases.within(err, case), f"{case}: XLA vs float64 reference {err}"
    _, _, theirs = _xla(case.spec.tf_reference, case, arrays)
    err_tf = cases.relative_error(ours, theirs)
    assert cases.within(err_tf, case, factor=2), f"{case}: ours vs TF's built-in, XLA {err_tf}"
    hlo = f.experimental_get_compiler_ir(*args)(stage="hlo")
    assert hlo.count(" convolution(") == 1, hlo


def _grouped_conv_grads(conv, x, w, jit_compile):
    """First- and second-order gradients of a grouped conv2d through `conv`."""
    def run(x, w):
        with tf.GradientTape() as outer:
            outer.watch([x, w])
            with tf.GradientTape() as inner:
                inner.watch([x, w])
                y = conv(x, w)
                loss = tf.reduce_sum(tf.sin(y))
            dx, dw = inner.gradient(loss, [x, w])
            second = tf.reduce_sum(dx * dx) + tf.reduce_sum(tf.cos(dw))
        return [dx, dw] + outer.gradient(second, [x, w])

    return [g.numpy() for g in tf.function(run, jit_compile=jit_compile)(x, w)]


@pytest.mark.parametrize("data_format", FORMATS)
def test_grouped_second_order(data_format):
    rng = np.random.default_rng(11)
    shape = (2, 6, 7, 6) if data_format == "NHWC" else (2, 6, 6, 7)
    x = tf.constant(rng.standard_normal(shape), tf.float64)
    w = tf.constant(rng.standard_normal((3, 3, 2, 9)), tf.float64)
    strides, dilations = [1, 2, 1, 1], [1, 1, 2, 1]
    if data_format == "NCHW":
        strides, dilations = [1, 1, 2, 1], [1, 1, 1, 2]
    kwargs = dict(strides=strides, padding="SAME", data_format=data_format, dilations=dilations)
    ours = _grouped_conv_grads(lambda a, b: tcb.conv2d(a, b, **kwargs), x, w, jit_compile=False)
    theirs = _grouped_conv_grads(lambda a, b: tf.nn.conv2d(a, b, **kwargs), x, w,
                                 jit_compile=True)
    for name, a, b in zip(("dx", "dw", "d2x", "d2w"), ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9, err_msg=name)


def _resnext_block(ours, seed=0):
    """A ResNeXt bottleneck: 1x1 -> grouped 3x3 (8 groups of 2) -> 1x1, plus the shortcut,
    then a grouped strided 3x3 (4 groups of 4), pooled into a Dense head."""
    keras = tf.keras
    conv = tcb.keras if ours else keras.layers
    inputs = keras.Input((8, 8, 16), dtype="float64")
    h = conv.Conv2D(16, 1, activation="tanh", dtype="float64")(inputs)
    h = conv.Conv2D(16, 3, padding="same", groups=8, activation="tanh", dtype="float64")(h)
    h = conv.Conv2D(16, 1, dtype="float64")(h)
    h = keras.layers.Activation("tanh", dtype="float64")(keras.layers.Add(dtype="float64")([h, inputs]))
    h = conv.Conv2D(8, 3, strides=2, groups=4, activation="tanh", dtype="float64")(h)
    h = keras.layers.GlobalAveragePooling2D(dtype="float64")(h)
    model = keras.Model(inputs, keras.layers.Dense(2, dtype="float64")(h))
    rng = np.random.default_rng(seed)
    model.set_weights([0.3 * rng.standard_normal(v.shape) for v in model.get_weights()])
    return model


def test_resnext_block_trains_on_cpu_as_under_xla():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 8, 8, 16))
    y = rng.standard_normal((8, 2))
    weights = []
    for ours, jit in ((True, False), (False, True)):
        model = _resnext_block(ours)
        if ours:
            kinds = {type(layer).__module__ for layer in model.layers if "Conv" in type(layer).__name__}
            assert kinds == {"tf_conv_backprop.keras"}, kinds
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse", jit_compile=jit)
        history = model.fit(x, y, batch_size=8, epochs=15, shuffle=False, verbose=0)
        losses = history.history["loss"]
        assert losses[-1] < 0.8 * losses[0], losses
        weights.append(model.get_weights())
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def _grouped_bias_layer_loss():
    """Losses of a few CPU training steps of a grouped tcb.keras.Conv2D with a bias."""
    import tf_conv_backprop.keras as tcb_keras  # pylint: disable=import-outside-toplevel
    keras = tf.keras
    inputs = keras.Input((6, 6, 8))
    h = tcb_keras.Conv2D(8, 3, padding="same", groups=4, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.GlobalAveragePooling2D()(h)))
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", jit_compile=False)
    rng = np.random.default_rng(2)
    history = model.fit(rng.standard_normal((4, 6, 6, 8)), rng.standard_normal((4, 1)),
                        batch_size=4, epochs=3, verbose=0)
    return history.history["loss"]


def test_grouped_keras_layer_trains_with_onednn_off():
    result = run_child(__file__, "bias", extra_env={"TF_ENABLE_ONEDNN_OPTS": "0"})
    assert len(result["losses"]) == 3 and np.all(np.isfinite(result["losses"])), result


def test_grouped_graph_holds_our_ops():
    """The CPU training step of a grouped tcb.conv2d runs our ops (no TF fallback)."""
    x = tf.ones([1, 5, 5, 4])
    w = tf.ones([3, 3, 2, 4])

    @tf.function
    def grads(x, w):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            y = tcb.conv2d(x, w, 1, "SAME")
        return tape.gradient(y, [x, w])

    ops = {op.type for op in grads.get_concrete_function(x, w).graph.get_operations()}
    assert {"ConvBackprop>Conv2DBackpropInput", "ConvBackprop>Conv2DBackpropFilter"} <= ops, ops
    dx, dw = grads(x, w)
    assert dx.shape == x.shape and dw.shape == w.shape


if __name__ == "__main__":
    assert sys.argv[1] == "bias"
    print("RESULT " + json.dumps({"losses": [float(v) for v in _grouped_bias_layer_loss()]}))
