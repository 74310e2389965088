// The TF binding: one kernel template for all four ops and both devices. It reads
// attributes once (constructor), reads shapes and the sizes input, asks geometry to
// validate everything, allocates the output and hands raw pointers to the engine of
// its device: the CPU engine with TF's intra-op pool (through CallerParallelFor), or
// (built with GOOGLE_CUDA) the CUDA engine on TF's compute stream with scratch from
// TF's allocator.
#include <type_traits>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/threadpool.h"
#include "tf_ops/cpu/engine.h"
#include "tf_ops/cpu/parallel_for.h"
#include "tf_ops/core/geometry.h"
#include "tf_ops/tf/binding_util.h"
#include "tf_ops/tf/tf_version_compat.h"
#if GOOGLE_CUDA
#include "tensorflow/core/framework/device_base.h"
#include "tf_ops/cuda/engine.h"
#include "tsl/platform/tensor_float_32_utils.h"
#include "xla/stream_executor/stream.h"
#endif

namespace tf_conv_backprop {
namespace tf {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;

CpuContext MakeCpuContext(OpKernelContext* ctx) {
  const auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
  CpuContext cpu;
  cpu.num_threads = workers->num_threads;
  auto* pool = workers->workers;
  const int threads = cpu.num_threads;
  cpu.parallel_for = [pool, threads](int64_t total, int64_t cost, const CpuContext::Range& fn) {
    CallerParallelFor([pool](std::function<void()> task) { pool->Schedule(std::move(task)); }, threads, total,
                      cost, fn);
  };
  return cpu;
}

// The engine entry point for each op, as one table indexed by OpKind.
template <typename T>
Status RunCpu(OpKind op, const CpuContext& cpu, const ConvGeometry& geo, const T* a, const T* dy, T* out) {
  return GradientCpu(op, cpu, geo, a, dy, out);
}

// Device tags of ConvBackpropOp.
struct CpuDevice {};
struct GpuDevice {};

template <typename T>
Status RunEngine(CpuDevice, OpKernelContext* ctx, OpKind op, const ConvGeometry& geo, const T* a, const T* dy,
                 T* out) {
  return RunCpu<T>(op, MakeCpuContext(ctx), geo, a, dy, out);
}

#if GOOGLE_CUDA
// The CUDA engine's element type: CUDA's own 16-bit types have Eigen's bits.
template <typename T>
struct CudaType {
  using type = T;
};
template <>
struct CudaType<Eigen::half> {
  using type = __half;
};
template <>
struct CudaType<Eigen::bfloat16> {
  using type = __nv_bfloat16;
};

template <typename T>
Status RunEngine(GpuDevice, OpKernelContext* ctx, OpKind op, const ConvGeometry& geo, const T* a, const T* dy,
                 T* out) {
  using C = typename CudaType<T>::type;
  const auto* device_context = ctx->op_device_context();
  if (device_context == nullptr || device_context->stream() == nullptr) {
    return Internal(std::string(OpName(op)) + ": no GPU stream for the GPU kernel");
  }
  CudaContext gpu;
  gpu.stream = static_cast<CUstream_st*>(device_context->stream()->platform_specific_handle().stream);
  // TF's float32 policy, read per call as TF's own convolutions do: TF32 on tensor
  // cores unless the user turned it off.
  gpu.tf32 = tsl::tensor_float_32_execution_enabled();
  // Scratch tensors live until Compute returns; TF's GPU allocator reuses their memory
  // only for work queued later on the same stream.
  std::vector<Tensor> scratch;
  gpu.allocate = [ctx, &scratch](int64_t bytes) -> void* {
    Tensor t;
    if (!ctx->allocate_temp(::tensorflow::DT_INT8, TensorShape({bytes}), &t).ok()) return nullptr;
    scratch.push_back(t);
    return t.flat<int8_t>().data();
  };
  const C* ca = reinterpret_cast<const C*>(a);
  const C* cdy = reinterpret_cast<const C*>(dy);
  C* o = reinterpret_cast<C*>(out);
  return GradientCuda<C>(op, gpu, geo, ca, cdy, o);
}
#endif  // GOOGLE_CUDA

template <typename Device, typename T, OpKind kOp>
class ConvBackpropOp : public OpKernel {
 public:
  explicit ConvBackpropOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadConvAttrs(ctx, kOp, &attrs_));
  }

  void Compute(OpKernelContext* ctx) override {
    // Inputs: (sizes, filter, dy) for input gradients, (input, sizes, dy) for filter gradients.
    constexpr bool kInputGrad = ComputesInputGrad(kOp);
    const Tensor& sizes = ctx->input(kInputGrad ? 0 : 1);
    const Tensor& data = ctx->input(kInputGrad ? 1 : 0);
    const Tensor& out_backprop = ctx->input(2);
    std::vector<int64_t> sized_dims;
    ConvGeometry geo;
    OP_REQUIRES_OK(ctx, GeometryOfCall(kOp, attrs_, sizes, ShapeOf(data), ShapeOf(out_backprop), &sized_dims, &geo));
    TensorShape out_shape;
    OP_REQUIRES_OK(ctx, TensorShape::BuildTensorShape(sized_dims, &out_shape));
    if constexpr (std::is_same_v<Device, CpuDevice>) {
      // A legal output too big for this machine: ResourceExhausted now, not after
      // TF's allocator retries for seconds (or the OOM killer).
      OP_REQUIRES_OK(ctx, ToTf(CheckCpuMemory(kOp, geo, sizeof(T))));
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    OP_REQUIRES_OK(ctx, ToTf(RunEngine<T>(Device(), ctx, kOp, geo, data.flat<T>().data(),
                                          out_backprop.flat<T>().data(), out->flat<T>().data())));
  }

 private:
  ConvAttrs attrs_;
};

#define REGISTER_CPU(T)                                                                              \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>Conv2DBackpropInput").Device(::tensorflow::DEVICE_CPU) \
                              .TypeConstraint<T>("T"),                                               \
                          ConvBackpropOp<CpuDevice, T, OpKind::kConv2DBackpropInput>);              \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>Conv2DBackpropFilter").Device(::tensorflow::DEVICE_CPU) \
                              .TypeConstraint<T>("T"),                                                \
                          ConvBackpropOp<CpuDevice, T, OpKind::kConv2DBackpropFilter>);             \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>DepthwiseConv2dNativeBackpropInput")                    \
                              .Device(::tensorflow::DEVICE_CPU)                                      \
                              .TypeConstraint<T>("T"),                                               \
                          ConvBackpropOp<CpuDevice, T, OpKind::kDepthwiseBackpropInput>);           \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>DepthwiseConv2dNativeBackpropFilter")                   \
                              .Device(::tensorflow::DEVICE_CPU)                                      \
                              .TypeConstraint<T>("T"),                                               \
                          ConvBackpropOp<CpuDevice, T, OpKind::kDepthwiseBackpropFilter>);

REGISTER_CPU(Eigen::half)
REGISTER_CPU(Eigen::bfloat16)
REGISTER_CPU(float)
REGISTER_CPU(double)
#undef REGISTER_CPU
// TF registers int32 for Conv2DBackpropInput alone (exact, wrapping around).
REGISTER_KERNEL_BUILDER(Name("ConvBackprop>Conv2DBackpropInput").Device(::tensorflow::DEVICE_CPU)
                            .TypeConstraint<int32_t>("T"),
                        ConvBackpropOp<CpuDevice, int32_t, OpKind::kConv2DBackpropInput>);

#if GOOGLE_CUDA
// The sizes input stays in host memory: the kernel reads it to shape the output.
#define REGISTER_GPU(T)                                                                              \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>Conv2DBackpropInput")                                  \
                              .Device(::tensorflow::DEVICE_GPU)                                      \
                              .TypeConstraint<T>("T")                                                \
                              .HostMemory("input_sizes"),                                            \
                          ConvBackpropOp<GpuDevice, T, OpKind::kConv2DBackpropInput>);               \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>Conv2DBackpropFilter")                                 \
                              .Device(::tensorflow::DEVICE_GPU)                                      \
                              .TypeConstraint<T>("T")                                                \
                              .HostMemory("filter_sizes"),                                           \
                          ConvBackpropOp<GpuDevice, T, OpKind::kConv2DBackpropFilter>);              \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>DepthwiseConv2dNativeBackpropInput")                   \
                              .Device(::tensorflow::DEVICE_GPU)                                      \
                              .TypeConstraint<T>("T")                                                \
                              .HostMemory("input_sizes"),                                            \
                          ConvBackpropOp<GpuDevice, T, OpKind::kDepthwiseBackpropInput>);            \
  REGISTER_KERNEL_BUILDER(Name("ConvBackprop>DepthwiseConv2dNativeBackpropFilter")                  \
                              .Device(::tensorflow::DEVICE_GPU)                                      \
                              .TypeConstraint<T>("T")                                                \
                              .HostMemory("filter_sizes"),                                           \
                          ConvBackpropOp<GpuDevice, T, OpKind::kDepthwiseBackpropFilter>);

REGISTER_GPU(Eigen::half)
REGISTER_GPU(Eigen::bfloat16)
REGISTER_GPU(float)
REGISTER_GPU(double)
#undef REGISTER_GPU
REGISTER_KERNEL_BUILDER(Name("ConvBackprop>Conv2DBackpropInput")
                            .Device(::tensorflow::DEVICE_GPU)
                            .TypeConstraint<int32_t>("T")
                            .HostMemory("input_sizes"),
                        ConvBackpropOp<GpuDevice, int32_t, OpKind::kConv2DBackpropInput>);
#endif  // GOOGLE_CUDA

}  // namespace
}  // namespace tf
}  // namespace tf_conv_backprop
