// CUDA kernels for the conv2d gradients, dense and grouped (NHWC, see cuda/kernels.h):
// both are implicit GEMMs tiled through shared memory, never materialising im2col.
//
// Input gradient. dx[n, ih, iw, ci] = sum over (kh, kw, co) of
//   dy[n, oh, ow, co] * w[kh, kw, ci, co],  where ih = oh*s - pad + kh*d
// for every tap whose output position oh = (ih + pad - kh*d) / s is an integer inside
// [0, OH) (the forward convolution "with holes"). Input pixels are grouped by phase,
// ((ih + pad_top) mod s_r, (iw + pad_left) mod s_c): within a phase the same taps are
// valid for every pixel and oh is the pixel's index in the phase plus a per-tap
// constant, so a tile never visits a tap that cannot land (a stride-2 gradient does a
// quarter of the tap work) and needs no division per element. The GEMM per phase is
//   [pixels of the phase] x [Cin], reducing over (valid taps) x [Cout].
// Strides whose phase count would be large (s_r * s_c > kMaxPhases) use one phase
// and test each (pixel, tap) instead. Layers with few tiles (small images, many
// channels) split the reduction over output channels (PlanConv2DBackpropInput):
// each split sums every tap over its range of channels into scratch, and SumSplits
// adds the splits in order, as for the filter gradients below.
//
// Filter gradient. dW[kh, kw, ci, co] = sum over output pixels p = (n, oh, ow) of
//   x[n, oh*s - pad + kh*d, ow*s - pad + kw*d, ci] * dy[p, co]   (0 outside the image)
// i.e. one [Cin] x [Cout] GEMM per tap, reducing over N*OH*OW pixels. Long
// reductions are split over blocks (SplitPlan); each split writes its partial sums to
// scratch and SumSplits adds them in split order: no atomics, bitwise reproducible.
//
// Grouped convolutions (groups > 1, filter [KH, KW, Cg, Cout] with Cg = Cin / groups,
// Og = Cout / groups) are `groups` independent GEMMs of the same shape, run by the
// same launch: the group is folded into the channel-tile index of the grid, so every
// tile lies inside one group and only offsets its pointers by the group's first
// channel. The kernels are templates over kGrouped: a dense convolution runs the
// kGrouped = false instances, where that offset is the constant 0, i.e. the same
// tiles and the same machine code as before groups existed (the grouped arithmetic
// costs registers, enough to make some instances spill):
//   input gradient, per phase and group: [pixels] x [Cg], reducing over taps x Og;
//   filter gradient, per tap and group: [Cg] x [Og], reducing over pixels.
// Rows keep the full tensors' strides (Cin, Cout). Vector accesses need every group
// offset aligned, hence Cg and Og (not just Cin and Cout) multiples of the width.
// Narrow groups waste most of a tile: ResNeXt's Cg = Og = 4 fills 4 of the 64
// columns of an input-gradient tile and 4 of each reduction step, and 4 x 4 of a
// 64 x 64 filter-gradient tile. Correct, but far from cuDNN there; packing several
// groups block-diagonally into one tile would be a kernel family of its own.
//
// float (exact: TF32 not allowed) and double: 64x64 output tiles, 16-deep reduction
// steps, 256 threads each owning a 4x4 block of accumulators (CUDA cores); tiles are loaded as
// 4-element vectors when the channel counts, per group too, are multiples of 4
// (kVec), elementwise otherwise. Accumulation is float (double for double). int32
// (the input gradient only, as TF) runs the same kernel summing in uint32: exact,
// wrapping around as TF's int32 kernel does.
// half and bfloat16: the same tiles on tensor cores (nvcuda::wmma 16x16x16, float
// accumulators): 4 warps of 32x32, 32-deep steps, operands kept in their 16-bit type
// in shared memory and copied there by cp.async several steps ahead of the products
// (16-byte vectors when the channel counts, per group too, are multiples of 8), the
// float results staged through shared memory and rounded once on the way out.
// float with TF32 allowed (TF's default on Ampere and newer, as cuDNN's): the same
// tensor-core kernels on TF32 fragments (16x16x8), 16-deep steps: operands kept as
// float in shared memory (4-element vectors), rounded to nearest TF32 (10 mantissa
// bits) as the fragments load, products summed in float. The reduction order is fixed, so TF32
// results are as reproducible as the exact ones.
#include <algorithm>

#include "tf_ops/cuda/kernels.h"

namespace tf_conv_backprop {
namespace cuda {
namespace {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16;
constexpr int kThreads = 256;  // 16 x 16, each a 4 x 4 block of the tile
constexpr int kMaxPhases = 64;
// The split plan aims at this many blocks (a constant, not the device's size, so a
// geometry always reduces in the same order).
constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMinPixelsPerSplit = 256;
// The same for the tensor-core filter kernels.
constexpr int64_t kTcTargetBlocks = 512;
constexpr int64_t kTcMinPixelsPerSplit = 512;
// Filter gradients take 128 x 128 tiles when that gives at least this many blocks
// (two a multiprocessor on an H200; a constant, as the plans are).
constexpr int64_t kTcMinLargeFilterBlocks = 264;
constexpr int64_t kMaxScratchBytes = int64_t{256} << 20;
// Input gradients with fewer tiles than this split their reduction (3x3 512@7 at
// batch 8 has 56 tiles for a GPU of 132 SMs), each split summing at least
// kMinProductsPerSplit products per element.
constexpr int64_t kMinInputBlocks = kTargetBlocks / 4;
constexpr int64_t kMinProductsPerSplit = 256;
// Splits cover whole reduction steps of every kernel (16 or 32 deep).
constexpr int64_t kSplitStep = 32;

template <typename Index>
struct Conv2DParams : WindowParams<Index> {
  Index in_depth;
  // Grouped convolution: channels per group (in_depth and out_depth when dense).
  Index groups, group_in_depth, group_out_depth;
  // Input gradient: phases per axis (the strides, or 1 and 1 when not phased) and
  // the pads reduced modulo them.
  Index phase_rows, phase_cols, pad_top_mod, pad_left_mod;
  bool phased;
  // Filter gradient: pixels per split. Input gradient: output channels (of a group)
  // per split.
  Index pixels_per_split, channels_per_split;
};

// Whether the input gradient groups its pixels by stride phase (see the top).
bool Phased(const ConvGeometry& g) { return g.stride_rows * g.stride_cols <= kMaxPhases; }

// An input gradient's tile grid: phases, pixel tiles of the largest phase (blocks past
// a smaller phase's end return at once), channel tiles per group.
struct InputGrid {
  int64_t phases, m_tiles, n_tiles;
};
InputGrid InputGridOf(const ConvGeometry& g, int64_t tile = kTileM) {
  const int64_t pr = Phased(g) ? g.stride_rows : 1, pc = Phased(g) ? g.stride_cols : 1;
  const int64_t max_pixels = g.batch * CeilDiv(g.in_rows, pr) * CeilDiv(g.in_cols, pc);
  return {pr * pc, CeilDiv(max_pixels, tile), CeilDiv(g.group_in_depth(), tile)};
}

template <typename Index>
Conv2DParams<Index> MakeParams(const ConvGeometry& g) {
  Conv2DParams<Index> p;
  p.SetWindow(g);
  p.in_depth = static_cast<Index>(g.in_depth);
  p.groups = static_cast<Index>(g.groups);
  p.group_in_depth = static_cast<Index>(g.group_in_depth());
  p.group_out_depth = static_cast<Index>(g.group_out_depth());
  p.phased = Phased(g);
  p.phase_rows = p.phased ? p.stride_rows : 1;
  p.phase_cols = p.phased ? p.stride_cols : 1;
  p.pad_top_mod = static_cast<Index>(g.pad_top % (p.phased ? g.stride_rows : 1));
  p.pad_left_mod = static_cast<Index>(g.pad_left % (p.phased ? g.stride_cols : 1));
  p.pixels_per_split = 0;
  p.channels_per_split = p.group_out_depth;
  return p;
}

// The input-gradient kernels' work comes in phases: a residue class of input rows
// and columns modulo the strides, on which every tap lands for all or none of the
// pixels (phased), or one phase of all pixels. A phase's pixels are rows r0,
// r0 + phase_rows, ... and columns c0, c0 + phase_cols, ... of every image.
template <typename Index>
struct Phase {
  Index r0, c0, nr, nc, pixels;  // pixels over the batch
};

template <typename Index>
__device__ __forceinline__ Phase<Index> PhaseOf(const Conv2DParams<Index>& p, Index phase) {
  const Index pr = phase / p.phase_cols, pc = phase % p.phase_cols;
  Phase<Index> ph;
  ph.r0 = (pr - p.pad_top_mod + p.phase_rows) % p.phase_rows;
  ph.c0 = (pc - p.pad_left_mod + p.phase_cols) % p.phase_cols;
  ph.nr = ph.r0 < p.in_rows ? (p.in_rows - ph.r0 + p.phase_rows - 1) / p.phase_rows : 0;
  ph.nc = ph.c0 < p.in_cols ? (p.in_cols - ph.c0 + p.phase_cols - 1) / p.phase_cols : 0;
  ph.pixels = p.batch * ph.nr * ph.nc;
  return ph;
}

// Pixel m of the phase (m < pixels): its image and phase row and column.
template <typename Index>
__device__ __forceinline__ void Locate(const Phase<Index>& ph, Index m, Index* img, Index* a, Index* b) {
  *img = m / (ph.nr * ph.nc);
  const Index rem = m - *img * (ph.nr * ph.nc);
  *a = rem / ph.nc;
  *b = rem - *a * ph.nc;
}

// Where pixel m of the phase sits in an NHWC dx of `cin` channels.
template <typename Index>
__device__ __forceinline__ Index DxOffset(const Conv2DParams<Index>& p, const Phase<Index>& ph, Index m,
                                          Index cin) {
  Index img, a, b;
  Locate(ph, m, &img, &a, &b);
  return ((img * p.in_rows + ph.r0 + a * p.phase_rows) * p.in_cols + ph.c0 + b * p.phase_cols) * cin;
}

// The taps of an input gradient's phase, walked in (kh, kw) order: the ones that land
// on the phase (all of them when not phased).
template <typename Index>
__device__ __forceinline__ bool TapInPhase(const Conv2DParams<Index>& p, const Phase<Index>& ph, Index kh,
                                           Index kw) {
  return !p.phased || ((ph.r0 + p.pad_top - kh * p.dilation_rows) % p.phase_rows == 0 &&
                       (ph.c0 + p.pad_left - kw * p.dilation_cols) % p.phase_cols == 0);
}
template <typename Index>
__device__ __forceinline__ Index TapsInPhase(const Conv2DParams<Index>& p, const Phase<Index>& ph) {
  if (!p.phased) return p.filter_rows * p.filter_cols;
  Index rows = 0, cols = 0;
  for (Index kh = 0; kh < p.filter_rows; ++kh) rows += (ph.r0 + p.pad_top - kh * p.dilation_rows) % p.phase_rows == 0;
  for (Index kw = 0; kw < p.filter_cols; ++kw) cols += (ph.c0 + p.pad_left - kw * p.dilation_cols) % p.phase_cols == 0;
  return rows * cols;
}
// (kh, kw) = the next tap in the phase after (kh, kw); kh == filter_rows past the last.
template <typename Index>
__device__ __forceinline__ void NextTapInPhase(const Conv2DParams<Index>& p, const Phase<Index>& ph, Index& kh,
                                               Index& kw) {
  do {
    if (++kw == p.filter_cols) {
      kw = 0;
      ++kh;
    }
  } while (kh < p.filter_rows && !TapInPhase(p, ph, kh, kw));
}

// The dy pixel, over the batch, that tap (kh, kw) of the phase reads for the phase's
// pixel (a, b) of image img; *ok whether it reads one (never when !row_ok), 0 if not.
template <typename Index>
__device__ __forceinline__ Index TapDyPixel(const Conv2DParams<Index>& p, const Phase<Index>& ph, bool row_ok,
                                            Index img, Index a, Index b, Index kh, Index kw, bool* ok) {
  Index oh, ow;
  bool in = row_ok;
  if (p.phased) {
    oh = a + (ph.r0 + p.pad_top - kh * p.dilation_rows) / p.phase_rows;
    ow = b + (ph.c0 + p.pad_left - kw * p.dilation_cols) / p.phase_cols;
  } else {
    const Index ih = ph.r0 + a * p.phase_rows, iw = ph.c0 + b * p.phase_cols;
    const Index tr = ih + p.pad_top - kh * p.dilation_rows;
    const Index tc = iw + p.pad_left - kw * p.dilation_cols;
    in = in && tr >= 0 && tc >= 0 && tr % p.stride_rows == 0 && tc % p.stride_cols == 0;
    oh = tr / p.stride_rows;
    ow = tc / p.stride_cols;
  }
  in = in && oh >= 0 && oh < p.out_rows && ow >= 0 && ow < p.out_cols;
  *ok = in;
  return in ? (img * p.out_rows + oh) * p.out_cols + ow : Index(0);
}

// fn(kh, kw, ok, dy_pixel) for every tap in the phase, for the phase's pixel (a, b) of
// image img (see TapDyPixel).
template <typename Index, typename Fn>
__device__ __forceinline__ void ForEachPhaseTap(const Conv2DParams<Index>& p, const Phase<Index>& ph, bool row_ok,
                                                Index img, Index a, Index b, Fn fn) {
  for (Index kh = 0; kh < p.filter_rows; ++kh) {
    for (Index kw = 0; kw < p.filter_cols; ++kw) {
      if (!TapInPhase(p, ph, kh, kw)) continue;
      bool ok;
      const Index dy_pixel = TapDyPixel(p, ph, row_ok, img, a, b, kh, kw, &ok);
      fn(kh, kw, ok, dy_pixel);
    }
  }
}

// fn(ph, split, m0, group, n0) for this block's tiles of an input gradient: (phase,
// split of the output channels, tile of kM pixels of the phase, group, tile of kN of
// the group's input channels, n0 counted from the group's first) in grid-stride
// order, pixel tiles past the phase's pixels skipped (uniformly over the block).
// `n_tiles` is per group; grid y runs over groups * n_tiles, grid z over phases *
// splits. !kGrouped (groups == 1): the group is the constant 0; !kSplit: the split.
template <bool kGrouped, bool kSplit, int kM, int kN, typename Index, typename Fn>
__device__ __forceinline__ void ForEachInputTile(const Conv2DParams<Index>& p, Index phases, Index splits,
                                                 Index m_tiles, Index n_tiles, Fn fn) {
  const Index group_tiles = kGrouped ? n_tiles * p.groups : n_tiles;
  for (Index z = blockIdx.z; z < (kSplit ? phases * splits : phases); z += gridDim.z) {
    const Index phase = kSplit ? z % phases : z, split = kSplit ? z / phases : Index(0);
    const Phase<Index> ph = PhaseOf(p, phase);
    for (Index tile = blockIdx.y; tile < group_tiles; tile += gridDim.y) {
      const Index group = kGrouped ? tile / n_tiles : Index(0), tile_n = tile - group * n_tiles;
      for (Index tile_m = blockIdx.x; tile_m < m_tiles; tile_m += gridDim.x) {
        const Index m0 = tile_m * kM;
        if (m0 >= ph.pixels) break;
        fn(ph, split, m0, group, static_cast<Index>(tile_n * kN));
      }
    }
  }
}

// fn(tap, split, dh, dw, p_begin, p_end, group, m0, n0) for this block's tiles of a
// filter gradient: (tap, split of the pixels [p_begin, p_end), tile of kM of the
// group's input channels, group, tile of kN of its output channels; m0 and n0
// counted from the group's first) in grid-stride order; (dh, dw) is the tap's
// offset from an output pixel's position to the input pixel it reads. `m_tiles` and
// `n_tiles` are per group; grid x runs over groups * n_tiles. !kGrouped: group 0.
template <bool kGrouped, int kM, int kN, typename Index, typename Fn>
__device__ __forceinline__ void ForEachFilterTile(const Conv2DParams<Index>& p, Index taps, Index splits,
                                                  Index m_tiles, Index n_tiles, Fn fn) {
  const Index pixels = p.batch * p.out_rows * p.out_cols;
  const Index group_tiles = kGrouped ? n_tiles * p.groups : n_tiles;
  for (Index z = blockIdx.z; z < taps * splits; z += gridDim.z) {
    const Index tap = z % taps, split = z / taps;
    const Index kh = tap / p.filter_cols, kw = tap - kh * p.filter_cols;
    const Index dh = kh * p.dilation_rows - p.pad_top, dw = kw * p.dilation_cols - p.pad_left;
    const Index p_begin = split * p.pixels_per_split;
    const Index p_end = Min<Index>(pixels, p_begin + p.pixels_per_split);
    for (Index tile_m = blockIdx.y; tile_m < m_tiles; tile_m += gridDim.y) {
      for (Index tile = blockIdx.x; tile < group_tiles; tile += gridDim.x) {
        const Index group = kGrouped ? tile / n_tiles : Index(0), tile_n = tile - group * n_tiles;
        fn(tap, split, dh, dw, p_begin, p_end, group, static_cast<Index>(tile_m * kM),
           static_cast<Index>(tile_n * kN));
      }
    }
  }
}

// The emulator's check of a vector access this file makes without LoadAcc/StoreAcc
// (which check their own): a group offset breaking alignment shows up there.
template <typename T, int V>
__device__ __forceinline__ void CheckVector(const T* p) {
#ifdef TCB_CUDA_EMULATION
  tcb_emulator::CheckAligned(p, sizeof(Pack<T, V>));
#endif
}

// Loads 4 consecutive elements [k, k + 4) of a row of `limit` elements as Acc,
// zeros past the end (or everywhere when !ok).
template <bool kVec, typename T, typename Index>
__device__ __forceinline__ void LoadQuad(const T* row, bool ok, Index k, Index limit, Acc<T> (&v)[4]) {
  if (kVec) {
    if (ok && k < limit) {
      LoadAcc<4>(row + k, v);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = Acc<T>(0);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = (ok && k + i < limit) ? ToAcc(row[k + i]) : Acc<T>(0);
  }
}

// acc += As^T Bs for this thread's 4 x 4 block.
template <typename A>
__device__ __forceinline__ void MultiplyTile(const A (&as)[kTileK][kTileM], const A (&bs)[kTileK][kTileN], int ty,
                                             int tx, A (&acc)[4][4]) {
#pragma unroll
  for (int k = 0; k < kTileK; ++k) {
    A a[4], b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = as[k][ty * 4 + i];
#pragma unroll
    for (int j = 0; j < 4; ++j) b[j] = bs[k][tx * 4 + j];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
  }
}

// Writes 4 consecutive results [c, c + 4) of a row of `limit` elements.
template <bool kVec, typename Out, typename A, typename Index>
__device__ __forceinline__ void StoreQuad(Out* row, Index c, Index limit, const A (&v)[4]) {
  if (kVec) {
    if (c < limit) {
      if constexpr (std::is_same_v<Out, A>) {
        CheckVector<A, 4>(row + c);
        *reinterpret_cast<Pack<A, 4>*>(row + c) = Pack<A, 4>{{v[0], v[1], v[2], v[3]}};
      } else {
        StoreAcc<4>(row + c, v);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (c + j < limit) {
        if constexpr (std::is_same_v<Out, A>) {
          row[c + j] = v[j];
        } else {
          row[c + j] = FromAcc<Out>(v[j]);
        }
      }
    }
  }
}

// ---- input gradient ------------------------------------------------------------

// What an input-gradient kernel writes: dx itself, or a split's partial sums.
template <typename T, bool kSplit>
using SplitOut = std::conditional_t<kSplit, Acc<T>, T>;

// kGrouped: whether groups > 1 (grouped instances hold the group's channel offsets
// in registers; dense ones compile to exactly the ungrouped kernel). kSplit: the
// output channels are split (dx: each split's partial sums, Acc<T>); the split's
// channel range and offsets cost registers (spills) the common single split is spared.
template <typename T, typename Index, bool kVec, bool kGrouped, bool kSplit>
__global__ void __launch_bounds__(kThreads)
    Conv2DBackpropInputKernel(Conv2DParams<Index> p, const T* __restrict__ filter, const T* __restrict__ dy,
                              SplitOut<T, kSplit>* __restrict__ dx, Index m_tiles, Index n_tiles, Index phases,
                              Index splits) {
  using A = Acc<T>;
  __shared__ A as[kTileK][kTileM];
  __shared__ A bs[kTileK][kTileN];
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % 16, ty = tid / 16;
  // Loader roles: row (pixel / input channel) and 4-deep reduction offset.
  const int load_row = tid % 64, load_k = (tid / 64) * 4;
  const Index cin = p.in_depth, cout = p.out_depth;
  const Index gcin = kGrouped ? p.group_in_depth : cin, gcout = kGrouped ? p.group_out_depth : cout;

  const Index split_elements = p.batch * p.in_rows * p.in_cols * cin;

  ForEachInputTile<kGrouped, kSplit, kTileM, kTileN>(p, phases, splits, m_tiles, n_tiles,
                                   [&](const Phase<Index>& ph, Index split, Index m0, Index group, Index n0) {
    // This thread's A row: one input pixel of the phase.
    const Index m = m0 + load_row;
    const bool row_ok = m < ph.pixels;
    Index img = 0, ra = 0, cb = 0;
    if (row_ok) Locate(ph, m, &img, &ra, &cb);
    // This thread's B row: one input channel of the group.
    const Index ci_load = n0 + load_row;
    const bool ci_ok = ci_load < gcin;
    // The group's first output channel, of dy and of the filter's columns. An index,
    // not offset pointers: those would hold two more 64-bit registers through the
    // reduction (the kernel parameters take none) and made grouped instances spill.
    const Index co0 = kGrouped ? group * gcout : Index(0);

    // This split's output channels of the group.
    const Index k_begin = kSplit ? split * p.channels_per_split : Index(0);
    const Index k_end = kSplit ? Min(gcout, k_begin + p.channels_per_split) : gcout;
    A acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = A(0);

    ForEachPhaseTap(p, ph, row_ok, img, ra, cb, [&](Index kh, Index kw, bool ok, Index dy_pixel) {
      const T* dy_row = dy + (dy_pixel * cout + co0);
      const T* w_row = filter + (((kh * p.filter_cols + kw) * gcin + (ci_ok ? ci_load : Index(0))) * cout + co0);
      for (Index k0 = k_begin; k0 < k_end; k0 += kTileK) {
        A va[4], vb[4];
        LoadQuad<kVec>(dy_row, ok, static_cast<Index>(k0 + load_k), k_end, va);
        LoadQuad<kVec>(w_row, ci_ok, static_cast<Index>(k0 + load_k), k_end, vb);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          as[load_k + i][load_row] = va[i];
          bs[load_k + i][load_row] = vb[i];
        }
        __syncthreads();
        MultiplyTile(as, bs, ty, tx, acc);
        __syncthreads();
      }
    });

    // Epilogue: rows ty*4 + i of the tile, channels n0 + tx*4 + [0, 4).
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const Index mm = m0 + ty * 4 + i;
      if (mm >= ph.pixels) break;
      auto* out = dx + ((kSplit ? split * split_elements : Index(0)) + DxOffset(p, ph, mm, cin) +
                        (kGrouped ? group * gcin : Index(0)));
      StoreQuad<kVec>(out, static_cast<Index>(n0 + tx * 4), gcin, acc[i]);
    }
  });
}

// Input gradients of a few input channels (the 7x7 stem's 3): one thread per input
// pixel of a phase, all its channels in registers, summing every tap and output
// channel of dy directly. A GEMM tile would leave 61 of its 64 columns empty: the
// stem's input gradient ran at 0.08-0.16x cuDNN that way on an H200. The filter
// values a step reads are the same for every thread (cached broadcasts).
constexpr int kNarrowMaxChannels = 4;
constexpr int kNarrowThreads = 256;
// Enough pixels to fill the GPU with threads; smaller images keep the GEMM, whose
// splits parallelise long reductions.
constexpr int64_t kNarrowMinPixels = 16384;

// kVec: dy's and the filter's rows are read 16 bytes at a time (their channel count a
// multiple of the vector, both 16-byte aligned): a warp's loads touch 32 rows at once,
// so elementwise loads made it latency-bound on L1 (1.5 ms for the stem).
template <typename T, typename Index, bool kVec>
__global__ void __launch_bounds__(kNarrowThreads)
    Conv2DBackpropInputNarrowKernel(Conv2DParams<Index> p, const T* __restrict__ filter, const T* __restrict__ dy,
                                    T* __restrict__ dx, Index m_blocks, Index phases) {
  using A = Acc<T>;
  constexpr int kV = kVec ? 16 / static_cast<int>(sizeof(T)) : 1;
  const Index cin = p.in_depth, cout = p.out_depth;
  for (Index z = blockIdx.z; z < phases; z += gridDim.z) {
    const Phase<Index> ph = PhaseOf(p, z);
    for (Index mb = blockIdx.x; mb < m_blocks; mb += gridDim.x) {
      const Index m = mb * kNarrowThreads + static_cast<Index>(threadIdx.x);
      if (m >= ph.pixels) break;
      Index img, ra, cb;
      Locate(ph, m, &img, &ra, &cb);
      A acc[kNarrowMaxChannels];
#pragma unroll
      for (int c = 0; c < kNarrowMaxChannels; ++c) acc[c] = A(0);
      ForEachPhaseTap(p, ph, true, img, ra, cb, [&](Index kh, Index kw, bool ok, Index dy_pixel) {
        if (!ok) return;
        const T* d = dy + dy_pixel * cout;
        const T* w = filter + (kh * p.filter_cols + kw) * cin * cout;  // [ci][co]
        for (Index co = 0; co < cout; co += kV) {
          A v[kV];
          LoadAcc<kV>(d + co, v);
#pragma unroll
          for (int c = 0; c < kNarrowMaxChannels; ++c) {
            if (c < cin) {
              A f[kV];
              LoadAcc<kV>(w + c * cout + co, f);
#pragma unroll
              for (int i = 0; i < kV; ++i) acc[c] += v[i] * f[i];
            }
          }
        }
      });
      T* out = dx + DxOffset(p, ph, m, cin);
#pragma unroll
      for (int c = 0; c < kNarrowMaxChannels; ++c) {
        if (c < cin) out[c] = FromAcc<T>(acc[c]);
      }
    }
  }
}

// ---- filter gradient -----------------------------------------------------------

// Folded filter gradients (few input channels per group, see FoldTaps): row m of a
// group's GEMM is (tap, channel) = (m / Cg, m % Cg) instead of one tap's channel m, so
// a tile spans several taps rather than leaving most of its rows empty (the 7x7 stem's
// 3 channels filled 3 of 64 rows, and every tile re-read all of dy). Its A operand is
// gathered element by element: per tile, each row's offset from an output pixel's
// position to the input pixel its tap reads, and its channel (-1: past the last row).
// dW[tap][ci][co] is row tap * Cg + ci either way, so the stores are the same.
template <typename Index, int kRows>
struct FoldedRows {
  Index dh[kRows], dw[kRows], ci[kRows];
};

// Thread tid < kRows fills row tid of the tile starting at row m0 (the caller syncs).
template <typename Index, int kRows>
__device__ __forceinline__ void SetFoldedRows(const Conv2DParams<Index>& p, Index gcin, Index m0, int tid,
                                              FoldedRows<Index, kRows>& rows) {
  if (tid < kRows) {
    const Index m = m0 + tid, tap = m / gcin;
    const Index kh = tap / p.filter_cols, kw = tap - kh * p.filter_cols;
    rows.dh[tid] = kh * p.dilation_rows - p.pad_top;
    rows.dw[tid] = kw * p.dilation_cols - p.pad_left;
    rows.ci[tid] = tap < p.filter_rows * p.filter_cols ? m - tap * gcin : Index(-1);
  }
}

// Row r of a folded tile at output pixel (img, oh, ow) (ok: the pixel exists): x of the
// row's tap and channel, 0 where the tap reads padding. ci0: the group's first channel.
template <typename T, typename Index, int kRows>
__device__ __forceinline__ T FoldedX(const Conv2DParams<Index>& p, const T* x, const FoldedRows<Index, kRows>& rows,
                                     int r, bool ok, Index img, Index oh, Index ow, Index ci0) {
  const Index ci = rows.ci[r];
  const Index ih = oh * p.stride_rows + rows.dh[r], iw = ow * p.stride_cols + rows.dw[r];
  const bool in = ok && ci >= 0 && ih >= 0 && ih < p.in_rows && iw >= 0 && iw < p.in_cols;
  return in ? x[((img * p.in_rows + ih) * p.in_cols + iw) * p.in_depth + ci0 + ci] : FromAcc<T>(Acc<T>(0));
}

// Out is T when the plan has one split (final values), Acc<T> for partial sums.
// kFold: the rows span taps (FoldedRows; m_tiles over taps * Cg, one tap in the grid).
template <typename T, typename Out, typename Index, bool kVec, bool kGrouped, bool kFold>
__global__ void __launch_bounds__(kThreads)
    Conv2DBackpropFilterKernel(Conv2DParams<Index> p, const T* __restrict__ x, const T* __restrict__ dy,
                               Out* __restrict__ out, Index m_tiles, Index n_tiles, Index taps, Index splits) {
  using A = Acc<T>;
  __shared__ A as[kTileK][kTileM];
  __shared__ A bs[kTileK][kTileN];
  __shared__ FoldedRows<Index, kTileM> folded;
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % 16, ty = tid / 16;
  // Loader roles: 4 consecutive channels of one pixel.
  const int load_c = (tid % 16) * 4, load_k = tid / 16;
  const Index cin = p.in_depth, cout = p.out_depth;
  const Index gcin = kGrouped ? p.group_in_depth : cin, gcout = kGrouped ? p.group_out_depth : cout;
  const Index filter_elements = taps * gcin * cout;
  const Index rows = kFold ? taps * gcin : gcin;  // of the GEMM, per group

  ForEachFilterTile<kGrouped, kTileM, kTileN>(p, kFold ? Index(1) : taps, splits, m_tiles, n_tiles,
                             [&](Index tap, Index split, Index dh, Index dw, Index p_begin,
                                 Index p_end, Index group, Index m0, Index n0) {
    // The group's first channels of x and dy (indices: see the input gradient).
    const Index ci0 = kGrouped ? group * gcin : Index(0), co0 = kGrouped ? group * gcout : Index(0);
    if constexpr (kFold) {
      SetFoldedRows(p, gcin, m0, tid, folded);  // the last tile's readers are past its final barrier
      __syncthreads();
    }
    A acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = A(0);

    for (Index k0 = p_begin; k0 < p_end; k0 += kTileK) {
      const Index pix = k0 + load_k;
      bool ok = pix < p_end;
      Index img = 0, oh = 0, ow = 0;
      if (ok) {
        img = pix / (p.out_rows * p.out_cols);
        const Index rem = pix - img * (p.out_rows * p.out_cols);
        oh = rem / p.out_cols;
        ow = rem - oh * p.out_cols;
      }
      const T* dy_row = dy + ((ok ? pix * cout : Index(0)) + co0);
      A va[4], vb[4];
      if constexpr (kFold) {
#pragma unroll
        for (int i = 0; i < 4; ++i) va[i] = ToAcc(FoldedX(p, x, folded, load_c + i, ok, img, oh, ow, ci0));
      } else {
        const Index ih = oh * p.stride_rows + dh, iw = ow * p.stride_cols + dw;
        const bool x_ok = ok && ih >= 0 && ih < p.in_rows && iw >= 0 && iw < p.in_cols;
        const T* x_row = x + ((x_ok ? ((img * p.in_rows + ih) * p.in_cols + iw) * cin : Index(0)) + ci0);
        LoadQuad<kVec>(x_row, x_ok, static_cast<Index>(m0 + load_c), gcin, va);
      }
      LoadQuad<kVec>(dy_row, ok, static_cast<Index>(n0 + load_c), gcout, vb);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        as[load_k][load_c + i] = va[i];
        bs[load_k][load_c + i] = vb[i];
      }
      __syncthreads();
      MultiplyTile(as, bs, ty, tx, acc);
      __syncthreads();
    }

    // dW[tap][ci][group * Og + co]: the group's columns of its Cg filter rows (folded:
    // tap is 0 and row m is tap * Cg + ci).
    Out* base = out + split * filter_elements + tap * gcin * cout + co0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const Index m = m0 + ty * 4 + i;
      if (m < rows) StoreQuad<kVec>(base + m * cout, static_cast<Index>(n0 + tx * 4), gcout, acc[i]);
    }
  });
}

// ---- tensor-core kernels (half, bfloat16; float as TF32) -------------------------
//
// Square tiles of kBM x kBM outputs (TcTile): 64 x 64 with 4 warps of 32 x 32, or, for
// large dense layers, 128 x 128 with 8 warps of 64 x 32, which reads half the operand
// bytes per product: on an H200 the 64 x 64 kernels were bound by L2 throughput (60-66%
// of its peak, tensor pipes 25-43% busy, Nsight Compute). A reduction step takes 64
// bytes of every operand row (32 16-bit elements, or 16 floats), and kStages steps are
// in flight: each thread issues its share of step s + kStages - 1 as cp.async copies
// (16 bytes straight into shared memory, zeros where the tile runs past the data)
// before the warps multiply step s. Rows whose channel counts are not whole 16-byte
// vectors, and the gathered rows of folded filter gradients, are stored by the thread
// itself into the same stages. The accumulators leave through the same shared memory,
// 64 columns at a time, once the steps are done.

namespace wmma = nvcuda::wmma;
constexpr int kTcStepBytes = 64;  // of each operand row per step
// Row padding: 80-, 144- and 272-byte rows put the 8 rows a matrix load reads at once
// in different banks, and keep every fragment's first element 32-byte aligned.
constexpr int kTcPadBytes = 16;
constexpr int kTcLdC = 64 + 4;  // float staging tile: 64 columns at a time

template <int kBM_, int kWarpsM_, int kWarpsN_, int kStages_, int kMinBlocks_>
struct TcTile {
  static constexpr int kBM = kBM_, kBN = kBM_;
  static constexpr int kWarpsM = kWarpsM_, kWarpsN = kWarpsN_;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kFragsM = kBM / kWarpsM / 16, kFragsN = kBN / kWarpsN / 16;
  static constexpr int kStages = kStages_;
  static constexpr int kMinBlocks = kMinBlocks_;  // per SM, for the register budget
  // The loaders: 32 bytes of one row of each operand a thread per step.
  static_assert(kThreads == 2 * kBM, "a thread copies 32 bytes of a row of each operand per step");
  static_assert(kBN % 64 == 0 && (kBN / kWarpsN) <= 64, "a warp's columns lie in one 64-column staging pass");
};
using TcSmall = TcTile<64, 2, 2, 4, 4>;
using TcLarge = TcTile<128, 2, 4, 2, 2>;

// The 16-bit types always run on tensor cores; float does when TF32 is allowed.
template <typename T>
constexpr bool kTensorCore = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
constexpr bool kHasTcKernel = kTensorCore<T> || std::is_same_v<T, float>;
// Whether T's gradients run on tensor cores, given whether TF32 is allowed.
template <typename T>
constexpr bool UsesTensorCores(bool tf32) {
  return kTensorCore<T> || (std::is_same_v<T, float> && tf32);
}

// How the tensor cores take T: the fragments' element type and depth. float is
// TF32 (16x16x8): its fragments hold floats, rounded to TF32 once loaded.
template <typename T>
struct TcOperand {
  using Frag = T;
  static constexpr int kK = 16;
};
template <>
struct TcOperand<float> {
  using Frag = wmma::precision::tf32;
  static constexpr int kK = 8;
};
template <typename T, typename Layout>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, TcOperand<T>::kK, typename TcOperand<T>::Frag, Layout>;
template <typename T, typename Layout>
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, TcOperand<T>::kK, typename TcOperand<T>::Frag, Layout>;
template <typename T>
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, TcOperand<T>::kK, float>;

// Elements of T in one 16-byte vector: the tensor-core kernels' vector unit.
template <typename T>
constexpr int kTcVec = 16 / static_cast<int>(sizeof(T));

// A stage's shapes for element type T and tile Tile. Input gradients keep [row][k]
// tiles (rows of kK elements, kLdK apart), filter gradients [k][row] tiles (kK rows
// of kBM elements, kLdMN apart); each operand of a step is 32 bytes a thread
// (kChunk elements). kInputShared / kFilterShared: the bytes of the stages, which
// the float staging tile of the accumulators (kBM rows of kTcLdC) reuses.
template <typename T, typename Tile>
struct TcShape {
  static constexpr int kSize = static_cast<int>(sizeof(T));
  static constexpr int kK = kTcStepBytes / kSize;
  static constexpr int kLdK = (kTcStepBytes + kTcPadBytes) / kSize;
  static constexpr int kLdMN = Tile::kBM + kTcPadBytes / kSize;
  static constexpr int kChunk = 32 / kSize;
  static constexpr int kInputStage = 2 * Tile::kBM * kLdK;  // elements: A then B
  static constexpr int kFilterStage = 2 * kK * kLdMN;
  static constexpr int kStaging = Tile::kBM * kTcLdC * 4;
  static constexpr int kInputShared = std::max(Tile::kStages * kInputStage * kSize, kStaging);
  static constexpr int kFilterShared = std::max(Tile::kStages * kFilterStage * kSize, kStaging);
  static_assert(Tile::kBM * kK * kSize == Tile::kThreads * 32, "32 bytes a thread per operand");
};

// wmma::load_matrix_sync, then float rounded to nearest TF32: the tensor cores would
// otherwise drop its low 13 bits (truncation, a biased error).
template <typename T, typename Frag>
__device__ __forceinline__ void LoadOperand(Frag& f, const T* p, unsigned ldm) {
  wmma::load_matrix_sync(f, p, ldm);
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int t = 0; t < f.num_elements; ++t) f.x[t] = wmma::__float_to_tf32(f.x[t]);
  }
}

// dst[0, kChunk) = row[k, k + kChunk) (32 bytes) of a row of `limit` elements, zeros
// outside (or everywhere when !ok). kVec: limit % kTcVec<T> == 0 and row 16-byte
// aligned, so each 16-byte vector is in or out as a whole and is copied
// asynchronously (the caller commits and waits); otherwise stored at once.
template <bool kVec, typename T, typename Index>
__device__ __forceinline__ void StageChunk(const T* row, bool ok, Index k, Index limit, T* dst) {
  constexpr int kN = 32 / static_cast<int>(sizeof(T));
  if (kVec) {
    constexpr int kV = kTcVec<T>;
#pragma unroll
    for (int h = 0; h < kN; h += kV) {
      const bool in = ok && k + h < limit;
      CopyAsync16(dst + h, in ? row + k + h : row, in);
    }
  } else {
    const T zero = FromAcc<T>(0.0f);
#pragma unroll
    for (int i = 0; i < kN; ++i) dst[i] = (ok && k + i < limit) ? row[k + i] : zero;
  }
}


// out[c0 + [0, 32)) = row of the staged tile, columns past `limit` skipped.
// kVec: limit % kTcVec<T> == 0 and out 16-byte aligned (T: the tensors' type; Out is
// T, or float for partial sums).
template <bool kVec, typename T, typename Out, typename Index>
__device__ __forceinline__ void StoreRow32(Out* out, const float* staged, Index c0, Index limit) {
  if (kVec) {
    // Whole vectors of T are in or out; each is written in 16-byte stores of Out (a
    // wider Pack would ask for an alignment the host never checked).
    constexpr int kU = kTcVec<T>, kV = 16 / sizeof(Out);
#pragma unroll
    for (int q = 0; q < 32; q += kU) {
      if (c0 + q < limit) {
#pragma unroll
        for (int h = 0; h < kU; h += kV) {
          Pack<Out, kV> v;
#pragma unroll
          for (int i = 0; i < kV; ++i) v.v[i] = FromAcc<Out>(staged[q + h + i]);
          CheckVector<Out, kV>(out + c0 + q + h);
          *reinterpret_cast<Pack<Out, kV>*>(out + c0 + q + h) = v;
        }
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 32; ++i)
      if (c0 + i < limit) out[c0 + i] = FromAcc<Out>(staged[i]);
  }
}

// Writes the block's accumulators through cs, 64 columns at a time: warp (wm, wn)
// holds rows wm * kBM / kWarpsM + 16 i and columns wn * kBN / kWarpsN + 16 j; thread tid
// gets row tid / 2 and the 32 columns from c = 64 * pass + (tid % 2) * 32, as
// store(row, c, staged). The caller's steps must be done (RunStages' final barrier).
template <typename Tile, typename Frag, typename Store>
__device__ __forceinline__ void StoreTile(float* cs, int wm, int wn, Frag (&acc)[Tile::kFragsM][Tile::kFragsN],
                                          int tid, Store store) {
  constexpr int kWarpRows = Tile::kBM / Tile::kWarpsM, kWarpCols = Tile::kBN / Tile::kWarpsN;
#pragma unroll
  for (int pass = 0; pass < Tile::kBN / 64; ++pass) {
    if (wn * kWarpCols / 64 == pass) {
#pragma unroll
      for (int i = 0; i < Tile::kFragsM; ++i)
#pragma unroll
        for (int j = 0; j < Tile::kFragsN; ++j)
          wmma::store_matrix_sync(cs + (wm * kWarpRows + 16 * i) * kTcLdC + wn * kWarpCols - 64 * pass + 16 * j,
                                  acc[i][j], kTcLdC, wmma::mem_row_major);
    }
    __syncthreads();
    store(tid / 2, 64 * pass + (tid % 2) * 32, cs + (tid / 2) * kTcLdC + (tid % 2) * 32);
    __syncthreads();  // cs is rewritten by the next pass, or the next tile's stages
  }
}

// The pipeline of a tile's `steps` reduction steps: issue(s, stage) fills stage
// buffer `stage` with step s (asynchronously where it can), multiply(stage) runs the
// warps' products on it. Issues kStages - 1 steps ahead; one barrier a step (the
// buffer refilled at step s was last read at step s - 1, before that barrier). Leaves
// no copy in flight and every thread past the last product, so the caller may reuse
// the stages' memory. `steps` must be the same for the whole block.
template <int kStages, typename Index, typename Issue, typename Multiply>
__device__ __forceinline__ void RunStages(Index steps, Issue issue, Multiply multiply) {
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) issue(Index(s), s);
    CommitAsync();  // empty groups too: the count WaitAsync relies on stays one a step
  }
  int stage = 0, next = kStages - 1;
  for (Index s = 0; s < steps; ++s) {
    WaitAsync<kStages - 2>();  // step s has landed (this thread's copies)
    __syncthreads();           // ... everyone's, and step s - 1's buffer is free
    if (s + kStages - 1 < steps) issue(static_cast<Index>(s + kStages - 1), next);
    CommitAsync();
    multiply(stage);
    stage = stage + 1 == kStages ? 0 : stage + 1;
    next = next + 1 == kStages ? 0 : next + 1;
  }
  WaitAsync<0>();
  __syncthreads();
}

template <typename T, typename Tile, typename Index, bool kVec, bool kGrouped, bool kSplit>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    Conv2DBackpropInputTcKernel(Conv2DParams<Index> p, const T* __restrict__ filter, const T* __restrict__ dy,
                                SplitOut<T, kSplit>* __restrict__ dx, Index m_tiles, Index n_tiles, Index phases,
                                Index splits) {
  using S = TcShape<T, Tile>;
  constexpr int kWarpRows = Tile::kBM / Tile::kWarpsM, kWarpCols = Tile::kBN / Tile::kWarpsN;
  // Stage: as[pixel][out channel], then bs[in channel][out channel] (B column-major).
  alignas(128) __shared__ unsigned char smem[S::kInputShared];
  T* const stages = reinterpret_cast<T*>(smem);
  float* const cs = reinterpret_cast<float*>(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, wm = warp / Tile::kWarpsN, wn = warp % Tile::kWarpsN;
  // Loader role: row tid / 2 of both tiles, 32 bytes from (tid % 2) * 32.
  const int load_row = tid / 2, load_k = (tid % 2) * S::kChunk;
  const Index cin = p.in_depth, cout = p.out_depth;
  const Index gcin = kGrouped ? p.group_in_depth : cin, gcout = kGrouped ? p.group_out_depth : cout;

  const Index split_elements = p.batch * p.in_rows * p.in_cols * cin;

  ForEachInputTile<kGrouped, kSplit, Tile::kBM, Tile::kBN>(p, phases, splits, m_tiles, n_tiles,
                               [&](const Phase<Index>& ph, Index split, Index m0, Index group, Index n0) {
    const Index m = m0 + load_row;
    const bool row_ok = m < ph.pixels;
    Index img = 0, ra = 0, cb = 0;
    if (row_ok) Locate(ph, m, &img, &ra, &cb);
    const Index ci_load = n0 + load_row;
    const bool ci_ok = ci_load < gcin;
    const Index co0 = kGrouped ? group * gcout : Index(0);  // see Conv2DBackpropInputKernel

    const Index k_begin = kSplit ? split * p.channels_per_split : Index(0);
    const Index k_end = kSplit ? Min(gcout, k_begin + p.channels_per_split) : gcout;
    FragAcc<T> acc[Tile::kFragsM][Tile::kFragsN];
#pragma unroll
    for (int i = 0; i < Tile::kFragsM; ++i)
#pragma unroll
      for (int j = 0; j < Tile::kFragsN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    // Steps: the phase's taps in order, each over the split's channels in steps of kK.
    // The issuing cursor: tap (kh, kw), channel k0, and this thread's rows for the tap.
    Index kh = 0, kw = -1, k0 = k_begin;
    bool ok = false;
    const T* dy_row = dy;
    const T* w_row = filter;
    auto enter_tap = [&] {
      NextTapInPhase(p, ph, kh, kw);
      if (kh == p.filter_rows) return;
      const Index dy_pixel = TapDyPixel(p, ph, row_ok, img, ra, cb, kh, kw, &ok);
      dy_row = dy + (dy_pixel * cout + co0);
      w_row = filter + (((kh * p.filter_cols + kw) * gcin + (ci_ok ? ci_load : Index(0))) * cout + co0);
    };
    enter_tap();
    const Index steps = TapsInPhase(p, ph) * ((k_end - k_begin + S::kK - 1) / S::kK);

    RunStages<Tile::kStages>(steps, [&](Index, int stage) {
      T* as = stages + stage * S::kInputStage;
      T* bs = as + Tile::kBM * S::kLdK;
      StageChunk<kVec>(dy_row, ok, static_cast<Index>(k0 + load_k), k_end, as + load_row * S::kLdK + load_k);
      StageChunk<kVec>(w_row, ci_ok, static_cast<Index>(k0 + load_k), k_end, bs + load_row * S::kLdK + load_k);
      k0 += S::kK;
      if (k0 >= k_end) {
        k0 = k_begin;
        enter_tap();
      }
    }, [&](int stage) {
      const T* as = stages + stage * S::kInputStage;
      const T* bs = as + Tile::kBM * S::kLdK;
#pragma unroll
      for (int kk = 0; kk < S::kK; kk += TcOperand<T>::kK) {
        FragA<T, wmma::row_major> a[Tile::kFragsM];
        FragB<T, wmma::col_major> b[Tile::kFragsN];
#pragma unroll
        for (int i = 0; i < Tile::kFragsM; ++i)
          LoadOperand<T>(a[i], as + (wm * kWarpRows + 16 * i) * S::kLdK + kk, S::kLdK);
#pragma unroll
        for (int j = 0; j < Tile::kFragsN; ++j)
          LoadOperand<T>(b[j], bs + (wn * kWarpCols + 16 * j) * S::kLdK + kk, S::kLdK);
#pragma unroll
        for (int i = 0; i < Tile::kFragsM; ++i)
#pragma unroll
          for (int j = 0; j < Tile::kFragsN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    });

    StoreTile<Tile>(cs, wm, wn, acc, tid, [&](int row, int c, const float* staged) {
      const Index mm = m0 + row;
      if (mm >= ph.pixels) return;
      auto* out = dx + ((kSplit ? split * split_elements : Index(0)) + DxOffset(p, ph, mm, cin) +
                        (kGrouped ? group * gcin : Index(0)));
      StoreRow32<kVec, T>(out, staged, static_cast<Index>(n0 + c), gcin);
    });
  });
}

template <typename T, typename Tile, typename Out, typename Index, bool kVec, bool kGrouped, bool kFold>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    Conv2DBackpropFilterTcKernel(Conv2DParams<Index> p, const T* __restrict__ x, const T* __restrict__ dy,
                                 Out* __restrict__ out, Index m_tiles, Index n_tiles, Index taps, Index splits) {
  using S = TcShape<T, Tile>;
  constexpr int kWarpRows = Tile::kBM / Tile::kWarpsM, kWarpCols = Tile::kBN / Tile::kWarpsN;
  // Stage: as[pixel][in channel] (A column-major), then bs[pixel][out channel].
  alignas(128) __shared__ unsigned char smem[S::kFilterShared];
  __shared__ FoldedRows<Index, Tile::kBM> folded;
  T* const stages = reinterpret_cast<T*>(smem);
  float* const cs = reinterpret_cast<float*>(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, wm = warp / Tile::kWarpsN, wn = warp % Tile::kWarpsN;
  // Loader role: pixel load_k of the step, 32 bytes of its channels from load_c.
  constexpr int kRowThreads = Tile::kBM / S::kChunk;
  const int load_k = tid / kRowThreads, load_c = (tid % kRowThreads) * S::kChunk;
  const Index cin = p.in_depth, cout = p.out_depth;
  const Index gcin = kGrouped ? p.group_in_depth : cin, gcout = kGrouped ? p.group_out_depth : cout;
  const Index filter_elements = taps * gcin * cout;
  const Index rows = kFold ? taps * gcin : gcin;  // of the GEMM, per group

  ForEachFilterTile<kGrouped, Tile::kBM, Tile::kBN>(p, kFold ? Index(1) : taps, splits, m_tiles, n_tiles,
                             [&](Index tap, Index split, Index dh, Index dw, Index p_begin,
                                 Index p_end, Index group, Index m0, Index n0) {
    const Index ci0 = kGrouped ? group * gcin : Index(0), co0 = kGrouped ? group * gcout : Index(0);
    if constexpr (kFold) {
      SetFoldedRows(p, gcin, m0, tid, folded);  // the last tile's readers are past its final barrier
      __syncthreads();
    }
    FragAcc<T> acc[Tile::kFragsM][Tile::kFragsN];
#pragma unroll
    for (int i = 0; i < Tile::kFragsM; ++i)
#pragma unroll
      for (int j = 0; j < Tile::kFragsN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    const Index steps = (p_end - p_begin + S::kK - 1) / S::kK;
    RunStages<Tile::kStages>(steps, [&](Index s, int stage) {
      T* as = stages + stage * S::kFilterStage;
      T* bs = as + S::kK * S::kLdMN;
      const Index pix = p_begin + s * S::kK + load_k;
      const bool ok = pix < p_end;
      Index img = 0, oh = 0, ow = 0;
      if (ok) {
        img = pix / (p.out_rows * p.out_cols);
        const Index rem = pix - img * (p.out_rows * p.out_cols);
        oh = rem / p.out_cols;
        ow = rem - oh * p.out_cols;
      }
      const T* dy_row = dy + ((ok ? pix * cout : Index(0)) + co0);
      if constexpr (kFold) {
#pragma unroll
        for (int i = 0; i < S::kChunk; ++i) {
          as[load_k * S::kLdMN + load_c + i] = FoldedX(p, x, folded, load_c + i, ok, img, oh, ow, ci0);
        }
      } else {
        const Index ih = oh * p.stride_rows + dh, iw = ow * p.stride_cols + dw;
        const bool x_ok = ok && ih >= 0 && ih < p.in_rows && iw >= 0 && iw < p.in_cols;
        const T* x_row = x + ((x_ok ? ((img * p.in_rows + ih) * p.in_cols + iw) * cin : Index(0)) + ci0);
        StageChunk<kVec>(x_row, x_ok, static_cast<Index>(m0 + load_c), gcin, as + load_k * S::kLdMN + load_c);
      }
      StageChunk<kVec>(dy_row, ok, static_cast<Index>(n0 + load_c), gcout, bs + load_k * S::kLdMN + load_c);
    }, [&](int stage) {
      const T* as = stages + stage * S::kFilterStage;
      const T* bs = as + S::kK * S::kLdMN;
#pragma unroll
      for (int kk = 0; kk < S::kK; kk += TcOperand<T>::kK) {
        FragA<T, wmma::col_major> a[Tile::kFragsM];
        FragB<T, wmma::row_major> b[Tile::kFragsN];
#pragma unroll
        for (int i = 0; i < Tile::kFragsM; ++i)
          LoadOperand<T>(a[i], as + kk * S::kLdMN + wm * kWarpRows + 16 * i, S::kLdMN);
#pragma unroll
        for (int j = 0; j < Tile::kFragsN; ++j)
          LoadOperand<T>(b[j], bs + kk * S::kLdMN + wn * kWarpCols + 16 * j, S::kLdMN);
#pragma unroll
        for (int i = 0; i < Tile::kFragsM; ++i)
#pragma unroll
          for (int j = 0; j < Tile::kFragsN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    });

    // Folded: tap is 0 and row m is tap * Cg + ci.
    StoreTile<Tile>(cs, wm, wn, acc, tid, [&](int row, int c, const float* staged) {
      const Index m = m0 + row;
      if (m >= rows) return;
      Out* dst = out + split * filter_elements + (tap * gcin + m) * cout + co0;
      StoreRow32<kVec, T>(dst, staged, static_cast<Index>(n0 + c), gcout);
    });
  });
}

// Whether every row a kernel reads or writes, at every group's offset, starts on a
// multiple of `v` elements and spans whole vectors: the rows' strides (Cin, Cout),
// the groups' first channels and extents (multiples of Cg, Og) all multiples of v.
bool ChannelsVec(const ConvGeometry& g, int64_t v) {
  return g.in_depth % v == 0 && g.out_depth % v == 0 && g.group_in_depth() % v == 0 &&
         g.group_out_depth() % v == 0;
}

template <typename T>
bool VecOk(const ConvGeometry& g, const void* a, const void* b, const void* c) {
  return ChannelsVec(g, 4) && AlignedFor<T>(a, 4) && AlignedFor<T>(b, 4) && AlignedFor<T>(c, 4);
}

// The tensor-core kernels' vector condition: 16-byte accesses (8 16-bit elements, 4 floats).
template <typename T>
bool TcVecOk(const ConvGeometry& g, const void* a, const void* b, const void* c) {
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return ChannelsVec(g, kTcVec<T>) && aligned(a) && aligned(b) && aligned(c);
}

// pick(bool_constant<flags>...) for run-time flags: turns them into the template
// arguments of the kernel instance pick returns.
template <typename Pick>
auto Instance(Pick pick) {
  return pick();
}
template <typename Pick, typename... Rest>
auto Instance(Pick pick, bool flag, Rest... rest) {
  return flag ? Instance([&](auto... more) { return pick(std::true_type{}, more...); }, rest...)
              : Instance([&](auto... more) { return pick(std::false_type{}, more...); }, rest...);
}

// The kernel instances for (vec, grouped[, fold]); the tensor-core ones with 64 x 64
// tiles, or 128 x 128 (large: dense, unfolded, whole vectors only).
template <typename T, typename Index, bool kSplit>
auto TcInputKernel(bool large, bool vec, bool grouped) {
  return large ? Conv2DBackpropInputTcKernel<T, TcLarge, Index, true, false, kSplit>
               : Instance([](auto v, auto gr) {
                   return Conv2DBackpropInputTcKernel<T, TcSmall, Index, v(), gr(), kSplit>;
                 }, vec, grouped);
}
template <typename T, typename Index, bool kSplit>
auto InputKernel(bool vec, bool grouped) {
  return Instance([](auto v, auto gr) { return Conv2DBackpropInputKernel<T, Index, v(), gr(), kSplit>; }, vec,
                  grouped);
}
template <typename T, typename Out, typename Index>
auto TcFilterKernel(bool large, bool vec, bool grouped, bool fold) {
  return large ? Conv2DBackpropFilterTcKernel<T, TcLarge, Out, Index, true, false, false>
               : Instance([](auto v, auto gr, auto f) {
                   return Conv2DBackpropFilterTcKernel<T, TcSmall, Out, Index, v(), gr(), f()>;
                 }, vec, grouped, fold);
}
template <typename T, typename Out, typename Index>
auto FilterKernel(bool vec, bool grouped, bool fold) {
  return Instance([](auto v, auto gr, auto f) { return Conv2DBackpropFilterKernel<T, Out, Index, v(), gr(), f()>; },
                  vec, grouped, fold);
}

// Whether a filter gradient folds its taps into the GEMM rows (FoldedRows): when a
// group's input channels fill at most a quarter of a tile's 64 rows and there are
// taps to fold. The gathered A operand costs scalar loads; the threshold is a first
// guess, not measured (no GPU at hand when it was written).
bool FoldTaps(const ConvGeometry& g) {
  return g.filter_rows * g.filter_cols > 1 && 4 * g.group_in_depth() <= kTileM;
}

// The folded kernels' vector condition: dy and dW (and the partial sums) only, x is gathered.
bool FoldedVecOk(const ConvGeometry& g, int64_t v, int64_t bytes, const void* dy, const void* dw,
                 const void* scratch) {
  auto aligned = [bytes](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; };
  return g.out_depth % v == 0 && g.group_out_depth() % v == 0 && aligned(dy) && aligned(dw) && aligned(scratch);
}
}  // namespace

bool NarrowInput(const ConvGeometry& g) {
  return g.groups == 1 && g.in_depth <= kNarrowMaxChannels && g.batch * g.in_rows * g.in_cols >= kNarrowMinPixels;
}

GemmTiles ChooseGemmTiles(OpKind op, const ConvGeometry& g, bool tensor_cores, int force_tile) {
  if (!tensor_cores) return GemmTiles::kCudaCores;
  const bool input_grad = op == OpKind::kConv2DBackpropInput;
  if (g.groups != 1 || (!input_grad && FoldTaps(g))) return GemmTiles::kTensor64;  // no large instances
  if (force_tile == 64 || force_tile == 128) return force_tile == 64 ? GemmTiles::kTensor64 : GemmTiles::kTensor128;
  // Large tiles where they still leave a few blocks a multiprocessor (input gradients
  // unsplit, filter gradients split over at most kTcMinPixelsPerSplit pixels).
  if (input_grad) {
    const InputGrid large = InputGridOf(g, TcLarge::kBM);
    return g.in_depth >= TcLarge::kBN && large.phases * large.m_tiles * large.n_tiles >= kMinInputBlocks
               ? GemmTiles::kTensor128
               : GemmTiles::kTensor64;
  }
  const int64_t pixels = g.batch * g.out_rows * g.out_cols;
  const int64_t tiles = g.filter_rows * g.filter_cols * CeilDiv(g.in_depth, TcLarge::kBM) *
                        CeilDiv(g.out_depth, TcLarge::kBN);
  return g.in_depth >= TcLarge::kBM && g.out_depth >= TcLarge::kBN &&
                 tiles * CeilDiv(pixels, kTcMinPixelsPerSplit) >= kTcMinLargeFilterBlocks
             ? GemmTiles::kTensor128
             : GemmTiles::kTensor64;
}

namespace {
int64_t TileSize(GemmTiles tiles) { return tiles == GemmTiles::kTensor128 ? TcLarge::kBM : kTileM; }
}  // namespace

SplitPlan PlanConv2DBackpropInput(const ConvGeometry& g, int64_t acc_bytes, GemmTiles gemm_tiles) {
  SplitPlan plan;
  const InputGrid tiles = InputGridOf(g, TileSize(gemm_tiles));
  const int64_t blocks = tiles.phases * tiles.m_tiles * tiles.n_tiles * g.groups;
  const int64_t gcout = g.group_out_depth();
  const int64_t taps_per_phase = std::max<int64_t>(1, g.filter_rows * g.filter_cols / tiles.phases);
  int64_t splits = 1;
  if (blocks == 0 || gcout == 0 || g.input_elements == 0) return plan;  // nothing to reduce: the engine zero-fills
  if (blocks < kMinInputBlocks && !NarrowInput(g)) {
    splits = std::min({CeilDiv(kTargetBlocks / 2, blocks), taps_per_phase * gcout / kMinProductsPerSplit,
                       CeilDiv(gcout, kSplitStep), kMaxScratchBytes / (g.input_elements * acc_bytes)});
    splits = std::max<int64_t>(1, splits);
  }
  plan.channels_per_split = CeilDiv(CeilDiv(gcout, splits), kSplitStep) * kSplitStep;  // whole steps of either kernel
  plan.splits = CeilDiv(gcout, plan.channels_per_split);
  plan.partial_elements = g.input_elements;
  plan.scratch_bytes = plan.splits > 1 ? plan.splits * g.input_elements * acc_bytes : 0;
  return plan;
}

SplitPlan PlanConv2DBackpropFilter(const ConvGeometry& g, int64_t acc_bytes, GemmTiles gemm_tiles) {
  SplitPlan plan;
  const int64_t pixels = g.batch * g.out_rows * g.out_cols;
  const int64_t taps = g.filter_rows * g.filter_cols;
  const int64_t t = TileSize(gemm_tiles);
  const int64_t row_tiles =
      FoldTaps(g) ? CeilDiv(taps * g.group_in_depth(), t) : taps * CeilDiv(g.group_in_depth(), t);
  const int64_t tiles = row_tiles * g.groups * CeilDiv(g.group_out_depth(), t);
  // A tensor-core block's pipeline pays off over long ranges, and every split costs a
  // whole filter of partial sums written and read again. Not so for folded rows, which
  // gather x element by element: on the long ranges RegNetX's w8/w16 filter gradients
  // (12-38 tiles) got 120-182 blocks instead of 210-350 and ran 1.1-1.5x slower.
  const bool long_ranges = gemm_tiles != GemmTiles::kCudaCores && !FoldTaps(g);
  const int64_t target_blocks = !long_ranges ? kTargetBlocks
                                : gemm_tiles == GemmTiles::kTensor128 ? kTcTargetBlocks / 2 : kTcTargetBlocks;
  const int64_t min_pixels = long_ranges ? kTcMinPixelsPerSplit : kMinPixelsPerSplit;
  int64_t splits = std::max<int64_t>(1, std::min(CeilDiv(target_blocks, tiles), CeilDiv(pixels, min_pixels)));
  const int64_t max_by_scratch = std::max<int64_t>(1, kMaxScratchBytes / (g.filter_elements * acc_bytes));
  splits = std::min(splits, max_by_scratch);
  plan.pixels_per_split = CeilDiv(CeilDiv(pixels, splits), kSplitStep) * kSplitStep;  // whole steps of either kernel
  plan.splits = CeilDiv(pixels, plan.pixels_per_split);
  plan.partial_elements = g.filter_elements;
  plan.scratch_bytes = plan.splits > 1 ? plan.splits * g.filter_elements * acc_bytes : 0;
  return plan;
}

template <typename T, typename Index>
Status Conv2DBackpropInputNhwc(cudaStream_t stream, const ConvGeometry& g, GemmTiles gemm_tiles,
                               const SplitPlan& plan, const T* filter, const T* dy, T* dx, void* scratch) {
  Conv2DParams<Index> p = MakeParams<Index>(g);
  p.channels_per_split = static_cast<Index>(plan.channels_per_split);
  const bool tensor_cores = kTensorCore<T> || gemm_tiles != GemmTiles::kCudaCores;
  // One split: final values straight into dx; else partial sums into scratch, then SumSplits.
  Acc<T>* partial = static_cast<Acc<T>*>(scratch);
  const bool grouped = g.groups > 1;
  Status s;
  // The groups' channel tiles side by side in grid y, the splits' phases in grid z.
  auto launch = [&](const char* name, auto kernel_single, auto kernel_split, int64_t tile, int threads) {
    const InputGrid tiles = InputGridOf(g, tile);
    const dim3 grid(GridDim(tiles.m_tiles, kMaxGridX), GridDim(tiles.n_tiles * g.groups, kMaxGridYZ),
                    GridDim(tiles.phases * plan.splits, kMaxGridYZ));
    const Index mt = static_cast<Index>(tiles.m_tiles), nt = static_cast<Index>(tiles.n_tiles);
    const Index ph = static_cast<Index>(tiles.phases), sp = static_cast<Index>(plan.splits);
    return plan.splits == 1 ? Launch(name, kernel_single, grid, dim3(threads), stream, p, filter, dy, dx, mt, nt, ph, sp)
                            : Launch(name, kernel_split, grid, dim3(threads), stream, p, filter, dy, partial, mt, nt,
                                     ph, sp);
  };
  if (NarrowInput(g)) {  // every type, TF32 allowed or not: exact sums
    const InputGrid tiles = InputGridOf(g, kNarrowThreads);
    const dim3 grid(GridDim(tiles.m_tiles, kMaxGridX), 1, GridDim(tiles.phases, kMaxGridYZ));
    const bool vec = g.out_depth % (16 / sizeof(T)) == 0 && AlignedFor<char>(filter, 16) && AlignedFor<char>(dy, 16);
    return Launch("Conv2DBackpropInputNarrowKernel",
                  vec ? Conv2DBackpropInputNarrowKernel<T, Index, true> : Conv2DBackpropInputNarrowKernel<T, Index, false>,
                  grid, dim3(kNarrowThreads), stream, p, filter, dy, dx, static_cast<Index>(tiles.m_tiles),
                  static_cast<Index>(tiles.phases));
  }
  if constexpr (kHasTcKernel<T>) {
    if (tensor_cores) {
      const bool vec = TcVecOk<T>(g, filter, dy, dx) && reinterpret_cast<uintptr_t>(scratch) % 16 == 0;
      const bool large = gemm_tiles == GemmTiles::kTensor128 && vec && !grouped;
      s = launch("Conv2DBackpropInputTcKernel", TcInputKernel<T, Index, false>(large, vec, grouped),
                 TcInputKernel<T, Index, true>(large, vec, grouped), large ? TcLarge::kBM : TcSmall::kBM,
                 large ? TcLarge::kThreads : TcSmall::kThreads);
    }
  }
  if constexpr (!kTensorCore<T>) {
    if (!tensor_cores) {
      const bool vec = VecOk<T>(g, filter, dy, dx) && AlignedFor<Acc<T>>(scratch, 4);
      s = launch("Conv2DBackpropInputKernel", InputKernel<T, Index, false>(vec, grouped),
                 InputKernel<T, Index, true>(vec, grouped), kTileM, kThreads);
    }
  }
  if (!s.ok() || plan.splits == 1) return s;
  return SumSplits<T, Index>(stream, partial, plan.splits, g.input_elements, dx);
}

template <typename T, typename Index>
Status Conv2DBackpropFilterNhwc(cudaStream_t stream, const ConvGeometry& g, GemmTiles gemm_tiles,
                                const SplitPlan& plan, const T* x, const T* dy, T* dw, void* scratch) {
  Conv2DParams<Index> p = MakeParams<Index>(g);
  p.pixels_per_split = static_cast<Index>(plan.pixels_per_split);
  const int64_t taps = g.filter_rows * g.filter_cols;
  const bool tensor_cores = kTensorCore<T> || gemm_tiles != GemmTiles::kCudaCores;
  const bool fold = FoldTaps(g);
  // One split: final values straight into dw; else partial sums into scratch, then SumSplits.
  Acc<T>* partial = static_cast<Acc<T>*>(scratch);
  const bool grouped = g.groups > 1;
  // Tiles per group; the groups' output-channel tiles side by side in grid x. Folded,
  // the row tiles span every tap and the grid has one tap.
  auto launch = [&](const char* name, auto kernel_single, auto kernel_split, int64_t tile, int threads) {
    const int64_t m_tiles = CeilDiv((fold ? taps : 1) * g.group_in_depth(), tile);
    const int64_t n_tiles = CeilDiv(g.group_out_depth(), tile);
    const dim3 grid(GridDim(n_tiles * g.groups, kMaxGridX), GridDim(m_tiles, kMaxGridYZ),
                    GridDim((fold ? 1 : taps) * plan.splits, kMaxGridYZ));
    const Index mt = static_cast<Index>(m_tiles), nt = static_cast<Index>(n_tiles), tp = static_cast<Index>(taps);
    const Index sp = static_cast<Index>(plan.splits);
    return plan.splits == 1 ? Launch(name, kernel_single, grid, dim3(threads), stream, p, x, dy, dw, mt, nt, tp, sp)
                            : Launch(name, kernel_split, grid, dim3(threads), stream, p, x, dy, partial, mt, nt, tp,
                                     sp);
  };
  Status s;
  if constexpr (kHasTcKernel<T>) {
    if (tensor_cores) {
      const bool vec = fold ? FoldedVecOk(g, kTcVec<T>, 16, dy, dw, scratch)
                            : TcVecOk<T>(g, x, dy, dw) && reinterpret_cast<uintptr_t>(scratch) % 16 == 0;
      const bool large = gemm_tiles == GemmTiles::kTensor128 && vec && !grouped && !fold;
      s = launch("Conv2DBackpropFilterTcKernel", TcFilterKernel<T, T, Index>(large, vec, grouped, fold),
                 TcFilterKernel<T, Acc<T>, Index>(large, vec, grouped, fold), large ? TcLarge::kBM : TcSmall::kBM,
                 large ? TcLarge::kThreads : TcSmall::kThreads);
    }
  }
  if constexpr (!kTensorCore<T>) {
    if (!tensor_cores) {
      static_assert(std::is_same_v<T, Acc<T>>, "the CUDA-core filter kernels take float and double");
      const bool vec = fold ? FoldedVecOk(g, 4, 4 * sizeof(T), dy, dw, scratch)
                            : VecOk<T>(g, x, dy, dw) && AlignedFor<Acc<T>>(scratch, 4);
      s = launch("Conv2DBackpropFilterKernel", FilterKernel<T, T, Index>(vec, grouped, fold),
                 FilterKernel<T, Acc<T>, Index>(vec, grouped, fold), kTileM, kThreads);
    }
  }
  if (!s.ok() || plan.splits == 1) return s;
  return SumSplits<T, Index>(stream, partial, plan.splits, g.filter_elements, dw);
}

#define TCB_INSTANTIATE(T, Index)                                                                              \
  template Status Conv2DBackpropInputNhwc<T, Index>(cudaStream_t, const ConvGeometry&, GemmTiles, const SplitPlan&,  \
                                                    const T*, const T*, T*, void*);                           \
  template Status Conv2DBackpropFilterNhwc<T, Index>(cudaStream_t, const ConvGeometry&, GemmTiles, const SplitPlan&, \
                                                     const T*, const T*, T*, void*);
TCB_CUDA_FOR_EACH_TYPE_AND_INDEX(TCB_INSTANTIATE)
#undef TCB_INSTANTIATE
#define TCB_INSTANTIATE(T, Index)                                                                      \
  template Status Conv2DBackpropInputNhwc<T, Index>(cudaStream_t, const ConvGeometry&, GemmTiles, const SplitPlan&,  \
                                                    const T*, const T*, T*, void*);
TCB_CUDA_FOR_EACH_INPUT_ONLY_TYPE_AND_INDEX(TCB_INSTANTIATE)
#undef TCB_INSTANTIATE

}  // namespace cuda
}  // namespace tf_conv_backprop
