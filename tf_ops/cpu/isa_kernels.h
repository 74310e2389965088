// Declarations for the kernel files, which are compiled once per instruction set
// into namespace cpu::TCB_ISA (cpu/isa.h): every kernel the variant table names,
// and the layout helpers. A kernel file defines the kernels of its rows and
// instantiates them for the row's dtypes; cpu/kernel_table.cc collects them.
#ifndef TF_CONV_BACKPROP_CPU_ISA_KERNELS_H_
#define TF_CONV_BACKPROP_CPU_ISA_KERNELS_H_

#ifndef TCB_ISA
#error "compile with -DTCB_ISA=<isa> and that ISA's -m flags (see cpu/isa.h)"
#endif

#include <cstdint>

#include "tf_ops/core/geometry.h"
#include "tf_ops/cpu/engine.h"
#include "tf_ops/cpu/kernel_table.h"

namespace tf_conv_backprop {
namespace cpu {
namespace TCB_ISA {

// (a, b) -> out as in KernelFn, typed; false declines the data (its row says when).
#define TCB_CPU_VARIANT(name, op, dtypes, layouts, isa, features, applies, kernel, ...) \
  template <typename T>                                                                 \
  bool kernel(const CpuContext& ctx, const ConvGeometry& geo, const T* a, const T* b, T* out);
#include "tf_ops/cpu/variants.def"
#undef TCB_CPU_VARIANT

template <typename From, typename To>
void ConvertElements(const From* src, To* dst, int64_t count);
template <typename From, typename To>
void TransposeConvert(const From* src, int64_t src_stride, To* dst, int64_t dst_stride,
                      int64_t rows, int64_t cols, bool stream);

// The kernel templates of a file, instantiated for T (one line per dtype).
#define TCB_INSTANTIATE_KERNEL(kernel, T) \
  template bool kernel<T>(const CpuContext&, const ConvGeometry&, const T*, const T*, T*);

}  // namespace TCB_ISA
}  // namespace cpu
}  // namespace tf_conv_backprop

#endif  // TF_CONV_BACKPROP_CPU_ISA_KERNELS_H_
