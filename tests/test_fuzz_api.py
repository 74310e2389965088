"""Property-based fuzzing (hypothesis) of the public API.

Each example is one call of a public function (tf_conv_backprop.nn /
compat.v1.nn, TF's names and signatures) or of the generated op, built from a
random valid configuration (op, dtype, data format, padding, ranks and sizes of
the three inputs, strides, dilations, explicit paddings) to which zero to three
random mutations are applied: lists of the wrong length, zero / negative / huge
or misplaced strides and dilations, bad explicit paddings, sizes vectors of the
wrong rank, length or values, tensors of the wrong rank, shapes off by a few,
grouped or mismatched depths, empty dimensions. An independent Python model of
TF's rules (`predict` below, written from TF's documented checks and the bad-input
corpus (tests/bad_inputs.py), not from geometry.cc) says what must happen:
  - valid: a finite result of the right shape, within the dtype's tolerance of
    the NumPy float64 reference (tests/reference.py) on the same rounded inputs;
  - invalid: exactly the predicted error class (InvalidArgumentError or
    UnimplementedError from the op; ValueError only where our Python wrapper
    raises it, as TF's does), never a crash, a hang or a wrong-class error.
Most examples run eagerly; every FUNCTION_EVERY-th inside a tf.function with the
tensors as arguments (graph construction, shape function, then the kernel).

Crash isolation: the whole hypothesis run happens in one child process, so an
abort or a segfault in the op fails this test (with the output so far) instead of
killing pytest. Budget: FUZZ_EXAMPLES (default 2000) examples, FUZZ_SEED (default
fixed) for the random stream, e.g. `FUZZ_EXAMPLES=20000 FUZZ_SEED=7 pytest
tests/test_fuzz_api.py`. The child can also be run directly:
`python tests/test_fuzz_api.py --examples 500 --seed 1`.
"""
import json
import os
import subprocess
import sys

from op_table import ops as _ops

_HERE = os.path.dirname(os.path.abspath(__file__))
_PYTHON_DIR = os.path.join(os.path.dirname(_HERE), "python")

DEFAULT_EXAMPLES = 2000
DEFAULT_SEED = 20240611
FUNCTION_EVERY = 10
MAX_OUTPUT_ELEMENTS = 200_000  # valid configurations bigger than this are not run
INT32_MAX = 2**31 - 1


# --------------------------------------------------------------------------------------
# The parent: pytest runs the child and reads its summary.
# --------------------------------------------------------------------------------------
def _budget():
    return (int(os.environ.get("FUZZ_EXAMPLES", DEFAULT_EXAMPLES)),
            int(os.environ.get("FUZZ_SEED", DEFAULT_SEED)))


def test_fuzz_public_api():
    import pytest

    examples, seed = _budget()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_PYTHON_DIR, _HERE] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    cmd = [sys.executable, os.path.abspath(__file__), "--examples", str(examples),
           "--seed", str(seed)]
    timeout = 300 + examples * 0.25
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"HANG: the hypothesis run (seed {seed}) did not finish in {timeout:.0f} s\n"
                    f"{out[-6000:]}")
    tail = (proc.stdout + "\n" + proc.stderr)[-12000:]
    if proc.returncode < 0:
        pytest.fail(f"CRASH: the hypothesis child died of signal {-proc.returncode} "
                    f"(seed {seed}); rerun: {' '.join(cmd)}\n{tail}")
    assert proc.returncode == 0, (
        f"hypothesis found a failing example (seed {seed}); rerun: FUZZ_SEED={seed} "
        f"{' '.join(cmd)}\n{tail}")
    summary = None
    for line in proc.stdout.splitlines():
        if line.startswith("FUZZ-SUMMARY "):
            summary = json.loads(line[len("FUZZ-SUMMARY "):])
    assert summary is not None, tail
    print(f"fuzz summary: {summary}")
    assert summary["examples"] >= examples, summary
    # Both halves of the property were exercised, in both modes.
    assert summary["valid"] >= examples // 10 and summary["invalid"] >= examples // 10, summary
    assert summary["function"] >= examples // (2 * FUNCTION_EVERY), summary


# --------------------------------------------------------------------------------------
# The model of TF's rules.
# --------------------------------------------------------------------------------------
def _order(fmt, n, h, w, c):
    return [n, h, w, c] if fmt == "NHWC" else [n, c, h, w]


def _tdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


class Invalid(Exception):
    def __init__(self, cls, why):
        super().__init__(f"{cls}: {why}")
        self.cls = cls
        self.why = why


def _window_attr(op, name, values, fmt):
    # TF reads the attribute as int32 first: an out-of-range value fails before its length.
    if isinstance(values, (list, tuple)) and any(not -2**31 <= v < 2**31 for v in values):
        raise Invalid("InvalidArgumentError", f"{name} int32 range")
    if not isinstance(values, (list, tuple)) or len(values) != 4:
        raise Invalid("InvalidArgumentError", f"{name} length")
    n, h, w, c = (values[0], values[1], values[2], values[3]) if fmt == "NHWC" else \
        (values[0], values[2], values[3], values[1])
    if n != 1 or c != 1:
        raise Invalid("UnimplementedError" if op == "conv2d_input" else "InvalidArgumentError",
                      f"{name} batch/depth")
    if not (1 <= h <= INT32_MAX and 1 <= w <= INT32_MAX):
        raise Invalid("InvalidArgumentError", f"{name} range")
    return h, w


def _out_size(n_in, k, s, d, padding, pb, pa):
    """TF's forward output size, or Invalid (negative / int64 overflow)."""
    eff = (k - 1) * d + 1
    lim = 2**63
    if not -lim <= eff < lim:
        raise Invalid("InvalidArgumentError", "effective filter overflow")
    if padding == "VALID":
        num = n_in - eff + s
    elif padding == "EXPLICIT":
        if not n_in + pb < lim or not n_in + pb + pa < lim:
            raise Invalid("InvalidArgumentError", "padded size overflow")
        num = n_in + pb + pa - eff + s
    else:
        num = n_in + s - 1
    if not -lim <= num < lim:
        raise Invalid("InvalidArgumentError", "output size overflow")
    out = _tdiv(num, s)
    if out < 0:
        raise Invalid("InvalidArgumentError", "negative output size")
    return out


def _elements(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def predict(call):
    """("ok", output shape) or raises Invalid(class, why), following the order in
    which TF checks: Python wrapper, op construction (attributes), then Compute."""
    op, fmt = call["op"], call["data_format"]
    ci = _ops.BY_KEY[op].computes == "input"
    padding = call["padding"]
    explicit = call["explicit_paddings"]
    if not call["raw"] and isinstance(padding, list):
        if len(padding) != 4 or any(not isinstance(p, list) or len(p) != 2 for p in padding):
            raise Invalid("ValueError", "padding list (wrapper)")
        explicit = [v for p in padding for v in p]
        padding = "EXPLICIT"
    elif not call["raw"] and padding == "EXPLICIT":
        raise Invalid("ValueError", "EXPLICIT string (wrapper)")
    # Attributes (kernel construction).
    sh, sw = _window_attr(op, "strides", call["strides"], fmt)
    dh, dw = _window_attr(op, "dilations", call["dilations"], fmt)
    if padding != "EXPLICIT":
        if explicit:
            raise Invalid("InvalidArgumentError", "explicit_paddings with SAME/VALID")
        pads = (0, 0, 0, 0)
    else:
        if len(explicit) != 8:
            raise Invalid("InvalidArgumentError", "explicit_paddings length")
        if any(p < 0 for p in explicit):
            raise Invalid("InvalidArgumentError", "negative explicit padding")
        pairs = [explicit[0:2], explicit[2:4], explicit[4:6], explicit[6:8]]
        nb, hb, wb, cb = (pairs if fmt == "NHWC" else [pairs[0], pairs[2], pairs[3], pairs[1]])
        if any(nb) or any(cb):
            raise Invalid("InvalidArgumentError", "explicit padding on batch/depth")
        pads = (hb[0], hb[1], wb[0], wb[1])
    # Compute: the sizes vector.
    sizes, sizes_shape = call["sizes"], call["sizes_shape"]
    data_shape, dy_shape = call["data_shape"], call["dy_shape"]
    if len(sizes_shape) != 1:
        raise Invalid("InvalidArgumentError", "sizes rank")
    n = sizes_shape[0]
    two = op == "conv2d_input" and n == 2
    if n != 4 and not two:
        raise Invalid("InvalidArgumentError", "sizes length")
    if any(v < 0 for v in sizes):
        raise Invalid("InvalidArgumentError", "negative sizes")
    if two:
        if len(data_shape) != 4:
            raise Invalid("InvalidArgumentError", "filter rank (2-element sizes)")
        if len(dy_shape) != 4:
            raise Invalid("InvalidArgumentError", "out_backprop rank (2-element sizes)")
        b = dy_shape[0]
        c = data_shape[2]
        sized = _order(fmt, b, sizes[0], sizes[1], c)
    else:
        sized = list(sizes)
    input_shape, filter_shape = (sized, data_shape) if ci else (data_shape, sized)
    for name, shape in (("input", input_shape), ("filter", filter_shape), ("out_backprop", dy_shape)):
        if len(shape) != 4:
            raise Invalid("InvalidArgumentError", f"{name} rank")
        if _elements(shape) >= 2**63:
            raise Invalid("InvalidArgumentError", f"{name} element count overflow")
    bi, hi, wi, cin = (input_shape if fmt == "NHWC" else
                       [input_shape[0], input_shape[2], input_shape[3], input_shape[1]])
    bo, ho, wo, cout = (dy_shape if fmt == "NHWC" else
                        [dy_shape[0], dy_shape[2], dy_shape[3], dy_shape[1]])
    kh, kw, fin, fout = filter_shape
    if bo != bi:
        raise Invalid("InvalidArgumentError", "batch mismatch")
    depthwise = _ops.BY_KEY[op].depthwise
    # A grouped conv2d: the input depth a multiple of the filter's in-depth, the output
    # depth a multiple of the groups.
    grouped = fin != cin and not depthwise and cin > 0 and fin > 0 and cin % fin == 0
    if fin != cin and not grouped:
        raise Invalid("InvalidArgumentError", "in_depth mismatch")
    if depthwise:
        if cin * fout != cout or cin * fout >= 2**63:
            raise Invalid("InvalidArgumentError", "depthwise out_depth")
    elif fout != cout:
        raise Invalid("InvalidArgumentError", "out_depth mismatch")
    for n_in, k, s, d, pb, pa, actual in ((hi, kh, sh, dh, pads[0], pads[1], ho),
                                           (wi, kw, sw, dw, pads[2], pads[3], wo)):
        if _out_size(n_in, k, s, d, padding, pb, pa) != actual:
            raise Invalid("InvalidArgumentError", "out_backprop spatial mismatch")
    # The groups must share the output depth (checked after the shapes, as TF's forward op).
    if grouped and cout % (cin // fin):
        raise Invalid("InvalidArgumentError", "out_depth not a multiple of the groups")
    return "ok", sized


# --------------------------------------------------------------------------------------
# The child: strategies and the property.
# --------------------------------------------------------------------------------------
def _strategies():
    from hypothesis import strategies as st

    small = st.integers(0, 5)
    huge = st.sampled_from([-2**31, -5, -1, 0, 2**31 - 1, 2**31, 2**40, 2**62])

    @st.composite
    def calls(draw):
        op = draw(st.sampled_from([spec.key for spec in _ops.OPS]))
        depthwise = _ops.BY_KEY[op].depthwise
        fmt = draw(st.sampled_from(("NHWC", "NCHW")))
        padding = draw(st.sampled_from(("SAME", "VALID", "EXPLICIT")))
        dtype = draw(st.sampled_from(_ops.DTYPES))
        empty = draw(st.integers(0, 9)) == 0      # 1 in 10: dimensions may be 0
        lo = 0 if empty else 1
        b = draw(st.integers(lo, 3))
        h, w = draw(st.integers(lo, 7)), draw(st.integers(lo, 7))
        c = draw(st.integers(lo, 4))
        kh, kw = draw(st.integers(lo, 4)), draw(st.integers(lo, 4))
        m = draw(st.integers(lo, 3))
        sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        pads = [draw(st.integers(0, 3)) for _ in range(4)] if padding == "EXPLICIT" else [0] * 4

        def out(n_in, k, s, d, pb, pa):
            try:
                return _out_size(n_in, k, s, d, padding, pb, pa)
            except Invalid:
                return draw(small)   # VALID with the filter larger than the input: no valid dy
        oh, ow = out(h, kh, sh, dh, pads[0], pads[1]), out(w, kw, sw, dw, pads[2], pads[3])
        input_shape = _order(fmt, b, h, w, c)
        filter_shape = [kh, kw, c, m]
        dy_shape = _order(fmt, b, oh, ow, c * m if depthwise else m)
        ci = _ops.BY_KEY[op].computes == "input"
        call = dict(
            op=op, dtype=dtype, data_format=fmt, raw=False,
            sizes=list(input_shape if ci else filter_shape), sizes_shape=[4],
            data_shape=list(filter_shape if ci else input_shape), dy_shape=dy_shape,
            strides=_order(fmt, 1, sh, sw, 1), dilations=_order(fmt, 1, dh, dw, 1),
            explicit_paddings=[],
            padding=(_order(fmt, [0, 0], pads[0:2], pads[2:4], [0, 0]) if padding == "EXPLICIT"
                     else padding),
            mutations=[],
            alias=draw(st.integers(0, 1)),
        )
        if op == "conv2d_input" and draw(st.integers(0, 4)) == 0:
            call["sizes"], call["sizes_shape"] = [h, w], [2]   # the (rows, cols) form
        for _ in range(draw(st.sampled_from((0, 0, 0, 1, 1, 2, 3)))):
            _mutate(draw, call)
        return call

    def _mutate(draw, call):
        kind = draw(st.sampled_from((
            "window_len", "window_value", "window_batch_depth", "explicit_bad", "explicit_huge",
            "raw_explicit", "padding_list_bad", "sizes_len", "sizes_rank", "sizes_value",
            "sizes_off", "data_rank", "dy_rank", "data_off", "dy_off", "depth_grouped",
            "format_swap")))
        call["mutations"].append(kind)
        attr = draw(st.sampled_from(("strides", "dilations")))
        if kind == "window_len":
            call[attr] = [1] * draw(st.sampled_from((0, 1, 2, 3, 5, 6)))
        elif kind == "window_value":
            v = list(call[attr])
            if len(v) == 4:
                v[draw(st.sampled_from((1, 2)))] = draw(huge)
            call[attr] = v
        elif kind == "window_batch_depth":
            v = list(call[attr])
            if len(v) == 4:
                v[draw(st.sampled_from((0, 1, 3)))] = draw(st.integers(2, 3))
            call[attr] = v
        elif kind in ("explicit_bad", "explicit_huge"):
            p = call["padding"]
            if not isinstance(p, list) or len(p) != 4 or any(len(x) != 2 for x in p):
                p = [[0, 0], [0, 0], [0, 0], [0, 0]]
            p = [list(x) for x in p]
            i, j = draw(st.integers(0, 3)), draw(st.integers(0, 1))
            p[i][j] = draw(st.sampled_from((-1, 1, 2))) if kind == "explicit_bad" else \
                draw(st.sampled_from((2**31, 2**62, 2**63 - 1)))
            call["padding"] = p
            call["raw"], call["explicit_paddings"] = False, []   # the wrapper's list form
        elif kind == "raw_explicit":
            call["raw"] = True
            call["padding"] = draw(st.sampled_from(("SAME", "VALID", "EXPLICIT")))
            call["explicit_paddings"] = [draw(st.integers(-1, 2))
                                         for _ in range(draw(st.sampled_from((0, 6, 8, 8, 10))))]
        elif kind == "padding_list_bad":
            call["raw"], call["explicit_paddings"] = False, []
            call["padding"] = draw(st.sampled_from(
                ([[0, 0], [1, 1], [0, 0]], [[0, 0], [1, 1, 1], [0, 0], [0, 0]], "EXPLICIT")))
        elif kind == "sizes_len":
            n = draw(st.sampled_from((0, 1, 2, 3, 5, 13)))
            call["sizes"] = [draw(small) for _ in range(n)]
            call["sizes_shape"] = [n]
        elif kind == "sizes_rank":
            if draw(st.booleans()):
                call["sizes_shape"] = []
                call["sizes"] = [draw(small)]
            else:
                call["sizes_shape"] = [2, 2]
                call["sizes"] = [draw(small) for _ in range(4)]
        elif kind == "sizes_value":
            if call["sizes"]:
                v = list(call["sizes"])
                v[draw(st.integers(0, len(v) - 1))] = draw(st.sampled_from((-1, -2**31, 2**31 - 1)))
                call["sizes"] = v
        elif kind == "sizes_off":
            if call["sizes"]:
                v = list(call["sizes"])
                i = draw(st.integers(0, len(v) - 1))
                v[i] = max(0, v[i] + draw(st.sampled_from((-2, -1, 1, 2))))
                call["sizes"] = v
        elif kind in ("data_rank", "dy_rank"):
            key = "data_shape" if kind == "data_rank" else "dy_shape"
            call[key] = [draw(st.integers(1, 3)) for _ in range(draw(st.sampled_from((0, 1, 2, 3, 5))))]
        elif kind in ("data_off", "dy_off"):
            key = "data_shape" if kind == "data_off" else "dy_shape"
            v = list(call[key])
            if v:
                i = draw(st.integers(0, len(v) - 1))
                v[i] = max(0, v[i] + draw(st.sampled_from((-2, -1, 1, 2))))
            call[key] = v
        elif kind == "depth_grouped":
            # Input depth a multiple of the filter's in-depth (TF's grouped convolution).
            fmt = call["data_format"]
            ci = _ops.BY_KEY[call["op"]].computes == "input"
            key_in, key_f = ("sizes", "data_shape") if ci else ("data_shape", "sizes")
            ishape, fshape = list(call[key_in]), list(call[key_f])
            if len(ishape) == 4 and len(fshape) == 4 and fshape[2] > 0:
                ishape[3 if fmt == "NHWC" else 1] = fshape[2] * draw(st.integers(2, 3))
                call[key_in] = ishape
        elif kind == "format_swap":
            call["data_format"] = "NCHW" if call["data_format"] == "NHWC" else "NHWC"

    return calls()


def _round(values, dtype):
    import numpy as np
    import tensorflow as tf

    return values.astype(tf.as_dtype(dtype).as_numpy_dtype).astype(np.float64)


def _function_for(call):
    import tensorflow as tf

    import tf_conv_backprop as tcb
    from tf_conv_backprop._loader import load_library

    spec = _ops.BY_KEY[call["op"]]
    if call["raw"]:
        gen = getattr(load_library(), spec.generated)

        def raw(a, b, dy):
            return gen(a, b, dy, strides=call["strides"], padding=call["padding"],
                       explicit_paddings=call["explicit_paddings"],
                       data_format=call["data_format"], dilations=call["dilations"])
        return raw
    # `alias` picks one of the op's public names (depthwise: the `native` spelling).
    public = getattr(tcb.compat.v1.nn, spec.names[call["alias"] % len(spec.names)])

    def wrapped(a, b, dy):
        return public(a, b, dy, strides=call["strides"], padding=call["padding"],
                      data_format=call["data_format"], dilations=call["dilations"])
    del tf
    return wrapped


def check_call(call, mode, rng_seed, tally):
    """Runs one example and asserts the property; `tally` counts outcomes."""
    import numpy as np
    import tensorflow as tf

    import reference

    try:
        expected = predict(call)
    except Invalid as e:
        expected = ("error", e.cls, e.why)
    spec = _ops.BY_KEY[call["op"]]
    ci = spec.computes == "input"
    dtype = call["dtype"]
    if expected[0] == "ok" and _elements(expected[1]) > MAX_OUTPUT_ELEMENTS:
        tally["skipped_big"] += 1
        return
    rng = np.random.default_rng(rng_seed)
    data = _round(rng.standard_normal(call["data_shape"]), dtype)
    dy = _round(rng.standard_normal(call["dy_shape"]), dtype)
    sizes = np.array(call["sizes"], dtype=np.int64)
    if sizes.size and (sizes.min() < -2**31 or sizes.max() > 2**31 - 1):
        raise AssertionError("strategy produced a sizes value outside int32")
    sizes = sizes.astype(np.int32).reshape(call["sizes_shape"])
    fn = _function_for(call)
    where = f"mode={mode} seed={rng_seed} call={call} expected={expected}"

    def run():
        t_sizes = tf.constant(sizes)
        t_data = tf.constant(data, dtype=tf.float64)
        t_dy = tf.constant(dy, dtype=tf.float64)
        t_data, t_dy = tf.cast(t_data, dtype), tf.cast(t_dy, dtype)
        a, b = (t_sizes, t_data) if ci else (t_data, t_sizes)
        if mode == "eager":
            return fn(a, b, t_dy)
        return tf.function(fn, autograph=False)(a, b, t_dy)

    try:
        out = run()
        result = np.asarray(tf.cast(out, tf.float64).numpy())
        error = None
    except Exception as e:  # noqa: BLE001 - every exception is an outcome here
        error = e
    if expected[0] == "error":
        tally["invalid"] += 1
        assert error is not None, f"expected {expected[1]} ({expected[2]}), got a result; {where}"
        got = type(error).__name__
        assert got == expected[1], (
            f"expected {expected[1]} ({expected[2]}), got {got}: {str(error)[:500]}; {where}")
        tally["classes"][got] = tally["classes"].get(got, 0) + 1
        return
    tally["valid"] += 1
    assert error is None, f"valid call raised {type(error).__name__}: {str(error)[:800]}; {where}"
    assert list(result.shape) == list(expected[1]), f"shape {list(result.shape)}; {where}"
    assert np.all(np.isfinite(result)), f"non-finite values in the result; {where}"
    padding = call["padding"]
    explicit = call["explicit_paddings"]
    if isinstance(padding, list):
        explicit = [v for p in padding for v in p]
        padding = "EXPLICIT"
    first, second = (list(call["sizes"]), data) if ci else (data, list(call["sizes"]))
    attrs = (call["strides"], padding, explicit, call["data_format"], call["dilations"])
    ref = reference.backprop(spec)(first, second, dy, *attrs)
    err = _ops.relative_error(result, ref)
    batch, rows, cols = (call["dy_shape"][i] for i in
                         ((0, 1, 2) if call["data_format"] == "NHWC" else (0, 2, 3)))
    filter_shape = call["data_shape"] if ci else call["sizes"]
    length = spec.reduction_length(filter_shape, batch, rows, cols)
    cancellation = reference.cancellation(spec, first, second, dy, *attrs)
    assert _ops.within(err, dtype, length, cancellation=cancellation), (
        f"relative error {err:.3g} vs reference (cancellation {cancellation:.3g}); {where}")


def run_child(examples, seed):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path[:0] = [_PYTHON_DIR, _HERE]
    import tensorflow as tf
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    from tf_conv_backprop._loader import load_library

    load_library()
    tf.get_logger().setLevel("ERROR")  # one tf.function per example: retracing warnings
    tally = {"examples": 0, "valid": 0, "invalid": 0, "function": 0, "skipped_big": 0,
             "classes": {}, "mutations": {}}

    @hseed(seed)
    @settings(max_examples=examples, deadline=None, database=None, print_blob=True,
              phases=(Phase.explicit, Phase.generate, Phase.shrink),
              suppress_health_check=list(HealthCheck))
    @given(calls=_strategies(), value_seed=st.integers(0, 2**31 - 1))
    def fuzz(calls, value_seed):
        tally["examples"] += 1
        mode = "function" if tally["examples"] % FUNCTION_EVERY == 0 else "eager"
        if mode == "function":
            tally["function"] += 1
        for m in calls["mutations"]:
            tally["mutations"][m] = tally["mutations"].get(m, 0) + 1
        check_call(calls, mode, value_seed, tally)

    fuzz()
    print("FUZZ-SUMMARY " + json.dumps(tally, sort_keys=True), flush=True)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="hypothesis run of the public API (child)")
    parser.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args()
    run_child(args.examples, args.seed)
