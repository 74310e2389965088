// How the depthwise NCHW channel-block kernels (cpu/depthwise/channel_blocks.cc)
// cut a call into units, shared with their selection predicates (cpu/select.cc).
//
// Depthwise channels never mix, and in NCHW the planes of consecutive channels
// are contiguous. So a unit of work takes a block of channels of a few images:
// transposes their planes into a small NHWC buffer, runs the NHWC kernel on it on
// one thread and transposes the result back. Every buffer stays in that core's
// L2, so memory sees each tensor once, as in NHWC; the engine's image-chunked
// front end round trips through the shared L3 and synchronises the pool between
// its phases.
#ifndef TF_CONV_BACKPROP_CPU_DEPTHWISE_CHANNEL_BLOCKS_H_
#define TF_CONV_BACKPROP_CPU_DEPTHWISE_CHANNEL_BLOCKS_H_

#include <algorithm>
#include <cstdint>

#include "tf_ops/core/geometry.h"

namespace tf_conv_backprop {
namespace cpu {
namespace depthwise {

// Channels per block come in whole tiles of this many.
constexpr int64_t kChannelBlock = 16;
// One unit's buffers are kept near this size (L2 is 1 MiB per core here).
constexpr int64_t kUnitBytes = int64_t{512} << 10;
// Every thread holds about three units' worth of buffers at once (the NHWC
// block in and out, a staged copy), together at most this, or huge planes take
// the image-chunked front end, whose scratch does not grow with the thread count.
constexpr int64_t kMaxUnitsBytes = int64_t{32} << 20;

struct BlockPlan {
  bool fits = false;     // whether the channel blocks run this call
  int64_t channels = 0;  // per block
  int64_t blocks = 0;    // of channels
  int64_t images = 0;    // per unit
};

// Channels per unit: the channels cut into a multiple of `parts` near-equal
// blocks (whole tiles of kChannelBlock), as few as fit kUnitBytes with one
// image, so the kernels run wide rows and the threads get equal shares.
inline int64_t UnitChannels(const ConvGeometry& g, int64_t channel_bytes, int64_t parts) {
  const int64_t fit = kUnitBytes / std::max<int64_t>(1, channel_bytes);
  for (int64_t k = parts;; k += parts) {
    const int64_t cb = CeilDiv(CeilDiv(g.in_depth, k), kChannelBlock) * kChannelBlock;
    if (cb <= fit || cb == kChannelBlock) return std::min(cb, g.in_depth);
  }
}

// `parts`: the blocks come in multiples of it. `acc_bytes`: the size of the
// element the NHWC kernel computes in.
inline BlockPlan PlanBlocks(const ConvGeometry& g, int64_t acc_bytes, int num_threads, int64_t parts) {
  const int64_t in_plane = g.in_rows * g.in_cols, out_plane = g.out_rows * g.out_cols;
  const int64_t channel_bytes = (in_plane + g.depth_multiplier * out_plane) * acc_bytes;
  BlockPlan p;
  p.channels = UnitChannels(g, channel_bytes, parts);
  p.blocks = CeilDiv(g.in_depth, p.channels);
  const int64_t image_bytes = p.channels * channel_bytes;
  p.images = std::max<int64_t>(1, std::min(g.batch, kUnitBytes / std::max<int64_t>(1, image_bytes)));
  p.fits = 3 * image_bytes * std::max(1, num_threads) <= kMaxUnitsBytes;
  return p;
}

// Input gradient: units are (images, block) pairs, their dx disjoint.
inline BlockPlan PlanInputBlocks(const ConvGeometry& g, int64_t acc_bytes, int num_threads) {
  return PlanBlocks(g, acc_bytes, num_threads, 1);
}
// Filter gradient: dW sums over images, so a unit is one block of channels, its
// images taken in order (the same sums whatever the thread count); fewer blocks
// than threads would idle the pool, and take the image-chunked front end instead.
inline BlockPlan PlanFilterBlocks(const ConvGeometry& g, int64_t acc_bytes, int num_threads) {
  BlockPlan p = PlanBlocks(g, acc_bytes, num_threads, std::max(1, num_threads));
  p.fits = p.fits && p.blocks >= num_threads;
  return p;
}

}  // namespace depthwise
}  // namespace cpu
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CPU_DEPTHWISE_CHANNEL_BLOCKS_H_
