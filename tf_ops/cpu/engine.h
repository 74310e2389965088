// CPU engine for the four gradients: raw pointers + geometry in, gradient out.
// Framework-free; the TF binding passes its intra-op thread pool in through
// CpuContext::parallel_for (the engine owns no threads).
#ifndef TF_CONV_BACKPROP_CPU_ENGINE_H_
#define TF_CONV_BACKPROP_CPU_ENGINE_H_

#include <cstdint>
#include <functional>

#include "tf_ops/core/geometry.h"

namespace tf_conv_backprop {

struct CpuContext {
  using Range = std::function<void(int64_t begin, int64_t end)>;
  // Calls fn on disjoint sub-ranges covering [0, total), possibly concurrently.
  // cost_per_unit is a rough cycle count per unit, used to size the shards.
  std::function<void(int64_t total, int64_t cost_per_unit, const Range& fn)> parallel_for;
  int num_threads = 1;

  // Serial fallback used when no pool is given (tests without TF).
  void For(int64_t total, int64_t cost_per_unit, const Range& fn) const {
    if (total <= 0) return;
    if (parallel_for && num_threads > 1) {
      parallel_for(total, cost_per_unit, fn);
    } else {
      fn(0, total);
    }
  }
};

// The gradient `op` on the CPU: (a, b) -> out is (filter, dy) -> dx for the input
// gradients, (x, dy) -> dW for the filter gradients. T is Eigen::half,
// Eigen::bfloat16, float or double, or int32_t for Conv2DBackpropInput only (TF's
// set). All tensors are in geo.data_format order (the filter is always HWIO /
// HW-C-multiplier). The output is fully written, zeros for empty reductions. Half and
// bfloat16 accumulate in float, float in float, double in double; int32 is exact,
// wrapping around on overflow as TF's int32 kernel does.
template <typename T>
Status GradientCpu(OpKind op, const CpuContext& ctx, const ConvGeometry& geo, const T* a, const T* b,
                   T* out);

}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CPU_ENGINE_H_
