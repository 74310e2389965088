"""The library's source lists and CPU instruction-set levels: the one copy that the
Makefile (through build_tools/sources.py), BUILD.bazel and the tests read."""

# Framework-free core and the CPU engine's baseline parts (selection, dispatch).
CORE_SRCS = [
    "tf_ops/core/geometry.cc",
    "tf_ops/core/scratch.cc",
    "tf_ops/cpu/engine.cc",
    "tf_ops/cpu/fma_peak.cc",
    "tf_ops/cpu/isa_dispatch.cc",
    "tf_ops/cpu/parallel_for.cc",
    "tf_ops/cpu/select.cc",
]

# The CPU kernels: compiled once per instruction set, picked at run time (tf_ops/cpu/isa.h).
ISA_SRCS = [
    "tf_ops/cpu/kernel_table.cc",
    "tf_ops/cpu/conv2d/gemm.cc",
    "tf_ops/cpu/conv2d/direct.cc",
    "tf_ops/cpu/conv2d/int32_direct.cc",
    "tf_ops/cpu/conv2d/grouped.cc",
    "tf_ops/cpu/depthwise/nhwc.cc",
    "tf_ops/cpu/depthwise/nchw.cc",
    "tf_ops/cpu/depthwise/nchw_avx512.cc",
    "tf_ops/cpu/depthwise/channel_blocks.cc",
    "tf_ops/cpu/layout/convert.cc",
]

# The TensorFlow binding: op registrations, CPU/GPU kernels, XLA kernels.
TF_SRCS = [
    "tf_ops/tf/ops.cc",
    "tf_ops/tf/kernels.cc",
    "tf_ops/tf/xla_kernels.cc",
]

# The CUDA engine (framework-free).
CUDA_SRCS = [
    "tf_ops/cuda/engine.cu",
    "tf_ops/cuda/conv2d.cu",
    "tf_ops/cuda/depthwise.cu",
]

# Instruction-set levels, lowest first, and the compiler flags of each; the C++ list
# is TCB_FOR_EACH_ISA in tf_ops/cpu/isa.h (tests/core/check_isa_isolation.py checks
# that they agree).
ISA_LEVELS = {
    "baseline": [],
    "avx2": ["-mavx2", "-mfma", "-mf16c"],
    "avx512": ["-mavx2", "-mfma", "-mf16c", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq"],
}
