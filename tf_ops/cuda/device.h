// Device-side helpers shared by the CUDA kernels: storage <-> accumulation types,
// aligned vector loads/stores, index-type selection and checked launches. Included
// only by the .cu files of the CUDA engine.
//
// The same sources also build for a CPU emulator (tests/core/cuda_emulator.h, which
// the emulated core test force-includes with -DTCB_CUDA_EMULATION): kernels use only
// what the emulator provides (no warp intrinsics, static shared memory, launches
// through Launch() below), so their index arithmetic is tested on machines without a
// GPU.
#ifndef TF_CONV_BACKPROP_CUDA_DEVICE_H_
#define TF_CONV_BACKPROP_CUDA_DEVICE_H_

#ifndef TCB_CUDA_EMULATION
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
#endif

#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tf_ops/core/geometry.h"

namespace tf_conv_backprop {
namespace cuda {

// ---- types ---------------------------------------------------------------------

template <typename T>
struct AccOf {
  using type = float;  // __half, __nv_bfloat16, float
};
template <>
struct AccOf<double> {
  using type = double;
};
// int32 sums in uint32: wrap-around (TF's int32 semantics) is defined there.
template <>
struct AccOf<int32_t> {
  using type = uint32_t;
};
template <typename T>
using Acc = typename AccOf<T>::type;

__device__ __forceinline__ float ToAcc(float v) { return v; }
__device__ __forceinline__ double ToAcc(double v) { return v; }
__device__ __forceinline__ float ToAcc(__half v) { return __half2float(v); }
__device__ __forceinline__ float ToAcc(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ uint32_t ToAcc(int32_t v) { return static_cast<uint32_t>(v); }

template <typename T>
struct FromAccOf;
template <>
struct FromAccOf<float> {
  __device__ __forceinline__ static float Cvt(float v) { return v; }
};
template <>
struct FromAccOf<double> {
  __device__ __forceinline__ static double Cvt(double v) { return v; }
};
template <>
struct FromAccOf<__half> {
  __device__ __forceinline__ static __half Cvt(float v) { return __float2half_rn(v); }
};
template <>
struct FromAccOf<__nv_bfloat16> {
  __device__ __forceinline__ static __nv_bfloat16 Cvt(float v) { return __float2bfloat16_rn(v); }
};
template <>
struct FromAccOf<int32_t> {
  __device__ __forceinline__ static int32_t Cvt(uint32_t v) { return static_cast<int32_t>(v); }
};
template <typename T>
__device__ __forceinline__ T FromAcc(Acc<T> v) {
  return FromAccOf<T>::Cvt(v);
}

template <typename T>
__device__ __forceinline__ T Min(T a, T b) {
  return a < b ? a : b;
}
template <typename T>
__device__ __forceinline__ T Max(T a, T b) {
  return a < b ? b : a;
}

// ---- vector access -------------------------------------------------------------

// V consecutive elements, loaded and stored as one aligned access (V * sizeof(T) is
// 2, 4, 8 or 16 bytes). Callers guarantee the alignment: the host picks V only when
// the contiguous extent is a multiple of V and the base pointer is aligned.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <int V, typename T>
__device__ __forceinline__ void LoadAcc(const T* p, Acc<T> (&out)[V]) {
  if constexpr (V == 1) {
    out[0] = ToAcc(p[0]);
  } else {
#ifdef TCB_CUDA_EMULATION
    tcb_emulator::CheckAligned(p, sizeof(Pack<T, V>));
#endif
    const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = ToAcc(pk.v[i]);
  }
}

template <int V, typename T>
__device__ __forceinline__ void StoreAcc(T* p, const Acc<T> (&in)[V]) {
  if constexpr (V == 1) {
    p[0] = FromAcc<T>(in[0]);
  } else {
#ifdef TCB_CUDA_EMULATION
    tcb_emulator::CheckAligned(p, sizeof(Pack<T, V>));
#endif
    Pack<T, V> pk;
#pragma unroll
    for (int i = 0; i < V; ++i) pk.v[i] = FromAcc<T>(in[i]);
    *reinterpret_cast<Pack<T, V>*>(p) = pk;
  }
}

// Whether p is aligned for a Pack<T, V>.
template <typename T>
inline bool AlignedFor(const void* p, int v) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * static_cast<size_t>(v)) == 0;
}

// ---- asynchronous copies into shared memory (cp.async, sm_80 and newer) --------

// 16 bytes from global `src` to shared `dst` (both 16-byte aligned), or 16 zero bytes
// when !valid (src is not read then, but must be a valid address). The copies a thread
// issued since its last CommitAsync() form a group; WaitAsync<N>() returns once at
// most N of the thread's groups are still in flight. Other threads may read the data
// only after the issuing thread waited for it and a barrier followed.
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, bool valid) {
#ifdef TCB_CUDA_EMULATION
  tcb_emulator::CopyAsync(dst, src, valid ? 16 : 0);
#else
  unsigned shared_addr;
  asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }"
               : "=r"(shared_addr)
               : "l"(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_addr), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
#endif
}

__device__ __forceinline__ void CommitAsync() {
#ifdef TCB_CUDA_EMULATION
  tcb_emulator::CommitAsync();
#else
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void WaitAsync() {
#ifdef TCB_CUDA_EMULATION
  tcb_emulator::WaitAsync(N);
#else
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// ---- launches ------------------------------------------------------------------

// Grid dimensions y and z are at most 65535; kernels loop over what does not fit.
constexpr int64_t kMaxGridX = 0x7fffffff;
constexpr int64_t kMaxGridYZ = 65535;

inline unsigned GridDim(int64_t want, int64_t limit) {
  return static_cast<unsigned>(want < 1 ? 1 : (want > limit ? limit : want));
}

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline Status CudaError(cudaError_t e, const char* what) {
  return Internal(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

// Launches kernel<<<grid, block, 0, stream>>>(args...) and turns a launch failure
// into a Status. An empty grid is a bug of the caller (empty tensors are handled
// before any launch), reported rather than launched.
template <typename... Params, typename... Args>
Status Launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
              Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel argument count");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x * block.y * block.z == 0) {
    return Internal(std::string("internal error: empty launch of ") + name);
  }
#ifdef TCB_CUDA_EMULATION
  const cudaError_t e = tcb_emulator::Launch(kernel, grid, block, std::forward<Args>(args)...);
#else
  std::tuple<Params...> values(std::forward<Args>(args)...);
  void* pointers[sizeof...(Params)];
  std::apply([&pointers](auto&... v) {
    int i = 0;
    ((pointers[i++] = static_cast<void*>(&v)), ...);
  }, values);
  const cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, pointers, 0, stream);
#endif
  if (e != cudaSuccess) {
    cudaGetLastError();  // a launch error is not sticky: leave no trace for others
    return CudaError(e, name);
  }
  return OkStatus();
}

// Zero bits are +0 in every element type.
inline Status ZeroFill(void* p, int64_t bytes, cudaStream_t stream) {
  if (bytes <= 0) return OkStatus();
  const cudaError_t e = cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return CudaError(e, "cudaMemsetAsync");
  }
  return OkStatus();
}

}  // namespace cuda
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CUDA_DEVICE_H_
