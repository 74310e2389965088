"""Channel counts in whole SIMD vectors (16, 32, 64) and wide rows: the shapes that
take the AVX-512 direct conv2d kernels (float, double, and the bfloat16 input gradient
where the CPU has AVX512_BF16) and the planar NCHW depthwise kernels. test_parity's
small random shapes do not reach them. Checked against the reference and TF."""
import itertools
import random

import numpy as np
import pytest

from cases import (DTYPES, FORMATS, PADDINGS, Case, check_against_oracles, make_arrays,
                   relative_error, run_ours, run_reference, run_tf, within)
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


# Dense input gradients with a batch of 4 or more and rows of at most 16 run as image
# tiles (one dx pixel of several images per tile, each pixel with its own taps); a
# filter past 512 KiB (3x3 256->256) is packed block by block by each thread.
# (batch, rows, cols, depth, strides, dilations, padding, pads)
IMAGE_TILE_GEOMETRIES = (
    (4, 7, 7, 64, (1, 1), (1, 1), "SAME", (0, 0, 0, 0)),
    (5, 9, 14, 32, (2, 2), (1, 1), "VALID", (0, 0, 0, 0)),
    (6, 16, 11, 32, (1, 2), (2, 1), "EXPLICIT", (1, 2, 0, 1)),
    (4, 5, 7, 256, (1, 1), (1, 1), "SAME", (0, 0, 0, 0)),
    (4, 6, 5, 256, (2, 1), (1, 2), "EXPLICIT", (2, 0, 1, 1)),
)


@pytest.mark.parametrize("geometry", IMAGE_TILE_GEOMETRIES, ids=lambda g: f"n{g[0]}-{g[1]}x{g[2]}x{g[3]}-{g[6]}")
@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_input_gradient_image_tiles(dtype, data_format, geometry):
    batch, rows, cols, depth, strides, dilations, padding, pads = geometry
    check_against_oracles(Case(op="conv2d_input", dtype=dtype, data_format=data_format, padding=padding,
                               batch=batch, in_rows=rows, in_cols=cols, in_depth=depth, filter_rows=3,
                               filter_cols=3, out_channels=depth, strides=strides, dilations=dilations,
                               pads=pads, seed=batch + depth))


@pytest.mark.parametrize("batch", [1, 4])
def test_input_gradient_with_an_infinite_weight_in_a_large_filter(batch):
    """A 2.4 MB filter is checked for inf / NaN before any tile runs (its blocks are
    packed later, by the threads): the non-finite values land exactly where the
    reference has them, as image tiles (batch 4) and as row tiles (batch 1)."""
    case = Case(op="conv2d_input", dtype="float32", data_format="NHWC", padding="SAME", batch=batch,
                in_rows=7, in_cols=7, in_depth=256, filter_rows=3, filter_cols=3, out_channels=256)
    arrays = make_arrays(case)
    arrays["filter"][2, 1, 200, 7] = np.inf
    ours, expected = run_ours(case, arrays), run_reference(case, arrays)
    finite = np.isfinite(expected)
    assert finite.any() and not finite.all()
    for kind in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(kind(ours), kind(expected))
    err = relative_error(ours[finite], expected[finite])
    assert within(err, case), f"{case}: relative error vs reference {err}"


# Filter gradients with a few input channels (< 8) and a filter row wider than 1 sum a
# filter row's (kw, ci) as one tap, over x rows copied with zero columns.
# (batch, rows, cols, in_depth, out_depth, kernel, strides, dilations, padding, pads)
FUSED_ROW_GEOMETRIES = (
    (2, 30, 30, 3, 64, (7, 7), (2, 2), (1, 1), "SAME", (0, 0, 0, 0)),
    (3, 13, 17, 1, 16, (3, 5), (1, 1), (1, 1), "VALID", (0, 0, 0, 0)),
    (2, 11, 9, 5, 32, (5, 3), (3, 2), (2, 1), "EXPLICIT", (2, 1, 3, 0)),
    (2, 8, 12, 2, 48, (3, 3), (1, 3), (1, 1), "EXPLICIT", (0, 2, 1, 4)),
)


@pytest.mark.parametrize("geometry", FUSED_ROW_GEOMETRIES, ids=lambda g: f"{g[3]}->{g[4]}-{g[5][0]}x{g[5][1]}-{g[8]}")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_filter_gradient_fused_filter_rows(dtype, geometry):
    batch, rows, cols, cin, cout, kernel, strides, dilations, padding, pads = geometry
    check_against_oracles(Case(op="conv2d_filter", dtype=dtype, data_format="NHWC", padding=padding,
                               batch=batch, in_rows=rows, in_cols=cols, in_depth=cin, filter_rows=kernel[0],
                               filter_cols=kernel[1], out_channels=cout, strides=strides, dilations=dilations,
                               pads=pads, seed=cin + cout))


def test_filter_gradient_fused_filter_rows_with_an_infinite_dy():
    """The copied x rows hold zero columns, which must not meet an inf in dy (0 * inf is
    NaN where TF has no term): such a call runs tap by tap. The inf sits in a corner of
    dy, where taps reach into the padding: inf / NaN land where TF's kernel has them (the
    padded float64 reference has NaN there)."""
    case = Case(op="conv2d_filter", dtype="float32", data_format="NHWC", padding="SAME", batch=2,
                in_rows=12, in_cols=12, in_depth=3, filter_rows=7, filter_cols=7, out_channels=32,
                strides=(2, 2))
    arrays = make_arrays(case)
    arrays["out_backprop"][1, 0, 0, 4] = np.inf
    ours, theirs = run_ours(case, arrays), run_tf(case, arrays)
    assert np.isinf(theirs).any() and not np.isnan(theirs).any()
    for kind in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(kind(ours), kind(theirs))
    expected = run_reference(case, arrays)
    finite = np.isfinite(theirs) & np.isfinite(expected)
    err = relative_error(ours[finite], expected[finite])
    assert within(err, case), f"{case}: relative error vs reference {err}"
