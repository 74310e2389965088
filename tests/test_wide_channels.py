"""Channel counts in whole SIMD vectors (16, 32, 64) and wide rows: the shapes that
take the AVX-512 direct conv2d kernels (float, double, and the bfloat16 input gradient
where the CPU has AVX512_BF16) and the planar NCHW depthwise kernels. test_parity's
small random shapes do not reach them. Checked against the reference and TF."""
import itertools
import random

import pytest

from cases import (DTYPES, FORMATS, PADDINGS, Case, check_against_oracles, make_arrays,
                   relative_error, run_ours, run_reference, within)
from tf_conv_backprop._ops import BY_KEY, OPS

SEEDS = (0, 1)


def wide_case(op, dtype, data_format, padding, seed):
    rng = random.Random(f"{op}-{dtype}-{data_format}-{padding}-{seed}")
    depthwise = BY_KEY[op].depthwise
    while True:
        strides = rng.choice([(1, 1), (1, 1), (2, 2)])
        dilations = rng.choice([(1, 1), (2, 2)]) if strides == (1, 1) else (1, 1)
        case = Case(
            op=op, dtype=dtype, data_format=data_format, padding=padding,
            batch=rng.randint(1, 2), in_rows=rng.randint(3, 9),
            # depthwise: rows of >= 48 columns take the planar NCHW kernels
            in_cols=rng.choice([rng.randint(3, 10), rng.randint(48, 56)]) if depthwise
            else rng.randint(3, 10),
            in_depth=rng.choice([16, 32]) if depthwise else rng.choice([16, 32, 64]),
            filter_rows=rng.choice([1, 3]), filter_cols=rng.choice([1, 3]),
            out_channels=rng.choice([1, 2]) if depthwise else rng.choice([16, 32, 48, 64]),
            strides=strides, dilations=dilations,
            pads=tuple(rng.randint(0, 2) for _ in range(4)) if padding == "EXPLICIT" else (0, 0, 0, 0),
            seed=seed)
        try:
            if min(case.out_size()) >= 1:
                return case
        except ValueError:  # the dilated filter does not fit
            pass


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [op.key for op in OPS])
def test_wide_channels(op, dtype, data_format, padding, seed):
    check_against_oracles(wide_case(op, dtype, data_format, padding, seed))


def test_cases_reach_the_wide_kernels():
    """The sampler really produces the shapes this file is for."""
    cases = [wide_case(op, "float32", fmt, pad, seed)
             for op, fmt, pad, seed in itertools.product([o.key for o in OPS], FORMATS, PADDINGS, SEEDS)]
    conv = [c for c in cases if not c.spec.depthwise]
    assert all(c.in_depth % 16 == 0 and c.out_channels % 16 == 0 for c in conv)
    assert any(c.strides == (1, 1) for c in conv)
    planar = [c for c in cases if c.spec.depthwise and c.data_format == "NCHW"
              and (c.out_channels > 1 or (c.strides == (1, 1) and c.out_size()[1] >= 48))]
    assert planar


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows,cols,cin,cout", [(13, 7, 32, 48), (8, 8, 64, 16), (14, 14, 16, 64),
                                                (1, 3, 16, 16), (9, 11, 48, 32)])
def test_pointwise_nchw_input(rows, cols, cin, cout, dtype):
    """NCHW 1x1 input gradient as a GEMM per image: full pixel chunks, single vectors
    and the last few pixels of an image."""
    case = Case(op="conv2d_input", dtype=dtype, data_format="NCHW", padding="VALID", batch=2,
                in_rows=rows, in_cols=cols, in_depth=cin, filter_rows=1, filter_cols=1,
                out_channels=cout)
    arrays = make_arrays(case)
    err = relative_error(run_ours(case, arrays), run_reference(case, arrays))
    assert within(err, case), f"{case}: relative error vs reference {err}"
