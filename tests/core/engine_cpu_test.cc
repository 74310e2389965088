// Standalone test of the CPU engine front end (cpu/engine.cc, no TensorFlow):
//  1. the per-ISA layout helpers: half/bfloat16 conversions equal Eigen's scalar
//     ones bit for bit (ties, denormals, inf, NaN, vector tails), and tiled
//     transposes equal a plain loop for ragged sizes;
//  2. the four gradients through the public entry points in every dtype and both
//     layouts, against the float64 naive reference (outputs pre-filled with NaN),
//     including batches that run in several chunks (odd batch, short last chunk)
//     and channel counts that leave transpose / conversion tails;
//  3. repeated calls are bitwise equal (chunked filter gradients add per-chunk
//     results in a fixed order);
//  4. the engine's scratch bound: peak scratch per call <= max(32 MiB, output
//     bytes) for every dtype and layout on a large-ish geometry.
// Every instruction-set variant this CPU can run.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "tests/core/expect.h"
#include "tests/core/naive_reference.h"
#include "tf_ops/cpu/engine.h"
#include "tf_ops/cpu/isa.h"
#include "tf_ops/cpu/engine.h"
#include "tf_ops/cpu/kernel_table.h"
#include "tf_ops/core/scratch.h"

namespace {

namespace tcb = tf_conv_backprop;
namespace cpu = tf_conv_backprop::cpu;
using tcb::ConvGeometry;
using tcb::CpuContext;
using tcb::DataFormat;

CpuContext MakeContext(int threads) {
  CpuContext ctx;
  ctx.num_threads = threads;
  if (threads <= 1) return ctx;
  ctx.parallel_for = [threads](int64_t total, int64_t, const CpuContext::Range& fn) {
    std::vector<std::thread> pool;
    std::atomic<int64_t> next{0};
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (int64_t i = next.fetch_add(1); i < total; i = next.fetch_add(1)) fn(i, i + 1);
      });
    }
    for (std::thread& th : pool) th.join();
  };
  return ctx;
}

template <typename T>
uint16_t Bits16(T v) {
  uint16_t b;
  std::memcpy(&b, &v, 2);
  return b;
}

// Floats that probe rounding: ties at the bfloat16 / half boundaries, denormals
// of both formats, overflow, inf, NaN of both signs, plus random values.
std::vector<float> ProbeFloats(std::mt19937_64& rng) {
  std::vector<float> v;
  const uint32_t patterns[] = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f807fffu,
                               0x3f808001u, 0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                               0xffc00001u, 0x7f800001u, 0x00000001u, 0x807fffffu, 0x33800000u,
                               0x33000000u, 0x387fc000u, 0x477ff000u, 0x477fe000u, 0x3f801000u};
  for (uint32_t p : patterns) {
    float f;
    std::memcpy(&f, &p, 4);
    v.push_back(f);
  }
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_real_distribution<float> uniform(-70000.f, 70000.f);
  for (int i = 0; i < 2000; ++i) {
    const uint32_t b = bits(rng);
    float f;
    std::memcpy(&f, &b, 4);
    v.push_back(i % 2 ? f : uniform(rng));
  }
  return v;
}

template <typename H>
void CheckConversions(std::mt19937_64& rng) {
  const char* name = std::is_same_v<H, Eigen::half> ? "half" : "bfloat16";
  const std::vector<float> f = ProbeFloats(rng);
  for (int64_t n : {int64_t(f.size()), int64_t(1), int64_t(7), int64_t(15), int64_t(17), int64_t(33)}) {
    std::vector<H> h(n);
    cpu::ConvertElements(f.data(), h.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = Bits16(static_cast<H>(f[i]));
      const bool both_nan = std::isnan(f[i]) && Eigen::numext::isnan(h[i]);
      EXPECT(Bits16(h[i]) == want || (std::is_same_v<H, Eigen::half> && both_nan),
             "float->%s [%lld of %lld] of %a: got 0x%04x want 0x%04x", name, (long long)i,
             (long long)n, f[i], Bits16(h[i]), want);
    }
    std::vector<float> back(n);
    cpu::ConvertElements(h.data(), back.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float want = static_cast<float>(h[i]);
      EXPECT(std::memcmp(&back[i], &want, 4) == 0 || (std::isnan(want) && std::isnan(back[i])),
             "%s->float [%lld]: got %a want %a", name, (long long)i, back[i], want);
    }
  }
}

template <typename From, typename To>
void CheckTranspose(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(-4.f, 4.f);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 16}, {1, 1}, {3, 40}, {40, 3},
                            {17, 33}, {64, 256}, {96, 31}}) {
    for (bool stream : {false, true}) {
      // Streaming stores need whole-line destination rows: a 64-byte aligned dst
      // whose stride is a multiple of a line.
      const int64_t ss = cols + 5, ds = stream ? (rows + 3 + 15) / 16 * 16 : rows + 3;
      std::vector<From> src(rows * ss);
      for (From& e : src) e = static_cast<From>(uniform(rng));
      std::vector<To> storage(cols * ds + 64, static_cast<To>(-99.f));
      To* dst = storage.data();
      while (reinterpret_cast<uintptr_t>(dst) % 64 != 0) ++dst;
      std::vector<To> want(dst, dst + cols * ds);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          want[j * ds + i] = static_cast<To>(static_cast<std::conditional_t<std::is_same_v<From, double>, double, float>>(src[i * ss + j]));
      cpu::TransposeConvert(src.data(), ss, dst, ds, rows, cols, stream);
      EXPECT(std::memcmp(dst, want.data(), want.size() * sizeof(To)) == 0,
             "TransposeConvert<%zu,%zu> %lldx%lld (stream %d) differs from a plain loop", sizeof(From),
             sizeof(To), (long long)rows, (long long)cols, int(stream));
    }
  }
}

ConvGeometry Geometry(bool depthwise, int64_t n, int64_t h, int64_t w, int64_t cin, int64_t cout_or_m,
                      int64_t k, int64_t stride, int64_t pad, DataFormat format) {
  ConvGeometry g;
  g.batch = n, g.in_rows = h, g.in_cols = w, g.in_depth = cin;
  g.filter_rows = g.filter_cols = k;
  g.stride_rows = g.stride_cols = stride;
  g.pad_top = g.pad_left = pad;
  g.out_rows = (h + 2 * pad - k) / stride + 1;
  g.out_cols = (w + 2 * pad - k) / stride + 1;
  g.pad_bottom = std::max<int64_t>(0, (g.out_rows - 1) * stride + k - h - pad);
  g.pad_right = std::max<int64_t>(0, (g.out_cols - 1) * stride + k - w - pad);
  g.depthwise = depthwise;
  g.depth_multiplier = depthwise ? cout_or_m : 1;
  g.out_depth = depthwise ? cin * cout_or_m : cout_or_m;
  g.data_format = format;
  g.input_elements = n * h * w * cin;
  g.filter_elements = k * k * cin * (depthwise ? cout_or_m : cout_or_m);
  g.out_backprop_elements = n * g.out_rows * g.out_cols * g.out_depth;
  return g;
}

// NHWC <-> NCHW of a double tensor (test side, plain loops).
std::vector<double> Permute(const std::vector<double>& v, int64_t n, int64_t h, int64_t w, int64_t c,
                            bool to_nchw) {
  std::vector<double> out(v.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t nhwc = ((b * h + y) * w + x) * c + ch, nchw = ((b * c + ch) * h + y) * w + x;
          if (to_nchw) out[nchw] = v[nhwc];
          else out[nhwc] = v[nchw];
        }
  return out;
}

template <typename T>
double Tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  if constexpr (std::is_same_v<T, Eigen::half>) return 2e-3;
  return 1e-2;
}

template <typename T>
const char* TypeName() {
  if constexpr (std::is_same_v<T, double>) return "double";
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, Eigen::half>) return "half";
  return "bfloat16";
}

// All four tensors random (rounded to T), both gradients, vs the reference computed
// in NHWC from the rounded values; twice, bitwise equal. Returns the peak scratch.
template <typename T>
int64_t CheckGradients(const ConvGeometry& g, uint64_t seed, int threads, bool check_values) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  const bool nchw = g.data_format == DataFormat::kNCHW;
  auto random = [&](int64_t count) {
    std::vector<T> v(count);
    for (T& e : v) e = static_cast<T>(uniform(rng));
    return v;
  };
  const std::vector<T> x = random(g.input_elements), w = random(g.filter_elements),
                       dy = random(g.out_backprop_elements);
  auto as_double = [](const std::vector<T>& v) {
    std::vector<double> d(v.size());
    for (size_t i = 0; i < v.size(); ++i) d[i] = static_cast<double>(v[i]);
    return d;
  };
  const CpuContext ctx = MakeContext(threads);
  int64_t peak = 0;
  for (bool input_grad : {true, false}) {
    const int64_t size = input_grad ? g.input_elements : g.filter_elements;
    std::vector<T> out[2];
    for (int rep = 0; rep < 2; ++rep) {
      out[rep].assign(size, static_cast<T>(std::numeric_limits<float>::quiet_NaN()));
      tcb::ResetScratchPeak();
      tcb::Status s;
      if (g.depthwise) {
        s = input_grad ? tcb::GradientCpu<T>(tf_conv_backprop::OpKind::kDepthwiseBackpropInput, ctx, g, w.data(), dy.data(), out[rep].data())
                       : tcb::GradientCpu<T>(tf_conv_backprop::OpKind::kDepthwiseBackpropFilter, ctx, g, x.data(), dy.data(), out[rep].data());
      } else {
        s = input_grad ? tcb::GradientCpu<T>(tf_conv_backprop::OpKind::kConv2DBackpropInput, ctx, g, w.data(), dy.data(), out[rep].data())
                       : tcb::GradientCpu<T>(tf_conv_backprop::OpKind::kConv2DBackpropFilter, ctx, g, x.data(), dy.data(), out[rep].data());
      }
      peak = std::max(peak, tcb::ScratchPeakBytes());
      EXPECT(s.ok(), "%s status %s", TypeName<T>(), s.message.c_str());
    }
    EXPECT(std::memcmp(out[0].data(), out[1].data(), size * sizeof(T)) == 0,
           "%s %s %s grad N=%lld seed=%llu: two calls differ", TypeName<T>(), nchw ? "NCHW" : "NHWC",
           input_grad ? "input" : "filter", (long long)g.batch, (unsigned long long)seed);
    if (!check_values) continue;
    ConvGeometry nhwc = g;
    nhwc.data_format = DataFormat::kNHWC;
    std::vector<double> xd = as_double(x), dyd = as_double(dy);
    if (nchw) {
      xd = Permute(xd, g.batch, g.in_rows, g.in_cols, g.in_depth, false);
      dyd = Permute(dyd, g.batch, g.out_rows, g.out_cols, g.out_depth, false);
    }
    std::vector<double> ref = tcb::naive::Gradient(nhwc, input_grad, input_grad ? as_double(w).data() : xd.data(), dyd.data());
    if (nchw && input_grad) ref = Permute(ref, g.batch, g.in_rows, g.in_cols, g.in_depth, true);
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < size; ++i) {
      const double d = static_cast<double>(out[0][i]) - ref[i];
      diff += d * d;
      norm += ref[i] * ref[i];
    }
    const double err = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
    EXPECT(err <= Tolerance<T>(),
           "%s %s %s %s grad N=%lld %lldx%lldx%lld k=%lld s=%lld threads=%d seed=%llu: rel err %.3g",
           cpu::IsaName(cpu::ActiveIsa()), TypeName<T>(), nchw ? "NCHW" : "NHWC",
           input_grad ? "input" : "filter", (long long)g.batch, (long long)g.in_rows,
           (long long)g.in_cols, (long long)g.in_depth, (long long)g.filter_rows,
           (long long)g.stride_rows, threads, (unsigned long long)seed, err);
  }
  return peak;
}

template <typename T>
void CheckAllLayouts(uint64_t seed) {
  for (DataFormat f : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    // Small, ragged channel counts (transpose and conversion tails).
    CheckGradients<T>(Geometry(false, 3, 9, 7, 5, 19, 3, 2, 1, f), seed, 2, true);
    CheckGradients<T>(Geometry(true, 1, 17, 18, 33, 2, 3, 1, 1, f), seed + 1, 1, true);
    // Several chunks (4 MiB of buffers each): ~1.8-1.9 MiB of float buffers per
    // image, odd batch 5 -> 2+2+1 images (double: 5 chunks of 1).
    CheckGradients<T>(Geometry(true, 5, 64, 64, 56, 1, 3, 1, 1, f), seed + 2, 2, true);
    CheckGradients<T>(Geometry(false, 5, 60, 60, 128, 8, 1, 1, 0, f), seed + 3, 2, true);
    // NCHW conv2d filter gradient on x as it is (AVX-512, Cout in whole
    // vectors): strided, a 3-channel stem-like 7x7, and dy chunks of 2 MiB
    // (float: 3 + 2 images, double: 5 chunks of 1).
    CheckGradients<T>(Geometry(false, 5, 21, 19, 7, 32, 3, 2, 1, f), seed + 7, 2, true);
    CheckGradients<T>(Geometry(false, 2, 30, 27, 3, 64, 7, 2, 3, f), seed + 8, 2, true);
    CheckGradients<T>(Geometry(false, 5, 32, 32, 5, 144, 3, 1, 1, f), seed + 9, 2, true);
    // 1x1 NCHW filter gradient in slices of dW columns (Cout > Cin), ragged.
    CheckGradients<T>(Geometry(false, 3, 9, 11, 24, 80, 1, 1, 0, f), seed + 6, 2, true);
    // Depthwise NCHW channel blocks: small planes, several images and a ragged
    // last block per unit (input: one block of all 40 channels; filter: 16+16+8).
    CheckGradients<T>(Geometry(true, 3, 7, 9, 40, 1, 3, 2, 1, f), seed + 4, 2, true);
    CheckGradients<T>(Geometry(true, 2, 5, 6, 20, 1, 5, 1, 2, f), seed + 5, 1, true);
  }
}

// Peak scratch of both gradients of one large-ish layer vs the bound.
// Many threads: per-thread buffers (depthwise NCHW channel blocks of 256x256
// planes) must not add up past it either.
template <typename T>
void CheckScratchBound(bool depthwise, DataFormat f, int threads = 2) {
  const ConvGeometry g = threads > 2     ? Geometry(true, 2, 256, 256, 48, 1, 3, 1, 1, f)
                         : depthwise     ? Geometry(true, 8, 112, 112, 96, 1, 3, 2, 1, f)
                                         : Geometry(false, 8, 56, 56, 128, 128, 3, 1, 1, f);
  const int64_t peak = CheckGradients<T>(g, 7, threads, false);
  const int64_t out_bytes = std::max(g.input_elements, g.filter_elements) * int64_t(sizeof(T));
  const int64_t bound = std::max<int64_t>(int64_t{32} << 20, out_bytes);
  std::printf("scratch %-9s %s %s, %d threads: peak %.1f MiB (bound %.1f MiB)\n", TypeName<T>(),
              f == DataFormat::kNCHW ? "NCHW" : "NHWC", depthwise ? "depthwise" : "conv2d", threads,
              peak / 1048576.0, bound / 1048576.0);
  EXPECT(peak <= bound, "%s scratch peak %lld > bound %lld", TypeName<T>(), (long long)peak,
         (long long)bound);
}

}  // namespace

int main() {
  const cpu::Isa selected = cpu::ActiveIsa();
  for (int level = 0; level < cpu::kNumIsas; ++level) {
    const cpu::Isa isa = static_cast<cpu::Isa>(level);
    if (isa > cpu::BestSupportedIsa()) {
      std::printf("isa %s: not on this CPU, skipped\n", cpu::IsaName(isa));
      continue;
    }
    cpu::SetActiveIsa(isa);
    const int before = failures;
    std::mt19937_64 rng(20261130);
    CheckConversions<Eigen::half>(rng);
    CheckConversions<Eigen::bfloat16>(rng);
    CheckTranspose<float, float>(rng);
    CheckTranspose<double, double>(rng);
    CheckTranspose<Eigen::half, float>(rng);
    CheckTranspose<Eigen::bfloat16, float>(rng);
    CheckTranspose<float, Eigen::half>(rng);
    CheckTranspose<float, Eigen::bfloat16>(rng);
    CheckAllLayouts<float>(100);
    CheckAllLayouts<double>(200);
    CheckAllLayouts<Eigen::half>(300);
    CheckAllLayouts<Eigen::bfloat16>(400);
    std::printf("isa %s: %d failed\n", cpu::IsaName(isa), failures - before);
  }
  cpu::SetActiveIsa(selected);
  for (bool depthwise : {true, false}) {
    for (DataFormat f : {DataFormat::kNHWC, DataFormat::kNCHW}) {
      CheckScratchBound<float>(depthwise, f);
      CheckScratchBound<Eigen::bfloat16>(depthwise, f);
      CheckScratchBound<Eigen::half>(depthwise, f);
      CheckScratchBound<double>(depthwise, f);
      if (depthwise && f == DataFormat::kNCHW) CheckScratchBound<float>(depthwise, f, 16);
    }
  }
  std::printf("%s (%d failures)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
