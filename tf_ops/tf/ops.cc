// Op registrations and shape functions. TF's inputs, attributes and defaults, in
// the "ConvBackprop>" namespace so they never clash with the built-ins.
//
// The shape functions only derive the output shape; they never reject an input.
// Every check lives in the kernel (through geometry), so bad input raises the same
// InvalidArgumentError in eager mode, in tf.function and in a v1 Session. One
// exception is TF's, not ours: a non-constant sizes input is read as a partial
// shape (so tf.shape(x) of a partly known x gives a partly known output), and for
// that TF's shape refiner rejects constant values below -1 with a ValueError while
// the graph is built, exactly as it does for the built-in ops.
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tf_ops/core/geometry.h"

namespace tf_conv_backprop {
namespace tf {
namespace {

using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// Dimension `i` of input `index` when that input is known to be 4-D, else unknown.
DimensionHandle DimOf4D(InferenceContext* c, int index, int i) {
  ShapeHandle s = c->input(index);
  if (c->RankKnown(s) && c->Rank(s) == 4) return c->Dim(s, i);
  return c->UnknownDim();
}

absl::Status ShapeFn(OpKind op, InferenceContext* c) {
  const int sizes_index = ComputesInputGrad(op) ? 0 : 1;
  std::string format_attr;
  DataFormat format = DataFormat::kNHWC;
  if (c->GetAttr("data_format", &format_attr).ok() && format_attr == "NCHW") format = DataFormat::kNCHW;
  const DimIndex d = DimsOf(format);

  // Conv2DBackpropInput's (rows, cols) form: batch from out_backprop, depth from filter.
  ShapeHandle sizes_shape = c->input(sizes_index);
  if (op == OpKind::kConv2DBackpropInput && c->RankKnown(sizes_shape) && c->Rank(sizes_shape) == 1 &&
      c->ValueKnown(c->Dim(sizes_shape, 0)) && c->Value(c->Dim(sizes_shape, 0)) == 2) {
    std::vector<DimensionHandle> dims(4);
    dims[d.batch] = DimOf4D(c, 2, d.batch);
    dims[d.depth] = DimOf4D(c, 1, 2);
    dims[d.rows] = dims[d.cols] = c->UnknownDim();
    const ::tensorflow::Tensor* sizes = c->input_tensor(sizes_index);
    if (sizes != nullptr && sizes->dims() == 1 && sizes->NumElements() == 2) {
      const auto v = sizes->flat<int32_t>();
      if (v(0) >= 0 && v(1) >= 0) {
        dims[d.rows] = c->MakeDim(v(0));
        dims[d.cols] = c->MakeDim(v(1));
      }
    }
    c->set_output(0, c->MakeShape(dims));
    return absl::OkStatus();
  }

  // 4-element form: the sizes vector is the output shape. A constant gives a fully
  // static shape; a partially known one (e.g. tf.shape(x)) gives what is known;
  // anything malformed gives an unknown 4-D shape and the kernel reports it.
  ShapeHandle out;
  const ::tensorflow::Tensor* sizes = c->input_tensor(sizes_index);
  if (sizes != nullptr) {
    if (sizes->dims() == 1 && sizes->NumElements() == 4) {
      const auto v = sizes->flat<int32_t>();
      std::vector<DimensionHandle> dims;
      bool valid = true;
      for (int i = 0; i < 4; ++i) {
        valid = valid && v(i) >= 0;
        dims.push_back(v(i) >= 0 ? c->MakeDim(v(i)) : c->UnknownDim());
      }
      if (valid) {
        c->set_output(0, c->MakeShape(dims));
        return absl::OkStatus();
      }
    }
  } else if (c->MakeShapeFromShapeTensor(sizes_index, &out).ok() && c->RankKnown(out) && c->Rank(out) == 4) {
    c->set_output(0, out);
    return absl::OkStatus();
  }
  c->set_output(0, c->UnknownShapeOfRank(4));
  return absl::OkStatus();
}

template <OpKind kOp>
absl::Status ShapeFnFor(InferenceContext* c) {
  return ShapeFn(kOp, c);
}

}  // namespace

// TF 2.21 takes int32 in Conv2DBackpropInput alone (tf.nn.conv2d_transpose of
// integer tensors), not in the other three.
REGISTER_OP("ConvBackprop>Conv2DBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double, int32}")
    .Attr("strides: list(int)")
    .Attr("use_cudnn_on_gpu: bool = true")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    .SetShapeFn(ShapeFnFor<OpKind::kConv2DBackpropInput>)
    .Doc("Gradient of conv2d with respect to its input (TF's Conv2DBackpropInput).");

REGISTER_OP("ConvBackprop>Conv2DBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("strides: list(int)")
    .Attr("use_cudnn_on_gpu: bool = true")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    .SetShapeFn(ShapeFnFor<OpKind::kConv2DBackpropFilter>)
    .Doc("Gradient of conv2d with respect to its filter (TF's Conv2DBackpropFilter).");

REGISTER_OP("ConvBackprop>DepthwiseConv2dNativeBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("strides: list(int)")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    .SetShapeFn(ShapeFnFor<OpKind::kDepthwiseBackpropInput>)
    .Doc("Gradient of depthwise_conv2d with respect to its input; honours dilations.");

REGISTER_OP("ConvBackprop>DepthwiseConv2dNativeBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("strides: list(int)")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    .SetShapeFn(ShapeFnFor<OpKind::kDepthwiseBackpropFilter>)
    .Doc("Gradient of depthwise_conv2d with respect to its filter; honours dilations.");

}  // namespace tf
}  // namespace tf_conv_backprop
