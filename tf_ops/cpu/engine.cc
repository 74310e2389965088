// Front end of the CPU engine: everything that is not arithmetic. It zero-fills
// gradients whose reduction is empty, runs the kernel variants selection picks
// (cpu/select.h) in order until one accepts the data, converts half/bfloat16 to
// float (the kernels accumulate in float) and moves NCHW tensors to NHWC and back
// for the variants that compute on NHWC float/double, and turns allocation
// failures into a Status. Conversions and transposes run a chunk of
// images at a time (depthwise NCHW: a block of channels of a few images) through
// reused buffers (per-ISA tiled / vectorised helpers, cpu::ConvertElements and
// cpu::TransposeConvert), so the scratch of a call stays bounded whatever the
// batch, dtype and layout. Integer gradients (int32 Conv2DBackpropInput) run on
// the rows that list them, as they lie: never converted.
#include "tf_ops/cpu/engine.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "tf_ops/core/scratch.h"
#include "tf_ops/cpu/kernel_table.h"
#include "tf_ops/cpu/select.h"

namespace tf_conv_backprop {
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
  return {1, g.filter_rows, g.filter_cols,
          g.depthwise ? g.in_depth * g.depth_multiplier : g.group_in_depth() * g.out_depth};
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

// What RunAsIs did with a call.
enum class AsIs {
  kRan,       // a variant computed it
  kFrontEnd,  // the next variant computes on NHWC float/double: the front end's chunks run it
  kDeclined,  // every variant that takes the call declined on its data (see ExpectGroupedDecline)
};

// Runs the selected variants on the call's tensors as they are, in order, until
// one accepts the data.
template <typename T>
AsIs RunAsIs(OpKind op, const CpuContext& ctx, const ConvGeometry& geo, const T* a, const T* b, T* out) {
  const cpu::SelectionInput in = cpu::MachineInput(op, geo, cpu::DtypeOf<T>(), ctx.num_threads);
  const cpu::Candidates c = cpu::SelectCandidates(in);
  for (int i = 0; i < c.count; ++i) {
    if (!cpu::TakesAsIs(c.list[i], in)) return AsIs::kFrontEnd;
    const cpu::KernelFn kernel = cpu::KernelsOf(in.isa).Kernel(c.list[i], in.dtype);
    if (kernel != nullptr && kernel(ctx, geo, a, b, out)) {
      cpu::RecordRun(c.list[i]);
      return AsIs::kRan;
    }
  }
  return AsIs::kDeclined;
}

// The same on a chunk the front end converted to NHWC float/double; false when
// every variant declined it.
template <typename A>
bool RunOnNhwc(OpKind op, const CpuContext& ctx, const ConvGeometry& chunk, const A* a, const A* b, A* out) {
  const AsIs done = RunAsIs(op, ctx, chunk, a, b, out);
  if (done == AsIs::kFrontEnd) throw std::logic_error("no NHWC CPU kernel variant");
  return done == AsIs::kRan;
}

// Each op's last dense row never declines, so only a grouped call can find every
// row declining (the direct tiles on a non-finite filter, or on a padded dy band
// past their scratch bound); the caller then runs it as dense slices of whole groups.
constexpr const char* kDenseDeclined = "no CPU kernel variant accepted the call";
void ExpectGroupedDecline(const ConvGeometry& geo) {
  if (geo.groups == 1) throw std::logic_error(kDenseDeclined);
}

// The front end's half of InputGradient: the batch in chunks converted to NHWC
// float/double for the variant RunAsIs passed over. False when every variant
// declined a chunk.
template <typename T>
bool InputGradientInChunks(OpKind op, const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                           const T* out_backprop, T* in_backprop) {
  using A = AccType<T>;
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
    if (!RunOnNhwc(op, ctx, ChunkGeometry(geo, nb), w, dy_buf.data(), dx_buf.data())) return false;
    FromNhwc(ctx, geo.data_format, dxc, dx_buf.data(), in_backprop + n0 * dxc.image(), stream_dx);
  }
  return true;
}

// A grouped conv2d runs as dense convolutions over slices of whole groups: slice s
// reads input channels [s, s + 1) * in_depth and writes output channels
// [s, s + 1) * out_depth, with a block-diagonal filter (zeros between its groups).
// Narrow groups merge until a slice is as wide as the dense kernels' tiles (16
// channels), so 32 groups of 4 channels run as 8 slices of 16 on the register-tiled
// kernels, at 4x the multiply-adds of the groups alone; groups of 16 and wider run
// one per slice with no extra work. Merging stops at 8 groups a slice. A group count
// the merge does not divide (RegNet's 7 or 19 groups of 8) fills the last slice up
// with groups of zeros: channels past the tensor's gather as zeros, scatter nowhere.
struct GroupSlices {
  int64_t groups_per_slice, slices, in_depth, out_depth;
  // The channels of slice `slice` that the tensors hold (fewer in a last slice
  // filled up with groups of zeros).
  int64_t real_in(const ConvGeometry& g, int64_t slice) const {
    return std::min(in_depth, g.in_depth - slice * in_depth);
  }
  int64_t real_out(const ConvGeometry& g, int64_t slice) const {
    return std::min(out_depth, g.out_depth - slice * out_depth);
  }
};
constexpr int64_t kSliceChannels = 16;
constexpr int64_t kMaxGroupsPerSlice = 8;

GroupSlices PlanSlices(const ConvGeometry& g) {
  const int64_t cg = g.group_in_depth(), og = g.group_out_depth();
  int64_t m = 1;
  for (int64_t k = 1; k <= std::min(kMaxGroupsPerSlice, g.groups); ++k) {
    if ((k * cg) % kSliceChannels == 0 && (k * og) % kSliceChannels == 0) {
      m = k;
      break;
    }
  }
  return {m, CeilDiv(g.groups, m), m * cg, m * og};
}

// One slice of `images` images as a dense NHWC geometry.
ConvGeometry SliceGeometry(const ConvGeometry& g, const GroupSlices& s, int64_t images) {
  ConvGeometry c = g;
  c.groups = 1;
  c.in_depth = s.in_depth;
  c.out_depth = s.out_depth;
  c.filter_elements = g.filter_rows * g.filter_cols * s.in_depth * s.out_depth;
  return ChunkGeometry(c, images);
}

// A grouped call that no grouped row takes (directly or through the front end).
template <typename T>
bool NeedsSlices(OpKind op, const CpuContext& ctx, const ConvGeometry& geo) {
  return geo.groups > 1 &&
         cpu::SelectCandidates(cpu::MachineInput(op, geo, cpu::DtypeOf<T>(), ctx.num_threads)).count == 0;
}

// Runs fn(context, slice) for every slice. With enough slices to share out evenly,
// the slices run concurrently, each on one thread: a slice is too small to split well
// (32 slices of 1024 channels @7 over 2 threads: see the commit); otherwise one after
// another, each with every thread. `cost` is one slice's cost.
template <typename Fn>
void ForEachSlice(const CpuContext& ctx, const GroupSlices& s, int64_t cost, Fn fn) {
  const bool concurrent = ctx.num_threads > 1 && (s.slices % ctx.num_threads == 0 || s.slices >= 4 * ctx.num_threads);
  if (!concurrent) {
    for (int64_t slice = 0; slice < s.slices; ++slice) fn(ctx, slice);
    return;
  }
  const CpuContext serial;
  ctx.For(s.slices, cost, [&](int64_t begin, int64_t end) {
    for (int64_t slice = begin; slice < end; ++slice) fn(serial, slice);
  });
}

// For `pixels` rows: the first `count` values of src row p (rows `src_stride` apart)
// to dst row p (rows `dst_stride` apart), then zeros up to `fill` values. Gathers a
// slice's channels from NHWC rows and scatters them back; channels past the tensor
// (the last slice's groups of zeros) gather as zeros and are not scattered.
template <typename A>
void CopyRows(const CpuContext& ctx, int64_t pixels, const A* src, int64_t src_stride, A* dst,
              int64_t dst_stride, int64_t count, int64_t fill) {
  ctx.For(CeilDiv(pixels, kPixelBlock), kPixelBlock * fill * kCopyCost, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin * kPixelBlock; p < std::min(pixels, end * kPixelBlock); ++p) {
      std::copy_n(src + p * src_stride, count, dst + p * dst_stride);
      std::fill_n(dst + p * dst_stride + count, fill - count, A(0));
    }
  });
}

// Calls fn(dense, grouped) for every element of slice `slice`'s block-diagonal filter
// [taps, in_depth, out_depth] that lies on one of its groups: its index there and in
// the grouped filter [taps, cg, groups * og]. The elements between groups stay zero.
template <typename Fn>
void ForEachSliceFilterElement(const ConvGeometry& g, const GroupSlices& s, int64_t slice, Fn fn) {
  const int64_t cg = g.group_in_depth(), og = g.group_out_depth(), taps = g.filter_rows * g.filter_cols;
  for (int64_t tap = 0; tap < taps; ++tap)
    for (int64_t ci = 0; ci < s.in_depth; ++ci) {
      const int64_t group = ci / cg, first_co = group * og;
      if (slice * s.groups_per_slice + group >= g.groups) break;  // the zero groups
      const int64_t grouped_row = (tap * cg + ci % cg) * g.out_depth + (slice * s.groups_per_slice + group) * og;
      const int64_t dense_row = (tap * s.in_depth + ci) * s.out_depth + first_co;
      for (int64_t co = 0; co < og; ++co) fn(dense_row + co, grouped_row + co);
    }
}

// The call's tensor in NHWC A: the caller's memory when it already is, else `buf`
// filled from it.
template <typename T, typename A>
const A* AsNhwc(const CpuContext& ctx, DataFormat format, const Dims4& d, const T* src, ScratchBuffer<A>& buf) {
  if constexpr (std::is_same_v<T, A>) {
    if (format == DataFormat::kNHWC) return src;
  }
  ToNhwc(ctx, format, d, src, buf.data());
  return buf.data();
}

// Grouped input gradient: chunks of images, each slice's dy channels gathered, its
// dx computed by the dense rows and scattered back into the chunk's dx.
template <typename T>
void GroupedInputGradient(OpKind op, const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                          const T* out_backprop, T* in_backprop) {
  using A = AccType<T>;
  const GroupSlices s = PlanSlices(geo);
  const int64_t taps = geo.filter_rows * geo.filter_cols, slice_filter = taps * s.in_depth * s.out_depth;
  ScratchVector<A> w(s.slices * slice_filter);  // zero-filled: the blocks between groups
  for (int64_t slice = 0; slice < s.slices; ++slice) {
    A* ws = w.data() + slice * slice_filter;
    ForEachSliceFilterElement(geo, s, slice,
                              [&](int64_t dense, int64_t grouped) { ws[dense] = static_cast<A>(filter[grouped]); });
  }
  const Dims4 dx_dims = InputDims(geo), dy_dims = OutBackpropDims(geo);
  const int64_t in_pixels = geo.in_rows * geo.in_cols, out_pixels = geo.out_rows * geo.out_cols;
  const ChunkPlan plan = PlanChunks(
      geo.batch, 2 * (dx_dims.image() + dy_dims.image()) * static_cast<int64_t>(sizeof(A)), kChunkBytes,
      2 * ctx.num_threads);
  const bool direct_out = std::is_same_v<T, A> && geo.data_format == DataFormat::kNHWC;
  ScratchBuffer<A> dy_buf(plan.images * dy_dims.image());
  ScratchBuffer<A> dx_buf(direct_out ? 0 : plan.images * dx_dims.image());
  for (int64_t n0 = 0; n0 < geo.batch; n0 += plan.images) {
    const int64_t nb = std::min(plan.images, geo.batch - n0);
    Dims4 dyc = dy_dims, dxc = dx_dims;
    dyc.n = dxc.n = nb;
    const A* dy = AsNhwc(ctx, geo.data_format, dyc, out_backprop + n0 * dyc.image(), dy_buf);
    A* dx = nullptr;
    if constexpr (std::is_same_v<T, A>) {
      dx = direct_out ? in_backprop + n0 * dxc.image() : dx_buf.data();
    } else {
      dx = dx_buf.data();
    }
    ForEachSlice(ctx, s, nb * (in_pixels + out_pixels) * s.in_depth * s.out_depth,
                 [&](const CpuContext& run, int64_t slice) {
                   ScratchBuffer<A> dy_slice(nb * out_pixels * s.out_depth);
                   ScratchBuffer<A> dx_slice(nb * in_pixels * s.in_depth);
                   CopyRows(run, nb * out_pixels, dy + slice * s.out_depth, geo.out_depth, dy_slice.data(),
                            s.out_depth, s.real_out(geo, slice), s.out_depth);
                   const ConvGeometry dense = SliceGeometry(geo, s, nb);
                   if (!RunOnNhwc(op, run, dense, w.data() + slice * slice_filter, dy_slice.data(),
                                  dx_slice.data()))
                     throw std::logic_error(kDenseDeclined);
                   const int64_t real_in = s.real_in(geo, slice);
                   CopyRows(run, nb * in_pixels, dx_slice.data(), s.in_depth, dx + slice * s.in_depth,
                            geo.in_depth, real_in, real_in);
                 });
    if (!direct_out) FromNhwc(ctx, geo.data_format, dxc, dx_buf.data(), in_backprop + n0 * dxc.image(), false);
  }
}

// Grouped filter gradient: each slice's dense dW summed over the chunks in order,
// then its diagonal blocks (the groups' filters) written out.
template <typename T>
void GroupedFilterGradient(OpKind op, const CpuContext& ctx, const ConvGeometry& geo, const T* input,
                           const T* out_backprop, T* filter_backprop) {
  using A = AccType<T>;
  const GroupSlices s = PlanSlices(geo);
  const int64_t taps = geo.filter_rows * geo.filter_cols, slice_filter = taps * s.in_depth * s.out_depth;
  const Dims4 x_dims = InputDims(geo), dy_dims = OutBackpropDims(geo);
  const int64_t in_pixels = geo.in_rows * geo.in_cols, out_pixels = geo.out_rows * geo.out_cols;
  const ChunkPlan plan = PlanChunks(
      geo.batch, 2 * (x_dims.image() + dy_dims.image()) * static_cast<int64_t>(sizeof(A)), kChunkBytes, 1);
  ScratchVector<A> dw(s.slices * slice_filter);
  ScratchBuffer<A> x_buf(plan.images * x_dims.image());
  ScratchBuffer<A> dy_buf(plan.images * dy_dims.image());
  for (int64_t n0 = 0; n0 < geo.batch; n0 += plan.images) {
    const int64_t nb = std::min(plan.images, geo.batch - n0);
    Dims4 xc = x_dims, dyc = dy_dims;
    xc.n = dyc.n = nb;
    const A* x = AsNhwc(ctx, geo.data_format, xc, input + n0 * xc.image(), x_buf);
    const A* dy = AsNhwc(ctx, geo.data_format, dyc, out_backprop + n0 * dyc.image(), dy_buf);
    ForEachSlice(ctx, s, nb * (in_pixels + out_pixels) * s.in_depth * s.out_depth,
                 [&](const CpuContext& run, int64_t slice) {
                   ScratchBuffer<A> x_slice(nb * in_pixels * s.in_depth);
                   ScratchBuffer<A> dy_slice(nb * out_pixels * s.out_depth);
                   ScratchBuffer<A> dw_chunk(n0 == 0 ? 0 : slice_filter);
                   CopyRows(run, nb * in_pixels, x + slice * s.in_depth, geo.in_depth, x_slice.data(),
                            s.in_depth, s.real_in(geo, slice), s.in_depth);
                   CopyRows(run, nb * out_pixels, dy + slice * s.out_depth, geo.out_depth, dy_slice.data(),
                            s.out_depth, s.real_out(geo, slice), s.out_depth);
                   A* total = dw.data() + slice * slice_filter;
                   const ConvGeometry dense = SliceGeometry(geo, s, nb);
                   if (!RunOnNhwc(op, run, dense, x_slice.data(), dy_slice.data(), n0 == 0 ? total : dw_chunk.data()))
                     throw std::logic_error(kDenseDeclined);
                   if (n0 == 0) return;
                   const A* add = dw_chunk.data();
                   for (int64_t i = 0; i < slice_filter; ++i) total[i] += add[i];
                 });
  }
  for (int64_t slice = 0; slice < s.slices; ++slice) {
    const A* ws = dw.data() + slice * slice_filter;
    ForEachSliceFilterElement(geo, s, slice, [&](int64_t dense, int64_t grouped) {
      filter_backprop[grouped] = static_cast<T>(ws[dense]);
    });
  }
}

// dx = kernel(filter, dy): shared by the conv2d and depthwise input gradients.
// Variants for the caller's tensors as they are run first. Otherwise the batch
// runs in chunks of images: each chunk's dy is converted / transposed into a
// reused NHWC buffer, the kernel writes the chunk's dx into a second one, which
// goes back to the caller's layout and type. Images are independent, so
// chunking changes no sum.
template <typename T>
Status InputGradient(OpKind op, const CpuContext& ctx, const ConvGeometry& geo, const T* filter,
                     const T* out_backprop, T* in_backprop) {
  if (geo.input_elements == 0) return OkStatus();
  if (geo.filter_elements == 0 || geo.out_backprop_elements == 0) {
    std::fill_n(in_backprop, geo.input_elements, T(0));
    return OkStatus();
  }
  return Guarded([&] {
    if constexpr (cpu::IsFloating(cpu::DtypeOf<T>())) {
      if (NeedsSlices<T>(op, ctx, geo)) return GroupedInputGradient(op, ctx, geo, filter, out_backprop, in_backprop);
    }
    AsIs done = RunAsIs(op, ctx, geo, filter, out_backprop, in_backprop);
    // An integer gradient runs only on rows that take it as it is (their last never
    // declines): the front end converts to float, which is not exact.
    if constexpr (cpu::IsFloating(cpu::DtypeOf<T>())) {
      if (done == AsIs::kFrontEnd) {
        done = InputGradientInChunks(op, ctx, geo, filter, out_backprop, in_backprop) ? AsIs::kRan : AsIs::kDeclined;
      }
      if (done == AsIs::kDeclined) {
        ExpectGroupedDecline(geo);
        GroupedInputGradient(op, ctx, geo, filter, out_backprop, in_backprop);
      }
    } else if (done != AsIs::kRan) {
      throw std::logic_error("no CPU kernel variant accepted the integer call");
    }
  });
}

// The front end's half of FilterGradient: the batch in chunks of images (x and dy
// converted / transposed per chunk into reused buffers); the first chunk's kernel
// writes the float dW directly, each later one writes a scratch dW that is then
// added, in chunk order (deterministic sums). half and bfloat16 round once, at the
// end. False when every variant declined a chunk.
template <typename T>
bool FilterGradientInChunks(OpKind op, const CpuContext& ctx, const ConvGeometry& geo, const T* input,
                            const T* out_backprop, T* filter_backprop) {
  using A = AccType<T>;
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
    if (!RunOnNhwc(op, ctx, ChunkGeometry(geo, nb), x_buf.data(), dy_buf.data(), target)) return false;
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
  return true;
}

// dW = kernel(x, dy): shared by the conv2d and depthwise filter gradients. Float
// NHWC goes straight to the kernel, everything else through the front end's chunks.
template <typename T>
Status FilterGradient(OpKind op, const CpuContext& ctx, const ConvGeometry& geo, const T* input,
                      const T* out_backprop, T* filter_backprop) {
  if (geo.filter_elements == 0) return OkStatus();
  if (geo.input_elements == 0 || geo.out_backprop_elements == 0) {
    std::fill_n(filter_backprop, geo.filter_elements, T(0));
    return OkStatus();
  }
  return Guarded([&] {
    if (NeedsSlices<T>(op, ctx, geo)) return GroupedFilterGradient(op, ctx, geo, input, out_backprop, filter_backprop);
    AsIs done = RunAsIs(op, ctx, geo, input, out_backprop, filter_backprop);
    if (done == AsIs::kFrontEnd) {
      done = FilterGradientInChunks(op, ctx, geo, input, out_backprop, filter_backprop) ? AsIs::kRan : AsIs::kDeclined;
    }
    if (done == AsIs::kDeclined) {
      ExpectGroupedDecline(geo);
      GroupedFilterGradient(op, ctx, geo, input, out_backprop, filter_backprop);
    }
  });
}

}  // namespace

template <typename T>
Status GradientCpu(OpKind op, const CpuContext& ctx, const ConvGeometry& geo, const T* a, const T* b,
                   T* out) {
  if constexpr (cpu::IsFloating(cpu::DtypeOf<T>())) {
    return ComputesInputGrad(op) ? InputGradient(op, ctx, geo, a, b, out) : FilterGradient(op, ctx, geo, a, b, out);
  } else {
    // TF takes int32 in Conv2DBackpropInput alone; the binding registers no other.
    if (op != OpKind::kConv2DBackpropInput) {
      return Internal(std::string(OpName(op)) + ": the CPU engine has no " + cpu::DtypeName(cpu::DtypeOf<T>()) +
                      " kernel for this op");
    }
    return InputGradient(op, ctx, geo, a, b, out);
  }
}

template Status GradientCpu<Eigen::half>(OpKind, const CpuContext&, const ConvGeometry&, const Eigen::half*,
                                         const Eigen::half*, Eigen::half*);
template Status GradientCpu<Eigen::bfloat16>(OpKind, const CpuContext&, const ConvGeometry&,
                                             const Eigen::bfloat16*, const Eigen::bfloat16*, Eigen::bfloat16*);
template Status GradientCpu<float>(OpKind, const CpuContext&, const ConvGeometry&, const float*, const float*,
                                   float*);
template Status GradientCpu<double>(OpKind, const CpuContext&, const ConvGeometry&, const double*,
                                    const double*, double*);
template Status GradientCpu<int32_t>(OpKind, const CpuContext&, const ConvGeometry&, const int32_t*,
                                     const int32_t*, int32_t*);

}  // namespace tf_conv_backprop
