// Dense conv2d gradients on the CPU (NHWC, float and double): Eigen GEMMs around
// an im2col / col2im over tiles of output pixels.
//
// View the filter as a row-major [K x Cout] matrix W with K = KH*KW*Cin, rows in
// (kh, kw, ci) order. For a tile of P output pixels, let col be the [P x K] matrix
// whose row p holds the input values tap (kh, kw, ci) of pixel p reads in the
// forward pass (zero where the tap falls outside the image). Then y = col * W, so
//   input grad:  col_grad[P x K] = dy[P x Cout] * W^T, and each col_grad element
//                is added into the dx element it was read from (col2im);
//   filter grad: dW[K x Cout] = sum over tiles of col^T * dy.
// With a 1x1 filter, stride 1 and no padding, col is x itself and both gradients
// become a single GEMM each.
//
// Deep layers: when an image has few output pixels (7x7, 14x14), the input
// gradient runs one GEMM over a group of images (their dy rows are contiguous),
// so the filter-sized operand is packed once per group, not once per image. When
// dW outgrows L2 (cpu/select.cc), the filter gradient is split by (tap,
// input-channel block) instead of by pixels: each unit owns an L2-sized block of
// dW and sums over all pixels into it (FilterGradByTaps), instead of every pixel
// tile streaming the whole dW.
//
// Reproducibility: the shape of every GEMM and the order of every sum depend only
// on the geometry and ctx.num_threads, never on how parallel_for splits a range.
// That includes the pixel tiling: Eigen's GEMM may sum a row in a different order
// depending on where it falls in a register panel, so tiles are fixed up front and
// a thread only ever receives whole tiles.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/isa_kernels.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

template <typename A>
using RowMatrix = Eigen::Matrix<A, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename A>
using MatrixMap = Eigen::Map<RowMatrix<A>>;
template <typename A>
using ConstMatrixMap = Eigen::Map<const RowMatrix<A>>;

// Aligned (64 bytes) and counted scratch, so Eigen sees the same alignment on every
// run (its matrix-vector path peels unaligned leading elements, which reorders the sum).
template <typename A>
using Scratch = ScratchVector<A>;

// A col tile this size stays in L2 between the GEMM that writes it and the
// col2im (or the GEMM) that reads it.
constexpr int64_t kColBytes = int64_t{1} << 20;
// But never fewer pixels than this: each GEMM call repacks its filter-sized
// operand (input grad) or reads and writes all of dW (filter grad), which has
// to be amortised over enough pixels.
constexpr int64_t kMinTileRows = 64;
// Deep layers: images with fewer output pixels than this share one GEMM.
constexpr int64_t kGroupRows = 256;
// Such a dW block is kept near this size (L2-resident while its pixels stream).
constexpr int64_t kFilterBlockBytes = int64_t{512} << 10;


// Pixels per col tile of `width` columns.
template <typename A>
int64_t TileRows(int64_t width, int64_t max_rows) {
  const int64_t rows =
      std::max(kColBytes / (width * static_cast<int64_t>(sizeof(A))), kMinTileRows);
  return std::max<int64_t>(1, std::min(rows, max_rows));
}

// Writes rows [0, rows) of col ([rows x KH*KW*Cin]) for the output pixels
// [first, first + rows), counted over the whole batch.
template <typename A>
void Im2Col(const ConvGeometry& g, const A* x, int64_t first, int64_t rows, A* col) {
  const int64_t cin = g.in_depth;
  const int64_t out_pixels = g.out_rows * g.out_cols;
  const int64_t row_width = g.filter_cols * cin;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = (first + r) / out_pixels, p = (first + r) % out_pixels;
    const int64_t ih0 = (p / g.out_cols) * g.stride_rows - g.pad_top;
    const int64_t iw0 = (p % g.out_cols) * g.stride_cols - g.pad_left;
    const A* x_n = x + n * g.in_rows * g.in_cols * cin;
    A* dst = col + r * g.filter_rows * row_width;
    const bool whole_rows = g.dilation_cols == 1 && iw0 >= 0 && iw0 + g.filter_cols <= g.in_cols;
    for (int64_t kh = 0; kh < g.filter_rows; ++kh, dst += row_width) {
      const int64_t ih = ih0 + kh * g.dilation_rows;
      if (ih < 0 || ih >= g.in_rows) {
        std::fill_n(dst, row_width, A(0));
        continue;
      }
      if (whole_rows) {  // the filter row's (kw, ci) values are contiguous in x
        std::copy_n(x_n + (ih * g.in_cols + iw0) * cin, row_width, dst);
        continue;
      }
      for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
        const int64_t iw = iw0 + kw * g.dilation_cols;
        A* d = dst + kw * cin;
        if (iw < 0 || iw >= g.in_cols) {
          std::fill_n(d, cin, A(0));
        } else {
          std::copy_n(x_n + (ih * g.in_cols + iw) * cin, cin, d);
        }
      }
    }
  }
}

// Writes col ([rows x cb]): for the output pixels [first, first + rows) of the
// whole batch, the input channels [c0, c0 + cb) that tap (kh, kw) reads (zero
// where it falls outside the image).
template <typename A>
void Im2ColTap(const ConvGeometry& g, const A* x, int64_t kh, int64_t kw, int64_t c0, int64_t cb,
               int64_t first, int64_t rows, A* col) {
  const int64_t cin = g.in_depth;
  const int64_t out_pixels = g.out_rows * g.out_cols;
  int64_t n = first / out_pixels, oh = (first % out_pixels) / g.out_cols, ow = first % g.out_cols;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ih = oh * g.stride_rows - g.pad_top + kh * g.dilation_rows;
    const int64_t iw = ow * g.stride_cols - g.pad_left + kw * g.dilation_cols;
    A* d = col + r * cb;
    if (ih < 0 || ih >= g.in_rows || iw < 0 || iw >= g.in_cols) {
      std::fill_n(d, cb, A(0));
    } else {
      std::copy_n(x + ((n * g.in_rows + ih) * g.in_cols + iw) * cin + c0, cb, d);
    }
    if (++ow == g.out_cols) {
      ow = 0;
      if (++oh == g.out_rows) oh = 0, ++n;
    }
  }
}

// Adds col ([rows x KH*KW*cb], pixels [first, first + rows) of one image) into
// that image's dx, whose channels [c0, c0 + cb) start at dx_n (pixel stride Cin).
template <typename A>
void Col2Im(const ConvGeometry& g, const A* col, int64_t first, int64_t rows, int64_t cb, A* dx_n) {
  const int64_t cin = g.in_depth;
  const int64_t width = g.filter_rows * g.filter_cols * cb;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t p = first + r;
    const int64_t ih0 = (p / g.out_cols) * g.stride_rows - g.pad_top;
    const int64_t iw0 = (p % g.out_cols) * g.stride_cols - g.pad_left;
    const A* src_row = col + r * width;
    for (int64_t kh = 0; kh < g.filter_rows; ++kh) {
      const int64_t ih = ih0 + kh * g.dilation_rows;
      if (ih < 0 || ih >= g.in_rows) continue;
      for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
        const int64_t iw = iw0 + kw * g.dilation_cols;
        if (iw < 0 || iw >= g.in_cols) continue;
        A* d = dx_n + (ih * g.in_cols + iw) * cin;
        const A* s = src_row + (kh * g.filter_cols + kw) * cb;
        for (int64_t c = 0; c < cb; ++c) d[c] += s[c];
      }
    }
  }
}

// dx = dy * W^T. Pixels are independent here, so fixed pixel tiles are
// race-free units of work: at least 256 rows to amortise packing W, and a dx
// tile of about kPointwiseTileBytes so it stays in L2 (Eigen, AVX-512, one
// thread, 25088 pixels: K=64 -> 256 wide went from ~53 GF/s with 3136-row tiles
// to ~80 with 512-row tiles; noisy machine, 3 runs).
constexpr int64_t kPointwiseTileBytes = int64_t{512} << 10;
template <typename A>
void PointwiseInputGrad(const CpuContext& ctx, const ConvGeometry& g, const A* w, const A* dy,
                        A* dx) {
  const int64_t cin = g.in_depth, cout = g.out_depth;
  const int64_t pixels = g.batch * g.in_rows * g.in_cols;
  const int64_t tile = std::min(
      pixels, std::max<int64_t>(256, kPointwiseTileBytes / (cin * static_cast<int64_t>(sizeof(A)))));
  const ConstMatrixMap<A> wm(w, cin, cout);
  ctx.For(CeilDiv(pixels, tile), tile * cin * cout, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t p0 = t * tile, rows = std::min(tile, pixels - p0);
      MatrixMap<A>(dx + p0 * cin, rows, cin).noalias() =
          ConstMatrixMap<A>(dy + p0 * cout, rows, cout) * wm.transpose();
    }
  });
}

// dW for a large filter: units are (tap, input-channel block) pairs, each owning
// the rows [tap*Cin + c0, + cb) of dW ([cb x Cout], L2-sized) and summing over
// all pixels of the batch in fixed tiles: dW_blk (+)= col_tap^T * dy_tile. Each dW
// element is written by one unit in a fixed order, so no partials, no reduction
// pass, and the result does not depend on the thread count.
template <typename A>
void FilterGradByTaps(const CpuContext& ctx, const ConvGeometry& g, const A* x, const A* dy,
                      A* dw) {
  const int64_t cin = g.in_depth, cout = g.out_depth;
  const int64_t taps = g.filter_rows * g.filter_cols;
  const int64_t pixels = g.batch * g.out_rows * g.out_cols;
  const int64_t threads = std::max(1, ctx.num_threads);
  int64_t block = std::max<int64_t>(
      16, std::min(cin, kFilterBlockBytes / (cout * static_cast<int64_t>(sizeof(A)))));
  while (taps * CeilDiv(cin, block) < 8 * threads && block > 64) block = CeilDiv(block, 2);
  const int64_t blocks = CeilDiv(cin, block);
  const int64_t tile = std::max<int64_t>(
      64, std::min(pixels, kColBytes / (block * static_cast<int64_t>(sizeof(A)))));
  ctx.For(taps * blocks, pixels * block * cout, [&](int64_t begin, int64_t end) {
    Scratch<A> col(tile * block);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t t = u / blocks, c0 = (u % blocks) * block;
      const int64_t cb = std::min(block, cin - c0);
      MatrixMap<A> dw_blk(dw + (t * cin + c0) * cout, cb, cout);
      for (int64_t p0 = 0; p0 < pixels; p0 += tile) {
        const int64_t rows = std::min(tile, pixels - p0);
        Im2ColTap(g, x, t / g.filter_cols, t % g.filter_cols, c0, cb, p0, rows, col.data());
        const auto product = ConstMatrixMap<A>(col.data(), rows, cb).transpose() *
                             ConstMatrixMap<A>(dy + p0 * cout, rows, cout);
        if (p0 == 0) {
          dw_blk.noalias() = product;
        } else {
          dw_blk.noalias() += product;
        }
      }
    }
  });
}

}  // namespace

template <typename A>
bool Conv2DInputPointwiseGemm(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                              const A* out_backprop, A* in_backprop) {
  PointwiseInputGrad(ctx, geo, filter, out_backprop, in_backprop);
  return true;
}

template <typename A>
bool Conv2DInputIm2ColGemm(const CpuContext& ctx, const ConvGeometry& geo, const A* filter,
                           const A* out_backprop, A* in_backprop) {
  const ConvGeometry& g = geo;
  const int64_t taps = g.filter_rows * g.filter_cols;
  const int64_t cin = g.in_depth, cout = g.out_depth;
  const int64_t in_pixels = g.in_rows * g.in_cols;
  const int64_t out_pixels = g.out_rows * g.out_cols;

  // Images with few output pixels (deep layers: 7x7, 14x14) are grouped: the dy
  // rows of consecutive images are contiguous in NHWC, so one GEMM covers a
  // group and W is packed once per group instead of once per image.
  int64_t group = 1;
  if (out_pixels < kGroupRows) {
    group = std::min(g.batch, CeilDiv(kGroupRows, out_pixels));
    group = CeilDiv(g.batch, CeilDiv(g.batch, group));  // near-equal groups
  }
  const int64_t groups = CeilDiv(g.batch, group);

  // Work units are (image group, input-channel block) pairs: their dx elements
  // are disjoint, so col2im needs no locks. Channel blocks give a small batch
  // enough units for every thread (twice over, for balance), each keeping >= ~48
  // col columns so its GEMM stays efficient; a group's col (all its rows at once)
  // is also kept near kColBytes by narrower blocks.
  const int64_t threads = std::max(1, ctx.num_threads);
  const int64_t min_block = CeilDiv(48, taps);
  int64_t blocks = 1;
  if (threads > 1 && groups < 2 * threads) blocks = CeilDiv(2 * threads, groups);
  if (group > 1) {
    const int64_t col_bytes = group * out_pixels * taps * cin * static_cast<int64_t>(sizeof(A));
    blocks = std::max(blocks, CeilDiv(col_bytes, 2 * kColBytes));
  }
  blocks = std::max<int64_t>(1, std::min(blocks, cin / min_block));
  const int64_t block = CeilDiv(cin, blocks);
  blocks = CeilDiv(cin, block);

  // Each block's rows of W ([taps*cb x Cout]) packed contiguously, once per call,
  // so every GEMM reads a plain matrix.
  Scratch<A> packed;
  const A* w = filter;
  if (blocks > 1) {
    packed.resize(taps * cin * cout);
    for (int64_t c0 = 0; c0 < cin; c0 += block) {
      const int64_t cb = std::min(block, cin - c0);
      A* dst = packed.data() + taps * c0 * cout;
      for (int64_t t = 0; t < taps; ++t) {
        std::copy_n(filter + (t * cin + c0) * cout, cb * cout, dst + t * cb * cout);
      }
    }
    w = packed.data();
  }

  const int64_t tile = group > 1 ? group * out_pixels : TileRows<A>(taps * block, out_pixels);
  ctx.For(groups * blocks, group * out_pixels * taps * block * cout, [&](int64_t begin, int64_t end) {
    Scratch<A> col(tile * taps * block);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n0 = (u / blocks) * group, c0 = (u % blocks) * block;
      const int64_t nb = std::min(group, g.batch - n0);
      const int64_t cb = std::min(block, cin - c0), width = taps * cb;
      const ConstMatrixMap<A> wb(w + taps * c0 * cout, width, cout);
      for (int64_t n = n0; n < n0 + nb; ++n) {
        // Pixels no tap reads must come out zero, so start from zero everywhere.
        A* dx_n = in_backprop + n * in_pixels * cin + c0;
        for (int64_t i = 0; i < in_pixels; ++i) std::fill_n(dx_n + i * cin, cb, A(0));
      }
      if (group > 1) {
        MatrixMap<A>(col.data(), nb * out_pixels, width).noalias() =
            ConstMatrixMap<A>(out_backprop + n0 * out_pixels * cout, nb * out_pixels, cout) *
            wb.transpose();
        for (int64_t i = 0; i < nb; ++i) {
          Col2Im(g, col.data() + i * out_pixels * width, 0, out_pixels, cb,
                 in_backprop + (n0 + i) * in_pixels * cin + c0);
        }
        continue;
      }
      A* dx_n = in_backprop + n0 * in_pixels * cin + c0;
      for (int64_t p0 = 0; p0 < out_pixels; p0 += tile) {
        const int64_t rows = std::min(tile, out_pixels - p0);
        MatrixMap<A>(col.data(), rows, width).noalias() =
            ConstMatrixMap<A>(out_backprop + (n0 * out_pixels + p0) * cout, rows, cout) *
            wb.transpose();
        Col2Im(g, col.data(), p0, rows, cb, dx_n);
      }
    }
  });
  return true;
}

template <typename A>
bool Conv2DFilterByTapsGemm(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                            const A* out_backprop, A* filter_backprop) {
  FilterGradByTaps(ctx, geo, input, out_backprop, filter_backprop);
  return true;
}

namespace {

// Every output pixel contributes to every dW element, so threads cannot split
// dW by pixels without racing. Instead the pixels are cut into a fixed number
// of contiguous shards; shard 0 sums straight into filter_backprop, the others
// into private partials that are added afterwards in shard order. The shard
// count depends only on the geometry and num_threads, hence the same rounding
// on every run.
template <typename A>
int64_t PixelShards(const CpuContext& ctx, const ConvGeometry& g) {
  const int64_t pixels = g.batch * g.out_rows * g.out_cols;
  return ShardsWithinPartialBudget(std::min<int64_t>(std::max(1, ctx.num_threads), pixels),
                                   g.filter_elements * static_cast<int64_t>(sizeof(A)));
}

// add_pixels(lo, hi, dw, col) adds the batch's output pixels [lo, hi) into the
// [K x Cout] matrix dw, with col_elements of scratch at col.
template <typename A, typename AddPixels>
void SumPixelShards(const CpuContext& ctx, const ConvGeometry& g, int64_t shards, int64_t col_elements,
                    A* filter_backprop, AddPixels add_pixels) {
  const int64_t k = g.filter_rows * g.filter_cols * g.in_depth, cout = g.out_depth;
  const int64_t filter_size = k * cout;
  const int64_t pixels = g.batch * g.out_rows * g.out_cols;
  Scratch<A> partials((shards - 1) * filter_size);
  ctx.For(shards, CeilDiv(pixels, shards) * filter_size, [&](int64_t begin, int64_t end) {
    Scratch<A> col(col_elements);
    for (int64_t s = begin; s < end; ++s) {
      MatrixMap<A> dw(s == 0 ? filter_backprop : partials.data() + (s - 1) * filter_size, k, cout);
      dw.setZero();
      add_pixels(ShardStart(pixels, shards, s), ShardStart(pixels, shards, s + 1), dw, col.data());
    }
  });
  if (shards > 1) {
    // Per element, the partials are added in shard order whatever the split.
    ctx.For(filter_size, shards, [&](int64_t begin, int64_t end) {
      for (int64_t s = 1; s < shards; ++s) {
        const A* partial = partials.data() + (s - 1) * filter_size;
        for (int64_t i = begin; i < end; ++i) filter_backprop[i] += partial[i];
      }
    });
  }
}

}  // namespace

// 1x1 stride 1: col is x itself, one GEMM per shard.
template <typename A>
bool Conv2DFilterPointwiseGemm(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                               const A* out_backprop, A* filter_backprop) {
  const int64_t cin = geo.in_depth, cout = geo.out_depth;
  SumPixelShards(ctx, geo, PixelShards<A>(ctx, geo), 0, filter_backprop,
                 [&](int64_t lo, int64_t hi, MatrixMap<A>& dw, A*) {
                   dw.noalias() += ConstMatrixMap<A>(input + lo * cin, hi - lo, cin).transpose() *
                                   ConstMatrixMap<A>(out_backprop + lo * cout, hi - lo, cout);
                 });
  return true;
}

template <typename A>
bool Conv2DFilterIm2ColGemm(const CpuContext& ctx, const ConvGeometry& geo, const A* input,
                            const A* out_backprop, A* filter_backprop) {
  const ConvGeometry& g = geo;
  const int64_t k = g.filter_rows * g.filter_cols * g.in_depth;
  const int64_t cout = g.out_depth;
  const int64_t pixels = g.batch * g.out_rows * g.out_cols;
  const int64_t shards = PixelShards<A>(ctx, g);
  const int64_t tile = TileRows<A>(k, CeilDiv(pixels, shards));
  SumPixelShards(ctx, g, shards, tile * k, filter_backprop, [&](int64_t lo, int64_t hi, MatrixMap<A>& dw, A* col) {
    for (int64_t p0 = lo; p0 < hi; p0 += tile) {
      const int64_t rows = std::min(tile, hi - p0);
      Im2Col(g, input, p0, rows, col);
      dw.noalias() += ConstMatrixMap<A>(col, rows, k).transpose() *
                      ConstMatrixMap<A>(out_backprop + p0 * cout, rows, cout);
    }
  });
  return true;
}

// NCHW 1x1: per image x is [Cin x P] and dy [Cout x P], both with the pixels
// contiguous, so dW (HWIO = [Cin x Cout]) = sum over images of X * DY^T, one
// GEMM per image and no transposes. Units are fixed slices of kSlice rows (or
// columns) of dW, the wider side, each summing the images in order: the sums
// do not depend on the thread count.
template <typename A>
bool Conv2DFilterNchwPointwiseGemm(const CpuContext& ctx, const ConvGeometry& g, const A* input,
                                   const A* out_backprop, A* filter_backprop) {
  using StridedMap = Eigen::Map<RowMatrix<A>, 0, Eigen::OuterStride<>>;
  constexpr int64_t kSlice = 64;
  const int64_t cin = g.in_depth, cout = g.out_depth, pixels = g.in_rows * g.in_cols;
  const bool rows = cin >= cout;  // slices of dW rows (input channels), else columns
  const int64_t wide = rows ? cin : cout, narrow = rows ? cout : cin;
  ctx.For(CeilDiv(wide, kSlice), g.batch * pixels * kSlice * narrow, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t s0 = u * kSlice, sn = std::min(kSlice, wide - s0);
      StridedMap dw(filter_backprop + (rows ? s0 * cout : s0), rows ? sn : cin, rows ? cout : sn,
                    Eigen::OuterStride<>(cout));
      dw.setZero();
      for (int64_t n = 0; n < g.batch; ++n) {
        const ConstMatrixMap<A> x(input + (n * cin + (rows ? s0 : 0)) * pixels, rows ? sn : cin, pixels);
        const ConstMatrixMap<A> dy(out_backprop + (n * cout + (rows ? 0 : s0)) * pixels, rows ? cout : sn,
                                   pixels);
        dw.noalias() += x * dy.transpose();
      }
    }
  });
  return true;
}
#define TCB_INSTANTIATE_GEMM_KERNELS(A)                     \
  TCB_INSTANTIATE_KERNEL(Conv2DInputPointwiseGemm, A)       \
  TCB_INSTANTIATE_KERNEL(Conv2DInputIm2ColGemm, A)          \
  TCB_INSTANTIATE_KERNEL(Conv2DFilterNchwPointwiseGemm, A)  \
  TCB_INSTANTIATE_KERNEL(Conv2DFilterPointwiseGemm, A)      \
  TCB_INSTANTIATE_KERNEL(Conv2DFilterByTapsGemm, A)         \
  TCB_INSTANTIATE_KERNEL(Conv2DFilterIm2ColGemm, A)
TCB_INSTANTIATE_GEMM_KERNELS(float)
TCB_INSTANTIATE_GEMM_KERNELS(double)
#undef TCB_INSTANTIATE_GEMM_KERNELS

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop
