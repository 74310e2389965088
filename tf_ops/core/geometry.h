// Geometry of the four convolution-gradient ops: every size, padding, stride and
// dilation rule, in one place, shared by the shape functions, the CPU engine and
// the CUDA engine. Framework-free: no TensorFlow headers. Nothing here aborts;
// every failure comes back as a Status whose message names the argument and
// gives the actual and expected values.
#ifndef TF_CONV_BACKPROP_CORE_GEOMETRY_H_
#define TF_CONV_BACKPROP_CORE_GEOMETRY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tf_conv_backprop {

enum class ErrorCode { kOk, kInvalidArgument, kUnimplemented, kResourceExhausted, kInternal };

struct Status {
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  bool ok() const { return code == ErrorCode::kOk; }
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgument(std::string message) {
  return Status{ErrorCode::kInvalidArgument, std::move(message)};
}
inline Status Unimplemented(std::string message) {
  return Status{ErrorCode::kUnimplemented, std::move(message)};
}
inline Status ResourceExhausted(std::string message) {
  return Status{ErrorCode::kResourceExhausted, std::move(message)};
}
inline Status Internal(std::string message) {
  return Status{ErrorCode::kInternal, std::move(message)};
}

enum class OpKind {
  kConv2DBackpropInput,
  kConv2DBackpropFilter,
  kDepthwiseBackpropInput,
  kDepthwiseBackpropFilter,
};

// TF's op name without our namespace, e.g. "Conv2DBackpropInput"; used in messages.
const char* OpName(OpKind op);
constexpr bool IsDepthwise(OpKind op) {
  return op == OpKind::kDepthwiseBackpropInput || op == OpKind::kDepthwiseBackpropFilter;
}
// Which input carries the sizes vector: "input_sizes" (input grads) or "filter_sizes".
constexpr bool ComputesInputGrad(OpKind op) {
  return op == OpKind::kConv2DBackpropInput || op == OpKind::kDepthwiseBackpropInput;
}

enum class DataFormat { kNHWC, kNCHW };
enum class Padding { kSame, kValid, kExplicit };

// Position of each logical dimension in a 4-D tensor of the given format.
struct DimIndex {
  int batch, rows, cols, depth;
};
// floor(a / b) and ceil(a / b) for b > 0 and any sign of a (C++ division
// truncates toward zero), for the kernels' index arithmetic.
inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline int64_t CeilDiv(int64_t a, int64_t b) { return a > 0 ? (a + b - 1) / b : -((-a) / b); }

// The output position whose tap at `offset` (k * dilation) reads input position
// `in` along one axis, or -1 when there is none: the input gradient's gather.
inline int64_t TapSource(int64_t in, int64_t pad, int64_t offset, int64_t stride, int64_t out) {
  const int64_t t = in + pad - offset;
  if (t < 0 || t % stride != 0 || t / stride >= out) return -1;
  return t / stride;
}

inline DimIndex DimsOf(DataFormat f) {
  return f == DataFormat::kNHWC ? DimIndex{0, 1, 2, 3} : DimIndex{0, 2, 3, 1};
}

// Attributes, validated once (kernel constructor, shape function).
struct ConvAttrs {
  DataFormat data_format = DataFormat::kNHWC;
  Padding padding = Padding::kValid;
  int64_t stride_rows = 1, stride_cols = 1;
  int64_t dilation_rows = 1, dilation_cols = 1;
  // EXPLICIT padding only; zero otherwise.
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// Validates the string/list attributes the way TF's kernels do (same order, same
// error classes), but accepts everything TF's GPU kernels accept: NCHW, dilations,
// unequal depthwise strides, dilated depthwise.
Status ParseAttrs(OpKind op, const std::string& data_format, const std::string& padding,
                  const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                  const std::vector<int64_t>& explicit_paddings, ConvAttrs* attrs);

// Everything an engine needs, all int64, all validated. Tensors are in
// `data_format` order; the filter is always [rows, cols, in_depth / groups, out_depth]
// (depthwise: [rows, cols, in_depth, depth_multiplier]).
struct ConvGeometry {
  int64_t batch = 0;
  int64_t in_rows = 0, in_cols = 0, in_depth = 0;
  int64_t filter_rows = 0, filter_cols = 0;
  int64_t depth_multiplier = 1;  // depthwise only; out_depth = in_depth * depth_multiplier
  // conv2d only: group k reads input channels [k, k + 1) * group_in_depth() and
  // writes output channels [k, k + 1) * group_out_depth(); 1 for a dense convolution.
  int64_t groups = 1;
  int64_t out_rows = 0, out_cols = 0, out_depth = 0;
  int64_t stride_rows = 1, stride_cols = 1;
  int64_t dilation_rows = 1, dilation_cols = 1;
  // Padding of the forward convolution (the one whose gradient we compute).
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  DataFormat data_format = DataFormat::kNHWC;
  bool depthwise = false;

  // Element counts, checked for int64 overflow when the geometry was built.
  int64_t input_elements = 0, filter_elements = 0, out_backprop_elements = 0;

  int64_t group_in_depth() const { return in_depth / groups; }
  int64_t group_out_depth() const { return out_depth / groups; }
  int64_t eff_filter_rows() const { return (filter_rows - 1) * dilation_rows + 1; }
  int64_t eff_filter_cols() const { return (filter_cols - 1) * dilation_cols + 1; }
};

// Calls fn(kh, kw, oh, ow) for every tap whose output position (oh, ow) reads input
// pixel (ih, iw) in the forward convolution: the input gradient's gather for one pixel.
template <typename Fn>
void ForEachTapReaching(const ConvGeometry& g, int64_t ih, int64_t iw, Fn fn) {
  for (int64_t kh = 0; kh < g.filter_rows; ++kh) {
    const int64_t oh = TapSource(ih, g.pad_top, kh * g.dilation_rows, g.stride_rows, g.out_rows);
    if (oh < 0) continue;
    for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
      const int64_t ow = TapSource(iw, g.pad_left, kw * g.dilation_cols, g.stride_cols, g.out_cols);
      if (ow >= 0) fn(kh, kw, oh, ow);
    }
  }
}

// The same geometry for `images` images of the batch (the element counts to
// match): how the engines run a batch in chunks.
ConvGeometry BatchSlice(const ConvGeometry& g, int64_t images);

// Forward output size and padding for one spatial dimension (TF's
// GetWindowedOutputSizeVerbose, with C++ truncating division), overflow-checked.
Status WindowedOutputSize(int64_t in, int64_t filter, int64_t dilation, int64_t stride,
                          Padding padding, int64_t explicit_before, int64_t explicit_after,
                          int64_t* out, int64_t* pad_before, int64_t* pad_after);

// Turns the int32 sizes input (`input_sizes` or `filter_sizes`) into a 4-D shape.
// `sizes_dims` is the sizes tensor's own shape. Conv2DBackpropInput also accepts
// the 2-element (rows, cols) form: batch from out_backprop, depth from filter[2],
// so `filter_shape` and `out_backprop_shape` are read (and rank-checked) only then.
Status ShapeFromSizes(OpKind op, const ConvAttrs& attrs, const std::vector<int64_t>& sizes_dims,
                      const int32_t* sizes, const std::vector<int64_t>& filter_shape,
                      const std::vector<int64_t>& out_backprop_shape, std::vector<int64_t>* shape);

// Checks the three shapes against each other and the attributes and fills `geo`.
// `input_shape` and `filter_shape` are either the real tensors' shapes or the
// shapes given by the sizes input.
Status ComputeGeometry(OpKind op, const ConvAttrs& attrs, const std::vector<int64_t>& input_shape,
                       const std::vector<int64_t>& filter_shape,
                       const std::vector<int64_t>& out_backprop_shape, ConvGeometry* geo);

// Memory guard: a legal request too big for this machine fails at once
// with ResourceExhausted, naming the sizes argument, instead of TF's allocator
// retrying for seconds or the kernel being killed for memory. What a CPU call may
// need is its output plus the engine's scratch bound, max(32 MiB, output bytes);
// that must fit in AvailableMemoryBytes(), which is looked up only for requests
// above 1 GiB. An output whose byte size overflows int64 is always refused.
Status CheckCpuMemory(OpKind op, const ConvGeometry& geo, int64_t element_size);
// Bytes this process can still allocate: TF_CONV_BACKPROP_MEMORY_LIMIT (bytes) when
// set (0 = unlimited); else MemAvailable + SwapFree (/proc/meminfo), capped by the
// memory cgroup's limit minus its usage; -1 when unknown (no limit applied).
int64_t AvailableMemoryBytes();

// a * b and a + b, or false when the result does not fit in int64.
bool CheckedMul(int64_t a, int64_t b, int64_t* out);
bool CheckedAdd(int64_t a, int64_t b, int64_t* out);
bool CheckedSub(int64_t a, int64_t b, int64_t* out);
// Product of the dimensions, or false on overflow or a negative dimension.
bool NumElements(const std::vector<int64_t>& shape, int64_t* out);

std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CORE_GEOMETRY_H_
