// This instruction-set build's KernelTable: for every row of cpu/variants.def
// whose ISA this build reaches, its kernel for each dtype the row lists (null
// elsewhere; the engine passes over null entries).
// Compiled once per ISA, like the kernels.
#include <Eigen/Core>

#include "tf_ops/cpu/isa_kernels.h"
#include "tf_ops/cpu/simd_vec_inl.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

// The rows this build has kernels for follow from its compiler flags, not its
// namespace: the sanitizer build compiles the AVX-512 variant with AVX2 flags,
// and its AVX-512 kernel files come out empty.
constexpr Isa CompiledIsa() {
#if defined(__AVX512F__)
  return Isa::kAvx512;
#elif defined(__AVX2__)
  return Isa::kAvx2;
#else
  return Isa::kBaseline;
#endif
}
constexpr Isa kThisIsa = CompiledIsa();

template <typename T, auto kKernel>
bool Erased(const CpuContext& ctx, const ConvGeometry& geo, const void* a, const void* b, void* out) {
  return kKernel(ctx, geo, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out));
}

template <typename From, typename To>
void ErasedConvert(const void* src, void* dst, int64_t count) {
  ConvertElements(static_cast<const From*>(src), static_cast<To*>(dst), count);
}
template <typename From, typename To>
void ErasedTranspose(const void* src, int64_t src_stride, void* dst, int64_t dst_stride, int64_t rows,
                     int64_t cols, bool stream) {
  TransposeConvert(static_cast<const From*>(src), src_stride, static_cast<To*>(dst), dst_stride, rows,
                   cols, stream);
}

// The entries of one row, Of<T>() for each dtype T: only rows this build reaches
// and dtypes the row lists are referenced (the kernel files instantiate exactly
// those).
#define TCB_CPU_VARIANT(name, op, dtypes, layouts, isa, features, applies, kernel, ...) \
  struct Entry_##name {                                                                 \
    template <typename T, Isa kRowIsa = isa>                                            \
    static constexpr KernelFn Of() {                                                    \
      if constexpr (kRowIsa <= kThisIsa && ((dtypes) & BitOf(DtypeOf<T>())) != 0) {     \
        return &Erased<T, &kernel<T>>;                                                  \
      } else {                                                                          \
        return nullptr;                                                                 \
      }                                                                                 \
    }                                                                                   \
  };
#include "tf_ops/cpu/variants.def"
#undef TCB_CPU_VARIANT

template <typename Entry>
void FillRow(KernelFn (&row)[kNumDtypes]) {
#define TCB_DTYPE_ENTRY(enumerator, type, name, bit) \
  row[static_cast<int>(Dtype::enumerator)] = Entry::template Of<type>();
  TCB_FOR_EACH_DTYPE(TCB_DTYPE_ENTRY)
#undef TCB_DTYPE_ENTRY
}

// Twelve independent chains: enough to keep two FMA pipes of 4-5 cycles' latency
// busy, and they fit AVX2's 16 registers. scale < 1 keeps the values finite.
int64_t FmaPeakLoop(int64_t iterations, float* sink) {
  constexpr int kChains = 12;
  constexpr int64_t kFloatLanes = kLanes<VecF, float>;
  VecF acc[kChains], scale, step;
  for (int64_t l = 0; l < kFloatLanes; ++l) {
    scale[l] = 0.999f;
    step[l] = 1e-3f;
  }
  for (int c = 0; c < kChains; ++c) acc[c] = step * static_cast<float>(c);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * scale + step;
  }
  float sum = 0;
  for (int c = 0; c < kChains; ++c) {
    for (int64_t l = 0; l < kFloatLanes; ++l) sum += acc[c][l];
  }
  *sink = sum;
  return iterations * kChains * kFloatLanes * 2;
}

KernelTable MakeTable() {
  KernelTable t{};
#define TCB_CPU_VARIANT(name, ...) FillRow<Entry_##name>(t.kernels[static_cast<int>(Variant::name)]);
#include "tf_ops/cpu/variants.def"
#undef TCB_CPU_VARIANT
#define TCB_LAYOUT_ENTRY(From, To)                                                        \
  t.convert[static_cast<int>(LayoutPairOf<From, To>())] = &ErasedConvert<From, To>;      \
  t.transpose[static_cast<int>(LayoutPairOf<From, To>())] = &ErasedTranspose<From, To>;
  TF_CONV_BACKPROP_FOR_EACH_LAYOUT_PAIR(TCB_LAYOUT_ENTRY)
#undef TCB_LAYOUT_ENTRY
  t.fma_peak_loop = &FmaPeakLoop;
  return t;
}

}  // namespace

const KernelTable& Kernels() {
  static const KernelTable table = MakeTable();
  return table;
}

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop
