// The AVX-512 depthwise NCHW register kernels (cpu/depthwise/nchw_avx512_inl.h)
// as the variant table's kernels: 3x3 / 5x5, multiplier 1, strides <= 2, each
// thread's padded plane within the scratch bound (cpu/select.cc). Empty in the
// builds below AVX-512.
#if defined(__AVX512F__)

#include "tf_ops/cpu/isa_kernels.h"
// The kernels sit in an unnamed namespace of cpu::TCB_ISA.
#include "tf_ops/cpu/depthwise/nchw_avx512_inl.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {

template <typename T>
bool DepthwiseInputNchwPlanarAvx512(const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                                    const T* dy, T* dx) {
  ZmmNchwInputGradient(ctx, geo, filter, dy, dx);
  return true;
}

template <typename T>
bool DepthwiseFilterNchwPlanarAvx512(const CpuContext& ctx, const ConvGeometry& geo, const T* x,
                                     const T* dy, T* dw) {
  ZmmNchwFilterGradient(ctx, geo, x, dy, dw);
  return true;
}

TCB_INSTANTIATE_KERNEL(DepthwiseInputNchwPlanarAvx512, float)
TCB_INSTANTIATE_KERNEL(DepthwiseInputNchwPlanarAvx512, double)
TCB_INSTANTIATE_KERNEL(DepthwiseFilterNchwPlanarAvx512, float)
TCB_INSTANTIATE_KERNEL(DepthwiseFilterNchwPlanarAvx512, double)

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop

#endif  // __AVX512F__
