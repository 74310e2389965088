// Runtime instruction-set dispatch for the CPU kernels.
//
// The kernel translation units (ISA_SRCS in build_tools/sources.bzl) are compiled
// once per instruction set, each time into its own namespace cpu::<isa> (the
// build passes -DTCB_ISA=<isa> and that ISA's -m flags), and each build exports
// one table of its kernels (cpu/kernel_table.h). The dispatcher
// (cpu/isa_dispatch.cc, built with the baseline flags) picks the table of the
// ISA the CPU supports, so one library is fast on AVX2 / AVX-512 machines and
// still runs on any x86-64.
//
// The hazard this design has to defeat: inline functions and template
// instances (all of Eigen, std::vector, ...) have the same names in every
// variant, and the linker would keep only one copy of each (COMDAT / weak
// symbols), so the baseline path could end up in AVX-512 code or the other way
// round. The Makefile therefore partially links each variant (`ld -r`), removes
// its COMDAT groups and makes every symbol local except those in namespace
// cpu::<isa>; tests/core/check_isa_isolation.py verifies the result on the
// linked binary (no ymm/zmm instruction is reachable from a baseline entry).
#ifndef TF_CONV_BACKPROP_CPU_ISA_H_
#define TF_CONV_BACKPROP_CPU_ISA_H_

namespace tf_conv_backprop {
namespace cpu {

// The instruction-set variants, lowest first: each level's machines can run
// every lower level. X(name, enumerator, what it needs). The build's list of
// levels and their compiler flags is ISA_LEVELS in build_tools/sources.bzl (the
// Makefile and Bazel read it; tests/core/check_isa_isolation.py checks both agree).
#define TCB_FOR_EACH_ISA(X)                                                     \
  X(baseline, kBaseline, "x86-64 (SSE2): the compiler's defaults")              \
  X(avx2, kAvx2, "AVX2 + FMA + F16C (Haswell, Zen 1 and later)")                \
  X(avx512, kAvx512, "AVX-512 F/BW/VL/DQ + FMA + F16C (Skylake-SP, Zen 4 and later)")

enum class Isa {
#define TCB_ISA_ENUMERATOR(name, enumerator, needs) enumerator,
  TCB_FOR_EACH_ISA(TCB_ISA_ENUMERATOR)
#undef TCB_ISA_ENUMERATOR
};
constexpr int kNumIsas = 0
#define TCB_ISA_COUNT(name, enumerator, needs) +1
    TCB_FOR_EACH_ISA(TCB_ISA_COUNT);
#undef TCB_ISA_COUNT

const char* IsaName(Isa isa);

// The best variant this CPU and OS can run.
Isa BestSupportedIsa();

// The variant the kernels dispatch to. On first use it is BestSupportedIsa(),
// lowered by the environment variable TF_CONV_BACKPROP_ISA=<name> when set (a
// request above what the CPU supports is ignored).
Isa ActiveIsa();

// Whether non-temporal stores of half a cache line, or straddling two, cost far more
// than cached stores on this CPU: on Intel (Xeon with AVX-512, AVX2 kernels, grouped
// input gradients whose dx pixels are not a whole number of lines apart, 2 threads:
// streamed 1.65-2.0x slower), not on AMD Zen (streamed 1.36x faster, see
// cpu/conv2d/direct_inl.h).
bool SplitLineStreamsAreSlow();

// Sets the variant for all later calls (tests and benchmarks), clamped to
// BestSupportedIsa(); returns the one now in effect. Not meant to be called
// while kernels run.
Isa SetActiveIsa(Isa isa);

}  // namespace cpu
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CPU_ISA_H_
