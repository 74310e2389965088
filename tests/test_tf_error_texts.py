"""TF's error texts, plus ours: every bad-input case that our kernel rejects is also run
on TF's built-in op, each in a crash-isolating worker. Where TF raises cleanly for a
reason that is a fault of the input, our error must have TF's class and contain TF's
message text (without TF's node/function prefixes and its kernel-class label), so a
migration suite's assertRaisesRegex on TF's text passes with our ops.

TF's built-in runs with oneDNN off (TF_ENABLE_ONEDNN_OPTS=0): its default CPU kernels,
the ones TF's own kernel tests meet on most machines, on every machine alike.

Cases are not compared where TF gives no usable text: it crashes, it returns a result
(its depthwise kernels ignore `dilations`), it refuses for a limitation of its CPU
kernels that ours do not have (NCHW, dilations, unequal depthwise strides, grouped
shapes), its message names the wrong argument, or its size arithmetic overflowed int64.
"""
import re

import pytest

import bad_inputs
from bad_inputs import CASES
from test_bad_inputs import TF_ERROR_CLASSES, isolated_runner

# TF's CPU kernels stop at these before looking at the input's fault; ours run the case.
TF_CPU_LIMITATIONS = (
    "only supports NHWC",
    "do not yet support dilation rates larger than 1",
    "Gradients for grouped convolutions are not supported on CPU",
    "filter_size does not have enough elements",        # BF's guard, met by grouped shapes
    "Depthwise convolution on CPU is only supported for NHWC",
    "only supports equal length strides",
    "too large",                                        # depthwise sizes beyond int32
)
# TF's Conv2DBackpropInput reports a wrong out_backprop rank as "input_sizes must be
# 4-dimensional"; ours names `out_backprop`.
TF_WRONG_ARGUMENT = ("input_sizes must be 4-dimensional, got:",)
# Explicit paddings near 2**62 and 2**63: TF's int64 output-size arithmetic wraps
# (it reports a "negative" or a tiny computed size); ours reports the overflow.
TF_OVERFLOWS = tuple(f"{op}_explicit_pad_{kind}" for op in ("BI", "BF", "DI", "DF")
                     for kind in ("2pow62_both", "int64max"))

COMPARED_CASES = [c.id for c in CASES if c.expect.kind == "error" and c.expect.stage == "kernel"]
MIN_COMPARED = 210   # of 299 today (the summary prints the counts)

_TF_PREFIX = re.compile(r"^\{\{function_node [^}]*\}\}\s*")
_TF_SUFFIX = re.compile(r"\s*\[Op:[^\]]*\](\s*name:.*)?$", re.S)
# TF's kernels prefix some texts with their C++ class ("Conv2DCustomBackpropFilter: ",
# "DepthwiseConv2DBackpropInput: "), which differs between TF's own CPU, oneDNN and GPU
# kernels for one op, so no suite matches it.
_TF_LABEL = re.compile(r"^(Conv2D|DepthwiseConv2D)\w*: ")


def tf_text(message):
    text = _TF_SUFFIX.sub("", _TF_PREFIX.sub("", message.strip()))
    return _TF_LABEL.sub("", text)


def why_not_compared(case_id, tf_result):
    """None when the case is compared, else the reason."""
    if tf_result.get("outcome") in ("crashed", "timeout"):
        return f"TF {tf_result['outcome']}"
    if tf_result.get("outcome") != "error":
        return "TF returns a result"
    if tf_result["class"] not in TF_ERROR_CLASSES:
        return f"TF raises {tf_result['class']} before its kernel"
    message = tf_result["message"]
    for texts, reason in ((TF_CPU_LIMITATIONS, "TF's CPU kernel limitation"),
                          (TF_WRONG_ARGUMENT, "TF's text names the wrong argument")):
        if any(t in message for t in texts):
            return reason
    if case_id in TF_OVERFLOWS:
        return "TF's size arithmetic overflows"
    return None


@pytest.fixture(scope="module")
def tf_runner():
    yield from isolated_runner(TF_ENABLE_ONEDNN_OPTS="0")


OUTCOMES = {}   # case id -> "compared" or the reason it was not


@pytest.mark.parametrize("case_id", COMPARED_CASES)
def test_error_text_matches_tf(tf_runner, case_id):
    theirs = tf_runner.call(bad_inputs.run_case, case_id, "eager", True)
    reason = why_not_compared(case_id, theirs)
    OUTCOMES[case_id] = reason or "compared"
    if reason:
        pytest.skip(reason)
    ours = tf_runner.call(bad_inputs.run_case, case_id, "eager", False)
    assert ours.get("outcome") == "error", f"[{case_id}] TF raised, ours did not: {ours}"
    expected = tf_text(theirs["message"])
    assert ours["class"] == theirs["class"], (
        f"[{case_id}] TF raises {theirs['class']} ({expected!r}), ours {ours['class']}: "
        f"{ours['message'][:600]}")
    assert expected in ours["message"], (
        f"[{case_id}] our message lacks TF's text {expected!r}: {ours['message'][:600]}")


def test_error_text_summary(capsys):
    """How many cases were compared, and why the others were not (printed)."""
    if len(OUTCOMES) < len(COMPARED_CASES):
        pytest.skip("runs after the per-case tests (run the whole file)")
    counts = {}
    for reason in OUTCOMES.values():
        counts[reason] = counts.get(reason, 0) + 1
    line = ", ".join(f"{n} {r}" for r, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    with capsys.disabled():
        print(f"\nerror texts vs TF's built-ins: {len(OUTCOMES)} bad-input cases: {line}")
    assert counts.get("compared", 0) >= MIN_COMPARED, counts
    for case_id in TF_OVERFLOWS:
        assert case_id in bad_inputs.CASES_BY_ID, f"{case_id}: renamed? (TF_OVERFLOWS)"
