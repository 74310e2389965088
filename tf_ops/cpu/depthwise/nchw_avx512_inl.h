// AVX-512 depthwise gradients that read and write NCHW planes as they are:
// multiplier 1, 3x3 and 5x5 filters, strides 1 and 2, any dilation and padding.
// Included by cpu/depthwise/nchw_avx512.cc (the AVX-512 build) only.
//
// With a multiplier of 1 each channel is an independent 2-D stencil on its
// plane, and memory bandwidth, not arithmetic, bounds both gradients. So a
// vector runs along the plane and every tap is handled in the same pass: the
// filter gradient keeps one accumulator per tap in registers and loads each
// dy vector once for all of them; the input gradient keeps the taps' weights
// in registers and stores each dx vector once. With stride 1 and SAME-like
// columns a whole plane is one flat run of vectors (see FlatPlanes), so small
// planes (7x7, 14x14) keep every lane busy; other geometries go row by row.
// The engine's alternative, transposing blocks of channels to NHWC and back,
// costs passes over the data.
//
// Exactness: a tap whose input column (filter gradient) or dy column (input
// gradient) is outside the image contributes no term, as in TF: every product
// is masked per lane (FmaMasked), so an inf in x, dy or the filter never meets
// a padding zero. Rows outside the image are skipped.
//
// Stride 2 along columns: output column ow of tap kw reads x column
// 2*ow + q (q = kw*dw - pad_left), i.e. element ow + floor(q/2) of the even
// (q even) or odd (q odd) columns; the filter gradient deinterleaves each x
// plane into those two halves first. The input gradient computes dx's even and
// odd columns as two stride-1 rows of dy and interleaves them on the store.
//
// Work is split by planes (input gradient: (n, c)) or channels (filter
// gradient: c, images summed in order), so results do not depend on the
// thread count.
#ifndef TF_CONV_BACKPROP_CPU_DEPTHWISE_NCHW_AVX512_INL_H_
#define TF_CONV_BACKPROP_CPU_DEPTHWISE_NCHW_AVX512_INL_H_

#include <algorithm>
#include <cstdint>

#include "tf_ops/core/geometry.h"
#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/simd_vec_inl.h"
#include "tf_ops/cpu/zmm_avx512_inl.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

// dx sizes from which the input gradients stream their stores (as the NHWC
// kernels, cpu/depthwise/nhwc.cc).
constexpr int64_t kStreamDxBytes = int64_t{2} << 20;

// dst[0, count) = src[0, count), the whole cache lines of dst as
// non-temporal stores (see StoreOut); the partial lines at either end are
// shared with the neighbouring planes and take ordinary stores.
template <typename T>
void StreamOut(T* dst, const T* src, int64_t count) {
  using Z = Zmm<T>;
  constexpr int64_t L = Z::kLanes;
  const int64_t misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) & 63) / sizeof(T);
  int64_t i = std::min(count, misalign == 0 ? 0 : L - misalign);
  if (i > 0) Z::StoreMasked(dst, LaneRange<T>(0, i, 0), Z::LoadMasked(LaneRange<T>(0, i, 0), src));
  for (; i + L <= count; i += L) Z::Stream(dst + i, Z::Load(src + i));
  if (i < count) Z::StoreMasked(dst + i, LaneRange<T>(i, count, i), Z::LoadMasked(LaneRange<T>(i, count, i), src + i));
}

// ---- Flat planes (stride 1, as many input as output columns) ---------------

// With stride 1 and IW == OW (SAME padding), tap (kh, kw) pairs element p of
// the dy plane with element p + (kh*dh - pad_top) * IW + kw*dw - pad_left of
// the x plane: one offset for the whole plane, so a plane runs as one flat
// array of vectors, with no per-row work and no lanes left idle at row ends
// (a 7x7 plane is 4 vectors, not 7). Which lanes a tap may pair depends on
// the element's row and column: a table of masks, one per (vector, tap).
bool FlatPlanes(const ConvGeometry& g) {
  return g.stride_rows == 1 && g.stride_cols == 1 && g.in_cols == g.out_cols;
}

// table[v * KH*KW + t] for the planes of `rows` x `cols` elements: the lanes
// of vector v whose element (r, c), moved by tap t (kh, kw) by
// (sign * (kh*dh - pad_top), sign * (kw*dw - pad_left)), lands inside the
// other plane's `other_rows` x `cols`. Filter gradient: dy elements into x
// (sign 1); input gradient: dx elements into dy (sign -1).
template <typename T>
void FlatTapMasks(const ConvGeometry& g, int64_t rows, int64_t cols, int64_t other_rows, int sign,
                  typename Zmm<T>::Mask* table) {
  constexpr int64_t L = Zmm<T>::kLanes;
  const int64_t KH = g.filter_rows, KW = g.filter_cols, taps = KH * KW, vectors = CeilDiv(rows * cols, L);
  std::fill(table, table + vectors * taps, typename Zmm<T>::Mask{0});
  for (int64_t kh = 0; kh < KH; ++kh) {
    const int64_t dr = sign * (kh * g.dilation_rows - g.pad_top);
    for (int64_t kw = 0; kw < KW; ++kw) {
      const int64_t dc = sign * (kw * g.dilation_cols - g.pad_left), t = kh * KW + kw;
      const int64_t c_lo = std::max<int64_t>(0, -dc), c_hi = std::min(cols, cols - dc);
      for (int64_t r = std::max<int64_t>(0, -dr); r < std::min(rows, other_rows - dr); ++r) {
        const int64_t begin = r * cols + c_lo, end = r * cols + c_hi;
        for (int64_t v = begin / L; v * L < end; ++v) table[v * taps + t] |= LaneRange<T>(begin, end, v * L);
      }
    }
  }
}

// A mask table above this size leaves the call to the per-row kernels.
constexpr int64_t kMaxMaskTableBytes = int64_t{512} << 10;

// ---- Filter gradient -------------------------------------------------------

// Channels whose per-lane tap sums one thread keeps in memory between images
// (kChannelChunk * 25 taps * 64 bytes = 100 KiB at most, in L2).
constexpr int64_t kChannelChunk = 64;

// One plane's products: dy plane with the x plane (`x_rows` apart; stride 2:
// split into even / odd columns), added to the per-lane tap sums `sum` (KH * KW
// vectors). The sums stay in registers for the whole plane; rows of taps
// outside the image are skipped.
template <typename T, int KH, int KW>
void FilterGradPlane(const ConvGeometry& g, const T* dyp, const T* xp, int64_t x_rows, const int64_t* col_offset,
                     const typename Zmm<T>::Mask* masks, int64_t vectors, typename Zmm<T>::Mask dy_tail, T* sum,
                     bool first) {
  using Z = Zmm<T>;
  constexpr int64_t L = Z::kLanes;
  typename Z::Vec acc[KH * KW];
#pragma GCC unroll 32
  for (int t = 0; t < KH * KW; ++t) acc[t] = Z::Zero();
  for (int64_t oh = 0; oh < g.out_rows; ++oh) {
    const T* x_row[KH];
    typename Z::Mask row_mask[KH];  // no lanes for a row outside the image
    for (int kh = 0; kh < KH; ++kh) {
      const int64_t ih = oh * g.stride_rows + kh * g.dilation_rows - g.pad_top;
      const bool inside = ih >= 0 && ih < g.in_rows;
      row_mask[kh] = inside ? static_cast<typename Z::Mask>(~0u) : 0;
      x_row[kh] = xp + (inside ? ih : 0) * x_rows;
    }
    const T* dy_row = dyp + oh * g.out_cols;
    Prefetch(dy_row + g.out_rows * g.out_cols, g.out_cols);  // the next plane in memory
    for (int64_t j = 0; j < vectors; ++j) {
      const typename Z::Vec d = j + 1 < vectors ? Z::Load(dy_row + j * L) : Z::LoadMasked(dy_tail, dy_row + j * L);
#pragma GCC unroll 8
      for (int kh = 0; kh < KH; ++kh) {
#pragma GCC unroll 8
        for (int kw = 0; kw < KW; ++kw) {
          const typename Z::Mask m = masks[kw * vectors + j] & row_mask[kh];
          const typename Z::Vec v = Z::LoadMasked(m, x_row[kh] + col_offset[kw] + j * L);
          acc[kh * KW + kw] = Z::FmaMasked(d, v, acc[kh * KW + kw], m);
        }
      }
    }
  }
#pragma GCC unroll 32
  for (int t = 0; t < KH * KW; ++t) Z::Store(sum + t * L, first ? acc[t] : Z::Add(Z::Load(sum + t * L), acc[t]));
}

// FilterGradPlane for flat planes (FlatPlanes): x_offset[t] per tap, masks
// from FlatTapMasks.
template <typename T, int KH, int KW>
void FilterGradFlatPlane(const T* dyp, const T* xp, const int64_t* x_offset, const typename Zmm<T>::Mask* masks,
                         int64_t vectors, typename Zmm<T>::Mask dy_tail, T* sum, bool first, int64_t next_dy,
                         int64_t next_x) {
  using Z = Zmm<T>;
  constexpr int64_t L = Z::kLanes;
  constexpr int kTaps = KH * KW;
  typename Z::Vec acc[kTaps];
#pragma GCC unroll 32
  for (int t = 0; t < kTaps; ++t) acc[t] = Z::Zero();
  for (int64_t v = 0; v < vectors; ++v) {
    const typename Z::Vec d = v + 1 < vectors ? Z::Load(dyp + v * L) : Z::LoadMasked(dy_tail, dyp + v * L);
    Prefetch(dyp + next_dy + v * L, L);
    Prefetch(xp + next_x + v * L, L);
#pragma GCC unroll 32
    for (int t = 0; t < kTaps; ++t) {
      const typename Z::Mask m = masks[v * kTaps + t];
      acc[t] = Z::FmaMasked(d, Z::LoadMasked(m, xp + v * L + x_offset[t]), acc[t], m);
    }
  }
#pragma GCC unroll 32
  for (int t = 0; t < kTaps; ++t) Z::Store(sum + t * L, first ? acc[t] : Z::Add(Z::Load(sum + t * L), acc[t]));
}

template <typename T, int KH, int KW, int SW>
void ZmmNchwFilterGrad(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy, T* dw_out) {
  using Z = Zmm<T>;
  using Vec = typename Z::Vec;
  constexpr int64_t L = Z::kLanes;
  const int64_t C = g.in_depth, IH = g.in_rows, IW = g.in_cols, OH = g.out_rows, OW = g.out_cols;
  const int64_t dwc = g.dilation_cols;
  const int64_t vectors = CeilDiv(OW, L);
  // Stride 2: each x row as its even columns then its odd columns, `half`
  // elements apiece (whole vectors, so the deinterleave needs no tail case).
  const int64_t half = SW == 2 ? CeilDiv(CeilDiv(IW, 2), L) * L : 0;
  const int64_t row_stride = SW == 2 ? 2 * half : IW;
  // Per tap column: where its x values start relative to output column 0, and
  // per vector the lanes whose x column is inside the image.
  int64_t col_offset[KW];
  ScratchBuffer<typename Z::Mask> mask_buf(KW * vectors);
  typename Z::Mask* const masks = mask_buf.data();
  for (int64_t kw = 0; kw < KW; ++kw) {
    const int64_t q = kw * dwc - g.pad_left;  // x column = ow*SW + q
    col_offset[kw] = SW == 2 ? (q & 1) * half + FloorDiv(q, 2) : q;
    const int64_t lo = std::max<int64_t>(0, CeilDiv(-q, SW));
    const int64_t hi = std::min(OW, q > IW - 1 ? 0 : FloorDiv(IW - 1 - q, SW) + 1);
    for (int64_t j = 0; j < vectors; ++j) masks[kw * vectors + j] = LaneRange<T>(lo, hi, j * L);
  }
  const typename Z::Mask dy_tail = LaneRange<T>(0, OW, (vectors - 1) * L);
  // Flat planes: masks and offsets per tap over the whole dy plane.
  const int64_t flat_vectors = CeilDiv(OH * OW, L);
  const bool flat = SW == 1 && FlatPlanes(g) &&
                    flat_vectors * KH * KW * static_cast<int64_t>(sizeof(typename Z::Mask)) <= kMaxMaskTableBytes;
  ScratchBuffer<typename Z::Mask> flat_masks(flat ? flat_vectors * KH * KW : 0);
  int64_t x_offset[KH * KW];
  if (flat) {
    FlatTapMasks<T>(g, OH, OW, IH, 1, flat_masks.data());
    for (int64_t t = 0; t < KH * KW; ++t) {
      x_offset[t] = (t / KW * g.dilation_rows - g.pad_top) * IW + t % KW * dwc - g.pad_left;
    }
  }
  const typename Z::Mask flat_tail = LaneRange<T>(0, OH * OW, (flat_vectors - 1) * L);
  const int64_t cost = g.batch * (OH * vectors * (KH * KW + 1) + (SW == 2 ? IH * half / L * 2 : 0));
  ctx.For(C, cost, [&](int64_t begin, int64_t end) {
    ScratchBuffer<T> split(SW == 2 ? IH * row_stride : 0);
    ScratchBuffer<T> sums(std::min(kChannelChunk, end - begin) * KH * KW * L);
    // Images outer, channels inner: the planes are read in memory order.
    for (int64_t c0 = begin; c0 < end; c0 += kChannelChunk) {
      const int64_t cn = std::min(kChannelChunk, end - c0);
      for (int64_t n = 0; n < g.batch; ++n) {
        for (int64_t c = c0; c < c0 + cn; ++c) {
          const T* xp = x + (n * C + c) * IH * IW;
          T* const sum = sums.data() + (c - c0) * KH * KW * L;
          if (flat) {
            // Prefetch the next plane in memory, this image's next channel.
            FilterGradFlatPlane<T, KH, KW>(dy + (n * C + c) * OH * OW, xp, x_offset, flat_masks.data(), flat_vectors,
                                           flat_tail, sum, n == 0, OH * OW, IH * IW);
            continue;
          }
          if constexpr (SW == 2) {
            for (int64_t ih = 0; ih < IH; ++ih) {
              const T* src = xp + ih * IW;
              Prefetch(src + IH * IW, IW);  // the next plane in memory
              T* even = split.data() + ih * row_stride;
              for (int64_t j = 0; j < half / L; ++j) {
                const int64_t at = 2 * L * j;
                const Vec a = Z::LoadMasked(LaneRange<T>(0, IW, at), src + at);
                const Vec b = Z::LoadMasked(LaneRange<T>(0, IW, at + L), src + at + L);
                Z::Store(even + L * j, Z::Even(a, b));
                Z::Store(even + half + L * j, Z::Odd(a, b));
              }
            }
            xp = split.data();
          }
          FilterGradPlane<T, KH, KW>(g, dy + (n * C + c) * OH * OW, xp, row_stride, col_offset, masks, vectors,
                                     dy_tail, sum, n == 0);
        }
      }
      for (int64_t c = c0; c < c0 + cn; ++c) {
        const T* sum = sums.data() + (c - c0) * KH * KW * L;
        for (int t = 0; t < KH * KW; ++t) dw_out[t * C + c] = Z::Sum(Z::Load(sum + t * L));
      }
    }
  });
}

// ---- Input gradient --------------------------------------------------------

// One tap as dx phase (a, b) sees it (dx row SH*v + a, column SW*u + b): dy
// row v + row and column u + col, weight filter[tap * C + c], and the lanes
// per column vector whose dy column is inside dy.
template <typename T>
struct PhaseTap {
  int64_t row, col, tap;
  const typename Zmm<T>::Mask* masks;
};

// Rows v0 .. v0+R-1 of dx phase a: all SW column phases, interleaved into
// dx. kCheckRows: some taps' dy rows are outside dy (top and bottom edges).
template <typename T, int R, int SW, bool kCheckRows>
inline void InputGradRows(const T* dyp, int64_t OH, int64_t OW, const T* filter, int64_t C, int64_t c,
                          const PhaseTap<T>* const* taps, const int* tap_count, int64_t v0, int64_t vectors,
                          T* const* dx_row, int64_t IW) {
  using Z = Zmm<T>;
  using Vec = typename Z::Vec;
  constexpr int64_t L = Z::kLanes;
  for (int64_t j = 0; j < vectors; ++j) {
    Vec acc[SW][R];
#pragma GCC unroll 2
    for (int b = 0; b < SW; ++b) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[b][r] = Z::Zero();
      for (int i = 0; i < tap_count[b]; ++i) {
        const PhaseTap<T>& t = taps[b][i];
        const Vec w = Z::Broadcast(filter[t.tap * C + c]);
        const typename Z::Mask m = t.masks[j];
        const T* src = dyp + (v0 + t.row) * OW + t.col + j * L;
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          if (kCheckRows && (v0 + r + t.row < 0 || v0 + r + t.row >= OH)) continue;
          acc[b][r] = Z::FmaMasked(Z::LoadMasked(m, src + r * OW), w, acc[b][r], m);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if constexpr (SW == 1) {
        if ((j + 1) * L <= IW) {
          Z::Store(dx_row[r] + j * L, acc[0][r]);
        } else {
          Z::StoreMasked(dx_row[r] + j * L, LaneRange<T>(0, IW, j * L), acc[0][r]);
        }
      } else {
        const int64_t at = 2 * L * j;
        const Vec low = Z::InterleaveLow(acc[0][r], acc[1][r]), high = Z::InterleaveHigh(acc[0][r], acc[1][r]);
        if (at + 2 * L <= IW) {
          Z::Store(dx_row[r] + at, low);
          Z::Store(dx_row[r] + at + L, high);
        } else {
          Z::StoreMasked(dx_row[r] + at, LaneRange<T>(0, IW, at), low);
          Z::StoreMasked(dx_row[r] + at + L, LaneRange<T>(0, IW, at + L), high);
        }
      }
    }
  }
}

// The input gradient of one flat plane (FlatPlanes): dy_offset[t] per tap,
// masks from FlatTapMasks over dx; R vectors at a time for independent sums.
template <typename T, int KH, int KW>
void InputGradFlatPlane(const T* dyp, const T* filter, int64_t C, const int64_t* dy_offset,
                        const typename Zmm<T>::Mask* masks, int64_t vectors, typename Zmm<T>::Mask dx_tail, T* dxp,
                        const T* next_dyp, bool stream) {
  using Z = Zmm<T>;
  using Vec = typename Z::Vec;
  constexpr int64_t L = Z::kLanes;
  constexpr int kTaps = KH * KW, R = 4;
  Vec w[kTaps];
#pragma GCC unroll 32
  for (int t = 0; t < kTaps; ++t) w[t] = Z::Broadcast(filter[t * C]);
  int64_t v = 0;
  for (; v + R <= vectors; v += R) {
    Vec acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = Z::Zero();
    Prefetch(next_dyp + v * L, R * L);
#pragma GCC unroll 32
    for (int t = 0; t < kTaps; ++t) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const typename Z::Mask m = masks[(v + r) * kTaps + t];
        acc[r] = Z::FmaMasked(Z::LoadMasked(m, dyp + (v + r) * L + dy_offset[t]), w[t], acc[r], m);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if (v + r + 1 < vectors) {
        StoreOut<T>(dxp + (v + r) * L, acc[r], stream);
      } else {
        Z::StoreMasked(dxp + (v + r) * L, dx_tail, acc[r]);
      }
    }
  }
  for (; v < vectors; ++v) {
    Vec acc = Z::Zero();
#pragma GCC unroll 32
    for (int t = 0; t < kTaps; ++t) {
      const typename Z::Mask m = masks[v * kTaps + t];
      acc = Z::FmaMasked(Z::LoadMasked(m, dyp + v * L + dy_offset[t]), w[t], acc, m);
    }
    if (v + 1 < vectors) {
      Z::Store(dxp + v * L, acc);
    } else {
      Z::StoreMasked(dxp + v * L, dx_tail, acc);
    }
  }
}

template <typename T, int KH, int KW, int SH, int SW>
void ZmmNchwInputGrad(const CpuContext& ctx, const ConvGeometry& g, const T* filter, const T* dy, T* dx) {
  using Z = Zmm<T>;
  constexpr int64_t L = Z::kLanes;
  constexpr int R = 4;  // dx rows per block: independent FMA chains
  const int64_t C = g.in_depth, IH = g.in_rows, IW = g.in_cols, OH = g.out_rows, OW = g.out_cols;
  const int64_t dh = g.dilation_rows, dwc = g.dilation_cols;
  const int64_t vectors = CeilDiv(CeilDiv(IW, SW), L);
  // Column masks per (column phase b, kw): dy column u + col inside dy, and u
  // a column of the phase.
  ScratchBuffer<typename Z::Mask> masks(SW * KW * vectors);
  int64_t col[SW][KW];
  bool col_in_phase[SW][KW];
  for (int64_t b = 0; b < SW; ++b) {
    const int64_t phase_cols = CeilDiv(IW - b, SW);
    for (int64_t kw = 0; kw < KW; ++kw) {
      const int64_t t = b + g.pad_left - kw * dwc;
      col_in_phase[b][kw] = FloorDiv(t, SW) * SW == t;
      col[b][kw] = FloorDiv(t, SW);
      const int64_t lo = std::max<int64_t>(0, -col[b][kw]), hi = std::min(phase_cols, OW - col[b][kw]);
      for (int64_t j = 0; j < vectors; ++j) masks.data()[(b * KW + kw) * vectors + j] = LaneRange<T>(lo, hi, j * L);
    }
  }
  // Tap lists per (row phase a, column phase b), and per row phase the rows v
  // [v_lo, v_hi) where every tap's dy row is inside dy.
  PhaseTap<T> taps[SH][SW][KH * KW];
  int tap_count[SH][SW] = {};
  int64_t v_lo[SH], v_hi[SH];
  for (int64_t a = 0; a < SH; ++a) {
    v_lo[a] = 0;
    v_hi[a] = CeilDiv(IH - a, SH);
    for (int64_t kh = 0; kh < KH; ++kh) {
      const int64_t t = a + g.pad_top - kh * dh;
      if (FloorDiv(t, SH) * SH != t) continue;
      const int64_t row = FloorDiv(t, SH);
      v_lo[a] = std::max(v_lo[a], -row);
      v_hi[a] = std::min(v_hi[a], OH - row);
      for (int64_t b = 0; b < SW; ++b) {
        for (int64_t kw = 0; kw < KW; ++kw) {
          if (!col_in_phase[b][kw]) continue;
          taps[a][b][tap_count[a][b]++] = {row, col[b][kw], kh * KW + kw, masks.data() + (b * KW + kw) * vectors};
        }
      }
    }
  }
  const bool stream = g.input_elements * static_cast<int64_t>(sizeof(T)) >= kStreamDxBytes;
  // Flat planes: masks and offsets per tap over the whole dx plane.
  const int64_t flat_vectors = CeilDiv(IH * IW, L);
  const bool flat = SH == 1 && SW == 1 && FlatPlanes(g) &&
                    flat_vectors * KH * KW * static_cast<int64_t>(sizeof(typename Z::Mask)) <= kMaxMaskTableBytes;
  if (flat) {
    ScratchBuffer<typename Z::Mask> flat_masks(flat_vectors * KH * KW);
    FlatTapMasks<T>(g, IH, IW, OH, -1, flat_masks.data());
    int64_t dy_offset[KH * KW];
    for (int64_t t = 0; t < KH * KW; ++t) {
      dy_offset[t] = -((t / KW * dh - g.pad_top) * OW + t % KW * dwc - g.pad_left);
    }
    const typename Z::Mask dx_tail = LaneRange<T>(0, IH * IW, (flat_vectors - 1) * L);
    // Streamed planes that do not start on a cache line go through a buffer.
    const bool staged = stream && (IH * IW * static_cast<int64_t>(sizeof(T))) % 64 != 0;
    ctx.For(g.batch * C, flat_vectors * (KH * KW + 1), [&](int64_t begin, int64_t end) {
      ScratchBuffer<T> plane(staged ? flat_vectors * L : 0);
      for (int64_t u = begin; u < end; ++u) {
        T* const dxp = dx + u * IH * IW;
        const bool direct = !staged || (reinterpret_cast<uintptr_t>(dxp) & 63) == 0;
        InputGradFlatPlane<T, KH, KW>(dy + u * OH * OW, filter + u % C, C, dy_offset, flat_masks.data(), flat_vectors,
                                      dx_tail, direct ? dxp : plane.data(), dy + std::min(u + 1, end - 1) * OH * OW,
                                      stream && direct);
        if (!direct) StreamOut(dxp, plane.data(), IH * IW);
      }
      if (stream) _mm_sfence();  // streamed dx visible before the pool reports done
    });
    return;
  }
  const int64_t cost = IH * vectors * SW * (KH * KW / (SH * SW) + 2);
  ctx.For(g.batch * C, cost, [&](int64_t begin, int64_t end) {
    ScratchBuffer<T> plane(stream ? IH * IW : 0);  // rows in any order, then streamed out in order
    for (int64_t u = begin; u < end; ++u) {
      const int64_t c = u % C;
      const T* dyp = dy + u * OH * OW;
      T* dxp = stream ? plane.data() : dx + u * IH * IW;
      const T* next_dyp = dy + std::min(u + 1, end - 1) * OH * OW;  // into L2 while this plane computes
      // Blocks of R rows of every row phase in turn, so dx is written in
      // order, a few rows apart at most.
      const int64_t blocks = CeilDiv(CeilDiv(IH, SH), R);
      for (int64_t block = 0; block < blocks; ++block) {
        const int64_t v0 = block * R;
        Prefetch(next_dyp + v0 * OW, std::min<int64_t>(R, std::max<int64_t>(0, OH - v0)) * OW);
        for (int64_t a = 0; a < SH; ++a) {
          const PhaseTap<T>* phase_taps[SW];
          for (int b = 0; b < SW; ++b) phase_taps[b] = taps[a][b];
          const int64_t v1 = std::min(v0 + R, CeilDiv(IH - a, SH));
          T* dx_row[R];
          if (v0 >= v_lo[a] && v1 == v0 + R && v1 <= v_hi[a]) {
            for (int r = 0; r < R; ++r) dx_row[r] = dxp + (SH * (v0 + r) + a) * IW;
            InputGradRows<T, R, SW, false>(dyp, OH, OW, filter, C, c, phase_taps, tap_count[a], v0, vectors, dx_row,
                                           IW);
            continue;
          }
          for (int64_t v = v0; v < v1; ++v) {
            dx_row[0] = dxp + (SH * v + a) * IW;
            InputGradRows<T, 1, SW, true>(dyp, OH, OW, filter, C, c, phase_taps, tap_count[a], v, vectors, dx_row,
                                          IW);
          }
        }
      }
      if (stream) StreamOut(dx + u * IH * IW, plane.data(), IH * IW);
    }
    if (stream) _mm_sfence();  // streamed dx visible before the pool reports done
  });
}

template <typename T, int K>
void ZmmNchwFilterGradK(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  if (g.stride_cols == 2) return ZmmNchwFilterGrad<T, K, K, 2>(ctx, g, x, dy, dw);
  ZmmNchwFilterGrad<T, K, K, 1>(ctx, g, x, dy, dw);
}
template <typename T, int K, int SH>
void ZmmNchwInputGradKS(const CpuContext& ctx, const ConvGeometry& g, const T* w, const T* dy, T* dx) {
  if (g.stride_cols == 2) return ZmmNchwInputGrad<T, K, K, SH, 2>(ctx, g, w, dy, dx);
  ZmmNchwInputGrad<T, K, K, SH, 1>(ctx, g, w, dy, dx);
}
template <typename T, int K>
void ZmmNchwInputGradK(const CpuContext& ctx, const ConvGeometry& g, const T* w, const T* dy, T* dx) {
  if (g.stride_rows == 2) return ZmmNchwInputGradKS<T, K, 2>(ctx, g, w, dy, dx);
  ZmmNchwInputGradKS<T, K, 1>(ctx, g, w, dy, dx);
}

// 3x3 / 5x5 filters, multiplier 1, strides <= 2 (cpu/select.cc: KH * KW
// accumulators or weights fit in the 32 zmm registers), by filter size.
template <typename T>
void ZmmNchwFilterGradient(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  if (g.filter_rows == 3) return ZmmNchwFilterGradK<T, 3>(ctx, g, x, dy, dw);
  ZmmNchwFilterGradK<T, 5>(ctx, g, x, dy, dw);
}
template <typename T>
void ZmmNchwInputGradient(const CpuContext& ctx, const ConvGeometry& g, const T* w, const T* dy, T* dx) {
  if (g.filter_rows == 3) return ZmmNchwInputGradK<T, 3>(ctx, g, w, dy, dx);
  ZmmNchwInputGradK<T, 5>(ctx, g, w, dy, dx);
}

}  // namespace
}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CPU_DEPTHWISE_NCHW_AVX512_INL_H_
