"""TF-free GPU check of the CUDA engine: `make gpu-check` (or `python3 tests/core/gpu_check.py`)
on a machine with an NVIDIA GPU, CUDA's nvcc and PyTorch, no TensorFlow, no network
(e.g. the borrowed H200), from a plain checkout, in one command:

 1. builds tf_ops/core/geometry.cc, the CUDA engine (CUDA_SRCS of build_tools/sources.bzl)
    and tests/core/cuda_check.cu with the machine's nvcc for
    its own GPU into build/gpu_check/libtcb_cuda_check.so (no TF, no Eigen needed);
 2. correctness: every op on --configs random configurations (default 320 per op)
    across the whole matrix against the float64 reference of tests/core/naive_reference.h
    (the oracle the CPU engine's core tests use; the main suite checks the CPU engine
    against TF), outputs pre-filled with NaN and guarded against out-of-bounds writes,
    bitwise determinism over repeated runs and between the int32 and int64 kernels;
 3. speed: each op on the benchmark layers (bench/shapes.py, its grouped conv2d layers
    included) against cuDNN through PyTorch
    (torch.nn.grad.conv2d_input / conv2d_weight, groups=C for depthwise, the layer's
    groups for grouped conv2d; the same explicit padding for both) in the same numerics:
    `tf32` rows are float32 with TF32 allowed on both sides (TF's GPU default: our
    CudaContext::tf32, cuDNN's allow_tf32), `float32` rows exact (TF32 off on both),
    float16 and bfloat16 with float accumulation,
    CUDA-graph timed, alternating, median of rounds; each result is also judged
    against PyTorch's float64 gradient of the same inputs with the op table's
    tolerance (python/tf_conv_backprop/_ops.py); prints a table of ratios (cuDNN
    time / ours: > 1 is faster than cuDNN) and writes build/gpu_check/timings.json;
    `--tiles` also times the dense conv2d rows with each tensor-core tile size
    forced (CudaContext::force_tile), to tune the engine's choice.

Exit status: 0 when every configuration passed, 1 otherwise, 2 when no GPU is
present (it fails fast) or the build fails. `--build-only` compiles without a GPU.
"""
import argparse
import concurrent.futures
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The op table and the benchmark layers, both importable without TensorFlow.
sys.path[:0] = [os.path.join(REPO, "tests"), os.path.join(REPO, "bench"),
                os.path.join(REPO, "build_tools")]
from op_table import ops  # noqa: E402
from shapes import LAYERS  # noqa: E402
import sources  # noqa: E402  (the build's source lists)

OUT_DIR = os.path.join(REPO, "build", "gpu_check")
SOURCES = ["tf_ops/core/geometry.cc"] + sources.lists()["CUDA_SRCS"] + ["tests/core/cuda_check.cu"]
HEADERS = ["tf_ops/core/geometry.h", "tf_ops/cuda/engine.h", "tf_ops/cuda/kernels.h",
           "tf_ops/cuda/device.h", "tests/core/naive_reference.h"]
LIBRARY = os.path.join(OUT_DIR, "libtcb_cuda_check.so")

PADDING_CODE = {"SAME": 0, "VALID": 1, "EXPLICIT": 2}
# Entries of the geometry array tcb_cuda_run takes (tests/core/cuda_check.cu, kArgs).
NUM_ARGS = 22
# The timing's dtype names: the op table's, plus float32 with TF32 allowed.
TF32 = "tf32"


def storage_dtype(dtype_name):
    return "float32" if dtype_name == TF32 else dtype_name


def judged_as(dtype_name):
    """The op table dtype whose tolerance a result is held to: TF32 products carry
    float16's 10-bit mantissa (summed in float, so float16's bound is loose for them)."""
    return "float16" if dtype_name == TF32 else dtype_name


def log(msg):
    print(f"gpu_check: {msg}", flush=True)


# ---- the machine ---------------------------------------------------------------

def find_nvcc():
    for path in [shutil.which("nvcc")] + [os.path.join(os.environ[v], "bin", "nvcc")
                                          for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)] + \
            ["/usr/local/cuda/bin/nvcc"]:
        if path and os.access(path, os.X_OK):
            return path
    return None


def gpu_compute_capability():
    """'90' for an H100/H200, from nvidia-smi; None when no GPU is visible."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None, "nvidia-smi not found"
    try:
        res = subprocess.run([smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"nvidia-smi failed: {e}"
    lines = [l.strip() for l in res.stdout.splitlines() if l.strip()]
    if res.returncode != 0 or not lines:
        return None, f"nvidia-smi lists no GPU ({(res.stderr or res.stdout).strip()[:200]})"
    name, cap = [p.strip() for p in lines[0].split(",")]
    return cap.replace(".", ""), name


# ---- build ---------------------------------------------------------------------

def build(nvcc, arch, jobs):
    os.makedirs(OUT_DIR, exist_ok=True)
    gencode = [f"-gencode=arch=compute_{arch},code=sm_{arch}"]
    common = [nvcc, "-std=c++17", "-O3", "-DNDEBUG", "-Xcompiler", "-fPIC", f"-I{REPO}"]
    objects, jobs_list = [], []
    newest_header = max(os.path.getmtime(os.path.join(REPO, h)) for h in HEADERS)
    for src in SOURCES:
        obj = os.path.join(OUT_DIR, os.path.basename(src) + f".sm{arch}.o")
        objects.append(obj)
        src_path = os.path.join(REPO, src)
        if os.path.exists(obj) and os.path.getmtime(obj) > max(os.path.getmtime(src_path), newest_header):
            continue
        cmd = common + (gencode + ["-x", "cu"] if src.endswith(".cu") else ["-x", "c++"]) + ["-c", src_path, "-o", obj]
        jobs_list.append((src, cmd))
    start = time.time()

    def compile_one(item):
        src, cmd = item
        t0 = time.time()
        res = subprocess.run(cmd, capture_output=True, text=True)
        return src, res, time.time() - t0

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for src, res, secs in pool.map(compile_one, jobs_list):
            if res.returncode != 0:
                log(f"compiling {src} failed:\n{res.stdout}{res.stderr}")
                return False
            warnings = (res.stdout + res.stderr).strip()
            log(f"compiled {src} ({secs:.0f} s)" + (f"\n{warnings}" if warnings else ""))
    # The CUDA runtime is the one PyTorch loaded (same soname); nvcc's own as a fallback.
    homes = [os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))] + \
        [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)] + ["/usr/local/cuda"]
    lib_dirs = [os.path.join(h, sub) for h in homes for sub in ("lib64", "lib", "targets/x86_64-linux/lib")]
    rpath = [f"-Xlinker=-rpath={d}" for d in lib_dirs if os.path.exists(os.path.join(d, "libcudart.so"))][:1]
    link = [nvcc, "-shared", "-cudart", "shared"] + rpath + ["-o", LIBRARY] + objects
    res = subprocess.run(link, capture_output=True, text=True)
    if res.returncode != 0:
        log(f"linking failed:\n{res.stdout}{res.stderr}")
        return False
    log(f"built {os.path.relpath(LIBRARY, REPO)} for sm_{arch} in {time.time() - start:.0f} s")
    return True


def torch_padding(layer):
    """PyTorch's symmetric padding with TF's output size (SAME: ceil(total / 2) on both
    sides); ours gets the same pads as EXPLICIT, so both compute the same function."""
    if layer.padding == "VALID":
        return 0
    total = max((layer.out_hw() - 1) * layer.stride + (layer.k - 1) * layer.dilation + 1
                - layer.hw, 0)
    return (total + 1) // 2


# ---- timing --------------------------------------------------------------------

def make_timer(torch):
    def measure(fn, iters):
        """Milliseconds per call of fn, from one CUDA-graph replay of `iters` calls
        (plain launches when capture fails)."""
        graph = None
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(iters):
                    fn()
        except Exception:  # pylint: disable=broad-except
            graph = None
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        if graph is not None:
            graph.replay()
        else:
            for _ in range(iters):
                fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / iters, graph is not None

    def time_pair(ours, theirs, rounds):
        for fn in (ours, theirs):  # warm-up: cuDNN's algorithm search, our scratch
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        probe, _ = measure(ours, 1)
        iters = int(min(200, max(3, 2.0 / max(probe, 1e-3))))  # about 2 ms per replay
        a, b, graphed = [], [], True
        for _ in range(rounds):
            t, g1 = measure(ours, iters)
            a.append(t)
            t, g2 = measure(theirs, iters)
            b.append(t)
            graphed = graphed and g1 and g2
        return statistics.median(a), statistics.median(b), graphed

    return time_pair


def make_case(torch, lib, layer, spec, dtype_name, device, force_tile=0):
    """One benchmark case: (ours, theirs, judge, macs). `ours` runs our op through
    tcb_cuda_run on PyTorch's current stream, `theirs` PyTorch's (cuDNN's) gradient in the
    same dtype, `judge` runs ours and returns (relative error, within tolerance) against
    PyTorch's float64 gradient of the same (rounded) inputs: cuDNN's own 16- and 32-bit
    algorithms (Winograd, FFT) are no exact reference."""
    import torch.nn.grad as tgrad  # pylint: disable=import-outside-toplevel
    dt = getattr(torch, storage_dtype(dtype_name))
    n, hw, c, mult_or_out, k = layer.batch, layer.hw, layer.in_depth, layer.out_channels, layer.k
    s, d = layer.stride, layer.dilation
    depthwise = layer.depthwise
    groups = layer.groups
    cg = c // groups  # the filter's input channels
    p = torch_padding(layer)
    oc = c * mult_or_out if depthwise else mult_or_out
    o = (hw + 2 * p - (k - 1) * d - 1) // s + 1
    x = torch.randn(n, hw, hw, c, device=device).to(dt)
    w = torch.randn(k, k, cg, mult_or_out, device=device).to(dt)
    dy = torch.randn(n, o, o, oc, device=device).to(dt)
    # PyTorch's views: NCHW logical, NHWC in memory (channels_last); OIHW weights, the
    # depthwise ones [C*M, 1, KH, KW] with output channel c*M + j as in TF, the grouped
    # ones [Cout, Cin / groups, KH, KW] with output channel o in group o // (Cout / groups)
    # as in TF.
    xt, dyt = x.permute(0, 3, 1, 2), dy.permute(0, 3, 1, 2)
    wt = (w.reshape(k, k, oc).permute(2, 0, 1).unsqueeze(1).contiguous() if depthwise
          else w.permute(3, 2, 0, 1).contiguous())
    conv = dict(stride=s, padding=p, dilation=d, groups=c if depthwise else groups)
    input_grad = spec.computes == "input"
    # The core's OpKind and DType are the op table's row and dtype order.
    geo = (ctypes.c_int64 * NUM_ARGS)(ops.OPS.index(spec), ops.ALL_DTYPES.index(storage_dtype(dtype_name)), 0,
                                     PADDING_CODE["EXPLICIT"], n, hw, hw, c, k, k, mult_or_out, s, s, d,
                                     d, p, p, p, p, groups, int(dtype_name == TF32), force_tile)
    out = torch.empty((n, hw, hw, c) if input_grad else (k, k, cg, mult_or_out), device=device, dtype=dt)
    data = w if input_grad else x
    err = ctypes.create_string_buffer(512)

    def ours():
        stream = torch.cuda.current_stream().cuda_stream if out.is_cuda else 0
        if lib.tcb_cuda_run(geo, ctypes.c_void_p(data.data_ptr()), ctypes.c_void_p(dy.data_ptr()),
                            ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(stream), err, 512):
            raise RuntimeError(err.value.decode())

    def gradient(x_, w_, dy_):
        if input_grad:
            return tgrad.conv2d_input(x_.shape, w_, dy_, **conv)
        return tgrad.conv2d_weight(x_, w_.shape, dy_, **conv)

    def theirs():
        return gradient(xt, wt, dyt)

    def judge():
        ours()
        ref = gradient(xt.double(), wt.double(), dyt.double())
        got = out.permute(0, 3, 1, 2) if input_grad else (
            out.reshape(k, k, oc).permute(2, 0, 1).unsqueeze(1) if depthwise else out.permute(3, 2, 0, 1))
        rel = float((got.double() - ref).norm() / max(ref.norm().item(), 1e-30))
        return rel, ops.within(rel, judged_as(dtype_name), spec.reduction_length((k, k, cg, mult_or_out), n, o, o))

    macs = n * o * o * k * k * cg * mult_or_out
    return ours, theirs, judge, macs


def run_timing(lib, args):
    import torch  # pylint: disable=import-outside-toplevel
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    time_pair = make_timer(torch)
    rows, failures = [], 0
    torch.manual_seed(0)
    for dtype_name in args.dtypes.split(","):
        # cuDNN in the same numerics as ours: TF32 exactly in the tf32 rows.
        torch.backends.cudnn.allow_tf32 = dtype_name == TF32
        for layer in LAYERS:
            for spec in ops.OPS:
                if spec.depthwise != layer.depthwise or (spec.depthwise and dtype_name == TF32):
                    continue  # (our depthwise kernels ignore TF32: the float32 rows time them)
                op = spec.key
                try:
                    ours, theirs, judge, macs = make_case(torch, lib, layer, spec, dtype_name, "cuda")
                    ms_ours, ms_cudnn, graphed = time_pair(ours, theirs, args.rounds)
                    rel, agree = judge()
                except Exception as e:  # pylint: disable=broad-except
                    failures += 1
                    print(f"  {op:17s} {dtype_name:8s} {layer.label:34s} ERROR {e!r}", flush=True)
                    continue
                failures += not agree
                r = dict(op=op, shape=layer.label, dtype=dtype_name, ours_ms=ms_ours, cudnn_ms=ms_cudnn,
                         ratio=ms_cudnn / ms_ours, gflops=2 * macs / ms_ours / 1e6,
                         rel_err_vs_float64=rel, agree=agree, cuda_graph=graphed)
                rows.append(r)
                print(f"  {op:17s} {dtype_name:8s} {layer.label:34s} ours {ms_ours:8.4f} ms  "
                      f"cuDNN {ms_cudnn:8.4f} ms  ratio {r['ratio']:5.2f}  {r['gflops']:8.0f} GFLOP/s  "
                      f"err {rel:.1e}{'' if agree else '  MISMATCH'}", flush=True)
    return rows, failures


# The GPU targets (cuDNN time / ours): depthwise >= 1.5 on every layer in float32 and
# float16; dense conv2d median >= 1.0 and no layer below 0.5 on the tensor cores (TF32,
# float16, bfloat16), median >= 0.9 exact float32.
def target(op, dtype):
    """(minimum over the layers, minimum median) for the rows of one op and dtype."""
    if ops.BY_KEY[op].depthwise:
        return (1.5, 1.5) if dtype in ("float32", "float16") else (None, None)
    return (None, 0.9) if dtype == "float32" else (0.5, 1.0)


def run_tile_timing(lib, args, rows):
    """The dense conv2d rows again with the tensor-core tiles forced to 64 and to 128
    (CudaContext::force_tile), alternated, beside the engine's own choice (`rows`)."""
    import torch  # pylint: disable=import-outside-toplevel
    time_pair = make_timer(torch)
    auto = {(r["op"], r["shape"], r["dtype"]): r["ours_ms"] for r in rows}
    print("\nTensor-core tiles (ms; auto: the engine's choice, from the table above)")
    print(f"{'op':17s} {'dtype':8s} {'shape':34s} {'auto':>8s} {'64':>8s} {'128':>8s} {'cuDNN':>8s}")
    out = []
    for dtype_name in args.tile_dtypes.split(","):
        torch.backends.cudnn.allow_tf32 = dtype_name == TF32
        for layer in LAYERS:
            if layer.depthwise or layer.groups != 1:
                continue
            for spec in ops.OPS:
                if spec.depthwise:
                    continue
                small, _, _, _ = make_case(torch, lib, layer, spec, dtype_name, "cuda", 64)
                large, _, _, _ = make_case(torch, lib, layer, spec, dtype_name, "cuda", 128)
                ms64, ms128, _ = time_pair(small, large, args.rounds)
                key = (spec.key, layer.label, dtype_name)
                cudnn = next((r["cudnn_ms"] for r in rows if (r["op"], r["shape"], r["dtype"]) == key), float("nan"))
                out.append(dict(op=spec.key, shape=layer.label, dtype=dtype_name, auto_ms=auto.get(key),
                                tile64_ms=ms64, tile128_ms=ms128, cudnn_ms=cudnn))
                print(f"{spec.key:17s} {dtype_name:8s} {layer.label:34s} {auto.get(key, float('nan')):8.4f} "
                      f"{ms64:8.4f} {ms128:8.4f} {cudnn:8.4f}", flush=True)
    return out


def print_summary(rows):
    if not rows:
        return
    print("\nSpeed vs cuDNN (ratio = cuDNN time / our time; >= 1: at least as fast)")
    header = f"{'op':17s} {'dtype':8s} {'shape':34s} {'ours ms':>9s} {'cuDNN ms':>9s} {'ratio':>6s}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['op']:17s} {r['dtype']:8s} {r['shape']:34s} {r['ours_ms']:9.4f} {r['cudnn_ms']:9.4f} "
              f"{r['ratio']:6.2f}")
    print("\nTargets (depthwise >= 1.5 on every layer in float32 and float16; dense tf32, float16, "
          "bfloat16 median >= 1.0, none below 0.5; dense exact float32 median >= 0.9):")
    keys = sorted({(r["op"], r["dtype"]) for r in rows})
    for op, dtype in keys:
        ratios = [r["ratio"] for r in rows if r["op"] == op and r["dtype"] == dtype]
        low, med = target(op, dtype)
        median = statistics.median(ratios)
        met = (low is None or min(ratios) >= low) and (med is None or median >= med)
        goal = " ".join(g for g in (f"min >= {low}" if low else "", f"median >= {med}" if med else "") if g)
        print(f"  {op:17s} {dtype:8s} median {median:5.2f}, min {min(ratios):5.2f}   "
              f"{(goal or 'no target'):28s} {'met' if met else 'MISSED'}")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=320, help="random configurations per op")
    parser.add_argument("--seed", type=int, default=20241130)
    parser.add_argument("--dtypes", default="tf32,float32,float16,bfloat16",
                        help="dtypes timed against cuDNN (tf32: float32 with TF32 allowed on both sides)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tiles", action="store_true",
                        help="also time the dense conv2d rows with each tensor-core tile size forced")
    parser.add_argument("--tile-dtypes", default="tf32,float16", help="dtypes of the --tiles rows")
    parser.add_argument("--build-only", action="store_true", help="compile (no GPU needed) and stop")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--arch", help="compute capability to build for, e.g. 90 (default: the GPU's)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--verbose", action="store_true", help="print every configuration")
    args = parser.parse_args(argv[1:])
    t0 = time.time()

    arch, gpu = gpu_compute_capability()
    if arch is None and not args.build_only:
        log(f"no NVIDIA GPU visible ({gpu}). This check runs on a GPU machine "
            "(nvcc + PyTorch); `--build-only` only compiles.")
        return 2
    arch = args.arch or arch or "90"
    nvcc = find_nvcc()
    if nvcc is None:
        log("no nvcc (looked on PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)")
        return 2
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    log(f"GPU: {gpu} (sm_{arch}); nvcc: {version[-1] if version else '?'}")
    if not build(nvcc, arch, args.jobs):
        return 2
    if args.build_only:
        return 0

    # PyTorch first: its CUDA runtime is then the one the library binds to.
    import torch  # pylint: disable=import-outside-toplevel
    if not torch.cuda.is_available():
        log("PyTorch sees no GPU")
        return 2
    torch.cuda.init()
    lib = ctypes.CDLL(LIBRARY)
    lib.tcb_cuda_check.restype = ctypes.c_int
    lib.tcb_cuda_check.argtypes = [ctypes.c_int, ctypes.c_ulonglong, ctypes.c_int, ctypes.c_int]
    lib.tcb_cuda_run.restype = ctypes.c_int
    if lib.tcb_cuda_num_args() != NUM_ARGS:
        log(f"{os.path.relpath(LIBRARY, REPO)} takes {lib.tcb_cuda_num_args()} geometry entries, "
            f"this script {NUM_ARGS}: rebuild it")
        return 2
    log(f"correctness: {args.configs} random configurations per op, seed {args.seed}")
    t1 = time.time()
    failed = lib.tcb_cuda_check(args.configs, args.seed, os.cpu_count() or 1, int(args.verbose))
    sys.stdout.flush()
    log(f"correctness: {failed} failed ({time.time() - t1:.0f} s)")

    timing_failures = 0
    if not args.no_timing:
        log(f"speed: benchmark shapes, dtypes {args.dtypes}, NHWC, {args.rounds} rounds")
        rows, timing_failures = run_timing(lib, args)
        tile_rows = run_tile_timing(lib, args, rows) if args.tiles else []
        print_summary(rows)
        with open(os.path.join(OUT_DIR, "timings.json"), "w") as f:
            json.dump(dict(gpu=gpu, arch=arch, nvcc=version[-1] if version else None, rows=rows,
                           tile_rows=tile_rows), f, indent=1)
        log(f"wrote {os.path.relpath(os.path.join(OUT_DIR, 'timings.json'), REPO)}")
        if timing_failures:
            log(f"{timing_failures} benchmark results failed (an error, or beyond the tolerance "
                "of the float64 gradient)")
    lib.tcb_cuda_release()
    ok = failed == 0 and timing_failures == 0
    log(f"{'PASSED' if ok else 'FAILED'} in {time.time() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
