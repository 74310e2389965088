// A parallel loop in which the calling thread works too (framework-free: the pool
// is only a function that runs a closure on one of its threads).
//
// Why not the pool's own ParallelFor: TF's Eigen pool hands every block to its
// worker threads and parks the caller until they are done, so a call waits for a
// worker to wake up and then for its own wake-up. On a 2-vCPU Zen 4 VM the pool's
// thread started 26-30 us into a call, a tenth to a quarter of our 0.1-0.3 ms calls
// (depthwise layers at 7x7 and 14x14). Here the caller starts on the blocks at once
// and helpers join whenever the pool starts them, so a call is never slower than
// running alone, and a helper that comes late finds no work.
#ifndef TF_CONV_BACKPROP_CPU_PARALLEL_FOR_H_
#define TF_CONV_BACKPROP_CPU_PARALLEL_FOR_H_

#include <cstdint>
#include <functional>

namespace tf_conv_backprop {

// Calls fn on disjoint blocks covering [0, total): the caller and up to
// num_threads - 1 helpers (closures given to `schedule`) take blocks from a shared
// counter. Blocks are sized from cost_per_unit (cycles), at most 4 per thread.
// Returns when every block has run; a helper that starts later returns at once
// without touching fn. An exception from fn on the calling thread stops handing
// out blocks, waits for the blocks in flight, and is rethrown; fn must not throw
// on a helper (as with any pool).
void CallerParallelFor(const std::function<void(std::function<void()>)>& schedule, int num_threads,
                       int64_t total, int64_t cost_per_unit,
                       const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CPU_PARALLEL_FOR_H_
