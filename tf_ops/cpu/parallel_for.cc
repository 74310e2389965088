#include "tf_ops/cpu/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tf_conv_backprop {
namespace {

// A block should outweigh taking it from the counter and a cache line or two
// changing cores (about Eigen's task size).
constexpr double kMinBlockCycles = 40000;
// The caller spins this long for the helpers' last blocks before it sleeps: blocks
// are at least tens of microseconds, and sleeping would add a wake-up of its own.
constexpr auto kSpin = std::chrono::microseconds(50);

// Shared with the helpers, which may start after the call has returned.
struct Work {
  int64_t total = 0, block = 0, blocks = 0;
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  std::atomic<int64_t> next{0};  // the next block to hand out
  std::atomic<int64_t> done{0};  // blocks finished (or given up: see the caller)
  std::mutex mutex;
  std::condition_variable all_done;

  // Runs blocks until none is left; true when this thread finished the last one.
  bool RunBlocks() {
    bool last = false;
    for (int64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
      (*fn)(b * block, std::min(total, (b + 1) * block));
      last = done.fetch_add(1, std::memory_order_acq_rel) + 1 == blocks;
    }
    return last;
  }
  void NotifyAllDone() {
    std::lock_guard<std::mutex> lock(mutex);
    all_done.notify_all();
  }
  void WaitAllDone() {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0; done.load(std::memory_order_acquire) < blocks; ++i) {
#if defined(__x86_64__) || defined(__i386__)
      _mm_pause();
#endif
      if (i % 64 == 0 && std::chrono::steady_clock::now() > until) {
        std::unique_lock<std::mutex> lock(mutex);
        all_done.wait(lock, [this] { return done.load(std::memory_order_acquire) >= blocks; });
        return;
      }
    }
  }
};

}  // namespace

void CallerParallelFor(const std::function<void(std::function<void()>)>& schedule, int num_threads,
                       int64_t total, int64_t cost_per_unit,
                       const std::function<void(int64_t, int64_t)>& fn) {
  if (total <= 0) return;
  const double work = static_cast<double>(total) * std::max<int64_t>(cost_per_unit, 1);
  const int64_t blocks = std::max<int64_t>(
      1, std::min<double>({static_cast<double>(total), 4.0 * num_threads, work / kMinBlockCycles}));
  if (blocks == 1 || num_threads <= 1 || !schedule) {
    fn(0, total);
    return;
  }
  auto shared = std::make_shared<Work>();
  Work& w = *shared;
  w.total = total;
  w.block = (total + blocks - 1) / blocks;
  w.blocks = (total + w.block - 1) / w.block;
  w.fn = &fn;
  const int64_t helpers = std::min<int64_t>(num_threads - 1, w.blocks - 1);
  for (int64_t h = 0; h < helpers; ++h) {
    schedule([shared] {
      if (shared->RunBlocks()) shared->NotifyAllDone();
    });
  }
  try {
    w.RunBlocks();
  } catch (...) {
    // Hand out no more blocks; the failed block and those never handed out count as
    // done, so the wait ends once the helpers' blocks in flight have (fn is alive).
    const int64_t never_run = w.blocks - std::min(w.blocks, w.next.exchange(w.blocks));
    if (w.done.fetch_add(never_run + 1, std::memory_order_acq_rel) + never_run + 1 < w.blocks) {
      w.WaitAllDone();
    }
    throw;
  }
  w.WaitAllDone();
}

}  // namespace tf_conv_backprop
