// Depthwise convolution gradients on the CPU (NHWC).
//
// The forward op, with M = depth_multiplier and C = in_depth:
//   y[n,oh,ow,c*M+m] = sum_{kh,kw} x[n,ih,iw,c] * W[kh,kw,c,m]
//   ih = oh*stride_rows - pad_top  + kh*dilation_rows
//   iw = ow*stride_cols - pad_left + kw*dilation_cols      (outside the image: 0)
// Differentiating,
//   dx[n,ih,iw,c] = sum over the (kh,oh), (kw,ow) that reach (ih,iw) of
//                   sum_m dy[n,oh,ow,c*M+m] * W[kh,kw,c,m]
//   dW[kh,kw,c,m] = sum over n, oh, ow whose tap lies inside the image of
//                   x[n,ih,iw,c] * dy[n,oh,ow,c*M+m]
//
// Input gradient: with unit stride and dilation, the interior in 4x4 dx
// rectangles that load each dy vector once for all its taps (InputRectRows);
// elsewhere explicit SIMD over the C*M "lanes" with 8 dx pixels of accumulators
// in registers across all taps, every stride handled as residue classes of dx
// columns (InputGradRowsSimd). Filter gradient: for 3x3 and 5x5,
// every tap's accumulator in registers while a dy row streams past
// (FilterGradRowsSimd); other filter sizes run the portable loops below, taps
// outer and a contiguous channel loop inner, left to the auto-vectoriser. No
// division or bounds test sits inside a pixel loop: column ranges are
// precomputed, edges run separate, checked code. At AVX2 and up the same kernels
// read bfloat16 and half tensors as they lie, widening them in registers (LoadAs).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include "tf_ops/cpu/zmm_avx512_inl.h"
#elif defined(__AVX2__)
#include "tf_ops/cpu/ymm_avx2_inl.h"
#endif

#include <Eigen/Core>

#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/isa_kernels.h"
#include "tf_ops/cpu/simd_vec_inl.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

// The output columns [ow_begin, ow_end) whose tap kw lands inside the image,
// and the input column iw_begin that ow_begin maps to; iw then advances by
// stride_cols per output column.
struct ColumnSpan {
  int64_t ow_begin = 0, ow_end = 0, iw_begin = 0;
};

std::vector<ColumnSpan> ColumnSpans(const ConvGeometry& g) {
  std::vector<ColumnSpan> spans(g.filter_cols);
  for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
    const int64_t offset = kw * g.dilation_cols - g.pad_left;  // iw = ow * stride + offset
    const int64_t begin = std::max<int64_t>(0, CeilDiv(-offset, g.stride_cols));
    const int64_t end = std::min(g.out_cols, CeilDiv(g.in_cols - offset, g.stride_cols));
    ColumnSpan& s = spans[kw];
    s.ow_begin = begin;
    s.ow_end = std::max(begin, end);  // pads larger than the image leave the span empty
    s.iw_begin = begin * g.stride_cols + offset;
  }
  return spans;
}

// The output row whose tap kh reads input row ih, or -1 when none does (ih is
// not on that tap's stride grid, or the row would be outside the output).
int64_t OutRowFor(const ConvGeometry& g, int64_t ih, int64_t kh) {
  const int64_t t = ih + g.pad_top - kh * g.dilation_rows;
  if (t < 0 || t % g.stride_rows != 0) return -1;
  const int64_t oh = t / g.stride_rows;
  return oh < g.out_rows ? oh : -1;
}

// kM > 0 fixes the multiplier at compile time so the m loop is fully unrolled
// and the c loop can still vectorise; kM == 0 reads it at run time.
template <int kM>
int64_t Multiplier(const ConvGeometry& g) {
  return kM > 0 ? kM : g.depth_multiplier;
}

// Channel loops run in fixed blocks of one cache line plus a tail. GCC's -O2
// vectoriser (cost model "very-cheap") only takes loops whose trip count is a
// known multiple of the vector width and which need no run-time alias check:
// hence the constant block and __restrict (a gradient never aliases its inputs).
template <typename A>
constexpr int64_t kBlock = 64 / sizeof(A);

// dw[c*M+m] += x[c] * dy[c*M+m], c in [0, count).
template <typename A, int kM>
inline void FilterChannels(int64_t count, int64_t mult, const A* __restrict x,
                           const A* __restrict dy, A* __restrict dw) {
  const int64_t M = kM > 0 ? kM : mult;
  for (int64_t c = 0; c < count; ++c) {
    const A xc = x[c];
    for (int64_t m = 0; m < M; ++m) dw[c * M + m] += xc * dy[c * M + m];
  }
}

template <typename A, int kM>
inline void FilterPixel(int64_t channels, int64_t mult, const A* x, const A* dy, A* dw) {
  constexpr int64_t B = kBlock<A>;
  const int64_t M = kM > 0 ? kM : mult;
  int64_t c = 0;
  for (; c + B <= channels; c += B) FilterChannels<A, kM>(B, M, x + c, dy + c * M, dw + c * M);
  FilterChannels<A, kM>(channels - c, M, x + c, dy + c * M, dw + c * M);
}

// Adds the contributions of the dy rows r = n*out_rows + oh in [begin, end)
// into dw. Taps outer, pixels inner: one tap's C*M slice of dw stays in L1
// while a whole row of pixels streams through it.
template <typename A, int kM>
void FilterGradRows(const ConvGeometry& g, const std::vector<ColumnSpan>& spans, const A* x,
                    const A* dy, A* dw, int64_t begin, int64_t end) {
  const int64_t C = g.in_depth, M = Multiplier<kM>(g), CM = C * M;
  const int64_t x_row_elems = g.in_cols * C;
  const int64_t dy_row_elems = g.out_cols * CM;
  const int64_t x_step = g.stride_cols * C;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / g.out_rows, oh = r % g.out_rows;
    const A* dy_row = dy + r * dy_row_elems;
    for (int64_t kh = 0; kh < g.filter_rows; ++kh) {
      const int64_t ih = oh * g.stride_rows - g.pad_top + kh * g.dilation_rows;
      if (ih < 0 || ih >= g.in_rows) continue;
      const A* x_row = x + (n * g.in_rows + ih) * x_row_elems;
      for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
        const ColumnSpan& s = spans[kw];
        A* w = dw + (kh * g.filter_cols + kw) * CM;
        const A* x_px = x_row + s.iw_begin * C;
        const A* dy_px = dy_row + s.ow_begin * CM;
        for (int64_t ow = s.ow_begin; ow < s.ow_end; ++ow, x_px += x_step, dy_px += CM) {
          FilterPixel<A, kM>(C, M, x_px, dy_px, w);
        }
      }
    }
  }
}

// Multipliers 1 and 2 (the common ones) get compile-time loops that vectorise;
// others run the generic, scalar one.
template <typename Fn>
Fn PickByMultiplier(int64_t mult, Fn m1, Fn m2, Fn generic) {
  return mult == 1 ? m1 : mult == 2 ? m2 : generic;
}

// A rough cycle count for ctx.For's shard sizing: one multiply-add per
// (pixel, tap, output channel) of a row.
int64_t CostPerRow(const ConvGeometry& g, int64_t cols, int64_t row_taps) {
  return std::max<int64_t>(1, cols * g.out_depth * row_taps * g.filter_cols);
}

// ---------------------------------------------------------------------------
// Explicit-SIMD paths (GCC vector extensions, so each ISA build gets its own
// width: 16 bytes baseline, 32 AVX2, 64 AVX-512).
//
// Both gradients work on "lanes": the C*M elements of a dy pixel, which are
// also the C*M elements of a filter tap, contiguous in both. With
//   G[ih,iw,l] = sum over taps of dy[oh,ow,l] * W[kh,kw,l]        (l = c*M + m)
// the input gradient is dx[c] = sum_m G[c*M + m] (G itself when M == 1), and
//   dW[kh,kw,l] = sum over pixels of X[ih,iw,l] * dy[oh,ow,l]
// with X the input with each channel repeated M times (x itself when M == 1).
// So one lane loop serves every multiplier; M > 1 only adds a reduction pass
// (input grad) or an expansion of the x rows (filter grad).

// Both gradients also read bfloat16 and half as they lie (S), widening to
// float (A) in registers: bfloat16 is the top half of a float's bits, half goes
// through F16C. Exact, so the sums are the float kernel's on the converted tensors,
// without the conversion passes' trips through memory.
template <typename V, typename S>
inline V LoadAs(const S* p) {
  if constexpr (std::is_same_v<S, Eigen::bfloat16> || std::is_same_v<S, Eigen::half>) {
    if constexpr (std::is_same_v<V, float>) {  // the lane tail
      return static_cast<float>(*p);
    } else {
#if defined(__AVX2__)
      static_assert(sizeof(V) == kVectorBytes, "a float vector");
      if constexpr (std::is_same_v<S, Eigen::bfloat16>) {
        typedef uint16_t Bits16 __attribute__((vector_size(kVectorBytes / 2)));
        typedef uint32_t Bits32 __attribute__((vector_size(kVectorBytes)));
        Bits16 h;
        std::memcpy(&h, p, sizeof(h));
        const Bits32 w = __builtin_convertvector(h, Bits32) << 16;
        V v;
        std::memcpy(&v, &w, sizeof(v));
        return v;
      } else {
        V v;
#if defined(__AVX512F__)
        const __m512 f = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#else
        const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#endif
        std::memcpy(&v, &f, sizeof(v));
        return v;
      }
#else
      static_assert(sizeof(V) == 0, "bfloat16 and half widen at AVX2 and up");
#endif
    }
  } else {
    return Load<V>(p);
  }
}

// ---- Input gradient --------------------------------------------------------

// dx of a large call is written once and not read again by this kernel, so it
// bypasses the caches (no read-for-ownership of each line, and dy keeps L2).
// Only whole 64-byte lines: AVX-512 vectors here, AVX2 pairs in InputLineBlock.
template <typename V, typename A>
inline void StoreDx(A* p, const V& v, bool stream) {
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == sizeof(typename Zmm<A>::Vec)) {
    if (stream) return Zmm<A>::Stream(p, reinterpret_cast<const typename Zmm<A>::Vec&>(v));
  }
#endif
  Store(p, v);
}

// One (kh, kw) tap as seen from one residue class of dx columns: dx column
// iw = rho + j*stride_cols reads dy column ow = j + ow_offset of dy_row.
template <typename S, typename A>
struct InputTap {
  const S* dy_row;  // dy row oh, at column 0
  const A* w;       // filter tap (kh, kw), C*M lanes
  int64_t ow_offset;
};

// dx sizes from which the input gradient streams its stores: beyond one core's
// L2 the output would be evicted before anyone reads it anyway (measured,
// kernel only, cold inputs: C384@14 (2.4 MB) 0.40 -> 0.36 ms, C144@56 2.9 -> 2.6 ms).
constexpr int64_t kStreamBytes = int64_t{2} << 20;

// dy rows per dx row with software prefetching (3x3 and 5x5 filters fit).
constexpr int kMaxPrefetchRows = 8;

// Output pixels of accumulators kept in registers across all taps.
constexpr int kPixelBlock = 8;

// G for dx columns j0 .. j0+P-1 of one class (each with dy columns in range for
// every tap), lanes [l, l + lanes of V); g_px points at lane 0 of column j0,
// g_step is the distance between consecutive columns of the class, dy_step the
// distance between their dy pixels. (With g_step a dx row and dy_step a dy row, the
// P pixels are one column of P rows instead.)
template <typename V, typename A, typename S, int P>
inline void InputLaneBlock(const InputTap<S, A>* taps, int64_t ntaps, int64_t j0, int64_t l,
                           int64_t cm, A* g_px, int64_t g_step, int64_t dy_step, bool stream) {
  V acc[P];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) acc[p] = V{};
  for (int64_t t = 0; t < ntaps; ++t) {
    const V w = Load<V>(taps[t].w + l);
    const S* dy = taps[t].dy_row + (j0 + taps[t].ow_offset) * cm + l;
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[p] += LoadAs<V>(dy + p * dy_step) * w;
  }
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) StoreDx(g_px + p * g_step + l, acc[p], stream);
}

// G for one column, Q vectors of lanes from l at a time: Q independent sums,
// where one vector alone would wait on each FMA's latency.
template <typename V, typename A, typename S, int Q>
inline void InputLaneBlocks(const InputTap<S, A>* taps, int64_t ntaps, int64_t j0, int64_t l, int64_t cm,
                            A* g_px) {
  constexpr int64_t L = kLanes<V, A>;
  V acc[Q];
#pragma GCC unroll 8
  for (int q = 0; q < Q; ++q) acc[q] = V{};
  for (int64_t t = 0; t < ntaps; ++t) {
    const A* w = taps[t].w + l;
    const S* dy = taps[t].dy_row + (j0 + taps[t].ow_offset) * cm + l;
#pragma GCC unroll 8
    for (int q = 0; q < Q; ++q) acc[q] += LoadAs<V>(dy + q * L) * Load<V>(w + q * L);
  }
#pragma GCC unroll 8
  for (int q = 0; q < Q; ++q) Store(g_px + l + q * L, acc[q]);
}

#if defined(__AVX2__) && !defined(__AVX512F__)
// Streamed dx at AVX2: pixels p0 .. p0+Q-1 of InputLaneBlock's P, two ymm vectors (one
// 64-byte line) from lane l, the line's halves streamed back to back. Halves streamed 8
// stores apart (a vector at a time over 8 pixels) left lines half written in the
// write-combining buffers: on a Zen 4 with busy memory 1.5-2x slower than cached stores.
template <typename A, typename S, int Q>
inline void InputLineBlock(const InputTap<S, A>* taps, int64_t ntaps, int64_t j0, int64_t l, int64_t cm,
                           A* g_px, int64_t g_step, int64_t dy_step, int p0) {
  using Y = Ymm<A>;
  using V = typename SimdOf<A>::Type;
  constexpr int64_t L = Y::kLanes;
  V lo[Q], hi[Q];
#pragma GCC unroll 4
  for (int p = 0; p < Q; ++p) lo[p] = hi[p] = V{};
  for (int64_t t = 0; t < ntaps; ++t) {
    const V w_lo = Load<V>(taps[t].w + l), w_hi = Load<V>(taps[t].w + l + L);
    const S* dy = taps[t].dy_row + (j0 + taps[t].ow_offset) * cm + l + p0 * dy_step;
#pragma GCC unroll 4
    for (int p = 0; p < Q; ++p) {
      lo[p] += LoadAs<V>(dy + p * dy_step) * w_lo;
      hi[p] += LoadAs<V>(dy + p * dy_step + L) * w_hi;
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < Q; ++p) {
    A* out = g_px + (p0 + p) * g_step + l;
    Y::Stream(out, reinterpret_cast<const typename Y::Vec&>(lo[p]));
    Y::Stream(out + L, reinterpret_cast<const typename Y::Vec&>(hi[p]));
  }
}
#endif

// All lanes of P columns: full vectors, then one lane at a time.
template <typename S, typename A, int P>
inline void InputPixels(const InputTap<S, A>* taps, int64_t ntaps, int64_t j0, int64_t cm, A* g_px,
                        int64_t g_step, bool stream = false, int64_t dy_step = 0) {
  if (dy_step == 0) dy_step = cm;  // consecutive columns
  using V = typename SimdOf<A>::Type;
  int64_t l = 0;
  if constexpr (P == 1) {  // single edge pixels
    constexpr int kQ = 4;
    for (; l + kQ * kLanes<V, A> <= cm; l += kQ * kLanes<V, A>) {
      InputLaneBlocks<V, A, S, kQ>(taps, ntaps, j0, l, cm, g_px);
    }
  }
#if defined(__AVX2__) && !defined(__AVX512F__)
  if constexpr (P > 1) {
    // Streaming needs whole lines a pixel, so this covers every lane.
    for (; stream && l + 2 * kLanes<V, A> <= cm; l += 2 * kLanes<V, A>) {
      InputLineBlock<A, S, P < 4 ? P : 4>(taps, ntaps, j0, l, cm, g_px, g_step, dy_step, 0);
      if constexpr (P > 4) InputLineBlock<A, S, P - 4>(taps, ntaps, j0, l, cm, g_px, g_step, dy_step, 4);
    }
  }
#endif
  for (; l + kLanes<V, A> <= cm; l += kLanes<V, A>) {
    InputLaneBlock<V, A, S, P>(taps, ntaps, j0, l, cm, g_px, g_step, dy_step, stream);
  }
  for (; l < cm; ++l) InputLaneBlock<A, A, S, P>(taps, ntaps, j0, l, cm, g_px, g_step, dy_step, false);
}

// Accumulator rows of a rectangle: 4 x 4 fills AVX-512's 32 registers with the
// 3x3 filter's taps; 16-register ISAs take 2 x 4. At AVX2 the rectangles store dx
// through the caches: rectangles of two ymm a pixel (1 x 4 or 2 x 2), streamed whole
// lines or not, ran 1.1-1.7x slower than 2 x 4 of one ymm on a Zen 4 (C32 @112 to
// C384 @14, kernel only, cold inputs), and prefetching the dy (or dx) columns a block
// or two ahead changed nothing beyond the noise. Nor did (same machine, 2 threads,
// C32 @112 to C960 @7) a rolling window, lanes outer, the 9 taps in registers and a
// dy column loaded once for its 3 dx columns (0.93-1.12x today's time), or staging
// each block's lanes in an L1 buffer to stream whole dx lines from it (0.97-1.02x):
// C192 @28 takes 0.30 ms with its tensors in L3 and 0.85-0.90 ms from DRAM, so DRAM
// sets the pace here, not the instructions or their addresses.
constexpr int kRectRows = kVectorBytes == 64 ? 4 : 2;
constexpr int kRectCols = 4;

// G for one dx row (all its columns), written to g (in_cols x C*M).
// With edges_only, the interior columns (those all taps reach) are left as
// they are: InputRectRows has written them. edge_rows == kRectRows (edges_only,
// unit strides, rows whose row taps all land): the edge columns of that many rows
// from ih, each column's pixels one vertical block sharing the filter loads (the
// rows see the same taps); grow's rows are a dx row apart.
template <typename S, typename A>
void InputGradRowSimd(const ConvGeometry& g, const A* filter, const S* dy, int64_t n, int64_t ih,
                      std::vector<InputTap<S, A>>& taps, std::vector<InputTap<S, A>>& some, A* grow,
                      bool stream, bool edges_only = false, int edge_rows = 1) {
  const int64_t cm = g.in_depth * g.depth_multiplier, sc = g.stride_cols;
  const int64_t dy_row_elems = g.out_cols * cm;
  for (int64_t rho = 0; rho < sc && rho < g.in_cols; ++rho) {
    // Taps reaching this class of columns, and the columns j they all reach.
    taps.clear();
    int64_t lo = 0, hi = (g.in_cols - rho + sc - 1) / sc;
    const int64_t count = hi;
    for (int64_t kh = 0; kh < g.filter_rows; ++kh) {
      const int64_t oh = OutRowFor(g, ih, kh);
      if (oh < 0) continue;
      for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
        const int64_t t = rho + g.pad_left - kw * g.dilation_cols;
        if (((t % sc) + sc) % sc != 0) continue;
        const int64_t off = t / sc;  // exact
        taps.push_back({dy + (n * g.out_rows + oh) * dy_row_elems,
                        filter + (kh * g.filter_cols + kw) * cm, off});
        lo = std::max(lo, -off);
        hi = std::min(hi, g.out_cols - off);
      }
    }
    A* g0 = grow + rho * cm;
    const int64_t step = sc * cm;
    if (taps.empty()) {
      for (int64_t j = 0; j < count; ++j) std::fill_n(g0 + j * step, cm, A(0));
      continue;
    }
    lo = std::min(lo, count);
    hi = std::max(lo, hi);
    // Edge columns: only the taps whose dy column exists.
    auto edge = [&](int64_t j) {
      some.clear();
      for (const InputTap<S, A>& tap : taps) {
        const int64_t ow = j + tap.ow_offset;
        if (ow >= 0 && ow < g.out_cols) some.push_back(tap);
      }
      if (some.empty()) {
        for (int k = 0; k < edge_rows; ++k) std::fill_n(g0 + j * step + k * g.in_cols * cm, cm, A(0));
      } else if (edge_rows == kRectRows) {
        InputPixels<S, A, kRectRows>(some.data(), some.size(), j, cm, g0 + j * step, g.in_cols * cm, stream,
                                     dy_row_elems);
      } else {
        InputPixels<S, A, 1>(some.data(), some.size(), j, cm, g0 + j * step, step);
      }
    };
    for (int64_t j = 0; j < lo; ++j) edge(j);
    if (edges_only) {
      for (int64_t j = hi; j < count; ++j) edge(j);
      continue;
    }
    // A block's loads jump a whole pixel (cm lanes) per column and one vector
    // per lane block, a pattern the hardware prefetchers do not follow; so each
    // block prefetches, in every dy row its taps read, the columns two blocks on.
    const S* ahead_rows[kMaxPrefetchRows];
    int64_t ahead_offset[kMaxPrefetchRows];
    int nrows = 0;
    for (const InputTap<S, A>& tap : taps) {
      int r = 0;
      while (r < nrows && ahead_rows[r] != tap.dy_row) ++r;
      if (r == nrows) {
        if (nrows == kMaxPrefetchRows) continue;
        ahead_rows[nrows] = tap.dy_row, ahead_offset[nrows++] = tap.ow_offset;
      } else {
        ahead_offset[r] = std::min(ahead_offset[r], tap.ow_offset);
      }
    }
    const uintptr_t block_bytes = kPixelBlock * cm * sizeof(S);
    int64_t j = lo;
    for (; j + kPixelBlock <= hi; j += kPixelBlock) {
      for (int r = 0; r < nrows; ++r) {
        // Integer arithmetic: the address may lie past the row (prefetches never fault).
        const uintptr_t first = reinterpret_cast<uintptr_t>(ahead_rows[r]) +
                                (j + 2 * kPixelBlock + ahead_offset[r]) * cm * sizeof(S);
        for (uintptr_t b = 0; b < block_bytes; b += 64) {
          __builtin_prefetch(reinterpret_cast<const void*>(first + b));
        }
      }
      InputPixels<S, A, kPixelBlock>(taps.data(), taps.size(), j, cm, g0 + j * step, step, stream);
    }
    // The rest of the interior as one narrower block (each width unrolled).
    switch (hi - j) {
#define TCB_TAIL(p)                                                                           \
  case p:                                                                                     \
    InputPixels<S, A, p>(taps.data(), taps.size(), j, cm, g0 + j * step, step, stream); \
    break;
      TCB_TAIL(1) TCB_TAIL(2) TCB_TAIL(3) TCB_TAIL(4) TCB_TAIL(5) TCB_TAIL(6) TCB_TAIL(7)
#undef TCB_TAIL
      default: break;
    }
    static_assert(kPixelBlock == 8, "the tail switch covers widths 1 .. kPixelBlock - 1");
    for (j = hi; j < count; ++j) edge(j);
  }
}

// ---- Input gradient, stride 1: rectangles of dx -----------------------------
//
// With unit strides and dilations (most depthwise layers) an R x P block of dx
// pixels reads a (R+KH-1) x (P+KW-1) window of dy, and each dy vector of it
// feeds every (pixel, tap) pair it meets: one load per up to KH*KW FMAs, where
// the row kernel above loads per FMA. Measured single-threaded on C144@56 from
// DRAM, 4.35 -> 2.15 ms, which is then the memory's rate. Only the interior,
// where every tap lands inside dy, so no product is skipped or padded; the
// edge pixels stay with the row kernel.


// dx pixels (r, p) at dx + r*dx_row + p*cm from the dy window whose corner is
// dy (row ih0 + pad_top - (KH-1), column iw0 + pad_left - (KW-1)); all at lane l.
template <typename V, typename A, typename S, int KH, int KW, int R, int P>
inline void InputRectBlock(const S* dy, int64_t dy_row, int64_t cm, const A* w, A* dx,
                           int64_t dx_row, bool stream) {
  V acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = V{};
  // dy row a, column b meets dx (r, p) through tap (kh, kw) = (r + KH-1 - a, p + KW-1 - b).
#pragma GCC unroll 16
  for (int a = 0; a < R + KH - 1; ++a) {
#pragma GCC unroll 16
    for (int b = 0; b < P + KW - 1; ++b) {
      const V d = LoadAs<V>(dy + a * dy_row + b * cm);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int kh = r + KH - 1 - a;
        if (kh < 0 || kh >= KH) continue;
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
          const int kw = p + KW - 1 - b;
          if (kw < 0 || kw >= KW) continue;
          acc[r][p] += d * Load<V>(w + (kh * KW + kw) * cm);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) StoreDx(dx + r * dx_row + p * cm, acc[r][p], stream);
}

// dx columns [0, cols) of R rows, every lane: dx0 at (row 0, column 0), dy0 at
// the corner of column 0's window, rows dx_row and dy_row apart.
template <typename S, typename A, int KH, int KW, int R>
void InputRectRows(int64_t cm, const A* filter, const S* dy0, int64_t dy_row, A* dx0, int64_t dx_row,
                   int64_t cols, bool stream) {
  using V = typename SimdOf<A>::Type;
  // Lanes inner: a block's window of every lane (~20 KB at C144) stays in L1
  // for the next block, which shares KW - 1 of its columns.
  auto columns = [&](auto p_tag, int64_t iw) {
    constexpr int P = decltype(p_tag)::value;
    int64_t l = 0;
    for (; l + kLanes<V, A> <= cm; l += kLanes<V, A>) {
      InputRectBlock<V, A, S, KH, KW, R, P>(dy0 + iw * cm + l, dy_row, cm, filter + l, dx0 + iw * cm + l,
                                         dx_row, stream);
    }
    for (; l < cm; ++l) {
      InputRectBlock<A, A, S, KH, KW, R, P>(dy0 + iw * cm + l, dy_row, cm, filter + l, dx0 + iw * cm + l,
                                         dx_row, false);
    }
  };
  int64_t iw = 0;
  for (; iw + kRectCols <= cols; iw += kRectCols) columns(std::integral_constant<int, kRectCols>(), iw);
  switch (cols - iw) {
    case 3: columns(std::integral_constant<int, 3>(), iw); break;
    case 2: columns(std::integral_constant<int, 2>(), iw); break;
    case 1: columns(std::integral_constant<int, 1>(), iw); break;
    default: break;
  }
  static_assert(kRectCols == 4, "the tail switch covers widths 1 .. kRectCols - 1");
}

template <typename S, typename A>
using InputRectFn = void (*)(int64_t, const A*, const S*, int64_t, A*, int64_t, int64_t, bool);
// The rectangle kernels for this geometry ({R rows, 1 row}), or nulls.
template <typename S, typename A>
struct InputRectPlan {
  InputRectFn<S, A> block = nullptr, single = nullptr;
  int64_t ih_lo = 0, ih_hi = 0, iw_lo = 0, iw_hi = 0;  // the interior
};

template <typename S, typename A, int KH, int KW>
void SetRectKernels(InputRectPlan<S, A>& plan) {
  plan.block = &InputRectRows<S, A, KH, KW, kRectRows>;
  plan.single = &InputRectRows<S, A, KH, KW, 1>;
}

template <typename S, typename A>
InputRectPlan<S, A> PlanInputRect(const ConvGeometry& g) {
  InputRectPlan<S, A> plan;
  if (g.depth_multiplier != 1 || g.stride_rows != 1 || g.stride_cols != 1 || g.dilation_rows != 1 ||
      g.dilation_cols != 1) {
    return plan;
  }
  if (g.filter_rows == 3 && g.filter_cols == 3) SetRectKernels<S, A, 3, 3>(plan);
  if (g.filter_rows == 5 && g.filter_cols == 5) SetRectKernels<S, A, 5, 5>(plan);
  // dx (ih, iw) is interior when every tap's dy pixel (ih + pad_top - kh,
  // iw + pad_left - kw) exists; the same columns InputGradRowSimd calls lo, hi.
  plan.ih_lo = std::min(g.in_rows, std::max<int64_t>(0, g.filter_rows - 1 - g.pad_top));
  plan.ih_hi = std::max(plan.ih_lo, std::min(g.in_rows, g.out_rows - g.pad_top));
  plan.iw_lo = std::min(g.in_cols, std::max<int64_t>(0, g.filter_cols - 1 - g.pad_left));
  plan.iw_hi = std::max(plan.iw_lo, std::min(g.in_cols, g.out_cols - g.pad_left));
  return plan;
}

// dx rows [begin, end) (r = n*in_rows + ih); dy and dx in S: A itself, or bfloat16 /
// half with A = float, dy widened in registers and each block of dx rows summed into
// a float row buffer, rounded from there while it is in cache (a conversion pass
// over the whole tensors cost as much as the float kernel).
template <typename S, typename A>
void InputGradRowsSimd(const ConvGeometry& g, const A* filter, const S* dy, S* dx, int64_t begin,
                       int64_t end, bool stream) {
  constexpr bool kWiden = !std::is_same_v<S, A>;
  const int64_t c = g.in_depth, m = g.depth_multiplier, row_elems = g.in_cols * c;
  std::vector<InputTap<S, A>> taps, some;
  taps.reserve(g.filter_rows * g.filter_cols);
  some.reserve(g.filter_rows * g.filter_cols);
  ScratchVector<A> lanes(m > 1 ? g.in_cols * c * m : 0);
  ScratchVector<A> widened_rows(kWiden ? kRectRows * row_elems : 0);
  const InputRectPlan<S, A> rect = PlanInputRect<S, A>(g);
  for (int64_t r = begin; r < end;) {
    const int64_t n = r / g.in_rows, ih = r % g.in_rows;
    A* dx_row;
    if constexpr (kWiden) {
      dx_row = widened_rows.data();
    } else {
      dx_row = dx + r * row_elems;
    }
    int64_t rows = 1;
    if (rect.block && ih >= rect.ih_lo && ih < rect.ih_hi && rect.iw_lo < rect.iw_hi) {
      // Interior rows: kRectRows at a time while the shard and the image last.
      rows = std::min(end - r, rect.ih_hi - ih) >= kRectRows ? kRectRows : 1;
      const int64_t cm = g.in_depth;
      const S* dy0 = dy + ((n * g.out_rows + ih + g.pad_top - (g.filter_rows - 1)) * g.out_cols +
                           rect.iw_lo + g.pad_left - (g.filter_cols - 1)) * cm;
      (rows == kRectRows ? rect.block : rect.single)(cm, filter, dy0, g.out_cols * cm,
                                                     dx_row + rect.iw_lo * cm, row_elems,
                                                     rect.iw_hi - rect.iw_lo, stream);
      InputGradRowSimd(g, filter, dy, n, ih, taps, some, dx_row, stream, /*edges_only=*/true,
                       static_cast<int>(rows));
    } else if (m == 1) {
      InputGradRowSimd(g, filter, dy, n, ih, taps, some, dx_row, stream);
    } else {
      InputGradRowSimd(g, filter, dy, n, ih, taps, some, lanes.data(), false);
      for (int64_t i = 0; i < row_elems; ++i) {
        const A* s = lanes.data() + i * m;
        A sum = s[0];
        for (int64_t k = 1; k < m; ++k) sum += s[k];
        dx_row[i] = sum;
      }
    }
    if constexpr (kWiden) ConvertElements(widened_rows.data(), dx + r * row_elems, rows * row_elems);
    r += rows;
  }
}

// ---- Filter gradient -------------------------------------------------------

// Cache lines to prefetch, from a few contiguous regions, spread evenly over the
// steps of the work that runs meanwhile (between the loads that use the caches now).
class PrefetchQueue {
 public:
  void Add(const void* start, uintptr_t bytes) {
    if (count_ == kMaxRegions || bytes == 0) return;
    const uintptr_t at = reinterpret_cast<uintptr_t>(start);
    regions_[count_++] = {at, at + bytes};
    lines_ += (bytes + 63) / 64;
  }
  // Each Step() issues this share of the lines, so `steps` of them issue all.
  void Pace(int64_t steps) { per_step_ = (lines_ + steps - 1) / steps; }
  void Step() {
    for (int64_t lines = per_step_; lines > 0 && current_ < count_; --lines) {
      Region& region = regions_[current_];
      // Into L2 only: a row ahead is more than L1 holds beside this row's
      // working set (measured, 2 threads from DRAM: C144@56 3.8 -> 2.0 ms,
      // C192@28 1.3 -> 1.0 ms).
      __builtin_prefetch(reinterpret_cast<const void*>(region.at), 0, 2);
      region.at += 64;
      if (region.at >= region.end) ++current_;
    }
  }

 private:
  static constexpr int kMaxRegions = 4;
  struct Region {
    uintptr_t at, end;
  };
  Region regions_[kMaxRegions];
  int count_ = 0, current_ = 0;
  int64_t lines_ = 0, per_step_ = 0;
};

// Adds dy rows' contributions to dw, for a KH x KW filter whose taps are all in
// registers: acc[kh][kw] for one vector of lanes, over the pixels of `nrows` rows.
// Row i is dy_rows[i] with x_rows[i*KH + kh] at lane 0 of column 0 of the
// (expanded) input row its tap kh reads, or at a row of zeros; columns outside the
// image are skipped at the edges (ow < ow_lo or ow >= ow_hi). Each interior pixel
// is a step of `ahead`.
template <typename V, typename A, typename S, int KH, int KW>
inline void FilterLaneBlock(const ConvGeometry& g, const S* const* x_rows_of, const S* const* dy_rows,
                            int nrows, int64_t ow_lo, int64_t ow_hi, int64_t l, int64_t cm, A* dw,
                            PrefetchQueue& ahead) {
  V acc[KH][KW];
#pragma GCC unroll 5
  for (int kh = 0; kh < KH; ++kh)
#pragma GCC unroll 5
    for (int kw = 0; kw < KW; ++kw) acc[kh][kw] = Load<V>(dw + (kh * KW + kw) * cm + l);
  const int64_t sc = g.stride_cols, dc = g.dilation_cols, pl = g.pad_left;
  for (int i = 0; i < nrows; ++i) {
    const S* const* x_rows = x_rows_of + i * KH;
    const S* dy_row = dy_rows[i];
    // Edge columns: check each tap's input column.
    auto edge = [&](int64_t ow) {
      const V d = LoadAs<V>(dy_row + ow * cm + l);
#pragma GCC unroll 5
      for (int kw = 0; kw < KW; ++kw) {
        const int64_t iw = ow * sc - pl + kw * dc;
        if (iw < 0 || iw >= g.in_cols) continue;
#pragma GCC unroll 5
        for (int kh = 0; kh < KH; ++kh) acc[kh][kw] += LoadAs<V>(x_rows[kh] + iw * cm + l) * d;
      }
    };
    for (int64_t ow = 0; ow < ow_lo; ++ow) edge(ow);
    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) {
      ahead.Step();
      const V d = LoadAs<V>(dy_row + ow * cm + l);
      const int64_t iw0 = ow * sc - pl;
#pragma GCC unroll 5
      for (int kh = 0; kh < KH; ++kh) {
        const S* x = x_rows[kh] + iw0 * cm + l;
#pragma GCC unroll 5
        for (int kw = 0; kw < KW; ++kw) acc[kh][kw] += LoadAs<V>(x + kw * dc * cm) * d;
      }
    }
    for (int64_t ow = std::max(ow_lo, ow_hi); ow < g.out_cols; ++ow) edge(ow);
  }
#pragma GCC unroll 5
  for (int kh = 0; kh < KH; ++kh)
#pragma GCC unroll 5
    for (int kw = 0; kw < KW; ++kw) Store(dw + (kh * KW + kw) * cm + l, acc[kh][kw]);
}

// Filter-gradient row blocks: about this many dy pixels (rows of 56 pixels and more
// run one at a time), at most this many bytes of x and dy rows (they stay in L2 for
// the block's lane passes), at most this many rows. Measured on AMD Zen 4, one
// thread, kernel only, float32 3x3, both alternated in one process, row-at-a-time
// time / block time: C960@7 1.41, C576@14 1.39, C384@14 1.50, C192@28 1.22 (AVX2:
// 1.16-1.39); rows of 56 and more (C144@56: 2 rows a block 2.81 -> 3.45 ms) already
// amortise their dw traffic, and a block's later rows miss the next-row prefetch.
constexpr int64_t kFilterBlockPixels = 64;
constexpr int64_t kFilterBlockBytes = int64_t{256} << 10;
constexpr int kMaxFilterBlockRows = 16;

// Adds the dy rows [begin, end) (r = n*out_rows + oh) into dw; x and dy in S (A, or
// bfloat16 / half widened to A = float).
template <typename S, typename A, int KH, int KW>
void FilterGradRowsSimd(const ConvGeometry& g, const S* x, const S* dy, A* dw, int64_t begin,
                        int64_t end) {
  using V = typename SimdOf<A>::Type;
  const int64_t c = g.in_depth, m = g.depth_multiplier, cm = c * m;
  const int64_t row_lanes = g.in_cols * cm;
  // A row of zeros stands in for input rows outside the image; with M > 1 the
  // KH input rows are expanded to lanes first.
  ScratchVector<S> zeros(row_lanes, S(0));
  ScratchVector<S> expanded(m > 1 ? KH * row_lanes : 0);
  // Which input row (n*in_rows + ih) each of the KH expanded slots holds: with
  // stride 1 consecutive dy rows share KH - 1 input rows, expanded only once.
  int64_t slot_row[KH];
  std::fill_n(slot_row, KH, int64_t{-1});
  // Columns ow whose taps all land inside the image.
  const int64_t sc = g.stride_cols, span = (KW - 1) * g.dilation_cols;
  const int64_t ow_lo = std::min(g.out_cols, CeilDiv(g.pad_left, sc));
  const int64_t ow_hi = std::max<int64_t>(
      ow_lo, std::min(g.out_cols, CeilDiv(g.in_cols - span + g.pad_left, sc)));
  // Short rows (small images) run in blocks of about kFilterBlockPixels pixels: a
  // lane pass sums over the whole block with the taps' accumulators in registers, so
  // dw is read and written once a block instead of once a short row. Expanded rows
  // (M > 1) live in KH slots, so those run a row at a time; so do filters whose
  // accumulators do not fit the registers (5x5 at AVX2: blocks ran 1.35x slower).
  constexpr bool kAccInRegisters = KH * KW + 4 <= (kVectorBytes == 64 ? 32 : 16);
  const int64_t row_bytes = (g.in_cols + g.out_cols) * cm * static_cast<int64_t>(sizeof(S));
  const int64_t block_by_pixels = kFilterBlockPixels / std::max<int64_t>(1, g.out_cols);
  const int64_t block_limit = std::min(block_by_pixels, kFilterBlockBytes / row_bytes);
  const int block_rows = m == 1 && kAccInRegisters
                             ? static_cast<int>(std::clamp<int64_t>(block_limit, 1, kMaxFilterBlockRows))
                             : 1;
  const S* x_rows[kMaxFilterBlockRows * KH];
  const S* dy_rows[kMaxFilterBlockRows];
  for (int64_t r = begin; r < end;) {
    const int nb = static_cast<int>(std::min<int64_t>(block_rows, end - r));
    for (int i = 0; i < nb; ++i) {
      const int64_t n = (r + i) / g.out_rows, oh = (r + i) % g.out_rows;
      const S** rows_i = x_rows + i * KH;
      dy_rows[i] = dy + (r + i) * g.out_cols * cm;
      for (int kh = 0; kh < KH; ++kh) {
        const int64_t ih = oh * g.stride_rows - g.pad_top + kh * g.dilation_rows;
        if (ih < 0 || ih >= g.in_rows) {
          rows_i[kh] = zeros.data();
          continue;
        }
        const int64_t row = n * g.in_rows + ih;
        const S* src = x + row * g.in_cols * c;
        if (m == 1) {
          rows_i[kh] = src;
          continue;
        }
        int slot = 0;
        while (slot < KH && slot_row[slot] != row) ++slot;
        if (slot == KH) {  // not expanded yet: take a slot no tap of this dy row uses
          for (slot = 0; slot < KH; ++slot) {
            bool used = false;
            for (int k = 0; k < KH; ++k) {
              const int64_t ik = oh * g.stride_rows - g.pad_top + k * g.dilation_rows;
              used |= ik >= 0 && ik < g.in_rows && slot_row[slot] == n * g.in_rows + ik;
            }
            if (!used) break;  // at most KH - 1 slots hold rows this dy row needs
          }
          S* e = expanded.data() + slot * row_lanes;
          for (int64_t j = 0; j < g.in_cols * c; ++j) std::fill_n(e + j * m, m, src[j]);
          slot_row[slot] = row;
        }
        rows_i[kh] = expanded.data() + slot * row_lanes;
      }
    }
    // Each lane pass walks the rows with a stride of a whole pixel, which the
    // hardware prefetchers follow poorly on the first (DRAM) pass; so this
    // block's passes prefetch the next block's dy rows and the input rows they add, a
    // share per pass, a line or two per pixel: issued all at a pass's start they
    // stalled its own loads on Intel (Xeon with AVX512_FP16, 2 threads, data in
    // L3, per pixel / at the start: C32@112 0.80, C144@56 0.83, C192@28 0.85,
    // C576@14 1.01, C960@7 1.06; from DRAM at batch 96: C32@112 0.88, C144@56
    // 0.90; no prefetch at all: C144@56 from DRAM 1.32).
    PrefetchQueue ahead;
    const int64_t next = r + nb;
    if (next < end) {
      // The whole next block: its dy rows and the input rows they read that this block
      // did not, both contiguous in memory (across images too). Prefetching only the
      // block's first row left the other rows of blocks of short rows to demand misses:
      // TF-oneDNN/ours went from 1.20 to 1.71-1.84 (C192@28), 1.00 to 1.49-1.61 (C576@14),
      // 0.91-0.98 to 1.55-1.66 (C960@7) (Zen 4, AVX-512, 2 threads, make bench, 2 runs).
      const int64_t next_nb = std::min<int64_t>(block_rows, end - next);
      ahead.Add(dy + next * g.out_cols * cm, next_nb * g.out_cols * cm * sizeof(S));
      auto last_input_row = [&](int64_t row) {  // n * in_rows + the last ih dy row `row` reads
        return (row / g.out_rows) * g.in_rows +
               std::min<int64_t>(g.in_rows - 1,
                                 (row % g.out_rows) * g.stride_rows - g.pad_top + (KH - 1) * g.dilation_rows);
      };
      const int64_t first_input_row =
          std::max(last_input_row(next - 1) + 1,
                   (next / g.out_rows) * g.in_rows +
                       std::max<int64_t>(0, (next % g.out_rows) * g.stride_rows - g.pad_top));
      const int64_t last = last_input_row(next + next_nb - 1);
      if (last >= first_input_row) {
        ahead.Add(x + first_input_row * g.in_cols * c, (last - first_input_row + 1) * g.in_cols * c * sizeof(S));
      }
    }
    const int64_t passes = (cm + kLanes<V, A> - 1) / kLanes<V, A>;
    ahead.Pace(passes * nb * std::max<int64_t>(1, ow_hi - ow_lo));  // the passes' interior pixels
    int64_t l = 0;
    for (; l + kLanes<V, A> <= cm; l += kLanes<V, A>) {
      FilterLaneBlock<V, A, S, KH, KW>(g, x_rows, dy_rows, nb, ow_lo, ow_hi, l, cm, dw, ahead);
    }
    for (; l < cm; ++l) {
      FilterLaneBlock<A, A, S, KH, KW>(g, x_rows, dy_rows, nb, ow_lo, ow_hi, l, cm, dw, ahead);
    }
    r += nb;
  }
}

// The filter sizes with a register-blocked filter-gradient kernel (the ones
// DepthwiseSimdFilterApplies names in cpu/select.cc).
template <typename S, typename A>
using FilterRowsFn = void (*)(const ConvGeometry&, const S*, const S*, A*, int64_t, int64_t);
template <typename S, typename A>
FilterRowsFn<S, A> SimdFilterRows(const ConvGeometry& g) {
  if (g.filter_rows == 3 && g.filter_cols == 3) return &FilterGradRowsSimd<S, A, 3, 3>;
  if (g.filter_rows == 5 && g.filter_cols == 5) return &FilterGradRowsSimd<S, A, 5, 5>;
  return nullptr;
}

// dW (in A) of x and dy (in S): fixed row shards, each summing into a private partial
// (shard 0 into dw itself), added in shard order.
template <typename S, typename A>
void FilterGradNhwc(const CpuContext& ctx, const ConvGeometry& geo, const S* input, const S* out_backprop,
                    A* filter_backprop) {
  // Fast path: 3x3 and 5x5 filters, all taps' accumulators in registers; the
  // portable loops otherwise (S == A only: the widening rows take the fast path's
  // filter sizes).
  const FilterRowsFn<S, A> simd_fn = SimdFilterRows<S, A>(geo);
  if constexpr (!std::is_same_v<S, A>) {
    // The widening rows apply to these sizes only (DepthwiseSimdFilterApplies); thrown
    // here, on the calling thread, the engine reports it instead of summing nothing.
    if (simd_fn == nullptr) {
      throw std::logic_error("depthwise widening filter gradient without register tiles");
    }
  }
  // Every dy row adds into all of dW, so each shard sums into a private
  // partial. The shard boundaries depend only on the geometry and num_threads
  // (never on how the pool splits the range) and the partials are added in
  // shard order, so the result is bitwise reproducible run to run.
  const int64_t rows = geo.batch * geo.out_rows;
  const int64_t shards = ShardsWithinPartialBudget(std::min<int64_t>(rows, ctx.num_threads),
                                                   geo.filter_elements * static_cast<int64_t>(sizeof(A)));
  const int64_t base = rows / shards, extra = rows % shards;
  auto shard_begin = [&](int64_t s) { return s * base + std::min(s, extra); };
  const int64_t fe = geo.filter_elements;
  // Shard 0 sums straight into the output; the others into scratch.
  ScratchVector<A> partials((shards - 1) * fe);
  auto partial = [&](int64_t s) {
    return s == 0 ? filter_backprop : partials.data() + (s - 1) * fe;
  };

  const int64_t cost = CostPerRow(geo, geo.out_cols, geo.filter_rows) * std::max<int64_t>(1, base);
  ctx.For(shards, cost, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      A* dw = partial(s);
      std::fill(dw, dw + fe, A(0));
      if (simd_fn) {
        simd_fn(geo, input, out_backprop, dw, shard_begin(s), shard_begin(s + 1));
      } else if constexpr (std::is_same_v<S, A>) {
        const std::vector<ColumnSpan> spans = ColumnSpans(geo);
        PickByMultiplier(geo.depth_multiplier, &FilterGradRows<A, 1>, &FilterGradRows<A, 2>,
                         &FilterGradRows<A, 0>)(geo, spans, input, out_backprop, dw, shard_begin(s),
                                                shard_begin(s + 1));
      }
    }
  });
  if (shards == 1) return;
  ctx.For(fe, shards, [&](int64_t begin, int64_t end) {
    for (int64_t s = 1; s < shards; ++s) {
      const A* p = partial(s);
      for (int64_t i = begin; i < end; ++i) filter_backprop[i] += p[i];
    }
  });
}

}  // namespace

template <typename T>
bool DepthwiseInputNhwc(const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                        const T* out_backprop, T* in_backprop) {
  constexpr bool kWiden = !std::is_same_v<T, float> && !std::is_same_v<T, double>;
  using A = std::conditional_t<kWiden, float, T>;
  // bfloat16 / half: the (small) filter in float once; dy widens in the kernels.
  ScratchVector<A> filter_float(kWiden ? geo.filter_elements : 0);
  const A* w;
  if constexpr (kWiden) {
    ConvertElements(filter, filter_float.data(), geo.filter_elements);
    w = filter_float.data();
  } else {
    w = filter;
  }
  // dx rows are disjoint and each is a gather over dy, so rows parallelise
  // without races and the result does not depend on the split.
  // A dx row is reached by about filter_rows / stride_rows taps.
  const int64_t row_taps = CeilDiv(geo.filter_rows, geo.stride_rows);
  const int64_t cost = CostPerRow(geo, geo.out_cols, row_taps);
  // Streaming stores pay off once dx is far larger than the caches; they need
  // every pixel's vectors on 64-byte boundaries (float and double dx only).
  const bool stream = !kWiden && geo.depth_multiplier == 1 &&
                      geo.input_elements * static_cast<int64_t>(sizeof(T)) >= kStreamBytes &&
                      reinterpret_cast<uintptr_t>(in_backprop) % 64 == 0 &&
                      (geo.in_depth * static_cast<int64_t>(sizeof(T))) % 64 == 0;
  ctx.For(geo.batch * geo.in_rows, cost, [&](int64_t begin, int64_t end) {
    InputGradRowsSimd(geo, w, out_backprop, in_backprop, begin, end, stream);
#if defined(__AVX2__)
    if (stream) _mm_sfence();  // streamed dx visible before the pool reports done
#endif
  });
  return true;
}

template <typename T>
bool DepthwiseFilterNhwc(const CpuContext& ctx, const ConvGeometry& geo, const T* input,
                         const T* out_backprop, T* filter_backprop) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    FilterGradNhwc(ctx, geo, input, out_backprop, filter_backprop);
  } else {
    // bfloat16 / half as they lie: sums in float, rounded once at the end.
    ScratchVector<float> dw(geo.filter_elements);
    FilterGradNhwc(ctx, geo, input, out_backprop, dw.data());
    ConvertElements(dw.data(), filter_backprop, geo.filter_elements);
  }
  return true;
}

TCB_INSTANTIATE_KERNEL(DepthwiseInputNhwc, float)
TCB_INSTANTIATE_KERNEL(DepthwiseInputNhwc, double)
#if defined(__AVX2__)
TCB_INSTANTIATE_KERNEL(DepthwiseInputNhwc, Eigen::bfloat16)
TCB_INSTANTIATE_KERNEL(DepthwiseInputNhwc, Eigen::half)
#endif
TCB_INSTANTIATE_KERNEL(DepthwiseFilterNhwc, float)
TCB_INSTANTIATE_KERNEL(DepthwiseFilterNhwc, double)
#if defined(__AVX2__)
TCB_INSTANTIATE_KERNEL(DepthwiseFilterNhwc, Eigen::bfloat16)
TCB_INSTANTIATE_KERNEL(DepthwiseFilterNhwc, Eigen::half)
#endif

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop
