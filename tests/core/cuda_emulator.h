// A small CPU emulator of the CUDA subset the engine's kernels use, so their index
// arithmetic, tiling, shared-memory use and barriers are tested on machines without
// a GPU (tests/core/cuda_emulated_test.cc). Force-included (-include) ahead of the
// engine's .cu sources, compiled as C++ with -DTCB_CUDA_EMULATION.
//
// Model: one OS thread; the blocks of a launch run one after another; the threads of
// a block are fibers (ucontext) that switch only at __syncthreads(). So `__shared__`
// can simply be `static` (one block is live at a time), and a barrier reached by only
// part of a block (a divergent __syncthreads, undefined in CUDA) is caught and
// reported, as are misaligned vector accesses and invalid launch configurations.
// Memory is host memory; "device pointers" are plain pointers.
#ifndef TF_CONV_BACKPROP_TESTS_CORE_CUDA_EMULATOR_H_
#define TF_CONV_BACKPROP_TESTS_CORE_CUDA_EMULATOR_H_

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

struct CUstream_st;
using cudaStream_t = CUstream_st*;

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    default: return "unspecified launch failure";
  }
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  if (p == nullptr && bytes > 0) return cudaErrorInvalidValue;
  std::memset(p, value, bytes);
  return cudaSuccess;
}

// ---- 16-bit floats: CUDA's names, round-to-nearest-even conversions -------------
struct __half {
  uint16_t x;
};
struct __nv_bfloat16 {
  uint16_t x;
};

inline uint32_t tcb_float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float tcb_bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __half2float(__half h) {
  const uint32_t sign = static_cast<uint32_t>(h.x & 0x8000u) << 16;
  const uint32_t exp = (h.x >> 10) & 0x1fu, mant = h.x & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return tcb_bits_float(sign | 0x7f800000u | (mant << 13));
  return tcb_bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}
inline __half __float2half_rn(float f) {
  const uint32_t u = tcb_float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u))};
  if (a >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (a < 0x38800000u) {  // half subnormal or zero: units of 2^-24, ties to even
    const float scaled = tcb_bits_float(a) * 16777216.0f;
    return {static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)))};
  }
  const uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;
  return {static_cast<uint16_t>(sign | (r >> 13))};
}
inline float __bfloat162float(__nv_bfloat16 b) { return tcb_bits_float(static_cast<uint32_t>(b.x) << 16); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  const uint32_t u = tcb_float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7fc0u)};
  return {static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

namespace tcb_emulator {

// An asynchronous copy (cp.async) not yet landed: its bytes are read at issue (the
// kernels' sources do not change during a launch) and written to shared memory only
// when the issuing thread waits for its group, so a kernel that reads a stage before
// waiting (and the barrier after) reads stale data and fails its check.
struct PendingCopy {
  void* dst;
  unsigned char bytes[16];
};

struct Fiber {
  ucontext_t context;
  int state = 0;  // 0 runnable, 1 waiting at a barrier, 2 finished
  unsigned x = 0, y = 0, z = 0;
  std::vector<PendingCopy> open_group;             // issued since the last commit
  std::vector<std::vector<PendingCopy>> in_flight;  // committed groups, oldest first
};

struct State {
  std::vector<Fiber> fibers;
  std::vector<std::unique_ptr<char[]>> stacks;
  ucontext_t scheduler;
  size_t current = 0;
  std::function<void()> body;
  std::vector<std::string> faults;
};
inline State& GetState() {
  static State state;
  return state;
}
constexpr size_t kStackBytes = 256 * 1024;

inline void Fault(std::string what) {
  State& s = GetState();
  if (s.faults.size() < 20) s.faults.push_back(std::move(what));
}
// Faults seen since the last call (empty: none).
inline std::vector<std::string> TakeFaults() {
  std::vector<std::string> out;
  out.swap(GetState().faults);
  return out;
}

inline void CheckAligned(const void* p, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {
    Fault("misaligned " + std::to_string(bytes) + "-byte vector access at block (" + std::to_string(blockIdx.x) +
          "," + std::to_string(blockIdx.y) + "," + std::to_string(blockIdx.z) + ")");
  }
}

inline void SyncThreads() {
  State& s = GetState();
  s.fibers[s.current].state = 1;
  swapcontext(&s.fibers[s.current].context, &s.scheduler);
}

inline void Trampoline() {
  State& s = GetState();
  s.body();
  s.fibers[s.current].state = 2;  // returns to uc_link: the scheduler
}

inline void RunBlock() {
  State& s = GetState();
  const size_t n = s.fibers.size();
  for (size_t i = 0; i < n; ++i) {
    Fiber& f = s.fibers[i];
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = s.stacks[i].get();
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = &s.scheduler;
    makecontext(&f.context, Trampoline, 0);
    f.state = 0;
    f.open_group.clear();
    f.in_flight.clear();
  }
  for (;;) {
    size_t finished = 0, waiting = 0;
    for (size_t i = 0; i < n; ++i) {
      Fiber& f = s.fibers[i];
      if (f.state == 2) continue;
      f.state = 0;
      threadIdx = {f.x, f.y, f.z};
      s.current = i;
      swapcontext(&s.scheduler, &f.context);
    }
    for (const Fiber& f : s.fibers) {
      finished += f.state == 2;
      waiting += f.state == 1;
    }
    if (finished == n) {
      for (const Fiber& f : s.fibers) {
        if (!f.open_group.empty() || !f.in_flight.empty()) {
          Fault("a thread of block (" + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," +
                std::to_string(blockIdx.z) + ") exited with asynchronous copies not waited for");
          break;
        }
      }
      return;
    }
    if (finished != 0) {
      Fault("__syncthreads() reached by " + std::to_string(waiting) + " of " + std::to_string(n) +
            " threads (the others exited) in block (" + std::to_string(blockIdx.x) + "," +
            std::to_string(blockIdx.y) + "," + std::to_string(blockIdx.z) + ")");
    }
  }
}

template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), dim3 grid, dim3 block, Args&&... args) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu) {
    return cudaErrorInvalidConfiguration;
  }
  State& s = GetState();
  s.fibers.assign(threads, Fiber());
  while (s.stacks.size() < threads) s.stacks.emplace_back(new char[kStackBytes]);
  size_t i = 0;
  for (unsigned z = 0; z < block.z; ++z)
    for (unsigned y = 0; y < block.y; ++y)
      for (unsigned x = 0; x < block.x; ++x, ++i) s.fibers[i].x = x, s.fibers[i].y = y, s.fibers[i].z = z;
  std::tuple<Params...> values(std::forward<Args>(args)...);
  s.body = [&] { std::apply(kernel, values); };
  blockDim = block;
  gridDim = grid;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        RunBlock();
      }
  s.body = nullptr;
  return cudaSuccess;
}

inline void CopyAsync(void* dst, const void* src, int valid_bytes) {
  CheckAligned(dst, 16);
  CheckAligned(src, 16);  // cp.async wants both aligned, also when it reads nothing
  PendingCopy c{dst, {}};
  if (valid_bytes > 0) std::memcpy(c.bytes, src, 16);
  State& s = GetState();
  s.fibers[s.current].open_group.push_back(c);
}
inline void CommitAsync() {
  State& s = GetState();
  Fiber& f = s.fibers[s.current];
  f.in_flight.push_back(std::move(f.open_group));
  f.open_group.clear();
}
inline void WaitAsync(int allowed_in_flight) {
  State& s = GetState();
  Fiber& f = s.fibers[s.current];
  while (f.in_flight.size() > static_cast<size_t>(allowed_in_flight)) {
    for (const PendingCopy& c : f.in_flight.front()) std::memcpy(c.dst, c.bytes, 16);
    f.in_flight.erase(f.in_flight.begin());
  }
}

}  // namespace tcb_emulator

inline void __syncthreads() { tcb_emulator::SyncThreads(); }

// ---- tensor cores (nvcuda::wmma): 16x16x16 (half, bfloat16), 16x16x8 (TF32) ----
// Every thread of a warp holds the whole tile and does the whole operation: the
// threads of a block run one at a time, so the redundant loads, products and
// identical stores give exactly one warp's result. Layout and leading-dimension
// handling follow CUDA's semantics (ldm in elements; element (r, c) of a row_major
// tile at p[r * ldm + c], of a col_major one at p[c * ldm + r]), and the 256-bit
// pointer alignment CUDA requires is checked. A fragment's x[] are its elements in
// row-major order (CUDA leaves the thread-to-element map unspecified, so code may
// only apply elementwise operations to them). TF32 products use the top 19 bits of
// each float operand, as the hardware does: a kernel that skips __float_to_tf32
// gets truncated, not rounded, operands here too.
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
}  // namespace precision

inline float tcb_to_float(float v) { return v; }
inline float tcb_to_float(__half v) { return __half2float(v); }
inline float tcb_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// cvt.rna.tf32.f32: to nearest, ties away from zero; NaN and infinities kept.
inline float __float_to_tf32(float in) {
  uint32_t u = tcb_float_bits(in);
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;
  else if (u & 0x7fffffu) u |= 0x400000u;  // a NaN stays a NaN once truncated
  return tcb_bits_float(u & 0xffffe000u);
}
inline float tcb_tf32_operand(float v) { return tcb_bits_float(tcb_float_bits(v) & 0xffffe000u); }

template <typename Use, int M, int N, int K>
struct FragmentShape;
template <int M, int N, int K>
struct FragmentShape<matrix_a, M, N, K> {
  static constexpr int kRows = M, kCols = K;
};
template <int M, int N, int K>
struct FragmentShape<matrix_b, M, N, K> {
  static constexpr int kRows = K, kCols = N;
};
template <int M, int N, int K>
struct FragmentShape<accumulator, M, N, K> {
  static constexpr int kRows = M, kCols = N;
};

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && (K == 16 || (K == 8 && (std::is_same_v<T, precision::tf32> ||
                                                               std::is_same_v<Use, accumulator>))),
                "the emulator has 16x16x16 and TF32's 16x16x8 fragments only");
  static constexpr int kRows = FragmentShape<Use, M, N, K>::kRows, kCols = FragmentShape<Use, M, N, K>::kCols;
  static constexpr int num_elements = kRows * kCols;
  float x[num_elements];
  float& at(int r, int c) { return x[r * kCols + c]; }
  float at(int r, int c) const { return x[r * kCols + c]; }
};

// Counts of tensor-core products by operand type, so tests can tell which kernels ran.
inline uint64_t tcb_mma_count[2] = {0, 0};  // [0]: 16-bit operands, [1]: TF32

template <typename Use, int M, int N, int K, typename T, typename Layout, typename P>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const P* p, unsigned ldm) {
  static_assert(std::is_same_v<P, T> || (std::is_same_v<T, precision::tf32> && std::is_same_v<P, float>),
                "wmma loads a fragment from its own element type (TF32: from float)");
  tcb_emulator::CheckAligned(p, 32);
  for (int r = 0; r < f.kRows; ++r)
    for (int c = 0; c < f.kCols; ++c)
      f.at(r, c) = tcb_to_float(std::is_same<Layout, row_major>::value ? p[r * ldm + c] : p[c * ldm + r]);
}
template <int M, int N, int K, typename T>
void fill_fragment(fragment<accumulator, M, N, K, T>& f, T value) {
  for (float& v : f.x) v = value;
}
template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC>
void mma_sync(fragment<accumulator, M, N, K, TC>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
              const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
  constexpr bool kTf32 = std::is_same_v<TA, precision::tf32>;
  static_assert(std::is_same_v<TA, TB>, "both operands of one type");
  ++tcb_mma_count[kTf32];
  auto operand = [](float v) { return kTf32 ? tcb_tf32_operand(v) : v; };
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float s = c.at(i, j);
      for (int k = 0; k < K; ++k) s += operand(a.at(i, k)) * operand(b.at(k, j));
      out[i * N + j] = s;
    }
  std::memcpy(d.x, out, sizeof(out));
}
template <int M, int N, int K, typename T>
void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout) {
  tcb_emulator::CheckAligned(p, 32);
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.at(r, c);
}
}  // namespace wmma
}  // namespace nvcuda

#endif  // TF_CONV_BACKPROP_TESTS_CORE_CUDA_EMULATOR_H_
