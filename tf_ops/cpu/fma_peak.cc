// The FMA peak that `make bench` divides the conv2d rows' GFLOP/s by: the active
// instruction-set build's register-only multiply-add loop (KernelTable::fma_peak_loop)
// on `threads` threads at once (its own threads: a benchmark aid, not part of the
// engine, which owns none). TF's GEMM is no measure of it: on these machines it
// reaches 75-85% of this figure.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "tf_ops/cpu/kernel_table.h"

extern "C" __attribute__((visibility("default"))) double tf_conv_backprop_fma_peak_gflops(int threads) {
  using tf_conv_backprop::cpu::ActiveKernels;
  const auto loop = ActiveKernels().fma_peak_loop;
  threads = std::clamp(threads, 1, 1024);
  // 15-30 ms a thread at 100 GFLOP/s (192-384 flops an iteration): thread start-up
  // (~0.1 ms) is noise against it.
  constexpr int64_t kIterations = int64_t{1} << 23;
  std::vector<float> sinks(threads);
  double best = 0;
  // The best of 16 (0.2-0.5 s): noise only slows, and on these shared machines it comes
  // in bursts of tens of milliseconds.
  for (int repeat = 0; repeat < 16; ++repeat) {
    std::vector<int64_t> flops(threads);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> helpers;
    for (int t = 1; t < threads; ++t) {
      helpers.emplace_back([&, t] { flops[t] = loop(kIterations, &sinks[t]); });
    }
    flops[0] = loop(kIterations, &sinks[0]);
    for (auto& h : helpers) h.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t total = 0;
    for (const int64_t f : flops) total += f;
    best = std::max(best, total / seconds / 1e9);
  }
  return best;
}
