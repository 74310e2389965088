// Front end of the CUDA engine: everything that is not convolution arithmetic. It
// returns early for empty outputs, zero-fills gradients whose reduction is empty
// (cudaMemsetAsync, no launch), picks the 32-bit index kernels where every index fits
// (CudaIndexFitsInt32) and the 64-bit ones otherwise, moves NCHW tensors to NHWC
// scratch and back (tiled transposes), and carves the one scratch allocation. The
// kernels in cuda/kernels.h then only see non-empty NHWC tensors. Grouped conv2d
// needs nothing more here: a group is a range of the channel dimension, which the
// transposes move as a whole, and the filter is HWIO in both layouts.
#include <algorithm>
#include <type_traits>

#include "tf_ops/cuda/engine.h"
#include "tf_ops/cuda/kernels.h"

namespace tf_conv_backprop {
namespace cuda {
namespace {

constexpr int kTransposeTile = 32, kTransposeRows = 8;

template <int kBytes>
struct BitsOf;
template <>
struct BitsOf<2> {
  using type = uint16_t;
};
template <>
struct BitsOf<4> {
  using type = uint32_t;
};
template <>
struct BitsOf<8> {
  using type = uint64_t;
};

// A transpose moves bits, so it is instantiated per element size, not per type.
template <typename B, typename Index>
__global__ void __launch_bounds__(kTransposeTile* kTransposeRows)
    TransposeKernel(const B* __restrict__ src, B* __restrict__ dst, Index batch, Index rows, Index cols,
                    Index row_tiles, Index col_tiles) {
  __shared__ B tile[kTransposeTile][kTransposeTile + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (Index b = blockIdx.z; b < batch; b += gridDim.z) {
    const B* s = src + b * rows * cols;
    B* d = dst + b * rows * cols;
    for (Index rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      for (Index ct = blockIdx.x; ct < col_tiles; ct += gridDim.x) {
        const Index r0 = rt * kTransposeTile, c0 = ct * kTransposeTile;
        for (int i = ty; i < kTransposeTile; i += kTransposeRows) {
          const Index r = r0 + i, c = c0 + tx;
          if (r < rows && c < cols) tile[i][tx] = s[r * cols + c];
        }
        __syncthreads();
        for (int i = ty; i < kTransposeTile; i += kTransposeRows) {
          const Index c = c0 + i, r = r0 + tx;
          if (c < cols && r < rows) d[c * rows + r] = tile[tx][i];
        }
        __syncthreads();
      }
    }
  }
}

template <typename T, typename Index>
__global__ void __launch_bounds__(256)
    SumSplitsKernel(const Acc<T>* __restrict__ partial, Index splits, Index count, T* __restrict__ out) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
       i < count; i += stride) {
    Acc<T> s = partial[i];
    for (Index k = 1; k < splits; ++k) s += partial[k * count + i];
    out[i] = FromAcc<T>(s);
  }
}

}  // namespace

template <typename T, typename Index>
Status SumSplits(cudaStream_t stream, const Acc<T>* partial, int64_t splits, int64_t count, T* out) {
  const dim3 grid(GridDim(CeilDiv(count, 256), int64_t{1} << 22));
  return Launch("SumSplitsKernel", SumSplitsKernel<T, Index>, grid, dim3(256), stream, partial,
                static_cast<Index>(splits), static_cast<Index>(count), out);
}

template <typename T, typename Index>
Status Transpose(cudaStream_t stream, int64_t batch, int64_t rows, int64_t cols, const T* src, T* dst) {
  using B = typename BitsOf<sizeof(T)>::type;
  const int64_t row_tiles = CeilDiv(rows, kTransposeTile), col_tiles = CeilDiv(cols, kTransposeTile);
  const dim3 grid(GridDim(col_tiles, kMaxGridX), GridDim(row_tiles, kMaxGridYZ), GridDim(batch, kMaxGridYZ));
  return Launch("TransposeKernel", TransposeKernel<B, Index>, grid, dim3(kTransposeTile, kTransposeRows), stream,
                reinterpret_cast<const B*>(src), reinterpret_cast<B*>(dst), static_cast<Index>(batch),
                static_cast<Index>(rows), static_cast<Index>(cols), static_cast<Index>(row_tiles),
                static_cast<Index>(col_tiles));
}

namespace {

constexpr int64_t kScratchAlign = 256;

int64_t RoundUp(int64_t v, int64_t to) { return CeilDiv(v, to) * to; }

// Byte offsets of the pieces of the one scratch allocation (-1: not needed).
struct ScratchLayout {
  int64_t input = -1, out_backprop = -1, output = -1, partial = -1;
  int64_t total = 0;
  int64_t Reserve(int64_t bytes) {
    const int64_t offset = total;
    total += RoundUp(bytes, kScratchAlign);
    return offset;
  }
};

template <typename T, typename Index>
Status RunNhwc(OpKind op, cudaStream_t stream, GemmTiles tiles, const ConvGeometry& g, const SplitPlan& plan,
               const ScratchLayout& layout, char* scratch, const T* data, const T* dy, T* out) {
  const bool nchw = g.data_format == DataFormat::kNCHW;
  const bool input_grad = ComputesInputGrad(op);
  const T* data_nhwc = data;
  const T* dy_nhwc = dy;
  T* out_nhwc = out;
  Status s;
  if (nchw) {
    if (!input_grad) {
      T* x = reinterpret_cast<T*>(scratch + layout.input);
      s = Transpose<T, Index>(stream, g.batch, g.in_depth, g.in_rows * g.in_cols, data, x);
      if (!s.ok()) return s;
      data_nhwc = x;
    }
    T* d = reinterpret_cast<T*>(scratch + layout.out_backprop);
    s = Transpose<T, Index>(stream, g.batch, g.out_depth, g.out_rows * g.out_cols, dy, d);
    if (!s.ok()) return s;
    dy_nhwc = d;
    if (input_grad) out_nhwc = reinterpret_cast<T*>(scratch + layout.output);
  }
  void* partial = layout.partial >= 0 ? scratch + layout.partial : nullptr;
  if constexpr (std::is_same_v<T, int32_t>) {
    // int32 is Conv2DBackpropInput's alone (Run checked the op).
    s = Conv2DBackpropInputNhwc<T, Index>(stream, g, tiles, plan, data_nhwc, dy_nhwc, out_nhwc, partial);
  } else {
    switch (op) {
      case OpKind::kConv2DBackpropInput:
        s = Conv2DBackpropInputNhwc<T, Index>(stream, g, tiles, plan, data_nhwc, dy_nhwc, out_nhwc, partial);
        break;
      case OpKind::kConv2DBackpropFilter:
        s = Conv2DBackpropFilterNhwc<T, Index>(stream, g, tiles, plan, data_nhwc, dy_nhwc, out_nhwc, partial);
        break;
      case OpKind::kDepthwiseBackpropInput:
        s = DepthwiseBackpropInputNhwc<T, Index>(stream, g, data_nhwc, dy_nhwc, out_nhwc);
        break;
      case OpKind::kDepthwiseBackpropFilter:
        s = DepthwiseBackpropFilterNhwc<T, Index>(stream, g, plan, data_nhwc, dy_nhwc, out_nhwc, partial);
        break;
    }
  }
  if (!s.ok()) return s;
  if (nchw && input_grad) {
    s = Transpose<T, Index>(stream, g.batch, g.in_rows * g.in_cols, g.in_depth, out_nhwc, out);
  }
  return s;
}

// `data` is the filter (input gradients) or the input (filter gradients).
template <typename T>
Status Run(OpKind op, const CudaContext& ctx, const ConvGeometry& g, const T* data, const T* dy, T* out) {
  const bool input_grad = ComputesInputGrad(op);
  const int64_t out_elements = input_grad ? g.input_elements : g.filter_elements;
  if (out_elements == 0) return OkStatus();
  cudaStream_t stream = ctx.stream;
  const int64_t data_elements = input_grad ? g.filter_elements : g.input_elements;
  if (data_elements == 0 || g.out_backprop_elements == 0) {
    return ZeroFill(out, out_elements * static_cast<int64_t>(sizeof(T)), stream);
  }
  if (IsDepthwise(op) != g.depthwise) return Internal(std::string(OpName(op)) + ": geometry of the wrong op");
  // The conv2d kernels index every group's channels from these; a geometry that
  // broke them would read and write out of bounds rather than fail.
  if (g.groups < 1 || (g.depthwise && g.groups != 1) || g.in_depth % g.groups != 0 ||
      g.out_depth % g.groups != 0) {
    return Internal(std::string(OpName(op)) + ": inconsistent groups (" + std::to_string(g.groups) + ")");
  }
  if (std::is_same_v<T, int32_t> && op != OpKind::kConv2DBackpropInput) {
    // TF takes int32 in Conv2DBackpropInput alone; the binding registers no other.
    return Internal(std::string(OpName(op)) + ": the CUDA engine has no int32 kernel for this op");
  }

  SplitPlan plan;
  constexpr bool k16Bit = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
  const GemmTiles tiles =
      ChooseGemmTiles(op, g, k16Bit || (std::is_same_v<T, float> && ctx.tf32), ctx.force_tile);
  if (op == OpKind::kConv2DBackpropInput) plan = PlanConv2DBackpropInput(g, sizeof(Acc<T>), tiles);
  if (op == OpKind::kConv2DBackpropFilter) plan = PlanConv2DBackpropFilter(g, sizeof(Acc<T>), tiles);
  if (op == OpKind::kDepthwiseBackpropFilter) plan = PlanDepthwiseBackpropFilter(g, sizeof(Acc<T>));
  ScratchLayout layout;
  const int64_t elem = sizeof(T);
  if (g.data_format == DataFormat::kNCHW) {
    if (!input_grad) layout.input = layout.Reserve(g.input_elements * elem);
    layout.out_backprop = layout.Reserve(g.out_backprop_elements * elem);
    if (input_grad) layout.output = layout.Reserve(g.input_elements * elem);
  }
  if (plan.scratch_bytes > 0) layout.partial = layout.Reserve(plan.scratch_bytes);
  char* scratch = nullptr;
  if (layout.total > 0) {
    if (!ctx.allocate) return Internal(std::string(OpName(op)) + ": the CUDA engine needs scratch but got no allocator");
    scratch = static_cast<char*>(ctx.allocate(layout.total));
    if (scratch == nullptr) {
      return ResourceExhausted(std::string(OpName(op)) + ": out of GPU memory allocating " +
                               std::to_string(layout.total) + " bytes of scratch space");
    }
  }
  if (!ctx.force_int64_index && CudaIndexFitsInt32(g)) {
    return RunNhwc<T, int32_t>(op, stream, tiles, g, plan, layout, scratch, data, dy, out);
  }
  return RunNhwc<T, int64_t>(op, stream, tiles, g, plan, layout, scratch, data, dy, out);
}

}  // namespace
}  // namespace cuda

bool CudaIndexFitsInt32(const ConvGeometry& g) {
  // Every element count, and every spatial coordinate a kernel forms (input
  // positions including the padding and the dilated filter, output positions times
  // the stride), stays within 2^30: sums of two such values and the grid-stride
  // loops' index + stride cannot overflow int32. Split-reduction scratch is capped
  // at 256 MiB, i.e. 2^26 floats.
  constexpr int64_t kLimit = int64_t{1} << 30;
  auto fits = [](int64_t v) { return v >= 0 && v <= kLimit; };
  auto sum_fits = [&fits](std::initializer_list<int64_t> terms) {
    int64_t total = 0;
    for (int64_t t : terms) {
      if (!fits(t) || !CheckedAdd(total, t, &total)) return false;
    }
    return fits(total);
  };
  int64_t out_rows_span = 0, out_cols_span = 0;
  if (!CheckedMul(g.out_rows, g.stride_rows, &out_rows_span) || !CheckedMul(g.out_cols, g.stride_cols, &out_cols_span)) {
    return false;
  }
  return fits(g.input_elements) && fits(g.filter_elements) && fits(g.out_backprop_elements) &&
         sum_fits({g.in_rows, g.pad_top, g.pad_bottom, g.eff_filter_rows(), g.stride_rows}) &&
         sum_fits({g.in_cols, g.pad_left, g.pad_right, g.eff_filter_cols(), g.stride_cols}) &&
         sum_fits({out_rows_span, g.eff_filter_rows(), g.pad_top}) &&
         sum_fits({out_cols_span, g.eff_filter_cols(), g.pad_left});
}

template <typename T>
Status GradientCuda(OpKind op, const CudaContext& ctx, const ConvGeometry& geo, const T* a, const T* b,
                    T* out) {
  return cuda::Run(op, ctx, geo, a, b, out);
}

namespace cuda {
#define TCB_INSTANTIATE(T, Index)                                                                            \
  template Status SumSplits<T, Index>(cudaStream_t, const Acc<T>*, int64_t, int64_t, T*);                  \
  template Status Transpose<T, Index>(cudaStream_t, int64_t, int64_t, int64_t, const T*, T*);
TCB_CUDA_FOR_EACH_TYPE_AND_INDEX(TCB_INSTANTIATE)
#undef TCB_INSTANTIATE
#define TCB_INSTANTIATE(T, Index)                                                           \
  template Status SumSplits<T, Index>(cudaStream_t, const Acc<T>*, int64_t, int64_t, T*); \
  template Status Transpose<T, Index>(cudaStream_t, int64_t, int64_t, int64_t, const T*, T*);
TCB_CUDA_FOR_EACH_INPUT_ONLY_TYPE_AND_INDEX(TCB_INSTANTIATE)
#undef TCB_INSTANTIATE
}  // namespace cuda

#define TCB_INSTANTIATE(T) \
  template Status GradientCuda<T>(OpKind, const CudaContext&, const ConvGeometry&, const T*, const T*, T*);
TCB_INSTANTIATE(__half)
TCB_INSTANTIATE(__nv_bfloat16)
TCB_INSTANTIATE(float)
TCB_INSTANTIATE(double)
TCB_INSTANTIATE(int32_t)
#undef TCB_INSTANTIATE

}  // namespace tf_conv_backprop
