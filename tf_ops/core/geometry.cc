#include "tf_ops/core/geometry.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

namespace tf_conv_backprop {
namespace {

std::string ListString(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

const char* FormatName(DataFormat f) { return f == DataFormat::kNHWC ? "NHWC" : "NCHW"; }

const char* PaddingName(Padding p) {
  return p == Padding::kSame ? "SAME" : p == Padding::kValid ? "VALID" : "EXPLICIT";
}

template <typename... Args>
std::string Str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// TF's message for a check first, then ours: compatibility suites match TF's texts
// (assertRaisesRegex), and ours adds the argument's name and the values at fault.
std::string WithTfText(OpKind op, const std::string& tf_text, const std::string& ours) {
  const bool sentence = !tf_text.empty() && tf_text.back() == '.';
  return Str(OpName(op), ": ", tf_text, sentence ? " " : "; ", ours);
}

// TF's TensorShape text for a shape whose element count overflows int64.
std::string ShapeOverflowText(const std::vector<int64_t>& dims) {
  std::string list;
  for (size_t i = 0; i < dims.size(); ++i) list += Str(i ? "," : "", dims[i]);
  return Str("Shape [", list, "] would have more than 2**63 - 1 elements");
}

// Strides/dilations share every rule, checked in TF's order: int32 values (TF reads
// these list(int) attributes as int32, so larger ones never reach the size arithmetic),
// 4 entries, 1 on batch and depth, positive on rows and cols.
Status ParseWindowAttr(OpKind op, const char* name, const std::vector<int64_t>& values,
                       DataFormat format, int64_t* rows, int64_t* cols) {
  const std::string given = Str("`", name, "` = ", ListString(values), " (", FormatName(format), ")");
  for (int64_t v : values) {
    if (v < INT32_MIN || v > INT32_MAX) {
      return InvalidArgument(
          WithTfText(op, Str("Attr ", name, " has value ", v, " out of range for an int32"), given));
    }
  }
  if (values.size() != 4) {
    return InvalidArgument(WithTfText(op, Str("Sliding window ", name, " field must specify 4 dimensions"),
                                      Str(given, " has ", values.size())));
  }
  const DimIndex d = DimsOf(format);
  if (values[d.batch] != 1 || values[d.depth] != 1) {
    const std::string msg =
        WithTfText(op, Str("Current implementation does not yet support ", name, " in the batch and depth dimensions."),
                   Str(given, ": batch and depth must be 1"));
    // TF's Conv2DBackpropInput reports this as Unimplemented, every other op as
    // InvalidArgument; keep the class users may already catch.
    return op == OpKind::kConv2DBackpropInput ? Unimplemented(msg) : InvalidArgument(msg);
  }
  *rows = values[d.rows];
  *cols = values[d.cols];
  if (*rows <= 0 || *cols <= 0) {
    // TF's depthwise kernels only meet a zero stride in the output-size arithmetic
    // and never read dilations.
    const std::string tf_text =
        std::string(name) == "dilations" ? std::string("Dilated rates should be larger than 0.")
        : IsDepthwise(op)                ? Str("Stride must be > 0, but got ", *rows <= 0 ? *rows : *cols)
                                         : std::string("Row and column strides should be larger than 0.");
    return InvalidArgument(WithTfText(op, tf_text, Str(given, ": rows and cols must be >= 1")));
  }
  return OkStatus();
}

std::string Label(OpKind op, const char* tensor) {
  // The sizes input stands in for the tensor it describes.
  if (ComputesInputGrad(op) && std::string(tensor) == "input") return "input_sizes";
  if (!ComputesInputGrad(op) && std::string(tensor) == "filter") return "filter_sizes";
  return tensor;
}

// First integer after `key` in the file (e.g. "MemAvailable:" in /proc/meminfo), or
// the file's first integer for an empty key; -1 when absent.
int64_t ReadNumber(const char* path, const std::string& key) {
  std::ifstream f(path);
  std::string word;
  while (f >> word) {
    if (!key.empty() && word != key) continue;
    if (key.empty()) return std::strtoll(word.c_str(), nullptr, 10);
    long long v;
    return f >> v ? v : -1;
  }
  return -1;
}

std::string Bytes(int64_t b) {
  return b >= (int64_t{1} << 30) ? Str(b / double(int64_t{1} << 30), " GiB") : Str(b, " bytes");
}

}  // namespace

int64_t AvailableMemoryBytes() {
  if (const char* env = std::getenv("TF_CONV_BACKPROP_MEMORY_LIMIT")) {
    const long long v = std::strtoll(env, nullptr, 10);
    return v > 0 ? v : -1;
  }
  const int64_t available_kb = ReadNumber("/proc/meminfo", "MemAvailable:");
  const int64_t swap_kb = ReadNumber("/proc/meminfo", "SwapFree:");
  if (available_kb < 0) return -1;
  int64_t bytes = (available_kb + std::max<int64_t>(swap_kb, 0)) * 1024;
  // Containers: the memory cgroup's headroom (v2, then v1); "max" or huge = no limit.
  const std::pair<const char*, const char*> cgroups[] = {
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}};
  for (const auto& [limit_path, usage_path] : cgroups) {
    const int64_t limit = ReadNumber(limit_path, ""), usage = ReadNumber(usage_path, "");
    if (limit > 0 && usage >= 0 && limit < (int64_t{1} << 60)) {
      bytes = std::min(bytes, std::max<int64_t>(limit - usage, 0));
      break;
    }
  }
  return bytes;
}

Status CheckCpuMemory(OpKind op, const ConvGeometry& geo, int64_t element_size) {
  constexpr int64_t kScratchFloor = int64_t{32} << 20;  // the engine's bound: max(32 MiB, output)
  constexpr int64_t kLookUpAbove = int64_t{1} << 30;
  const int64_t elements = ComputesInputGrad(op) ? geo.input_elements : geo.filter_elements;
  int64_t output = 0, needed = 0;
  const bool fits = CheckedMul(elements, element_size, &output) &&
                    CheckedAdd(output, std::max(output, kScratchFloor), &needed);
  const char* sizes = ComputesInputGrad(op) ? "input_sizes" : "filter_sizes";
  if (!fits) {
    return ResourceExhausted(Str(OpName(op), ": the output given by `", sizes, "` (", elements,
                                 " elements of ", element_size, " bytes) needs more than 2^63 bytes"));
  }
  if (needed <= kLookUpAbove && std::getenv("TF_CONV_BACKPROP_MEMORY_LIMIT") == nullptr) return OkStatus();
  const int64_t available = AvailableMemoryBytes();
  if (available >= 0 && needed > available) {
    return ResourceExhausted(Str(OpName(op), ": the output given by `", sizes, "` (", elements, " elements, ",
                                 Bytes(output), ") and the CPU engine's scratch need up to ", Bytes(needed),
                                 ", more than the ", Bytes(available),
                                 " of memory available to this process (",
                                 std::getenv("TF_CONV_BACKPROP_MEMORY_LIMIT")
                                     ? "TF_CONV_BACKPROP_MEMORY_LIMIT"
                                     : "MemAvailable + SwapFree, cgroup limit; TF_CONV_BACKPROP_MEMORY_LIMIT overrides",
                                 ")"));
  }
  return OkStatus();
}

const char* OpName(OpKind op) {
  switch (op) {
    case OpKind::kConv2DBackpropInput: return "Conv2DBackpropInput";
    case OpKind::kConv2DBackpropFilter: return "Conv2DBackpropFilter";
    case OpKind::kDepthwiseBackpropInput: return "DepthwiseConv2dNativeBackpropInput";
    case OpKind::kDepthwiseBackpropFilter: return "DepthwiseConv2dNativeBackpropFilter";
  }
  return "?";
}

bool CheckedMul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool CheckedAdd(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }
bool CheckedSub(int64_t a, int64_t b, int64_t* out) { return !__builtin_sub_overflow(a, b, out); }

bool NumElements(const std::vector<int64_t>& shape, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || !CheckedMul(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

std::string ShapeString(const std::vector<int64_t>& shape) { return ListString(shape); }

Status ParseAttrs(OpKind op, const std::string& data_format, const std::string& padding,
                  const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                  const std::vector<int64_t>& explicit_paddings, ConvAttrs* attrs) {
  ConvAttrs a;
  if (data_format == "NHWC") {
    a.data_format = DataFormat::kNHWC;
  } else if (data_format == "NCHW") {
    a.data_format = DataFormat::kNCHW;
  } else {
    return InvalidArgument(WithTfText(op, "Invalid data format",
                                      Str("`data_format` must be NHWC or NCHW, got \"", data_format, "\"")));
  }
  Status s = ParseWindowAttr(op, "strides", strides, a.data_format, &a.stride_rows, &a.stride_cols);
  if (!s.ok()) return s;
  s = ParseWindowAttr(op, "dilations", dilations, a.data_format, &a.dilation_rows, &a.dilation_cols);
  if (!s.ok()) return s;

  if (padding == "SAME") {
    a.padding = Padding::kSame;
  } else if (padding == "VALID") {
    a.padding = Padding::kValid;
  } else if (padding == "EXPLICIT") {
    a.padding = Padding::kExplicit;
  } else {
    return InvalidArgument(Str(OpName(op), ": `padding` must be SAME, VALID or EXPLICIT, got \"",
                               padding, "\""));
  }
  const std::string given = Str("`explicit_paddings` = ", ListString(explicit_paddings), " (",
                                FormatName(a.data_format), " order, before/after pairs)");
  if (a.padding != Padding::kExplicit) {
    if (!explicit_paddings.empty()) {
      return InvalidArgument(WithTfText(
          op, "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT",
          Str("`padding` is ", padding, ", ", given)));
    }
  } else {
    if (explicit_paddings.size() != 8) {
      return InvalidArgument(WithTfText(
          op, Str("explicit_paddings attribute must contain 8 values, but got: ", explicit_paddings.size()),
          given));
    }
    for (int64_t p : explicit_paddings) {
      if (p < 0) {
        return InvalidArgument(WithTfText(op, "All elements of explicit_paddings must be nonnegative", given));
      }
    }
    const DimIndex d = DimsOf(a.data_format);
    if (explicit_paddings[2 * d.batch] || explicit_paddings[2 * d.batch + 1] ||
        explicit_paddings[2 * d.depth] || explicit_paddings[2 * d.depth + 1]) {
      return InvalidArgument(
          WithTfText(op, "Nonzero explicit padding in the batch or depth dimensions is not supported",
                     Str(given, ": the batch and depth pairs must be 0")));
    }
    a.pad_top = explicit_paddings[2 * d.rows];
    a.pad_bottom = explicit_paddings[2 * d.rows + 1];
    a.pad_left = explicit_paddings[2 * d.cols];
    a.pad_right = explicit_paddings[2 * d.cols + 1];
  }
  *attrs = a;
  return OkStatus();
}

Status WindowedOutputSize(int64_t in, int64_t filter, int64_t dilation, int64_t stride,
                          Padding padding, int64_t explicit_before, int64_t explicit_after,
                          int64_t* out, int64_t* pad_before, int64_t* pad_after) {
  if (stride <= 0) return InvalidArgument(Str("Stride must be > 0, but got ", stride));
  if (dilation < 1) return InvalidArgument(Str("Dilation rate must be >= 1, but got ", dilation));
  int64_t eff;  // (filter - 1) * dilation + 1; filter may be 0 (empty filter)
  if (!CheckedMul(filter - 1, dilation, &eff) || !CheckedAdd(eff, 1, &eff)) {
    return InvalidArgument(Str("effective filter size overflows: filter ", filter, ", dilation ", dilation));
  }
  const auto overflow = [&] {
    return InvalidArgument(Str("output size overflows for input size ", in, ", effective filter size ",
                               eff, ", stride ", stride));
  };
  int64_t num;  // numerator of the truncating division, as TF computes it
  switch (padding) {
    case Padding::kValid:
      if (!CheckedSub(in, eff, &num) || !CheckedAdd(num, stride, &num)) return overflow();
      *out = num / stride;
      *pad_before = *pad_after = 0;
      break;
    case Padding::kExplicit: {
      int64_t padded;
      if (!CheckedAdd(in, explicit_before, &padded) || !CheckedAdd(padded, explicit_after, &padded) ||
          !CheckedSub(padded, eff, &num) || !CheckedAdd(num, stride, &num)) {
        return overflow();
      }
      *out = num / stride;
      *pad_before = explicit_before;
      *pad_after = explicit_after;
      break;
    }
    case Padding::kSame: {
      if (!CheckedAdd(in, stride - 1, &num)) return overflow();
      *out = num / stride;
      int64_t need;
      if (!CheckedMul(*out - 1, stride, &need) || !CheckedAdd(need, eff, &need) ||
          !CheckedSub(need, in, &need)) {
        return overflow();
      }
      need = std::max<int64_t>(need, 0);
      *pad_before = need / 2;
      *pad_after = need - *pad_before;
      break;
    }
  }
  if (*out < 0) {
    return InvalidArgument(Str("Computed output size would be negative: ", *out, " [input_size: ", in,
                               ", effective_filter_size: ", eff, ", stride: ", stride, "]"));
  }
  return OkStatus();
}

Status ShapeFromSizes(OpKind op, const ConvAttrs& attrs, const std::vector<int64_t>& sizes_dims,
                      const int32_t* sizes, const std::vector<int64_t>& filter_shape,
                      const std::vector<int64_t>& out_backprop_shape, std::vector<int64_t>* shape) {
  const std::string name = ComputesInputGrad(op) ? "input_sizes" : "filter_sizes";
  // TF's Conv2DBackpropInput reads out_backprop's rank before the sizes (its message
  // names input_sizes; ours names the tensor at fault).
  if (op == OpKind::kConv2DBackpropInput && out_backprop_shape.size() != 4) {
    return InvalidArgument(Str(OpName(op), ": `out_backprop` must be 4-dimensional, got shape ",
                               ListString(out_backprop_shape)));
  }
  if (sizes_dims.size() != 1) {
    return InvalidArgument(WithTfText(op, Str(name, " input must be 1-dim, not ", sizes_dims.size()),
                                      Str("`", name, "` has shape ", ListString(sizes_dims))));
  }
  const int64_t n = sizes_dims[0];
  std::vector<int64_t> values(sizes, sizes + n);
  const std::string given = Str("`", name, "` = ", ListString(values));
  const bool two_element_form = op == OpKind::kConv2DBackpropInput && n == 2;
  if (op == OpKind::kConv2DBackpropInput && n != 4 && n != 2) {
    return InvalidArgument(WithTfText(
        op, Str("Conv2DBackpropInput requires input_sizes to contain 4 values or 2 values, but got: ", n),
        given));
  }
  if (!two_element_form) {
    // The sizes vector is the shape (its length is checked with the tensor's rank),
    // built element by element as TF builds it, so the same element fails first.
    int64_t elements = 1;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = values[i];
      if (v < 0) {
        const std::string tf_text = IsDepthwise(op) ? Str("Dimension ", i, " of ", name, " must be >= 0")
                                                    : Str("Dimension ", v, " must be >= 0");
        return InvalidArgument(WithTfText(op, tf_text, given));
      }
      int64_t product;
      if (!CheckedMul(elements, v, &product)) {
        std::string tf_text;
        if (IsDepthwise(op)) {
          tf_text = Str("Encountered overflow when multiplying ", elements, " with ", v, ", result: -1");
        } else {
          tf_text = ShapeOverflowText(values);
        }
        return InvalidArgument(WithTfText(op, tf_text, Str(given, " has more elements than fit in int64")));
      }
      elements = product;
    }
    *shape = values;
    return OkStatus();
  }
  if (values[0] < 0 || values[1] < 0) {
    return InvalidArgument(WithTfText(
        op, Str("elements of input_sizes must be >= 0, not ", values[0], "x", values[1]), given));
  }
  // (rows, cols): batch from out_backprop, depth from filter (TF reads filter[2]
  // without checking its rank).
  if (filter_shape.size() != 4) {
    return InvalidArgument(Str(OpName(op), ": `filter` must be 4-dimensional, got shape ",
                               ListString(filter_shape)));
  }
  const DimIndex d = DimsOf(attrs.data_format);
  shape->assign(4, 0);
  (*shape)[d.batch] = out_backprop_shape[d.batch];
  (*shape)[d.rows] = values[0];
  (*shape)[d.cols] = values[1];
  (*shape)[d.depth] = filter_shape[2];
  return OkStatus();
}

ConvGeometry BatchSlice(const ConvGeometry& g, int64_t images) {
  ConvGeometry s = g;
  s.batch = images;
  s.input_elements = images * g.in_rows * g.in_cols * g.in_depth;
  s.out_backprop_elements = images * g.out_rows * g.out_cols * g.out_depth;
  return s;
}

Status ComputeGeometry(OpKind op, const ConvAttrs& attrs, const std::vector<int64_t>& input_shape,
                       const std::vector<int64_t>& filter_shape,
                       const std::vector<int64_t>& out_backprop_shape, ConvGeometry* geo) {
  struct Named {
    const char* name;
    const std::vector<int64_t>* shape;
    int64_t* elements;
  };
  ConvGeometry g;
  const Named tensors[] = {{"input", &input_shape, &g.input_elements},
                           {"filter", &filter_shape, &g.filter_elements},
                           {"out_backprop", &out_backprop_shape, &g.out_backprop_elements}};
  for (const Named& t : tensors) {
    if (t.shape->size() != 4) {
      return InvalidArgument(WithTfText(op, Str(t.name, " must be 4-dimensional"),
                                        Str("`", Label(op, t.name), "` has shape ", ListString(*t.shape))));
    }
    if (!NumElements(*t.shape, t.elements)) {
      // Only a shape built from the sizes input can get here: (rows, cols) with batch and depth.
      return InvalidArgument(WithTfText(op, ShapeOverflowText(*t.shape),
                                        Str("`", Label(op, t.name), "` shape ", ListString(*t.shape),
                                            " has a negative dimension or more elements than fit in int64")));
    }
  }
  const DimIndex d = DimsOf(attrs.data_format);
  g.data_format = attrs.data_format;
  g.depthwise = IsDepthwise(op);
  g.batch = input_shape[d.batch];
  g.in_rows = input_shape[d.rows];
  g.in_cols = input_shape[d.cols];
  g.in_depth = input_shape[d.depth];
  g.filter_rows = filter_shape[0];
  g.filter_cols = filter_shape[1];
  g.out_depth = out_backprop_shape[d.depth];
  g.stride_rows = attrs.stride_rows;
  g.stride_cols = attrs.stride_cols;
  g.dilation_rows = attrs.dilation_rows;
  g.dilation_cols = attrs.dilation_cols;

  const std::string input = Label(op, "input"), filter = Label(op, "filter");
  const std::string shapes = Str("`", input, "` ", ListString(input_shape), ", `", filter, "` ",
                                 ListString(filter_shape), ", `out_backprop` ", ListString(out_backprop_shape));
  if (out_backprop_shape[d.batch] != g.batch) {
    const std::string tf_text =
        g.depthwise ? std::string("input and out_backprop must have the same batch size")
                    : Str("input and out_backprop must have the same batch size. Input batch: ", g.batch,
                          ", outbackprop batch: ", out_backprop_shape[d.batch], ", batch_dim: ", d.batch);
    return InvalidArgument(WithTfText(op, tf_text, Str("batch sizes differ: ", shapes)));
  }
  // TF's order for conv2d: a positive filter depth dividing the input depth, then
  // the output depth; a proper divisor makes a grouped convolution, as TF's GPU
  // kernels (and its forward op) run it.
  if (filter_shape[2] != g.in_depth) {
    const std::string detail =
        Str("`", filter, "` in_depth (dimension 2) must equal the input depth ", g.in_depth,
            g.depthwise ? "" : " or divide it (grouped convolution)", ": ", shapes);
    if (g.depthwise) return InvalidArgument(WithTfText(op, "input and filter must have the same in_depth", detail));
    if (filter_shape[2] <= 0) {
      // (sic): TF's text.
      return InvalidArgument(WithTfText(op, "filter depth must be strictly greated than zero", detail));
    }
    if (g.in_depth % filter_shape[2] != 0) {
      return InvalidArgument(WithTfText(op, "input depth must be evenly divisible by filter depth", detail));
    }
    // Zero groups: an empty input depth under a filter that reads some.
    if (g.in_depth == 0) return InvalidArgument(Str(OpName(op), ": ", detail));
    g.groups = g.in_depth / filter_shape[2];
  }
  if (g.depthwise) {
    g.depth_multiplier = filter_shape[3];
    int64_t expected;
    if (!CheckedMul(g.in_depth, g.depth_multiplier, &expected) || expected != g.out_depth) {
      return InvalidArgument(WithTfText(op, "depth_multiplier * in_depth not equal to out_depth",
                                        Str("`out_backprop` depth must be in_depth * depth_multiplier = ",
                                            g.in_depth, " * ", g.depth_multiplier, ", got ", g.out_depth,
                                            ": ", shapes)));
    }
  } else if (filter_shape[3] != g.out_depth) {
    return InvalidArgument(WithTfText(op, "filter and out_backprop must have the same out_depth",
                                      Str("`", filter, "` out_depth (dimension 3) must equal the `out_backprop` depth ",
                                          g.out_depth, ": ", shapes)));
  }

  struct Spatial {
    const char* name;
    int tensor_dim;
    int64_t in, filter, dilation, stride, explicit_before, explicit_after, actual;
    int64_t *out, *pad_before, *pad_after;
  };
  const Spatial dims[] = {
      {"rows", d.rows, g.in_rows, g.filter_rows, g.dilation_rows, g.stride_rows, attrs.pad_top, attrs.pad_bottom,
       out_backprop_shape[d.rows], &g.out_rows, &g.pad_top, &g.pad_bottom},
      {"cols", d.cols, g.in_cols, g.filter_cols, g.dilation_cols, g.stride_cols, attrs.pad_left, attrs.pad_right,
       out_backprop_shape[d.cols], &g.out_cols, &g.pad_left, &g.pad_right},
  };
  const auto output_size = [&](const Spatial& s) {
    Status st = WindowedOutputSize(s.in, s.filter, s.dilation, s.stride, attrs.padding, s.explicit_before,
                                   s.explicit_after, s.out, s.pad_before, s.pad_after);
    if (!st.ok()) {
      // Name what the caller controls: the input and filter extents, strides,
      // dilations and padding that produced the impossible size.
      st.message = Str(OpName(op), ": ", s.name, " of `", input, "` (", s.in, ") and `", filter, "` (", s.filter,
                       ") with `strides` ", s.stride, ", `dilations` ", s.dilation, ", `padding` ",
                       PaddingName(attrs.padding),
                       attrs.padding == Padding::kExplicit
                           ? Str(" (`explicit_paddings` ", s.explicit_before, "/", s.explicit_after, ")")
                           : std::string(),
                       ": ", st.message);
    }
    return st;
  };
  const auto matches = [&](const Spatial& s) {
    if (*s.out == s.actual) return OkStatus();
    const std::string tf_text =
        g.depthwise ? Str("Number of ", s.name, " of out_backprop doesn't match computed: actual = ", s.actual,
                          ", computed = ", *s.out)
                    : Str("Size of out_backprop doesn't match computed: actual = ", s.actual, ", computed = ",
                          *s.out, " spatial_dim: ", s.tensor_dim, " input: ", s.in, " filter: ", s.filter,
                          " output: ", s.actual, " stride: ", s.stride, " dilation: ", s.dilation);
    return InvalidArgument(WithTfText(
        op, tf_text,
        Str("`out_backprop` ", s.name, " don't match the forward output (input ", s.name, ": ", s.in,
            ", filter: ", s.filter, ", stride: ", s.stride, ", dilation: ", s.dilation, ", pads: ", *s.pad_before,
            "/", *s.pad_after, ")")));
  };
  // TF's depthwise kernels size both dimensions before comparing either; conv2d's
  // compare each dimension as it is sized.
  for (const Spatial& s : dims) {
    Status st = output_size(s);
    if (st.ok() && !g.depthwise) st = matches(s);
    if (!st.ok()) return st;
  }
  for (const Spatial& s : dims) {
    Status st = g.depthwise ? matches(s) : OkStatus();
    if (!st.ok()) return st;
  }
  // TF's forward op checks the groups against the output depth; its gradient kernels
  // do not, so the shapes come first. An empty output depth gives zero gradients.
  if (g.out_depth % g.groups != 0) {
    return InvalidArgument(WithTfText(
        op, Str("output depth must be evenly divisible by number of groups: ", g.out_depth, " vs ", g.groups),
        Str("`", filter, "` out_depth (dimension 3) ", g.out_depth, " must be a multiple of the ", g.groups,
            " groups (input depth ", g.in_depth, " / `", filter, "` in_depth ", filter_shape[2], "): ", shapes)));
  }
  *geo = g;
  return OkStatus();
}

}  // namespace tf_conv_backprop
