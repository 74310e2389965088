// Runtime instruction-set dispatch for the CPU kernels.
//
// The hot kernel translation units (conv2d_backprop_cpu.cc,
// depthwise_backprop_cpu.cc) are compiled once per instruction set, each time
// into its own namespace cpu::<isa> (the build passes -DTCB_ISA=<isa> and that
// ISA's -m flags). The dispatcher (cpu_dispatch.cc, built with the baseline
// flags) implements the cpu_kernels.h entry points by calling the variant the
// CPU supports, so one library is fast on AVX2 / AVX-512 machines and still runs
// on any x86-64.
//
// The hazard this design has to defeat: inline functions and template
// instances (all of Eigen, std::vector, ...) have the same names in every
// variant, and the linker would keep only one copy of each (COMDAT / weak
// symbols), so the baseline path could end up in AVX-512 code or the other way
// round. The Makefile therefore partially links each variant (`ld -r`), removes
// its COMDAT groups and makes every symbol local except those in namespace
// cpu::<isa>; tests/core/check_isa_isolation.py verifies the result on the
// linked binary (no ymm/zmm instruction is reachable from a baseline entry).
#ifndef TF_CONV_BACKPROP_CORE_CPU_ISA_H_
#define TF_CONV_BACKPROP_CORE_CPU_ISA_H_

#include "tf_ops/core/cpu_engine.h"
#include "tf_ops/core/geometry.h"

namespace Eigen {
struct bfloat16;
}  // namespace Eigen

namespace tf_conv_backprop {
namespace cpu {

// Ordered: each level's machines can run every lower level.
enum class Isa {
  kBaseline = 0,  // x86-64 (SSE2): the compiler's defaults
  kAvx2 = 1,      // AVX2 + FMA + F16C (Haswell, Zen 1 and later)
  kAvx512 = 2,    // AVX-512 F/BW/VL/DQ + FMA + F16C (Skylake-SP, Zen 4 and later)
};

const char* IsaName(Isa isa);

// The best variant this CPU and OS can run.
Isa BestSupportedIsa();

// The variant the kernels dispatch to. On first use it is BestSupportedIsa(),
// lowered by the environment variable TF_CONV_BACKPROP_ISA=baseline|avx2|avx512
// when set (a request above what the CPU supports is ignored).
Isa ActiveIsa();

// Sets the variant for all later calls (tests and benchmarks), clamped to
// BestSupportedIsa(); returns the one now in effect. Not meant to be called
// while kernels run.
Isa SetActiveIsa(Isa isa);

}  // namespace cpu
}  // namespace tf_conv_backprop

// The same kernel templates as cpu_kernels.h (the four gradients and the two
// layout helpers), declared in each variant's namespace; the kernel TUs define
// them in namespace cpu::TCB_ISA.
#define TF_CONV_BACKPROP_DECLARE_ISA_KERNELS(isa)                                                   \
  namespace tf_conv_backprop {                                                                      \
  namespace cpu {                                                                                   \
  namespace isa {                                                                                   \
  template <typename A>                                                                             \
  void Conv2DBackpropInputNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,     \
                               const A* out_backprop, A* in_backprop);                              \
  template <typename A>                                                                             \
  void Conv2DBackpropFilterNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* input,     \
                                const A* out_backprop, A* filter_backprop);                         \
  template <typename A>                                                                             \
  void DepthwiseBackpropInputNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,  \
                                  const A* out_backprop, A* in_backprop);                           \
  template <typename A>                                                                             \
  void DepthwiseBackpropFilterNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* input,  \
                                   const A* out_backprop, A* filter_backprop);                      \
  bool DepthwiseNchwDirectWins(const ConvGeometry& geo);                                            \
  template <typename A>                                                                             \
  bool DepthwiseBackpropInputNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,  \
                                  const A* out_backprop, A* in_backprop);                           \
  template <typename A>                                                                             \
  bool DepthwiseBackpropFilterNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* input,  \
                                   const A* out_backprop, A* filter_backprop);                      \
  bool Conv2DBackpropInputBf16Nhwc(const CpuContext& ctx, const ConvGeometry& geo,                  \
                                   const Eigen::bfloat16* filter, const Eigen::bfloat16* out_backprop, \
                                   Eigen::bfloat16* in_backprop);                                   \
  bool Conv2DBackpropFilterBf16Nhwc(const CpuContext& ctx, const ConvGeometry& geo,                 \
                                    const Eigen::bfloat16* input, const Eigen::bfloat16* out_backprop, \
                                    Eigen::bfloat16* filter_backprop);                              \
  template <typename A>                                                                             \
  bool Conv2DBackpropInputNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,     \
                               const A* out_backprop, A* in_backprop);                              \
  template <typename A>                                                                             \
  bool Conv2DBackpropFilterNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* input,     \
                                const A* out_backprop, A* filter_backprop);                         \
  template <typename From, typename To>                                                             \
  void ConvertElements(const From* src, To* dst, int64_t count);                                    \
  template <typename From, typename To>                                                             \
  void TransposeConvert(const From* src, int64_t src_stride, To* dst, int64_t dst_stride,           \
                        int64_t rows, int64_t cols, bool stream);                                   \
  }                                                                                                 \
  }                                                                                                 \
  }

// The (From, To) pairs the front end converts between: applies X to each, so the
// per-ISA definitions and the dispatcher instantiate the same list.
#define TF_CONV_BACKPROP_FOR_EACH_LAYOUT_PAIR(X) \
  X(Eigen::half, float)                          \
  X(Eigen::bfloat16, float)                      \
  X(float, Eigen::half)                          \
  X(float, Eigen::bfloat16)                      \
  X(float, float)                                \
  X(double, double)

TF_CONV_BACKPROP_DECLARE_ISA_KERNELS(baseline)
TF_CONV_BACKPROP_DECLARE_ISA_KERNELS(avx2)
TF_CONV_BACKPROP_DECLARE_ISA_KERNELS(avx512)

#endif  // TF_CONV_BACKPROP_CORE_CPU_ISA_H_
