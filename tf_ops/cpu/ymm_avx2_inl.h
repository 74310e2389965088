// One ymm register of T (8 floats or 4 doubles) for the AVX2 + FMA builds of the
// kernels written over vector traits: the members of zmm_avx512_inl.h's Zmm that
// those kernels use, with the same names.
#ifndef TF_CONV_BACKPROP_CPU_YMM_AVX2_INL_H_
#define TF_CONV_BACKPROP_CPU_YMM_AVX2_INL_H_

#if !defined(__AVX2__) || !defined(__FMA__)
#error "AVX2 + FMA variants only"
#endif

#include <immintrin.h>

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

// Stream needs p 32-byte aligned.
#define TCB_YMM_ARITHMETIC(Scalar, sfx)                                               \
  static Vec Zero() { return _mm256_setzero_##sfx(); }                               \
  static Vec Load(const Scalar* p) { return _mm256_loadu_##sfx(p); }                 \
  static Vec Broadcast(Scalar v) { return _mm256_set1_##sfx(v); }                    \
  static Vec Fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_##sfx(a, b, c); }        \
  static void Store(Scalar* p, Vec v) { _mm256_storeu_##sfx(p, v); }                 \
  static void Stream(Scalar* p, Vec v) { _mm256_stream_##sfx(p, v); }

template <typename T>
struct Ymm;
template <>
struct Ymm<float> {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  TCB_YMM_ARITHMETIC(float, ps)
};
template <>
struct Ymm<double> {
  using Vec = __m256d;
  static constexpr int kLanes = 4;
  TCB_YMM_ARITHMETIC(double, pd)
};

}  // namespace
}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop

#undef TCB_YMM_ARITHMETIC

#endif  // TF_CONV_BACKPROP_CPU_YMM_AVX2_INL_H_
