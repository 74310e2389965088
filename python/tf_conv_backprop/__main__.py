"""`python -m tf_conv_backprop info [--json]`: what is installed and what it can do.

Prints the package, TensorFlow and build-info versions (and whether they match),
the flags the library was built with, which kernels are registered on each device,
and the support matrix.

How kernels are found: TensorFlow has no public API that lists the kernels
registered for an op (its kernel registry is reachable only through private
modules). So each op is run once per dtype on each visible device, on a 1x1
problem, inside `tf.device(...)` with TF's default soft placement, and the device
the result lands on (`Tensor.device`) tells which kernel ran: a device without a
kernel for that op and dtype sends the op to the CPU. GPU kernels cannot be probed
without a visible GPU; the build info then says whether the library has any.

Exit status: 0 when the library loads and every op has its CPU kernels, else 1.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import tf_conv_backprop  # noqa: E402
from tf_conv_backprop import _loader, _variants  # noqa: E402
from tf_conv_backprop._ops import OPS  # noqa: E402

# Against TF 2.21's built-in CPU kernels (x86-64 wheel from PyPI); `make report`
# measures every cell. (configuration, TF built-in CPU, ours)
SUPPORT_MATRIX = (
    ("half, bfloat16, float32, float64; NHWC; SAME / VALID / EXPLICIT", "yes",
     "yes (half/bfloat16 accumulate in float)"),
    ("conv2d input gradient (conv2d_transpose) in int32", "NHWC only, no dilations",
     "yes, NCHW and dilations too (exact, wrapping around as TF's)"),
    ("conv2d gradients, NCHW", "float32, bfloat16 with oneDNN only; not EXPLICIT", "yes"),
    ("conv2d gradients, dilations > 1", "float32, bfloat16 with oneDNN only; not EXPLICIT",
     "yes"),
    ("depthwise gradients, NCHW or unequal strides", "float32, bfloat16 with oneDNN only",
     "yes"),
    ("depthwise gradients, dilations > 1", "ignores dilations: wrong numbers",
     "yes (the true gradient)"),
    ("empty tensors", "some return uninitialised memory", "zeros of the right shape"),
    ("malformed shapes / attributes", "several abort the process",
     "InvalidArgumentError naming the argument"),
    ("grouped convolution gradients (conv2d, groups > 1)", "no (GPU only)",
     "yes: CPU, GPU and XLA, every dtype and layout"),
)


def _device_kind(device_string):
    """'CPU' / 'GPU' from a full device name like /job:localhost/.../device:GPU:0."""
    return device_string.rsplit("device:", 1)[-1].split(":")[0] if device_string else "?"


def _probe_args(spec, dtype):
    """The smallest valid call: 1x2x2x1 input, 1x1x1x1 filter, stride 1, VALID."""
    tensor = tf.ones([1, 2, 2, 1], dtype)
    weights = tf.ones([1, 1, 1, 1], dtype)
    if spec.computes == "input":
        return tf.constant([1, 2, 2, 1], tf.int32), weights, tensor
    return tensor, tf.constant([1, 1, 1, 1], tf.int32), tensor


def _probe_call(library, spec):
    """The generated op with the probe's attributes (stride 1, VALID, NHWC)."""
    op = getattr(library, spec.generated)
    extra = {"use_cudnn_on_gpu": True} if spec.use_cudnn_on_gpu else {}
    return lambda *args: op(*args, strides=[1, 1, 1, 1], padding="VALID", explicit_paddings=[],
                            data_format="NHWC", dilations=[1, 1, 1, 1], **extra)


def probe_kernels(library, devices):
    """{op name: {device: [dtype names whose kernel ran there]}}."""
    found = {}
    for spec in OPS:
        call = _probe_call(library, spec)
        per_device = found.setdefault(spec.op_name, {})
        for device in devices:
            kind = _device_kind(device)
            names = per_device.setdefault(kind, [])
            for dtype in spec.dtypes:
                try:
                    with tf.device(device):
                        out = call(*_probe_args(spec, dtype))
                except (tf.errors.OpError, TypeError, ValueError):
                    continue
                if _device_kind(out.device) == kind:
                    names.append(dtype)
    return found


def probe_xla(library):
    """{op name: dtype names that compile and run under tf.function(jit_compile=True)
    on the CPU} (XLA has no kernel registry to read either)."""
    found = {}
    for spec in OPS:
        compiled = tf.function(_probe_call(library, spec), jit_compile=True)
        names = found.setdefault(spec.op_name, [])
        for dtype in spec.dtypes:
            try:
                with tf.device("/CPU:0"):
                    compiled(*_probe_args(spec, dtype))
            except (tf.errors.OpError, TypeError, ValueError):
                continue
            names.append(dtype)
    return found


def gpu_numerics():
    """How the GPU kernels compute, with TF's TF32 setting as it is now."""
    tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    return {
        "tf32_enabled": tf32,
        "float32_conv2d": ("TF32 tensor cores (10-bit mantissa products, float sums)" if tf32
                           else "exact float32 (CUDA cores)")
                          + ", per tf.config.experimental.enable_tensor_float_32_execution, read at "
                            "each call; depthwise float32 is always exact",
        "half_bfloat16": "tensor cores (conv2d), float accumulation, rounded once",
        "deterministic": True,
        "determinism": "every GPU kernel reduces in a fixed order without atomics: bitwise "
                       "reproducible, so tf.config.experimental.enable_op_determinism() "
                       "needs nothing from us",
    }


def collect():
    """Everything `info` reports, as plain data."""
    info = _loader.build_info()
    path = _loader.library_path()
    devices = [d.name for d in tf.config.list_logical_devices()
               if _device_kind(d.name) in ("CPU", "GPU")]
    report = {
        "package": {"version": tf_conv_backprop.__version__,
                    "location": os.path.dirname(os.path.abspath(tf_conv_backprop.__file__)),
                    "library": path, "library_exists": os.path.exists(path)},
        "tensorflow": {"version": tf.__version__, "cxx11_abi": _loader.running_abi(),
                       "cuda_version": _loader.running_cuda_version(),
                       "compile_flags": tf.sysconfig.get_compile_flags(),
                       "link_flags": tf.sysconfig.get_link_flags(), "devices": devices},
        "build_info": info,
        "version_mismatches": [list(m) for m in _loader.version_mismatches(info)],
        "kernels": {}, "xla_kernels": {}, "xla_usable": None, "load_error": None,
        "cpu_variants": [], "active_isa": None, "forced_variant": None,
        "kernel_probe": "each op run per dtype on each visible device; Tensor.device "
                        "tells where it ran",
        "gpu_visible": any(_device_kind(d) == "GPU" for d in devices),
        "gpu_numerics": gpu_numerics(),
        "support_matrix": [dict(zip(("configuration", "tf_builtin_cpu", "ours"), row))
                           for row in SUPPORT_MATRIX],
    }
    try:
        library = tf_conv_backprop.load_library()
    except tf_conv_backprop.LibraryLoadError as e:
        report["load_error"] = str(e)
        return report
    report["kernels"] = probe_kernels(library, devices)
    report["xla_usable"] = _loader.xla_kernels_usable()
    report["xla_kernels"] = probe_xla(library)
    report["cpu_variants"] = _variants.table()
    report["active_isa"] = _variants.active_isa()
    report["forced_variant"] = _variants.forced()
    return report


def _flags(values):
    return " ".join(values) if values else "(not recorded)"


def render(report):
    lines = []
    add = lines.append
    pkg, tfi, info = report["package"], report["tensorflow"], report["build_info"]
    add(f"tf_conv_backprop {pkg['version']}  ({pkg['location']})")
    add(f"  op library:   {pkg['library']}"
        + ("" if pkg["library_exists"] else "  (MISSING: run `make build`)"))
    add("")
    add("Versions                 built against (build info)   running")
    rows = (("TensorFlow", info.get("tf_version"), tfi["version"]),
            ("C++11 ABI", info.get("cxx11_abi"), tfi["cxx11_abi"]),
            ("TF's CUDA", info.get("tf_cuda_version"), tfi["cuda_version"]))
    for name, built, running in rows:
        add(f"  {name:<22} {str(built if info else 'unknown'):<28} {running}")
    if not info:
        add("  (no _build_info.json next to the library: versions cannot be checked)")
    elif report["version_mismatches"]:
        for name, built, running in report["version_mismatches"]:
            add(f"  MISMATCH: {name} built {built}, running {running}. {_loader.REBUILD_HINT}")
    else:
        add("  match: the library was built for this TensorFlow")
    add("")
    add("Build")
    cuda = (f"yes, CUDA {info.get('cuda_version')}" if info.get("cuda_kernels")
            else "no (CPU-only build; GPU kernels come with the CUDA build)")
    add(f"  builder:       {info.get('builder', 'unknown')}")
    add(f"  compiler:      {info.get('compiler') or '(not recorded)'}")
    add(f"  flags:         {_flags(info.get('cxxflags'))}")
    add(f"  TF cflags:     {_flags(info.get('tf_compile_flags'))}")
    add(f"  TF lflags:     {_flags(info.get('tf_link_flags'))}")
    add(f"  CPU variants:  {_flags(info.get('cpu_isas'))} (best one picked at run time; "
        "TF_CONV_BACKPROP_ISA lowers it)")
    add(f"  GPU kernels:   {cuda}")
    numerics = report.get("gpu_numerics") or {}
    if numerics:
        add(f"  GPU float32:   {numerics['float32_conv2d']}")
        add(f"  GPU 16-bit:    {numerics['half_bfloat16']}")
        add(f"  determinism:   {numerics['determinism']}")
    add(f"  Python:        {info.get('python', 'unknown')} on {info.get('machine', 'unknown')}")
    add("")
    add(f"Registered kernels ({report['kernel_probe']})")
    if report["load_error"]:
        add("  the library did not load:")
        lines.extend("    " + line for line in report["load_error"].splitlines())
    else:
        add(f"  {'op':<50} {'CPU':<40} GPU")
        for op_name, per_device in report["kernels"].items():
            cpu = " ".join(per_device.get("CPU", [])) or "none"
            if report["gpu_visible"]:
                gpu = " ".join(per_device.get("GPU", [])) or "none"
            else:
                gpu = "(no GPU visible)"
            add(f"  {op_name:<50} {cpu:<40} {gpu}")
        add("")
        add("XLA kernels (each op compiled with tf.function(jit_compile=True) per dtype, on CPU)")
        if report["xla_usable"] is False:
            add(f"  NOT USABLE in this process: {_loader.XLA_IMPORT_ORDER_HINT}")
        for op_name, names in report["xla_kernels"].items():
            add(f"  {op_name:<50} {' '.join(names) or 'none'}")
        add("")
        add(f"CPU kernel variants (active ISA {report.get('active_isa')}; the first row of an "
            f"op that applies runs; {_variants.FORCE_ENV}=<name> puts one first: "
            f"{report.get('forced_variant') or 'unset'})")
        add(f"  {'variant':<38} {'dtypes':<33} {'layouts':<10} {'ISA':<9} why")
        for row in report.get("cpu_variants", []):
            isa = row["isa"] + ("+" + row["features"] if row["features"] else "")
            add(f"  {row['name']:<38} {row['dtypes']:<33} {row['layouts']:<10} {isa:<9} "
                f"{row['why']}")
    add("")
    add(f"Support matrix (vs TF {tfi['version']}'s built-in CPU kernels; `make report` "
        "measures each cell)")
    add(f"  {'configuration':<64} {'TF built-in CPU':<50} ours")
    for row in report["support_matrix"]:
        add(f"  {row['configuration']:<64} {row['tf_builtin_cpu']:<50} {row['ours']}")
    return "\n".join(lines)


def healthy(report):
    if report["load_error"] or not report["kernels"]:
        return False
    return (all(per_device.get("CPU") for per_device in report["kernels"].values())
            and all(report["xla_kernels"].get(op) for op in report["kernels"]))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tf_conv_backprop",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="versions, build flags, registered kernels, support")
    info.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = collect()
    print(json.dumps(report, indent=1) if args.json else render(report))
    return 0 if healthy(report) else 1


if __name__ == "__main__":
    sys.exit(main())
