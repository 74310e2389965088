// Portable SIMD vectors for the depthwise kernels (GCC vector extensions), so
// each instruction-set build of a kernel TU gets its own width: 16 bytes
// baseline, 32 AVX2, 64 AVX-512; and the kernels' software prefetch. Included by
// the per-ISA kernel TUs only.
#ifndef TF_CONV_BACKPROP_CPU_SIMD_VEC_INL_H_
#define TF_CONV_BACKPROP_CPU_SIMD_VEC_INL_H_

#include <xmmintrin.h>

#include <cstdint>
#include <cstring>

#ifndef TCB_ISA
#error "per-ISA kernel TUs only (see cpu/isa.h)"
#endif

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif
typedef float VecF __attribute__((vector_size(kVectorBytes)));
typedef double VecD __attribute__((vector_size(kVectorBytes)));
template <typename A>
struct SimdOf;
template <>
struct SimdOf<float> {
  using Type = VecF;
};
template <>
struct SimdOf<double> {
  using Type = VecD;
};
// Integer vectors of the same shape (lane masks): Lane is the element type.
typedef int32_t VecI32 __attribute__((vector_size(kVectorBytes)));
typedef int64_t VecI64 __attribute__((vector_size(kVectorBytes)));
template <typename A>
struct IntSimdOf;
template <>
struct IntSimdOf<float> {
  using Type = VecI32;
  using Lane = int32_t;
};
template <>
struct IntSimdOf<double> {
  using Type = VecI64;
  using Lane = int64_t;
};
// V is a vector type or A itself (one lane, for the lane tail).
template <typename V, typename A>
constexpr int64_t kLanes = sizeof(V) / sizeof(A);

template <typename V, typename A>
inline V Load(const A* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V, typename A>
inline void Store(A* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

// count elements from p into L2, ahead of a loop that reads them where the
// hardware prefetchers do not get ahead (short planes or rows, a block elsewhere).
// The loop is a volatile asm: GCC 12 deleted a loop of _mm_prefetch alone as one
// without effects where it could (the input gradient's next-band prefetch vanished
// from the build when its lines moved into a lambda).
template <typename T>
inline void Prefetch(const T* p, int64_t count) {
  const char* bytes = reinterpret_cast<const char*>(p);
  for (int64_t i = 0; i < count * static_cast<int64_t>(sizeof(T)); i += 64) {
    asm volatile("prefetcht1 %0" : : "m"(bytes[i]));
  }
}

}  // namespace
}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CPU_SIMD_VEC_INL_H_
