// Conv2DBackpropInput on int32 (TF registers it: tf.nn.conv2d_transpose of integer
// tensors runs it), NHWC and NCHW as they lie: a direct gather, no GEMM (Eigen's
// integer GEMM would gain little at the sizes integer transposed convolutions see).
//
//   dx[n, ih, iw, ci] = sum over taps (kh, kw) and co of w[kh, kw, ci, co] * dy[n, oh, ow, co]
//   where oh = (ih + pad_top - kh * d) / s when that divides exactly and lands in
//   [0, out_rows) (the same for columns).
//
// TF's int32 kernel wraps around on overflow (two's complement). The sums are formed
// in uint32, where wrap-around is defined (a signed overflow would be undefined
// behaviour), and the bits are those of the wrapped int32 sum: the order of the sum
// cannot change the result. Each dx element is gathered by one thread.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/isa_kernels.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

// Element strides of a 4-D tensor in the geometry's layout, by logical dimension.
struct Strides {
  int64_t image, row, col, channel;
};
Strides StridesOf(DataFormat format, int64_t rows, int64_t cols, int64_t depth) {
  if (format == DataFormat::kNHWC) return {rows * cols * depth, cols * depth, depth, 1};
  return {depth * rows * cols, cols, 1, rows * cols};
}

}  // namespace

template <typename T>
bool Conv2DInputInt32Direct(const CpuContext& ctx, const ConvGeometry& g, const T* filter, const T* dy, T* dx) {
  static_assert(std::is_same_v<T, int32_t>, "the int32 row");
  const int64_t cin = g.in_depth, cout = g.out_depth;
  // Grouped: input channel ci meets the output channels of its group only.
  const int64_t cg = g.group_in_depth(), og = g.group_out_depth();
  const Strides xs = StridesOf(g.data_format, g.in_rows, g.in_cols, cin);
  const Strides ys = StridesOf(g.data_format, g.out_rows, g.out_cols, cout);
  // Units are rows of one image; a row costs about its pixels' share of the taps.
  const int64_t taps_per_pixel =
      std::max<int64_t>(1, g.filter_rows * g.filter_cols / (g.stride_rows * g.stride_cols));
  ctx.For(g.batch * g.in_rows, g.in_cols * taps_per_pixel * cin * og, [&](int64_t begin, int64_t end) {
    ScratchVector<uint32_t> acc(cin);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n = u / g.in_rows, ih = u % g.in_rows;
      for (int64_t iw = 0; iw < g.in_cols; ++iw) {
        std::fill(acc.begin(), acc.end(), 0u);
        ForEachTapReaching(g, ih, iw, [&](int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
          const T* y = dy + n * ys.image + oh * ys.row + ow * ys.col;
          const T* w = filter + (kh * g.filter_cols + kw) * cg * cout;
          for (int64_t ci = 0; ci < cin; ++ci) {
            const T* w_row = w + (ci % cg) * cout;
            uint32_t sum = acc[ci];
            for (int64_t co = ci / cg * og; co < (ci / cg + 1) * og; ++co) {
              sum += static_cast<uint32_t>(w_row[co]) * static_cast<uint32_t>(y[co * ys.channel]);
            }
            acc[ci] = sum;
          }
        });
        T* x = dx + n * xs.image + ih * xs.row + iw * xs.col;
        for (int64_t ci = 0; ci < cin; ++ci) x[ci * xs.channel] = static_cast<int32_t>(acc[ci]);
      }
    }
  });
  return true;
}

TCB_INSTANTIATE_KERNEL(Conv2DInputInt32Direct, int32_t)

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop
