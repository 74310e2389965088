// The NHWC compute kernels behind cuda/engine.h. The engine front end
// (cuda/engine.cu) handles empty tensors, NCHW <-> NHWC and scratch, so each
// launcher sees: NHWC tensors, every element count > 0, an index type (int32_t or
// int64_t) that every index fits, and the scratch its plan asked for. A launcher
// must write every output element.
#ifndef TF_CONV_BACKPROP_CUDA_KERNELS_H_
#define TF_CONV_BACKPROP_CUDA_KERNELS_H_

#include <cstdint>

#include "tf_ops/cuda/device.h"
#include "tf_ops/core/geometry.h"

namespace tf_conv_backprop {
namespace cuda {

// How a gradient splits its reduction: a filter gradient over output pixels
// (`splits` ranges of `pixels_per_split` pixels), a conv2d input gradient over each
// group's output channels (ranges of `channels_per_split`). Every split writes its
// partial sums (accumulation type) to scratch, a whole output (partial_elements) per
// split, and a second kernel adds the splits in order. Deterministic for a geometry:
// the plan depends on nothing else but the kernel family (not on the device).
struct SplitPlan {
  int64_t splits = 1;
  int64_t pixels_per_split = 0;
  int64_t channels_per_split = 0;
  int64_t partial_elements = 0;  // per split
  int64_t scratch_bytes = 0;     // 0 when splits == 1 (written directly)
};

// The sliding-window sizes every kernel reads, in the kernels' index type (passed
// by value in kernel parameters).
template <typename Index>
struct WindowParams {
  Index batch, in_rows, in_cols;
  Index out_rows, out_cols, out_depth;
  Index filter_rows, filter_cols;
  Index stride_rows, stride_cols, dilation_rows, dilation_cols, pad_top, pad_left;

  void SetWindow(const ConvGeometry& g) {
    batch = static_cast<Index>(g.batch);
    in_rows = static_cast<Index>(g.in_rows);
    in_cols = static_cast<Index>(g.in_cols);
    out_rows = static_cast<Index>(g.out_rows);
    out_cols = static_cast<Index>(g.out_cols);
    out_depth = static_cast<Index>(g.out_depth);
    filter_rows = static_cast<Index>(g.filter_rows);
    filter_cols = static_cast<Index>(g.filter_cols);
    stride_rows = static_cast<Index>(g.stride_rows);
    stride_cols = static_cast<Index>(g.stride_cols);
    dilation_rows = static_cast<Index>(g.dilation_rows);
    dilation_cols = static_cast<Index>(g.dilation_cols);
    pad_top = static_cast<Index>(g.pad_top);
    pad_left = static_cast<Index>(g.pad_left);
  }
};

// X(T, Index) for every element type and index type the kernels are built for.
#define TCB_CUDA_FOR_EACH_TYPE_AND_INDEX(X)                                        \
  X(__half, int32_t) X(__half, int64_t) X(__nv_bfloat16, int32_t) X(__nv_bfloat16, int64_t) \
  X(float, int32_t) X(float, int64_t) X(double, int32_t) X(double, int64_t)
// The same for the types only Conv2DBackpropInput takes (TF's int32): its kernel
// and the layout moves around it.
#define TCB_CUDA_FOR_EACH_INPUT_ONLY_TYPE_AND_INDEX(X) X(int32_t, int32_t) X(int32_t, int64_t)

// The tiles a conv2d gradient's implicit GEMM runs with: CUDA cores (exact float,
// double, int32), or tensor cores (half, bfloat16, float as TF32) with 64 x 64 or
// 128 x 128 tiles (cuda/conv2d.cu says when).
enum class GemmTiles { kCudaCores, kTensor64, kTensor128 };

// The tiles for the conv2d gradient `op` on g. tensor_cores: whether its type runs on
// tensor cores. force_tile (tests only): 64 or 128 picks that tile size wherever the
// tensor-core kernels have it; 0 leaves the choice to the engine.
GemmTiles ChooseGemmTiles(OpKind op, const ConvGeometry& g, bool tensor_cores, int force_tile);

// Whether a conv2d input gradient runs the direct kernel for a few input channels
// (the stem's 3) instead of a GEMM: exact sums in every type, TF32 allowed or not.
bool NarrowInput(const ConvGeometry& g);

SplitPlan PlanConv2DBackpropInput(const ConvGeometry& g, int64_t acc_bytes, GemmTiles tiles);
SplitPlan PlanConv2DBackpropFilter(const ConvGeometry& g, int64_t acc_bytes, GemmTiles tiles);
SplitPlan PlanDepthwiseBackpropFilter(const ConvGeometry& g, int64_t acc_bytes);

// dx[N,H,W,Cin] from filter[KH,KW,Cin/G,Cout] and dy[N,OH,OW,Cout], G = g.groups
// (1: dense): group k's input channels [k, k + 1) * Cin/G see only its output
// channels [k, k + 1) * Cout/G. One launch covers every group. tiles: ChooseGemmTiles'
// (float runs on tensor cores, in TF32, unless kCudaCores; the 16-bit types always do),
// the plan made for them.
template <typename T, typename Index>
Status Conv2DBackpropInputNhwc(cudaStream_t stream, const ConvGeometry& g, GemmTiles tiles, const SplitPlan& plan,
                               const T* filter, const T* dy, T* dx, void* scratch);
// dW[KH,KW,Cin/G,Cout] from x[N,H,W,Cin] and dy[N,OH,OW,Cout], grouped and tiled as above.
template <typename T, typename Index>
Status Conv2DBackpropFilterNhwc(cudaStream_t stream, const ConvGeometry& g, GemmTiles tiles, const SplitPlan& plan,
                                const T* x, const T* dy, T* dw, void* scratch);
// dx[N,H,W,C] from filter[KH,KW,C,M] and dy[N,OH,OW,C*M].
template <typename T, typename Index>
Status DepthwiseBackpropInputNhwc(cudaStream_t stream, const ConvGeometry& g, const T* filter, const T* dy,
                                  T* dx);
// dW[KH,KW,C,M] from x[N,H,W,C] and dy[N,OH,OW,C*M].
template <typename T, typename Index>
Status DepthwiseBackpropFilterNhwc(cudaStream_t stream, const ConvGeometry& g, const SplitPlan& plan,
                                   const T* x, const T* dy, T* dw, void* scratch);

// out[i] = sum over s of partial[s * count + i], s = 0, 1, ... in order.
template <typename T, typename Index>
Status SumSplits(cudaStream_t stream, const Acc<T>* partial, int64_t splits, int64_t count, T* out);

// dst[b][c][r] = src[b][r][c] for b < batch, r < rows, c < cols: NCHW -> NHWC with
// (rows, cols) = (C, H*W), NHWC -> NCHW with (H*W, C).
template <typename T, typename Index>
Status Transpose(cudaStream_t stream, int64_t batch, int64_t rows, int64_t cols, const T* src, T* dst);

}  // namespace cuda
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CUDA_KERNELS_H_
