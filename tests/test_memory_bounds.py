"""Memory bounds, each check in a child process (an out-of-memory
kill or a crash fails the test instead of killing pytest):

  - a legal but impossible request (an output of 2**62 elements, or terabytes) fails
    with ResourceExhaustedError naming the sizes argument, quickly (TF's allocator
    would retry for ~10 s, 20 s in a tf.function), eagerly and in a tf.function whose
    constants Grappler folds (which runs the kernel while optimising the graph);
  - TF_CONV_BACKPROP_MEMORY_LIMIT caps what one call may use (output plus the CPU
    engine's scratch bound, max(32 MiB, output bytes)): just under passes, just over
    is refused before anything is allocated;
  - the engine's scratch stays within that bound on large-batch NCHW / half calls
    (measured by the library's own counter, tf_conv_backprop_scratch_peak_bytes), and
    the process's RSS (sampled every millisecond during the call, the first one of
    its kind) grows by no more than the output, that bound and 64 MiB for TF.
"""
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PYTHON_DIR = os.path.join(os.path.dirname(_HERE), "python")

FAST_S = 5.0          # an impossible request must fail within this (TF: ~10-20 s)
MIB = 2**20
INT32_MAX = 2**31 - 1


def _run_child(mode, extra_env=None, timeout=300):
    from child_process import run_child
    return run_child(__file__, mode, extra_env, drop_env=("TF_CONV_BACKPROP_MEMORY_LIMIT",),
                     timeout=timeout)


# (label, op, sizes, data shape, dy shape, strides, padding, dtype)
IMPOSSIBLE = [
    # 2**62 filter elements: the element count fits int64, the byte count overflows it.
    ("BF_filter_sizes_2^31-1_squared", "conv2d_filter", [INT32_MAX, INT32_MAX, 1, 1],
     [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], "SAME", "float32"),
    ("DF_filter_sizes_2^31-1_squared", "depthwise_filter", [INT32_MAX, INT32_MAX, 1, 1],
     [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], "SAME", "float64"),
    # 2**42 input elements (8 TiB of half) from a one-pixel out_backprop and a stride
    # of 2**21: fits int64, not this machine.
    ("BI_input_sizes_8TiB", "conv2d_input", [1, 2**21, 2**21, 1],
     [1, 1, 1, 1], [1, 1, 1, 1], [1, 2**21, 2**21, 1], "VALID", "float16"),
    # 8 TiB of bfloat16 zeros: an empty out_backprop (depth multiplier 0).
    ("DI_input_sizes_8TiB_empty_dy", "depthwise_input", [2**20, 2**11, 2**11, 1],
     [1, 1, 1, 0], [2**20, 2**11, 2**11, 0], [1, 1, 1, 1], "SAME", "bfloat16"),
]


def test_impossible_requests_fail_fast():
    r = _run_child("impossible")
    print(json.dumps(r, indent=1))
    for label, runs in r.items():
        for mode, outcome in runs.items():
            where = f"{label} ({mode}): {outcome}"
            assert outcome["class"] in ("ResourceExhaustedError", "InvalidArgumentError"), where
            assert outcome["seconds"] < FAST_S, where
            assert "_sizes`" in outcome["message"], where


def test_memory_limit_env():
    r = _run_child("limit", {"TF_CONV_BACKPROP_MEMORY_LIMIT": str(96 * MIB)})
    print(json.dumps(r, indent=1))
    # 16 MiB of output + 32 MiB of scratch bound = 48 MiB <= 96 MiB: runs.
    assert r["under"]["class"] is None, r
    # 64 MiB of output + 64 MiB of scratch bound = 128 MiB > 96 MiB: refused, fast.
    assert r["over"]["class"] == "ResourceExhaustedError", r
    assert "`input_sizes`" in r["over"]["message"], r
    assert r["over"]["seconds"] < FAST_S, r


def test_scratch_and_rss_bounded():
    r = _run_child("scratch")
    print(json.dumps(r, indent=1))
    for label, m in r.items():
        bound = max(32 * MIB, m["output_bytes"])
        assert m["scratch_peak"] <= bound, f"{label}: scratch {m['scratch_peak']} > {bound}: {m}"
        # Peak RSS: the output, the scratch bound and 64 MiB for TF's own buffers.
        assert m["rss_growth"] <= m["output_bytes"] + bound + 64 * MIB, f"{label}: {m}"


# --------------------------------------------------------------------------------------
# Children
# --------------------------------------------------------------------------------------
def _fn(op):
    import tf_conv_backprop as tcb

    return {"conv2d_input": tcb.compat.v1.nn.conv2d_backprop_input,
            "conv2d_filter": tcb.compat.v1.nn.conv2d_backprop_filter,
            "depthwise_input": tcb.nn.depthwise_conv2d_backprop_input,
            "depthwise_filter": tcb.nn.depthwise_conv2d_backprop_filter}[op]


def _timed(thunk):
    import time

    t0 = time.monotonic()
    try:
        thunk()
        cls, msg = None, ""
    except Exception as e:  # noqa: BLE001 - the error is the outcome
        cls, msg = type(e).__name__, str(e)[:600]
    return {"class": cls, "message": msg, "seconds": round(time.monotonic() - t0, 3)}


def child_impossible():
    import tensorflow as tf

    out = {}
    for label, op, sizes, data_shape, dy_shape, strides, padding, dtype in IMPOSSIBLE:
        fn = _fn(op)
        first_is_sizes = op.endswith("input")
        assert 0 in dy_shape or max(dy_shape) <= 2**10, label   # dy itself is small

        def call(fn=fn, sizes=sizes, data_shape=data_shape, dy_shape=dy_shape, strides=strides,
                 padding=padding, dtype=dtype, first_is_sizes=first_is_sizes):
            s = tf.constant(sizes, tf.int32)
            d = tf.ones(data_shape, dtype)
            dy = tf.ones(dy_shape, dtype)
            a, b = (s, d) if first_is_sizes else (d, s)
            return fn(a, b, dy, strides, padding)

        out[label] = {
            "eager": _timed(lambda: call().numpy()),
            # Constants inside: Grappler's constant folding runs the kernel first.
            "function": _timed(lambda: tf.function(call, autograph=False)().numpy()),
        }
    print("RESULT " + json.dumps(out), flush=True)


def child_limit():
    import tensorflow as tf

    fn = _fn("conv2d_input")
    w = tf.ones([1, 1, 4, 4], tf.float32)

    def run(rows):
        # NHWC float32 [1, rows, 1024, 4]: rows * 16 KiB of output.
        dy = tf.ones([1, rows, 1024, 4], tf.float32)
        return fn(tf.constant([1, rows, 1024, 4], tf.int32), w, dy, [1, 1, 1, 1], "VALID").numpy()

    print("RESULT " + json.dumps({"under": _timed(lambda: run(1024)),     # 16 MiB
                                   "over": _timed(lambda: run(4096))}),   # 64 MiB
          flush=True)


class _RssSampler:
    """Highest current RSS seen (sampled every millisecond) while the block runs."""

    def __enter__(self):
        import threading

        self.base = self.high = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.high = max(self.high, self._rss())

    def _run(self):
        while not self._stop.wait(0.001):
            self.high = max(self.high, self._rss())

    @staticmethod
    def _rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child_scratch():
    import ctypes

    import numpy as np
    import tensorflow as tf

    from tf_conv_backprop import _loader

    _loader.load_library()
    peak = ctypes.CDLL(_loader.library_path()).tf_conv_backprop_scratch_peak_bytes
    peak.restype = ctypes.c_int64
    peak.argtypes = [ctypes.c_int]
    cases = [
        # label, op, sizes, data shape, dy shape, format, dtype
        ("BF_NCHW_half_batch64", "conv2d_filter", [3, 3, 16, 16], [64, 16, 64, 64],
         [64, 16, 64, 64], "NCHW", "float16"),
        ("BI_NCHW_float_batch64", "conv2d_input", [64, 16, 64, 64], [3, 3, 16, 16],
         [64, 16, 64, 64], "NCHW", "float32"),
        ("DF_NHWC_bf16_batch64", "depthwise_filter", [3, 3, 32, 1], [64, 64, 64, 32],
         [64, 64, 64, 32], "NHWC", "bfloat16"),
        ("DI_NCHW_half_batch64", "depthwise_input", [64, 32, 64, 64], [3, 3, 32, 1],
         [64, 32, 64, 64], "NCHW", "float16"),
    ]
    out = {}
    rng = np.random.default_rng(0)
    for label, op, sizes, data_shape, dy_shape, fmt, dtype in cases:
        fn = _fn(op)
        data = tf.cast(rng.standard_normal(data_shape, dtype=np.float32), dtype)
        dy = tf.cast(rng.standard_normal(dy_shape, dtype=np.float32), dtype)
        s = tf.constant(sizes, tf.int32)
        a, b = (s, data) if op.endswith("input") else (data, s)
        peak(1)
        with _RssSampler() as rss:
            result = fn(a, b, dy, [1, 1, 1, 1], "SAME", data_format=fmt)
            del result
        out[label] = {"output_bytes": int(np.prod(sizes)) * tf.as_dtype(dtype).size,
                      "scratch_peak": int(peak(1)), "rss_growth": rss.high - rss.base}
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path[:0] = [_PYTHON_DIR, _HERE]
    import tensorflow as _tf

    _tf.get_logger().setLevel("ERROR")
    {"impossible": child_impossible, "limit": child_limit, "scratch": child_scratch}[sys.argv[1]]()
