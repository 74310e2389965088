// One zmm register of T (16 floats or 8 doubles) for the AVX-512 kernels that
// are written once for both: loads, FMAs and the masked forms that keep a
// lane's product out of a sum altogether (no 0 * inf where TF has no term).
#ifndef TF_CONV_BACKPROP_CPU_ZMM_AVX512_INL_H_
#define TF_CONV_BACKPROP_CPU_ZMM_AVX512_INL_H_

#if !defined(__AVX512F__)
#error "AVX-512 variant only"
#endif

#include <immintrin.h>

#include <cstdint>

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

// The members whose intrinsics differ only in their _ps / _pd suffix. Masked-off
// lanes are neither read (no fault) nor summed; Stream needs p 64-byte aligned.
#define TCB_ZMM_ARITHMETIC(Scalar, sfx)                                                               \
  static Vec Zero() { return _mm512_setzero_##sfx(); }                                               \
  static Vec Load(const Scalar* p) { return _mm512_loadu_##sfx(p); }                                 \
  static Vec Broadcast(Scalar v) { return _mm512_set1_##sfx(v); }                                    \
  static Vec Fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_##sfx(a, b, c); }                        \
  static Vec Add(Vec a, Vec b) { return _mm512_add_##sfx(a, b); }                                    \
  static void Store(Scalar* p, Vec v) { _mm512_storeu_##sfx(p, v); }                                 \
  static Vec LoadMasked(Mask m, const Scalar* p) { return _mm512_maskz_loadu_##sfx(m, p); }          \
  static Vec FmaMasked(Vec a, Vec b, Vec c, Mask m) { return _mm512_mask3_fmadd_##sfx(a, b, c, m); } \
  static void StoreMasked(Scalar* p, Mask m, Vec v) { _mm512_mask_storeu_##sfx(p, m, v); }           \
  static void Stream(Scalar* p, Vec v) { _mm512_stream_##sfx(p, v); }                                \
  static Scalar Sum(Vec v) { return _mm512_reduce_add_##sfx(v); }

template <typename T>
struct Zmm;
template <>
struct Zmm<float> {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  TCB_ZMM_ARITHMETIC(float, ps)
  // Lanes 0..L/2-1 of a and b interleaved (a0 b0 a1 b1 ...), and the upper halves.
  static Vec InterleaveLow(Vec a, Vec b) {
    return _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), b);
  }
  static Vec InterleaveHigh(Vec a, Vec b) {
    return _mm512_permutex2var_ps(a, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31),
                                  b);
  }
  // The even and the odd lanes of the 2L elements a, b.
  static Vec Even(Vec a, Vec b) {
    return _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
  }
  static Vec Odd(Vec a, Vec b) {
    return _mm512_permutex2var_ps(a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);
  }
};
template <>
struct Zmm<double> {
  using Vec = __m512d;
  using Mask = __mmask8;
  static constexpr int kLanes = 8;
  TCB_ZMM_ARITHMETIC(double, pd)
  static Vec InterleaveLow(Vec a, Vec b) {
    return _mm512_permutex2var_pd(a, _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), b);
  }
  static Vec InterleaveHigh(Vec a, Vec b) {
    return _mm512_permutex2var_pd(a, _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15), b);
  }
  static Vec Even(Vec a, Vec b) { return _mm512_permutex2var_pd(a, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), b); }
  static Vec Odd(Vec a, Vec b) { return _mm512_permutex2var_pd(a, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), b); }
};

// v to p, as a non-temporal store where `stream` and p is a whole cache line:
// a large output would leave the caches before anyone reads it, and streaming
// skips reading each line in first.
template <typename T>
inline void StoreOut(T* p, typename Zmm<T>::Vec v, bool stream) {
  if (stream && (reinterpret_cast<uintptr_t>(p) & 63) == 0) {
    Zmm<T>::Stream(p, v);
  } else {
    Zmm<T>::Store(p, v);
  }
}

// Lanes i of the vector starting at element `base` with lo <= base + i < hi.
template <typename T>
typename Zmm<T>::Mask LaneRange(int64_t lo, int64_t hi, int64_t base) {
  constexpr int64_t L = Zmm<T>::kLanes;
  const int64_t a = lo - base < 0 ? 0 : (lo - base > L ? L : lo - base);
  const int64_t b = hi - base < 0 ? 0 : (hi - base > L ? L : hi - base);
  if (b <= a) return 0;
  const uint32_t upto_b = (1u << b) - 1, upto_a = (1u << a) - 1;  // b <= 16
  return static_cast<typename Zmm<T>::Mask>(upto_b & ~upto_a);
}

}  // namespace
}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop

#undef TCB_ZMM_ARITHMETIC

#endif  // TF_CONV_BACKPROP_CPU_ZMM_AVX512_INL_H_
