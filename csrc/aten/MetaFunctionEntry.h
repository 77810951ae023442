// One entry of the generated table of PyTorch's C++ meta functions
// (MetaFunctionTable.cpp, written at build time by gen_meta_functions.py).
// See Note [C++ meta kernels] in MetaFunctions.h. Internal to csrc/aten; the
// only includer besides the table is MetaFunctions.cpp.
#pragma once

#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/op_registration/infer_schema.h>

#include <cstddef>

namespace c10_npu::aten::detail {

// at::meta::<name>, type-erased. The two helpers are instantiated once per
// C++ signature (not per function), which keeps the table cheap to compile:
// 459 functions share about 150 signatures.
struct MetaFunctionEntry {
  const char* name;  // the at::meta:: name, e.g. "add_"
  void (*fn)();      // the function, cast back by `kernel`
  // The schema inferred from the C++ signature (arguments unnamed).
  c10::FunctionSchema (*schema)();
  // The function as a boxed kernel.
  c10::KernelFunction (*kernel)(void (*fn)());
};

template <typename F>
c10::FunctionSchema inferMetaSchema() {
  return c10::inferFunctionSchemaFlattenedReturns<F>();
}

template <typename F>
c10::KernelFunction boxMetaFunction(void (*fn)()) {
  return c10::KernelFunction::makeFromUnboxedRuntimeFunction(reinterpret_cast<F*>(fn));
}

// F is the exact function type, which selects the overload of `fn`.
template <typename F>
MetaFunctionEntry metaFunction(const char* name, F* fn) {
  return {name, reinterpret_cast<void (*)()>(fn), &inferMetaSchema<F>, &boxMetaFunction<F>};
}

// The generated table.
extern const MetaFunctionEntry kMetaFunctions[];
extern const size_t kNumMetaFunctions;

// Meta kernels written here for common ops that PyTorch has no C++ meta
// function for (HandwrittenMeta.cpp).
extern const MetaFunctionEntry kHandwrittenMetaFunctions[];
extern const size_t kNumHandwrittenMetaFunctions;

}  // namespace c10_npu::aten::detail
