// CUDA kernels for the depthwise gradients (NHWC, see cuda/kernels.h): direct loops
// with the channel dimension across threads and V consecutive channels per thread
// (one aligned vector access), so every warp reads whole channel runs.
//
// Output channel oc = c * M + j (M = depth multiplier) and the filter is
// [KH, KW, C, M], i.e. [tap][oc]: the channels c .. c+V-1 of the input own the
// contiguous output-channel run [c*M, (c+V)*M).
//
// Input gradient: one thread per (input pixel, V input channels), summing over the
// taps whose output position oh = (ih + pad - kh*d) / s is an integer in range, in
// tap order: no reduction across threads.
//
// Filter gradient: dW[tap][oc] = sum over output pixels p of dy[p][oc] * x[pixel of p
// under tap][oc / M]. A block owns `lanes` groups of V output channels (threadIdx.x)
// and a chunk of up to kTapChunk taps held in registers; its `rows` rows of threads
// (threadIdx.y) take the pixels of one split in turn (row r: pixels r, r + rows, ...),
// reading each dy vector once for all taps of the chunk and stepping the pixel's
// coordinates instead of dividing. All threads of the block then add the rows in row
// order through shared memory, and SumFilterSplitsKernel adds the splits. Splits are
// short (a few pixels per thread), so even a 7x7 image spreads over every SM. The
// order of every sum depends only on the geometry (the block shape and the plan come
// from the shapes, not from pointer alignment), so results are bitwise reproducible
// without atomics.
#include <algorithm>

#include "tf_ops/cuda/kernels.h"

namespace tf_conv_backprop {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTapChunk = 9;  // a 3x3 filter in one chunk
constexpr int kMaxLanes = 32;
constexpr int kMaxRows = 64;  // bounds the serial row sum of a block's reduction
// Measured on an H200 (NHWC MobileNet shapes): 512 blocks with at least 4 pixels per
// thread were fastest overall among 512-2048 blocks x 2-8 pixels; each block's
// reduction and partial write cost about as much as a few pixels.
constexpr int64_t kTargetBlocks = 512;
constexpr int64_t kMinPixelsPerThread = 4;
constexpr int64_t kMaxScratchBytes = int64_t{256} << 20;
constexpr int64_t kMaxGridStride = int64_t{1} << 22;  // blocks of a grid-stride loop

template <typename Index>
struct DepthwiseParams : WindowParams<Index> {
  Index depth, multiplier;
  Index pixels_per_split;
  Index step_img, step_rows, step_cols;  // `rows` pixels as whole images, rows and columns
};

template <typename Index>
DepthwiseParams<Index> MakeParams(const ConvGeometry& g) {
  DepthwiseParams<Index> p;
  p.SetWindow(g);
  p.depth = static_cast<Index>(g.in_depth);
  p.multiplier = static_cast<Index>(g.depth_multiplier);
  p.pixels_per_split = 0;
  p.step_img = p.step_rows = p.step_cols = 0;
  return p;
}

// Channels per thread for element type T: 16 bytes of float/half/bfloat16 would need
// more registers than they save, so 4 (2 for double).
template <typename T>
constexpr int VectorWidth() {
  return sizeof(T) == 8 ? 2 : 4;
}

// The output position of tap offset `t` along one axis: true and *o when t >= 0,
// t divides by the stride and t / stride < limit.
template <typename Index>
__device__ __forceinline__ bool OutputIndex(Index t, Index stride, Index limit, Index* o) {
  if (t < 0) return false;
  Index q = t;
  if (stride != 1) {
    q = t / stride;
    if (q * stride != t) return false;
  }
  *o = q;
  return q < limit;
}

// ---- input gradient ------------------------------------------------------------

// V > 1 only when the multiplier is 1 and the depth a multiple of V.
template <typename T, typename Index, int V>
__global__ void __launch_bounds__(kThreads)
    DepthwiseBackpropInputKernel(DepthwiseParams<Index> p, const T* __restrict__ filter, const T* __restrict__ dy,
                                 T* __restrict__ dx, Index total) {
  using A = Acc<T>;
  const Index groups = p.depth / V;
  const Index m = p.multiplier;
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index item = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
       item < total; item += stride) {
    const Index group = item % groups;
    const Index pix = item / groups;
    const Index iw = pix % p.in_cols;
    const Index rest = pix / p.in_cols;
    const Index ih = rest % p.in_rows;
    const Index img = rest / p.in_rows;
    const Index c = group * V;
    A acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = A(0);
    for (Index kh = 0; kh < p.filter_rows; ++kh) {
      const Index tr = ih + p.pad_top - kh * p.dilation_rows;
      if (tr < 0) break;  // and for every later kh
      Index oh;
      if (!OutputIndex(tr, p.stride_rows, p.out_rows, &oh)) continue;
      for (Index kw = 0; kw < p.filter_cols; ++kw) {
        const Index tc = iw + p.pad_left - kw * p.dilation_cols;
        if (tc < 0) break;
        Index ow;
        if (!OutputIndex(tc, p.stride_cols, p.out_cols, &ow)) continue;
        const T* g = dy + ((img * p.out_rows + oh) * p.out_cols + ow) * p.out_depth + c * m;
        const T* w = filter + (kh * p.filter_cols + kw) * p.out_depth + c * m;
        if constexpr (V > 1) {
          A gv[V], wv[V];
          LoadAcc<V>(g, gv);
          LoadAcc<V>(w, wv);
#pragma unroll
          for (int v = 0; v < V; ++v) acc[v] += gv[v] * wv[v];
        } else {
          for (Index j = 0; j < m; ++j) acc[0] += ToAcc(g[j]) * ToAcc(w[j]);
        }
      }
    }
    StoreAcc<V>(dx + pix * p.depth + c, acc);
  }
}

// ---- filter gradient -----------------------------------------------------------

// x at one input pixel for a thread's V output channels oc.. (input channels xc[v]).
template <int V, typename T, typename Index>
__device__ __forceinline__ void LoadInput(const T* xp, Index oc, Index m, const Index (&xc)[V], Acc<T> (&xv)[V]) {
  if (m == 1) {
    LoadAcc<V>(xp + oc, xv);
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) xv[v] = ToAcc(xp[xc[v]]);
  }
}

// Out is T for a one-split plan (final values), Acc<T> for partial sums.
template <typename T, typename Out, typename Index, int V>
__global__ void __launch_bounds__(kThreads)
    DepthwiseBackpropFilterKernel(DepthwiseParams<Index> p, const T* __restrict__ x, const T* __restrict__ dy,
                                  Out* __restrict__ out, Index groups, Index lane_tiles, Index tap_chunks,
                                  Index splits) {
  using A = Acc<T>;
  // Each thread's sums, [row][tap][lane][v], for the block's reduction over rows.
  __shared__ A row_sums[kThreads * kTapChunk * V];
  const int lanes = static_cast<int>(blockDim.x), rows = static_cast<int>(blockDim.y);
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int tid = ty * lanes + tx, threads = lanes * rows, width = lanes * V;
  const Index m = p.multiplier;
  const Index taps = p.filter_rows * p.filter_cols;
  const Index pixels = p.batch * p.out_rows * p.out_cols;
  const Index plane = p.out_rows * p.out_cols;

  for (Index chunk = blockIdx.z; chunk < tap_chunks; chunk += gridDim.z) {
    const Index t0 = chunk * kTapChunk;
    const int nt = static_cast<int>(Min<Index>(kTapChunk, taps - t0));
    // Input offsets of the chunk's taps relative to (oh * s_r, ow * s_c).
    Index dh[kTapChunk], dw[kTapChunk];
#pragma unroll
    for (int t = 0; t < kTapChunk; ++t) {
      const Index tap = t0 + Min<Index>(t, nt - 1);
      const Index kh = tap / p.filter_cols, kw = tap - kh * p.filter_cols;
      dh[t] = kh * p.dilation_rows - p.pad_top;
      dw[t] = kw * p.dilation_cols - p.pad_left;
    }
    // Pixels whose whole chunk window lies inside x (oh * s_r in [row_lo, row_hi), the
    // same for columns) skip the per-tap bounds checks and address each tap by its
    // element offset from the first one. The range is empty when the window is wider
    // than x; the offsets are then never used (and not formed: they could overflow).
    Index min_h = dh[0], max_h = dh[0], min_w = dw[0], max_w = dw[0];
#pragma unroll
    for (int t = 1; t < kTapChunk; ++t) {
      min_h = Min(min_h, dh[t]), max_h = Max(max_h, dh[t]);
      min_w = Min(min_w, dw[t]), max_w = Max(max_w, dw[t]);
    }
    const Index row_lo = -min_h, row_hi = p.in_rows - max_h, col_lo = -min_w, col_hi = p.in_cols - max_w;
    const bool fits = row_lo < row_hi && col_lo < col_hi;
    Index rel[kTapChunk];
#pragma unroll
    for (int t = 0; t < kTapChunk; ++t) {
      rel[t] = fits ? ((dh[t] - dh[0]) * p.in_cols + (dw[t] - dw[0])) * p.depth : Index(0);
    }

    for (Index split = blockIdx.y; split < splits; split += gridDim.y) {
      const Index p_begin = split * p.pixels_per_split;
      const Index p_end = Min<Index>(pixels, p_begin + p.pixels_per_split);
      for (Index tile = blockIdx.x; tile < lane_tiles; tile += gridDim.x) {
        const Index group = tile * lanes + tx;
        const bool lane_ok = group < groups;
        const Index oc = group * V;
        // Input channel of each of this thread's output channels.
        Index xc[V];
#pragma unroll
        for (int v = 0; v < V; ++v) xc[v] = lane_ok ? (oc + v) / m : Index(0);

        A acc[kTapChunk][V];
#pragma unroll
        for (int t = 0; t < kTapChunk; ++t)
#pragma unroll
          for (int v = 0; v < V; ++v) acc[t][v] = A(0);

        if (lane_ok) {
          Index pix = p_begin + ty;
          Index img = pix / plane;
          Index oh = (pix - img * plane) / p.out_cols;
          Index ow = pix - img * plane - oh * p.out_cols;
          for (; pix < p_end; pix += rows) {
            A g[V];
            LoadAcc<V>(dy + pix * p.out_depth + oc, g);
            const Index ihb = oh * p.stride_rows, iwb = ow * p.stride_cols;
            if (ihb >= row_lo && ihb < row_hi && iwb >= col_lo && iwb < col_hi) {
              const T* xp = x + ((img * p.in_rows + ihb + dh[0]) * p.in_cols + iwb + dw[0]) * p.depth;
#pragma unroll
              for (int t = 0; t < kTapChunk; ++t) {
                if (t < nt) {
                  A xv[V];
                  LoadInput<V>(xp + rel[t], oc, m, xc, xv);
#pragma unroll
                  for (int v = 0; v < V; ++v) acc[t][v] += g[v] * xv[v];
                }
              }
            } else {
              const T* x_img = x + img * p.in_rows * p.in_cols * p.depth;
#pragma unroll
              for (int t = 0; t < kTapChunk; ++t) {
                const Index ih = ihb + dh[t], iw = iwb + dw[t];
                if (t < nt && ih >= 0 && ih < p.in_rows && iw >= 0 && iw < p.in_cols) {
                  A xv[V];
                  LoadInput<V>(x_img + (ih * p.in_cols + iw) * p.depth, oc, m, xc, xv);
#pragma unroll
                  for (int v = 0; v < V; ++v) acc[t][v] += g[v] * xv[v];
                }
              }
            }
            // The next pixel of this row: `rows` pixels on, without a division.
            ow += p.step_cols, oh += p.step_rows, img += p.step_img;
            if (ow >= p.out_cols) ow -= p.out_cols, ++oh;
            if (oh >= p.out_rows) oh -= p.out_rows, ++img;
          }
        }

        // Rows added in row order, every thread taking some (tap, channel) sums.
        const int per_row = nt * width;
#pragma unroll
        for (int t = 0; t < kTapChunk; ++t) {
          if (t < nt) {
#pragma unroll
            for (int v = 0; v < V; ++v) row_sums[ty * per_row + t * width + tx * V + v] = acc[t][v];
          }
        }
        __syncthreads();
        const Index c0 = tile * width;
        Out* base = out + (split * taps + t0) * p.out_depth + c0;
        for (int i = tid; i < per_row; i += threads) {
          const int t = i / width, c = i - t * width;
          if (c0 + c >= p.out_depth) continue;
          A s = row_sums[i];
          for (int r = 1; r < rows; ++r) s += row_sums[r * per_row + i];
          if constexpr (std::is_same_v<Out, A>) {
            base[t * p.out_depth + c] = s;
          } else {
            base[t * p.out_depth + c] = FromAcc<T>(s);
          }
        }
        __syncthreads();
      }
    }
  }
}

// The filter-gradient block: `lanes` threads across groups of V output channels, and
// `rows` across pixels. From the shapes only (V nominal), so the summation order never
// depends on pointer alignment. The groups are dealt evenly to the fewest tiles of at
// most kMaxLanes (144 channels: 2 tiles of 18 lanes, not 32 + 4), so few threads idle.
struct FilterBlock {
  int64_t lanes, rows;
};
FilterBlock FilterBlockFor(const ConvGeometry& g, int nominal_v) {
  const int64_t groups = CeilDiv(g.out_depth, nominal_v);
  const int64_t lanes = CeilDiv(groups, CeilDiv(groups, kMaxLanes));
  return {lanes, std::min<int64_t>(kThreads / lanes, kMaxRows)};
}

// out[i] = the sum of the splits' partial sums. A block takes kSumCols consecutive
// outputs; its row r adds splits r, r + rows, ... in order, then row 0 adds the rows
// in order. rows = min(splits, kMaxSumRows) comes from the plan, so the order is fixed
// for a geometry. Unlike SumSplits (one thread per output, splits in turn), the rows
// keep enough loads in flight when hundreds of splits meet a few thousand outputs.
constexpr int kSumCols = 32, kMaxSumRows = 32;

template <typename T, typename Index>
__global__ void __launch_bounds__(kSumCols* kMaxSumRows)
    SumFilterSplitsKernel(const Acc<T>* __restrict__ partial, Index splits, Index count, T* __restrict__ out) {
  __shared__ Acc<T> row_sums[kMaxSumRows][kSumCols];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int rows = static_cast<int>(blockDim.y);
  const Index stride = static_cast<Index>(gridDim.x) * kSumCols;
  for (Index begin = static_cast<Index>(blockIdx.x) * kSumCols; begin < count; begin += stride) {
    const Index i = begin + tx;
    if (i < count) {
      Acc<T> s = partial[ty * count + i];
#pragma unroll 4
      for (Index k = ty + rows; k < splits; k += rows) s += partial[k * count + i];
      row_sums[ty][tx] = s;
    }
    __syncthreads();
    if (ty == 0 && i < count) {
      Acc<T> s = row_sums[0][tx];
      for (int r = 1; r < rows; ++r) s += row_sums[r][tx];
      out[i] = FromAcc<T>(s);
    }
    __syncthreads();
  }
}

template <typename T, typename Index, int V>
Status LaunchInput(cudaStream_t stream, const ConvGeometry& g, const T* filter, const T* dy, T* dx) {
  const DepthwiseParams<Index> p = MakeParams<Index>(g);
  const int64_t total = g.input_elements / V;
  const dim3 grid(GridDim(CeilDiv(total, kThreads), kMaxGridStride));
  return Launch("DepthwiseBackpropInputKernel", DepthwiseBackpropInputKernel<T, Index, V>, grid, dim3(kThreads),
                stream, p, filter, dy, dx, static_cast<Index>(total));
}

template <typename T, typename Index, int V>
Status LaunchFilter(cudaStream_t stream, const ConvGeometry& g, const SplitPlan& plan, const T* x, const T* dy,
                    T* dw, void* scratch) {
  DepthwiseParams<Index> p = MakeParams<Index>(g);
  const FilterBlock b = FilterBlockFor(g, VectorWidth<T>());
  const int64_t plane = g.out_rows * g.out_cols;
  p.pixels_per_split = static_cast<Index>(plan.pixels_per_split);
  p.step_img = static_cast<Index>(b.rows / plane);
  p.step_rows = static_cast<Index>(b.rows % plane / g.out_cols);
  p.step_cols = static_cast<Index>(b.rows % plane % g.out_cols);
  const int64_t groups = g.out_depth / V;
  const int64_t lane_tiles = CeilDiv(groups, b.lanes);
  const int64_t tap_chunks = CeilDiv(g.filter_rows * g.filter_cols, kTapChunk);
  const dim3 grid(GridDim(lane_tiles, kMaxGridX), GridDim(plan.splits, kMaxGridYZ), GridDim(tap_chunks, kMaxGridYZ));
  const dim3 block(static_cast<unsigned>(b.lanes), static_cast<unsigned>(b.rows));
  const Index gr = static_cast<Index>(groups), lt = static_cast<Index>(lane_tiles);
  const Index tc = static_cast<Index>(tap_chunks), sp = static_cast<Index>(plan.splits);
  if (plan.splits == 1) {
    return Launch("DepthwiseBackpropFilterKernel", DepthwiseBackpropFilterKernel<T, T, Index, V>, grid, block,
                  stream, p, x, dy, dw, gr, lt, tc, sp);
  }
  Acc<T>* partial = static_cast<Acc<T>*>(scratch);
  const Status s = Launch("DepthwiseBackpropFilterKernel", DepthwiseBackpropFilterKernel<T, Acc<T>, Index, V>,
                          grid, block, stream, p, x, dy, partial, gr, lt, tc, sp);
  if (!s.ok()) return s;
  const dim3 sum_grid(GridDim(CeilDiv(g.filter_elements, kSumCols), kMaxGridStride));
  const dim3 sum_block(kSumCols, static_cast<unsigned>(std::min<int64_t>(plan.splits, kMaxSumRows)));
  return Launch("SumFilterSplitsKernel", SumFilterSplitsKernel<T, Index>, sum_grid, sum_block, stream, partial,
                sp, static_cast<Index>(g.filter_elements), dw);
}

}  // namespace

SplitPlan PlanDepthwiseBackpropFilter(const ConvGeometry& g, int64_t acc_bytes) {
  SplitPlan plan;
  const int nominal_v = acc_bytes == 8 ? 2 : 4;
  const FilterBlock b = FilterBlockFor(g, nominal_v);
  const int64_t pixels = g.batch * g.out_rows * g.out_cols;
  const int64_t blocks_per_split =
      CeilDiv(CeilDiv(g.out_depth, nominal_v), b.lanes) * CeilDiv(g.filter_rows * g.filter_cols, kTapChunk);
  int64_t splits = std::max<int64_t>(
      1, std::min(CeilDiv(kTargetBlocks, blocks_per_split), CeilDiv(pixels, b.rows * kMinPixelsPerThread)));
  const int64_t max_by_scratch = std::max<int64_t>(1, kMaxScratchBytes / (g.filter_elements * acc_bytes));
  splits = std::min(splits, max_by_scratch);
  plan.pixels_per_split = CeilDiv(CeilDiv(pixels, splits), b.rows) * b.rows;
  plan.splits = CeilDiv(pixels, plan.pixels_per_split);
  plan.partial_elements = g.filter_elements;
  plan.scratch_bytes = plan.splits > 1 ? plan.splits * g.filter_elements * acc_bytes : 0;
  return plan;
}

template <typename T, typename Index>
Status DepthwiseBackpropInputNhwc(cudaStream_t stream, const ConvGeometry& g, const T* filter, const T* dy, T* dx) {
  constexpr int kV = VectorWidth<T>();
  if (g.depth_multiplier == 1 && g.in_depth % kV == 0 && AlignedFor<T>(filter, kV) && AlignedFor<T>(dy, kV) &&
      AlignedFor<T>(dx, kV)) {
    return LaunchInput<T, Index, kV>(stream, g, filter, dy, dx);
  }
  return LaunchInput<T, Index, 1>(stream, g, filter, dy, dx);
}

template <typename T, typename Index>
Status DepthwiseBackpropFilterNhwc(cudaStream_t stream, const ConvGeometry& g, const SplitPlan& plan, const T* x,
                                   const T* dy, T* dw, void* scratch) {
  constexpr int kV = VectorWidth<T>();
  const bool x_ok = g.depth_multiplier != 1 || AlignedFor<T>(x, kV);  // x is read as vectors only when M == 1
  if (g.out_depth % kV == 0 && x_ok && AlignedFor<T>(dy, kV) && AlignedFor<T>(dw, kV) &&
      (plan.splits == 1 || AlignedFor<Acc<T>>(scratch, kV))) {
    return LaunchFilter<T, Index, kV>(stream, g, plan, x, dy, dw, scratch);
  }
  return LaunchFilter<T, Index, 1>(stream, g, plan, x, dy, dw, scratch);
}

#define TCB_INSTANTIATE(T, Index)                                                                                 \
  template Status DepthwiseBackpropInputNhwc<T, Index>(cudaStream_t, const ConvGeometry&, const T*, const T*, T*); \
  template Status DepthwiseBackpropFilterNhwc<T, Index>(cudaStream_t, const ConvGeometry&, const SplitPlan&,      \
                                                        const T*, const T*, T*, void*);
TCB_CUDA_FOR_EACH_TYPE_AND_INDEX(TCB_INSTANTIATE)
#undef TCB_INSTANTIATE

}  // namespace cuda
}  // namespace tf_conv_backprop
