// Depthwise convolution gradients on the CPU (NHWC): direct loops with the
// channel loop innermost and contiguous, so the auto-vectoriser can use it.
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
// Both kernels walk the same (row, tap, column) triples; only the column range
// for each kw is precomputed (it is the same for every row), so no division or
// bounds test sits inside the pixel loop. Portable C++ (plus the universally
// supported __restrict): ISA-specific builds of these loops are a later step.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "tf_ops/core/cpu_kernels.h"

namespace tf_conv_backprop {
namespace cpu {
namespace {

// ceil(a / b) for b > 0 and any sign of a (C++ division truncates toward zero).
int64_t CeilDiv(int64_t a, int64_t b) { return a > 0 ? (a + b - 1) / b : -((-a) / b); }

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

// acc[c] += sum_m dy[c*M+m] * w[c*M+m], c in [0, count).
template <typename A, int kM>
inline void InputChannels(int64_t count, int64_t mult, const A* __restrict dy,
                          const A* __restrict w, A* __restrict acc) {
  const int64_t M = kM > 0 ? kM : mult;
  for (int64_t c = 0; c < count; ++c) {
    A sum = dy[c * M] * w[c * M];
    for (int64_t m = 1; m < M; ++m) sum += dy[c * M + m] * w[c * M + m];
    acc[c] += sum;
  }
}

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
inline void InputPixel(int64_t channels, int64_t mult, const A* dy, const A* w, A* acc) {
  constexpr int64_t B = kBlock<A>;
  const int64_t M = kM > 0 ? kM : mult;
  int64_t c = 0;
  for (; c + B <= channels; c += B) InputChannels<A, kM>(B, M, dy + c * M, w + c * M, acc + c);
  InputChannels<A, kM>(channels - c, M, dy + c * M, w + c * M, acc + c);
}

template <typename A, int kM>
inline void FilterPixel(int64_t channels, int64_t mult, const A* x, const A* dy, A* dw) {
  constexpr int64_t B = kBlock<A>;
  const int64_t M = kM > 0 ? kM : mult;
  int64_t c = 0;
  for (; c + B <= channels; c += B) FilterChannels<A, kM>(B, M, x + c, dy + c * M, dw + c * M);
  FilterChannels<A, kM>(channels - c, M, x + c, dy + c * M, dw + c * M);
}

// Computes the dx rows r = n*in_rows + ih in [begin, end). Each row is owned by
// one caller, so it is accumulated in place in the output (which doubles as the
// row buffer) without any synchronisation.
template <typename A, int kM>
void InputGradRows(const ConvGeometry& g, const std::vector<ColumnSpan>& spans, const A* filter,
                   const A* dy, A* dx, int64_t begin, int64_t end) {
  const int64_t C = g.in_depth, M = Multiplier<kM>(g), CM = C * M;
  const int64_t row_elems = g.in_cols * C;
  const int64_t dy_row_elems = g.out_cols * CM;
  const int64_t acc_step = g.stride_cols * C;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / g.in_rows, ih = r % g.in_rows;
    A* acc = dx + r * row_elems;
    std::fill(acc, acc + row_elems, A(0));
    for (int64_t kh = 0; kh < g.filter_rows; ++kh) {
      const int64_t oh = OutRowFor(g, ih, kh);
      if (oh < 0) continue;
      const A* dy_row = dy + (n * g.out_rows + oh) * dy_row_elems;
      for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
        const ColumnSpan& s = spans[kw];
        const A* w = filter + (kh * g.filter_cols + kw) * CM;
        const A* dy_px = dy_row + s.ow_begin * CM;
        A* acc_px = acc + s.iw_begin * C;
        for (int64_t ow = s.ow_begin; ow < s.ow_end; ++ow, dy_px += CM, acc_px += acc_step) {
          InputPixel<A, kM>(C, M, dy_px, w, acc_px);
        }
      }
    }
  }
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

}  // namespace

template <typename A>
void DepthwiseBackpropInputNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                                const A* out_backprop, A* in_backprop) {
  const std::vector<ColumnSpan> spans = ColumnSpans(geo);
  const auto rows_fn = PickByMultiplier(geo.depth_multiplier, &InputGradRows<A, 1>,
                                        &InputGradRows<A, 2>, &InputGradRows<A, 0>);
  // dx rows are disjoint and each is a gather over dy, so rows parallelise
  // without races and the result does not depend on the split.
  // A dx row is reached by about filter_rows / stride_rows taps.
  const int64_t row_taps = CeilDiv(geo.filter_rows, geo.stride_rows);
  const int64_t cost = CostPerRow(geo, geo.out_cols, row_taps);
  ctx.For(geo.batch * geo.in_rows, cost, [&](int64_t begin, int64_t end) {
    rows_fn(geo, spans, filter, out_backprop, in_backprop, begin, end);
  });
}

template <typename A>
void DepthwiseBackpropFilterNhwc(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                                 const A* out_backprop, A* filter_backprop) {
  const std::vector<ColumnSpan> spans = ColumnSpans(geo);
  const auto rows_fn = PickByMultiplier(geo.depth_multiplier, &FilterGradRows<A, 1>,
                                        &FilterGradRows<A, 2>, &FilterGradRows<A, 0>);
  // Every dy row adds into all of dW, so each shard sums into a private
  // partial. The shard boundaries depend only on the geometry and num_threads
  // (never on how the pool splits the range) and the partials are added in
  // shard order, so the result is bitwise reproducible run to run.
  const int64_t rows = geo.batch * geo.out_rows;
  const int64_t shards = std::max<int64_t>(1, std::min<int64_t>(rows, ctx.num_threads));
  const int64_t base = rows / shards, extra = rows % shards;
  auto shard_begin = [&](int64_t s) { return s * base + std::min(s, extra); };
  const int64_t fe = geo.filter_elements;
  // Shard 0 sums straight into the output; the others into scratch.
  std::vector<A> partials((shards - 1) * fe);
  auto partial = [&](int64_t s) {
    return s == 0 ? filter_backprop : partials.data() + (s - 1) * fe;
  };

  const int64_t cost = CostPerRow(geo, geo.out_cols, geo.filter_rows) * std::max<int64_t>(1, base);
  ctx.For(shards, cost, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      A* dw = partial(s);
      std::fill(dw, dw + fe, A(0));
      rows_fn(geo, spans, input, out_backprop, dw, shard_begin(s), shard_begin(s + 1));
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

template void DepthwiseBackpropInputNhwc<float>(const CpuContext&, const ConvGeometry&,
                                                const float*, const float*, float*);
template void DepthwiseBackpropInputNhwc<double>(const CpuContext&, const ConvGeometry&,
                                                 const double*, const double*, double*);
template void DepthwiseBackpropFilterNhwc<float>(const CpuContext&, const ConvGeometry&,
                                                 const float*, const float*, float*);
template void DepthwiseBackpropFilterNhwc<double>(const CpuContext&, const ConvGeometry&,
                                                  const double*, const double*, double*);

}  // namespace cpu
}  // namespace tf_conv_backprop
