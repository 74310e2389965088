// The scratch counters (see scratch.h): once per process, shared by every
// instruction-set build of the kernels.
#include "tf_ops/core/scratch.h"

#include <atomic>

namespace tf_conv_backprop {
namespace {
std::atomic<int64_t> scratch_in_flight{0};
std::atomic<int64_t> scratch_peak{0};
}  // namespace

void CountScratch(int64_t bytes) {
  const int64_t now = scratch_in_flight.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = scratch_peak.load(std::memory_order_relaxed);
  while (now > peak && !scratch_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
int64_t ScratchPeakBytes() { return scratch_peak.load(std::memory_order_relaxed); }
void ResetScratchPeak() {
  scratch_peak.store(scratch_in_flight.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace tf_conv_backprop

// For the benchmark (ctypes): the peak since the last reset, resetting when asked.
int64_t tf_conv_backprop_scratch_peak_bytes(int reset) {
  const int64_t peak = tf_conv_backprop::ScratchPeakBytes();
  if (reset) tf_conv_backprop::ResetScratchPeak();
  return peak;
}
