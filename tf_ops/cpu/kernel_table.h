// One table of function pointers per instruction-set build: every kernel of the
// variant table (cpu/variants.def) for each dtype it lists, and the front end's
// layout helpers. cpu/kernel_table.cc fills it once per ISA; the dispatcher
// (cpu/isa_dispatch.cc) hands out the active ISA's.
#ifndef TF_CONV_BACKPROP_CPU_KERNEL_TABLE_H_
#define TF_CONV_BACKPROP_CPU_KERNEL_TABLE_H_

#include <cstdint>

#include "tf_ops/core/geometry.h"
#include "tf_ops/cpu/engine.h"
#include "tf_ops/cpu/isa.h"
#include "tf_ops/cpu/select.h"

namespace tf_conv_backprop {
namespace cpu {

// A kernel on (a, b) -> out, in the types of its (variant, dtype) entry: (filter,
// dy) -> dx for input gradients, (x, dy) -> dW for filter gradients. Returns
// false, as its row's `declines` says, when it does not accept the data.
using KernelFn = bool (*)(const CpuContext& ctx, const ConvGeometry& geo, const void* a,
                          const void* b, void* out);

// The (From, To) pairs the front end converts between.
#define TF_CONV_BACKPROP_FOR_EACH_LAYOUT_PAIR(X) \
  X(Eigen::half, float)                          \
  X(Eigen::bfloat16, float)                      \
  X(float, Eigen::half)                          \
  X(float, Eigen::bfloat16)                      \
  X(float, float)                                \
  X(double, double)
enum class LayoutPair : int {
  kHalfToFloat, kBfloat16ToFloat, kFloatToHalf, kFloatToBfloat16, kFloatToFloat, kDoubleToDouble,
  kCount
};
template <typename From, typename To>
constexpr LayoutPair LayoutPairOf() {
  constexpr Dtype from = DtypeOf<From>(), to = DtypeOf<To>();
  if constexpr (from == Dtype::kHalf) return LayoutPair::kHalfToFloat;
  if constexpr (from == Dtype::kBfloat16) return LayoutPair::kBfloat16ToFloat;
  if constexpr (to == Dtype::kHalf) return LayoutPair::kFloatToHalf;
  if constexpr (to == Dtype::kBfloat16) return LayoutPair::kFloatToBfloat16;
  if constexpr (from == Dtype::kFloat) return LayoutPair::kFloatToFloat;
  return LayoutPair::kDoubleToDouble;
}
// dst[i] = To(src[i]) for i < count.
using ConvertFn = void (*)(const void* src, void* dst, int64_t count);
// dst[j * dst_stride + i] = To(src[i * src_stride + j]) for i < rows, j < cols,
// in cache tiles. `stream`: non-temporal stores where dst's tile rows are whole
// cache lines (a final output far larger than the caches).
using TransposeFn = void (*)(const void* src, int64_t src_stride, void* dst, int64_t dst_stride,
                             int64_t rows, int64_t cols, bool stream);

// Multiply-adds on this build's widest float vector, registers only; returns the flops
// done and stores a sum of the results in *sink so that none can be dropped. What an
// inner loop without a single load could reach: the FMA peak that `make bench` reports
// the conv2d rows against (tf_conv_backprop_fma_peak_gflops, cpu/fma_peak.cc).
using FmaPeakLoopFn = int64_t (*)(int64_t iterations, float* sink);

struct KernelTable {
  KernelFn kernels[kNumVariants][kNumDtypes];  // null: not in this build or dtype
  ConvertFn convert[static_cast<int>(LayoutPair::kCount)];
  TransposeFn transpose[static_cast<int>(LayoutPair::kCount)];
  FmaPeakLoopFn fma_peak_loop;

  KernelFn Kernel(Variant v, Dtype d) const {
    return kernels[static_cast<int>(v)][static_cast<int>(d)];
  }
};

// The active ISA's table (cpu/isa_dispatch.cc).
const KernelTable& ActiveKernels();
const KernelTable& KernelsOf(Isa isa);

// Typed front doors to the active ISA's layout helpers.
template <typename From, typename To>
void ConvertElements(const From* src, To* dst, int64_t count) {
  ActiveKernels().convert[static_cast<int>(LayoutPairOf<From, To>())](src, dst, count);
}
template <typename From, typename To>
void TransposeConvert(const From* src, int64_t src_stride, To* dst, int64_t dst_stride,
                      int64_t rows, int64_t cols, bool stream) {
  ActiveKernels().transpose[static_cast<int>(LayoutPairOf<From, To>())](
      src, src_stride, dst, dst_stride, rows, cols, stream);
}

// Each ISA build's table, defined in its namespace cpu::<isa>.
#define TCB_DECLARE_ISA_TABLE(name, enumerator, needs) \
  namespace name {                                     \
  const KernelTable& Kernels();                        \
  }
TCB_FOR_EACH_ISA(TCB_DECLARE_ISA_TABLE)
#undef TCB_DECLARE_ISA_TABLE

}  // namespace cpu
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CPU_KERNEL_TABLE_H_
