// Grouped conv2d gradients whose groups have as many output channels as input
// channels (CG each: ResNeXt, RegNet, ShuffleNet), NHWC float/double, for groups
// narrower than a vector (wider ones run on the direct tiles, a group's channels at a
// time), vectorised over the channels of several whole groups at once, with no
// multiply-add wasted on the zeros between groups (which the dense kernels on
// block-diagonal slices spend).
//
// A vector of L channels holds L / CG whole groups (CG divides L, CG < L). Channel c = g*CG + i
// meets only the channels g*CG + j of the other tensor, so for one j the partner of
// every lane is a fixed permutation of the other tensor's vector over the same
// channels: lane l takes lane (l / CG) * CG + j. A tap costs CG permutes and CG
// multiply-adds per vector.
//
//   input gradient:  dx[p, c]     = sum over taps, j of perm_j(dy[p'])[c] * wt[tap, j, c]
//                    with wt[tap, j, c] = w[tap, c % CG, (c / CG) * CG + j]
//   filter gradient: dw[tap, i, k] = sum over output pixels p of perm_i(x[p_in])[k] * dy[p, k]
//
// Channels past the last whole vector run in a vector of their own, zero-filled. Every output
// element is summed by one thread in a fixed order (the filter gradient over fixed
// shards of pixel rows, added in shard order), so results do not depend on threads.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/isa_kernels.h"
#include "tf_ops/cpu/simd_vec_inl.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {

#if defined(__AVX2__)
namespace {

// Per-thread partial filter gradients of at most this many bytes together; the
// shard count depends on the geometry only.
constexpr int64_t kMaxPartialBytes = int64_t{16} << 20;
constexpr int64_t kMaxShards = 32;
// Input-gradient vectors summed together (independent chains for the FMA latency).
constexpr int kBlock = 4;

// The bits of a vector as another vector type of the same size.
template <typename To, typename From>
To Bits(const From& v) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To t;
  std::memcpy(&t, &v, sizeof(To));
  return t;
}

// The permutes, as the ISA's cross-lane permute instructions (vpermps / vpermpd; AVX2
// has no double one, so doubles move as pairs of floats).
#if defined(__AVX512F__)
using Index = __m512i;
template <typename V>
V Permute(const V& v, const Index& index) {
  if constexpr (sizeof(v[0]) == 4) {
    return Bits<V>(_mm512_permutexvar_ps(index, Bits<__m512>(v)));
  } else {
    return Bits<V>(_mm512_permutexvar_pd(index, Bits<__m512d>(v)));
  }
}
#else
using Index = __m256i;
template <typename V>
V Permute(const V& v, const Index& index) {
  return Bits<V>(_mm256_permutevar8x32_ps(Bits<__m256>(v), index));
}
#endif

template <typename T, int CG>
struct Lanes {
  using V = typename SimdOf<T>::Type;
  static constexpr int64_t L = kLanes<V, T>;
  // perm[j]: lane l takes lane (l / CG) * CG + j (for AVX2 doubles, float pairs).
  Index perm[CG];
  Lanes() {
    for (int j = 0; j < CG; ++j) {
      alignas(64) int32_t words[sizeof(Index) / 4];
      alignas(64) int64_t quads[sizeof(Index) / 8];
      for (int64_t l = 0; l < L; ++l) {
        const int64_t from = (l / CG) * CG + j;
        if constexpr (sizeof(T) == 4) {
          words[l] = static_cast<int32_t>(from);
        } else {
          quads[l] = from;
          words[2 * l] = static_cast<int32_t>(2 * from);
          words[2 * l + 1] = static_cast<int32_t>(2 * from + 1);
        }
      }
#if defined(__AVX512F__)
      if constexpr (sizeof(T) == 8) {
        std::memcpy(&perm[j], quads, sizeof(Index));
        continue;
      }
#endif
      std::memcpy(&perm[j], words, sizeof(Index));
    }
  }
};

// The first n (< L) lanes of a vector, the rest zero, and their store: masked loads
// and stores (no call, no read past the tensor). Tails hold whole groups, so the zero
// lanes never reach a real one through a permute.
#if defined(__AVX512F__)
template <typename V, typename T>
V LoadFirst(const T* p, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return Bits<V>(_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p));
  } else {
    return Bits<V>(_mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << n) - 1), p));
  }
}
template <typename V, typename T>
void StoreFirst(T* p, const V& v, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), Bits<__m512>(v));
  } else {
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << n) - 1), Bits<__m512d>(v));
  }
}
#else
template <typename T>
__m256i FirstLanes(int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  } else {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
  }
}
template <typename V, typename T>
V LoadFirst(const T* p, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return Bits<V>(_mm256_maskload_ps(p, FirstLanes<T>(n)));
  } else {
    return Bits<V>(_mm256_maskload_pd(p, FirstLanes<T>(n)));
  }
}
template <typename V, typename T>
void StoreFirst(T* p, const V& v, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    _mm256_maskstore_ps(p, FirstLanes<T>(n), Bits<__m256>(v));
  } else {
    _mm256_maskstore_pd(p, FirstLanes<T>(n), Bits<__m256d>(v));
  }
}
#endif

template <typename T, int CG>
void InputGrouped(const CpuContext& ctx, const ConvGeometry& g, const T* filter, const T* dy, T* dx) {
  using V = typename Lanes<T, CG>::V;
  constexpr int64_t L = Lanes<T, CG>::L;
  const Lanes<T, CG> lanes;
  const int64_t depth = g.in_depth, taps = g.filter_rows * g.filter_cols;
  const int64_t vector_end = depth / L * L;
  ScratchVector<T> wt(taps * CG * depth);
  for (int64_t tap = 0; tap < taps; ++tap)
    for (int j = 0; j < CG; ++j)
      for (int64_t c = 0; c < depth; ++c)
        wt[(tap * CG + j) * depth + c] = filter[(tap * CG + c % CG) * depth + c / CG * CG + j];
  const int64_t taps_per_pixel = std::max<int64_t>(1, taps / (g.stride_rows * g.stride_cols));
  ctx.For(g.batch * g.in_rows, g.in_cols * taps_per_pixel * CG * depth, [&](int64_t begin, int64_t end) {
    // The taps that reach one dx pixel: the dy pixel's offset and the tap's wt rows.
    ScratchVector<const T*> dy_at(taps), wt_at(taps);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n = u / g.in_rows, ih = u % g.in_rows;
      for (int64_t iw = 0; iw < g.in_cols; ++iw) {
        int64_t count = 0;
        ForEachTapReaching(g, ih, iw, [&](int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
          dy_at[count] = dy + ((n * g.out_rows + oh) * g.out_cols + ow) * depth;
          wt_at[count++] = wt.data() + (kh * g.filter_cols + kw) * CG * depth;
        });
        T* out = dx + ((n * g.in_rows + ih) * g.in_cols + iw) * depth;
        int64_t c = 0;
        // Two sums per vector (even and odd j) so the multiply-adds do not wait on
        // each other's latency.
        const auto block = [&](auto vectors) {
          constexpr int kVectors = decltype(vectors)::value;
          V even[kVectors] = {}, odd[kVectors] = {};
          for (int64_t t = 0; t < count; ++t) {
#pragma GCC unroll 4
            for (int v = 0; v < kVectors; ++v) {
              const T* w = wt_at[t] + c + v * L;
              const V y = Load<V>(dy_at[t] + c + v * L);
#pragma GCC unroll 8
              for (int j = 0; j < CG; j += 2) {
                even[v] += Permute(y, lanes.perm[j]) * Load<V>(w + j * depth);
                if (j + 1 < CG) odd[v] += Permute(y, lanes.perm[j + 1]) * Load<V>(w + (j + 1) * depth);
              }
            }
          }
#pragma GCC unroll 4
          for (int v = 0; v < kVectors; ++v) Store(out + c + v * L, even[v] + odd[v]);
          c += kVectors * L;
        };
        // A lone vector would sum in two chains, waiting on the multiply-add latency:
        // kBlock + 1 vectors run as 3 + 2 (RegNetX s2 w8 152->152 @28, 9 vectors and a
        // masked tail of 8 channels, here and in the tail's four sums below: 1.15-1.19x
        // faster, 1 and 2 threads, in one process).
        static_assert(kBlock == 4, "the split below");
        int64_t left = (vector_end - c) / L;
        for (; left >= kBlock && left != kBlock + 1; left -= kBlock) block(std::integral_constant<int, kBlock>());
        if (left == kBlock + 1) {
          block(std::integral_constant<int, 3>());
          block(std::integral_constant<int, 2>());
        } else {
          switch (left) {
            case 3: block(std::integral_constant<int, 3>()); break;
            case 2: block(std::integral_constant<int, 2>()); break;
            case 1: block(std::integral_constant<int, 1>()); break;
            default: break;
          }
        }
        if (c < depth) {
          // Four sums, for the same reason.
          const int64_t rest = depth - c;
          V acc[4] = {};
          for (int64_t t = 0; t < count; ++t) {
            const V y = LoadFirst<V>(dy_at[t] + c, rest);
#pragma GCC unroll 8
            for (int j = 0; j < CG; ++j) {
              acc[j % 4] += Permute(y, lanes.perm[j]) * LoadFirst<V>(wt_at[t] + j * depth + c, rest);
            }
          }
          StoreFirst(out + c, (acc[0] + acc[1]) + (acc[2] + acc[3]), rest);
        }
      }
    }
  });
}

template <typename T, int CG>
void FilterGrouped(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  using V = typename Lanes<T, CG>::V;
  constexpr int64_t L = Lanes<T, CG>::L;
  const Lanes<T, CG> lanes;
  const int64_t depth = g.out_depth, taps = g.filter_rows * g.filter_cols, fe = g.filter_elements;
  const int64_t rows = g.batch * g.out_rows;
  const int64_t shards = std::max<int64_t>(
      1, std::min({rows, kMaxShards, kMaxPartialBytes / (fe * static_cast<int64_t>(sizeof(T)))}));
  const int64_t rows_per_shard = CeilDiv(rows, shards);
  const int64_t windows = CeilDiv(depth, L);
  ScratchVector<T> partial(shards * fe);
  ctx.For(shards * windows, rows_per_shard * g.out_cols * taps * CG * L, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t shard = u / windows, c0 = u % windows * L;
      const int64_t r0 = shard * rows_per_shard, r1 = std::min(rows, r0 + rows_per_shard);
      T* part = partial.data() + shard * fe;
      for (int64_t kh = 0; kh < g.filter_rows; ++kh) {
        for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
          const int64_t tap = kh * g.filter_cols + kw;
          // The output columns whose tap lands inside the image.
          const int64_t offset = kw * g.dilation_cols - g.pad_left;
          const int64_t ow0 = std::max<int64_t>(0, CeilDiv(-offset, g.stride_cols));
          const int64_t ow1 = std::min(g.out_cols, CeilDiv(g.in_cols - offset, g.stride_cols));
          const auto pixels = [&](auto fn) {
            for (int64_t r = r0; r < r1; ++r) {
              const int64_t n = r / g.out_rows, oh = r % g.out_rows;
              const int64_t ih = oh * g.stride_rows - g.pad_top + kh * g.dilation_rows;
              if (ih < 0 || ih >= g.in_rows) continue;
              const T* y_row = dy + (n * g.out_rows + oh) * g.out_cols * depth;
              const T* x_row = x + (n * g.in_rows + ih) * g.in_cols * depth;
              for (int64_t ow = ow0; ow < ow1; ++ow) {
                fn(x_row + (ow * g.stride_cols + offset) * depth, y_row + ow * depth);
              }
            }
          };
          T* target = part + tap * CG * depth;
          const int64_t width = std::min(L, depth - c0);
          V acc[CG] = {};
          pixels([&](const T* xp, const T* yp) {
            const V xv = width == L ? Load<V>(xp + c0) : LoadFirst<V>(xp + c0, width);
            const V yv = width == L ? Load<V>(yp + c0) : LoadFirst<V>(yp + c0, width);
            for (int i = 0; i < CG; ++i) acc[i] += Permute(xv, lanes.perm[i]) * yv;
          });
          for (int i = 0; i < CG; ++i) StoreFirst(target + i * depth + c0, acc[i], width);
        }
      }
    }
  });
  constexpr int64_t kSumRun = int64_t{1} << 12;
  ctx.For(CeilDiv(fe, kSumRun), kSumRun * shards, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin * kSumRun; e < std::min(fe, end * kSumRun); ++e) {
      T sum = partial[e];
      for (int64_t s = 1; s < shards; ++s) sum += partial[s * fe + e];
      dw[e] = sum;
    }
  });
}

// The kernel for the geometry's group width (the row's predicate admits powers of
// two narrower than a vector of the active ISA and at most one AVX2 vector).
template <typename T, template <typename, int> class Kernel>
struct ByWidth {
  template <typename A, typename B, typename Out>
  static bool Run(const CpuContext& ctx, const ConvGeometry& g, const A* a, const B* b, Out* out) {
    switch (g.group_in_depth()) {
      case 1: return Go<1>(ctx, g, a, b, out);
      case 2: return Go<2>(ctx, g, a, b, out);
      case 4: return Go<4>(ctx, g, a, b, out);
      case 8: return Go<8>(ctx, g, a, b, out);
      default: return false;
    }
  }
  template <int CG, typename A, typename B, typename Out>
  static bool Go(const CpuContext& ctx, const ConvGeometry& g, const A* a, const B* b, Out* out) {
    if constexpr (CG <= kLanes<typename SimdOf<T>::Type, T>) {
      Kernel<T, CG>::Run(ctx, g, a, b, out);
      return true;
    }
    return false;
  }
};

template <typename T, int CG>
struct InputKernel {
  static void Run(const CpuContext& ctx, const ConvGeometry& g, const T* w, const T* dy, T* dx) {
    InputGrouped<T, CG>(ctx, g, w, dy, dx);
  }
};
template <typename T, int CG>
struct FilterKernel {
  static void Run(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy, T* dw) {
    FilterGrouped<T, CG>(ctx, g, x, dy, dw);
  }
};

}  // namespace

template <typename T>
bool Conv2DInputGroupedPermute(const CpuContext& ctx, const ConvGeometry& g, const T* filter, const T* dy,
                               T* dx) {
  return ByWidth<T, InputKernel>::Run(ctx, g, filter, dy, dx);
}
template <typename T>
bool Conv2DFilterGroupedPermute(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  return ByWidth<T, FilterKernel>::Run(ctx, g, x, dy, dw);
}

TCB_INSTANTIATE_KERNEL(Conv2DInputGroupedPermute, float)
TCB_INSTANTIATE_KERNEL(Conv2DInputGroupedPermute, double)
TCB_INSTANTIATE_KERNEL(Conv2DFilterGroupedPermute, float)
TCB_INSTANTIATE_KERNEL(Conv2DFilterGroupedPermute, double)
#endif  // __AVX2__

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop
