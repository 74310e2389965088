"""`make report`: which configurations TF's built-in CPU gradients and ours accept, how
accurate ours are (Table 1), and how fast ours are next to TF-oneDNN on real layers
(Table 2).

    .venv/bin/python bench/report.py [--cases K] [--batch N] [--rounds R]
                                     [--skip-timing] [--json report/report.json]

Exits nonzero when any of our cells is unsupported or outside its tolerance.
"""
import argparse
import dataclasses
import itertools
import json
import os
import statistics
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "python")]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# TF's own answer counts as WRONG only beyond this multiple of our tolerance: the parity
# tests grant TF the same slack, its f16 paths round more than ours, and the answers
# that are really wrong (ignored depthwise dilation) are off by O(1).
TF_FACTOR = 2


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=3, help="random cases per Table 1 row")
    p.add_argument("--batch", type=int, default=8, help="batch of the timing shapes")
    p.add_argument("--rounds", type=int, default=7, help="timing rounds (ours and TF alternate)")
    p.add_argument("--skip-timing", action="store_true")
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    p.add_argument("--tf-support-only", action="store_true",
                   help="internal: print TF's Table 1 column as JSON (for the oneDNN-off child)")
    return p.parse_args()


ARGS = parse_args()
# oneDNN is chosen once, when TF is imported: this process reports TF's default (on);
# the "TF Eigen" column comes from a child started with it off.
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0" if ARGS.tf_support_only else "1"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
# Table 1 is the parity tests' machinery (random cases, the float64 reference) as a table.
from cases import (DTYPES, FORMATS, PADDINGS, make_arrays, our_function,  # noqa: E402
                   relative_error, run_ours, run_reference, run_tf, sample_case, within)
from tf_conv_backprop import _ops  # noqa: E402
from tf_conv_backprop._ops import OPS  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Shared with bench.py: COPIES chained calls per tf.function, alternating rounds.
from _timing import (COPIES, format_table, median_ratio, time_alternating,  # noqa: E402
                     timed_function)
from shapes import BY_LABEL, Problem  # noqa: E402

# (op, dtype, layout, dilated, padding, grouped): every op densely, and the conv2d ops
# grouped (2 to 4 groups; TF's CPU kernels refuse these gradients).
CELLS = ([cell + (False,) for cell in itertools.product(
             [op.key for op in OPS], DTYPES, FORMATS, (False, True), PADDINGS)] +
         [cell + (True,) for cell in itertools.product(
             [op.key for op in OPS if not op.depthwise], DTYPES, FORMATS, (False, True),
             PADDINGS)])


def cell_cases(index, k):
    """The same K cases in both processes (seeded by the cell's position)."""
    op, dtype, data_format, dilated, padding, grouped = CELLS[index]
    for i in range(k):
        case = sample_case(op, dtype, data_format, padding, dilated, seed=index * 100 + i)
        if grouped:
            groups = 2 + (index + i) % 3
            case = dataclasses.replace(case, in_depth=case.in_depth * groups,
                                       out_channels=case.out_channels * groups, groups=groups)
        arrays = make_arrays(case)
        yield case, arrays, run_reference(case, arrays)


# Keeps the TF columns narrow enough to paste into a README.
SHORT_ERRORS = {"InvalidArgument": "InvArg", "Unimplemented": "Unimpl"}


def worst(errs):
    """Largest error; NaN (non-finite output) if any, which max() would hide, and NaN
    when nothing ran, so an empty cell never passes."""
    return float("nan") if not errs or any(e != e for e in errs) else max(errs)


def nearest_budget(judged):
    """The (error, tolerance) pair nearest its tolerance (each case has its own: the
    reduction length differs), a NaN error first; (NaN, NaN) when nothing ran."""
    if not judged:
        return float("nan"), float("nan")
    return max(judged, key=lambda et: et[0] / et[1] if et[0] == et[0] else float("inf"))


def try_run(runner, case, arrays):
    """(result, None) or (None, short error class)."""
    try:
        return runner(case, arrays), None
    except (tf.errors.OpError, ValueError, TypeError) as e:
        name = type(e).__name__.replace("Error", "")
        return None, SHORT_ERRORS.get(name, name)


def tf_cell(index, k):
    """TF's built-in on one cell: 'yes', 'WRONG' (ran, wrong answer on some case; worst
    wins), 'no (Class)' when it rejected every case, 'j/K (Class)' when it ran only j,
    which happens where acceptance depends on the geometry (e.g. unequal strides)."""
    errs, wrong, errors = [], 0, set()
    for case, arrays, ref in cell_cases(index, k):
        got, err_class = try_run(run_tf, case, arrays)
        if err_class:
            errors.add(err_class)
            continue
        errs.append(relative_error(got, ref))
        wrong += not within(errs[-1], case, TF_FACTOR)
    ran = len(errs)
    why = "/".join(sorted(errors))
    status = ("WRONG" if wrong else "yes" if ran == k else
              f"no ({why})" if ran == 0 else f"{ran}/{k} ({why})")
    return {"status": status, "ran": ran, "wrong": wrong, "errors": sorted(errors),
            "max_rel_err": worst(errs)}


def tf_column(k):
    return [tf_cell(i, k) for i in range(len(CELLS))]


def start_eigen_child(k):
    """The oneDNN-off column needs a fresh interpreter; it runs while we do ours."""
    cmd = [sys.executable, os.path.abspath(__file__), "--tf-support-only", "--cases", str(k)]
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0")
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish_eigen_child(child):
    out, err = child.communicate()
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        print(f"warning: the oneDNN-off child failed (exit {child.returncode}); its column "
              f"shows '?'. Its stderr ends:\n{err[-2000:]}", file=sys.stderr)
        return [{"status": "?", "ran": 0, "wrong": 0, "errors": [], "max_rel_err": None}
                for _ in CELLS]


def ours_cell(index, k):
    judged, errors = [], set()
    for case, arrays, ref in cell_cases(index, k):
        got, err_class = try_run(run_ours, case, arrays)
        if err_class:
            errors.add(err_class)
        else:
            tol = _ops.tolerance(case.dtype, case.reduction_length, case.cancellation)
            judged.append((relative_error(got, ref), tol))
    err, tol = nearest_budget(judged)
    supported = not errors
    # The case nearest its tolerance passes iff all do; NaN never passes.
    return {"supported": supported, "errors": sorted(errors), "rel_err": err, "tol": tol,
            "ok": supported and err <= tol}


def support_table(k):
    child = start_eigen_child(k)
    rows = []
    for i, (op, dtype, data_format, dilated, padding, grouped) in enumerate(CELLS):
        rows.append({"op": op, "dtype": dtype, "layout": data_format,
                     "dilation": ">1" if dilated else "1", "padding": padding,
                     "groups": "2-4" if grouped else "1",
                     "tf_onednn": tf_cell(i, k), "ours": ours_cell(i, k)})
    for row, eigen in zip(rows, finish_eigen_child(child)):
        row["tf_eigen"] = eigen
    headers = ["op", "dtype", "layout", "dilation", "padding", "groups", "TF oneDNN", "TF Eigen",
               "ours", "rel err", "tol", "ok"]
    def ours_status(o):
        return "yes" if o["supported"] else f"no ({'/'.join(o['errors'])})"
    text_rows = [[r["op"], r["dtype"], r["layout"], r["dilation"], r["padding"], r["groups"],
                  r["tf_onednn"]["status"], r["tf_eigen"]["status"], ours_status(r["ours"]),
                  f"{r['ours']['rel_err']:.2e}", f"{r['ours']['tol']:.1e}",
                  "ok" if r["ours"]["ok"] else "FAIL"] for r in rows]
    n = len(rows)
    count = lambda col, status: sum(r[col]["status"] == status for r in rows)  # noqa: E731
    partial = lambda col: sum(r[col]["status"][0].isdigit() for r in rows)  # noqa: E731
    summary = (f"ours: {sum(r['ours']['supported'] for r in rows)}/{n} cells supported, "
               f"{sum(r['ours']['ok'] for r in rows)}/{n} within tolerance; "
               f"TF oneDNN: {count('tf_onednn', 'yes')} supported "
               f"({count('tf_onednn', 'WRONG')} wrong); "
               f"TF Eigen: {count('tf_eigen', 'yes')} supported "
               f"({count('tf_eigen', 'WRONG')} wrong)")
    legend = textwrap.fill(
        f"TF columns, over the same {k} random cases per row: yes = ran all, each within "
        f"{TF_FACTOR}x tol of the float64 reference; WRONG = ran and returned a wrong result; "
        f"no = rejected all (InvArg = InvalidArgument, Unimpl = Unimplemented); j/{k} = ran j, "
        f"rejected the rest (oneDNN {partial('tf_onednn')}, Eigen {partial('tf_eigen')} rows). "
        f"rel err: ours vs the reference, ||ours - ref|| / ||ref||, and tol its tolerance "
        f"(by dtype and reduction length), for the row's case nearest its tolerance.", 100)
    print(f"Table 1: support and accuracy (TF {tf.__version__}, CPU)\n")
    print(format_table(headers, text_rows, right={9, 10}))
    print(f"\n{legend}\n{summary}")
    return rows, summary


# The layers of Table 2: float32 NHWC training layers from ResNet-50 and MobileNetV2.
TIMING_LAYERS = ("ResNet-50 3x3 64->64 @56", "ResNet-50 1x1 256->64 @56",
                 "MobileNetV2 dw 3x3 C144 @56")


def timing_table(batch, rounds):
    rows = []
    for layer in (BY_LABEL[label] for label in TIMING_LAYERS):
        for spec in OPS:
            if spec.depthwise != layer.depthwise:
                continue
            problem = Problem(layer, spec, "float32", "NHWC", batch)
            ours = timed_function(our_function(spec.key), problem, np.random.default_rng(0))
            theirs = timed_function(spec.tf_reference, problem, np.random.default_rng(0))
            # Same inputs, so the outputs must agree: never time a wrong answer.
            diff = relative_error(ours()[0].numpy(), theirs()[0].numpy())
            t_ours, t_tf = time_alternating([ours, theirs], rounds)
            ratio = median_ratio(t_tf, t_ours)
            ms_ours, ms_tf = statistics.median(t_ours) * 1e3, statistics.median(t_tf) * 1e3
            flops = problem.flops
            rows.append({"shape": layer.label, "grad": spec.computes, "op": spec.key,
                         "batch": batch, "gflop": flops / 1e9, "ours_ms": ms_ours, "tf_ms": ms_tf,
                         "ours_gflops": flops / ms_ours / 1e6, "tf_gflops": flops / ms_tf / 1e6,
                         "tf_over_ours": ratio, "rel_diff": diff})
            if not _ops.within(diff, "float32", problem.reduction_length, factor=2):
                print(f"warning: {layer.label} {spec.key}: ours and TF differ by {diff:.2e}",
                      file=sys.stderr)
    headers = ["layer (float32 NHWC)", "grad", "ours ms", "ours GF/s", "TF ms", "TF GF/s",
               "TF/ours"]
    text_rows = [[r["shape"], r["grad"], f"{r['ours_ms']:.2f}", f"{r['ours_gflops']:.1f}",
                  f"{r['tf_ms']:.2f}", f"{r['tf_gflops']:.1f}", f"{r['tf_over_ours']:.2f}"]
                 for r in rows]
    print(f"\nTable 2: timing, batch {batch}, TF = built-in with oneDNN; median of {rounds} "
          f"alternating rounds, {COPIES} copies per call; TF/ours > 1 means ours is faster\n")
    print(format_table(headers, text_rows, right=set(range(2, 7))))
    return rows


def json_safe(x):
    """Strict JSON: NaN and infinity (nothing ran, non-finite output) become null."""
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [json_safe(v) for v in x]
    return None if isinstance(x, float) and not np.isfinite(x) else x


def main():
    if ARGS.tf_support_only:
        print(json.dumps(tf_column(ARGS.cases)))
        return 0
    support, summary = support_table(ARGS.cases)
    timing = [] if ARGS.skip_timing else timing_table(ARGS.batch, ARGS.rounds)
    if ARGS.json:
        os.makedirs(os.path.dirname(os.path.abspath(ARGS.json)), exist_ok=True)
        with open(ARGS.json, "w") as f:
            report = {"tf_version": tf.__version__, "cases_per_row": ARGS.cases,
                      "tf_wrong_factor": TF_FACTOR, "support": support, "summary": summary,
                      "timing": timing}
            json.dump(json_safe(report), f, indent=1)
    failed = [r for r in support if not r["ours"]["ok"]]
    for r in failed:
        o = r["ours"]
        why = (f"rel err {o['rel_err']:.2e} > tol {o['tol']:.1e}" if o["supported"]
               else "rejected (" + "/".join(o["errors"]) + ")")
        print(f"FAIL: ours, {r['op']} {r['dtype']} {r['layout']} dilation {r['dilation']} "
              f"{r['padding']} groups {r['groups']}: {why}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
