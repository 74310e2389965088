// Every C++ difference between the TensorFlow versions the binding builds against
// (2.16 to 2.21), in one place; the rest of the binding is version-free. Checked by
// `make tf-matrix`, which builds against each supported version.
#ifndef TF_CONV_BACKPROP_TF_TF_VERSION_COMPAT_H_
#define TF_CONV_BACKPROP_TF_TF_VERSION_COMPAT_H_

// The version being built against, from the build (build_tools/tf_config.py): TF's own
// TF_MAJOR_VERSION is a Bazel-time define from 2.20 on, absent from its pip headers.
#if !defined(TCB_TF_MAJOR) || !defined(TCB_TF_MINOR)
#error "TCB_TF_MAJOR / TCB_TF_MINOR undefined: build with build_tools/tf_config.py's cflags"
#endif
#define TCB_TF_AT_LEAST(major, minor) \
  (TCB_TF_MAJOR > (major) || (TCB_TF_MAJOR == (major) && TCB_TF_MINOR >= (minor)))

#if !TCB_TF_AT_LEAST(2, 16)
#error "tf-conv-backprop builds against TensorFlow 2.16 or newer"
#endif

// XLA's op builder moved from xla/client to xla/hlo/builder in 2.19 (the old headers
// are gone there). Included by name: `#include TCB_XLA_BUILDER_H`.
#if TCB_TF_AT_LEAST(2, 19)
#define TCB_XLA_BUILDER_H "xla/hlo/builder/xla_builder.h"
#define TCB_XLA_CONSTANTS_H "xla/hlo/builder/lib/constants.h"
#else
#define TCB_XLA_BUILDER_H "xla/client/xla_builder.h"
#define TCB_XLA_CONSTANTS_H "xla/client/lib/constants.h"
#endif

#endif  // TF_CONV_BACKPROP_TF_TF_VERSION_COMPAT_H_
