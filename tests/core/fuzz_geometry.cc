// libFuzzer target for the framework-free core: no input may crash it.
//
// Each input is decoded (FuzzInput below) into one call of the binding's
// sequence: ParseAttrs -> ShapeFromSizes -> ComputeGeometry, with the shapes
// and values a caller of the TF op controls (strides, dilations, explicit
// paddings, padding and format strings, the sizes vector's own shape and
// values, the ranks and dimensions of the two data tensors). It checks:
//  - every rejection is InvalidArgument or Unimplemented with a message;
//  - an accepted geometry is self-consistent: element counts equal the shapes'
//    products, out_backprop's spatial sizes equal TF's output-size formula
//    (recomputed here in 128-bit arithmetic), the last window fits the padded
//    input, the depths agree;
//  - for an accepted geometry whose tensors are small, both gradients of the
//    op's family (input and filter) run through the cpu/engine.h entry points
//    in every dtype (half, bfloat16, float, double), on one of the ISA
//    variants, with a serial CpuContext that still splits every range into
//    1-8 shards (run in reverse order). Buffers are exactly sized (ASan sees
//    any overrun), outputs are pre-filled with NaN, and every output element
//    must be finite and match the naive reference (tests/core/naive_reference.h)
//    to within the dtype's rounding.
// Any violation aborts, which libFuzzer reports as a crash with the input.
//
// Built by `make fuzz` with clang -fsanitize=fuzzer,address,undefined; the same
// file is linked with tests/core/fuzz_replay_main.cc (no libFuzzer) by
// `make core-test-asan` to replay the seed corpus and random mutations of it
// under gcc's ASan + UBSan. The input format is documented in
// build_tools/gen_fuzz_corpus.py, which writes the seed corpus.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "tests/core/naive_reference.h"
#include "tf_ops/cpu/engine.h"
#include "tf_ops/cpu/isa.h"
#include "tf_ops/core/geometry.h"

namespace tcb = tf_conv_backprop;

namespace {

// Kernels run only when every tensor has at most this many elements and the
// multiply-adds stay under kMaxWork, so one input takes well under a millisecond.
constexpr int64_t kMaxElements = 2048;
constexpr int64_t kMaxWork = int64_t{1} << 17;

[[noreturn]] void Fail(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "FUZZ CHECK FAILED: %s\n  %s\n", what.c_str(), detail.c_str());
  std::fflush(stderr);
  std::abort();
}

// Values the advisories and our own bad-input corpus use, indexed by the
// encoder in build_tools/gen_fuzz_corpus.py (keep the two tables in sync).
constexpr int64_t kInteresting[] = {
    -1,
    -2,
    -4,
    -5,
    -1024,
    INT32_MIN,
    INT32_MAX,
    int64_t{1} << 31,
    int64_t{1} << 32,
    int64_t{1} << 40,
    int64_t{1} << 62,
    (int64_t{1} << 62) - 2,
    INT64_MAX,
    INT64_MIN,
    1879048192,
    999999999,
    999999998,
    65534,
    16,
    18,
    20,
    24,
    29,
    32,
    37,
    48,
    49,
    52,
    64,
    65,
    66,
    77,
    89,
    93,
    1024,
    int64_t{1} << 20,
    (int64_t{1} << 31) - 2,
    INT64_MAX - 1,
};
constexpr int kNumInteresting = sizeof(kInteresting) / sizeof(kInteresting[0]);

// Sequential reader; reads past the end give zeros.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  uint8_t Byte() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  // Tag byte b: b < 0xB0 -> b % 16; b < 0xF0 -> kInteresting[(b - 0xB0) % N];
  // else the next 8 bytes, little-endian two's complement.
  int64_t Value() {
    const uint8_t b = Byte();
    if (b < 0xB0) return b % 16;
    if (b < 0xF0) return kInteresting[(b - 0xB0) % kNumInteresting];
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(Byte()) << (8 * i);
    int64_t out;
    std::memcpy(&out, &v, sizeof(out));
    return out;
  }
  // Length byte % (max + 1), then that many values.
  std::vector<int64_t> List(int max_len) {
    const int len = Byte() % (max_len + 1);
    std::vector<int64_t> v(len);
    for (int64_t& e : v) e = Value();
    return v;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

const char* const kFormats[] = {"NHWC", "NCHW", "NHWC", "NCHW", "NCWH", "", "nhwc", "NCHW\0x"};
const char* const kPaddings[] = {"SAME", "VALID", "EXPLICIT", "VALID", "SAME", "FOO", "", "same"};

// One decoded input. Layout (all fields in this order):
//   op        byte % 4 (OpKind order)
//   format    byte % 8 -> kFormats
//   padding   byte % 8 -> kPaddings
//   strides, dilations, explicit_paddings: Reader::List(max 8, 8, 10)
//   sizes     byte % 3 = rank of the sizes tensor: 0 -> one value; 1 -> byte % 16
//             values; 2 -> (byte % 4) x (byte % 8) values. Values: Value() cast to int32.
//   data      byte % 7 = rank, then that many Value() dims (filter for input
//             gradients, input for filter gradients)
//   dy        byte % 7 = rank, then dims
//   run       byte: bits 0-1 ISA (0 baseline, 1 avx2, 2 avx512, 3 best), bits 2-4
//             shards - 1 (serial CpuContext split), bits 5-7 unused
//   seed      byte: values of the tensors
struct FuzzInput {
  tcb::OpKind op;
  std::string data_format, padding;
  std::vector<int64_t> strides, dilations, explicit_paddings;
  std::vector<int64_t> sizes_dims;
  std::vector<int32_t> sizes;
  std::vector<int64_t> data_shape, dy_shape;
  int isa = 3, shards = 1;
  uint8_t seed = 0;
};

FuzzInput Decode(const uint8_t* data, size_t size) {
  Reader r(data, size);
  FuzzInput in;
  in.op = static_cast<tcb::OpKind>(r.Byte() % 4);
  const uint8_t f = r.Byte() % 8;
  in.data_format = f == 7 ? std::string("NCHW\0x", 6) : kFormats[f];
  in.padding = kPaddings[r.Byte() % 8];
  in.strides = r.List(8);
  in.dilations = r.List(8);
  in.explicit_paddings = r.List(10);
  int64_t count = 1;
  switch (r.Byte() % 3) {
    case 0: break;
    case 1: in.sizes_dims = {r.Byte() % 16}; count = in.sizes_dims[0]; break;
    default: {
      const int64_t a = r.Byte() % 4, b = r.Byte() % 8;
      in.sizes_dims = {a, b};
      count = a * b;
    }
  }
  for (int64_t i = 0; i < count; ++i) in.sizes.push_back(static_cast<int32_t>(r.Value()));
  for (std::vector<int64_t>* shape : {&in.data_shape, &in.dy_shape}) {
    const int rank = r.Byte() % 7;
    for (int i = 0; i < rank; ++i) shape->push_back(r.Value());
  }
  const uint8_t run = r.Byte();
  in.isa = run & 3;
  in.shards = 1 + ((run >> 2) & 7);
  in.seed = r.Byte();
  return in;
}

std::string Describe(const FuzzInput& in) {
  auto list = [](const std::vector<int64_t>& v) { return tcb::ShapeString(v); };
  std::vector<int64_t> sizes(in.sizes.begin(), in.sizes.end());
  return std::string(tcb::OpName(in.op)) + " format=\"" + in.data_format + "\" padding=\"" +
         in.padding + "\" strides=" + list(in.strides) + " dilations=" + list(in.dilations) +
         " explicit_paddings=" + list(in.explicit_paddings) + " sizes(dims " + list(in.sizes_dims) +
         ")=" + list(sizes) + " data=" + list(in.data_shape) + " dy=" + list(in.dy_shape) +
         " isa=" + std::to_string(in.isa) + " shards=" + std::to_string(in.shards);
}

std::string Describe(const tcb::ConvGeometry& g) {
  char buf[600];
  std::snprintf(buf, sizeof(buf),
                "geo: N=%lld in=%lldx%lldx%lld filter=%lldx%lld mult=%lld out=%lldx%lldx%lld "
                "stride=%lld,%lld dilation=%lld,%lld pads=%lld,%lld,%lld,%lld %s%s",
                (long long)g.batch, (long long)g.in_rows, (long long)g.in_cols, (long long)g.in_depth,
                (long long)g.filter_rows, (long long)g.filter_cols, (long long)g.depth_multiplier,
                (long long)g.out_rows, (long long)g.out_cols, (long long)g.out_depth,
                (long long)g.stride_rows, (long long)g.stride_cols, (long long)g.dilation_rows,
                (long long)g.dilation_cols, (long long)g.pad_top, (long long)g.pad_bottom,
                (long long)g.pad_left, (long long)g.pad_right,
                g.data_format == tcb::DataFormat::kNHWC ? "NHWC" : "NCHW",
                g.depthwise ? " depthwise" : "");
  return buf;
}

void CheckError(const tcb::Status& s, const char* stage, const FuzzInput& in) {
  if (s.code != tcb::ErrorCode::kInvalidArgument && s.code != tcb::ErrorCode::kUnimplemented) {
    Fail(std::string(stage) + " returned an error class other than InvalidArgument/Unimplemented: " +
             s.message,
         Describe(in));
  }
  if (s.message.empty()) Fail(std::string(stage) + " returned an error without a message", Describe(in));
}

using i128 = __int128;

i128 TruncDiv(i128 a, i128 b) { return a / b; }  // C++: truncation toward zero, as TF

// TF's forward output size and padding in 128-bit arithmetic (no overflow possible
// for int64 inputs), for one spatial dimension.
void ReferenceOutputSize(i128 in, i128 k, i128 d, i128 s, tcb::Padding p, i128 eb, i128 ea,
                         i128* out, i128* pb, i128* pa) {
  const i128 eff = (k - 1) * d + 1;
  switch (p) {
    case tcb::Padding::kValid: *out = TruncDiv(in - eff + s, s); *pb = *pa = 0; break;
    case tcb::Padding::kExplicit: *out = TruncDiv(in + eb + ea - eff + s, s); *pb = eb; *pa = ea; break;
    case tcb::Padding::kSame: {
      *out = TruncDiv(in + s - 1, s);
      i128 need = (*out - 1) * s + eff - in;
      if (need < 0) need = 0;
      *pb = need / 2;
      *pa = need - *pb;
      break;
    }
  }
}

void CheckGeometry(const FuzzInput& in, const tcb::ConvAttrs& attrs, const std::vector<int64_t>& input_shape,
                   const std::vector<int64_t>& filter_shape, const tcb::ConvGeometry& g) {
  const std::string where = Describe(in) + "\n  " + Describe(g);
  auto require = [&](bool ok, const char* what) {
    if (!ok) Fail(std::string("accepted geometry violates: ") + what, where);
  };
  const tcb::DimIndex d = tcb::DimsOf(attrs.data_format);
  require(input_shape.size() == 4 && filter_shape.size() == 4 && in.dy_shape.size() == 4, "rank 4");
  for (const auto* shape : {&input_shape, &filter_shape, &in.dy_shape})
    for (int64_t v : *shape) require(v >= 0, "non-negative dimensions");
  int64_t n = 0;
  require(tcb::NumElements(input_shape, &n) && n == g.input_elements, "input_elements");
  require(tcb::NumElements(filter_shape, &n) && n == g.filter_elements, "filter_elements");
  require(tcb::NumElements(in.dy_shape, &n) && n == g.out_backprop_elements, "out_backprop_elements");
  require(g.batch == input_shape[d.batch] && g.batch == in.dy_shape[d.batch], "batch");
  require(g.in_rows == input_shape[d.rows] && g.in_cols == input_shape[d.cols], "input spatial");
  require(g.in_depth == input_shape[d.depth] && g.groups >= 1 && g.in_depth == g.groups * filter_shape[2] &&
              (g.groups == 1 || !g.depthwise),
          "in_depth = groups * filter in_depth (groups > 1 for conv2d only)");
  require(g.filter_rows == filter_shape[0] && g.filter_cols == filter_shape[1], "filter spatial");
  require(g.out_rows == in.dy_shape[d.rows] && g.out_cols == in.dy_shape[d.cols], "out spatial");
  require(g.out_depth == in.dy_shape[d.depth], "out_depth");
  if (g.depthwise) {
    require(g.depth_multiplier == filter_shape[3] && (i128)g.in_depth * g.depth_multiplier == g.out_depth,
            "depthwise out_depth = in_depth * multiplier");
  } else {
    require(filter_shape[3] == g.out_depth && g.out_depth % g.groups == 0, "filter out_depth, a multiple of groups");
  }
  require(g.stride_rows >= 1 && g.stride_cols >= 1 && g.stride_rows <= INT32_MAX && g.stride_cols <= INT32_MAX,
          "strides in [1, 2^31-1]");
  require(g.dilation_rows >= 1 && g.dilation_cols >= 1 && g.dilation_rows <= INT32_MAX &&
              g.dilation_cols <= INT32_MAX,
          "dilations in [1, 2^31-1]");
  require(g.pad_top >= 0 && g.pad_bottom >= 0 && g.pad_left >= 0 && g.pad_right >= 0, "pads >= 0");
  struct Axis {
    int64_t in, k, dil, s, eb, ea, out, pb, pa;
  };
  const Axis axes[] = {{g.in_rows, g.filter_rows, g.dilation_rows, g.stride_rows, attrs.pad_top,
                        attrs.pad_bottom, g.out_rows, g.pad_top, g.pad_bottom},
                       {g.in_cols, g.filter_cols, g.dilation_cols, g.stride_cols, attrs.pad_left,
                        attrs.pad_right, g.out_cols, g.pad_left, g.pad_right}};
  for (const Axis& a : axes) {
    i128 out, pb, pa;
    ReferenceOutputSize(a.in, a.k, a.dil, a.s, attrs.padding, a.eb, a.ea, &out, &pb, &pa);
    require(out == a.out, "out size = TF's formula");
    require(pb == a.pb && pa == a.pa, "pads = TF's formula");
    if (a.out > 0) {
      const i128 eff = (i128)(a.k - 1) * a.dil + 1;
      require((i128)(a.out - 1) * a.s + eff <= (i128)a.in + a.pb + a.pa, "last window inside the padded input");
    }
  }
}

// Independent check of rejections: where TF's formula (128-bit) says the shapes are
// consistent and nothing overflows, the geometry must not reject on size grounds.
// Kept simple: only rank-4, non-negative, well-formed attribute cases with small values.
bool ShouldAccept(const FuzzInput& in, const tcb::ConvAttrs& attrs, const std::vector<int64_t>& input_shape,
                  const std::vector<int64_t>& filter_shape) {
  if (input_shape.size() != 4 || filter_shape.size() != 4 || in.dy_shape.size() != 4) return false;
  for (const auto* shape : {&input_shape, &filter_shape, &in.dy_shape})
    for (int64_t v : *shape)
      if (v < 0 || v > (1 << 20)) return false;
  if (attrs.pad_top > (1 << 20) || attrs.pad_bottom > (1 << 20) || attrs.pad_left > (1 << 20) ||
      attrs.pad_right > (1 << 20))
    return false;
  i128 count = 1;
  for (const auto* shape : {&input_shape, &filter_shape, &in.dy_shape}) {
    count = 1;
    for (int64_t v : *shape) count *= v;
    if (count > INT64_MAX / 2) return false;  // 4 dims <= 2^20: never, but keep it obvious
  }
  const tcb::DimIndex d = tcb::DimsOf(attrs.data_format);
  const bool depthwise = tcb::IsDepthwise(in.op);
  if (input_shape[d.batch] != in.dy_shape[d.batch]) return false;
  if (filter_shape[2] != input_shape[d.depth]) return false;
  if (depthwise) {
    if ((i128)filter_shape[2] * filter_shape[3] != in.dy_shape[d.depth]) return false;
  } else if (filter_shape[3] != in.dy_shape[d.depth]) {
    return false;
  }
  const int64_t ins[2] = {input_shape[d.rows], input_shape[d.cols]};
  const int64_t ks[2] = {filter_shape[0], filter_shape[1]};
  const int64_t dils[2] = {attrs.dilation_rows, attrs.dilation_cols};
  const int64_t ss[2] = {attrs.stride_rows, attrs.stride_cols};
  const int64_t ebs[2] = {attrs.pad_top, attrs.pad_left};
  const int64_t eas[2] = {attrs.pad_bottom, attrs.pad_right};
  const int64_t outs[2] = {in.dy_shape[d.rows], in.dy_shape[d.cols]};
  for (int i = 0; i < 2; ++i) {
    i128 out, pb, pa;
    ReferenceOutputSize(ins[i], ks[i], dils[i], ss[i], attrs.padding, ebs[i], eas[i], &out, &pb, &pa);
    // 2^20-bounded sizes and int32 strides/dilations: every intermediate fits int64.
    if (out < 0 || out != outs[i]) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------
// Kernel runs

// A serial context that still exercises sharding: [0, total) is cut into
// `shards` contiguous pieces, run last to first.
tcb::CpuContext SerialContext(int shards) {
  tcb::CpuContext ctx;
  ctx.num_threads = shards;
  if (shards <= 1) return ctx;
  ctx.parallel_for = [shards](int64_t total, int64_t cost, const tcb::CpuContext::Range& fn) {
    if (total <= 0) Fail("parallel_for called with no work", std::to_string(total));
    if (cost < 0) Fail("parallel_for called with a negative cost", std::to_string(cost));
    for (int s = shards - 1; s >= 0; --s) {
      const int64_t b = total * s / shards, e = total * (s + 1) / shards;
      if (b < e) fn(b, e);
    }
  };
  return ctx;
}

template <typename T>
double Epsilon() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  if constexpr (std::is_same_v<T, Eigen::half>) return 1.0 / 1024;  // rounding of the result
  return 1.0 / 128;                                                  // bfloat16
}

const char* TypeName(int t) {
  static const char* const names[] = {"half", "bfloat16", "float", "double"};
  return names[t];
}

// NHWC <-> the geometry's format (logical dims n, h, w, c).
std::vector<double> ToNhwc(const std::vector<double>& v, tcb::DataFormat f, int64_t n, int64_t h, int64_t w,
                           int64_t c) {
  if (f == tcb::DataFormat::kNHWC) return v;
  std::vector<double> out(v.size());
  for (int64_t a = 0; a < n; ++a)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < c; ++k) out[((a * h + y) * w + x) * c + k] = v[((a * c + k) * h + y) * w + x];
  return out;
}

// Runs one gradient in dtype T and checks it against the reference.
template <typename T>
void RunOne(int type_index, bool input_grad, const tcb::ConvGeometry& g, const tcb::CpuContext& ctx,
            const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& dy,
            const std::string& where) {
  auto cast = [](const std::vector<double>& v) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<T>(v[i]);
    return out;
  };
  const std::vector<T> xt = cast(x), wt = cast(w), dyt = cast(dy);
  const int64_t out_elements = input_grad ? g.input_elements : g.filter_elements;
  std::vector<T> out(out_elements, static_cast<T>(std::numeric_limits<float>::quiet_NaN()));
  tcb::Status s;
  if (g.depthwise) {
    s = input_grad ? tcb::GradientCpu<T>(tf_conv_backprop::OpKind::kDepthwiseBackpropInput, ctx, g, wt.data(), dyt.data(), out.data())
                   : tcb::GradientCpu<T>(tf_conv_backprop::OpKind::kDepthwiseBackpropFilter, ctx, g, xt.data(), dyt.data(), out.data());
  } else {
    s = input_grad ? tcb::GradientCpu<T>(tf_conv_backprop::OpKind::kConv2DBackpropInput, ctx, g, wt.data(), dyt.data(), out.data())
                   : tcb::GradientCpu<T>(tf_conv_backprop::OpKind::kConv2DBackpropFilter, ctx, g, xt.data(), dyt.data(), out.data());
  }
  const std::string what = std::string(input_grad ? "input" : "filter") + " gradient <" + TypeName(type_index) + ">";
  if (!s.ok()) Fail(what + " failed on a small valid geometry: " + s.message, where);

  const double eps = Epsilon<T>();
  if (g.input_elements == 0 || g.filter_elements == 0 || g.out_backprop_elements == 0) {
    // An empty reduction: all zeros. (Not through the reference: its loops would walk
    // dimensions that may be huge next to a zero one.)
    for (int64_t i = 0; i < out_elements; ++i) {
      const double v = static_cast<double>(out[i]);
      if (v != 0.0) Fail(what + ": element " + std::to_string(i) + " of an empty reduction is " + std::to_string(v), where);
    }
    return;
  }
  // Reference in NHWC double, from the same (exactly representable) values.
  tcb::ConvGeometry nhwc = g;
  nhwc.data_format = tcb::DataFormat::kNHWC;
  const std::vector<double> x_n = ToNhwc(x, g.data_format, g.batch, g.in_rows, g.in_cols, g.in_depth);
  const std::vector<double> dy_n = ToNhwc(dy, g.data_format, g.batch, g.out_rows, g.out_cols, g.out_depth);
  std::vector<double> ref = tcb::naive::Gradient(nhwc, input_grad, input_grad ? w.data() : x_n.data(), dy_n.data());
  // Sum of |terms| per element: the scale of any rounding in the accumulation.
  auto abs_of = [](std::vector<double> v) {
    for (double& e : v) e = std::fabs(e);
    return v;
  };
  const std::vector<double> x_a = abs_of(x_n), w_a = abs_of(w), dy_a = abs_of(dy_n);
  std::vector<double> scale = tcb::naive::Gradient(nhwc, input_grad, input_grad ? w_a.data() : x_a.data(), dy_a.data());

  std::vector<double> got(out.size());
  for (size_t i = 0; i < out.size(); ++i) got[i] = static_cast<double>(out[i]);
  if (input_grad) got = ToNhwc(got, g.data_format, g.batch, g.in_rows, g.in_cols, g.in_depth);
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      Fail(what + ": non-finite output element " + std::to_string(i) + " (unwritten or garbage): " +
               std::to_string(got[i]),
           where);
    }
    const double tol = eps * std::fabs(ref[i]) + 1e-5 * scale[i] + 1e-300;
    if (std::fabs(got[i] - ref[i]) > tol) {
      Fail(what + ": element " + std::to_string(i) + " = " + std::to_string(got[i]) + ", reference " +
               std::to_string(ref[i]),
           where);
    }
  }
}

bool SmallEnough(const tcb::ConvGeometry& g) {
  if (g.input_elements > kMaxElements || g.filter_elements > kMaxElements ||
      g.out_backprop_elements > kMaxElements)
    return false;
  if (g.input_elements == 0 || g.filter_elements == 0 || g.out_backprop_elements == 0) return true;
  const int64_t per_pixel = g.depthwise ? g.depth_multiplier : g.group_out_depth();
  i128 work = (i128)g.batch * g.out_rows * g.out_cols;
  work *= (i128)g.filter_rows * g.filter_cols;
  work *= (i128)g.in_depth * per_pixel;
  return work <= kMaxWork;
}

void RunKernels(const FuzzInput& in, const tcb::ConvGeometry& g) {
  const std::string where = Describe(in) + "\n  " + Describe(g);
  if (in.isa < tcb::cpu::kNumIsas) tcb::cpu::SetActiveIsa(static_cast<tcb::cpu::Isa>(in.isa));
  else tcb::cpu::SetActiveIsa(tcb::cpu::BestSupportedIsa());
  const tcb::CpuContext ctx = SerialContext(in.shards);
  // Multiples of 1/4 in [-2, 2]: exact in every dtype, so only the final rounding
  // (and, for float, the accumulation order) separates the engine from the reference.
  uint32_t state = 0x9e3779b9u ^ in.seed;
  auto values = [&state](int64_t n) {
    std::vector<double> v(n);
    for (double& e : v) {
      state = state * 1664525u + 1013904223u;
      e = static_cast<double>(static_cast<int>((state >> 24) % 17) - 8) / 4.0;
    }
    return v;
  };
  const std::vector<double> x = values(g.input_elements), w = values(g.filter_elements),
                            dy = values(g.out_backprop_elements);
  for (bool input_grad : {true, false}) {
    RunOne<Eigen::half>(0, input_grad, g, ctx, x, w, dy, where);
    RunOne<Eigen::bfloat16>(1, input_grad, g, ctx, x, w, dy, where);
    RunOne<float>(2, input_grad, g, ctx, x, w, dy, where);
    RunOne<double>(3, input_grad, g, ctx, x, w, dy, where);
  }
}

}  // namespace

// Counters for the replay driver's summary (not used by libFuzzer).
int64_t g_fuzz_accepted = 0, g_fuzz_kernel_runs = 0;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const FuzzInput in = Decode(data, size);
  tcb::ConvAttrs attrs;
  tcb::Status s = tcb::ParseAttrs(in.op, in.data_format, in.padding, in.strides, in.dilations,
                                  in.explicit_paddings, &attrs);
  if (!s.ok()) {
    CheckError(s, "ParseAttrs", in);
    return 0;
  }
  const bool input_grad = tcb::ComputesInputGrad(in.op);
  std::vector<int64_t> sized;
  s = tcb::ShapeFromSizes(in.op, attrs, in.sizes_dims, in.sizes.data(),
                          input_grad ? in.data_shape : std::vector<int64_t>(), in.dy_shape, &sized);
  if (!s.ok()) {
    CheckError(s, "ShapeFromSizes", in);
    return 0;
  }
  const std::vector<int64_t>& input_shape = input_grad ? sized : in.data_shape;
  const std::vector<int64_t>& filter_shape = input_grad ? in.data_shape : sized;
  tcb::ConvGeometry g;
  s = tcb::ComputeGeometry(in.op, attrs, input_shape, filter_shape, in.dy_shape, &g);
  if (!s.ok()) {
    CheckError(s, "ComputeGeometry", in);
    if (ShouldAccept(in, attrs, input_shape, filter_shape)) {
      Fail("ComputeGeometry rejected shapes TF's formula accepts: " + s.message, Describe(in));
    }
    return 0;
  }
  ++g_fuzz_accepted;
  CheckGeometry(in, attrs, input_shape, filter_shape, g);
  if (SmallEnough(g)) {
    ++g_fuzz_kernel_runs;
    RunKernels(in, g);
  }
  return 0;
}
