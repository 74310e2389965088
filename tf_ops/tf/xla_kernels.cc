// XLA kernels for the four ops (graphs compiled with jit_compile=True, Keras 3's
// default on GPU machines), registered for every XLA device.
//
// Each op is lowered to one XLA convolution (ConvGeneralDilated) built from our own
// geometry, so it validates exactly as the TF kernels do (same messages, at compile
// time) and honours everything they honour: NCHW, dilations (also for depthwise,
// which TF's non-XLA depthwise kernels ignore), explicit padding, unequal depthwise
// strides, any depth multiplier. Why XLA's convolution and not a custom call into our
// engine: XLA fuses it with its neighbours, runs it on any XLA device (cuDNN on GPU),
// and needs no host round trip; README "XLA" has the measurements.
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
#include "xla/hlo/builder/lib/constants.h"
#include "xla/hlo/builder/xla_builder.h"
#include "xla/xla_data.pb.h"
#include "tf_ops/core/geometry.h"
#include "tf_ops/tf/binding_util.h"

namespace tf_conv_backprop {
namespace tf {
namespace {

using ::tensorflow::XlaOpKernel;
using ::tensorflow::XlaOpKernelContext;

struct SpatialPads {
  std::pair<int64_t, int64_t> rows, cols;
};

SpatialPads InputGradPadding(const ConvGeometry& g) {
  auto axis = [](int64_t in, int64_t out, int64_t stride, int64_t eff, int64_t pad_before) {
    const int64_t dilated_out = (out - 1) * stride + 1;
    return std::make_pair(eff - 1 - pad_before, in - dilated_out + pad_before);
  };
  return {axis(g.in_rows, g.out_rows, g.stride_rows, g.eff_filter_rows(), g.pad_top),
          axis(g.in_cols, g.out_cols, g.stride_cols, g.eff_filter_cols(), g.pad_left)};
}

SpatialPads FilterGradPadding(const ConvGeometry& g) {
  auto axis = [](int64_t in, int64_t out, int64_t stride, int64_t eff, int64_t pad_before) {
    const int64_t dilated_out = (out - 1) * stride + 1;
    return std::make_pair(pad_before, eff - 1 + dilated_out - in - pad_before);
  };
  return {axis(g.in_rows, g.out_rows, g.stride_rows, g.eff_filter_rows(), g.pad_top),
          axis(g.in_cols, g.out_cols, g.stride_cols, g.eff_filter_cols(), g.pad_left)};
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
  xla::ConvolutionDimensionNumbers dn;
  xla::XlaOp result;
  if (ComputesInputGrad(op)) {
    // dy [format] * reversed filter [H, W, in, out] (features swapped) -> dx [format].
    dn.set_input_batch_dimension(d.batch);
    dn.set_input_feature_dimension(d.depth);
    dn.add_input_spatial_dimensions(d.rows);
    dn.add_input_spatial_dimensions(d.cols);
    dn.set_kernel_output_feature_dimension(2);
    dn.set_kernel_input_feature_dimension(3);
    dn.add_kernel_spatial_dimensions(0);
    dn.add_kernel_spatial_dimensions(1);
    dn.set_output_batch_dimension(d.batch);
    dn.set_output_feature_dimension(d.depth);
    dn.add_output_spatial_dimensions(d.rows);
    dn.add_output_spatial_dimensions(d.cols);
    const SpatialPads pads = InputGradPadding(g);
    result = xla::ConvGeneralDilated(dy, xla::Rev(data, {0, 1}), /*window_strides=*/{1, 1},
                                     {pads.rows, pads.cols}, /*lhs_dilation=*/{g.stride_rows, g.stride_cols},
                                     /*rhs_dilation=*/{g.dilation_rows, g.dilation_cols}, dn,
                                     /*feature_group_count=*/g.depthwise ? g.in_depth : 1,
                                     /*batch_group_count=*/1, &precision, accumulate);
  } else {
    // x [format] with batch and depth swapped * dy as the kernel -> dw [H, W, in, out].
    dn.set_input_batch_dimension(d.depth);
    dn.set_input_feature_dimension(d.batch);
    dn.add_input_spatial_dimensions(d.rows);
    dn.add_input_spatial_dimensions(d.cols);
    dn.set_kernel_input_feature_dimension(d.batch);
    dn.set_kernel_output_feature_dimension(d.depth);
    dn.add_kernel_spatial_dimensions(d.rows);
    dn.add_kernel_spatial_dimensions(d.cols);
    dn.set_output_batch_dimension(2);
    dn.set_output_feature_dimension(3);
    dn.add_output_spatial_dimensions(0);
    dn.add_output_spatial_dimensions(1);
    const SpatialPads pads = FilterGradPadding(g);
    result = xla::ConvGeneralDilated(data, dy, /*window_strides=*/{g.dilation_rows, g.dilation_cols},
                                     {pads.rows, pads.cols}, /*lhs_dilation=*/{1, 1},
                                     /*rhs_dilation=*/{g.stride_rows, g.stride_cols}, dn,
                                     /*feature_group_count=*/1,
                                     /*batch_group_count=*/g.depthwise ? g.in_depth : 1, &precision, accumulate);
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
