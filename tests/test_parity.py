"""Parity over the configuration matrix: op x dtype x layout x padding x (dilation
1, > 1), several random geometries per cell. Every case is checked against the
NumPy float64 reference, and against TF's built-in wherever TF's CPU kernel
accepts the case (and computes the right thing)."""
import itertools

import numpy as np
import pytest
import tensorflow as tf

from cases import (DTYPES, EMPTY, FORMATS, PADDINGS, empty_case, make_arrays, rel_error, run_ours,
                   run_reference, run_tf, sample_case, tf_is_trusted, tf_result_is_garbage,
                   within)
from tf_conv_backprop._ops import OPS

CASES_PER_CELL = 3
CELLS = list(itertools.product([op.key for op in OPS], DTYPES, FORMATS, PADDINGS, (False, True)))
PARAMS = [(cell_index * 100 + i, *cell) for cell_index, cell in enumerate(CELLS)
          for i in range(CASES_PER_CELL)]
# Errors with which TF's built-in CPU kernels turn down a configuration they lack.
TF_REJECTS = (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError, tf.errors.AbortedError)


@pytest.mark.parametrize("seed,op,dtype,data_format,padding,dilated", PARAMS)
def test_parity(seed, op, dtype, data_format, padding, dilated):
    case = sample_case(op, dtype, data_format, padding, dilated, seed)
    arrays = make_arrays(case)
    ours = run_ours(case, arrays)
    reference = run_reference(case, arrays)
    err = rel_error(ours, reference)
    assert within(err, dtype), f"{case}: relative error vs reference {err}"
    if not tf_is_trusted(case):
        return
    try:
        theirs = run_tf(case, arrays)
    except TF_REJECTS:
        return  # TF's CPU kernel lacks this configuration; the reference still judged it
    if tf_result_is_garbage(theirs, reference):
        return
    err_tf = rel_error(ours, theirs)
    assert within(err_tf, dtype, factor=2), f"{case}: relative difference vs TF {err_tf}"


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("op", [op.key for op in OPS])
@pytest.mark.parametrize("what,overrides", EMPTY, ids=[e[0] for e in EMPTY])
def test_empty_tensors(what, overrides, op, data_format):
    """An empty input, filter or out_backprop gives a zero gradient of the right shape."""
    case = empty_case(op, data_format, overrides)
    arrays = make_arrays(case)
    ours = run_ours(case, arrays)
    expected = case.input_shape if case.spec.computes == "input" else case.filter_shape
    assert list(ours.shape) == expected, f"{case}"
    assert not np.any(ours), f"{case}: expected zeros"
    np.testing.assert_array_equal(ours, run_reference(case, arrays))


def test_matrix_size():
    assert len(PARAMS) >= 500
