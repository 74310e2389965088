// Which CPU kernel variant runs: the table of variants (cpu/variants.def) and one
// pure selection function over it. The engine (cpu/engine.cc) runs what
// Candidates() returns, in order, until a kernel accepts the data.
#ifndef TF_CONV_BACKPROP_CPU_SELECT_H_
#define TF_CONV_BACKPROP_CPU_SELECT_H_

#include <cstdint>
#include <type_traits>

#include "tf_ops/core/geometry.h"
#include "tf_ops/cpu/isa.h"

namespace Eigen {
struct half;
struct bfloat16;
}  // namespace Eigen

namespace tf_conv_backprop {
namespace cpu {

constexpr int kNumOps = 4;  // OpKind's values, 0-3

// The element types of the CPU engine, in Dtype order: X(enumerator, C++ type,
// name, bit). The one list: the enum, its names and bits, DtypeOf and the kernel
// tables' columns all come from it.
#define TCB_FOR_EACH_DTYPE(X)                     \
  X(kHalf, Eigen::half, "float16", kF16)          \
  X(kBfloat16, Eigen::bfloat16, "bfloat16", kBf16) \
  X(kFloat, float, "float32", kF32)               \
  X(kDouble, double, "float64", kF64)             \
  X(kInt32, int32_t, "int32", kI32)

enum class Dtype {
#define TCB_DTYPE_ENUMERATOR(enumerator, type, name, bit) enumerator,
  TCB_FOR_EACH_DTYPE(TCB_DTYPE_ENUMERATOR)
#undef TCB_DTYPE_ENUMERATOR
};
constexpr int kNumDtypes = 0
#define TCB_DTYPE_COUNT(enumerator, type, name, bit) +1
    TCB_FOR_EACH_DTYPE(TCB_DTYPE_COUNT);
#undef TCB_DTYPE_COUNT
const char* DtypeName(Dtype dtype);

template <typename T>
constexpr bool kIsDtype = false
#define TCB_DTYPE_IS(enumerator, type, name, bit) || std::is_same_v<T, type>
    TCB_FOR_EACH_DTYPE(TCB_DTYPE_IS);
#undef TCB_DTYPE_IS
template <typename T>
constexpr Dtype DtypeOf() {
  static_assert(kIsDtype<T>, "the CPU engine runs the types of TCB_FOR_EACH_DTYPE");
#define TCB_DTYPE_OF(enumerator, type, name, bit) \
  if constexpr (std::is_same_v<T, type>) return Dtype::enumerator;
  TCB_FOR_EACH_DTYPE(TCB_DTYPE_OF)
#undef TCB_DTYPE_OF
  return Dtype::kHalf;  // not reached: the static_assert holds
}

// Bit masks of the table's columns.
enum DtypeBits : uint32_t {
#define TCB_DTYPE_BIT(enumerator, type, name, bit) bit = 1u << static_cast<int>(Dtype::enumerator),
  TCB_FOR_EACH_DTYPE(TCB_DTYPE_BIT)
#undef TCB_DTYPE_BIT
  // The floating types: the front end converts between them (half and bfloat16
  // compute in float); integers are exact and run only on rows that list them.
  kFloatDtypes = kF16 | kBf16 | kF32 | kF64,
};
enum LayoutBits : uint32_t { kNhwc = 1u << 0, kNchw = 1u << 1 };
enum Feature : uint32_t { kAvx512Bf16 = 1u << 0 };
// The table's short names for its op and ISA columns.
constexpr OpKind kConv2DInput = OpKind::kConv2DBackpropInput;
constexpr OpKind kConv2DFilter = OpKind::kConv2DBackpropFilter;
constexpr OpKind kDepthwiseInput = OpKind::kDepthwiseBackpropInput;
constexpr OpKind kDepthwiseFilter = OpKind::kDepthwiseBackpropFilter;
constexpr Isa kBaseline = Isa::kBaseline;
constexpr Isa kAvx2 = Isa::kAvx2;
constexpr Isa kAvx512 = Isa::kAvx512;
constexpr uint32_t BitOf(Dtype d) { return 1u << static_cast<int>(d); }
constexpr uint32_t BitOf(DataFormat f) { return f == DataFormat::kNHWC ? kNhwc : kNchw; }
constexpr bool IsFloating(Dtype d) { return (BitOf(d) & kFloatDtypes) != 0; }

// Where a selection is made: the call's geometry (its data format included), its
// element type, the threads it may use, and the CPU.
struct SelectionInput {
  OpKind op;
  const ConvGeometry* geo;
  Dtype dtype;
  int num_threads;
  Isa isa;            // the instruction-set build whose kernels run the call (IsaFor)
  uint32_t features;  // Feature bits of this CPU
};

// The variants, in table order.
enum class Variant : int {
#define TCB_CPU_VARIANT(name, ...) name,
#include "tf_ops/cpu/variants.def"
#undef TCB_CPU_VARIANT
  kCount
};
constexpr int kNumVariants = static_cast<int>(Variant::kCount);

struct VariantInfo {
  const char* name;
  OpKind op;
  uint32_t dtypes, layouts;
  Isa isa;
  uint32_t features;
  bool (*applies)(const SelectionInput&);
  const char* declines;
  const char* why;
};
const VariantInfo& InfoOf(Variant v);

// The element type a variant computes in for this call: the call's own where
// the row takes it as it is, else the front end's (float for half/bfloat16,
// in NHWC).
Dtype KernelDtype(Variant v, const SelectionInput& in);
// Whether the row takes the call's tensors as they are (no front end).
bool TakesAsIs(Variant v, const SelectionInput& in);

// The variants that may run this call, best first: every row of in.op that
// the ISA, the CPU features, the dtype and layout (directly or through the
// front end) and the geometry allow, in table order, after the forced one
// (ForcedVariant()) when it is among them. The last is never declining.
struct Candidates {
  Variant list[kNumVariants];
  int count = 0;
};
Candidates SelectCandidates(const SelectionInput& in);
// The first candidate: what runs unless its kernel declines the data.
Variant SelectKernel(const SelectionInput& in);

// TF_CONV_BACKPROP_CPU_KERNEL=<variant name>: that variant first wherever it
// applies (tests and experiments); unset or an unknown name: none.
// SetForcedVariant overrides it (-1 clears); not while kernels run.
int ForcedVariant();
void SetForcedVariant(int variant);

// This CPU's Feature bits (AVX512_BF16, with the OS's zmm state).
uint32_t CpuFeatures();
// The instruction-set build whose rows run a call: the active one, except for grouped
// conv2d layers whose groups fill ymm but not zmm vectors, which run at AVX2 on an AVX-512
// CPU (select.cc says why).
Isa IsaFor(OpKind op, const ConvGeometry& geo, Dtype dtype);
// The input for a call on this machine now.
SelectionInput MachineInput(OpKind op, const ConvGeometry& geo, Dtype dtype, int num_threads);

// Run bookkeeping, for info, tests and the benchmark: the last variant that ran,
// per op.
void RecordRun(Variant v);
int LastRun(OpKind op);  // -1 before the first

}  // namespace cpu
}  // namespace tf_conv_backprop

// For the Python side (ctypes; python -m tf_conv_backprop info, the benchmark).
#define TCB_EXPORT __attribute__((visibility("default")))
extern "C" {
TCB_EXPORT int tf_conv_backprop_cpu_variant_count();
// Row i of the table as "name|op|dtypes|layouts|isa|features|declines|why".
TCB_EXPORT const char* tf_conv_backprop_cpu_variant_row(int i);
// The variant the last call of op (0-3, OpKind order) ran, or "" before one.
TCB_EXPORT const char* tf_conv_backprop_cpu_last_variant(int op);
TCB_EXPORT const char* tf_conv_backprop_cpu_active_isa();
// The variant that TF_CONV_BACKPROP_CPU_KERNEL names, or "" (unset, unknown).
TCB_EXPORT const char* tf_conv_backprop_cpu_forced_variant();
}
#undef TCB_EXPORT

#endif  // TF_CONV_BACKPROP_CPU_SELECT_H_
