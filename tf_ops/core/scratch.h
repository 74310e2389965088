// Scratch memory of the CPU engine. Every temporary buffer the engine and the
// kernels allocate goes through ScratchAllocator, which counts the bytes in
// flight, so the benchmark can report the peak scratch of a call (the engine's
// bound: <= max(32 MiB, output size)). The counters live in core/scratch.cc, once
// per process, shared by all instruction-set variants.
#ifndef TF_CONV_BACKPROP_CORE_SCRATCH_H_
#define TF_CONV_BACKPROP_CORE_SCRATCH_H_

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace tf_conv_backprop {

// Budget for per-thread partial sums (filter gradients): more threads than fit
// just share fewer shards. Keeps the engine within max(32 MiB, output size).
constexpr int64_t kPartialSumBytes = int64_t{32} << 20;

// Shards for a reduction into `output_bytes` whose extra shards each need a
// private partial of that size: at most `wanted`, at least 1.
inline int64_t ShardsWithinPartialBudget(int64_t wanted, int64_t output_bytes) {
  const int64_t fit = 1 + kPartialSumBytes / (output_bytes > 0 ? output_bytes : 1);
  return wanted < fit ? (wanted > 1 ? wanted : 1) : fit;
}

// First element of shard s when `total` elements are split into `shards`
// near-equal contiguous parts (no overflow for any int64 total).
inline int64_t ShardStart(int64_t total, int64_t shards, int64_t s) {
  return s * (total / shards) + (s < total % shards ? s : total % shards);
}

void CountScratch(int64_t bytes);  // + on allocation, - on release
// Peak of the bytes in flight since the last reset (all threads together).
int64_t ScratchPeakBytes();
void ResetScratchPeak();

// A std allocator with 64-byte (cache line, zmm) alignment that counts its bytes.
template <typename T>
struct ScratchAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  ScratchAllocator() = default;
  template <typename U>
  ScratchAllocator(const ScratchAllocator<U>&) {}
  T* allocate(std::size_t n) {
    T* p = static_cast<T*>(::operator new(n * sizeof(T), kAlign));
    CountScratch(static_cast<int64_t>(n * sizeof(T)));
    return p;
  }
  void deallocate(T* p, std::size_t n) {
    CountScratch(-static_cast<int64_t>(n * sizeof(T)));
    ::operator delete(p, kAlign);
  }
  template <typename U>
  bool operator==(const ScratchAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const ScratchAllocator<U>&) const { return false; }
};

template <typename T>
using ScratchVector = std::vector<T, ScratchAllocator<T>>;

// The same scratch, uninitialised, for buffers that are written before they are
// read: a ScratchVector zero-fills, which for per-unit buffers of the NCHW
// paths cost as much as their transposes (8% of a C960@7 call).
template <typename T>
class ScratchBuffer {
 public:
  explicit ScratchBuffer(std::size_t n) : n_(n), p_(n > 0 ? ScratchAllocator<T>().allocate(n) : nullptr) {}
  ~ScratchBuffer() {
    if (p_ != nullptr) ScratchAllocator<T>().deallocate(p_, n_);
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  T* data() const { return p_; }

 private:
  std::size_t n_;
  T* p_;
};

}  // namespace tf_conv_backprop

// For the benchmark (through ctypes): the peak scratch in bytes since the last
// reset; resets the peak afterwards when `reset` is nonzero.
extern "C" __attribute__((visibility("default"))) int64_t tf_conv_backprop_scratch_peak_bytes(int reset);

#endif  // TF_CONV_BACKPROP_CORE_SCRATCH_H_
