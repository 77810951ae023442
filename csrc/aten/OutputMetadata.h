// Output metadata of an op on the generic op path (AsyncFallback.cpp): the
// sizes, strides and dtypes of its results, from its meta kernel run on meta
// twins of the arguments, cached per argument signature. Internal to
// csrc/aten.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "aten/OpArgs.h"
#include "aten/OpPlan.h"

namespace c10_npu::aten::detail {

// Note [Output metadata cache]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A meta kernel's result depends only on the metadata of its tensor
// arguments (sizes, strides, dtype, conj/neg bits, whether it is a wrapped
// number), on the values of its other arguments, and on one piece of global
// state: the default dtype (torch.set_default_dtype), which integer inputs
// of ops like angle() and logit() promote to. The C++ meta kernels (Note
// [C++ meta kernels] in MetaFunctions.h) read nothing else either. Running
// one costs microseconds (the Python ones tens of them), more than the op
// itself on small tensors, so results are cached per op under a key that
// serialises exactly those inputs. Arguments that cannot be serialised make
// the call uncacheable (it still runs, uncached).
struct TensorMeta {
  bool defined = true;  // optional outputs may be undefined (e.g. masked grads)
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool conj = false;  // see Note [Views that change dtype or bits]
  bool neg = false;
};
struct MetaResult {
  // Per return: its tensors (one, or the elements of a list).
  std::vector<std::vector<TensorMeta>> returns;
};

// The output metadata of `op` called with `args` (the op's arguments as on
// the stack): from info's cache, else from the meta kernel — of the
// functional variant for an out= op (Note [out= ops run functionally]).
// nullptr if the meta kernel raised (no meta kernel, a data-dependent shape,
// or a user error that the CPU kernel will report the same way): the op must
// run synchronously. Thread-safe.
std::shared_ptr<const MetaResult> outputMetadata(const c10::OperatorHandle& op, const Stack& args,
                                                 const OpInfo& info);

}  // namespace c10_npu::aten::detail
