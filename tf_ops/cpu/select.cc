// The variant table and the selection over it (see cpu/select.h). The geometry
// predicates live here, not in the kernels: a kernel assumes its row applies.
// Built with the baseline flags.
#include "tf_ops/cpu/select.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tf_ops/cpu/depthwise/channel_blocks.h"

namespace tf_conv_backprop {
namespace cpu {
namespace {

int64_t AccBytes(Dtype d) { return d == Dtype::kDouble ? 8 : 4; }
// Elements per zmm register of the kernel's accumulators.
int64_t ZmmLanes(Dtype d) { return 64 / AccBytes(d); }
// Elements per vector register of the kernels at the active ISA (ymm below AVX-512).
int64_t VectorLanes(const SelectionInput& in) {
  return (in.isa >= Isa::kAvx512 ? 64 : 32) / AccBytes(in.dtype);
}

// Rows whose kernels read the filter as [taps, in_depth, out_depth] take no groups;
// a grouped call no row takes runs on them as dense slices of whole groups.
bool Dense(const SelectionInput& in) { return in.geo->groups == 1; }

// Groups of 8 floats in and out on AVX-512 (stride 1 for the input gradient): the
// direct NHWC tiles take two groups a zmm, their lanes zipped (cpu/conv2d/direct_inl.h).
// Strided input gradients stay on the permutes: zipped / permuted time 0.81-1.08 on an
// Intel Xeon (RegNetX s2 w8 152->152 @28, ResNeXt-style s2 g32 256->256 @28, g16 128 @56;
// 2 threads, several runs) but 1.08-1.55 on a Zen 4 EPYC (s2 w8 152->152 @28, three
// `make bench` runs of each build alternated).
bool ZippedGroupPairs(const SelectionInput& in) {
  const ConvGeometry& g = *in.geo;
  const bool strided = g.stride_rows > 1 || g.stride_cols > 1;
  return (in.op == OpKind::kConv2DBackpropFilter || (in.op == OpKind::kConv2DBackpropInput && !strided)) &&
         in.isa >= Isa::kAvx512 && in.dtype == Dtype::kFloat && g.groups > 1 && g.group_in_depth() == 8 &&
         g.group_out_depth() == 8;
}

// The permuting grouped kernels: as many output channels as input channels a group,
// a power of two narrower than a vector of the active ISA (groups of whole vectors run
// faster on the direct tiles, see DirectInputApplies), and at most 32 bytes, so that
// one AVX2 vector (the row's lowest ISA, and what the sanitizer build compiles every
// row with) holds a group.
bool GroupedPermuteApplies(const SelectionInput& in) {
  const ConvGeometry& g = *in.geo;
  const int64_t cg = g.group_in_depth();
  return g.groups > 1 && cg == g.group_out_depth() && (cg & (cg - 1)) == 0 && cg < VectorLanes(in) &&
         cg * AccBytes(in.dtype) <= 32 && !ZippedGroupPairs(in);
}

// col == x: a 1x1 filter reading every input pixel exactly once, in order.
bool PointwiseApplies(const SelectionInput& in) {
  const ConvGeometry& g = *in.geo;
  return Dense(in) && g.filter_rows == 1 && g.filter_cols == 1 && g.stride_rows == 1 && g.stride_cols == 1 &&
         g.pad_top == 0 && g.pad_bottom == 0 && g.pad_left == 0 && g.pad_right == 0 &&
         g.out_rows == g.in_rows && g.out_cols == g.in_cols;
}

bool Always(const SelectionInput&) { return true; }

// The direct input-gradient tiles hold input channels of one group in whole vectors,
// or two zipped groups.
bool DirectInputApplies(const SelectionInput& in) {
  return in.geo->group_in_depth() % VectorLanes(in) == 0 || ZippedGroupPairs(in);
}
// vdpbf16ps pairs output channels, 16 input channels per vector.
bool DirectInputBf16Applies(const SelectionInput& in) {
  return Dense(in) && in.geo->in_depth % 16 == 0 && in.geo->out_depth % 2 == 0;
}
// Below AVX-512 the ymm tiles (6 input channels x 2 vectors) lost to the Eigen GEMM
// rows on 1x1 stride-1 layers (64->256 @56 10.5 vs 6.8 ms) and on the 3-channel stem
// (half a tile of channels: 34.8 vs 20.7 ms), float32, 2 threads, AMD EPYC. On 1x1
// they still do on a Zen 4 capped to AVX2 (kernel only, alternated, several runs):
// direct / GEMM time 1.26-1.47 (64->256 and 256->64 @56, 1024->256 @14); the same
// tiles over per-thread packed chunks of dy, the next chunk prefetched, 0.82-0.90 on
// 64->256 @56 but 0.82-1.11 on 256->64 @56 and 1.08-1.40 on 512->128 @28 and
// 1024->256 @14: no row, the GEMM rows keep 1x1.
bool YmmFilterTilesLose(const SelectionInput& in) {
  return in.isa < Isa::kAvx512 && (PointwiseApplies(in) || in.geo->group_in_depth() < 8);
}
// The direct filter-gradient tiles hold output channels of one group in whole vectors.
bool DirectFilterApplies(const SelectionInput& in) {
  return !YmmFilterTilesLose(in) && in.geo->group_out_depth() % VectorLanes(in) == 0;
}
// The NHWC tiles also take zipped group pairs.
bool DirectFilterNhwcApplies(const SelectionInput& in) { return DirectFilterApplies(in) || ZippedGroupPairs(in); }
bool DirectFilterBf16Applies(const SelectionInput& in) { return Dense(in) && in.geo->out_depth % 16 == 0; }

// dW past L2 would be streamed once per pixel tile by the im2col GEMMs.
constexpr int64_t kSplitFilterBytes = int64_t{1} << 20;
bool FilterByTapsApplies(const SelectionInput& in) {
  return Dense(in) && !PointwiseApplies(in) && in.geo->filter_elements * AccBytes(in.dtype) > kSplitFilterBytes;
}

// The AVX-512 planar kernels keep one padded plane (a vector of columns either
// side) per thread, at most this much together.
constexpr int64_t kMaxPlanesBytes = int64_t{32} << 20;
bool PlanarAvx512Applies(const SelectionInput& in) {
  const ConvGeometry& g = *in.geo;
  const bool size = (g.filter_rows == 3 && g.filter_cols == 3) || (g.filter_rows == 5 && g.filter_cols == 5);
  const int64_t plane_bytes = g.in_rows * (g.in_cols + 2 * ZmmLanes(in.dtype)) * AccBytes(in.dtype);
  return size && g.depth_multiplier == 1 && g.stride_rows <= 2 && g.stride_cols <= 2 &&
         plane_bytes * std::max(1, in.num_threads) <= kMaxPlanesBytes;
}
// With a multiplier of 1 the generic planar kernels lose to the channel blocks.
bool PlanarApplies(const SelectionInput& in) { return in.geo->depth_multiplier > 1; }

// The depthwise NHWC filter gradient's register-blocked sizes (its SimdFilterRows).
bool DepthwiseSimdFilterApplies(const SelectionInput& in) {
  const ConvGeometry& g = *in.geo;
  return (g.filter_rows == 3 && g.filter_cols == 3) || (g.filter_rows == 5 && g.filter_cols == 5);
}

bool InputChannelBlocksApply(const SelectionInput& in) {
  return depthwise::PlanInputBlocks(*in.geo, AccBytes(in.dtype), in.num_threads).fits;
}
bool FilterChannelBlocksApply(const SelectionInput& in) {
  return depthwise::PlanFilterBlocks(*in.geo, AccBytes(in.dtype), in.num_threads).fits;
}

const VariantInfo kVariants[] = {
#define TCB_CPU_VARIANT(name, op, dtypes, layouts, isa, features, applies, kernel, declines, why) \
  {#name, op, dtypes, layouts, isa, features, &applies, declines, why},
#include "tf_ops/cpu/variants.def"
#undef TCB_CPU_VARIANT
};
static_assert(sizeof(kVariants) / sizeof(kVariants[0]) == kNumVariants, "one entry per row");

// The front end serves rows that compute in float or double on NHWC tensors, for
// the floating types only: an integer gradient is exact, never converted.
bool ServesThroughFrontEnd(const VariantInfo& row, Dtype dtype) {
  return IsFloating(dtype) && (row.layouts & kNhwc) != 0 && (row.dtypes & (kF32 | kF64)) == (kF32 | kF64);
}

Dtype AccDtype(Dtype d) { return d == Dtype::kDouble ? Dtype::kDouble : Dtype::kFloat; }

// Whether the row can run this call (directly or through the front end).
bool Runs(Variant v, const SelectionInput& in) {
  const VariantInfo& row = InfoOf(v);
  if (row.op != in.op || row.isa > in.isa || (row.features & ~in.features) != 0) return false;
  if (!TakesAsIs(v, in) && !ServesThroughFrontEnd(row, in.dtype)) return false;
  SelectionInput as_run = in;
  as_run.dtype = KernelDtype(v, in);
  return row.applies(as_run);
}

int FromEnvironment() {
  const char* name = std::getenv("TF_CONV_BACKPROP_CPU_KERNEL");
  if (name == nullptr) return -1;
  for (int i = 0; i < kNumVariants; ++i) {
    if (std::strcmp(name, kVariants[i].name) == 0) return i;
  }
  return -1;
}

constexpr int kUnset = -2;
std::atomic<int> forced{kUnset};
std::atomic<int> last_runs[kNumOps] = {-1, -1, -1, -1};

}  // namespace

const VariantInfo& InfoOf(Variant v) { return kVariants[static_cast<int>(v)]; }

bool TakesAsIs(Variant v, const SelectionInput& in) {
  const VariantInfo& row = InfoOf(v);
  return (row.dtypes & BitOf(in.dtype)) != 0 && (row.layouts & BitOf(in.geo->data_format)) != 0;
}

Dtype KernelDtype(Variant v, const SelectionInput& in) {
  return TakesAsIs(v, in) ? in.dtype : AccDtype(in.dtype);
}

Candidates SelectCandidates(const SelectionInput& in) {
  Candidates c;
  const int first = ForcedVariant();
  if (first >= 0 && Runs(static_cast<Variant>(first), in)) c.list[c.count++] = static_cast<Variant>(first);
  for (int i = 0; i < kNumVariants; ++i) {
    if (i != first && Runs(static_cast<Variant>(i), in)) c.list[c.count++] = static_cast<Variant>(i);
  }
  return c;
}

Variant SelectKernel(const SelectionInput& in) {
  const Candidates c = SelectCandidates(in);
  return c.count > 0 ? c.list[0] : Variant::kCount;
}

int ForcedVariant() {
  int v = forced.load(std::memory_order_relaxed);
  if (v == kUnset) {
    v = FromEnvironment();
    forced.store(v, std::memory_order_relaxed);
  }
  return v;
}
void SetForcedVariant(int variant) { forced.store(variant, std::memory_order_relaxed); }

uint32_t CpuFeatures() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const uint32_t features = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") ? uint32_t{kAvx512Bf16} : uint32_t{0};
  }();
  return features;
#else
  return 0;
#endif
}

// Grouped conv2d whose groups fill whole ymm vectors but not whole zmm vectors (8, 24,
// 40 ... floats; 4, 12 ... doubles) runs the AVX2 build's rows on an AVX-512 CPU: its
// direct ymm tiles, where the AVX-512 rows would permute lanes of two groups a vector.
// Measured on AMD Zen 4 (2 threads, float32, groups of 8, both builds alternated in one
// process, medians of 9): zmm-permute time / ymm-tile time 1.30-1.35 for the stride-1
// input gradients (ResNeXt 256 @28, RegNetX 56 @28), 0.95-1.31 for the filter gradients;
// but 0.68-0.74 for the stride-2 input gradient (RegNetX 152 @28), whose few taps a
// column class leave the tiles short of work, so strided input gradients stay on zmm.
// Groups of 1, 2 and 4 floats stay on the zmm permutes, groups of whole zmm vectors on
// the zmm tiles. Groups of exactly 8 floats in and out (but strided input gradients)
// stay on AVX-512 too, two groups a zmm zipped (ZippedGroupPairs): on an Intel Xeon
// (AVX-512 at full width) zipped / ymm-tile time 0.48-0.70 (input), 0.68-0.79 (filter).
Isa IsaFor(OpKind op, const ConvGeometry& geo, Dtype dtype) {
  const Isa active = ActiveIsa();
  const bool input = op == OpKind::kConv2DBackpropInput;
  const bool strided = geo.stride_rows > 1 || geo.stride_cols > 1;
  const bool zipped = (!input || !strided) && geo.group_in_depth() == 8 && geo.group_out_depth() == 8 &&
                      AccDtype(dtype) == Dtype::kFloat;
  if (active < Isa::kAvx512 || geo.groups == 1 || !IsFloating(dtype) || (input && strided) || zipped ||
      (!input && op != OpKind::kConv2DBackpropFilter)) {
    return active;
  }
  const int64_t group_bytes = geo.group_in_depth() * AccBytes(dtype);
  return group_bytes % 32 == 0 && group_bytes % 64 != 0 && geo.group_out_depth() == geo.group_in_depth()
             ? Isa::kAvx2
             : active;
}

SelectionInput MachineInput(OpKind op, const ConvGeometry& geo, Dtype dtype, int num_threads) {
  return SelectionInput{op, &geo, dtype, num_threads, IsaFor(op, geo, dtype), CpuFeatures()};
}

void RecordRun(Variant v) {
  last_runs[static_cast<int>(InfoOf(v).op)].store(static_cast<int>(v), std::memory_order_relaxed);
}
int LastRun(OpKind op) { return last_runs[static_cast<int>(op)].load(std::memory_order_relaxed); }

const char* DtypeName(Dtype dtype) {
  switch (dtype) {
#define TCB_DTYPE_NAME(enumerator, type, name, bit) \
  case Dtype::enumerator: return name;
    TCB_FOR_EACH_DTYPE(TCB_DTYPE_NAME)
#undef TCB_DTYPE_NAME
  }
  return "unknown";
}

}  // namespace cpu
}  // namespace tf_conv_backprop

namespace {
using namespace tf_conv_backprop;

// The names of the set bits of `bits`, name(i) for bit i, comma-separated.
template <typename Name>
std::string BitNames(uint32_t bits, int count, Name name) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    if ((bits & (1u << i)) == 0) continue;
    if (!out.empty()) out += ",";
    out += name(i);
  }
  return out;
}

std::string Row(int i) {
  const cpu::VariantInfo& row = cpu::InfoOf(static_cast<cpu::Variant>(i));
  auto dtype = [](int d) { return cpu::DtypeName(static_cast<cpu::Dtype>(d)); };
  auto layout = [](int l) { return l == 0 ? "NHWC" : "NCHW"; };  // LayoutBits order
  auto feature = [](int) { return "avx512_bf16"; };              // the one Feature bit
  return std::string(row.name) + "|" + OpName(row.op) + "|" + BitNames(row.dtypes, cpu::kNumDtypes, dtype) +
         "|" + BitNames(row.layouts, 2, layout) + "|" + cpu::IsaName(row.isa) + "|" +
         BitNames(row.features, 1, feature) + "|" + row.declines + "|" + row.why;
}
}  // namespace

int tf_conv_backprop_cpu_variant_count() { return cpu::kNumVariants; }

const char* tf_conv_backprop_cpu_variant_row(int i) {
  static const auto* const rows = [] {
    auto* r = new std::string[cpu::kNumVariants];
    for (int j = 0; j < cpu::kNumVariants; ++j) r[j] = Row(j);
    return r;
  }();
  return i >= 0 && i < cpu::kNumVariants ? rows[i].c_str() : "";
}

const char* tf_conv_backprop_cpu_last_variant(int op) {
  if (op < 0 || op >= cpu::kNumOps) return "";
  const int v = cpu::LastRun(static_cast<OpKind>(op));
  return v < 0 ? "" : cpu::InfoOf(static_cast<cpu::Variant>(v)).name;
}

const char* tf_conv_backprop_cpu_active_isa() { return cpu::IsaName(cpu::ActiveIsa()); }

const char* tf_conv_backprop_cpu_forced_variant() {
  const int v = cpu::ForcedVariant();
  return v < 0 ? "" : cpu::InfoOf(static_cast<cpu::Variant>(v)).name;
}
