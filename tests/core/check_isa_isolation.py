"""Checks that the per-ISA kernel variants stay apart (see tf_ops/cpu/isa.h).

    python3 tests/core/check_isa_isolation.py BINARY [build/isa/kernels_<isa>.o ...]

BINARY is anything linked from the variants (a core test binary or the op library).
Checks, with binutils (nm, readelf, objdump):
  1. each variant object defines no global symbol outside namespace cpu::<isa> and has
     no COMDAT group left (so the final link cannot swap in another variant's copy of an
     Eigen / std template);
  2. the baseline object contains no AVX instruction at all, the avx2 one no AVX-512;
  3. in BINARY, every function reachable through direct calls and jumps from a variant's
     entry points uses only that variant's instructions (baseline: no VEX/EVEX, no ymm /
     zmm; avx2: no zmm / mask registers), and the avx512 entries do reach zmm code.
Exits nonzero, naming the offending symbol and instruction, on any violation.
"""
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "build_tools"))
import sources  # noqa: E402  (build_tools/sources.bzl, the build's list of ISA levels)

ISAS = tuple(sources.lists()["ISA_LEVELS"])
# The C++ list of levels (tf_ops/cpu/isa.h) and the kernels of the variant table.
CPP_ISAS = tuple(re.findall(r"X\((\w+), k\w+,", open(os.path.join(ROOT, "tf_ops/cpu/isa.h")).read()))
KERNELS = sorted(set(re.findall(r"^TCB_CPU_VARIANT\((?:[^,]+,){7}\s*(\w+),",
                                open(os.path.join(ROOT, "tf_ops/cpu/variants.def")).read(), re.M)))
PREFIX = {isa: f"_ZN16tf_conv_backprop3cpu{len(isa)}{isa}" for isa in ISAS}
# Entry points: every table kernel, the layout helpers and the table itself.
ENTRY_RE = re.compile(r"_ZN16tf_conv_backprop3cpu\d+(" + "|".join(ISAS) + r")\d+("
                      + "|".join(KERNELS + ["ConvertElements", "TransposeConvert"]) + r")I"
                      r"|_ZN16tf_conv_backprop3cpu\d+(" + "|".join(ISAS) + r")7KernelsEv")

FUNC_RE = re.compile(r"^([0-9a-f]+) <(.+)>:$")
INSN_RE = re.compile(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$")
TARGET_RE = re.compile(r"^([0-9a-f]+) <")


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def violation(isa, mnemonic, operands):
    """Why this instruction is not allowed in `isa` code, or None."""
    if isa == "baseline":
        if mnemonic.startswith("v") or "%ymm" in operands or "%zmm" in operands:
            return "AVX instruction"
    elif isa == "avx2":
        if "%zmm" in operands or re.search(r"%k[0-7]", operands) or "{" in operands:
            return "AVX-512 instruction"
    return None


def disassemble(path):
    """{start address: (name, [(address, mnemonic, operands)])} for every function."""
    funcs, current = {}, None
    out = run("objdump", "-d", "--no-show-raw-insn", "-w", path)
    for line in out.splitlines():
        m = FUNC_RE.match(line)
        if m:
            current = (m.group(2), [])
            funcs[int(m.group(1), 16)] = current
            continue
        m = INSN_RE.match(line)
        if m and current is not None:
            current[1].append((int(m.group(1), 16), m.group(2), m.group(3)))
    return funcs


def check_object(isa, path, errors):
    for line in run("nm", "--defined-only", path).splitlines():
        addr, kind, name = line.split(maxsplit=2)
        if kind.isupper() or kind == "u":
            if not name.startswith(PREFIX[isa]):
                errors.append(f"{path}: global symbol outside cpu::{isa}: {name} ({kind})")
    if "COMDAT" in run("readelf", "-g", path):
        errors.append(f"{path}: COMDAT groups left (the final link may merge them)")
    for start, (name, insns) in disassemble(path).items():
        for addr, mnemonic, operands in insns:
            why = violation(isa, mnemonic, operands)
            if why:
                errors.append(f"{path}: {why} in {name}: {mnemonic} {operands}")
                break


def check_binary(path, errors):
    funcs = disassemble(path)
    starts = sorted(funcs)

    def containing(addr):
        lo, hi = 0, len(starts) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if starts[mid] <= addr:
                lo = mid + 1
            else:
                hi = mid - 1
        return starts[hi] if hi >= 0 else None

    entries = collections.defaultdict(list)
    for start, (name, _) in funcs.items():
        m = ENTRY_RE.match(name)
        if m:
            entries[m.group(1) or m.group(3)].append(start)
    for isa in ISAS:
        if not entries[isa]:
            errors.append(f"{path}: no entry points of the {isa} variant found")
            continue
        seen, todo, uses_zmm = set(entries[isa]), list(entries[isa]), False
        while todo:
            start = todo.pop()
            name, insns = funcs[start]
            if name.endswith("@plt"):
                continue  # the C/C++ runtime (memcpy, operator new): not ours
            for addr, mnemonic, operands in insns:
                uses_zmm |= "%zmm" in operands
                why = violation(isa, mnemonic, operands)
                if why:
                    errors.append(f"{path}: {isa} entry reaches {why} in {name}: "
                                  f"{mnemonic} {operands}")
                    break
                if mnemonic.startswith(("call", "jmp", "j")):
                    t = TARGET_RE.match(operands)
                    if t:
                        target = containing(int(t.group(1), 16))
                        if target is not None and target not in seen:
                            seen.add(target)
                            todo.append(target)
        print(f"{path}: {isa}: {len(entries[isa])} entry points, {len(seen)} functions "
              f"reachable, zmm used: {uses_zmm}")
        if isa == "avx512" and not uses_zmm:
            errors.append(f"{path}: the avx512 variant never uses zmm registers")


def main(argv):
    if ISAS != CPP_ISAS:
        raise SystemExit(f"ISA levels differ: build_tools/sources.bzl {ISAS}, tf_ops/cpu/isa.h {CPP_ISAS}")
    print(f"ISA levels {', '.join(ISAS)}; {len(KERNELS)} table kernels")
    if len(argv) < 2:
        raise SystemExit(__doc__)
    errors = []
    for obj in argv[2:]:
        isa = next((i for i in ISAS if obj.endswith(f"kernels_{i}.o")), None)
        if isa is None:
            raise SystemExit(f"cannot tell the ISA of {obj} (expected kernels_<isa>.o)")
        check_object(isa, obj, errors)
    check_binary(argv[1], errors)
    for e in errors[:50]:
        print("FAIL:", e)
    print("ISA isolation:", "FAILED" if errors else "ok")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
