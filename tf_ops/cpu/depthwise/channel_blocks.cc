// The depthwise gradients on NCHW tensors in blocks of channels transposed in
// L2 around the NHWC kernels (see cpu/depthwise/channel_blocks.h), any dtype:
// half and bfloat16 convert to float in the same pass.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <Eigen/Core>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/depthwise/channel_blocks.h"
#include "tf_ops/cpu/isa_kernels.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {
namespace {

template <typename T>
using AccType = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Outputs from this size are written with streaming stores.
constexpr int64_t kStreamOutputBytes = int64_t{4} << 20;

// memcpy whose stores skip the caches (a final output far larger than them):
// no read of each destination line before it is written.
void CopyOut(void* dst, const void* src, int64_t bytes, bool stream) {
#if defined(__SSE2__)
  if (stream) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    const int64_t head = std::min<int64_t>(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
    std::memcpy(d, s, head);
    int64_t i = head;
    for (; i + 16 <= bytes; i += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    }
    std::memcpy(d + i, s + i, bytes - i);
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

ConvGeometry BlockGeometry(const ConvGeometry& g, int64_t images, int64_t channels) {
  ConvGeometry b = g;
  b.in_depth = channels;
  b.out_depth = channels * g.depth_multiplier;
  b.filter_elements = g.filter_rows * g.filter_cols * b.out_depth;
  b = BatchSlice(b, images);
  b.data_format = DataFormat::kNHWC;
  return b;
}

// NHWC dst <- `planes` contiguous planes of `plane` elements at src. Through
// `stage` (one copy of the block, when not null) where the planes are not whole
// cache lines: memory is then read in one run, and the transpose's split lines
// hit L2, not DRAM (bench C576 @14 NCHW 1.6 -> 1.4 ms).
template <typename T, typename A>
void GatherPlanes(const T* src, int64_t planes, int64_t plane, A* dst, T* stage) {
  if (stage != nullptr) {
    std::memcpy(stage, src, planes * plane * sizeof(T));
    src = stage;
  }
  TransposeConvert(src, plane, dst, planes, planes, plane, /*stream=*/false);
}

}  // namespace

template <typename T>
bool DepthwiseInputNchwChannelBlocks(const CpuContext& ctx, const ConvGeometry& g, const T* filter,
                                     const T* dy, T* dx) {
  using A = AccType<T>;
  const int64_t C = g.in_depth, M = g.depth_multiplier, taps = g.filter_rows * g.filter_cols;
  const int64_t in_plane = g.in_rows * g.in_cols, out_plane = g.out_rows * g.out_cols;
  const depthwise::BlockPlan plan = depthwise::PlanInputBlocks(g, sizeof(A), ctx.num_threads);
  const int64_t cb = plan.channels, images = plan.images, blocks = plan.blocks;
  const int64_t groups = CeilDiv(g.batch, images);
  const bool stream = g.input_elements * static_cast<int64_t>(sizeof(T)) >= kStreamOutputBytes;
  const bool stage_dy = (out_plane * static_cast<int64_t>(sizeof(T))) % 64 != 0;
  const bool stage_dx = (in_plane * static_cast<int64_t>(sizeof(T))) % 64 != 0;
  const int64_t cost = images * cb * M * (in_plane * taps + 2 * out_plane) + 2 * images * cb * in_plane;
  ctx.For(groups * blocks, cost, [&](int64_t begin, int64_t end) {
    ScratchBuffer<A> w_buf(taps * cb * M), dy_buf(images * out_plane * cb * M), dx_buf(images * in_plane * cb);
    // Staged planes (see GatherPlanes) in and out, the output streamed from the copy.
    ScratchBuffer<T> stage((stage_dy ? cb * M * out_plane : 0) + (stage_dx ? cb * in_plane : 0));
    T* dy_stage = stage_dy ? stage.data() : nullptr;
    T* dx_stage = stage.data() + (stage_dy ? cb * M * out_plane : 0);
    const CpuContext serial;
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n0 = u / blocks * images, nb = std::min(images, g.batch - n0);
      const int64_t c0 = u % blocks * cb, cn = std::min(cb, C - c0);
      for (int64_t t = 0; t < taps; ++t) ConvertElements(filter + (t * C + c0) * M, w_buf.data() + t * cn * M, cn * M);
      for (int64_t i = 0; i < nb; ++i) {
        GatherPlanes(dy + ((n0 + i) * C + c0) * M * out_plane, cn * M, out_plane,
                     dy_buf.data() + i * out_plane * cn * M, dy_stage);
      }
      if (u + 1 < end) {  // the next unit's dy into L2 while this one computes
        const int64_t n1 = (u + 1) / blocks * images, nb1 = std::min(images, g.batch - n1);
        const int64_t c1 = (u + 1) % blocks * cb, cn1 = std::min(cb, C - c1);
        for (int64_t i = 0; i < nb1; ++i) {
          const char* p = reinterpret_cast<const char*>(dy + ((n1 + i) * C + c1) * M * out_plane);
          const int64_t bytes = cn1 * M * out_plane * static_cast<int64_t>(sizeof(T));
          for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, 2);
        }
      }
      DepthwiseInputNhwc<A>(serial, BlockGeometry(g, nb, cn), w_buf.data(), dy_buf.data(),
                                         dx_buf.data());
      for (int64_t i = 0; i < nb; ++i) {
        T* dst = dx + ((n0 + i) * C + c0) * in_plane;
        TransposeConvert(dx_buf.data() + i * in_plane * cn, cn, stage_dx ? dx_stage : dst, in_plane, in_plane,
                              cn, stream && !stage_dx);
        if (stage_dx) CopyOut(dst, dx_stage, cn * in_plane * sizeof(T), stream);
      }
    }
  });
  return true;
}

// dW sums over images, so a unit is one block of channels, its images taken in
// order (the same sums whatever the thread count); fewer blocks than threads
// would idle the pool, and take the image-chunked path instead.
template <typename T>
bool DepthwiseFilterNchwChannelBlocks(const CpuContext& ctx, const ConvGeometry& g, const T* x,
                                      const T* dy, T* dw) {
  using A = AccType<T>;
  const int64_t C = g.in_depth, M = g.depth_multiplier, taps = g.filter_rows * g.filter_cols;
  const int64_t in_plane = g.in_rows * g.in_cols, out_plane = g.out_rows * g.out_cols;
  const depthwise::BlockPlan plan = depthwise::PlanFilterBlocks(g, sizeof(A), ctx.num_threads);
  const int64_t cb = plan.channels, images = plan.images, blocks = plan.blocks;
  const int64_t cost = g.batch * cb * M * (out_plane * taps + 2 * in_plane);
  const bool stage_planes = (in_plane * static_cast<int64_t>(sizeof(T))) % 64 != 0 ||
                            (out_plane * static_cast<int64_t>(sizeof(T))) % 64 != 0;
  ctx.For(blocks, cost, [&](int64_t begin, int64_t end) {
    ScratchBuffer<A> x_buf(images * in_plane * cb), dy_buf(images * out_plane * cb * M);
    ScratchBuffer<A> sum(taps * cb * M), part(taps * cb * M);
    ScratchBuffer<T> stage(stage_planes ? cb * std::max(in_plane, M * out_plane) : 0);
    T* x_dy_stage = stage_planes ? stage.data() : nullptr;  // see GatherPlanes
    const CpuContext serial;
    for (int64_t b = begin; b < end; ++b) {
      const int64_t c0 = b * cb, cn = std::min(cb, C - c0), fe = taps * cn * M;
      for (int64_t n0 = 0; n0 < g.batch; n0 += images) {
        const int64_t nb = std::min(images, g.batch - n0);
        for (int64_t i = 0; i < nb; ++i) {
          GatherPlanes(x + ((n0 + i) * C + c0) * in_plane, cn, in_plane, x_buf.data() + i * in_plane * cn,
                       x_dy_stage);
          GatherPlanes(dy + ((n0 + i) * C + c0) * M * out_plane, cn * M, out_plane,
                       dy_buf.data() + i * out_plane * cn * M, x_dy_stage);
        }
        A* target = n0 == 0 ? sum.data() : part.data();
        DepthwiseFilterNhwc<A>(serial, BlockGeometry(g, nb, cn), x_buf.data(), dy_buf.data(), target);
        if (n0 > 0) {
          for (int64_t i = 0; i < fe; ++i) sum.data()[i] += part.data()[i];
        }
      }
      for (int64_t t = 0; t < taps; ++t) ConvertElements(sum.data() + t * cn * M, dw + (t * C + c0) * M, cn * M);
    }
  });
  return true;
}

#define TCB_INSTANTIATE_CHANNEL_BLOCKS(T)                  \
  TCB_INSTANTIATE_KERNEL(DepthwiseInputNchwChannelBlocks, T) \
  TCB_INSTANTIATE_KERNEL(DepthwiseFilterNchwChannelBlocks, T)
TCB_INSTANTIATE_CHANNEL_BLOCKS(Eigen::half)
TCB_INSTANTIATE_CHANNEL_BLOCKS(Eigen::bfloat16)
TCB_INSTANTIATE_CHANNEL_BLOCKS(float)
TCB_INSTANTIATE_CHANNEL_BLOCKS(double)
#undef TCB_INSTANTIATE_CHANNEL_BLOCKS

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop
