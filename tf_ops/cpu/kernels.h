// The NHWC compute kernels behind cpu_engine.h. The engine front end
// (cpu_engine.cc) handles empty tensors, dtype conversion (half/bfloat16 ->
// float) and NCHW <-> NHWC, so each kernel sees: A in {float, double}, NHWC
// tensors, every element count > 0. A kernel must write every output element.
// Scratch it needs comes from std::vector; std::bad_alloc is turned into
// ResourceExhausted by the front end.
#ifndef TF_CONV_BACKPROP_CORE_CPU_KERNELS_H_
#define TF_CONV_BACKPROP_CORE_CPU_KERNELS_H_

#include <cstdint>

#include "tf_ops/core/cpu_engine.h"
#include "tf_ops/core/geometry.h"

namespace Eigen {
struct half;
struct bfloat16;
}  // namespace Eigen

namespace tf_conv_backprop {
namespace cpu {

// dx[N,H,W,Cin] from filter[KH,KW,Cin,Cout] and dy[N,OH,OW,Cout].
template <typename A>
void Conv2DBackpropInputNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                             const A* out_backprop, A* in_backprop);
// dW[KH,KW,Cin,Cout] from x[N,H,W,Cin] and dy[N,OH,OW,Cout].
template <typename A>
void Conv2DBackpropFilterNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                              const A* out_backprop, A* filter_backprop);
// dx[N,H,W,C] from filter[KH,KW,C,M] and dy[N,OH,OW,C*M].
template <typename A>
void DepthwiseBackpropInputNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                                const A* out_backprop, A* in_backprop);
// dW[KH,KW,C,M] from x[N,H,W,C] and dy[N,OH,OW,C*M].
template <typename A>
void DepthwiseBackpropFilterNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                                 const A* out_backprop, A* filter_backprop);

// The conv2d input gradient on NCHW tensors directly, where a kernel exists
// (AVX-512, 1x1 filter, stride 1, no padding: a GEMM per image); false, writing
// nothing, elsewhere (the front end then transposes to NHWC).
template <typename A>
bool Conv2DBackpropInputNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                             const A* out_backprop, A* in_backprop);
// The conv2d filter gradient on NCHW tensors directly, for 1x1 filters with
// stride 1 and no padding (a GEMM per image); false, writing nothing, elsewhere.
template <typename A>
bool Conv2DBackpropFilterNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                              const A* out_backprop, A* filter_backprop);

// The depthwise gradients on NCHW tensors directly (no transposes). They return
// false, writing nothing, where they do not apply (a non-finite filter for the
// input gradient; planes too large for their per-thread scratch); the front end
// then transposes to NHWC.
template <typename A>
bool DepthwiseBackpropInputNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                                const A* out_backprop, A* in_backprop);
template <typename A>
bool DepthwiseBackpropFilterNchw(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                                 const A* out_backprop, A* filter_backprop);
// Where those beat the engine's channel blocks (NHWC kernels on blocks of
// channels transposed in L2), for the active instruction set: with AVX-512,
// multiplier 1 with 3x3 / 5x5 filters and strides <= 2 (kernels on the planes
// as they are, depthwise_nchw_avx512_inl.h); on every ISA, multipliers > 1,
// where the NHWC kernels add an expansion or reduction pass (x2 C64 @56 planar
// 3.0 / 4.2 ms, channel blocks 5.5 / 5.6 ms). The generic planar kernels lose
// to the channel blocks with a multiplier of 1 (C144 @56 input 4.1 vs 2.6 ms).
bool DepthwiseNchwDirectWins(const ConvGeometry& geo);

// The conv2d input gradient on bfloat16 NHWC tensors without converting them
// to float (AVX512_BF16 dot products, float accumulation, one rounding to
// bfloat16 at the end). Returns false, writing nothing, where it does not apply
// (CPU without AVX512_BF16, odd Cout, stride > 1, non-finite filter, ...).
bool Conv2DBackpropInputBf16Nhwc(const CpuContext& ctx, const ConvGeometry& geo,
                                 const Eigen::bfloat16* filter, const Eigen::bfloat16* out_backprop,
                                 Eigen::bfloat16* in_backprop);
// The conv2d filter gradient on bfloat16 NHWC tensors: AVX512_BF16 dot
// products over pixel pairs where the CPU has them and x and dy are finite,
// else widened to float in registers (float accumulation either way, one
// rounding at the end). False where it does not apply (no AVX-512, Cout not a
// multiple of 16).
bool Conv2DBackpropFilterBf16Nhwc(const CpuContext& ctx, const ConvGeometry& geo,
                                  const Eigen::bfloat16* input, const Eigen::bfloat16* out_backprop,
                                  Eigen::bfloat16* filter_backprop);

// Layout helpers of the engine front end (serial; the caller splits the work).
// From -> To is one of half/bfloat16 -> float, float -> half/bfloat16 (round to
// nearest even, as Eigen's conversions), float -> float, double -> double.
// dst[i] = To(src[i]) for i in [0, count).
template <typename From, typename To>
void ConvertElements(const From* src, To* dst, int64_t count);
// dst[j * dst_stride + i] = To(src[i * src_stride + j]) for i < rows, j < cols,
// in cache tiles (NCHW <-> NHWC of a block of pixels). `stream` asks for
// non-temporal stores (float, where dst's tile rows are whole cache lines): for
// a final output far larger than the caches.
template <typename From, typename To>
void TransposeConvert(const From* src, int64_t src_stride, To* dst, int64_t dst_stride,
                      int64_t rows, int64_t cols, bool stream);

}  // namespace cpu
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CORE_CPU_KERNELS_H_
