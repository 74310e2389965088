// CUDA engine for the four gradients: raw device pointers + geometry + a stream in,
// gradient out, an error Status on failure (never an abort). Framework-free: the TF
// binding passes TF's compute stream and an allocator backed by TF's allocator; the
// TF-free GPU check (tests/core/cuda_check.cu) passes its own.
//
// Every kernel and memset goes on `stream`, in order; the call returns once they are
// queued. Results are deterministic: the same inputs on the same device give bitwise
// equal outputs (the filter gradients reduce in a fixed order, no float atomics).
//
// This header needs no CUDA header: `cudaStream_t` is `CUstream_st*`, and the 16-bit
// types are CUDA's own `__half` / `__nv_bfloat16` (same bits as Eigen::half /
// Eigen::bfloat16), declared here and defined by cuda_fp16.h / cuda_bf16.h.
#ifndef TF_CONV_BACKPROP_CUDA_ENGINE_H_
#define TF_CONV_BACKPROP_CUDA_ENGINE_H_

#include <cstdint>
#include <functional>

#include "tf_ops/core/geometry.h"

struct CUstream_st;
struct __half;
struct __nv_bfloat16;

namespace tf_conv_backprop {

struct CudaContext {
  // The stream all work is queued on (nullptr: the legacy default stream).
  CUstream_st* stream = nullptr;
  // Device scratch of `bytes` bytes (bytes > 0), aligned to at least 256 bytes, or
  // nullptr when it cannot be had. It must stay usable by work queued on `stream`
  // until the engine call returns (stream-ordered reuse after that is the caller's
  // business, as with TF's allocator). Called at most once per engine call, and only
  // when the call needs scratch (NCHW tensors, split reductions).
  std::function<void*(int64_t bytes)> allocate;
  // float32 conv2d gradients on tensor cores in TF32 (operands rounded to 10 mantissa
  // bits, float sums), as TF lets cuDNN do unless the user turns it off
  // (tf.config.experimental.enable_tensor_float_32_execution); false: exact float32.
  // Depthwise gradients and the other types ignore it. Either way deterministic.
  bool tf32 = false;
  // Tests only: take the 64-bit index kernels even where the 32-bit ones are safe.
  bool force_int64_index = false;
  // Tests only: 64 or 128, the tile size of the tensor-core conv2d kernels wherever
  // they have it (0: the engine's choice).
  int force_tile = 0;
};

// The gradient `op` on the GPU: (a, b) -> out is (filter, dy) -> dx for the input
// gradients, (x, dy) -> dW for the filter gradients. T is __half, __nv_bfloat16,
// float or double; half and bfloat16 accumulate in float. int32_t too for
// Conv2DBackpropInput alone (TF's set): exact, wrapping around as TF's int32 kernel. Tensors are in
// geo.data_format order, the filter is always HWIO (depthwise: [rows, cols, in_depth,
// depth_multiplier]); all pointers are device pointers. The output is fully written:
// zeros where the reduction is empty.
template <typename T>
Status GradientCuda(OpKind op, const CudaContext& ctx, const ConvGeometry& geo, const T* a, const T* b,
                    T* out);

// Whether every index the kernels form for `geo` fits in int32 (the guard of the
// 32-bit index kernels).
bool CudaIndexFitsInt32(const ConvGeometry& geo);

}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CUDA_ENGINE_H_
