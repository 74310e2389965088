// The direct conv2d kernels (cpu/conv2d/direct_inl.h) as the variant table's
// kernels: float and double at AVX2 and AVX-512, the bfloat16 ones (widening in
// registers, AVX512_BF16 dot products) at AVX-512. Empty in the baseline build.
#if defined(__AVX2__)

#include <cstdint>
#include <cstring>

#include <Eigen/Core>

#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/isa_kernels.h"
// The kernels sit in an unnamed namespace of cpu::TCB_ISA.
#include "tf_ops/cpu/conv2d/direct_inl.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

#if defined(__AVX512F__)
static_assert(sizeof(Eigen::bfloat16) == sizeof(uint16_t), "bfloat16 is its 16 bits");
const uint16_t* Bits(const Eigen::bfloat16* p) { return reinterpret_cast<const uint16_t*>(p); }
uint16_t* Bits(Eigen::bfloat16* p) { return reinterpret_cast<uint16_t*>(p); }
#endif

}  // namespace

template <typename T>
bool Conv2DInputDirect(const CpuContext& ctx, const ConvGeometry& geo, const T* filter, const T* dy, T* dx) {
  return DirectInputGrad(ctx, geo, filter, dy, dx);
}

#if defined(__AVX512F__)
template <typename T>
bool Conv2DInputBf16Dot(const CpuContext& ctx, const ConvGeometry& geo, const T* filter, const T* dy, T* dx) {
  return DirectInputGradBf16(ctx, geo, Bits(filter), Bits(dy), Bits(dx));
}
#endif  // __AVX512F__

template <typename T>
bool Conv2DInputNchwPointwise(const CpuContext& ctx, const ConvGeometry& geo, const T* filter, const T* dy,
                              T* dx) {
  PointwiseInputNchw(ctx, geo, filter, dy, dx);
  return true;
}

template <typename T>
bool Conv2DFilterDirect(const CpuContext& ctx, const ConvGeometry& geo, const T* x, const T* dy, T* dw) {
  return DirectFilterGrad(ctx, geo, x, dy, dw);
}

template <typename T>
bool Conv2DFilterNchwDirect(const CpuContext& ctx, const ConvGeometry& geo, const T* x, const T* dy, T* dw) {
  return DirectFilterGradNchw(ctx, geo, x, dy, dw);
}

#if defined(__AVX512F__)
namespace {

// The bfloat16 filter gradients sum into float and round once, at the end:
// sum(float* dW) computes into scratch, false declining.
template <typename Sum>
bool RoundedFilterGradBf16(const ConvGeometry& geo, Eigen::bfloat16* dw, Sum sum) {
  ScratchVector<float> dw_float(geo.filter_elements);
  if (!sum(dw_float.data())) return false;
  ConvertElements(dw_float.data(), dw, geo.filter_elements);
  return true;
}

}  // namespace

template <typename T>
bool Conv2DFilterBf16Dot(const CpuContext& ctx, const ConvGeometry& geo, const T* x, const T* dy, T* dw) {
  return RoundedFilterGradBf16(
      geo, dw, [&](float* sum) { return DirectFilterGradBf16Pairs(ctx, geo, Bits(x), Bits(dy), sum); });
}

template <typename T>
bool Conv2DFilterBf16Widen(const CpuContext& ctx, const ConvGeometry& geo, const T* x, const T* dy, T* dw) {
  return RoundedFilterGradBf16(geo, dw, [&](float* sum) {
    DirectFilterGradBf16Widen(ctx, geo, Bits(x), Bits(dy), sum);
    return true;
  });
}
#endif  // __AVX512F__

#define TCB_INSTANTIATE_DIRECT_KERNELS(T)          \
  TCB_INSTANTIATE_KERNEL(Conv2DInputDirect, T)     \
  TCB_INSTANTIATE_KERNEL(Conv2DInputNchwPointwise, T) \
  TCB_INSTANTIATE_KERNEL(Conv2DFilterDirect, T)    \
  TCB_INSTANTIATE_KERNEL(Conv2DFilterNchwDirect, T)
TCB_INSTANTIATE_DIRECT_KERNELS(float)
TCB_INSTANTIATE_DIRECT_KERNELS(double)
#undef TCB_INSTANTIATE_DIRECT_KERNELS
#if defined(__AVX512F__)
TCB_INSTANTIATE_KERNEL(Conv2DFilterBf16Widen, Eigen::bfloat16)
TCB_INSTANTIATE_KERNEL(Conv2DInputBf16Dot, Eigen::bfloat16)
TCB_INSTANTIATE_KERNEL(Conv2DFilterBf16Dot, Eigen::bfloat16)
#endif

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop

#endif  // __AVX2__
