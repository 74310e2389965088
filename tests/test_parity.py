"""Parity over the configuration matrix: op x dtype x layout x padding x (dilation
1, > 1), several random geometries per cell. Every case is checked against the
NumPy float64 reference, and against TF's built-in wherever TF's CPU kernel
accepts the case (and computes the right thing)."""
import itertools

import numpy as np
import pytest

from cases import (DTYPES, EMPTY, FORMATS, PADDINGS, check_against_oracles, empty_case,
                   make_arrays, run_ours, run_reference, sample_case)
from tf_conv_backprop._ops import OPS

CASES_PER_CELL = 3
CELLS = list(itertools.product([op.key for op in OPS], DTYPES, FORMATS, PADDINGS, (False, True)))
PARAMS = [(cell_index * 100 + i, *cell) for cell_index, cell in enumerate(CELLS)
          for i in range(CASES_PER_CELL)]


@pytest.mark.parametrize("seed,op,dtype,data_format,padding,dilated", PARAMS)
def test_parity(seed, op, dtype, data_format, padding, dilated):
    check_against_oracles(sample_case(op, dtype, data_format, padding, dilated, seed))


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
