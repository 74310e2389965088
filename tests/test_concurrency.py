"""Concurrency and leaks, each check in its own child process (a
crash fails the test instead of killing pytest, and the memory measurement sees only
its own work):

  - 8 Python threads each make the same 200 mixed calls (all four ops, every dtype,
    both formats, all paddings, dilations, eager and a shared tf.function, plus
    invalid calls that must raise), in a different order per thread, all at once on
    TF's shared intra-op pool; every result must be bitwise identical to the same
    call made serially beforehand, and every invalid call must raise the same error.
  - 10,000 calls (the same mix, valid and invalid) after a warm-up leave the
    resident set size flat: growth under 5 % (and reported per call).

Run a child directly: `python tests/test_concurrency.py threads|rss`.
"""
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PYTHON_DIR = os.path.join(os.path.dirname(_HERE), "python")

THREADS = 8
CALLS_PER_THREAD = 200
RSS_CALLS = 10_000
RSS_WARMUP_CALLS = 2_000
RSS_MAX_GROWTH = 0.05
SEED = 20240611


def _run_child(mode, timeout=600):
    from child_process import run_child
    return run_child(__file__, mode, timeout=timeout, context=f"(seed {SEED})")


def test_threads_bitwise_equal_to_serial():
    r = _run_child("threads")
    print(f"concurrency: {r}")
    assert r["threads"] == THREADS and r["calls_per_thread"] == CALLS_PER_THREAD, r
    assert r["mismatches"] == [], r
    assert r["valid_calls"] > 0 and r["invalid_calls"] > 0, r


def test_rss_flat_over_10000_calls():
    r = _run_child("rss")
    print(f"rss: {r}")
    assert r["calls"] == RSS_CALLS, r
    assert r["growth"] < RSS_MAX_GROWTH, (
        f"RSS grew {100 * r['growth']:.2f} % ({r['growth_bytes'] / 2**20:.1f} MiB, "
        f"{r['bytes_per_call']:.0f} bytes per call) over {r['calls']} calls: {r}")


# --------------------------------------------------------------------------------------
# Children
# --------------------------------------------------------------------------------------
def _mixed_calls(count):
    """`count` (function, args, label) triples: valid calls from cases.sample_case over
    every op / dtype / format / padding (some dilated), eager or through one shared
    tf.function per configuration, and about one in eight invalid (mismatched
    out_backprop, bad strides)."""
    import itertools
    import random

    import tensorflow as tf

    import cases

    rng = random.Random(SEED)
    configs = list(itertools.product(
        [spec.key for spec in cases.BY_KEY.values()], cases.DTYPES, cases.FORMATS, cases.PADDINGS))
    out = []
    for i in range(count):
        op, dtype, fmt, padding = configs[i % len(configs)]
        case = cases.sample_case(op, dtype, fmt, padding, dilated=(i % 5 == 0), seed=SEED + i)
        arrays = cases.make_arrays(case)
        first, second, dy = cases.call_args(case, arrays, as_tensor=True)
        fn = cases.our_function(op)
        strides = case.strides4
        invalid = i % 8 == 7
        if invalid:
            if i % 16 == 7 and not case.two_element_sizes:  # (that form takes dy's batch)
                dy = tf.concat([dy, dy], axis=0)   # batch mismatch
            else:
                strides = [1, 1, 0, 1]              # a zero stride

        call = _bind(fn, strides, case.tf_padding, case.data_format, case.dilations4)
        if i % 3 == 2:
            call = tf.function(call, autograph=False)
        out.append((call, (first, second, dy), f"#{i} {'invalid ' if invalid else ''}"
                    f"{'tf.function ' if i % 3 == 2 else ''}{case}", invalid))
    return out


def _bind(fn, strides, padding, data_format, dilations):
    def call(a, b, d):
        return fn(a, b, d, strides=strides, padding=padding, data_format=data_format,
                  dilations=dilations)
    return call


def _outcome(call, args):
    """Bytes of the result, or the error's class and message."""
    import numpy as np

    try:
        out = call(*args)
        return ("ok", str(out.dtype), tuple(out.shape), np.asarray(out.numpy()).tobytes())
    except Exception as e:  # noqa: BLE001 - errors are outcomes too
        return ("error", type(e).__name__, str(e).split("[Op:")[0][-300:])


def child_threads():
    import random
    import threading

    calls = _mixed_calls(CALLS_PER_THREAD)
    serial = [_outcome(c, a) for c, a, _, _ in calls]
    for (c, a, label, invalid), s in zip(calls, serial):
        if (s[0] == "error") != invalid:
            raise AssertionError(f"serial call gave {s[:2]} for {label}")
    results = [[None] * len(calls) for _ in range(THREADS)]
    barrier = threading.Barrier(THREADS)
    failures = []

    def worker(t):
        order = list(range(len(calls)))
        random.Random(SEED + t).shuffle(order)
        try:
            barrier.wait()
            for i in order:
                c, a, _, _ = calls[i]
                results[t][i] = _outcome(c, a)
        except Exception as e:  # noqa: BLE001
            failures.append(f"thread {t}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    mismatches = list(failures)
    for t in range(THREADS):
        for i, (got, want) in enumerate(zip(results[t], serial)):
            if got != want:
                mismatches.append(f"thread {t} call {calls[i][2]}: {str(got)[:200]} != serial "
                                  f"{str(want)[:200]}")
    print("RESULT " + json.dumps({
        "threads": THREADS, "calls_per_thread": len(calls),
        "valid_calls": sum(1 for s in serial if s[0] == "ok"),
        "invalid_calls": sum(1 for s in serial if s[0] == "error"),
        "mismatches": mismatches[:20]}), flush=True)


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child_rss():
    import gc

    calls = _mixed_calls(64)

    def run(n):
        for k in range(n):
            c, a, _, _ = calls[k % len(calls)]
            try:
                c(*a).numpy()
            except Exception:  # noqa: BLE001 - the invalid calls raise by design
                pass

    run(RSS_WARMUP_CALLS)
    gc.collect()
    before = _rss_bytes()
    run(RSS_CALLS)
    gc.collect()
    after = _rss_bytes()
    print("RESULT " + json.dumps({
        "calls": RSS_CALLS, "warmup_calls": RSS_WARMUP_CALLS, "rss_before": before,
        "rss_after": after, "growth_bytes": after - before,
        "growth": (after - before) / before, "bytes_per_call": (after - before) / RSS_CALLS}),
        flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path[:0] = [_PYTHON_DIR, _HERE]
    import tensorflow as _tf

    _tf.get_logger().setLevel("ERROR")
    {"threads": child_threads, "rss": child_rss}[sys.argv[1]]()
