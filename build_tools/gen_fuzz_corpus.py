"""Writes the seed corpus of the libFuzzer target tests/core/fuzz_geometry.cc.

One binary file per case of tests/bad_inputs.py (S1-S16 from TF's security advisories,
F1-F10 from fuzzer crash reports, N1-N5 from our own fuzzing of TF, and the generated
bad-input classes) that can be expressed at the core's level, plus a grid of small valid
geometries (every op, format, padding, strides, dilations, empty dimensions) so the
fuzzer starts from inputs that reach the kernels. Cases rejected by TF's Python
layer before any op runs (dtype mismatches, strides=None, ...) have no core-level
form and are skipped; those whose values do not fit int64 likewise.

    .venv/bin/python build_tools/gen_fuzz_corpus.py [--out tests/core/fuzz_corpus]

Input format (decoded by Decode() in fuzz_geometry.cc; keep the two in sync):
    op         1 byte  % 4: Conv2DBackpropInput, Conv2DBackpropFilter,
                            DepthwiseConv2dNativeBackpropInput, ...BackpropFilter
    format     1 byte  % 8: index into FORMATS
    padding    1 byte  % 8: index into PADDINGS
    strides    list: 1 length byte (% 9), then values
    dilations  list: 1 length byte (% 9), then values
    explicit_paddings  list: 1 length byte (% 11), then values
    sizes      1 byte % 3 = rank of the int32 sizes tensor; rank 0: one value;
               rank 1: 1 byte (% 16) length, values; rank 2: 1 byte (% 4) and 1 byte
               (% 8) dims, then their product of values (each cast to int32)
    data       1 byte % 7 = rank, then that many values: the filter's shape for
               input gradients, the input's for filter gradients
    dy         1 byte % 7 = rank, then values: out_backprop's shape
    run        1 byte: bits 0-1 ISA (0 baseline, 1 avx2, 2 avx512, 3 best),
               bits 2-4 shards - 1 of the serial CpuContext
    seed       1 byte: tensor values
A value is a tag byte b: b < 0xB0 -> b % 16; 0xB0 <= b < 0xF0 -> INTERESTING[b - 0xB0];
b >= 0xF0 -> the next 8 bytes, little-endian two's complement int64.
"""
import argparse
import hashlib
import itertools
import os
import struct
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_ROOT, "tests"))

import bad_inputs  # noqa: E402  (needs only NumPy)

OPS = bad_inputs.OPS  # the op table's order, which is the core's OpKind order
FORMATS = ("NHWC", "NCHW", "NHWC", "NCHW", "NCWH", "", "nhwc", "NCHW\0x")
PADDINGS = ("SAME", "VALID", "EXPLICIT", "VALID", "SAME", "FOO", "", "same")
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1
# Same order as kInteresting in fuzz_geometry.cc.
INTERESTING = (
    -1, -2, -4, -5, -1024, INT32_MIN, INT32_MAX, 2**31, 2**32, 2**40, 2**62, 2**62 - 2,
    INT64_MAX, INT64_MIN, 1879048192, 999999999, 999999998, 65534, 16, 18, 20, 24, 29, 32,
    37, 48, 49, 52, 64, 65, 66, 77, 89, 93, 1024, 2**20, 2**31 - 2, INT64_MAX - 1,
)


class Unrepresentable(Exception):
    pass


def value(v):
    v = int(v)
    if 0 <= v < 16:
        return bytes([v])
    if v in INTERESTING:
        return bytes([0xB0 + INTERESTING.index(v)])
    if not INT64_MIN <= v <= INT64_MAX:
        raise Unrepresentable(f"{v} does not fit int64")
    return bytes([0xF0]) + struct.pack("<q", v)


def value_list(values, max_len):
    values = list(values)
    if len(values) > max_len:
        raise Unrepresentable(f"list of {len(values)} > {max_len}")
    return bytes([len(values)]) + b"".join(value(v) for v in values)


def shape(dims):
    dims = list(dims)
    if len(dims) > 6:
        raise Unrepresentable("rank > 6")
    return bytes([len(dims)]) + b"".join(value(d) for d in dims)


def sizes_field(sizes):
    if isinstance(sizes, int):
        return bytes([0]) + value(_int32(sizes))
    sizes = list(sizes)
    if sizes and isinstance(sizes[0], (list, tuple)):
        rows, cols = len(sizes), len(sizes[0])
        if rows >= 4 or cols >= 8 or any(len(r) != cols for r in sizes):
            raise Unrepresentable("rank-2 sizes too large")
        return bytes([2, rows, cols]) + b"".join(value(_int32(v)) for r in sizes for v in r)
    if len(sizes) >= 16:
        raise Unrepresentable("sizes longer than 15")
    return bytes([1, len(sizes)]) + b"".join(value(_int32(v)) for v in sizes)


def _int32(v):
    """The int32 the sizes tensor would hold (TF refuses larger Python ints)."""
    if not INT32_MIN <= int(v) <= INT32_MAX:
        raise Unrepresentable(f"sizes value {v} does not fit int32")
    return int(v)


def encode(op, data_format, padding, strides, dilations, explicit, sizes, data_shape, dy_shape,
           run=3, seed=0):
    if data_format not in FORMATS:
        raise Unrepresentable(f"format {data_format!r}")
    if padding not in PADDINGS:
        raise Unrepresentable(f"padding {padding!r}")
    return (bytes([OPS.index(op), FORMATS.index(data_format), PADDINGS.index(padding)])
            + value_list(strides, 8) + value_list(dilations, 8) + value_list(explicit, 10)
            + sizes_field(sizes) + shape(data_shape) + shape(dy_shape)
            + bytes([run & 0xFF, seed & 0xFF]))


def from_bad_input(case, index):
    """The core-level form of one bad_inputs.Case: padding pairs become EXPLICIT."""
    if not isinstance(case.strides, (list, tuple)) or not isinstance(case.dilations, (list, tuple)):
        raise Unrepresentable("strides/dilations not a list")
    if case.dtype not in ("float16", "bfloat16", "float32", "float64") or \
            (case.dy_dtype and case.dy_dtype != case.dtype) or case.sizes_dtype != "int32":
        raise Unrepresentable("rejected by TF's type checks before the kernel")
    if case.pass_filters_too:
        raise Unrepresentable("a Python wrapper error")
    padding, explicit = case.padding, list(case.explicit_paddings)
    if isinstance(padding, (list, tuple)):
        if len(padding) != 4 or any(not isinstance(p, (list, tuple)) or len(p) != 2 for p in padding):
            raise Unrepresentable("a Python wrapper error (padding list)")
        padding, explicit = "EXPLICIT", [int(v) for p in padding for v in p]
    elif padding == "EXPLICIT" and not case.raw:
        raise Unrepresentable("a Python wrapper error ('EXPLICIT' string)")
    run = (index % 4) | ((index % 8) << 2)
    return encode(case.op, case.data_format, padding, case.strides, case.dilations, explicit,
                  case.sizes, case.data_shape, case.dy_shape, run=run, seed=index)


def valid_grid():
    """Small valid geometries covering every op, format, padding and window option."""
    out = []
    options = itertools.product(
        OPS, ("NHWC", "NCHW"), ("SAME", "VALID", "EXPLICIT"),
        ((1, 1, 1, 1), (2, 1, 1, 2), (1, 3, 2, 1)),  # (sh, sw, dh, dw)
    )
    for i, (op, fmt, padding, (sh, sw, dh, dw)) in enumerate(options):
        pads = (1, 0, 2, 1) if padding == "EXPLICIT" else (0, 0, 0, 0)
        h, w = 5 + i % 3, 4 + i % 2
        kh, kw = 1 + i % 3, 2
        if padding == "VALID" and ((kh - 1) * dh + 1 > h or (kw - 1) * dw + 1 > w):
            kh = kw = 1
        geo = bad_inputs.geometry(op, fmt=fmt, n=1 + i % 2, h=h, w=w, c=1 + i % 4, kh=kh, kw=kw,
                                  m=1 + i % 3, sh=sh, sw=sw, dh=dh, dw=dw,
                                  padding=padding if padding != "EXPLICIT" else "EXPLICIT",
                                  pads=pads)
        explicit = []
        if padding == "EXPLICIT":
            explicit = [v for p in geo["padding"] for v in p]
        run = (i % 4) | ((i % 8) << 2)
        out.append((f"valid_{i:03d}_{op}_{fmt}_{padding}",
                    encode(op, fmt, padding, geo["strides"], geo["dilations"], explicit,
                           geo["sizes"], geo["data_shape"], geo["dy_shape"], run=run, seed=i)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(_ROOT, "tests", "core", "fuzz_corpus"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for old in os.listdir(args.out):
        if old.endswith(".bin"):
            os.remove(os.path.join(args.out, old))
    written, skipped = 0, []
    entries = []
    for i, case in enumerate(bad_inputs.CASES):
        try:
            entries.append((case.id, from_bad_input(case, i)))
        except Unrepresentable as e:
            skipped.append(f"{case.id}: {e}")
    entries += valid_grid()
    seen = set()
    for name, data in entries:
        digest = hashlib.sha1(data).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        with open(os.path.join(args.out, f"{name}.bin"), "wb") as f:
            f.write(data)
        written += 1
    print(f"wrote {written} corpus files to {os.path.relpath(args.out, _ROOT)} "
          f"({len(bad_inputs.CASES) - len(skipped)} of {len(bad_inputs.CASES)} bad-input cases, "
          f"{len(valid_grid())} valid geometries, duplicates dropped); skipped {len(skipped)}:")
    for s in skipped:
        print("  " + s)


if __name__ == "__main__":
    main()
