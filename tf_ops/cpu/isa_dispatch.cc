// Which instruction-set build's kernel table the engine uses (see cpu/isa.h):
// the best the CPU runs, capped by TF_CONV_BACKPROP_ISA. Built with the
// baseline flags.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "tf_ops/cpu/isa.h"
#include "tf_ops/cpu/kernel_table.h"

namespace tf_conv_backprop {
namespace cpu {
namespace {

Isa DetectIsa() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  // libgcc's feature bits include the OS check (XCR0 saves the ymm / zmm state).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    return Isa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return Isa::kAvx2;
  }
#endif
  return Isa::kBaseline;
}

bool DetectIntel() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_is("intel");
#else
  return false;
#endif
}

Isa FromEnvironment(Isa best) {
  const char* requested = std::getenv("TF_CONV_BACKPROP_ISA");
  if (requested == nullptr) return best;
  for (int i = 0; i < kNumIsas; ++i) {
    const Isa isa = static_cast<Isa>(i);
    if (std::strcmp(requested, IsaName(isa)) == 0) return isa < best ? isa : best;
  }
  return best;  // unknown names are ignored
}

constexpr int kUnset = -1;
std::atomic<int> active_isa{kUnset};

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
#define TCB_ISA_NAME_CASE(name, enumerator, needs) \
  case Isa::enumerator:                            \
    return #name;
    TCB_FOR_EACH_ISA(TCB_ISA_NAME_CASE)
#undef TCB_ISA_NAME_CASE
  }
  return "unknown";
}

bool SplitLineStreamsAreSlow() {
  static const bool intel = DetectIntel();
  return intel;
}

Isa BestSupportedIsa() {
  static const Isa best = DetectIsa();
  return best;
}

Isa ActiveIsa() {
  int isa = active_isa.load(std::memory_order_relaxed);
  if (isa == kUnset) {
    isa = static_cast<int>(FromEnvironment(BestSupportedIsa()));
    active_isa.store(isa, std::memory_order_relaxed);
  }
  return static_cast<Isa>(isa);
}

Isa SetActiveIsa(Isa isa) {
  const Isa best = BestSupportedIsa();
  const Isa chosen = isa < best ? isa : best;
  active_isa.store(static_cast<int>(chosen), std::memory_order_relaxed);
  return chosen;
}

// Only ever called for an ISA the CPU runs: a table is built by its own ISA's
// code, which may already use that ISA's instructions.
const KernelTable& KernelsOf(Isa isa) {
  switch (isa) {
#define TCB_ISA_TABLE_CASE(name, enumerator, needs) \
  case Isa::enumerator:                             \
    return name::Kernels();
    TCB_FOR_EACH_ISA(TCB_ISA_TABLE_CASE)
#undef TCB_ISA_TABLE_CASE
  }
  return baseline::Kernels();
}

const KernelTable& ActiveKernels() { return KernelsOf(ActiveIsa()); }

}  // namespace cpu
}  // namespace tf_conv_backprop
