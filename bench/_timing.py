"""Timing shared by `make report` (bench/report.py) and `make bench` (bench/bench.py).

How we measure: COPIES (in bench.py more for short ops) chained calls inside one
tf.function (the 0.25-0.45 ms call overhead of a tf.function then costs little), our op
and TF's built-in alternated in one process after a warm-up (so clock and cache drift
hit both alike), ratio = median of the per-round ratios (robust against one disturbed
round).
"""
import statistics
import time

import numpy as np
import tensorflow as tf

from _sample import QUIET_SECONDS, sample_seconds

# Chained copies per tf.function call.
COPIES = 4


def timed_function(fn, problem, rng, copies=COPIES, jit_compile=False):
    """A tf.function running `copies` gradients of `problem` (a shapes.Problem) one after
    another. Each copy gets its own out_backprop so Grappler cannot merge them as common
    subexpressions. With `jit_compile`, the whole function is compiled by XLA."""
    def const(shape):
        return tf.cast(tf.constant(rng.standard_normal(shape, np.float32)), problem.dtype)
    if problem.spec.computes == "input":
        first = tf.constant(problem.input_shape, tf.int32)
        second = const(problem.filter_shape)
    else:
        first = const(problem.input_shape)
        second = tf.constant(problem.filter_shape, tf.int32)
    dys = [const(problem.out_backprop_shape) for _ in range(copies)]

    @tf.function(autograph=False, jit_compile=jit_compile)
    def run():
        # Chained by control dependencies: independent copies would run concurrently
        # and fight over the cores, which measures the thread pools, not the kernel.
        outs = []
        for dy in dys:
            with tf.control_dependencies(outs[-1:]):
                outs.append(fn(first, second, dy, strides=problem.strides4,
                               padding=problem.padding, data_format=problem.data_format,
                               dilations=problem.dilations4))
        return outs
    run.copies = copies
    return run


def seconds(run):
    """Seconds per copy of one call of a timed_function; a run with `measure` (another
    process's, e.g. the PyTorch anchor) reports its own."""
    if hasattr(run, "measure"):
        return run.measure()
    # Eager CPU execution is synchronous: the outputs exist when a call returns.
    return sample_seconds(run, run.copies)


def time_alternating(runs, rounds, warmup=1):
    """Times each function in `runs` `rounds` times, alternating the order every round
    (so drift in clock or cache state hits all alike), after `warmup` untimed calls of
    each (oneDNN primitive creation, page faults). Returns one list of seconds per run."""
    for _ in range(warmup):
        for run in runs:
            seconds(run)
    times = [[] for _ in runs]
    for r in range(rounds):
        order = range(len(runs)) if r % 2 == 0 else reversed(range(len(runs)))
        for i in order:
            time.sleep(QUIET_SECONDS)
            times[i].append(seconds(runs[i]))
    return times


def median_ratio(numerators, denominators):
    """Median of the per-round ratios (robust against a disturbed round)."""
    return statistics.median(a / b for a, b in zip(numerators, denominators))


def format_table(headers, rows, right=()):
    """Fixed-width plain text; columns listed in `right` are right-aligned (numbers)."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]

    def line(cells):
        return "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])
