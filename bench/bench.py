"""`make bench`: our four gradient ops next to TF's built-ins (oneDNN) on real layers.

    .venv/bin/python bench/bench.py [--family conv2d,depthwise] [--op KEY,...]
        [--configs float32:NHWC,float32:NCHW,float64:NHWC,bfloat16:NHWC] [--shape TEXT]
        [--batch N] [--rounds R] [--json PATH] [--plot PATH] [--peak-gflops G] [--peak-gbs B]

Per shape, op, dtype and layout: median ms of ours and of TF's built-in (timed side by
side in one process, alternating, after a warm-up, chained calls per tf.function:
COPIES, more for short ops, see copies_for), GFLOP/s (2 x MACs of the forward conv), the
ratio TF/ours (median of per-round ratios; > 1 means ours is faster), the fraction of
this machine's peak and our peak scratch memory per call. A conv2d or grouped row's peak
is the FMA peak of the instruction set ours runs at, on all threads (a register-only
multiply-add loop in the op library, tf_conv_backprop_fma_peak_gflops; half of it for
float64), and the summary gives the 3x3 rows' fractions against the 75% goal; TF's GEMM
is measured too, for scale. A depthwise row's peak is memory bandwidth over the
compulsory bytes. Rows other than float32 NHWC also
time our float32 NHWC op on the same shape in the same rounds and report ours /
ours-f32-NHWC (where TF cannot run there is no TF time to beat, so we bound the cost of
the layout or dtype instead: NCHW <= 1.5, float64 <= 2.5). Ends with a summary per
family against the speed targets (TARGETS below; with --isa, ISA_TARGETS, and
TORCH_TARGETS for the PyTorch anchor). Writes JSON and a PNG bar chart. The layers are
bench/shapes.py's.

Grouped layers (family "grouped", conv2d ops with groups > 1) have no TF CPU gradient to
compare with (TF refuses them on CPU); their rows time TF's forward grouped convolution of
the same layer instead and report fwd/ours, which the target wants >= 1 on every row (a
gradient no slower than the forward pass it belongs to).

`--isa avx2|avx512` caps ours at that level (TF_CONV_BACKPROP_ISA) and runs TF's oneDNN
forced on and capped to the same level (TF_ENABLE_ONEDNN_OPTS=1, ONEDNN_MAX_CPU_ISA), so an
AVX-512 machine also measures the AVX2 comparison; without it TF runs its default (oneDNN
only on CPUs with AVX512_VNNI / BF16 / AMX, Eigen elsewhere). `--anchors torch` adds
PyTorch's CPU gradients (torch.ops.aten.convolution_backward, channels_last for NHWC, the
same thread count and ISA cap: ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA) from its own venv
(`make bench ANCHORS=torch` installs torch==2.13.0 there), timed by a worker process
(bench/torch_anchor.py) in the same alternating rounds; column torch/ours (> 1: ours is
faster). An `--isa` run also times TF's default kernels (Eigen where TF leaves oneDNN off)
in a worker process of its own: column TFdef/ours.

A config with a third field `xla` (e.g. float32:NHWC:xla) compiles both sides with XLA
(tf.function(jit_compile=True)): TF/ours is then TF's XLA lowering against ours, and
the column XLA/plain is our op under XLA over our own kernel without XLA, in the same
rounds: what XLA costs or gains on these layers.
"""
import argparse
import subprocess
import json
import math
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.dirname(os.path.abspath(__file__))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# --isa LEVEL: the environment of ours, TF's oneDNN and PyTorch at that level; it must be
# set before TensorFlow is imported (oneDNN reads it once).
ISA_ENV = {
    "avx2": {"TF_CONV_BACKPROP_ISA": "avx2", "TF_ENABLE_ONEDNN_OPTS": "1",
             "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
    "avx512": {"TF_CONV_BACKPROP_ISA": "avx512", "TF_ENABLE_ONEDNN_OPTS": "1",
               "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "ATEN_CPU_CAPABILITY": "avx512"},
}


def _isa_argument(argv):
    for i, arg in enumerate(argv):
        if arg == "--isa" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--isa="):
            return arg.split("=", 1)[1]
    return None


if _isa_argument(sys.argv[1:]) in ISA_ENV:
    os.environ.update(ISA_ENV[_isa_argument(sys.argv[1:])])

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_conv_backprop as tcb  # noqa: E402
from tf_conv_backprop import _variants  # noqa: E402
from tf_conv_backprop._ops import BY_KEY, OPS, relative_error, within  # noqa: E402

from _timing import (COPIES, format_table, median_ratio, seconds,  # noqa: E402
                     time_alternating, timed_function)
from shapes import BY_LABEL, LAYERS, Problem  # noqa: E402

DEFAULT_CONFIGS = "float32:NHWC,float32:NCHW,float64:NHWC,bfloat16:NHWC,float32:NHWC:xla"
BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}

# Speed targets: (family, dtype, layout) -> (median TF/ours >=, every shape >=).
TARGETS = {("conv2d", "float32", "NHWC"): (1.0, 0.8),
           ("depthwise", "float32", "NHWC"): (1.5, 1.0),
           ("conv2d", "bfloat16", "NHWC"): (0.8, None),
           ("depthwise", "bfloat16", "NHWC"): (1.0, None)}
# At a capped ISA (--isa) the CPU-speed targets: TF-oneDNN/ours where they differ from
# TARGETS, and PyTorch/ours (--anchors torch), keyed (family, dtype, layout, isa), isa None
# for any; None: no bound.
ISA_TARGETS = {("conv2d", "float32", "NHWC", "avx2"): (1.15, 0.9)}
TORCH_TARGETS = {("conv2d", "float32", "NHWC", "avx2"): (1.0, None),
                 ("conv2d", "float32", "NHWC", "avx512"): (1.0, 0.8),
                 ("depthwise", "float32", "NHWC", "avx2"): (None, 1.0),
                 ("depthwise", "float32", "NHWC", "avx512"): (None, 1.0),
                 ("grouped", "float32", "NHWC", None): (1.0, 0.7)}
# Anchors timed in other processes, with their column headers.
ANCHORS = {"torch": "torch/ours", "tf_default": "TFdef/ours"}
# 3x3 conv2d and grouped rows: the fraction of the FMA peak the summary measures against.
FMA_PEAK_GOAL = 0.75
# Grouped rows: TF's forward time / ours, every shape >= this.
FORWARD_TARGET = 1.0
# ours / ours-float32-NHWC <= bound.
SELF_BOUNDS = {"NCHW": 1.5, "float64": 2.5}
# Scratch bound per call: max(32 MiB, output size).
SCRATCH_FLOOR = 32 << 20
# copies_for: short ops chain copies to about this long a call, at most MAX_COPIES.
SHORT_CALL_SECONDS = 0.03
MAX_COPIES = 32


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", default="conv2d,depthwise,grouped")
    p.add_argument("--op", default="", help="comma-separated op keys (default: all of the family)")
    p.add_argument("--configs", default=DEFAULT_CONFIGS,
                   help=f"comma-separated dtype:layout pairs (default {DEFAULT_CONFIGS})")
    p.add_argument("--shape", default="", help="only shapes whose label contains this text")
    p.add_argument("--batch", type=int, help="override every shape's batch")
    p.add_argument("--rounds", type=int, default=7,
                   help="timed rounds (>= 7 for a median that one noisy round cannot move)")
    p.add_argument("--json", default="bench_out/bench.json", help="'' to skip")
    p.add_argument("--plot", default="bench_out/bench.png", help="'' to skip")
    p.add_argument("--peak-gflops", type=float,
                   help="float32 FMA peak, GFLOP/s (default: measure the library's FMA loop, "
                        "and TF's GEMM for scale)")
    p.add_argument("--peak-gbs", type=float,
                   help="memory bandwidth, GB/s (default: measure a TF add of 64 MiB arrays)")
    p.add_argument("--isa", choices=sorted(ISA_ENV),
                   help="ours, TF's oneDNN (forced on) and PyTorch capped at this level")
    p.add_argument("--anchors", default="", help="'torch': also time PyTorch's gradients")
    p.add_argument("--torch-python", default=os.path.join(ROOT, ".venv-torch", "bin", "python"),
                   help="the Python of the venv holding torch (for --anchors torch)")
    return p.parse_args(argv)


def cpu_description():
    """The CPU model and the flags that decide which kernels run."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    wanted = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
    return f"{model} [{' '.join(f for f in wanted if f in flags)}]"


class Worker:
    """An anchor timed in another process (bench/torch_anchor.py in the torch venv, or
    this script with --tf-default-worker): one JSON request a line, the reply a line."""

    def __init__(self, cmd, env):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        self.info = {}

    def ask(self, request):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker {self.proc.args} exited ({self.proc.wait()})")
        return json.loads(line)

    def timed(self, problem, copies):
        """A run for time_alternating (the worker's own seconds per copy), or None where
        the anchor cannot run the problem."""
        reply = self.ask({"layer": problem.layer.label, "op": problem.spec.key,
                          "dtype": problem.dtype, "layout": problem.data_format,
                          "batch": problem.batch, "copies": copies})
        if "error" in reply:
            return None
        self.info = reply

        def run():
            return self.ask({"time": True})["seconds"]
        run.copies = copies
        run.measure = run
        return run

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
            self.proc.stdin.close()
            self.proc.wait()


def torch_anchor(python):
    env = dict(os.environ, TCB_ANCHOR_THREADS=str(os.cpu_count() or 1))
    return Worker([python, os.path.join(ROOT, "bench", "torch_anchor.py")], env)


# The variables --isa sets for TF; the TF-default worker runs without them.
TF_ISA_VARIABLES = ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA")


def tf_default_anchor():
    """TF's built-in with TF's default kernels (Eigen where TF leaves oneDNN off), next
    to an --isa run's TF-oneDNN column."""
    env = {k: v for k, v in os.environ.items() if k not in TF_ISA_VARIABLES}
    return Worker([sys.executable, os.path.abspath(__file__), "--tf-default-worker"], env)


def tf_default_worker():
    """The worker side of tf_default_anchor."""
    run = None
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("quit"):
            break
        if "layer" in request:
            problem = Problem(BY_LABEL[request["layer"]], BY_KEY[request["op"]], request["dtype"],
                              request["layout"], request["batch"])
            run = timed_function(problem.spec.tf_reference, problem, np.random.default_rng(0),
                                 request["copies"])
            try:
                run()
                reply = {"ready": True, "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default")}
            except (tf.errors.OpError, ValueError, TypeError) as e:
                reply = {"error": type(e).__name__}
        else:
            reply = {"seconds": seconds(run)}
        print(json.dumps(reply), flush=True)


def median_seconds(fn, repeats=7):
    fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def measure_peaks():
    """Measured here and now: float32 GEMM GFLOP/s (TF's matmul, n=2048, all threads) and
    streaming GB/s (c = a + b on 64 MiB float32 arrays)."""
    n = 2048
    a = tf.random.normal((n, n))
    b = tf.random.normal((n, n))
    mm = tf.function(lambda: tf.linalg.matmul(a, b))
    gflops = 2 * n ** 3 / median_seconds(lambda: mm().numpy()) / 1e9
    m = 16 << 20
    x, y = tf.random.normal((m,)), tf.random.normal((m,))
    add = tf.function(lambda: x + y)
    gbs = 3 * 4 * m / median_seconds(lambda: add()) / 1e9
    return gflops, gbs


def fma_peak_gflops():
    """float32 GFLOP/s of the library's register-only FMA loop at the instruction set ours
    runs at (TF_CONV_BACKPROP_ISA caps it), on as many threads as TF's intra-op pool."""
    threads = (tf.config.threading.get_intra_op_parallelism_threads()
               or len(os.sched_getaffinity(0)))
    return _variants.fma_peak_gflops(threads)


class Scratch:
    """Our peak scratch bytes per call, the op library's counter."""

    def __init__(self):
        self.available = _variants.scratch_peak_bytes(False) is not None

    def reset(self):
        _variants.scratch_peak_bytes(True)

    def peak(self):
        return _variants.scratch_peak_bytes(False)


def compulsory_bytes(problem):
    """Bytes a depthwise gradient must move at least: read its two inputs, write its
    output (each once)."""
    n = (np.prod(problem.input_shape) + np.prod(problem.filter_shape)
         + np.prod(problem.out_backprop_shape))
    return float(n) * BYTES[problem.dtype]


def output_bytes(problem):
    return float(np.prod(problem.output_shape)) * BYTES[problem.dtype]


def try_call(run):
    try:
        return run(), None
    except (tf.errors.OpError, ValueError, TypeError) as e:
        return None, type(e).__name__


def copies_for(probe_seconds):
    """Chained copies per call. A tf.function call costs 0.2-0.45 ms besides its ops
    (inside a model's graph an op costs about 12 us besides its kernel): with COPIES = 4 a
    0.2 ms depthwise layer paid about as much again for it. So short ops chain copies to
    about SHORT_CALL_SECONDS by the probe (one cold call, overhead included, so this
    errs high), long ones fewer, so a slow TF path (seconds per call) stays affordable."""
    if probe_seconds >= 0.2:
        return 1
    if probe_seconds >= 0.02:
        return 2
    return int(min(MAX_COPIES, max(COPIES, math.ceil(SHORT_CALL_SECONDS / probe_seconds))))


def forward_function(problem, copies, jit_compile):
    """TF's forward conv2d of the problem's layer (the grouped layers' reference time),
    `copies` chained calls as in timed_function."""
    rng = np.random.default_rng(1)

    def const(shape):
        return tf.cast(tf.constant(rng.standard_normal(shape, np.float32)), problem.dtype)
    xs, w = [const(problem.input_shape) for _ in range(copies)], const(problem.filter_shape)

    @tf.function(autograph=False, jit_compile=jit_compile)
    def run():
        outs = []
        for x in xs:
            with tf.control_dependencies(outs[-1:]):
                outs.append(tf.nn.conv2d(x, w, problem.strides4, problem.padding,
                                         data_format=problem.data_format,
                                         dilations=problem.dilations4))
        return outs
    run.copies = copies
    return run


def bench_case(layer, spec, dtype, layout, batch, args, peaks, scratch, xla=False, anchors=None):
    problem = Problem(layer, spec, dtype, layout, batch)
    primary = (dtype, layout) == ("float32", "NHWC") and not xla
    ours_fn, tf_fn = getattr(tcb.compat.v1.nn, spec.names[0]), spec.tf_reference

    def build(fn, p, copies, jit_compile=xla):
        return timed_function(fn, p, np.random.default_rng(0), copies, jit_compile)

    # Probe (one copy each): correctness against TF and the cost of one call.
    ours1 = build(ours_fn, problem, 1)
    out_ours, _ = try_call(ours1)
    out_ours, _ = try_call(ours1)
    if out_ours is None:
        return {"family": layer.family, "shape": layer.label, "op": spec.key, "dtype": dtype,
                "layout": layout, "xla": xla, "error": "ours failed"}
    probe = seconds(ours1)
    tf1 = build(tf_fn, problem, 1)
    out_tf, tf_error = try_call(tf1)
    diff = None
    if out_tf is not None:
        t0 = time.perf_counter()
        tf1()
        probe = max(probe, time.perf_counter() - t0)
        diff = relative_error(tf.cast(out_ours[0], tf.float64), tf.cast(out_tf[0], tf.float64))
    copies = copies_for(probe)

    runs, names = [build(ours_fn, problem, copies)], ["ours"]
    if out_tf is not None:
        runs.append(build(tf_fn, problem, copies))
        names.append("tf")
    for name, anchor in (anchors or {}).items():
        run = None if xla else anchor.timed(problem, copies)
        if run is not None:
            runs.append(run)
            names.append(name)
    if layer.groups > 1:
        forward = forward_function(problem, copies, xla)
        if try_call(forward)[0] is not None:
            runs.append(forward)
            names.append("tf_forward")
    if xla:
        runs.append(build(ours_fn, problem, copies, jit_compile=False))
        names.append("ours_no_xla")
    elif not primary:
        base = Problem(layer, spec, "float32", "NHWC", batch)
        runs.append(build(ours_fn, base, copies))
        names.append("ours_f32_nhwc")

    scratch.reset()
    runs[0]()
    peak_scratch = scratch.peak()
    variant = _variants.last_run(spec.key) if not xla else "xla"
    times = dict(zip(names, time_alternating(runs, args.rounds)))

    flops = problem.flops
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    row = {"family": layer.family, "shape": layer.label, "k": layer.k, "op": spec.key,
           "grad": spec.computes,
           "dtype": dtype, "layout": layout, "xla": xla, "batch": batch, "copies": copies,
           "rounds": args.rounds, "gflop": flops / 1e9, "ours_ms": ms["ours"],
           "ours_gflops": flops / ms["ours"] / 1e6, "tf_ms": ms.get("tf"),
           "tf_gflops": flops / ms["tf"] / 1e6 if "tf" in ms else None,
           "tf_over_ours": median_ratio(times["tf"], times["ours"]) if "tf" in times else None,
           "tf_error": tf_error, "rel_diff_vs_tf": diff,
           "ours_over_ours_f32_nhwc": (median_ratio(times["ours"], times["ours_f32_nhwc"])
                                       if "ours_f32_nhwc" in times else None),
           "ours_f32_nhwc_ms": ms.get("ours_f32_nhwc"),
           "xla_over_no_xla": (median_ratio(times["ours"], times["ours_no_xla"])
                               if "ours_no_xla" in times else None),
           "ours_no_xla_ms": ms.get("ours_no_xla"),
           "tf_forward_ms": ms.get("tf_forward"),
           **{f"{name}_ms": ms.get(name) for name in ANCHORS},
           **{f"{name}_over_ours": (median_ratio(times[name], times["ours"]) if name in times
                                    else None) for name in ANCHORS},
           "forward_over_ours": (median_ratio(times["tf_forward"], times["ours"])
                                 if "tf_forward" in times else None),
           "peak_scratch_bytes": peak_scratch, "output_bytes": output_bytes(problem),
           "variant": variant,
           "spread_ours": (max(times["ours"]) - min(times["ours"])) / min(times["ours"])}
    if layer.depthwise:  # conv2d and grouped rows: set_fma_fractions
        row["peak_fraction"] = compulsory_bytes(problem) / (ms["ours"] * 1e-3) / 1e9 / peaks["gbs"]
    # Twice the usual factor for two approximations: TF's 16-bit CPU kernels do not all
    # sum in float32 (its bfloat16 filter gradient of ResNet-50 3x3 @56 is 6 u from the
    # exact result at batch 8, ours 0.4 u).
    if diff is not None and not within(diff, dtype, problem.reduction_length, factor=4):
        print(f"warning: {layer.label} {spec.key} {dtype} {layout}: ours and TF differ by "
              f"{diff:.2e}", file=sys.stderr)
    return row


def set_fma_fractions(rows, peaks, remeasure):
    """The conv2d and grouped rows' fraction of the FMA peak, with the peak measured once
    more (remeasure) and the best measurement kept: a neighbour's burst on a shared
    machine can halve one measurement, never double it."""
    if remeasure:
        peaks["fma_gflops"] = max(peaks["fma_gflops"], fma_peak_gflops() or 0)
    for r in rows:
        if "error" not in r and r["family"] != "depthwise":
            r["peak_fraction"] = r["ours_gflops"] / (peaks["fma_gflops"] / (2 if r["dtype"] == "float64" else 1))


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def print_rows(rows):
    xla = any(r.get("xla") for r in rows)
    headers = ["shape", "grad", "dtype", "layout", "ours ms", "ours GF/s", "TF ms", "TF GF/s",
               "TF/ours", *ANCHORS.values(), "XLA/plain" if xla else "ours/f32", "fwd/ours",
               "peak", "scratch MiB", "spread", "CPU variant"]
    text = []
    for r in rows:
        if "error" in r:
            text.append([r["shape"], r["op"], r["dtype"], r["layout"], r["error"]] + [""] * 12)
            continue
        tf_ratio = fmt(r["tf_over_ours"], ".2f") if r["tf_error"] is None else r["tf_error"][:12]
        text.append([r["shape"], r["grad"], r["dtype"], r["layout"], fmt(r["ours_ms"], ".2f"),
                     fmt(r["ours_gflops"], ".1f"), fmt(r["tf_ms"], ".2f"),
                     fmt(r["tf_gflops"], ".1f"), tf_ratio,
                     *(fmt(r.get(f"{name}_over_ours"), ".2f") for name in ANCHORS),
                     fmt(r["xla_over_no_xla"] if xla else r["ours_over_ours_f32_nhwc"], ".2f"),
                     fmt(r.get("forward_over_ours"), ".2f"), fmt(r["peak_fraction"], ".0%"),
                     fmt(None if r["peak_scratch_bytes"] is None
                         else r["peak_scratch_bytes"] / 2 ** 20, ".1f"),
                     fmt(r["spread_ours"], ".0%"), r.get("variant") or "-"])
    print(format_table(headers, text, right=set(range(4, 16))), flush=True)


def judge(ratios, target):
    """(text, fields) of ratios against target = (median >=, every shape >=), either None."""
    med_t, min_t = target
    below = [x for x in ratios if min_t is not None and x < min_t]
    met = (med_t is None or statistics.median(ratios) >= med_t) and not below
    bounds = ([f"median >= {med_t}"] if med_t is not None else []) + (
        [f"none < {min_t}"] if min_t is not None else [])
    text = f"target {', '.join(bounds)}: {len(below)} below, {'MET' if met else 'NOT MET'}"
    return text, {"target_median": med_t, "target_min": min_t, "below_min": len(below), "met": met}


def summarize(rows, isa=None):
    """One line per (family, dtype, layout): median and min TF/ours, shapes below the
    speed targets (those of `isa` where it is capped), ours/ours-f32 bound, scratch bound."""
    groups = {}
    for r in rows:
        if "error" not in r:
            layout = r["layout"] + (" XLA" if r.get("xla") else "")
            groups.setdefault((r["family"], r["dtype"], layout), []).append(r)
    lines, summary = [], []
    for key, rs in groups.items():
        ratios = [r["tf_over_ours"] for r in rs if r["tf_over_ours"] is not None]
        target = ISA_TARGETS.get(key + (isa,)) or TARGETS.get(key)
        entry = {"family": key[0], "dtype": key[1], "layout": key[2], "cases": len(rs),
                 "tf_ran": len(ratios)}
        text = f"{key[0]:9} {key[1]:8} {key[2]}: {len(rs)} cases"
        if ratios:
            entry.update(median_tf_over_ours=statistics.median(ratios), min_tf_over_ours=min(ratios),
                         geomean_tf_over_ours=float(np.exp(np.mean(np.log(ratios)))))
            text += (f", TF/ours median {entry['median_tf_over_ours']:.2f} geomean "
                     f"{entry['geomean_tf_over_ours']:.2f} min {min(ratios):.2f}")
        if target and ratios:
            verdict, fields = judge(ratios, target)
            entry.update(fields)
            text += "; " + verdict
        for name, header in ANCHORS.items():
            anchor = [r[f"{name}_over_ours"] for r in rs if r.get(f"{name}_over_ours") is not None]
            if anchor:
                entry.update({f"median_{name}_over_ours": statistics.median(anchor),
                              f"min_{name}_over_ours": min(anchor)})
                text += (f"; {header} median {statistics.median(anchor):.2f} min "
                         f"{min(anchor):.2f} ({len(anchor)} ran)")
                anchor_target = TORCH_TARGETS.get(key + (isa,)) or TORCH_TARGETS.get(key + (None,))
                if name == "torch" and anchor_target:
                    verdict, fields = judge(anchor, anchor_target)
                    entry["torch_target"] = fields
                    text += f" ({verdict})"
        fractions = [r["peak_fraction"] for r in rs if r["family"] != "depthwise" and r["k"] == 3]
        if fractions:
            reach = sum(f >= FMA_PEAK_GOAL for f in fractions)
            entry.update(median_3x3_fma_fraction=statistics.median(fractions),
                         min_3x3_fma_fraction=min(fractions), max_3x3_fma_fraction=max(fractions))
            text += (f"; 3x3 rows at {statistics.median(fractions):.0%} of the FMA peak median "
                     f"({min(fractions):.0%}-{max(fractions):.0%}; goal {FMA_PEAK_GOAL:.0%}: "
                     f"{reach} of {len(fractions)} reach it)")
        forwards = [r["forward_over_ours"] for r in rs if r.get("forward_over_ours") is not None]
        if forwards:
            slower = sum(f < FORWARD_TARGET for f in forwards)
            entry.update(median_forward_over_ours=statistics.median(forwards),
                         min_forward_over_ours=min(forwards), slower_than_forward=slower)
            text += (f"; TF forward/ours median {statistics.median(forwards):.2f} min "
                     f"{min(forwards):.2f} (target every row >= {FORWARD_TARGET}: {slower} below, "
                     f"{'MET' if not slower else 'NOT MET'})")
        bound = SELF_BOUNDS.get(key[2]) or SELF_BOUNDS.get(key[1])
        xla_costs = [r["xla_over_no_xla"] for r in rs if r.get("xla_over_no_xla")]
        if xla_costs:
            entry.update(median_xla_over_no_xla=statistics.median(xla_costs),
                         max_xla_over_no_xla=max(xla_costs), min_xla_over_no_xla=min(xla_costs))
            text += (f"; ours under XLA / ours without: median {statistics.median(xla_costs):.2f}"
                     f" (min {min(xla_costs):.2f}, max {max(xla_costs):.2f})")
        selfs = [r["ours_over_ours_f32_nhwc"] for r in rs if r["ours_over_ours_f32_nhwc"]]
        if bound and selfs:
            over = sum(s > bound for s in selfs)
            entry.update(self_bound=bound, max_ours_over_f32=max(selfs), above_self_bound=over)
            text += (f"; ours/ours-f32-NHWC max {max(selfs):.2f} (bound {bound}: {over} above)")
        scr = [(r["peak_scratch_bytes"], max(SCRATCH_FLOOR, r["output_bytes"])) for r in rs
               if r["peak_scratch_bytes"] is not None]
        if scr:
            over = sum(s > b for s, b in scr)
            entry.update(max_scratch_mib=max(s for s, _ in scr) / 2 ** 20, above_scratch_bound=over)
            text += f"; scratch max {entry['max_scratch_mib']:.1f} MiB ({over} above bound)"
        lines.append(text)
        summary.append(entry)
    return lines, summary


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed; no plot written", file=sys.stderr)
        return
    groups = {}
    for r in rows:
        if r.get("tf_over_ours") is not None:
            groups.setdefault((r["dtype"], r["layout"] + (" XLA" if r.get("xla") else "")),
                              []).append(r)
    if not groups:
        return
    fig, axes = plt.subplots(len(groups), 1, figsize=(14, 4.5 * len(groups)), squeeze=False)
    for ax, ((dtype, layout), rs) in zip(axes[:, 0], groups.items()):
        labels = [f"{r['shape']} {BY_KEY[r['op']].short}" for r in rs]
        values = [r["tf_over_ours"] for r in rs]
        colors = ["tab:green" if v >= 1 else "tab:red" for v in values]
        ax.bar(range(len(rs)), values, color=colors)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(rs)))
        ax.set_xticklabels(labels, rotation=75, ha="right", fontsize=7)
        ax.set_ylabel("TF time / our time")
        ax.set_title(f"{dtype} {layout}: > 1 means ours is faster (TF {tf.__version__}, oneDNN)")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


def main(argv=None):
    args = parse_args(argv)
    families = [f for f in args.family.split(",") if f]
    ops = [o for o in args.op.split(",") if o]
    configs = [tuple(c.split(":")) for c in args.configs.split(",") if c]
    bad = [c for c in configs if len(c) not in (2, 3) or (len(c) == 3 and c[2] != "xla")]
    if bad:
        raise SystemExit(f"--configs: expected dtype:layout or dtype:layout:xla, got {bad}")
    fma = args.peak_gflops or fma_peak_gflops()
    remeasure = not args.peak_gflops and fma is not None  # the library measures it
    if args.peak_gflops and args.peak_gbs:
        gemm, gbs = None, args.peak_gbs
    else:
        gemm, gbs = measure_peaks()
        gbs = args.peak_gbs or gbs
        if fma is None:
            print("note: the op library has no FMA peak loop; conv2d rows use TF's GEMM as "
                  "their peak", file=sys.stderr)
            fma = gemm
    peaks = {"fma_gflops": fma, "gemm_gflops": gemm, "gbs": gbs}
    scratch = Scratch()
    anchors = {}
    if "torch" in args.anchors.split(","):
        if not os.path.exists(args.torch_python):
            raise SystemExit(f"--anchors torch: no {args.torch_python} (make bench ANCHORS=torch "
                             f"installs it)")
        anchors["torch"] = torch_anchor(args.torch_python)
    if args.isa:
        anchors["tf_default"] = tf_default_anchor()
    print(f"TF {tf.__version__}, {os.cpu_count()} CPUs, {cpu_description()}; "
          f"peaks: float32 FMA {fma:.0f} GFLOP/s"
          + (f" (TF's GEMM {gemm:.0f}, {gemm / fma:.0%} of it)" if gemm else "")
          + f", bandwidth {gbs:.0f} GB/s; "
          f"ISA variant: {os.environ.get('TF_CONV_BACKPROP_ISA', 'best supported')}; TF oneDNN: "
          f"{os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'default')} (max ISA "
          f"{os.environ.get('ONEDNN_MAX_CPU_ISA', 'any')}); "
          f"rounds {args.rounds}; scratch counter: {'yes' if scratch.available else 'no'}", flush=True)
    rows = []
    for dtype, layout, *xla in configs:
        xla = bool(xla)
        print(f"\n== {dtype} {layout}" + (" (both sides compiled with XLA)" if xla else ""),
              flush=True)
        block = []
        for layer in LAYERS:
            if layer.family not in families or args.shape not in layer.label:
                continue
            for spec in OPS:
                if spec.depthwise != layer.depthwise or (ops and spec.key not in ops):
                    continue
                row = bench_case(layer, spec, dtype, layout, args.batch or layer.batch, args,
                                 peaks, scratch, xla, anchors)
                block.append(row)
                if "error" in row:
                    print(f"  {layer.label} {spec.key}: {row['error']}", flush=True)
                    continue
                tf_part = (f"TF {row['tf_ms']:.2f} ms, TF/ours {row['tf_over_ours']:.2f}"
                           if row["tf_ms"] is not None else f"TF: {row['tf_error']}")
                anchor_part = "".join(
                    f", {name} {row[name + '_ms']:.2f} ms, {header} {row[name + '_over_ours']:.2f}"
                    for name, header in ANCHORS.items() if row.get(name + "_ms"))
                print(f"  {layer.label} {row['grad']}: ours {row['ours_ms']:.2f} ms, {tf_part}"
                      f"{anchor_part}", flush=True)
        if block:
            print()
            set_fma_fractions(block, peaks, remeasure)
            print_rows(block)
        rows += block
    if "torch" in anchors:
        info = anchors["torch"].info
        print(f"\nPyTorch anchor: torch {info.get('torch')}, capability "
              f"{info.get('capability')}, {info.get('threads')} threads")
    if "tf_default" in anchors:
        print(f"TF-default anchor: TF_ENABLE_ONEDNN_OPTS "
              f"{anchors['tf_default'].info.get('onednn', 'default')}")
    for anchor in anchors.values():
        anchor.close()
    set_fma_fractions(rows, peaks, remeasure)
    lines, summary = summarize(rows, args.isa)
    print("\nSummary (TF/ours > 1: ours faster; against the speed targets where they exist)")
    print(f"  FMA peak the conv2d rows are measured against: {peaks['fma_gflops']:.0f} GFLOP/s"
          + (" (the best of the measurements before each table and here)" if remeasure else ""))
    for line in lines:
        print("  " + line)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"tf_version": tf.__version__, "peaks": peaks, "rounds": args.rounds,
                       "isa": os.environ.get("TF_CONV_BACKPROP_ISA", "best"),
                       "cpu": cpu_description(),
                       "onednn": {k: os.environ.get(k) for k in ("TF_ENABLE_ONEDNN_OPTS",
                                                                 "ONEDNN_MAX_CPU_ISA")},
                       "anchors": {name: a.info for name, a in anchors.items()}, "rows": rows,
                       "summary": summary}, f, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--tf-default-worker"]:
        tf_default_worker()
        sys.exit(0)
    sys.exit(main())
