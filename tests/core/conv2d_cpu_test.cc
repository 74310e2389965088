// Standalone test of the dense conv2d gradient kernels (no TensorFlow): random
// geometries (strides, dilations, asymmetric and oversized pads, 1x1, tiny
// outputs, a few big enough for several col tiles), float and double, 1-3
// threads, outputs pre-filled with NaN, compared with the naive reference; with
// 2-3 threads each kernel runs twice under different parallel_for schedules and
// the results must be bitwise equal.
//
// `conv2d_cpu_test --bench` also times one layer (not a test).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <Eigen/Core>

#include "tests/core/naive_reference.h"
#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/isa.h"
#include "tf_ops/cpu/engine.h"
#include "tf_ops/cpu/kernel_table.h"
#include "tf_ops/cpu/select.h"

namespace {

using tf_conv_backprop::ConvGeometry;
using tf_conv_backprop::CpuContext;
using tf_conv_backprop::GradientCpu;
namespace cpu = tf_conv_backprop::cpu;
namespace naive = tf_conv_backprop::naive;

constexpr uint64_t kBaseSeed = 20240611;
constexpr int kConfigs = 300;

// parallel_for on fresh std::threads. `dynamic` hands out single units from a
// shared counter, otherwise each thread gets one contiguous chunk: the same
// kernel sees two different splits of every range.
CpuContext MakeContext(int threads, bool dynamic) {
  CpuContext ctx;
  ctx.num_threads = threads;
  if (threads <= 1) return ctx;
  ctx.parallel_for = [threads, dynamic](int64_t total, int64_t, const CpuContext::Range& fn) {
    std::vector<std::thread> pool;
    std::atomic<int64_t> next{0};
    for (int t = 0; t < threads; ++t) {
      if (dynamic) {
        pool.emplace_back([&] {
          for (int64_t i = next.fetch_add(1); i < total; i = next.fetch_add(1)) fn(i, i + 1);
        });
      } else {
        const int64_t b = total * t / threads, e = total * (t + 1) / threads;
        if (b < e) pool.emplace_back([&fn, b, e] { fn(b, e); });
      }
    }
    for (std::thread& th : pool) th.join();
  };
  return ctx;
}

// TF's output size for explicit pads; false where the dilated filter does not fit.
bool MakeGeometry(int64_t batch, int64_t in_rows, int64_t in_cols, int64_t cin, int64_t cout,
                  int64_t kh, int64_t kw, int64_t sr, int64_t sc, int64_t dr, int64_t dc,
                  int64_t pt, int64_t pb, int64_t pl, int64_t pr, ConvGeometry* g) {
  *g = ConvGeometry();
  g->batch = batch;
  g->in_rows = in_rows, g->in_cols = in_cols, g->in_depth = cin;
  g->filter_rows = kh, g->filter_cols = kw;
  g->out_depth = cout;
  g->stride_rows = sr, g->stride_cols = sc;
  g->dilation_rows = dr, g->dilation_cols = dc;
  g->pad_top = pt, g->pad_bottom = pb, g->pad_left = pl, g->pad_right = pr;
  const int64_t span_rows = in_rows + pt + pb - g->eff_filter_rows();
  const int64_t span_cols = in_cols + pl + pr - g->eff_filter_cols();
  if (span_rows < 0 || span_cols < 0) return false;
  g->out_rows = span_rows / sr + 1;
  g->out_cols = span_cols / sc + 1;
  g->input_elements = batch * in_rows * in_cols * cin;
  g->filter_elements = kh * kw * cin * cout;
  g->out_backprop_elements = batch * g->out_rows * g->out_cols * cout;
  return true;
}

// Config i: every 10th a 1x1 stride-1 unpadded filter (the pure-GEMM path),
// every 10th+1 a tiny image with large pads (small outputs, taps that never
// land), every 50th+2 one big enough for several col tiles and shards with
// several tiles, every 50th+3 and +4 a filter over 1 MiB on small images; the
// rest fully random.
ConvGeometry RandomGeometry(int i, std::mt19937_64& rng) {
  auto pick = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  ConvGeometry g;
  for (;;) {
    bool ok;
    if (i % 10 == 0) {
      ok = MakeGeometry(pick(1, 3), pick(1, 12), pick(1, 12), pick(1, 20), pick(1, 20), 1, 1, 1, 1,
                        pick(1, 3), pick(1, 3), 0, 0, 0, 0, &g);
    } else if (i % 10 == 1) {
      ok = MakeGeometry(pick(1, 3), pick(1, 4), pick(1, 4), pick(1, 20), pick(1, 20), pick(1, 5),
                        pick(1, 5), pick(1, 3), pick(1, 3), pick(1, 3), pick(1, 3), pick(2, 4),
                        pick(2, 4), pick(2, 4), pick(2, 4), &g);
    } else if (i % 10 == 5) {
      // Input channels in whole 16-lane vectors: the AVX-512 direct input-gradient
      // kernel (every tile width, padded and unpadded columns, strides 1-3).
      const int64_t cin = 16 * pick(1, 4) * (pick(0, 3) == 0 ? 2 : 1);
      const int64_t cout = pick(0, 1) ? 16 * pick(1, 3) : pick(1, 24);
      const int64_t stride = pick(0, 2) == 0 ? pick(2, 3) : 1;  // column classes
      ok = MakeGeometry(pick(1, 3), pick(1, 18), pick(1, 18), cin, cout, pick(1, 4),
                        pick(1, 4), stride, pick(1, stride), pick(1, 3), pick(1, 3), pick(0, 3),
                        pick(0, 3), pick(0, 3), pick(0, 3), &g);
    } else if (i % 10 == 6) {
      // Output channels in whole vectors, any stride: the AVX-512 direct
      // filter-gradient kernel (every tile height, clipped pixel runs).
      const int64_t cout = 16 * pick(1, 4) * (pick(0, 3) == 0 ? 2 : 1);
      ok = MakeGeometry(pick(1, 3), pick(1, 16), pick(1, 16), pick(1, 40), cout, pick(1, 5),
                        pick(1, 5), pick(1, 3), pick(1, 3), pick(1, 3), pick(1, 3), pick(0, 4),
                        pick(0, 4), pick(0, 4), pick(0, 4), &g);
    } else if (i % 50 == 2) {
      ok = MakeGeometry(2, pick(24, 32), pick(24, 32), pick(40, 64), pick(16, 48), 3, 3,
                        pick(1, 2), 1, 1, pick(1, 2), 1, 1, 1, 1, &g);
    } else if (i % 50 == 8) {
      // dx past 1 MiB in whole vectors of channels: the direct input gradient streams
      // its stores (stride 1 or 2, padded columns or not).
      const int64_t stride = pick(1, 2);
      ok = MakeGeometry(2, pick(36, 44), pick(36, 44), 96 + 32 * pick(0, 1), 16 * pick(1, 2), 3, 3, stride,
                        stride, 1, 1, pick(0, 1), 1, pick(0, 1), 1, &g);
    } else if (i % 50 == 7) {
      // A filter whose 4-vector input-channel blocks outgrow L2 (taps x Cout >
      // 3072): the direct input gradient takes narrower tiles than Cin allows.
      ok = MakeGeometry(pick(1, 2), pick(3, 7), pick(3, 7), 64 * pick(1, 2), pick(350, 400), 3, 3,
                        1, 1, 1, 1, 1, 1, 1, 1, &g);
    } else if (i % 50 == 3 || i % 50 == 4) {
      // A filter over kSplitFilterBytes (1 MiB in float and double): the filter
      // gradient split by (tap, channel block); few pixels per image, so the
      // input gradient groups images into one GEMM.
      ok = MakeGeometry(pick(1, 5), pick(3, 7), pick(3, 7), pick(150, 170), pick(230, 260),
                        pick(2, 3), pick(2, 3), pick(1, 2), pick(1, 2), pick(1, 2), 1, pick(0, 2),
                        pick(0, 2), pick(0, 2), pick(0, 2), &g);
    } else {
      ok = MakeGeometry(pick(1, 3), pick(1, 16), pick(1, 16), pick(1, 20), pick(1, 20), pick(1, 5),
                        pick(1, 5), pick(1, 3), pick(1, 3), pick(1, 3), pick(1, 3), pick(0, 4),
                        pick(0, 4), pick(0, 4), pick(0, 4), &g);
    }
    if (ok) return g;
  }
}

std::string Describe(const ConvGeometry& g) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "N=%lld in=%lldx%lldx%lld filter=%lldx%lld out=%lldx%lldx%lld stride=%lld,%lld "
                "dilation=%lld,%lld pads(t,b,l,r)=%lld,%lld,%lld,%lld",
                (long long)g.batch, (long long)g.in_rows, (long long)g.in_cols,
                (long long)g.in_depth, (long long)g.filter_rows, (long long)g.filter_cols,
                (long long)g.out_rows, (long long)g.out_cols, (long long)g.out_depth,
                (long long)g.stride_rows, (long long)g.stride_cols, (long long)g.dilation_rows,
                (long long)g.dilation_cols, (long long)g.pad_top, (long long)g.pad_bottom,
                (long long)g.pad_left, (long long)g.pad_right);
  return buf;
}

// ||a - b|| / ||b||; NaN anywhere in a makes it NaN, which fails every check.
template <typename Vector>
double RelativeError(const Vector& a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    diff += d * d;
    norm += b[i] * b[i];
  }
  if (norm == 0) return diff == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff) / std::sqrt(norm);
}

struct Tally {
  int passed = 0, failed = 0;
};

// One op, one thread count: NaN-filled output, error vs reference, and with
// threads > 1 a second run under the other schedule that must match bitwise.
// Outputs are 64-byte aligned, as TensorFlow's are (the kernels stream their stores
// into large aligned outputs).
template <typename A, typename Kernel>
void Check(const char* op, const ConvGeometry& g, uint64_t seed, int threads, size_t size,
           const std::vector<double>& ref, Kernel kernel, Tally* tally) {
  const double tol = sizeof(A) == 4 ? 1e-5 : 1e-12;
  tf_conv_backprop::ScratchVector<A> out(size, std::numeric_limits<A>::quiet_NaN());
  kernel(MakeContext(threads, false), out.data());
  const double err = RelativeError(out, ref);
  bool ok = err <= tol;
  bool same = true;
  if (threads > 1) {
    tf_conv_backprop::ScratchVector<A> again(size, std::numeric_limits<A>::quiet_NaN());
    kernel(MakeContext(threads, true), again.data());
    same = std::memcmp(out.data(), again.data(), size * sizeof(A)) == 0;
    ok = ok && same;
  }
  if (ok) {
    ++tally->passed;
    return;
  }
  ++tally->failed;
  std::printf("FAIL %s<%s> seed=%llu threads=%d rel_err=%.3g (tol %.0e)%s\n  %s\n", op,
              sizeof(A) == 4 ? "float" : "double", (unsigned long long)seed, threads, err, tol,
              same ? "" : " not bitwise reproducible", Describe(g).c_str());
}

template <typename A>
void CheckConfig(const ConvGeometry& g, uint64_t seed, Tally* tally) {
  std::mt19937_64 rng(seed ^ (sizeof(A) == 4 ? 0x5eed : 0xd0b1e));
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  auto random_vector = [&](int64_t n) {
    std::vector<A> v(n);
    for (A& e : v) e = static_cast<A>(uniform(rng));
    return v;
  };
  const std::vector<A> x = random_vector(g.input_elements);
  const std::vector<A> w = random_vector(g.filter_elements);
  const std::vector<A> dy = random_vector(g.out_backprop_elements);
  const std::vector<double> ref_dx = naive::Gradient(g, true, w.data(), dy.data());
  const std::vector<double> ref_dw = naive::Gradient(g, false, x.data(), dy.data());
  for (int threads = 1; threads <= 3; ++threads) {
    Check<A>("Conv2DBackpropInputNhwc", g, seed, threads, g.input_elements, ref_dx,
             [&](const CpuContext& ctx, A* out) {
               (void)GradientCpu<A>(tf_conv_backprop::OpKind::kConv2DBackpropInput, ctx, g, w.data(), dy.data(), out);
             },
             tally);
    Check<A>("Conv2DBackpropFilterNhwc", g, seed, threads, g.filter_elements, ref_dw,
             [&](const CpuContext& ctx, A* out) {
               (void)GradientCpu<A>(tf_conv_backprop::OpKind::kConv2DBackpropFilter, ctx, g, x.data(), dy.data(), out);
             },
             tally);
  }
}

// Single-threaded and 2-thread GFLOP/s of both float kernels on one layer.
void Bench() {
  struct Layer {
    const char* name;
    int64_t n, hw, cin, cout, k, pad;
  };
  const Layer layers[] = {{"N=8 56x56 64->64 3x3 s1 SAME", 8, 56, 64, 64, 3, 1},
                          {"N=8 56x56 64->64 1x1 s1", 8, 56, 64, 64, 1, 0}};
  for (const Layer& l : layers) {
    ConvGeometry g;
    MakeGeometry(l.n, l.hw, l.hw, l.cin, l.cout, l.k, l.k, 1, 1, 1, 1, l.pad, l.pad, l.pad, l.pad,
                 &g);
    std::mt19937_64 rng(kBaseSeed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> x(g.input_elements), w(g.filter_elements), dy(g.out_backprop_elements);
    for (float& e : x) e = uniform(rng);
    for (float& e : w) e = uniform(rng);
    for (float& e : dy) e = uniform(rng);
    std::vector<float> dx(x.size()), dw(w.size());
    const double flops = 2.0 * g.batch * g.out_rows * g.out_cols * g.filter_rows * g.filter_cols *
                         g.in_depth * g.out_depth;
    for (int threads : {1, 2}) {
      const CpuContext ctx = MakeContext(threads, false);
      auto time = [&](auto fn) {
        fn();  // warm-up
        double best = 1e30;
        for (int rep = 0; rep < 5; ++rep) {
          const auto t0 = std::chrono::steady_clock::now();
          fn();
          best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                                    .count());
        }
        return best;
      };
      const double t_bi = time([&] {
        (void)GradientCpu<float>(tf_conv_backprop::OpKind::kConv2DBackpropInput, ctx, g, w.data(), dy.data(), dx.data());
      });
      const double t_bf = time([&] {
        (void)GradientCpu<float>(tf_conv_backprop::OpKind::kConv2DBackpropFilter, ctx, g, x.data(), dy.data(), dw.data());
      });
      std::printf("bench %s, %d thread(s): BI %.2f ms %.1f GFLOP/s, BF %.2f ms %.1f GFLOP/s\n",
                  l.name, threads, t_bi * 1e3, flops / t_bi * 1e-9, t_bf * 1e3,
                  flops / t_bf * 1e-9);
    }
  }
}

// bfloat16 through the engine, whichever variant it selects (the native
// vdpbf16ps kernels where the CPU and the shape allow, else float kernels on
// converted chunks): against the reference computed from the same bfloat16
// values, NaN-filled output, two splits of the same thread count bitwise equal.
void CheckBf16(bool input_grad, const ConvGeometry& g, uint64_t seed, Tally* tally) {
  using Bf16 = Eigen::bfloat16;
  std::mt19937_64 rng(seed ^ (input_grad ? 0xbf16 : 0xbf17));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<Bf16> operand(input_grad ? g.filter_elements : g.input_elements), dy(g.out_backprop_elements);
  for (Bf16& e : operand) e = Bf16(uniform(rng));
  for (Bf16& e : dy) e = Bf16(uniform(rng));
  std::vector<double> operand64(operand.begin(), operand.end()), dy64(dy.begin(), dy.end());
  const std::vector<double> ref = naive::Gradient(g, input_grad, operand64.data(), dy64.data());
  auto run = [&](const CpuContext& ctx, Bf16* out) {
    return (input_grad ? GradientCpu<Bf16>(tf_conv_backprop::OpKind::kConv2DBackpropInput, ctx, g, operand.data(), dy.data(), out)
                       : GradientCpu<Bf16>(tf_conv_backprop::OpKind::kConv2DBackpropFilter, ctx, g, operand.data(), dy.data(), out))
        .ok();
  };
  std::vector<Bf16> out1(input_grad ? g.input_elements : g.filter_elements,
                         Bf16(std::numeric_limits<float>::quiet_NaN()));
  std::vector<Bf16> out2 = out1;
  if (!run(MakeContext(2, false), out1.data())) return;
  const bool applied = run(MakeContext(2, true), out2.data());
  const double err = RelativeError(std::vector<double>(out1.begin(), out1.end()), ref);
  const bool same = applied && std::memcmp(out1.data(), out2.data(), out1.size() * sizeof(Bf16)) == 0;
  if (err <= 1e-2 && same) {
    ++tally->passed;
    return;
  }
  ++tally->failed;
  std::printf("FAIL Conv2DBackprop%sBf16Nhwc seed=%llu rel_err=%.3g%s\n  %s\n", input_grad ? "Input" : "Filter",
              (unsigned long long)seed, err, same ? "" : " not bitwise reproducible", Describe(g).c_str());
}

// A filter with one infinite tap: every dx element must be what summing only
// the taps that exist gives (TF's result), so no kernel may multiply padding
// zeros into the filter (0 * inf = NaN at the border). Grouped too: there the
// direct tiles that decline on it may be the only row that takes the call, and
// the engine must run it as dense slices instead.
template <typename A>
void CheckNonFiniteFilter(Tally* tally) {
  struct Shape {
    int64_t cin, groups;
  };
  for (const Shape sh : {Shape{16, 1}, Shape{64, 1}, Shape{16, 2}, Shape{64, 4}, Shape{32, 8}}) {
    const int64_t cin = sh.cin, cout = 16, cg = cin / sh.groups;
    ConvGeometry g;
    MakeGeometry(2, 6, 7, cin, cout, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, &g);
    g.groups = sh.groups;
    g.filter_elements = 3 * 3 * cg * cout;
    std::mt19937_64 rng(cin + sh.groups);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    std::vector<A> w(g.filter_elements), dy(g.out_backprop_elements);
    for (A& e : w) e = static_cast<A>(uniform(rng));
    for (A& e : dy) e = static_cast<A>(uniform(rng));
    w[(0 * 3 + 0) * cg * cout + 3 * cout + 5] = std::numeric_limits<A>::infinity();  // tap (0,0), ci 3
    const std::vector<double> ref = naive::Gradient(g, true, w.data(), dy.data());
    std::vector<A> out(g.input_elements, A(0));
    const tf_conv_backprop::Status status = GradientCpu<A>(tf_conv_backprop::OpKind::kConv2DBackpropInput, MakeContext(2, false), g,
                                         w.data(), dy.data(), out.data());
    int64_t bad = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const double o = out[i], r = ref[i];
      const bool same = std::isfinite(r) ? std::abs(o - r) <= 1e-4 * (1 + std::abs(r))
                                         : (std::isnan(r) ? std::isnan(o) : o == r);
      bad += !same;
    }
    if (status.ok() && bad == 0) {
      ++tally->passed;
    } else {
      ++tally->failed;
      std::printf("FAIL Conv2DBackpropInputNhwc<%s> infinite filter tap, cin=%lld groups=%lld: %s, %lld elements differ\n",
                  sizeof(A) == 4 ? "float" : "double", (long long)cin, (long long)sh.groups,
                  status.ok() ? "ok" : status.message.c_str(), (long long)bad);
    }
  }
}

// The bfloat16 filter gradient's pair kernel (AVX512_BF16) beyond the random
// shapes: geometries it cuts into several chunks (two images, then one; rows
// of one image, stride 2), and an inf in x or dy, where the zero columns and
// the odd pixel's zero would make 0 * inf = NaN: it must hand over to the
// widening tiles, leaving inf and NaN exactly where the reference has them.
void CheckBf16FilterPairs(Tally* tally) {
  using Bf16 = Eigen::bfloat16;
  struct Shape {
    const char* what;
    int64_t batch, rows, cols, sr;
    int x_inf, dy_inf;  // flat index of an inf, or -1
  };
  const Shape shapes[] = {{"chunks of whole images", 3, 100, 350, 1, -1, -1},
                          {"chunks of rows", 1, 120, 1500, 2, -1, -1},
                          // x column 6 of 7: read with the odd pixel's zero dy
                          {"inf in x", 2, 5, 7, 1, (1 * 7 + 6) * 16 + 3, -1},
                          // dy column 0: read with the left zero column of x
                          {"inf in dy", 2, 5, 7, 1, -1, (2 * 7 + 0) * 16 + 5}};
  for (const Shape& sh : shapes) {
    ConvGeometry g;
    MakeGeometry(sh.batch, sh.rows, sh.cols, 16, 16, 3, 3, sh.sr, 1, 1, 1, 1, 1, 1, 1, &g);
    std::mt19937_64 rng(sh.cols);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<Bf16> x(g.input_elements), dy(g.out_backprop_elements);
    for (Bf16& e : x) e = Bf16(uniform(rng));
    for (Bf16& e : dy) e = Bf16(uniform(rng));
    if (sh.x_inf >= 0) x[sh.x_inf] = Bf16(std::numeric_limits<float>::infinity());
    if (sh.dy_inf >= 0) dy[sh.dy_inf] = Bf16(std::numeric_limits<float>::infinity());
    std::vector<double> x64(x.begin(), x.end()), dy64(dy.begin(), dy.end());
    const std::vector<double> ref = naive::Gradient(g, false, x64.data(), dy64.data());
    std::vector<Bf16> out(g.filter_elements, Bf16(std::numeric_limits<float>::quiet_NaN()));
    if (!GradientCpu<Bf16>(tf_conv_backprop::OpKind::kConv2DBackpropFilter, MakeContext(2, false), g, x.data(), dy.data(), out.data()).ok()) continue;
    // The sanitizer build compiles the AVX-512 rows without AVX-512, so they are not in
    // its table: the call then runs the float front end, whose im2col columns multiply
    // the zero padding by the inf (not what this check is about).
    const char* ran = tf_conv_backprop_cpu_last_variant(static_cast<int>(tf_conv_backprop::OpKind::kConv2DBackpropFilter));
    if (std::strncmp(ran, "conv2d_filter_bf16", std::strlen("conv2d_filter_bf16")) != 0) continue;
    int64_t bad = 0, nonfinite = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const double o = static_cast<float>(out[i]), r = ref[i];
      nonfinite += !std::isfinite(r);
      bad += std::isfinite(r) ? !(std::abs(o - r) <= 2e-2 * (1 + std::abs(r)))  // NaN is bad
                              : !(std::isnan(r) ? std::isnan(o) : o == r);
    }
    if (bad == 0 && (sh.x_inf < 0 && sh.dy_inf < 0) == (nonfinite == 0)) {
      ++tally->passed;
    } else {
      ++tally->failed;
      std::printf("FAIL Conv2DBackpropFilterBf16Nhwc %s: %lld elements differ (%lld non-finite)\n", sh.what,
                  (long long)bad, (long long)nonfinite);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Tally tally;
  // Every instruction-set variant this CPU can run, each against the reference; the
  // timing after it uses the one the environment selects (TF_CONV_BACKPROP_ISA).
  const cpu::Isa selected = cpu::ActiveIsa();
  for (int level = 0; level < cpu::kNumIsas; ++level) {
    const cpu::Isa isa = static_cast<cpu::Isa>(level);
    if (isa > cpu::BestSupportedIsa()) {
      std::printf("isa %s: not on this CPU, skipped\n", cpu::IsaName(isa));
      continue;
    }
    cpu::SetActiveIsa(isa);
    const int failed_before = tally.failed;
    for (int i = 0; i < kConfigs; ++i) {
      const uint64_t seed = kBaseSeed + i;
      std::mt19937_64 rng(seed);
      const ConvGeometry g = RandomGeometry(i, rng);
      CheckConfig<float>(g, seed, &tally);
      CheckConfig<double>(g, seed, &tally);
      CheckBf16(true, g, seed, &tally);
      CheckBf16(false, g, seed, &tally);
    }
    CheckNonFiniteFilter<float>(&tally);
    CheckNonFiniteFilter<double>(&tally);
    if (isa == cpu::Isa::kAvx512) CheckBf16FilterPairs(&tally);
    std::printf("isa %s: %d failed\n", cpu::IsaName(isa), tally.failed - failed_before);
  }
  cpu::SetActiveIsa(selected);
  std::printf("%d passed, %d failed\n", tally.passed, tally.failed);
  if (argc > 1 && std::string(argv[1]) == "--bench") Bench();
  return tally.failed == 0 ? 0 : 1;
}
