// Correctness check of the CUDA engine (tf_ops/cuda/engine.h) without
// TensorFlow, built two ways from this one source:
//  * on a GPU machine by tests/core/gpu_check.py with the machine's own nvcc, as a
//    shared library (RunCheck for correctness, tcb_cuda_* for the timing script);
//  * here, for the CPU emulator (tests/core/cuda_emulator.h, -DTCB_CUDA_EMULATION),
//    as the `cuda_emulated_test` program of `make core-test`.
//
// Each configuration is drawn at random across the whole matrix (op, dtype, NHWC /
// NCHW, SAME / VALID / EXPLICIT, strides incl. ones past the phase limit, dilations,
// depth multipliers, grouped conv2d (a few groups, one input channel per group,
// many narrow groups, groups wider than a tile), channel counts on and off the
// vector width, tile- and split-crossing sizes, empty tensors, misaligned pointers,
// int32 and int64 index kernels) through the real geometry code, plus a fixed list
// of grouped layers (kExplicitCases: ResNeXt's 32 groups of 4, groups = in_depth,
// ...; every dtype on a GPU, two per op on the emulator), then:
//  * the output is pre-filled with NaN and guarded by sentinels on both sides, so an
//    unwritten element or a write out of bounds fails;
//  * the result is compared with tests/core/naive_reference.h (float64) on the same
//    dtype-rounded inputs: relative error within the tolerance of its dtype (below);
//  * it runs twice more, once with the same index type and once with the other, and
//    all three outputs must be bitwise equal (determinism, and the 32-bit fast path
//    computes exactly what the 64-bit one does).
// float32 configurations run half the time with TF32 allowed (CudaContext::tf32, TF's
// GPU default) and are then held to a TF32 tolerance; on the emulator the check also
// sees that the TF32 tensor-core kernels ran exactly when they should (float conv2d
// with TF32 allowed), never for exact float32.
// Every failure prints the configuration and its seed; a run ends with
// "N passed, M failed", after the count of grouped configurations checked (a run
// that checked none fails: the grouped kernels' paths would go untested).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/core/naive_reference.h"
#include "tf_ops/cuda/device.h"
#include "tf_ops/cuda/engine.h"
#include "tf_ops/cuda/kernels.h"
#include "tf_ops/core/geometry.h"

namespace tf_conv_backprop {
namespace check {
namespace {

// int32 (last) is Conv2DBackpropInput's alone, as in TF.
enum class DType { kHalf, kBFloat16, kFloat, kDouble, kInt32 };
constexpr DType kDTypes[] = {DType::kHalf, DType::kBFloat16, DType::kFloat, DType::kDouble,
                             DType::kInt32};
constexpr int kNumDTypes = 5;
int DTypesOf(OpKind op) { return op == OpKind::kConv2DBackpropInput ? kNumDTypes : kNumDTypes - 1; }
const char* DTypeName(DType d) {
  switch (d) {
    case DType::kHalf: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat: return "float32";
    case DType::kDouble: return "float64";
    case DType::kInt32: return "int32";
  }
  return "?";
}
size_t DTypeBytes(DType d) {
  return d == DType::kDouble ? 8 : d == DType::kFloat || d == DType::kInt32 ? 4 : 2;
}
// TF32 operands keep 10 mantissa bits (relative rounding error <= 2^-11): a relative
// error of a few 1e-4 on random sums, so 2e-3 leaves room and still fails a bug.
constexpr double kTf32Tolerance = 2e-3;
double Tolerance(DType d) {
  switch (d) {
    case DType::kHalf: return 2e-3;
    case DType::kBFloat16: return 1e-2;
    case DType::kFloat: return 1e-5;
    case DType::kDouble: return 1e-12;
    case DType::kInt32: return 0;  // exact, wrapping around: any differing element fails
  }
  return 0;
}
constexpr OpKind kOps[] = {OpKind::kConv2DBackpropInput, OpKind::kConv2DBackpropFilter,
                           OpKind::kDepthwiseBackpropInput, OpKind::kDepthwiseBackpropFilter};

// ---- device memory (host memory under the emulator) ----------------------------

#ifdef TCB_CUDA_EMULATION
void* DeviceAlloc(size_t bytes) { return std::malloc(bytes ? bytes : 1); }
void DeviceFree(void* p) { std::free(p); }
bool ToDevice(void* dst, const void* src, size_t bytes) { return bytes == 0 || std::memcpy(dst, src, bytes); }
bool ToHost(void* dst, const void* src, size_t bytes) { return bytes == 0 || std::memcpy(dst, src, bytes); }
bool Synchronize(std::string*) { return true; }
std::string LastDeviceError() { return "out of memory"; }
std::string EmulatorFaults() {
  std::string all;
  for (const std::string& f : tcb_emulator::TakeFaults()) all += (all.empty() ? "" : "; ") + f;
  return all;
}
#else
void* DeviceAlloc(size_t bytes) {
  void* p = nullptr;
  return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : nullptr;
}
void DeviceFree(void* p) { cudaFree(p); }
bool ToDevice(void* dst, const void* src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}
bool ToHost(void* dst, const void* src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}
bool Synchronize(std::string* error) {
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) *error = std::string("kernel failed: ") + cudaGetErrorString(e);
  return e == cudaSuccess;
}
std::string EmulatorFaults() { return ""; }
std::string LastDeviceError() { return cudaGetErrorString(cudaGetLastError()); }
#endif

// Device buffers freed at the end of a scope (also the engine's scratch).
struct Arena {
  std::vector<void*> blocks;
  void* Alloc(size_t bytes) {
    void* p = DeviceAlloc(bytes);
    if (p) blocks.push_back(p);
    return p;
  }
  ~Arena() {
    for (void* p : blocks) DeviceFree(p);
  }
};

// ---- host-side element conversion ----------------------------------------------

uint64_t NanBits(DType d) {
  switch (d) {
    case DType::kHalf: return 0x7e00;
    case DType::kBFloat16: return 0x7fc0;
    case DType::kFloat: return 0x7fc00000u;
    case DType::kDouble: return 0x7ff8000000000000ull;
    case DType::kInt32: return 0x7fc00000u;  // no NaN: a value a sum hits with odds 2^-32
  }
  return 0;
}
constexpr uint64_t kSentinel = 0x5a5a5a5a5a5a5a5aull;

// v rounded to the dtype (round to nearest even), as a double.
double RoundTo(DType d, double v) {
  switch (d) {
    case DType::kHalf: return __half2float(__float2half_rn(static_cast<float>(v)));
    case DType::kBFloat16: return __bfloat162float(__float2bfloat16_rn(static_cast<float>(v)));
    case DType::kFloat: return static_cast<float>(v);
    case DType::kDouble: return v;
    case DType::kInt32: return v;  // drawn as integers (Prepare)
  }
  return v;
}

void Encode(DType d, const std::vector<double>& in, std::vector<unsigned char>* out) {
  const size_t b = DTypeBytes(d);
  out->resize(in.size() * b);
  for (size_t i = 0; i < in.size(); ++i) {
    unsigned char* p = out->data() + i * b;
    switch (d) {
      case DType::kHalf: {
        const __half h = __float2half_rn(static_cast<float>(in[i]));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        const __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(in[i]));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kFloat: {
        const float f = static_cast<float>(in[i]);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::kDouble: std::memcpy(p, &in[i], 8); break;
      case DType::kInt32: {
        const int32_t v = static_cast<int32_t>(in[i]);
        std::memcpy(p, &v, 4);
        break;
      }
    }
  }
}

double DecodeOne(DType d, const unsigned char* p) {
  switch (d) {
    case DType::kHalf: {
      __half h;
      std::memcpy(&h, p, 2);
      return __half2float(h);
    }
    case DType::kBFloat16: {
      __nv_bfloat16 h;
      std::memcpy(&h, p, 2);
      return __bfloat162float(h);
    }
    case DType::kFloat: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kDouble: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
  return 0;
}

// ---- layouts -------------------------------------------------------------------

struct Dims {
  int64_t n, h, w, c;
};
// NHWC <-> format order; the filter is HWIO in both.
std::vector<double> ToFormat(DataFormat f, const Dims& d, const std::vector<double>& nhwc) {
  if (f == DataFormat::kNHWC) return nhwc;
  std::vector<double> out(nhwc.size());
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t y = 0; y < d.h; ++y)
      for (int64_t x = 0; x < d.w; ++x)
        for (int64_t c = 0; c < d.c; ++c)
          out[((n * d.c + c) * d.h + y) * d.w + x] = nhwc[((n * d.h + y) * d.w + x) * d.c + c];
  return out;
}
std::vector<double> ToNhwc(DataFormat f, const Dims& d, const std::vector<double>& src) {
  if (f == DataFormat::kNHWC) return src;
  std::vector<double> out(src.size());
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t y = 0; y < d.h; ++y)
      for (int64_t x = 0; x < d.w; ++x)
        for (int64_t c = 0; c < d.c; ++c)
          out[((n * d.h + y) * d.w + x) * d.c + c] = src[((n * d.c + c) * d.h + y) * d.w + x];
  return out;
}

// ---- configurations ------------------------------------------------------------

struct Config {
  OpKind op;
  DType dtype;
  Padding padding;
  ConvGeometry geo;
  uint64_t seed;
  bool force_int64;
  bool misalign;  // every tensor one element past an aligned address
  bool listed = false;  // from kExplicitCases, not drawn
  bool tf32 = false;    // CudaContext::tf32 (float32 only)
  int force_tile = 0;   // CudaContext::force_tile: 0, or the tensor-core conv2d tiles 64 / 128
};

double Tolerance(const Config& c) { return c.tf32 ? kTf32Tolerance : Tolerance(c.dtype); }

std::string Describe(const Config& c) {
  const ConvGeometry& g = c.geo;
  char buf[640];
  std::snprintf(buf, sizeof(buf),
                "%s %s %s %s N=%lld in=%lldx%lldx%lld filter=%lldx%lld %s=%lld groups=%lld out=%lldx%lldx%lld "
                "stride=%lld,%lld dilation=%lld,%lld pads(t,b,l,r)=%lld,%lld,%lld,%lld index=%s%s tile=%d seed=%llu",
                OpName(c.op), c.tf32 ? "float32(TF32 allowed)" : DTypeName(c.dtype), g.data_format == DataFormat::kNHWC ? "NHWC" : "NCHW",
                c.padding == Padding::kSame ? "SAME" : c.padding == Padding::kValid ? "VALID" : "EXPLICIT",
                (long long)g.batch, (long long)g.in_rows, (long long)g.in_cols, (long long)g.in_depth,
                (long long)g.filter_rows, (long long)g.filter_cols, g.depthwise ? "multiplier" : "out_depth",
                (long long)(g.depthwise ? g.depth_multiplier : g.out_depth), (long long)g.groups, (long long)g.out_rows,
                (long long)g.out_cols, (long long)g.out_depth, (long long)g.stride_rows, (long long)g.stride_cols,
                (long long)g.dilation_rows, (long long)g.dilation_cols, (long long)g.pad_top,
                (long long)g.pad_bottom, (long long)g.pad_left, (long long)g.pad_right,
                c.force_int64 ? "int64(forced)" : (CudaIndexFitsInt32(g) ? "int32" : "int64"),
                c.misalign ? " misaligned" : "", c.force_tile, (unsigned long long)c.seed);
  return buf;
}

// Builds the geometry the way the TF binding does (ParseAttrs + ComputeGeometry).
// `groups` > 1 (conv2d only) gives the filter depth / groups input channels, which
// ComputeGeometry turns back into the group count.
bool MakeGeometry(OpKind op, DataFormat format, Padding padding, int64_t batch, int64_t rows, int64_t cols,
                  int64_t depth, int64_t kh, int64_t kw, int64_t out_channels, int64_t sr, int64_t sc, int64_t dr,
                  int64_t dc, const int64_t (&pads)[4], int64_t groups, ConvGeometry* g) {
  if (groups < 1 || (groups > 1 && (IsDepthwise(op) || depth % groups != 0))) return false;
  const bool nhwc = format == DataFormat::kNHWC;
  auto order = [nhwc](int64_t n, int64_t h, int64_t w, int64_t c) {
    return nhwc ? std::vector<int64_t>{n, h, w, c} : std::vector<int64_t>{n, c, h, w};
  };
  std::vector<int64_t> explicit_pads;
  if (padding == Padding::kExplicit) {
    explicit_pads = nhwc ? std::vector<int64_t>{0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0}
                         : std::vector<int64_t>{0, 0, 0, 0, pads[0], pads[1], pads[2], pads[3]};
  }
  const char* pad_name = padding == Padding::kSame ? "SAME" : padding == Padding::kValid ? "VALID" : "EXPLICIT";
  ConvAttrs attrs;
  if (!ParseAttrs(op, nhwc ? "NHWC" : "NCHW", pad_name, order(1, sr, sc, 1), order(1, dr, dc, 1), explicit_pads,
                  &attrs)
           .ok()) {
    return false;
  }
  int64_t out_rows, out_cols, pb, pa;
  if (!WindowedOutputSize(rows, kh, dr, sr, padding, pads[0], pads[1], &out_rows, &pb, &pa).ok() ||
      !WindowedOutputSize(cols, kw, dc, sc, padding, pads[2], pads[3], &out_cols, &pb, &pa).ok()) {
    return false;
  }
  const bool depthwise = IsDepthwise(op);
  const int64_t out_depth = depthwise ? depth * out_channels : out_channels;
  return ComputeGeometry(op, attrs, order(batch, rows, cols, depth), {kh, kw, depth / groups, out_channels},
                         order(batch, out_rows, out_cols, out_depth), g)
             .ok() &&
         g->groups == groups;
}

// Config `index` of op `op`: the dtype cycles, everything else is drawn. `emulated`
// keeps sizes small (the emulator runs one GPU thread at a time).
Config Sample(OpKind op, int index, uint64_t base_seed, bool emulated) {
  Config c;
  c.op = op;
  c.dtype = kDTypes[index % DTypesOf(op)];
  c.seed = base_seed * 1000003ull + static_cast<uint64_t>(op) * 100000ull + static_cast<uint64_t>(index);
  std::mt19937_64 rng(c.seed);
  auto pick = [&rng](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const bool depthwise = IsDepthwise(op);
  for (;;) {
    const DataFormat format = pick(0, 1) ? DataFormat::kNCHW : DataFormat::kNHWC;
    const Padding padding = static_cast<Padding>(pick(0, 2));
    c.padding = padding;
    const int64_t kind = pick(0, 19);  // 0: empty, 1-2: large strides, 3-5: big, else small
    int64_t batch = pick(1, 3), rows = pick(1, 14), cols = pick(1, 14);
    int64_t kh = pick(1, 5), kw = pick(1, 5);
    int64_t sr = pick(1, 3), sc = pick(1, 3);
    int64_t dr = pick(0, 1) ? 1 : pick(1, 3), dc = pick(0, 1) ? 1 : pick(1, 3);
    int64_t depth, out_channels;
    auto channels = [&](int64_t hi) { return pick(0, 1) ? pick(1, hi) : 4 * pick(1, (hi + 3) / 4); };
    if (depthwise) {
      depth = channels(40);
      out_channels = pick(0, 2) ? 1 : pick(2, 3);
    } else {
      depth = channels(20);
      out_channels = channels(20);
    }
    int64_t pads[4] = {pick(0, 4), pick(0, 4), pick(0, 4), pick(0, 4)};
    if (kind == 0) {  // one empty dimension
      switch (pick(0, 3)) {
        case 0: batch = 0; break;
        case 1: depth = 0; break;
        case 2: out_channels = 0; break;
        default: rows = 0; break;
      }
    } else if (kind <= 2) {  // more phases than the phased kernel takes
      sr = pick(8, 11), sc = pick(8, 11);
      rows = pick(8, 30), cols = pick(8, 30);
    } else if (kind <= 5) {  // several tiles, long (split) reductions
      sr = pick(0, 2) ? 1 : 2, sc = pick(0, 2) ? 1 : 2;
      if (emulated) {
        batch = pick(2, 3), rows = pick(14, 24), cols = pick(14, 24);
        if (depthwise) {
          depth = pick(0, 1) ? 4 * pick(9, 20) : pick(33, 80);
        } else {
          depth = pick(60, 80), out_channels = pick(60, 72);
        }
      } else {
        batch = pick(2, 4), rows = pick(16, 40), cols = pick(16, 40);
        if (depthwise) {
          depth = pick(0, 1) ? 4 * pick(16, 64) : pick(65, 300);
        } else {
          depth = pick(0, 1) ? 4 * pick(16, 40) : pick(60, 150);
          out_channels = pick(0, 1) ? 4 * pick(16, 40) : pick(60, 150);
        }
      }
      kh = pick(1, 3), kw = pick(1, 3);
    }
    // Grouped conv2d, about 45% of the conv2d draws (every kind but the emptied
    // channel counts): the channel counts become groups x (channels per group).
    int64_t groups = 1;
    if (!depthwise && depth > 0 && out_channels > 0 && pick(0, 19) < 9) {
      const bool big = kind >= 3 && kind <= 5;
      // The emulator pays a whole tile per group: big images take fewer groups there
      // (kExplicitCases has ResNeXt's 32).
      const bool costly = big && emulated;
      int64_t cg, og;
      switch (pick(0, 3)) {
        case 0:  // a few groups, narrow or on the vector width
          groups = pick(2, 4), cg = channels(big ? 24 : 12), og = channels(big ? 24 : 12);
          break;
        case 1:  // one input channel per group (groups = in_depth), 1-3 outputs each
          groups = pick(2, costly ? 12 : big ? 48 : 24), cg = 1, og = pick(1, 3);
          break;
        case 2:  // wider than a tile: several channel tiles within a group
          groups = 2, cg = emulated ? pick(33, 72) : pick(60, 150), og = emulated ? pick(33, 72) : pick(60, 150);
          if (pick(0, 1)) cg = 8 * (cg / 8), og = 8 * (og / 8);
          break;
        default:  // many narrow groups (ResNeXt: 32 x 4), widths 4, 8, 16 or odd
          groups = costly ? pick(4, 8) : pick(0, 1) ? 32 : pick(5, 16);
          cg = pick(0, 3) ? int64_t{4} << pick(0, 2) : pick(1, 7);
          og = pick(0, 2) ? cg : pick(1, 8);
          break;
      }
      depth = groups * cg, out_channels = groups * og;
    }
    c.force_int64 = pick(0, 1) == 1;
    c.misalign = pick(0, 7) == 0;
    c.tf32 = c.dtype == DType::kFloat && pick(0, 1) == 1;
    c.force_tile = 64 * pick(0, 2);  // the engine's tiles, or either tensor-core tile size forced
    if (MakeGeometry(op, format, padding, batch, rows, cols, depth, kh, kw, out_channels, sr, sc, dr, dc, pads,
                     groups, &c.geo)) {
      return c;
    }
  }
}

// Layers every run checks in both conv2d ops, beside the random draws: the shapes
// grouped networks use and the corners of the group indexing (one channel per group,
// groups wider than a tile, vector widths), and the folded filter gradients.
struct ListedCase {
  DataFormat format;
  Padding padding;
  int64_t batch, rows, cols, depth, kh, kw, out_channels, sr, sc, dr, dc;
  int64_t pads[4];  // EXPLICIT only: top, bottom, left, right
  int64_t groups;
  bool misalign;
  int force_tile = -1;  // CudaContext::force_tile; -1: 0, 64, 128 in turn over the list
};
constexpr DataFormat kNhwc = DataFormat::kNHWC, kNchw = DataFormat::kNCHW;
constexpr ListedCase kExplicitCases[] = {
    // ResNeXt's 3x3 128 -> 128 in 32 groups of 4 (vec4, not vec8), and its strided form.
    // Small images: the emulator pays for a whole tile per group.
    {kNhwc, Padding::kSame, 1, 6, 6, 128, 3, 3, 128, 1, 1, 1, 1, {0, 0, 0, 0}, 32, false},
    {kNchw, Padding::kSame, 1, 7, 7, 128, 3, 3, 128, 2, 2, 1, 1, {0, 0, 0, 0}, 32, false},
    // groups = in_depth: one input channel per group, two outputs each; then one each,
    // dilated, explicitly padded.
    {kNhwc, Padding::kValid, 2, 6, 8, 12, 3, 3, 24, 1, 1, 1, 1, {0, 0, 0, 0}, 12, false},
    {kNchw, Padding::kExplicit, 1, 8, 8, 8, 3, 3, 8, 1, 1, 2, 2, {1, 2, 0, 3}, 8, false},
    // Group width 16 (vec8 in every group), then 8 with misaligned tensors (elementwise).
    {kNhwc, Padding::kSame, 1, 8, 8, 64, 3, 3, 64, 1, 1, 1, 1, {0, 0, 0, 0}, 4, false},
    {kNhwc, Padding::kSame, 2, 6, 6, 32, 3, 3, 32, 1, 1, 1, 1, {0, 0, 0, 0}, 4, true},
    // Two groups wider than a tile (80 -> 72 each), strided, explicit pads.
    {kNhwc, Padding::kExplicit, 2, 11, 11, 160, 3, 3, 144, 2, 2, 1, 1, {1, 1, 2, 0}, 2, false},
    // Three groups of odd widths (5 -> 7), 1x1 stride 2; and past the phase limit.
    {kNchw, Padding::kValid, 3, 9, 8, 15, 1, 1, 21, 2, 2, 1, 1, {0, 0, 0, 0}, 3, false},
    {kNhwc, Padding::kSame, 1, 20, 18, 12, 2, 3, 8, 9, 10, 1, 1, {0, 0, 0, 0}, 4, false},
    // Filter gradients folding their taps into the GEMM rows (few channels per group):
    // a dense 7x7 stride-2 stem of 3 channels (147 rows: three row tiles, the last
    // partial), and 3 channels per group, dilated, explicitly padded, in NCHW.
    {kNhwc, Padding::kSame, 2, 15, 16, 3, 7, 7, 16, 2, 2, 1, 1, {0, 0, 0, 0}, 1, false},
    {kNchw, Padding::kExplicit, 1, 9, 10, 6, 3, 3, 20, 1, 2, 2, 1, {2, 0, 1, 3}, 2, false},
    // Input gradients splitting their reduction over output channels (few tiles, many
    // channels: 3x3 512@7's shape, smaller), in 8 splits; and 2 groups of 3 splits
    // with a partial last range (70 = 32 + 32 + 6 channels), NCHW, misaligned.
    {kNhwc, Padding::kSame, 1, 3, 4, 64, 3, 3, 256, 1, 1, 1, 1, {0, 0, 0, 0}, 1, false},
    {kNchw, Padding::kSame, 1, 4, 3, 40, 3, 3, 140, 1, 1, 1, 1, {0, 0, 0, 0}, 2, true},
    // 128x128 tensor-core tiles with both 64-column passes of the epilogue, partial
    // (136 -> 144 channels), on a phased stride-2 input gradient.
    {kNhwc, Padding::kSame, 2, 5, 6, 136, 3, 3, 144, 1, 1, 1, 1, {0, 0, 0, 0}, 1, false, 128},
    {kNchw, Padding::kSame, 1, 7, 6, 136, 3, 3, 72, 2, 2, 1, 1, {0, 0, 0, 0}, 1, false, 128},
    // Input gradients of a few channels over many pixels (the direct kernel): the 7x7
    // stride-2 stem's shape, smaller; one dilated, explicitly padded channel in NCHW.
    {kNhwc, Padding::kSame, 1, 130, 127, 3, 7, 7, 8, 2, 2, 1, 1, {0, 0, 0, 0}, 1, false},
    {kNchw, Padding::kExplicit, 1, 128, 129, 1, 3, 3, 5, 1, 1, 2, 2, {1, 3, 2, 0}, 1, false},
};

// The listed cases as configurations of both conv2d ops in each of their dtypes;
// `emulated`: in one tensor-core dtype and one other per case and op, rotating
// through them over the list (the emulator replays each warp's products per thread).
std::vector<Config> ListedConfigs(uint64_t base_seed, bool emulated) {
  std::vector<Config> out;
  int index = 0, listed = 0;
  for (const ListedCase& l : kExplicitCases) {
    for (OpKind op : {OpKind::kConv2DBackpropInput, OpKind::kConv2DBackpropFilter}) {
      std::vector<DType> dtypes(kDTypes, kDTypes + DTypesOf(op));
      if (emulated) {
        const int input_grad = ComputesInputGrad(op);
        dtypes = {kDTypes[(listed + input_grad) % 2], kDTypes[2 + listed % (DTypesOf(op) - 2)]};
      }
      for (DType dtype : dtypes) {
        Config c;
        c.op = op;
        c.dtype = dtype;
        c.padding = l.padding;
        c.seed = base_seed * 1000003ull + 900000ull + static_cast<uint64_t>(index);
        c.force_int64 = index % 2 == 1;
        c.misalign = l.misalign;
        c.listed = true;
        c.tf32 = dtype == DType::kFloat && listed % 2 == 0;
        c.force_tile = l.force_tile >= 0 ? l.force_tile : 64 * (index % 3);
        if (!MakeGeometry(op, l.format, l.padding, l.batch, l.rows, l.cols, l.depth, l.kh, l.kw, l.out_channels,
                          l.sr, l.sc, l.dr, l.dc, l.pads, l.groups, &c.geo)) {
          // A broken list entry must not pass silently: an empty geometry the check rejects.
          c.geo = ConvGeometry();
          c.geo.groups = 0;
        }
        out.push_back(c);
        ++index;
      }
    }
    ++listed;
  }
  return out;
}

// ---- one configuration ---------------------------------------------------------

template <typename T>
Status RunEngine(OpKind op, const CudaContext& ctx, const ConvGeometry& g, const void* data, const void* dy,
                 void* out) {
  const T* a = static_cast<const T*>(data);
  const T* d = static_cast<const T*>(dy);
  T* o = static_cast<T*>(out);
  return GradientCuda<T>(op, ctx, g, a, d, o);
}

Status RunDType(DType dtype, OpKind op, const CudaContext& ctx, const ConvGeometry& g, const void* data,
                const void* dy, void* out) {
  switch (dtype) {
    case DType::kHalf: return RunEngine<__half>(op, ctx, g, data, dy, out);
    case DType::kBFloat16: return RunEngine<__nv_bfloat16>(op, ctx, g, data, dy, out);
    case DType::kFloat: return RunEngine<float>(op, ctx, g, data, dy, out);
    case DType::kDouble: return RunEngine<double>(op, ctx, g, data, dy, out);
    case DType::kInt32: return RunEngine<int32_t>(op, ctx, g, data, dy, out);
  }
  return Internal("unknown dtype");
}

// Host data of a configuration: inputs (NHWC, dtype-rounded) and the reference.
struct Prepared {
  std::vector<double> data_nhwc, dy_nhwc, reference;
};

Prepared Prepare(const Config& c) {
  const ConvGeometry& g = c.geo;
  if (g.groups < 1) return Prepared();  // a broken list entry, failed by CheckConfig
  const bool input_grad = ComputesInputGrad(c.op);
  std::mt19937_64 rng(c.seed ^ 0x9e3779b97f4a7c15ull);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  Prepared p;
  p.data_nhwc.resize(input_grad ? g.filter_elements : g.input_elements);
  p.dy_nhwc.resize(g.out_backprop_elements);
  if (c.dtype == DType::kInt32) {
    // The whole int32 range, so nearly every sum wraps around; the reference sums in
    // uint32 (TF's wrap-around), its int32 values held exactly as doubles.
    auto draw = [&rng](std::vector<double>& values, std::vector<int32_t>& ints) {
      for (double& v : values) {
        ints.push_back(static_cast<int32_t>(static_cast<uint32_t>(rng())));
        v = ints.back();
      }
    };
    std::vector<int32_t> data, dy;
    draw(p.data_nhwc, data);
    draw(p.dy_nhwc, dy);
    for (uint32_t v : naive::Gradient<int32_t, uint32_t>(g, input_grad, data.data(), dy.data())) {
      p.reference.push_back(static_cast<int32_t>(v));
    }
    return p;
  }
  for (double& v : p.data_nhwc) v = RoundTo(c.dtype, uni(rng));
  for (double& v : p.dy_nhwc) v = RoundTo(c.dtype, uni(rng));
  p.reference = naive::Gradient<double>(g, input_grad, p.data_nhwc.data(), p.dy_nhwc.data());
  return p;
}

// One engine call on fresh NaN-filled output with sentinels around it; the output
// (format order, raw bytes) in *out.
// tf32_expected: the call must make TF32 tensor-core products (checked on the emulator).
bool RunOnce(const Config& c, bool force_int64, bool tf32_expected, const std::vector<unsigned char>& data,
             const std::vector<unsigned char>& dy, size_t out_count, std::vector<unsigned char>* out,
             std::string* error) {
  const size_t b = DTypeBytes(c.dtype);
  const size_t shift = c.misalign ? b : 0;
  constexpr size_t kGuard = 256;  // bytes of sentinel on each side of the output
  Arena arena;
  unsigned char* d_data = static_cast<unsigned char*>(arena.Alloc(data.size() + shift));
  unsigned char* d_dy = static_cast<unsigned char*>(arena.Alloc(dy.size() + shift));
  unsigned char* d_out = static_cast<unsigned char*>(arena.Alloc(out_count * b + 2 * kGuard + shift));
  if (!d_data || !d_dy || !d_out) return *error = "cannot allocate the test tensors: " + LastDeviceError(), false;
  std::vector<unsigned char> init(out_count * b + 2 * kGuard);
  for (size_t i = 0; i < init.size(); i += 8) std::memcpy(&init[i], &kSentinel, std::min<size_t>(8, init.size() - i));
  const uint64_t nan = NanBits(c.dtype);
  for (size_t i = 0; i < out_count; ++i) std::memcpy(&init[kGuard + i * b], &nan, b);
  if (!ToDevice(d_data + shift, data.data(), data.size()) || !ToDevice(d_dy + shift, dy.data(), dy.size()) ||
      !ToDevice(d_out + shift, init.data(), init.size())) {
    return *error = "copy to device failed", false;
  }
  CudaContext ctx;
  ctx.force_int64_index = force_int64;
  ctx.tf32 = c.tf32;
  ctx.force_tile = c.force_tile;
  ctx.allocate = [&arena](int64_t bytes) { return arena.Alloc(static_cast<size_t>(bytes)); };
#ifdef TCB_CUDA_EMULATION
  const uint64_t tf32_products = nvcuda::wmma::tcb_mma_count[1];
#endif
  const Status s = RunDType(c.dtype, c.op, ctx, c.geo, d_data + shift, d_dy + shift, d_out + shift + kGuard);
  if (!s.ok()) return *error = "engine error: " + s.message, false;
  if (!Synchronize(error)) return false;
  const std::string faults = EmulatorFaults();
  if (!faults.empty()) return *error = "emulator: " + faults, false;
#ifdef TCB_CUDA_EMULATION
  // TF32 products only where TF32 is allowed, and there for every float conv2d with
  // work to do (a product of some tap: *tf32_expected, from the reference).
  const bool tf32_ran = nvcuda::wmma::tcb_mma_count[1] != tf32_products;
  if (tf32_ran && !c.tf32) return *error = "TF32 tensor-core products although TF32 was not allowed", false;
  if (!tf32_ran && tf32_expected) return *error = "TF32 allowed, but the TF32 tensor-core kernels did not run", false;
#endif
  std::vector<unsigned char> back(init.size());
  if (!ToHost(back.data(), d_out + shift, back.size())) return *error = "copy to host failed", false;
  for (size_t i = 0; i < kGuard; ++i) {
    if (back[i] != init[i] || back[kGuard + out_count * b + i] != init[kGuard + out_count * b + i]) {
      return *error = std::string("write out of bounds (") + (back[i] != init[i] ? "before" : "after") +
                      " the output)", false;
    }
  }
  out->assign(back.begin() + kGuard, back.begin() + kGuard + out_count * b);
  return true;
}

// Empty string: passed.
std::string CheckConfig(const Config& c, const Prepared& p) {
  const ConvGeometry& g = c.geo;
  if (g.groups < 1) return "invalid entry of kExplicitCases (the geometry code rejects it)";
  const bool input_grad = ComputesInputGrad(c.op);
  const Dims in_dims{g.batch, g.in_rows, g.in_cols, g.in_depth};
  const Dims dy_dims{g.batch, g.out_rows, g.out_cols, g.out_depth};
  std::vector<unsigned char> data, dy;
  Encode(c.dtype, input_grad ? p.data_nhwc : ToFormat(g.data_format, in_dims, p.data_nhwc), &data);
  Encode(c.dtype, ToFormat(g.data_format, dy_dims, p.dy_nhwc), &dy);
  const size_t out_count = p.reference.size();
  std::vector<unsigned char> first, again, other;
  std::string error;
  // Some tap lands (a nonzero reference of random inputs): the tensor cores must run.
  const bool narrow = c.op == OpKind::kConv2DBackpropInput && cuda::NarrowInput(c.geo);  // exact, no tensor cores
  const bool tf32_expected = c.tf32 && !IsDepthwise(c.op) && !narrow &&
                             std::any_of(p.reference.begin(), p.reference.end(), [](double v) { return v != 0; });
  if (!RunOnce(c, c.force_int64, tf32_expected, data, dy, out_count, &first, &error)) return error;
  std::vector<double> got(out_count);
  for (size_t i = 0; i < out_count; ++i) got[i] = DecodeOne(c.dtype, &first[i * DTypeBytes(c.dtype)]);
  if (input_grad) got = ToNhwc(g.data_format, in_dims, got);
  double diff = 0, norm = 0;
  size_t worst = 0;
  double worst_abs = -1;
  for (size_t i = 0; i < out_count; ++i) {
    const double d = got[i] - p.reference[i];
    if (std::isnan(d) ? !std::isnan(worst_abs) : std::fabs(d) > worst_abs) worst_abs = std::fabs(d), worst = i;
    diff += d * d;
    norm += p.reference[i] * p.reference[i];
  }
  const double err = norm > 0 ? std::sqrt(diff) / std::sqrt(norm) : std::sqrt(diff);
  if (!(err <= Tolerance(c))) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "relative error %.3g > %.0e; worst element %zu (NHWC order): got %.17g, want %.17g",
                  err, Tolerance(c), worst, got[worst], p.reference[worst]);
    return buf;
  }
  if (!RunOnce(c, c.force_int64, tf32_expected, data, dy, out_count, &again, &error)) return "second run: " + error;
  if (again != first) return "not deterministic: two runs differ bitwise";
  const bool fits32 = CudaIndexFitsInt32(g);
  if (fits32) {
    if (!RunOnce(c, !c.force_int64, tf32_expected, data, dy, out_count, &other, &error)) {
      return "other index type: " + error;
    }
    if (other != first) return "int32 and int64 index kernels differ bitwise";
  }
  return "";
}

}  // namespace

// Runs `per_op` configurations of each op; prints failures and a summary line.
// Returns the number of failures.
int RunCheck(int per_op, uint64_t seed, bool emulated, int threads, bool verbose) {
  std::vector<Config> configs;
  for (OpKind op : kOps)
    for (int i = 0; i < per_op; ++i) configs.push_back(Sample(op, i, seed, emulated));
  for (const Config& c : ListedConfigs(seed, emulated)) configs.push_back(c);
  int passed = 0, failed = 0;
  int grouped_drawn = 0, grouped_listed = 0, grouped_failed = 0;
  int tf32_checked = 0, tf32_failed = 0, split_checked = 0, split_failed = 0, large_checked = 0, large_failed = 0;
  int narrow_checked = 0, narrow_failed = 0;
  int per_cell[4][kNumDTypes][2] = {};
  // Inputs and references on CPU threads, a batch at a time; device runs in order.
  const size_t batch = 64;
  for (size_t start = 0; start < configs.size(); start += batch) {
    const size_t end = std::min(configs.size(), start + batch);
    std::vector<Prepared> prepared(end - start);
    std::atomic<size_t> next{start};
    std::vector<std::thread> pool;
    for (int t = 0; t < std::max(1, threads); ++t) {
      pool.emplace_back([&] {
        for (size_t i = next++; i < end; i = next++) prepared[i - start] = Prepare(configs[i]);
      });
    }
    for (std::thread& t : pool) t.join();
    for (size_t i = start; i < end; ++i) {
      const Config& c = configs[i];
      const std::string why = CheckConfig(c, prepared[i - start]);
      if (c.geo.groups != 1) {
        ++(c.listed ? grouped_listed : grouped_drawn);
        grouped_failed += !why.empty();
      }
      const bool conv2d = !IsDepthwise(c.op) && c.geo.groups >= 1;
      const bool tensor_cores = c.dtype == DType::kHalf || c.dtype == DType::kBFloat16 || c.tf32;
      const cuda::GemmTiles tiles =
          conv2d ? cuda::ChooseGemmTiles(c.op, c.geo, tensor_cores, c.force_tile) : cuda::GemmTiles::kCudaCores;
      if (c.op == OpKind::kConv2DBackpropInput && conv2d &&
          cuda::PlanConv2DBackpropInput(c.geo, c.dtype == DType::kDouble ? 8 : 4, tiles).splits > 1) {
        ++split_checked;
        split_failed += !why.empty();
      }
      if (c.op == OpKind::kConv2DBackpropInput && conv2d && cuda::NarrowInput(c.geo)) {
        ++narrow_checked;
        narrow_failed += !why.empty();
      }
      if (tiles == cuda::GemmTiles::kTensor128) {
        ++large_checked;
        large_failed += !why.empty();
      }
      if (c.tf32 && !IsDepthwise(c.op)) {
        ++tf32_checked;
        tf32_failed += !why.empty();
      }
      if (why.empty()) {
        ++passed;
        ++per_cell[static_cast<int>(c.op)][static_cast<int>(c.dtype)][c.geo.data_format == DataFormat::kNCHW];
        if (verbose) std::printf("ok   %s\n", Describe(c).c_str());
      } else {
        ++failed;
        std::printf("FAIL %s\n     %s\n", Describe(c).c_str(), why.c_str());
      }
      std::fflush(stdout);
    }
  }
  std::printf("configurations passed per op (float16/bfloat16/float32/float64/int32, NHWC+NCHW):\n");
  for (OpKind op : kOps) {
    std::printf("  %-36s", OpName(op));
    for (int i = 0; i < DTypesOf(op); ++i) {
      const DType d = kDTypes[i];
      const int* cell = per_cell[static_cast<int>(op)][static_cast<int>(d)];
      std::printf(" %3d+%-3d", cell[0], cell[1]);
    }
    std::printf("\n");
  }
  std::printf("grouped conv2d configurations checked: %d (%d drawn, %d listed), %d failed\n",
              grouped_drawn + grouped_listed, grouped_drawn, grouped_listed, grouped_failed);
  std::printf("float32 conv2d configurations with TF32 allowed: %d, %d failed\n", tf32_checked, tf32_failed);
  std::printf("input gradients splitting their reduction: %d, %d failed\n", split_checked, split_failed);
  std::printf("conv2d configurations on 128x128 tensor-core tiles: %d, %d failed\n", large_checked, large_failed);
  std::printf("input gradients of a few channels (direct kernel): %d, %d failed\n", narrow_checked, narrow_failed);
  // A run that checked none of a kind fails: that kernel path would go untested.
  auto require = [&failed](int checked, const char* what) {
    if (checked == 0) {
      std::printf("FAIL no %s was checked\n", what);
      ++failed;
    }
  };
  require(narrow_checked, "input gradient of a few channels");
  require(large_checked, "conv2d configuration on 128x128 tensor-core tiles");
  require(split_checked, "input gradient with a split reduction");
  require(tf32_checked, "TF32 configuration");
  require(grouped_drawn + grouped_listed, "grouped conv2d configuration");
  std::printf("%d passed, %d failed\n", passed, failed);
  std::fflush(stdout);
  return failed;
}

}  // namespace check
}  // namespace tf_conv_backprop

// ---- C interface for tests/core/gpu_check.py -----------------------------------

namespace {
// sizes: op, dtype (0 half, 1 bfloat16, 2 float, 3 double, 4 int32), format (0 NHWC, 1 NCHW),
// padding (0 SAME, 1 VALID, 2 EXPLICIT), batch, rows, cols, depth, filter rows,
// filter cols, out channels (conv2d out depth / depthwise multiplier), stride rows,
// stride cols, dilation rows, dilation cols, pad top, pad bottom, pad left, pad right,
// groups (conv2d; 1 for dense and depthwise), tf32 (1: CudaContext::tf32),
// force_tile (CudaContext::force_tile).
constexpr int kArgs = 22;
bool GeometryFromArgs(const int64_t* a, tf_conv_backprop::ConvGeometry* g) {
  using namespace tf_conv_backprop;
  if (a[0] < 0 || a[0] > 3 || a[2] < 0 || a[2] > 1 || a[3] < 0 || a[3] > 2) return false;
  const int64_t pads[4] = {a[15], a[16], a[17], a[18]};
  return check::MakeGeometry(static_cast<OpKind>(a[0]), a[2] ? DataFormat::kNCHW : DataFormat::kNHWC,
                             static_cast<Padding>(a[3]), a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
                             a[13], a[14], pads, a[19], g);
}
}  // namespace

extern "C" {

int tcb_cuda_check(int per_op, unsigned long long seed, int threads, int verbose) {
  return tf_conv_backprop::check::RunCheck(per_op, seed, false, threads, verbose != 0);
}

// Output rows and cols of the forward convolution; 0 on success.
int tcb_cuda_output_size(const int64_t* args, int64_t* out_rows_cols) {
  tf_conv_backprop::ConvGeometry g;
  if (!GeometryFromArgs(args, &g)) return 1;
  out_rows_cols[0] = g.out_rows;
  out_rows_cols[1] = g.out_cols;
  return 0;
}

// Runs one op on device pointers on `stream`; scratch from a grow-only buffer kept
// for later calls (freed by tcb_cuda_release). 0 on success, else a message in err.
static void* g_scratch = nullptr;
static int64_t g_scratch_bytes = 0;
int tcb_cuda_run(const int64_t* args, const void* data, const void* dy, void* out, void* stream, char* err,
                 int err_len) {
  using namespace tf_conv_backprop;
  auto fail = [&](const std::string& m) {
    std::snprintf(err, static_cast<size_t>(err_len), "%s", m.c_str());
    return 1;
  };
  ConvGeometry g;
  if (!GeometryFromArgs(args, &g)) return fail("invalid configuration");
  CudaContext ctx;
  ctx.stream = static_cast<CUstream_st*>(stream);
  ctx.tf32 = args[20] != 0;
  ctx.force_tile = static_cast<int>(args[21]);
  ctx.allocate = [](int64_t bytes) -> void* {
    if (bytes > g_scratch_bytes) {
      if (g_scratch) check::DeviceFree(g_scratch);
      g_scratch = check::DeviceAlloc(static_cast<size_t>(bytes));
      g_scratch_bytes = g_scratch ? bytes : 0;
    }
    return g_scratch;
  };
  const Status s = check::RunDType(static_cast<check::DType>(args[1]), static_cast<OpKind>(args[0]), ctx, g, data,
                                   dy, out);
  return s.ok() ? 0 : fail(s.message);
}

void tcb_cuda_release() {
  if (g_scratch) tf_conv_backprop::check::DeviceFree(g_scratch);
  g_scratch = nullptr;
  g_scratch_bytes = 0;
}

int tcb_cuda_num_args() { return kArgs; }

}  // extern "C"

#ifdef TCB_CUDA_EMULATION
// cuda_emulated_test [configs per op] [seed]
int main(int argc, char** argv) {
  const int per_op = argc > 1 ? std::atoi(argv[1]) : 40;
  const unsigned long long seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20241130ull;
  const unsigned hw = std::thread::hardware_concurrency();
  std::printf("CUDA engine on the CPU emulator: %d configurations per op, seed %llu\n", per_op, seed);
  return tf_conv_backprop::check::RunCheck(per_op, seed, true, hw ? static_cast<int>(hw) : 1, false) ? 1 : 0;
}
#endif
