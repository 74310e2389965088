"""SavedModel: a tf.Module using our ops (the training-ready convolutions, whose
gradients are our ops, and the backprop functions directly) is saved here, then loaded
in fresh processes:

- one that imports tf_conv_backprop (and loads the op library) first: identical outputs,
  gradients through the loaded functions work, and importing alone loaded nothing;
- one that does not: TF's "Op type not registered" error names our op; a model saved for
  inference only (`experimental_custom_gradients=False`) loads there anyway and gives
  identical outputs.

Both processes start at once (each pays TensorFlow's import time)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import tf_conv_backprop as tcb

SEED = 7007
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(tcb.__file__)))
TIMEOUT_S = 150


def _forward(module, x):
    y = tf.tanh(tcb.conv2d(x, module.w, 1, "SAME"))
    return tcb.depthwise_conv2d(y, module.dw, [1, 1, 1, 1], "SAME", dilations=[2, 2])


class Inference(tf.Module):
    """The forward pass only, sharing `model`'s variables."""

    def __init__(self, model):
        super().__init__()
        self.w, self.dw = model.w, model.dw

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32)])
    def forward(self, x):
        return _forward(self, x)


class Model(tf.Module):
    """conv2d -> tanh -> dilated depthwise (NHWC), plus the raw backprop functions in
    NCHW with explicit padding."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(SEED)
        self.w = tf.Variable(rng.standard_normal([3, 3, 3, 4]), dtype=tf.float32)
        self.dw = tf.Variable(rng.standard_normal([3, 3, 4, 2]), dtype=tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32)])
    def forward(self, x):
        return _forward(self, x)

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32)])
    def gradients(self, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(self.forward(x) ** 2)
        return tape.gradient(loss, {"x": x, "w": self.w, "dw": self.dw})

    @tf.function(input_signature=[tf.TensorSpec([None, 3, 8, 8], tf.float32),
                                  tf.TensorSpec([None, 4, 4, 4], tf.float32)])
    def backprops(self, x, dy):
        padding = [[0, 0], [0, 0], [1, 1], [1, 1]]
        return {
            "conv2d_filter": tcb.compat.v1.nn.conv2d_backprop_filter(
                x, tf.shape(self.w), dy, [1, 1, 2, 2], padding, data_format="NCHW"),
            "conv2d_input": tcb.compat.v1.nn.conv2d_backprop_input(
                tf.shape(x), self.w, dy, [1, 1, 2, 2], padding, data_format="NCHW"),
        }


def _inputs():
    rng = np.random.default_rng(SEED + 1)
    return {"x": rng.standard_normal([2, 8, 8, 3]).astype(np.float32),
            "x_nchw": rng.standard_normal([2, 3, 8, 8]).astype(np.float32),
            "dy_nchw": rng.standard_normal([2, 4, 4, 4]).astype(np.float32)}


def _run(model, inputs):
    x = tf.constant(inputs["x"])
    out = {"forward": model.forward(x)}
    out.update({f"grad_{k}": v for k, v in model.gradients(x).items()})
    out.update(model.backprops(tf.constant(inputs["x_nchw"]), tf.constant(inputs["dy_nchw"])))
    with tf.GradientTape() as tape:  # through the (loaded) function's own gradient
        tape.watch(x)
        loss = tf.reduce_sum(model.forward(x) ** 2)
    out["tape_grad_x"] = tape.gradient(loss, x)
    return {k: np.asarray(v) for k, v in out.items()}


_WITH_IMPORT = """
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tf_conv_backprop
    from tf_conv_backprop import _loader
    # A plain import is all a SavedModel needs: it registers the ops.
    loaded_at_import = _loader._library is not None
    sys.path.insert(0, {tests!r})
    from test_savedmodel import _run
    inputs = dict(np.load({inputs!r}))
    out = _run(tf.saved_model.load({full!r}), inputs)
    np.savez({out!r}, **out)
    print("RESULT " + json.dumps({{"loaded_at_import": loaded_at_import}}))
"""

_WITHOUT_IMPORT = """
    import json, sys
    import numpy as np
    import tensorflow as tf
    result = {{}}
    try:
        tf.saved_model.load({full!r})
        result["error"] = None
    except Exception as e:
        result["error"] = type(e).__name__
        result["message"] = str(e)
    m = tf.saved_model.load({inference!r})
    np.save({out!r}, m.forward(tf.constant(np.load({inputs!r})["x"])).numpy())
    result["imported"] = "tf_conv_backprop" in sys.modules
    print("RESULT " + json.dumps(result))
"""


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Saves the models, starts both loader processes; yields a getter of their results
    and the expected outputs; kills whatever is left."""
    tmp = tmp_path_factory.mktemp("savedmodel")
    full, inference = str(tmp / "full"), str(tmp / "inference")
    model = Model()
    tf.saved_model.save(model, full)

    tf.saved_model.save(Inference(model), inference,
                        options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
    inputs = _inputs()
    inputs_path = str(tmp / "inputs.npz")
    np.savez(inputs_path, **inputs)
    expected = _run(model, inputs)
    paths = dict(full=full, inference=inference, inputs=inputs_path,
                 tests=os.path.dirname(os.path.abspath(__file__)))
    scripts = {
        "with": _WITH_IMPORT.format(out=str(tmp / "with.npz"), **paths),
        "without": _WITHOUT_IMPORT.format(out=str(tmp / "without.npy"), **paths),
    }
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env_with = dict(env, PYTHONPATH=PYTHON_DIR)
    env.pop("PYTHONPATH", None)
    procs = {key: subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=str(tmp),
                                   env=env_with if key == "with" else env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for key, code in scripts.items()}
    results = {}

    def get(key):
        if key not in results:
            proc = procs[key]
            out, err = proc.communicate(timeout=TIMEOUT_S)
            lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
            assert proc.returncode == 0 and lines, (
                f"{key}: rc={proc.returncode}\nstdout:\n{out}\nstderr:\n{err[-3000:]}")
            res = json.loads(lines[-1][len("RESULT "):])
            if key == "with":
                res["outputs"] = dict(np.load(str(tmp / "with.npz")))
            else:
                res["forward"] = np.load(str(tmp / "without.npy"))
            results[key] = res
        return results[key]

    try:
        yield get, expected
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def test_saved_graph_holds_our_ops(loaded):
    _, expected = loaded
    assert set(expected) >= {"forward", "grad_x", "grad_w", "grad_dw", "conv2d_filter",
                             "conv2d_input", "tape_grad_x"}
    model = Model()
    graph = model.gradients.get_concrete_function().graph
    types = {op.type for op in graph.get_operations()}
    for fn in graph.as_graph_def().library.function:
        types |= {node.op for node in fn.node_def}
    assert {"ConvBackprop>Conv2DBackpropInput", "ConvBackprop>Conv2DBackpropFilter",
            "ConvBackprop>DepthwiseConv2dNativeBackpropInput",
            "ConvBackprop>DepthwiseConv2dNativeBackpropFilter"} <= types


def test_loads_after_import_with_identical_outputs(loaded):
    get, expected = loaded
    got = get("with")["outputs"]
    assert set(got) == set(expected)
    for key, want in expected.items():
        np.testing.assert_array_equal(got[key], want, err_msg=key)


def test_import_alone_registers_the_ops(loaded):
    get, _ = loaded
    assert get("with")["loaded_at_import"]


def test_without_import_op_type_not_registered(loaded):
    get, _ = loaded
    res = get("without")
    assert not res["imported"]
    assert res["error"] is not None, "the SavedModel loaded without tf_conv_backprop"
    assert "Op type not registered 'ConvBackprop>" in res["message"], res["message"]


def test_inference_only_savedmodel_needs_no_import(loaded):
    get, expected = loaded
    np.testing.assert_array_equal(get("without")["forward"], expected["forward"])
