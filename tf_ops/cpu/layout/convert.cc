// Layout helpers of the CPU engine front end (ConvertElements,
// TransposeConvert, cpu/kernel_table.h): half/bfloat16 <-> float conversion and
// NCHW <-> NHWC transposes in cache tiles. Like the kernels, they are compiled
// once per instruction set into namespace cpu::TCB_ISA.
//
// Conversions round to nearest even exactly as Eigen's scalar ones do (NaN:
// bfloat16 0x7fc0 with the sign kept; half as F16C / Eigen), so results do not
// depend on the instruction set. With F16C / AVX-512 the half conversions use
// vcvtph2ps / vcvtps2ph; the bfloat16 ones are integer loops the compiler
// vectorises under each variant's flags.
#ifndef TCB_ISA
#error "compile with -DTCB_ISA=<isa> and that ISA's -m flags (see cpu/isa.h)"
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <Eigen/Core>
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "tf_ops/cpu/isa_kernels.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace layout {

// Bit views that may alias the float / Eigen storage they point into.
typedef uint32_t __attribute__((may_alias)) U32;
typedef uint16_t __attribute__((may_alias)) U16;

void Convert(const Eigen::bfloat16* src, float* dst, int64_t n) {
  const U16* __restrict s = reinterpret_cast<const U16*>(src);
  U32* __restrict d = reinterpret_cast<U32*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint32_t>(s[i]) << 16;
}

void Convert(const float* src, Eigen::bfloat16* dst, int64_t n) {
  const U32* __restrict s = reinterpret_cast<const U32*>(src);
  U16* __restrict d = reinterpret_cast<U16*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = s[i];
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    d[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

void Convert(const Eigen::half* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
#endif
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

void Convert(const float* src, Eigen::half* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  for (; i < n; ++i) dst[i] = static_cast<Eigen::half>(src[i]);
}

template <typename A>
void Convert(const A* src, A* dst, int64_t n) {
  std::memcpy(dst, src, n * sizeof(A));
}

// The tile edge: 16 floats = one cache line (and one zmm) per tile row.
constexpr int64_t kTile = 16;

#if defined(__AVX512F__)
// A 16 x 16 float tile transposed in registers in four shuffle stages (64
// shuffles for 256 elements; an element loop costs about a cycle per element,
// which dominated the NCHW paths). On return r[i] holds column Column(i), rows
// in order.
inline void Transpose16(__m512 (&r)[kTile]) {
  __m512 t[kTile];
  // Pairs of rows interleaved by element, then by element pair.
  for (int i = 0; i < kTile; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < kTile; i += 4) {
    for (int k = 0; k < 2; ++k) {
      const __m512d a = _mm512_castps_pd(t[i + k]), b = _mm512_castps_pd(t[i + 2 + k]);
      r[i + k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[i + 2 + k] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  }
  // Each 128-bit lane now holds 4 rows of one column; gather the lanes.
  for (int q = 0; q < 2; ++q) {
    for (int k = 0; k < 4; ++k) {
      const int a = 8 * q + k, b = 8 * q + 4 + k;
      t[a] = _mm512_shuffle_f32x4(r[a], r[b], 0x88);  // lanes 0 and 2 of each
      t[b] = _mm512_shuffle_f32x4(r[a], r[b], 0xdd);  // lanes 1 and 3
    }
  }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
    r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xdd);
  }
}
// The column in r[i] after Transpose16: i with bits 0 and 1 swapped.
constexpr int Column(int i) { return (i & ~3) | ((i & 1) << 1) | ((i >> 1) & 1); }
#endif
}  // namespace layout

template <typename From, typename To>
void ConvertElements(const From* src, To* dst, int64_t count) {
  layout::Convert(src, dst, count);
}

// Full tiles: convert 16 source rows into an L1 tile (vectorised), transpose
// it in L1, convert its rows out to 16 destination rows (vectorised); every
// memory access is a whole 64-byte line for float. Edge tiles go element by
// element through Eigen's scalar conversions (same rounding).
template <typename From, typename To>
void TransposeConvert(const From* src, int64_t src_stride, To* dst, int64_t dst_stride,
                      int64_t rows, int64_t cols, bool stream) {
  using W = std::conditional_t<std::is_same_v<From, double>, double, float>;
  constexpr int64_t T = layout::kTile;
  alignas(64) W in[T][T];
  alignas(64) W out[T][T];
#if defined(__AVX512F__)
  constexpr bool kFloat = std::is_same_v<From, float> && std::is_same_v<To, float>;
  // Streaming needs every destination tile row on a cache line of its own.
  stream = stream && kFloat && reinterpret_cast<uintptr_t>(dst) % 64 == 0 &&
           (dst_stride * static_cast<int64_t>(sizeof(To))) % 64 == 0;
#else
  static_cast<void>(stream);  // whole-tile streaming is AVX-512 only
#endif
  for (int64_t i0 = 0; i0 < rows; i0 += T) {
    const int64_t ib = std::min(T, rows - i0);
    for (int64_t j0 = 0; j0 < cols; j0 += T) {
      const int64_t jb = std::min(T, cols - j0);
      if (ib == T && jb == T) {
#if defined(__AVX512F__)
        if constexpr (kFloat) {  // registers only, no tile copies
          __m512 r[T];
          for (int64_t i = 0; i < T; ++i) r[i] = _mm512_loadu_ps(src + (i0 + i) * src_stride + j0);
          layout::Transpose16(r);
          for (int i = 0; i < T; ++i) {
            float* d = dst + (j0 + layout::Column(i)) * dst_stride + i0;
            if (stream) {
              _mm512_stream_ps(d, r[i]);
            } else {
              _mm512_storeu_ps(d, r[i]);
            }
          }
          continue;
        }
#endif
        for (int64_t i = 0; i < T; ++i) layout::Convert(src + (i0 + i) * src_stride + j0, in[i], T);
        for (int64_t j = 0; j < T; ++j)
          for (int64_t i = 0; i < T; ++i) out[j][i] = in[i][j];
        for (int64_t j = 0; j < T; ++j) layout::Convert(out[j], dst + (j0 + j) * dst_stride + i0, T);
        continue;
      }
      for (int64_t j = 0; j < jb; ++j) {
        To* d = dst + (j0 + j) * dst_stride + i0;
        const From* s = src + i0 * src_stride + j0 + j;
        for (int64_t i = 0; i < ib; ++i) d[i] = static_cast<To>(static_cast<W>(s[i * src_stride]));
      }
    }
  }
#if defined(__AVX512F__)
  if (stream) _mm_sfence();  // streamed lines visible before the pool reports done
#endif
}

#define TF_CONV_BACKPROP_INSTANTIATE_LAYOUT(From, To)                                     \
  template void ConvertElements<From, To>(const From*, To*, int64_t);                     \
  template void TransposeConvert<From, To>(const From*, int64_t, To*, int64_t, int64_t, int64_t, bool);
TF_CONV_BACKPROP_FOR_EACH_LAYOUT_PAIR(TF_CONV_BACKPROP_INSTANTIATE_LAYOUT)
#undef TF_CONV_BACKPROP_INSTANTIATE_LAYOUT

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop

