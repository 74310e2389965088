// Standalone test of the depthwise CPU kernels (no TensorFlow): random
// geometries (strides, dilations, asymmetric pads, multipliers) against the
// naive reference, outputs pre-filled with NaN, run on a real thread pool
// twice with different splits to check the result is bitwise reproducible.
// Ends with a quick single-thread timing (informational, not a test).
//
// Build: g++ -std=c++17 -O2 -I. -I<tf include> tests/core/depthwise_cpu_test.cc
//        tf_ops/cpu/depthwise/nhwc.cc -o /tmp/depthwise_cpu_test -pthread
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/core/naive_reference.h"
#include "tf_ops/cpu/isa.h"
#include "tf_ops/cpu/engine.h"
#include "tf_ops/cpu/kernel_table.h"
#include "tf_ops/core/scratch.h"

namespace tcb = tf_conv_backprop;

namespace {

// A CpuContext whose parallel_for hands out chunks of `chunk` units (0: one
// even chunk per thread) round-robin to num_threads std::threads.
tcb::CpuContext ThreadedContext(int num_threads, int64_t chunk) {
  tcb::CpuContext ctx;
  ctx.num_threads = num_threads;
  ctx.parallel_for = [num_threads, chunk](int64_t total, int64_t,
                                          const tcb::CpuContext::Range& fn) {
    const int64_t step = chunk > 0 ? chunk : (total + num_threads - 1) / num_threads;
    std::vector<std::thread> threads;
    for (int t = 0; t < num_threads; ++t) {
      threads.emplace_back([=, &fn] {
        for (int64_t b = t * step; b < total; b += num_threads * step) {
          fn(b, std::min(total, b + step));
        }
      });
    }
    for (auto& th : threads) th.join();
  };
  return ctx;
}

tcb::ConvGeometry MakeGeometry(int64_t n, int64_t h, int64_t w, int64_t c, int64_t kh, int64_t kw,
                               int64_t m, int64_t sr, int64_t sc, int64_t dr, int64_t dc,
                               int64_t pt, int64_t pb, int64_t pl, int64_t pr) {
  tcb::ConvGeometry g;
  g.batch = n;
  g.in_rows = h;
  g.in_cols = w;
  g.in_depth = c;
  g.filter_rows = kh;
  g.filter_cols = kw;
  g.depth_multiplier = m;
  g.out_depth = c * m;
  g.stride_rows = sr;
  g.stride_cols = sc;
  g.dilation_rows = dr;
  g.dilation_cols = dc;
  g.pad_top = pt;
  g.pad_bottom = pb;
  g.pad_left = pl;
  g.pad_right = pr;
  g.depthwise = true;
  g.out_rows = (h + pt + pb - g.eff_filter_rows()) / sr + 1;
  g.out_cols = (w + pl + pr - g.eff_filter_cols()) / sc + 1;
  g.input_elements = n * h * w * c;
  g.filter_elements = kh * kw * c * m;
  g.out_backprop_elements = n * g.out_rows * g.out_cols * g.out_depth;
  return g;
}

std::string Describe(const tcb::ConvGeometry& g) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "N%lld H%lld W%lld C%lld M%lld K%lldx%lld s%lld,%lld d%lld,%lld pads t%lld b%lld "
                "l%lld r%lld out %lldx%lld",
                (long long)g.batch, (long long)g.in_rows, (long long)g.in_cols,
                (long long)g.in_depth, (long long)g.depth_multiplier, (long long)g.filter_rows,
                (long long)g.filter_cols, (long long)g.stride_rows, (long long)g.stride_cols,
                (long long)g.dilation_rows, (long long)g.dilation_cols, (long long)g.pad_top,
                (long long)g.pad_bottom, (long long)g.pad_left, (long long)g.pad_right,
                (long long)g.out_rows, (long long)g.out_cols);
  return buf;
}

template <typename A>
std::vector<A> RandomVector(int64_t size, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<A> v(size);
  for (auto& x : v) x = static_cast<A>(dist(rng));
  return v;
}

// ||a - b|| / ||b||; an all-zero reference requires an all-zero result. NaN propagates.
template <typename Vec>
double RelativeErrorOf(const Vec& a, const std::vector<double>& b) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    diff += d * d;
    ref += b[i] * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), std::numeric_limits<double>::min());
}

template <typename A>
void Run(bool input_grad, const tcb::CpuContext& ctx, const tcb::ConvGeometry& g, const A* x_or_w,
         const A* dy, A* out) {
  if (input_grad) {
    (void)tcb::GradientCpu<A>(tf_conv_backprop::OpKind::kDepthwiseBackpropInput, ctx, g, x_or_w, dy, out);
  } else {
    (void)tcb::GradientCpu<A>(tf_conv_backprop::OpKind::kDepthwiseBackpropFilter, ctx, g, x_or_w, dy, out);
  }
}

// One kernel, one dtype, one geometry: checks accuracy, coverage and that two
// runs with differently split pools agree bit for bit. Returns false on failure.
template <typename A>
bool Check(bool input_grad, const tcb::ConvGeometry& g, int num_threads, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t operand_size = input_grad ? g.filter_elements : g.input_elements;
  const std::vector<A> x_or_w = RandomVector<A>(operand_size, rng);
  const std::vector<A> dy = RandomVector<A>(g.out_backprop_elements, rng);
  const int64_t out_size = input_grad ? g.input_elements : g.filter_elements;
  const std::vector<double> ref = tcb::naive::Gradient(g, input_grad, x_or_w.data(), dy.data());

  // 64-byte aligned like TF's buffers, so the streaming-store path can run.
  tcb::ScratchVector<A> out1(out_size, std::numeric_limits<A>::quiet_NaN());
  tcb::ScratchVector<A> out2(out_size, std::numeric_limits<A>::quiet_NaN());
  Run<A>(input_grad, ThreadedContext(num_threads, 0), g, x_or_w.data(), dy.data(), out1.data());
  Run<A>(input_grad, ThreadedContext(num_threads, 1), g, x_or_w.data(), dy.data(), out2.data());

  const double tol = sizeof(A) == 4 ? 1e-5 : 1e-12;
  const double err = RelativeErrorOf(out1, ref);
  const bool same = std::memcmp(out1.data(), out2.data(), out_size * sizeof(A)) == 0;
  if (err <= tol && same) return true;
  std::printf("FAIL %s %s threads=%d seed=%llu: %s rel_err=%g (tol %g)%s\n",
              input_grad ? "DI" : "DF", sizeof(A) == 4 ? "float" : "double", num_threads,
              (unsigned long long)seed, Describe(g).c_str(), err, tol,
              same ? "" : " runs differ bitwise");
  return false;
}

// [n][rows*cols][c] <-> [n][c][rows*cols].
template <typename A>
std::vector<A> NhwcToNchw(const std::vector<A>& v, int64_t n, int64_t pixels, int64_t c) {
  std::vector<A> out(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t k = 0; k < c; ++k) out[(i * c + k) * pixels + p] = v[(i * pixels + p) * c + k];
  return out;
}
template <typename A>
std::vector<A> NchwToNhwc(const A* v, int64_t n, int64_t pixels, int64_t c) {
  std::vector<A> out(n * pixels * c);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t k = 0; k < c; ++k) out[(i * pixels + p) * c + k] = v[(i * c + k) * pixels + p];
  return out;
}

// The NCHW kernels on the same data as Check, transposed; also bitwise equal
// under two schedules. They must accept every geometry here (finite filter,
// small planes).
template <typename A>
bool CheckNchw(bool input_grad, const tcb::ConvGeometry& nhwc, int num_threads, uint64_t seed) {
  std::mt19937_64 rng(seed);
  tcb::ConvGeometry g = nhwc;
  g.data_format = tcb::DataFormat::kNCHW;
  const int64_t in_pixels = g.in_rows * g.in_cols, out_pixels = g.out_rows * g.out_cols;
  const int64_t operand_size = input_grad ? g.filter_elements : g.input_elements;
  const std::vector<A> x_or_w = RandomVector<A>(operand_size, rng);
  const std::vector<A> dy = RandomVector<A>(g.out_backprop_elements, rng);
  const std::vector<double> ref = tcb::naive::Gradient(nhwc, input_grad, x_or_w.data(), dy.data());
  const std::vector<A> operand =
      input_grad ? x_or_w : NhwcToNchw(x_or_w, g.batch, in_pixels, g.in_depth);
  const std::vector<A> dy_nchw = NhwcToNchw(dy, g.batch, out_pixels, g.out_depth);
  const int64_t out_size = input_grad ? g.input_elements : g.filter_elements;
  tcb::ScratchVector<A> out1(out_size, std::numeric_limits<A>::quiet_NaN());
  tcb::ScratchVector<A> out2(out_size, std::numeric_limits<A>::quiet_NaN());
  bool applied = true;
  for (int run = 0; run < 2; ++run) {
    const tcb::CpuContext ctx = ThreadedContext(num_threads, run);
    A* out = run == 0 ? out1.data() : out2.data();
    applied &= input_grad
                   ? tcb::GradientCpu<A>(tf_conv_backprop::OpKind::kDepthwiseBackpropInput, ctx, g, operand.data(), dy_nchw.data(), out).ok()
                   : tcb::GradientCpu<A>(tf_conv_backprop::OpKind::kDepthwiseBackpropFilter, ctx, g, operand.data(), dy_nchw.data(), out).ok();
  }
  const std::vector<A> result = input_grad ? NchwToNhwc(out1.data(), g.batch, in_pixels, g.in_depth)
                                           : std::vector<A>(out1.begin(), out1.end());
  const double tol = sizeof(A) == 4 ? 1e-5 : 1e-12;
  const double err = applied ? RelativeErrorOf(result, ref) : 1.0;
  const bool same = std::memcmp(out1.data(), out2.data(), out_size * sizeof(A)) == 0;
  if (applied && err <= tol && same) return true;
  std::printf("FAIL NCHW %s %s threads=%d seed=%llu: %s rel_err=%g (tol %g)%s%s\n",
              input_grad ? "DI" : "DF", sizeof(A) == 4 ? "float" : "double", num_threads,
              (unsigned long long)seed, Describe(g).c_str(), err, tol,
              same ? "" : " runs differ bitwise", applied ? "" : " (kernel declined)");
  return false;
}

// Infinities in dy's border columns: the NCHW filter gradient must not pair
// them with the zeros outside the image (0 * inf = NaN where TF has no term).
template <typename A>
bool CheckNchwInfiniteDy(int64_t stride) {
  // Multiplier 2: the planar NCHW kernel, which masks the products outside the image.
  const tcb::ConvGeometry nhwc = MakeGeometry(2, 9, 21, 5, 3, 3, 2, stride, stride, 1, 1, 1, 1, 1, 1);
  tcb::ConvGeometry g = nhwc;
  g.data_format = tcb::DataFormat::kNCHW;
  std::mt19937_64 rng(stride);
  const std::vector<A> x = RandomVector<A>(g.input_elements, rng);
  std::vector<A> dy = RandomVector<A>(g.out_backprop_elements, rng);
  const int64_t C = g.out_depth, OW = g.out_cols;
  dy[(3 * OW + 0) * C + 1] = std::numeric_limits<A>::infinity();            // n 0, oh 3, left column
  dy[(4 * OW + OW - 1) * C + 2] = -std::numeric_limits<A>::infinity();      // n 0, oh 4, right column
  const std::vector<double> ref = tcb::naive::Gradient(nhwc, false, x.data(), dy.data());
  const int64_t in_pixels = g.in_rows * g.in_cols, out_pixels = g.out_rows * g.out_cols;
  const std::vector<A> x_nchw = NhwcToNchw(x, g.batch, in_pixels, g.in_depth);
  const std::vector<A> dy_nchw = NhwcToNchw(dy, g.batch, out_pixels, C);
  std::vector<A> out(g.filter_elements, A(0));
  const bool applied = tcb::GradientCpu<A>(tf_conv_backprop::OpKind::kDepthwiseBackpropFilter, ThreadedContext(2, 0), g, x_nchw.data(),
                                                           dy_nchw.data(), out.data()).ok();
  int64_t bad = applied ? 0 : 1;
  for (size_t i = 0; i < out.size(); ++i) {
    const double o = out[i], r = ref[i];
    bad += std::isfinite(r) ? !(std::abs(o - r) <= 1e-4 * (1 + std::abs(r)))
                            : (std::isnan(r) ? !std::isnan(o) : o != r);
  }
  if (bad == 0) return true;
  std::printf("FAIL NCHW DF %s with infinite dy at the border, stride %lld: %lld elements differ\n",
              sizeof(A) == 4 ? "float" : "double", (long long)stride, (long long)bad);
  return false;
}

// Infinities in the filter: the NCHW input gradient must not pair them with
// dy columns or rows outside dy (0 * inf = NaN where TF has no term), and must
// still give inf (or NaN where +inf and -inf meet) where they do meet dy.
template <typename A>
bool CheckNchwInfiniteFilter(int64_t stride, int64_t k) {
  const int64_t pad = (k - 1) / 2;
  const tcb::ConvGeometry nhwc = MakeGeometry(2, 9, 21, 5, k, k, 1, stride, stride, 1, 1, pad, pad, pad, pad);
  tcb::ConvGeometry g = nhwc;
  g.data_format = tcb::DataFormat::kNCHW;
  std::mt19937_64 rng(stride * 10 + k);
  std::vector<A> w = RandomVector<A>(g.filter_elements, rng);
  const std::vector<A> dy = RandomVector<A>(g.out_backprop_elements, rng);
  const int64_t C = g.in_depth;
  w[0 * C + 1] = std::numeric_limits<A>::infinity();                // tap (0, 0), channel 1
  w[(k * k - 1) * C + 2] = -std::numeric_limits<A>::infinity();     // last tap, channel 2
  w[(k * k - 1) * C + 3] = std::numeric_limits<A>::infinity();      // channel 3: +inf and -inf meet
  w[0 * C + 3] = -std::numeric_limits<A>::infinity();
  const std::vector<double> ref = tcb::naive::Gradient(nhwc, true, w.data(), dy.data());
  const int64_t in_pixels = g.in_rows * g.in_cols, out_pixels = g.out_rows * g.out_cols;
  const std::vector<A> dy_nchw = NhwcToNchw(dy, g.batch, out_pixels, C);
  std::vector<A> out(g.input_elements, A(0));
  const bool applied = tcb::GradientCpu<A>(tf_conv_backprop::OpKind::kDepthwiseBackpropInput, ThreadedContext(2, 0), g, w.data(), dy_nchw.data(),
                                                          out.data()).ok();
  const std::vector<A> result = NchwToNhwc(out.data(), g.batch, in_pixels, C);
  int64_t bad = 0;
  for (size_t i = 0; applied && i < result.size(); ++i) {
    const double o = result[i], r = ref[i];
    bad += std::isfinite(r) ? !(std::abs(o - r) <= 1e-4 * (1 + std::abs(r)))
                            : (std::isnan(r) ? !std::isnan(o) : o != r);
  }
  // Declining (the general planar kernel does for non-finite filters) is allowed:
  // the front end then transposes to NHWC.
  if (bad == 0) return true;
  std::printf("FAIL NCHW DI %s with infinite filter taps, stride %lld, %lldx%lld: %lld elements differ\n",
              sizeof(A) == 4 ? "float" : "double", (long long)stride, (long long)k, (long long)k, (long long)bad);
  return false;
}

tcb::ConvGeometry RandomGeometry(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (;;) {
    const int64_t h = pick(1, 12), w = pick(1, 12), kh = pick(1, 5), kw = pick(1, 5);
    const int64_t dr = pick(1, 3), dc = pick(1, 3);
    const int64_t pt = pick(0, 4), pb = pick(0, 4), pl = pick(0, 4), pr = pick(0, 4);
    // At least one output pixel in each dimension.
    if (h + pt + pb < (kh - 1) * dr + 1 || w + pl + pr < (kw - 1) * dc + 1) continue;
    return MakeGeometry(pick(1, 3), h, w, pick(1, 40), kh, kw, pick(1, 3), pick(1, 3), pick(1, 3),
                        dr, dc, pt, pb, pl, pr);
  }
}

// Fastest of `reps` runs, in ms: the least disturbed by other load on the machine.
template <typename Fn>
double TimeMs(int reps, Fn fn) {
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

void Benchmark() {
  const tcb::ConvGeometry g = MakeGeometry(8, 56, 56, 144, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  std::mt19937_64 rng(1);
  const std::vector<float> x = RandomVector<float>(g.input_elements, rng);
  const std::vector<float> w = RandomVector<float>(g.filter_elements, rng);
  const std::vector<float> dy = RandomVector<float>(g.out_backprop_elements, rng);
  std::vector<float> dx(g.input_elements), dw(g.filter_elements);
  const tcb::CpuContext ctx;  // single thread
  const double di = TimeMs(15, [&] {
    (void)tcb::GradientCpu<float>(tf_conv_backprop::OpKind::kDepthwiseBackpropInput, ctx, g, w.data(), dy.data(), dx.data());
  });
  const double df = TimeMs(15, [&] {
    (void)tcb::GradientCpu<float>(tf_conv_backprop::OpKind::kDepthwiseBackpropFilter, ctx, g, x.data(), dy.data(), dw.data());
  });
  // Compulsory traffic: DI reads dy and writes dx; DF reads x and dy (filters are tiny).
  const double bytes = 4.0 * (g.input_elements + g.out_backprop_elements);
  std::printf("timing (1 thread, float, %s): DI %.2f ms %.1f GB/s, DF %.2f ms %.1f GB/s\n",
              Describe(g).c_str(), di, bytes / di / 1e6, df, bytes / df / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t base_seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20240601u;
  const int kConfigs = 300;
  int passed = 0, failed = 0;
  // Every instruction-set variant this CPU can run, each against the reference; the
  // timing after it uses the one the environment selects (TF_CONV_BACKPROP_ISA).
  const tcb::cpu::Isa selected = tcb::cpu::ActiveIsa();
  for (int level = 0; level < tcb::cpu::kNumIsas; ++level) {
    const tcb::cpu::Isa isa = static_cast<tcb::cpu::Isa>(level);
    if (isa > tcb::cpu::BestSupportedIsa()) {
      std::printf("isa %s: not on this CPU, skipped\n", tcb::cpu::IsaName(isa));
      continue;
    }
    tcb::cpu::SetActiveIsa(isa);
    const int failed_before = failed;
    for (int i = 0; i < kConfigs; ++i) {
      const uint64_t seed = base_seed * 1000003u + i;
      std::mt19937_64 geo_rng(seed);
      const tcb::ConvGeometry g = RandomGeometry(geo_rng);
      const int threads = 2 + i % 2;
      for (bool input_grad : {true, false}) {
        (Check<float>(input_grad, g, threads, seed) ? passed : failed)++;
        (Check<double>(input_grad, g, threads, seed) ? passed : failed)++;
        (CheckNchw<float>(input_grad, g, threads, seed) ? passed : failed)++;
        (CheckNchw<double>(input_grad, g, threads, seed) ? passed : failed)++;
      }
    }
    // Targeted: the register-blocked paths (3x3 / 5x5 filter gradient, 8-pixel
    // input-gradient blocks) with rows wide enough for full blocks plus edges,
    // odd channel counts (vector + lane tails), multipliers 1-3, strides 1-2.
    int index = 0;
    for (int64_t k : {3, 5}) {
      for (int64_t m : {1, 2, 3}) {
        for (int64_t s : {1, 2}) {
          for (int64_t c : {1, 17, 40}) {
            const uint64_t seed = base_seed + 7919u * ++index;
            const int64_t d = index % 3 == 0 ? 2 : 1, w = 23 + index % 5, pad = (k - 1) * d / 2;
            const tcb::ConvGeometry g = MakeGeometry(2, 6 + index % 4, w, c, k, k, m, s, s, d, d,
                                                     pad, pad + index % 2, pad, pad);
            for (bool input_grad : {true, false}) {
              (Check<float>(input_grad, g, 2, seed) ? passed : failed)++;
              (Check<double>(input_grad, g, 2, seed) ? passed : failed)++;
              (CheckNchw<float>(input_grad, g, 2, seed) ? passed : failed)++;
              (CheckNchw<double>(input_grad, g, 2, seed) ? passed : failed)++;
            }
          }
        }
      }
    }
    for (int64_t stride : {1, 2}) {
      (CheckNchwInfiniteDy<float>(stride) ? passed : failed)++;
      (CheckNchwInfiniteDy<double>(stride) ? passed : failed)++;
      for (int64_t k : {3, 5}) {
        (CheckNchwInfiniteFilter<float>(stride, k) ? passed : failed)++;
        (CheckNchwInfiniteFilter<double>(stride, k) ? passed : failed)++;
      }
    }
    // Targeted: the NCHW register kernels (multiplier 1, 3x3 / 5x5, strides
    // <= 2 in either dimension): flat planes (stride 1, as many dx as dy
    // columns) and per-row kernels, widths around the 8- and 16-lane vectors,
    // SAME, VALID and lopsided padding, dilations.
    for (int64_t k : {3, 5}) {
      for (int64_t sr : {1, 2}) {
        for (int64_t sc : {1, 2}) {
          for (int64_t d : {1, 2}) {
            for (int64_t w : {1, 7, 16, 17, 33}) {
              for (int pad_kind = 0; pad_kind < 3; ++pad_kind) {
                const uint64_t seed = base_seed + 104729u * ++index;
                const int64_t full = (k - 1) * d;
                // SAME-like, VALID (when the image is large enough), lopsided.
                int64_t pt = full / 2, pb = full - full / 2, pl = full / 2, pr = full - full / 2;
                if (pad_kind == 1) pt = pb = pl = pr = 0;
                if (pad_kind == 2) pt = full, pb = 0, pl = 0, pr = full;
                const int64_t h = 3 + index % 9;
                if (h + pt + pb < full + 1 || w + pl + pr < full + 1) continue;
                const tcb::ConvGeometry g = MakeGeometry(2, h, w, 3, k, k, 1, sr, sc, d, d, pt, pb, pl, pr);
                for (bool input_grad : {true, false}) {
                  (CheckNchw<float>(input_grad, g, 2, seed) ? passed : failed)++;
                  (CheckNchw<double>(input_grad, g, 2, seed) ? passed : failed)++;
                }
              }
            }
          }
        }
      }
    }
    // NCHW input gradients over the streaming threshold: planes that are whole
    // cache lines (streamed in place), planes that are not (staged), strided.
    for (const tcb::ConvGeometry& g : {MakeGeometry(2, 64, 64, 80, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
                                       MakeGeometry(2, 61, 59, 80, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
                                       MakeGeometry(2, 64, 64, 80, 3, 3, 1, 2, 2, 1, 1, 0, 1, 0, 1)}) {
      (CheckNchw<float>(true, g, 2, base_seed + 29) ? passed : failed)++;
      (CheckNchw<double>(true, g, 2, base_seed + 29) ? passed : failed)++;
    }
    // dx over the streaming-store threshold (2 MiB), channels in whole vectors: the
    // rectangles (stride 1) and the residue-class rows (stride 2).
    for (const tcb::ConvGeometry& g : {MakeGeometry(2, 131, 129, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
                                       MakeGeometry(2, 131, 129, 64, 3, 3, 1, 2, 2, 1, 1, 0, 1, 0, 1)}) {
      (Check<float>(true, g, 2, base_seed + 17) ? passed : failed)++;
      (Check<double>(true, g, 2, base_seed + 17) ? passed : failed)++;
    }
    std::printf("isa %s: %d failed\n", tcb::cpu::IsaName(isa), failed - failed_before);
  }
  tcb::cpu::SetActiveIsa(selected);
  std::printf("%d passed, %d failed\n", passed, failed);
  if (failed) {
    std::printf("base seed %llu (pass it as argv[1] to rerun)\n", (unsigned long long)base_seed);
  }
  Benchmark();
  return failed == 0 ? 0 : 1;
}
