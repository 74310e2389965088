"""Where the time of chosen benchmark cases goes, on a GPU machine, after
`tests/core/gpu_check.py` built its library (build/gpu_check):

    python3 tests/core/gpu_profile.py [--ncu] CASE...
    CASE = op:dtype:part of a layer label, e.g. conv2d_filter:float16:256->256 @14

For each case: the engine's kernels and their mean times (PyTorch's profiler, so it
works where hardware counters do not), and with --ncu, Nsight Compute's
speed-of-light, occupancy, memory and warp-state sections for each of our kernels
(`ncu --clock-control none`: the clocks stay as they are). One prepared command for
a borrowed GPU's few minutes; nothing here is part of the tests.
"""
import argparse
import collections
import ctypes
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_check  # noqa: E402  (its op table, layers, cases and library path)


def find_case(spec):
    op, dtype, label = spec.split(":", 2)
    layers = [l for l in gpu_check.LAYERS if label in l.label]
    specs = [s for s in gpu_check.ops.OPS if s.key == op]
    if len(layers) != 1 or len(specs) != 1:
        raise SystemExit(f"{spec!r}: {len(specs)} ops and {len(layers)} layers match (want one each)")
    return specs[0], dtype, layers[0]


def load(torch):
    torch.cuda.init()
    lib = ctypes.CDLL(gpu_check.LIBRARY)
    lib.tcb_cuda_run.restype = ctypes.c_int
    return lib


def kernel_times(torch, lib, spec, dtype, layer, calls=20):
    ours, _, _, macs = gpu_check.make_case(torch, lib, layer, spec, dtype, "cuda")
    for _ in range(3):
        ours()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(calls):
            ours()
        torch.cuda.synchronize()
    total = collections.defaultdict(float)
    count = collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            count[e.name] += 1
    print(f"{spec.key} {dtype} {layer.label}: {2 * macs / 1e9:.2f} GFLOP a call")
    whole = sum(total.values()) / calls
    for name in sorted(total, key=total.get, reverse=True):
        short = name.split("(")[0][:110]
        print(f"  {total[name] / calls:9.1f} us/call  x{count[name] // calls}  {short}")
    print(f"  {whole:9.1f} us/call in all, {2 * macs / whole / 1e6:.0f} GFLOP/s", flush=True)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--ncu", action="store_true", help="also run Nsight Compute on each case")
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)  # ncu's child
    args = parser.parse_args(argv[1:])
    import torch  # pylint: disable=import-outside-toplevel
    lib = load(torch)
    torch.manual_seed(0)
    for spec_text in args.cases:
        spec, dtype, layer = find_case(spec_text)
        if args.once:
            ours, _, _, _ = gpu_check.make_case(torch, lib, layer, spec, dtype, "cuda")
            for _ in range(4):
                ours()
            torch.cuda.synchronize()
            continue
        kernel_times(torch, lib, spec, dtype, layer)
        ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
        if args.ncu and os.access(ncu, os.X_OK):
            cmd = [ncu, "--clock-control", "none", "--launch-skip", "3", "--launch-count", "2",
                   "-k", "regex:Conv2D|SumSplits",
                   "--section", "SpeedOfLight", "--section", "Occupancy", "--section", "LaunchStats",
                   "--section", "MemoryWorkloadAnalysis", "--section", "WarpStateStats",
                   sys.executable, os.path.abspath(__file__), "--once", spec_text]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
            lines = [l for l in (res.stdout + res.stderr).splitlines()
                     if l.strip() and not l.startswith("==PROF==") and "----" not in l]
            print("\n".join(lines[-400:]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
