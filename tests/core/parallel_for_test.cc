// Standalone test of CallerParallelFor (cpu/parallel_for.cc), the loop the TF binding
// runs every kernel's ctx.For through:
//  1. every unit runs exactly once, in disjoint blocks, for any total, cost and
//     thread count, with a pool that starts tasks at once or late;
//  2. the caller and a helper do run blocks at the same time,
//     and the call returns only once the helpers' blocks have finished;
//  3. a helper that starts after the call returned runs nothing;
//  4. an exception on the calling thread comes back out of the call, only after the
//     helpers' blocks in flight have finished, and no block starts after it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/core/expect.h"
#include "tf_ops/cpu/parallel_for.h"

namespace {

using tf_conv_backprop::CallerParallelFor;

// A pool of `threads` workers; each task starts `delay` after it was scheduled.
class Pool {
 public:
  Pool(int threads, std::chrono::microseconds delay) : delay_(delay) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { Work(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    ready_.notify_all();
    for (auto& w : workers_) w.join();
  }
  std::function<void(std::function<void()>)> Schedule() {
    return [this](std::function<void()> task) {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back({std::chrono::steady_clock::now() + delay_, std::move(task)});
      ready_.notify_one();
    };
  }

 private:
  struct Task {
    std::chrono::steady_clock::time_point at;
    std::function<void()> fn;
  };
  void Work() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, all tasks run
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      std::this_thread::sleep_until(task.at);
      task.fn();
    }
  }
  std::chrono::microseconds delay_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Task> tasks_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

void CheckCoverage(Pool& pool, int threads, const char* pool_name) {
  for (int64_t total : {1, 2, 3, 7, 8, 9, 31, 64, 100, 1000}) {
    for (int64_t cost : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{100000}, int64_t{1} << 40}) {
      std::vector<std::atomic<int>> runs(total);
      for (auto& r : runs) r = 0;
      std::atomic<int> bad_ranges{0};
      CallerParallelFor(pool.Schedule(), threads, total, cost, [&](int64_t begin, int64_t end) {
        if (begin < 0 || end > total || begin >= end) ++bad_ranges;
        for (int64_t i = std::max<int64_t>(begin, 0); i < std::min(end, total); ++i) ++runs[i];
      });
      int wrong = 0;
      for (auto& r : runs) wrong += r.load() != 1;
      EXPECT(wrong == 0 && bad_ranges == 0,
             "%s pool, %d threads, total %lld, cost %lld: %d units not run exactly once, %d bad ranges",
             pool_name, threads, static_cast<long long>(total), static_cast<long long>(cost), wrong,
             bad_ranges.load());
    }
  }
}

// Blocks wait (up to a second) until two threads are inside fn at once.
void CheckConcurrency() {
  Pool pool(1, std::chrono::microseconds(0));
  std::atomic<int> inside{0}, max_inside{0};
  CallerParallelFor(pool.Schedule(), 2, 8, int64_t{1} << 30, [&](int64_t, int64_t) {
    const int now = ++inside;
    int seen = max_inside.load();
    while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (max_inside.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    --inside;
  });
  EXPECT(max_inside.load() == 2, "the caller and the helper never ran blocks at the same time");
}

// The helper's blocks are slower than the caller's (which are slow enough for the
// helper to start); the call must still return after them.
void CheckWaitsForHelpers() {
  Pool pool(1, std::chrono::microseconds(0));
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> units{0};
  CallerParallelFor(pool.Schedule(), 2, 8, int64_t{1} << 30, [&](int64_t begin, int64_t end) {
    const bool on_caller = std::this_thread::get_id() == caller;
    std::this_thread::sleep_for(std::chrono::milliseconds(on_caller ? 2 : 20));
    units += end - begin;
  });
  EXPECT(units.load() == 8, "the call returned with %lld of 8 units done", static_cast<long long>(units.load()));
}

// With helpers that start 20 ms late the caller does every block; the helpers then
// find the call over and must not call the (destroyed) fn.
void CheckLateHelpers() {
  std::atomic<bool> call_over{false};
  std::atomic<int> late_calls{0};
  {
    Pool pool(3, std::chrono::milliseconds(20));
    for (int i = 0; i < 3; ++i) {
      CallerParallelFor(pool.Schedule(), 4, 16, int64_t{1} << 30, [&](int64_t, int64_t) {
        if (call_over.load()) ++late_calls;
      });
    }
    call_over = true;
  }  // joins the pool after its late tasks ran
  EXPECT(late_calls.load() == 0, "%d blocks ran after their call returned", late_calls.load());
}

// The caller's first block throws while the helper is inside a slow block.
void CheckCallerException() {
  Pool pool(1, std::chrono::microseconds(0));
  std::atomic<bool> helper_inside{false}, helper_done{false}, thrown{false};
  std::atomic<int> started_after_throw{0};
  const std::thread::id caller = std::this_thread::get_id();
  bool caught = false, helper_finished_first = false;
  try {
    CallerParallelFor(pool.Schedule(), 2, 64, int64_t{1} << 30, [&](int64_t, int64_t) {
      if (thrown.load()) ++started_after_throw;
      if (std::this_thread::get_id() == caller) {
        // Wait (up to a second) for the helper to be inside its block, then fail.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        while (!helper_inside.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        thrown = true;
        throw std::runtime_error("block failed");
      }
      if (!helper_inside.exchange(true)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        helper_done = true;
      }
    });
  } catch (const std::runtime_error&) {
    caught = true;
    helper_finished_first = helper_done.load() || !helper_inside.load();
  }
  EXPECT(caught, "the caller's exception did not come out of the call");
  EXPECT(helper_finished_first, "the call returned while a helper's block was still running");
  EXPECT(started_after_throw.load() <= 1, "%d blocks started after the exception (at most the helper's next)",
         started_after_throw.load());
}

}  // namespace

int main() {
  for (int threads : {1, 2, 3, 4}) {
    Pool prompt(threads > 1 ? threads - 1 : 1, std::chrono::microseconds(0));
    CheckCoverage(prompt, threads, "prompt");
    Pool late(threads > 1 ? threads - 1 : 1, std::chrono::microseconds(300));
    CheckCoverage(late, threads, "late");
  }
  CheckConcurrency();
  CheckWaitsForHelpers();
  CheckLateHelpers();
  CheckCallerException();
  if (failures) {
    std::printf("%d failures\n", failures);
    return 1;
  }
  std::printf("parallel_for: all checks passed\n");
  return 0;
}
