// Every row of the CPU kernel-variant table (tf_ops/cpu/variants.def), forced,
// on random geometries around its predicate's boundaries: where selection says
// it applies, the engine must run exactly that variant (the run record says so)
// and match the float64 reference on NaN-filled outputs; where it says not, the
// variant must not run (int32 rows: bit for bit against the wrapping uint32
// reference). Fails when a variant the CPU can run never applied;
// prints per ISA the variants it could not try (the CPU lacks the ISA or a
// feature). The other core tests sweep geometries; this one sweeps the table.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "tests/core/naive_reference.h"
#include "tf_ops/cpu/engine.h"
#include "tf_ops/cpu/isa.h"
#include "tf_ops/cpu/kernel_table.h"
#include "tf_ops/cpu/select.h"

namespace tcb = tf_conv_backprop;
using tcb::ConvGeometry;
using tcb::DataFormat;
using tcb::OpKind;
namespace cpu = tcb::cpu;

namespace {

constexpr int kGeometriesPerOp = 400;
// Applicable geometries run per (variant, dtype, layout): this many dense ones and as
// many grouped ones, so a row that takes groups is tried on them too.
constexpr int kRunsPerVariant = 6;

// Sizes near the predicates' boundaries: whole vectors of 8 / 16 channels and
// one either side, tiny and odd ones.
int64_t Channels(std::mt19937_64& rng) {
  static const int64_t kChoices[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 32, 48, 64};
  return kChoices[rng() % (sizeof(kChoices) / sizeof(kChoices[0]))];
}

// A random valid geometry of `op` (NHWC; the caller sets the layout), or false.
bool RandomGeometry(OpKind op, std::mt19937_64& rng, ConvGeometry* g) {
  auto pick = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % (hi - lo + 1)); };
  const bool depthwise = op == OpKind::kDepthwiseBackpropInput || op == OpKind::kDepthwiseBackpropFilter;
  const int shape = static_cast<int>(rng() % 6);
  const int64_t k = shape == 0 ? 1 : (shape <= 2 ? 3 : (shape == 3 ? 5 : pick(1, 4)));
  tcb::ConvAttrs attrs;
  attrs.padding = tcb::Padding::kExplicit;
  const bool plain = shape == 0 || rng() % 3 == 0;  // stride 1, no dilation, SAME-like pads
  attrs.stride_rows = plain ? 1 : pick(1, 3);
  attrs.stride_cols = plain ? 1 : pick(1, 3);
  attrs.dilation_rows = plain || depthwise ? 1 : pick(1, 2);
  attrs.dilation_cols = plain || depthwise ? 1 : pick(1, 2);
  const int64_t pad = shape == 0 ? 0 : (k - 1) / 2;
  attrs.pad_top = plain ? pad : pick(0, 2);
  attrs.pad_bottom = plain ? pad : pick(0, 2);
  attrs.pad_left = plain ? pad : pick(0, 2);
  attrs.pad_right = plain ? pad : pick(0, 2);
  // A batch of 4 or more at times: the dense input gradient's image tiles (rows up to 16).
  const int64_t n = rng() % 4 == 0 ? pick(4, 6) : pick(1, 3);
  const int64_t h = pick(1, 14), w = pick(1, 14), cin = Channels(rng);
  // Occasionally a filter past 1 MiB (the dense filter gradient's tap split).
  const bool big = !depthwise && rng() % 12 == 0;
  const int64_t cout = big ? pick(300, 340) : (depthwise ? pick(1, 3) : Channels(rng));
  int64_t kin = big ? pick(200, 240) : cin;
  const int64_t kk = big ? 2 : k;
  std::vector<int64_t> input = {n, h, w, kin}, filter = {kk, kk, kin, cout};
  // A quarter of the conv2d geometries grouped: widths around the grouped rows' powers
  // of two (out as in, mostly), 2 to 9 groups.
  if (!depthwise && !big && rng() % 4 == 0) {
    static const int64_t kWidths[] = {1, 2, 3, 4, 8, 16};
    const int64_t groups = pick(2, 9), width = kWidths[rng() % 6];
    const int64_t out_width = rng() % 4 == 0 ? kWidths[rng() % 6] : width;
    kin = groups * width;
    input = {n, h, w, kin};
    filter = {kk, kk, width, groups * out_width};
  }
  const int64_t cout_all = filter[3];
  int64_t oh = 0, ow = 0, unused = 0;
  if (!tcb::WindowedOutputSize(h, kk, attrs.dilation_rows, attrs.stride_rows, attrs.padding, attrs.pad_top,
                               attrs.pad_bottom, &oh, &unused, &unused).ok() ||
      !tcb::WindowedOutputSize(w, kk, attrs.dilation_cols, attrs.stride_cols, attrs.padding, attrs.pad_left,
                               attrs.pad_right, &ow, &unused, &unused).ok() ||
      oh <= 0 || ow <= 0) {
    return false;
  }
  const std::vector<int64_t> dy = {n, oh, ow, depthwise ? kin * cout : cout_all};
  return tcb::ComputeGeometry(op, attrs, input, filter, dy, g).ok();
}

template <typename T>
std::vector<T> Random(int64_t count, std::mt19937_64& rng) {
  std::vector<T> v(count);
  if constexpr (std::is_same_v<T, int32_t>) {
    // The whole int32 range: nearly every sum wraps around.
    for (T& e : v) e = static_cast<int32_t>(static_cast<uint32_t>(rng()));
  } else {
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    for (T& e : v) e = static_cast<T>(uniform(rng));
  }
  return v;
}

// The reference gradient: float64 sums, or for int32 the exact uint32 ones (TF's
// wrap-around).
template <typename T>
auto Reference(const ConvGeometry& nhwc, bool input_grad, const std::vector<T>& operand,
               const std::vector<T>& dy) {
  if constexpr (std::is_same_v<T, int32_t>) {
    return tcb::naive::Gradient<int32_t, uint32_t>(nhwc, input_grad, operand.data(), dy.data());
  } else {
    const std::vector<double> operand64(operand.begin(), operand.end()), dy64(dy.begin(), dy.end());
    return tcb::naive::Gradient(nhwc, input_grad, operand64.data(), dy64.data());
  }
}

// What outputs are pre-filled with, so an element the kernel leaves unwritten fails.
template <typename T>
T Unwritten() {
  if constexpr (std::is_same_v<T, int32_t>) {
    return 0x5a5a5a5a;
  } else {
    return static_cast<T>(std::numeric_limits<float>::quiet_NaN());
  }
}

// NHWC <-> NCHW of a [n, pixels, c] tensor.
template <typename T>
std::vector<T> Transposed(const std::vector<T>& src, int64_t n, int64_t pixels, int64_t c, bool to_nchw) {
  std::vector<T> dst(src.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t j = 0; j < c; ++j) {
        const int64_t nhwc = (i * pixels + p) * c + j, nchw = (i * c + j) * pixels + p;
        if (to_nchw) {
          dst[nchw] = src[nhwc];
        } else {
          dst[nhwc] = src[nchw];
        }
      }
  return dst;
}

double Tolerance(cpu::Dtype d) {
  // Relative to the largest reference magnitude; reductions of a few hundred terms.
  switch (d) {
    case cpu::Dtype::kHalf: return 4e-3;
    case cpu::Dtype::kBfloat16: return 3e-2;
    case cpu::Dtype::kFloat: return 1e-5;
    case cpu::Dtype::kDouble: return 1e-12;
    case cpu::Dtype::kInt32: return 0;  // exact: any differing element fails
  }
  return 0;
}

tcb::CpuContext Serial() { return tcb::CpuContext(); }

// Runs the op through the engine on `g` (its data_format) and returns the max
// error relative to the largest reference magnitude; NaN counts as infinite.
template <typename T>
double RunAgainstReference(OpKind op, const ConvGeometry& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const bool input_grad = op == OpKind::kConv2DBackpropInput || op == OpKind::kDepthwiseBackpropInput;
  const std::vector<T> operand = Random<T>(input_grad ? g.filter_elements : g.input_elements, rng);
  const std::vector<T> dy = Random<T>(g.out_backprop_elements, rng);
  ConvGeometry nhwc = g;
  nhwc.data_format = DataFormat::kNHWC;
  const auto ref = Reference(nhwc, input_grad, operand, dy);
  const bool nchw = g.data_format == DataFormat::kNCHW;
  const int64_t in_pixels = g.in_rows * g.in_cols, out_pixels = g.out_rows * g.out_cols;
  const std::vector<T> a = nchw && !input_grad ? Transposed(operand, g.batch, in_pixels, g.in_depth, true) : operand;
  const std::vector<T> b = nchw ? Transposed(dy, g.batch, out_pixels, g.out_depth, true) : dy;
  std::vector<T> out(ref.size(), Unwritten<T>());
  const tcb::Status status = tcb::GradientCpu<T>(op, Serial(), g, a.data(), b.data(), out.data());
  if (!status.ok()) return std::numeric_limits<double>::infinity();
  if (nchw && input_grad) out = Transposed(out, g.batch, in_pixels, g.in_depth, false);
  if constexpr (std::is_same_v<T, int32_t>) {
    for (size_t i = 0; i < ref.size(); ++i) {
      if (static_cast<uint32_t>(out[i]) != ref[i]) return std::numeric_limits<double>::infinity();
    }
    return 0;
  }
  double scale = 1e-30, err = 0;
  for (double r : ref) scale = std::max(scale, std::abs(r));
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::abs(static_cast<double>(out[i]) - ref[i]);
    if (!(e == e)) return std::numeric_limits<double>::infinity();
    err = std::max(err, e);
  }
  return err / scale;
}

double RunAgainstReference(cpu::Dtype d, OpKind op, const ConvGeometry& g, uint64_t seed) {
  switch (d) {
    case cpu::Dtype::kHalf: return RunAgainstReference<Eigen::half>(op, g, seed);
    case cpu::Dtype::kBfloat16: return RunAgainstReference<Eigen::bfloat16>(op, g, seed);
    case cpu::Dtype::kFloat: return RunAgainstReference<float>(op, g, seed);
    case cpu::Dtype::kDouble: return RunAgainstReference<double>(op, g, seed);
    case cpu::Dtype::kInt32: return RunAgainstReference<int32_t>(op, g, seed);
  }
  return 1;
}

std::string Describe(const ConvGeometry& g) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "N=%lld %lldx%lldx%lld k=%lldx%lld out=%lldx%lldx%lld s=%lld,%lld d=%lld,%lld "
                "pads=%lld,%lld,%lld,%lld %s",
                (long long)g.batch, (long long)g.in_rows, (long long)g.in_cols, (long long)g.in_depth,
                (long long)g.filter_rows, (long long)g.filter_cols, (long long)g.out_rows, (long long)g.out_cols,
                (long long)g.out_depth, (long long)g.stride_rows, (long long)g.stride_cols,
                (long long)g.dilation_rows, (long long)g.dilation_cols, (long long)g.pad_top,
                (long long)g.pad_bottom, (long long)g.pad_left, (long long)g.pad_right,
                g.data_format == DataFormat::kNCHW ? "NCHW" : "NHWC");
  return buf;
}

struct Tally {
  int passed = 0, failed = 0;
};

// One variant at the active ISA: every (dtype, layout) it takes as it is.
void CheckVariant(cpu::Variant v, const std::vector<ConvGeometry>& pool, Tally* tally) {
  const cpu::VariantInfo& row = cpu::InfoOf(v);
  cpu::SetForcedVariant(static_cast<int>(v));
  int applied_total = 0, grouped_total = 0, declined_total = 0;
  for (int d = 0; d < cpu::kNumDtypes; ++d) {
    const cpu::Dtype dtype = static_cast<cpu::Dtype>(d);
    if ((row.dtypes & cpu::BitOf(dtype)) == 0) continue;
    for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
      if ((row.layouts & cpu::BitOf(format)) == 0) continue;
      int runs[2] = {0, 0};  // dense, grouped
      for (size_t i = 0; i < pool.size() && (runs[0] < kRunsPerVariant || runs[1] < kRunsPerVariant); ++i) {
        ConvGeometry g = pool[i];
        g.data_format = format;
        const int grouped = g.groups > 1 ? 1 : 0;
        if (runs[grouped] == kRunsPerVariant) continue;
        const cpu::SelectionInput in = cpu::MachineInput(row.op, g, dtype, 1);
        if (cpu::SelectKernel(in) != v) {
          ++declined_total;
          continue;
        }
        ++runs[grouped];
        const double err = RunAgainstReference(dtype, row.op, g, 1000 + i);
        const int ran = cpu::LastRun(row.op);
        const bool ok = err <= Tolerance(dtype) && ran == static_cast<int>(v);
        ok ? ++tally->passed : ++tally->failed;
        if (!ok) {
          std::printf("FAIL %s %s: rel_err=%g ran %s\n  %s\n", row.name, cpu::DtypeName(dtype), err,
                      ran < 0 ? "nothing" : cpu::InfoOf(static_cast<cpu::Variant>(ran)).name, Describe(g).c_str());
        }
      }
      applied_total += runs[0] + runs[1];
      grouped_total += runs[1];
    }
  }
  cpu::SetForcedVariant(-1);
  std::printf("  %-38s ran on %2d geometries (%2d grouped), not selected on %3d\n", row.name, applied_total,
              grouped_total, declined_total);
  if (applied_total == 0) {
    ++tally->failed;
    std::printf("FAIL %s: the CPU runs it, but it applied to none of the geometries\n", row.name);
  }
}

// IsaFor's rule on an AVX-512 CPU: grouped conv2d with groups of whole ymm but not
// whole zmm vectors runs the AVX2 build (but groups of 8 floats in and out, zipped two
// a zmm, except strided input gradients); everything else the active ISA.
void CheckIsaRouting(Tally* tally) {
  if (cpu::BestSupportedIsa() < cpu::Isa::kAvx512) return;
  cpu::SetActiveIsa(cpu::Isa::kAvx512);
  struct Case {
    OpKind op;
    int64_t groups, group_depth, stride;
    cpu::Dtype dtype;
    cpu::Isa expected;
  } cases[] = {
      {OpKind::kConv2DBackpropInput, 32, 8, 1, cpu::Dtype::kFloat, cpu::Isa::kAvx512},  // zipped pairs
      {OpKind::kConv2DBackpropFilter, 7, 8, 2, cpu::Dtype::kHalf, cpu::Isa::kAvx512},    // zipped pairs
      {OpKind::kConv2DBackpropInput, 32, 24, 1, cpu::Dtype::kFloat, cpu::Isa::kAvx2},
      {OpKind::kConv2DBackpropFilter, 7, 24, 2, cpu::Dtype::kBfloat16, cpu::Isa::kAvx2},
      {OpKind::kConv2DBackpropFilter, 4, 4, 1, cpu::Dtype::kDouble, cpu::Isa::kAvx2},
      {OpKind::kConv2DBackpropInput, 32, 8, 2, cpu::Dtype::kFloat, cpu::Isa::kAvx512},
      {OpKind::kConv2DBackpropInput, 32, 4, 1, cpu::Dtype::kFloat, cpu::Isa::kAvx512},
      {OpKind::kConv2DBackpropInput, 32, 16, 1, cpu::Dtype::kFloat, cpu::Isa::kAvx512},
      {OpKind::kConv2DBackpropInput, 1, 8, 1, cpu::Dtype::kFloat, cpu::Isa::kAvx512},
      {OpKind::kConv2DBackpropInput, 4, 8, 1, cpu::Dtype::kInt32, cpu::Isa::kAvx512},
  };
  for (const Case& c : cases) {
    ConvGeometry g;
    g.stride_rows = g.stride_cols = c.stride;
    g.groups = c.groups;
    g.in_depth = g.out_depth = c.groups * c.group_depth;
    const cpu::Isa isa = cpu::IsaFor(c.op, g, c.dtype);
    const bool ok = isa == c.expected;
    ok ? ++tally->passed : ++tally->failed;
    if (!ok) {
      std::printf("FAIL IsaFor(groups %lld of %lld %s) = %s, expected %s\n", (long long)c.groups,
                  (long long)c.group_depth, cpu::DtypeName(c.dtype), cpu::IsaName(isa), cpu::IsaName(c.expected));
    }
  }
}

// A batch of 2, h x w, `groups` groups of `width` channels in and out, a 3x3 filter at
// the stride, dilation and pad (every side); false where it does not fit.
bool GroupedGeometry(int64_t h, int64_t w, int64_t groups, int64_t width, int64_t stride, int64_t dilation,
                     int64_t pad, ConvGeometry* g) {
  tcb::ConvAttrs attrs;
  attrs.padding = tcb::Padding::kExplicit;
  attrs.stride_rows = attrs.stride_cols = stride;
  attrs.dilation_rows = attrs.dilation_cols = dilation;
  attrs.pad_top = attrs.pad_bottom = attrs.pad_left = attrs.pad_right = pad;
  const int64_t depth = groups * width;
  int64_t oh = 0, ow = 0, unused = 0;
  return tcb::WindowedOutputSize(h, 3, dilation, stride, attrs.padding, pad, pad, &oh, &unused, &unused).ok() &&
         tcb::WindowedOutputSize(w, 3, dilation, stride, attrs.padding, pad, pad, &ow, &unused, &unused).ok() &&
         tcb::ComputeGeometry(OpKind::kConv2DBackpropInput, attrs, {2, h, w, depth}, {3, 3, width, depth},
                              {2, oh, ow, depth}, g)
             .ok();
}

// Counts one check of `op` on g: its error within the dtype's tolerance and, where
// `expected` names a variant, that variant ran (the last run of op); prints what ran
// where it failed.
constexpr int kAnyVariant = -1;
void Record(const char* what, OpKind op, int expected, cpu::Dtype dtype, double err, const ConvGeometry& g,
            Tally* tally) {
  const int ran = cpu::LastRun(op);
  const bool ok = err <= Tolerance(dtype) && (expected == kAnyVariant || ran == expected);
  ok ? ++tally->passed : ++tally->failed;
  if (ok) return;
  std::printf("FAIL %s %s %s: rel_err=%g ran %s\n  %s\n", what, OpName(op), cpu::DtypeName(dtype), err,
              ran < 0 ? "nothing" : cpu::InfoOf(static_cast<cpu::Variant>(ran)).name, Describe(g).c_str());
}
constexpr int kInputDirect = static_cast<int>(cpu::Variant::conv2d_input_direct);

// Groups of one half-line vector (8 floats or 4 doubles on ymm) run two to a direct
// input-gradient tile, the last alone when the count is odd: every pairing, with
// strides, dilations and padded columns, through the engine's choice at AVX2.
void CheckGroupPairs(Tally* tally) {
  if (cpu::BestSupportedIsa() < cpu::Isa::kAvx2) return;
  cpu::SetActiveIsa(cpu::Isa::kAvx2);
  struct Case {
    int64_t groups, stride, dilation, pad;
  } cases[] = {{2, 1, 1, 1}, {3, 1, 1, 1}, {7, 1, 1, 0}, {2, 2, 1, 1}, {5, 2, 1, 0}, {3, 1, 2, 2}, {4, 3, 2, 1}};
  for (const Case& c : cases) {
    for (cpu::Dtype dtype : {cpu::Dtype::kFloat, cpu::Dtype::kDouble}) {
      const int64_t width = dtype == cpu::Dtype::kFloat ? 8 : 4;
      ConvGeometry g;
      const bool made = GroupedGeometry(11, 13, c.groups, width, c.stride, c.dilation, c.pad, &g);
      const double err = made ? RunAgainstReference(dtype, OpKind::kConv2DBackpropInput, g, 77 + c.groups) : 1;
      Record("group pairs", OpKind::kConv2DBackpropInput, kInputDirect, dtype, err, g, tally);
    }
  }
}

// Groups of 8 floats at AVX-512 run two to a zmm on the direct tiles, lanes zipped (the
// input gradient at stride 1, the filter gradient at any), the last alone when the
// count is odd: every pairing, half and NCHW through the front end, strides,
// dilations, padded columns, and filter gradients over several blocks of rows. At
// stride 1 a filter row's three taps run together (ZippedRowRun, ZippedFilterRowTaps):
// rows of 1 and 2 columns, pads past the filter's reach (columns no tap meets), and
// dilation 3 take their edge paths.
void CheckZippedPairs(Tally* tally) {
  if (cpu::BestSupportedIsa() < cpu::Isa::kAvx512) return;
  cpu::SetActiveIsa(cpu::Isa::kAvx512);
  struct Case {
    int64_t h, w, groups, stride, dilation, pad;
  } cases[] = {{11, 13, 2, 1, 1, 1}, {9, 10, 3, 1, 1, 1}, {7, 9, 7, 1, 1, 0}, {12, 9, 5, 1, 2, 2},
               {13, 11, 3, 2, 1, 1}, {30, 17, 7, 1, 1, 1}, {31, 23, 4, 2, 1, 0}, {6, 1, 3, 1, 1, 1},
               {5, 2, 2, 1, 1, 1}, {8, 7, 3, 1, 1, 3}, {13, 12, 2, 1, 3, 0}};
  for (const Case& c : cases) {
    for (OpKind op : {OpKind::kConv2DBackpropInput, OpKind::kConv2DBackpropFilter}) {
      if (op == OpKind::kConv2DBackpropInput && c.stride > 1) continue;  // strided input: the permutes
      for (cpu::Dtype dtype : {cpu::Dtype::kFloat, cpu::Dtype::kHalf}) {
        for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
          ConvGeometry g;
          const bool made = GroupedGeometry(c.h, c.w, c.groups, 8, c.stride, c.dilation, c.pad, &g);
          g.data_format = format;
          const double err = made ? RunAgainstReference(dtype, op, g, 55 + c.groups) : 1;
          const cpu::Variant direct =
              op == OpKind::kConv2DBackpropInput ? cpu::Variant::conv2d_input_direct : cpu::Variant::conv2d_filter_direct;
          Record("zipped pairs", op, static_cast<int>(direct), dtype, err, g, tally);
        }
      }
    }
  }
}

// A dense input gradient whose packed filter is past the L2 budget, on row tiles (batch
// 2: no image tiles): its blocks run in chunks that fit, a band's units inner to its
// chunk, the last chunk shorter (3x3 256->256: 16 blocks in chunks of 5 at AVX2), the
// chunk packed lazily per thread; with padded columns copied, dilation, stride.
void CheckFilterChunks(Tally* tally) {
  struct Case {
    int64_t stride, dilation, pad;
  } cases[] = {{1, 1, 1}, {1, 2, 2}, {2, 1, 1}};
  for (cpu::Isa isa : {cpu::Isa::kAvx2, cpu::Isa::kAvx512}) {
    if (cpu::BestSupportedIsa() < isa) continue;
    cpu::SetActiveIsa(isa);
    for (const Case& c : cases) {
      for (cpu::Dtype dtype : {cpu::Dtype::kFloat, cpu::Dtype::kDouble}) {
        ConvGeometry g;
        const bool made = GroupedGeometry(7, 19, 1, 256, c.stride, c.dilation, c.pad, &g);
        const double err = made ? RunAgainstReference(dtype, OpKind::kConv2DBackpropInput, g, 31 + c.pad) : 1;
        Record("filter chunks", OpKind::kConv2DBackpropInput, kInputDirect, dtype, err, g, tally);
      }
    }
  }
}

// The AVX2 filter-gradient tiles read each block of rows copied into tile order, x
// by the column stride's phases and dy by vector blocks (kTileOrderFilterBlocks):
// strides 1-3 on odd widths, dilation, padded columns; NHWC, and NCHW dense and
// grouped (a group's channels copied from its planes); 32 channels in tiles of
// 6 x 5 + 2 and 40 in tiles of 10 (one-vector blocks); several blocks of rows.
void CheckFilterTileOrder(Tally* tally) {
  if (cpu::BestSupportedIsa() < cpu::Isa::kAvx2) return;
  cpu::SetActiveIsa(cpu::Isa::kAvx2);
  struct Case {
    int64_t h, w, groups, width, stride, dilation, pad;
  } cases[] = {{13, 11, 1, 32, 1, 1, 1}, {13, 11, 1, 40, 2, 1, 1}, {12, 13, 1, 32, 3, 2, 2},
               {30, 61, 1, 40, 1, 1, 1}, {9, 9, 2, 32, 2, 1, 0},  {11, 7, 3, 16, 1, 2, 2}};
  for (const Case& c : cases) {
    for (cpu::Dtype dtype : {cpu::Dtype::kFloat, cpu::Dtype::kDouble}) {
      for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
        if (c.groups > 1 && format == DataFormat::kNHWC) continue;  // NHWC groups: per-group copies
        ConvGeometry g;
        const bool made = GroupedGeometry(c.h, c.w, c.groups, c.width, c.stride, c.dilation, c.pad, &g);
        g.data_format = format;
        const double err = made ? RunAgainstReference(dtype, OpKind::kConv2DBackpropFilter, g, 13 + c.w) : 1;
        const cpu::Variant direct =
            format == DataFormat::kNHWC ? cpu::Variant::conv2d_filter_direct : cpu::Variant::conv2d_filter_nchw_direct;
        Record("filter tile order", OpKind::kConv2DBackpropFilter, static_cast<int>(direct), dtype, err, g, tally);
      }
    }
  }
}

// The permuting grouped input gradient on channel counts whose whole vectors split
// unevenly into its blocks of 4 (5 vectors run as 3 + 2) and leave a masked tail:
// at the best ISA, through the engine's choice.
void CheckPermuteBlocks(Tally* tally) {
  cpu::SetActiveIsa(cpu::BestSupportedIsa());
  if (cpu::ActiveIsa() < cpu::Isa::kAvx2) return;
  struct Case {
    cpu::Dtype dtype;
    int64_t groups, width, stride;
  } cases[] = {{cpu::Dtype::kFloat, 20, 4, 1}, {cpu::Dtype::kFloat, 22, 4, 2}, {cpu::Dtype::kFloat, 19, 8, 2},
               {cpu::Dtype::kFloat, 42, 2, 1}, {cpu::Dtype::kDouble, 10, 4, 2}, {cpu::Dtype::kDouble, 11, 2, 1}};
  for (const Case& c : cases) {
    ConvGeometry g;
    const bool made = GroupedGeometry(9, 9, c.groups, c.width, c.stride, 1, 1, &g);
    const double err = made ? RunAgainstReference(c.dtype, OpKind::kConv2DBackpropInput, g, 91 + c.groups) : 1;
    Record("permute blocks", OpKind::kConv2DBackpropInput, kAnyVariant, c.dtype, err, g, tally);
  }
}

}  // namespace

int main() {
  Tally tally;
  std::vector<ConvGeometry> pools[cpu::kNumOps];
  std::mt19937_64 rng(20261202);
  for (int op = 0; op < cpu::kNumOps; ++op) {
    while (pools[op].size() < kGeometriesPerOp) {
      ConvGeometry g;
      if (RandomGeometry(static_cast<OpKind>(op), rng, &g)) pools[op].push_back(g);
    }
  }
  const cpu::Isa selected = cpu::ActiveIsa();
  for (int i = 0; i < cpu::kNumIsas; ++i) {
    const cpu::Isa isa = static_cast<cpu::Isa>(i);
    std::string skipped;
    for (int v = 0; v < cpu::kNumVariants; ++v) {
      const cpu::VariantInfo& row = cpu::InfoOf(static_cast<cpu::Variant>(v));
      const bool new_here = row.isa == isa && isa > cpu::BestSupportedIsa();
      const bool lacks_feature = row.isa <= isa && (row.features & ~cpu::CpuFeatures()) != 0;
      if (new_here || lacks_feature) {
        skipped += std::string(" ") + row.name;
      }
    }
    if (isa > cpu::BestSupportedIsa()) {
      std::printf("isa %s: not on this CPU, skipped:%s\n", cpu::IsaName(isa), skipped.c_str());
      continue;
    }
    cpu::SetActiveIsa(isa);
    std::printf("isa %s:%s%s\n", cpu::IsaName(isa), skipped.empty() ? "" : " skipped (CPU feature):",
                skipped.c_str());
    const int failed_before = tally.failed;
    for (int v = 0; v < cpu::kNumVariants; ++v) {
      const cpu::VariantInfo& row = cpu::InfoOf(static_cast<cpu::Variant>(v));
      if (row.isa > isa || (row.features & ~cpu::CpuFeatures()) != 0) continue;
      bool built = false;
      for (int d = 0; d < cpu::kNumDtypes; ++d) {
        built |= cpu::ActiveKernels().Kernel(static_cast<cpu::Variant>(v), static_cast<cpu::Dtype>(d)) != nullptr;
      }
      if (!built) {  // the sanitizer build compiles the AVX-512 variant with AVX2 flags
        std::printf("  %-38s not in this build (its ISA's flags were lowered)\n", row.name);
        continue;
      }
      CheckVariant(static_cast<cpu::Variant>(v), pools[static_cast<int>(row.op)], &tally);
    }
    std::printf("isa %s: %d failed\n", cpu::IsaName(isa), tally.failed - failed_before);
  }
  CheckIsaRouting(&tally);
  CheckGroupPairs(&tally);
  CheckZippedPairs(&tally);
  CheckPermuteBlocks(&tally);
  CheckFilterChunks(&tally);
  CheckFilterTileOrder(&tally);
  cpu::SetActiveIsa(selected);
  std::printf("%d passed, %d failed\n", tally.passed, tally.failed);
  return tally.failed == 0 ? 0 : 1;
}
