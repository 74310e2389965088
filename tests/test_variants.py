"""The CPU kernel-variant table as the Python side sees it: `info`'s table, the run
record the benchmark reads, and TF_CONV_BACKPROP_CPU_KERNEL (in a child process, since
the library reads it once)."""
import json
import sys

import numpy as np
import pytest
import tensorflow as tf

import tf_conv_backprop as tcb
from tf_conv_backprop import _ops, _variants
from child_process import run_child


def test_table_rows():
    rows = _variants.table()
    names = [r["name"] for r in rows]
    assert len(names) == len(set(names)) >= 4 * 3
    ops = {op.tf_op_name for op in _ops.OPS}
    for r in rows:
        assert r["op"] in ops, r
        assert r["isa"] in ("baseline", "avx2", "avx512"), r
        spec = next(op for op in _ops.OPS if op.tf_op_name == r["op"])
        assert set(r["dtypes"].split(",")) <= set(spec.dtypes), r
        assert set(r["layouts"].split(",")) <= {"NHWC", "NCHW"}, r
        assert r["why"], f"{r['name']}: every row says what earned it"
    # Every op ends with a variant that runs anywhere (the last one never declines).
    for op in _ops.OPS:
        last = [r for r in rows if r["op"] == op.tf_op_name][-1]
        assert last["isa"] == "baseline" and not last["declines"], last
    assert _variants.active_isa() in ("baseline", "avx2", "avx512")


def _conv2d_input_1x1():
    rng = np.random.default_rng(0)
    w = tf.constant(rng.standard_normal((1, 1, 8, 4)), tf.float32)
    dy = tf.constant(rng.standard_normal((2, 5, 5, 4)), tf.float32)
    ours = tcb.compat.v1.nn.conv2d_backprop_input([2, 5, 5, 8], w, dy, [1, 1, 1, 1], "VALID")
    ref = tf.compat.v1.nn.conv2d_backprop_input([2, 5, 5, 8], w, dy, [1, 1, 1, 1], "VALID")
    return float(np.max(np.abs(ours.numpy() - ref.numpy())))


@pytest.mark.parametrize("op", [op.key for op in _ops.OPS])
def test_last_run_names_a_variant_of_the_op(op):
    spec = _ops.BY_KEY[op]
    rng = np.random.default_rng(1)
    x = tf.constant(rng.standard_normal((1, 6, 6, 4)), tf.float32)
    w = tf.constant(rng.standard_normal((3, 3, 4, 4 if not spec.depthwise else 1)), tf.float32)
    dy = tf.constant(rng.standard_normal((1, 6, 6, 4)), tf.float32)
    fn = getattr(tcb.nn, spec.names[0]) if hasattr(tcb.nn, spec.names[0]) \
        else getattr(tcb.compat.v1.nn, spec.names[0])
    if spec.computes == "input":
        fn([1, 6, 6, 4], w, dy, [1, 1, 1, 1], "SAME")
    else:
        fn(x, list(w.shape), dy, [1, 1, 1, 1], "SAME")
    ran = _variants.last_run(op)
    names = {r["name"] for r in _variants.table() if r["op"] == spec.tf_op_name}
    assert ran in names, (ran, names)


def test_forced_variant_runs_where_it_applies():
    """At AVX2 a 1x1 stride-1 input gradient with input channels in whole vectors normally
    takes the direct tiles; forced, the im2col GEMM runs it, with TF's result."""
    result = run_child(__file__, "forced", extra_env={
        _variants.FORCE_ENV: "conv2d_input_im2col_gemm", "TF_CONV_BACKPROP_ISA": "avx2"})
    assert result["forced"] == "conv2d_input_im2col_gemm"
    assert result["ran"] == "conv2d_input_im2col_gemm"
    assert result["err"] < 1e-5
    unforced = run_child(__file__, "forced", extra_env={"TF_CONV_BACKPROP_ISA": "avx2"},
                         drop_env=(_variants.FORCE_ENV,))
    assert unforced["forced"] == ""
    assert unforced["ran"] == "conv2d_input_direct"


def _child(mode):
    assert mode == "forced"
    err = _conv2d_input_1x1()
    print("RESULT " + json.dumps({"forced": _variants.forced(), "err": err,
                                  "ran": _variants.last_run("conv2d_input")}))


if __name__ == "__main__":
    _child(sys.argv[1])
