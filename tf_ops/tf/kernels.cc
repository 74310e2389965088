// The TF binding: one kernel template for all four ops. It reads attributes once
// (constructor), reads shapes and the sizes input, asks geometry to validate
// everything, allocates the output and hands raw pointers to the engine.
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tf_ops/core/cpu_engine.h"
#include "tf_ops/core/geometry.h"

namespace tf_conv_backprop {
namespace tf {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;

absl::Status ToTf(const Status& s) {
  switch (s.code) {
    case ErrorCode::kOk: return absl::OkStatus();
    case ErrorCode::kInvalidArgument: return absl::InvalidArgumentError(s.message);
    case ErrorCode::kUnimplemented: return absl::UnimplementedError(s.message);
    case ErrorCode::kResourceExhausted: return absl::ResourceExhaustedError(s.message);
    case ErrorCode::kInternal: break;
  }
  return absl::InternalError(s.message);
}

std::vector<int64_t> DimsOfTensor(const Tensor& t) {
  std::vector<int64_t> dims;
  for (int i = 0; i < t.dims(); ++i) dims.push_back(t.dim_size(i));
  return dims;
}

CpuContext MakeCpuContext(OpKernelContext* ctx) {
  const auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
  CpuContext cpu;
  cpu.num_threads = workers->num_threads;
  auto* pool = workers->workers;
  cpu.parallel_for = [pool](int64_t total, int64_t cost, const CpuContext::Range& fn) {
    pool->ParallelFor(total, tsl::thread::ThreadPool::SchedulingParams::Adaptive(cost), fn);
  };
  return cpu;
}

// The engine entry point for each op, as one table indexed by OpKind.
template <typename T>
Status RunCpu(OpKind op, const CpuContext& cpu, const ConvGeometry& geo, const T* a, const T* dy, T* out) {
  switch (op) {
    case OpKind::kConv2DBackpropInput: return Conv2DBackpropInputCpu(cpu, geo, a, dy, out);
    case OpKind::kConv2DBackpropFilter: return Conv2DBackpropFilterCpu(cpu, geo, a, dy, out);
    case OpKind::kDepthwiseBackpropInput: return DepthwiseBackpropInputCpu(cpu, geo, a, dy, out);
    case OpKind::kDepthwiseBackpropFilter: return DepthwiseBackpropFilterCpu(cpu, geo, a, dy, out);
  }
  return Internal("unknown op");
}

template <typename T, OpKind kOp>
class ConvBackpropOp : public OpKernel {
 public:
  explicit ConvBackpropOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string data_format, padding;
    std::vector<int64_t> strides, dilations, explicit_paddings;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("data_format", &data_format));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("padding", &padding));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("strides", &strides));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dilations", &dilations));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("explicit_paddings", &explicit_paddings));
    OP_REQUIRES_OK(ctx, ToTf(ParseAttrs(kOp, data_format, padding, strides, dilations, explicit_paddings, &attrs_)));
  }

  void Compute(OpKernelContext* ctx) override {
    // Inputs: (sizes, filter, dy) for input gradients, (input, sizes, dy) for filter gradients.
    constexpr bool kInputGrad = ComputesInputGrad(kOp);
    const Tensor& sizes = ctx->input(kInputGrad ? 0 : 1);
    const Tensor& data = ctx->input(kInputGrad ? 1 : 0);
    const Tensor& out_backprop = ctx->input(2);
    const std::vector<int64_t> data_dims = DimsOfTensor(data);
    const std::vector<int64_t> dy_dims = DimsOfTensor(out_backprop);

    std::vector<int64_t> sized_dims;
    OP_REQUIRES_OK(ctx, ToTf(ShapeFromSizes(kOp, attrs_, DimsOfTensor(sizes), sizes.flat<int32_t>().data(),
                                            kInputGrad ? data_dims : std::vector<int64_t>(), dy_dims,
                                            &sized_dims)));
    ConvGeometry geo;
    OP_REQUIRES_OK(ctx, ToTf(ComputeGeometry(kOp, attrs_, kInputGrad ? sized_dims : data_dims,
                                             kInputGrad ? data_dims : sized_dims, dy_dims, &geo)));
    TensorShape out_shape;
    OP_REQUIRES_OK(ctx, TensorShape::BuildTensorShape(sized_dims, &out_shape));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    OP_REQUIRES_OK(ctx, ToTf(RunCpu<T>(kOp, MakeCpuContext(ctx), geo, data.flat<T>().data(),
                                       out_backprop.flat<T>().data(), out->flat<T>().data())));
  }

 private:
  ConvAttrs attrs_;
};

#define REGISTER_CPU(T)                                                                              \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>Conv2DBackpropInput").Device(::tensorflow::DEVICE_CPU) \
                              .TypeConstraint<T>("T"),                                               \
                          ConvBackpropOp<T, OpKind::kConv2DBackpropInput>);                          \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>Conv2DBackpropFilter").Device(::tensorflow::DEVICE_CPU) \
                              .TypeConstraint<T>("T"),                                                \
                          ConvBackpropOp<T, OpKind::kConv2DBackpropFilter>);                          \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>DepthwiseConv2dNativeBackpropInput")                    \
                              .Device(::tensorflow::DEVICE_CPU)                                      \
                              .TypeConstraint<T>("T"),                                               \
                          ConvBackpropOp<T, OpKind::kDepthwiseBackpropInput>);                       \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>DepthwiseConv2dNativeBackpropFilter")                   \
                              .Device(::tensorflow::DEVICE_CPU)                                      \
                              .TypeConstraint<T>("T"),                                               \
                          ConvBackpropOp<T, OpKind::kDepthwiseBackpropFilter>);

REGISTER_CPU(Eigen::half)
REGISTER_CPU(Eigen::bfloat16)
REGISTER_CPU(float)
REGISTER_CPU(double)
#undef REGISTER_CPU

}  // namespace
}  // namespace tf
}  // namespace tf_conv_backprop
