// XLA kernels for the four ops (graphs compiled with jit_compile=True, Keras 3's
// default on GPU machines), registered for every XLA device.
//
// Each op is lowered to one XLA convolution (ConvGeneralDilated) built from our own
// geometry, so it validates exactly as the TF kernels do (same messages, at compile
// time) and honours everything they honour: NCHW, dilations (also for depthwise,
// which TF's non-XLA depthwise kernels ignore), explicit padding, unequal depthwise
// strides, any depth multiplier. Not a custom call into our engine, although that
// would be faster on CPU: TF 2.21's XLA:CPU refuses the legacy custom-call APIs and
// TF does not export XLA's FFI registration (README "XLA" has the measurements).
//
// The gradients as forward convolutions (all per spatial axis; k = filter size,
// s = stride, d = dilation, e = (k-1)*d + 1, pb = the forward op's padding before):
//   input gradient: dy dilated by s (lhs_dilation), convolved with the spatially
//     reversed filter dilated by d, the filter's in/out features swapped, padded
//     (e-1-pb, in-(out-1)*s-1+pb) so the result has `in` rows.
//   filter gradient: x convolved with dy as the kernel (batch as the reduction
//     feature), window stride d, dy dilated by s (rhs_dilation), padded (pb, the
//     rest to give exactly k rows); negative padding drops input rows the forward
//     op never read.
//   depthwise: the same with C feature groups (input gradient) or C batch groups
//     (filter gradient): channel c owns dy channels c*M .. c*M+M-1.
// XLA accepts negative padding, so no case needs a separate slice.
#include <cstdint>
#include <utility>
#include <vector>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "tensorflow/core/framework/tensor.h"
#include "tsl/platform/tensor_float_32_utils.h"
#include "tf_ops/tf/tf_version_compat.h"
#include TCB_XLA_CONSTANTS_H
#include TCB_XLA_BUILDER_H
#include "xla/xla_data.pb.h"
#include "tf_ops/core/geometry.h"
#include "tf_ops/tf/binding_util.h"

namespace tf_conv_backprop {
namespace tf {
namespace {

using ::tensorflow::XlaOpKernel;
using ::tensorflow::XlaOpKernelContext;

// One spatial axis of the forward convolution.
struct Axis {
  int64_t in, out, stride, dilated_filter, pad_before;
  int64_t dilated_out() const { return (out - 1) * stride + 1; }
};

std::vector<Axis> SpatialAxes(const ConvGeometry& g) {
  return {{g.in_rows, g.out_rows, g.stride_rows, g.eff_filter_rows(), g.pad_top},
          {g.in_cols, g.out_cols, g.stride_cols, g.eff_filter_cols(), g.pad_left}};
}

// (low, high) padding per axis: the input gradient's result has `in` rows, the filter
// gradient's exactly the filter's (negative where the forward op never read).
std::vector<std::pair<int64_t, int64_t>> InputGradPadding(const ConvGeometry& g) {
  std::vector<std::pair<int64_t, int64_t>> pads;
  for (const Axis& a : SpatialAxes(g)) {
    pads.emplace_back(a.dilated_filter - 1 - a.pad_before, a.in - a.dilated_out() + a.pad_before);
  }
  return pads;
}

std::vector<std::pair<int64_t, int64_t>> FilterGradPadding(const ConvGeometry& g) {
  std::vector<std::pair<int64_t, int64_t>> pads;
  for (const Axis& a : SpatialAxes(g)) {
    pads.emplace_back(a.pad_before, a.dilated_filter - 1 + a.dilated_out() - a.in - a.pad_before);
  }
  return pads;
}

// Where batch, feature, rows and cols sit in the input or output of a convolution.
struct Roles {
  int64_t batch, feature, rows, cols;
};
// Where the input feature, output feature, rows and cols sit in its kernel.
struct KernelRoles {
  int64_t in_feature, out_feature, rows, cols;
};

xla::ConvolutionDimensionNumbers Numbers(Roles input, KernelRoles kernel, Roles output) {
  xla::ConvolutionDimensionNumbers dn;
  dn.set_input_batch_dimension(input.batch);
  dn.set_input_feature_dimension(input.feature);
  dn.add_input_spatial_dimensions(input.rows);
  dn.add_input_spatial_dimensions(input.cols);
  dn.set_kernel_input_feature_dimension(kernel.in_feature);
  dn.set_kernel_output_feature_dimension(kernel.out_feature);
  dn.add_kernel_spatial_dimensions(kernel.rows);
  dn.add_kernel_spatial_dimensions(kernel.cols);
  dn.set_output_batch_dimension(output.batch);
  dn.set_output_feature_dimension(output.feature);
  dn.add_output_spatial_dimensions(output.rows);
  dn.add_output_spatial_dimensions(output.cols);
  return dn;
}

// TF's float32 policy (as its own XLA convolutions): TF32 allowed unless the user
// turned it off, then full precision.
xla::PrecisionConfig PrecisionOfTf() {
  xla::PrecisionConfig config;
  const auto precision =
      tsl::tensor_float_32_execution_enabled() ? xla::PrecisionConfig::DEFAULT : xla::PrecisionConfig::HIGHEST;
  config.add_operand_precision(precision);
  config.add_operand_precision(precision);
  return config;
}

// The gradient for valid, non-empty geometry. `data` is the filter (input gradients)
// or the input (filter gradients), in the layouts of the op.
xla::XlaOp LowerGradient(OpKind op, const ConvGeometry& g, xla::XlaOp data, xla::XlaOp dy,
                         xla::PrimitiveType type) {
  const DimIndex d = DimsOf(g.data_format);
  const xla::PrecisionConfig precision = PrecisionOfTf();
  // 16-bit types accumulate in float, as our CPU and CUDA kernels do.
  const bool narrow = type == xla::F16 || type == xla::BF16;
  const std::optional<xla::PrimitiveType> accumulate =
      narrow ? std::optional<xla::PrimitiveType>(xla::F32) : std::nullopt;
  const Roles format{d.batch, d.depth, d.rows, d.cols};
  xla::XlaOp result;
  if (ComputesInputGrad(op)) {
    // dy [format] * reversed filter [H, W, in, out] (features swapped) -> dx [format].
    // Grouped: the kernel's input features must be one group's dy channels, so the
    // filter [H, W, Cg, G * Og] becomes [H, W, Og, G * Cg] (output feature g * Cg + ci).
    xla::XlaOp filter = data;
    KernelRoles roles{3, 2, 0, 1};
    int64_t feature_groups = g.depthwise ? g.in_depth : 1;
    if (g.groups > 1) {
      const int64_t cg = g.group_in_depth(), og = g.group_out_depth();
      filter = xla::Reshape(filter, {g.filter_rows, g.filter_cols, cg, g.groups, og});
      filter = xla::Transpose(filter, {0, 1, 4, 3, 2});
      filter = xla::Reshape(filter, {g.filter_rows, g.filter_cols, og, g.in_depth});
      roles = KernelRoles{2, 3, 0, 1};
      feature_groups = g.groups;
    }
    result = xla::ConvGeneralDilated(dy, xla::Rev(filter, {0, 1}), /*window_strides=*/{1, 1},
                                     InputGradPadding(g), /*lhs_dilation=*/{g.stride_rows, g.stride_cols},
                                     /*rhs_dilation=*/{g.dilation_rows, g.dilation_cols},
                                     Numbers(format, roles, format), feature_groups,
                                     /*batch_group_count=*/1, &precision, accumulate);
  } else {
    // x [format] with batch and depth swapped * dy as the kernel -> dw [H, W, in, out].
    result = xla::ConvGeneralDilated(data, dy, /*window_strides=*/{g.dilation_rows, g.dilation_cols},
                                     FilterGradPadding(g), /*lhs_dilation=*/{1, 1},
                                     /*rhs_dilation=*/{g.stride_rows, g.stride_cols},
                                     Numbers(Roles{d.depth, d.batch, d.rows, d.cols},
                                             KernelRoles{d.batch, d.depth, d.rows, d.cols}, Roles{2, 3, 0, 1}),
                                     /*feature_group_count=*/1,
                                     /*batch_group_count=*/g.depthwise ? g.in_depth : g.groups, &precision,
                                     accumulate);
    // Depthwise: [H, W, 1, C*M] holds channel c's multiplier m at c*M + m.
    if (g.depthwise) result = xla::Reshape(result, {g.filter_rows, g.filter_cols, g.in_depth, g.depth_multiplier});
  }
  return narrow ? xla::ConvertElementType(result, type) : result;
}

// The dimensions of input `index`; XLA's dynamic (bounded) dimensions are refused,
// since the geometry needs every size.
absl::Status StaticDims(XlaOpKernelContext* ctx, int index, std::vector<int64_t>* dims) {
  TF_ASSIGN_OR_RETURN(xla::Shape shape, ctx->InputXlaShape(index));
  if (!shape.is_static()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", index, " has a dynamic shape under XLA (",
                                                   shape.ToString(), "); these ops need static shapes"));
  }
  dims->assign(shape.dimensions().begin(), shape.dimensions().end());
  return absl::OkStatus();
}

template <OpKind kOp>
class XlaConvBackpropOp : public XlaOpKernel {
 public:
  explicit XlaConvBackpropOp(::tensorflow::OpKernelConstruction* ctx) : XlaOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadConvAttrs(ctx, kOp, &attrs_));
  }

  void Compile(XlaOpKernelContext* ctx) override {
    constexpr bool kInputGrad = ComputesInputGrad(kOp);
    const int sizes_index = kInputGrad ? 0 : 1;
    const int data_index = kInputGrad ? 1 : 0;
    const char* sizes_name = kInputGrad ? "input_sizes" : "filter_sizes";
    absl::StatusOr<::tensorflow::Tensor> sizes = ctx->ConstantInputTensor(sizes_index);
    OP_REQUIRES(ctx, sizes.ok(),
                absl::InvalidArgumentError(absl::StrCat(
                    OpName(kOp), ": `", sizes_name,
                    "` must be a compile-time constant under XLA (jit_compile=True): XLA needs the shape "
                    "of the result when it compiles. Pass a constant or tf.shape() of a tensor whose "
                    "shape is static, or call the op outside the compiled function. (XLA: ",
                    sizes.status().message(), ")")));
    std::vector<int64_t> data_dims, dy_dims;
    OP_REQUIRES_OK(ctx, StaticDims(ctx, data_index, &data_dims));
    OP_REQUIRES_OK(ctx, StaticDims(ctx, 2, &dy_dims));
    std::vector<int64_t> sized_dims;
    ConvGeometry geo;
    OP_REQUIRES_OK(ctx, GeometryOfCall(kOp, attrs_, *sizes, data_dims, dy_dims, &sized_dims, &geo));
    const xla::PrimitiveType type = ctx->input_xla_type(2);
    if (geo.input_elements == 0 || geo.filter_elements == 0 || geo.out_backprop_elements == 0) {
      // Nothing to sum: zeros of the result's shape, as the TF kernels give.
      ctx->SetOutput(0, xla::Broadcast(xla::Zero(ctx->builder(), type), sized_dims));
      return;
    }
    ctx->SetOutput(0, LowerGradient(kOp, geo, ctx->Input(data_index), ctx->Input(2), type));
  }

 private:
  ConvAttrs attrs_;
};

REGISTER_XLA_OP(Name("ConvBackprop>Conv2DBackpropInput").CompileTimeConstantInput("input_sizes"),
                XlaConvBackpropOp<OpKind::kConv2DBackpropInput>);
REGISTER_XLA_OP(Name("ConvBackprop>Conv2DBackpropFilter").CompileTimeConstantInput("filter_sizes"),
                XlaConvBackpropOp<OpKind::kConv2DBackpropFilter>);
REGISTER_XLA_OP(Name("ConvBackprop>DepthwiseConv2dNativeBackpropInput").CompileTimeConstantInput("input_sizes"),
                XlaConvBackpropOp<OpKind::kDepthwiseBackpropInput>);
REGISTER_XLA_OP(Name("ConvBackprop>DepthwiseConv2dNativeBackpropFilter").CompileTimeConstantInput("filter_sizes"),
                XlaConvBackpropOp<OpKind::kDepthwiseBackpropFilter>);

}  // namespace
}  // namespace tf
}  // namespace tf_conv_backprop

// Whether XLA can compile our ops in this process: 1 when XLA's kernels for them are
// registered or will be (XLA collects them the first time it compiles anything), 0
// when XLA had already collected its kernels before this library was loaded. The
// package reads it through ctypes right after loading, to warn about import order.
extern "C" __attribute__((visibility("default"))) int tf_conv_backprop_xla_kernels_usable() {
  const bool xla_collected = absl::StrContains(::tensorflow::KernelsRegisteredForOp("Identity"), "XLA_CPU_JIT");
  const bool ours = absl::StrContains(
      ::tensorflow::KernelsRegisteredForOp("ConvBackprop>Conv2DBackpropInput"), "XLA_CPU_JIT");
  return !xla_collected || ours ? 1 : 0;
}
