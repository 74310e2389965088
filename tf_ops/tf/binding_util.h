// What the TF kernels and the XLA kernels share: attributes read and validated once,
// and the core's Status turned into TF's error classes.
#ifndef TF_CONV_BACKPROP_TF_BINDING_UTIL_H_
#define TF_CONV_BACKPROP_TF_BINDING_UTIL_H_

#include <string>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tf_ops/core/geometry.h"

namespace tf_conv_backprop {
namespace tf {

inline absl::Status ToTf(const Status& s) {
  switch (s.code) {
    case ErrorCode::kOk: return absl::OkStatus();
    case ErrorCode::kInvalidArgument: return absl::InvalidArgumentError(s.message);
    case ErrorCode::kUnimplemented: return absl::UnimplementedError(s.message);
    case ErrorCode::kResourceExhausted: return absl::ResourceExhaustedError(s.message);
    case ErrorCode::kInternal: break;
  }
  return absl::InternalError(s.message);
}

// The node's attributes through geometry's ParseAttrs (TF's order and error classes).
inline absl::Status ReadConvAttrs(::tensorflow::OpKernelConstruction* ctx, OpKind op, ConvAttrs* attrs) {
  std::string data_format, padding;
  std::vector<int64_t> strides, dilations, explicit_paddings;
  TF_RETURN_IF_ERROR(ctx->GetAttr("data_format", &data_format));
  TF_RETURN_IF_ERROR(ctx->GetAttr("padding", &padding));
  TF_RETURN_IF_ERROR(ctx->GetAttr("strides", &strides));
  TF_RETURN_IF_ERROR(ctx->GetAttr("dilations", &dilations));
  TF_RETURN_IF_ERROR(ctx->GetAttr("explicit_paddings", &explicit_paddings));
  return ToTf(ParseAttrs(op, data_format, padding, strides, dilations, explicit_paddings, attrs));
}

inline std::vector<int64_t> ShapeOf(const ::tensorflow::Tensor& t) {
  std::vector<int64_t> dims;
  for (int i = 0; i < t.dims(); ++i) dims.push_back(t.dim_size(i));
  return dims;
}

// The output shape and the validated geometry of one call, from the sizes input (an
// int32 tensor: the runtime value, or XLA's compile-time constant) and the shapes of
// the other two inputs. Shared by the TF kernels and the XLA kernels, so both raise
// the same errors.
inline absl::Status GeometryOfCall(OpKind op, const ConvAttrs& attrs, const ::tensorflow::Tensor& sizes,
                                   const std::vector<int64_t>& data_dims,
                                   const std::vector<int64_t>& dy_dims, std::vector<int64_t>* sized_dims,
                                   ConvGeometry* geo) {
  const bool input_grad = ComputesInputGrad(op);
  TF_RETURN_IF_ERROR(ToTf(ShapeFromSizes(op, attrs, ShapeOf(sizes), sizes.flat<int32_t>().data(),
                                         input_grad ? data_dims : std::vector<int64_t>(), dy_dims,
                                         sized_dims)));
  return ToTf(ComputeGeometry(op, attrs, input_grad ? *sized_dims : data_dims,
                              input_grad ? data_dims : *sized_dims, dy_dims, geo));
}

}  // namespace tf
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_TF_BINDING_UTIL_H_
