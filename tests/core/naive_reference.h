// Direct, obviously-correct loops for the four gradients (NHWC, double
// accumulation, or uint32 for int32), used by the standalone core tests as the
// oracle. Slow by design.
#ifndef TF_CONV_BACKPROP_TESTS_CORE_NAIVE_REFERENCE_H_
#define TF_CONV_BACKPROP_TESTS_CORE_NAIVE_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "tf_ops/core/geometry.h"

namespace tf_conv_backprop {
namespace naive {

// Calls fn(n, oh, ow, ih, iw, kh, kw) for every (output pixel, tap) pair whose
// input position lies inside the image: the support of the forward convolution.
template <typename Fn>
void ForEachTap(const ConvGeometry& g, Fn fn) {
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oh = 0; oh < g.out_rows; ++oh)
      for (int64_t ow = 0; ow < g.out_cols; ++ow)
        for (int64_t kh = 0; kh < g.filter_rows; ++kh) {
          const int64_t ih = oh * g.stride_rows - g.pad_top + kh * g.dilation_rows;
          if (ih < 0 || ih >= g.in_rows) continue;
          for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
            const int64_t iw = ow * g.stride_cols - g.pad_left + kw * g.dilation_cols;
            if (iw < 0 || iw >= g.in_cols) continue;
            fn(n, oh, ow, ih, iw, kh, kw);
          }
        }
}

// dx (or dW) = sum over taps of products; `input_grad` selects which. Acc is the
// sum's type: double, or uint32_t for int32 (exact, wrapping around as TF's int32
// kernel does).
template <typename T, typename Acc = double>
std::vector<Acc> Gradient(const ConvGeometry& g, bool input_grad, const T* x_or_w, const T* dy) {
  const int64_t cin = g.in_depth, cout = g.out_depth;
  const int64_t m = g.depthwise ? g.depth_multiplier : 1;
  // Grouped conv2d: input channel ci meets only the output channels of its group.
  const int64_t gcin = g.depthwise ? cin : g.group_in_depth(), gcout = g.depthwise ? cout : g.group_out_depth();
  std::vector<Acc> out(input_grad ? g.input_elements : g.filter_elements, Acc(0));
  auto x_at = [&](int64_t n, int64_t ih, int64_t iw) { return ((n * g.in_rows + ih) * g.in_cols + iw) * cin; };
  auto y_at = [&](int64_t n, int64_t oh, int64_t ow) { return ((n * g.out_rows + oh) * g.out_cols + ow) * cout; };
  auto w_at = [&](int64_t kh, int64_t kw) { return (kh * g.filter_cols + kw) * (g.depthwise ? cin * m : gcin * cout); };
  ForEachTap(g, [&](int64_t n, int64_t oh, int64_t ow, int64_t ih, int64_t iw, int64_t kh, int64_t kw) {
    const int64_t xo = x_at(n, ih, iw), yo = y_at(n, oh, ow), wo = w_at(kh, kw);
    for (int64_t ci = 0; ci < cin; ++ci) {
      if (g.depthwise) {
        for (int64_t j = 0; j < m; ++j) {
          const Acc d = static_cast<Acc>(dy[yo + ci * m + j]);
          if (input_grad) out[xo + ci] += d * static_cast<Acc>(x_or_w[wo + ci * m + j]);
          else out[wo + ci * m + j] += d * static_cast<Acc>(x_or_w[xo + ci]);
        }
      } else {
        const int64_t group = ci / gcin, wi = wo + (ci % gcin) * cout;
        for (int64_t co = group * gcout; co < (group + 1) * gcout; ++co) {
          const Acc d = static_cast<Acc>(dy[yo + co]);
          if (input_grad) out[xo + ci] += d * static_cast<Acc>(x_or_w[wi + co]);
          else out[wi + co] += d * static_cast<Acc>(x_or_w[xo + ci]);
        }
      }
    }
  });
  return out;
}

}  // namespace naive
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_TESTS_CORE_NAIVE_REFERENCE_H_
