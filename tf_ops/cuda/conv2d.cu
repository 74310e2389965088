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
// half and bfloat16: the same tiling and loops on tensor cores (nvcuda::wmma 16x16x16,
// float accumulators): 64x64 tiles, 32-deep steps, 4 warps of 32x32, operands kept in
// their 16-bit type in shared memory (8-element vectors when the channel counts, per
// group too, are multiples of 8), the float results staged through shared memory and
// rounded once on the way out.
// float with TF32 allowed (TF's default on Ampere and newer, as cuDNN's): the same
// tensor-core kernels on TF32 fragments (16x16x8): operands kept as float in shared
// memory (4-element vectors), rounded to nearest TF32 (10 mantissa bits) as the
// fragments load, products summed in float. The reduction order is fixed, so TF32
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
constexpr int64_t kMaxScratchBytes = int64_t{256} << 20;
// Input gradients with fewer tiles than this split their reduction (3x3 512@7 at
// batch 8 has 56 tiles for a GPU of 132 SMs), each split summing at least
// kMinProductsPerSplit products per element.
constexpr int64_t kMinInputBlocks = kTargetBlocks / 4;
constexpr int64_t kMinProductsPerSplit = 256;

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
InputGrid InputGridOf(const ConvGeometry& g) {
  const int64_t pr = Phased(g) ? g.stride_rows : 1, pc = Phased(g) ? g.stride_cols : 1;
  const int64_t max_pixels = g.batch * CeilDiv(g.in_rows, pr) * CeilDiv(g.in_cols, pc);
  return {pr * pc, CeilDiv(max_pixels, kTileM), CeilDiv(g.group_in_depth(), kTileN)};
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

// fn(kh, kw, ok, dy_pixel) for every tap that can land on the phase, for the
// phase's pixel (a, b) of image img: ok whether the tap reads a dy pixel for it
// (never when !row_ok), dy_pixel that pixel's index over the batch (0 when !ok).
template <typename Index, typename Fn>
__device__ __forceinline__ void ForEachPhaseTap(const Conv2DParams<Index>& p, const Phase<Index>& ph, bool row_ok,
                                                Index img, Index a, Index b, Fn fn) {
  const Index ih = ph.r0 + a * p.phase_rows, iw = ph.c0 + b * p.phase_cols;
  for (Index kh = 0; kh < p.filter_rows; ++kh) {
    const Index num_r = ph.r0 + p.pad_top - kh * p.dilation_rows;
    if (p.phased && num_r % p.phase_rows != 0) continue;
    for (Index kw = 0; kw < p.filter_cols; ++kw) {
      const Index num_c = ph.c0 + p.pad_left - kw * p.dilation_cols;
      if (p.phased && num_c % p.phase_cols != 0) continue;
      Index oh, ow;
      bool ok = row_ok;
      if (p.phased) {
        oh = a + num_r / p.phase_rows;
        ow = b + num_c / p.phase_cols;
      } else {
        const Index tr = ih + p.pad_top - kh * p.dilation_rows;
        const Index tc = iw + p.pad_left - kw * p.dilation_cols;
        ok = ok && tr >= 0 && tc >= 0 && tr % p.stride_rows == 0 && tc % p.stride_cols == 0;
        oh = tr / p.stride_rows;
        ow = tc / p.stride_cols;
      }
      ok = ok && oh >= 0 && oh < p.out_rows && ow >= 0 && ow < p.out_cols;
      fn(kh, kw, ok, ok ? (img * p.out_rows + oh) * p.out_cols + ow : Index(0));
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

namespace wmma = nvcuda::wmma;
constexpr int kTcM = 64, kTcN = 64, kTcK = 32, kTcThreads = 128;  // 4 warps, 2 x 2, each 32 x 32
constexpr int kTcLdK = kTcK + 8;   // [row][k] tiles: rows of 80 bytes (16-byte aligned, banks staggered)
constexpr int kTcLdMN = kTcM + 8;  // [k][row] tiles
constexpr int kTcLdC = kTcN + 4;   // float staging tile

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

// Elements of T in one 16-byte vector: the tensor-core kernels' vector unit.
template <typename T>
constexpr int kTcVec = 16 / static_cast<int>(sizeof(T));

// dst[0, 16) = row[k, k + 16) of a row of `limit` elements, zeros outside (or when !ok).
// kVec: limit % kTcVec<T> == 0 and row 16-byte aligned, so each 16-byte vector is in
// or out as a whole.
template <bool kVec, typename T, typename Index>
__device__ __forceinline__ void Copy16(const T* row, bool ok, Index k, Index limit, T* dst) {
  const T zero = FromAcc<T>(0.0f);
  if (kVec) {
    constexpr int kV = kTcVec<T>;
#pragma unroll
    for (int h = 0; h < 16; h += kV) {
      Pack<T, kV> v;
      if (ok && k + h < limit) {
        CheckVector<T, kV>(row + k + h);
        v = *reinterpret_cast<const Pack<T, kV>*>(row + k + h);
      } else {
#pragma unroll
        for (int i = 0; i < kV; ++i) v.v[i] = zero;
      }
      *reinterpret_cast<Pack<T, kV>*>(dst + h) = v;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) dst[i] = (ok && k + i < limit) ? row[k + i] : zero;
  }
}

// cs[64][kTcLdC] = the block's accumulators (warp (wm, wn) owns rows wm*32.., cols wn*32..).
template <typename Frag>
__device__ __forceinline__ void StageAccumulators(float* cs, int wm, int wn, Frag (&acc)[2][2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(cs + (wm * 32 + 16 * i) * kTcLdC + wn * 32 + 16 * j, acc[i][j], kTcLdC,
                              wmma::mem_row_major);
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

template <typename T, typename Index, bool kVec, bool kGrouped, bool kSplit>
__global__ void __launch_bounds__(kTcThreads)
    Conv2DBackpropInputTcKernel(Conv2DParams<Index> p, const T* __restrict__ filter, const T* __restrict__ dy,
                                SplitOut<T, kSplit>* __restrict__ dx, Index m_tiles, Index n_tiles, Index phases,
                                Index splits) {
  alignas(32) __shared__ T as[kTcM * kTcLdK];  // [pixel][out channel]
  alignas(32) __shared__ T bs[kTcN * kTcLdK];  // [in channel][out channel]: B column-major
  alignas(32) __shared__ float cs[kTcM * kTcLdC];
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, wm = warp / 2, wn = warp % 2;
  const int load_row = tid / 2, load_k = (tid % 2) * 16;
  const Index cin = p.in_depth, cout = p.out_depth;
  const Index gcin = kGrouped ? p.group_in_depth : cin, gcout = kGrouped ? p.group_out_depth : cout;

  const Index split_elements = p.batch * p.in_rows * p.in_cols * cin;

  ForEachInputTile<kGrouped, kSplit, kTcM, kTcN>(p, phases, splits, m_tiles, n_tiles,
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
    FragAcc<T> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    ForEachPhaseTap(p, ph, row_ok, img, ra, cb, [&](Index kh, Index kw, bool ok, Index dy_pixel) {
      const T* dy_row = dy + (dy_pixel * cout + co0);
      const T* w_row = filter + (((kh * p.filter_cols + kw) * gcin + (ci_ok ? ci_load : Index(0))) * cout + co0);
      for (Index k0 = k_begin; k0 < k_end; k0 += kTcK) {
        Copy16<kVec>(dy_row, ok, static_cast<Index>(k0 + load_k), k_end, as + load_row * kTcLdK + load_k);
        Copy16<kVec>(w_row, ci_ok, static_cast<Index>(k0 + load_k), k_end, bs + load_row * kTcLdK + load_k);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTcK; kk += TcOperand<T>::kK) {
          FragA<T, wmma::row_major> a[2];
          FragB<T, wmma::col_major> b[2];
#pragma unroll
          for (int i = 0; i < 2; ++i) LoadOperand<T>(a[i], as + (wm * 32 + 16 * i) * kTcLdK + kk, kTcLdK);
#pragma unroll
          for (int j = 0; j < 2; ++j) LoadOperand<T>(b[j], bs + (wn * 32 + 16 * j) * kTcLdK + kk, kTcLdK);
#pragma unroll
          for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
      }
    });

    StageAccumulators(cs, wm, wn, acc);
    __syncthreads();
    // Thread: row tid / 2 of the tile, 32 channels from (tid % 2) * 32.
    const Index mm = m0 + tid / 2;
    if (mm < ph.pixels) {
      auto* out = dx + ((kSplit ? split * split_elements : Index(0)) + DxOffset(p, ph, mm, cin) +
                        (kGrouped ? group * gcin : Index(0)));
      StoreRow32<kVec, T>(out, cs + (tid / 2) * kTcLdC + (tid % 2) * 32, static_cast<Index>(n0 + (tid % 2) * 32),
                       gcin);
    }
    __syncthreads();  // cs is rewritten by the next tile
  });
}

template <typename T, typename Out, typename Index, bool kVec, bool kGrouped, bool kFold>
__global__ void __launch_bounds__(kTcThreads)
    Conv2DBackpropFilterTcKernel(Conv2DParams<Index> p, const T* __restrict__ x, const T* __restrict__ dy,
                                 Out* __restrict__ out, Index m_tiles, Index n_tiles, Index taps, Index splits) {
  alignas(32) __shared__ T as[kTcK * kTcLdMN];  // [pixel][in channel]: A column-major
  alignas(32) __shared__ T bs[kTcK * kTcLdMN];  // [pixel][out channel]
  alignas(32) __shared__ float cs[kTcM * kTcLdC];
  __shared__ FoldedRows<Index, kTcM> folded;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, wm = warp / 2, wn = warp % 2;
  const int load_k = tid / 4, load_c = (tid % 4) * 16;  // pixel of the step, 16 channels
  const Index cin = p.in_depth, cout = p.out_depth;
  const Index gcin = kGrouped ? p.group_in_depth : cin, gcout = kGrouped ? p.group_out_depth : cout;
  const Index filter_elements = taps * gcin * cout;
  const Index rows = kFold ? taps * gcin : gcin;  // of the GEMM, per group

  ForEachFilterTile<kGrouped, kTcM, kTcN>(p, kFold ? Index(1) : taps, splits, m_tiles, n_tiles,
                             [&](Index tap, Index split, Index dh, Index dw, Index p_begin,
                                 Index p_end, Index group, Index m0, Index n0) {
    const Index ci0 = kGrouped ? group * gcin : Index(0), co0 = kGrouped ? group * gcout : Index(0);
    if constexpr (kFold) {
      SetFoldedRows(p, gcin, m0, tid, folded);  // the last tile's readers are past its final barrier
      __syncthreads();
    }
    FragAcc<T> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (Index k0 = p_begin; k0 < p_end; k0 += kTcK) {
      const Index pix = k0 + load_k;
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
        for (int i = 0; i < 16; ++i) {
          as[load_k * kTcLdMN + load_c + i] = FoldedX(p, x, folded, load_c + i, ok, img, oh, ow, ci0);
        }
      } else {
        const Index ih = oh * p.stride_rows + dh, iw = ow * p.stride_cols + dw;
        const bool x_ok = ok && ih >= 0 && ih < p.in_rows && iw >= 0 && iw < p.in_cols;
        const T* x_row = x + ((x_ok ? ((img * p.in_rows + ih) * p.in_cols + iw) * cin : Index(0)) + ci0);
        Copy16<kVec>(x_row, x_ok, static_cast<Index>(m0 + load_c), gcin, as + load_k * kTcLdMN + load_c);
      }
      Copy16<kVec>(dy_row, ok, static_cast<Index>(n0 + load_c), gcout, bs + load_k * kTcLdMN + load_c);
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kTcK; kk += TcOperand<T>::kK) {
        FragA<T, wmma::col_major> a[2];
        FragB<T, wmma::row_major> b[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) LoadOperand<T>(a[i], as + kk * kTcLdMN + wm * 32 + 16 * i, kTcLdMN);
#pragma unroll
        for (int j = 0; j < 2; ++j) LoadOperand<T>(b[j], bs + kk * kTcLdMN + wn * 32 + 16 * j, kTcLdMN);
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
      __syncthreads();
    }

    StageAccumulators(cs, wm, wn, acc);
    __syncthreads();
    const Index m = m0 + tid / 2;  // folded: tap is 0 and row m is tap * Cg + ci
    if (m < rows) {
      Out* row = out + split * filter_elements + (tap * gcin + m) * cout + co0;
      StoreRow32<kVec, T>(row, cs + (tid / 2) * kTcLdC + (tid % 2) * 32, static_cast<Index>(n0 + (tid % 2) * 32),
                       gcout);
    }
    __syncthreads();
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

// The kernel instances for (vec, grouped[, fold]).
template <typename T, typename Index, bool kSplit>
auto TcInputKernel(bool vec, bool grouped) {
  return Instance([](auto v, auto gr) { return Conv2DBackpropInputTcKernel<T, Index, v(), gr(), kSplit>; }, vec,
                  grouped);
}
template <typename T, typename Index, bool kSplit>
auto InputKernel(bool vec, bool grouped) {
  return Instance([](auto v, auto gr) { return Conv2DBackpropInputKernel<T, Index, v(), gr(), kSplit>; }, vec,
                  grouped);
}
template <typename T, typename Out, typename Index>
auto TcFilterKernel(bool vec, bool grouped, bool fold) {
  return Instance([](auto v, auto gr, auto f) { return Conv2DBackpropFilterTcKernel<T, Out, Index, v(), gr(), f()>; },
                  vec, grouped, fold);
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

SplitPlan PlanConv2DBackpropInput(const ConvGeometry& g, int64_t acc_bytes) {
  SplitPlan plan;
  const InputGrid tiles = InputGridOf(g);
  const int64_t blocks = tiles.phases * tiles.m_tiles * tiles.n_tiles * g.groups;
  const int64_t gcout = g.group_out_depth();
  const int64_t taps_per_phase = std::max<int64_t>(1, g.filter_rows * g.filter_cols / tiles.phases);
  int64_t splits = 1;
  if (blocks == 0 || gcout == 0 || g.input_elements == 0) return plan;  // nothing to reduce: the engine zero-fills
  if (blocks < kMinInputBlocks) {
    splits = std::min({CeilDiv(kTargetBlocks / 2, blocks), taps_per_phase * gcout / kMinProductsPerSplit,
                       CeilDiv(gcout, kTcK), kMaxScratchBytes / (g.input_elements * acc_bytes)});
    splits = std::max<int64_t>(1, splits);
  }
  plan.channels_per_split = CeilDiv(CeilDiv(gcout, splits), kTcK) * kTcK;  // whole steps of either kernel
  plan.splits = CeilDiv(gcout, plan.channels_per_split);
  plan.partial_elements = g.input_elements;
  plan.scratch_bytes = plan.splits > 1 ? plan.splits * g.input_elements * acc_bytes : 0;
  return plan;
}

SplitPlan PlanConv2DBackpropFilter(const ConvGeometry& g, int64_t acc_bytes) {
  SplitPlan plan;
  const int64_t pixels = g.batch * g.out_rows * g.out_cols;
  const int64_t taps = g.filter_rows * g.filter_cols;
  const int64_t row_tiles =
      FoldTaps(g) ? CeilDiv(taps * g.group_in_depth(), kTileM) : taps * CeilDiv(g.group_in_depth(), kTileM);
  const int64_t tiles = row_tiles * g.groups * CeilDiv(g.group_out_depth(), kTileN);
  int64_t splits = std::max<int64_t>(1, std::min(CeilDiv(kTargetBlocks, tiles), CeilDiv(pixels, kMinPixelsPerSplit)));
  const int64_t max_by_scratch = std::max<int64_t>(1, kMaxScratchBytes / (g.filter_elements * acc_bytes));
  splits = std::min(splits, max_by_scratch);
  plan.pixels_per_split = CeilDiv(CeilDiv(pixels, splits), kTcK) * kTcK;  // whole steps of either kernel
  plan.splits = CeilDiv(pixels, plan.pixels_per_split);
  plan.partial_elements = g.filter_elements;
  plan.scratch_bytes = plan.splits > 1 ? plan.splits * g.filter_elements * acc_bytes : 0;
  return plan;
}

template <typename T, typename Index>
Status Conv2DBackpropInputNhwc(cudaStream_t stream, const ConvGeometry& g, bool tf32, const SplitPlan& plan,
                               const T* filter, const T* dy, T* dx, void* scratch) {
  Conv2DParams<Index> p = MakeParams<Index>(g);
  p.channels_per_split = static_cast<Index>(plan.channels_per_split);
  const InputGrid tiles = InputGridOf(g);
  // The groups' channel tiles side by side in grid y, the splits' phases in grid z.
  const dim3 grid(GridDim(tiles.m_tiles, kMaxGridX), GridDim(tiles.n_tiles * g.groups, kMaxGridYZ),
                  GridDim(tiles.phases * plan.splits, kMaxGridYZ));
  const Index mt = static_cast<Index>(tiles.m_tiles), nt = static_cast<Index>(tiles.n_tiles);
  const Index ph = static_cast<Index>(tiles.phases), sp = static_cast<Index>(plan.splits);
  static_assert(kTcM == kTileM && kTcN == kTileN, "the tile grid is shared by both kernel families");
  // One split: final values straight into dx; else partial sums into scratch, then SumSplits.
  Acc<T>* partial = static_cast<Acc<T>*>(scratch);
  const bool grouped = g.groups > 1;
  Status s;
  if constexpr (kHasTcKernel<T>) {
    if (UsesTensorCores<T>(tf32)) {
      const bool vec = TcVecOk<T>(g, filter, dy, dx) && reinterpret_cast<uintptr_t>(scratch) % 16 == 0;
      s = plan.splits == 1 ? Launch("Conv2DBackpropInputTcKernel", TcInputKernel<T, Index, false>(vec, grouped), grid,
                                    dim3(kTcThreads), stream, p, filter, dy, dx, mt, nt, ph, sp)
                           : Launch("Conv2DBackpropInputTcKernel", TcInputKernel<T, Index, true>(vec, grouped), grid,
                                    dim3(kTcThreads), stream, p, filter, dy, partial, mt, nt, ph, sp);
    }
  }
  if constexpr (!kTensorCore<T>) {
    if (!UsesTensorCores<T>(tf32)) {
      const bool vec = VecOk<T>(g, filter, dy, dx) && AlignedFor<Acc<T>>(scratch, 4);
      s = plan.splits == 1 ? Launch("Conv2DBackpropInputKernel", InputKernel<T, Index, false>(vec, grouped), grid,
                                    dim3(kThreads), stream, p, filter, dy, dx, mt, nt, ph, sp)
                           : Launch("Conv2DBackpropInputKernel", InputKernel<T, Index, true>(vec, grouped), grid,
                                    dim3(kThreads), stream, p, filter, dy, partial, mt, nt, ph, sp);
    }
  }
  if (!s.ok() || plan.splits == 1) return s;
  return SumSplits<T, Index>(stream, partial, plan.splits, g.input_elements, dx);
}

template <typename T, typename Index>
Status Conv2DBackpropFilterNhwc(cudaStream_t stream, const ConvGeometry& g, bool tf32, const SplitPlan& plan,
                                const T* x, const T* dy, T* dw, void* scratch) {
  Conv2DParams<Index> p = MakeParams<Index>(g);
  p.pixels_per_split = static_cast<Index>(plan.pixels_per_split);
  const int64_t taps = g.filter_rows * g.filter_cols;
  // Tiles per group; the groups' output-channel tiles side by side in grid x. Folded,
  // the row tiles span every tap and the grid has one tap.
  const bool fold = FoldTaps(g);
  const int64_t m_tiles = CeilDiv((fold ? taps : 1) * g.group_in_depth(), kTileM);
  const int64_t n_tiles = CeilDiv(g.group_out_depth(), kTileN);
  const dim3 grid(GridDim(n_tiles * g.groups, kMaxGridX), GridDim(m_tiles, kMaxGridYZ),
                  GridDim((fold ? 1 : taps) * plan.splits, kMaxGridYZ));
  const Index mt = static_cast<Index>(m_tiles), nt = static_cast<Index>(n_tiles), tp = static_cast<Index>(taps);
  const Index sp = static_cast<Index>(plan.splits);
  // One split: final values straight into dw; else partial sums into scratch, then SumSplits.
  Acc<T>* partial = static_cast<Acc<T>*>(scratch);
  const bool grouped = g.groups > 1;
  Status s;
  if constexpr (kHasTcKernel<T>) {
    if (UsesTensorCores<T>(tf32)) {
      const bool vec = fold ? FoldedVecOk(g, kTcVec<T>, 16, dy, dw, scratch)
                            : TcVecOk<T>(g, x, dy, dw) && reinterpret_cast<uintptr_t>(scratch) % 16 == 0;
      s = plan.splits == 1
              ? Launch("Conv2DBackpropFilterTcKernel", TcFilterKernel<T, T, Index>(vec, grouped, fold), grid,
                       dim3(kTcThreads), stream, p, x, dy, dw, mt, nt, tp, sp)
              : Launch("Conv2DBackpropFilterTcKernel", TcFilterKernel<T, Acc<T>, Index>(vec, grouped, fold), grid,
                       dim3(kTcThreads), stream, p, x, dy, partial, mt, nt, tp, sp);
    }
  }
  if constexpr (!kTensorCore<T>) {
    if (!UsesTensorCores<T>(tf32)) {
      static_assert(std::is_same_v<T, Acc<T>>, "the CUDA-core filter kernels take float and double");
      const bool vec = fold ? FoldedVecOk(g, 4, 4 * sizeof(T), dy, dw, scratch)
                            : VecOk<T>(g, x, dy, dw) && AlignedFor<Acc<T>>(scratch, 4);
      s = plan.splits == 1 ? Launch("Conv2DBackpropFilterKernel", FilterKernel<T, T, Index>(vec, grouped, fold), grid,
                                    dim3(kThreads), stream, p, x, dy, dw, mt, nt, tp, sp)
                           : Launch("Conv2DBackpropFilterKernel", FilterKernel<T, Acc<T>, Index>(vec, grouped, fold),
                                    grid, dim3(kThreads), stream, p, x, dy, partial, mt, nt, tp, sp);
    }
  }
  if (!s.ok() || plan.splits == 1) return s;
  return SumSplits<T, Index>(stream, partial, plan.splits, g.filter_elements, dw);
}

#define TCB_INSTANTIATE(T, Index)                                                                              \
  template Status Conv2DBackpropInputNhwc<T, Index>(cudaStream_t, const ConvGeometry&, bool, const SplitPlan&,  \
                                                    const T*, const T*, T*, void*);                           \
  template Status Conv2DBackpropFilterNhwc<T, Index>(cudaStream_t, const ConvGeometry&, bool, const SplitPlan&, \
                                                     const T*, const T*, T*, void*);
TCB_CUDA_FOR_EACH_TYPE_AND_INDEX(TCB_INSTANTIATE)
#undef TCB_INSTANTIATE
#define TCB_INSTANTIATE(T, Index)                                                                      \
  template Status Conv2DBackpropInputNhwc<T, Index>(cudaStream_t, const ConvGeometry&, bool, const SplitPlan&,  \
                                                    const T*, const T*, T*, void*);
TCB_CUDA_FOR_EACH_INPUT_ONLY_TYPE_AND_INDEX(TCB_INSTANTIATE)
#undef TCB_INSTANTIATE

}  // namespace cuda
}  // namespace tf_conv_backprop
