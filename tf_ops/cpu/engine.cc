// Front end of the CPU engine: everything that is not arithmetic. It zero-fills
// gradients whose reduction is empty, converts half/bfloat16 to float (the kernels
// accumulate in float), moves NCHW tensors to NHWC and back, and turns allocation
// failures into a Status. The kernels in cpu_kernels.h then only ever see
// non-empty NHWC float/double tensors. Conversions and transposes run a chunk of
// images at a time (depthwise NCHW: a block of channels of a few images) through
// reused buffers (per-ISA tiled / vectorised helpers, cpu::ConvertElements and
// cpu::TransposeConvert), so the scratch of a call stays bounded whatever the
// batch, dtype and layout.
#include "tf_ops/core/cpu_engine.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "tf_ops/core/cpu_kernels.h"
#include "tf_ops/core/scratch.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

namespace {

template <typename T>
using AccType = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Logical NHWC extents of a 4-D tensor in the geometry's layout.
struct Dims4 {
  int64_t n, h, w, c;
  int64_t image() const { return h * w * c; }
};

// The front end's per-chunk buffers (converted inputs and the kernel's output
// for a chunk of images) are kept near this size: small enough to stay in cache
// between the transpose and the kernel that reads it (measured on depthwise
// C144 @56 NCHW: 16 MiB chunks cost 2.6-3.8x the float NHWC time, 4 MiB chunks
// 1.7-2.2x), and far inside the engine's scratch bound (max(32 MiB, output
// bytes)). A chunk is at least one image.
constexpr int64_t kChunkBytes = int64_t{4} << 20;
constexpr int64_t kMaxChunkBytes = int64_t{16} << 20;
// Outputs from this size are transposed into place with streaming stores.
constexpr int64_t kStreamOutputBytes = int64_t{4} << 20;
// Units of work for the pool: a run of kConvertRun elements (plain conversion)
// or a block of kPixelBlock pixels of one image (transposes).
constexpr int64_t kConvertRun = int64_t{1} << 14;
constexpr int64_t kPixelBlock = 256;
// Element-wise cost for the pool's shard sizing: a convert or a transpose is cheap.
constexpr int64_t kCopyCost = 4;


// dst (NHWC, To) <- src (format order, From), d.n images.
template <typename From, typename To>
void ToNhwc(const CpuContext& ctx, DataFormat format, const Dims4& d, const From* src, To* dst) {
  const int64_t plane = d.h * d.w;
  if (format == DataFormat::kNHWC) {
    const int64_t total = d.n * d.image();
    ctx.For(CeilDiv(total, kConvertRun), kConvertRun * kCopyCost, [&](int64_t begin, int64_t end) {
      const int64_t lo = begin * kConvertRun, hi = std::min(total, end * kConvertRun);
      cpu::ConvertElements(src + lo, dst + lo, hi - lo);
    });
    return;
  }
  // One unit per (image, block of pixels): a [C x pixels] slab of the NCHW planes
  // becomes [pixels x C] rows, transposed in cache tiles.
  const int64_t blocks = CeilDiv(plane, kPixelBlock);
  ctx.For(d.n * blocks, kPixelBlock * d.c * kCopyCost, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n = u / blocks, p0 = (u % blocks) * kPixelBlock;
      const int64_t pb = std::min(kPixelBlock, plane - p0);
      cpu::TransposeConvert(src + n * d.c * plane + p0, plane, dst + (n * plane + p0) * d.c, d.c,
                            d.c, pb, /*stream=*/false);
    }
  });
}

// dst (format order, To) <- src (NHWC, From), d.n images. `stream`: dst is a
// final output, written once (see TransposeConvert).
template <typename From, typename To>
void FromNhwc(const CpuContext& ctx, DataFormat format, const Dims4& d, const From* src, To* dst,
              bool stream) {
  const int64_t plane = d.h * d.w;
  if (format == DataFormat::kNHWC) {
    ToNhwc(ctx, format, d, src, dst);
    return;
  }
  const int64_t blocks = CeilDiv(plane, kPixelBlock);
  ctx.For(d.n * blocks, kPixelBlock * d.c * kCopyCost, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n = u / blocks, p0 = (u % blocks) * kPixelBlock;
      const int64_t pb = std::min(kPixelBlock, plane - p0);
      cpu::TransposeConvert(src + (n * plane + p0) * d.c, d.c, dst + n * d.c * plane + p0, plane,
                            pb, d.c, stream);
    }
  });
}

Dims4 InputDims(const ConvGeometry& g) { return {g.batch, g.in_rows, g.in_cols, g.in_depth}; }
Dims4 OutBackpropDims(const ConvGeometry& g) { return {g.batch, g.out_rows, g.out_cols, g.out_depth}; }
// The filter is HWIO in every data format: never transposed, only converted.
Dims4 FilterDims(const ConvGeometry& g) {
  return {1, g.filter_rows, g.filter_cols, g.in_depth * (g.depthwise ? g.depth_multiplier : g.out_depth)};
}

// The batch cut into `chunks` runs of `images` images (the last may be shorter),
// sized so one chunk's buffers (bytes_per_image each) fit in `budget`. Depends on
// the geometry and dtype only, so the same sums are formed on every run.
struct ChunkPlan {
  int64_t images, chunks;
};
// At least min_images per chunk while that stays within kMaxChunkBytes.
ChunkPlan PlanChunks(int64_t batch, int64_t bytes_per_image, int64_t budget, int64_t min_images) {
  int64_t fit = std::max<int64_t>(1, budget / std::max<int64_t>(1, bytes_per_image));
  fit = std::max(fit, std::min(min_images, kMaxChunkBytes / std::max<int64_t>(1, bytes_per_image)));
  const int64_t chunks = CeilDiv(batch, std::min(batch, fit));
  return {CeilDiv(batch, chunks), chunks};
}

// The same geometry for images [n0, n0 + images): NHWC, smaller batch.
ConvGeometry ChunkGeometry(const ConvGeometry& g, int64_t images) {
  ConvGeometry c = BatchSlice(g, images);
  c.data_format = DataFormat::kNHWC;
  return c;
}

template <typename Fn>
Status Guarded(Fn fn) {
  try {
    fn();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory allocating CPU scratch space for the gradient");
  } catch (const std::exception& e) {
    return Internal(e.what());
  }
  return OkStatus();
}

// dx = kernel(filter, dy): shared by the conv2d and depthwise input gradients.
// `direct` runs first: a kernel for the caller's tensors as they are (dtype and
// layout), returning false where it has none. Float NHWC goes straight to the
// NHWC kernel. Otherwise the batch runs in chunks of
// images: each chunk's dy is converted / transposed into a reused NHWC buffer,
// the kernel writes the chunk's dx into a second one, which goes back to the
// caller's layout and type. Images are independent, so chunking changes no sum.
template <typename T, typename Kernel, typename Direct>
Status InputGradient(const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                     const T* out_backprop, T* in_backprop, Kernel kernel, Direct direct) {
  using A = AccType<T>;
  if (geo.input_elements == 0) return OkStatus();
  if (geo.filter_elements == 0 || geo.out_backprop_elements == 0) {
    std::fill_n(in_backprop, geo.input_elements, T(0));
    return OkStatus();
  }
  return Guarded([&] {
    if (direct(ctx, geo, filter, out_backprop, in_backprop)) return;
    if constexpr (std::is_same_v<T, A>) {
      if (geo.data_format == DataFormat::kNHWC) {
        kernel(ctx, geo, filter, out_backprop, in_backprop);
        return;
      }
    }
    const A* w = nullptr;
    ScratchVector<A> w_copy;
    if constexpr (std::is_same_v<T, A>) {
      w = filter;
    } else {
      w_copy.resize(geo.filter_elements);
      ToNhwc(ctx, DataFormat::kNHWC, FilterDims(geo), filter, w_copy.data());
      w = w_copy.data();
    }
    const Dims4 dx_dims = InputDims(geo), dy_dims = OutBackpropDims(geo);
    // Two images per thread at least: a lone image leaves the conv2d kernels
    // few, lopsided units (7x7 Cin=3 NCHW: 77 -> 34 ms); the filter kernels
    // split pixels and are best with the smallest chunks.
    const ChunkPlan plan = PlanChunks(
        geo.batch, (dx_dims.image() + dy_dims.image()) * static_cast<int64_t>(sizeof(A)),
        kChunkBytes, 2 * ctx.num_threads);
    ScratchBuffer<A> dy_buf(plan.images * dy_dims.image());
    ScratchBuffer<A> dx_buf(plan.images * dx_dims.image());
    // Past the caches, stores that skip them save the read of each line before
    // it is written (measured, depthwise s2 C144@56 NCHW: see the commit).
    const bool stream_dx = geo.input_elements * static_cast<int64_t>(sizeof(T)) >= kStreamOutputBytes;
    for (int64_t n0 = 0; n0 < geo.batch; n0 += plan.images) {
      const int64_t nb = std::min(plan.images, geo.batch - n0);
      Dims4 dyc = dy_dims, dxc = dx_dims;
      dyc.n = dxc.n = nb;
      ToNhwc(ctx, geo.data_format, dyc, out_backprop + n0 * dyc.image(), dy_buf.data());
      kernel(ctx, ChunkGeometry(geo, nb), w, dy_buf.data(), dx_buf.data());
      FromNhwc(ctx, geo.data_format, dxc, dx_buf.data(), in_backprop + n0 * dxc.image(), stream_dx);
    }
  });
}

// dW = kernel(x, dy): shared by the conv2d and depthwise filter gradients.
// Float NHWC goes straight to the kernel. Otherwise the batch runs in chunks of
// images (x and dy converted / transposed per chunk into reused buffers); the
// first chunk's kernel writes the float dW directly, each later one writes a
// scratch dW that is then added, in chunk order (deterministic sums). half and
// bfloat16 round once, at the end.
template <typename T, typename Kernel, typename Direct>
Status FilterGradient(const CpuContext& ctx, const ConvGeometry& geo, const T* input,
                      const T* out_backprop, T* filter_backprop, Kernel kernel, Direct direct) {
  using A = AccType<T>;
  if (geo.filter_elements == 0) return OkStatus();
  if (geo.input_elements == 0 || geo.out_backprop_elements == 0) {
    std::fill_n(filter_backprop, geo.filter_elements, T(0));
    return OkStatus();
  }
  return Guarded([&] {
    if (direct(ctx, geo, input, out_backprop, filter_backprop)) return;
    if constexpr (std::is_same_v<T, A>) {
      if (geo.data_format == DataFormat::kNHWC) {
        kernel(ctx, geo, input, out_backprop, filter_backprop);
        return;
      }
    }
    const int64_t fe = geo.filter_elements;
    const Dims4 x_dims = InputDims(geo), dy_dims = OutBackpropDims(geo);
    const int64_t image_bytes = (x_dims.image() + dy_dims.image()) * static_cast<int64_t>(sizeof(A));
    const ChunkPlan plan = PlanChunks(geo.batch, image_bytes, kChunkBytes, 1);
    ScratchVector<A> dw_own(std::is_same_v<T, A> ? 0 : fe);
    A* dw = nullptr;
    if constexpr (std::is_same_v<T, A>) {
      dw = filter_backprop;
    } else {
      dw = dw_own.data();
    }
    ScratchBuffer<A> dw_chunk(plan.chunks > 1 ? fe : 0);
    ScratchBuffer<A> x_buf(plan.images * x_dims.image());
    ScratchBuffer<A> dy_buf(plan.images * dy_dims.image());
    for (int64_t n0 = 0; n0 < geo.batch; n0 += plan.images) {
      const int64_t nb = std::min(plan.images, geo.batch - n0);
      Dims4 xc = x_dims, dyc = dy_dims;
      xc.n = dyc.n = nb;
      ToNhwc(ctx, geo.data_format, xc, input + n0 * xc.image(), x_buf.data());
      ToNhwc(ctx, geo.data_format, dyc, out_backprop + n0 * dyc.image(), dy_buf.data());
      A* target = n0 == 0 ? dw : dw_chunk.data();
      kernel(ctx, ChunkGeometry(geo, nb), x_buf.data(), dy_buf.data(), target);
      if (n0 == 0) continue;
      const A* add = dw_chunk.data();
      ctx.For(CeilDiv(fe, kConvertRun), kConvertRun, [&](int64_t begin, int64_t end) {
        const int64_t hi = std::min(fe, end * kConvertRun);
        for (int64_t i = begin * kConvertRun; i < hi; ++i) dw[i] += add[i];
      });
    }
    if constexpr (!std::is_same_v<T, A>) {
      ToNhwc(ctx, DataFormat::kNHWC, FilterDims(geo), dw, filter_backprop);
    }
  });
}

// ---- Depthwise NCHW, a block of channels at a time ------------------------------
//
// Depthwise channels never mix, and in NCHW the planes of consecutive channels are
// contiguous. So a unit of work takes kChannelBlock channels of a few images:
// transposes their planes into a small NHWC buffer, runs the NHWC kernel on it on
// one thread and transposes the result back. Every buffer stays in that core's L2,
// so memory sees each tensor once, as in NHWC; the image-chunked path above round
// trips through the shared L3 and synchronises the pool between its phases
// (measured: see the commit).
constexpr int64_t kChannelBlock = 16;
// One unit's buffers are kept near this size (L2 is 1 MiB per core here).
constexpr int64_t kUnitBytes = int64_t{512} << 10;
// Every thread holds about three units' worth of buffers at once (the NHWC
// block in and out, a staged copy), together at most this, or huge planes take
// the image-chunked path, whose scratch does not grow with the thread count.
constexpr int64_t kMaxUnitsBytes = int64_t{32} << 20;

bool UnitsFit(const CpuContext& ctx, int64_t image_bytes) {
  return 3 * image_bytes * std::max(1, ctx.num_threads) <= kMaxUnitsBytes;
}

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
  return ChunkGeometry(b, images);
}

// Channels per unit: the channels cut into a multiple of `parts` near-equal
// blocks (whole tiles of kChannelBlock), as few as fit kUnitBytes with one
// image, so the kernels run wide rows and the threads get equal shares.
int64_t UnitChannels(const ConvGeometry& g, int64_t channel_bytes, int64_t parts) {
  const int64_t fit = kUnitBytes / std::max<int64_t>(1, channel_bytes);
  for (int64_t k = parts;; k += parts) {
    const int64_t cb = CeilDiv(CeilDiv(g.in_depth, k), kChannelBlock) * kChannelBlock;
    if (cb <= fit || cb == kChannelBlock) return std::min(cb, g.in_depth);
  }
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
  cpu::TransposeConvert(src, plane, dst, planes, planes, plane, /*stream=*/false);
}

// Images per unit for planes of `image_bytes` (a block's x or dx plus dy, one image).
int64_t UnitImages(const ConvGeometry& g, int64_t image_bytes) {
  return std::max<int64_t>(1, std::min(g.batch, kUnitBytes / std::max<int64_t>(1, image_bytes)));
}

template <typename T>
bool DepthwiseInputNchwBlocks(const CpuContext& ctx, const ConvGeometry& g, const T* filter,
                              const T* dy, T* dx) {
  using A = AccType<T>;
  const int64_t C = g.in_depth, M = g.depth_multiplier, taps = g.filter_rows * g.filter_cols;
  const int64_t in_plane = g.in_rows * g.in_cols, out_plane = g.out_rows * g.out_cols;
  const int64_t channel_bytes = (in_plane + M * out_plane) * static_cast<int64_t>(sizeof(A));
  const int64_t cb = UnitChannels(g, channel_bytes, 1);
  const int64_t image_bytes = cb * channel_bytes;
  if (!UnitsFit(ctx, image_bytes)) return false;
  const int64_t images = UnitImages(g, image_bytes);
  const int64_t blocks = CeilDiv(C, cb), groups = CeilDiv(g.batch, images);
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
      for (int64_t t = 0; t < taps; ++t) cpu::ConvertElements(filter + (t * C + c0) * M, w_buf.data() + t * cn * M, cn * M);
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
      cpu::DepthwiseBackpropInputNhwc<A>(serial, BlockGeometry(g, nb, cn), w_buf.data(), dy_buf.data(),
                                         dx_buf.data());
      for (int64_t i = 0; i < nb; ++i) {
        T* dst = dx + ((n0 + i) * C + c0) * in_plane;
        cpu::TransposeConvert(dx_buf.data() + i * in_plane * cn, cn, stage_dx ? dx_stage : dst, in_plane, in_plane,
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
bool DepthwiseFilterNchwBlocks(const CpuContext& ctx, const ConvGeometry& g, const T* x, const T* dy,
                               T* dw) {
  using A = AccType<T>;
  const int64_t C = g.in_depth, M = g.depth_multiplier, taps = g.filter_rows * g.filter_cols;
  const int64_t in_plane = g.in_rows * g.in_cols, out_plane = g.out_rows * g.out_cols;
  const int64_t channel_bytes = (in_plane + M * out_plane) * static_cast<int64_t>(sizeof(A));
  const int64_t cb = UnitChannels(g, channel_bytes, std::max(1, ctx.num_threads));
  const int64_t image_bytes = cb * channel_bytes;
  const int64_t blocks = CeilDiv(C, cb);
  if (!UnitsFit(ctx, image_bytes) || blocks < ctx.num_threads) return false;
  const int64_t images = UnitImages(g, image_bytes);
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
        cpu::DepthwiseBackpropFilterNhwc<A>(serial, BlockGeometry(g, nb, cn), x_buf.data(), dy_buf.data(), target);
        if (n0 > 0) {
          for (int64_t i = 0; i < fe; ++i) sum.data()[i] += part.data()[i];
        }
      }
      for (int64_t t = 0; t < taps; ++t) cpu::ConvertElements(sum.data() + t * cn * M, dw + (t * C + c0) * M, cn * M);
    }
  });
  return true;
}

}  // namespace

// The direct kernels each public op tries first (see InputGradient): native
// bfloat16 conv2d kernels on NHWC, NCHW kernels for float and double.
template <typename T>
Status Conv2DBackpropInputCpu(const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                              const T* out_backprop, T* in_backprop) {
  auto direct = [](const CpuContext& c, const ConvGeometry& g, const T* w, const T* dy, T* dx) {
    if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
      return g.data_format == DataFormat::kNHWC && cpu::Conv2DBackpropInputBf16Nhwc(c, g, w, dy, dx);
    } else if constexpr (std::is_same_v<T, AccType<T>>) {
      return g.data_format == DataFormat::kNCHW && cpu::Conv2DBackpropInputNchw<T>(c, g, w, dy, dx);
    } else {
      return false;
    }
  };
  return InputGradient(ctx, geo, filter, out_backprop, in_backprop, cpu::Conv2DBackpropInputNhwc<AccType<T>>,
                       direct);
}

template <typename T>
Status Conv2DBackpropFilterCpu(const CpuContext& ctx, const ConvGeometry& geo, const T* input,
                               const T* out_backprop, T* filter_backprop) {
  auto direct = [](const CpuContext& c, const ConvGeometry& g, const T* x, const T* dy, T* dw) {
    if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
      return g.data_format == DataFormat::kNHWC && cpu::Conv2DBackpropFilterBf16Nhwc(c, g, x, dy, dw);
    } else if constexpr (std::is_same_v<T, AccType<T>>) {
      return g.data_format == DataFormat::kNCHW && cpu::Conv2DBackpropFilterNchw<T>(c, g, x, dy, dw);
    } else {
      return false;
    }
  };
  return FilterGradient(ctx, geo, input, out_backprop, filter_backprop,
                        cpu::Conv2DBackpropFilterNhwc<AccType<T>>, direct);
}

template <typename T>
Status DepthwiseBackpropInputCpu(const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                                 const T* out_backprop, T* in_backprop) {
  auto direct = [](const CpuContext& c, const ConvGeometry& g, const T* w, const T* dy, T* dx) {
    if (g.data_format != DataFormat::kNCHW) return false;
    if constexpr (std::is_same_v<T, AccType<T>>) {
      if (cpu::DepthwiseNchwDirectWins(g) && cpu::DepthwiseBackpropInputNchw<T>(c, g, w, dy, dx)) return true;
    }
    return DepthwiseInputNchwBlocks(c, g, w, dy, dx);
  };
  return InputGradient(ctx, geo, filter, out_backprop, in_backprop,
                       cpu::DepthwiseBackpropInputNhwc<AccType<T>>, direct);
}

template <typename T>
Status DepthwiseBackpropFilterCpu(const CpuContext& ctx, const ConvGeometry& geo, const T* input,
                                  const T* out_backprop, T* filter_backprop) {
  auto direct = [](const CpuContext& c, const ConvGeometry& g, const T* x, const T* dy, T* dw) {
    if (g.data_format != DataFormat::kNCHW) return false;
    if constexpr (std::is_same_v<T, AccType<T>>) {
      if (cpu::DepthwiseNchwDirectWins(g) && cpu::DepthwiseBackpropFilterNchw<T>(c, g, x, dy, dw)) return true;
    }
    return DepthwiseFilterNchwBlocks(c, g, x, dy, dw);
  };
  return FilterGradient(ctx, geo, input, out_backprop, filter_backprop,
                        cpu::DepthwiseBackpropFilterNhwc<AccType<T>>, direct);
}

#define TF_CONV_BACKPROP_INSTANTIATE(T)                                                              \
  template Status Conv2DBackpropInputCpu<T>(const CpuContext&, const ConvGeometry&, const T*, const T*, T*); \
  template Status Conv2DBackpropFilterCpu<T>(const CpuContext&, const ConvGeometry&, const T*, const T*, T*); \
  template Status DepthwiseBackpropInputCpu<T>(const CpuContext&, const ConvGeometry&, const T*, const T*, T*); \
  template Status DepthwiseBackpropFilterCpu<T>(const CpuContext&, const ConvGeometry&, const T*, const T*, T*);
TF_CONV_BACKPROP_INSTANTIATE(Eigen::half)
TF_CONV_BACKPROP_INSTANTIATE(Eigen::bfloat16)
TF_CONV_BACKPROP_INSTANTIATE(float)
TF_CONV_BACKPROP_INSTANTIATE(double)
#undef TF_CONV_BACKPROP_INSTANTIATE

}  // namespace tf_conv_backprop

int64_t tf_conv_backprop_scratch_peak_bytes(int reset) {
  const int64_t peak = tf_conv_backprop::ScratchPeakBytes();
  if (reset) tf_conv_backprop::ResetScratchPeak();
  return peak;
}
