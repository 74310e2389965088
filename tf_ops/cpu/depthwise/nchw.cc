// Depthwise convolution gradients on NCHW tensors, without transposes.
//
// In NCHW every channel is its own plane, and a depthwise gradient never mixes
// channels (see cpu/depthwise/nhwc.cc for the formulas, M = multiplier):
//   dx plane (n, c)  = sum over m of dy plane (n, c*M+m) correlated with the
//                      mirrored taps W[., ., c, m] (a 2-D stencil per plane);
//   dW[kh, kw, c, m] = sum over n of <x plane (n, c) shifted by the tap,
//                                     dy plane (n, c*M+m)>.
// Both vectorise along image rows (columns are contiguous), with no transpose
// of the tensors. They run where they beat the channel blocks (NHWC kernels on
// blocks of channels transposed in L2; see the rows in cpu/variants.def): these
// general kernels for multipliers > 1; the AVX-512 register kernels
// (cpu/depthwise/nchw_avx512_inl.h) for multiplier 1 with 3x3 / 5x5 filters and
// strides <= 2.
//
// Strides become "column classes": with stride s, the dx columns iw = rho + s*j
// of one class rho read dy columns j + offset (one offset per tap), so a class is
// a stride-1 stencil, computed contiguously and interleaved into the row once.
// For the filter gradient, the x row is split the same way (x column ow*s + q is
// element ow + q/s of class q % s).
//
// Exactness: the input gradient reads dy from zero-padded copies of its planes,
// so a tap outside dy adds 0 * w: exact for finite filters only (0 * inf is
// NaN where TF has no term), so a non-finite filter returns false and the
// caller takes the transposing path. The filter gradient masks every product
// whose input column is outside the image instead. Work is split by planes
// (input grad: (n, c); filter grad: c, summing over n in order), so results do
// not depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/isa_kernels.h"
#include "tf_ops/cpu/simd_vec_inl.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

// Per-thread scratch above this (padded planes) leaves the call to the
// transposing path, which works in bounded chunks.
constexpr int64_t kMaxPlaneScratchBytes = int64_t{8} << 20;

int64_t RoundUp(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

template <typename A>
bool AllFinite(const A* p, int64_t n) {
  A probe = 0;  // x * 0 is NaN exactly for inf and NaN
  for (int64_t i = 0; i < n; ++i) probe += p[i] * A(0);
  return probe == A(0);
}

// Column classes of a row of `cols` columns under stride s: class rho holds
// the columns rho, rho + s, ...
int64_t ClassCount(int64_t cols, int64_t s, int64_t rho) {
  return rho < cols ? (cols - rho + s - 1) / s : 0;
}

// ---- Input gradient --------------------------------------------------------

// One tap of a class: dy row (padded, already shifted by the tap's column
// offset) and its weight.
template <typename A>
struct PlaneTap {
  const A* dy;
  A w;
};

template <typename A>
bool InputGradNchw(const CpuContext& ctx, const ConvGeometry& g, const A* filter, const A* dy,
                   A* dx) {
  using V = typename SimdOf<A>::Type;
  constexpr int64_t L = kLanes<V, A>;
  const int64_t C = g.in_depth, M = g.depth_multiplier, KH = g.filter_rows, KW = g.filter_cols;
  const int64_t sh = g.stride_rows, sw = g.stride_cols, dh = g.dilation_rows, dw = g.dilation_cols;
  const int64_t IH = g.in_rows, IW = g.in_cols, OH = g.out_rows, OW = g.out_cols;
  if (!AllFinite(filter, g.filter_elements)) return false;

  // Padded dy rows: column ow of dy sits at `left + ow`; class rho's element j
  // reads column j + (rho + pad_left - kw*dw) / s. Whole vector pairs are
  // computed, so rows extend past the widest class by two vectors of zeros.
  const int64_t widest = ClassCount(IW, sw, 0);
  const int64_t left = std::max<int64_t>(0, -FloorDiv(g.pad_left - (KW - 1) * dw, sw));
  const int64_t max_offset = FloorDiv(sw - 1 + g.pad_left, sw);
  const int64_t padded_cols =
      left + std::max(OW, RoundUp(widest, 2 * L) + std::max<int64_t>(0, max_offset)) + 2 * L;
  const int64_t plane_elems = OH * padded_cols;
  const int64_t class_cols = RoundUp(widest, 2 * L);
  if ((M * plane_elems + sw * class_cols) * static_cast<int64_t>(sizeof(A)) > kMaxPlaneScratchBytes) {
    return false;
  }
  const int64_t taps_max = M * KH * KW;
  const int64_t cost = IH * IW * taps_max / std::max<int64_t>(1, sh * sw) + M * OH * OW;
  ctx.For(g.batch * C, cost, [&](int64_t begin, int64_t end) {
    ScratchVector<A> padded(M * plane_elems, A(0));
    ScratchVector<A> classes(sw * class_cols);
    ScratchVector<PlaneTap<A>> taps(taps_max);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n = u / C, c = u % C;
      for (int64_t m = 0; m < M; ++m) {
        const A* src = dy + ((n * C + c) * M + m) * OH * OW;
        A* dst = padded.data() + m * plane_elems + left;
        for (int64_t oh = 0; oh < OH; ++oh) std::memcpy(dst + oh * padded_cols, src + oh * OW, OW * sizeof(A));
      }
      A* dx_plane = dx + (n * C + c) * IH * IW;
      for (int64_t ih = 0; ih < IH; ++ih) {
        A* dx_row = dx_plane + ih * IW;
        for (int64_t rho = 0; rho < sw && rho < IW; ++rho) {
          int64_t ntaps = 0;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t t = ih + g.pad_top - kh * dh;
            if (t < 0 || t % sh != 0 || t / sh >= OH) continue;
            const int64_t oh = t / sh;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t q = rho + g.pad_left - kw * dw;
              if (FloorDiv(q, sw) * sw != q) continue;
              for (int64_t m = 0; m < M; ++m) {
                taps[ntaps++] = {padded.data() + m * plane_elems + oh * padded_cols + left + q / sw,
                                 filter[((kh * KW + kw) * C + c) * M + m]};
              }
            }
          }
          const int64_t count = ClassCount(IW, sw, rho);
          // Stride 1 writes whole vector pairs straight into dx; everything
          // else goes through the class row.
          A* out = classes.data() + rho * class_cols;
          const int64_t direct = sw == 1 ? count / (2 * L) * (2 * L) : 0;
          for (int64_t j = 0; j < count; j += 2 * L) {
            V acc0 = V{}, acc1 = V{};
            for (int64_t t = 0; t < ntaps; ++t) {
              const A* p = taps[t].dy + j;
              acc0 += Load<V>(p) * taps[t].w;
              acc1 += Load<V>(p + L) * taps[t].w;
            }
            A* o = j < direct ? dx_row + j : out + j;
            Store(o, acc0);
            Store(o + L, acc1);
          }
          if (sw == 1) std::copy(out + direct, out + count, dx_row + direct);
        }
        if (sw == 1) continue;
        for (int64_t rho = 0; rho < sw && rho < IW; ++rho) {
          const A* cls = classes.data() + rho * class_cols;
          const int64_t count = ClassCount(IW, sw, rho);
          for (int64_t j = 0; j < count; ++j) dx_row[rho + j * sw] = cls[j];
        }
      }
    }
  });
  return true;
}

// ---- Filter gradient -------------------------------------------------------

template <typename A>
bool FilterGradNchw(const CpuContext& ctx, const ConvGeometry& g, const A* x, const A* dy, A* dw_out) {
  using V = typename SimdOf<A>::Type;
  using I = typename IntSimdOf<A>::Type;
  constexpr int64_t L = kLanes<V, A>;
  const int64_t C = g.in_depth, M = g.depth_multiplier, KH = g.filter_rows, KW = g.filter_cols;
  const int64_t sh = g.stride_rows, sw = g.stride_cols, dh = g.dilation_rows, dw = g.dilation_cols;
  const int64_t IH = g.in_rows, IW = g.in_cols, OH = g.out_rows, OW = g.out_cols;
  const int64_t taps = KH * KW;

  // x rows split into column classes: padded column p = iw + pad_left is
  // element p / s of class p % s; tap kw of output column ow reads padded column
  // ow*s + kw*dw, i.e. element ow + (kw*dw) / s of class (kw*dw) % s.
  const int64_t ow_cols = RoundUp(OW, L);
  const int64_t class_cols = ow_cols + (KW - 1) * dw / sw + L;
  const int64_t row_elems = sw * class_cols;
  if ((IH * row_elems + ow_cols + M * taps * L) * static_cast<int64_t>(sizeof(A)) > kMaxPlaneScratchBytes) {
    return false;
  }
  // Output columns whose tap kw reads inside the image: [lo, hi).
  ScratchVector<int64_t> lo(KW), hi(KW);
  for (int64_t kw = 0; kw < KW; ++kw) {
    const int64_t offset = kw * dw - g.pad_left;  // x column = ow*s + offset
    lo[kw] = std::min(OW, std::max<int64_t>(0, (-offset + sw - 1) / sw));
    hi[kw] = std::max(lo[kw], std::min(OW, offset > IW - 1 ? 0 : (IW - 1 - offset) / sw + 1));
  }
  I lane_index;
  for (int64_t i = 0; i < L; ++i) lane_index[i] = i;

  const int64_t cost = g.batch * OH * OW * M * taps;
  ctx.For(C, cost, [&](int64_t begin, int64_t end) {
    ScratchVector<A> xrows(IH * row_elems, A(0));
    ScratchVector<A> dyrow(ow_cols + L, A(0));
    ScratchVector<V> sums(M * taps);
    for (int64_t c = begin; c < end; ++c) {
      std::fill(sums.begin(), sums.end(), V{});
      for (int64_t n = 0; n < g.batch; ++n) {
        const A* xp = x + (n * C + c) * IH * IW;
        for (int64_t ih = 0; ih < IH; ++ih) {
          A* row = xrows.data() + ih * row_elems;
          const A* src = xp + ih * IW;
          if (sw == 1) {
            std::memcpy(row + g.pad_left, src, IW * sizeof(A));
            continue;
          }
          // Padded column p = iw + pad_left goes to class p % s, element p / s.
          for (int64_t rho = 0; rho < sw; ++rho) {
            const int64_t first = ((rho - g.pad_left) % sw + sw) % sw;  // first iw of the class
            A* dst = row + rho * class_cols + (first + g.pad_left) / sw;
            for (int64_t iw = first; iw < IW; iw += sw) *dst++ = src[iw];
          }
        }
        for (int64_t m = 0; m < M; ++m) {
          const A* dyp = dy + ((n * C + c) * M + m) * OH * OW;
          V* tap_sums = sums.data() + m * taps;
          for (int64_t oh = 0; oh < OH; ++oh) {
            std::memcpy(dyrow.data(), dyp + oh * OW, OW * sizeof(A));
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t ih = oh * sh + kh * dh - g.pad_top;
              if (ih < 0 || ih >= IH) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t q = kw * dw;
                const A* xr = xrows.data() + ih * row_elems + (q % sw) * class_cols + q / sw;
                V acc0 = V{}, acc1 = V{};
                int64_t j = lo[kw];
                for (; j + 2 * L <= hi[kw]; j += 2 * L) {
                  acc0 += Load<V>(xr + j) * Load<V>(dyrow.data() + j);
                  acc1 += Load<V>(xr + j + L) * Load<V>(dyrow.data() + j + L);
                }
                for (; j < hi[kw]; j += L) {  // the last lanes masked: outside is no term
                  const V prod = Load<V>(xr + j) * Load<V>(dyrow.data() + j);
                  acc0 += (lane_index + static_cast<typename IntSimdOf<A>::Lane>(j) <
                           static_cast<typename IntSimdOf<A>::Lane>(hi[kw]))
                              ? prod
                              : V{};
                }
                tap_sums[kh * KW + kw] += acc0 + acc1;
              }
            }
          }
        }
      }
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t t = 0; t < taps; ++t) {
          const V s = sums[m * taps + t];
          A total = 0;
          for (int64_t i = 0; i < L; ++i) total += s[i];
          dw_out[(t * C + c) * M + m] = total;
        }
      }
    }
  });
  return true;
}

}  // namespace

template <typename A>
bool DepthwiseInputNchwPlanar(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                              const A* out_backprop, A* in_backprop) {
  return InputGradNchw(ctx, geo, filter, out_backprop, in_backprop);
}

template <typename A>
bool DepthwiseFilterNchwPlanar(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                               const A* out_backprop, A* filter_backprop) {
  return FilterGradNchw(ctx, geo, input, out_backprop, filter_backprop);
}

TCB_INSTANTIATE_KERNEL(DepthwiseInputNchwPlanar, float)
TCB_INSTANTIATE_KERNEL(DepthwiseInputNchwPlanar, double)
TCB_INSTANTIATE_KERNEL(DepthwiseFilterNchwPlanar, float)
TCB_INSTANTIATE_KERNEL(DepthwiseFilterNchwPlanar, double)

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop
