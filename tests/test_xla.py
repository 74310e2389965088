"""Our ops under XLA (`tf.function(jit_compile=True)`, Keras 3's default on GPU machines).

- every op over dtype x layout x padding x (dilation 1, > 1), random strides (unequal
  ones included), depth multipliers and the (rows, cols) input_sizes form, against the
  NumPy float64 reference and against the same call without XLA; the compiled HLO is
  one convolution, so XLA (not a fallback) computed it;
- all fourteen public names, empty tensors, a non-constant sizes input (a clear error);
- second-order gradients of tcb.conv2d / tcb.depthwise_conv2d under XLA;
- a Keras model compiled with jit_compile=True trains to the weights of the same model
  fitted without XLA.
Bad inputs under XLA are part of the bad-input corpus (tests/test_bad_inputs.py, mode
"xla"); SavedModels after a plain import are in tests/test_savedmodel.py."""
import itertools

import numpy as np
import pytest
import tensorflow as tf

import cases
import cnn
import tf_conv_backprop as tcb
from tf_conv_backprop import _ops
from cases import DTYPES, EMPTY, FORMATS, PADDINGS, empty_case, make_arrays, sample_case
from tf_conv_backprop._ops import BY_NAME, OPS
from tf_conv_backprop._wrappers import V1_NAMES, V2_NAMES

CASES_PER_CELL = 2
CELLS = list(itertools.product([op.key for op in OPS], DTYPES, FORMATS, PADDINGS, (False, True)))
PARAMS = [(7000 + cell_index * 10 + i, *cell) for cell_index, cell in enumerate(CELLS)
          for i in range(CASES_PER_CELL)]


def _compiled(case, jit_compile=True, fn=None):
    fn = fn or cases.our_function(case.op)

    def call(a, b, dy):
        return fn(a, b, dy, strides=case.strides4, padding=case.tf_padding,
                  data_format=case.data_format, dilations=case.dilations4)

    return tf.function(call, jit_compile=jit_compile, autograph=False)


def _run_compiled(case, arrays, jit_compile=True, fn=None):
    args = cases.call_args(case, arrays, as_tensor=True)
    f = _compiled(case, jit_compile, fn)
    return f, args, tf.cast(f(*args), tf.float64).numpy()


@pytest.mark.parametrize("seed,op,dtype,data_format,padding,dilated", PARAMS)
def test_xla_parity(seed, op, dtype, data_format, padding, dilated):
    case = sample_case(op, dtype, data_format, padding, dilated, seed)
    arrays = make_arrays(case)
    _, _, got = _run_compiled(case, arrays)
    err = cases.relative_error(got, cases.run_reference(case, arrays))
    assert cases.within(err, case), f"{case}: XLA vs float64 reference {err}"
    _, _, plain = _run_compiled(case, arrays, jit_compile=False)
    err_plain = cases.relative_error(got, plain)
    assert cases.within(err_plain, case, factor=2), f"{case}: XLA vs our kernel {err_plain}"


@pytest.mark.parametrize("op", [op.key for op in OPS])
@pytest.mark.parametrize("data_format", FORMATS)
def test_xla_lowers_to_one_convolution(op, data_format):
    """XLA compiles our op itself: one convolution in the HLO, no custom call."""
    case = sample_case(op, "float32", data_format, "EXPLICIT", True, 11)
    f, args, _ = _run_compiled(case, make_arrays(case))
    hlo = f.experimental_get_compiler_ir(*args)(stage="hlo")
    assert hlo.count(" convolution(") == 1, hlo
    assert "custom-call" not in hlo, hlo


# The public names: (module, name, op key).
PUBLIC = [(mod, name, BY_NAME[name].key)
          for mod, names in [("nn", V1_NAMES), ("compat.v1.nn", V1_NAMES), ("compat.v2.nn", V2_NAMES)]
          for name in names]


def _public(mod, name):
    obj = tcb
    for part in mod.split("."):
        obj = getattr(obj, part)
    return getattr(obj, name)


def test_public_names_count():
    assert len(PUBLIC) == 14


@pytest.mark.parametrize("mod,name,key", PUBLIC, ids=[f"{m}.{n}" for m, n, _ in PUBLIC])
def test_every_public_name_under_xla(mod, name, key):
    case = sample_case(key, "float32", "NCHW", "SAME", True, 23)
    arrays = make_arrays(case)
    _, _, got = _run_compiled(case, arrays, fn=_public(mod, name))
    err = cases.relative_error(got, cases.run_reference(case, arrays))
    assert cases.within(err, case), f"{mod}.{name}: {case}: {err}"


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("op", [op.key for op in OPS])
@pytest.mark.parametrize("what,overrides", EMPTY, ids=[e[0] for e in EMPTY])
def test_xla_empty_tensors(what, overrides, op, data_format):
    case = empty_case(op, data_format, overrides)
    _, _, got = _run_compiled(case, make_arrays(case))
    expected = case.input_shape if case.spec.computes == "input" else case.filter_shape
    assert list(got.shape) == expected, f"{case}"
    assert not np.any(got), f"{case}: expected zeros"


@pytest.mark.parametrize("op", [op.key for op in OPS])
def test_non_constant_sizes_is_a_clear_error(op):
    """Sizes that change inside an XLA loop cannot be compile-time constants."""
    case = sample_case(op, "float32", "NHWC", "SAME", False, 5)
    arrays = make_arrays(case)
    first, second, dy = cases.call_args(case, arrays, as_tensor=True)
    fn = cases.our_function(op)
    sizes_name = case.spec.sizes_arg

    shape = case.input_shape if case.spec.computes == "input" else case.filter_shape

    @tf.function(jit_compile=True)
    def looped(first, second, dy):
        def body(i, acc):
            if case.spec.computes == "input":
                out = fn(first + i * 0, second, dy, case.strides4, "SAME")
            else:
                out = fn(first, second + i * 0, dy, case.strides4, "SAME")
            return i + 1, acc + tf.reshape(out, shape)
        return tf.while_loop(lambda i, _: i < 2, body, (0, tf.zeros(shape)))[1]

    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"`{sizes_name}` must be a compile-time constant under XLA"):
        looped(first, second, dy)


def test_sizes_from_static_shape_compile():
    """tf.shape() of a statically shaped tensor is a compile-time constant."""
    x = tf.random.stateless_normal([2, 7, 6, 3], seed=[1, 2], dtype=tf.float64)
    w = tf.random.stateless_normal([3, 3, 3, 4], seed=[3, 4], dtype=tf.float64)
    dy = tf.random.stateless_normal([2, 4, 3, 4], seed=[5, 6], dtype=tf.float64)

    def both(x, w, dy):
        dx = tcb.compat.v1.nn.conv2d_backprop_input(tf.shape(x), w, dy, [1, 2, 2, 1], "SAME")
        dw = tcb.compat.v1.nn.conv2d_backprop_filter(x, tf.shape(w), dy, [1, 2, 2, 1], "SAME")
        return dx, dw

    for got, want in zip(tf.function(both, jit_compile=True)(x, w, dy), both(x, w, dy)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_bad_attribute_under_xla_same_message():
    """Validation is geometry's, at compile time, with our kernels' message."""
    w, dy = tf.ones([3, 3, 2, 4]), tf.ones([1, 4, 4, 4])

    def call():
        return tcb.nn.conv2d_backprop_input([1, 4, 4, 2], w, dy, [1, 1, 1, 1], "VALID")

    messages = []
    for jit in (False, True):
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            tf.function(call, jit_compile=jit)()
        ours = [line for line in info.value.message.splitlines()
                if line.startswith("Conv2DBackpropInput: ")]
        assert ours, info.value.message
        messages.append(ours[0].split(" [[")[0].strip())
    assert "`out_backprop`" in messages[1], messages
    assert messages[0] == messages[1], messages


# Second order under XLA: Hessian-vector products of tcb.conv2d / depthwise_conv2d.
SECOND_ORDER = [
    # depthwise, data_format, strides, padding, dilations
    (False, "NHWC", (1, 1), "SAME", (1, 1)),
    (False, "NCHW", (2, 2), "SAME", (2, 2)),
    (False, "NHWC", (1, 2), [[0, 0], [1, 2], [0, 1], [0, 0]], (2, 1)),
    (True, "NHWC", (1, 1), "SAME", (2, 2)),
    (True, "NCHW", (2, 2), "VALID", (1, 1)),
]


@pytest.mark.parametrize("depthwise,data_format,strides,padding,dilations", SECOND_ORDER)
def test_second_order_under_xla(depthwise, data_format, strides, padding, dilations):
    rng = np.random.default_rng(3)
    shape = [2, 9, 8, 3] if data_format == "NHWC" else [2, 3, 9, 8]
    x = tf.constant(rng.standard_normal(shape))
    w = tf.constant(rng.standard_normal([3, 3, 3, 2 if depthwise else 4]))
    if data_format == "NCHW" and isinstance(padding, list):
        padding = [padding[0], padding[3], padding[1], padding[2]]

    def forward(x, w):
        if depthwise:
            strides4 = [1, 1, *strides] if data_format == "NCHW" else [1, *strides, 1]
            return tcb.depthwise_conv2d(x, w, strides4, padding, data_format=data_format,
                                        dilations=list(dilations))
        return tcb.conv2d(x, w, list(strides), padding, data_format=data_format,
                          dilations=list(dilations))

    def hvp(x, w):
        with tf.GradientTape(persistent=True) as outer:
            outer.watch([x, w])
            with tf.GradientTape() as inner:
                inner.watch([x, w])
                y = forward(x, w)
                loss = tf.reduce_sum(tf.sin(y))
            gx, gw = inner.gradient(loss, [x, w])
            s = tf.reduce_sum(gx * gx) + tf.reduce_sum(gw * gw)
        return (gx, gw) + tuple(outer.gradient(s, [x, w]))

    got = tf.function(hvp, jit_compile=True)(x, w)
    want = tf.function(hvp)(x, w)
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-10,
                                   err_msg=f"result {i}")
    graph = tf.function(hvp).get_concrete_function(x, w).graph
    types = {op.type for op in graph.get_operations()}
    assert any(t.startswith("ConvBackprop>") for t in types), types


@pytest.mark.parametrize("dtype,atol", [("float64", 1e-10), ("float32", 2e-5)])
def test_keras_jit_compile_trains_to_the_same_weights(dtype, atol):
    x, y = cnn.data(dtype=dtype)
    weights, losses = [], []
    for jit in (True, False):
        model = cnn.build(True, dtype=dtype, dilation=2, dw_strides=2)
        model.compile(optimizer=tf.keras.optimizers.SGD(cnn.LEARNING_RATE), loss="mse",
                      jit_compile=jit)
        if jit:
            assert model.jit_compile is True, "Keras turned XLA off for our layers"
        history = model.fit(x, y, batch_size=cnn.BATCH, epochs=10, shuffle=False, verbose=0)
        losses.append(history.history["loss"])
        weights.append(model.get_weights())
    assert losses[0][-1] < 0.9 * losses[0][0], f"did not train: {losses[0]}"
    # Keras tracks the loss in float32 whatever the model dtype.
    np.testing.assert_allclose(losses[0], losses[1], rtol=max(atol, 1e-6))
    for i, (a, b) in enumerate(zip(*weights)):
        np.testing.assert_allclose(a, b, rtol=atol, atol=atol, err_msg=f"weight {i}")


def test_layers_support_jit():
    import tf_conv_backprop.keras as tcb_keras
    for layer in (tcb_keras.Conv2D(2, 3), tcb_keras.DepthwiseConv2D(3)):
        assert getattr(layer, "supports_jit", True) is True


def test_without_xla_the_graph_runs_our_kernels():
    case = sample_case("depthwise_input", "float32", "NCHW", "SAME", True, 31)
    arrays = make_arrays(case)
    f, args, got = _run_compiled(case, arrays, jit_compile=False)
    types = {op.type for op in f.get_concrete_function(*args).graph.get_operations()}
    assert "ConvBackprop>DepthwiseConv2dNativeBackpropInput" in types
    np.testing.assert_array_equal(got, cases.run_ours(case, arrays))


GPUS = tf.config.list_logical_devices("GPU")


@pytest.mark.skipif(not GPUS, reason="no GPU visible")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("op", [op.key for op in OPS])
def test_xla_on_gpu(op, dtype):
    """XLA's GPU backend (cuDNN) compiles the same lowering: NCHW, strided, dilated."""
    for seed in range(3):
        case = sample_case(op, dtype, "NCHW", "EXPLICIT" if seed else "SAME", True, 90 + seed)
        arrays = make_arrays(case)
        with tf.device(GPUS[0].name):
            _, _, got = _run_compiled(case, arrays)
        err = cases.relative_error(got, cases.run_reference(case, arrays))
        if dtype == "float32":
            # TF32 may be on (TF's default on Ampere and newer): it rounds both operands
            # of every product to float16's significand, twice float16's rounding,
            # relative to the terms' size (so times the cancellation).
            ok = _ops.within(err, "float16", case.reduction_length,
                             factor=2 * max(1.0, case.cancellation))
        else:
            ok = cases.within(err, case)
        assert ok, f"{case}: XLA on GPU vs reference {err}"
