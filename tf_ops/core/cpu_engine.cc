// Front end of the CPU engine: everything that is not arithmetic. It zero-fills
// gradients whose reduction is empty, converts half/bfloat16 to float (the kernels
// accumulate in float), moves NCHW tensors to NHWC and back, and turns allocation
// failures into a Status. The kernels in cpu_kernels.h then only ever see
// non-empty NHWC float/double tensors.
#include "tf_ops/core/cpu_engine.h"

#include <algorithm>
#include <new>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "tf_ops/core/cpu_kernels.h"

namespace tf_conv_backprop {
namespace {

template <typename T>
using AccType = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Logical NHWC extents of a 4-D tensor in the geometry's layout.
struct Dims4 {
  int64_t n, h, w, c;
};

// Element-wise cost for the pool's shard sizing: a convert or a transpose is cheap.
constexpr int64_t kCopyCost = 4;

// dst (NHWC, To) <- src (format order, From).
template <typename From, typename To>
void ToNhwc(const CpuContext& ctx, DataFormat format, const Dims4& d, const From* src, To* dst) {
  const int64_t plane = d.h * d.w;
  if (format == DataFormat::kNHWC) {
    const int64_t total = d.n * plane;
    ctx.For(total, d.c * kCopyCost, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin * d.c; i < end * d.c; ++i) dst[i] = static_cast<To>(src[i]);
    });
    return;
  }
  // One unit per (image, row): reads C strided planes, writes one contiguous NHWC row.
  ctx.For(d.n * d.h, d.w * d.c * kCopyCost, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n = u / d.h, y = u % d.h;
      const From* s = src + n * d.c * plane + y * d.w;
      To* t = dst + (n * plane + y * d.w) * d.c;
      for (int64_t x = 0; x < d.w; ++x)
        for (int64_t c = 0; c < d.c; ++c) t[x * d.c + c] = static_cast<To>(s[c * plane + x]);
    }
  });
}

// dst (format order, To) <- src (NHWC, From).
template <typename From, typename To>
void FromNhwc(const CpuContext& ctx, DataFormat format, const Dims4& d, const From* src, To* dst) {
  const int64_t plane = d.h * d.w;
  if (format == DataFormat::kNHWC) {
    ToNhwc(ctx, format, d, src, dst);
    return;
  }
  // One unit per (image, channel): writes one contiguous NCHW plane.
  ctx.For(d.n * d.c, plane * kCopyCost, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n = u / d.c, c = u % d.c;
      const From* s = src + n * plane * d.c + c;
      To* t = dst + u * plane;
      for (int64_t i = 0; i < plane; ++i) t[i] = static_cast<To>(s[i * d.c]);
    }
  });
}

// A tensor as the kernels want it: the caller's buffer when it already is NHWC in
// the accumulation type, otherwise a converted copy.
template <typename T>
class KernelInput {
 public:
  using A = AccType<T>;
  KernelInput(const CpuContext& ctx, DataFormat format, const Dims4& d, const T* data) {
    if constexpr (std::is_same_v<T, A>) {
      if (format == DataFormat::kNHWC) {
        ptr_ = data;
        return;
      }
    }
    copy_.resize(d.n * d.h * d.w * d.c);
    ToNhwc(ctx, format, d, data, copy_.data());
    ptr_ = copy_.data();
  }
  const A* get() const { return ptr_; }

 private:
  std::vector<A> copy_;
  const A* ptr_ = nullptr;
};

// The kernel's output: written in place when the caller's buffer already has the
// kernel's layout and type, otherwise into scratch that Finish() converts back.
template <typename T>
class KernelOutput {
 public:
  using A = AccType<T>;
  KernelOutput(DataFormat format, const Dims4& d, T* data) : format_(format), dims_(d), data_(data) {
    if constexpr (std::is_same_v<T, A>) {
      if (format == DataFormat::kNHWC) {
        ptr_ = data;
        return;
      }
    }
    scratch_.resize(d.n * d.h * d.w * d.c);
    ptr_ = scratch_.data();
  }
  A* get() { return ptr_; }
  void Finish(const CpuContext& ctx) {
    if (!scratch_.empty()) FromNhwc(ctx, format_, dims_, scratch_.data(), data_);
  }

 private:
  DataFormat format_;
  Dims4 dims_;
  T* data_;
  std::vector<A> scratch_;
  A* ptr_ = nullptr;
};

Dims4 InputDims(const ConvGeometry& g) { return {g.batch, g.in_rows, g.in_cols, g.in_depth}; }
Dims4 OutBackpropDims(const ConvGeometry& g) { return {g.batch, g.out_rows, g.out_cols, g.out_depth}; }
// The filter is HWIO in every data format: never transposed, only converted.
Dims4 FilterDims(const ConvGeometry& g) {
  return {1, g.filter_rows, g.filter_cols, g.in_depth * (g.depthwise ? g.depth_multiplier : g.out_depth)};
}

template <typename Fn>
Status Guarded(Fn fn) {
  try {
    fn();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory allocating CPU scratch space for the gradient");
  } catch (const std::exception& e) {
    return Internal(e.what());
  }
  return OkStatus();
}

// dx = kernel(filter, dy): shared by the conv2d and depthwise input gradients.
template <typename T, typename Kernel>
Status InputGradient(const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                     const T* out_backprop, T* in_backprop, Kernel kernel) {
  if (geo.input_elements == 0) return OkStatus();
  if (geo.filter_elements == 0 || geo.out_backprop_elements == 0) {
    std::fill_n(in_backprop, geo.input_elements, T(0));
    return OkStatus();
  }
  return Guarded([&] {
    KernelInput<T> w(ctx, DataFormat::kNHWC, FilterDims(geo), filter);
    KernelInput<T> dy(ctx, geo.data_format, OutBackpropDims(geo), out_backprop);
    KernelOutput<T> dx(geo.data_format, InputDims(geo), in_backprop);
    kernel(ctx, geo, w.get(), dy.get(), dx.get());
    dx.Finish(ctx);
  });
}

// dW = kernel(x, dy): shared by the conv2d and depthwise filter gradients.
template <typename T, typename Kernel>
Status FilterGradient(const CpuContext& ctx, const ConvGeometry& geo, const T* input,
                      const T* out_backprop, T* filter_backprop, Kernel kernel) {
  if (geo.filter_elements == 0) return OkStatus();
  if (geo.input_elements == 0 || geo.out_backprop_elements == 0) {
    std::fill_n(filter_backprop, geo.filter_elements, T(0));
    return OkStatus();
  }
  return Guarded([&] {
    KernelInput<T> x(ctx, geo.data_format, InputDims(geo), input);
    KernelInput<T> dy(ctx, geo.data_format, OutBackpropDims(geo), out_backprop);
    KernelOutput<T> dw(DataFormat::kNHWC, FilterDims(geo), filter_backprop);
    kernel(ctx, geo, x.get(), dy.get(), dw.get());
    dw.Finish(ctx);
  });
}

}  // namespace

template <typename T>
Status Conv2DBackpropInputCpu(const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                              const T* out_backprop, T* in_backprop) {
  return InputGradient(ctx, geo, filter, out_backprop, in_backprop, cpu::Conv2DBackpropInputNhwc<AccType<T>>);
}

template <typename T>
Status Conv2DBackpropFilterCpu(const CpuContext& ctx, const ConvGeometry& geo, const T* input,
                               const T* out_backprop, T* filter_backprop) {
  return FilterGradient(ctx, geo, input, out_backprop, filter_backprop, cpu::Conv2DBackpropFilterNhwc<AccType<T>>);
}

template <typename T>
Status DepthwiseBackpropInputCpu(const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                                 const T* out_backprop, T* in_backprop) {
  return InputGradient(ctx, geo, filter, out_backprop, in_backprop, cpu::DepthwiseBackpropInputNhwc<AccType<T>>);
}

template <typename T>
Status DepthwiseBackpropFilterCpu(const CpuContext& ctx, const ConvGeometry& geo, const T* input,
                                  const T* out_backprop, T* filter_backprop) {
  return FilterGradient(ctx, geo, input, out_backprop, filter_backprop,
                        cpu::DepthwiseBackpropFilterNhwc<AccType<T>>);
}

#define TF_CONV_BACKPROP_INSTANTIATE(T)                                                              \
  template Status Conv2DBackpropInputCpu<T>(const CpuContext&, const ConvGeometry&, const T*, const T*, T*); \
  template Status Conv2DBackpropFilterCpu<T>(const CpuContext&, const ConvGeometry&, const T*, const T*, T*); \
  template Status DepthwiseBackpropInputCpu<T>(const CpuContext&, const ConvGeometry&, const T*, const T*, T*); \
  template Status DepthwiseBackpropFilterCpu<T>(const CpuContext&, const ConvGeometry&, const T*, const T*, T*);
TF_CONV_BACKPROP_INSTANTIATE(Eigen::half)
TF_CONV_BACKPROP_INSTANTIATE(Eigen::bfloat16)
TF_CONV_BACKPROP_INSTANTIATE(float)
TF_CONV_BACKPROP_INSTANTIATE(double)
#undef TF_CONV_BACKPROP_INSTANTIATE

}  // namespace tf_conv_backprop
