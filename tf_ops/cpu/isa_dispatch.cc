// The cpu_kernels.h entry points: pick the instruction-set variant once, then
// forward every call to it (see cpu_isa.h). Built with the baseline flags.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "Eigen/Core"
#include "tf_ops/core/cpu_isa.h"
#include "tf_ops/core/cpu_kernels.h"

namespace tf_conv_backprop {
namespace cpu {
namespace {

Isa DetectIsa() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  // libgcc's feature bits include the OS check (XCR0 saves the ymm / zmm state).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    return Isa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return Isa::kAvx2;
  }
#endif
  return Isa::kBaseline;
}

Isa FromEnvironment(Isa best) {
  const char* requested = std::getenv("TF_CONV_BACKPROP_ISA");
  if (requested == nullptr) return best;
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512}) {
    if (std::strcmp(requested, IsaName(isa)) == 0) return isa < best ? isa : best;
  }
  return best;  // unknown names are ignored
}

constexpr int kUnset = -1;
std::atomic<int> active_isa{kUnset};

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kBaseline: return "baseline";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

Isa BestSupportedIsa() {
  static const Isa best = DetectIsa();
  return best;
}

Isa ActiveIsa() {
  int isa = active_isa.load(std::memory_order_relaxed);
  if (isa == kUnset) {
    isa = static_cast<int>(FromEnvironment(BestSupportedIsa()));
    active_isa.store(isa, std::memory_order_relaxed);
  }
  return static_cast<Isa>(isa);
}

Isa SetActiveIsa(Isa isa) {
  const Isa best = BestSupportedIsa();
  const Isa chosen = isa < best ? isa : best;
  active_isa.store(static_cast<int>(chosen), std::memory_order_relaxed);
  return chosen;
}

// Each entry point forwards to the active variant; the variants share one signature.
template <typename A>
void Conv2DBackpropInputNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                             const A* out_backprop, A* in_backprop) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::Conv2DBackpropInputNhwc(ctx, geo, filter, out_backprop, in_backprop);
    case Isa::kAvx2: return avx2::Conv2DBackpropInputNhwc(ctx, geo, filter, out_backprop, in_backprop);
    case Isa::kBaseline: break;
  }
  baseline::Conv2DBackpropInputNhwc(ctx, geo, filter, out_backprop, in_backprop);
}

template <typename A>
void Conv2DBackpropFilterNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                              const A* out_backprop, A* filter_backprop) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::Conv2DBackpropFilterNhwc(ctx, geo, input, out_backprop, filter_backprop);
    case Isa::kAvx2: return avx2::Conv2DBackpropFilterNhwc(ctx, geo, input, out_backprop, filter_backprop);
    case Isa::kBaseline: break;
  }
  baseline::Conv2DBackpropFilterNhwc(ctx, geo, input, out_backprop, filter_backprop);
}

template <typename A>
void DepthwiseBackpropInputNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                                const A* out_backprop, A* in_backprop) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::DepthwiseBackpropInputNhwc(ctx, geo, filter, out_backprop, in_backprop);
    case Isa::kAvx2: return avx2::DepthwiseBackpropInputNhwc(ctx, geo, filter, out_backprop, in_backprop);
    case Isa::kBaseline: break;
  }
  baseline::DepthwiseBackpropInputNhwc(ctx, geo, filter, out_backprop, in_backprop);
}

template <typename A>
void DepthwiseBackpropFilterNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                                 const A* out_backprop, A* filter_backprop) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::DepthwiseBackpropFilterNhwc(ctx, geo, input, out_backprop, filter_backprop);
    case Isa::kAvx2: return avx2::DepthwiseBackpropFilterNhwc(ctx, geo, input, out_backprop, filter_backprop);
    case Isa::kBaseline: break;
  }
  baseline::DepthwiseBackpropFilterNhwc(ctx, geo, input, out_backprop, filter_backprop);
}

template <typename A>
bool Conv2DBackpropInputNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                             const A* out_backprop, A* in_backprop) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::Conv2DBackpropInputNchw(ctx, geo, filter, out_backprop, in_backprop);
    case Isa::kAvx2: return avx2::Conv2DBackpropInputNchw(ctx, geo, filter, out_backprop, in_backprop);
    case Isa::kBaseline: break;
  }
  return baseline::Conv2DBackpropInputNchw(ctx, geo, filter, out_backprop, in_backprop);
}

template <typename A>
bool Conv2DBackpropFilterNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                              const A* out_backprop, A* filter_backprop) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::Conv2DBackpropFilterNchw(ctx, geo, input, out_backprop, filter_backprop);
    case Isa::kAvx2: return avx2::Conv2DBackpropFilterNchw(ctx, geo, input, out_backprop, filter_backprop);
    case Isa::kBaseline: break;
  }
  return baseline::Conv2DBackpropFilterNchw(ctx, geo, input, out_backprop, filter_backprop);
}

bool DepthwiseNchwDirectWins(const ConvGeometry& geo) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::DepthwiseNchwDirectWins(geo);
    case Isa::kAvx2: return avx2::DepthwiseNchwDirectWins(geo);
    case Isa::kBaseline: break;
  }
  return baseline::DepthwiseNchwDirectWins(geo);
}

template <typename A>
bool DepthwiseBackpropInputNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                                const A* out_backprop, A* in_backprop) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::DepthwiseBackpropInputNchw(ctx, geo, filter, out_backprop, in_backprop);
    case Isa::kAvx2: return avx2::DepthwiseBackpropInputNchw(ctx, geo, filter, out_backprop, in_backprop);
    case Isa::kBaseline: break;
  }
  return baseline::DepthwiseBackpropInputNchw(ctx, geo, filter, out_backprop, in_backprop);
}

template <typename A>
bool DepthwiseBackpropFilterNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                                 const A* out_backprop, A* filter_backprop) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::DepthwiseBackpropFilterNchw(ctx, geo, input, out_backprop, filter_backprop);
    case Isa::kAvx2: return avx2::DepthwiseBackpropFilterNchw(ctx, geo, input, out_backprop, filter_backprop);
    case Isa::kBaseline: break;
  }
  return baseline::DepthwiseBackpropFilterNchw(ctx, geo, input, out_backprop, filter_backprop);
}

bool Conv2DBackpropInputBf16Nhwc(const CpuContext& ctx, const ConvGeometry& geo,
                                 const Eigen::bfloat16* filter, const Eigen::bfloat16* out_backprop,
                                 Eigen::bfloat16* in_backprop) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::Conv2DBackpropInputBf16Nhwc(ctx, geo, filter, out_backprop, in_backprop);
    case Isa::kAvx2: return avx2::Conv2DBackpropInputBf16Nhwc(ctx, geo, filter, out_backprop, in_backprop);
    case Isa::kBaseline: break;
  }
  return baseline::Conv2DBackpropInputBf16Nhwc(ctx, geo, filter, out_backprop, in_backprop);
}

bool Conv2DBackpropFilterBf16Nhwc(const CpuContext& ctx, const ConvGeometry& geo,
                                  const Eigen::bfloat16* input, const Eigen::bfloat16* out_backprop,
                                  Eigen::bfloat16* filter_backprop) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::Conv2DBackpropFilterBf16Nhwc(ctx, geo, input, out_backprop, filter_backprop);
    case Isa::kAvx2: return avx2::Conv2DBackpropFilterBf16Nhwc(ctx, geo, input, out_backprop, filter_backprop);
    case Isa::kBaseline: break;
  }
  return baseline::Conv2DBackpropFilterBf16Nhwc(ctx, geo, input, out_backprop, filter_backprop);
}

template <typename From, typename To>
void ConvertElements(const From* src, To* dst, int64_t count) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::ConvertElements(src, dst, count);
    case Isa::kAvx2: return avx2::ConvertElements(src, dst, count);
    case Isa::kBaseline: break;
  }
  baseline::ConvertElements(src, dst, count);
}

template <typename From, typename To>
void TransposeConvert(const From* src, int64_t src_stride, To* dst, int64_t dst_stride,
                      int64_t rows, int64_t cols, bool stream) {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return avx512::TransposeConvert(src, src_stride, dst, dst_stride, rows, cols, stream);
    case Isa::kAvx2: return avx2::TransposeConvert(src, src_stride, dst, dst_stride, rows, cols, stream);
    case Isa::kBaseline: break;
  }
  baseline::TransposeConvert(src, src_stride, dst, dst_stride, rows, cols, stream);
}

#define TF_CONV_BACKPROP_INSTANTIATE_LAYOUT(From, To)                                     \
  template void ConvertElements<From, To>(const From*, To*, int64_t);                     \
  template void TransposeConvert<From, To>(const From*, int64_t, To*, int64_t, int64_t, int64_t, bool);
TF_CONV_BACKPROP_FOR_EACH_LAYOUT_PAIR(TF_CONV_BACKPROP_INSTANTIATE_LAYOUT)
#undef TF_CONV_BACKPROP_INSTANTIATE_LAYOUT

#define TF_CONV_BACKPROP_INSTANTIATE(A)                                                                  \
  template void Conv2DBackpropInputNhwc<A>(const CpuContext&, const ConvGeometry&, const A*, const A*, A*);  \
  template void Conv2DBackpropFilterNhwc<A>(const CpuContext&, const ConvGeometry&, const A*, const A*, A*); \
  template void DepthwiseBackpropInputNhwc<A>(const CpuContext&, const ConvGeometry&, const A*, const A*, A*); \
  template void DepthwiseBackpropFilterNhwc<A>(const CpuContext&, const ConvGeometry&, const A*, const A*, A*); \
  template bool Conv2DBackpropInputNchw<A>(const CpuContext&, const ConvGeometry&, const A*, const A*, A*); \
  template bool Conv2DBackpropFilterNchw<A>(const CpuContext&, const ConvGeometry&, const A*, const A*, A*); \
  template bool DepthwiseBackpropInputNchw<A>(const CpuContext&, const ConvGeometry&, const A*, const A*, A*); \
  template bool DepthwiseBackpropFilterNchw<A>(const CpuContext&, const ConvGeometry&, const A*, const A*, A*);
TF_CONV_BACKPROP_INSTANTIATE(float)
TF_CONV_BACKPROP_INSTANTIATE(double)
#undef TF_CONV_BACKPROP_INSTANTIATE

}  // namespace cpu
}  // namespace tf_conv_backprop
