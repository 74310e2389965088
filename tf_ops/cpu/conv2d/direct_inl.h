// Direct (no col buffer) conv2d gradient kernels for float and double, NHWC,
// written once over the vector traits of the build (zmm at AVX-512, ymm at AVX2):
// the input gradient (input channels in whole vectors) and the filter gradient
// (output channels in whole vectors), any stride and dilation. The AVX-512 build
// also has them on bfloat16: the filter gradient widening it in registers, and
// tiles on AVX512_BF16 dot products. Included by cpu/conv2d/direct.cc.
//
// With stride 1, dx is a convolution of dy with the filter's taps mirrored:
//   dx[n, ih, iw, ci] = sum over (kh, kw, co) of
//       dy[n, ih + pad_top - kh*dh, iw + pad_left - kw*dw, co] * w[kh, kw, ci, co]
// (dy taken as zero outside the image). With strides, only the taps for which
// ih + pad_top - kh*dh and iw + pad_left - kw*dw divide by the stride count
// (the quotient is the dy row / column): per dx row a list of row taps, and
// per column class rho (dx columns rho + s*j) a list of column taps with dy
// column j + offset, so a class is again a stride-1 row of tiles. A register tile of R dx pixels x V
// vectors of input channels sums over every tap and output channel before it
// is stored once: per output channel it loads V filter vectors and broadcasts R
// dy values, R*V FMAs. Eigen's GEMM + col2im writes and re-reads a col buffer
// KH*KW times the size of dx instead, and repacks the filter per call of the GEMM.
//
// Layout work per call: the filter is packed to [ci block][tap][co][lanes*V] so the
// V loads per output channel are contiguous; dy rows are copied with their
// column padding (zeros) when a tap can read left or right of the image, so the
// tile never tests bounds. Rows outside dy are skipped per dx row (tap list).
// Every dx element is one sum in a fixed order (taps, then channels): the result
// does not depend on the thread count or the split.
#ifndef TF_CONV_BACKPROP_CPU_CONV2D_DIRECT_INL_H_
#define TF_CONV_BACKPROP_CPU_CONV2D_DIRECT_INL_H_

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include "tf_ops/cpu/zmm_avx512_inl.h"
#elif defined(__AVX2__)
#include "tf_ops/cpu/ymm_avx2_inl.h"
#else
#error "AVX2 and AVX-512 variants only"
#endif
#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/isa_kernels.h"
#include "tf_ops/cpu/simd_vec_inl.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

// The build's vector register of T, and the tile heights R for V vectors (input
// grad: pixels x vectors of input channels; filter grad: input channels x
// vectors of output channels): R*V accumulators, V loaded vectors and a
// broadcast fit the register file. 0: no tile of that width.
#if defined(__AVX512F__)
template <typename T>
using Vreg = Zmm<T>;
constexpr int kTileRows[5] = {0, 14, 12, 0, 6};  // 32 zmm
// The filter gradient's one-vector tile goes to 16 input channels, a whole group
// of 16 in one tile (3x3 g32 512->512 @14, one thread, min of 30: two balanced
// tiles of 8 rows 2.48 ms, one of 16 rows 2.43 ms; dense layers unchanged).
constexpr int kFilterTileRows[5] = {0, 16, kTileRows[2], 0, kTileRows[4]};
#else
template <typename T>
using Vreg = Ymm<T>;
// No 4-vector tile at 16 registers: 3 pixels x 4 ymm (the filter vectors as memory
// operands) ran the AVX2 3x3 input gradients 1.04-1.14x slower than 6 x 2 (Zen 4,
// 2 threads, 64 @56, 256 @14, 512 @7), though it led a register-only loop by 7%.
constexpr int kTileRows[5] = {0, 12, 6, 0, 0};  // 16 ymm
constexpr int kFilterTileRows[5] = {0, kTileRows[1], kTileRows[2], 0, 0};
#endif
constexpr int kMaxTileVectors = kTileRows[4] > 0 ? 4 : 2;

// One run of the tap list: where its dy values start (relative to the dy value
// of dx pixel 0 of the tile), where its filter starts in the block's packed
// filter (the same for every block: a band's list serves all of them), and how
// many channels it sums: one tap's output channels, or those of neighbouring taps
// whose dy values and filter vectors both follow on (see the tap list).
struct DirectTap {
  int64_t dy_offset, w_offset, channels;
};

// dx[r * dx_stride + lanes*v + j] for r < R, v < V, j < lanes: the full sum over the
// taps and their channels. dy values of consecutive pixels are
// dy_stride apart, or kDyStride when that is not 0. stream: non-temporal stores
// (dx vectors aligned to their size).
// kPair: the two vectors are two groups of one vector each (V == 2), side by side in
// dx; the second's dy values and filter lie pair.dy and pair.w past the first's.
// kZip: one vector holds two groups of half a vector, lane 2j channel j of the first
// and lane 2j+1 channel j of the second (filter packed so, dy copied as pairs of the
// two groups' values per output channel, one 64-bit broadcast), unzipped at the store;
// pair.lone: the second group does not exist (the last of an odd count).
struct DirectPair {
  int64_t dy = 0, w = 0;
  bool lone = false;
};
#if defined(__AVX512F__)
// The two groups' dy values of output channel co at d, as (a, b) in every lane pair.
inline __m512 ZipBroadcast(const float* d) {
  double pair;
  std::memcpy(&pair, d, sizeof(pair));
  return _mm512_castpd_ps(_mm512_set1_pd(pair));
}
// Zipped lanes (a0 b0 a1 b1 ...) back to the groups' channels (a0..a7 b0..b7), stored
// whole, streamed, or the first group's half alone.
inline void UnzipStore(float* p, __m512 v, bool stream, bool lone) {
  const __m512 out = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15), v);
  if (lone) {
    _mm256_storeu_ps(p, _mm512_castps512_ps256(out));
  } else if (stream) {
    _mm512_stream_ps(p, out);
  } else {
    _mm512_storeu_ps(p, out);
  }
}
// The inverse of UnzipStore: a group pair's 16 (lone: 8, the rest zero) channels at p,
// zipped.
inline __m512 ZipLoad(const float* p, bool lone) {
  const __m512 v = _mm512_maskz_loadu_ps(lone ? 0x00ff : 0xffff, p);
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15), v);
}
// A 64-bit broadcast (ZipBroadcast) takes a shuffle slot next to the FMAs on a Zen 4
// (both double-pumped at zmm): in a loop of broadcasts and FMAs alone, 0.7 FMA a cycle
// with a broadcast an FMA, 0.95 with none. So the zipped tiles below share each
// broadcast between the taps of a filter row where they can.
//
// A tap run of 3 taps one dy pixel apart (a filter row's taps, merged by AppendTap):
// dx pixel r reads dy pixel r + j through the run's tap j, so each dy pair broadcast
// feeds up to 3 of the R pixels. d: pixel 0's dy at the run's start, w its filter
// (8 output-channel pairs a tap, 16 lanes each).
template <int R>
inline void ZippedRowRun(const float* d, const float* w, __m512 (&acc)[R][1]) {
  for (int c = 0; c < 8; ++c) {
    const __m512 w0 = _mm512_loadu_ps(w + c * 16), w1 = _mm512_loadu_ps(w + (8 + c) * 16),
                 w2 = _mm512_loadu_ps(w + (16 + c) * 16);
#pragma GCC unroll 16
    for (int q = 0; q < R + 2; ++q) {
      const __m512 b = ZipBroadcast(d + q * 16 + 2 * c);
      if (q < R) acc[q][0] = _mm512_fmadd_ps(b, w0, acc[q][0]);
      if (q >= 1 && q <= R) acc[q - 1][0] = _mm512_fmadd_ps(b, w1, acc[q - 1][0]);
      if (q >= 2) acc[q - 2][0] = _mm512_fmadd_ps(b, w2, acc[q - 2][0]);
    }
  }
}
#endif
template <typename T, int R, int V, int kDyStride, bool kPair, bool kZip = false>
inline void DirectInputTile(const T* dy, int64_t dy_stride, const DirectTap* taps, int ntaps,
                            const T* w_block, DirectPair pair, T* dx, int64_t dx_stride, bool stream) {
  constexpr int kLanes = Vreg<T>::kLanes;
  static_assert(!kPair || V == 2, "a pair tile holds two one-vector groups");
  static_assert(!kZip || (V == 1 && std::is_same_v<T, float> && kLanes == 16), "zipped tiles: one zmm of floats");
  if constexpr (kDyStride > 0) dy_stride = kDyStride;
  typename Vreg<T>::Vec acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = Vreg<T>::Zero();
  }
  for (int t = 0; t < ntaps; ++t) {
    const T* d = dy + taps[t].dy_offset;
    const T* w = w_block + taps[t].w_offset;
    const int64_t channels = taps[t].channels;
    if constexpr (kZip) {
      static_assert(kDyStride == 16, "zipped dy pixels lie a pair's 16 lanes apart");
#if defined(__AVX512F__)
      if (channels == 3 * 8) {  // ZippedRowRun (3x3, ResNeXt g32 256->256 @28: 0.86x the time)
        ZippedRowRun<R>(d, w, acc);
        continue;
      }
#endif
    }
    for (int64_t co = 0; co < channels; ++co, w += kPair ? kLanes : kLanes * V) {
      typename Vreg<T>::Vec wv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) wv[v] = Vreg<T>::Load(w + (kPair ? pair.w : kLanes) * v);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        if constexpr (kZip) {
#if defined(__AVX512F__)
          acc[r][0] = Vreg<T>::Fma(ZipBroadcast(d + r * dy_stride + 2 * co), wv[0], acc[r][0]);
#endif
        } else if constexpr (kPair) {
#pragma GCC unroll 2
          for (int v = 0; v < V; ++v) {
            const typename Vreg<T>::Vec b = Vreg<T>::Broadcast(d[v * pair.dy + r * dy_stride + co]);
            acc[r][v] = Vreg<T>::Fma(b, wv[v], acc[r][v]);
          }
        } else {
          const typename Vreg<T>::Vec b = Vreg<T>::Broadcast(d[r * dy_stride + co]);
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v) acc[r][v] = Vreg<T>::Fma(b, wv[v], acc[r][v]);
        }
      }
    }
  }
  if constexpr (kZip) {
#if defined(__AVX512F__)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) UnzipStore(dx + r * dx_stride, acc[r][0], stream, pair.lone);
#endif
    return;
  }
  if (stream) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) Vreg<T>::Stream(dx + r * dx_stride + kLanes * v, acc[r][v]);
    }
    return;
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) Vreg<T>::Store(dx + r * dx_stride + kLanes * v, acc[r][v]);
  }
}

// Appends a tap to the tap list of one dx pixel or column class, which starts at
// list[first]. Taps one dy pixel apart (stride and dilation 1 along the row) whose
// pixels hold just their channels (a dense layer's dy, a group's packed band) read
// on where the last one stopped, in dy and in the filter: one run. dy_step: dy values a
// channel (2 for zipped group pairs).
inline void AppendTap(const DirectTap& tap, int64_t first, int64_t block, ScratchVector<DirectTap>* list,
                      int64_t dy_step = 1) {
  if (static_cast<int64_t>(list->size()) > first) {
    DirectTap& last = list->back();
    if (last.dy_offset + last.channels * dy_step == tap.dy_offset &&
        last.w_offset + last.channels * block == tap.w_offset) {
      last.channels += tap.channels;
      return;
    }
  }
  list->push_back(tap);
}

// A row of `pixels` dx pixels in near-equal tiles of at most R (a row of 7 runs
// as 4 + 3, not 6 + 1: a one-pixel tile is bound by its filter loads).
template <typename T, int R, int V, int kDyStride, bool kPair = false, bool kZip = false>
void DirectInputRow(const T* dy, int64_t dy_stride, const DirectTap* taps, int ntaps, const T* w_block,
                    DirectPair pair, T* dx, int64_t dx_stride, int64_t pixels, bool stream) {
  const int64_t tiles = (pixels + R - 1) / R;
  const int64_t narrow = pixels / tiles, wide_tiles = pixels % tiles;
  int64_t p = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t width = narrow + (t < wide_tiles ? 1 : 0);
    const T* d = dy + p * dy_stride;
    T* o = dx + p * dx_stride;
    p += width;
    if (width == R) {
      DirectInputTile<T, R, V, kDyStride, kPair, kZip>(d, dy_stride, taps, ntaps, w_block, pair, o, dx_stride,
                                                       stream);
      continue;
    }
    switch (width) {
#define TCB_TILE(n)                                                                          \
  case n:                                                                                    \
    if constexpr (n < R)                                                                       \
      DirectInputTile<T, n, V, kDyStride, kPair, kZip>(d, dy_stride, taps, ntaps, w_block, pair, o, dx_stride, \
                                                       stream);                                              \
    break;
      TCB_TILE(1) TCB_TILE(2) TCB_TILE(3) TCB_TILE(4) TCB_TILE(5) TCB_TILE(6) TCB_TILE(7)
      TCB_TILE(8) TCB_TILE(9) TCB_TILE(10) TCB_TILE(11) TCB_TILE(12) TCB_TILE(13)
#undef TCB_TILE
      default: break;
    }
  }
}

#if defined(__AVX512F__)
// ---- bfloat16 input gradient (AVX512_BF16) ---------------------------------------
// The same tiles on bfloat16 data with vdpbf16ps: each instruction multiplies a
// pair of output channels (co, co+1) of one dy pixel, broadcast as one 32-bit
// value, with the matching pairs of 16 input channels of the filter (packed
// [block][tap][co/2][lanes][2]) and adds both products to a float accumulator:
// twice the multiply-adds of a float FMA, half the bytes, no conversion passes.
// Products of bfloat16 values are exact in float; the instruction treats
// denormal inputs as zero. Results round once to bfloat16 (nearest even) at
// the store. Needs an even Cout; CPUs without AVX512_BF16 decline.
#define TCB_BF16_TARGET __attribute__((target("avx512bf16")))

template <int R, int V>
TCB_BF16_TARGET inline void DirectInputTileBf16(const uint16_t* dy, int64_t dy_stride,
                                                const DirectTap* taps, int ntaps,
                                                const uint16_t* w_block, uint16_t* dx, int64_t dx_stride) {
  __m512 acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int t = 0; t < ntaps; ++t) {
    const uint16_t* d = dy + taps[t].dy_offset;
    const uint16_t* w = w_block + taps[t].w_offset;
    const int64_t channels = taps[t].channels;
    for (int64_t co = 0; co < channels; co += 2, w += 32 * V) {
      __m512bh wv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(w + 32 * v);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        int32_t pair;
        std::memcpy(&pair, d + r * dy_stride + co, sizeof(pair));
        const __m512bh b = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], b, wv[v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dx + r * dx_stride + 16 * v),
                          (__m256i)_mm512_cvtneps_pbh(acc[r][v]));
    }
  }
}

template <int R, int V>
TCB_BF16_TARGET __attribute__((noinline)) void DirectInputRowBf16(
    const uint16_t* dy, int64_t dy_stride, const DirectTap* taps, int ntaps, const uint16_t* w_block,
    uint16_t* dx, int64_t dx_stride, int64_t pixels) {
  const int64_t tiles = (pixels + R - 1) / R;
  const int64_t narrow = pixels / tiles, wide_tiles = pixels % tiles;
  int64_t p = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t width = narrow + (t < wide_tiles ? 1 : 0);
    const uint16_t* d = dy + p * dy_stride;
    uint16_t* o = dx + p * dx_stride;
    p += width;
    switch (width) {
#define TCB_TILE(n)                                                                             \
  case n:                                                                                       \
    if constexpr (n <= R) DirectInputTileBf16<n, V>(d, dy_stride, taps, ntaps, w_block, o, dx_stride); \
    break;
      TCB_TILE(1) TCB_TILE(2) TCB_TILE(3) TCB_TILE(4) TCB_TILE(5) TCB_TILE(6) TCB_TILE(7)
      TCB_TILE(8) TCB_TILE(9) TCB_TILE(10) TCB_TILE(11) TCB_TILE(12) TCB_TILE(13) TCB_TILE(14)
#undef TCB_TILE
      default: break;
    }
  }
}

#endif  // __AVX512F__

// `pixels` runs of `count` channels, src_stride apart, to dst back to back; a
// group's few channels a pixel go through vector registers (std::copy_n cost a
// memmove call each: a quarter of a 3x3 g32 256->256 @28 gradient). Runs a few
// KiB apart defeat the hardware prefetcher, so the copy asks for the run
// kCopyAhead pixels on (a prefetch past the end is harmless): 3x3 g32 512->512 @14
// filter gradient, one thread, 2.73 ms before, 2.48 ms with the prefetch and two
// balanced 8-row tiles (below).
constexpr int64_t kCopyAhead = 8;
template <typename T>
void CopyChannels(const T* src, int64_t src_stride, int64_t count, int64_t pixels, T* dst) {
  if (src_stride == count) {
    std::copy_n(src, count * pixels, dst);
    return;
  }
  if constexpr (std::is_floating_point_v<T>) {
    constexpr int kLanes = Vreg<T>::kLanes;
    if (count % kLanes == 0) {
      for (int64_t p = 0; p < pixels; ++p, src += src_stride, dst += count) {
        _mm_prefetch(reinterpret_cast<const char*>(src + kCopyAhead * src_stride), _MM_HINT_T0);
        for (int64_t c = 0; c < count; c += kLanes) Vreg<T>::Store(dst + c, Vreg<T>::Load(src + c));
      }
      return;
    }
  }
  for (int64_t p = 0; p < pixels; ++p) std::copy_n(src + p * src_stride, count, dst + p * count);
}

// The 16 channels of two neighbouring groups of 8 at each of `pixels` pixels, src_stride
// apart, to dst zipped (a0 b0 a1 b1 ..., see DirectInputTile's kZip); lone: b is past
// the last group, zeros.
template <typename T>
void ZipGroupPairs(const T* src, int64_t src_stride, bool lone, int64_t pixels, T* dst) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t p = 0; p < pixels; ++p, src += src_stride, dst += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(src + kCopyAhead * src_stride), _MM_HINT_T0);
      _mm512_storeu_ps(dst, ZipLoad(src, lone));
    }
  }
#endif
}

// What the input-gradient units keep in L2 (1 MiB per core here): a block of
// the packed filter, which every tile of a unit streams once per dx row, or
// the whole packed filter when it is small enough to sit there next to a band
// of dy (about 256 KiB, see `band` below).
constexpr int64_t kL2BlockBytes = int64_t{768} << 10;
// A thread's padded copy of a band of dy rows is at most this large, or twice a dy image.
constexpr int64_t kMaxPaddedBandBytes = int64_t{8} << 20;
// dx sizes from which the input gradient streams its stores (see DirectInputGradImpl).
constexpr int64_t kStreamDxBytes = int64_t{1} << 20;

// T is float, double or uint16_t (bfloat16 bits, tiles of float accumulators).
template <typename T>
constexpr int DirectLanes() {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return 16;
  } else {
    return Vreg<T>::kLanes;
  }
}

// Whether the input gradient tiles over images (a tile: one dx pixel of R images)
// rather than along dx rows. Each pixel then has its own exact tap list, with no
// padding zeros multiplied in and no band copy, and a tile is as tall as the
// batch allows however short the rows are. Dense 3x3, 2 threads, AVX-512, image
// tiles / row tiles: @7 512->512 batch 4 0.86, 8 0.89, 32 0.87, 128 0.86; @14
// 256->256 batch 8 0.94-0.97, 64 0.88; @28 0.97-1.03 (rows of 28 stay); batch 2
// 1.5 (two-pixel tiles), so never below 4.
inline bool ImageTiles(const ConvGeometry& g) {
  return g.groups == 1 && g.filter_rows * g.filter_cols > 1 && g.batch >= 4 &&
         CeilDiv(g.in_cols, g.stride_cols) <= 16;
}

// Whether none of n values is inf or NaN (vectorisable: integer tests on the bits).
template <typename T>
bool AllFinite(const T* p, int64_t n) {
  using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;
  constexpr Bits kExponent = static_cast<Bits>(sizeof(T) == 8   ? 0x7ff0000000000000u
                                               : sizeof(T) == 4 ? 0x7f800000u
                                                                : 0x7f80u);
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, p + i, sizeof(T));
    bad |= (v & kExponent) == kExponent;
  }
  return !bad;
}

template <typename T, int V>
bool DirectInputGradImpl(const CpuContext& ctx, const ConvGeometry& g, const T* filter,
                         const T* dy, T* dx) {
  constexpr bool kPairs = std::is_same_v<T, uint16_t>;  // bfloat16: channel pairs
  constexpr int kLanes = DirectLanes<T>();
  constexpr int R = kTileRows[V];
  constexpr int64_t kBlock = kLanes * V;
  const int64_t cin = g.in_depth, cout = g.out_depth;
  // A block of input channels lies in one group and sums over that group's og
  // output channels (dense: one group of all of them).
  const int64_t cg = g.group_in_depth(), og = g.group_out_depth();
  const int64_t kh_n = g.filter_rows, kw_n = g.filter_cols, taps = kh_n * kw_n;
  // Groups of 8 floats in and out on zmm: two groups a block, their lanes zipped (see
  // DirectInputTile), the last block alone for an odd count: 14 pixels x 16 lanes a
  // tile. Against the AVX2 build's pair tiles (two ymm groups, 6 pixels), float32, 2
  // threads, Intel Xeon, alternated in one process, medians of 11, two runs: RegNetX
  // w8 56->56 @28 1.70x and 2.08x faster, ResNeXt g32 256->256 @28 1.49x and 1.44x.
  constexpr bool kCanZip = std::is_same_v<T, float> && kLanes == 16 && V == 1;
  const bool zip = kCanZip && g.groups > 1 && 2 * cg == kBlock && 2 * og == kBlock;
  const int64_t blocks = zip ? CeilDiv(g.groups, int64_t{2}) : cin / kBlock;
  const auto group_of = [&](int64_t b) { return b * kBlock / cg; };
  // The dy copy of a grouped band holds one slab per group, or per zipped pair.
  const auto slab_of = [&](int64_t b) { return zip ? b : group_of(b); };

  // Units are (channel block, image, band), block outermost: a thread's run of
  // consecutive units reuses one block of the packed filter from L2 (deep
  // layers have a filter far larger than L2 and few pixels per image).
  // A packed filter that fits in L2 next to a band of dy (1x1 and narrow
  // layers) is kept there instead: block innermost, so the band's dy is read
  // once from memory for all blocks (float64 1x1 256->64 @56, 2 threads:
  // 16.7 -> 13.3 ms; blocks outermost re-read all of dy per block). So are a
  // grouped layer's blocks, each summing over its group's channels only: one band
  // serves them all as the filter streams past (3x3 g32 1024->1024 @7, 2 threads:
  // 3.0 ms vs 4.6 ms blocks outermost). A filter of 512-768 KiB (3x3 128->128 float)
  // counts as fitting: at AVX2 its 8 blocks of 16 channels each re-copied the padded
  // band (Zen 4, 2 threads, kernel only, alternated: VGG 3x3 128->128 @112 0.86-0.90x
  // the time, 3x3 s2 128->128 @56 0.90x; AVX-512, 2 blocks of 64: unchanged).
  const bool block_inner =
      g.groups > 1 || taps * cin * og * static_cast<int64_t>(sizeof(T)) <= kL2BlockBytes;

  // Filter packed as [block][kh][kw from the last][co of the group][kBlock] (bfloat16:
  // [co/2][kBlock][2]): a filter row's taps in the order of the dy columns they read,
  // so that neighbouring taps make one run (the tap list below). The tiles multiply
  // padding zeros into the filter, exact only for finite weights (0 * inf = NaN where
  // TF has no term), so the filter is checked before any tile runs.
  const int64_t block_size = taps * og * kBlock;
  // Packs tap t of block b to dst ([co][kBlock]); false if a weight is inf or NaN.
  auto pack_tap = [&](int64_t b, int64_t t, T* dst) {
    const int64_t tap = t / kw_n * kw_n + (kw_n - 1 - t % kw_n);
    const T* src = filter + (tap * cg + b * kBlock % cg) * cout + group_of(b) * og;
    if (zip) {
      const bool lone = 2 * b + 1 == g.groups;
      for (int64_t co = 0; co < og; ++co) {
        for (int64_t j = 0; j < cg; ++j) {
          dst[co * kBlock + 2 * j] = src[j * cout + co];
          dst[co * kBlock + 2 * j + 1] = lone ? T(0) : src[j * cout + og + co];
        }
      }
    } else if constexpr (kPairs) {
      for (int64_t co = 0; co < og; ++co) {
        for (int64_t j = 0; j < kBlock; ++j) dst[((co / 2) * kBlock + j) * 2 + co % 2] = src[j * cout + co];
      }
    } else {
      // In register tiles (cpu/layout/convert.cc): element by element, the lazy
      // packing below made 3x3 512->512 @7 and 256->256 @14 1.10x slower (2 threads).
      TransposeConvert<T, T>(src, cout, dst, kBlock, kBlock, og, false);
    }
    return AllFinite(dst, og * kBlock);
  };
  // Blocks outermost, each thread packs the blocks of its own units as it comes to
  // them, straight into its L2, instead of one pass writing the whole packed filter
  // to memory for the tiles to read back: packing 3x3 512->512 alone took 1.9 ms of
  // a 9 ms call (2 threads); lazily, with image tiles, 1 thread 0.91 and 2 threads
  // 0.96 of the time (@7 and 256->256 @14), row tiles 0.97-0.99.
  const bool lazy = !block_inner;
  ScratchBuffer<T> packed(lazy ? 0 : blocks * block_size);  // every entry written below
  const int64_t checks = lazy ? taps * cg : blocks * taps;
  std::vector<char> finite(checks);
  ctx.For(checks, lazy ? cout : cg * og, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      if (lazy) {
        finite[u] = AllFinite(filter + u * cout, cout);
      } else {
        finite[u] = pack_tap(u / taps, u % taps, packed.data() + u * og * kBlock);
      }
    }
  });
  if (std::find(finite.begin(), finite.end(), 0) != finite.end()) return false;
  // A thread's packed copy of the blocks it is working on (lazy): packed when its
  // run of units comes to them, straight into its L2.
  struct OwnBlock {
    ScratchVector<T> data;
    int64_t b = -1;
  };
  auto block_weights = [&](OwnBlock& own, int64_t b, int64_t nblocks) -> const T* {
    if (!lazy) return packed.data() + b * block_size;
    if (own.b != b) {
      own.data.resize(nblocks * block_size);
      for (int64_t k = 0; k < nblocks; ++k) {
        for (int64_t t = 0; t < taps; ++t) pack_tap(b + k, t, own.data.data() + (k * taps + t) * og * kBlock);
      }
      own.b = b;
    }
    return own.data.data();
  };

  // Columns of dy a tap can read: ow = (iw + pad_left - kw*dw) / sw where that
  // divides, for iw < W. When some fall outside [0, OW), the rows are copied
  // into a padded band.
  const int64_t sh = g.stride_rows, sw = g.stride_cols;
  const int64_t col_lo = FloorDiv(g.pad_left - (kw_n - 1) * g.dilation_cols, sw);
  const int64_t col_hi = (g.in_cols - 1 + g.pad_left) / sw;  // inclusive
  const bool pad_cols = col_lo < 0 || col_hi >= g.out_cols;
  const int64_t left = std::max<int64_t>(0, -col_lo);
  const int64_t padded_cols = left + std::max(g.out_cols, col_hi + 1);

  // Units: bands of dx rows of one image. A band's dy rows (plus the filter's
  // reach) are copied once when padding is needed, so bands are tall enough to
  // amortise the halo yet small enough to stay in L2; enough of them to share.
  const int64_t reach = (kh_n - 1) * g.dilation_rows;
  const int64_t row_bytes = padded_cols * cout * static_cast<int64_t>(sizeof(T));
  int64_t band = std::max<int64_t>(1, (int64_t{256} << 10) / row_bytes);
  band = std::min(band, g.in_rows);
  const int64_t threads = std::max(1, ctx.num_threads);
  const bool by_image = ImageTiles(g);
  const bool pointwise = !zip && !by_image && taps == 1 && !pad_cols && g.pad_top == 0 && g.out_rows == g.in_rows &&
                         g.out_cols == g.in_cols;
  // Groups of one half-line vector (8 floats on ymm) run two to a tile, so that a dx
  // pixel's stores are 64 contiguous bytes (whole lines where Cin is a multiple of 16
  // floats; at 56, every other pixel's straddle two), streamed at any stride (AVX2
  // tiles, float32, in one process with and without pairs: ResNeXt g32 256->256 @28
  // 3.91 -> 3.49 ms one thread, 2.17 -> 1.93 ms two; RegNetX w8 56->56 @28 0.53 ->
  // 0.50 ms two threads; unstreamed, the pairs' RegNetX s2 w8 152->152 @28 ran 1.36x
  // slower).
  constexpr bool kCanPair = !kPairs && V == 1 && kBlock * sizeof(T) == 32;
  const bool pair_tiles = kCanPair && !by_image && g.groups > 1 && cg == kBlock && og == kBlock && !pointwise;
  const int64_t unit_step = pair_tiles ? 2 : 1;          // blocks a unit computes
  const int64_t unit_blocks = CeilDiv(blocks, unit_step);  // units per image band
  while (band > 1 && unit_blocks * g.batch * ((g.in_rows + band - 1) / band) < 4 * threads) band = (band + 1) / 2;
  const int64_t bands = (g.in_rows + band - 1) / band;
  // A band's dy rows with their column padding, per thread: at most the dy rows that
  // exist, but as wide as the filter reaches, so a dilation far beyond the image would
  // ask for gigabytes of zeros. Past a bound the kernel declines (the GEMM rows run it).
  const int64_t dy_image = g.out_rows * g.out_cols * cout;
  const int64_t band_rows = std::min(band + reach, g.out_rows);
  const int64_t band_limit =
      std::max<int64_t>(kMaxPaddedBandBytes / static_cast<int64_t>(sizeof(T)), 2 * dy_image);
  // A grouped layer's band is copied group by group ([group][row][col][og]), so a
  // tile reads its group's channels dense, from L1: in dy itself a pixel's group lies
  // a row of all channels from the next pixel's, a multiple of 4 KiB at 1024 floats,
  // and every pixel a tile reads falls into the same few L1 sets (3x3 g32 512->512
  // @14, one thread: 7.3 -> 3.8 ms). A run of units copies the groups it reads,
  // a dy row at a time (from memory in order, not a group's strided run at a time).
  const bool pack_group = g.groups > 1 && !pointwise;
  const bool copy_rows = !by_image && (pad_cols || pack_group);
  const int64_t src_depth = zip ? kBlock : pack_group ? og : cout;  // values of a pixel in the copy
  const int64_t slab = band_rows * padded_cols * src_depth;  // one group's (or zipped pair's) copy
  if (copy_rows && padded_cols > band_limit / std::max<int64_t>(1, band_rows * cout)) return false;
  const int64_t dx_image = g.in_rows * g.in_cols * cin;
  // dx is written once, tile by tile: past one core's L2 it bypasses the caches (no
  // read for ownership of its lines, and dy and the filter keep L2; 2 threads, float32,
  // AMD EPYC: 1x1 256->64 @56 9.6 -> 5.6 ms, 3x3 s2 128->128 @56 13.2 -> 11.2 ms,
  // grouped 3x3 g32 512->512 @14 3.0 -> 2.2 ms). A block narrower than a 64-byte line
  // (8 floats on ymm) streams half lines, each its own memory transaction: that pays
  // while a stored vector sums every tap (grouped 3x3 g32 256->256 @28, 2 threads: 2.78
  // -> 2.35 ms streamed), not under a stride, whose dx rows take few taps each (AVX2,
  // RegNetX 3x3 s2 w8 152->152 @28, 2 threads: 0.87 -> 0.67 ms unstreamed). Every
  // block starts on a multiple of its size from dx (channels come in whole blocks).
  // On Intel, stores that straddle lines (dx pixels not a whole number of lines
  // apart: 7 or 19 groups of 8) streamed 1.65-2.0x slower than cached ones (Xeon,
  // AVX2 tiles, 2 threads, alternated in one process: RegNetX w8 56->56 @28 1.01 ->
  // 0.62 ms, s2 w8 152->152 @28 1.75 -> 0.87 ms), so there they are not streamed.
  const bool whole_lines = unit_step * kBlock * sizeof(T) % 64 == 0;
  const bool stream = !kPairs && (whole_lines || (sh == 1 && sw == 1)) && (!zip || cin % kBlock == 0) &&
                      g.input_elements * static_cast<int64_t>(sizeof(T)) >= kStreamDxBytes &&
                      reinterpret_cast<uintptr_t>(dx) % 64 == 0 &&
                      (cin * static_cast<int64_t>(sizeof(T)) % 64 == 0 || !SplitLineStreamsAreSlow());
  // `pixels` dx pixels `dx_stride` apart reading consecutive dy pixels, dy_stride
  // apart (row_dy at the group's first output channel).
  const DirectPair pair{slab, taps * og * kBlock};  // the next group's copy and packed filter
  auto RunRow = [&](const T* row_dy, int64_t dy_stride, const DirectTap* row_taps, int ntaps, const T* w_block,
                    int64_t nblocks, T* row_dx, int64_t dx_stride, int64_t pixels, bool lone = false) {
    if constexpr (kPairs) {
#if defined(__AVX512F__)
      DirectInputRowBf16<R, V>(row_dy, dy_stride, row_taps, ntaps, w_block, row_dx, dx_stride, pixels);
#endif
    } else if (kCanZip && zip) {
      if constexpr (kCanZip) {
        DirectPair single;
        single.lone = lone;
        DirectInputRow<T, R, 1, kBlock, false, true>(row_dy, dy_stride, row_taps, ntaps, w_block, single, row_dx,
                                                     dx_stride, pixels, stream && !lone);
      }
    } else if (kCanPair && nblocks == 2) {  // pair_tiles
      if constexpr (kCanPair) {
        DirectInputRow<T, kTileRows[2], 2, kBlock, true>(row_dy, dy_stride, row_taps, ntaps, w_block, pair, row_dx,
                                                         dx_stride, pixels, stream);
      }
    } else if (dy_stride == kBlock) {
      // A tile's R dy pixels, each a runtime stride apart, take R address registers,
      // more than x86 has beside the loop's own: some reload from the stack on every
      // output channel. At a stride known to the compiler (a grouped layer's packed
      // band with a group of one block) each is an offset from one register
      // (input gradients in TF, 1 thread, medians of 3 processes: RegNetX w8 56->56 @28,
      // AVX2 tiles, 0.98 -> 0.82 ms; ResNeXt g32 256->256 @28 3.87 -> 3.58 ms; RegNetX
      // s2 w16 160->160 @28, zmm tiles, 0.99 -> 0.91 ms).
      DirectInputRow<T, R, V, kBlock>(row_dy, dy_stride, row_taps, ntaps, w_block, {}, row_dx, dx_stride, pixels,
                                      stream);
    } else {
      DirectInputRow<T, R, V, 0>(row_dy, dy_stride, row_taps, ntaps, w_block, {}, row_dx, dx_stride, pixels, stream);
    }
  };
  const int64_t units_per_block = g.batch * bands;
  // Row tiles with blocks outermost still keep as many blocks as fit in L2 together:
  // units run in chunks of them, a band's units inner to its chunk, so that a band's
  // dy rows (and their padded copy) serve a chunk of blocks, not one (AVX2, 16 blocks of
  // 144 KiB in chunks of 5; 2 threads, kernel only, alternated with the blocks one by
  // one, batch 8: DeepLab 3x3 d2 256->256 @33 0.86-0.93x the time, 4 runs; 3x3 256->256
  // @28 0.89-0.92; 512->512 @28 0.93-0.94. AVX-512's blocks of 576 KiB stay one to a
  // chunk). Unit u -> its unit block and image band.
  const int64_t chunk =
      block_inner ? unit_blocks
                  : std::clamp<int64_t>(kL2BlockBytes / (unit_step * block_size * static_cast<int64_t>(sizeof(T))), 1,
                                        unit_blocks);
  struct Unit {
    int64_t ub, image_band;
    int64_t first_block, chunk_blocks;  // the blocks of its chunk
  };
  auto unit_of = [&](int64_t u) {
    const int64_t first_ub = u / (chunk * units_per_block) * chunk, chunk_ubs = std::min(chunk, unit_blocks - first_ub);
    const int64_t r = u - first_ub * units_per_block, first_block = first_ub * unit_step;
    return Unit{first_ub + r % chunk_ubs, r / chunk_ubs, first_block,
                std::min(blocks, (first_ub + chunk_ubs) * unit_step) - first_block};
  };
  // The dy rows a band of dx rows reads, oh = (ih + pad_top - kh*dh) / sh clipped to
  // the image (none when lo > hi).
  struct RowSpan {
    int64_t lo, hi;
  };
  auto band_dy_rows = [&](int64_t image_band) {
    const int64_t ih0 = (image_band % bands) * band, ih1 = std::min(g.in_rows, ih0 + band);
    return RowSpan{std::max<int64_t>(0, CeilDiv(ih0 + g.pad_top - reach, sh)),
                   std::min(g.out_rows - 1, (ih1 - 1 + g.pad_top) / sh)};
  };
  // While a band's units run one after another (blocks inner), the next band's dy
  // rows come into L2, a share per step of a unit (a dx row), so that the next band
  // does not wait on memory: its copy in the row path, its tiles' first block in the
  // pointwise one.
  struct DyRange {
    const T* data = nullptr;
    int64_t count = 0;
  };
  auto next_band_dy = [&](int64_t image_band) {
    const RowSpan next = band_dy_rows(image_band + 1);
    if (!block_inner || image_band + 1 >= g.batch * bands || next.lo > next.hi) return DyRange{};
    return DyRange{dy + ((image_band + 1) / bands * g.out_rows + next.lo) * g.out_cols * cout,
                   (next.hi + 1 - next.lo) * g.out_cols * cout};
  };
  auto prefetch_share = [&](const DyRange& next, int64_t ub, int64_t steps, int64_t step) {
    const int64_t share = CeilDiv(next.count, unit_blocks * steps);
    const int64_t ahead = std::min(next.count, (ub * steps + step) * share);
    Prefetch(next.data + ahead, std::min(share, next.count - ahead));
  };
  const int64_t work = band * g.in_cols * taps * kBlock * og;
  const int64_t classes = std::min(sw, g.in_cols);  // column classes rho
  if (by_image) {
    // Per dx pixel, the taps that reach it: their dy pixel in image 0 and filter tap.
    const int64_t positions = g.in_rows * g.in_cols;
    ScratchVector<DirectTap> pixel_taps;
    ScratchVector<int64_t> pixel_start;
    for (int64_t ih = 0; ih < g.in_rows; ++ih) {
      for (int64_t iw = 0; iw < g.in_cols; ++iw) {
        pixel_start.push_back(static_cast<int64_t>(pixel_taps.size()));
        for (int64_t kh = 0; kh < kh_n; ++kh) {
          const int64_t t = ih + g.pad_top - kh * g.dilation_rows;
          if (t < 0 || t % sh != 0 || t / sh >= g.out_rows) continue;
          for (int64_t kw = kw_n - 1; kw >= 0; --kw) {
            const int64_t q = iw + g.pad_left - kw * g.dilation_cols;
            if (q < 0 || q % sw != 0 || q / sw >= g.out_cols) continue;
            AppendTap({(t / sh * g.out_cols + q / sw) * cout, (kh * kw_n + kw_n - 1 - kw) * og * kBlock, og},
                      pixel_start.back(), kBlock, &pixel_taps);
          }
        }
      }
    }
    pixel_start.push_back(static_cast<int64_t>(pixel_taps.size()));
    ctx.For(unit_blocks * positions, g.batch * taps * kBlock * og * unit_step, [&](int64_t begin, int64_t end) {
      OwnBlock own;
      for (int64_t u = begin; u < end; ++u) {
        const int64_t ub = block_inner ? u % unit_blocks : u / positions;
        const int64_t pos = block_inner ? u / unit_blocks : u % positions;
        const int64_t b = ub * unit_step, nblocks = std::min(unit_step, blocks - b);
        const T* w_block = block_weights(own, b, nblocks);
        T* dx_pixel = dx + pos * cin + b * kBlock;
        const int64_t first = pixel_start[pos];
        const int ntaps = static_cast<int>(pixel_start[pos + 1] - first);
        if (ntaps == 0) {
          for (int64_t n = 0; n < g.batch; ++n) std::fill_n(dx_pixel + n * dx_image, nblocks * kBlock, T(0));
        } else {
          RunRow(dy, dy_image, pixel_taps.data() + first, ntaps, w_block, nblocks, dx_pixel, dx_image, g.batch);
        }
      }
      if (stream) _mm_sfence();
    });
    return true;
  }
  ctx.For(unit_blocks * units_per_block, work * unit_step, [&](int64_t begin, int64_t end) {
    // What a unit's image band needs, prepared once for the run of consecutive units
    // in it: its dy rows (with their column padding, or a group's channels) and, per
    // dx row and column class, the taps that reach it (where their dy starts, which
    // filter tap). The tap list costs divisions per tap, which a grouped block's few
    // products a row could not pay for again and again.
    // Zero-filled although the rows a band's taps read are all written before they are
    // read: left uninitialised, 3x3 g32 256->256 @28 (one thread) ran 6% slower.
    ScratchVector<T> rows_buf(copy_rows ? band_rows * padded_cols * (zip ? blocks * kBlock : cout) : 0);
    OwnBlock own;
    ScratchVector<DirectTap> band_taps;
    ScratchVector<int64_t> class_start;  // (ih - ih0) * classes + rho -> first band_taps entry
    int64_t prepared = -1;   // the image band rows_buf and the tap list hold
    int64_t first_group = 0;  // the first group in rows_buf
    DyRange next_band;  // the next image band's dy rows
    for (int64_t u = begin; u < end; ++u) {
      const Unit unit = unit_of(u);
      const int64_t ub = unit.ub, image_band = unit.image_band;
      const int64_t b = ub * unit_step, nblocks = std::min(unit_step, blocks - b);
      const int64_t n = image_band / bands, ih0 = (image_band % bands) * band;
      const T* w_block =
          block_weights(own, unit.first_block, unit.chunk_blocks) + (b - unit.first_block) * block_size;
      const int64_t group = group_of(b);
      const bool lone = zip && 2 * b + 1 == g.groups;  // a zipped block with one group
      const int64_t ih1 = std::min(g.in_rows, ih0 + band);
      const T* dy_n = dy + n * dy_image;
      if (pointwise) {
        // The band's pixels are one contiguous run in dy and dx, taken a dx row's worth
        // of whole tiles at a time, each step prefetching its share of the next band
        // (AVX2, 2 threads, kernel only, alternated: 1x1 64->256 @56 0.84-0.98x the
        // time, 3 runs; 1x1 256->64 @56 and 1024->256 @14, and AVX-512, 0.95-1.04).
        const DirectTap tap{0, 0, og};
        const DyRange next = next_band_dy(image_band);
        const int64_t pixels = (ih1 - ih0) * g.in_cols, piece = CeilDiv(g.in_cols, int64_t{R}) * R;
        for (int64_t step = 0; step * piece < pixels; ++step) {
          prefetch_share(next, ub, ih1 - ih0, step);
          const int64_t p0 = ih0 * g.in_cols + step * piece;
          RunRow(dy_n + p0 * cout + group * og, cout, &tap, 1, w_block, nblocks, dx + n * dx_image + p0 * cin + b * kBlock,
                 cin, std::min(piece, pixels - step * piece));
        }
        continue;
      }
      const RowSpan dy_rows = band_dy_rows(image_band);
      const int64_t oh_lo = dy_rows.lo, oh_hi = dy_rows.hi;
      // dy row oh starts at src + (oh - src_row0) * src_cols * src_depth.
      const bool copied_rows = copy_rows && oh_lo <= oh_hi;
      const int64_t src_row0 = copied_rows ? oh_lo : 0, src_cols = copied_rows ? padded_cols : g.out_cols;
      const int64_t src_left = copied_rows ? left : 0;
      if (image_band != prepared) {
        prepared = image_band;
        if (copied_rows) {
          // The groups of this run's units in the band (blocks are inner: all of the
          // band's units lie together).
          first_group = pack_group ? slab_of(std::max(begin, image_band * unit_blocks) % unit_blocks * unit_step) : 0;
          const int64_t last_ub = (std::min(end, (image_band + 1) * unit_blocks) - 1) % unit_blocks;
          const int64_t last_group =
              pack_group ? slab_of(std::min(blocks, (last_ub + 1) * unit_step) - 1) : 0;
          for (int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
            for (int64_t k = first_group; k <= last_group; ++k) {
              T* d = rows_buf.data() + (k - first_group) * slab + (oh - oh_lo) * padded_cols * src_depth;
              std::fill_n(d, left * src_depth, T(0));
              const T* row = dy_n + oh * g.out_cols * cout + k * src_depth;
              if (zip) {
                ZipGroupPairs(row, cout, 2 * k + 1 == g.groups, g.out_cols, d + left * src_depth);
              } else {
                CopyChannels(row, cout, src_depth, g.out_cols, d + left * src_depth);
              }
              std::fill_n(d + (left + g.out_cols) * src_depth, (padded_cols - left - g.out_cols) * src_depth, T(0));
            }
          }
        }
        band_taps.clear();
        class_start.clear();
        for (int64_t ih = ih0; ih < ih1; ++ih) {
          // Column class rho: dx columns rho + sw*j read dy columns j + offset(kw)
          // for the taps whose offset divides (every tap when sw == 1).
          for (int64_t rho = 0; rho < classes; ++rho) {
            class_start.push_back(static_cast<int64_t>(band_taps.size()));
            for (int64_t kh = 0; kh < kh_n; ++kh) {
              const int64_t t = ih + g.pad_top - kh * g.dilation_rows;
              if (t < 0 || t % sh != 0 || t / sh >= g.out_rows) continue;
              const int64_t oh = t / sh;
              for (int64_t kw = kw_n - 1; kw >= 0; --kw) {
                const int64_t q = rho + g.pad_left - kw * g.dilation_cols;
                if (FloorDiv(q, sw) * sw != q) continue;
                // dy column read by the class's first dx column, in the source rows.
                const int64_t col = q / sw + src_left;
                AppendTap({((oh - src_row0) * src_cols + col) * src_depth, (kh * kw_n + kw_n - 1 - kw) * og * kBlock,
                           og},
                          class_start.back(), kBlock, &band_taps, zip ? 2 : 1);
              }
            }
          }
        }
        class_start.push_back(static_cast<int64_t>(band_taps.size()));
        // The next band's dy rows come into L2 while this band computes (2 threads: 3x3
        // g32 256->256 @28 2.87 -> 2.62 ms, g32 512->512 @14 1.40 -> 1.35 ms, RegNetX
        // w16 64->64 @28 0.72 -> 0.70 ms; others unchanged).
        next_band = next_band_dy(image_band);
      }
      const T* src = copied_rows ? rows_buf.data() + (slab_of(b) - first_group) * slab : dy_n;
      for (int64_t ih = ih0; ih < ih1; ++ih) {
        prefetch_share(next_band, ub, ih1 - ih0, ih - ih0);
        T* dx_block = dx + n * dx_image + ih * g.in_cols * cin + b * kBlock;
        for (int64_t rho = 0; rho < classes; ++rho) {
          const int64_t at = (ih - ih0) * classes + rho, first = class_start[at];
          const int ntaps = static_cast<int>(class_start[at + 1] - first);
          const int64_t count = (g.in_cols - rho + sw - 1) / sw;
          if (ntaps == 0) {
            const int64_t width = lone ? kBlock / 2 : nblocks * kBlock;
            for (int64_t j = 0; j < count; ++j) std::fill_n(dx_block + (rho + j * sw) * cin, width, T(0));
          } else {
            RunRow(src, src_depth, band_taps.data() + first, ntaps, w_block, nblocks, dx_block + rho * cin, sw * cin,
                   count, lone);
          }
        }
      }
    }
    if (stream) _mm_sfence();  // streamed dx visible before the pool reports done
  });
  return true;
}

// The tile width V (vectors of input channels): the widest that divides Cin
// and whose block of the packed filter ([tap][co][lanes*V]) stays in L2, which
// every tile streams once. 3x3 512->512 @7, 2 threads: V=4
// blocks of 1.2 MB ran 9% (float) and 6% (double) slower than V=2 blocks of
// 0.6 MB; with 0.6 MB blocks (3x3 256->256 @14) V=4 is 3% faster than V=2.
template <typename T, typename Fn>
bool WithCinVectors(const ConvGeometry& g, Fn&& fn) {
  constexpr int64_t kLanes = DirectLanes<T>();
  const int64_t tap_bytes = g.filter_rows * g.filter_cols * g.group_out_depth() * kLanes *
                            static_cast<int64_t>(sizeof(T));
  auto fits = [&](int64_t v) {
    return g.group_in_depth() % (v * kLanes) == 0 && v * tap_bytes <= kL2BlockBytes;
  };
  // Short rows cut into low tiles at V=4 stream the block once per few pixels:
  // a row of 7 runs as 4 + 3 pixels at V=4, as one tile of 7 at V=2 (3x3 @7,
  // 2 threads: float and double 5%, bfloat16 9% faster; rows of 14 are even).
  // A 1x1 stride-1 band runs its rows as one.
  const int64_t row = ImageTiles(g) ? g.batch
                    : g.filter_rows * g.filter_cols == 1 && g.stride_cols == 1
                          ? g.in_rows * g.in_cols
                          : CeilDiv(g.in_cols, g.stride_cols);
  if constexpr (kMaxTileVectors == 4) {
    auto tile_height = [&](int v) { return static_cast<double>(row) / CeilDiv(row, kTileRows[v]); };
    const bool short_rows = tile_height(4) < 4 && tile_height(2) > tile_height(4);
    if (fits(4) && !(short_rows && fits(2))) return fn(std::integral_constant<int, 4>());
  }
  if (fits(2)) return fn(std::integral_constant<int, 2>());
  return fn(std::integral_constant<int, 1>());
}

// Input channels in whole vectors (cpu/select.cc). False, dx untouched, for a
// non-finite filter.
template <typename T>
bool DirectInputGrad(const CpuContext& ctx, const ConvGeometry& g, const T* filter, const T* dy,
                     T* dx) {
  return WithCinVectors<T>(g, [&](auto v) {
    return DirectInputGradImpl<T, decltype(v)::value>(ctx, g, filter, dy, dx);
  });
}

#if defined(__AVX512F__)
// bfloat16 (as its bits): the same kernel with vdpbf16ps tiles, for CPUs with
// AVX512_BF16 and an even Cout (cpu/select.cc); false leaves dx untouched.
bool DirectInputGradBf16(const CpuContext& ctx, const ConvGeometry& g, const uint16_t* filter,
                         const uint16_t* dy, uint16_t* dx) {
  return WithCinVectors<uint16_t>(g, [&](auto v) {
    return DirectInputGradImpl<uint16_t, decltype(v)::value>(ctx, g, filter, dy, dx);
  });
}

#endif  // __AVX512F__

// ---- Filter gradient ------------------------------------------------------------
//   dW[kh, kw, ci, co] = sum over (n, oh, ow) of
//       x[n, oh*sh + kh*dh - pad_top, ow*sw + kw*dw - pad_left, ci] * dy[n, oh, ow, co]
// A register tile of R input channels x V vectors of output channels of one
// tap sums over pixels: per pixel it loads V dy vectors and broadcasts R x
// values. For a tap and a row of dy, the pixels whose x column is inside the
// image form one contiguous run of ow (a "segment"), so no padding and no
// bounds tests in the loop, for any stride and dilation.
//
// Work: each thread owns a fixed, contiguous set of (tap, channel tile) units,
// i.e. disjoint slices of dW, and walks all pixels in blocks of dy rows small
// enough for L2; every unit of the thread reuses the block before the next one
// is read. A dW element is therefore summed block by block in row order by one
// thread: the result does not depend on the thread count.

// One run of pixels: x and dy at its first pixel, `count` pixels whose x values
// are x_stride apart (dy values are cout apart).
template <typename T>
struct FilterSegment {
  const T* x;
  const T* dy;
  int64_t count;
};

// Vectors and broadcasts of T from In data: In == T, or bfloat16 bits (uint16_t)
// widened to float in registers (exact), so bfloat16 needs no conversion pass.
template <typename T, typename In>
inline typename Vreg<T>::Vec LoadAs(const In* p) {
  if constexpr (std::is_same_v<In, T>) {
    return Vreg<T>::Load(p);
  } else {
    static_assert(std::is_same_v<T, float> && std::is_same_v<In, uint16_t>, "bfloat16 -> float");
#if defined(__AVX512F__)
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
#else
    // The widening tiles are an AVX-512 row: at AVX2 they lost to the front end's
    // conversion on 3x3 layers (0.63-0.82x).
    static_assert(!std::is_same_v<In, uint16_t>, "bfloat16 widening is AVX-512 only");
#endif
  }
}
template <typename T, typename In>
inline typename Vreg<T>::Vec BroadcastAs(In v) {
  if constexpr (std::is_same_v<In, T>) {
    return Vreg<T>::Broadcast(v);
  } else {
#if defined(__AVX512F__)
    return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int32_t>(uint32_t{v} << 16)));
#else
    static_assert(!std::is_same_v<In, uint16_t>, "bfloat16 widening is AVX-512 only");
#endif
  }
}

// kPlanarX: x is NCHW, its channels x_planes apart (else x_planes is 1).
// x_ahead: where, relative to a pixel's x, to prefetch the x of a later pixel.
// kZip: x and dy hold two groups of 8 zipped (ZipGroupPairs), x pairs broadcast as one
// 64-bit value, dW unzipped at the store; lone: the second group does not exist.
template <typename T, typename In, int R, int V, bool kPlanarX, bool kZip = false>
inline void DirectFilterTile(const FilterSegment<In>* segs, int nsegs, int64_t x_stride, int64_t x_planes,
                             int64_t x_ahead, int64_t dy_stride, bool first, T* dw, int64_t dw_stride,
                             bool lone = false) {
  constexpr int kLanes = Vreg<T>::kLanes;
  static_assert(!kZip || (V == 1 && std::is_same_v<In, float> && kLanes == 16 && !kPlanarX), "zipped: zmm floats");
  typename Vreg<T>::Vec acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      if constexpr (kZip) {
#if defined(__AVX512F__)
        acc[r][v] = first ? Vreg<T>::Zero() : ZipLoad(dw + r * dw_stride, lone);
#endif
      } else {
        acc[r][v] = first ? Vreg<T>::Zero() : Vreg<T>::Load(dw + r * dw_stride + kLanes * v);
      }
    }
  }
  for (int s = 0; s < nsegs; ++s) {
    const In* x = segs[s].x;
    const In* d = segs[s].dy;
    for (int64_t i = 0; i < segs[s].count; ++i, x += x_stride, d += dy_stride) {
      _mm_prefetch(reinterpret_cast<const char*>(x + x_ahead), _MM_HINT_T0);
      typename Vreg<T>::Vec dv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) dv[v] = LoadAs<T>(d + kLanes * v);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        if constexpr (kZip) {
#if defined(__AVX512F__)
          acc[r][0] = Vreg<T>::Fma(ZipBroadcast(x + 2 * r), dv[0], acc[r][0]);
#endif
        } else {
          const typename Vreg<T>::Vec b = BroadcastAs<T>(x[kPlanarX ? r * x_planes : r]);
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v) acc[r][v] = Vreg<T>::Fma(b, dv[v], acc[r][v]);
        }
      }
    }
  }
  if constexpr (kZip) {
#if defined(__AVX512F__)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) UnzipStore(dw + r * dw_stride, acc[r][0], false, lone);
#endif
    return;
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) Vreg<T>::Store(dw + r * dw_stride + kLanes * v, acc[r][v]);
  }
}

#if defined(__AVX512F__)
// The zipped tile for the KW = 3 taps of one filter row at once, along rows of unit
// column stride: x column iw meets dy column ow = iw + pad_left - kw * dil through tap
// kw, so one broadcast x pair feeds all three taps' products (24 accumulators; why
// that pays: ZippedRowRun). Pixels are summed in the same order as DirectFilterTile's,
// so the sums are the same bits. segs: x at column 0 of an input row, dy at column 0
// of the dy row that reads it through this filter row; dw at tap (kh, 0), taps
// tap_stride apart.
inline void ZippedFilterRowTaps(const FilterSegment<float>* segs, int nsegs, int64_t in_cols, int64_t out_cols,
                                int64_t pad_left, int64_t dil, bool first, float* dw, int64_t tap_stride,
                                int64_t dw_stride, bool lone) {
  constexpr int R = 8, KW = 3;
  __m512 acc[KW][R];
#pragma GCC unroll 3
  for (int kw = 0; kw < KW; ++kw) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[kw][r] = first ? _mm512_setzero_ps() : ZipLoad(dw + kw * tap_stride + r * dw_stride, lone);
    }
  }
  // The columns [lo, hi) whose three taps all meet a dy column.
  const int64_t lo = std::min(in_cols, std::max<int64_t>(0, (KW - 1) * dil - pad_left));
  const int64_t hi = std::max(lo, std::min(in_cols, out_cols - pad_left));
  for (int s = 0; s < nsegs; ++s) {
    const float* x = segs[s].x;
    for (int64_t iw = 0; iw < in_cols; ++iw) {
      if (iw < lo || iw >= hi) {  // an edge column: only the taps that meet a dy column
#pragma GCC unroll 3
        for (int kw = 0; kw < KW; ++kw) {
          const int64_t ow = iw + pad_left - kw * dil;
          if (ow < 0 || ow >= out_cols) continue;
          const __m512 dv = _mm512_loadu_ps(segs[s].dy + ow * 16);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) acc[kw][r] = _mm512_fmadd_ps(ZipBroadcast(x + iw * 16 + 2 * r), dv, acc[kw][r]);
        }
        continue;
      }
      const float* d = segs[s].dy + (iw + pad_left) * 16;  // tap 0's dy column
      const __m512 d0 = _mm512_loadu_ps(d), d1 = _mm512_loadu_ps(d - dil * 16), d2 = _mm512_loadu_ps(d - 2 * dil * 16);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 b = ZipBroadcast(x + iw * 16 + 2 * r);
        acc[0][r] = _mm512_fmadd_ps(b, d0, acc[0][r]);
        acc[1][r] = _mm512_fmadd_ps(b, d1, acc[1][r]);
        acc[2][r] = _mm512_fmadd_ps(b, d2, acc[2][r]);
      }
    }
  }
#pragma GCC unroll 3
  for (int kw = 0; kw < KW; ++kw) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) UnzipStore(dw + kw * tap_stride + r * dw_stride, acc[kw][r], false, lone);
  }
}
#endif

template <typename T, typename In, int V, bool kPlanarX, bool kZip = false>
void DirectFilterTileAnyRows(int rows, const FilterSegment<In>* segs, int nsegs, int64_t x_stride,
                             int64_t x_planes, int64_t x_ahead, int64_t dy_stride, bool first, T* dw,
                             int64_t dw_stride, bool lone = false) {
  constexpr int R = kFilterTileRows[V];
  switch (rows) {
#define TCB_TILE(n)                                                                                          \
  case n:                                                                                                    \
    if constexpr (n <= R) {                                                                                  \
      DirectFilterTile<T, In, n, V, kPlanarX, kZip>(segs, nsegs, x_stride, x_planes, x_ahead, dy_stride, first, dw, \
                                                    dw_stride, lone);                                        \
    }                                                                                                        \
    break;
    TCB_TILE(1) TCB_TILE(2) TCB_TILE(3) TCB_TILE(4) TCB_TILE(5) TCB_TILE(6) TCB_TILE(7)
    TCB_TILE(8) TCB_TILE(9) TCB_TILE(10) TCB_TILE(11) TCB_TILE(12) TCB_TILE(13) TCB_TILE(14)
    TCB_TILE(15) TCB_TILE(16)
#undef TCB_TILE
    default: break;
  }
}

// Tile heights for `channels` input channels in tiles of at most `max_rows`: the
// fewest tiles, near-equal (64 channels at 12 a tile run as 11+11+11+11+11+9,
// not 12*5 + 4: a short tile loads as many dy vectors for fewer products).
inline int BalancedTileRows(int64_t channels, int max_rows) {
  const int64_t tiles = (channels + max_rows - 1) / max_rows;
  return static_cast<int>((channels + tiles - 1) / tiles);
}

constexpr int64_t kPrefetchPixels = 16;

// Whether each thread first copies a block of pixels into tile order: x as
// [tile of R input channels][pixel][R], a row's columns ordered by their phase of
// the column stride so that every tap's run of pixels is contiguous, and dy as
// [vector block of output channels][pixel][kLanes*V]. Every unit then streams
// both with unit stride, and all taps share one copy of x. The ymm tiles sum half
// the products per value read that the zmm tiles do; read in place, dy comes from
// L2 one 64-byte line a pixel, a tensor row apart, and each unit gathered its x
// again (AVX2, 3x3, batch 8, 2 threads, Zen 4, kernel only, medians of 3 runs
// against per-unit x gathers and dy in place: 64->64 @56 0.70x the time, 256->256
// @14 0.81x, 512->512 @7 0.85x, s2 128->128 @56 0.83x, 256->256 @33 batch 4 0.78x).
// At AVX-512 the copy of dy cost 1.0-1.14x: its tiles read x in place.
#if defined(__AVX512F__)
constexpr bool kTileOrderFilterBlocks = false;
#else
constexpr bool kTileOrderFilterBlocks = true;
#endif

// dy rows per pixel block: the block's dy and the x rows its taps read stay
// in L2 while every unit of a thread passes over them.
constexpr int64_t kDirectFilterBlockBytes = int64_t{384} << 10;
// Packed grouped blocks (below) read each group's channels once a block: larger
// blocks cost no more reads and spread each tile's start over more pixels (3x3 g32
// 1024->1024 @7, one thread: 4.3 ms at 384 KiB, 3.7 ms at 768 KiB).
constexpr int64_t kPackedFilterBlockBytes = int64_t{768} << 10;
constexpr int64_t kMaxBlockRows = 64;

// The filter gradient's schedule (see above): each thread owns a fixed,
// contiguous run of the units (group, tap, tile of R of the group's cg input
// channels) and walks dy rows [0, rows) in blocks of block_rows, in order. Per
// block, enter(group, r0, r1, scratch) runs before the first unit of each group;
// per block and tap, segments(t, r0, r1, segs, scratch) lists the tap's pixel runs
// and returns how many; then tile(t, group, ci0, channels, segs, nsegs, first_block,
// scratch) runs each unit of the tap (ci0 within the group), with `scratch_count`
// elements of Scratch of its thread's own. Groups outermost: a grouped layer's
// units of one group read the same few channels of the block for all its taps.
template <typename Seg, typename Scratch, typename Enter, typename Segments, typename Tile>
void ForFilterUnits(const CpuContext& ctx, int64_t taps, int64_t groups, int64_t cg, int64_t R, int64_t rows,
                    int64_t block_rows, int64_t cost_per_unit, int64_t scratch_count, Enter&& enter,
                    Segments&& segments, Tile&& tile) {
  const int64_t ci_tiles = (cg + R - 1) / R, units = groups * taps * ci_tiles;
  const int64_t shards = std::min<int64_t>(std::max(1, ctx.num_threads), units);
  ctx.For(shards, cost_per_unit * units / shards, [&](int64_t begin, int64_t end) {
    Seg segs[kMaxBlockRows];
    ScratchBuffer<Scratch> scratch(scratch_count);
    for (int64_t s = begin; s < end; ++s) {
      const int64_t u0 = ShardStart(units, shards, s), u1 = ShardStart(units, shards, s + 1);
      for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
        const int64_t r1 = std::min(rows, r0 + block_rows);
        int64_t built_tap = -1, entered = -1;
        int nsegs = 0;
        for (int64_t u = u0; u < u1; ++u) {
          const int64_t group = u / (taps * ci_tiles), t = u / ci_tiles % taps, ci0 = (u % ci_tiles) * R;
          if (group != entered) entered = group, enter(group, r0, r1, scratch.data());
          if (t != built_tap) built_tap = t, nsegs = segments(t, r0, r1, segs, scratch.data());
          tile(t, group, ci0, static_cast<int>(std::min<int64_t>(R, cg - ci0)), segs, nsegs, r0 == 0,
               scratch.data());
        }
      }
    }
  });
}

// The x rows (n * in_rows + ih, over the batch) that dy rows [r0, r1) read, clipped
// to their images: how many, from *first.
inline int64_t FilterXRows(const ConvGeometry& g, int64_t r0, int64_t r1, int64_t* first) {
  const int64_t reach = (g.filter_rows - 1) * g.dilation_rows;
  const auto row_of = [&](int64_t r, int64_t offset) {
    const int64_t ih = (r % g.out_rows) * g.stride_rows - g.pad_top + offset;
    return r / g.out_rows * g.in_rows + std::max<int64_t>(0, std::min(g.in_rows - 1, ih));
  };
  *first = row_of(r0, 0);
  return row_of(r1 - 1, reach) - *first + 1;
}

// The most x rows any block of block_rows dy rows reads (its scratch copy's rows).
inline int64_t MaxFilterXRows(const ConvGeometry& g, int64_t block_rows) {
  const int64_t rows_total = g.batch * g.out_rows;
  int64_t most = 0, first = 0;
  for (int64_t r0 = 0; r0 < rows_total; r0 += block_rows) {
    most = std::max(most, FilterXRows(g, r0, std::min(rows_total, r0 + block_rows), &first));
  }
  return most;
}

// The pixel runs of filter row kh over dy rows [r0, r1), `count` pixels each: one a dy
// row whose input row through kh lies in the image, x at x_rows plus that input row's
// offset from the block's first (FilterXRows) in rows of x_row_elems, dy at dy_rows plus
// the dy row's offset from r0 in rows of dy_row_elems. Returns how many.
template <typename In>
int FilterRowSegments(const ConvGeometry& g, int64_t kh, int64_t r0, int64_t r1, const In* x_rows,
                      int64_t x_row_elems, const In* dy_rows, int64_t dy_row_elems, int64_t count,
                      FilterSegment<In>* segs) {
  int64_t first = 0;
  FilterXRows(g, r0, r1, &first);
  int nsegs = 0;
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t n = row / g.out_rows, oh = row % g.out_rows;
    const int64_t ih = oh * g.stride_rows + kh * g.dilation_rows - g.pad_top;
    if (ih < 0 || ih >= g.in_rows) continue;
    segs[nsegs++] = FilterSegment<In>{x_rows + (n * g.in_rows + ih - first) * x_row_elems,
                                      dy_rows + (row - r0) * dy_row_elems, count};
  }
  return nsegs;
}

// kPlanarX: x in NCHW (dy is always NHWC). accumulate: add to dW instead of
// overwriting it (NCHW takes the batch in chunks).
template <typename T, int V, typename In = T, bool kPlanarX = false>
void DirectFilterGradImpl(const CpuContext& ctx, const ConvGeometry& g, const In* x,
                          const In* dy, T* dw, bool accumulate = false) {
  constexpr int kLanes = Vreg<T>::kLanes;
  const int64_t cin = g.in_depth, cout = g.out_depth;
  // A unit's input channels lie in one group, its output channels are that group's
  // (dense: one group of all of them).
  const int64_t cg = g.group_in_depth(), og = g.group_out_depth();
  const int R = BalancedTileRows(cg, kFilterTileRows[V]);
  const int64_t kw_n = g.filter_cols, taps = g.filter_rows * kw_n;
  // Groups of 8 floats in and out on zmm: two groups a unit, x and dy zipped (see
  // DirectFilterTile), the last alone for an odd count. Against the AVX2 build's ymm
  // tiles, as for the input gradient: RegNetX w8 56->56 @28 1.27x faster, s2 w8
  // 152->152 @28 1.29x, ResNeXt g32 256->256 @28 1.47x, g16 128->128 @56 1.46x.
  constexpr bool kCanZip = std::is_same_v<In, float> && kLanes == 16 && V == 1 && !kPlanarX;
  const bool zip = kCanZip && g.groups > 1 && 2 * cg == kLanes && 2 * og == kLanes;
  const int64_t unit_groups = zip ? CeilDiv(g.groups, int64_t{2}) : g.groups;  // ForFilterUnits' groups
  const int64_t co_blocks = zip ? 1 : og / (kLanes * V);
  const int64_t rows_total = g.batch * g.out_rows;  // dy rows of the whole batch
  // Grouped NHWC: before a group's units run on a block, the group's channels of the
  // x and dy rows the block reads are packed dense, where L1 holds them for all its
  // taps. In x and dy themselves a pixel's group lies a row of all channels from the
  // next pixel's, a multiple of 4 KiB at 1024 floats, so the pixels a tile reads all
  // fall into the same few L1 sets (3x3 g32 1024->1024 @7, one thread: 8.1 ms with
  // the gathers below, 10.5 without, 4.3 packed). Where the packed time went (3x3 g32
  // 256->256 @28, zipped pairs, Zen 4, inputs from DRAM, one thread, a tap a unit):
  // 4.0-4.2 ms, the tiles alone 2.8 (one 64-bit broadcast an FMA, see ZippedRowRun),
  // the packing alone 1.4-1.5 (one 64-byte line a pixel, ~10 GB/s; 0.8-1.1 ms from L3;
  // the same with x and dy on huge pages, so not the TLB). Prefetching the next group's
  // lines into L2 during this group's tiles, a line a pixel: 0.90x with one thread but
  // 0.97-1.02x with two (they share DRAM); packed blocks of 1.5 or 3 MiB: no change.
  const bool pack = !kPlanarX && g.groups > 1;
  const int64_t row_bytes =
      (g.out_cols * cout + g.in_cols * cin) * static_cast<int64_t>(sizeof(In));
  const int64_t block_rows = std::max<int64_t>(
      1, std::min(kMaxBlockRows, (pack ? kPackedFilterBlockBytes : kDirectFilterBlockBytes) / row_bytes));
  // A pixel's channels as read (zipped: a pair's, 16).
  const int64_t x_depth = zip ? kLanes : pack ? cg : cin, dy_depth = zip ? kLanes : pack ? og : cout;
  // Blocks copied into tile order (see kTileOrderFilterBlocks); for one block of
  // output channels the copy of x would cost as much as the tile.
  const bool tiled = kTileOrderFilterBlocks && !pack && co_blocks > 1;
  const int64_t max_x_rows = pack || tiled ? MaxFilterXRows(g, block_rows) : 0;  // the most x rows of a block
  const int64_t packed_x = pack ? max_x_rows * g.in_cols * x_depth : 0;  // the packed dy follows the packed x
  const int64_t x_planes = kPlanarX ? g.in_rows * g.in_cols : 1;
  const int64_t x_stride = g.stride_cols * (kPlanarX ? 1 : x_depth);
  // A 1x1 filter reads each pixel's x once per tile, a new cache line every
  // pixel: fetch it kPrefetchPixels ahead (measured on 1x1 256->64 @56, kernel
  // only: double 17-19 -> 13-14 ms, float 6.7-7.9 -> 6.6-7.1 ms; 3x3 even).
  const int64_t x_ahead = taps == 1 && !pack ? kPrefetchPixels * x_stride : 0;
  constexpr int64_t kVectorLanes = kLanes * V;
  const int64_t ci_tiles = CeilDiv(cg, int64_t{R});
  const int64_t phase_cols = CeilDiv(g.in_cols, g.stride_cols), tiled_row = phase_cols * g.stride_cols;
  const int64_t x_panel = max_x_rows * tiled_row * R;  // one tile's x
  const int64_t dy_panel = block_rows * g.out_cols * kVectorLanes;  // one block's dy
  auto enter_tiled = [&](int64_t group, int64_t r0, int64_t r1, In* scratch) {
    int64_t first = 0;
    const int64_t x_rows = FilterXRows(g, r0, r1, &first);
    const int64_t channel_step = kPlanarX ? x_planes : 1, col_step = kPlanarX ? 1 : cin;
    for (int64_t i = 0; i < x_rows; ++i) {
      const int64_t n = (first + i) / g.in_rows, ih = (first + i) % g.in_rows;
      // The row's column 0, the group's channel 0.
      const In* src = kPlanarX ? x + (n * cin * g.in_rows + ih) * g.in_cols + group * cg * x_planes
                               : x + (first + i) * g.in_cols * cin + group * cg;
      for (int64_t col = 0; col < g.in_cols; ++col) {
        In* dst = scratch + (i * tiled_row + col % g.stride_cols * phase_cols + col / g.stride_cols) * R;
        for (int64_t t = 0; t < ci_tiles; ++t) {
          const int64_t rows = std::min<int64_t>(R, cg - t * R);
          const In* s = src + col * col_step + t * R * channel_step;
          // A fixed trip count: a loop of `rows` becomes a call of memmove per 6 values.
#pragma GCC unroll 16
          for (int r = 0; r < kFilterTileRows[V]; ++r) {
            if (r < rows) dst[t * x_panel + r] = s[r * channel_step];
          }
        }
      }
    }
    const In* d = dy + r0 * g.out_cols * cout + group * og;
    for (int64_t b = 0; b < co_blocks; ++b) {
      CopyChannels(d + b * kVectorLanes, cout, kVectorLanes, (r1 - r0) * g.out_cols,
                   scratch + ci_tiles * x_panel + b * dy_panel);
    }
  };
  auto enter = [&](int64_t group, int64_t r0, int64_t r1, In* scratch) {
    if (tiled) return enter_tiled(group, r0, r1, scratch);
    if (!pack) return;
    int64_t first = 0;
    const int64_t x_rows = FilterXRows(g, r0, r1, &first);
    if (zip) {
      const bool lone = 2 * group + 1 == g.groups;
      ZipGroupPairs(x + first * g.in_cols * cin + group * x_depth, cin, lone, x_rows * g.in_cols, scratch);
      ZipGroupPairs(dy + r0 * g.out_cols * cout + group * dy_depth, cout, lone, (r1 - r0) * g.out_cols,
                    scratch + packed_x);
      return;
    }
    CopyChannels(x + first * g.in_cols * cin + group * cg, cin, cg, x_rows * g.in_cols, scratch);
    CopyChannels(dy + r0 * g.out_cols * cout + group * og, cout, og, (r1 - r0) * g.out_cols, scratch + packed_x);
  };
  auto segments = [&](int64_t t, int64_t r0, int64_t r1, FilterSegment<In>* segs, In* scratch) {
    int nsegs = 0;
    const int64_t kh = t / kw_n, kw = t % kw_n;
    const int64_t col0 = kw * g.dilation_cols - g.pad_left;  // x column of ow = 0
    // ow with 0 <= ow*sw + col0 < in_cols
    const int64_t ow_lo = col0 >= 0 ? 0 : (-col0 + g.stride_cols - 1) / g.stride_cols;
    const int64_t ow_hi = std::min(g.out_cols - 1, col0 > g.in_cols - 1
                                                       ? int64_t{-1}
                                                       : (g.in_cols - 1 - col0) / g.stride_cols);
    if (ow_lo > ow_hi) return 0;
    // What the tiles read: x and dy, their packed rows, or their copies in tile order
    // (tile 0's x, block 0's dy). Where row 0 sits, a row's length and where the run
    // starts in it, and the values a pixel (of x: a column) spans.
    int64_t x_row0 = 0, dy_row0 = 0;
    int64_t image_rows = (kPlanarX ? cin : 1) * g.in_rows, x_row = g.in_cols, x_col = ow_lo * g.stride_cols + col0;
    int64_t x_pixel = kPlanarX ? 1 : x_depth, dy_pixel = dy_depth;
    const In* xs = x;
    const In* ds = dy;
    if (pack) FilterXRows(g, r0, r1, &x_row0), dy_row0 = r0, xs = scratch, ds = scratch + packed_x;
    if (tiled) {
      FilterXRows(g, r0, r1, &x_row0), dy_row0 = r0, xs = scratch, ds = scratch + ci_tiles * x_panel;
      image_rows = g.in_rows, x_row = tiled_row, x_col = x_col % g.stride_cols * phase_cols + x_col / g.stride_cols;
      x_pixel = R, dy_pixel = kVectorLanes;
    }
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t n = row / g.out_rows, oh = row % g.out_rows;
      const int64_t ih = oh * g.stride_rows + kh * g.dilation_rows - g.pad_top;
      if (ih < 0 || ih >= g.in_rows) continue;
      segs[nsegs++] = FilterSegment<In>{xs + ((n * image_rows + ih - x_row0) * x_row + x_col) * x_pixel,
                                        ds + ((row - dy_row0) * g.out_cols + ow_lo) * dy_pixel, ow_hi - ow_lo + 1};
    }
    return nsegs;
  };
  const int64_t scratch_count = pack    ? packed_x + block_rows * g.out_cols * dy_depth
                                : tiled ? ci_tiles * x_panel + co_blocks * dy_panel
                                        : 0;
  auto tile = [&](int64_t t, int64_t group, int64_t ci0, int rows, const FilterSegment<In>* segs, int nsegs,
                  bool first_block, In* scratch) {
    T* dw_tile = dw + (t * cg + ci0) * cout + (zip ? 2 * group : group) * og;
    const bool first = first_block && !accumulate;
    // The tile's first channels in what the segments point at (in tile order: its
    // tile's x), and how far apart the blocks of output channels are there.
    const int64_t x_shift = tiled ? ci0 / R * x_panel : (zip ? 2 * ci0 : pack ? ci0 : group * cg + ci0) * x_planes;
    const int64_t dy_shift = tiled || pack ? 0 : group * og, block_step = tiled ? dy_panel : kVectorLanes;
    FilterSegment<In> shifted[kMaxBlockRows];
    for (int i = 0; i < nsegs; ++i) {
      shifted[i] = FilterSegment<In>{segs[i].x + x_shift, segs[i].dy + dy_shift, segs[i].count};
    }
    for (int64_t b = 0; b < co_blocks; ++b) {
      FilterSegment<In> block_segs[kMaxBlockRows];
      for (int i = 0; i < nsegs; ++i) {
        block_segs[i] = FilterSegment<In>{shifted[i].x, shifted[i].dy + b * block_step, shifted[i].count};
      }
      if (tiled) {
        DirectFilterTileAnyRows<T, In, V, false>(rows, block_segs, nsegs, R, 1, 0, kVectorLanes, first,
                                                 dw_tile + b * kVectorLanes, cout);
      } else if (kCanZip && zip) {
        if constexpr (kCanZip) {
          DirectFilterTileAnyRows<T, In, V, false, true>(rows, block_segs, nsegs, x_stride, 1, 0, dy_depth, first,
                                                         dw_tile, cout, 2 * group + 1 == g.groups);
        }
      } else {
        DirectFilterTileAnyRows<T, In, V, kPlanarX>(rows, block_segs, nsegs, x_stride, x_planes, x_ahead, dy_depth,
                                                    first, dw_tile + b * kVectorLanes, cout);
      }
    }
  };
#if defined(__AVX512F__)
  if constexpr (kCanZip) {
    // Zipped 3-wide filters at unit column stride: a unit is a pair's filter row, its
    // three taps summed together (ZippedFilterRowTaps; 3x3, 2 threads, Zen 4, kernel
    // only, both alternated: ResNeXt g32 256->256 @28 0.80-0.82x the time of a tap a
    // unit, g16 128->128 @56 0.83x, RegNetX w8 56->56 @28 0.79-0.94x).
    if (zip && kw_n == 3 && g.stride_cols == 1) {
      auto row_segments = [&](int64_t kh, int64_t r0, int64_t r1, FilterSegment<In>* segs, In* scratch) {
        return FilterRowSegments(g, kh, r0, r1, scratch, g.in_cols * x_depth, scratch + packed_x,
                                 g.out_cols * dy_depth, g.out_cols, segs);
      };
      auto row_tile = [&](int64_t kh, int64_t group, int64_t, int, const FilterSegment<In>* segs, int nsegs,
                          bool first_block, In*) {
        ZippedFilterRowTaps(segs, nsegs, g.in_cols, g.out_cols, g.pad_left, g.dilation_cols,
                            first_block && !accumulate, dw + kh * kw_n * cg * cout + 2 * group * og, cg * cout,
                            cout, 2 * group + 1 == g.groups);
      };
      ForFilterUnits<FilterSegment<In>, In>(ctx, g.filter_rows, unit_groups, cg, R, rows_total, block_rows,
                                            rows_total * g.out_cols * R * og * kw_n, scratch_count, enter,
                                            row_segments, row_tile);
      return;
    }
  }
#endif
  ForFilterUnits<FilterSegment<In>, In>(ctx, taps, unit_groups, cg, R, rows_total, block_rows,
                                        rows_total * g.out_cols * R * og, scratch_count, enter, segments, tile);
}

// The filter-gradient tile's width for `cout` output channels: the widest V of
// 4 (where the build has that tile), 2, 1 vectors that divides them, passed to fn as a constant; false (fn not
// called) when they are not whole vectors.
template <typename T, typename Fn>
bool WithCoutVectors(int64_t cout, Fn&& fn) {
  constexpr int kLanes = Vreg<T>::kLanes;
  if (cout % kLanes != 0) return false;
  if (kMaxTileVectors == 4 && cout % (4 * kLanes) == 0) {
    if constexpr (kMaxTileVectors == 4) fn(std::integral_constant<int, 4>{});
  } else if (cout % (2 * kLanes) == 0) {
    fn(std::integral_constant<int, 2>{});
  } else {
    fn(std::integral_constant<int, 1>{});
  }
  return true;
}

// Runs the direct filter-gradient kernel when it applies (output channels in
// whole vectors); false leaves dW untouched.
// Few input channels and a wide filter row (a stem's 7x7 3->64): a tap's tile would
// hold only cin rows, loading V dy vectors for cin*V products. With column dilation 1
// the x values of a filter row's taps at one dy pixel lie side by side in NHWC,
// (kw, ci) for kw < KW, and so do their dW rows: a filter row is one tap of KW*cin
// channels. x rows are copied with zero columns for the taps that reach past the
// image, so every dy pixel of a row is one run. The zeros multiply dy, exact only
// for finite dy (0 * inf = NaN where TF has no term), so non-finite dy declines.
template <typename T, int V>
bool DirectFilterGradFusedRows(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  constexpr int kLanes = Vreg<T>::kLanes;
  const int64_t cin = g.in_depth, cout = g.out_depth, kw_n = g.filter_cols;
  const int64_t row_channels = kw_n * cin;  // a filter row's (kw, ci) in dW order
  const int R = BalancedTileRows(row_channels, kFilterTileRows[V]);
  const int64_t dy_size = g.batch * g.out_rows * g.out_cols * cout;
  std::vector<char> finite(CeilDiv(dy_size, int64_t{1} << 16));
  ctx.For(static_cast<int64_t>(finite.size()), int64_t{1} << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t at = i << 16;
      finite[i] = AllFinite(dy + at, std::min<int64_t>(int64_t{1} << 16, dy_size - at));
    }
  });
  if (std::find(finite.begin(), finite.end(), 0) != finite.end()) return false;
  // Columns of x the dy pixels of a row read: (ow * sw - pad_left) + [0, KW).
  const int64_t left = g.pad_left;
  const int64_t last_col = (g.out_cols - 1) * g.stride_cols - g.pad_left + kw_n - 1;
  const int64_t padded_cols = left + std::max(g.in_cols, last_col + 1);
  const int64_t rows_total = g.batch * g.out_rows;
  // A dy row and the stride's x rows (padded) per block row.
  const int64_t row_bytes = (g.out_cols * cout + padded_cols * cin * g.stride_rows) * static_cast<int64_t>(sizeof(T));
  const int64_t block_rows = std::max<int64_t>(1, std::min(kMaxBlockRows, kDirectFilterBlockBytes / row_bytes));
  const int64_t max_x_rows = MaxFilterXRows(g, block_rows);
  const int64_t padded_row = padded_cols * cin;
  // Padding far wider than the image would ask for a buffer of zeros: decline.
  if (max_x_rows * padded_row > kMaxPaddedBandBytes / static_cast<int64_t>(sizeof(T))) return false;
  auto enter = [&](int64_t /*group*/, int64_t r0, int64_t r1, T* scratch) {
    int64_t first = 0;
    const int64_t rows = FilterXRows(g, r0, r1, &first);
    for (int64_t i = 0; i < rows; ++i) {
      T* d = scratch + i * padded_row;
      std::fill_n(d, left * cin, T(0));
      std::copy_n(x + (first + i) * g.in_cols * cin, g.in_cols * cin, d + left * cin);
      std::fill_n(d + (left + g.in_cols) * cin, (padded_cols - left - g.in_cols) * cin, T(0));
    }
  };
  auto segments = [&](int64_t kh, int64_t r0, int64_t r1, FilterSegment<T>* segs, T* scratch) {
    // Padded column 0 is x column -pad_left, where dy column 0's window starts.
    return FilterRowSegments(g, kh, r0, r1, scratch, padded_row, dy + r0 * g.out_cols * cout, g.out_cols * cout,
                             g.out_cols, segs);
  };
  const int64_t co_blocks = cout / (kLanes * V);
  auto tile = [&](int64_t kh, int64_t /*group*/, int64_t c0, int rows, const FilterSegment<T>* segs, int nsegs,
                  bool first_block, T* /*scratch*/) {
    for (int64_t b = 0; b < co_blocks; ++b) {
      FilterSegment<T> block_segs[kMaxBlockRows];
      for (int i = 0; i < nsegs; ++i) {
        block_segs[i] = FilterSegment<T>{segs[i].x + c0, segs[i].dy + b * kLanes * V, segs[i].count};
      }
      DirectFilterTileAnyRows<T, T, V, false>(rows, block_segs, nsegs, g.stride_cols * cin, 1, 0, cout, first_block,
                                              dw + (kh * row_channels + c0) * cout + b * kLanes * V, cout);
    }
  };
  ForFilterUnits<FilterSegment<T>, T>(ctx, g.filter_rows, 1, row_channels, R, rows_total, block_rows,
                                      rows_total * g.out_cols * R * cout, max_x_rows * padded_row, enter, segments,
                                      tile);
  return true;
}

template <typename T>
bool DirectFilterGrad(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy,
                      T* dw) {
  // Stem 7x7 s2 3->64 @224, batch 8, fused / per-tap: 1 thread 0.83, 2 threads 0.93
  // (a tile of 6 (kw, ci) rows instead of 3 ci rows; with V=2 tiles of 11 rows, 1.00x
  // the V=4 time).
  if (g.groups == 1 && g.dilation_cols == 1 && g.filter_cols > 1 && g.in_depth < kFilterTileRows[1] / 2) {
    bool done = false;
    WithCoutVectors<T>(g.out_depth,
                       [&](auto v) { done = DirectFilterGradFusedRows<T, decltype(v)::value>(ctx, g, x, dy, dw); });
    if (done) return true;
  }
  if (std::is_same_v<T, float> && Vreg<T>::kLanes == 16 && g.groups > 1 && 2 * g.group_in_depth() == 16 &&
      2 * g.group_out_depth() == 16) {
    DirectFilterGradImpl<T, 1>(ctx, g, x, dy, dw);  // zipped group pairs
    return true;
  }
  return WithCoutVectors<T>(g.group_out_depth(),
                            [&](auto v) { DirectFilterGradImpl<T, decltype(v)::value>(ctx, g, x, dy, dw); });
}

// The filter gradient on NCHW tensors: x is read as it is (the tile broadcasts
// its R input channels from R planes instead of R neighbours), and only dy,
// whose output channels the tile loads as vectors, is transposed to NHWC, a
// chunk of images at a time into a buffer the kernel then reads from cache.
// Chunks add into dW in order, so the sums do not depend on the thread count.
constexpr int64_t kNchwDyChunkBytes = int64_t{2} << 20;
constexpr int64_t kTransposePixels = 256;  // pixels per unit of the dy transpose

template <typename T, int V>
void DirectFilterGradNchwImpl(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  const int64_t cout = g.out_depth, pixels = g.out_rows * g.out_cols, dy_image = cout * pixels;
  const int64_t x_image = g.in_depth * g.in_rows * g.in_cols;
  const int64_t images =
      std::max<int64_t>(1, std::min(g.batch, kNchwDyChunkBytes / (dy_image * static_cast<int64_t>(sizeof(T)))));
  const int64_t blocks = (pixels + kTransposePixels - 1) / kTransposePixels;
  ScratchBuffer<T> dy_nhwc(images * dy_image);
  for (int64_t n0 = 0; n0 < g.batch; n0 += images) {
    const int64_t nb = std::min(images, g.batch - n0);
    ctx.For(nb * blocks, kTransposePixels * cout, [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        const int64_t n = u / blocks, p0 = u % blocks * kTransposePixels;
        const int64_t pn = std::min(kTransposePixels, pixels - p0);
        TransposeConvert<T, T>(dy + (n0 + n) * dy_image + p0, pixels, dy_nhwc.data() + (n * pixels + p0) * cout, cout,
                               cout, pn, /*stream=*/false);
      }
    });
    DirectFilterGradImpl<T, V, T, true>(ctx, BatchSlice(g, nb), x + n0 * x_image, dy_nhwc.data(), dw,
                                        /*accumulate=*/n0 > 0);
  }
}

// Where the filter-gradient tile applies (output channels in whole vectors);
// false leaves dW untouched.
template <typename T>
bool DirectFilterGradNchw(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  return WithCoutVectors<T>(g.group_out_depth(),
                            [&](auto v) { DirectFilterGradNchwImpl<T, decltype(v)::value>(ctx, g, x, dy, dw); });
}

// ---- NCHW 1x1 input gradient ------------------------------------------------------
// With a 1x1 filter, stride 1 and no padding, each NCHW image's dx is one GEMM,
//   dx[n][ci][p] = sum over co of w[ci][co] * dy[n][co][p],
// with pixels contiguous in both: the filter-gradient tile computes it with the
// roles swapped (R input channels broadcast from the transposed filter, V
// vectors of pixels), so NCHW needs no transposes here.
template <typename T>
void PointwiseInputNchw(const CpuContext& ctx, const ConvGeometry& g, const T* filter, const T* dy,
                        T* dx) {
  constexpr int kLanes = Vreg<T>::kLanes;
  constexpr int V = kMaxTileVectors, R = kTileRows[V], R1 = kTileRows[1];
  constexpr int64_t kChunk = kLanes * V;
  const int64_t cin = g.in_depth, cout = g.out_depth, hw = g.in_rows * g.in_cols;
  ScratchVector<T> wt(cout * cin);  // [co][ci]
  for (int64_t ci = 0; ci < cin; ++ci) {
    for (int64_t co = 0; co < cout; ++co) wt[co * cin + ci] = filter[ci * cout + co];
  }
  // Units: runs of pixel chunks of one image; per chunk every channel tile
  // reuses the chunk's dy (cout x kChunk) from L1/L2.
  const int64_t chunks = (hw + kChunk - 1) / kChunk;
  const int64_t per_unit = std::max<int64_t>(1, std::min<int64_t>(8, chunks));
  const int64_t units_per_image = (chunks + per_unit - 1) / per_unit;
  ctx.For(g.batch * units_per_image, per_unit * kChunk * cin * cout, [&](int64_t begin, int64_t end) {
    ScratchVector<T> dy_tail(hw % kLanes != 0 ? cout * kLanes : 0, T(0));
    ScratchVector<T> dx_tail(hw % kLanes != 0 ? cin * kLanes : 0);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n = u / units_per_image;
      const int64_t p_begin = (u % units_per_image) * per_unit * kChunk;
      const int64_t p_end = std::min(hw, p_begin + per_unit * kChunk);
      const T* dy_n = dy + n * cout * hw;
      T* dx_n = dx + n * cin * hw;
      int64_t p = p_begin;
      for (; p + kChunk <= p_end; p += kChunk) {
        for (int64_t ci = 0; ci < cin; ci += R) {
          const FilterSegment<T> seg{wt.data() + ci, dy_n + p, cout};
          DirectFilterTileAnyRows<T, T, V, false>(static_cast<int>(std::min<int64_t>(R, cin - ci)), &seg, 1, cin, 1, 0,
                                           hw, true, dx_n + ci * hw + p, hw);
        }
      }
      for (; p + kLanes <= p_end; p += kLanes) {
        for (int64_t ci = 0; ci < cin; ci += R1) {
          const FilterSegment<T> seg{wt.data() + ci, dy_n + p, cout};
          DirectFilterTileAnyRows<T, T, 1, false>(static_cast<int>(std::min<int64_t>(R1, cin - ci)), &seg, 1, cin, 1, 0,
                                           hw, true, dx_n + ci * hw + p, hw);
        }
      }
      if (p < p_end) {
        // The image's last pixels, fewer than a vector: through zero-padded
        // copies (lanes are independent; the padding lanes are dropped).
        const int64_t rest = p_end - p;
        for (int64_t co = 0; co < cout; ++co) {
          std::copy_n(dy_n + co * hw + p, rest, dy_tail.data() + co * kLanes);
        }
        for (int64_t ci = 0; ci < cin; ci += R1) {
          const FilterSegment<T> seg{wt.data() + ci, dy_tail.data(), cout};
          DirectFilterTileAnyRows<T, T, 1, false>(static_cast<int>(std::min<int64_t>(R1, cin - ci)), &seg, 1, cin, 1, 0,
                                           kLanes, true, dx_tail.data() + ci * kLanes, kLanes);
        }
        for (int64_t ci = 0; ci < cin; ++ci) {
          std::copy_n(dx_tail.data() + ci * kLanes, rest, dx_n + ci * hw + p);
        }
      }
    }
  });
}

#if defined(__AVX512F__)
// ---- bfloat16 filter gradient with vdpbf16ps (AVX512_BF16) --------------------
// vdpbf16ps sums a pair of products per lane; here the pair runs along the
// filter gradient's reduction: two dy pixels of one row. Per chunk of dy rows,
// dy is repacked as pixel pairs [row][j][co] (pixels 2j and 2j+1 of the row as
// one 32-bit lane; an odd last pixel paired with 0) and x as column pairs
// (x[c], x[c + sw]) per channel for the columns c the taps read (grouped as
// below), zero outside the image. The tile then broadcasts R x pairs and loads V dy-pair
// vectors per pixel pair and issues R*V dot products: half the instructions
// of the widening tiles, one conversion-free pass. The zero columns and the
// odd pixel multiply real values, exact only when x and dy are finite, so the
// repacking checks them and the caller falls back to the widening tiles where
// they are not. Like the input gradient, the instruction flushes denormals.
constexpr int64_t kPairChunkBytes = int64_t{8} << 20;

template <int R, int V>
TCB_BF16_TARGET inline void PairFilterTileBf16(const FilterSegment<uint32_t>* segs, int nsegs,
                                               int64_t x_step, int64_t x_ahead, int64_t dy_stride,
                                               bool first, float* dw, int64_t dw_stride) {
  __m512 acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(dw + r * dw_stride + 16 * v);
  }
  for (int s = 0; s < nsegs; ++s) {
    const uint32_t* x = segs[s].x;
    const uint32_t* d = segs[s].dy;
    for (int64_t i = 0; i < segs[s].count; ++i, x += x_step, d += dy_stride) {
      _mm_prefetch(reinterpret_cast<const char*>(x + x_ahead), _MM_HINT_T0);
      __m512bh dv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) dv[v] = (__m512bh)_mm512_loadu_si512(d + 16 * v);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512bh b = (__m512bh)_mm512_set1_epi32(static_cast<int32_t>(x[r]));
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], b, dv[v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(dw + r * dw_stride + 16 * v, acc[r][v]);
  }
}

template <int V>
TCB_BF16_TARGET __attribute__((noinline)) void PairFilterTileAnyRows(
    int rows, const FilterSegment<uint32_t>* segs, int nsegs, int64_t x_step, int64_t x_ahead,
    int64_t dy_stride, bool first, float* dw, int64_t dw_stride) {
  constexpr int R = kTileRows[V];
  switch (rows) {
#define TCB_TILE(n)                                                                                  \
  case n:                                                                                            \
    if constexpr (n <= R) PairFilterTileBf16<n, V>(segs, nsegs, x_step, x_ahead, dy_stride, first, dw, dw_stride); \
    break;
    TCB_TILE(1) TCB_TILE(2) TCB_TILE(3) TCB_TILE(4) TCB_TILE(5) TCB_TILE(6) TCB_TILE(7)
    TCB_TILE(8) TCB_TILE(9) TCB_TILE(10) TCB_TILE(11) TCB_TILE(12) TCB_TILE(13) TCB_TILE(14)
#undef TCB_TILE
    default: break;
  }
}

// dst[i] = (lo[i], hi[i]) as one 32-bit pair for i < n, a null source read as
// zeros; false when a value is an inf or a NaN.
inline bool PackPairs(const uint16_t* lo, const uint16_t* hi, int64_t n, uint32_t* dst) {
  const __m512i exponent = _mm512_set1_epi16(0x7f80);
  __mmask32 bad = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i a = lo ? _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + i)))
                         : _mm512_setzero_si512();
    const __m512i b = hi ? _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi + i)))
                         : _mm512_setzero_si512();
    const __m512i pair = _mm512_or_si512(a, _mm512_slli_epi32(b, 16));
    bad |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(pair, exponent), exponent);
    _mm512_storeu_si512(dst + i, pair);
  }
  bool finite = bad == 0;
  for (; i < n; ++i) {
    const uint32_t a = lo ? lo[i] : 0, b = hi ? hi[i] : 0;
    finite &= (a & 0x7f80) != 0x7f80 && (b & 0x7f80) != 0x7f80;
    dst[i] = a | (b << 16);
  }
  return finite;
}

// dW (float) from bfloat16 x and dy with the pair tiles; false when x or dy
// holds an inf or NaN (dW then unspecified) or one dy row's chunk would not
// fit the scratch budget (dW untouched).
template <int V>
bool PairFilterGradBf16(const CpuContext& ctx, const ConvGeometry& g, const uint16_t* x,
                        const uint16_t* dy, float* dw) {
  constexpr int R = kTileRows[V];
  const int64_t cin = g.in_depth, cout = g.out_depth, ow_n = g.out_cols, oh_n = g.out_rows;
  const int64_t kw_n = g.filter_cols;
  const int64_t sh = g.stride_rows, sw = g.stride_cols;
  const int64_t pairs = (ow_n + 1) / 2;  // per dy row
  // Fewer input channels than tile rows (a 3-channel stem): with dilation 1 a
  // pair's taps along a row read kw_n*cin consecutive x values, stored once
  // per pair, so (kw, ci) is one channel axis of dW ([kh][kw][ci][co]) and
  // the tiles run full: units (kh, tile of that axis).
  const bool flat = g.dilation_cols == 1 && cin < R;
  const int64_t channels = flat ? kw_n * cin : cin, taps = flat ? g.filter_rows : g.filter_rows * kw_n;
  // Otherwise pair j of a tap reads x column k - pad_left with k = 2j*sw + kw*dw. x pairs
  // are stored per residue class of k modulo 2*sw that some tap reads (one for
  // 1x1 stride 1, both parities for 3x3 stride 1), so a tap's pairs are
  // consecutive: class (kw*dw) % (2sw), from entry (kw*dw) / (2sw).
  const int64_t period = 2 * sw;
  std::vector<int64_t> residues(kw_n);
  for (int64_t kw = 0; kw < kw_n; ++kw) residues[kw] = kw * g.dilation_cols % period;
  std::sort(residues.begin(), residues.end());
  residues.erase(std::unique(residues.begin(), residues.end()), residues.end());
  // Where tap column kw's pairs start in a row of x pairs.
  std::vector<int64_t> tap_col(kw_n);
  const int64_t class_cols = pairs + (kw_n - 1) * g.dilation_cols / period;
  const int64_t x_row = flat ? pairs * channels : static_cast<int64_t>(residues.size()) * class_cols * cin;
  const int64_t dy_row = pairs * cout;  // uint32 pairs per row
  for (int64_t kw = 0; kw < kw_n; ++kw) {
    const int64_t k0 = kw * g.dilation_cols;
    const int64_t q = std::lower_bound(residues.begin(), residues.end(), k0 % period) - residues.begin();
    tap_col[kw] = (q * class_cols + k0 / period) * cin;
  }
  // flat: an x row padded with zeros, from column -pad_left to the last one read.
  const int64_t padded_cols = flat ? 2 * (pairs - 1) * sw + sw + kw_n : 0;
  const int64_t x_rows_per_dy_row = std::max<int64_t>(1, sh);
  const int64_t bytes_per_dy_row = (dy_row + x_rows_per_dy_row * x_row) * 4;
  const int64_t chunk_rows = std::max<int64_t>(1, kPairChunkBytes / bytes_per_dy_row);
  const int64_t oh_step = std::min(oh_n, chunk_rows);
  const int64_t images_per_chunk = oh_step == oh_n ? std::max<int64_t>(1, chunk_rows / oh_n) : 1;
  const int64_t reach = (g.filter_rows - 1) * g.dilation_rows;
  const int64_t x_rows_max = std::min(g.in_rows, (oh_step - 1) * sh + reach + 1);
  // Rows too wide for a chunk (the halo of a one-row chunk included): decline.
  if (images_per_chunk * (x_rows_max * x_row + oh_step * dy_row) * 4 > 4 * kPairChunkBytes) return false;
  ScratchBuffer<uint32_t> xp(images_per_chunk * x_rows_max * x_row);
  ScratchBuffer<uint32_t> dp(images_per_chunk * oh_step * dy_row);

  const int64_t co_blocks = cout / (16 * V);
  const int64_t block_rows =
      std::max<int64_t>(1, std::min(kMaxBlockRows, kDirectFilterBlockBytes / bytes_per_dy_row));
  const int64_t x_step = flat ? channels : cin;  // between a tap's consecutive pairs
  const int64_t x_ahead = taps == 1 ? kPrefetchPixels * x_step : 0;
  bool first_chunk = true;
  for (int64_t n0 = 0; n0 < g.batch; n0 += images_per_chunk) {
    const int64_t n1 = std::min(g.batch, n0 + images_per_chunk);
    for (int64_t oh0 = 0; oh0 < oh_n; oh0 += oh_step) {
      const int64_t oh1 = std::min(oh_n, oh0 + oh_step), rows = oh1 - oh0;
      const int64_t ih_lo = std::max<int64_t>(0, oh0 * sh - g.pad_top);
      const int64_t ih_hi = std::min(g.in_rows, (oh1 - 1) * sh + reach - g.pad_top + 1);
      const int64_t x_rows = std::max<int64_t>(0, ih_hi - ih_lo);
      // Repack (and check) this chunk: x rows, then dy rows, one unit each.
      const int64_t images = n1 - n0, x_units = images * x_rows, units_all = x_units + images * rows;
      std::vector<char> finite(units_all, 1);
      ctx.For(units_all, x_row + dy_row, [&](int64_t begin, int64_t end) {
        ScratchBuffer<uint16_t> padded(padded_cols * cin);
        for (int64_t u = begin; u < end; ++u) {
          bool ok = true;
          if (u < x_units) {
            const int64_t i = u / x_rows, ih = ih_lo + u % x_rows;
            const uint16_t* src = x + ((n0 + i) * g.in_rows + ih) * g.in_cols * cin;
            uint32_t* dst = xp.data() + (i * x_rows_max + ih - ih_lo) * x_row;
            if (flat) {
              uint16_t* p = padded.data();
              const int64_t c_hi = std::min(g.in_cols, padded_cols - g.pad_left);  // image columns kept
              std::fill_n(p, padded_cols * cin, uint16_t{0});
              if (c_hi > 0) std::copy_n(src, c_hi * cin, p + g.pad_left * cin);
              for (int64_t j = 0; j < pairs; ++j) {
                ok &= PackPairs(p + 2 * j * sw * cin, p + (2 * j + 1) * sw * cin, channels, dst + j * channels);
              }
            } else {
              for (int64_t q = 0; q < static_cast<int64_t>(residues.size()); ++q) {
                for (int64_t m = 0; m < class_cols; ++m, dst += cin) {
                  const int64_t c = residues[q] + period * m - g.pad_left;
                  const bool in0 = c >= 0 && c < g.in_cols, in1 = c + sw >= 0 && c + sw < g.in_cols;
                  ok &= PackPairs(in0 ? src + c * cin : nullptr, in1 ? src + (c + sw) * cin : nullptr, cin, dst);
                }
              }
            }
          } else {
            const int64_t v = u - x_units, i = v / rows, oh = oh0 + v % rows;
            const uint16_t* src = dy + ((n0 + i) * oh_n + oh) * ow_n * cout;
            uint32_t* dst = dp.data() + (i * oh_step + oh - oh0) * dy_row;
            for (int64_t j = 0; j < pairs; ++j) {
              const uint16_t* hi = 2 * j + 1 < ow_n ? src + (2 * j + 1) * cout : nullptr;
              ok &= PackPairs(src + 2 * j * cout, hi, cout, dst + j * cout);
            }
          }
          finite[u] = ok;
        }
      });
      if (std::find(finite.begin(), finite.end(), 0) != finite.end()) return false;

      // The widening kernel's schedule over the chunk's dy rows.
      const int64_t chunk_rows_total = images * rows;
      const bool overwrite = first_chunk;
      auto segments = [&](int64_t t, int64_t r0, int64_t r1, FilterSegment<uint32_t>* segs, char*) {
        int nsegs = 0;
        const int64_t kh = flat ? t : t / kw_n, col = flat ? 0 : tap_col[t % kw_n];
        for (int64_t row = r0; row < r1; ++row) {
          const int64_t i = row / rows, oh = oh0 + row % rows;
          const int64_t ih = oh * sh + kh * g.dilation_rows - g.pad_top;
          if (ih < 0 || ih >= g.in_rows) continue;
          segs[nsegs++] = FilterSegment<uint32_t>{xp.data() + (i * x_rows_max + ih - ih_lo) * x_row + col,
                                                  dp.data() + (i * oh_step + oh - oh0) * dy_row, pairs};
        }
        return nsegs;
      };
      auto tile = [&](int64_t t, int64_t /*group: dense*/, int64_t ci0, int tile_rows,
                      const FilterSegment<uint32_t>* segs, int nsegs, bool first_block, char*) {
        float* dw_tile = dw + (t * channels + ci0) * cout;
        for (int64_t b = 0; b < co_blocks; ++b) {
          FilterSegment<uint32_t> shifted[kMaxBlockRows];
          for (int k = 0; k < nsegs; ++k) {
            shifted[k] = FilterSegment<uint32_t>{segs[k].x + ci0, segs[k].dy + b * 16 * V, segs[k].count};
          }
          PairFilterTileAnyRows<V>(tile_rows, shifted, nsegs, x_step, x_ahead, cout,
                                   overwrite && first_block, dw_tile + b * 16 * V, cout);
        }
      };
      ForFilterUnits<FilterSegment<uint32_t>, char>(ctx, taps, 1, channels, R, chunk_rows_total, block_rows,
                                                    chunk_rows_total * ow_n * R * cout, 0,
                                                    [](int64_t, int64_t, int64_t, char*) {}, segments, tile);
      first_chunk = false;
    }
  }
  return true;
}

// bfloat16 x and dy (as their bits), float dW, Cout in whole vectors: the pair
// tiles (CPUs with AVX512_BF16; false where x or dy is not finite), or the float
// tiles widening the inputs in registers.
bool DirectFilterGradBf16Pairs(const CpuContext& ctx, const ConvGeometry& g, const uint16_t* x,
                               const uint16_t* dy, float* dw) {
  bool done = false;
  WithCoutVectors<float>(g.out_depth, [&](auto v) { done = PairFilterGradBf16<decltype(v)::value>(ctx, g, x, dy, dw); });
  return done;
}
#endif  // __AVX512F__

#if defined(__AVX512F__)
void DirectFilterGradBf16Widen(const CpuContext& ctx, const ConvGeometry& g, const uint16_t* x,
                               const uint16_t* dy, float* dw) {
  WithCoutVectors<float>(g.out_depth, [&](auto v) { DirectFilterGradImpl<float, decltype(v)::value>(ctx, g, x, dy, dw); });
}
#endif  // __AVX512F__

}  // namespace
}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CPU_CONV2D_DIRECT_INL_H_
